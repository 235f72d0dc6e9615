// The ring behind tsr_ring and the ring exchange engine. Not installed.
//
// The engine moves the blocks of one or more buffers around the ring in p
// steps: CIRCULATE blocks are double-buffered (the transfer for step s+1 is
// posted before the step callback of step s runs), ACCUMULATE blocks are
// travelling sums (the callback's contribution at step s is added to the sum
// that arrives from rank-1 and sent on to rank+1 while step s+1 computes; the
// owner's own contribution stays local, so each sum makes p-1 hops).
// All traffic goes through the transport (nonblocking send/recv, wait).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "context.hpp"
#include "core.hpp"
#include "ring_device.hpp"
#include "tessera/attention.h"
#include "transport.hpp"

namespace tsr {

// Workspace of one ring: bytes in use by the running call (`current`) and
// their high-water mark, plus the arena the buffers come from. The arena is
// sized before each call from a dry run of the same preparation code (a dry
// tracker only counts, `dry_arena_peak` being the 64-byte rounded bytes the
// arena needs), kept between calls so that repeated calls neither allocate
// nor fault pages in, and freed by release_arena() or with the ring.
//
// Device mode (device >= 0, set for the duration of a call on device
// buffers, see DeviceMode): buffers come from cudaMallocAsync on `stream`
// instead of the arena, counted alike (docs/GPU.md, "Ring attention").
struct Tracker {
  size_t current = 0, peak = 0;
  int device = -1;
  void* stream = nullptr;
  bool dry = false;
  size_t dry_arena = 0, dry_arena_peak = 0;
  unsigned char* arena = nullptr;
  size_t capacity = 0, offset = 0;

  Tracker() = default;
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;
  ~Tracker() { std::free(arena); }
  static size_t rounded(size_t bytes) { return (bytes + 63) / 64 * 64; }
  void add(size_t n) {
    current += n;
    if (current > peak) peak = current;
  }
  void sub(size_t n) {
    current -= n;
    if (current == 0) offset = 0;  // the call's buffers are all gone: the arena is free again
  }
  // Grows the arena to at least `bytes` (between calls only).
  tsr_status reserve(size_t bytes) {
    if (bytes <= capacity) return TSR_SUCCESS;
    if (current != 0) return fail(TSR_ERR_INTERNAL, "ring workspace resized during a call");
    std::free(arena);
    arena = nullptr, capacity = 0, offset = 0;
    if (bytes > SIZE_MAX - 64) return fail(TSR_ERR_NO_MEMORY, "ring workspace of %zu bytes", bytes);
    arena = static_cast<unsigned char*>(std::aligned_alloc(64, rounded(bytes)));
    if (arena == nullptr) return fail(TSR_ERR_NO_MEMORY, "allocating %zu bytes of ring workspace", bytes);
    capacity = rounded(bytes);
    return TSR_SUCCESS;
  }
  void release_arena() {
    if (current != 0) return;
    std::free(arena);
    arena = nullptr, capacity = 0, offset = 0;
  }
};

// A workspace buffer of n elements of T (64-byte aligned), counted by a
// Tracker while it lives: from the tracker's arena when it has room, else
// from the heap. alloc() returns TSR_ERR_NO_MEMORY on failure.
template <class T>
class Ws {
 public:
  Ws() = default;
  ~Ws() { release(); }
  Ws(const Ws&) = delete;
  Ws& operator=(const Ws&) = delete;
  tsr_status alloc(Tracker* t, size_t n, const char* what) {
    release();
    if (n == 0) return TSR_SUCCESS;
    if (n > (SIZE_MAX - 64) / sizeof(T)) return fail(TSR_ERR_NO_MEMORY, "workspace for %s: size overflows", what);
    const size_t bytes = n * sizeof(T), need = Tracker::rounded(bytes);
    if (t != nullptr && t->dry) {
      n_ = n;
      t_ = t;
      t_->add(bytes);
      t_->dry_arena += need;
      if (t_->dry_arena > t_->dry_arena_peak) t_->dry_arena_peak = t_->dry_arena;
      return TSR_SUCCESS;
    }
    if (t != nullptr && t->device >= 0) {
      void* d = nullptr;
      TSR_TRY(ringdev::alloc(t->device, t->stream, need, &d));
      p_ = static_cast<T*>(d);
      heap_ = false;
      device_ = t->device;
      stream_ = t->stream;
    } else if (t != nullptr && t->arena != nullptr && t->capacity - t->offset >= need) {
      p_ = reinterpret_cast<T*>(t->arena + t->offset);
      t->offset += need;
      heap_ = false;
    } else {
      p_ = static_cast<T*>(std::aligned_alloc(64, need));
      if (p_ == nullptr) return fail(TSR_ERR_NO_MEMORY, "allocating %zu bytes of workspace for %s", bytes, what);
      heap_ = true;
    }
    n_ = n;
    t_ = t;
    if (t_) t_->add(bytes);
    return TSR_SUCCESS;
  }
  void release() {
    if (p_ && heap_) std::free(p_);
    if (p_ && device_ >= 0) ringdev::release(device_, stream_, p_);
    if (n_ > 0 && t_) {
      if (t_->dry) t_->dry_arena -= Tracker::rounded(n_ * sizeof(T));
      t_->sub(n_ * sizeof(T));
    }
    p_ = nullptr, n_ = 0, t_ = nullptr, heap_ = false, device_ = -1, stream_ = nullptr;
  }
  T* data() const { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) const { return p_[i]; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
  Tracker* t_ = nullptr;
  bool heap_ = false;
  int device_ = -1;          // device memory of this device (freed on stream_)
  void* stream_ = nullptr;
};

// Puts a tracker in device mode (the context's device and stream) for a
// scope: the buffers allocated meanwhile are device memory.
class DeviceMode {
 public:
  DeviceMode(Tracker& t, bool on, int device, void* stream) : t_(t) {
    if (on) t_.device = device, t_.stream = stream;
  }
  ~DeviceMode() { t_.device = -1, t_.stream = nullptr; }
  DeviceMode(const DeviceMode&) = delete;
  DeviceMode& operator=(const DeviceMode&) = delete;

 private:
  Tracker& t_;
};

class RingExchange;

}  // namespace tsr

struct tsr_ring_s {
  static constexpr unsigned kMagic = 0x7219a7e1u;
  unsigned magic = kMagic;
  tsr_context ctx = nullptr;
  std::unique_ptr<tsr::Comm> comm;  // owned duplicate
  tsr::Tracker mem;
  tsr::RingExchange* running = nullptr;  // the exchange in flight, for progress
};

namespace tsr {

tsr_status check_ring(tsr_ring ring, const char* argname = "ring");

// One buffer of an exchange: counts[j] elements on ring rank j.
struct RingBuf {
  void* data = nullptr;
  tsr_dtype type = TSR_FLOAT32;
  bool accumulate = false;
  std::vector<size_t> counts;
};

// (step, source, blocks) -> status. A failing status stops the callbacks on
// this rank (the data keeps moving); run() reports it in *callback_status.
using RingStepFn = std::function<tsr_status(int, int, void* const*)>;

class RingExchange {
 public:
  // p: the ring size; every RingBuf has p counts.
  RingExchange(Tracker& mem, int p, std::vector<RingBuf> bufs) : mem_(mem), p_(p), bufs_(std::move(bufs)) {}
  // Device buffers (every buffer and slot device memory of `device`): the
  // engine zeroes and adds travelling sums with kernels on `stream`, and
  // starts each step's transfers (the communicator's pending NCCL group)
  // before the step callback, so that they overlap the callback's kernels.
  // Set before prepare() so that the slots are device memory too (the
  // tracker must be in device mode then).
  void set_device(int device, void* stream) {
    device_ = device;
    stream_ = stream;
  }
  const std::vector<RingBuf>& buffers() const { return bufs_; }
  // Local: checks the counts fit a message and allocates the slots, each of
  // the largest block: per CIRCULATE buffer min(2, p-1), per ACCUMULATE
  // buffer 3 (2 at p = 2, none at p = 1); counted by the tracker.
  tsr_status prepare();
  // Communicates: p steps (all ranks of the ring must run it).
  tsr_status run(tsr_ring_s& ring, const RingStepFn& fn, tsr_status* callback_status);
  // Tests the requests in flight (lets MPI progress them); no-op outside run().
  void poke();

 private:
  tsr_status zero(void* p, size_t bytes) const;
  tsr_status add(tsr_dtype type, void* acc, const void* x, size_t n) const;

  Tracker& mem_;
  int p_;
  int device_ = -1;
  void* stream_ = nullptr;
  tsr_ring_s* ring_ = nullptr;
  std::vector<RingBuf> bufs_;
  std::deque<Ws<unsigned char>> slots_;  // per buffer, see prepare()
  std::vector<size_t> first_slot_;
  std::vector<Request> reqs_;
};

// Tags of the engine's messages on the ring's private communicator.
constexpr int kTagCirculate = 1000;
constexpr int kTagAccumulate = 2000;

inline int ring_mod(long long a, int p) { return static_cast<int>(((a % p) + p) % p); }

}  // namespace tsr

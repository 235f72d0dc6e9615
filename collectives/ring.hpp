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
#include <functional>
#include <memory>
#include <vector>

#include "context.hpp"
#include "core.hpp"
#include "tessera/attention.h"
#include "transport.hpp"

namespace tsr {

// Workspace accounting of one ring: bytes held now and the high-water mark.
// A dry tracker only counts: Ws buffers on it allocate nothing (the
// workspace query runs the same preparation code on one).
struct Tracker {
  size_t current = 0, peak = 0;
  bool dry = false;
  void add(size_t n) {
    current += n;
    if (current > peak) peak = current;
  }
  void sub(size_t n) { current -= n; }
};

// A workspace buffer of n elements of T (64-byte aligned), counted by a
// Tracker while it lives. alloc() returns TSR_ERR_NO_MEMORY on failure.
template <class T>
class Ws {
 public:
  Ws() = default;
  ~Ws() { release(); }
  Ws(const Ws&) = delete;
  Ws& operator=(const Ws&) = delete;
  Ws(Ws&& o) noexcept : p_(o.p_), n_(o.n_), t_(o.t_) { o.p_ = nullptr, o.n_ = 0, o.t_ = nullptr; }
  Ws& operator=(Ws&& o) noexcept {
    if (this != &o) {
      release();
      p_ = o.p_, n_ = o.n_, t_ = o.t_;
      o.p_ = nullptr, o.n_ = 0, o.t_ = nullptr;
    }
    return *this;
  }
  tsr_status alloc(Tracker* t, size_t n, const char* what) {
    release();
    if (n == 0) return TSR_SUCCESS;
    if (n > SIZE_MAX / sizeof(T) - 64) return fail(TSR_ERR_NO_MEMORY, "workspace for %s: size overflows", what);
    const size_t bytes = n * sizeof(T);
    if (t != nullptr && t->dry) {
      n_ = n;
      t_ = t;
      t_->add(bytes);
      return TSR_SUCCESS;
    }
    const size_t rounded = (bytes + 63) / 64 * 64;
    p_ = static_cast<T*>(std::aligned_alloc(64, rounded));
    if (p_ == nullptr) return fail(TSR_ERR_NO_MEMORY, "allocating %zu bytes of workspace for %s", bytes, what);
    n_ = n;
    t_ = t;
    if (t_) t_->add(bytes);
    return TSR_SUCCESS;
  }
  void release() {
    if (p_) std::free(p_);
    if (n_ > 0 && t_) t_->sub(n_ * sizeof(T));
    p_ = nullptr, n_ = 0, t_ = nullptr;
  }
  T* data() const { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) const { return p_[i]; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
  Tracker* t_ = nullptr;
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
  // Local: checks the counts fit a message and allocates the slots
  // (2 per CIRCULATE and 3 per ACCUMULATE buffer, each of the largest block,
  // none at p = 1), counted by the tracker.
  tsr_status prepare();
  // Communicates: p steps (all ranks of the ring must run it).
  tsr_status run(tsr_ring_s& ring, const RingStepFn& fn, tsr_status* callback_status);
  // Tests the requests in flight (lets MPI progress them); no-op outside run().
  void poke();

 private:
  Tracker& mem_;
  int p_;
  tsr_ring_s* ring_ = nullptr;
  std::vector<RingBuf> bufs_;
  std::vector<Ws<unsigned char>> slots_;  // per buffer: CIRCULATE 2, ACCUMULATE 3
  std::vector<size_t> first_slot_;
  std::vector<Request> reqs_;
};

// Tags of the engine's messages on the ring's private communicator.
constexpr int kTagCirculate = 1000;
constexpr int kTagAccumulate = 2000;

inline int ring_mod(long long a, int p) { return static_cast<int>(((a % p) + p) % p); }

}  // namespace tsr

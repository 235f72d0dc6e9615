// libtessera-pmpi: the tool's state and the hot path of the wrappers,
// inline: looking up a communicator and a datatype in direct-mapped caches
// and charging a point-to-point message are a few loads and adds (the
// overhead benchmark, bench_pmpi, measures them). Slow paths in tool.cpp.
#pragma once

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "energy/meters.hpp"
#include "energy/profile.hpp"
#include "energy/report_core.hpp"
#include "ledger.hpp"
#include "tool.hpp"

namespace tsr {
namespace pmpi {

template <class H>
uintptr_t key_of(H h) {
  uintptr_t k = 0;
  static_assert(sizeof(H) <= sizeof(uintptr_t), "MPI handles fit a uintptr_t");
  std::memcpy(&k, &h, sizeof h);
  return k;
}

inline size_t slot_of(uintptr_t k) { return static_cast<size_t>((k ^ (k >> 7) ^ (k >> 17)) & 63u); }

// Calls and payload bytes per MPI function, per region, with the ledger's
// fold-on-end scheme (charges go to the innermost open region).
class FnLedger {
 public:
  FnLedger() {
    frames_.push_back({"total", std::vector<energy::CallStat>(kFunctions)});
    top_ = frames_.back().second.data();
  }
  void add(Fn f, uint64_t bytes, bool call = true) {
    top_[f].calls += call ? 1 : 0;
    top_[f].bytes += bytes;
  }
  void push(const std::string& path) {
    frames_.push_back({path, std::vector<energy::CallStat>(kFunctions)});
    top_ = frames_.back().second.data();
  }
  void pop() {
    if (frames_.size() <= 1) return;
    auto done = std::move(frames_.back());
    frames_.pop_back();
    fold(stored_[done.first], done.second);
    fold(frames_.back().second, done.second);
    top_ = frames_.back().second.data();
  }
  std::vector<energy::CallStat> get(const std::string& path) const {
    std::vector<energy::CallStat> v(kFunctions);
    auto it = stored_.find(path);
    if (it != stored_.end()) v = it->second;
    for (size_t i = 0; i < frames_.size(); ++i)
      if (frames_[i].first == path) {
        for (size_t j = i; j < frames_.size(); ++j) fold(v, frames_[j].second);
        break;
      }
    return v;
  }

 private:
  static void fold(std::vector<energy::CallStat>& a, const std::vector<energy::CallStat>& b) {
    a.resize(kFunctions);
    for (size_t i = 0; i < b.size(); ++i) {
      a[i].calls += b[i].calls;
      a[i].bytes += b[i].bytes;
    }
  }
  std::map<std::string, std::vector<energy::CallStat>> stored_;
  std::vector<std::pair<std::string, std::vector<energy::CallStat>>> frames_;
  energy::CallStat* top_ = nullptr;  // the innermost frame's
};

struct State {
  bool mt = false;  // MPI_THREAD_MULTIPLE: take the lock
  std::mutex mu;
  int world_rank = 0, world_size = 1;
  std::vector<int> node_of;
  int nnodes = 1;
  bool simulated = false;
  bool leader = false;  // lowest rank of a real node: reads the meters
  MPI_Comm comm = MPI_COMM_NULL;  // private duplicate of MPI_COMM_WORLD for the report
  int comm_keyval = MPI_KEYVAL_INVALID, win_keyval = MPI_KEYVAL_INVALID;
  bool regions = false;  // TSR_PMPI_PCONTROL=1: MPI_Pcontrol(1, "name") / (-1, "name")
  Ledger ledger;
  FnLedger fns;
  energy::Meters meters;
  std::string meter_status;
  energy::Profile profile;
  std::string profile_error;
  std::unordered_map<uintptr_t, Deferred> reqs;
  std::unordered_map<uintptr_t, const CommInfo*> msgs;
  std::vector<const void*> fortran_in_place;
  // Coverage notes.
  uint64_t freed_unfinished = 0, inter_colls = 0, pcontrol_errors = 0;
  std::string first_pcontrol_error;
  // Direct-mapped cache of communicator infos (filled from the attribute).
  struct Slot {
    uintptr_t key = 0;
    const CommInfo* info = nullptr;
  };
  Slot cache[64];
};


struct Lock {
  std::unique_lock<std::mutex> lk;
  Lock();
};



extern State* g;
extern bool g_ready;

// Sizes of named (predefined) datatypes, which are never freed, so their
// handles can be cached; derived types are asked every time (a freed type's
// handle may come back with another size).
struct TypeSlot {
  std::atomic<uintptr_t> key{0};
  std::atomic<uint64_t> size{0};
};
extern TypeSlot g_types[64];

const CommInfo* comm_info_slow(MPI_Comm c);
uint64_t type_size_slow(MPI_Datatype t);
void on_send_slow(Fn f, const CommInfo* ci, int peer, uint64_t bytes, bool call);
void on_recv_bytes_slow(Fn f, const CommInfo* ci, int peer, uint64_t bytes, bool call);

// The last communicator and the last named datatype looked up (single-threaded
// runs only: under MPI_THREAD_MULTIPLE every lookup takes the lock). A freed
// communicator is dropped from here by its attribute's delete callback.
struct Last {
  uintptr_t comm_key = 0;
  const CommInfo* comm = nullptr;
  uintptr_t type_key = 0;
  uint64_t type_size = 0;
};
extern Last g_last;
extern bool g_mt;      // MPI_THREAD_MULTIPLE
extern bool g_matrix;  // the communication matrix is recorded

// The hot path of MPI_Send and MPI_Recv (and their I/_c forms): the
// communicator and the named datatype of the last point-to-point call that
// took the slow path, with what a charge needs of them (the peer -> class
// table and its size, the element size), on one cache line, so that a call
// that repeats them is charged with three compares and four adds. Filled
// only in single-threaded runs without the matrix (comm_key 0: empty, which
// no MPI handle is); emptied when that communicator is freed and at
// MPI_Finalize. Every charge still goes through the same ledgers.
struct alignas(64) Hot {
  uintptr_t comm_key = 0;
  uintptr_t type_key = 0;
  uint64_t type_size = 0;
  const unsigned char* cls = nullptr;  // ci->cls.data()
  const CommInfo* ci = nullptr;
  unsigned npeers = 0;  // ci->npeers
};
extern Hot g_hot;

inline bool ready() { return g_ready; }

inline const CommInfo* comm_info(MPI_Comm c) {
  const uintptr_t k = key_of(c);
  if (k == g_last.comm_key && g_last.comm != nullptr) return g_last.comm;
  if (g_ready && !g_mt) {
    const State::Slot& s = g->cache[slot_of(k)];
    if (s.key == k && s.info != nullptr) {
      g_last.comm_key = k;
      g_last.comm = s.info;
      return s.info;
    }
  }
  return comm_info_slow(c);
}

inline uint64_t type_size(MPI_Datatype t) {
  const uintptr_t k = key_of(t);
  if (k == g_last.type_key && k != 0) return g_last.type_size;
  const TypeSlot& s = g_types[slot_of(k)];
  if (k != 0 && s.key.load(std::memory_order_acquire) == k) {
    const uint64_t n = s.size.load(std::memory_order_relaxed);
    if (!g_mt) {
      g_last.type_key = k;
      g_last.type_size = n;
    }
    return n;
  }
  return type_size_slow(t);
}

inline void on_send(Fn f, const CommInfo* ci, int peer, uint64_t bytes, bool call = true) {
  if (ci == nullptr || g_mt || g_matrix || static_cast<unsigned>(peer) >= static_cast<unsigned>(ci->npeers))
    return on_send_slow(f, ci, peer, bytes, call);
  g->ledger.p2p_sent(static_cast<tsr_peer_class>(ci->cls[static_cast<size_t>(peer)]), bytes, Traffic::data);
  g->fns.add(f, bytes, call);
}

inline void on_recv_bytes(Fn f, const CommInfo* ci, int peer, uint64_t bytes, bool call = true) {
  if (ci == nullptr || g_mt || static_cast<unsigned>(peer) >= static_cast<unsigned>(ci->npeers))
    return on_recv_bytes_slow(f, ci, peer, bytes, call);
  g->ledger.p2p_recv(static_cast<tsr_peer_class>(ci->cls[static_cast<size_t>(peer)]), bytes, Traffic::data);
  g->fns.add(f, bytes, call);
}

// The charge of the last blocking receive off the hot path (recv_call,
// coll.hpp: another communicator, a derived datatype's first calls, the
// matrix; single-threaded runs), made when the next blocking receive starts
// instead of when this one returns. Also made when a region begins or ends
// (MPI_Pcontrol), when the communicator is freed, and at MPI_Finalize, so
// that every byte lands in its region. (Receives on the hot path are charged
// at once: with the charge down to a few adds, deferring it measured no
// faster, docs/ENERGY.md.)
struct PendingRecv {
  const CommInfo* ci = nullptr;  // nullptr: nothing pending
  Fn f = Fn(0);
  int peer = MPI_PROC_NULL;
  uint64_t bytes = 0;
};
extern PendingRecv g_pending;
inline void flush_recv() {
  if (g_pending.ci == nullptr) return;
  const PendingRecv p = g_pending;
  g_pending.ci = nullptr;
  on_recv_bytes(p.f, p.ci, p.peer, p.bytes);
}

// Bytes received, from the status. Open MPI and MPICH keep the byte count in
// the status itself (read here without a call, as IPM does); any other MPI
// is asked with MPI_Get_elements_x.
inline uint64_t status_bytes(const MPI_Status* st) {
#if defined(OPEN_MPI)
  return static_cast<uint64_t>(st->_ucount);
#elif defined(MPICH_VERSION)
  return static_cast<uint64_t>(static_cast<unsigned int>(st->count_lo)) |
         (static_cast<uint64_t>(st->count_hi_and_cancelled >> 1) << 32);
#else
  MPI_Count n = 0;
  if (PMPI_Get_elements_x(st, MPI_BYTE, &n) != MPI_SUCCESS || n < 0 || n == MPI_UNDEFINED) return 0;
  return static_cast<uint64_t>(n);
#endif
}

inline void on_recv(Fn f, const CommInfo* ci, const MPI_Status* st, bool call = true) {
  if (ci == nullptr || st == nullptr) return;
  on_recv_bytes(f, ci, st->MPI_SOURCE, st->MPI_SOURCE == MPI_PROC_NULL ? 0 : status_bytes(st), call);
}

// A blocking receive's charge: noted (PendingRecv) in single-threaded runs,
// else made now. The caller has flushed any pending one.
inline void on_recv_later(Fn f, const CommInfo* ci, const MPI_Status* st) {
  if (ci == nullptr || g_mt) return on_recv(f, ci, st);
  g_pending.f = f;
  g_pending.peer = st->MPI_SOURCE;
  g_pending.bytes = st->MPI_SOURCE == MPI_PROC_NULL ? 0 : status_bytes(st);
  g_pending.ci = ci;
}

}  // namespace pmpi
}  // namespace tsr

// libtessera-pmpi: helpers of the C and Fortran wrappers: the payload and
// wire model of every collective (docs/ENERGY.md, "PMPI tool"). Payload sent and
// received follow libtessera's definitions (docs/ACCOUNTING.md) so that the
// tool and the library agree on a tessera run; blocks a rank holds itself are
// taken from the receive side, which is right also with MPI_IN_PLACE.
#pragma once

#include <mpi.h>

#include <vector>

#include "tool.hpp"

namespace tsr {
namespace pmpi {

template <class C>
uint64_t nbytes(C count, MPI_Datatype t) {
  return count > 0 ? static_cast<uint64_t>(count) * type_size(t) : 0;
}

// ------------------------------------------------------ collective models
struct Coll {
  int kind = kCollOther;
  uint64_t sent = 0, recv = 0;
  WireModel m;
};

// The collective being charged: one per thread, reused, so that its model's
// vectors keep their capacity (no allocation per call in a steady state).
Coll& scratch_mt();  // MPI_THREAD_MULTIPLE: this thread's
extern Coll g_scratch;  // single-threaded runs
inline Coll& scratch(int kind = kCollOther) {
  Coll& c = g_mt ? scratch_mt() : g_scratch;
  c.kind = kind;
  c.sent = c.recv = 0;
  c.m.sent.clear();
  c.m.recv.clear();
  return c;
}

inline void charge(Fn f, const CommInfo* ci, const Coll& c) { on_coll(f, ci, c.kind, c.sent, c.recv, c.m); }

// Charges now, or (persistent) keeps the charge for every MPI_Start.
inline void charge_or_defer(Fn f, const CommInfo* ci, const Coll& c, MPI_Request* req, bool persistent) {
  if (!persistent) {
    charge(f, ci, c);
    if (req != nullptr && req_pending()) req_forget(*req);
    return;
  }
  Deferred d;
  d.f = f;
  d.ci = ci;
  d.kind = Deferred::coll;
  d.persistent = true;
  d.coll_kind = c.kind;
  d.sent = c.sent;
  d.got = c.recv;
  d.model = c.m;
  req_add(*req, std::move(d));
}

inline Coll& c_barrier(const CommInfo* ci) {
  Coll& c = scratch(TSR_COLL_BARRIER);
  if (!ci->inter) tsr::model_barrier_into(c.m, ci->rank, ci->size);
  return c;
}

inline Coll& c_bcast(const CommInfo* ci, uint64_t n, int root) {
  Coll& c = scratch(TSR_COLL_BCAST);
  if (ci->inter) {  // root: MPI_ROOT sends, MPI_PROC_NULL idles, others receive
    if (root == MPI_ROOT) c.sent = n;
    else if (root != MPI_PROC_NULL) c.recv = n;
    return c;
  }
  const bool me = ci->rank == root;
  c.sent = me ? n : 0;
  c.recv = me ? 0 : n;
  tsr::model_bcast_into(c.m, ci->rank, ci->size, root, n);
  return c;
}

inline Coll& c_reduce(const CommInfo* ci, uint64_t n, int root) {
  Coll& c = scratch(TSR_COLL_REDUCE);
  if (ci->inter) {
    if (root == MPI_ROOT) c.recv = n;
    else if (root != MPI_PROC_NULL) c.sent = n;
    return c;
  }
  c.sent = n;
  c.recv = ci->rank == root ? n : 0;
  tsr::model_reduce_into(c.m, ci->rank, ci->size, root, n);
  return c;
}

template <class C>
Coll& c_allreduce(const CommInfo* ci, C count, MPI_Datatype t) {
  Coll& c = scratch(TSR_COLL_ALLREDUCE);
  const uint64_t e = type_size(t), k = count > 0 ? static_cast<uint64_t>(count) : 0;
  c.sent = c.recv = k * e;
  if (!ci->inter) tsr::model_allreduce_into(c.m, ci->rank, ci->size, k, e);
  return c;
}

// Blocking all-reduce, the call of training and solver loops: the charge of
// the last one is kept and reused while the communicator, count and element
// size repeat (single-threaded runs without the matrix), so that a repeated
// call costs a few compares and adds instead of the model (a division and
// two vector fills). The communicator's delete callback and finalize drop it.
struct AllreduceMemo {
  const CommInfo* ci = nullptr;  // nullptr: empty
  uint64_t count = 0, elem = 0;
  uint64_t payload = 0;           // bytes sent = bytes received
  bool wire = false;              // one sent and one received edge (size > 1)
  tsr_peer_class scls = TSR_PEER_SELF, rcls = TSR_PEER_SELF;
  uint64_t smsgs = 0, sbytes = 0, rmsgs = 0, rbytes = 0;
};
extern AllreduceMemo g_allreduce;

template <class C>
void charge_allreduce(Fn f, const CommInfo* ci, C count, MPI_Datatype t) {
  const uint64_t e = type_size(t), k = count > 0 ? static_cast<uint64_t>(count) : 0;
  AllreduceMemo& m = g_allreduce;
  if (ci == m.ci && k == m.count && e == m.elem && !g_mt && !g_matrix) {
    Ledger& l = g->ledger;
    l.coll_call(TSR_COLL_ALLREDUCE, m.payload, m.payload, Traffic::data);
    g->fns.add(f, 2 * m.payload);
    if (m.wire) {
      l.coll_wire_sent(m.scls, m.smsgs, m.sbytes, Traffic::data);
      l.coll_wire_recv(m.rcls, m.rmsgs, m.rbytes, Traffic::data);
    }
    return;
  }
  const Coll& c = c_allreduce(ci, count, t);
  charge(f, ci, c);
  if (g_mt || g_matrix || ci->inter || c.m.sent.size() != c.m.recv.size() || c.m.sent.size() > 1) return;
  m.ci = ci;
  m.count = k;
  m.elem = e;
  m.payload = c.sent;
  m.wire = c.m.sent.size() == 1;
  if (m.wire) {
    const WireEdge &s = c.m.sent[0], &r = c.m.recv[0];
    m.scls = static_cast<tsr_peer_class>(ci->cls[static_cast<size_t>(s.peer)]);
    m.rcls = static_cast<tsr_peer_class>(ci->cls[static_cast<size_t>(r.peer)]);
    m.smsgs = s.messages;
    m.sbytes = s.bytes;
    m.rmsgs = r.messages;
    m.rbytes = r.bytes;
  }
}

// Gather: every rank's block of `block` bytes (the root's own from the
// receive side, which is what it holds also with MPI_IN_PLACE).
inline Coll& c_gather(const CommInfo* ci, uint64_t sbytes, uint64_t rblock, int root) {
  Coll& c = scratch(TSR_COLL_GATHER);
  if (ci->inter) {
    if (root == MPI_ROOT) c.recv = rblock * static_cast<uint64_t>(ci->world.size());
    else if (root != MPI_PROC_NULL) c.sent = sbytes;
    return c;
  }
  const bool me = ci->rank == root;
  c.sent = me ? rblock : sbytes;
  c.recv = me ? rblock * static_cast<uint64_t>(ci->size) : 0;
  tsr::model_gather_into(c.m, ci->rank, ci->size, root, me ? rblock : sbytes);
  return c;
}

template <class C>
Coll& c_gatherv(const CommInfo* ci, uint64_t sbytes, const C* rcounts, MPI_Datatype rt, int root) {
  Coll& c = scratch(TSR_COLL_GATHER);
  const uint64_t e = type_size(rt);
  if (ci->inter) {
    if (root == MPI_ROOT)
      for (size_t q = 0; q < ci->world.size(); ++q) c.recv += nbytes(rcounts[q], rt);
    else if (root != MPI_PROC_NULL) c.sent = sbytes;
    return c;
  }
  const size_t p = static_cast<size_t>(ci->size);
  if (ci->rank != root) {
    c.sent = sbytes;
    c.m.sent.push_back({root, 1, sbytes});
    return c;
  }
  std::vector<uint64_t> to(p, 0), from(p, 0);
  for (size_t q = 0; q < p; ++q) {
    from[q] = rcounts[q] > 0 ? static_cast<uint64_t>(rcounts[q]) * e : 0;
    c.recv += from[q];
  }
  c.sent = from[static_cast<size_t>(root)];
  model_direct_into(c.m, ci->rank, to, from);
  for (size_t q = 0; q < p; ++q)  // a gather message arrives even when empty
    if (static_cast<int>(q) != root && from[q] == 0) c.m.recv.push_back({static_cast<int>(q), 1, 0});
  return c;
}

inline Coll& c_scatter(const CommInfo* ci, uint64_t sblock, uint64_t rbytes, int root) {
  Coll& c = scratch(TSR_COLL_SCATTER);
  if (ci->inter) {
    if (root == MPI_ROOT) c.sent = sblock * static_cast<uint64_t>(ci->world.size());
    else if (root != MPI_PROC_NULL) c.recv = rbytes;
    return c;
  }
  const bool me = ci->rank == root;
  c.sent = me ? sblock * static_cast<uint64_t>(ci->size) : 0;
  c.recv = me ? sblock : rbytes;
  tsr::model_scatter_into(c.m, ci->rank, ci->size, root, me ? sblock : rbytes);
  return c;
}

template <class C>
Coll& c_scatterv(const CommInfo* ci, const C* scounts, MPI_Datatype st, uint64_t rbytes, int root) {
  Coll& c = scratch(TSR_COLL_SCATTER);
  const uint64_t e = type_size(st);
  if (ci->inter) {
    if (root == MPI_ROOT)
      for (size_t q = 0; q < ci->world.size(); ++q) c.sent += nbytes(scounts[q], st);
    else if (root != MPI_PROC_NULL) c.recv = rbytes;
    return c;
  }
  const size_t p = static_cast<size_t>(ci->size);
  if (ci->rank != root) {
    c.recv = rbytes;
    c.m.recv.push_back({root, 1, rbytes});
    return c;
  }
  std::vector<uint64_t> to(p, 0), from(p, 0);
  for (size_t q = 0; q < p; ++q) {
    to[q] = scounts[q] > 0 ? static_cast<uint64_t>(scounts[q]) * e : 0;
    c.sent += to[q];
  }
  c.recv = to[static_cast<size_t>(root)];
  model_direct_into(c.m, ci->rank, to, from);
  for (size_t q = 0; q < p; ++q)
    if (static_cast<int>(q) != root && to[q] == 0) c.m.sent.push_back({static_cast<int>(q), 1, 0});
  return c;
}

// Allgather: this rank's block from the receive side (MPI_IN_PLACE-safe).
inline Coll& c_allgather(const CommInfo* ci, uint64_t sbytes, uint64_t rblock) {
  Coll& c = scratch(TSR_COLL_ALLGATHER);
  if (ci->inter) {
    c.sent = sbytes;
    c.recv = rblock * static_cast<uint64_t>(ci->world.size());
    return c;
  }
  c.sent = rblock;
  c.recv = rblock * static_cast<uint64_t>(ci->size);
  tsr::model_allgather_equal_into(c.m, ci->rank, ci->size, rblock);
  return c;
}

template <class C>
Coll& c_allgatherv(const CommInfo* ci, uint64_t sbytes, const C* rcounts, MPI_Datatype rt) {
  Coll& c = scratch(TSR_COLL_ALLGATHER);
  const size_t n = ci->world.size();
  std::vector<uint64_t> b(n);
  for (size_t q = 0; q < n; ++q) {
    b[q] = nbytes(rcounts[q], rt);
    c.recv += b[q];
  }
  if (ci->inter) {
    c.sent = sbytes;
    return c;
  }
  c.sent = b[static_cast<size_t>(ci->rank)];
  tsr::model_allgatherv_into(c.m, ci->rank, ci->size, b);
  return c;
}

inline Coll& c_alltoall(const CommInfo* ci, uint64_t rblock) {
  Coll& c = scratch(TSR_COLL_ALLTOALL);
  const uint64_t n = static_cast<uint64_t>(ci->world.size());
  c.sent = c.recv = rblock * n;
  if (!ci->inter) tsr::model_alltoall_into(c.m, ci->rank, ci->size, rblock);
  return c;
}

// Alltoallv/w: per-peer bytes to and from (in place: the receive side).
inline Coll& c_alltoallv(const CommInfo* ci, const std::vector<uint64_t>& to, const std::vector<uint64_t>& from) {
  Coll& c = scratch(TSR_COLL_ALLTOALL);
  for (uint64_t x : to) c.sent += x;
  for (uint64_t x : from) c.recv += x;
  if (!ci->inter) model_direct_into(c.m, ci->rank, to, from);
  return c;
}

template <class C>
Coll& c_reduce_scatter(const CommInfo* ci, const C* rcounts, MPI_Datatype t) {
  Coll& c = scratch(TSR_COLL_REDUCE_SCATTER);
  const size_t n = static_cast<size_t>(ci->inter ? static_cast<int>(ci->world.size()) : ci->size);
  std::vector<uint64_t> b(n);
  for (size_t q = 0; q < n; ++q) {
    b[q] = nbytes(rcounts[q], t);
    c.sent += b[q];
  }
  if (ci->inter) return c;
  c.recv = b[static_cast<size_t>(ci->rank)];
  tsr::model_reduce_scatterv_into(c.m, ci->rank, ci->size, b);
  return c;
}

inline Coll& c_reduce_scatter_block(const CommInfo* ci, uint64_t block) {
  Coll& c = scratch(TSR_COLL_REDUCE_SCATTER);
  c.sent = block * static_cast<uint64_t>(ci->size);
  c.recv = block;
  if (!ci->inter)
    tsr::model_reduce_scatter_equal_into(c.m, ci->rank, ci->size, block);
  return c;
}

inline Coll& c_scan(const CommInfo* ci, uint64_t n) {
  Coll& c = scratch();
  c.sent = c.recv = n;
  model_scan_into(c.m, ci->rank, ci->size, n);
  return c;
}

// Topology neighbours (sources and destinations), MPI_PROC_NULL included.
inline void neighbours(MPI_Comm comm, std::vector<int>* in, std::vector<int>* out) {
  int topo = MPI_UNDEFINED;
  PMPI_Topo_test(comm, &topo);
  if (topo == MPI_CART) {
    int nd = 0;
    PMPI_Cartdim_get(comm, &nd);
    for (int d = 0; d < nd; ++d) {
      int src = MPI_PROC_NULL, dst = MPI_PROC_NULL;
      PMPI_Cart_shift(comm, d, 1, &src, &dst);
      in->push_back(src);  // negative direction first, then positive
      in->push_back(dst);
    }
    *out = *in;
  } else if (topo == MPI_GRAPH) {
    int me = 0, n = 0;
    PMPI_Comm_rank(comm, &me);
    PMPI_Graph_neighbors_count(comm, me, &n);
    in->resize(static_cast<size_t>(n));
    if (n > 0) PMPI_Graph_neighbors(comm, me, n, in->data());
    *out = *in;
  } else if (topo == MPI_DIST_GRAPH) {
    int indeg = 0, outdeg = 0, weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, &indeg, &outdeg, &weighted);
    in->resize(static_cast<size_t>(indeg));
    out->resize(static_cast<size_t>(outdeg));
    std::vector<int> wi(static_cast<size_t>(indeg) + 1), wo(static_cast<size_t>(outdeg) + 1);
    PMPI_Dist_graph_neighbors(comm, indeg, in->data(), wi.data(), outdeg, out->data(), wo.data());
  }
}

// Neighbourhood exchange: to out-neighbour i to[i] bytes, from in-neighbour i from[i].
inline Coll& c_neighbour(const std::vector<int>& in, const std::vector<int>& out, const std::vector<uint64_t>& to,
                 const std::vector<uint64_t>& from) {
  Coll& c = scratch();
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != MPI_PROC_NULL) {
      c.sent += to[i];
      c.m.sent.push_back({out[i], 1, to[i]});
    }
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != MPI_PROC_NULL) {
      c.recv += from[i];
      c.m.recv.push_back({in[i], 1, from[i]});
    }
  return c;
}

template <class C>
std::vector<uint64_t> per_peer(const C* counts, MPI_Datatype t, size_t n) {
  std::vector<uint64_t> v(n);
  const uint64_t e = type_size(t);
  for (size_t i = 0; i < n; ++i) v[i] = counts[i] > 0 ? static_cast<uint64_t>(counts[i]) * e : 0;
  return v;
}

template <class C>
std::vector<uint64_t> per_peer_w(const C* counts, const MPI_Datatype* t, size_t n) {
  std::vector<uint64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = nbytes(counts[i], t[i]);
  return v;
}

inline size_t group_size(const CommInfo* ci) { return ci->world.size(); }

// --------------------------------------------------- wrapper helpers
inline bool pass() { return t_depth != 0 || !ready(); }

template <class F>
inline int nested(F f) {
  Nest n;
  return f();
}

// ------------------------------------------------------------ p2p helpers
inline void sent(Fn f, MPI_Comm comm, int dest, uint64_t bytes, MPI_Request* req = nullptr) {
  on_send(f, comm_info(comm), dest, bytes);
  if (req != nullptr && req_pending()) req_forget(*req);
}

// The hot path (g_hot, state.hpp): a send on the last communicator with the
// last named datatype to a peer in range is charged inline; anything else
// goes to sent_cold (wrap_c.cpp), which charges it the ordinary way and
// refills g_hot.
void sent_cold(Fn f, MPI_Comm comm, int dest, long long count, MPI_Datatype t);
inline void sent_hot(Fn f, MPI_Comm comm, int dest, long long count, MPI_Datatype t) {
  const Hot& h = g_hot;
  if (__builtin_expect(key_of(comm) == h.comm_key && key_of(t) == h.type_key &&
                           static_cast<unsigned>(dest) < h.npeers,
                       1)) {
    const uint64_t b = count > 0 ? static_cast<uint64_t>(count) * h.type_size : 0;
    g->ledger.p2p_sent(static_cast<tsr_peer_class>(h.cls[static_cast<unsigned>(dest)]), b, Traffic::data);
    g->fns.add(f, b);
    return;
  }
  sent_cold(f, comm, dest, count, t);
}
// The send in t_call, which returned MPI_SUCCESS (returned again).
inline int sent_call(Fn f) {
  const P2pCall& c = t_call;
  sent_hot(f, c.comm, c.peer, c.count, c.type);
  return MPI_SUCCESS;
}

int recv_cold(Fn f);  // on_recv_later for t_call's receive; returns MPI_SUCCESS
// A blocking receive that returned MPI_SUCCESS (t_call): from a peer of
// the hot communicator it is charged here (bytes and source from the
// status), in a handful of instructions; anything else (another
// communicator, MPI_PROC_NULL, threads, the matrix) goes to recv_cold, which
// notes it for later (on_recv_later).
inline int recv_call(Fn f) {
  const P2pCall& c = t_call;
  const MPI_Status* s = c.st;
  const unsigned src = static_cast<unsigned>(s->MPI_SOURCE);
  if (__builtin_expect(key_of(c.comm) == g_hot.comm_key && src < g_hot.npeers, 1)) {
    const uint64_t b = status_bytes(s);
    g->ledger.p2p_recv(static_cast<tsr_peer_class>(g_hot.cls[src]), b, Traffic::data);
    g->fns.add(f, b);
    return MPI_SUCCESS;
  }
  return recv_cold(f);
}

inline void defer_recv(Fn f, const CommInfo* ci, MPI_Request req, bool persistent, bool call = true) {
  Deferred d;
  d.f = f;
  d.ci = ci;
  d.kind = Deferred::recv;
  d.persistent = persistent;
  d.call = call;
  req_add(req, std::move(d));
}

// The receive half of MPI_Isendrecv(_replace): counted at completion with
// its posted size and source (no call: the send half counted it).
inline void defer_posted_recv(Fn f, const CommInfo* ci, MPI_Request req, int src, uint64_t bytes) {
  Deferred d;
  d.f = f;
  d.ci = ci;
  d.kind = Deferred::recv;
  d.call = false;
  d.posted = true;
  d.peer = src;
  d.bytes = bytes;
  req_add(req, std::move(d));
}

inline void defer_send(Fn f, MPI_Comm comm, int dest, uint64_t bytes, MPI_Request req) {
  Deferred d;
  d.f = f;
  d.ci = comm_info(comm);
  d.kind = Deferred::send;
  d.persistent = true;
  d.peer = dest;
  d.bytes = bytes;
  req_add(req, std::move(d));
}

inline void defer_disk(Fn f, bool write, MPI_Request req) {
  Deferred d;
  d.f = f;
  d.kind = write ? Deferred::disk_write : Deferred::disk_read;
  req_add(req, std::move(d));
}

// Small array of saved request handles (completion calls null them).
struct Saved {
  std::vector<MPI_Request> h;
  Saved(int n, const MPI_Request* r) : h(r, r + (n > 0 ? n : 0)) {}
};

}  // namespace pmpi
}  // namespace tsr

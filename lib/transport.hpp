// The one transport layer. Every byte tessera moves between ranks goes through
// the functions in this header, which charge the ledger (exact payload, and
// the modelled wire traffic of collectives, see docs/ACCOUNTING.md) and then
// hand the operation to the communicator's backend. Algorithms (collectives/,
// optimizers/) call only these functions, never MPI directly, so a device
// backend (NCCL, CUDA-aware MPI) can be slotted in under them.
//
// Conventions: counts are in elements of `type`; a call with req == nullptr
// is blocking, otherwise it starts a nonblocking operation completed by
// wait()/wait_all(). A call is charged once the backend has accepted (started)
// it; a call rejected by a check or by MPI is not charged. In-place
// forms: pass the same pointer as send and receive buffer where noted.
//
// Large counts: counts are size_t. A transfer of more elements than the
// communicator's max_chunk() (INT_MAX unless the context's
// tsr_context_config.max_chunk says less) is split into several MPI calls of
// at most that many elements each (for the calls on one block per rank, at
// most max_chunk elements in all ranks' blocks together, and at least one
// element per rank), all started before a nonblocking call returns; the
// ledger charges the logical call once, exactly as if it were one. A split
// message must be received with the count it was sent with (below the
// threshold, as in MPI, a receive may be larger than the message).
#pragma once

#include <climits>
#include <cstddef>
#include <memory>
#include <vector>

#include "backend.hpp"
#include "device.hpp"
#include "wire_model.hpp"

namespace tsr {

// ----------------------------------------------------------- point to point
// send and recv are inline: a point-to-point message is latency-bound, so its
// checks, the host backend's MPI call and the charge compile into the caller
// (bench_transport measures what they add to a 1 KiB message).
namespace detail {
// Bytes of count elements of a valid tsr_dtype.
inline uint64_t bytes_of(size_t count, tsr_dtype type) {
  static constexpr uint64_t kElemSize[] = {1, 4, 8, 4, 8, 2};
  static_assert(sizeof kElemSize / sizeof kElemSize[0] == TSR_BFLOAT16 + 1, "one size per tsr_dtype");
  return static_cast<uint64_t>(count) * kElemSize[type];
}
// The cheap test of point-to-point arguments; where it fails, p2p_error()
// names the first bad argument.
inline bool p2p_ok(const Comm& c, const void* buf, size_t count, tsr_dtype type, int peer) {
  return static_cast<unsigned>(type) <= static_cast<unsigned>(TSR_BFLOAT16) && (buf != nullptr || count == 0) &&
         count <= c.max_chunk() && static_cast<unsigned>(peer) < static_cast<unsigned>(c.size());
}
tsr_status p2p_error(const Comm& c, const void* buf, size_t count, tsr_dtype type, int peer);
// The slow path of send and recv: bad arguments (an error naming the first),
// or a message of more than max_chunk() elements, moved as several.
tsr_status send_split(const Comm& c, const void* buf, size_t count, tsr_dtype type, int peer, int tag,
                      Request* req, Traffic t);
tsr_status recv_split(const Comm& c, void* buf, size_t count, tsr_dtype type, int peer, int tag, Request* req,
                      Traffic t);
// Whether a call on c moves device memory: c has a device route (its context
// was bound to a device when c was made) and one of the buffers is device
// memory. Host-only communicators never classify (no CUDA call).
inline bool on_device(const Comm& c, const void* a, const void* b = nullptr) {
  return c.device_route() &&
         (device::space_of(a) == device::Space::device || device::space_of(b) == device::Space::device);
}
}  // namespace detail

inline tsr_status send(const Comm& c, const void* buf, size_t count, tsr_dtype type, int peer, int tag,
                       Request* req = nullptr, Traffic t = Traffic::data) {
  if (!detail::p2p_ok(c, buf, count, type, peer)) return detail::send_split(c, buf, count, type, peer, tag, req, t);
  MpiBackend* host = c.host_mpi();
  const int n = static_cast<int>(count);
  const tsr_status st = host ? host->send(c, buf, n, type, peer, tag, req) : c.backend().send(c, buf, n, type, peer, tag, req);
  if (st == TSR_SUCCESS) {
    Ledger& l = c.ledger();
    if (host) l.p2p_sent(c.peer_class(peer), detail::bytes_of(count, type), t);
    else l.p2p_sent(c.peer_class(peer), detail::bytes_of(count, type), t, detail::on_device(c, buf));
    if (l.matrix_on() && t == Traffic::data) l.peer_sent(c.context_rank(peer), 1, detail::bytes_of(count, type));
  }
  return st;
}

inline tsr_status recv(const Comm& c, void* buf, size_t count, tsr_dtype type, int peer, int tag,
                       Request* req = nullptr, Traffic t = Traffic::data) {
  if (!detail::p2p_ok(c, buf, count, type, peer)) return detail::recv_split(c, buf, count, type, peer, tag, req, t);
  MpiBackend* host = c.host_mpi();
  const int n = static_cast<int>(count);
  const tsr_status st = host ? host->recv(c, buf, n, type, peer, tag, req) : c.backend().recv(c, buf, n, type, peer, tag, req);
  if (st == TSR_SUCCESS) {
    if (host) c.ledger().p2p_recv(c.peer_class(peer), detail::bytes_of(count, type), t);
    else c.ledger().p2p_recv(c.peer_class(peer), detail::bytes_of(count, type), t, detail::on_device(c, buf));
  }
  return st;
}
// Blocking exchange: sends to dest and receives from source at once.
// sbuf == rbuf (with scount == rcount) exchanges in place.
tsr_status sendrecv(const Comm& c, const void* sbuf, size_t scount, int dest, int stag, void* rbuf,
                    size_t rcount, int source, int rtag, tsr_dtype type, Traffic t = Traffic::data);

// --------------------------------------------------------------- collectives
tsr_status barrier(const Comm& c, Request* req = nullptr, Traffic t = Traffic::data);
tsr_status bcast(const Comm& c, void* buf, size_t count, tsr_dtype type, int root,
                 Request* req = nullptr, Traffic t = Traffic::data);
// sbuf == rbuf at the root means in place. rbuf is ignored on non-roots.
tsr_status reduce(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type,
                  tsr_op op, int root, Request* req = nullptr, Traffic t = Traffic::data);
// sbuf == rbuf means in place.
tsr_status allreduce(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type,
                     tsr_op op, Request* req = nullptr, Traffic t = Traffic::data);
// Each rank contributes count elements; rbuf holds size*count, rank order.
tsr_status allgather(const Comm& c, const void* sbuf, size_t count, void* rbuf, tsr_dtype type,
                     Request* req = nullptr, Traffic t = Traffic::data);
// Rank r contributes counts[r] elements at rbuf + displs[r] (elements).
tsr_status allgatherv(const Comm& c, const void* sbuf, size_t count, void* rbuf,
                      const size_t* counts, const size_t* displs, tsr_dtype type,
                      Request* req = nullptr, Traffic t = Traffic::data);
// sbuf holds size*count elements; rank r receives the reduction of block r.
tsr_status reduce_scatter(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type,
                          tsr_op op, Request* req = nullptr, Traffic t = Traffic::data);
// Uneven form: block r has counts[r] elements, blocks packed in rank order.
tsr_status reduce_scatterv(const Comm& c, const void* sbuf, void* rbuf, const size_t* counts,
                           tsr_dtype type, tsr_op op, Request* req = nullptr,
                           Traffic t = Traffic::data);
// count elements to and from every rank (sbuf and rbuf hold size*count).
tsr_status alltoall(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type,
                    Request* req = nullptr, Traffic t = Traffic::data);
// Root receives size*count elements in rank order; rbuf ignored elsewhere.
tsr_status gather(const Comm& c, const void* sbuf, size_t count, void* rbuf, tsr_dtype type,
                  int root, Request* req = nullptr, Traffic t = Traffic::data);
// Root sends block r (count elements) of sbuf to rank r; sbuf ignored elsewhere.
tsr_status scatter(const Comm& c, const void* sbuf, size_t count, void* rbuf, tsr_dtype type,
                   int root, Request* req = nullptr, Traffic t = Traffic::data);

// ---------------------------------------------------------------- completion
tsr_status wait(const Comm& c, Request* req);
tsr_status wait_all(const Comm& c, Request* reqs, size_t n);
// *done = 1 when the operation has completed (the request is then inactive).
tsr_status test(const Comm& c, Request* req, int* done);

// ------------------------------------------------------- collective checks
// Agree on an error before communicating: every rank passes its local status
// (with its pending message). If any rank failed, every rank returns the
// status of the lowest failing rank; the other ranks get a message naming
// that rank (its rank in c) and carrying its message. If `same` is given, every rank
// must also pass the same value (a digest of sizes, types, root...), else all
// ranks get TSR_ERR_INVALID_ARG. One 24-byte all-reduce when all succeeded
// (plus a 516-byte broadcast on failure). Charged as control traffic. The
// named form below adds, only where the digests differ, one all-reduce of
// 2 int64 per named argument.
tsr_status agree(const Comm& c, tsr_status local, const uint64_t* same = nullptr);
// The same on a bare MPI communicator; charges `ledger` if not null.
tsr_status agree_raw(MPI_Comm comm, Ledger* ledger, tsr_status local, const uint64_t* same = nullptr);

// A named argument that must be the same on every rank: its header name and
// its value (or, with hashed set, a digest of an array or string: the
// message then gives no values).
struct Same {
  const char* name;
  int64_t value;
  bool hashed = false;
};
// agree() on the digest of `args`; where they differ, every rank gets
// TSR_ERR_INVALID_ARG naming the first argument that differs, its smallest
// and largest value and this rank's (one more all-reduce of 2*args.size()
// int64, control traffic, only on that failure path).
tsr_status agree(const Comm& c, tsr_status local, const std::vector<Same>& args);
tsr_status agree_raw(MPI_Comm comm, Ledger* ledger, tsr_status local, const std::vector<Same>& args);
// A value for Same: a digest of bytes (strings, arrays of a fixed type).
int64_t hash_bytes(const void* p, size_t n, uint64_t h = 1469598103934665603ull);

// The modelled wire traffic of a collective (WireModel, model_*) is declared
// in wire_model.hpp, included above.

}  // namespace tsr

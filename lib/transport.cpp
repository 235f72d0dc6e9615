// The transport front: argument checks, exact payload accounting and the
// modelled wire traffic of collectives, then dispatch to the backend.
#include "transport.hpp"

#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "backend.hpp"
#include "context.hpp"
#include "core.hpp"
#include "device_transport.hpp"

namespace tsr {

// -------------------------------------------------------------- helpers
namespace {

// The largest buffer tessera describes: PTRDIFF_MAX bytes. A count (times
// `blocks` blocks of it, for the calls on one block per rank) beyond it
// cannot be a buffer's size; smaller counts of any size are moved, split
// into chunks of at most max_chunk() elements where needed.
tsr_status check_count(size_t count, tsr_dtype type, const char* arg, size_t blocks = 1) {
  const size_t limit = static_cast<size_t>(PTRDIFF_MAX) / tsr_dtype_size(type) / blocks;
  if (count > limit)
    return fail(TSR_ERR_UNSUPPORTED, "argument '%s' = %zu: %zu block(s) of that many %zu-byte elements exceed the "
                "largest buffer (PTRDIFF_MAX bytes)", arg, count, blocks, tsr_dtype_size(type));
  return TSR_SUCCESS;
}

tsr_status check_buf(const void* buf, size_t count, const char* arg) {
  if (buf == nullptr && count > 0) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL with %zu elements", arg, count);
  return TSR_SUCCESS;
}

tsr_status check_type(tsr_dtype type) {
  if (!dtype_valid(type)) return fail(TSR_ERR_INVALID_ARG, "argument 'type' = %d is not a tsr_dtype", static_cast<int>(type));
  return TSR_SUCCESS;
}

tsr_status check_op(tsr_op op) {
  if (!op_valid(op)) return fail(TSR_ERR_INVALID_ARG, "argument 'op' = %d is not a tsr_op", static_cast<int>(op));
  return TSR_SUCCESS;
}

tsr_status check_peer(const Comm& c, int peer, const char* arg) {
  if (peer < 0 || peer >= c.size())
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' = %d is not a rank of the communicator (size %d)", arg, peer, c.size());
  return TSR_SUCCESS;
}

// dev: the call moved device memory (Ledger: self and same-node edges are
// device to device).
void charge_model(const Comm& c, const WireModel& m, Traffic t, bool dev = false) {
  Ledger& l = c.ledger();
  for (const WireEdge& e : m.sent) l.coll_wire_sent(c.peer_class(e.peer), e.messages, e.bytes, t, dev);
  for (const WireEdge& e : m.recv) l.coll_wire_recv(c.peer_class(e.peer), e.messages, e.bytes, t, dev);
  if (l.matrix_on() && t == Traffic::data)
    for (const WireEdge& e : m.sent) l.peer_sent(c.context_rank(e.peer), e.messages, e.bytes);
}

using detail::bytes_of;
using detail::on_device;

// A local copy of n bytes within a rank's buffer: memmove on the host,
// device::copy (on the context's stream) for device memory.
tsr_status local_copy(const Comm& c, void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return TSR_SUCCESS;
  if (on_device(c, dst, src)) return device::copy(c, dst, src, n);
  std::memmove(dst, src, n);
  return TSR_SUCCESS;
}

// buf + elems elements of e bytes; null stays null (receive buffers that a
// rank ignores may be null).
const void* at(const void* buf, size_t elems, size_t e) {
  return buf == nullptr ? nullptr : static_cast<const char*>(buf) + elems * e;
}
void* at(void* buf, size_t elems, size_t e) {
  return buf == nullptr ? nullptr : static_cast<char*>(buf) + elems * e;
}

// The requests of a split call: each chunk is started on part(), then
// started() files its MPI request in the caller's request (none when
// blocking).
class Split {
 public:
  explicit Split(Request* req) : req_(req) {}
  Request* part() { return req_ ? &sub_ : nullptr; }
  void started() {
    if (req_ == nullptr) return;
    if (req_->mpi == MPI_REQUEST_NULL && req_->parts.empty())
      req_->mpi = sub_.mpi;
    else
      req_->parts.push_back(sub_.mpi);
    sub_.mpi = MPI_REQUEST_NULL;
    if (sub_.device) req_->device = true;  // a device part (NCCL): one pending group per communicator
    sub_.device = false;
  }

 private:
  Request* req_;
  Request sub_;
};

// Calls f(offset, n) over [0, count) in chunks of at most len elements
// (with `message`, once with n = 0 for count 0: a point-to-point message of
// no elements is still a message that its receiver waits for).
template <class F>
tsr_status for_chunks(size_t count, size_t len, F f, bool message = false) {
  if (count == 0 && message) return f(0, 0);
  for (size_t o = 0; o < count; o += len) TSR_TRY(f(o, static_cast<int>(count - o < len ? count - o : len)));
  return TSR_SUCCESS;
}

// Elements per rank in one chunk of a call on one block per rank: the
// chunk's p blocks together stay within max_chunk, at least one each.
size_t per_rank_chunk(const Comm& c) {
  const size_t len = c.max_chunk() / static_cast<size_t>(c.size());
  return len > 0 ? len : 1;
}

// Whether count elements per rank, p blocks, fit one MPI call.
bool whole(const Comm& c, size_t count) { return count <= c.max_chunk() / static_cast<size_t>(c.size()); }

}  // namespace

// ------------------------------------------------------------ point to point
namespace detail {
tsr_status p2p_error(const Comm& c, const void* buf, size_t count, tsr_dtype type, int peer) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_buf(buf, count, "buf"));
  TSR_TRY(check_count(count, type, "count"));
  TSR_TRY(check_peer(c, peer, "peer"));
  return TSR_SUCCESS;
}

tsr_status send_split(const Comm& c, const void* buf, size_t count, tsr_dtype type, int peer, int tag, Request* req,
                      Traffic t) {
  TSR_TRY(p2p_error(c, buf, count, type, peer));
  const size_t e = tsr_dtype_size(type);
  Split sp(req);
  TSR_TRY(for_chunks(count, c.max_chunk(), [&](size_t o, int n) {
    TSR_TRY(c.backend().send(c, at(buf, o, e), n, type, peer, tag, sp.part()));
    sp.started();
    return TSR_SUCCESS;
  }));
  Ledger& l = c.ledger();
  l.p2p_sent(c.peer_class(peer), bytes_of(count, type), t, on_device(c, buf));
  if (l.matrix_on() && t == Traffic::data) l.peer_sent(c.context_rank(peer), 1, bytes_of(count, type));
  return TSR_SUCCESS;
}

tsr_status recv_split(const Comm& c, void* buf, size_t count, tsr_dtype type, int peer, int tag, Request* req,
                      Traffic t) {
  TSR_TRY(p2p_error(c, buf, count, type, peer));
  const size_t e = tsr_dtype_size(type);
  Split sp(req);
  TSR_TRY(for_chunks(count, c.max_chunk(), [&](size_t o, int n) {
    TSR_TRY(c.backend().recv(c, at(buf, o, e), n, type, peer, tag, sp.part()));
    sp.started();
    return TSR_SUCCESS;
  }));
  c.ledger().p2p_recv(c.peer_class(peer), bytes_of(count, type), t, on_device(c, buf));
  return TSR_SUCCESS;
}
}  // namespace detail

tsr_status sendrecv(const Comm& c, const void* sbuf, size_t scount, int dest, int stag, void* rbuf, size_t rcount,
                    int source, int rtag, tsr_dtype type, Traffic t) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_buf(sbuf, scount, "sbuf"));
  TSR_TRY(check_buf(rbuf, rcount, "rbuf"));
  TSR_TRY(check_count(scount, type, "scount"));
  TSR_TRY(check_count(rcount, type, "rcount"));
  TSR_TRY(check_peer(c, dest, "dest"));
  TSR_TRY(check_peer(c, source, "source"));
  if (sbuf == rbuf && scount != rcount && sbuf != nullptr)
    return fail(TSR_ERR_INVALID_ARG, "in-place exchange (sbuf == rbuf) needs scount == rcount, got %zu and %zu",
                scount, rcount);
  if (scount <= c.max_chunk() && rcount <= c.max_chunk()) {
    TSR_TRY(c.backend().sendrecv(c, sbuf, static_cast<int>(scount), dest, stag, rbuf, static_cast<int>(rcount),
                                 source, rtag, type));
  } else {
    // Split: every chunk received and sent nonblocking, then waited for (the
    // partner may split the two directions differently). In place, the
    // outgoing data is copied first.
    const size_t e = tsr_dtype_size(type);
    std::unique_ptr<unsigned char[]> copy;
    const void* src = sbuf;
    if (sbuf == rbuf && sbuf != nullptr) {
      if (on_device(c, sbuf))
        return fail(TSR_ERR_UNSUPPORTED, "an in-place exchange (sbuf == rbuf) of device memory above max_chunk = %zu "
                    "elements", c.max_chunk());
      copy.reset(new (std::nothrow) unsigned char[scount * e]);
      if (!copy) return fail(TSR_ERR_NO_MEMORY, "a copy of %zu bytes for an in-place exchange", scount * e);
      std::memcpy(copy.get(), sbuf, scount * e);
      src = copy.get();
    }
    Request r;
    Split sp(&r);
    tsr_status st = for_chunks(rcount, c.max_chunk(), [&](size_t o, int n) {
      TSR_TRY(c.backend().recv(c, at(rbuf, o, e), n, type, source, rtag, sp.part()));
      sp.started();
      return TSR_SUCCESS;
    }, true);
    if (st == TSR_SUCCESS)
      st = for_chunks(scount, c.max_chunk(), [&](size_t o, int n) {
        TSR_TRY(c.backend().send(c, at(src, o, e), n, type, dest, stag, sp.part()));
        sp.started();
        return TSR_SUCCESS;
      }, true);
    const tsr_status done = c.backend().wait(c, &r);  // also after a failed start: nothing left in flight
    TSR_TRY(st);
    TSR_TRY(done);
  }
  const bool dev = on_device(c, sbuf, rbuf);
  c.ledger().p2p_sent(c.peer_class(dest), bytes_of(scount, type), t, dev);
  c.ledger().p2p_recv(c.peer_class(source), bytes_of(rcount, type), t, dev);
  if (c.ledger().matrix_on() && t == Traffic::data) c.ledger().peer_sent(c.context_rank(dest), 1, bytes_of(scount, type));
  return TSR_SUCCESS;
}

// ---------------------------------------------------------------- collectives
tsr_status barrier(const Comm& c, Request* req, Traffic t) {
  TSR_TRY(c.backend().barrier(c, req));
  c.ledger().coll_call(TSR_COLL_BARRIER, 0, 0, t);
  charge_model(c, model_barrier(c.rank(), c.size()), t);
  return TSR_SUCCESS;
}

tsr_status bcast(const Comm& c, void* buf, size_t count, tsr_dtype type, int root, Request* req, Traffic t) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_buf(buf, count, "buf"));
  TSR_TRY(check_count(count, type, "count"));
  TSR_TRY(check_peer(c, root, "root"));
  const uint64_t n = bytes_of(count, type);
  const bool is_root = c.rank() == root;
  if (count <= c.max_chunk()) {
    TSR_TRY(c.backend().bcast(c, buf, static_cast<int>(count), type, root, req));
  } else {
    const size_t e = tsr_dtype_size(type);
    Split sp(req);
    TSR_TRY(for_chunks(count, c.max_chunk(), [&](size_t o, int k) {
      TSR_TRY(c.backend().bcast(c, at(buf, o, e), k, type, root, sp.part()));
      sp.started();
      return TSR_SUCCESS;
    }));
  }
  c.ledger().coll_call(TSR_COLL_BCAST, is_root ? n : 0, is_root ? 0 : n, t);
  charge_model(c, model_bcast(c.rank(), c.size(), root, n), t, on_device(c, buf));
  return TSR_SUCCESS;
}

tsr_status reduce(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type, tsr_op op, int root,
                  Request* req, Traffic t) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_op(op));
  TSR_TRY(check_peer(c, root, "root"));
  const bool is_root = c.rank() == root;
  TSR_TRY(check_buf(sbuf, count, "sbuf"));
  if (is_root) TSR_TRY(check_buf(rbuf, count, "rbuf"));
  TSR_TRY(check_count(count, type, "count"));
  const uint64_t n = bytes_of(count, type);
  if (count <= c.max_chunk()) {
    TSR_TRY(c.backend().reduce(c, sbuf, rbuf, static_cast<int>(count), type, op, root, req));
  } else {  // elementwise: chunk by chunk (in place stays in place)
    const size_t e = tsr_dtype_size(type);
    Split sp(req);
    TSR_TRY(for_chunks(count, c.max_chunk(), [&](size_t o, int k) {
      TSR_TRY(c.backend().reduce(c, at(sbuf, o, e), is_root ? at(rbuf, o, e) : rbuf, k, type, op, root, sp.part()));
      sp.started();
      return TSR_SUCCESS;
    }));
  }
  c.ledger().coll_call(TSR_COLL_REDUCE, n, is_root ? n : 0, t);
  charge_model(c, model_reduce(c.rank(), c.size(), root, n), t, on_device(c, sbuf, rbuf));
  return TSR_SUCCESS;
}

tsr_status allreduce(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type, tsr_op op,
                     Request* req, Traffic t) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_op(op));
  TSR_TRY(check_buf(sbuf, count, "sbuf"));
  TSR_TRY(check_buf(rbuf, count, "rbuf"));
  TSR_TRY(check_count(count, type, "count"));
  const uint64_t n = bytes_of(count, type);
  if (count <= c.max_chunk()) {
    TSR_TRY(c.backend().allreduce(c, sbuf, rbuf, static_cast<int>(count), type, op, req));
  } else {
    const size_t e = tsr_dtype_size(type);
    Split sp(req);
    TSR_TRY(for_chunks(count, c.max_chunk(), [&](size_t o, int k) {
      TSR_TRY(c.backend().allreduce(c, at(sbuf, o, e), at(rbuf, o, e), k, type, op, sp.part()));
      sp.started();
      return TSR_SUCCESS;
    }));
  }
  c.ledger().coll_call(TSR_COLL_ALLREDUCE, n, n, t);
  charge_model(c, model_allreduce(c.rank(), c.size(), count, tsr_dtype_size(type)), t, on_device(c, sbuf, rbuf));
  return TSR_SUCCESS;
}

tsr_status allgather(const Comm& c, const void* sbuf, size_t count, void* rbuf, tsr_dtype type, Request* req,
                     Traffic t) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_buf(sbuf, count, "sbuf"));
  TSR_TRY(check_buf(rbuf, count, "rbuf"));
  TSR_TRY(check_count(count, type, "count", static_cast<size_t>(c.size())));
  const uint64_t n = bytes_of(count, type);
  if (whole(c, count)) {
    TSR_TRY(c.backend().allgather(c, sbuf, static_cast<int>(count), rbuf, type, count, req));
  } else {  // chunk k of every rank's block at once (blocks count elements apart)
    const size_t e = tsr_dtype_size(type);
    Split sp(req);
    TSR_TRY(for_chunks(count, per_rank_chunk(c), [&](size_t o, int k) {
      TSR_TRY(c.backend().allgather(c, at(sbuf, o, e), k, at(rbuf, o, e), type, count, sp.part()));
      sp.started();
      return TSR_SUCCESS;
    }));
  }
  c.ledger().coll_call(TSR_COLL_ALLGATHER, n, n * static_cast<uint64_t>(c.size()), t);
  charge_model(c, model_allgatherv(c.rank(), c.size(), std::vector<uint64_t>(static_cast<size_t>(c.size()), n)), t,
               on_device(c, sbuf, rbuf));
  return TSR_SUCCESS;
}

tsr_status allgatherv(const Comm& c, const void* sbuf, size_t count, void* rbuf, const size_t* counts,
                      const size_t* displs, tsr_dtype type, Request* req, Traffic t) {
  TSR_TRY(check_type(type));
  TSR_CHECK_NOT_NULL(counts);
  TSR_CHECK_NOT_NULL(displs);
  const size_t p = static_cast<size_t>(c.size());
  const size_t me = static_cast<size_t>(c.rank());
  if (counts[me] != count)
    return fail(TSR_ERR_SHAPE, "argument 'count' = %zu differs from counts[%d] = %zu", count, c.rank(), counts[me]);
  TSR_TRY(check_buf(sbuf, count, "sbuf"));
  std::vector<uint64_t> block(p);
  uint64_t total = 0;
  size_t total_count = 0, end = 0;
  bool split = false;
  for (size_t r = 0; r < p; ++r) {
    TSR_TRY(check_count(counts[r], type, "counts[r]"));
    TSR_TRY(check_count(displs[r], type, "displs[r]"));
    if (counts[r] > 0) TSR_TRY(check_count(displs[r] + counts[r], type, "displs[r] + counts[r]"));
    if (counts[r] > 0 && displs[r] + counts[r] > end) end = displs[r] + counts[r];
    if (displs[r] > c.max_chunk() || counts[r] > c.max_chunk()) split = true;
    if (counts[r] > static_cast<size_t>(PTRDIFF_MAX) / tsr_dtype_size(type) - total_count)
      return fail(TSR_ERR_UNSUPPORTED, "argument 'counts': the blocks together exceed the largest buffer "
                  "(PTRDIFF_MAX bytes)");
    block[r] = bytes_of(counts[r], type);
    total += block[r];
    total_count += counts[r];
  }
  if (total_count > c.max_chunk() || end > c.max_chunk()) split = true;
  TSR_TRY(check_buf(rbuf, total_count, "rbuf"));
  const size_t e = tsr_dtype_size(type);
  if (p == 1) {
    // One rank: a local copy. (MPICH 4.0's MPI_Allgatherv on one rank
    // ignores displs[0] and writes at rbuf: test_split's allgatherv with gaps.)
    void* mine = at(rbuf, displs[0], e);
    TSR_TRY(local_copy(c, mine, sbuf, count * e));
  } else if (!split) {
    std::vector<int> scratch(2 * p);
    for (size_t r = 0; r < p; ++r) {
      scratch[r] = static_cast<int>(counts[r]);
      scratch[p + r] = static_cast<int>(displs[r]);
    }
    // MPI reads the count arrays until a nonblocking call completes: keep them in the request.
    std::vector<int>& keep = req ? req->scratch : scratch;
    if (req) keep = std::move(scratch);
    TSR_TRY(c.backend().allgatherv(c, sbuf, static_cast<int>(count), rbuf, keep.data(), keep.data() + p, type, req));
  } else {
    // Each rank's block broadcast from it in chunks, from its place in rbuf
    // (this rank's copied there first unless in place).
    void* mine = at(rbuf, displs[me], e);
    TSR_TRY(local_copy(c, mine, sbuf, count * e));
    Split sp(req);
    for (size_t r = 0; r < p; ++r)
      TSR_TRY(for_chunks(counts[r], c.max_chunk(), [&](size_t o, int k) {
        TSR_TRY(c.backend().bcast(c, at(rbuf, displs[r] + o, e), k, type, static_cast<int>(r), sp.part()));
        sp.started();
        return TSR_SUCCESS;
      }));
  }
  charge_model(c, model_allgatherv(c.rank(), c.size(), block), t, on_device(c, sbuf, rbuf));
  c.ledger().coll_call(TSR_COLL_ALLGATHER, bytes_of(count, type), total, t);
  return TSR_SUCCESS;
}

tsr_status reduce_scatterv(const Comm& c, const void* sbuf, void* rbuf, const size_t* counts, tsr_dtype type,
                           tsr_op op, Request* req, Traffic t) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_op(op));
  TSR_CHECK_NOT_NULL(counts);
  const size_t p = static_cast<size_t>(c.size());
  std::vector<uint64_t> block(p);
  uint64_t total = 0;
  size_t total_count = 0;
  for (size_t r = 0; r < p; ++r) {
    TSR_TRY(check_count(counts[r], type, "counts[r]"));
    if (counts[r] > static_cast<size_t>(PTRDIFF_MAX) / tsr_dtype_size(type) - total_count)
      return fail(TSR_ERR_UNSUPPORTED, "argument 'counts': the blocks together exceed the largest buffer "
                  "(PTRDIFF_MAX bytes)");
    block[r] = bytes_of(counts[r], type);
    total += block[r];
    total_count += counts[r];
  }
  TSR_TRY(check_buf(sbuf, total_count, "sbuf"));
  TSR_TRY(check_buf(rbuf, counts[static_cast<size_t>(c.rank())], "rbuf"));
  if (total_count <= c.max_chunk()) {
    std::vector<int> scratch(p);
    for (size_t r = 0; r < p; ++r) scratch[r] = static_cast<int>(counts[r]);
    std::vector<int>& keep = req ? req->scratch : scratch;
    if (req) keep = std::move(scratch);
    TSR_TRY(c.backend().reduce_scatter(c, sbuf, rbuf, keep.data(), type, op, req));
  } else {
    // Block r reduced to rank r, chunk by chunk.
    const size_t e = tsr_dtype_size(type);
    Split sp(req);
    size_t off = 0;
    for (size_t r = 0; r < p; ++r) {
      const bool mine = static_cast<int>(r) == c.rank();
      TSR_TRY(for_chunks(counts[r], c.max_chunk(), [&](size_t o, int k) {
        TSR_TRY(c.backend().reduce(c, at(sbuf, off + o, e), mine ? at(rbuf, o, e) : nullptr, k, type, op,
                                   static_cast<int>(r), sp.part()));
        sp.started();
        return TSR_SUCCESS;
      }));
      off += counts[r];
    }
  }
  charge_model(c, model_reduce_scatterv(c.rank(), c.size(), block), t, on_device(c, sbuf, rbuf));
  c.ledger().coll_call(TSR_COLL_REDUCE_SCATTER, total, block[static_cast<size_t>(c.rank())], t);
  return TSR_SUCCESS;
}

tsr_status reduce_scatter(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type, tsr_op op,
                          Request* req, Traffic t) {
  if (dtype_valid(type)) TSR_TRY(check_count(count, type, "count", static_cast<size_t>(c.size())));
  std::vector<size_t> counts(static_cast<size_t>(c.size()), count);
  return reduce_scatterv(c, sbuf, rbuf, counts.data(), type, op, req, t);
}

tsr_status alltoall(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type, Request* req,
                    Traffic t) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_buf(sbuf, count, "sbuf"));
  TSR_TRY(check_buf(rbuf, count, "rbuf"));
  TSR_TRY(check_count(count, type, "count", static_cast<size_t>(c.size())));
  const uint64_t n = bytes_of(count, type);
  const uint64_t all = n * static_cast<uint64_t>(c.size());
  if (whole(c, count)) {
    TSR_TRY(c.backend().alltoall(c, sbuf, rbuf, static_cast<int>(count), type, count, req));
  } else {
    const size_t e = tsr_dtype_size(type);
    Split sp(req);
    TSR_TRY(for_chunks(count, per_rank_chunk(c), [&](size_t o, int k) {
      TSR_TRY(c.backend().alltoall(c, at(sbuf, o, e), at(rbuf, o, e), k, type, count, sp.part()));
      sp.started();
      return TSR_SUCCESS;
    }));
  }
  c.ledger().coll_call(TSR_COLL_ALLTOALL, all, all, t);
  charge_model(c, model_alltoall(c.rank(), c.size(), n), t, on_device(c, sbuf, rbuf));
  return TSR_SUCCESS;
}

tsr_status gather(const Comm& c, const void* sbuf, size_t count, void* rbuf, tsr_dtype type, int root, Request* req,
                  Traffic t) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_peer(c, root, "root"));
  TSR_TRY(check_buf(sbuf, count, "sbuf"));
  const bool is_root = c.rank() == root;
  if (is_root) TSR_TRY(check_buf(rbuf, count, "rbuf"));
  TSR_TRY(check_count(count, type, "count", static_cast<size_t>(c.size())));
  const uint64_t n = bytes_of(count, type);
  if (whole(c, count)) {
    TSR_TRY(c.backend().gather(c, sbuf, static_cast<int>(count), rbuf, type, root, count, req));
  } else {
    const size_t e = tsr_dtype_size(type);
    Split sp(req);
    TSR_TRY(for_chunks(count, per_rank_chunk(c), [&](size_t o, int k) {
      TSR_TRY(c.backend().gather(c, at(sbuf, o, e), k, is_root ? at(rbuf, o, e) : rbuf, type, root, count,
                                 sp.part()));
      sp.started();
      return TSR_SUCCESS;
    }));
  }
  c.ledger().coll_call(TSR_COLL_GATHER, n, is_root ? n * static_cast<uint64_t>(c.size()) : 0, t);
  charge_model(c, model_gather(c.rank(), c.size(), root, n), t, on_device(c, sbuf, rbuf));
  return TSR_SUCCESS;
}

tsr_status scatter(const Comm& c, const void* sbuf, size_t count, void* rbuf, tsr_dtype type, int root, Request* req,
                   Traffic t) {
  TSR_TRY(check_type(type));
  TSR_TRY(check_peer(c, root, "root"));
  const bool is_root = c.rank() == root;
  if (is_root) TSR_TRY(check_buf(sbuf, count, "sbuf"));
  TSR_TRY(check_buf(rbuf, count, "rbuf"));
  TSR_TRY(check_count(count, type, "count", static_cast<size_t>(c.size())));
  const uint64_t n = bytes_of(count, type);
  if (whole(c, count)) {
    TSR_TRY(c.backend().scatter(c, sbuf, static_cast<int>(count), rbuf, type, root, count, req));
  } else {
    const size_t e = tsr_dtype_size(type);
    Split sp(req);
    TSR_TRY(for_chunks(count, per_rank_chunk(c), [&](size_t o, int k) {
      TSR_TRY(c.backend().scatter(c, is_root ? at(sbuf, o, e) : sbuf, k, at(rbuf, o, e), type, root, count,
                                  sp.part()));
      sp.started();
      return TSR_SUCCESS;
    }));
  }
  c.ledger().coll_call(TSR_COLL_SCATTER, is_root ? n * static_cast<uint64_t>(c.size()) : 0, n, t);
  charge_model(c, model_scatter(c.rank(), c.size(), root, n), t, on_device(c, sbuf, rbuf));
  return TSR_SUCCESS;
}

// ----------------------------------------------------------------- completion
tsr_status wait(const Comm& c, Request* req) {
  TSR_CHECK_NOT_NULL(req);
  tsr_status st = c.backend().wait(c, req);
  req->scratch.clear();
  return st;
}

tsr_status wait_all(const Comm& c, Request* reqs, size_t n) {
  if (n > 0) TSR_CHECK_NOT_NULL(reqs);
  tsr_status first = TSR_SUCCESS;
  for (size_t i = 0; i < n; ++i) {
    tsr_status st = wait(c, &reqs[i]);
    if (first == TSR_SUCCESS) first = st;
  }
  return first;
}

tsr_status test(const Comm& c, Request* req, int* done) {
  TSR_CHECK_NOT_NULL(req);
  TSR_CHECK_NOT_NULL(done);
  tsr_status st = c.backend().test(c, req, done);
  if (st == TSR_SUCCESS && *done) req->scratch.clear();
  return st;
}

// ------------------------------------------------------------------- agree
tsr_status agree_raw(MPI_Comm comm, Ledger* ledger, tsr_status local, const uint64_t* same) {
  int rank = 0, size = 1;
  TSR_MPI_TRY(MPI_Comm_rank(comm, &rank));
  TSR_MPI_TRY(MPI_Comm_size(comm, &size));
  // One MAX all-reduce: {size - lowest failing rank (0: none), v, -v}, so that
  // the same value v on every rank shows as out[1] == -out[2].
  const int64_t v = same ? static_cast<int64_t>(*same & 0x7fffffffffffffffull) : 0;
  int64_t in[3] = {local == TSR_SUCCESS ? 0 : size - rank, v, -v}, out[3] = {0, 0, 0};
  if (ledger) {
    WireModel m = model_allreduce(rank, size, 3, sizeof(int64_t));
    for (const WireEdge& e : m.sent) ledger->coll_wire_sent(TSR_PEER_NODE, e.messages, e.bytes, Traffic::control);
    for (const WireEdge& e : m.recv) ledger->coll_wire_recv(TSR_PEER_NODE, e.messages, e.bytes, Traffic::control);
  }
  const std::string mine = local == TSR_SUCCESS ? std::string() : pending_message();
  TSR_MPI_TRY(MPI_Allreduce(in, out, 3, MPI_INT64_T, MPI_MAX, comm));
  if (out[0] == 0) {
    if (same && out[1] != -out[2])
      return fail(TSR_ERR_INVALID_ARG, "arguments differ across the %d ranks of the communicator; every rank must pass "
                  "the same sizes, types, operation and root", size);
    return TSR_SUCCESS;
  }
  const int failed = size - static_cast<int>(out[0]);
  // Someone failed: the lowest failing rank tells everyone its status and message.
  struct {
    int status;
    char text[512];
  } note{};
  if (rank == failed) {
    note.status = static_cast<int>(local);
    std::strncpy(note.text, mine.c_str(), sizeof note.text - 1);
  }
  if (ledger) {
    WireModel m = model_bcast(rank, size, failed, sizeof note);
    for (const WireEdge& e : m.sent) ledger->coll_wire_sent(TSR_PEER_NODE, e.messages, e.bytes, Traffic::control);
    for (const WireEdge& e : m.recv) ledger->coll_wire_recv(TSR_PEER_NODE, e.messages, e.bytes, Traffic::control);
  }
  TSR_MPI_TRY(MPI_Bcast(&note, static_cast<int>(sizeof note), MPI_BYTE, failed, comm));
  // Every rank returns the lowest failing rank's status. A rank that failed
  // itself keeps its own message (and says which status won, if another).
  const tsr_status agreed = static_cast<tsr_status>(note.status);
  if (local == agreed) {
    set_pending_message(mine);
    return agreed;
  }
  if (local != TSR_SUCCESS)
    return fail(agreed, "%s (rank %d failed first, with %s: %s)", mine.c_str(), failed, tsr_status_name(agreed),
                note.text);
  return fail(agreed, "rank %d failed: %s", failed, note.text);
}

tsr_status agree(const Comm& c, tsr_status local, const uint64_t* same) {
  return agree_raw(c.mpi(), &c.ledger(), local, same);
}

int64_t hash_bytes(const void* p, size_t n, uint64_t h) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h & 0x7fffffffffffffffull);
}

tsr_status agree_raw(MPI_Comm comm, Ledger* ledger, tsr_status local, const std::vector<Same>& args) {
  uint64_t h = 1469598103934665603ull;
  for (const Same& a : args) h = digest({a.value}, h);
  const tsr_status st = agree_raw(comm, ledger, local, &h);
  if (st != TSR_ERR_INVALID_ARG || local != TSR_SUCCESS || args.empty()) return st;
  // Only the digest test's failure (every rank succeeded locally, so every
  // rank gets here together) takes the second all-reduce.
  const std::string msg = pending_message();
  if (msg.rfind("arguments differ", 0) != 0) return st;
  int rank = 0, size = 1;
  TSR_MPI_TRY(MPI_Comm_rank(comm, &rank));
  TSR_MPI_TRY(MPI_Comm_size(comm, &size));
  const size_t n = args.size();
  // {v_i, -v_i} under MAX: the largest and the smallest value of each.
  std::vector<int64_t> in(2 * n), out(2 * n);
  for (size_t i = 0; i < n; ++i) {
    in[2 * i] = args[i].value;
    in[2 * i + 1] = args[i].value == INT64_MIN ? INT64_MAX : -args[i].value;
  }
  if (ledger) {
    WireModel m = model_allreduce(rank, size, 2 * n, sizeof(int64_t));
    for (const WireEdge& e : m.sent) ledger->coll_wire_sent(TSR_PEER_NODE, e.messages, e.bytes, Traffic::control);
    for (const WireEdge& e : m.recv) ledger->coll_wire_recv(TSR_PEER_NODE, e.messages, e.bytes, Traffic::control);
  }
  TSR_MPI_TRY(MPI_Allreduce(in.data(), out.data(), static_cast<int>(2 * n), MPI_INT64_T, MPI_MAX, comm));
  for (size_t i = 0; i < n; ++i) {
    const int64_t hi = out[2 * i], lo = -out[2 * i + 1];
    if (hi == lo) continue;
    // A header name is quoted; a description (with a space) is not.
    const bool word = std::strchr(args[i].name, ' ') == nullptr;
    const std::string what = word ? "argument '" + std::string(args[i].name) + "'" : std::string(args[i].name);
    if (args[i].hashed)
      return fail(TSR_ERR_INVALID_ARG, "%s differs across the %d ranks of the communicator; every rank must pass the "
                  "same", what.c_str(), size);
    return fail(TSR_ERR_INVALID_ARG, "%s differs across the %d ranks of the communicator (values from %lld to %lld; "
                "this rank: %lld); every rank must pass the same", what.c_str(), size, static_cast<long long>(lo),
                static_cast<long long>(hi), static_cast<long long>(args[i].value));
  }
  return st;  // a digest collision of different lists: keep the generic message
}

tsr_status agree(const Comm& c, tsr_status local, const std::vector<Same>& args) {
  return agree_raw(c.mpi(), &c.ledger(), local, args);
}

}  // namespace tsr

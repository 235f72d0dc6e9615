// The device transport (lib/device_transport.hpp, docs/GPU.md): the
// DeviceBackend that routes each call by where its buffers live, NCCL
// communicators per transport communicator, CUDA-aware MPI.
#include "device_transport.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backend.hpp"
#include "context.hpp"
#include "core.hpp"
#include "device.hpp"
#include "tessera/tsr_config.h"
#include "transport.hpp"

#if TSR_HAVE_CUDA
#include "cuda_check.hpp"
#endif
#if TSR_HAVE_NCCL
#include <nccl.h>
#endif
#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif
#endif

namespace tsr {

namespace device {
bool cuda_aware_mpi() {
#if TSR_HAVE_CUDA
  if (const char* env = std::getenv("TSR_CUDA_AWARE_MPI")) {
    if (std::strcmp(env, "0") == 0) return false;
    if (std::strcmp(env, "1") == 0) return true;
  }
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#elif defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
#else
  return false;
#endif
}
}  // namespace device

#if !TSR_HAVE_CUDA
// ------------------------------------------------------- built without CUDA
namespace device {
tsr_status attach(Comm&) { return TSR_SUCCESS; }
tsr_status start(const Comm&) { return TSR_SUCCESS; }
void detach(Comm&) {}
tsr_status copy(const Comm&, void*, const void*, size_t) {
  return fail(TSR_ERR_INTERNAL, "device copy in a build without CUDA");
}
bool can_move_device(const Comm&, const char** why) {
  if (why) *why = "this tessera was built without CUDA (TSR_WITH_CUDA=OFF)";
  return false;
}
}  // namespace device

#else
// ------------------------------------------------------------ CUDA builds
#if TSR_HAVE_NCCL
namespace {
tsr_status nccl_fail(ncclResult_t rc, const char* what, ncclComm_t comm = nullptr) {
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  const tsr_status st = rc == ncclInvalidArgument || rc == ncclInvalidUsage ? TSR_ERR_INVALID_ARG : TSR_ERR_STATE;
  return fail(st, "%s failed: %s%s%s", what, ncclGetErrorString(rc), last && *last ? ": " : "", last ? last : "");
}
}  // namespace
#define TSR_NCCL_TRY(call, comm)                                                    \
  do {                                                                              \
    ncclResult_t tsr_nccl_rc_ = (call);                                             \
    if (tsr_nccl_rc_ != ncclSuccess) return nccl_fail(tsr_nccl_rc_, #call, (comm)); \
  } while (0)
#endif

// A communicator's device state: its NCCL communicator (null where NCCL is
// not built or cannot serve it), the stream and events of its pending group
// of nonblocking point-to-point operations.
class DeviceComm {
 public:
  ~DeviceComm() {
    device::Guard g(device);
#if TSR_HAVE_NCCL
    if (nccl != nullptr) (void)ncclCommDestroy(nccl);
#endif
    if (ready != nullptr) (void)cudaEventDestroy(ready);
    if (done != nullptr) (void)cudaEventDestroy(done);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
  struct Op {
    bool send;
    void* buf;
    size_t count;
    tsr_dtype type;
    int peer;
  };
  int device = -1;
#if TSR_HAVE_NCCL
  ncclComm_t nccl = nullptr;
#endif
  const char* no_nccl = "this tessera was built without NCCL (TSR_WITH_NCCL=OFF)";
  std::string why;                 // why there is no NCCL communicator, if none
  cudaStream_t stream = nullptr;   // where pending groups run
  cudaEvent_t ready = nullptr;     // the context's stream up to a group's start
  cudaEvent_t done = nullptr;      // the end of the last group
  bool outstanding = false;        // a group ran that the context's stream does not yet wait for
  std::vector<Op> pending;         // nonblocking point-to-point, not yet started
};

namespace {

cudaStream_t stream_of(const Comm& c) { return static_cast<cudaStream_t>(c.context()->cuda_stream); }

#if TSR_HAVE_NCCL
ncclDataType_t nccl_type(tsr_dtype t) {
  switch (t) {
    case TSR_BYTE: return ncclUint8;
    case TSR_INT32: return ncclInt32;
    case TSR_INT64: return ncclInt64;
    case TSR_FLOAT32: return ncclFloat32;
    case TSR_FLOAT64: return ncclFloat64;
    case TSR_BFLOAT16: return ncclBfloat16;
  }
  return ncclUint8;
}
ncclRedOp_t nccl_op(tsr_op o) {
  switch (o) {
    case TSR_SUM: return ncclSum;
    case TSR_PROD: return ncclProd;
    case TSR_MIN: return ncclMin;
    case TSR_MAX: return ncclMax;
  }
  return ncclSum;
}

const char* at(const void* p, size_t elems, tsr_dtype t) {
  return p == nullptr ? nullptr : static_cast<const char*>(p) + elems * tsr_dtype_size(t);
}
char* at(void* p, size_t elems, tsr_dtype t) {
  return p == nullptr ? nullptr : static_cast<char*>(p) + elems * tsr_dtype_size(t);
}
#endif

enum class Route { host, nccl, mpi };

struct Buf {
  const void* p;
  const char* name;
};

// Starts c's pending group of point-to-point operations on its stream, after
// the work on the context's stream. `settle` also orders the context's
// stream after it (before work that the group must precede).
tsr_status flush(const Comm& c, bool settle) {
  DeviceComm* d = c.device();
  if (d == nullptr || (d->pending.empty() && !(settle && d->outstanding))) return TSR_SUCCESS;
  device::Guard g(d->device);  // the host route and barrier reach here without one
  TSR_TRY(g.status());
#if TSR_HAVE_NCCL
  if (!d->pending.empty()) {
    std::vector<DeviceComm::Op> ops;
    ops.swap(d->pending);
    TSR_CUDA_TRY(cudaEventRecord(d->ready, stream_of(c)));
    TSR_CUDA_TRY(cudaStreamWaitEvent(d->stream, d->ready, 0));
    TSR_NCCL_TRY(ncclGroupStart(), d->nccl);
    ncclResult_t rc = ncclSuccess;
    const char* what = "ncclSend";
    for (const DeviceComm::Op& op : ops) {
      rc = op.send ? ncclSend(op.buf, op.count, nccl_type(op.type), op.peer, d->nccl, d->stream)
                   : ncclRecv(op.buf, op.count, nccl_type(op.type), op.peer, d->nccl, d->stream);
      if (rc != ncclSuccess) {
        what = op.send ? "ncclSend" : "ncclRecv";
        break;
      }
    }
    const ncclResult_t end = ncclGroupEnd();  // always closes the group
    if (rc != ncclSuccess) return nccl_fail(rc, what, d->nccl);
    TSR_NCCL_TRY(end, d->nccl);
    TSR_CUDA_TRY(cudaEventRecord(d->done, d->stream));
    d->outstanding = true;
  }
#endif
  if (settle && d->outstanding) {
    TSR_CUDA_TRY(cudaStreamWaitEvent(stream_of(c), d->done, 0));
    d->outstanding = false;
  }
  return TSR_SUCCESS;
}

// The route of a call: host when every buffer is host memory; else every
// buffer must be device memory of the context's device, and the
// communicator must have NCCL or CUDA-aware MPI.
tsr_status route(const Comm& c, std::initializer_list<Buf> bufs, Route* r) {
  const Buf* dev_buf = nullptr;
  const Buf* host_buf = nullptr;
  int dev = -1;
  for (const Buf& b : bufs) {
    if (b.p == nullptr) continue;
    int d = -1;
    if (device::space_of(b.p, &d) == device::Space::device) {
      if (dev_buf == nullptr) {
        dev_buf = &b;
        dev = d;
      }
      if (d != c.context()->cuda_device)
        return fail(TSR_ERR_INVALID_ARG, "argument '%s' is memory of CUDA device %d but the context is bound to "
                    "device %d", b.name, d, c.context()->cuda_device);
    } else if (host_buf == nullptr) {
      host_buf = &b;
    }
  }
  if (dev_buf == nullptr) {
    *r = Route::host;
    return TSR_SUCCESS;
  }
  if (host_buf != nullptr)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is host memory but '%s' is memory of CUDA device %d: pass the "
                "buffers of one call in one memory space", host_buf->name, dev_buf->name, dev);
  const char* why = nullptr;
  if (!device::can_move_device(c, &why))
    return fail(TSR_ERR_UNSUPPORTED, "argument '%s' is CUDA device memory, which this communicator cannot move: %s",
                dev_buf->name, why);
#if TSR_HAVE_NCCL
  *r = c.device()->nccl != nullptr ? Route::nccl : Route::mpi;
#else
  *r = Route::mpi;
#endif
  return TSR_SUCCESS;
}

// Before MPI reads or writes device memory: the context's stream must have
// produced it (MPI knows no streams) and c's pending group must have run.
tsr_status mpi_ready(const Comm& c) {
  TSR_TRY(flush(c, true));
  TSR_CUDA_TRY(cudaStreamSynchronize(stream_of(c)));
  return TSR_SUCCESS;
}

tsr_status bf16_mpi(tsr_dtype type, const char* what) {
  if (type == TSR_BFLOAT16)
    return fail(TSR_ERR_UNSUPPORTED, "%s of bfloat16 device memory through CUDA-aware MPI (its bfloat16 operator runs "
                "on the host); build with NCCL", what);
  return TSR_SUCCESS;
}

#define TSR_ROUTE(r, ...)                              \
  Route r = Route::host;                               \
  TSR_TRY(route(c, {__VA_ARGS__}, &r));                \
  device::Guard guard_(r != Route::host ? c.context()->cuda_device : -1); \
  TSR_TRY(guard_.status());                            \
  if (r == Route::mpi) TSR_TRY(mpi_ready(c))

#if TSR_HAVE_NCCL
#define TSR_NCCL(call) TSR_NCCL_TRY(call, c.device()->nccl)
#define NC c.device()->nccl, stream_of(c)
#endif

class DeviceBackend final : public Backend {
 public:
  explicit DeviceBackend(MpiBackend* host) : host_(host) {}
  const char* name() const override { return "device"; }

  tsr_status send(const Comm& c, const void* buf, int count, tsr_dtype type, int peer, int tag,
                  Request* req) override {
    TSR_ROUTE(r, Buf{buf, "buf"});
    if (r != Route::nccl) {
      if (r == Route::host) TSR_TRY(flush(c, false));
      return host_->send(c, buf, count, type, peer, tag, req);
    }
#if TSR_HAVE_NCCL
    if (req != nullptr) return post(c, true, const_cast<void*>(buf), count, type, peer, req);
    TSR_TRY(flush(c, true));
    TSR_NCCL(ncclSend(buf, static_cast<size_t>(count), nccl_type(type), peer, NC));
#endif
    return TSR_SUCCESS;
  }

  tsr_status recv(const Comm& c, void* buf, int count, tsr_dtype type, int peer, int tag, Request* req) override {
    TSR_ROUTE(r, Buf{buf, "buf"});
    if (r != Route::nccl) {
      if (r == Route::host) TSR_TRY(flush(c, false));
      return host_->recv(c, buf, count, type, peer, tag, req);
    }
#if TSR_HAVE_NCCL
    if (req != nullptr) return post(c, false, buf, count, type, peer, req);
    TSR_TRY(flush(c, true));
    TSR_NCCL(ncclRecv(buf, static_cast<size_t>(count), nccl_type(type), peer, NC));
#endif
    return TSR_SUCCESS;
  }

  tsr_status sendrecv(const Comm& c, const void* sbuf, int scount, int dest, int stag, void* rbuf, int rcount,
                      int source, int rtag, tsr_dtype type) override {
    TSR_ROUTE(r, (Buf{sbuf, "sbuf"}), (Buf{rbuf, "rbuf"}));
    if (r != Route::nccl) return host_->sendrecv(c, sbuf, scount, dest, stag, rbuf, rcount, source, rtag, type);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    const size_t e = tsr_dtype_size(type);
    void* into = rbuf;
    void* tmp = nullptr;
    if (sbuf == rbuf && rcount > 0) {  // in place: receive aside, then copy (charged device to device)
      TSR_CUDA_TRY(cudaMallocAsync(&tmp, static_cast<size_t>(rcount) * e, stream_of(c)));
      into = tmp;
    }
    TSR_NCCL(ncclGroupStart());
    ncclResult_t rc = ncclSend(sbuf, static_cast<size_t>(scount), nccl_type(type), dest, NC);
    if (rc == ncclSuccess) rc = ncclRecv(into, static_cast<size_t>(rcount), nccl_type(type), source, NC);
    const ncclResult_t end = ncclGroupEnd();
    if (rc == ncclSuccess) rc = end;
    if (tmp != nullptr) {
      cudaError_t cr = rc == ncclSuccess ? cudaMemcpyAsync(rbuf, tmp, static_cast<size_t>(rcount) * e,
                                                          cudaMemcpyDeviceToDevice, stream_of(c))
                                         : cudaSuccess;
      const cudaError_t fr = cudaFreeAsync(tmp, stream_of(c));
      if (cr == cudaSuccess) cr = fr;
      if (rc == ncclSuccess && cr != cudaSuccess) return cuda_fail(cr, "cudaMemcpyAsync (in-place exchange)");
      if (rc == ncclSuccess) c.ledger().device_to_device(static_cast<uint64_t>(rcount) * e);
    }
    if (rc != ncclSuccess) return nccl_fail(rc, "ncclSend/ncclRecv (exchange)", c.device()->nccl);
#endif
    return TSR_SUCCESS;
  }

  tsr_status barrier(const Comm& c, Request* req) override {
    TSR_TRY(flush(c, false));
    return host_->barrier(c, req);
  }

  tsr_status bcast(const Comm& c, void* buf, int count, tsr_dtype type, int root, Request* req) override {
    TSR_ROUTE(r, Buf{buf, "buf"});
    if (r != Route::nccl) return host_->bcast(c, buf, count, type, root, r == Route::mpi ? nullptr : req);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    TSR_NCCL(ncclBroadcast(buf, buf, static_cast<size_t>(count), nccl_type(type), root, NC));
#endif
    return TSR_SUCCESS;
  }

  tsr_status reduce(const Comm& c, const void* sbuf, void* rbuf, int count, tsr_dtype type, tsr_op op, int root,
                    Request* req) override {
    TSR_ROUTE(r, (Buf{sbuf, "sbuf"}), (Buf{c.rank() == root ? rbuf : nullptr, "rbuf"}));
    if (r == Route::mpi) TSR_TRY(bf16_mpi(type, "a reduction"));
    if (r != Route::nccl) return host_->reduce(c, sbuf, rbuf, count, type, op, root, r == Route::mpi ? nullptr : req);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    TSR_NCCL(ncclReduce(sbuf, c.rank() == root ? rbuf : nullptr, static_cast<size_t>(count), nccl_type(type),
                        nccl_op(op), root, NC));
#endif
    return TSR_SUCCESS;
  }

  tsr_status allreduce(const Comm& c, const void* sbuf, void* rbuf, int count, tsr_dtype type, tsr_op op,
                       Request* req) override {
    TSR_ROUTE(r, (Buf{sbuf, "sbuf"}), (Buf{rbuf, "rbuf"}));
    if (r == Route::mpi) TSR_TRY(bf16_mpi(type, "a reduction"));
    if (r != Route::nccl) return host_->allreduce(c, sbuf, rbuf, count, type, op, r == Route::mpi ? nullptr : req);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    TSR_NCCL(ncclAllReduce(sbuf, rbuf, static_cast<size_t>(count), nccl_type(type), nccl_op(op), NC));
#endif
    return TSR_SUCCESS;
  }

  tsr_status allgatherv(const Comm& c, const void* sbuf, int count, void* rbuf, const int* counts,
                        const int* displs, tsr_dtype type, Request* req) override {
    TSR_ROUTE(r, (Buf{sbuf, "sbuf"}), (Buf{rbuf, "rbuf"}));
    if (r != Route::nccl)
      return host_->allgatherv(c, sbuf, count, rbuf, counts, displs, type, r == Route::mpi ? nullptr : req);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    // One broadcast from every rank, at its displacement, in one group.
    return grouped(c, [&](int p) -> ncclResult_t {
      const void* src = p == c.rank() ? sbuf : at(rbuf, static_cast<size_t>(displs[p]), type);
      return ncclBroadcast(src, at(rbuf, static_cast<size_t>(displs[p]), type), static_cast<size_t>(counts[p]),
                           nccl_type(type), p, NC);
    }, "ncclBroadcast (allgatherv)");
#else
    return TSR_SUCCESS;
#endif
  }

  tsr_status allgather(const Comm& c, const void* sbuf, int count, void* rbuf, tsr_dtype type, size_t stride,
                       Request* req) override {
    TSR_ROUTE(r, (Buf{sbuf, "sbuf"}), (Buf{rbuf, "rbuf"}));
    if (r != Route::nccl) return host_->allgather(c, sbuf, count, rbuf, type, stride, r == Route::mpi ? nullptr : req);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    if (stride == static_cast<size_t>(count)) {
      TSR_NCCL(ncclAllGather(sbuf, rbuf, static_cast<size_t>(count), nccl_type(type), NC));
      return TSR_SUCCESS;
    }
    return grouped(c, [&](int p) -> ncclResult_t {
      void* dst = at(rbuf, static_cast<size_t>(p) * stride, type);
      return ncclBroadcast(p == c.rank() ? sbuf : dst, dst, static_cast<size_t>(count), nccl_type(type), p, NC);
    }, "ncclBroadcast (allgather chunk)");
#else
    return TSR_SUCCESS;
#endif
  }

  tsr_status reduce_scatter(const Comm& c, const void* sbuf, void* rbuf, const int* counts, tsr_dtype type, tsr_op op,
                            Request* req) override {
    TSR_ROUTE(r, (Buf{sbuf, "sbuf"}), (Buf{rbuf, "rbuf"}));
    if (r == Route::mpi) TSR_TRY(bf16_mpi(type, "a reduction"));
    if (r != Route::nccl) return host_->reduce_scatter(c, sbuf, rbuf, counts, type, op, r == Route::mpi ? nullptr : req);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    bool even = true;
    for (int p = 1; p < c.size(); ++p) even = even && counts[p] == counts[0];
    if (even) {
      TSR_NCCL(ncclReduceScatter(sbuf, rbuf, static_cast<size_t>(counts[0]), nccl_type(type), nccl_op(op), NC));
      return TSR_SUCCESS;
    }
    std::vector<size_t> off(static_cast<size_t>(c.size()) + 1, 0);
    for (int p = 0; p < c.size(); ++p) off[static_cast<size_t>(p) + 1] = off[static_cast<size_t>(p)] + static_cast<size_t>(counts[p]);
    return grouped(c, [&](int p) -> ncclResult_t {
      return ncclReduce(at(sbuf, off[static_cast<size_t>(p)], type), p == c.rank() ? rbuf : nullptr,
                        static_cast<size_t>(counts[p]), nccl_type(type), nccl_op(op), p, NC);
    }, "ncclReduce (uneven reduce-scatter)");
#else
    return TSR_SUCCESS;
#endif
  }

  tsr_status alltoall(const Comm& c, const void* sbuf, void* rbuf, int count, tsr_dtype type, size_t stride,
                      Request* req) override {
    TSR_ROUTE(r, (Buf{sbuf, "sbuf"}), (Buf{rbuf, "rbuf"}));
    if (r != Route::nccl) return host_->alltoall(c, sbuf, rbuf, count, type, stride, r == Route::mpi ? nullptr : req);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    return grouped_p2p(c, [&](int p, ncclResult_t* rc) {
      *rc = ncclSend(at(sbuf, static_cast<size_t>(p) * stride, type), static_cast<size_t>(count), nccl_type(type), p, NC);
      if (*rc == ncclSuccess)
        *rc = ncclRecv(at(rbuf, static_cast<size_t>(p) * stride, type), static_cast<size_t>(count), nccl_type(type), p, NC);
    }, "ncclSend/ncclRecv (alltoall)");
#else
    return TSR_SUCCESS;
#endif
  }

  tsr_status gather(const Comm& c, const void* sbuf, int count, void* rbuf, tsr_dtype type, int root, size_t stride,
                    Request* req) override {
    const bool is_root = c.rank() == root;
    TSR_ROUTE(r, (Buf{sbuf, "sbuf"}), (Buf{is_root ? rbuf : nullptr, "rbuf"}));
    if (r != Route::nccl) return host_->gather(c, sbuf, count, rbuf, type, root, stride, r == Route::mpi ? nullptr : req);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    return grouped_p2p(c, [&](int p, ncclResult_t* rc) {
      *rc = ncclSuccess;
      if (p == root) *rc = ncclSend(sbuf, static_cast<size_t>(count), nccl_type(type), root, NC);
      if (*rc == ncclSuccess && is_root)
        *rc = ncclRecv(at(rbuf, static_cast<size_t>(p) * stride, type), static_cast<size_t>(count), nccl_type(type), p, NC);
    }, "ncclSend/ncclRecv (gather)");
#else
    return TSR_SUCCESS;
#endif
  }

  tsr_status scatter(const Comm& c, const void* sbuf, int count, void* rbuf, tsr_dtype type, int root, size_t stride,
                     Request* req) override {
    const bool is_root = c.rank() == root;
    TSR_ROUTE(r, (Buf{is_root ? sbuf : nullptr, "sbuf"}), (Buf{rbuf, "rbuf"}));
    if (r != Route::nccl) return host_->scatter(c, sbuf, count, rbuf, type, root, stride, r == Route::mpi ? nullptr : req);
#if TSR_HAVE_NCCL
    TSR_TRY(flush(c, true));
    return grouped_p2p(c, [&](int p, ncclResult_t* rc) {
      *rc = ncclSuccess;
      if (is_root)
        *rc = ncclSend(at(sbuf, static_cast<size_t>(p) * stride, type), static_cast<size_t>(count), nccl_type(type), p, NC);
      if (*rc == ncclSuccess && p == root)
        *rc = ncclRecv(rbuf, static_cast<size_t>(count), nccl_type(type), root, NC);
    }, "ncclSend/ncclRecv (scatter)");
#else
    return TSR_SUCCESS;
#endif
  }

  tsr_status wait(const Comm& c, Request* req) override {
    TSR_TRY(device_done(c, req));
    return host_->wait(c, req);
  }

  tsr_status test(const Comm& c, Request* req, int* done) override {
    TSR_TRY(device_done(c, req));
    return host_->test(c, req, done);
  }

 private:
  // The device part of a request: start the pending group, order the
  // context's stream after it (stream semantics: done once ordered).
  tsr_status device_done(const Comm& c, Request* req) {
    if (c.device() == nullptr || (!req->device && c.device()->pending.empty())) return TSR_SUCCESS;
    device::Guard g(c.context()->cuda_device);
    TSR_TRY(g.status());
    TSR_TRY(flush(c, req->device));
    req->device = false;
    return TSR_SUCCESS;
  }

#if TSR_HAVE_NCCL
  tsr_status post(const Comm& c, bool is_send, void* buf, int count, tsr_dtype type, int peer, Request* req) {
    try {
      c.device()->pending.push_back(DeviceComm::Op{is_send, buf, static_cast<size_t>(count), type, peer});
    } catch (const std::bad_alloc&) {
      return fail(TSR_ERR_NO_MEMORY, "queueing a device %s", is_send ? "send" : "receive");
    }
    req->device = true;
    return TSR_SUCCESS;
  }

  // f(p) for every rank p inside one NCCL group.
  template <class F>
  tsr_status grouped(const Comm& c, F f, const char* what) {
    TSR_NCCL(ncclGroupStart());
    ncclResult_t rc = ncclSuccess;
    for (int p = 0; p < c.size() && rc == ncclSuccess; ++p) rc = f(p);
    const ncclResult_t end = ncclGroupEnd();
    if (rc == ncclSuccess) rc = end;
    return rc == ncclSuccess ? TSR_SUCCESS : nccl_fail(rc, what, c.device()->nccl);
  }
  template <class F>
  tsr_status grouped_p2p(const Comm& c, F f, const char* what) {
    return grouped(c, [&](int p) {
      ncclResult_t rc = ncclSuccess;
      f(p, &rc);
      return rc;
    }, what);
  }
#endif

  MpiBackend* host_;
};

}  // namespace

namespace device {

bool can_move_device(const Comm& c, const char** why) {
  DeviceComm* d = c.device();
  if (d == nullptr) {
    if (why) *why = "it was created before the context was bound to a device (tsr_context_set_device); create grids "
                    "and rings after binding";
    return false;
  }
#if TSR_HAVE_NCCL
  if (d->nccl != nullptr) return true;
#endif
  if (cuda_aware_mpi()) return true;
  if (why) *why = d->why.c_str();
  return false;
}

tsr_status copy(const Comm& c, void* dst, const void* src, size_t n) {
  device::Guard g(c.context()->cuda_device);
  TSR_TRY(g.status());
  TSR_TRY(flush(c, true));
  TSR_CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_of(c)));
  return TSR_SUCCESS;
}

tsr_status start(const Comm& c) { return flush(c, false); }

void detach(Comm& c) { c.set_device(nullptr, nullptr); }

tsr_status attach(Comm& c) {
  tsr_context_s* ctx = c.context();
  detach(c);
  if (ctx->cuda_device < 0) return TSR_SUCCESS;
  device::Guard g(ctx->cuda_device);
  TSR_TRY(g.status());
  if (!ctx->device_backend) {
    ctx->device_backend.reset(new (std::nothrow) DeviceBackend(ctx->backend.get()));
    if (!ctx->device_backend) return fail(TSR_ERR_NO_MEMORY, "allocating the device backend");
  }
  std::shared_ptr<DeviceComm> d;
  try {
    d = std::make_shared<DeviceComm>();
  } catch (const std::bad_alloc&) {
    return fail(TSR_ERR_NO_MEMORY, "allocating a communicator's device state");
  }
  d->device = ctx->cuda_device;
  TSR_CUDA_TRY(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
  TSR_CUDA_TRY(cudaEventCreateWithFlags(&d->ready, cudaEventDisableTiming));
  TSR_CUDA_TRY(cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming));
  d->why = "this tessera was built without NCCL (TSR_WITH_NCCL=OFF) and the MPI library is not CUDA-aware "
           "(MPIX_Query_cuda_support; TSR_CUDA_AWARE_MPI=1 forces it)";
#if TSR_HAVE_NCCL
  // One GPU per rank in an NCCL communicator: find ranks sharing a GPU
  // (same node, same PCI bus id) first (control traffic on c).
  char bus[64] = {0};
  tsr_status local = TSR_SUCCESS;
  const cudaError_t br = cudaDeviceGetPCIBusId(bus, static_cast<int>(sizeof bus) - 1, ctx->cuda_device);
  if (br != cudaSuccess) local = cuda_fail(br, "cudaDeviceGetPCIBusId");
  TSR_TRY(agree(c, local));
  const int64_t mine[2] = {ctx->node_of[static_cast<size_t>(ctx->rank)], hash_bytes(bus, std::strlen(bus))};
  std::vector<int64_t> all(2 * static_cast<size_t>(c.size()));
  TSR_TRY(allgather(c, mine, 2, all.data(), TSR_INT64, nullptr, Traffic::control));
  int shared_with = -1;
  for (int p = 0; p < c.size() && shared_with < 0; ++p)
    for (int q = p + 1; q < c.size(); ++q)
      if (all[2 * static_cast<size_t>(p)] == all[2 * static_cast<size_t>(q)] &&
          all[2 * static_cast<size_t>(p) + 1] == all[2 * static_cast<size_t>(q) + 1]) {
        shared_with = p;
        d->why = "ranks " + std::to_string(p) + " and " + std::to_string(q) + " of the communicator share one GPU, "
                 "which NCCL refuses within a communicator, and the MPI library is not CUDA-aware "
                 "(TSR_CUDA_AWARE_MPI=1 forces it)";
        break;
      }
  if (shared_with < 0) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    local = TSR_SUCCESS;
    if (c.rank() == 0) {
      const ncclResult_t rc = ncclGetUniqueId(&id);
      if (rc != ncclSuccess) local = nccl_fail(rc, "ncclGetUniqueId");
    }
    TSR_TRY(agree(c, local));
    TSR_TRY(bcast(c, &id, sizeof id, TSR_BYTE, 0, nullptr, Traffic::control));
    TSR_NCCL_TRY(ncclCommInitRank(&d->nccl, c.size(), id, c.rank()), nullptr);
  }
#endif
  c.set_device(std::move(d), ctx->device_backend.get());
  return TSR_SUCCESS;
}

}  // namespace device
#endif  // TSR_HAVE_CUDA

}  // namespace tsr

// Backends move bytes; the transport (transport.hpp) decides what to move and
// charges the ledger. A backend implements every primitive for the buffers it
// can reach (host memory for MPI; device memory for NCCL or CUDA-aware MPI).
// req == nullptr means blocking. Counts have been checked to fit an int
// (the transport splits larger transfers into several calls). In the calls
// on buffers of one block per rank (allgather, alltoall, gather, scatter),
// `stride` is the distance in elements between the starts of consecutive
// blocks in the size-rank buffers: count for a whole call, more for one chunk
// of a split call (its count elements of each block).
#pragma once

#include "comm.hpp"
#include "core.hpp"

namespace tsr {

// The MPI datatype of a (valid) tsr_dtype; bfloat16 travels as uint16_t.
inline MPI_Datatype mpi_type(tsr_dtype type) {
  switch (type) {
    case TSR_BYTE: return MPI_UINT8_T;
    case TSR_INT32: return MPI_INT32_T;
    case TSR_INT64: return MPI_INT64_T;
    case TSR_FLOAT32: return MPI_FLOAT;
    case TSR_FLOAT64: return MPI_DOUBLE;
    case TSR_BFLOAT16: return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual tsr_status send(const Comm& c, const void* buf, int count, tsr_dtype type, int peer,
                          int tag, Request* req) = 0;
  virtual tsr_status recv(const Comm& c, void* buf, int count, tsr_dtype type, int peer, int tag,
                          Request* req) = 0;
  virtual tsr_status sendrecv(const Comm& c, const void* sbuf, int scount, int dest, int stag,
                              void* rbuf, int rcount, int source, int rtag, tsr_dtype type) = 0;
  virtual tsr_status barrier(const Comm& c, Request* req) = 0;
  virtual tsr_status bcast(const Comm& c, void* buf, int count, tsr_dtype type, int root,
                           Request* req) = 0;
  virtual tsr_status reduce(const Comm& c, const void* sbuf, void* rbuf, int count, tsr_dtype type,
                            tsr_op op, int root, Request* req) = 0;
  virtual tsr_status allreduce(const Comm& c, const void* sbuf, void* rbuf, int count,
                               tsr_dtype type, tsr_op op, Request* req) = 0;
  virtual tsr_status allgatherv(const Comm& c, const void* sbuf, int count, void* rbuf,
                                const int* counts, const int* displs, tsr_dtype type,
                                Request* req) = 0;
  virtual tsr_status allgather(const Comm& c, const void* sbuf, int count, void* rbuf,
                               tsr_dtype type, size_t stride, Request* req) = 0;
  virtual tsr_status reduce_scatter(const Comm& c, const void* sbuf, void* rbuf, const int* counts,
                                    tsr_dtype type, tsr_op op, Request* req) = 0;
  virtual tsr_status alltoall(const Comm& c, const void* sbuf, void* rbuf, int count,
                              tsr_dtype type, size_t stride, Request* req) = 0;
  virtual tsr_status gather(const Comm& c, const void* sbuf, int count, void* rbuf,
                            tsr_dtype type, int root, size_t stride, Request* req) = 0;
  virtual tsr_status scatter(const Comm& c, const void* sbuf, int count, void* rbuf,
                             tsr_dtype type, int root, size_t stride, Request* req) = 0;
  virtual tsr_status wait(const Comm& c, Request* req) = 0;
  virtual tsr_status test(const Comm& c, Request* req, int* done) = 0;
};

// The host MPI backend. Owns the MPI reduction operator for bfloat16.
class MpiBackend final : public Backend {
 public:
  static tsr_status create(std::unique_ptr<MpiBackend>* out);
  ~MpiBackend() override;
  const char* name() const override { return "mpi"; }
  // Point-to-point is latency-bound: defined here, inline, so that the
  // transport's hot path (transport.hpp) compiles into one MPI call.
  tsr_status send(const Comm& c, const void* buf, int count, tsr_dtype type, int peer, int tag,
                  Request* req) override {
    const int rc = req == nullptr ? MPI_Send(buf, count, mpi_type(type), peer, tag, c.mpi())
                                  : MPI_Isend(buf, count, mpi_type(type), peer, tag, c.mpi(), &req->mpi);
    return rc == MPI_SUCCESS ? TSR_SUCCESS : mpi_fail(rc, req == nullptr ? "MPI_Send" : "MPI_Isend");
  }
  tsr_status recv(const Comm& c, void* buf, int count, tsr_dtype type, int peer, int tag,
                  Request* req) override {
    const int rc = req == nullptr
                       ? MPI_Recv(buf, count, mpi_type(type), peer, tag, c.mpi(), MPI_STATUS_IGNORE)
                       : MPI_Irecv(buf, count, mpi_type(type), peer, tag, c.mpi(), &req->mpi);
    return rc == MPI_SUCCESS ? TSR_SUCCESS : mpi_fail(rc, req == nullptr ? "MPI_Recv" : "MPI_Irecv");
  }
  tsr_status sendrecv(const Comm&, const void*, int, int, int, void*, int, int, int,
                      tsr_dtype) override;
  tsr_status barrier(const Comm&, Request*) override;
  tsr_status bcast(const Comm&, void*, int, tsr_dtype, int, Request*) override;
  tsr_status reduce(const Comm&, const void*, void*, int, tsr_dtype, tsr_op, int, Request*) override;
  tsr_status allreduce(const Comm&, const void*, void*, int, tsr_dtype, tsr_op, Request*) override;
  tsr_status allgatherv(const Comm&, const void*, int, void*, const int*, const int*, tsr_dtype,
                        Request*) override;
  tsr_status allgather(const Comm&, const void*, int, void*, tsr_dtype, size_t, Request*) override;
  tsr_status reduce_scatter(const Comm&, const void*, void*, const int*, tsr_dtype, tsr_op,
                            Request*) override;
  tsr_status alltoall(const Comm&, const void*, void*, int, tsr_dtype, size_t, Request*) override;
  tsr_status gather(const Comm&, const void*, int, void*, tsr_dtype, int, size_t, Request*) override;
  tsr_status scatter(const Comm&, const void*, int, void*, tsr_dtype, int, size_t, Request*) override;
  tsr_status wait(const Comm&, Request*) override;
  tsr_status test(const Comm&, Request*, int*) override;

 private:
  MpiBackend() = default;
  MPI_Op op(tsr_dtype type, tsr_op op) const;
  MPI_Op bf16_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
};

}  // namespace tsr

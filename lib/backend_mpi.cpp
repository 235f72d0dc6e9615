// The host MPI backend: every primitive maps to one MPI call (blocking or
// nonblocking). bfloat16 reductions use user-defined operators that
// accumulate in float.
#include <cstdint>
#include <cstring>
#include <new>

#include "backend.hpp"
#include "core.hpp"

namespace tsr {

namespace {

float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t float_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

template <int Op>
void bf16_op(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = bf16_to_float(a[i]), y = bf16_to_float(b[i]);
    float r = 0;
    switch (Op) {
      case TSR_SUM: r = x + y; break;
      case TSR_PROD: r = x * y; break;
      case TSR_MIN: r = x < y ? x : y; break;
      default: r = x > y ? x : y; break;
    }
    b[i] = float_to_bf16(r);
  }
}

void* in_place(const void* sbuf, void* rbuf) {
  return sbuf == rbuf ? MPI_IN_PLACE : const_cast<void*>(sbuf);
}

// The per-rank block of a size-rank buffer: `count` elements of `type`, the
// next block `stride` elements further. For a whole call (stride == count)
// that is count plain elements; for one chunk of a split call, one element
// of a derived type (count elements, extent stride elements), so that MPI
// sees only int counts and byte displacements (MPI_Aint) however large the
// buffer. Frees the derived type when it goes (MPI keeps it for operations
// in flight).
class Block {
 public:
  Block(tsr_dtype type, int count, size_t stride) : n_(count), t_(mpi_type(type)) {
    if (stride == static_cast<size_t>(count)) return;
    MPI_Datatype contig = MPI_DATATYPE_NULL;
    rc_ = MPI_Type_contiguous(count, mpi_type(type), &contig);
    if (rc_ == MPI_SUCCESS) {
      rc_ = MPI_Type_create_resized(contig, 0, static_cast<MPI_Aint>(stride * tsr_dtype_size(type)), &own_);
      MPI_Type_free(&contig);
    }
    if (rc_ == MPI_SUCCESS) rc_ = MPI_Type_commit(&own_);
    t_ = own_;
    n_ = 1;
  }
  ~Block() {
    if (own_ != MPI_DATATYPE_NULL) MPI_Type_free(&own_);
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  int rc() const { return rc_; }
  int count() const { return n_; }
  MPI_Datatype type() const { return t_; }

 private:
  int n_;
  MPI_Datatype t_;
  MPI_Datatype own_ = MPI_DATATYPE_NULL;
  int rc_ = MPI_SUCCESS;
};

#define TSR_BLOCK(b, type, count, stride)                                     \
  Block b(type, count, stride);                                               \
  if (b.rc() != MPI_SUCCESS) return mpi_fail(b.rc(), "MPI_Type_create_resized")

}  // namespace

#define TSR_MPI_CALL(blocking, nonblocking)                        \
  do {                                                             \
    int rc_ = req == nullptr ? (blocking) : (nonblocking);         \
    if (rc_ != MPI_SUCCESS) return mpi_fail(rc_, req == nullptr ? #blocking : #nonblocking); \
    return TSR_SUCCESS;                                            \
  } while (0)

tsr_status MpiBackend::create(std::unique_ptr<MpiBackend>* out) {
  std::unique_ptr<MpiBackend> b(new (std::nothrow) MpiBackend());
  if (!b) return fail(TSR_ERR_NO_MEMORY, "allocating the MPI backend");
  MPI_User_function* fns[4] = {bf16_op<TSR_SUM>, bf16_op<TSR_PROD>, bf16_op<TSR_MIN>, bf16_op<TSR_MAX>};
  for (int i = 0; i < 4; ++i) TSR_MPI_TRY(MPI_Op_create(fns[i], 1, &b->bf16_ops_[i]));
  *out = std::move(b);
  return TSR_SUCCESS;
}

MpiBackend::~MpiBackend() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Op& o : bf16_ops_)
    if (o != MPI_OP_NULL) MPI_Op_free(&o);
}

MPI_Op MpiBackend::op(tsr_dtype type, tsr_op o) const {
  if (type == TSR_BFLOAT16) return bf16_ops_[o];
  switch (o) {
    case TSR_SUM: return MPI_SUM;
    case TSR_PROD: return MPI_PROD;
    case TSR_MIN: return MPI_MIN;
    case TSR_MAX: return MPI_MAX;
  }
  return MPI_OP_NULL;
}

tsr_status MpiBackend::sendrecv(const Comm& c, const void* sbuf, int scount, int dest, int stag, void* rbuf,
                                int rcount, int source, int rtag, tsr_dtype type) {
  if (sbuf == rbuf) {  // in place: MPI forbids overlapping send and receive buffers
    TSR_MPI_TRY(MPI_Sendrecv_replace(rbuf, rcount, mpi_type(type), dest, stag, source, rtag, c.mpi(),
                                     MPI_STATUS_IGNORE));
    return TSR_SUCCESS;
  }
  TSR_MPI_TRY(MPI_Sendrecv(sbuf, scount, mpi_type(type), dest, stag, rbuf, rcount, mpi_type(type), source, rtag,
                           c.mpi(), MPI_STATUS_IGNORE));
  return TSR_SUCCESS;
}

tsr_status MpiBackend::barrier(const Comm& c, Request* req) {
  TSR_MPI_CALL(MPI_Barrier(c.mpi()), MPI_Ibarrier(c.mpi(), &req->mpi));
}

tsr_status MpiBackend::bcast(const Comm& c, void* buf, int count, tsr_dtype type, int root, Request* req) {
  TSR_MPI_CALL(MPI_Bcast(buf, count, mpi_type(type), root, c.mpi()),
               MPI_Ibcast(buf, count, mpi_type(type), root, c.mpi(), &req->mpi));
}

tsr_status MpiBackend::reduce(const Comm& c, const void* sbuf, void* rbuf, int count, tsr_dtype type, tsr_op o,
                              int root, Request* req) {
  const void* s = c.rank() == root ? in_place(sbuf, rbuf) : sbuf;
  TSR_MPI_CALL(MPI_Reduce(s, rbuf, count, mpi_type(type), op(type, o), root, c.mpi()),
               MPI_Ireduce(s, rbuf, count, mpi_type(type), op(type, o), root, c.mpi(), &req->mpi));
}

tsr_status MpiBackend::allreduce(const Comm& c, const void* sbuf, void* rbuf, int count, tsr_dtype type, tsr_op o,
                                 Request* req) {
  const void* s = in_place(sbuf, rbuf);
  TSR_MPI_CALL(MPI_Allreduce(s, rbuf, count, mpi_type(type), op(type, o), c.mpi()),
               MPI_Iallreduce(s, rbuf, count, mpi_type(type), op(type, o), c.mpi(), &req->mpi));
}

tsr_status MpiBackend::allgatherv(const Comm& c, const void* sbuf, int count, void* rbuf, const int* counts,
                                  const int* displs, tsr_dtype type, Request* req) {
  const size_t e = tsr_dtype_size(type);
  const void* s = static_cast<const char*>(rbuf) + static_cast<size_t>(displs[c.rank()]) * e == sbuf
                      ? MPI_IN_PLACE : sbuf;
  TSR_MPI_CALL(MPI_Allgatherv(s, count, mpi_type(type), rbuf, counts, displs, mpi_type(type), c.mpi()),
               MPI_Iallgatherv(s, count, mpi_type(type), rbuf, counts, displs, mpi_type(type), c.mpi(), &req->mpi));
}

tsr_status MpiBackend::allgather(const Comm& c, const void* sbuf, int count, void* rbuf, tsr_dtype type,
                                 size_t stride, Request* req) {
  const size_t e = tsr_dtype_size(type);
  const void* s = static_cast<const char*>(rbuf) + static_cast<size_t>(c.rank()) * stride * e == sbuf
                      ? MPI_IN_PLACE : sbuf;
  TSR_BLOCK(b, type, count, stride);
  TSR_MPI_CALL(MPI_Allgather(s, count, mpi_type(type), rbuf, b.count(), b.type(), c.mpi()),
               MPI_Iallgather(s, count, mpi_type(type), rbuf, b.count(), b.type(), c.mpi(), &req->mpi));
}

tsr_status MpiBackend::reduce_scatter(const Comm& c, const void* sbuf, void* rbuf, const int* counts, tsr_dtype type,
                                      tsr_op o, Request* req) {
  TSR_MPI_CALL(MPI_Reduce_scatter(sbuf, rbuf, counts, mpi_type(type), op(type, o), c.mpi()),
               MPI_Ireduce_scatter(sbuf, rbuf, counts, mpi_type(type), op(type, o), c.mpi(), &req->mpi));
}

tsr_status MpiBackend::alltoall(const Comm& c, const void* sbuf, void* rbuf, int count, tsr_dtype type,
                                size_t stride, Request* req) {
  TSR_BLOCK(b, type, count, stride);
  TSR_MPI_CALL(MPI_Alltoall(sbuf, b.count(), b.type(), rbuf, b.count(), b.type(), c.mpi()),
               MPI_Ialltoall(sbuf, b.count(), b.type(), rbuf, b.count(), b.type(), c.mpi(), &req->mpi));
}

tsr_status MpiBackend::gather(const Comm& c, const void* sbuf, int count, void* rbuf, tsr_dtype type, int root,
                              size_t stride, Request* req) {
  TSR_BLOCK(b, type, count, stride);
  TSR_MPI_CALL(MPI_Gather(sbuf, count, mpi_type(type), rbuf, b.count(), b.type(), root, c.mpi()),
               MPI_Igather(sbuf, count, mpi_type(type), rbuf, b.count(), b.type(), root, c.mpi(), &req->mpi));
}

tsr_status MpiBackend::scatter(const Comm& c, const void* sbuf, int count, void* rbuf, tsr_dtype type, int root,
                               size_t stride, Request* req) {
  TSR_BLOCK(b, type, count, stride);
  TSR_MPI_CALL(MPI_Scatter(sbuf, b.count(), b.type(), rbuf, count, mpi_type(type), root, c.mpi()),
               MPI_Iscatter(sbuf, b.count(), b.type(), rbuf, count, mpi_type(type), root, c.mpi(), &req->mpi));
}

tsr_status MpiBackend::wait(const Comm&, Request* req) {
  if (req->mpi != MPI_REQUEST_NULL) TSR_MPI_TRY(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE));
  if (!req->parts.empty()) {
    TSR_MPI_TRY(MPI_Waitall(static_cast<int>(req->parts.size()), req->parts.data(), MPI_STATUSES_IGNORE));
    req->parts.clear();
  }
  return TSR_SUCCESS;
}

tsr_status MpiBackend::test(const Comm&, Request* req, int* done) {
  *done = 1;
  if (req->mpi != MPI_REQUEST_NULL) TSR_MPI_TRY(MPI_Test(&req->mpi, done, MPI_STATUS_IGNORE));
  if (*done && !req->parts.empty()) {
    TSR_MPI_TRY(MPI_Testall(static_cast<int>(req->parts.size()), req->parts.data(), done, MPI_STATUSES_IGNORE));
    if (*done) req->parts.clear();
  }
  return TSR_SUCCESS;
}

}  // namespace tsr

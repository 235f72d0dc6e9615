// The GEMM engines: three-phase (1D and 3D: all-gather, local GEMM,
// reduce-scatter) and SUMMA (2D and 2.5D: broadcast panels, double-buffered,
// reduce along the depth). Every byte moves through the transport; local
// GEMMs through CBLAS on host buffers, cuBLAS on device buffers (the "local
// ops" below). The traffic is exactly gemm_core's schedule() on both.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "blas_int.hpp"
#include "core.hpp"
#include "gemm_internal.hpp"
#include "tessera/tsr_config.h"
#include "transport.hpp"

#if TSR_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <type_traits>

#include "cuda_util.hpp"
#include "gemm_cuda.hpp"
#endif

namespace tsr {
namespace gemm {
namespace {

// ------------------------------------------------------------- local ops
// The engines below are written once over a small "local ops" seam: where
// temporaries come from, 2D copies, the local product, C = beta C and
// C = beta C + R. HostOps: the context's host pool, memcpy and CBLAS (In =
// Out = float or double). DevOps (a context bound to a CUDA device, device
// buffers): one stream-ordered device block, cudaMemcpy2DAsync, cuBLAS
// (float32 or bfloat16 inputs, float32 accumulation and C) and two small
// kernels, all on the context's stream. The transport calls are the same;
// the device transport routes device buffers to NCCL or CUDA-aware MPI.

template <class T>
void host_copy(void* dst, int64_t dld, const void* src, int64_t sld, int64_t rows, int64_t cols) {
  if (rows <= 0) return;
  for (int64_t j = 0; j < cols; ++j)
    std::memcpy(static_cast<T*>(dst) + j * dld, static_cast<const T*>(src) + j * sld,
                static_cast<size_t>(rows) * sizeof(T));
}

template <class T>
struct HostOps {
  using In = T;
  using Out = T;
  static constexpr bool kDevice = false;
  Arena& arena;
  explicit HostOps(Arena& a) : arena(a) {}
  template <class U>
  U* take(size_t n) {
    return arena.take<U>(n);
  }
  template <class U>
  U* nz(U* p) const {
    return p;
  }
  template <class U>
  tsr_status copy(U* dst, int64_t dld, const U* src, int64_t sld, int64_t rows, int64_t cols) {
    host_copy<U>(dst, dld, src, sld, rows, cols);
    return TSR_SUCCESS;
  }
  // C = beta C (beta = 0: C = 0 without reading it).
  tsr_status scale(T* c, int64_t ldc, int64_t rows, int64_t cols, double b) {
    const T beta = static_cast<T>(b);
    if (beta == T(1)) return TSR_SUCCESS;
    for (int64_t j = 0; j < cols; ++j) {
      T* col = c + j * ldc;
      if (beta == T(0))
        std::fill(col, col + rows, T(0));
      else
        for (int64_t i = 0; i < rows; ++i) col[i] *= beta;
    }
    return TSR_SUCCESS;
  }
  // C = beta C + R (beta = 0: C = R).
  tsr_status axpby(T* c, int64_t ldc, int64_t rows, int64_t cols, double b, const T* r, int64_t ldr) {
    const T beta = static_cast<T>(b);
    for (int64_t j = 0; j < cols; ++j) {
      T* cc = c + j * ldc;
      const T* rr = r + j * ldr;
      if (beta == T(0))
        std::memcpy(cc, rr, static_cast<size_t>(rows) * sizeof(T));
      else
        for (int64_t i = 0; i < rows; ++i) cc[i] = beta * cc[i] + rr[i];
    }
    return TSR_SUCCESS;
  }
  // C (m x n) = alpha op(A) op(B) + beta C, or C = beta C when k = 0. CBLAS
  // in blocks that fit its int sizes (blas_int.hpp): never truncated.
  tsr_status gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a, int64_t lda, const T* b,
                  int64_t ldb, double beta, T* c, int64_t ldc) {
    if (m == 0 || n == 0) return TSR_SUCCESS;
    if (k == 0) return scale(c, ldc, m, n, beta);
    if (m < 0 || n < 0) return TSR_SUCCESS;
    blas_gemm(ta, tb, m, n, k, static_cast<T>(alpha), a, std::max<int64_t>(1, lda), b, std::max<int64_t>(1, ldb),
              static_cast<T>(beta), c, std::max<int64_t>(1, ldc));
    return TSR_SUCCESS;
  }
};

const Comm& axis(tsr_grid g, int dim) {
  static const tsr_grid_axis kAxis[3] = {TSR_AXIS_COL, TSR_AXIS_ROW, TSR_AXIS_DEPTH};
  return *g->comms[kAxis[dim]];
}

Range role_range(int64_t n, const Dims& dims, int role, const Dims& c) {
  return role >= 0 ? balanced(n, dims[static_cast<size_t>(role)], c[static_cast<size_t>(role)]) : Range{0, n};
}

// A stored operand as the local GEMMs see it: a column-major block with
// leading dimension ld whose element (0, 0) is global (r0, c0).
template <class T>
struct Block {
  const T* p = nullptr;
  int64_t ld = 1, r0 = 0, c0 = 0;
  const T* at(int64_t r, int64_t c) const { return p + (r - r0) + (c - c0) * ld; }
};

// What gathering an operand along grid dimension g takes from the pool
// (elements): a tight copy of the local block if its ld is padded, the
// received pieces, and their interleaving when g splits rows.
struct GatherWork {
  size_t pack = 0, recv = 0, unpack = 0;
};
GatherWork gather_work(const Dist& d, int64_t srows, int64_t scols, int g) {
  GatherWork w;
  if (g < 0 || !d.lay.uses(g)) return w;
  const Dims& co = d.coords;
  const Range lr = share(d.lay.rows, srows, co), lc = share(d.lay.cols, scols, co);
  const Range gr = share(d.lay.rows, srows, co, g), gc = share(d.lay.cols, scols, co, g);
  w.recv = static_cast<size_t>(gr.len * gc.len);
  if (w.recv == 0) return w;
  if (lr.len * lc.len > 0 && d.ld != lr.len) w.pack = static_cast<size_t>(lr.len * lc.len);
  if (!d.lay.cols.has(g)) w.unpack = w.recv;
  return w;
}

// The operand's block after an all-gather along grid dimension g (if its
// layout splits along g), else its local block.
template <class T, class Ops>
tsr_status operand(tsr_grid grid, const Dist& d, int64_t srows, int64_t scols, const void* buf, int g, Ops& ops,
                   Block<T>* out) {
  const Dims& co = d.coords;
  const Range lr = share(d.lay.rows, srows, co), lc = share(d.lay.cols, scols, co);
  if (g < 0 || !d.lay.uses(g)) {
    out->p = static_cast<const T*>(buf);
    out->ld = d.ld;
    out->r0 = lr.off;
    out->c0 = lc.off;
    return TSR_SUCCESS;
  }
  const GatherWork need = gather_work(d, srows, scols, g);
  const int parts = d.dims[static_cast<size_t>(g)];
  std::vector<size_t> counts(static_cast<size_t>(parts)), displs(static_cast<size_t>(parts));
  std::vector<int64_t> prow(static_cast<size_t>(parts));
  size_t sum = 0;
  Dims x = co;
  for (int z = 0; z < parts; ++z) {
    x[static_cast<size_t>(g)] = z;
    const Range r = share(d.lay.rows, srows, x), c = share(d.lay.cols, scols, x);
    counts[static_cast<size_t>(z)] = static_cast<size_t>(r.len * c.len);
    displs[static_cast<size_t>(z)] = sum;
    prow[static_cast<size_t>(z)] = r.len;
    sum += counts[static_cast<size_t>(z)];
  }
  const Range gr = share(d.lay.rows, srows, co, g), gc = share(d.lay.cols, scols, co, g);
  out->r0 = gr.off;
  out->c0 = gc.off;
  out->ld = std::max<int64_t>(1, gr.len);
  if (sum == 0) return TSR_SUCCESS;
  if (sum > static_cast<size_t>(INT_MAX))
    return fail(TSR_ERR_UNSUPPORTED, "a gathered block of %zu elements exceeds INT_MAX", sum);
  const T* send = static_cast<const T*>(buf);
  if (need.pack > 0) {
    T* tight = ops.template take<T>(need.pack);
    TSR_TRY(ops.copy(tight, lr.len, send, d.ld, lr.len, lc.len));
    send = tight;
  }
  T* recv = ops.template take<T>(need.recv);
  TSR_TRY(allgatherv(axis(grid, g), ops.nz(send), static_cast<size_t>(lr.len * lc.len), ops.nz(recv), counts.data(), displs.data(),
                     dtype_of<T>::value));
  if (need.unpack == 0) {
    out->p = recv;  // column pieces in order: already the tight block
    return TSR_SUCCESS;
  }
  // Row pieces: interleave them into one tight block.
  T* block = ops.template take<T>(need.unpack);
  int64_t roff = 0;
  for (int z = 0; z < parts; ++z) {
    const int64_t rz = prow[static_cast<size_t>(z)];
    const T* src = recv + displs[static_cast<size_t>(z)];
    TSR_TRY(ops.copy(block + roff, gr.len, src, std::max<int64_t>(1, rz), rz, gc.len));
    roff += rz;
  }
  out->p = block;
  return TSR_SUCCESS;
}

// What reducing C along kd takes from the pool (elements): the packed row
// chunks (when kd splits C's rows) and this rank's reduced piece (unless it
// lands in C directly: beta = 0 and a tight C).
struct ReduceWork {
  size_t packed = 0, piece = 0;
};
ReduceWork reduce_work(const Call& x, int kd, const Range& mr, const Range& nr) {
  ReduceWork w;
  const Dist& C = *x.c;
  if (kd < 0 || mr.len * nr.len == 0) return w;
  if (!C.lay.uses(kd)) return w;
  if (C.lay.rows.has(kd)) w.packed = static_cast<size_t>(mr.len * nr.len);
  if (!(x.beta == 0 && C.ld == std::max<int64_t>(1, C.rows))) w.piece = static_cast<size_t>(C.rows * C.cols);
  return w;
}

// C's local block = beta C + (the sum over grid dimension kd of the partial
// products W, m_i x n_j, tight): reduce-scatter if C is split along kd,
// all-reduce if C holds copies along it.
template <class Ops, class T = typename Ops::Out>
tsr_status reduce_c(const Call& x, int kd, T* w, const Range& mr, const Range& nr, Ops& ops) {
  const Dist& C = *x.c;
  const Dims& co = C.coords;
  T* c = static_cast<T*>(x.cbuf);
  const double beta = x.beta;
  const Comm& comm = axis(x.grid, kd);
  const size_t wn = static_cast<size_t>(mr.len * nr.len);
  if (!C.lay.uses(kd)) {
    if (wn == 0) return TSR_SUCCESS;
    TSR_TRY(allreduce(comm, w, w, wn, dtype_of<T>::value, TSR_SUM));
    return ops.axpby(c, C.ld, mr.len, nr.len, beta, w, std::max<int64_t>(1, mr.len));
  }
  const int parts = C.dims[static_cast<size_t>(kd)];
  std::vector<size_t> counts(static_cast<size_t>(parts));
  std::vector<Range> rows(static_cast<size_t>(parts));
  size_t sum = 0;
  Dims y = co;
  for (int z = 0; z < parts; ++z) {
    y[static_cast<size_t>(kd)] = z;
    const Range r = share(C.lay.rows, x.shape.m, y), cc = share(C.lay.cols, x.shape.n, y);
    rows[static_cast<size_t>(z)] = r;
    counts[static_cast<size_t>(z)] = static_cast<size_t>(r.len * cc.len);
    sum += counts[static_cast<size_t>(z)];
  }
  if (sum == 0) return TSR_SUCCESS;
  const ReduceWork need = reduce_work(x, kd, mr, nr);
  const T* send = w;
  if (need.packed > 0) {
    // Row chunks: pack W chunk by chunk.
    T* packed = ops.template take<T>(need.packed);
    size_t off = 0;
    for (int z = 0; z < parts; ++z) {
      const Range r = rows[static_cast<size_t>(z)];
      TSR_TRY(ops.copy(packed + off, std::max<int64_t>(1, r.len), w + (r.off - mr.off), std::max<int64_t>(1, mr.len),
                       r.len, nr.len));
      off += static_cast<size_t>(r.len * nr.len);
    }
    send = packed;
  }
  if (need.piece == 0) return reduce_scatterv(comm, ops.nz(send), ops.nz(c), counts.data(), dtype_of<T>::value, TSR_SUM);
  T* r = ops.template take<T>(need.piece);
  TSR_TRY(reduce_scatterv(comm, ops.nz(send), ops.nz(r), counts.data(), dtype_of<T>::value, TSR_SUM));
  return ops.axpby(c, C.ld, C.rows, C.cols, beta, r, std::max<int64_t>(1, C.rows));
}

template <class Ops>
tsr_status three_phase(const Call& x, Ops& ops) {
  using T = typename Ops::In;
  using O = typename Ops::Out;
  const Shape& s = x.shape;
  const Roles& r = x.roles;
  const Dist &A = *x.a, &B = *x.b, &C = *x.c;
  const Dims& co = C.coords;
  const Dims& dims = C.dims;
  const Range mr = role_range(s.m, dims, r.m, co), nr = role_range(s.n, dims, r.n, co),
              kr = role_range(s.k, dims, r.k, co);
  Block<T> a, b;
  TSR_TRY(operand<T>(x.grid, A, s.ta ? s.k : s.m, s.ta ? s.m : s.k, x.abuf, r.n, ops, &a));
  TSR_TRY(operand<T>(x.grid, B, s.tb ? s.n : s.k, s.tb ? s.k : s.n, x.bbuf, r.m, ops, &b));
  const double alpha = x.alpha, beta = x.beta;
  const bool work = mr.len > 0 && nr.len > 0 && kr.len > 0;
  const T* pa = work ? (s.ta ? a.at(kr.off, mr.off) : a.at(mr.off, kr.off)) : nullptr;
  const T* pb = work ? (s.tb ? b.at(nr.off, kr.off) : b.at(kr.off, nr.off)) : nullptr;
  if (r.k < 0)
    return ops.gemm(s.ta, s.tb, mr.len, nr.len, kr.len, alpha, pa, a.ld, pb, b.ld, beta, static_cast<O*>(x.cbuf), C.ld);
  O* w = ops.template take<O>(static_cast<size_t>(mr.len * nr.len));
  TSR_TRY(ops.gemm(s.ta, s.tb, mr.len, nr.len, kr.len, alpha, pa, a.ld, pb, b.ld, 0.0, w, std::max<int64_t>(1, mr.len)));
  return reduce_c(x, r.k, w, mr, nr, ops);
}

// One SUMMA panel in flight: op(A)'s m_i x w and op(B)'s w x n_j pieces.
// One operand's panel of a SUMMA step, in its stored orientation (rows x
// cols): the root of the broadcast along comm (or every rank, when comm is
// null) uses its stored piece src (leading dimension ld) in place when that
// is contiguous or nothing travels, else packs it into buf; the others
// receive into buf. *out and *ldo say where the panel is.
template <class T, class Ops>
tsr_status post_panel(Ops& ops, const Comm* comm, bool root, int from, const T* src, int64_t ld, int64_t rows,
                      int64_t cols, T* buf, const T** out, int64_t* ldo, Request* req) {
  if (root && (comm == nullptr || ld == rows || cols <= 1)) {
    *out = src;
    *ldo = ld;
  } else {
    if (root) TSR_TRY(ops.copy(buf, std::max<int64_t>(1, rows), src, ld, rows, cols));
    *out = buf;
    *ldo = std::max<int64_t>(1, rows);
  }
  const size_t count = static_cast<size_t>(rows * cols);
  if (comm && count > 0) TSR_TRY(bcast(*comm, ops.nz(const_cast<T*>(*out)), count, dtype_of<T>::value, from, req));
  return TSR_SUCCESS;
}

template <class T>
struct Slot {
  T* abuf = nullptr;
  T* bbuf = nullptr;
  const T* a = nullptr;
  const T* b = nullptr;
  int64_t lda = 1, ldb = 1;
  Request ra, rb;
};

template <class Ops>
tsr_status summa(const Call& x, Ops& ops) {
  using T = typename Ops::In;
  using O = typename Ops::Out;
  const Shape& s = x.shape;
  const Roles& r = x.roles;
  const Dist &A = *x.a, &B = *x.b, &C = *x.c;
  const Dims& co = C.coords;
  const Dims& dims = C.dims;
  const int d = r.k;
  const int pm = r.m >= 0 ? dims[static_cast<size_t>(r.m)] : 1, pn = r.n >= 0 ? dims[static_cast<size_t>(r.n)] : 1;
  const int pd = d >= 0 ? dims[static_cast<size_t>(d)] : 1, layer = d >= 0 ? co[static_cast<size_t>(d)] : 0;
  const Range mr = role_range(s.m, dims, r.m, co), nr = role_range(s.n, dims, r.n, co);

  // Replicate A and B along the depth (if they are split along it).
  Block<T> a, b;
  TSR_TRY(operand<T>(x.grid, A, s.ta ? s.k : s.m, s.ta ? s.m : s.k, x.abuf, d, ops, &a));
  TSR_TRY(operand<T>(x.grid, B, s.tb ? s.n : s.k, s.tb ? s.k : s.n, x.bbuf, d, ops, &b));

  const std::vector<Panel> all = panels(s.k, pm, pn, x.panel);
  const Range mine = layer_panels(all.size(), pd, layer);
  int64_t wmax = 0;
  for (int64_t t = mine.off; t < mine.end(); ++t) wmax = std::max(wmax, all[static_cast<size_t>(t)].w);

  // Where the products go: C itself, or W when the layers' sums meet later.
  const double alpha = x.alpha, beta = x.beta;
  O* w = nullptr;
  O* tgt = static_cast<O*>(x.cbuf);
  int64_t ldt = C.ld;
  double tbeta = beta;
  if (d >= 0) {
    w = ops.template take<O>(static_cast<size_t>(mr.len * nr.len));
    tgt = w;
    ldt = std::max<int64_t>(1, mr.len);
    tbeta = 0.0;
  }

  Slot<T> slot[2];
  for (Slot<T>& sl : slot) {
    sl.abuf = ops.template take<T>(static_cast<size_t>(mr.len * wmax));
    sl.bbuf = ops.template take<T>(static_cast<size_t>(wmax * nr.len));
  }
  const Comm* arow = r.n >= 0 ? &axis(x.grid, r.n) : nullptr;  // A's panels travel along n's dimension
  const Comm* bcol = r.m >= 0 ? &axis(x.grid, r.m) : nullptr;  // B's along m's

  auto post = [&](int64_t t, Slot<T>& sl, bool nonblocking) -> tsr_status {
    const Panel& p = all[static_cast<size_t>(t)];
    // op(A) panel: rows mr, k-columns [k0, k0 + w), along n's dimension.
    const bool aroot = r.n < 0 || co[static_cast<size_t>(r.n)] == p.a_root;
    const T* asrc = aroot && mr.len > 0 ? (s.ta ? a.at(p.k0, mr.off) : a.at(mr.off, p.k0)) : nullptr;
    TSR_TRY(post_panel(ops, arow, aroot, p.a_root, asrc, a.ld, s.ta ? p.w : mr.len, s.ta ? mr.len : p.w, sl.abuf,
                       &sl.a, &sl.lda, nonblocking ? &sl.ra : nullptr));
    // op(B) panel: k-rows [k0, k0 + w), columns nr, along m's dimension.
    const bool broot = r.m < 0 || co[static_cast<size_t>(r.m)] == p.b_root;
    const T* bsrc = broot && nr.len > 0 ? (s.tb ? b.at(nr.off, p.k0) : b.at(p.k0, nr.off)) : nullptr;
    TSR_TRY(post_panel(ops, bcol, broot, p.b_root, bsrc, b.ld, s.tb ? nr.len : p.w, s.tb ? p.w : nr.len, sl.bbuf,
                       &sl.b, &sl.ldb, nonblocking ? &sl.rb : nullptr));
    return TSR_SUCCESS;
  };
  auto finish_slot = [&](Slot<T>& sl) -> tsr_status {
    if (sl.ra.active()) TSR_TRY(wait(*arow, &sl.ra));
    if (sl.rb.active()) TSR_TRY(wait(*bcol, &sl.rb));
    return TSR_SUCCESS;
  };
  // Progress the next panel's broadcasts between column chunks of this GEMM
  // (MPI progresses nonblocking collectives only inside MPI calls).
  auto poke = [&](Slot<T>& sl) {
    int done = 0;
    if (sl.ra.active()) (void)test(*arow, &sl.ra, &done);
    if (sl.rb.active()) (void)test(*bcol, &sl.rb, &done);
  };

  bool first = true;
  tsr_status st = TSR_SUCCESS;
  if (mine.len > 0) st = post(mine.off, slot[0], x.overlap);
  for (int64_t t = mine.off; t < mine.end() && st == TSR_SUCCESS; ++t) {
    Slot<T>& cur = slot[(t - mine.off) % 2];
    Slot<T>& nxt = slot[(t - mine.off + 1) % 2];
    st = finish_slot(cur);
    if (st != TSR_SUCCESS) break;
    const bool more = t + 1 < mine.end();
    if (more && x.overlap) {
      st = post(t + 1, nxt, true);
      if (st != TSR_SUCCESS) break;
    }
    const Panel& p = all[static_cast<size_t>(t)];
    const double bt = first ? tbeta : 1.0;
    // Host: column chunks with MPI progress between them. Device: one
    // product (the broadcasts are already queued on the stream).
    const bool pending = more && x.overlap && !Ops::kDevice;
    const int64_t chunks = pending ? std::max<int64_t>(1, std::min<int64_t>(8, nr.len / 256)) : 1;
    for (int64_t q = 0; q < chunks && st == TSR_SUCCESS; ++q) {
      const Range cc = balanced(nr.len, chunks, q);
      const T* pb = cur.b ? (s.tb ? cur.b + cc.off : cur.b + cc.off * cur.ldb) : nullptr;
      st = ops.gemm(s.ta, s.tb, mr.len, cc.len, p.w, alpha, cur.a, cur.lda, pb, cur.ldb, bt, tgt + cc.off * ldt, ldt);
      if (pending) poke(nxt);
    }
    if (st != TSR_SUCCESS) break;
    first = false;
    if (more && !x.overlap) st = post(t + 1, nxt, false);
  }
  if (st != TSR_SUCCESS) {
    for (Slot<T>& sl : slot) (void)finish_slot(sl);
    return st;
  }
  if (first && mr.len > 0 && nr.len > 0) TSR_TRY(ops.scale(tgt, ldt, mr.len, nr.len, tbeta));
  if (d >= 0) return reduce_c(x, d, w, mr, nr, ops);
  return TSR_SUCCESS;
}

}  // namespace

// The widest SUMMA panel this rank's layer runs.
int64_t summa_wmax(const Call& x) {
  const Roles& r = x.roles;
  const Dist& C = *x.c;
  const Dims& dims = C.dims;
  const int pm = r.m >= 0 ? dims[static_cast<size_t>(r.m)] : 1, pn = r.n >= 0 ? dims[static_cast<size_t>(r.n)] : 1;
  const int pd = r.k >= 0 ? dims[static_cast<size_t>(r.k)] : 1, l = r.k >= 0 ? C.coords[static_cast<size_t>(r.k)] : 0;
  const std::vector<Panel> all = panels(x.shape.k, pm, pn, x.panel);
  const Range mine = layer_panels(all.size(), pd, l);
  int64_t wmax = 0;
  for (int64_t t = mine.off; t < mine.end(); ++t) wmax = std::max(wmax, all[static_cast<size_t>(t)].w);
  return wmax;
}

size_t work_bytes(const Call& x) {
  const Shape& s = x.shape;
  const Roles& r = x.roles;
  const Dist &A = *x.a, &B = *x.b, &C = *x.c;
  if (!C.member) return 0;
  const Dims& co = C.coords;
  const Dims& dims = C.dims;
  // Gathered operands and panels in the inputs' type, W and C's pieces in
  // C's (they differ for bfloat16 inputs with float32 C, device only).
  const size_t esi = tsr_dtype_size(A.type), eso = tsr_dtype_size(C.type);
  const Range mr = role_range(s.m, dims, r.m, co), nr = role_range(s.n, dims, r.n, co);
  const bool three = engine_of(x.algo) == Engine::three_phase;
  const int ga = three ? r.n : r.k, gb = three ? r.m : r.k, kd = r.k;
  size_t bytes = 0;
  auto add = [&](size_t elems, size_t es) { bytes += elems ? padded(elems * es) : 0; };
  for (const GatherWork& g : {gather_work(A, s.ta ? s.k : s.m, s.ta ? s.m : s.k, ga),
                              gather_work(B, s.tb ? s.n : s.k, s.tb ? s.k : s.n, gb)}) {
    add(g.pack, esi);
    add(g.recv, esi);
    add(g.unpack, esi);
  }
  if (kd >= 0) add(static_cast<size_t>(mr.len * nr.len), eso);  // W
  if (!three) {
    const int64_t wmax = summa_wmax(x);
    for (int sl = 0; sl < 2; ++sl) {
      add(static_cast<size_t>(mr.len * wmax), esi);
      add(static_cast<size_t>(wmax * nr.len), esi);
    }
  }
  const ReduceWork rw = reduce_work(x, kd, mr, nr);
  add(rw.packed, eso);
  add(rw.piece, eso);
  return bytes;
}

tsr_status count_limits(const Call& x) {
  const Shape& s = x.shape;
  const Roles& r = x.roles;
  const Dist &A = *x.a, &B = *x.b, &C = *x.c;
  if (!C.member) return TSR_SUCCESS;
  const Range mr = role_range(s.m, C.dims, r.m, C.coords), nr = role_range(s.n, C.dims, r.n, C.coords);
  const bool three = engine_of(x.algo) == Engine::three_phase;
  const int ga = three ? r.n : r.k, gb = three ? r.m : r.k;
  const size_t a = gather_work(A, s.ta ? s.k : s.m, s.ta ? s.m : s.k, ga).recv;
  const size_t b = gather_work(B, s.tb ? s.n : s.k, s.tb ? s.k : s.n, gb).recv;
  const int64_t wmax = three ? 0 : summa_wmax(x);
  const size_t panel_a = static_cast<size_t>(mr.len * wmax), panel_b = static_cast<size_t>(wmax * nr.len);
  const size_t w = static_cast<size_t>(mr.len * nr.len);
  const size_t biggest = std::max({a, b, w, three ? size_t(0) : std::max(panel_a, panel_b)});
  if (biggest > static_cast<size_t>(INT_MAX))
    return fail(TSR_ERR_UNSUPPORTED, "this rank would move a block of %zu elements in one message, over MPI's INT_MAX "
                "counts: use more ranks%s", biggest, three ? "" : " or a panel width (tsr_gemm_options.panel)");
  return TSR_SUCCESS;
}

namespace {
template <class Ops>
tsr_status run_engine(const Call& x, Ops& ops) {
  return engine_of(x.algo) == Engine::three_phase ? three_phase(x, ops) : summa(x, ops);
}
}  // namespace

#if TSR_HAVE_CUDA
namespace {
// The context's device workspace (in its GEMM pool): one cudaMalloc block
// that grows to the largest call, for one device and stream. Calls on one
// stream reuse it in stream order; growing it (cudaFree, which waits for
// the device) or a new binding (a fresh block) is the only synchronisation.
struct DevWork {
  cuda::DeviceBuffer buf;
  int device = -1;
  cudaStream_t stream = nullptr;
};
}  // namespace

tsr_status device_prepare(tsr_context ctx, Call* x) {
  x->dev_blas = nullptr;
  x->dev_work = nullptr;
  x->dev_cap = 0;
  Pool* pool = static_cast<Pool*>(ctx->gemm_pool.get());
  if (pool == nullptr) return fail(TSR_ERR_INTERNAL, "the GEMM pool is missing before a device call");
  const int dev = ctx->cuda_device;
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->cuda_stream);
  cuda::Blas* blas = nullptr;
  TSR_TRY(cuda::context_blas(&pool->cublas, dev, stream, &blas));
  x->dev_blas = blas;
  if (!x->c->member) return TSR_SUCCESS;
  const size_t work = work_bytes(*x);
  // One rank with nothing to hold (the plain local product): no transport
  // call, no temporaries, no workspace.
  if (work == 0 && x->c->size() == 1) return TSR_SUCCESS;
  // The call's temporaries; the first kAlign bytes stand in for empty
  // buffers in transport calls (the device transport routes by where
  // buffers live, so none may be NULL).
  const size_t bytes = work + kAlign;
  cuda::DeviceGuard g;
  TSR_TRY(g.enter(dev));
  DevWork* w = static_cast<DevWork*>(pool->dwork.get());
  if (w == nullptr || w->device != dev || w->stream != stream) {
    pool->dwork.reset();  // cudaFree of the old block waits for its work
    std::shared_ptr<DevWork> fresh(new (std::nothrow) DevWork());
    if (!fresh) return fail(TSR_ERR_NO_MEMORY, "allocating the GEMM's device workspace record");
    fresh->device = dev;
    fresh->stream = stream;
    pool->dwork = fresh;
    w = fresh.get();
  }
  TSR_TRY(w->buf.reserve(bytes, "allocating the GEMM's device workspace (cudaMalloc)"));
  x->dev_work = w->buf.get();
  x->dev_cap = bytes;
  return TSR_SUCCESS;
}

tsr_status device_release(tsr_context, Call* x) {
  x->dev_work = nullptr;  // the block stays in the context's pool
  return TSR_SUCCESS;
}

namespace {
// Element type of bfloat16 device inputs: a bit pattern the host never
// computes with (pointer arithmetic and the transport's type only).
struct bf16_t {
  uint16_t bits;
};
}  // namespace
template <>
struct dtype_of<bf16_t> {
  static constexpr tsr_dtype value = TSR_BFLOAT16;
};

namespace {
template <class I>
struct DevOps {
  using In = I;
  using Out = float;
  static constexpr bool kDevice = true;
  cuda::Blas& blas;
  cudaStream_t stream;
  unsigned char* base;
  size_t cap, used = kAlign;  // [0, kAlign): the stand-in for empty buffers
  std::vector<void*> extra;   // requests beyond the block (a sizing bug), freed at the end
  tsr_status error = TSR_SUCCESS;
  DevOps(cuda::Blas& b, void* work, size_t bytes)
      : blas(b), stream(b.stream()), base(static_cast<unsigned char*>(work)), cap(bytes) {}
  ~DevOps() {
    for (void* p : extra) (void)cudaFreeAsync(p, stream);
  }
  DevOps(const DevOps&) = delete;
  DevOps& operator=(const DevOps&) = delete;
  template <class U>
  U* take(size_t n) {
    if (n == 0) return nullptr;
    const size_t p = padded(n * sizeof(U));
    if (base != nullptr && used + p <= cap) {
      void* out = base + used;
      used += p;
      return static_cast<U*>(out);
    }
    void* q = nullptr;
    if (cudaMallocAsync(&q, p, stream) != cudaSuccess) {
      (void)cudaGetLastError();
      if (error == TSR_SUCCESS)
        error = fail(TSR_ERR_NO_MEMORY, "allocating %zu bytes of GEMM device workspace beyond the reserved block", p);
      return nullptr;
    }
    extra.push_back(q);
    return static_cast<U*>(q);
  }
  template <class U>
  U* nz(U* p) const {
    return p != nullptr ? p : reinterpret_cast<U*>(base);
  }
  template <class U>
  tsr_status copy(U* dst, int64_t dld, const U* src, int64_t sld, int64_t rows, int64_t cols) {
    TSR_TRY(error);
    return cuda::copy2d(dst, dld, src, sld, rows, cols, sizeof(U), stream);
  }
  tsr_status scale(float* c, int64_t ldc, int64_t rows, int64_t cols, double beta) {
    TSR_TRY(error);
    return cuda::scale_f32(c, ldc, rows, cols, static_cast<float>(beta), stream);
  }
  tsr_status axpby(float* c, int64_t ldc, int64_t rows, int64_t cols, double beta, const float* r, int64_t ldr) {
    TSR_TRY(error);
    return cuda::axpby_f32(c, ldc, rows, cols, static_cast<float>(beta), r, ldr, stream);
  }
  tsr_status gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const I* a, int64_t lda, const I* b,
                  int64_t ldb, double beta, float* c, int64_t ldc) {
    TSR_TRY(error);
    if (m == 0 || n == 0) return TSR_SUCCESS;
    const cuda::Elem in = std::is_same<I, float>::value ? cuda::Elem::f32 : cuda::Elem::bf16;
    return cuda::gemm(blas, ta, tb, m, n, k, static_cast<float>(alpha), a, std::max<int64_t>(1, lda), b,
                      std::max<int64_t>(1, ldb), static_cast<float>(beta), c, std::max<int64_t>(1, ldc), in,
                      cuda::Elem::f32);
  }
};

template <class I>
tsr_status run_device(const Call& x) {
  cuda::Blas& blas = *static_cast<cuda::Blas*>(x.dev_blas);
  cuda::DeviceGuard g;  // outlives ops: its extra blocks are freed on the device
  TSR_TRY(g.enter(blas.device()));
  DevOps<I> ops(blas, x.dev_work, x.dev_cap);
  TSR_TRY(run_engine(x, ops));
  return ops.error;
}
}  // namespace
#else
tsr_status device_prepare(tsr_context, Call*) {
  return fail(TSR_ERR_UNSUPPORTED, "device buffers in a build without CUDA");
}
tsr_status device_release(tsr_context, Call*) { return TSR_SUCCESS; }
#endif

tsr_status execute(const Call& x, Arena& arena) {
  if (x.device) {
#if TSR_HAVE_CUDA
    if (x.dev_blas == nullptr) return fail(TSR_ERR_INTERNAL, "a device GEMM without its cuBLAS handle");
    return x.a->type == TSR_BFLOAT16 ? run_device<bf16_t>(x) : run_device<float>(x);
#else
    return fail(TSR_ERR_UNSUPPORTED, "device buffers in a build without CUDA");
#endif
  }
  if (x.c->type == TSR_FLOAT64) {
    HostOps<double> ops(arena);
    return run_engine(x, ops);
  }
  if (x.c->type != TSR_FLOAT32 || x.a->type != TSR_FLOAT32)
    return fail(TSR_ERR_UNSUPPORTED, "%s inputs run on the device only", dtype_name(x.a->type));
  HostOps<float> ops(arena);
  return run_engine(x, ops);
}


}  // namespace gemm
}  // namespace tsr

// The GEMM engines: three-phase (1D and 3D: all-gather, local GEMM,
// reduce-scatter) and SUMMA (2D and 2.5D: broadcast panels, double-buffered,
// reduce along the depth). Every byte moves through the transport; local
// GEMMs through CBLAS. The traffic is exactly gemm_core's schedule().
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "blas_int.hpp"
#include "core.hpp"
#include "gemm_internal.hpp"
#include "transport.hpp"

namespace tsr {
namespace gemm {
namespace {

// ------------------------------------------------------------ local kernels
// CBLAS in blocks that fit its int sizes (blas_int.hpp): never truncated.
template <class T>
void blas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// C = beta C (beta = 0: C = 0 without reading it).
template <class T>
void scale(T* c, int64_t ldc, int64_t rows, int64_t cols, T beta) {
  if (beta == T(1)) return;
  for (int64_t j = 0; j < cols; ++j) {
    T* col = c + j * ldc;
    if (beta == T(0))
      std::fill(col, col + rows, T(0));
    else
      for (int64_t i = 0; i < rows; ++i) col[i] *= beta;
  }
}

// C = beta C + R (beta = 0: C = R).
template <class T>
void axpby(T* c, int64_t ldc, int64_t rows, int64_t cols, T beta, const T* r, int64_t ldr) {
  for (int64_t j = 0; j < cols; ++j) {
    T* cc = c + j * ldc;
    const T* rr = r + j * ldr;
    if (beta == T(0))
      std::memcpy(cc, rr, static_cast<size_t>(rows) * sizeof(T));
    else
      for (int64_t i = 0; i < rows; ++i) cc[i] = beta * cc[i] + rr[i];
  }
}

template <class T>
void copy_tight(const T* src, int64_t ld, int64_t rows, int64_t cols, T* dst) {
  for (int64_t j = 0; j < cols; ++j) std::memcpy(dst + j * rows, src + j * ld, static_cast<size_t>(rows) * sizeof(T));
}

// C (m x n) = alpha op(A) op(B) + beta C, or C = beta C when k = 0.
template <class T>
void local_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    scale(c, ldc, m, n, beta);
    return;
  }
  blas(ta, tb, m, n, k, alpha, a, std::max<int64_t>(1, lda), b, std::max<int64_t>(1, ldb), beta, c,
       std::max<int64_t>(1, ldc));
}

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
template <class T>
tsr_status operand(tsr_grid grid, const Dist& d, int64_t srows, int64_t scols, const void* buf, int g, Arena& arena,
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
    T* tight = arena.take<T>(need.pack);
    copy_tight(send, d.ld, lr.len, lc.len, tight);
    send = tight;
  }
  T* recv = arena.take<T>(need.recv);
  TSR_TRY(allgatherv(axis(grid, g), send, static_cast<size_t>(lr.len * lc.len), recv, counts.data(), displs.data(),
                     dtype_of<T>::value));
  if (need.unpack == 0) {
    out->p = recv;  // column pieces in order: already the tight block
    return TSR_SUCCESS;
  }
  // Row pieces: interleave them into one tight block.
  T* block = arena.take<T>(need.unpack);
  int64_t roff = 0;
  for (int z = 0; z < parts; ++z) {
    const int64_t rz = prow[static_cast<size_t>(z)];
    const T* src = recv + displs[static_cast<size_t>(z)];
    for (int64_t j = 0; j < gc.len; ++j)
      std::memcpy(block + j * gr.len + roff, src + j * rz, static_cast<size_t>(rz) * sizeof(T));
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
template <class T>
tsr_status reduce_c(const Call& x, int kd, T* w, const Range& mr, const Range& nr, Arena& arena) {
  const Dist& C = *x.c;
  const Dims& co = C.coords;
  T* c = static_cast<T*>(x.cbuf);
  const T beta = static_cast<T>(x.beta);
  const Comm& comm = axis(x.grid, kd);
  const size_t wn = static_cast<size_t>(mr.len * nr.len);
  if (!C.lay.uses(kd)) {
    if (wn == 0) return TSR_SUCCESS;
    TSR_TRY(allreduce(comm, w, w, wn, dtype_of<T>::value, TSR_SUM));
    axpby(c, C.ld, mr.len, nr.len, beta, w, std::max<int64_t>(1, mr.len));
    return TSR_SUCCESS;
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
    T* packed = arena.take<T>(need.packed);
    size_t off = 0;
    for (int z = 0; z < parts; ++z) {
      const Range r = rows[static_cast<size_t>(z)];
      copy_tight(w + (r.off - mr.off), std::max<int64_t>(1, mr.len), r.len, nr.len, packed + off);
      off += static_cast<size_t>(r.len * nr.len);
    }
    send = packed;
  }
  if (need.piece == 0) return reduce_scatterv(comm, send, c, counts.data(), dtype_of<T>::value, TSR_SUM);
  T* r = arena.take<T>(need.piece);
  TSR_TRY(reduce_scatterv(comm, send, r, counts.data(), dtype_of<T>::value, TSR_SUM));
  axpby(c, C.ld, C.rows, C.cols, beta, r, std::max<int64_t>(1, C.rows));
  return TSR_SUCCESS;
}

template <class T>
tsr_status three_phase(const Call& x, Arena& arena) {
  const Shape& s = x.shape;
  const Roles& r = x.roles;
  const Dist &A = *x.a, &B = *x.b, &C = *x.c;
  const Dims& co = C.coords;
  const Dims& dims = C.dims;
  const Range mr = role_range(s.m, dims, r.m, co), nr = role_range(s.n, dims, r.n, co),
              kr = role_range(s.k, dims, r.k, co);
  Block<T> a, b;
  TSR_TRY(operand<T>(x.grid, A, s.ta ? s.k : s.m, s.ta ? s.m : s.k, x.abuf, r.n, arena, &a));
  TSR_TRY(operand<T>(x.grid, B, s.tb ? s.n : s.k, s.tb ? s.k : s.n, x.bbuf, r.m, arena, &b));
  const T alpha = static_cast<T>(x.alpha), beta = static_cast<T>(x.beta);
  const bool work = mr.len > 0 && nr.len > 0 && kr.len > 0;
  const T* pa = work ? (s.ta ? a.at(kr.off, mr.off) : a.at(mr.off, kr.off)) : nullptr;
  const T* pb = work ? (s.tb ? b.at(nr.off, kr.off) : b.at(kr.off, nr.off)) : nullptr;
  if (r.k < 0) {
    local_gemm(s.ta, s.tb, mr.len, nr.len, kr.len, alpha, pa, a.ld, pb, b.ld, beta, static_cast<T*>(x.cbuf), C.ld);
    return TSR_SUCCESS;
  }
  T* w = arena.take<T>(static_cast<size_t>(mr.len * nr.len));
  local_gemm(s.ta, s.tb, mr.len, nr.len, kr.len, alpha, pa, a.ld, pb, b.ld, T(0), w, std::max<int64_t>(1, mr.len));
  return reduce_c<T>(x, r.k, w, mr, nr, arena);
}

// One SUMMA panel in flight: op(A)'s m_i x w and op(B)'s w x n_j pieces.
// One operand's panel of a SUMMA step, in its stored orientation (rows x
// cols): the root of the broadcast along comm (or every rank, when comm is
// null) uses its stored piece src (leading dimension ld) in place when that
// is contiguous or nothing travels, else packs it into buf; the others
// receive into buf. *out and *ldo say where the panel is.
template <class T>
tsr_status post_panel(const Comm* comm, bool root, int from, const T* src, int64_t ld, int64_t rows, int64_t cols,
                      T* buf, const T** out, int64_t* ldo, Request* req) {
  if (root && (comm == nullptr || ld == rows || cols <= 1)) {
    *out = src;
    *ldo = ld;
  } else {
    if (root) copy_tight(src, ld, rows, cols, buf);
    *out = buf;
    *ldo = std::max<int64_t>(1, rows);
  }
  const size_t count = static_cast<size_t>(rows * cols);
  if (comm && count > 0) TSR_TRY(bcast(*comm, const_cast<T*>(*out), count, dtype_of<T>::value, from, req));
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

template <class T>
tsr_status summa(const Call& x, Arena& arena) {
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
  TSR_TRY(operand<T>(x.grid, A, s.ta ? s.k : s.m, s.ta ? s.m : s.k, x.abuf, d, arena, &a));
  TSR_TRY(operand<T>(x.grid, B, s.tb ? s.n : s.k, s.tb ? s.k : s.n, x.bbuf, d, arena, &b));

  const std::vector<Panel> all = panels(s.k, pm, pn, x.panel);
  const Range mine = layer_panels(all.size(), pd, layer);
  int64_t wmax = 0;
  for (int64_t t = mine.off; t < mine.end(); ++t) wmax = std::max(wmax, all[static_cast<size_t>(t)].w);

  // Where the products go: C itself, or W when the layers' sums meet later.
  const T alpha = static_cast<T>(x.alpha), beta = static_cast<T>(x.beta);
  T* w = nullptr;
  T* tgt = static_cast<T*>(x.cbuf);
  int64_t ldt = C.ld;
  T tbeta = beta;
  if (d >= 0) {
    w = arena.take<T>(static_cast<size_t>(mr.len * nr.len));
    tgt = w;
    ldt = std::max<int64_t>(1, mr.len);
    tbeta = T(0);
  }

  Slot<T> slot[2];
  for (Slot<T>& sl : slot) {
    sl.abuf = arena.take<T>(static_cast<size_t>(mr.len * wmax));
    sl.bbuf = arena.take<T>(static_cast<size_t>(wmax * nr.len));
  }
  const Comm* arow = r.n >= 0 ? &axis(x.grid, r.n) : nullptr;  // A's panels travel along n's dimension
  const Comm* bcol = r.m >= 0 ? &axis(x.grid, r.m) : nullptr;  // B's along m's

  auto post = [&](int64_t t, Slot<T>& sl, bool nonblocking) -> tsr_status {
    const Panel& p = all[static_cast<size_t>(t)];
    // op(A) panel: rows mr, k-columns [k0, k0 + w), along n's dimension.
    const bool aroot = r.n < 0 || co[static_cast<size_t>(r.n)] == p.a_root;
    const T* asrc = aroot && mr.len > 0 ? (s.ta ? a.at(p.k0, mr.off) : a.at(mr.off, p.k0)) : nullptr;
    TSR_TRY(post_panel(arow, aroot, p.a_root, asrc, a.ld, s.ta ? p.w : mr.len, s.ta ? mr.len : p.w, sl.abuf,
                       &sl.a, &sl.lda, nonblocking ? &sl.ra : nullptr));
    // op(B) panel: k-rows [k0, k0 + w), columns nr, along m's dimension.
    const bool broot = r.m < 0 || co[static_cast<size_t>(r.m)] == p.b_root;
    const T* bsrc = broot && nr.len > 0 ? (s.tb ? b.at(nr.off, p.k0) : b.at(p.k0, nr.off)) : nullptr;
    TSR_TRY(post_panel(bcol, broot, p.b_root, bsrc, b.ld, s.tb ? nr.len : p.w, s.tb ? p.w : nr.len, sl.bbuf,
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
    const T bt = first ? tbeta : T(1);
    const bool pending = more && x.overlap;
    const int64_t chunks = pending ? std::max<int64_t>(1, std::min<int64_t>(8, nr.len / 256)) : 1;
    for (int64_t q = 0; q < chunks; ++q) {
      const Range cc = balanced(nr.len, chunks, q);
      const T* pb = cur.b ? (s.tb ? cur.b + cc.off : cur.b + cc.off * cur.ldb) : nullptr;
      local_gemm(s.ta, s.tb, mr.len, cc.len, p.w, alpha, cur.a, cur.lda, pb, cur.ldb, bt, tgt + cc.off * ldt, ldt);
      if (pending) poke(nxt);
    }
    first = false;
    if (more && !x.overlap) st = post(t + 1, nxt, false);
  }
  if (st != TSR_SUCCESS) {
    for (Slot<T>& sl : slot) (void)finish_slot(sl);
    return st;
  }
  if (first) scale(tgt, ldt, mr.len, nr.len, tbeta);
  if (d >= 0) return reduce_c<T>(x, d, w, mr, nr, arena);
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
  const size_t es = tsr_dtype_size(C.type);
  const Range mr = role_range(s.m, dims, r.m, co), nr = role_range(s.n, dims, r.n, co);
  const bool three = engine_of(x.algo) == Engine::three_phase;
  const int ga = three ? r.n : r.k, gb = three ? r.m : r.k, kd = r.k;
  size_t bytes = 0;
  auto add = [&](size_t elems) { bytes += elems ? padded(elems * es) : 0; };
  for (const GatherWork& g : {gather_work(A, s.ta ? s.k : s.m, s.ta ? s.m : s.k, ga),
                              gather_work(B, s.tb ? s.n : s.k, s.tb ? s.k : s.n, gb)}) {
    add(g.pack);
    add(g.recv);
    add(g.unpack);
  }
  if (kd >= 0) add(static_cast<size_t>(mr.len * nr.len));  // W
  if (!three) {
    const int64_t wmax = summa_wmax(x);
    for (int sl = 0; sl < 2; ++sl) {
      add(static_cast<size_t>(mr.len * wmax));
      add(static_cast<size_t>(wmax * nr.len));
    }
  }
  const ReduceWork rw = reduce_work(x, kd, mr, nr);
  add(rw.packed);
  add(rw.piece);
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

tsr_status execute(const Call& x, Arena& arena) {
  const bool dbl = x.c->type == TSR_FLOAT64;
  if (engine_of(x.algo) == Engine::three_phase)
    return dbl ? three_phase<double>(x, arena) : three_phase<float>(x, arena);
  return dbl ? summa<double>(x, arena) : summa<float>(x, arena);
}

}  // namespace gemm
}  // namespace tsr

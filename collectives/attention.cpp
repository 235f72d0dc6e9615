// Attention over a ring: the three variants (ring, two-pass ring
// self-attention, all-to-all), forward and backward, their validation and
// workspace plan, and the C entry points. Every call: local checks and every
// allocation first, one agreement (24-byte control all-reduce), then the
// data movement through the transport (ring exchange engine or collectives).
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_impl.hpp"
#include "device.hpp"
#include "device_transport.hpp"
#include "ring.hpp"
#include "tessera/tsr_config.h"

#if TSR_HAVE_CUDA
#include "attn_cuda.hpp"
#include "cuda_util.hpp"
#endif

namespace tsr {
namespace attn {
namespace {

const char* layout_name(tsr_attn_layout l) {
  switch (l) {
    case TSR_ATTN_LAYOUT_CONTIGUOUS: return "CONTIGUOUS";
    case TSR_ATTN_LAYOUT_ZIGZAG: return "ZIGZAG";
    case TSR_ATTN_LAYOUT_STRIPED: return "STRIPED";
  }
  return "?";
}

// a*b*... without wrapping; false on overflow.
bool mul(size_t* out, std::initializer_list<size_t> xs) { return checked_mul(out, xs); }

// The shapes of one call, checked (see check_call).
struct Shape {
  tsr_attn_variant variant = TSR_ATTN_RING;
  tsr_attn_layout layout = TSR_ATTN_LAYOUT_CONTIGUOUS;
  bool causal = false, mask = false, backward = false;
  tsr_dtype type = TSR_FLOAT32;
  double scale = 1;
  int p = 1, r = 0;
  size_t B = 0, H = 1, G = 1, d = 1, N = 0, n = 0, nmax = 0;
  std::vector<size_t> lens, offs;  // per rank: shard length, offset in layout order
  // Device tensors (docs/GPU.md, "Ring attention"): the context's device and
  // stream; the workspace is device memory and the blocks run as CUDA kernels.
  bool device = false;
  int dev = -1;
  void* stream = nullptr;
};

void fill_lens(Shape& s) {
  s.lens.assign(static_cast<size_t>(s.p), 0);
  s.offs.assign(static_cast<size_t>(s.p), 0);
  s.nmax = 0;
  size_t off = 0;
  for (int j = 0; j < s.p; ++j) {
    const size_t len = shard_len(s.layout, s.N, s.p, j);
    s.lens[static_cast<size_t>(j)] = len;
    s.offs[static_cast<size_t>(j)] = off;
    off += len;
    if (len > s.nmax) s.nmax = len;
  }
  s.n = s.lens[static_cast<size_t>(s.r)];
}

// Pointers of one call (null in a workspace query).
template <class T>
struct Data {
  const T *q = nullptr, *k = nullptr, *v = nullptr, *o_in = nullptr, *lse_in = nullptr, *dout = nullptr;
  const uint8_t* km = nullptr;
  T *o = nullptr, *lse = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

// ----------------------------------------------------- packing (all-to-all)
// Strided copies through the ops (host memcpy, or cudaMemcpy2DAsync on the
// device): one 2D copy per batch entry.
// Rows t < n of heads [h0, h0+nh) of a (B, Htot, n, row) tensor into a
// (B, nh, nmax, row) part; rows n..nmax-1 zero.
template <class T, class Ops>
tsr_status pack_part(const Ops& ops, T* dst, const T* src, size_t B, size_t Htot, size_t h0, size_t nh, size_t n,
                     size_t nmax, size_t row) {
  const size_t e = sizeof(T);
  for (size_t b = 0; b < B; ++b) {
    T* d = dst + b * nh * nmax * row;
    if (n > 0) TSR_TRY(ops.copy2d(d, nmax * row * e, src + (b * Htot + h0) * n * row, n * row * e, n * row * e, nh));
    if (nmax > n) TSR_TRY(ops.fill2d(d + n * row, nmax * row * e, 0, (nmax - n) * row * e, nh));
  }
  return TSR_SUCCESS;
}
// A (B, nh, nmax, row) part from rank `src` into rows [src*nmax, (src+1)*nmax)
// of a (B, nh, p*nmax, row) tensor.
template <class T, class Ops>
tsr_status unpack_full(const Ops& ops, T* full, const T* part, size_t B, size_t nh, size_t np, size_t src, size_t nmax,
                       size_t row) {
  const size_t e = sizeof(T);
  if (nmax == 0) return TSR_SUCCESS;
  for (size_t b = 0; b < B; ++b)
    TSR_TRY(ops.copy2d(full + (b * nh * np + src * nmax) * row, np * row * e, part + b * nh * nmax * row,
                       nmax * row * e, nmax * row * e, nh));
  return TSR_SUCCESS;
}
// Rows [dst*nmax, (dst+1)*nmax) of a (B, nh, p*nmax, row) tensor into a part.
template <class T, class Ops>
tsr_status pack_back(const Ops& ops, T* part, const T* full, size_t B, size_t nh, size_t np, size_t dst, size_t nmax,
                     size_t row) {
  const size_t e = sizeof(T);
  if (nmax == 0) return TSR_SUCCESS;
  for (size_t b = 0; b < B; ++b)
    TSR_TRY(ops.copy2d(part + b * nh * nmax * row, nmax * row * e, full + (b * nh * np + dst * nmax) * row,
                       np * row * e, nmax * row * e, nh));
  return TSR_SUCCESS;
}
// A (B, nh, nmax, row) part into heads [h0, h0+nh) of a (B, Htot, n, row) tensor.
template <class T, class Ops>
tsr_status unpack_back(const Ops& ops, T* dst, const T* part, size_t B, size_t Htot, size_t h0, size_t nh, size_t n,
                       size_t nmax, size_t row) {
  const size_t e = sizeof(T);
  if (n == 0) return TSR_SUCCESS;
  for (size_t b = 0; b < B; ++b)
    TSR_TRY(ops.copy2d(dst + (b * Htot + h0) * n * row, n * row * e, part + b * nh * nmax * row, nmax * row * e,
                       n * row * e, nh));
  return TSR_SUCCESS;
}

// ------------------------------------------------------------- block ops
// The seam between the ring algorithm (Call::run_ring, one for both) and the
// kernels of one block: the host kernels (attn_kernel.cpp, CBLAS) or the
// CUDA kernels (cuda/attn_cuda.cu, float32, asynchronous on the context's
// stream). rows() fills the positions (and, on the host, the segments) of a
// rank's tokens into pos (a workspace buffer in the same memory as the
// tensors).
template <class T>
struct HostOps {
  const Shape& s;
  const Geo<T>& g;
  tsr_status rows(int rank, int64_t* pos, Seg* segs, Rows* out) const {
    positions(s.layout, s.N, s.p, rank, pos);
    out->n = s.lens[static_cast<size_t>(rank)];
    out->pos = pos;
    out->segs = segs;
    out->nsegs = segments(s.layout, s.N, s.p, rank, 0, segs);
    return TSR_SUCCESS;
  }
  tsr_status init(size_t nq, T* o, T* m, T* l) const {
    fwd_init(g, nq, o, m, l);
    return TSR_SUCCESS;
  }
  tsr_status fwd(const T* q, const Rows& qr, const T* k, const T* v, const Rows& kr, const uint8_t* km, T* o, T* m,
                 T* l, T* tile, const Poke& poke) const {
    fwd_block(g, q, qr, k, v, kr, km, o, m, l, tile, poke);
    return TSR_SUCCESS;
  }
  tsr_status finish(size_t nq, T* o, const T* m, const T* l, T* lse) const {
    fwd_finish(g, nq, o, m, l, lse);
    return TSR_SUCCESS;
  }
  tsr_status delta(size_t nq, const T* out, const T* dout, T* d) const {
    bwd_delta(g, nq, out, dout, d);
    return TSR_SUCCESS;
  }
  tsr_status zero(T* p, size_t n) const {
    if (n > 0) std::memset(p, 0, n * sizeof(T));
    return TSR_SUCCESS;
  }
  tsr_status bwd(const T* q, const Rows& qr, const T* k, const T* v, const Rows& kr, const uint8_t* km, const T* dout,
                 const T* lse, const T* delta, T* dq, T* dk, T* dv, T* tiles, const Poke& poke) const {
    bwd_block(g, q, qr, k, v, kr, km, dout, lse, delta, dq, dk, dv, tiles, poke);
    return TSR_SUCCESS;
  }
  // The two-pass baseline's full score rows (rsa_*, attention_impl.hpp).
  tsr_status scores(const T* q, const Rows& qr, const T* k, const Rows& kr, const uint8_t* km, T* sc, size_t ntot,
                    size_t off) const {
    rsa_scores(g, q, qr, k, kr, km, sc, ntot, off);
    return TSR_SUCCESS;
  }
  tsr_status softmax(size_t nq, T* sc, size_t ntot, T* lse) const {
    rsa_softmax(g, nq, sc, ntot, lse);
    return TSR_SUCCESS;
  }
  tsr_status probs(size_t nq, T* sc, size_t ntot, const T* lse) const {
    rsa_probs(g, nq, sc, ntot, lse);
    return TSR_SUCCESS;
  }
  tsr_status av(size_t nq, const T* a, size_t ntot, size_t off, const T* v, size_t nk, T* o) const {
    rsa_av(g, nq, a, ntot, off, v, nk, o);
    return TSR_SUCCESS;
  }
  tsr_status dav(size_t nq, const T* a, T* da, size_t ntot, size_t off, const T* v, size_t nk, const T* dout,
                 T* dv) const {
    rsa_dav(g, nq, a, da, ntot, off, v, nk, dout, dv);
    return TSR_SUCCESS;
  }
  tsr_status ds(size_t nq, const T* a, T* da, size_t ntot, const T* delta) const {
    rsa_ds(g, nq, a, da, ntot, delta);
    return TSR_SUCCESS;
  }
  tsr_status dqk(size_t nq, const T* dsc, size_t ntot, size_t off, const T* q, const T* k, size_t nk, T* dq,
                 T* dk) const {
    rsa_dqk(g, nq, dsc, ntot, off, q, k, nk, dq, dk);
    return TSR_SUCCESS;
  }
  // rows x width bytes between pitched buffers (the all-to-all's packing).
  tsr_status copy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows) const {
    if (width > 0)
      for (size_t i = 0; i < rows; ++i)
        std::memcpy(static_cast<char*>(dst) + i * dpitch, static_cast<const char*>(src) + i * spitch, width);
    return TSR_SUCCESS;
  }
  tsr_status fill2d(void* dst, size_t pitch, int value, size_t width, size_t rows) const {
    if (width > 0)
      for (size_t i = 0; i < rows; ++i) std::memset(static_cast<char*>(dst) + i * pitch, value, width);
    return TSR_SUCCESS;
  }
  // Positions and segments of the padded full sequence (rank j's tokens at
  // [j*nmax, j*nmax + n_j)); padding rows are in no segment (no kernel
  // touches them) and need no mask.
  static constexpr bool kMaskPadding = false;
  tsr_status full_rows(int64_t* pos, Seg* segs, Rows* all) const {
    const size_t p = static_cast<size_t>(s.p), nmax = s.nmax;
    int nsegs = 0;
    for (size_t j = 0; j < p; ++j) {
      const size_t len = s.lens[j];
      for (size_t t = 0; t < nmax; ++t)
        pos[j * nmax + t] = t < len ? position(s.layout, s.N, s.p, static_cast<int>(j), t) : 0;
      nsegs += segments(s.layout, s.N, s.p, static_cast<int>(j), j * nmax, segs + nsegs);
    }
    all->n = p * nmax;
    all->pos = pos;
    all->segs = segs;
    all->nsegs = nsegs;
    return TSR_SUCCESS;
  }
};

#if TSR_HAVE_CUDA
// float32 only (check_call refuses other types on the device before the
// agreement); the score tiles of the host kernels are not used.
struct CudaOps {
  const Shape& s;
  cuda::On on;
  cuda::Shape cs;
  CudaOps(const Shape& sh, const Geo<float>& g) : s(sh) {  // g: the heads this op computes
    on.device = sh.dev;
    on.stream = static_cast<cudaStream_t>(sh.stream);
    cs.B = g.B, cs.H = g.H, cs.G = g.G, cs.d = g.d;
    cs.scale = g.scale;
    cs.causal = g.causal;
  }
  bool empty() const { return s.B == 0; }  // nothing to compute (the kernels refuse batch 0)
  tsr_status rows(int rank, int64_t* pos, Seg*, Rows* out) const {
    const size_t P = static_cast<size_t>(s.p), R = static_cast<size_t>(rank), N = s.N;
    const size_t len = s.lens[R];
    size_t c0 = len;
    int64_t s0 = 0, s1 = 0, stride = 1;
    switch (s.layout) {
      case TSR_ATTN_LAYOUT_CONTIGUOUS: s0 = static_cast<int64_t>(part_start(N, P, R)); break;
      case TSR_ATTN_LAYOUT_ZIGZAG:
        c0 = part_size(N, 2 * P, R);
        s0 = static_cast<int64_t>(part_start(N, 2 * P, R));
        s1 = static_cast<int64_t>(part_start(N, 2 * P, 2 * P - 1 - R));
        break;
      case TSR_ATTN_LAYOUT_STRIPED:
        s0 = static_cast<int64_t>(R);
        stride = static_cast<int64_t>(P);
        break;
    }
    out->n = len;
    out->pos = pos;
    out->segs = nullptr;
    out->nsegs = 0;
    return cuda::positions(on, len, c0, s0, s1, stride, pos);
  }
  tsr_status init(size_t nq, float* o, float* m, float* l) const {
    return empty() ? TSR_SUCCESS : cuda::fwd_init(on, cs, nq, o, m, l);
  }
  tsr_status fwd(const float* q, const Rows& qr, const float* k, const float* v, const Rows& kr, const uint8_t* km,
                 float* o, float* m, float* l, float*, const Poke&) const {
    return empty() ? TSR_SUCCESS : cuda::fwd_block(on, cs, q, qr.n, qr.pos, k, v, kr.n, kr.pos, km, o, m, l);
  }
  tsr_status finish(size_t nq, float* o, const float* m, const float* l, float* lse) const {
    return empty() ? TSR_SUCCESS : cuda::fwd_finish(on, cs, nq, o, m, l, lse);
  }
  tsr_status delta(size_t nq, const float* out, const float* dout, float* d) const {
    return empty() ? TSR_SUCCESS : cuda::bwd_delta(on, cs, nq, out, dout, d);
  }
  tsr_status zero(float* p, size_t n) const { return ringdev::zero(on.device, s.stream, p, n * sizeof(float)); }
  tsr_status bwd(const float* q, const Rows& qr, const float* k, const float* v, const Rows& kr, const uint8_t* km,
                 const float* dout, const float* lse, const float* delta, float* dq, float* dk, float* dv, float*,
                 const Poke&) const {
    return empty() ? TSR_SUCCESS
                   : cuda::bwd_block(on, cs, q, qr.n, qr.pos, k, v, kr.n, kr.pos, km, dout, lse, delta, dq, dk, dv);
  }
  tsr_status scores(const float* q, const Rows& qr, const float* k, const Rows& kr, const uint8_t* km, float* sc,
                    size_t ntot, size_t off) const {
    return empty() ? TSR_SUCCESS : cuda::rsa_scores(on, cs, q, qr.n, qr.pos, k, kr.n, kr.pos, km, sc, ntot, off);
  }
  tsr_status softmax(size_t nq, float* sc, size_t ntot, float* lse) const {
    return empty() ? TSR_SUCCESS : cuda::rsa_softmax(on, cs, nq, sc, ntot, lse);
  }
  tsr_status probs(size_t nq, float* sc, size_t ntot, const float* lse) const {
    return empty() ? TSR_SUCCESS : cuda::rsa_probs(on, cs, nq, sc, ntot, lse);
  }
  tsr_status av(size_t nq, const float* a, size_t ntot, size_t off, const float* v, size_t nk, float* o) const {
    return empty() ? TSR_SUCCESS : cuda::rsa_av(on, cs, nq, a, ntot, off, v, nk, o);
  }
  tsr_status dav(size_t nq, const float* a, float* da, size_t ntot, size_t off, const float* v, size_t nk,
                 const float* dout, float* dv) const {
    return empty() ? TSR_SUCCESS : cuda::rsa_dav(on, cs, nq, a, da, ntot, off, v, nk, dout, dv);
  }
  tsr_status ds(size_t nq, const float* a, float* da, size_t ntot, const float* delta) const {
    return empty() ? TSR_SUCCESS : cuda::rsa_ds(on, cs, nq, a, da, ntot, delta);
  }
  tsr_status dqk(size_t nq, const float* dsc, size_t ntot, size_t off, const float* q, const float* k, size_t nk,
                 float* dq, float* dk) const {
    return empty() ? TSR_SUCCESS : cuda::rsa_dqk(on, cs, nq, dsc, ntot, off, q, k, nk, dq, dk);
  }
  tsr_status copy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows) const {
    if (width == 0 || rows == 0) return TSR_SUCCESS;
    tsr::cuda::DeviceGuard guard;
    TSR_TRY(guard.enter(on.device));
    TSR_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, on.stream),
                   "cudaMemcpy2DAsync (all-to-all packing on the device)");
    return TSR_SUCCESS;
  }
  tsr_status fill2d(void* dst, size_t pitch, int value, size_t width, size_t rows) const {
    if (width == 0 || rows == 0) return TSR_SUCCESS;
    tsr::cuda::DeviceGuard guard;
    TSR_TRY(guard.enter(on.device));
    TSR_CUDA_CHECK(cudaMemset2DAsync(dst, pitch, value, width, rows, on.stream),
                   "cudaMemset2DAsync (all-to-all padding on the device)");
    return TSR_SUCCESS;
  }
  // The CUDA kernels know no segments: padding keys are masked out instead
  // (a full-sequence key mask always exists on the device), padding query
  // rows compute values that are never unpacked (and, with zero dO, lse
  // and D, contribute no gradient).
  static constexpr bool kMaskPadding = true;
  tsr_status full_rows(int64_t* pos, Seg*, Rows* all) const {
    const size_t p = static_cast<size_t>(s.p), nmax = s.nmax;
    TSR_TRY(fill2d(pos, p * nmax * sizeof(int64_t), 0, p * nmax * sizeof(int64_t), p * nmax > 0 ? 1 : 0));
    for (size_t j = 0; j < p; ++j) {
      Rows r;
      TSR_TRY(rows(static_cast<int>(j), pos + j * nmax, nullptr, &r));
    }
    all->n = p * nmax;
    all->pos = pos;
    all->segs = nullptr;
    all->nsegs = 0;
    return TSR_SUCCESS;
  }
};
#endif

// ---------------------------------------------------------------- the call
// prepare(): local, allocates everything (on a dry tracker: only counts);
// run(): communicates. One object per call.
template <class T>
class Call {
 public:
  Call(const Shape& s, const Data<T>& x, Tracker& mem) : s_(s), x_(x), mem_(mem) {
    g_.B = s.B, g_.H = s.H, g_.G = s.G, g_.d = s.d;
    g_.scale = static_cast<T>(s.scale);
    g_.causal = s.causal;
  }
  tsr_status prepare();
  tsr_status run(tsr_ring_s& ring);

 private:
  size_t kv_count(size_t len) const { return s_.B * s_.G * len * s_.d; }
  std::vector<size_t> counts(size_t per_token) const {
    std::vector<size_t> c(s_.lens.size());
    for (size_t j = 0; j < c.size(); ++j) c[j] = per_token * s_.lens[j];
    return c;
  }
  RingBuf circ(const void* data, tsr_dtype type, size_t per_token) const {
    RingBuf b;
    b.data = const_cast<void*>(data);
    b.type = type;
    b.counts = counts(per_token);
    return b;
  }
  RingBuf acc(void* data, size_t per_token) const {
    RingBuf b = circ(data, s_.type, per_token);
    b.accumulate = true;
    return b;
  }
  tsr_status exchange(std::unique_ptr<RingExchange>* x, std::vector<RingBuf> bufs) {
    x->reset(new (std::nothrow) RingExchange(mem_, s_.p, std::move(bufs)));
    if (!*x) return fail(TSR_ERR_NO_MEMORY, "allocating a ring exchange");
    if (s_.device) (*x)->set_device(s_.dev, s_.stream);
    return (*x)->prepare();
  }
  // The rank's own rows (queries) and the rows of the key block of `src`.
  // The rank's own rows and the rows of a key block come from the ops
  // (rows()): positions in the tensors' memory.
  Poke poker(RingExchange* x) const {
    return [x]() { x->poke(); };
  }

  tsr_status prepare_ring();
  template <class Ops>
  tsr_status run_ring(tsr_ring_s& ring, const Ops& ops);
  tsr_status prepare_two_pass();
  template <class Ops>
  tsr_status run_two_pass(tsr_ring_s& ring, const Ops& ops);
  tsr_status prepare_alltoall();
  template <class Ops>
  tsr_status run_alltoall(tsr_ring_s& ring, const Ops& ops, const Ops& local_ops);

  const Shape& s_;
  Data<T> x_;
  Tracker& mem_;
  Geo<T> g_;
  Ws<int64_t> qpos_, kpos_;
  Seg qsegs_[2], ksegs_[2];
  Ws<T> w_[13];
  Ws<uint8_t> m_[3];
  std::unique_ptr<RingExchange> x1_, x2_, x3_;
  size_t in_per_dest_ = 0, out_per_dest_ = 0;
};

template <class T>
tsr_status Call<T>::prepare() {
  switch (s_.variant) {
    case TSR_ATTN_RING: return prepare_ring();
    case TSR_ATTN_RING_TWO_PASS: return prepare_two_pass();
    case TSR_ATTN_ALLTOALL: return prepare_alltoall();
  }
  return fail(TSR_ERR_INTERNAL, "unknown variant");
}

template <class T>
tsr_status Call<T>::run(tsr_ring_s& ring) {
  switch (s_.variant) {
    case TSR_ATTN_RING:
#if TSR_HAVE_CUDA
      if constexpr (std::is_same<T, float>::value)
        if (s_.device) return run_ring(ring, CudaOps(s_, g_));
#endif
      if (s_.device) return fail(TSR_ERR_INTERNAL, "device attention without its CUDA kernels");
      return run_ring(ring, HostOps<T>{s_, g_});
    case TSR_ATTN_RING_TWO_PASS:
#if TSR_HAVE_CUDA
      if constexpr (std::is_same<T, float>::value)
        if (s_.device) return run_two_pass(ring, CudaOps(s_, g_));
#endif
      if (s_.device) return fail(TSR_ERR_INTERNAL, "device attention without its CUDA kernels");
      return run_two_pass(ring, HostOps<T>{s_, g_});
    case TSR_ATTN_ALLTOALL: {
      Geo<T> gl = g_;  // this rank's share of the heads
      gl.H = s_.H / static_cast<size_t>(s_.p);
      gl.G = s_.G / static_cast<size_t>(s_.p);
#if TSR_HAVE_CUDA
      if constexpr (std::is_same<T, float>::value)
        if (s_.device) return run_alltoall(ring, CudaOps(s_, gl), CudaOps(s_, g_));
#endif
      if (s_.device) return fail(TSR_ERR_INTERNAL, "device attention without its CUDA kernels");
      return run_alltoall(ring, HostOps<T>{s_, gl}, HostOps<T>{s_, g_});
    }
  }
  return fail(TSR_ERR_INTERNAL, "unknown variant");
}

// -------------------------------------------------------------------- ring
// Forward: w0 = l (B*H*n), w1 = one score tile; m lives in lse.
// Backward: w0 = D (B*H*n), w1 = two tiles; dk, dv are travelling sums.
// On the device the same buffers are device memory, except the score tiles
// (the CUDA kernels keep their tiles in shared memory).
template <class T>
tsr_status Call<T>::prepare_ring() {
  const size_t rows = s_.B * s_.H * s_.n, kvt = s_.B * s_.G * s_.d;
  TSR_TRY(qpos_.alloc(&mem_, s_.n, "query positions"));
  TSR_TRY(kpos_.alloc(&mem_, s_.nmax, "key positions"));
  TSR_TRY(w_[0].alloc(&mem_, rows, s_.backward ? "D = rowsum(dout*out)" : "softmax sums"));
  if (!s_.device) TSR_TRY(w_[1].alloc(&mem_, (s_.backward ? 2 : 1) * kBq * kBk, "score tiles"));
  std::vector<RingBuf> bufs{circ(x_.k, s_.type, kvt), circ(x_.v, s_.type, kvt)};
  if (s_.mask) bufs.push_back(circ(x_.km, TSR_BYTE, s_.B));
  if (s_.backward) {
    bufs.push_back(acc(x_.dk, kvt));
    bufs.push_back(acc(x_.dv, kvt));
  }
  return exchange(&x1_, std::move(bufs));
}

// One algorithm for both memories: the ops place the work (host kernels, or
// CUDA kernels queued on the context's stream while the next blocks travel).
// A failing block op stops this rank's callbacks; the exchange still moves
// every block (no rank waits forever) and the status is returned.
template <class T>
template <class Ops>
tsr_status Call<T>::run_ring(tsr_ring_s& ring, const Ops& ops) {
  Rows qr;
  tsr_status pre = ops.rows(s_.r, qpos_.data(), qsegs_, &qr);
  const Poke poke = poker(x1_.get());
  const size_t nmask = s_.mask ? 1 : 0;
  tsr_status cb = TSR_SUCCESS;
  if (!s_.backward) {
    T* l = w_[0].data();
    if (pre == TSR_SUCCESS) pre = ops.init(s_.n, x_.o, x_.lse, l);
    TSR_TRY(x1_->run(
        ring,
        [&](int, int src, void* const* blk) -> tsr_status {
          TSR_TRY(pre);
          Rows kr;
          TSR_TRY(ops.rows(src, kpos_.data(), ksegs_, &kr));
          return ops.fwd(x_.q, qr, static_cast<const T*>(blk[0]), static_cast<const T*>(blk[1]), kr,
                         s_.mask ? static_cast<const uint8_t*>(blk[2]) : nullptr, x_.o, x_.lse, l, w_[1].data(), poke);
        },
        &cb));
    if (cb != TSR_SUCCESS) return cb;
    return ops.finish(s_.n, x_.o, x_.lse, l, x_.lse);
  }
  T* delta = w_[0].data();
  if (pre == TSR_SUCCESS) pre = ops.delta(s_.n, x_.o_in, x_.dout, delta);
  if (pre == TSR_SUCCESS) pre = ops.zero(x_.dq, s_.B * s_.H * s_.n * s_.d);
  TSR_TRY(x1_->run(
      ring,
      [&](int, int src, void* const* blk) -> tsr_status {
        TSR_TRY(pre);
        Rows kr;
        TSR_TRY(ops.rows(src, kpos_.data(), ksegs_, &kr));
        return ops.bwd(x_.q, qr, static_cast<const T*>(blk[0]), static_cast<const T*>(blk[1]), kr,
                       s_.mask ? static_cast<const uint8_t*>(blk[2]) : nullptr, x_.dout, x_.lse_in, delta, x_.dq,
                       static_cast<T*>(blk[2 + nmask]), static_cast<T*>(blk[3 + nmask]), w_[1].data(), poke);
      },
      &cb));
  return cb;
}

// ---------------------------------------------------------------- two-pass
// Forward: w0 = scores (B*H*n*N); passes: K (+mask), then V.
// Backward: w0 = A, w1 = dA (B*H*n*N each), w2 = D, w3 = dK full, w4 = dV
// full (B*G*N*d, blocks in rank order); passes: K (+mask), V, K; then a
// reduce-scatter of dK and of dV.
template <class T>
tsr_status Call<T>::prepare_two_pass() {
  const size_t kvt = s_.B * s_.G * s_.d;
  size_t score = 0, full = 0;
  if (!mul(&score, {s_.B, s_.H, s_.n, s_.N}) || !mul(&full, {s_.B, s_.G, s_.N, s_.d}))
    return fail(TSR_ERR_UNSUPPORTED, "the two-pass variant's full score rows (batch*heads*local_len*seq_len) "
                "overflow size_t");
  if (s_.N > static_cast<size_t>(INT_MAX))
    return fail(TSR_ERR_UNSUPPORTED, "the two-pass variant needs seq_len <= INT_MAX (a BLAS leading dimension)");
  TSR_TRY(qpos_.alloc(&mem_, s_.n, "query positions"));
  TSR_TRY(kpos_.alloc(&mem_, s_.nmax, "key positions"));
  TSR_TRY(w_[0].alloc(&mem_, score, "full score rows"));
  std::vector<RingBuf> k1{circ(x_.k, s_.type, kvt)};
  if (s_.mask) k1.push_back(circ(x_.km, TSR_BYTE, s_.B));
  if (!s_.backward) {
    TSR_TRY(exchange(&x1_, std::move(k1)));
    return exchange(&x2_, {circ(x_.v, s_.type, kvt)});
  }
  if (full > static_cast<size_t>(INT_MAX))
    return fail(TSR_ERR_UNSUPPORTED, "the two-pass backward reduce-scatters batch*kv_heads*seq_len*dim = %zu elements, "
                "more than INT_MAX", full);
  TSR_TRY(w_[1].alloc(&mem_, score, "full score gradients"));
  TSR_TRY(w_[2].alloc(&mem_, s_.B * s_.H * s_.n, "D = rowsum(dout*out)"));
  TSR_TRY(w_[3].alloc(&mem_, full, "full-length dK"));
  TSR_TRY(w_[4].alloc(&mem_, full, "full-length dV"));
  TSR_TRY(exchange(&x1_, std::move(k1)));
  TSR_TRY(exchange(&x2_, {circ(x_.v, s_.type, kvt)}));
  return exchange(&x3_, {circ(x_.k, s_.type, kvt)});
}

// One algorithm for both memories. A failing local step (a CUDA fault)
// skips the rest of this rank's local work, never a pass or the
// reduce-scatters (no rank waits forever); its status is returned.
template <class T>
template <class Ops>
tsr_status Call<T>::run_two_pass(tsr_ring_s& ring, const Ops& ops) {
  tsr_status bad = TSR_SUCCESS;
#define TSR_LOCAL(x)                   \
  do {                                 \
    if (bad == TSR_SUCCESS) bad = (x); \
  } while (0)
  Rows qr;
  TSR_LOCAL(ops.rows(s_.r, qpos_.data(), qsegs_, &qr));
  const size_t N = s_.N, kvt = s_.B * s_.G * s_.d;
  T* S = w_[0].data();
  tsr_status cb = TSR_SUCCESS;
  auto scores = [&](int, int src, void* const* blk) -> tsr_status {
    TSR_TRY(bad);
    Rows kr;
    TSR_TRY(ops.rows(src, kpos_.data(), ksegs_, &kr));
    return ops.scores(x_.q, qr, static_cast<const T*>(blk[0]), kr,
                      s_.mask ? static_cast<const uint8_t*>(blk[1]) : nullptr, S, N, s_.offs[static_cast<size_t>(src)]);
  };
  TSR_TRY(x1_->run(ring, scores, &cb));
  if (bad == TSR_SUCCESS) bad = cb;
  const size_t osz = s_.B * s_.H * s_.n * s_.d;
  if (!s_.backward) {
    TSR_LOCAL(ops.softmax(s_.n, S, N, x_.lse));
    TSR_LOCAL(ops.zero(x_.o, osz));
    TSR_TRY(x2_->run(
        ring,
        [&](int, int src, void* const* blk) -> tsr_status {
          TSR_TRY(bad);
          return ops.av(s_.n, S, N, s_.offs[static_cast<size_t>(src)], static_cast<const T*>(blk[0]),
                        s_.lens[static_cast<size_t>(src)], x_.o);
        },
        &cb));
    return bad != TSR_SUCCESS ? bad : cb;
  }
  T *dA = w_[1].data(), *delta = w_[2].data(), *dkf = w_[3].data(), *dvf = w_[4].data();
  TSR_LOCAL(ops.probs(s_.n, S, N, x_.lse_in));
  TSR_LOCAL(ops.delta(s_.n, x_.o_in, x_.dout, delta));
  const size_t full = kvt * N;
  TSR_LOCAL(ops.zero(dkf, full));
  TSR_LOCAL(ops.zero(dvf, full));
  TSR_TRY(x2_->run(
      ring,
      [&](int, int src, void* const* blk) -> tsr_status {
        TSR_TRY(bad);
        const size_t off = s_.offs[static_cast<size_t>(src)];
        return ops.dav(s_.n, S, dA, N, off, static_cast<const T*>(blk[0]), s_.lens[static_cast<size_t>(src)], x_.dout,
                       dvf + kvt * off);
      },
      &cb));
  if (bad == TSR_SUCCESS) bad = cb;
  TSR_LOCAL(ops.ds(s_.n, S, dA, N, delta));
  TSR_LOCAL(ops.zero(x_.dq, osz));
  TSR_TRY(x3_->run(
      ring,
      [&](int, int src, void* const* blk) -> tsr_status {
        TSR_TRY(bad);
        const size_t off = s_.offs[static_cast<size_t>(src)];
        return ops.dqk(s_.n, dA, N, off, x_.q, static_cast<const T*>(blk[0]), s_.lens[static_cast<size_t>(src)], x_.dq,
                       dkf + kvt * off);
      },
      &cb));
  if (bad == TSR_SUCCESS) bad = cb;
  const Comm& c = *ring.comm;
  const std::vector<size_t> cnt = counts(kvt);
  TSR_TRY(reduce_scatterv(c, dkf, x_.dk, cnt.data(), s_.type, TSR_SUM));
  TSR_TRY(reduce_scatterv(c, dvf, x_.dv, cnt.data(), s_.type, TSR_SUM));
  return bad;
#undef TSR_LOCAL
}

// -------------------------------------------------------------- all-to-all
// Rank q works on query heads [q*H/p, (q+1)*H/p) and kv heads
// [q*G/p, (q+1)*G/p) over the whole sequence, padded to p*nmax rows (rank
// j's tokens at rows [j*nmax, j*nmax + n_j)).
// Forward: w0 = send, w1 = recv (p * max(in, out) per-destination counts),
// w2..w4 = Q, K, V full, w5 = O full, w6 = lse full, w7 = l full.
// Backward: w0, w1 as above, w2..w5 = Q, K, V, dO full, w6 = lse, w7 = D
// full, w8 = dQ, w9 = dK, w10 = dV full, w11 = local D, w12 = two tiles.
// Masks: m0 = send (B*nmax), m1 = all-gathered (p*B*nmax), m2 = full (B*p*nmax).
template <class T>
tsr_status Call<T>::prepare_alltoall() {
  const size_t p = static_cast<size_t>(s_.p), B = s_.B, d = s_.d, nmax = s_.nmax;
  const size_t Hp = s_.H / p, Gp = s_.G / p, np = p * nmax;
  size_t chk = 0;
  if (!mul(&chk, {B, s_.H + 2 * s_.G + 2, nmax, d + 2}))
    return fail(TSR_ERR_UNSUPPORTED, "the all-to-all variant's buffers overflow size_t");
  if (!s_.backward) {
    in_per_dest_ = B * (Hp + 2 * Gp) * nmax * d;
    out_per_dest_ = B * Hp * nmax * (d + 1);
  } else {
    in_per_dest_ = B * nmax * ((2 * Hp + 2 * Gp) * d + 2 * Hp);
    out_per_dest_ = B * nmax * (Hp + 2 * Gp) * d;
  }
  const size_t per = in_per_dest_ > out_per_dest_ ? in_per_dest_ : out_per_dest_;
  if (per > static_cast<size_t>(INT_MAX) / p)
    return fail(TSR_ERR_UNSUPPORTED, "the all-to-all variant sends %zu elements to each of %zu ranks; count*size "
                "exceeds INT_MAX", per, p);
  TSR_TRY(qpos_.alloc(&mem_, np, "positions"));
  TSR_TRY(w_[0].alloc(&mem_, per * p, "all-to-all send"));
  TSR_TRY(w_[1].alloc(&mem_, per * p, "all-to-all receive"));
  TSR_TRY(w_[2].alloc(&mem_, B * Hp * np * d, "full-sequence Q"));
  TSR_TRY(w_[3].alloc(&mem_, B * Gp * np * d, "full-sequence K"));
  TSR_TRY(w_[4].alloc(&mem_, B * Gp * np * d, "full-sequence V"));
  if (!s_.backward) {
    TSR_TRY(w_[5].alloc(&mem_, B * Hp * np * d, "full-sequence O"));
    TSR_TRY(w_[6].alloc(&mem_, B * Hp * np, "full-sequence lse"));
    TSR_TRY(w_[7].alloc(&mem_, B * Hp * np, "softmax sums"));
    if (!s_.device) TSR_TRY(w_[8].alloc(&mem_, kBq * kBk, "score tile"));
  } else {
    TSR_TRY(w_[5].alloc(&mem_, B * Hp * np * d, "full-sequence dO"));
    TSR_TRY(w_[6].alloc(&mem_, B * Hp * np, "full-sequence lse"));
    TSR_TRY(w_[7].alloc(&mem_, B * Hp * np, "full-sequence D"));
    TSR_TRY(w_[8].alloc(&mem_, B * Hp * np * d, "full-sequence dQ"));
    TSR_TRY(w_[9].alloc(&mem_, B * Gp * np * d, "full-sequence dK"));
    TSR_TRY(w_[10].alloc(&mem_, B * Gp * np * d, "full-sequence dV"));
    TSR_TRY(w_[11].alloc(&mem_, B * s_.H * s_.n, "D = rowsum(dout*out)"));
    if (!s_.device) TSR_TRY(w_[12].alloc(&mem_, 2 * kBq * kBk, "score tiles"));
  }
  if (s_.mask) {
    TSR_TRY(m_[0].alloc(&mem_, B * nmax, "key mask send"));
    TSR_TRY(m_[1].alloc(&mem_, p * B * nmax, "gathered key masks"));
  }
  // The device masks the padding keys (its kernels know no segments).
  if (s_.mask || s_.device) TSR_TRY(m_[2].alloc(&mem_, B * np, "full-sequence key mask"));
  return TSR_SUCCESS;
}

// One algorithm for both memories, as the ring: ops (this rank's heads)
// pack, compute and unpack; local_ops (all heads) compute D.
template <class T>
template <class Ops>
tsr_status Call<T>::run_alltoall(tsr_ring_s& ring, const Ops& ops, const Ops& local_ops) {
  const Comm& c = *ring.comm;
  // A failing local step (a CUDA fault) skips the remaining local work on
  // this rank but not the collectives, so that no rank waits forever; its
  // status is returned at the end.
  tsr_status bad = TSR_SUCCESS;
#define TSR_LOCAL(x)                         \
  do {                                       \
    if (bad == TSR_SUCCESS) bad = (x);       \
  } while (0)
  const size_t p = static_cast<size_t>(s_.p), B = s_.B, d = s_.d, n = s_.n, nmax = s_.nmax;
  const size_t H = s_.H, G = s_.G, Hp = H / p, Gp = G / p, np = p * nmax;
  T *sb = w_[0].data(), *rb = w_[1].data(), *Qf = w_[2].data(), *Kf = w_[3].data(), *Vf = w_[4].data();
  std::vector<Seg> segs(2 * p);
  Rows all;
  TSR_LOCAL(ops.full_rows(qpos_.data(), segs.data(), &all));
  const uint8_t* kmf = nullptr;
  if (s_.mask) {
    uint8_t *ms = m_[0].data(), *mr = m_[1].data(), *mf = m_[2].data();
    if (n > 0) TSR_LOCAL(ops.copy2d(ms, nmax, x_.km, n, n, B));
    if (nmax > n) TSR_LOCAL(ops.fill2d(ms + n, nmax, 0, nmax - n, B));
    TSR_TRY(allgather(c, ms, B * nmax, mr, TSR_BYTE));
    for (size_t j = 0; j < p; ++j)
      if (nmax > 0) TSR_LOCAL(ops.copy2d(mf + j * nmax, np, mr + j * B * nmax, nmax, nmax, B));
    kmf = mf;
  } else if (Ops::kMaskPadding && np > 0) {  // 1 for every rank's tokens, 0 for the padding
    uint8_t* mf = m_[2].data();
    TSR_LOCAL(ops.fill2d(mf, np, 0, np, B));
    for (size_t j = 0; j < p; ++j)
      if (s_.lens[j] > 0) TSR_LOCAL(ops.fill2d(mf + j * nmax, np, 1, s_.lens[j], B));
    kmf = mf;
  }
  const size_t qpart = B * Hp * nmax * d, kpart = B * Gp * nmax * d, rpart = B * Hp * nmax;
  if (!s_.backward) {
    T *Of = w_[5].data(), *Lf = w_[6].data(), *lf = w_[7].data();
    for (size_t j = 0; j < p; ++j) {
      T* part = sb + j * in_per_dest_;
      TSR_LOCAL(pack_part(ops, part, x_.q, B, H, j * Hp, Hp, n, nmax, d));
      TSR_LOCAL(pack_part(ops, part + qpart, x_.k, B, G, j * Gp, Gp, n, nmax, d));
      TSR_LOCAL(pack_part(ops, part + qpart + kpart, x_.v, B, G, j * Gp, Gp, n, nmax, d));
    }
    TSR_TRY(alltoall(c, sb, rb, in_per_dest_, s_.type));
    for (size_t j = 0; j < p; ++j) {
      const T* part = rb + j * in_per_dest_;
      TSR_LOCAL(unpack_full(ops, Qf, part, B, Hp, np, j, nmax, d));
      TSR_LOCAL(unpack_full(ops, Kf, part + qpart, B, Gp, np, j, nmax, d));
      TSR_LOCAL(unpack_full(ops, Vf, part + qpart + kpart, B, Gp, np, j, nmax, d));
    }
    TSR_LOCAL(ops.init(np, Of, Lf, lf));
    TSR_LOCAL(ops.fwd(Qf, all, Kf, Vf, all, kmf, Of, Lf, lf, w_[8].data(), Poke()));
    TSR_LOCAL(ops.finish(np, Of, Lf, lf, Lf));
    for (size_t j = 0; j < p; ++j) {
      T* part = sb + j * out_per_dest_;
      TSR_LOCAL(pack_back(ops, part, Of, B, Hp, np, j, nmax, d));
      TSR_LOCAL(pack_back(ops, part + qpart, Lf, B, Hp, np, j, nmax, 1));
    }
    TSR_TRY(alltoall(c, sb, rb, out_per_dest_, s_.type));
    for (size_t j = 0; j < p; ++j) {
      const T* part = rb + j * out_per_dest_;
      TSR_LOCAL(unpack_back(ops, x_.o, part, B, H, j * Hp, Hp, n, nmax, d));
      TSR_LOCAL(unpack_back(ops, x_.lse, part + qpart, B, H, j * Hp, Hp, n, nmax, 1));
    }
    return bad;
  }
  T *dOf = w_[5].data(), *Lf = w_[6].data(), *Df = w_[7].data();
  T *dQf = w_[8].data(), *dKf = w_[9].data(), *dVf = w_[10].data(), *Dl = w_[11].data();
  TSR_LOCAL(local_ops.delta(n, x_.o_in, x_.dout, Dl));
  for (size_t j = 0; j < p; ++j) {
    T* part = sb + j * in_per_dest_;
    TSR_LOCAL(pack_part(ops, part, x_.q, B, H, j * Hp, Hp, n, nmax, d));
    TSR_LOCAL(pack_part(ops, part + qpart, x_.k, B, G, j * Gp, Gp, n, nmax, d));
    TSR_LOCAL(pack_part(ops, part + qpart + kpart, x_.v, B, G, j * Gp, Gp, n, nmax, d));
    TSR_LOCAL(pack_part(ops, part + qpart + 2 * kpart, x_.dout, B, H, j * Hp, Hp, n, nmax, d));
    TSR_LOCAL(pack_part(ops, part + 2 * qpart + 2 * kpart, x_.lse_in, B, H, j * Hp, Hp, n, nmax, 1));
    TSR_LOCAL(pack_part(ops, part + 2 * qpart + 2 * kpart + rpart, static_cast<const T*>(Dl), B, H, j * Hp, Hp, n, nmax,
                      1));
  }
  TSR_TRY(alltoall(c, sb, rb, in_per_dest_, s_.type));
  for (size_t j = 0; j < p; ++j) {
    const T* part = rb + j * in_per_dest_;
    TSR_LOCAL(unpack_full(ops, Qf, part, B, Hp, np, j, nmax, d));
    TSR_LOCAL(unpack_full(ops, Kf, part + qpart, B, Gp, np, j, nmax, d));
    TSR_LOCAL(unpack_full(ops, Vf, part + qpart + kpart, B, Gp, np, j, nmax, d));
    TSR_LOCAL(unpack_full(ops, dOf, part + qpart + 2 * kpart, B, Hp, np, j, nmax, d));
    TSR_LOCAL(unpack_full(ops, Lf, part + 2 * qpart + 2 * kpart, B, Hp, np, j, nmax, 1));
    TSR_LOCAL(unpack_full(ops, Df, part + 2 * qpart + 2 * kpart + rpart, B, Hp, np, j, nmax, 1));
  }
  TSR_LOCAL(ops.zero(dQf, B * Hp * np * d));
  TSR_LOCAL(ops.zero(dKf, B * Gp * np * d));
  TSR_LOCAL(ops.zero(dVf, B * Gp * np * d));
  TSR_LOCAL(ops.bwd(Qf, all, Kf, Vf, all, kmf, dOf, Lf, Df, dQf, dKf, dVf, w_[12].data(), Poke()));
  for (size_t j = 0; j < p; ++j) {
    T* part = sb + j * out_per_dest_;
    TSR_LOCAL(pack_back(ops, part, dQf, B, Hp, np, j, nmax, d));
    TSR_LOCAL(pack_back(ops, part + qpart, dKf, B, Gp, np, j, nmax, d));
    TSR_LOCAL(pack_back(ops, part + qpart + kpart, dVf, B, Gp, np, j, nmax, d));
  }
  TSR_TRY(alltoall(c, sb, rb, out_per_dest_, s_.type));
  for (size_t j = 0; j < p; ++j) {
    const T* part = rb + j * out_per_dest_;
    TSR_LOCAL(unpack_back(ops, x_.dq, part, B, H, j * Hp, Hp, n, nmax, d));
    TSR_LOCAL(unpack_back(ops, x_.dk, part + qpart, B, G, j * Gp, Gp, n, nmax, d));
    TSR_LOCAL(unpack_back(ops, x_.dv, part + qpart + kpart, B, G, j * Gp, Gp, n, nmax, d));
  }
  return bad;
#undef TSR_LOCAL
}

// ------------------------------------------------------------- validation
// The tensors of one call, by role.
struct Args {
  const tsr_attn_config* cfg = nullptr;
  const tsr_attn_tensor *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr, *out = nullptr, *lse = nullptr;
  const tsr_attn_tensor *dout = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  bool backward = false;
  bool dry = false;  // a workspace query: shapes only, no data
  tsr_ring ring = nullptr;  // the call's ring (null in a workspace query)
};

tsr_status check_config(const tsr_attn_config* cfg) {
  if (cfg == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'cfg' is NULL");
  if (cfg->size != sizeof(tsr_attn_config) || cfg->magic != TSR_ATTN_CONFIG_MAGIC)
    return fail(TSR_ERR_INVALID_ARG, "argument 'cfg' was not initialised with TSR_ATTN_CONFIG_INIT (size %zu, magic "
                "0x%x)", cfg->size, cfg->magic);
  if (cfg->variant != TSR_ATTN_RING && cfg->variant != TSR_ATTN_RING_TWO_PASS && cfg->variant != TSR_ATTN_ALLTOALL)
    return fail(TSR_ERR_INVALID_ARG, "cfg->variant = %d is not a tsr_attn_variant", static_cast<int>(cfg->variant));
  if (cfg->layout != TSR_ATTN_LAYOUT_CONTIGUOUS && cfg->layout != TSR_ATTN_LAYOUT_ZIGZAG &&
      cfg->layout != TSR_ATTN_LAYOUT_STRIPED)
    return fail(TSR_ERR_INVALID_ARG, "cfg->layout = %d is not a tsr_attn_layout", static_cast<int>(cfg->layout));
  if (cfg->type == TSR_BFLOAT16)
    return fail(TSR_ERR_UNSUPPORTED, "cfg->type = TSR_BFLOAT16: attention supports TSR_FLOAT32 and TSR_FLOAT64");
  if (cfg->type != TSR_FLOAT32 && cfg->type != TSR_FLOAT64)
    return fail(TSR_ERR_INVALID_ARG, "cfg->type = %d: attention needs TSR_FLOAT32 or TSR_FLOAT64",
                static_cast<int>(cfg->type));
  if (!std::isfinite(cfg->scale)) return fail(TSR_ERR_INVALID_ARG, "cfg->scale is not finite");
  if (cfg->seq_len > static_cast<size_t>(INT64_MAX) / 2)
    return fail(TSR_ERR_INVALID_ARG, "cfg->seq_len = %zu is too large", cfg->seq_len);
  return TSR_SUCCESS;
}

tsr_status check_tensor(const tsr_attn_tensor* t, const char* name, size_t batch, size_t heads, size_t seq, size_t dim,
                        const char* heads_what, const char* dim_what, bool need_data = true) {
  if (t == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", name);
  if (t->batch != batch) return fail(TSR_ERR_SHAPE, "%s.batch = %zu; expected %zu (q.batch)", name, t->batch, batch);
  if (t->heads != heads) return fail(TSR_ERR_SHAPE, "%s.heads = %zu; expected %zu (%s)", name, t->heads, heads, heads_what);
  if (t->seq != seq) return fail(TSR_ERR_SHAPE, "%s.seq = %zu; expected %zu (q.seq)", name, t->seq, seq);
  if (t->dim != dim) return fail(TSR_ERR_SHAPE, "%s.dim = %zu; expected %zu (%s)", name, t->dim, dim, dim_what);
  size_t elems = 0;
  if (!mul(&elems, {batch, heads, seq, dim})) return fail(TSR_ERR_SHAPE, "%s: the element count overflows", name);
  if (need_data && elems > 0 && t->data == nullptr) return fail(TSR_ERR_INVALID_ARG, "%s.data is NULL", name);
  return TSR_SUCCESS;
}

// Where the tensors of a call live (docs/GPU.md, "Ring attention"): all in
// host memory, or all in device memory of the context's device (then the
// ring variant in float32 runs on the device). Decided by the non-empty
// tensors; a rank holding no token goes by its non-null pointers, else by
// whether the context is bound to a device. Fills s->device, dev, stream.
tsr_status check_space(const Args& a, Shape* s) {
  struct T {
    const tsr_attn_tensor* t;
    const char* name;
  };
  const T all[] = {{a.q, "q"},       {a.k, "k"},       {a.v, "v"},   {a.mask, "key_mask"}, {a.out, "out"},
                   {a.lse, "lse"},   {a.dout, "dout"}, {a.dq, "dq"}, {a.dk, "dk"},         {a.dv, "dv"}};
  const tsr_context_s* ctx = a.ring->ctx;
  const char *dev_name = nullptr, *host_name = nullptr;
  const char *dev_ptr = nullptr, *host_ptr = nullptr;  // among empty tensors with a pointer
  for (const T& x : all) {
    if (x.t == nullptr || x.t->data == nullptr) continue;
    if (!a.backward && (x.t == a.dout || x.t == a.dq || x.t == a.dk || x.t == a.dv)) continue;
    device::Space sp = device::Space::host;
    const std::string arg = std::string(x.name) + ".data";
    TSR_TRY(device::check_buffer(ctx, x.t->data, arg.c_str(), &sp));
    const bool empty = x.t->batch * x.t->heads * x.t->seq * x.t->dim == 0;
    const char*& slot = sp == device::Space::device ? (empty ? dev_ptr : dev_name) : (empty ? host_ptr : host_name);
    if (slot == nullptr) slot = x.name;
  }
  if (dev_name != nullptr && host_name != nullptr)
    return fail(TSR_ERR_INVALID_ARG, "%s.data is host memory but %s.data is CUDA device memory: pass every tensor of "
                "an attention call in one memory space", host_name, dev_name);
  if (dev_name != nullptr) s->device = true;
  else if (host_name != nullptr) s->device = false;
  else if (dev_ptr != nullptr && host_ptr == nullptr) s->device = true;
  else if (host_ptr != nullptr && dev_ptr == nullptr) s->device = false;
  else s->device = ctx->cuda_device >= 0;
  if (!s->device) return TSR_SUCCESS;
  const char* what = dev_name != nullptr ? dev_name : "the call";
  if (ctx->cuda_device < 0)  // only reached by a rank without tokens and with no pointer
    return fail(TSR_ERR_STATE, "device tensors need a context bound to a device (tsr_context_set_device)");
  s->dev = ctx->cuda_device;
  s->stream = ctx->cuda_stream;
  if (s->type != TSR_FLOAT32)
    return fail(TSR_ERR_UNSUPPORTED, "%s.data is CUDA device memory: the CUDA attention kernels take cfg->type = "
                "TSR_FLOAT32 (not %s)", what, dtype_name(s->type));
#if TSR_HAVE_CUDA
  if (s->d > cuda::kMaxDim)
    return fail(TSR_ERR_UNSUPPORTED, "q.dim = %zu: the CUDA attention kernels take head_dim 1 .. %zu", s->d,
                cuda::kMaxDim);
#endif
  size_t rows = 0;
  if (!mul(&rows, {s->B, s->H, s->nmax / 8 + 1}) || rows > 0x7fffffffu)
    return fail(TSR_ERR_UNSUPPORTED, "batch*heads*local_len = %zu*%zu*%zu: too many rows for one CUDA launch", s->B,
                s->H, s->nmax);
  const Comm& c = *a.ring->comm;
  const char* why = nullptr;
  if (c.size() > 1 && !device::can_move_device(c, &why))
    return fail(TSR_ERR_UNSUPPORTED, "%s.data is CUDA device memory, which the ring cannot move: %s", what, why);
  return TSR_SUCCESS;
}

size_t bytes_of(const tsr_attn_tensor* t, size_t esize) {
  return t == nullptr || t->data == nullptr ? 0 : t->batch * t->heads * t->seq * t->dim * esize;
}
bool overlap(const tsr_attn_tensor* a, size_t ea, const tsr_attn_tensor* b, size_t eb) {
  const size_t na = bytes_of(a, ea), nb = bytes_of(b, eb);
  if (na == 0 || nb == 0) return false;
  const char* x = static_cast<const char*>(a->data);
  const char* y = static_cast<const char*>(b->data);
  return x < y + nb && y < x + na;
}

// Local checks of a call on ring rank r of p. Fills s.
tsr_status check_call(const Args& a, int p, int r, Shape* s) {
  TSR_TRY(check_config(a.cfg));
  const tsr_attn_config& c = *a.cfg;
  s->variant = c.variant;
  s->layout = c.layout;
  s->causal = c.causal != 0;
  s->type = c.type;
  s->backward = a.backward;
  s->p = p;
  s->r = r;
  s->N = c.seq_len;
  fill_lens(*s);
  if (a.q == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'q' is NULL");
  s->B = a.q->batch;
  s->H = a.q->heads;
  s->d = a.q->dim;
  if (s->H == 0) return fail(TSR_ERR_SHAPE, "q.heads = 0; expected >= 1");
  if (s->d == 0) return fail(TSR_ERR_SHAPE, "q.dim = 0 (head_dim); expected >= 1");
  if (a.q->seq != s->n)
    return fail(TSR_ERR_SHAPE, "q.seq = %zu, but layout %s of seq_len %zu over %d ranks gives rank %d %zu tokens "
                "(inconsistent shard)", a.q->seq, layout_name(s->layout), s->N, p, r, s->n);
  s->scale = c.scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(s->d)) : c.scale;
  TSR_TRY(check_tensor(a.q, "q", s->B, s->H, s->n, s->d, "q.heads", "q.dim", !a.dry));
  if (a.k == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'k' is NULL");
  s->G = a.k->heads;
  if (s->G == 0 || s->H % s->G != 0)
    return fail(TSR_ERR_SHAPE, "k.heads = %zu (kv heads) must divide q.heads = %zu", s->G, s->H);
  if (a.k->dim != s->d)
    return fail(TSR_ERR_SHAPE, "k.dim = %zu differs from q.dim = %zu (head_dim)", a.k->dim, s->d);
  if (a.k->seq != s->n)
    return fail(TSR_ERR_SHAPE, "k.seq = %zu differs from q.seq = %zu (the rank's shard)", a.k->seq, s->n);
  TSR_TRY(check_tensor(a.k, "k", s->B, s->G, s->n, s->d, "k.heads", "q.dim", !a.dry));
  TSR_TRY(check_tensor(a.v, "v", s->B, s->G, s->n, s->d, "k.heads", "q.dim (head_dim of v must equal that of q, k)", !a.dry));
  s->mask = a.mask != nullptr;
  if (s->mask) {
    if (a.mask->seq != s->n)
      return fail(TSR_ERR_SHAPE, "key_mask.seq = %zu, but layout %s of seq_len %zu over %d ranks gives rank %d %zu "
                  "tokens: the mask does not match the layout", a.mask->seq, layout_name(s->layout), s->N, p, r, s->n);
    TSR_TRY(check_tensor(a.mask, "key_mask", s->B, 1, s->n, 1, "1", "1", !a.dry));
  }
  const size_t e = tsr_dtype_size(s->type);
  if (!a.backward) {
    TSR_TRY(check_tensor(a.out, "out", s->B, s->H, s->n, s->d, "q.heads", "q.dim", !a.dry));
    TSR_TRY(check_tensor(a.lse, "lse", s->B, s->H, s->n, 1, "q.heads", "1", !a.dry));
    const tsr_attn_tensor* ins[] = {a.q, a.k, a.v};
    const char* in_names[] = {"q", "k", "v"};
    for (int i = 0; i < 3; ++i) {
      if (overlap(a.out, e, ins[i], e)) return fail(TSR_ERR_INVALID_ARG, "out overlaps %s (not in place)", in_names[i]);
      if (overlap(a.lse, e, ins[i], e)) return fail(TSR_ERR_INVALID_ARG, "lse overlaps %s", in_names[i]);
    }
    if (overlap(a.out, e, a.lse, e)) return fail(TSR_ERR_INVALID_ARG, "out and lse overlap");
    if (s->mask && (overlap(a.out, e, a.mask, 1) || overlap(a.lse, e, a.mask, 1)))
      return fail(TSR_ERR_INVALID_ARG, "out or lse overlaps key_mask");
  } else {
    TSR_TRY(check_tensor(a.out, "out", s->B, s->H, s->n, s->d, "q.heads", "q.dim", !a.dry));
    TSR_TRY(check_tensor(a.lse, "lse", s->B, s->H, s->n, 1, "q.heads", "1", !a.dry));
    TSR_TRY(check_tensor(a.dout, "dout", s->B, s->H, s->n, s->d, "q.heads", "q.dim", !a.dry));
    TSR_TRY(check_tensor(a.dq, "dq", s->B, s->H, s->n, s->d, "q.heads", "q.dim", !a.dry));
    TSR_TRY(check_tensor(a.dk, "dk", s->B, s->G, s->n, s->d, "k.heads", "q.dim", !a.dry));
    TSR_TRY(check_tensor(a.dv, "dv", s->B, s->G, s->n, s->d, "k.heads", "q.dim", !a.dry));
    const tsr_attn_tensor* ins[] = {a.q, a.k, a.v, a.out, a.lse, a.dout};
    const char* in_names[] = {"q", "k", "v", "out", "lse", "dout"};
    const tsr_attn_tensor* outs[] = {a.dq, a.dk, a.dv};
    const char* out_names[] = {"dq", "dk", "dv"};
    for (int o = 0; o < 3; ++o) {
      for (int i = 0; i < 6; ++i)
        if (overlap(outs[o], e, ins[i], e))
          return fail(TSR_ERR_INVALID_ARG, "%s overlaps %s (not in place)", out_names[o], in_names[i]);
      for (int i = o + 1; i < 3; ++i)
        if (overlap(outs[o], e, outs[i], e))
          return fail(TSR_ERR_INVALID_ARG, "%s and %s overlap", out_names[o], out_names[i]);
      if (s->mask && overlap(outs[o], e, a.mask, 1))
        return fail(TSR_ERR_INVALID_ARG, "%s overlaps key_mask", out_names[o]);
    }
  }
  if (s->variant == TSR_ATTN_ALLTOALL && (s->H % static_cast<size_t>(p) != 0 || s->G % static_cast<size_t>(p) != 0))
    return fail(TSR_ERR_SHAPE, "the all-to-all variant scatters heads: the ring size %d must divide heads = %zu and "
                "kv_heads = %zu", p, s->H, s->G);
  size_t chk = 0;
  if (!mul(&chk, {s->B, s->H + 2 * s->G, s->nmax, s->d, static_cast<size_t>(p), 8}))
    return fail(TSR_ERR_UNSUPPORTED, "the tensors are too large (sizes overflow)");
  if (!a.dry) TSR_TRY(check_space(a, s));
  return TSR_SUCCESS;
}


// The same, argument by argument, for a message that names the one differing.
std::vector<Same> named(const Shape& s, bool backward) {
  double sc = s.scale;
  int64_t sbits = 0;
  std::memcpy(&sbits, &sc, sizeof sbits);
  return {{"the call (forward or backward)", backward, true},
          {"cfg->variant", s.variant},
          {"cfg->layout", s.layout},
          {"cfg->causal", s.causal},
          {"cfg->seq_len", static_cast<int64_t>(s.N)},
          {"cfg->scale", sbits, true},
          {"cfg->type", s.type},
          {"batch", static_cast<int64_t>(s.B)},
          {"heads", static_cast<int64_t>(s.H)},
          {"kv_heads", static_cast<int64_t>(s.G)},
          {"dim", static_cast<int64_t>(s.d)},
          {"key_mask (given or NULL)", s.mask, true},
          {"the tensors' memory (0: host, 1: CUDA device)", s.device}};
}

template <class T>
Data<T> data_of(const Args& a) {
  Data<T> x;
  x.q = static_cast<const T*>(a.q->data);
  x.k = static_cast<const T*>(a.k->data);
  x.v = static_cast<const T*>(a.v->data);
  x.km = a.mask ? static_cast<const uint8_t*>(a.mask->data) : nullptr;
  if (!a.backward) {
    x.o = static_cast<T*>(a.out->data);
    x.lse = static_cast<T*>(a.lse->data);
  } else {
    x.o_in = static_cast<const T*>(a.out->data);
    x.lse_in = static_cast<const T*>(a.lse->data);
    x.dout = static_cast<const T*>(a.dout->data);
    x.dq = static_cast<T*>(a.dq->data);
    x.dk = static_cast<T*>(a.dk->data);
    x.dv = static_cast<T*>(a.dv->data);
  }
  return x;
}

template <class T>
tsr_status execute(tsr_ring ring, const Args& a) {
  const Comm& c = *ring->comm;
  Shape s;
  std::unique_ptr<Call<T>> call;
  tsr_status local = check_call(a, c.size(), c.rank(), &s);
  if (local == TSR_SUCCESS) {  // size the ring's workspace arena with a dry run, then take the buffers from it
    Tracker dry;
    dry.dry = true;
    Call<T> plan(s, Data<T>(), dry);
    local = plan.prepare();
    if (local == TSR_SUCCESS && !s.device) local = ring->mem.reserve(dry.dry_arena_peak);
  }
  if (local == TSR_SUCCESS) {
    // Device tensors: the workspace is device memory (cudaMallocAsync on the
    // context's stream), counted by the ring's tracker like the arena.
    DeviceMode mode(ring->mem, s.device, s.dev, s.stream);
    call.reset(new (std::nothrow) Call<T>(s, data_of<T>(a), ring->mem));
    local = call ? call->prepare() : fail(TSR_ERR_NO_MEMORY, "allocating an attention call");
  }
  TSR_TRY(agree(c, local, named(s, a.backward)));
  return call->run(*ring);
}

tsr_status dispatch(tsr_ring ring, const Args& a) {
  TSR_TRY(check_ring(ring));
  if (ring->running)
    return fail(TSR_ERR_STATE, "attention called from inside a ring exchange step of the same ring");
  // The type decides the instantiation; an invalid config is reported by
  // check_call (through either instantiation) on every rank.
  const bool f64 = a.cfg != nullptr && a.cfg->type == TSR_FLOAT64;
  return f64 ? execute<double>(ring, a) : execute<float>(ring, a);
}

}  // namespace
}  // namespace attn
}  // namespace tsr

using tsr::finish;

namespace {
tsr_context ctx_of(tsr_ring r) { return r != nullptr && r->magic == tsr_ring_s::kMagic ? r->ctx : nullptr; }
}  // namespace

extern "C" {

tsr_status tsr_attn_forward(tsr_ring ring, const tsr_attn_config* cfg, const tsr_attn_tensor* q,
                            const tsr_attn_tensor* k, const tsr_attn_tensor* v, const tsr_attn_tensor* key_mask,
                            const tsr_attn_tensor* out, const tsr_attn_tensor* lse) {
  tsr::attn::Args a;
  a.cfg = cfg, a.q = q, a.k = k, a.v = v, a.mask = key_mask, a.out = out, a.lse = lse, a.ring = ring;
  return finish(ctx_of(ring), "tsr_attn_forward", tsr::attn::dispatch(ring, a));
}

tsr_status tsr_attn_backward(tsr_ring ring, const tsr_attn_config* cfg, const tsr_attn_tensor* q,
                             const tsr_attn_tensor* k, const tsr_attn_tensor* v, const tsr_attn_tensor* key_mask,
                             const tsr_attn_tensor* out, const tsr_attn_tensor* lse, const tsr_attn_tensor* dout,
                             const tsr_attn_tensor* dq, const tsr_attn_tensor* dk, const tsr_attn_tensor* dv) {
  tsr::attn::Args a;
  a.cfg = cfg, a.q = q, a.k = k, a.v = v, a.mask = key_mask, a.out = out, a.lse = lse;
  a.dout = dout, a.dq = dq, a.dk = dk, a.dv = dv, a.backward = true, a.ring = ring;
  return finish(ctx_of(ring), "tsr_attn_backward", tsr::attn::dispatch(ring, a));
}

}  // extern "C"

namespace tsr {
namespace attn {
tsr_status workspace(const tsr_attn_config* cfg, int nranks, int rank, size_t batch, size_t heads, size_t kv_heads,
                     size_t dim, int has_key_mask, int backward, size_t* bytes) {
    TSR_CHECK_NOT_NULL(bytes);
    if (nranks < 1) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'nranks' = %d; expected >= 1", nranks);
    if (rank < 0 || rank >= nranks)
      return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'rank' = %d; expected 0 <= rank < nranks = %d", rank, nranks);
    TSR_TRY(tsr::attn::check_config(cfg));
    // Describe the call with placeholder (never read) data pointers.
    const size_t n = tsr::attn::shard_len(cfg->layout, cfg->seq_len, nranks, rank);
    tsr_attn_tensor q{nullptr, batch, heads, n, dim}, kv{nullptr, batch, kv_heads, n, dim};
    tsr_attn_tensor ls{nullptr, batch, heads, n, 1}, mk{nullptr, batch, 1, n, 1};
    tsr::attn::Args a;
    a.dry = true;
    a.cfg = cfg, a.q = &q, a.k = &kv, a.v = &kv, a.mask = has_key_mask ? &mk : nullptr, a.out = &q, a.lse = &ls;
    a.dout = &q, a.dq = &q, a.dk = &kv, a.dv = &kv, a.backward = backward != 0;
    tsr::attn::Shape s;
    TSR_TRY(tsr::attn::check_call(a, nranks, rank, &s));
    tsr::Tracker dry;
    dry.dry = true;
    if (s.type == TSR_FLOAT64) {
      tsr::attn::Call<double> call(s, tsr::attn::Data<double>(), dry);
      TSR_TRY(call.prepare());
    } else {
      tsr::attn::Call<float> call(s, tsr::attn::Data<float>(), dry);
      TSR_TRY(call.prepare());
    }
    *bytes = dry.peak;
    return TSR_SUCCESS;
}
}  // namespace attn
}  // namespace tsr

extern "C" {

tsr_status tsr_attn_workspace(const tsr_attn_config* cfg, int nranks, int rank, size_t batch, size_t heads,
                              size_t kv_heads, size_t dim, int has_key_mask, int backward, size_t* bytes) {
  return finish(nullptr, "tsr_attn_workspace",
                tsr::attn::workspace(cfg, nranks, rank, batch, heads, kv_heads, dim, has_key_mask, backward, bytes));
}

tsr_status tsr_attn_merge(tsr_dtype type, size_t rows, size_t dim, void* o_a, void* lse_a, const void* o_b,
                          const void* lse_b) {
  tsr_status st = [&]() -> tsr_status {
    if (type != TSR_FLOAT32 && type != TSR_FLOAT64)
      return tsr::fail(type == TSR_BFLOAT16 ? TSR_ERR_UNSUPPORTED : TSR_ERR_INVALID_ARG,
                       "argument 'type' = %d: the merge needs TSR_FLOAT32 or TSR_FLOAT64", static_cast<int>(type));
    size_t elems = 0;
    if (!tsr::checked_mul(&elems, {rows, dim, tsr_dtype_size(type)}))
      return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'rows' = %zu and 'dim' = %zu: rows*dim elements overflow size_t",
                       rows, dim);
    if (rows > 0) {
      TSR_CHECK_NOT_NULL(lse_a);
      TSR_CHECK_NOT_NULL(lse_b);
      if (dim > 0) {
        TSR_CHECK_NOT_NULL(o_a);
        TSR_CHECK_NOT_NULL(o_b);
      }
    }
    if (type == TSR_FLOAT64)
      tsr::attn::merge(rows, dim, static_cast<double*>(o_a), static_cast<double*>(lse_a),
                       static_cast<const double*>(o_b), static_cast<const double*>(lse_b));
    else
      tsr::attn::merge(rows, dim, static_cast<float*>(o_a), static_cast<float*>(lse_a), static_cast<const float*>(o_b),
                       static_cast<const float*>(lse_b));
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_attn_merge", st);
}

}  // extern "C"

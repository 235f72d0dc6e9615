// The fused LAMB / LARS passes on the device (opt_cuda.hpp). Compiled with
// --fmad=false (optimizers/cuda/CMakeLists.txt): the expressions below are
// those of kernels.cpp, operation for operation.
//
// Memory layout of a launch (KernelConfig): every task is cut into parts of
// block_elems elements (a multiple of 8; 0: the whole task), one thread
// block per part. A block peels a scalar head until its lead array (w, or g
// where w is not read) is aligned to a vector, then reads and writes vectors
// of `vec` elements (float32 arrays: float4 loads and stores; bfloat16
// arrays: 8- or 16-byte loads and stores) for every array whose address
// allows it at that point (each array is checked on its own; one that does
// not line up with the lead is read element by element), `unroll` vectors
// per thread loaded before any is used, then a scalar tail. Read-only arrays
// go through the read-only cache (__ldg, const __restrict__). Per-element
// results do not depend on the configuration; the per-thread float64 sums
// are added in an order fixed by the configuration (no atomics), reduced by
// warp shuffles, then across warps in warp order, then across the parts of
// a task in part order on the device: the same bits on every run.
#include "opt_cuda.hpp"

#include <cstdint>
#include <cstring>

namespace tsr {
namespace opt {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float ld(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
__device__ __forceinline__ uint16_t to_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

struct LambOut {
  float m, v, u;
};
__device__ __forceinline__ LambOut lamb(float gr, float x, float mi, float vi, const LambCoef& c) {
  const float g = c.gs * gr + c.l2 * x;
  const float m = c.b1 * mi + c.a1 * g;
  const float v = c.b2 * vi + c.a2 * (g * g);
  const float u = (m * c.bc1) / (sqrtf(v * c.bc2 + c.ei) + c.eo) + c.wd * x;
  return {m, v, u};
}

__device__ __forceinline__ float lars_upd(float d, float vi, const LarsCoef& c, float* vout) {
  if (c.has_v) {
    const float vn = c.mu * vi + c.a * d;
    *vout = vn;
    return c.nesterov ? c.mu * vn + c.a * d : vn;
  }
  return c.a * d;
}

// ---- vector access. W elements at p; `vec`: p is aligned for one access
// of W elements (float32: 16 bytes per 4; bfloat16: 2W bytes, at most 16).
// W == 1 or !vec: element by element.
template <int W>
__device__ __forceinline__ void ld_ro(const float* __restrict__ p, bool vec, float (&o)[W]) {
  if constexpr (W % 4 == 0) {
    if (vec) {
#pragma unroll
      for (int q = 0; q < W / 4; ++q) {
        const float4 t = __ldg(reinterpret_cast<const float4*>(p) + q);
        o[4 * q] = t.x;
        o[4 * q + 1] = t.y;
        o[4 * q + 2] = t.z;
        o[4 * q + 3] = t.w;
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < W; ++k) o[k] = __ldg(p + k);
}
__device__ __forceinline__ void split2(uint32_t x, float* o) {
  o[0] = __uint_as_float(x << 16);
  o[1] = __uint_as_float(x & 0xffff0000u);
}
template <int W>
__device__ __forceinline__ void ld_ro(const uint16_t* __restrict__ p, bool vec, float (&o)[W]) {
  if constexpr (W == 4) {
    if (vec) {
      const uint2 t = __ldg(reinterpret_cast<const uint2*>(p));
      split2(t.x, o);
      split2(t.y, o + 2);
      return;
    }
  } else if constexpr (W == 8) {
    if (vec) {
      const uint4 t = __ldg(reinterpret_cast<const uint4*>(p));
      split2(t.x, o);
      split2(t.y, o + 2);
      split2(t.z, o + 4);
      split2(t.w, o + 6);
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < W; ++k) o[k] = ld(__ldg(p + k));
}
// Arrays the kernel also writes: plain loads (not the read-only path).
template <int W>
__device__ __forceinline__ void ld_rw(const float* p, bool vec, float (&o)[W]) {
  if constexpr (W % 4 == 0) {
    if (vec) {
#pragma unroll
      for (int q = 0; q < W / 4; ++q) {
        const float4 t = reinterpret_cast<const float4*>(p)[q];
        o[4 * q] = t.x;
        o[4 * q + 1] = t.y;
        o[4 * q + 2] = t.z;
        o[4 * q + 3] = t.w;
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < W; ++k) o[k] = p[k];
}
template <int W>
__device__ __forceinline__ void st(float* p, bool vec, const float (&x)[W]) {
  if constexpr (W % 4 == 0) {
    if (vec) {
#pragma unroll
      for (int q = 0; q < W / 4; ++q)
        reinterpret_cast<float4*>(p)[q] = make_float4(x[4 * q], x[4 * q + 1], x[4 * q + 2], x[4 * q + 3]);
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < W; ++k) p[k] = x[k];
}
__device__ __forceinline__ uint32_t pack2(uint16_t a, uint16_t b) {
  return static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 16);
}
template <int W>
__device__ __forceinline__ void st(uint16_t* p, bool vec, const uint16_t (&x)[W]) {
  if constexpr (W == 4) {
    if (vec) {
      *reinterpret_cast<uint2*>(p) = make_uint2(pack2(x[0], x[1]), pack2(x[2], x[3]));
      return;
    }
  } else if constexpr (W == 8) {
    if (vec) {
      *reinterpret_cast<uint4*>(p) =
          make_uint4(pack2(x[0], x[1]), pack2(x[2], x[3]), pack2(x[4], x[5]), pack2(x[6], x[7]));
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < W; ++k) p[k] = x[k];
}

// Bytes one vector access of V elements of T needs its address aligned to.
template <int V, class T>
__device__ __forceinline__ bool aligned(const T* p) {
  constexpr uintptr_t a = sizeof(T) == 4 ? 16 : (2 * V < 16 ? 2 * V : 16);
  return V > 1 && reinterpret_cast<uintptr_t>(p) % a == 0;
}
// Elements to peel before `lead` sits at a multiple of V elements (at most
// n): a float32 lead is then 16-byte aligned, and so is any array, float32
// or bfloat16, at the same element index mod V.
template <int V, class T>
__device__ __forceinline__ uint32_t head_of(const T* lead, uint32_t n) {
  if (V == 1) return 0;
  constexpr uintptr_t per = V;
  const uintptr_t e = reinterpret_cast<uintptr_t>(lead) / sizeof(T);
  const uint32_t h = static_cast<uint32_t>((per - e % per) % per);
  return h < n ? h : n;
}

// The walk over one block's n elements: the scalar head [0, head), vectors
// of V from head (U per thread per round, all loaded before any is used),
// the scalar tail. Op: R<W> (registers of W elements), load<W>(i, r, vec),
// apply<W>(i, r).
template <int V, int U, class Op>
__device__ __forceinline__ void walk(Op& op, uint32_t n, uint32_t head) {
  const uint32_t t = threadIdx.x;
  if (t < head) {
    typename Op::template R<1> r;
    op.template load<1>(t, r, false);
    op.template apply<1>(t, r);
  }
  const uint32_t vend = head + (n - head) / V * V;
  constexpr uint32_t S = kThreads * V;
  uint32_t i = head + t * V;
  if constexpr (U > 1) {
    for (; i <= vend && vend - i >= (U - 1) * S + V; i += U * S) {
      typename Op::template R<V> r[U];
#pragma unroll
      for (int u = 0; u < U; ++u) op.template load<V>(i + u * S, r[u], true);
#pragma unroll
      for (int u = 0; u < U; ++u) op.template apply<V>(i + u * S, r[u]);
    }
  }
  for (; i < vend; i += S) {  // i < vend: a whole vector (i - head is a multiple of V)
    typename Op::template R<V> r;
    op.template load<V>(i, r, true);
    op.template apply<V>(i, r);
  }
  for (uint32_t j = vend + t; j < n; j += kThreads) {
    typename Op::template R<1> r;
    op.template load<1>(j, r, false);
    op.template apply<1>(j, r);
  }
}

struct Acc {
  double a = 0, b = 0, c = 0;
};

// ---- pass A operations
template <class G>
struct OpSumsq {
  const G* __restrict__ g;
  bool gv;
  Acc s;
  template <int W>
  struct R {
    float g[W];
  };
  template <int W>
  __device__ __forceinline__ void load(uint32_t i, R<W>& r, bool vec) {
    ld_ro<W>(g + i, vec && gv, r.g);
  }
  template <int W>
  __device__ __forceinline__ void apply(uint32_t, const R<W>& r) {
#pragma unroll
    for (int k = 0; k < W; ++k) s.a += static_cast<double>(r.g[k]) * r.g[k];
  }
};

template <class G>
struct OpLambA {
  const G* __restrict__ g;
  const float* __restrict__ w;
  const float* __restrict__ m;
  const float* __restrict__ v;
  bool gv, wv, mv, vv, all;
  LambCoef c;
  Acc s;
  template <int W>
  struct R {
    float g[W], x[W], m[W], v[W];
  };
  template <int W>
  __device__ __forceinline__ void load(uint32_t i, R<W>& r, bool vec) {
    ld_ro<W>(g + i, vec && gv, r.g);
    ld_ro<W>(w + i, vec && wv, r.x);
    ld_ro<W>(m + i, vec && mv, r.m);
    ld_ro<W>(v + i, vec && vv, r.v);
  }
  template <int W>
  __device__ __forceinline__ void apply(uint32_t, const R<W>& r) {
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float gr = r.g[k], x = r.x[k];
      const float u = lamb(gr, x, r.m[k], r.v[k], c).u;
      if (all) {
        s.a += static_cast<double>(gr) * gr;
        s.b += static_cast<double>(x) * x;
      }
      s.c += static_cast<double>(u) * u;
    }
  }
};

template <class G>
struct OpLarsUnorm {
  const G* __restrict__ g;
  const float* __restrict__ w;
  const float* __restrict__ mom;
  bool gv, wv, mv;
  LarsCoef c;
  Acc s;
  template <int W>
  struct R {
    float g[W], x[W], m[W];
  };
  template <int W>
  __device__ __forceinline__ void load(uint32_t i, R<W>& r, bool vec) {
    ld_ro<W>(g + i, vec && gv, r.g);
    ld_ro<W>(w + i, vec && wv, r.x);
    if (c.has_v) {
      ld_ro<W>(mom + i, vec && mv, r.m);
    } else {
#pragma unroll
      for (int k = 0; k < W; ++k) r.m[k] = 0.0f;
    }
  }
  template <int W>
  __device__ __forceinline__ void apply(uint32_t, const R<W>& r) {
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float gr = r.g[k], x = r.x[k];
      const float d = c.gs * gr + c.wd * x;
      float unused;
      const float upd = lars_upd(d, r.m[k], c, &unused);
      s.a += static_cast<double>(gr) * gr;
      s.b += static_cast<double>(x) * x;
      s.c += static_cast<double>(upd) * upd;
    }
  }
};

template <class G>
struct OpLarsNorms {
  const G* __restrict__ g;
  const float* __restrict__ w;
  bool gv, wv;
  Acc s;
  template <int W>
  struct R {
    float g[W], x[W];
  };
  template <int W>
  __device__ __forceinline__ void load(uint32_t i, R<W>& r, bool vec) {
    ld_ro<W>(g + i, vec && gv, r.g);
    ld_ro<W>(w + i, vec && wv, r.x);
  }
  template <int W>
  __device__ __forceinline__ void apply(uint32_t, const R<W>& r) {
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const double gr = r.g[k], x = r.x[k];
      s.a += gr * gr;
      s.b += x * x;
      s.c += gr * x;
    }
  }
};

// ---- pass B operations
template <class G>
struct OpLambB {
  const G* __restrict__ g;
  float* w;
  float* m;
  float* v;
  uint16_t* p;
  bool gv, wv, mv, vv, pv;
  LambCoef c;
  float kf;
  template <int W>
  struct R {
    float g[W], x[W], m[W], v[W];
  };
  template <int W>
  __device__ __forceinline__ void load(uint32_t i, R<W>& r, bool vec) {
    ld_ro<W>(g + i, vec && gv, r.g);
    ld_rw<W>(w + i, vec && wv, r.x);
    ld_rw<W>(m + i, vec && mv, r.m);
    ld_rw<W>(v + i, vec && vv, r.v);
  }
  template <int W>
  __device__ __forceinline__ void apply(uint32_t i, const R<W>& r) {
    float nm[W], nv[W], nw[W];
    uint16_t pb[W];
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float x = r.x[k];
      const LambOut o = lamb(r.g[k], x, r.m[k], r.v[k], c);
      nm[k] = o.m;
      nv[k] = o.v;
      const float y = x - kf * o.u;
      nw[k] = y;
      pb[k] = to_bf16(y);
    }
    st<W>(m + i, mv, nm);
    st<W>(v + i, vv, nv);
    st<W>(w + i, wv, nw);
    if (p) st<W>(p + i, pv, pb);
  }
};

template <class G>
struct OpLarsB {
  const G* __restrict__ g;
  float* w;
  float* mom;
  uint16_t* p;
  bool gv, wv, mv, pv;
  LarsCoef c;
  template <int W>
  struct R {
    float g[W], x[W], m[W];
  };
  template <int W>
  __device__ __forceinline__ void load(uint32_t i, R<W>& r, bool vec) {
    ld_ro<W>(g + i, vec && gv, r.g);
    ld_rw<W>(w + i, vec && wv, r.x);
    if (c.has_v) {
      ld_rw<W>(mom + i, vec && mv, r.m);
    } else {
#pragma unroll
      for (int k = 0; k < W; ++k) r.m[k] = 0.0f;
    }
  }
  template <int W>
  __device__ __forceinline__ void apply(uint32_t i, const R<W>& r) {
    float nm[W], nw[W];
    uint16_t pb[W];
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float x = r.x[k];
      const float d = c.gs * r.g[k] + c.wd * x;
      float vn = 0.0f;
      const float upd = lars_upd(d, r.m[k], c, &vn);
      nm[k] = vn;
      const float y = x - c.b * upd;
      nw[k] = y;
      pb[k] = to_bf16(y);
    }
    if (c.has_v) st<W>(mom + i, mv, nm);
    st<W>(w + i, wv, nw);
    if (p) st<W>(p + i, pv, pb);
  }
};

// A fixed-shape reduction over the block: shuffles down each warp, then
// warp 0 adds the warps' sums in warp order. The same bits on every run.
__device__ __forceinline__ double warp_sum(double x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
  return x;
}
__device__ void block_sum3(const Acc& s, Sums* out) {
  __shared__ double sh[3][kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const double a = warp_sum(s.a), b = warp_sum(s.b), c = warp_sum(s.c);
  if (lane == 0) {
    sh[0][warp] = a;
    sh[1][warp] = b;
    sh[2][warp] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double x = 0, y = 0, z = 0;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) {
      x += sh[0][k];
      y += sh[1][k];
      z += sh[2][k];
    }
    out->a = x;
    out->b = y;
    out->c = z;
  }
}

// The part of its task a block works on: [lo, lo + n) of the task.
struct Part {
  Task tk;
  uint32_t lo, n;
};
__device__ __forceinline__ Part part_of(const Task* tasks, uint32_t parts, uint32_t block_elems) {
  Part r;
  const uint32_t ti = blockIdx.x / parts, j = blockIdx.x % parts;
  r.tk = tasks[ti];
  if (block_elems == 0) {
    r.lo = 0;
    r.n = r.tk.n;
  } else {
    const uint64_t lo = static_cast<uint64_t>(j) * block_elems;
    r.lo = lo < r.tk.n ? static_cast<uint32_t>(lo) : r.tk.n;
    const uint32_t left = r.tk.n - r.lo;
    r.n = left < block_elems ? left : block_elems;
  }
  return r;
}

template <class G, int V, int U>
__global__ void __launch_bounds__(kThreads)
    pass_a_kernel(const Task* __restrict__ tasks, uint32_t parts, uint32_t block_elems, const G* __restrict__ g,
                  const float* __restrict__ w, const float* __restrict__ m, const float* __restrict__ v,
                  const LambCoef* __restrict__ lamb_c, const LarsCoef* __restrict__ lars_c, Sums* out) {
  const Part pt = part_of(tasks, parts, block_elems);
  const Task& tk = pt.tk;
  const uint32_t n = pt.n;
  const G* gp = g + tk.g_off + pt.lo;
  const float* wp = w + tk.w_off + pt.lo;
  Acc s;
  switch (tk.op) {
    case kSumsq: {
      const uint32_t h = head_of<V>(gp, n);
      OpSumsq<G> op{gp, aligned<V>(gp + h), {}};
      walk<V, U>(op, n, h);
      s = op.s;
      break;
    }
    case kLambNorms:
    case kLambUnorm: {
      const float* mp = m + tk.s_off + pt.lo;
      const float* vp = v + tk.s_off + pt.lo;
      const uint32_t h = head_of<V>(wp, n);
      OpLambA<G> op{gp, wp, mp, vp, aligned<V>(gp + h), aligned<V>(wp + h), aligned<V>(mp + h), aligned<V>(vp + h),
                    tk.op == kLambNorms, lamb_c[tk.group], {}};
      walk<V, U>(op, n, h);
      s = op.s;
      break;
    }
    case kLarsUnorm: {
      const float* mp = m + tk.s_off + pt.lo;  // the momentum lives in m
      const uint32_t h = head_of<V>(wp, n);
      OpLarsUnorm<G> op{gp, wp, mp, aligned<V>(gp + h), aligned<V>(wp + h), aligned<V>(mp + h), lars_c[tk.group], {}};
      walk<V, U>(op, n, h);
      s = op.s;
      break;
    }
    case kLarsNorms: {
      const uint32_t h = head_of<V>(wp, n);
      OpLarsNorms<G> op{gp, wp, aligned<V>(gp + h), aligned<V>(wp + h), {}};
      walk<V, U>(op, n, h);
      s = op.s;
      break;
    }
    default:
      break;
  }
  block_sum3(s, out + blockIdx.x);
}

template <class G, int V, int U>
__global__ void __launch_bounds__(kThreads)
    pass_b_kernel(const Task* __restrict__ tasks, uint32_t parts, uint32_t block_elems, const G* __restrict__ g,
                  float* w, float* m, float* v, uint16_t* p, const LambCoef* __restrict__ lamb_c,
                  const float* __restrict__ kf, const LarsCoef* __restrict__ lars_c) {
  const Part pt = part_of(tasks, parts, block_elems);
  const Task& tk = pt.tk;
  const uint32_t n = pt.n;
  const G* gp = g + tk.g_off + pt.lo;
  float* wp = w + tk.w_off + pt.lo;
  float* mp = m + tk.s_off + pt.lo;
  uint16_t* pp = p ? p + tk.p_off + pt.lo : nullptr;
  const uint32_t h = head_of<V>(wp, n);
  if (tk.op == kLambUpdate) {
    float* vp = v + tk.s_off + pt.lo;
    OpLambB<G> op{gp, wp, mp, vp, pp, aligned<V>(gp + h), aligned<V>(wp + h), aligned<V>(mp + h), aligned<V>(vp + h),
                  pp != nullptr && aligned<V>(pp + h), lamb_c[tk.group], kf[tk.group]};
    walk<V, U>(op, n, h);
  } else {
    OpLarsB<G> op{gp, wp, mp, pp, aligned<V>(gp + h), aligned<V>(wp + h), aligned<V>(mp + h),
                  pp != nullptr && aligned<V>(pp + h), lars_c[tk.group]};
    walk<V, U>(op, n, h);
  }
}

// Sums of the parts of each task, in part order.
__global__ void combine_kernel(const Sums* __restrict__ in, uint32_t parts, size_t ntasks, Sums* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < ntasks;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const Sums* s = in + i * parts;
    double a = s[0].a, b = s[0].b, c = s[0].c;
    for (uint32_t j = 1; j < parts; ++j) {
      a += s[j].a;
      b += s[j].b;
      c += s[j].c;
    }
    out[i].a = a;
    out[i].b = b;
    out[i].c = c;
  }
}

__global__ void bf16_to_f32_kernel(const uint16_t* in, float* out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = ld(in[i]);
}
__global__ void f32_to_bf16_kernel(const float* in, uint16_t* out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = to_bf16(in[i]);
}

unsigned grid_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

size_t round8(size_t x) { return (x + 7) & ~size_t(7); }

// The kernels of a configuration (the instantiated set: KernelConfig).
struct Kernels {
  void (*a_f32)(const Task*, uint32_t, uint32_t, const float*, const float*, const float*, const float*,
                const LambCoef*, const LarsCoef*, Sums*);
  void (*a_bf16)(const Task*, uint32_t, uint32_t, const uint16_t*, const float*, const float*, const float*,
                 const LambCoef*, const LarsCoef*, Sums*);
  void (*b_f32)(const Task*, uint32_t, uint32_t, const float*, float*, float*, float*, uint16_t*, const LambCoef*,
                const float*, const LarsCoef*);
  void (*b_bf16)(const Task*, uint32_t, uint32_t, const uint16_t*, float*, float*, float*, uint16_t*,
                 const LambCoef*, const float*, const LarsCoef*);
};
template <int V, int U>
Kernels kernels_of() {
  return {pass_a_kernel<float, V, U>, pass_a_kernel<uint16_t, V, U>, pass_b_kernel<float, V, U>,
          pass_b_kernel<uint16_t, V, U>};
}
// nullptr-filled for a configuration that is not instantiated.
Kernels kernels_for(int vec, int unroll) {
  switch (vec * 10 + unroll) {
    case 11: return kernels_of<1, 1>();
    case 14: return kernels_of<1, 4>();
    case 41: return kernels_of<4, 1>();
    case 42: return kernels_of<4, 2>();
    case 44: return kernels_of<4, 4>();
    case 81: return kernels_of<8, 1>();
    case 82: return kernels_of<8, 2>();
    default: return {nullptr, nullptr, nullptr, nullptr};
  }
}

}  // namespace

bool KernelConfig::valid() const {
  return kernels_for(vec, unroll).a_f32 != nullptr && block_elems % 8 == 0;
}

tsr_status Runner::init(int device, cudaStream_t stream) {
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device));
  device_ = device;
  stream_ = stream;
  for (Table& t : table_) t.valid = false;
  return TSR_SUCCESS;
}

tsr_status Runner::set_config(const KernelConfig& c) {
  if (!c.valid())
    return fail(TSR_ERR_INVALID_ARG,
                "kernel configuration vec %d unroll %d block_elems %u is not one of the built ones (vec x unroll in "
                "1x1, 1x4, 4x1, 4x2, 4x4, 8x1, 8x2; block_elems a multiple of 8)",
                c.vec, c.unroll, c.block_elems);
  cfg_ = c;
  return TSR_SUCCESS;
}

// The task table goes to the device only when it differs from the one
// already there for this pass (the optimizer's table is the same from step
// to step); the coefficients (a few bytes per group) every time, packed
// 8-byte aligned: lamb, lars, k.
tsr_status Runner::upload(int slot, const std::vector<Task>& tasks, const void* lamb, size_t lamb_bytes,
                          const void* lars, size_t lars_bytes, const float* k, size_t k_bytes) {
  Table& t = table_[slot];
  const size_t tb = tasks.size() * sizeof(Task);
  if (!(t.valid && t.host.size() == tasks.size() && std::memcmp(t.host.data(), tasks.data(), tb) == 0)) {
    t.valid = false;
    TSR_TRY(t.dev.reserve(tb, "allocating the optimizer's task table on the device"));
    // Pageable source: cudaMemcpyAsync returns once it has been read.
    TSR_CUDA_CHECK(cudaMemcpyAsync(t.dev.get(), tasks.data(), tb, cudaMemcpyHostToDevice, stream_),
                   "copying the optimizer's task table to the device");
    t.host = tasks;
    t.valid = true;
  }
  const size_t total = round8(lamb_bytes) + round8(lars_bytes) + round8(k_bytes);
  if (total == 0) return TSR_SUCCESS;
  TSR_TRY(coef_.reserve(total, "allocating the optimizer's coefficients on the device"));
  staging_.resize(total);
  unsigned char* s = staging_.data();
  if (lamb_bytes) std::memcpy(s, lamb, lamb_bytes);
  s += round8(lamb_bytes);
  if (lars_bytes) std::memcpy(s, lars, lars_bytes);
  s += round8(lars_bytes);
  if (k_bytes) std::memcpy(s, k, k_bytes);
  TSR_CUDA_CHECK(cudaMemcpyAsync(coef_.get(), staging_.data(), total, cudaMemcpyHostToDevice, stream_),
                 "copying the optimizer's coefficients to the device");
  return TSR_SUCCESS;
}

// Parts per task and the grid of a launch (0 parts: too many blocks).
uint32_t Runner::parts_for(const std::vector<Task>& tasks) const {
  if (cfg_.block_elems == 0) return 1;
  uint32_t most = 0;
  for (const Task& t : tasks) most = t.n > most ? t.n : most;
  const uint64_t p = (static_cast<uint64_t>(most) + cfg_.block_elems - 1) / cfg_.block_elems;
  if (p == 0) return 1;
  if (p * tasks.size() > 0x7fffffffu) return 0;
  return static_cast<uint32_t>(p);
}

tsr_status Runner::pass_a(const std::vector<Task>& tasks, const void* g, bool bf16, const float* w, const float* m,
                          const float* v, const LambCoef* lamb, const LarsCoef* lars, size_t ngroups, Sums* out) {
  if (device_ < 0) return fail(TSR_ERR_STATE, "the device optimizer runner is not initialised");
  if (tasks.empty()) return TSR_SUCCESS;
  const uint32_t parts = parts_for(tasks);
  if (parts == 0 || tasks.size() > 0x7fffffffu)
    return fail(TSR_ERR_UNSUPPORTED, "more than 2^31-1 thread blocks in one launch");
  bool uses_w = false, uses_mv = false, uses_m = false;
  for (const Task& t : tasks) {
    if (t.op == kLambNorms || t.op == kLambUnorm) uses_w = uses_mv = true;
    if (t.op == kLarsUnorm || t.op == kLarsNorms) uses_w = true;
    if (t.op == kLarsUnorm) uses_m = true;
  }
  if (uses_mv && lamb == nullptr) return fail(TSR_ERR_INTERNAL, "LAMB tasks without LAMB coefficients");
  if (uses_m && lars == nullptr) return fail(TSR_ERR_INTERNAL, "LARS tasks without LARS coefficients");
  TSR_TRY(tsr::cuda::check_device_ptr(g, "grads", device_));
  if (uses_w) TSR_TRY(tsr::cuda::check_device_ptr(w, "params", device_));
  if (uses_mv) TSR_TRY(tsr::cuda::check_device_ptr(v, "v", device_));
  if (uses_mv || uses_m) TSR_TRY(tsr::cuda::check_device_ptr(m, "m", device_));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device_));
  const size_t lb = lamb ? ngroups * sizeof(LambCoef) : 0, pb = lars ? ngroups * sizeof(LarsCoef) : 0;
  TSR_TRY(upload(0, tasks, lamb, lb, lars, pb, nullptr, 0));
  const size_t blocks = tasks.size() * parts;
  const size_t nsum = blocks + (parts > 1 ? tasks.size() : 0);
  TSR_TRY(sums_.reserve(nsum * sizeof(Sums), "allocating the per-item sums on the device"));
  const Task* dt = static_cast<const Task*>(table_[0].dev.get());
  unsigned char* base = static_cast<unsigned char*>(coef_.get());
  const LambCoef* dl = lb ? reinterpret_cast<const LambCoef*>(base) : nullptr;
  const LarsCoef* dp = pb ? reinterpret_cast<const LarsCoef*>(base + round8(lb)) : nullptr;
  Sums* ds = static_cast<Sums*>(sums_.get());
  const Kernels k = kernels_for(cfg_.vec, cfg_.unroll);
  const unsigned nb = static_cast<unsigned>(blocks);
  if (bf16)
    k.a_bf16<<<nb, kThreads, 0, stream_>>>(dt, parts, cfg_.block_elems, static_cast<const uint16_t*>(g), w, m, v, dl,
                                           dp, ds);
  else
    k.a_f32<<<nb, kThreads, 0, stream_>>>(dt, parts, cfg_.block_elems, static_cast<const float*>(g), w, m, v, dl, dp,
                                          ds);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the optimizer's pass A");
  Sums* res = ds;
  if (parts > 1) {
    res = ds + blocks;
    combine_kernel<<<grid_for(tasks.size()), kThreads, 0, stream_>>>(ds, parts, tasks.size(), res);
    TSR_CUDA_CHECK(cudaGetLastError(), "launching the sums of the parts of pass A");
  }
  const size_t sb = tasks.size() * sizeof(Sums);
  if (host_sums_.size < sb) {
    if (host_sums_.p) (void)cudaFreeHost(host_sums_.p);
    host_sums_.p = nullptr;
    host_sums_.size = 0;
    TSR_CUDA_CHECK(cudaMallocHost(&host_sums_.p, sb), "allocating page-locked host memory for the per-item sums");
    host_sums_.size = sb;
  }
  TSR_CUDA_CHECK(cudaMemcpyAsync(host_sums_.p, res, sb, cudaMemcpyDeviceToHost, stream_),
                 "copying the per-item sums to the host");
  TSR_CUDA_CHECK(cudaStreamSynchronize(stream_), "waiting for the optimizer's pass A");
  std::memcpy(out, host_sums_.p, sb);
  return TSR_SUCCESS;
}

tsr_status Runner::pass_b(const std::vector<Task>& tasks, const void* g, bool bf16, float* w, float* m, float* v,
                          uint16_t* p, const LambCoef* lamb, const float* k, const LarsCoef* lars, size_t ngroups) {
  if (device_ < 0) return fail(TSR_ERR_STATE, "the device optimizer runner is not initialised");
  if (tasks.empty()) return TSR_SUCCESS;
  const uint32_t parts = parts_for(tasks);
  if (parts == 0 || tasks.size() > 0x7fffffffu)
    return fail(TSR_ERR_UNSUPPORTED, "more than 2^31-1 thread blocks in one launch");
  bool any_lamb = false, any_lars_v = false;
  for (const Task& t : tasks) {
    if (t.op == kLambUpdate) any_lamb = true;
    else if (lars && lars[t.group].has_v) any_lars_v = true;
    if (t.op == kLarsUpdate && lars == nullptr) return fail(TSR_ERR_INTERNAL, "LARS tasks without LARS coefficients");
  }
  if (any_lamb && (lamb == nullptr || k == nullptr)) return fail(TSR_ERR_INTERNAL, "LAMB tasks without coefficients");
  TSR_TRY(tsr::cuda::check_device_ptr(g, "grads", device_));
  TSR_TRY(tsr::cuda::check_device_ptr(w, "params", device_));
  if (any_lamb || any_lars_v) TSR_TRY(tsr::cuda::check_device_ptr(m, "m", device_));
  if (any_lamb) TSR_TRY(tsr::cuda::check_device_ptr(v, "v", device_));
  TSR_TRY(tsr::cuda::check_device_ptr(p, "p", device_, true));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device_));
  const size_t lb = lamb ? ngroups * sizeof(LambCoef) : 0, pb = lars ? ngroups * sizeof(LarsCoef) : 0;
  const size_t kb = k ? ngroups * sizeof(float) : 0;
  TSR_TRY(upload(1, tasks, lamb, lb, lars, pb, k, kb));
  const Task* dt = static_cast<const Task*>(table_[1].dev.get());
  unsigned char* base = static_cast<unsigned char*>(coef_.get());
  const LambCoef* dl = lb ? reinterpret_cast<const LambCoef*>(base) : nullptr;
  const LarsCoef* dp = pb ? reinterpret_cast<const LarsCoef*>(base + round8(lb)) : nullptr;
  const float* dk = kb ? reinterpret_cast<const float*>(base + round8(lb) + round8(pb)) : nullptr;
  const Kernels kn = kernels_for(cfg_.vec, cfg_.unroll);
  const unsigned nb = static_cast<unsigned>(tasks.size() * parts);
  if (bf16)
    kn.b_bf16<<<nb, kThreads, 0, stream_>>>(dt, parts, cfg_.block_elems, static_cast<const uint16_t*>(g), w, m, v, p,
                                            dl, dk, dp);
  else
    kn.b_f32<<<nb, kThreads, 0, stream_>>>(dt, parts, cfg_.block_elems, static_cast<const float*>(g), w, m, v, p, dl,
                                           dk, dp);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the optimizer's pass B");
  return TSR_SUCCESS;
}

tsr_status Runner::bf16_to_f32(const uint16_t* in, float* out, size_t n) {
  if (n == 0) return TSR_SUCCESS;
  TSR_TRY(tsr::cuda::check_device_ptr(in, "params", device_));
  TSR_TRY(tsr::cuda::check_device_ptr(out, "master", device_));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device_));
  bf16_to_f32_kernel<<<grid_for(n), kThreads, 0, stream_>>>(in, out, n);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the bfloat16 to float32 conversion");
  return TSR_SUCCESS;
}

tsr_status Runner::f32_to_bf16(const float* in, uint16_t* out, size_t n) {
  if (n == 0) return TSR_SUCCESS;
  TSR_TRY(tsr::cuda::check_device_ptr(in, "master", device_));
  TSR_TRY(tsr::cuda::check_device_ptr(out, "params", device_));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device_));
  f32_to_bf16_kernel<<<grid_for(n), kThreads, 0, stream_>>>(in, out, n);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the float32 to bfloat16 conversion");
  return TSR_SUCCESS;
}

}  // namespace cuda
}  // namespace opt
}  // namespace tsr

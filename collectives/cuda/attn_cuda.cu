// The attention block on the device (attn_cuda.hpp). One warp per row: a
// query row in the forward and dQ kernels, a key row in the dK/dV kernel.
// A block of kWarps rows walks the other side in tiles of 32 staged in
// shared memory (rows padded to d+1 floats: no bank conflicts); lane j of a
// warp scores tile row j, and each lane owns the output elements e = lane +
// 32 t (t < d/32) in registers. Exact expf/logf (no fast math).
#include "attn_cuda.hpp"

#include <cmath>

#include "cuda_util.hpp"

namespace tsr {
namespace attn {
namespace cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kTile = 32;
constexpr int kPer = static_cast<int>(kMaxDim) / 32;  // output elements per lane

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

struct Geo {
  int B, H, G, grp, d;
  float scale;
  bool causal;
};

__device__ __forceinline__ bool visible(const Geo& g, const int64_t* qpos, size_t i, const int64_t* kpos, size_t j,
                                        const uint8_t* km) {
  if (g.causal && kpos[j] > qpos[i]) return false;
  return km == nullptr || km[j] != 0;
}

// Stages rows [r0, r0+kTile) of a (n, d) matrix into shared memory (pitch d+1);
// rows past n are zero.
__device__ __forceinline__ void stage(float* dst, const float* src, size_t r0, size_t n, int d) {
  for (int t = threadIdx.x; t < kTile * d; t += blockDim.x) {
    const int r = t / d, e = t % d;
    dst[r * (d + 1) + e] = r0 + r < n ? src[(r0 + r) * d + e] : 0.0f;
  }
}

// ------------------------------------------------------------------ forward
__global__ void __launch_bounds__(kWarps * 32) fwd_kernel(Geo g, const float* q, size_t nq, const int64_t* qpos,
                                                          const float* k, const float* v, size_t nk,
                                                          const int64_t* kpos, const uint8_t* kmask, float* o,
                                                          float* m, float* l) {
  extern __shared__ float sh[];
  const int d = g.d, pitch = d + 1;
  float* Ks = sh;
  float* Vs = Ks + kTile * pitch;
  float* Qs = Vs + kTile * pitch;  // kWarps rows of d
  const size_t tiles_q = (nq + kWarps - 1) / kWarps;
  const size_t bh = blockIdx.x / tiles_q, qt = blockIdx.x % tiles_q;
  const int b = static_cast<int>(bh / g.H), h = static_cast<int>(bh % g.H);
  const size_t bg = static_cast<size_t>(b) * g.G + h / g.grp;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t i = qt * kWarps + warp;
  const bool row = i < nq;
  const float* K = k + bg * nk * d;
  const float* V = v + bg * nk * d;
  const uint8_t* km = kmask ? kmask + static_cast<size_t>(b) * nk : nullptr;
  float* O = o + bh * nq * d;
  float* qrow = Qs + warp * d;
  float acc[kPer];
  float mi = -INFINITY, li = 0.0f;
  if (row) {
    for (int e = lane; e < d; e += 32) qrow[e] = q[(bh * nq + i) * d + e];
    for (int t = 0; t < kPer; ++t) acc[t] = t * 32 + lane < d ? O[i * d + t * 32 + lane] : 0.0f;
    mi = m[bh * nq + i];
    li = l[bh * nq + i];
  }
  for (size_t j0 = 0; j0 < nk; j0 += kTile) {
    __syncthreads();
    stage(Ks, K, j0, nk, d);
    stage(Vs, V, j0, nk, d);
    __syncthreads();
    if (!row) continue;
    const size_t j = j0 + lane;
    const bool vis = j < nk && visible(g, qpos, i, kpos, j, km);
    float s = -INFINITY;
    if (vis) {
      float dot = 0.0f;
      const float* kr = Ks + lane * pitch;
      for (int e = 0; e < d; ++e) dot += qrow[e] * kr[e];
      s = g.scale * dot;
    }
    const float mx = warp_max(s);
    const float mnew = mx > mi ? mx : mi;
    if (mnew == -INFINITY) continue;  // nothing visible to this row yet
    const float alpha = expf(mi - mnew);  // 0 when mi = -inf
    const float p = vis ? expf(s - mnew) : 0.0f;
    li = li * alpha + warp_sum(p);
    mi = mnew;
    for (int t = 0; t < kPer; ++t) acc[t] *= alpha;
    const int nj = nk - j0 < static_cast<size_t>(kTile) ? static_cast<int>(nk - j0) : kTile;
    for (int jj = 0; jj < nj; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj);
      if (pj == 0.0f) continue;  // uniform across the warp
      const float* vr = Vs + jj * pitch;
      for (int t = 0; t < kPer; ++t) {
        const int e = t * 32 + lane;
        if (e < d) acc[t] += pj * vr[e];
      }
    }
  }
  if (row) {
    for (int t = 0; t < kPer; ++t)
      if (t * 32 + lane < d) O[i * d + t * 32 + lane] = acc[t];
    if (lane == 0) {
      m[bh * nq + i] = mi;
      l[bh * nq + i] = li;
    }
  }
}

__global__ void init_kernel(size_t rows, int d, float* o, float* m, float* l) {
  const size_t n = rows * static_cast<size_t>(d);
  for (size_t x = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; x < n;
       x += static_cast<size_t>(gridDim.x) * blockDim.x) {
    o[x] = 0.0f;
    if (x < rows) {
      m[x] = -INFINITY;
      l[x] = 0.0f;
    }
  }
}

__global__ void finish_kernel(size_t rows, int d, float* o, const float* m, const float* l, float* lse) {
  for (size_t r = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float* orow = o + r * d;
    const float mr = m[r], lr = l[r];
    if (mr == -INFINITY || !(lr > 0.0f)) {
      for (int e = 0; e < d; ++e) orow[e] = 0.0f;
      lse[r] = -INFINITY;
      continue;
    }
    const float inv = 1.0f / lr;
    for (int e = 0; e < d; ++e) orow[e] *= inv;
    lse[r] = mr + logf(lr);
  }
}

__global__ void delta_kernel(size_t rows, int d, const float* out, const float* dout, float* delta) {
  for (size_t r = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int e = 0; e < d; ++e) s += out[r * d + e] * dout[r * d + e];
    delta[r] = s;
  }
}

// ------------------------------------------------------------- backward: dQ
__global__ void __launch_bounds__(kWarps * 32) dq_kernel(Geo g, const float* q, size_t nq, const int64_t* qpos,
                                                         const float* k, const float* v, size_t nk,
                                                         const int64_t* kpos, const uint8_t* kmask,
                                                         const float* dout, const float* lse, const float* delta,
                                                         float* dq) {
  extern __shared__ float sh[];
  const int d = g.d, pitch = d + 1;
  float* Ks = sh;
  float* Vs = Ks + kTile * pitch;
  float* Qs = Vs + kTile * pitch;   // kWarps rows
  float* dOs = Qs + kWarps * d;     // kWarps rows
  const size_t tiles_q = (nq + kWarps - 1) / kWarps;
  const size_t bh = blockIdx.x / tiles_q, qt = blockIdx.x % tiles_q;
  const int b = static_cast<int>(bh / g.H), h = static_cast<int>(bh % g.H);
  const size_t bg = static_cast<size_t>(b) * g.G + h / g.grp;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t i = qt * kWarps + warp;
  const float* K = k + bg * nk * d;
  const float* V = v + bg * nk * d;
  const uint8_t* km = kmask ? kmask + static_cast<size_t>(b) * nk : nullptr;
  float Li = -INFINITY, Di = 0.0f;
  if (i < nq) {
    Li = lse[bh * nq + i];
    Di = delta[bh * nq + i];
  }
  const bool row = i < nq && Li != -INFINITY;  // a row with no visible key has no gradient
  float* qrow = Qs + warp * d;
  float* orow = dOs + warp * d;
  float acc[kPer];
  for (int t = 0; t < kPer; ++t) acc[t] = 0.0f;
  if (row)
    for (int e = lane; e < d; e += 32) {
      qrow[e] = q[(bh * nq + i) * d + e];
      orow[e] = dout[(bh * nq + i) * d + e];
    }
  for (size_t j0 = 0; j0 < nk; j0 += kTile) {
    __syncthreads();
    stage(Ks, K, j0, nk, d);
    stage(Vs, V, j0, nk, d);
    __syncthreads();
    if (!row) continue;
    const size_t j = j0 + lane;
    float ds = 0.0f;
    if (j < nk && visible(g, qpos, i, kpos, j, km)) {
      const float* kr = Ks + lane * pitch;
      const float* vr = Vs + lane * pitch;
      float dot = 0.0f, dp = 0.0f;
      for (int e = 0; e < d; ++e) {
        dot += qrow[e] * kr[e];
        dp += orow[e] * vr[e];
      }
      const float p = expf(g.scale * dot - Li);
      ds = p * (dp - Di);
    }
    const int nj = nk - j0 < static_cast<size_t>(kTile) ? static_cast<int>(nk - j0) : kTile;
    for (int jj = 0; jj < nj; ++jj) {
      const float sj = __shfl_sync(0xffffffffu, ds, jj);
      if (sj == 0.0f) continue;
      const float* kr = Ks + jj * pitch;
      for (int t = 0; t < kPer; ++t) {
        const int e = t * 32 + lane;
        if (e < d) acc[t] += sj * kr[e];
      }
    }
  }
  if (row)
    for (int t = 0; t < kPer; ++t) {
      const int e = t * 32 + lane;
      if (e < d) dq[(bh * nq + i) * d + e] += g.scale * acc[t];
    }
}

// ---------------------------------------------------------- backward: dK, dV
__global__ void __launch_bounds__(kWarps * 32) dkv_kernel(Geo g, const float* q, size_t nq, const int64_t* qpos,
                                                          const float* k, const float* v, size_t nk,
                                                          const int64_t* kpos, const uint8_t* kmask,
                                                          const float* dout, const float* lse, const float* delta,
                                                          float* dk, float* dv) {
  extern __shared__ float sh[];
  const int d = g.d, pitch = d + 1;
  float* Qs = sh;
  float* dOs = Qs + kTile * pitch;
  float* Ks = dOs + kTile * pitch;  // kWarps rows
  float* Vs = Ks + kWarps * d;      // kWarps rows
  const size_t tiles_k = (nk + kWarps - 1) / kWarps;
  const size_t bg = blockIdx.x / tiles_k, kt = blockIdx.x % tiles_k;
  const int b = static_cast<int>(bg / g.G), gi = static_cast<int>(bg % g.G);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t j = kt * kWarps + warp;
  const uint8_t* km = kmask ? kmask + static_cast<size_t>(b) * nk : nullptr;
  const bool row = j < nk && (km == nullptr || km[j] != 0);  // a masked key gets no gradient
  float* krow = Ks + warp * d;
  float* vrow = Vs + warp * d;
  float ak[kPer], av[kPer];
  for (int t = 0; t < kPer; ++t) ak[t] = av[t] = 0.0f;
  if (row)
    for (int e = lane; e < d; e += 32) {
      krow[e] = k[(bg * nk + j) * d + e];
      vrow[e] = v[(bg * nk + j) * d + e];
    }
  for (int hh = 0; hh < g.grp; ++hh) {
    const size_t bh = static_cast<size_t>(b) * g.H + static_cast<size_t>(gi) * g.grp + hh;
    const float* Q = q + bh * nq * d;
    const float* dO = dout + bh * nq * d;
    for (size_t i0 = 0; i0 < nq; i0 += kTile) {
      __syncthreads();
      stage(Qs, Q, i0, nq, d);
      stage(dOs, dO, i0, nq, d);
      __syncthreads();
      if (!row) continue;
      const size_t i = i0 + lane;
      float p = 0.0f, ds = 0.0f;
      if (i < nq && !(g.causal && kpos[j] > qpos[i])) {
        const float Li = lse[bh * nq + i];
        if (Li != -INFINITY) {
          const float* qr = Qs + lane * pitch;
          const float* orr = dOs + lane * pitch;
          float dot = 0.0f, dp = 0.0f;
          for (int e = 0; e < d; ++e) {
            dot += krow[e] * qr[e];
            dp += vrow[e] * orr[e];
          }
          p = expf(g.scale * dot - Li);
          ds = p * (dp - delta[bh * nq + i]);
        }
      }
      const int ni = nq - i0 < static_cast<size_t>(kTile) ? static_cast<int>(nq - i0) : kTile;
      for (int ii = 0; ii < ni; ++ii) {
        const float pi = __shfl_sync(0xffffffffu, p, ii);
        const float si = __shfl_sync(0xffffffffu, ds, ii);
        if (pi == 0.0f && si == 0.0f) continue;
        const float* qr = Qs + ii * pitch;
        const float* orr = dOs + ii * pitch;
        for (int t = 0; t < kPer; ++t) {
          const int e = t * 32 + lane;
          if (e < d) {
            av[t] += pi * orr[e];
            ak[t] += si * qr[e];
          }
        }
      }
    }
  }
  if (row)
    for (int t = 0; t < kPer; ++t) {
      const int e = t * 32 + lane;
      if (e < d) {
        dv[(bg * nk + j) * d + e] += av[t];
        dk[(bg * nk + j) * d + e] += g.scale * ak[t];
      }
    }
}

__global__ void pos_kernel(size_t len, size_t c0, int64_t s0, int64_t s1, int64_t stride, int64_t* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < len;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = i < c0 ? s0 + static_cast<int64_t>(i) * stride : s1 + static_cast<int64_t>(i - c0) * stride;
}

// ------------------------------------------------- two-pass (plain kernels)
#define TSR_GRID_LOOP(I_, N_)                                                           \
  for (size_t I_ = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; I_ < (N_); \
       I_ += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void rsa_scores_kernel(Geo g, const float* q, size_t nq, const int64_t* qpos, const float* k, size_t nk,
                                  const int64_t* kpos, const uint8_t* kmask, float* sc, size_t ntot, size_t off) {
  const size_t n = static_cast<size_t>(g.B) * g.H * nq * nk;
  TSR_GRID_LOOP(x, n) {
    const size_t j = x % nk, i = (x / nk) % nq, bh = x / (nk * nq);
    const int b = static_cast<int>(bh / g.H), h = static_cast<int>(bh % g.H);
    const size_t bg = static_cast<size_t>(b) * g.G + h / g.grp;
    const uint8_t* km = kmask ? kmask + static_cast<size_t>(b) * nk : nullptr;
    float v = -INFINITY;
    if (visible(g, qpos, i, kpos, j, km)) {
      const float* qr = q + (bh * nq + i) * g.d;
      const float* kr = k + (bg * nk + j) * g.d;
      float dot = 0.0f;
      for (int e = 0; e < g.d; ++e) dot += qr[e] * kr[e];
      v = g.scale * dot;
    }
    sc[(bh * nq + i) * ntot + off + j] = v;
  }
}

__global__ void rsa_softmax_kernel(size_t rows, float* sc, size_t ntot, float* lse) {
  TSR_GRID_LOOP(r, rows) {
    float* row = sc + r * ntot;
    float mx = -INFINITY;
    for (size_t j = 0; j < ntot; ++j) mx = fmaxf(mx, row[j]);
    if (mx == -INFINITY) {
      for (size_t j = 0; j < ntot; ++j) row[j] = 0.0f;
      lse[r] = -INFINITY;
      continue;
    }
    float sum = 0.0f;
    for (size_t j = 0; j < ntot; ++j) {
      row[j] = expf(row[j] - mx);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (size_t j = 0; j < ntot; ++j) row[j] *= inv;
    lse[r] = mx + logf(sum);
  }
}

__global__ void rsa_probs_kernel(size_t rows, float* sc, size_t ntot, const float* lse) {
  TSR_GRID_LOOP(x, rows * ntot) {
    const float l = lse[x / ntot];
    sc[x] = l == -INFINITY ? 0.0f : expf(sc[x] - l);
  }
}

__global__ void rsa_av_kernel(Geo g, size_t nq, const float* a, size_t ntot, size_t off, const float* v, size_t nk,
                              float* o) {
  const size_t n = static_cast<size_t>(g.B) * g.H * nq * g.d;
  TSR_GRID_LOOP(x, n) {
    const size_t e = x % g.d, i = (x / g.d) % nq, bh = x / (g.d * nq);
    const size_t bg = (bh / g.H) * g.G + (bh % g.H) / g.grp;
    const float* arow = a + (bh * nq + i) * ntot + off;
    float acc = 0.0f;
    for (size_t j = 0; j < nk; ++j) acc += arow[j] * v[(bg * nk + j) * g.d + e];
    o[(bh * nq + i) * g.d + e] += acc;
  }
}

__global__ void rsa_da_kernel(Geo g, size_t nq, float* da, size_t ntot, size_t off, const float* v, size_t nk,
                              const float* dout) {
  const size_t n = static_cast<size_t>(g.B) * g.H * nq * nk;
  TSR_GRID_LOOP(x, n) {
    const size_t j = x % nk, i = (x / nk) % nq, bh = x / (nk * nq);
    const size_t bg = (bh / g.H) * g.G + (bh % g.H) / g.grp;
    float acc = 0.0f;
    for (int e = 0; e < g.d; ++e) acc += dout[(bh * nq + i) * g.d + e] * v[(bg * nk + j) * g.d + e];
    da[(bh * nq + i) * ntot + off + j] = acc;
  }
}

// out[bg, j, e] += alpha * sum over the group's heads h and rows i of
// m[bh, i, off + j] * x[bh, i, e]  (dV from A and dO; dK from dS and Q).
__global__ void rsa_tn_kernel(Geo g, size_t nq, const float* m, size_t ntot, size_t off, const float* xin, size_t nk,
                              float alpha, float* out) {
  const size_t n = static_cast<size_t>(g.B) * g.G * nk * g.d;
  TSR_GRID_LOOP(x, n) {
    const size_t e = x % g.d, j = (x / g.d) % nk, bg = x / (g.d * nk);
    const size_t b = bg / g.G, gi = bg % g.G;
    float acc = 0.0f;
    for (int hh = 0; hh < g.grp; ++hh) {
      const size_t bh = b * g.H + gi * g.grp + hh;
      for (size_t i = 0; i < nq; ++i) acc += m[(bh * nq + i) * ntot + off + j] * xin[(bh * nq + i) * g.d + e];
    }
    out[(bg * nk + j) * g.d + e] += alpha * acc;
  }
}

__global__ void rsa_ds_kernel(size_t rows, const float* a, float* da, size_t ntot, const float* delta) {
  TSR_GRID_LOOP(x, rows * ntot) da[x] = a[x] * (da[x] - delta[x / ntot]);
}

__global__ void rsa_dq_kernel(Geo g, size_t nq, const float* ds, size_t ntot, size_t off, const float* k, size_t nk,
                              float* dq) {
  const size_t n = static_cast<size_t>(g.B) * g.H * nq * g.d;
  TSR_GRID_LOOP(x, n) {
    const size_t e = x % g.d, i = (x / g.d) % nq, bh = x / (g.d * nq);
    const size_t bg = (bh / g.H) * g.G + (bh % g.H) / g.grp;
    const float* srow = ds + (bh * nq + i) * ntot + off;
    float acc = 0.0f;
    for (size_t j = 0; j < nk; ++j) acc += srow[j] * k[(bg * nk + j) * g.d + e];
    dq[(bh * nq + i) * g.d + e] += g.scale * acc;
  }
}
#undef TSR_GRID_LOOP

// --------------------------------------------------------------- host side
tsr_status check_shape(const Shape& s) {
  if (s.B == 0 || s.H == 0 || s.G == 0)
    return fail(TSR_ERR_SHAPE, "batch = %zu, heads = %zu, kv_heads = %zu; expected all >= 1", s.B, s.H, s.G);
  if (s.H % s.G != 0)
    return fail(TSR_ERR_SHAPE, "heads = %zu is not a multiple of kv_heads = %zu", s.H, s.G);
  if (s.d == 0 || s.d > kMaxDim)
    return fail(TSR_ERR_UNSUPPORTED, "head dim = %zu; the CUDA attention block supports 1 .. %zu", s.d, kMaxDim);
  if (s.B * s.H > 0x7fffffffu) return fail(TSR_ERR_UNSUPPORTED, "batch * heads = %zu is too large", s.B * s.H);
  return TSR_SUCCESS;
}

Geo geo(const Shape& s) {
  return Geo{static_cast<int>(s.B), static_cast<int>(s.H), static_cast<int>(s.G), static_cast<int>(s.H / s.G),
             static_cast<int>(s.d), s.scale, s.causal};
}

unsigned grid_for(size_t n) {
  const size_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

// Shared memory of a row kernel: two staged tiles (pitch d+1) and kWarps
// rows of `own` arrays of d.
size_t smem(size_t d, int own) { return (2 * kTile * (d + 1) + static_cast<size_t>(own) * kWarps * d) * sizeof(float); }

template <class Kernel>
tsr_status allow_smem(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return TSR_SUCCESS;
  TSR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
               "allowing the attention kernel its shared memory");
  return TSR_SUCCESS;
}

tsr_status check_ptrs(int dev, std::initializer_list<std::pair<const void*, const char*>> ps) {
  for (const auto& p : ps) TSR_TRY(tsr::cuda::check_device_ptr(p.first, p.second, dev));
  return TSR_SUCCESS;
}

tsr_status check_block(const On& on, const Shape& s, size_t nq, size_t nk, const int64_t* qpos, const int64_t* kpos,
                       const uint8_t* kmask) {
  TSR_TRY(check_shape(s));
  if (nq > 0 && nk > 0) {
    if (s.causal) TSR_TRY(check_ptrs(on.device, {{qpos, "qpos"}, {kpos, "kpos"}}));
    TSR_TRY(tsr::cuda::check_device_ptr(kmask, "key_mask", on.device, true));
  }
  return TSR_SUCCESS;
}

}  // namespace

tsr_status positions(const On& on, size_t len, size_t c0, int64_t s0, int64_t s1, int64_t stride, int64_t* out) {
  if (len == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{out, "positions"}}));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(on.device));
  pos_kernel<<<grid_for(len), 256, 0, on.stream>>>(len, c0, s0, s1, stride, out);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the position ids of a shard");
  return TSR_SUCCESS;
}

#define TSR_RSA_LAUNCH(kernel, n, what, ...)                                                  \
  do {                                                                                        \
    tsr::cuda::DeviceGuard guard;                                                             \
    TSR_TRY(guard.enter(on.device));                                                          \
    kernel<<<grid_for(n), 256, 0, on.stream>>>(__VA_ARGS__);                                  \
    TSR_CUDA_CHECK(cudaGetLastError(), what);                                                 \
  } while (0)

tsr_status rsa_scores(const On& on, const Shape& s, const float* q, size_t nq, const int64_t* qpos, const float* k,
                      size_t nk, const int64_t* kpos, const uint8_t* kmask, float* sc, size_t ntot, size_t off) {
  TSR_TRY(check_block(on, s, nq, nk, qpos, kpos, kmask));
  if (nq == 0 || nk == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{q, "q"}, {k, "k"}, {sc, "scores"}}));
  TSR_RSA_LAUNCH(rsa_scores_kernel, s.B * s.H * nq * nk, "launching the two-pass scores", geo(s), q, nq, qpos, k, nk,
                 kpos, kmask, sc, ntot, off);
  return TSR_SUCCESS;
}

tsr_status rsa_softmax(const On& on, const Shape& s, size_t nq, float* sc, size_t ntot, float* lse) {
  TSR_TRY(check_shape(s));
  const size_t rows = s.B * s.H * nq;
  if (rows == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{sc, "scores"}, {lse, "lse"}}));
  TSR_RSA_LAUNCH(rsa_softmax_kernel, rows, "launching the two-pass softmax", rows, sc, ntot, lse);
  return TSR_SUCCESS;
}

tsr_status rsa_probs(const On& on, const Shape& s, size_t nq, float* sc, size_t ntot, const float* lse) {
  TSR_TRY(check_shape(s));
  const size_t rows = s.B * s.H * nq;
  if (rows == 0 || ntot == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{sc, "scores"}, {lse, "lse"}}));
  TSR_RSA_LAUNCH(rsa_probs_kernel, rows * ntot, "launching the two-pass probabilities", rows, sc, ntot, lse);
  return TSR_SUCCESS;
}

tsr_status rsa_av(const On& on, const Shape& s, size_t nq, const float* a, size_t ntot, size_t off, const float* v,
                  size_t nk, float* o) {
  TSR_TRY(check_shape(s));
  if (nq == 0 || nk == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{a, "probabilities"}, {v, "v"}, {o, "o"}}));
  TSR_RSA_LAUNCH(rsa_av_kernel, s.B * s.H * nq * s.d, "launching the two-pass A v", geo(s), nq, a, ntot, off, v, nk, o);
  return TSR_SUCCESS;
}

tsr_status rsa_dav(const On& on, const Shape& s, size_t nq, const float* a, float* da, size_t ntot, size_t off,
                   const float* v, size_t nk, const float* dout, float* dv) {
  TSR_TRY(check_shape(s));
  if (nq == 0 || nk == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{a, "probabilities"}, {da, "dA"}, {v, "v"}, {dout, "dout"}, {dv, "dv"}}));
  TSR_RSA_LAUNCH(rsa_da_kernel, s.B * s.H * nq * nk, "launching the two-pass dA", geo(s), nq, da, ntot, off, v, nk,
                 dout);
  TSR_RSA_LAUNCH(rsa_tn_kernel, s.B * s.G * nk * s.d, "launching the two-pass dV", geo(s), nq, a, ntot, off, dout, nk,
                 1.0f, dv);
  return TSR_SUCCESS;
}

tsr_status rsa_ds(const On& on, const Shape& s, size_t nq, const float* a, float* da, size_t ntot, const float* delta) {
  TSR_TRY(check_shape(s));
  const size_t rows = s.B * s.H * nq;
  if (rows == 0 || ntot == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{a, "probabilities"}, {da, "dA"}, {delta, "delta"}}));
  TSR_RSA_LAUNCH(rsa_ds_kernel, rows * ntot, "launching the two-pass dS", rows, a, da, ntot, delta);
  return TSR_SUCCESS;
}

tsr_status rsa_dqk(const On& on, const Shape& s, size_t nq, const float* ds, size_t ntot, size_t off, const float* q,
                   const float* k, size_t nk, float* dq, float* dk) {
  TSR_TRY(check_shape(s));
  if (nq == 0 || nk == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{ds, "dS"}, {q, "q"}, {k, "k"}, {dq, "dq"}, {dk, "dk"}}));
  TSR_RSA_LAUNCH(rsa_dq_kernel, s.B * s.H * nq * s.d, "launching the two-pass dQ", geo(s), nq, ds, ntot, off, k, nk,
                 dq);
  TSR_RSA_LAUNCH(rsa_tn_kernel, s.B * s.G * nk * s.d, "launching the two-pass dK", geo(s), nq, ds, ntot, off, q, nk,
                 s.scale, dk);
  return TSR_SUCCESS;
}
#undef TSR_RSA_LAUNCH

tsr_status fwd_init(const On& on, const Shape& s, size_t nq, float* o, float* m, float* l) {
  TSR_TRY(check_shape(s));
  const size_t rows = s.B * s.H * nq;
  if (rows == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{o, "o"}, {m, "m"}, {l, "l"}}));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(on.device));
  init_kernel<<<grid_for(rows * s.d), 256, 0, on.stream>>>(rows, static_cast<int>(s.d), o, m, l);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the attention state initialisation");
  return TSR_SUCCESS;
}

tsr_status fwd_block(const On& on, const Shape& s, const float* q, size_t nq, const int64_t* qpos, const float* k,
                     const float* v, size_t nk, const int64_t* kpos, const uint8_t* kmask, float* o, float* m,
                     float* l) {
  TSR_TRY(check_block(on, s, nq, nk, qpos, kpos, kmask));
  if (nq == 0 || nk == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{q, "q"}, {k, "k"}, {v, "v"}, {o, "o"}, {m, "m"}, {l, "l"}}));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(on.device));
  const size_t sm = smem(s.d, 1);
  TSR_TRY(allow_smem(fwd_kernel, sm));
  const size_t blocks = s.B * s.H * ((nq + kWarps - 1) / kWarps);
  if (blocks > 0x7fffffffu) return fail(TSR_ERR_UNSUPPORTED, "too many query rows for one launch");
  fwd_kernel<<<static_cast<unsigned>(blocks), kWarps * 32, sm, on.stream>>>(geo(s), q, nq, qpos, k, v, nk, kpos,
                                                                            kmask, o, m, l);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the attention forward block");
  return TSR_SUCCESS;
}

tsr_status fwd_finish(const On& on, const Shape& s, size_t nq, float* o, const float* m, const float* l, float* lse) {
  TSR_TRY(check_shape(s));
  const size_t rows = s.B * s.H * nq;
  if (rows == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{o, "o"}, {m, "m"}, {l, "l"}, {lse, "lse"}}));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(on.device));
  finish_kernel<<<grid_for(rows), 256, 0, on.stream>>>(rows, static_cast<int>(s.d), o, m, l, lse);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the attention forward finish");
  return TSR_SUCCESS;
}

tsr_status bwd_delta(const On& on, const Shape& s, size_t nq, const float* out, const float* dout, float* delta) {
  TSR_TRY(check_shape(s));
  const size_t rows = s.B * s.H * nq;
  if (rows == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{out, "out"}, {dout, "dout"}, {delta, "delta"}}));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(on.device));
  delta_kernel<<<grid_for(rows), 256, 0, on.stream>>>(rows, static_cast<int>(s.d), out, dout, delta);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the attention backward delta");
  return TSR_SUCCESS;
}

tsr_status bwd_block(const On& on, const Shape& s, const float* q, size_t nq, const int64_t* qpos, const float* k,
                     const float* v, size_t nk, const int64_t* kpos, const uint8_t* kmask, const float* dout,
                     const float* lse, const float* delta, float* dq, float* dk, float* dv) {
  TSR_TRY(check_block(on, s, nq, nk, qpos, kpos, kmask));
  if (nq == 0 || nk == 0) return TSR_SUCCESS;
  TSR_TRY(check_ptrs(on.device, {{q, "q"}, {k, "k"}, {v, "v"}, {dout, "dout"}, {lse, "lse"}, {delta, "delta"},
                                 {dq, "dq"}, {dk, "dk"}, {dv, "dv"}}));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(on.device));
  const size_t sm = smem(s.d, 2);
  TSR_TRY(allow_smem(dq_kernel, sm));
  TSR_TRY(allow_smem(dkv_kernel, sm));
  const size_t qblocks = s.B * s.H * ((nq + kWarps - 1) / kWarps);
  const size_t kblocks = s.B * s.G * ((nk + kWarps - 1) / kWarps);
  if (qblocks > 0x7fffffffu || kblocks > 0x7fffffffu)
    return fail(TSR_ERR_UNSUPPORTED, "too many rows for one launch");
  const Geo g = geo(s);
  dq_kernel<<<static_cast<unsigned>(qblocks), kWarps * 32, sm, on.stream>>>(g, q, nq, qpos, k, v, nk, kpos, kmask,
                                                                             dout, lse, delta, dq);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the attention backward (dq)");
  dkv_kernel<<<static_cast<unsigned>(kblocks), kWarps * 32, sm, on.stream>>>(g, q, nq, qpos, k, v, nk, kpos, kmask,
                                                                              dout, lse, delta, dk, dv);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the attention backward (dk, dv)");
  return TSR_SUCCESS;
}

}  // namespace cuda
}  // namespace attn
}  // namespace tsr

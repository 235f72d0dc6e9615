// Blockwise attention kernels (local): online softmax forward, the
// FlashAttention-2 style backward with the global lse, the full-row pieces of
// the two-pass baseline, and the stable merge. Matrix products go to CBLAS;
// the loops here are the element-wise parts (masking, exp, rescaling).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "attention_impl.hpp"
#include "blas_int.hpp"

namespace tsr {
namespace attn {
namespace {

// Row-major C = alpha op(A) op(B) + beta C.
inline void gemm(bool ta, bool tb, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
                 const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  blas_gemm_rowmajor(ta, tb, static_cast<int64_t>(m), static_cast<int64_t>(n), static_cast<int64_t>(k), alpha, a,
                     static_cast<int64_t>(lda), b, static_cast<int64_t>(ldb), beta, c, static_cast<int64_t>(ldc));
}
inline void gemm(bool ta, bool tb, size_t m, size_t n, size_t k, double alpha, const double* a, size_t lda,
                 const double* b, size_t ldb, double beta, double* c, size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0.0 : beta * c[i * ldc + j];
    return;
  }
  blas_gemm_rowmajor(ta, tb, static_cast<int64_t>(m), static_cast<int64_t>(n), static_cast<int64_t>(k), alpha, a,
                     static_cast<int64_t>(lda), b, static_cast<int64_t>(ldb), beta, c, static_cast<int64_t>(ldc));
}

inline float ex(float x) { return std::exp(x); }
inline double ex(double x) { return std::exp(x); }

// ------------------------------------------------------- row operations
// The element-wise work of a tile (row max, exp, sums) is as heavy as its
// matrix products once exp is a libm call, so float rows use a polynomial
// exp the compiler vectorises (Cephes' expf: range reduction by ln 2 and a
// degree-6 polynomial, within 2 ulp of expf; exp(-inf) and anything below
// the normal range give exactly 0), compiled for AVX-512, AVX2 and the
// baseline and chosen at load time where the toolchain can (GCC ifunc).
// Double rows use std::exp.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define TSR_ROW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TSR_ROW_CLONES
#endif

inline float fexp(float x) {
  const bool tiny = x < -87.33654f;  // exp below FLT_MIN, and -inf: 0
  x = x < -87.33654f ? -87.33654f : x;
  x = x > 88.0f ? 88.0f : x;
  const float kf = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - kf * 0.693359375f;
  r = r - kf * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(kf) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return tiny ? 0.0f : p * scale;
}

TSR_ROW_CLONES float row_max(const float* x, size_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (size_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}
TSR_ROW_CLONES float row_exp_sum(float* x, size_t n, float m) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (size_t j = 0; j < n; ++j) {
    const float e = fexp(x[j] - m);
    x[j] = e;
    sum += e;
  }
  return sum;
}
TSR_ROW_CLONES void row_exp(float* x, size_t n, float m) {
#pragma omp simd
  for (size_t j = 0; j < n; ++j) x[j] = fexp(x[j] - m);
}
double row_max(const double* x, size_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}
double row_exp_sum(double* x, size_t n, double m) {
  double sum = 0;
  for (size_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - m);
    sum += x[j];
  }
  return sum;
}
void row_exp(double* x, size_t n, double m) {
  for (size_t j = 0; j < n; ++j) x[j] = std::exp(x[j] - m);
}
inline float rescale(float x) { return fexp(x); }
inline double rescale(double x) { return std::exp(x); }
template <class T>
void row_scale(T* x, size_t n, T a) {
  for (size_t j = 0; j < n; ++j) x[j] *= a;
}

enum class Cls { skip, full, partial };

// Which entries of the tile rows [i0,i1) x keys [j0,j1) are visible.
// Positions increase within a segment, so the causal test needs the corners.
inline Cls classify(bool causal, const int64_t* qpos, size_t i0, size_t i1, const int64_t* kpos, size_t j0, size_t j1,
                    const uint8_t* km) {
  bool partial = false;
  if (causal) {
    if (kpos[j0] > qpos[i1 - 1]) return Cls::skip;
    if (kpos[j1 - 1] > qpos[i0]) partial = true;
  }
  if (km) {
    size_t valid = 0;
    for (size_t j = j0; j < j1; ++j) valid += km[j] != 0;
    if (valid == 0) return Cls::skip;
    if (valid != j1 - j0) partial = true;
  }
  return partial ? Cls::partial : Cls::full;
}

// Sets the invisible entries of a tile (row stride ld) to -inf. Positions
// increase along the rows and along the keys of a tile (it lies within one
// segment of each side), so the causally visible keys of a row are a prefix
// whose end only moves right from one row to the next.
template <class T>
void mask_tile(bool causal, const int64_t* qpos, size_t i0, size_t i1, const int64_t* kpos, size_t j0, size_t j1,
               const uint8_t* km, T* s, size_t ld) {
  size_t cut = j0;
  for (size_t i = i0; i < i1; ++i) {
    T* row = s + (i - i0) * ld;
    size_t end = j1;
    if (causal) {
      while (cut < j1 && kpos[cut] <= qpos[i]) ++cut;
      end = cut;
      std::fill(row + (end - j0), row + (j1 - j0), neg_inf<T>());
    }
    if (km != nullptr)
      for (size_t j = j0; j < end; ++j)
        if (km[j] == 0) row[j - j0] = neg_inf<T>();
  }
}

// Calls f(i0, i1, j0, j1, cls) for every tile that is not skipped.
template <class F>
void for_tiles(bool causal, const Rows& qr, const Rows& kr, const uint8_t* km, const Poke& poke, F&& f) {
  for (int qs = 0; qs < qr.nsegs; ++qs)
    for (size_t i0 = qr.segs[qs].begin; i0 < qr.segs[qs].end; i0 += kBq) {
      const size_t i1 = std::min(i0 + kBq, qr.segs[qs].end);
      for (int ks = 0; ks < kr.nsegs; ++ks) {
        const Seg& sg = kr.segs[ks];
        if (causal && sg.begin < sg.end && kr.pos[sg.begin] > qr.pos[i1 - 1]) continue;  // the whole segment is later
        for (size_t j0 = sg.begin; j0 < sg.end; j0 += kBk) {
          const size_t j1 = std::min(j0 + kBk, sg.end);
          const Cls c = classify(causal, qr.pos, i0, i1, kr.pos, j0, j1, km);
          if (c == Cls::skip) {
            if (causal && kr.pos[j0] > qr.pos[i1 - 1]) break;  // later tiles of the segment are later still
            continue;
          }
          size_t jend = j1;
          if (causal && c == Cls::partial) {  // keys after the tile's last query are invisible to all its rows
            const int64_t last = qr.pos[i1 - 1];
            while (jend > j0 && kr.pos[jend - 1] > last) --jend;
          }
          f(i0, i1, j0, jend, c);
          if (poke) poke();
        }
      }
    }
}

}  // namespace

// ------------------------------------------------------------------ forward
template <class T>
void fwd_init(const Geo<T>& g, size_t nq, T* o, T* m, T* l) {
  const size_t rows = g.B * g.H * nq;
  std::fill(o, o + rows * g.d, T(0));
  std::fill(m, m + rows, neg_inf<T>());
  std::fill(l, l + rows, T(0));
}

template <class T>
void fwd_block(const Geo<T>& g, const T* q, const Rows& qr, const T* k, const T* v, const Rows& kr,
               const uint8_t* kmask, T* o, T* m, T* l, T* tile, const Poke& poke) {
  const size_t d = g.d, nq = qr.n, nk = kr.n, grp = g.H / g.G;
  if (nq == 0 || nk == 0) return;
  for (size_t b = 0; b < g.B; ++b) {
    const uint8_t* km = kmask ? kmask + b * nk : nullptr;
    for (size_t h = 0; h < g.H; ++h) {
      const size_t bh = b * g.H + h, bg = b * g.G + h / grp;
      const T* Q = q + bh * nq * d;
      const T* K = k + bg * nk * d;
      const T* V = v + bg * nk * d;
      T* O = o + bh * nq * d;
      T* M = m + bh * nq;
      T* L = l + bh * nq;
      for_tiles(g.causal, qr, kr, km, poke, [&](size_t i0, size_t i1, size_t j0, size_t j1, Cls c) {
        const size_t mq = i1 - i0, mk = j1 - j0;
        gemm(false, true, mq, mk, d, g.scale, Q + i0 * d, d, K + j0 * d, d, T(0), tile, mk);
        if (c == Cls::partial) mask_tile(g.causal, qr.pos, i0, i1, kr.pos, j0, j1, km, tile, mk);
        for (size_t i = 0; i < mq; ++i) {
          T* row = tile + i * mk;
          const T mx = row_max(row, mk);
          const T mold = M[i0 + i];
          const T mnew = mx > mold ? mx : mold;
          if (mnew == neg_inf<T>()) {  // nothing visible to this row yet
            std::fill(row, row + mk, T(0));
            continue;
          }
          const T alpha = rescale(mold - mnew);  // 0 when mold = -inf
          const T sum = row_exp_sum(row, mk, mnew);
          L[i0 + i] = L[i0 + i] * alpha + sum;
          M[i0 + i] = mnew;
          if (alpha != T(1)) row_scale(O + (i0 + i) * d, d, alpha);
        }
        gemm(false, false, mq, d, mk, T(1), tile, mk, V + j0 * d, d, T(1), O + i0 * d, d);
      });
    }
  }
}

template <class T>
void fwd_finish(const Geo<T>& g, size_t nq, T* o, const T* m, const T* l, T* lse) {
  const size_t rows = g.B * g.H * nq, d = g.d;
  for (size_t r = 0; r < rows; ++r) {
    T* orow = o + r * d;
    if (m[r] == neg_inf<T>() || !(l[r] > T(0))) {
      std::fill(orow, orow + d, T(0));
      lse[r] = neg_inf<T>();
      continue;
    }
    const T inv = T(1) / l[r];
    for (size_t e = 0; e < d; ++e) orow[e] *= inv;
    lse[r] = m[r] + std::log(l[r]);
  }
}

// ----------------------------------------------------------------- backward
template <class T>
void bwd_delta(const Geo<T>& g, size_t nq, const T* out, const T* dout, T* delta) {
  const size_t rows = g.B * g.H * nq, d = g.d;
  for (size_t r = 0; r < rows; ++r) {
    T s = 0;
    for (size_t e = 0; e < d; ++e) s += out[r * d + e] * dout[r * d + e];
    delta[r] = s;
  }
}

template <class T>
void bwd_block(const Geo<T>& g, const T* q, const Rows& qr, const T* k, const T* v, const Rows& kr,
               const uint8_t* kmask, const T* dout, const T* lse, const T* delta, T* dq, T* dk, T* dv, T* tiles,
               const Poke& poke) {
  const size_t d = g.d, nq = qr.n, nk = kr.n, grp = g.H / g.G;
  if (nq == 0 || nk == 0) return;
  T* P = tiles;
  T* dS = tiles + kBq * kBk;
  for (size_t b = 0; b < g.B; ++b) {
    const uint8_t* km = kmask ? kmask + b * nk : nullptr;
    for (size_t h = 0; h < g.H; ++h) {
      const size_t bh = b * g.H + h, bg = b * g.G + h / grp;
      const T* Q = q + bh * nq * d;
      const T* dO = dout + bh * nq * d;
      const T* Lse = lse + bh * nq;
      const T* D = delta + bh * nq;
      T* dQ = dq + bh * nq * d;
      const T* K = k + bg * nk * d;
      const T* V = v + bg * nk * d;
      T* dK = dk + bg * nk * d;
      T* dV = dv + bg * nk * d;
      for_tiles(g.causal, qr, kr, km, poke, [&](size_t i0, size_t i1, size_t j0, size_t j1, Cls c) {
        const size_t mq = i1 - i0, mk = j1 - j0;
        gemm(false, true, mq, mk, d, g.scale, Q + i0 * d, d, K + j0 * d, d, T(0), P, mk);
        if (c == Cls::partial) mask_tile(g.causal, qr.pos, i0, i1, kr.pos, j0, j1, km, P, mk);
        for (size_t i = 0; i < mq; ++i) {
          T* row = P + i * mk;
          const T li = Lse[i0 + i];
          if (li == neg_inf<T>()) {  // a row with no visible key has no gradient
            std::fill(row, row + mk, T(0));
            continue;
          }
          row_exp(row, mk, li);
        }
        // dV += P^T dO;  dP = dO V^T;  dS = P (dP - D);  dQ += scale dS K;  dK += scale dS^T Q
        gemm(true, false, mk, d, mq, T(1), P, mk, dO + i0 * d, d, T(1), dV + j0 * d, d);
        gemm(false, true, mq, mk, d, T(1), dO + i0 * d, d, V + j0 * d, d, T(0), dS, mk);
        for (size_t i = 0; i < mq; ++i) {
          const T di = D[i0 + i];
          T* srow = dS + i * mk;
          const T* prow = P + i * mk;
          for (size_t j = 0; j < mk; ++j) srow[j] = prow[j] * (srow[j] - di);
        }
        gemm(false, false, mq, d, mk, g.scale, dS, mk, K + j0 * d, d, T(1), dQ + i0 * d, d);
        gemm(true, false, mk, d, mq, g.scale, dS, mk, Q + i0 * d, d, T(1), dK + j0 * d, d);
      });
    }
  }
}

// --------------------------------------------------------- two-pass pieces
template <class T>
void rsa_scores(const Geo<T>& g, const T* q, const Rows& qr, const T* k, const Rows& kr, const uint8_t* kmask, T* s,
                size_t ntot, size_t off) {
  const size_t d = g.d, nq = qr.n, nk = kr.n, grp = g.H / g.G;
  if (nq == 0 || nk == 0) return;
  for (size_t b = 0; b < g.B; ++b) {
    const uint8_t* km = kmask ? kmask + b * nk : nullptr;
    for (size_t h = 0; h < g.H; ++h) {
      const size_t bh = b * g.H + h, bg = b * g.G + h / grp;
      T* S = s + bh * nq * ntot + off;
      gemm(false, true, nq, nk, d, g.scale, q + bh * nq * d, d, k + bg * nk * d, d, T(0), S, ntot);
      if (g.causal || km) mask_tile(g.causal, qr.pos, 0, nq, kr.pos, 0, nk, km, S, ntot);
    }
  }
}

template <class T>
void rsa_softmax(const Geo<T>& g, size_t nq, T* s, size_t ntot, T* lse) {
  const size_t rows = g.B * g.H * nq;
  for (size_t r = 0; r < rows; ++r) {
    T* row = s + r * ntot;
    const T mx = row_max(row, ntot);
    if (mx == neg_inf<T>()) {
      std::fill(row, row + ntot, T(0));
      lse[r] = neg_inf<T>();
      continue;
    }
    const T sum = row_exp_sum(row, ntot, mx);
    row_scale(row, ntot, T(1) / sum);
    lse[r] = mx + std::log(sum);
  }
}

template <class T>
void rsa_probs(const Geo<T>& g, size_t nq, T* s, size_t ntot, const T* lse) {
  const size_t rows = g.B * g.H * nq;
  for (size_t r = 0; r < rows; ++r) {
    T* row = s + r * ntot;
    if (lse[r] == neg_inf<T>()) {
      std::fill(row, row + ntot, T(0));
      continue;
    }
    row_exp(row, ntot, lse[r]);
  }
}

template <class T>
void rsa_av(const Geo<T>& g, size_t nq, const T* a, size_t ntot, size_t off, const T* v, size_t nk, T* o) {
  const size_t d = g.d, grp = g.H / g.G;
  if (nq == 0 || nk == 0) return;
  for (size_t b = 0; b < g.B; ++b)
    for (size_t h = 0; h < g.H; ++h) {
      const size_t bh = b * g.H + h, bg = b * g.G + h / grp;
      gemm(false, false, nq, d, nk, T(1), a + bh * nq * ntot + off, ntot, v + bg * nk * d, d, T(1), o + bh * nq * d, d);
    }
}

template <class T>
void rsa_dav(const Geo<T>& g, size_t nq, const T* a, T* da, size_t ntot, size_t off, const T* v, size_t nk,
             const T* dout, T* dv) {
  const size_t d = g.d, grp = g.H / g.G;
  if (nq == 0 || nk == 0) return;
  for (size_t b = 0; b < g.B; ++b)
    for (size_t h = 0; h < g.H; ++h) {
      const size_t bh = b * g.H + h, bg = b * g.G + h / grp;
      gemm(false, true, nq, nk, d, T(1), dout + bh * nq * d, d, v + bg * nk * d, d, T(0), da + bh * nq * ntot + off,
           ntot);
      gemm(true, false, nk, d, nq, T(1), a + bh * nq * ntot + off, ntot, dout + bh * nq * d, d, T(1), dv + bg * nk * d,
           d);
    }
}

template <class T>
void rsa_ds(const Geo<T>& g, size_t nq, const T* a, T* da, size_t ntot, const T* delta) {
  const size_t rows = g.B * g.H * nq;
  for (size_t r = 0; r < rows; ++r) {
    const T* arow = a + r * ntot;
    T* drow = da + r * ntot;
    for (size_t j = 0; j < ntot; ++j) drow[j] = arow[j] * (drow[j] - delta[r]);
  }
}

template <class T>
void rsa_dqk(const Geo<T>& g, size_t nq, const T* ds, size_t ntot, size_t off, const T* q, const T* k, size_t nk,
             T* dq, T* dk) {
  const size_t d = g.d, grp = g.H / g.G;
  if (nq == 0 || nk == 0) return;
  for (size_t b = 0; b < g.B; ++b)
    for (size_t h = 0; h < g.H; ++h) {
      const size_t bh = b * g.H + h, bg = b * g.G + h / grp;
      const T* dS = ds + bh * nq * ntot + off;
      gemm(false, false, nq, d, nk, g.scale, dS, ntot, k + bg * nk * d, d, T(1), dq + bh * nq * d, d);
      gemm(true, false, nk, d, nq, g.scale, dS, ntot, q + bh * nq * d, d, T(1), dk + bg * nk * d, d);
    }
}

// -------------------------------------------------------------------- merge
template <class T>
void merge(size_t rows, size_t dim, T* oa, T* la, const T* ob, const T* lb) {
  const T inf = std::numeric_limits<T>::infinity();
  for (size_t r = 0; r < rows; ++r) {
    // +inf is what FlashAttention-derived kernels write for an empty row.
    const T a = la[r] == inf ? -inf : la[r];
    const T b = lb[r] == inf ? -inf : lb[r];
    T* o = oa + r * dim;
    const T* x = ob + r * dim;
    if (b == -inf) {
      if (a == -inf) {
        std::fill(o, o + dim, T(0));
        la[r] = -inf;
      }
      continue;
    }
    if (a == -inf) {
      std::copy(x, x + dim, o);
      la[r] = b;
      continue;
    }
    const T mx = a > b ? a : b;
    const T lse = mx + std::log1p(ex(-std::fabs(a - b)));
    const T wa = ex(a - lse), wb = ex(b - lse);
    // Commutative by construction, bit for bit, under any compiler flags: the
    // two terms are taken in an order that does not depend on which operand
    // is a and which is b (the larger lse first; equal lse: the smaller value
    // first), so that a contraction of w1*p + w2*q into fma(w1, p, w2*q)
    // fuses the same term either way.
    const bool bfirst = b > a;
    const T w1 = bfirst ? wb : wa, w2 = bfirst ? wa : wb;
    for (size_t e = 0; e < dim; ++e) {
      T p = bfirst ? x[e] : o[e], q = bfirst ? o[e] : x[e];
      if (a == b && q < p) std::swap(p, q);
      o[e] = w1 * p + w2 * q;
    }
    la[r] = lse;
  }
}

float fast_exp(float x) { return fexp(x); }

#define TSR_ATTN_INSTANTIATE(T)                                                                                       \
  template void fwd_init<T>(const Geo<T>&, size_t, T*, T*, T*);                                                       \
  template void fwd_block<T>(const Geo<T>&, const T*, const Rows&, const T*, const T*, const Rows&, const uint8_t*,  \
                             T*, T*, T*, T*, const Poke&);                                                            \
  template void fwd_finish<T>(const Geo<T>&, size_t, T*, const T*, const T*, T*);                                     \
  template void bwd_delta<T>(const Geo<T>&, size_t, const T*, const T*, T*);                                          \
  template void bwd_block<T>(const Geo<T>&, const T*, const Rows&, const T*, const T*, const Rows&, const uint8_t*,  \
                             const T*, const T*, const T*, T*, T*, T*, T*, const Poke&);                              \
  template void rsa_scores<T>(const Geo<T>&, const T*, const Rows&, const T*, const Rows&, const uint8_t*, T*,       \
                              size_t, size_t);                                                                        \
  template void rsa_softmax<T>(const Geo<T>&, size_t, T*, size_t, T*);                                                \
  template void rsa_probs<T>(const Geo<T>&, size_t, T*, size_t, const T*);                                            \
  template void rsa_av<T>(const Geo<T>&, size_t, const T*, size_t, size_t, const T*, size_t, T*);                     \
  template void rsa_dav<T>(const Geo<T>&, size_t, const T*, T*, size_t, size_t, const T*, size_t, const T*, T*);      \
  template void rsa_ds<T>(const Geo<T>&, size_t, const T*, T*, size_t, const T*);                                      \
  template void rsa_dqk<T>(const Geo<T>&, size_t, const T*, size_t, size_t, const T*, const T*, size_t, T*, T*);      \
  template void merge<T>(size_t, size_t, T*, T*, const T*, const T*);

TSR_ATTN_INSTANTIATE(float)
TSR_ATTN_INSTANTIATE(double)

}  // namespace attn
}  // namespace tsr

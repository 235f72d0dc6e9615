// The fused LAMB and LARS kernels (see kernels.hpp). Compiled with -O3
// -fno-math-errno -ffp-contract=off (optimizers/CMakeLists.txt): vectorised
// square roots and divisions, no fused multiply-adds, so every instruction
// set gives the same bits. With GCC 12 or newer on x86-64 Linux each kernel
// is built three times (baseline SSE2, x86-64-v3 = AVX2, x86-64-v4 =
// AVX-512) and the loader picks the best the CPU has (target_clones, ifunc).
#include "kernels.hpp"

#include <cmath>
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__) && defined(__linux__)
#define TSR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#define TSR_HAVE_CLONES 1
#else
#define TSR_CLONES
#define TSR_HAVE_CLONES 0
#endif
#define TSR_INLINE __attribute__((always_inline)) inline

namespace tsr {
namespace opt {
namespace {

TSR_INLINE float ld(float x) { return x; }
TSR_INLINE float ld(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// Round to nearest even; NaN stays NaN (quiet bit set), as the MPI backend's
// bfloat16 reduction does.
TSR_INLINE uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

TSR_INLINE Sums fold(const double* a, const double* b, const double* c) {
  Sums s;
  for (int j = 0; j < kLanes; ++j) {
    s.a += a[j];
    s.b += b[j];
    s.c += c[j];
  }
  return s;
}

// ------------------------------------------------------------------ LAMB
struct Lamb {
  float m, v, u;
};
TSR_INLINE Lamb lamb(float gr, float x, float mi, float vi, const LambCoef& c) {
  const float g = c.gs * gr + c.l2 * x;
  const float m = c.b1 * mi + c.a1 * g;
  const float v = c.b2 * vi + c.a2 * (g * g);
  const float u = (m * c.bc1) / (std::sqrt(v * c.bc2 + c.ei) + c.eo) + c.wd * x;
  return {m, v, u};
}

template <class G, bool All>
TSR_INLINE Sums lamb_norms_t(const G* __restrict g, const float* __restrict w, const float* __restrict m,
                             const float* __restrict v, size_t n, const LambCoef& cref) {
  const LambCoef c = cref;
  double sa[kLanes] = {}, sb[kLanes] = {}, sc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float gr = ld(g[i + j]), x = w[i + j];
      const float u = lamb(gr, x, m[i + j], v[i + j], c).u;
      if (All) {
        sa[j] += static_cast<double>(gr) * gr;
        sb[j] += static_cast<double>(x) * x;
      }
      sc[j] += static_cast<double>(u) * u;
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    const float gr = ld(g[i]), x = w[i];
    const float u = lamb(gr, x, m[i], v[i], c).u;
    if (All) {
      sa[j] += static_cast<double>(gr) * gr;
      sb[j] += static_cast<double>(x) * x;
    }
    sc[j] += static_cast<double>(u) * u;
  }
  return fold(sa, sb, sc);
}

template <class G, bool Out>
TSR_INLINE void lamb_update_t(const G* __restrict g, float* __restrict w, float* __restrict m, float* __restrict v,
                              uint16_t* __restrict p, size_t n, const LambCoef& cref, float k) {
  const LambCoef c = cref;
  for (size_t i = 0; i < n; ++i) {
    const float x = w[i];
    const Lamb r = lamb(ld(g[i]), x, m[i], v[i], c);
    m[i] = r.m;
    v[i] = r.v;
    const float y = x - k * r.u;
    w[i] = y;
    if (Out) p[i] = to_bf16(y);
  }
}

template <class G>
TSR_INLINE double sumsq_t(const G* __restrict g, size_t n) {
  double s[kLanes] = {}, z[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const float x = ld(g[i + j]);
      s[j] += static_cast<double>(x) * x;
    }
  for (int j = 0; i < n; ++i, ++j) {
    const float x = ld(g[i]);
    s[j] += static_cast<double>(x) * x;
  }
  return fold(s, z, z).a;
}

// ------------------------------------------------------------------ LARS
template <class G>
TSR_INLINE Sums lars_norms_t(const G* __restrict g, const float* __restrict w, size_t n) {
  double sa[kLanes] = {}, sb[kLanes] = {}, sc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const double gr = ld(g[i + j]), x = w[i + j];
      sa[j] += gr * gr;
      sb[j] += x * x;
      sc[j] += gr * x;
    }
  for (int j = 0; i < n; ++i, ++j) {
    const double gr = ld(g[i]), x = w[i];
    sa[j] += gr * gr;
    sb[j] += x * x;
    sc[j] += gr * x;
  }
  return fold(sa, sb, sc);
}

template <class G>
TSR_INLINE Sums lars_unorm_t(const G* __restrict g, const float* __restrict w, const float* __restrict v, size_t n,
                             const LarsCoef& cref) {
  const float gs = cref.gs, wd = cref.wd, mu = cref.mu, a = cref.a;
  const bool has_v = cref.has_v, nesterov = cref.nesterov;
  double sa[kLanes] = {}, sb[kLanes] = {}, sc[kLanes] = {};
  for (size_t i = 0; i < n; ++i) {
    const int j = static_cast<int>(i % kLanes);
    const float gr = ld(g[i]), x = w[i];
    const float d = gs * gr + wd * x;
    float upd;
    if (has_v) {
      const float vn = mu * v[i] + a * d;
      upd = nesterov ? mu * vn + a * d : vn;
    } else {
      upd = a * d;
    }
    sa[j] += static_cast<double>(gr) * gr;
    sb[j] += static_cast<double>(x) * x;
    sc[j] += static_cast<double>(upd) * upd;
  }
  return fold(sa, sb, sc);
}

template <class G, bool HasV, bool Nesterov, bool Out>
TSR_INLINE void lars_update_t(const G* __restrict g, float* __restrict w, float* __restrict v, uint16_t* __restrict p,
                              size_t n, const LarsCoef& cref) {
  const float gs = cref.gs, wd = cref.wd, mu = cref.mu, a = cref.a, b = cref.b;
  for (size_t i = 0; i < n; ++i) {
    const float x = w[i];
    const float d = gs * ld(g[i]) + wd * x;
    float upd;
    if (HasV) {
      const float vn = mu * v[i] + a * d;
      v[i] = vn;
      upd = Nesterov ? mu * vn + a * d : vn;
    } else {
      upd = a * d;
    }
    const float y = x - b * upd;
    w[i] = y;
    if (Out) p[i] = to_bf16(y);
  }
}

template <class G, bool Out>
TSR_INLINE void lars_dispatch(const G* g, float* w, float* v, uint16_t* p, size_t n, const LarsCoef& c) {
  if (!c.has_v)
    lars_update_t<G, false, false, Out>(g, w, v, p, n, c);
  else if (c.nesterov)
    lars_update_t<G, true, true, Out>(g, w, v, p, n, c);
  else
    lars_update_t<G, true, false, Out>(g, w, v, p, n, c);
}

}  // namespace

TSR_CLONES double sumsq_f32(const float* g, size_t n) { return sumsq_t(g, n); }
TSR_CLONES double sumsq_bf16(const uint16_t* g, size_t n) { return sumsq_t(g, n); }

TSR_CLONES Sums lamb_norms_f32(const float* g, const float* w, const float* m, const float* v, size_t n,
                               const LambCoef& c) {
  return lamb_norms_t<float, true>(g, w, m, v, n, c);
}
TSR_CLONES Sums lamb_norms_bf16(const uint16_t* g, const float* w, const float* m, const float* v, size_t n,
                                const LambCoef& c) {
  return lamb_norms_t<uint16_t, true>(g, w, m, v, n, c);
}
TSR_CLONES Sums lamb_unorm_f32(const float* g, const float* w, const float* m, const float* v, size_t n,
                               const LambCoef& c) {
  return lamb_norms_t<float, false>(g, w, m, v, n, c);
}
TSR_CLONES Sums lamb_unorm_bf16(const uint16_t* g, const float* w, const float* m, const float* v, size_t n,
                                const LambCoef& c) {
  return lamb_norms_t<uint16_t, false>(g, w, m, v, n, c);
}
TSR_CLONES void lamb_update_f32(const float* g, float* w, float* m, float* v, size_t n, const LambCoef& c, float k) {
  lamb_update_t<float, false>(g, w, m, v, nullptr, n, c, k);
}
TSR_CLONES void lamb_update_bf16(const uint16_t* g, float* w, float* m, float* v, uint16_t* p, size_t n,
                                 const LambCoef& c, float k) {
  if (p)
    lamb_update_t<uint16_t, true>(g, w, m, v, p, n, c, k);
  else
    lamb_update_t<uint16_t, false>(g, w, m, v, nullptr, n, c, k);
}

TSR_CLONES Sums lars_norms_f32(const float* g, const float* w, size_t n) { return lars_norms_t(g, w, n); }
TSR_CLONES Sums lars_norms_bf16(const uint16_t* g, const float* w, size_t n) { return lars_norms_t(g, w, n); }
TSR_CLONES Sums lars_unorm_f32(const float* g, const float* w, const float* v, size_t n, const LarsCoef& c) {
  return lars_unorm_t(g, w, v, n, c);
}
TSR_CLONES Sums lars_unorm_bf16(const uint16_t* g, const float* w, const float* v, size_t n, const LarsCoef& c) {
  return lars_unorm_t(g, w, v, n, c);
}
TSR_CLONES void lars_update_f32(const float* g, float* w, float* v, size_t n, const LarsCoef& c) {
  lars_dispatch<float, false>(g, w, v, nullptr, n, c);
}
TSR_CLONES void lars_update_bf16(const uint16_t* g, float* w, float* v, uint16_t* p, size_t n, const LarsCoef& c) {
  if (p)
    lars_dispatch<uint16_t, true>(g, w, v, p, n, c);
  else
    lars_dispatch<uint16_t, false>(g, w, v, nullptr, n, c);
}

TSR_CLONES void bf16_to_f32(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = ld(in[i]);
}

TSR_CLONES void f32_to_bf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(in[i]);
}

const char* kernel_isa() {
#if TSR_HAVE_CLONES
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4 (AVX-512)";
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3 (AVX2)";
  return "x86-64 baseline (SSE2)";
#else
  return "compiler default";
#endif
}

}  // namespace opt
}  // namespace tsr

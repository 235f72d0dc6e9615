// Float64 full-attention reference for the ring attention tests: naive,
// one rank, natural token order, max-shifted softmax. Independent of the
// library (no tiles, no merging, no layouts).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace tsr_test {

// Deterministic values in [-1, 1) from (seed, index).
inline double uniform(uint64_t seed, uint64_t i) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) / 4503599627370496.0 - 1.0;  // 2^52
}

struct AttnShape {
  size_t B = 1, H = 1, G = 1, N = 1, d = 1;
  bool causal = false;
  double scale = 1;
};

// Full tensors in natural order: q, dout (B,H,N,d); k, v (B,G,N,d);
// mask (B,N) (empty: none).
struct AttnFull {
  std::vector<double> q, k, v, dout;
  std::vector<uint8_t> mask;
};

struct AttnRef {
  std::vector<double> o, lse, dq, dk, dv;
};

inline AttnRef attention_reference(const AttnShape& s, const AttnFull& f) {
  const size_t B = s.B, H = s.H, G = s.G, N = s.N, d = s.d, grp = H / G;
  AttnRef r;
  r.o.assign(B * H * N * d, 0.0);
  r.lse.assign(B * H * N, -std::numeric_limits<double>::infinity());
  r.dq.assign(B * H * N * d, 0.0);
  r.dk.assign(B * G * N * d, 0.0);
  r.dv.assign(B * G * N * d, 0.0);
  std::vector<double> sc(N), pr(N);
  std::vector<char> vis(N);
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h) {
      const size_t g = h / grp;
      const double* Q = f.q.data() + (b * H + h) * N * d;
      const double* K = f.k.data() + (b * G + g) * N * d;
      const double* V = f.v.data() + (b * G + g) * N * d;
      const double* dO = f.dout.data() + (b * H + h) * N * d;
      double* O = r.o.data() + (b * H + h) * N * d;
      double* dQ = r.dq.data() + (b * H + h) * N * d;
      double* dK = r.dk.data() + (b * G + g) * N * d;
      double* dV = r.dv.data() + (b * G + g) * N * d;
      for (size_t i = 0; i < N; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        bool any = false;
        for (size_t j = 0; j < N; ++j) {
          vis[j] = (!s.causal || j <= i) && (f.mask.empty() || f.mask[b * N + j] != 0);
          if (!vis[j]) continue;
          double dot = 0;
          for (size_t e = 0; e < d; ++e) dot += Q[i * d + e] * K[j * d + e];
          sc[j] = s.scale * dot;
          mx = any ? std::max(mx, sc[j]) : sc[j];
          any = true;
        }
        if (!any) continue;  // o = 0, lse = -inf, no gradient
        double sum = 0;
        for (size_t j = 0; j < N; ++j)
          if (vis[j]) sum += std::exp(sc[j] - mx);
        const double lse = mx + std::log(sum);
        r.lse[(b * H + h) * N + i] = lse;
        for (size_t j = 0; j < N; ++j) pr[j] = vis[j] ? std::exp(sc[j] - lse) : 0.0;
        for (size_t j = 0; j < N; ++j)
          if (vis[j])
            for (size_t e = 0; e < d; ++e) O[i * d + e] += pr[j] * V[j * d + e];
        double D = 0;
        for (size_t e = 0; e < d; ++e) D += dO[i * d + e] * O[i * d + e];
        for (size_t j = 0; j < N; ++j) {
          if (!vis[j]) continue;
          double dp = 0;
          for (size_t e = 0; e < d; ++e) dp += dO[i * d + e] * V[j * d + e];
          const double ds = pr[j] * (dp - D);
          for (size_t e = 0; e < d; ++e) {
            dQ[i * d + e] += s.scale * ds * K[j * d + e];
            dK[j * d + e] += s.scale * ds * Q[i * d + e];
            dV[j * d + e] += pr[j] * dO[i * d + e];
          }
        }
      }
    }
  return r;
}

}  // namespace tsr_test

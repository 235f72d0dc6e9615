// The optimizers' pieces that need no MPI: the fused kernels against plain
// float64 formulas, their determinism (norms do not depend on the buffers'
// alignment), bfloat16 rounding, the parameter table and the presets, and
// the layout arithmetic (slices, work items, buckets).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels.hpp"
#include "optimizer_impl.hpp"

namespace {

using namespace tsr::opt;

double rnd(uint64_t seed, uint64_t i) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + i + 1;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) / 4503599627370496.0 - 1.0;
}
std::vector<float> data(size_t n, uint64_t seed, double scale, double shift = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(shift + scale * rnd(seed, i));
  return v;
}
uint16_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

LambCoef coef() {
  LambCoef c{};
  c.gs = 0.5f;
  c.l2 = 0.01f;
  c.b1 = 0.9f;
  c.a1 = 0.1f;
  c.b2 = 0.999f;
  c.a2 = 0.001f;
  c.bc1 = 10.0f;
  c.bc2 = 1000.0f;
  c.ei = 1e-7f;
  c.eo = 1e-6f;
  c.wd = 0.02f;
  return c;
}

// The LAMB element formulas in float64.
struct LambRef {
  double m, v, u;
};
LambRef lamb_ref(double g, double w, double m, double v, const LambCoef& c) {
  const double gg = static_cast<double>(c.gs) * g + static_cast<double>(c.l2) * w;
  const double mm = static_cast<double>(c.b1) * m + static_cast<double>(c.a1) * gg;
  const double vv = static_cast<double>(c.b2) * v + static_cast<double>(c.a2) * gg * gg;
  const double u = mm * c.bc1 / (std::sqrt(vv * c.bc2 + c.ei) + c.eo) + static_cast<double>(c.wd) * w;
  return {mm, vv, u};
}

constexpr size_t kN = 1000;  // not a multiple of the 16 lanes

TEST(Kernels, LambNormsMatchFloat64) {
  const std::vector<float> g = data(kN, 1, 0.3), w = data(kN, 2, 1.0), m = data(kN, 3, 0.1),
                           v = data(kN, 4, 0.01, 0.011);
  const LambCoef c = coef();
  double g2 = 0, w2 = 0, u2 = 0;
  for (size_t i = 0; i < kN; ++i) {
    g2 += static_cast<double>(g[i]) * g[i];
    w2 += static_cast<double>(w[i]) * w[i];
    const double u = lamb_ref(g[i], w[i], m[i], v[i], c).u;
    u2 += u * u;
  }
  const Sums s = lamb_norms_f32(g.data(), w.data(), m.data(), v.data(), kN, c);
  EXPECT_NEAR(s.a, g2, 1e-13 * g2);
  EXPECT_NEAR(s.b, w2, 1e-13 * w2);
  EXPECT_NEAR(s.c, u2, 1e-6 * u2);  // u itself is computed in float
  const Sums only_u = lamb_unorm_f32(g.data(), w.data(), m.data(), v.data(), kN, c);
  EXPECT_EQ(only_u.a, 0);
  EXPECT_EQ(only_u.b, 0);
  EXPECT_EQ(only_u.c, s.c);
  EXPECT_NEAR(sumsq_f32(g.data(), kN), g2, 1e-13 * g2);
}

TEST(Kernels, LambUpdateMatchesFloat64) {
  const std::vector<float> g = data(kN, 5, 0.3), w0 = data(kN, 6, 1.0), m0 = data(kN, 7, 0.1),
                           v0 = data(kN, 8, 0.01, 0.011);
  const LambCoef c = coef();
  const float k = 0.003f;
  std::vector<float> w = w0, m = m0, v = v0;
  lamb_update_f32(g.data(), w.data(), m.data(), v.data(), kN, c, k);
  for (size_t i = 0; i < kN; ++i) {
    const LambRef r = lamb_ref(g[i], w0[i], m0[i], v0[i], c);
    // Relative to the terms: m = b1*m + a1*g may cancel.
    const double gg = std::fabs(0.5 * g[i]) + 0.01 * std::fabs(w0[i]);
    EXPECT_NEAR(m[i], r.m, 1e-6 * (0.9 * std::fabs(m0[i]) + 0.1 * gg)) << i;
    EXPECT_NEAR(v[i], r.v, 1e-6 * std::fabs(r.v) + 1e-12) << i;
    EXPECT_NEAR(w[i], w0[i] - k * r.u, 1e-6 * std::fabs(w0[i]) + 1e-6 * std::fabs(k * r.u)) << i;
  }
  // bfloat16 gradients and parameters: the same on the widened values, and
  // the parameter is the new master weight rounded to nearest even.
  std::vector<uint16_t> gb(kN), pb(kN);
  for (size_t i = 0; i < kN; ++i) gb[i] = bits(g[i]);
  std::vector<float> wm = w0, mb = m0, vb = v0;
  lamb_update_bf16(gb.data(), wm.data(), mb.data(), vb.data(), pb.data(), kN, c, k);
  for (size_t i = 0; i < kN; ++i) {
    const LambRef r = lamb_ref(from_bf16(gb[i]), w0[i], m0[i], v0[i], c);
    EXPECT_NEAR(wm[i], w0[i] - k * r.u, 1e-6 * std::fabs(w0[i]) + 1e-6 * std::fabs(k * r.u)) << i;
    const float lo = from_bf16(bits(wm[i])), hi = from_bf16(static_cast<uint16_t>(bits(wm[i]) + 1));
    EXPECT_TRUE(from_bf16(pb[i]) == lo || from_bf16(pb[i]) == hi) << i;
    EXPECT_LE(std::fabs(from_bf16(pb[i]) - wm[i]), 0.5 * std::fabs(hi - lo)) << i;
  }
}

TEST(Kernels, LarsMatchesFloat64) {
  const std::vector<float> g = data(kN, 9, 0.3), w0 = data(kN, 10, 1.0), v0 = data(kN, 11, 0.01);
  const Sums s = lars_norms_f32(g.data(), w0.data(), kN);
  double g2 = 0, w2 = 0, gw = 0;
  for (size_t i = 0; i < kN; ++i) {
    g2 += static_cast<double>(g[i]) * g[i];
    w2 += static_cast<double>(w0[i]) * w0[i];
    gw += static_cast<double>(g[i]) * w0[i];
  }
  EXPECT_NEAR(s.a, g2, 1e-13 * g2);
  EXPECT_NEAR(s.b, w2, 1e-13 * w2);
  EXPECT_NEAR(s.c, gw, 1e-12 * std::sqrt(g2 * w2));
  for (int variant = 0; variant < 3; ++variant) {
    LarsCoef c{};
    c.gs = 0.25f;
    c.wd = 1e-3f;
    c.mu = 0.9f;
    c.a = 0.02f;
    c.b = 0.5f;
    c.has_v = variant != 0;
    c.nesterov = variant == 2;
    std::vector<float> w = w0, v = v0;
    lars_update_f32(g.data(), w.data(), v.data(), kN, c);
    for (size_t i = 0; i < kN; ++i) {
      const double d = 0.25 * g[i] + static_cast<double>(c.wd) * w0[i];
      double vn = 0, upd = static_cast<double>(c.a) * d;
      if (c.has_v) {
        vn = static_cast<double>(c.mu) * v0[i] + static_cast<double>(c.a) * d;
        upd = c.nesterov ? static_cast<double>(c.mu) * vn + static_cast<double>(c.a) * d : vn;
        EXPECT_NEAR(v[i], vn, 1e-6 * std::fabs(vn) + 1e-9) << i;
      } else {
        EXPECT_EQ(v[i], v0[i]) << "no momentum: the buffer is not touched";
      }
      EXPECT_NEAR(w[i], w0[i] - static_cast<double>(c.b) * upd, 2e-7 * std::fabs(w0[i]) + 1e-9) << variant << ", " << i;
    }
  }
}

// Norms are summed in 16 lanes by index: the same bits wherever the data
// sits in memory, so that a shard's buffer and the full buffer agree.
TEST(Kernels, NormsDoNotDependOnAlignment) {
  const size_t n = 777;
  const std::vector<float> g = data(n, 12, 0.3), w = data(n, 13, 1.0), m = data(n, 14, 0.1), v = data(n, 15, 0.01, 0.011);
  const LambCoef c = coef();
  const Sums ref = lamb_norms_f32(g.data(), w.data(), m.data(), v.data(), n, c);
  const Sums lref = lars_norms_f32(g.data(), w.data(), n);
  for (size_t shift = 1; shift < 16; ++shift) {
    std::vector<float> gs(n + shift), ws(n + shift), ms(n + shift), vs(n + shift);
    std::copy(g.begin(), g.end(), gs.begin() + static_cast<long>(shift));
    std::copy(w.begin(), w.end(), ws.begin() + static_cast<long>(shift));
    std::copy(m.begin(), m.end(), ms.begin() + static_cast<long>(shift));
    std::copy(v.begin(), v.end(), vs.begin() + static_cast<long>(shift));
    const Sums s = lamb_norms_f32(gs.data() + shift, ws.data() + shift, ms.data() + shift, vs.data() + shift, n, c);
    EXPECT_EQ(s.a, ref.a) << shift;
    EXPECT_EQ(s.b, ref.b) << shift;
    EXPECT_EQ(s.c, ref.c) << shift;
    const Sums l = lars_norms_f32(gs.data() + shift, ws.data() + shift, n);
    EXPECT_EQ(l.a, lref.a);
    EXPECT_EQ(l.c, lref.c);
    EXPECT_EQ(sumsq_f32(gs.data() + shift, n), ref.a);
  }
  EXPECT_NE(std::string(kernel_isa()), "");
}

TEST(Kernels, Bfloat16RoundingNanAndInf) {
  const float one = 1.0f, ulp = 1.0f / 128;  // bfloat16 spacing at 1
  const std::vector<float> w = {one + ulp / 2,             // halfway, even below: 1
                                one + 3 * ulp / 2,         // halfway, even above: 1 + 2 ulp
                                one + ulp / 2 + ulp / 64,  // above halfway: up
                                -(one + ulp / 2),          // negative halfway: -1
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::max(),  // rounds up to inf
                                3.0e38f};                           // stays finite
  const size_t n = w.size();
  std::vector<uint16_t> p(n, 0);
  f32_to_bf16(w.data(), p.data(), n);
  EXPECT_EQ(from_bf16(p[0]), 1.0f);
  EXPECT_EQ(from_bf16(p[1]), one + 2 * ulp);
  EXPECT_EQ(from_bf16(p[2]), one + ulp);
  EXPECT_EQ(from_bf16(p[3]), -1.0f);
  EXPECT_EQ(p[4], 0x7f80);
  EXPECT_EQ(p[5], 0xff80);
  EXPECT_TRUE(std::isnan(from_bf16(p[6])));
  EXPECT_EQ(p[6] & 0x40, 0x40) << "NaN stays a quiet NaN";
  EXPECT_EQ(p[7], 0x7f80);
  EXPECT_NEAR(from_bf16(p[8]), 3.0e38, 3.0e38 / 256);
  std::vector<float> back(n);
  bf16_to_f32(p.data(), back.data(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(bits(back[i]), p[i]);
  // The update kernels round the same way: k = 0 leaves the master weights,
  // the bfloat16 output is their rounding.
  std::vector<uint16_t> g(4, 0), out(4, 0);
  std::vector<float> wm(w.begin(), w.begin() + 4), m(4, 0), v(4, 0);
  LambCoef c{};
  c.b1 = 0.9f;
  c.b2 = 0.999f;
  c.bc1 = c.bc2 = c.eo = 1;
  lamb_update_bf16(g.data(), wm.data(), m.data(), v.data(), out.data(), 4, c, 0.0f);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(out[i], p[i]);
}

// ---------------------------------------------------------------- tables
TEST(Table, EveryParameterHasANameAndBoundsAndEveryPresetIsInBounds) {
  for (int p = 0; p < kParams; ++p) {
    const ParamInfo* pi = param_info(p);
    ASSERT_NE(pi, nullptr);
    EXPECT_EQ(std::string(pi->name).rfind("TSR_OPT_", 0), 0u);
    EXPECT_LT(pi->lower, pi->upper) << pi->name;
    EXPECT_NE(pi->kinds, 0u);
  }
  EXPECT_EQ(param_info(-1), nullptr);
  EXPECT_EQ(param_info(kParams), nullptr);
  EXPECT_EQ(presets().size(), 13u);  // 7 LAMB, 6 LARS (TSR_PRESET_LARS_SIMCLR_POPULAR, issue 15)
  for (const Preset& pr : presets()) {
    EXPECT_EQ(preset_info(pr.id), &pr);
    EXPECT_EQ(pr.kind, static_cast<int>(pr.id) > 100 ? TSR_OPT_LARS : TSR_OPT_LAMB) << pr.name;
    for (int p = 0; p < kParams; ++p)
      if (param_info(p)->kinds & (1u << pr.kind)) {
        EXPECT_EQ(check_value(pr.kind, p, pr.values[static_cast<size_t>(p)]), TSR_SUCCESS) << pr.name << " " << param_info(p)->name;
      }
  }
  EXPECT_EQ(preset_info(0), nullptr);
  EXPECT_EQ(check_value(TSR_OPT_LAMB, TSR_OPT_BETA1, 0.999999), TSR_SUCCESS);
  EXPECT_EQ(check_value(TSR_OPT_LAMB, TSR_OPT_BETA1, 1.0), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(check_value(TSR_OPT_LAMB, TSR_OPT_TRUST_MAX, std::numeric_limits<double>::infinity()), TSR_SUCCESS);
  EXPECT_EQ(check_value(TSR_OPT_LAMB, TSR_OPT_LR, std::numeric_limits<double>::infinity()), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(check_value(TSR_OPT_LARS, TSR_OPT_NESTEROV, 1), TSR_SUCCESS);
  EXPECT_EQ(check_value(TSR_OPT_LARS, TSR_OPT_NESTEROV, 0.5), TSR_ERR_INVALID_ARG);
}

// ---------------------------------------------------------------- layout
TEST(Layout, SlicesAreBalancedAndContiguous) {
  for (size_t n : {0ul, 1ul, 7ul, 100ul, 2555ul})
    for (int p : {1, 2, 3, 4, 8, 13}) {
      std::vector<size_t> c, d;
      slices(n, p, &c, &d);
      ASSERT_EQ(c.size(), static_cast<size_t>(p));
      size_t at = 0;
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(d[static_cast<size_t>(r)], at);
        EXPECT_EQ(c[static_cast<size_t>(r)], n / static_cast<size_t>(p) + (static_cast<size_t>(r) < n % static_cast<size_t>(p)));
        at += c[static_cast<size_t>(r)];
      }
      EXPECT_EQ(at, n);
    }
}

TEST(Layout, ItemsCoverTheRangeAtGroupAndChunkBoundaries) {
  const std::vector<size_t> offset = {0, 5, 5, 40000, 40001, 70000};  // an empty group, a one-element group
  for (size_t lo : {0ul, 3ul, 16384ul, 39999ul})
    for (size_t hi : {40001ul, 50000ul, 70000ul}) {
      const std::vector<Item> items = cut(offset, lo, hi);
      size_t at = lo;
      for (const Item& it : items) {
        EXPECT_EQ(it.begin, at);
        EXPECT_LT(it.begin, it.end);
        EXPECT_GE(it.begin, offset[static_cast<size_t>(it.group)]);
        EXPECT_LE(it.end, offset[static_cast<size_t>(it.group) + 1]);
        EXPECT_EQ(it.begin / kChunk, (it.end - 1) / kChunk) << "an item crosses a chunk boundary";
        at = it.end;
      }
      EXPECT_EQ(at, hi);
    }
  EXPECT_TRUE(cut(offset, 10, 10).empty());
  EXPECT_EQ(bucket_elems(4096, 4), kChunk);
  EXPECT_EQ(bucket_elems(25.0 * 1024 * 1024, 4), 6553600u);
  EXPECT_EQ(bucket_elems(25.0 * 1024 * 1024, 2), 13107200u);
  EXPECT_EQ(bucket_elems(100000, 4), kChunk);  // 25000 elements round down to one chunk
  EXPECT_EQ(bucket_elems(200000, 4), 3 * kChunk);
}

TEST(Layout, BuffersAreAlignedAndZeroed) {
  Buffer<float> b;
  ASSERT_TRUE(b.allocate(1001));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  for (size_t i = 0; i < 1001; ++i) ASSERT_EQ(b.data()[i], 0.0f);
  EXPECT_TRUE(b.allocate(0));
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_FALSE(b.allocate(std::numeric_limits<size_t>::max() / 2));
}

}  // namespace

// The local parts of ring attention, without MPI: sequence layouts (shard
// lengths, positions, permutations), the stable (o, lse) merge, and the
// blockwise kernels driven through a whole ring on one process (every rank's
// queries against every rank's key block, as the ring would feed them) at
// sizes that span many 64 x 128 tiles, against the float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "attention_impl.hpp"
#include "attn_reference.hpp"
#include "tessera/tessera.h"

namespace {

using tsr::attn::Geo;
using tsr::attn::Rows;
using tsr::attn::Seg;

const tsr_attn_layout kLayouts[] = {TSR_ATTN_LAYOUT_CONTIGUOUS, TSR_ATTN_LAYOUT_ZIGZAG, TSR_ATTN_LAYOUT_STRIPED};
const double kInf = std::numeric_limits<double>::infinity();

std::vector<int64_t> pos_of(tsr_attn_layout l, size_t N, int p, int r) {
  size_t n = 0;
  EXPECT_EQ(tsr_attn_shard_len(l, N, p, r, &n), TSR_SUCCESS);
  std::vector<int64_t> v(n);
  EXPECT_EQ(tsr_attn_positions(l, N, p, r, v.data()), TSR_SUCCESS);
  return v;
}

// ------------------------------------------------------------------ layouts
TEST(AttnLayout, ExamplesFromTheDocs) {
  // zigzag, p = 4, N = 16: chunks 0,7 | 1,6 | 2,5 | 3,4 of 2 tokens.
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_ZIGZAG, 16, 4, 0), (std::vector<int64_t>{0, 1, 14, 15}));
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_ZIGZAG, 16, 4, 1), (std::vector<int64_t>{2, 3, 12, 13}));
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_ZIGZAG, 16, 4, 3), (std::vector<int64_t>{6, 7, 8, 9}));
  // zigzag, p = 2, N = 10: chunks of 3, 3, 2, 2.
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_ZIGZAG, 10, 2, 0), (std::vector<int64_t>{0, 1, 2, 8, 9}));
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_ZIGZAG, 10, 2, 1), (std::vector<int64_t>{3, 4, 5, 6, 7}));
  // contiguous, p = 3, N = 10: 4, 3, 3.
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_CONTIGUOUS, 10, 3, 0), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_CONTIGUOUS, 10, 3, 2), (std::vector<int64_t>{7, 8, 9}));
  // striped, p = 3, N = 10.
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_STRIPED, 10, 3, 0), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_STRIPED, 10, 3, 1), (std::vector<int64_t>{1, 4, 7}));
  // fewer tokens than ranks.
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_ZIGZAG, 3, 4, 0), (std::vector<int64_t>{0}));
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_ZIGZAG, 3, 4, 3), (std::vector<int64_t>{}));
  EXPECT_EQ(pos_of(TSR_ATTN_LAYOUT_STRIPED, 2, 4, 2), (std::vector<int64_t>{}));
}

TEST(AttnLayout, ShardsPartitionTheSequenceAndBalance) {
  for (tsr_attn_layout l : kLayouts)
    for (int p = 1; p <= 9; ++p)
      for (size_t N = 0; N <= 40; ++N) {
        std::set<int64_t> all;
        size_t lo = SIZE_MAX, hi = 0, total = 0;
        for (int r = 0; r < p; ++r) {
          const std::vector<int64_t> v = pos_of(l, N, p, r);
          for (size_t i = 0; i < v.size(); ++i) {
            EXPECT_TRUE(all.insert(v[i]).second) << "position twice";
            EXPECT_TRUE(v[i] >= 0 && static_cast<size_t>(v[i]) < N);
            if (i > 0) {
              EXPECT_LT(v[i - 1], v[i]) << "local positions increase";
            }
          }
          lo = std::min(lo, v.size()), hi = std::max(hi, v.size()), total += v.size();
          // Causal work of a rank: pairs (i, j) of its queries with j <= i.
        }
        EXPECT_EQ(total, N);
        EXPECT_LE(hi - lo, l == TSR_ATTN_LAYOUT_ZIGZAG ? 2u : 1u) << "balanced";
      }
}

TEST(AttnLayout, ZigzagBalancesCausalWork) {
  // Causal work per rank (visible pairs of its queries) differs by at most
  // one chunk's worth of rows for zigzag, while contiguous is skewed ~p:1.
  const size_t N = 64;
  for (int p : {2, 4, 8}) {
    std::vector<size_t> work;
    for (int r = 0; r < p; ++r) {
      size_t w = 0;
      for (int64_t t : pos_of(TSR_ATTN_LAYOUT_ZIGZAG, N, p, r)) w += static_cast<size_t>(t) + 1;
      work.push_back(w);
    }
    EXPECT_EQ(*std::max_element(work.begin(), work.end()), *std::min_element(work.begin(), work.end())) << p;
  }
}

TEST(AttnLayout, PermuteExtractInsertAgree) {
  for (tsr_attn_layout l : kLayouts)
    for (int p : {1, 2, 3, 5})
      for (size_t N : {0u, 1u, 7u, 13u}) {
        const size_t outer = 2, row = 3;
        std::vector<int32_t> full(outer * N * row), perm(full.size()), back(full.size());
        for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<int32_t>(i);
        ASSERT_EQ(tsr_attn_permute(l, N, p, 0, full.data(), perm.data(), outer, row * 4), TSR_SUCCESS);
        ASSERT_EQ(tsr_attn_permute(l, N, p, 1, perm.data(), back.data(), outer, row * 4), TSR_SUCCESS);
        EXPECT_EQ(back, full);
        // Layout order = the shards one after the other.
        size_t off = 0;
        std::vector<int32_t> rebuilt(full.size(), -1);
        for (int r = 0; r < p; ++r) {
          size_t n = 0;
          tsr_attn_shard_len(l, N, p, r, &n);
          std::vector<int32_t> loc(outer * n * row);
          ASSERT_EQ(tsr_attn_shard_extract(l, N, p, r, full.data(), loc.data(), outer, row * 4), TSR_SUCCESS);
          for (size_t o = 0; o < outer; ++o)
            for (size_t i = 0; i < n * row; ++i) EXPECT_EQ(loc[o * n * row + i], perm[(o * N + off) * row + i]);
          ASSERT_EQ(tsr_attn_shard_insert(l, N, p, r, loc.data(), rebuilt.data(), outer, row * 4), TSR_SUCCESS);
          off += n;
        }
        EXPECT_EQ(rebuilt, full);
      }
}

TEST(AttnLayout, Errors) {
  size_t n = 0;
  int64_t pos[4];
  EXPECT_EQ(tsr_attn_shard_len(static_cast<tsr_attn_layout>(7), 10, 2, 0, &n), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(std::strstr(tsr_last_error(nullptr), "not a tsr_attn_layout"));
  EXPECT_EQ(tsr_attn_shard_len(TSR_ATTN_LAYOUT_ZIGZAG, 10, 2, 2, &n), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_attn_shard_len(TSR_ATTN_LAYOUT_ZIGZAG, 10, 0, 0, &n), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_attn_shard_len(TSR_ATTN_LAYOUT_ZIGZAG, 10, 2, 0, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_attn_positions(TSR_ATTN_LAYOUT_STRIPED, 10, 2, 0, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_attn_positions(TSR_ATTN_LAYOUT_STRIPED, 0, 2, 0, nullptr), TSR_SUCCESS);  // nothing to write
  EXPECT_EQ(tsr_attn_positions(TSR_ATTN_LAYOUT_STRIPED, 8, 2, 0, pos), TSR_SUCCESS);
  int32_t buf[8] = {0};
  EXPECT_EQ(tsr_attn_permute(TSR_ATTN_LAYOUT_STRIPED, 8, 2, 0, buf, buf, 1, 4), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(std::strstr(tsr_last_error(nullptr), "overlap"));
  EXPECT_EQ(tsr_attn_shard_extract(TSR_ATTN_LAYOUT_STRIPED, 8, 2, 0, nullptr, buf, 1, 4), TSR_ERR_INVALID_ARG);
}

// -------------------------------------------------------------------- merge
// Partial results over two disjoint key sets merge into the full one.
TEST(AttnMerge, PartialsMergeIntoTheWhole) {
  tsr_test::AttnShape s;
  s.B = 1, s.H = 1, s.G = 1, s.N = 9, s.d = 4, s.scale = 0.7;
  tsr_test::AttnFull f;
  for (size_t i = 0; i < s.N * s.d; ++i) {
    f.q.push_back(3 * tsr_test::uniform(1, i));
    f.k.push_back(tsr_test::uniform(2, i));
    f.v.push_back(tsr_test::uniform(3, i));
    f.dout.push_back(0);
  }
  const tsr_test::AttnRef whole = tsr_test::attention_reference(s, f);
  tsr_test::AttnFull a = f, b = f;
  a.mask.assign(s.N, 0), b.mask.assign(s.N, 0);
  for (size_t j = 0; j < s.N; ++j) (j % 3 == 0 ? a.mask : b.mask)[j] = 1;
  tsr_test::AttnRef ra = tsr_test::attention_reference(s, a), rb = tsr_test::attention_reference(s, b);
  ASSERT_EQ(tsr_attn_merge(TSR_FLOAT64, s.N, s.d, ra.o.data(), ra.lse.data(), rb.o.data(), rb.lse.data()), TSR_SUCCESS);
  for (size_t i = 0; i < ra.o.size(); ++i) EXPECT_NEAR(ra.o[i], whole.o[i], 1e-14);
  for (size_t i = 0; i < ra.lse.size(); ++i) EXPECT_NEAR(ra.lse[i], whole.lse[i], 1e-14);
}

TEST(AttnMerge, IdentityCommutativityAssociativityAndHugeGaps) {
  const size_t d = 3;
  // Rows: normal, gap > 88 (exp underflows in float), gap > 1000, one side
  // empty (-inf), both empty, +inf (FlashAttention's empty row) on one side.
  std::vector<double> la = {0.5, 0.0, -500.0, 2.0, -kInf, kInf};
  std::vector<double> lb = {1.5, 200.0, 600.0, -kInf, -kInf, 3.0};
  const size_t rows = la.size();
  std::vector<double> oa(rows * d), ob(rows * d);
  for (size_t i = 0; i < rows * d; ++i) oa[i] = tsr_test::uniform(5, i), ob[i] = tsr_test::uniform(6, i);
  std::vector<double> ab_o = oa, ab_l = la, ba_o = ob, ba_l = lb;
  ASSERT_EQ(tsr_attn_merge(TSR_FLOAT64, rows, d, ab_o.data(), ab_l.data(), ob.data(), lb.data()), TSR_SUCCESS);
  ASSERT_EQ(tsr_attn_merge(TSR_FLOAT64, rows, d, ba_o.data(), ba_l.data(), oa.data(), la.data()), TSR_SUCCESS);
  EXPECT_EQ(0, std::memcmp(ab_o.data(), ba_o.data(), ab_o.size() * sizeof(double))) << "commutative, bitwise";
  EXPECT_EQ(0, std::memcmp(ab_l.data(), ba_l.data(), ab_l.size() * sizeof(double)));
  for (double x : ab_o) EXPECT_FALSE(std::isnan(x));
  EXPECT_NEAR(ab_l[0], std::log(std::exp(0.5) + std::exp(1.5)), 1e-15);
  EXPECT_EQ(ab_l[1], 200.0);  // exp(-200) vanishes next to 1
  for (size_t e = 0; e < d; ++e) EXPECT_EQ(ab_o[1 * d + e], ob[1 * d + e]);
  EXPECT_EQ(ab_l[3], 2.0);  // identity
  for (size_t e = 0; e < d; ++e) EXPECT_EQ(ab_o[3 * d + e], oa[3 * d + e]);
  EXPECT_EQ(ab_l[4], -kInf);  // both empty: (0, -inf)
  for (size_t e = 0; e < d; ++e) EXPECT_EQ(ab_o[4 * d + e], 0.0);
  EXPECT_EQ(ab_l[5], 3.0);  // +inf read as empty
  // Associativity up to rounding, in float.
  std::vector<float> l1 = {0.f, 90.f}, l2 = {1.f, 0.f}, l3 = {-3.f, 95.f};
  std::vector<float> o1 = {1, 2, 3, 4, 5, 6}, o2 = {-1, 0, 1, 2, 2, 2}, o3 = {7, 7, 7, -5, -5, -5};
  std::vector<float> x = o1, xl = l1, y = o2, yl = l2;
  tsr_attn_merge(TSR_FLOAT32, 2, d, x.data(), xl.data(), o2.data(), l2.data());
  tsr_attn_merge(TSR_FLOAT32, 2, d, x.data(), xl.data(), o3.data(), l3.data());  // (1+2)+3
  tsr_attn_merge(TSR_FLOAT32, 2, d, y.data(), yl.data(), o3.data(), l3.data());
  std::vector<float> z = o1, zl = l1;
  tsr_attn_merge(TSR_FLOAT32, 2, d, z.data(), zl.data(), y.data(), yl.data());  // 1+(2+3)
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], z[i], 1e-5f);
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(xl[i], zl[i], 1e-5f);
}

// Commutative bit for bit on many rows, with equal lse on both sides (ties),
// in both types: the merge orders its two terms itself, so that this holds
// under any compiler flags (issue 15, defect 8: with FMA contraction the
// naive wa*o_a + wb*o_b fused a different term when the operands swapped).
// CI builds this test a second time with -O3 -march=native -ffp-contract=fast.
template <class T>
void merge_commutes(tsr_dtype type) {
  const size_t rows = 64, d = 17;
  std::vector<T> la(rows), lb(rows), oa(rows * d), ob(rows * d);
  for (size_t r = 0; r < rows; ++r) {
    la[r] = static_cast<T>(4 * tsr_test::uniform(11, r));
    lb[r] = r % 3 == 0 ? la[r] : static_cast<T>(4 * tsr_test::uniform(12, r));  // every third row a tie
  }
  for (size_t i = 0; i < rows * d; ++i) {
    oa[i] = static_cast<T>(tsr_test::uniform(13, i));
    ob[i] = static_cast<T>(tsr_test::uniform(14, i));
  }
  std::vector<T> ab_o = oa, ab_l = la, ba_o = ob, ba_l = lb;
  ASSERT_EQ(tsr_attn_merge(type, rows, d, ab_o.data(), ab_l.data(), ob.data(), lb.data()), TSR_SUCCESS);
  ASSERT_EQ(tsr_attn_merge(type, rows, d, ba_o.data(), ba_l.data(), oa.data(), la.data()), TSR_SUCCESS);
  EXPECT_EQ(0, std::memcmp(ab_o.data(), ba_o.data(), ab_o.size() * sizeof(T))) << "commutative, bitwise";
  EXPECT_EQ(0, std::memcmp(ab_l.data(), ba_l.data(), ab_l.size() * sizeof(T)));
  // And the value: against float64 arithmetic.
  for (size_t r = 0; r < rows; ++r) {
    const double a = la[r], b = lb[r], m = std::max(a, b);
    const double l = m + std::log(std::exp(a - m) + std::exp(b - m));
    EXPECT_NEAR(ab_l[r], l, sizeof(T) == 4 ? 1e-5 : 1e-13);
    for (size_t e = 0; e < d; ++e) {
      const double want = std::exp(a - l) * oa[r * d + e] + std::exp(b - l) * ob[r * d + e];
      EXPECT_NEAR(ab_o[r * d + e], want, sizeof(T) == 4 ? 1e-5 : 1e-13);
    }
  }
}
TEST(AttnMerge, CommutativeBitwiseWithTies) {
  merge_commutes<double>(TSR_FLOAT64);
  merge_commutes<float>(TSR_FLOAT32);
}

// The vectorised float exp of the kernels: within 2 ulp of the correctly
// rounded exp (float64 exp rounded to float) over the softmax range, exactly
// 1 at 0 and exactly 0 for -inf and below the normal range.
TEST(AttnKernel, FastExpAccuracy) {
  double worst = 0;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = -87.3f * static_cast<float>(i) / 2000000.0f;
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    const float got = tsr::attn::fast_exp(x);
    const double ulp = std::nextafter(want, 1e30f) - want;
    worst = std::max(worst, std::fabs(static_cast<double>(got) - want) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(tsr::attn::fast_exp(0.0f), 1.0f);
  EXPECT_EQ(tsr::attn::fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(tsr::attn::fast_exp(-100.0f), 0.0f);
  EXPECT_GT(tsr::attn::fast_exp(-87.0f), 0.0f);
}

// ------------------------------------------------------------------ kernels
// The ring on one process: rank r's queries see key block `src` for every
// src, in ring order; forward state merged online, backward contributions to
// dk/dv summed per owner.
template <class T>
void emulate_ring(tsr_attn_layout layout, int p, const tsr_test::AttnShape& s, const tsr_test::AttnFull& f,
                  double atol, double rtol) {
  const tsr_test::AttnRef ref = tsr_test::attention_reference(s, f);
  Geo<T> g;
  g.B = s.B, g.H = s.H, g.G = s.G, g.d = s.d, g.scale = static_cast<T>(s.scale), g.causal = s.causal;
  const size_t N = s.N, B = s.B, H = s.H, G = s.G, d = s.d;
  // Local shards of every rank.
  struct Shard {
    size_t n = 0;
    std::vector<int64_t> pos;
    Seg segs[2];
    int nsegs = 0;
    std::vector<T> q, k, v, dout, o, m, l, lse, dq, dk, dv;
    std::vector<uint8_t> mask;
  };
  std::vector<Shard> sh(static_cast<size_t>(p));
  auto take = [&](const std::vector<double>& full, size_t heads, const Shard& x) {
    std::vector<T> out(B * heads * x.n * d);
    for (size_t bh = 0; bh < B * heads; ++bh)
      for (size_t i = 0; i < x.n; ++i)
        for (size_t e = 0; e < d; ++e)
          out[(bh * x.n + i) * d + e] = static_cast<T>(full[(bh * N + static_cast<size_t>(x.pos[i])) * d + e]);
    return out;
  };
  for (int r = 0; r < p; ++r) {
    Shard& x = sh[static_cast<size_t>(r)];
    x.n = tsr::attn::shard_len(layout, N, p, r);
    x.pos.resize(x.n);
    tsr::attn::positions(layout, N, p, r, x.pos.data());
    x.nsegs = tsr::attn::segments(layout, N, p, r, 0, x.segs);
    x.q = take(f.q, H, x), x.k = take(f.k, G, x), x.v = take(f.v, G, x), x.dout = take(f.dout, H, x);
    x.o.resize(B * H * x.n * d), x.m.resize(B * H * x.n), x.l.resize(B * H * x.n), x.lse.resize(B * H * x.n);
    x.dq.assign(B * H * x.n * d, 0), x.dk.assign(B * G * x.n * d, 0), x.dv.assign(B * G * x.n * d, 0);
    if (!f.mask.empty()) {
      x.mask.resize(B * x.n);
      for (size_t b = 0; b < B; ++b)
        for (size_t i = 0; i < x.n; ++i) x.mask[b * x.n + i] = f.mask[b * N + static_cast<size_t>(x.pos[i])];
    }
  }
  auto rows = [](const Shard& x) {
    Rows r;
    r.n = x.n, r.pos = x.pos.data(), r.segs = x.segs, r.nsegs = x.nsegs;
    return r;
  };
  std::vector<T> tiles(2 * tsr::attn::kBq * tsr::attn::kBk);
  int pokes = 0;
  const tsr::attn::Poke poke = [&]() { ++pokes; };
  for (int r = 0; r < p; ++r) {
    Shard& x = sh[static_cast<size_t>(r)];
    tsr::attn::fwd_init(g, x.n, x.o.data(), x.m.data(), x.l.data());
    for (int st = 0; st < p; ++st) {
      const Shard& y = sh[static_cast<size_t>(((r - st) % p + p) % p)];
      tsr::attn::fwd_block(g, x.q.data(), rows(x), y.k.data(), y.v.data(), rows(y), y.mask.empty() ? nullptr : y.mask.data(),
                           x.o.data(), x.m.data(), x.l.data(), tiles.data(), poke);
    }
    tsr::attn::fwd_finish(g, x.n, x.o.data(), x.m.data(), x.l.data(), x.lse.data());
  }
  std::vector<T> delta;
  for (int r = 0; r < p; ++r) {
    Shard& x = sh[static_cast<size_t>(r)];
    delta.assign(B * H * x.n, 0);
    tsr::attn::bwd_delta(g, x.n, x.o.data(), x.dout.data(), delta.data());
    for (int st = 0; st < p; ++st) {
      Shard& y = sh[static_cast<size_t>(((r - st) % p + p) % p)];
      tsr::attn::bwd_block(g, x.q.data(), rows(x), y.k.data(), y.v.data(), rows(y),
                           y.mask.empty() ? nullptr : y.mask.data(), x.dout.data(), x.lse.data(), delta.data(),
                           x.dq.data(), y.dk.data(), y.dv.data(), tiles.data(), poke);
    }
  }
  EXPECT_GT(pokes, 0);
  auto check = [&](const char* what, const std::vector<T>& got, const std::vector<double>& full, size_t heads,
                   const Shard& x, size_t row) {
    for (size_t bh = 0; bh < B * heads; ++bh)
      for (size_t i = 0; i < x.n; ++i)
        for (size_t e = 0; e < row; ++e) {
          const double w = full[(bh * N + static_cast<size_t>(x.pos[i])) * row + e];
          const double v = static_cast<double>(got[(bh * x.n + i) * row + e]);
          ASSERT_FALSE(std::isnan(v)) << what;
          if (std::isinf(w)) {
            ASSERT_EQ(v, w) << what;
            continue;
          }
          ASSERT_NEAR(v, w, atol + rtol * std::fabs(w)) << what << " position " << x.pos[i];
        }
  };
  for (const Shard& x : sh) {
    check("o", x.o, ref.o, H, x, d);
    check("lse", x.lse, ref.lse, H, x, 1);
    check("dq", x.dq, ref.dq, H, x, d);
    check("dk", x.dk, ref.dk, G, x, d);
    check("dv", x.dv, ref.dv, G, x, d);
  }
}

tsr_test::AttnFull make(const tsr_test::AttnShape& s, double boost, bool mask, uint64_t seed, bool as_float) {
  tsr_test::AttnFull f;
  auto r = [&](double x) { return as_float ? static_cast<double>(static_cast<float>(x)) : x; };
  for (size_t i = 0; i < s.B * s.H * s.N * s.d; ++i) {
    f.q.push_back(r(boost * tsr_test::uniform(seed, i)));
    f.dout.push_back(r(tsr_test::uniform(seed + 3, i)));
  }
  for (size_t i = 0; i < s.B * s.G * s.N * s.d; ++i) {
    f.k.push_back(r(tsr_test::uniform(seed + 1, i)));
    f.v.push_back(r(tsr_test::uniform(seed + 2, i)));
  }
  if (mask) {
    f.mask.resize(s.B * s.N);
    for (size_t i = 0; i < f.mask.size(); ++i) f.mask[i] = tsr_test::uniform(seed + 4, i) > -0.6 ? 1 : 0;
  }
  return f;
}

TEST(AttnKernel, ManyTilesEveryLayoutFloat64) {
  tsr_test::AttnShape s;
  s.B = 1, s.H = 2, s.G = 1, s.N = 611, s.d = 8, s.scale = 1 / std::sqrt(8.0);
  int seed = 1;
  for (tsr_attn_layout l : kLayouts)
    for (int p : {1, 3})
      for (bool causal : {true, false}) {
        s.causal = causal;
        SCOPED_TRACE(std::to_string(l) + " p=" + std::to_string(p) + (causal ? " causal" : ""));
        emulate_ring<double>(l, p, s, make(s, 1.0, p == 3, static_cast<uint64_t>(++seed), false), 1e-11, 1e-11);
      }
}

TEST(AttnKernel, Float32ExtremeLogits) {
  tsr_test::AttnShape s;
  s.B = 2, s.H = 4, s.G = 2, s.N = 300, s.d = 16, s.scale = 0.25, s.causal = true;
  // |s| up to ~1e3: the running max moves by hundreds between tiles.
  emulate_ring<float>(TSR_ATTN_LAYOUT_ZIGZAG, 2, s, make(s, 1000.0, true, 9, true), 2e-3, 2e-3);
  emulate_ring<double>(TSR_ATTN_LAYOUT_STRIPED, 4, s, make(s, 1000.0, true, 10, false), 1e-9, 1e-10);
}

}  // namespace

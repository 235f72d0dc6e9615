// The pure arithmetic of the distributed GEMM (collectives/gemm_core): block
// partitions against their definitions and ScaLAPACK's numroc, layouts that
// chain between layers, role matching, SUMMA panels, each rank's traffic
// against closed forms (docs/GEMM.md), the lower bound, and the planner on
// the shapes of the reference sheet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gemm_core.hpp"
#include "tessera/tessera.h"

namespace g = tsr::gemm;

namespace {

// ScaLAPACK's numroc, written from its definition.
int64_t numroc(int64_t n, int64_t nb, int iproc, int isrc, int nprocs) {
  const int mydist = (nprocs + iproc - isrc) % nprocs;
  const int64_t nblocks = n / nb;
  int64_t num = (nblocks / nprocs) * nb;
  const int64_t extra = nblocks % nprocs;
  if (mydist < extra) num += nb;
  else if (mydist == extra) num += n % nb;
  return num;
}

g::Layout lay(const g::Dims& dims, int row, int col, int sub, int rb = 0, int cb = 0) {
  return g::normalise(tsr_layout{row, col, sub, rb, cb}, dims);
}

g::Shape shape(int64_t m, int64_t n, int64_t k, bool ta = false, bool tb = false, int64_t w = 8) {
  g::Shape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.ta = ta;
  s.tb = tb;
  s.w = w;
  return s;
}

bool same_layout(const tsr_layout& x, const tsr_layout& y, const g::Dims& d) {
  const g::Layout a = g::normalise(x, d), b = g::normalise(y, d);
  auto eq = [](const g::Split& p, const g::Split& q) {
    if (p.levels != q.levels) return false;
    for (int l = 0; l < p.levels; ++l)
      if (p.dim[l] != q.dim[l]) return false;
    return true;
  };
  return eq(a.rows, b.rows) && eq(a.cols, b.cols);
}

const g::Dims kCorner[] = {{0, 0, 0}};

}  // namespace

TEST(GemmPartition, BalancedBlocksTileTheRange) {
  for (int64_t n : {0, 1, 5, 7, 64, 1000})
    for (int64_t p : {1, 2, 3, 7, 8, 13}) {
      int64_t next = 0, mn = n, mx = 0;
      for (int64_t i = 0; i < p; ++i) {
        const g::Range r = g::balanced(n, p, i);
        EXPECT_EQ(r.off, next) << n << "/" << p << " part " << i;
        next = r.end();
        mn = std::min(mn, r.len);
        mx = std::max(mx, r.len);
        EXPECT_EQ(r.len, n / p + (i < n % p ? 1 : 0));
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(mx - mn, 1);
    }
}

TEST(GemmPartition, BlockCyclicMatchesNumroc) {
  for (int p : {1, 2, 3, 4})
    for (int src = 0; src < p; ++src)
      for (int64_t n : {0, 1, 7, 30, 31})
        for (int64_t nb : {1, 2, 4, 7}) {
          g::Split s;
          if (p > 1) {
            s.levels = 1;
            s.dim[0] = 1;
            s.parts[0] = p;
            s.block = nb;
            s.src = src;
          }
          std::vector<int> owner(static_cast<size_t>(n), -1);
          for (int x = 0; x < p; ++x) {
            const g::Dims c{0, x, 0};
            EXPECT_EQ(g::local_len(s, n, c), numroc(n, nb, x, src, p)) << n << " " << nb << " " << x << " " << src;
            int64_t loc = 0;
            for (const g::Piece& pc : g::pieces(s, n, c)) {
              EXPECT_EQ(pc.loc, loc);
              loc += pc.len;
              for (int64_t i = pc.g; i < pc.g + pc.len; ++i) {
                EXPECT_EQ(owner[static_cast<size_t>(i)], -1);
                owner[static_cast<size_t>(i)] = x;
                // ScaLAPACK's indxg2p: the process of global index i.
                EXPECT_EQ(x, static_cast<int>((src + i / nb) % p));
              }
            }
          }
          for (int64_t i = 0; i < n; ++i) EXPECT_GE(owner[static_cast<size_t>(i)], 0);
        }
}

TEST(GemmLayout, NormalisationDropsTrivialDimensionsAndFoldsSub) {
  const g::Dims d{2, 1, 3};
  const g::Layout a = lay(d, TSR_DIM_I, TSR_DIM_J, TSR_DIM_K);  // J has extent 1
  EXPECT_EQ(a.rows.levels, 1);
  EXPECT_EQ(a.rows.dim[0], 0);
  EXPECT_EQ(a.cols.levels, 1);
  EXPECT_EQ(a.cols.dim[0], 2);
  EXPECT_TRUE(same_layout(tsr_layout{0, -1, 2, 0, 0}, tsr_layout{0, 2, -1, 0, 0}, d));
  EXPECT_FALSE(g::layout_problem(tsr_layout{0, 0, -1, 0, 0}, d).empty());
  EXPECT_FALSE(g::layout_problem(tsr_layout{3, -1, -1, 0, 0}, d).empty());
  EXPECT_FALSE(g::layout_problem(tsr_layout{0, 1, 2, 4, 0}, d).empty());
  EXPECT_TRUE(g::layout_problem(tsr_layout{0, 1, -1, 4, 2}, d).empty());
}

TEST(GemmLayout, OutputsChainIntoTheNextLayer) {
  const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  const g::Dims d{2, 3, 4};
  for (const auto& p : perms) {
    g::Roles r{p[0], p[1], p[2]};
    tsr_layout fwd[3], next[3];
    g::canonical(TSR_GEMM_3D, false, false, r, fwd);
    g::canonical(TSR_GEMM_3D, false, false, g::Roles{r.m, r.k, r.n}, next);
    EXPECT_TRUE(same_layout(fwd[2], next[0], d)) << "3D: Y = XW feeds the next X";
    // Backward of Y = X W: dX = dY W^T takes dY (= Y's layout) and W as is,
    // and returns dX in X's layout; dW = X^T dY returns W's layout.
    tsr_layout dx[3], dw[3];
    g::canonical(TSR_GEMM_3D, false, true, g::Roles{r.m, r.k, r.n}, dx);
    EXPECT_TRUE(same_layout(dx[0], fwd[2], d));
    EXPECT_TRUE(same_layout(dx[1], fwd[1], d));
    EXPECT_TRUE(same_layout(dx[2], fwd[0], d));
    g::canonical(TSR_GEMM_3D, true, false, g::Roles{r.k, r.n, r.m}, dw);
    EXPECT_TRUE(same_layout(dw[0], fwd[0], d));
    EXPECT_TRUE(same_layout(dw[1], fwd[2], d));
    EXPECT_TRUE(same_layout(dw[2], fwd[1], d));
    tsr_layout s[3];
    g::canonical(TSR_GEMM_2P5D, false, false, r, s);
    EXPECT_TRUE(same_layout(s[2], s[0], d)) << "SUMMA: C is the next A";
  }
}

TEST(GemmLayout, CanonicalLayoutsMatchTheirRolesAndOthersDoNot) {
  struct Case {
    tsr_gemm_algo algo;
    g::Dims dims;
    g::Roles roles;
  };
  const Case cases[] = {
      {TSR_GEMM_1D, {4, 1, 1}, {0, -1, -1}}, {TSR_GEMM_1D, {4, 1, 1}, {-1, 0, -1}},
      {TSR_GEMM_1D, {4, 1, 1}, {-1, -1, 0}}, {TSR_GEMM_2D, {2, 3, 1}, {0, 1, -1}},
      {TSR_GEMM_2D, {2, 3, 1}, {1, 0, -1}},  {TSR_GEMM_2P5D, {2, 2, 2}, {0, 1, 2}},
      {TSR_GEMM_3D, {2, 2, 2}, {0, 1, 2}},   {TSR_GEMM_3D, {2, 2, 2}, {2, 0, 1}},
      {TSR_GEMM_3D, {2, 3, 1}, {0, -1, 1}},  {TSR_GEMM_3D, {3, 2, 1}, {-1, 0, 1}},
  };
  for (const Case& c : cases)
    for (int t = 0; t < 4; ++t) {
      const g::Shape s = shape(7, 5, 6, t & 1, t & 2);
      tsr_layout pub[3];
      g::canonical(c.algo, s.ta, s.tb, c.roles, pub);
      g::Roles got;
      std::string why;
      ASSERT_TRUE(g::match(c.algo, c.dims, s, g::normalise(pub[0], c.dims), g::normalise(pub[1], c.dims),
                           g::normalise(pub[2], c.dims), &got, &why))
          << tsr_gemm_algo_name(c.algo) << " " << why;
      EXPECT_EQ(got.m, c.roles.m);
      EXPECT_EQ(got.n, c.roles.n);
      EXPECT_EQ(got.k, c.roles.k);
    }
  // A 3D layout for a 2D grid algorithm: refused, with the layouts it takes.
  const g::Dims d{2, 2, 2};
  tsr_layout pub[3];
  g::canonical(TSR_GEMM_3D, false, false, g::Roles{0, 1, 2}, pub);
  g::Roles got;
  std::string why;
  EXPECT_FALSE(g::match(TSR_GEMM_2D, d, shape(4, 4, 4), g::normalise(pub[0], d), g::normalise(pub[1], d),
                        g::normalise(pub[2], d), &got, &why));
  EXPECT_NE(why.find("tsr_gemm_layouts"), std::string::npos) << why;
  // C with copies along the m dimension is not a layout any algorithm writes.
  const g::Dims d1{4, 1, 1};
  EXPECT_FALSE(g::match(TSR_GEMM_1D, d1, shape(4, 4, 4), lay(d1, 0, -1, -1), lay(d1, -1, -1, -1), lay(d1, -1, -1, -1),
                        &got, &why));
}

TEST(GemmPanels, RefineBothSplitsAndRespectTheWidth) {
  for (int pm : {1, 2, 3})
    for (int pn : {1, 2, 4})
      for (int64_t k : {1, 5, 12, 13})
        for (int64_t width : {0, 1, 2, 5}) {
          const std::vector<g::Panel> ps = g::panels(k, pm, pn, width);
          int64_t next = 0;
          for (const g::Panel& p : ps) {
            EXPECT_EQ(p.k0, next);
            EXPECT_GT(p.w, 0);
            if (width > 0) {
              EXPECT_LE(p.w, width);
            }
            const g::Range a = g::balanced(k, pn, p.a_root), b = g::balanced(k, pm, p.b_root);
            EXPECT_TRUE(p.k0 >= a.off && p.k0 + p.w <= a.end());
            EXPECT_TRUE(p.k0 >= b.off && p.k0 + p.w <= b.end());
            next += p.w;
          }
          EXPECT_EQ(next, k);
        }
}

TEST(GemmTraffic, ThreeDOnACubeIsExactlyTheLowerBound) {
  for (int q : {2, 3, 4}) {
    const int64_t n = 12 * q * q;  // divisible by q^2 (the sub-blocks) and q
    const g::Dims d{q, q, q};
    const g::Shape s = shape(n, n, n);
    tsr_layout pub[3];
    g::canonical(TSR_GEMM_3D, false, false, g::Roles{0, 1, 2}, pub);
    const g::Layout a = g::normalise(pub[0], d), b = g::normalise(pub[1], d), c = g::normalise(pub[2], d);
    const double bound = g::lower_bound_words(n, n, n, q * q * q) * 8;
    for (int r = 0; r < q * q * q; ++r) {
      const g::Dims co{(r / q) % q, r % q, r / (q * q)};
      const g::Cost cost = g::rank_cost(TSR_GEMM_3D, d, g::Roles{0, 1, 2}, s, a, b, c, 0, co);
      // (q-1)/q^3 (mk + kn + mn) elements received, in q-1 messages per phase.
      const uint64_t want = static_cast<uint64_t>(8 * (q - 1) * 3 * n * n / (q * q * q));
      EXPECT_EQ(cost.wire_recv, want);
      EXPECT_EQ(cost.wire_sent, want);
      EXPECT_EQ(cost.msgs_recv, static_cast<uint64_t>(3 * (q - 1)));
      EXPECT_NEAR(static_cast<double>(cost.wire_recv), bound, 1e-9 * bound);
      EXPECT_DOUBLE_EQ(cost.flops, 2.0 * n * n * n / (q * q * q));
    }
  }
}

TEST(GemmTraffic, SummaMatchesTheReferenceFormula) {
  // q x q grid, n = 8192, fp32: 100,663,296 bytes received per rank.
  const int q = 4;
  const int64_t n = 8192;
  const g::Dims d{q, q, 1};
  const g::Shape s = shape(n, n, n, false, false, 4);
  tsr_layout pub[3];
  g::canonical(TSR_GEMM_2D, false, false, g::Roles{0, 1, -1}, pub);
  const g::Layout a = g::normalise(pub[0], d), b = g::normalise(pub[1], d), c = g::normalise(pub[2], d);
  for (int r = 0; r < q * q; ++r) {
    const g::Dims co{r / q, r % q, 0};
    const g::Cost cost = g::rank_cost(TSR_GEMM_2D, d, g::Roles{0, 1, -1}, s, a, b, c, 0, co);
    EXPECT_EQ(cost.payload_recv, 100663296u);
    EXPECT_EQ(cost.wire_recv, 100663296u);
    EXPECT_EQ(cost.calls[static_cast<int>(g::OpKind::bcast)], static_cast<uint64_t>(2 * q));
  }
  // Uneven: received A = w m_i (k - kA_j), B = w n_j (k - kB_i), any panel width.
  const g::Dims u{3, 2, 1};
  const g::Shape su = shape(11, 7, 13);
  g::canonical(TSR_GEMM_2D, false, false, g::Roles{0, 1, -1}, pub);
  const g::Layout ua = g::normalise(pub[0], u), ub = g::normalise(pub[1], u), uc = g::normalise(pub[2], u);
  for (int64_t width : {0, 1, 3})
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) {
        const g::Cost cost = g::rank_cost(TSR_GEMM_2D, u, g::Roles{0, 1, -1}, su, ua, ub, uc, width, g::Dims{i, j, 0});
        const int64_t mi = g::balanced(11, 3, i).len, nj = g::balanced(7, 2, j).len;
        const int64_t kaj = g::balanced(13, 2, j).len, kbi = g::balanced(13, 3, i).len;
        EXPECT_EQ(cost.payload_recv, static_cast<uint64_t>(8 * (mi * (13 - kaj) + nj * (13 - kbi))));
        EXPECT_EQ(cost.payload_sent, static_cast<uint64_t>(8 * (mi * kaj + nj * kbi)));
      }
}

TEST(GemmTraffic, OneDimensionalVariants) {
  const int p = 4;
  const g::Dims d{p, 1, 1};
  const g::Shape s = shape(10, 9, 7);
  const struct {
    g::Roles r;
    int64_t moved;  // elements of the all-gathered or reduced operand
  } cases[] = {{{0, -1, -1}, 7 * 9}, {{-1, 0, -1}, 10 * 7}, {{-1, -1, 0}, 10 * 9}};
  for (const auto& cs : cases) {
    tsr_layout pub[3];
    g::canonical(TSR_GEMM_1D, false, false, cs.r, pub);
    const g::Layout a = g::normalise(pub[0], d), b = g::normalise(pub[1], d), c = g::normalise(pub[2], d);
    uint64_t total_recv = 0;
    for (int x = 0; x < p; ++x) total_recv += g::rank_cost(TSR_GEMM_1D, d, cs.r, s, a, b, c, 0, {x, 0, 0}).wire_recv;
    // Summed over ranks, a ring all-gather or reduce-scatter moves (p-1) x the operand.
    EXPECT_EQ(total_recv, static_cast<uint64_t>(8 * (p - 1) * cs.moved));
  }
}

TEST(GemmBound, CasesAndContinuity) {
  // p <= d1/d2: d2 d3 (1 - 1/p).
  EXPECT_DOUBLE_EQ(g::lower_bound_words(1000, 10, 10, 4), 10.0 * 10 * 0.75);
  EXPECT_EQ(g::lower_bound_words(5, 5, 5, 1), 0.0);
  // Square: 3 (n^3/p)^(2/3) - 3 n^2 / p.
  EXPECT_NEAR(g::lower_bound_words(64, 64, 64, 8), 3.0 * 32 * 32 - 3.0 * 64 * 64 / 8, 1e-9);
  // Continuous at the thresholds d1/d2 = 8 and d1 d2 / d3^2 = 512: the
  // neighbouring case's formula gives the same value there.
  const double d1 = 4096, d2 = 512, d3 = 64;
  auto own = [&](double p) { return (d1 * d2 + d1 * d3 + d2 * d3) / p; };
  auto mid = [&](double p) { return 2 * std::sqrt(d1 * d2 * d3 * d3 / p) + d1 * d2 / p - own(p); };
  auto big = [&](double p) { return 3 * std::pow(d1 * d2 * d3 / p, 2.0 / 3.0) - own(p); };
  EXPECT_NEAR(g::lower_bound_words(4096, 512, 64, 8), d2 * d3 * (1 - 1.0 / 8), 1e-6);
  EXPECT_NEAR(mid(8), d2 * d3 * (1 - 1.0 / 8), 1e-6);
  EXPECT_NEAR(g::lower_bound_words(4096, 512, 64, 9), mid(9), 1e-6);
  EXPECT_NEAR(g::lower_bound_words(4096, 512, 64, 512), mid(512), 1e-6);
  EXPECT_NEAR(big(512), mid(512), 1e-6);
  EXPECT_NEAR(g::lower_bound_words(4096, 512, 64, 513), big(513), 1e-6);
  // The order of m, n, k does not matter.
  EXPECT_DOUBLE_EQ(g::lower_bound_words(64, 4096, 512, 100), g::lower_bound_words(4096, 512, 64, 100));
}

TEST(GemmPlan, RectangularShapeOnSixtyFourRanksIsWithinTenPercentOfTheBound) {
  // The reference sheet's example: 32768 x 8192 x 32768, bf16, 64 ranks:
  // 1D 504 MiB, cube 144 MiB, 8x8x1 112 MiB, bound ~104 MiB.
  const g::Shape s = shape(32768, 32768, 8192, false, false, 2);
  const g::Machine mc;
  g::Candidate best;
  ASSERT_TRUE(g::choose(s, 64, false, TSR_GEMM_AUTO, 0, mc, 0, nullptr, &best, nullptr));
  const double bound = g::lower_bound_words(32768, 32768, 8192, 64) * 2;
  EXPECT_NEAR(bound / 1048576.0, 104.2, 0.2);
  EXPECT_LE(best.bytes, 1.10 * bound) << best.bytes / bound;
  EXPECT_NEAR(best.bytes / 1048576.0, 112.0, 0.01);
  g::Candidate one, cube;
  ASSERT_TRUE(g::choose(s, 64, false, TSR_GEMM_1D, 0, mc, 0, nullptr, &one, nullptr));
  EXPECT_NEAR(one.bytes / 1048576.0, 504.0, 0.01);
  cube.algo = TSR_GEMM_3D;
  cube.kind = TSR_GRID_3D;
  cube.dims = {4, 4, 4};
  cube.roles = {0, 1, 2};
  g::evaluate(&cube, s, mc);
  EXPECT_NEAR(cube.bytes / 1048576.0, 144.0, 0.01);
}

TEST(GemmPlan, ThreeDOnCubesIsAtTheBound) {
  // The 3D algorithm on q x q x q, square n: the plan's bytes per rank (the
  // busiest of the corner ranks) are the bound itself when q^2 divides n,
  // within 5% otherwise.
  for (int q : {2, 3, 4})
    for (int64_t n : {4096, 4099}) {
      const g::Shape s = shape(n, n, n);
      g::Candidate cube;
      cube.algo = TSR_GEMM_3D;
      cube.kind = TSR_GRID_3D;
      cube.dims = {q, q, q};
      cube.roles = {0, 1, 2};
      g::evaluate(&cube, s, g::Machine());
      const double bound = g::lower_bound_words(n, n, n, q * q * q) * 8;
      EXPECT_LE(cube.bytes, 1.05 * bound) << q << " " << n;
      if (n % (q * q) == 0) {
        EXPECT_NEAR(cube.bytes, bound, 1e-9 * bound) << q;
      }
    }
  // On 64 ranks the planner takes the cube for a square problem.
  tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
  pr.m = pr.n = pr.k = 16384;
  pr.nranks = 64;
  pr.allow_idle = 0;
  tsr_gemm_plan plan;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_SUCCESS) << tsr_last_error(nullptr);
  EXPECT_EQ(plan.options.algo, TSR_GEMM_3D);
  EXPECT_EQ(plan.dims[0], 4);
  EXPECT_EQ(plan.dims[1], 4);
  EXPECT_EQ(plan.dims[2], 4);
  EXPECT_LE(plan.bytes, 1.05 * plan.lower_bound_bytes);
}

TEST(GemmPlan, MemoryBudgetSaysWhatIsMissing) {
  tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
  pr.m = pr.n = pr.k = 2000;
  pr.nranks = 4;
  pr.memory_per_rank = 1e6;  // far less than the 3 x 8 MB operands per rank
  tsr_gemm_plan plan;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_ERR_NO_MEMORY);
  EXPECT_GT(plan.missing_bytes, 0);
  EXPECT_DOUBLE_EQ(plan.missing_bytes, plan.memory_bytes - pr.memory_per_rank);
  EXPECT_NE(std::string(tsr_last_error(nullptr)).find("more"), std::string::npos) << tsr_last_error(nullptr);
  // With room for the operands plus narrow panels only, SUMMA with panels fits.
  pr.memory_per_rank = 8.0 * 3 * 2000 * 2000 / 4 + 8.0 * 2 * 2 * 1000 * 200;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_SUCCESS) << tsr_last_error(nullptr);
  EXPECT_LE(plan.memory_bytes, pr.memory_per_rank);
  EXPECT_EQ(plan.missing_bytes, 0.0);
  // Unlimited: a faster plan that needs more memory.
  pr.memory_per_rank = 0;
  tsr_gemm_plan free_plan;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &free_plan), TSR_SUCCESS);
  EXPECT_LE(free_plan.time, plan.time);
}

TEST(GemmPlan, IdleRanksWhenCheaperAndSaysSo) {
  // 7 ranks, a square problem of tiny compute: 2x2 or 2x3 beats 7x1.
  tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
  pr.m = pr.n = pr.k = 2048;
  pr.nranks = 7;
  pr.machine.gamma = 1e-14;  // computation nearly free: volume decides
  tsr_gemm_plan plan;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.idle_ranks, 7 - plan.nranks);
  EXPECT_GT(plan.idle_ranks, 0);
  char text[2048];
  size_t need = 0;
  ASSERT_EQ(tsr_gemm_plan_format(&plan, text, sizeof text, &need), TSR_SUCCESS);
  EXPECT_NE(std::string(text).find(std::to_string(plan.idle_ranks) + " idle"), std::string::npos) << text;
  pr.allow_idle = 0;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.idle_ranks, 0);
}

TEST(GemmPlan, BadProblemsAreInvalidArguments) {
  tsr_gemm_plan plan;
  EXPECT_EQ(tsr_gemm_plan_create(nullptr, &plan), TSR_ERR_INVALID_ARG);
  tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
  pr.m = pr.n = pr.k = 4;
  EXPECT_EQ(tsr_gemm_plan_create(&pr, nullptr), TSR_ERR_INVALID_ARG);
  tsr_gemm_problem bad = pr;
  bad.magic = 0;
  EXPECT_EQ(tsr_gemm_plan_create(&bad, &plan), TSR_ERR_INVALID_ARG);
  bad = pr;
  bad.nranks = 0;
  EXPECT_EQ(tsr_gemm_plan_create(&bad, &plan), TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::string(tsr_last_error(nullptr)).find("nranks"), std::string::npos);
  bad = pr;
  bad.m = -1;
  EXPECT_EQ(tsr_gemm_plan_create(&bad, &plan), TSR_ERR_INVALID_ARG);
  bad = pr;
  bad.elem_size = 0;
  EXPECT_EQ(tsr_gemm_plan_create(&bad, &plan), TSR_ERR_INVALID_ARG);
  bad = pr;
  bad.algo = static_cast<tsr_gemm_algo>(9);
  EXPECT_EQ(tsr_gemm_plan_create(&bad, &plan), TSR_ERR_INVALID_ARG);
  bad = pr;
  bad.nranks = 2;
  bad.algo = TSR_GEMM_2P5D;
  bad.allow_idle = 0;
  EXPECT_EQ(tsr_gemm_plan_create(&bad, &plan), TSR_ERR_SHAPE);
  EXPECT_NE(std::string(tsr_last_error(nullptr)).find("no 2.5D grid fits 2 ranks"), std::string::npos)
      << tsr_last_error(nullptr);
  double b = 0;
  EXPECT_EQ(tsr_gemm_lower_bound(4, 4, 4, 8, 0, &b), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_gemm_lower_bound(64, 64, 64, 8, 8, &b), TSR_SUCCESS);
  EXPECT_DOUBLE_EQ(b, 8 * g::lower_bound_words(64, 64, 64, 8));
  tsr_layout l[3];
  const int roles[3] = {0, 0, 1};
  EXPECT_EQ(tsr_gemm_layouts(TSR_GEMM_3D, TSR_NOTRANS, TSR_NOTRANS, roles, l), TSR_ERR_INVALID_ARG);
  const int ok[3] = {0, 1, 2};
  EXPECT_EQ(tsr_gemm_layouts(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, ok, l), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_gemm_layouts(TSR_GEMM_3D, static_cast<tsr_trans>(2), TSR_NOTRANS, ok, l), TSR_ERR_INVALID_ARG);
  ASSERT_EQ(tsr_gemm_layouts(TSR_GEMM_3D, TSR_NOTRANS, TSR_NOTRANS, ok, l), TSR_SUCCESS);
  EXPECT_EQ(l[0].row_dim, TSR_DIM_I);
  EXPECT_EQ(l[0].col_dim, TSR_DIM_K);
  EXPECT_EQ(l[0].sub_dim, TSR_DIM_J);
  (void)kCorner;
}

// ------------------------------------------------------- planning by energy
namespace energy_plan {

// A synthetic profile with round figures (pJ per byte / flop, W per rank);
// low = value / 2, high = 2 x value.
const char* kProfile = R"({"format": "tessera-energy-profile/1", "name": "synthetic", "pue": 1.5,
  "levels": {"self": {"pj_per_byte": 1, "low": 0.5, "high": 2},
             "intra_node": {"pj_per_byte": 2, "low": 1, "high": 4},
             "inter_node": {"pj_per_byte": 10, "low": 5, "high": 20}},
  "flop": {"pj_per_flop": 1, "low": 0.5, "high": 2},
  "static": {"watts_per_rank": 1, "low": 0.5, "high": 2}})";

struct Profile {
  tsr_energy_profile h = nullptr;
  Profile() { EXPECT_EQ(tsr_energy_profile_parse(kProfile, &h), TSR_SUCCESS) << tsr_last_error(nullptr); }
  ~Profile() { tsr_energy_profile_destroy(&h); }
};

tsr_gemm_problem problem(tsr_energy_profile prof, int nranks, int rpn, tsr_objective obj) {
  tsr_gemm_problem p = TSR_GEMM_PROBLEM_INIT;
  p.m = p.n = p.k = 100;
  p.elem_size = 8;
  p.nranks = nranks;
  p.allow_idle = 0;
  p.machine = {1e-6, 1e-9, 1e-9};
  p.objective = obj;
  p.ranks_per_node = rpn;
  p.profile = prof;
  return p;
}

std::vector<tsr_gemm_candidate> list(const tsr_gemm_problem& p) {
  size_t n = 0;
  EXPECT_EQ(tsr_gemm_plan_candidates(&p, nullptr, 0, &n), TSR_SUCCESS) << tsr_last_error(nullptr);
  std::vector<tsr_gemm_candidate> v(n);
  EXPECT_EQ(tsr_gemm_plan_candidates(&p, v.data(), v.size(), &n), TSR_SUCCESS);
  return v;
}

}  // namespace energy_plan

// 1D on 2 ranks, one rank per node, m = n = k = 100, doubles, by hand:
//   split m (or n): each rank receives half of B (or A): 100*50*8 = 40000 B
//     across nodes; time = 1e-9*1e6 flops + 1e-9*40000 B + 1e-6 = 1.041e-3 s;
//     J = 1.5 * (2 * 40000 * 10 pJ + 2e6 flops * 1 pJ) + 1.5 * 1 W * 2 * time
//   split k: the reduce-scatter of C: 40000 B received per rank, and one
//     local pass over the 100*100*8 = 80000 B of partial products (self
//     level, and in the time): time = 1e-3 + 1e-9*(40000 + 80000) + 1e-6.
TEST(GemmEnergy, CandidatesMatchHandComputedJoules) {
  energy_plan::Profile prof;
  tsr_gemm_problem p = energy_plan::problem(prof.h, 2, 1, TSR_OBJECTIVE_ENERGY);
  p.algo = TSR_GEMM_1D;
  const std::vector<tsr_gemm_candidate> c = energy_plan::list(p);
  ASSERT_EQ(c.size(), 3u);
  int chosen = 0;
  for (const tsr_gemm_candidate& x : c) {
    const bool ksplit = x.roles[2] == 0;
    const double time = ksplit ? 1e-3 + 1.2e-4 + 1e-6 : 1.041e-3;
    EXPECT_NEAR(x.time, time, 1e-15);
    EXPECT_EQ(x.bytes, 40000.0);
    EXPECT_EQ(x.inter_node_bytes, 80000.0);
    EXPECT_EQ(x.intra_node_bytes, 0.0);
    const double self = ksplit ? 2 * 80000.0 : 0.0;
    auto joules = [&](double f) {  // f: 1 typical, 0.5 low, 2 high
      return 1.5 * f * (80000.0 * 10e-12 + self * 1e-12 + 2e6 * 1e-12) + 1.5 * f * 1.0 * 2 * time;
    };
    EXPECT_NEAR(x.joules, joules(1), 1e-15) << "roles " << x.roles[0] << x.roles[1] << x.roles[2];
    EXPECT_NEAR(x.joules_low, joules(0.5), 1e-15);
    EXPECT_NEAR(x.joules_high, joules(2), 1e-15);
    chosen += x.chosen;
    if (x.chosen) {
      EXPECT_FALSE(ksplit);
    }
  }
  EXPECT_EQ(chosen, 1);
  tsr_gemm_plan plan;
  ASSERT_EQ(tsr_gemm_plan_create(&p, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.objective, TSR_OBJECTIVE_ENERGY);
  EXPECT_NEAR(plan.joules, 1.5 * (80000.0 * 10e-12 + 2e6 * 1e-12) + 1.5 * 2 * 1.041e-3, 1e-15);
  // Split m and split n tie on every criterion: the first considered wins,
  // the same on every call (and so on every rank).
  tsr_gemm_plan again;
  ASSERT_EQ(tsr_gemm_plan_create(&p, &again), TSR_SUCCESS);
  EXPECT_EQ(std::memcmp(plan.roles, again.roles, sizeof plan.roles), 0);
  // Two ranks on one node: the same bytes, within the node.
  p.ranks_per_node = 2;
  for (const tsr_gemm_candidate& x : energy_plan::list(p)) {
    EXPECT_EQ(x.inter_node_bytes, 0.0);
    EXPECT_EQ(x.intra_node_bytes, 80000.0);
  }
}

// Where inter-node bytes cost far more energy than time: 8 ranks on two nodes
// of 4. The time objective takes all 8 ranks; the energy objective keeps the
// multiplication on one node (4 idle ranks), and energy x time lies between
// or with one of them.
TEST(GemmEnergy, TheObjectiveChangesTheChoiceWhereTheProfileSaysItMust) {
  energy_plan::Profile prof;
  tsr_gemm_problem p = energy_plan::problem(prof.h, 8, 4, TSR_OBJECTIVE_TIME);
  p.allow_idle = 1;
  p.m = p.n = p.k = 2048;
  // Inter-node bytes 1000x the intra-node price, no static power: only bytes and flops matter.
  tsr_energy_profile costly = nullptr;
  ASSERT_EQ(tsr_energy_profile_parse(R"({"levels": {"intra_node": {"pj_per_byte": 1}, "inter_node": {"pj_per_byte": 1000}},
                                         "flop": {"pj_per_flop": 1}, "static": {"watts_per_rank": 0}})", &costly),
            TSR_SUCCESS) << tsr_last_error(nullptr);
  p.profile = costly;
  tsr_gemm_plan t, e;
  ASSERT_EQ(tsr_gemm_plan_create(&p, &t), TSR_SUCCESS);
  p.objective = TSR_OBJECTIVE_ENERGY;
  ASSERT_EQ(tsr_gemm_plan_create(&p, &e), TSR_SUCCESS);
  EXPECT_EQ(t.nranks, 8);
  EXPECT_GT(t.inter_node_bytes, 0.0);
  EXPECT_LE(e.nranks, 4);
  EXPECT_EQ(e.inter_node_bytes, 0.0);
  EXPECT_LT(e.joules, t.joules);
  EXPECT_GT(e.time, t.time);
  tsr_energy_profile_destroy(&costly);
}

TEST(GemmEnergy, BadObjectivesAndProfilesAreRefused) {
  energy_plan::Profile prof;
  tsr_gemm_problem p = energy_plan::problem(prof.h, 4, 2, static_cast<tsr_objective>(3));
  tsr_gemm_plan plan;
  EXPECT_EQ(tsr_gemm_plan_create(&p, &plan), TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::string(tsr_last_error(nullptr)).find("'objective'"), std::string::npos) << tsr_last_error(nullptr);
  p.objective = TSR_OBJECTIVE_EDP;
  p.ranks_per_node = -1;
  EXPECT_EQ(tsr_gemm_plan_create(&p, &plan), TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::string(tsr_last_error(nullptr)).find("'ranks_per_node'"), std::string::npos);
  p.ranks_per_node = 2;
  int fake = 0;
  p.profile = reinterpret_cast<tsr_energy_profile>(&fake);
  EXPECT_EQ(tsr_gemm_plan_create(&p, &plan), TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::string(tsr_last_error(nullptr)).find("'profile'"), std::string::npos);
  size_t n = 0;
  EXPECT_EQ(tsr_gemm_plan_candidates(&p, nullptr, 0, &n), TSR_ERR_INVALID_ARG);
  p.profile = prof.h;
  EXPECT_EQ(tsr_gemm_plan_candidates(&p, nullptr, 5, &n), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_gemm_plan_candidates(&p, nullptr, 0, nullptr), TSR_ERR_INVALID_ARG);
  // A problem from a 0.1 header (smaller size) plans by time.
  tsr_gemm_problem old = energy_plan::problem(prof.h, 4, 2, TSR_OBJECTIVE_ENERGY);
  old.size = offsetof(tsr_gemm_problem, objective);
  ASSERT_EQ(tsr_gemm_plan_create(&old, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.objective, TSR_OBJECTIVE_TIME);
  // A malformed static figure is refused with its key.
  tsr_energy_profile bad = nullptr;
  EXPECT_EQ(tsr_energy_profile_parse(R"({"static": {"watts_per_rank": -1}})", &bad), TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::string(tsr_last_error(nullptr)).find("static.watts_per_rank"), std::string::npos)
      << tsr_last_error(nullptr);
}

// Regression tests for the defects of issue 15 (found by trying every public
// function with bad input), through the public C API only. Each test failed
// before its fix: a hang (the watchdog below ends it), a wrong status on some
// rank, a message that did not name the argument, or counted traffic.
//
// A watchdog (alarm) ends the process with SIGALRM if a test hangs, so that a
// call that leaves the ranks blocked fails fast instead of at the CTest
// timeout.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "tsr_test.hpp"

namespace {

using tsr_test::contains;
using tsr_test::world_rank;
using tsr_test::world_size;

// Re-armed at every test start: 30 s per test at most.
class Watchdog : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { alarm(30); }
  void OnTestEnd(const ::testing::TestInfo&) override { alarm(0); }
};
const bool g_watchdog = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog);
  return true;
}();

int last() { return world_size() - 1; }

// ------------------------------------------------------------- defect 1
// A non-finite gradient on one rank of a replicated optimizer skips the step
// on every rank (the header's promise), so that the replicas never diverge.
TEST(Defect1, ReplicatedNonFiniteOnOneRankSkipsEverywhere) {
  tsr_test::Ctx ctx;
  for (tsr_opt_preset preset : {TSR_PRESET_LAMB_APEX, TSR_PRESET_LARS_MLPERF}) {
    const size_t sizes[2] = {40, 9};
    const size_t n = 49;
    tsr_optimizer opt = nullptr;
    ASSERT_EQ(tsr_optimizer_create(ctx, preset, TSR_OPT_REPLICATED, TSR_FLOAT32, 2, sizes, &opt), TSR_SUCCESS)
        << tsr_last_error(ctx);
    std::vector<float> w(n), g(n);
    for (size_t i = 0; i < n; ++i) w[i] = 0.5f + 0.01f * static_cast<float>(i), g[i] = 0.001f * static_cast<float>(i % 7);
    ASSERT_EQ(tsr_optimizer_step(opt, w.data(), g.data(), n), TSR_SUCCESS) << tsr_last_error(ctx);
    const std::vector<float> w1 = w;
    std::vector<float> bad = g;
    if (world_rank() == last()) bad[3] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(tsr_optimizer_step(opt, w.data(), bad.data(), n), TSR_ERR_NUMERIC) << tsr_last_error(ctx);
    EXPECT_EQ(w, w1) << "parameters changed on a skipped step";
    double steps = -1, skipped = -1, last_skipped = -1;
    ASSERT_EQ(tsr_optimizer_query(opt, TSR_OPTQ_STEP, 0, &steps), TSR_SUCCESS);
    ASSERT_EQ(tsr_optimizer_query(opt, TSR_OPTQ_SKIPPED, 0, &skipped), TSR_SUCCESS);
    ASSERT_EQ(tsr_optimizer_query(opt, TSR_OPTQ_LAST_SKIPPED, 0, &last_skipped), TSR_SUCCESS);
    EXPECT_EQ(steps, 1);
    EXPECT_EQ(skipped, 1);
    EXPECT_EQ(last_skipped, 1);
    if (world_rank() != last() && world_size() > 1) {
      EXPECT_TRUE(contains(tsr_last_error(ctx), "rank " + std::to_string(last()) + " failed")) << tsr_last_error(ctx);
    }
    // And the next good step runs everywhere.
    EXPECT_EQ(tsr_optimizer_step(opt, w.data(), g.data(), n), TSR_SUCCESS) << tsr_last_error(ctx);
    ASSERT_EQ(tsr_optimizer_query(opt, TSR_OPTQ_STEP, 0, &steps), TSR_SUCCESS);
    EXPECT_EQ(steps, 2);
    // The replicas are still equal: every rank holds rank 0's parameters.
    std::vector<float> w0 = w;
    MPI_Bcast(w0.data(), static_cast<int>(n), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(0, std::memcmp(w0.data(), w.data(), n * sizeof(float)));
    EXPECT_EQ(tsr_optimizer_destroy(&opt), TSR_SUCCESS);
  }
}

// ------------------------------------------------------------- defect 2
// tsr_ring_create_comm with a NULL (or dead) context on one rank only: every
// rank returns INVALID_ARG; none is left in an all-reduce on comm.
TEST(Defect2, RingCreateCommBadContextOnOneRankFailsEverywhere) {
  tsr_test::Ctx ctx;
  tsr_ring ring = nullptr;
  EXPECT_EQ(tsr_ring_create_comm(world_rank() == last() ? nullptr : ctx.ctx, MPI_COMM_WORLD, &ring),
            TSR_ERR_INVALID_ARG);
  EXPECT_EQ(ring, nullptr);
  if (world_rank() != last()) {
    EXPECT_TRUE(contains(tsr_last_error(ctx), "rank " + std::to_string(last()) + " failed")) << tsr_last_error(ctx);
  } else {
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "'ctx'")) << tsr_last_error(nullptr);
  }
  // NULL output on one rank only.
  EXPECT_EQ(tsr_ring_create_comm(ctx, MPI_COMM_WORLD, world_rank() == 0 ? nullptr : &ring), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(ring, nullptr);
  // The communicator still works for the caller's own collectives afterwards.
  int one = 1, sum = 0;
  ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(sum, world_size());
  ASSERT_EQ(tsr_ring_create_comm(ctx, MPI_COMM_WORLD, &ring), TSR_SUCCESS) << tsr_last_error(ctx);
  EXPECT_EQ(tsr_ring_destroy(&ring), TSR_SUCCESS);
}

// ------------------------------------------------------------- defect 4
// Sizes whose byte counts overflow size_t fail with INVALID_ARG naming the
// sizes, before anything is read or written (they crashed).
TEST(Defect4, OverflowingSizesInTheLocalAttentionHelpers) {
  std::vector<char> buf(64), out(64);
  const size_t huge = SIZE_MAX / 4;
  for (tsr_attn_layout l : {TSR_ATTN_LAYOUT_CONTIGUOUS, TSR_ATTN_LAYOUT_ZIGZAG, TSR_ATTN_LAYOUT_STRIPED}) {
    EXPECT_EQ(tsr_attn_shard_extract(l, 8, 2, 0, buf.data(), out.data(), huge, 8), TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "overflows")) << tsr_last_error(nullptr);
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "'outer'")) << tsr_last_error(nullptr);
    EXPECT_EQ(tsr_attn_shard_insert(l, 8, 2, 1, buf.data(), out.data(), huge, 8), TSR_ERR_INVALID_ARG);
    EXPECT_EQ(tsr_attn_shard_extract(l, 8, 2, 0, buf.data(), out.data(), 1, SIZE_MAX / 2), TSR_ERR_INVALID_ARG);
    EXPECT_EQ(tsr_attn_permute(l, 8, 2, 0, buf.data(), out.data(), huge, 8), TSR_ERR_INVALID_ARG);
    EXPECT_EQ(tsr_attn_permute(l, 8, 2, 1, buf.data(), out.data(), 2, SIZE_MAX / 8), TSR_ERR_INVALID_ARG);
  }
  std::vector<double> o(8), lse(8);
  EXPECT_EQ(tsr_attn_merge(TSR_FLOAT64, huge, 8, o.data(), lse.data(), o.data(), lse.data()), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'rows'")) << tsr_last_error(nullptr);
  EXPECT_EQ(tsr_attn_merge(TSR_FLOAT32, 3, SIZE_MAX / 2, o.data(), lse.data(), o.data(), lse.data()),
            TSR_ERR_INVALID_ARG);
  // Zero-sized factors are fine whatever the others.
  EXPECT_EQ(tsr_attn_permute(TSR_ATTN_LAYOUT_ZIGZAG, 8, 2, 0, nullptr, nullptr, 0, SIZE_MAX), TSR_SUCCESS);
}

// The same class in the matrix helpers: a leading dimension whose span
// overflows size_t fails before the overlap test reads it.
TEST(Defect4, OverflowingLeadingDimensionOfScatter) {
  tsr_test::Ctx ctx;
  tsr_grid grid = nullptr;
  const int dims[3] = {world_size(), 1, 1};
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_1D, dims, &grid), TSR_SUCCESS) << tsr_last_error(ctx);
  const tsr_layout lay = {TSR_DIM_I, TSR_DIM_NONE, TSR_DIM_NONE, 0, 0};
  tsr_matrix m = nullptr;
  ASSERT_EQ(tsr_matrix_create(grid, 8, 4, TSR_FLOAT64, &lay, 0, &m), TSR_SUCCESS) << tsr_last_error(ctx);
  std::vector<double> global(32, 1.0), local(32, 0.0);
  EXPECT_EQ(tsr_matrix_scatter(m, 0, global.data(), INT64_MAX / 2, local.data()), TSR_ERR_INVALID_ARG);
  if (world_rank() == 0) {
    EXPECT_TRUE(contains(tsr_last_error(ctx), "'ldg'")) << tsr_last_error(ctx);
  }
  EXPECT_EQ(tsr_matrix_destroy(&m), TSR_SUCCESS);
  EXPECT_EQ(tsr_grid_destroy(&grid), TSR_SUCCESS);
}


// ------------------------------------------------------------- defect 5
// Context settings that differ across ranks would give different node maps:
// every rank fails, naming the setting.
TEST(Defect5, ContextSettingsDifferingAcrossRanks) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = world_rank() == last() ? 1 : 2;
  tsr_context ctx = nullptr;
  EXPECT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "argument 'config->ranks_per_node' differs across"))
      << tsr_last_error(nullptr);
  if (ctx != nullptr) tsr_context_destroy(&ctx);
}

// ------------------------------------------------------------- defect 6
// A report never counts its own traffic: right after a reset, the report's
// counters of this rank are the ledger's (all zero), control traffic too.
TEST(Defect6, ReportsDoNotCountTheirOwnTraffic) {
  tsr_test::Ctx ctx;
  ASSERT_EQ(tsr_counters_reset(ctx), TSR_SUCCESS);
  tsr_report rep = nullptr;
  ASSERT_EQ(tsr_report_create(ctx, 0, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  tsr_counters mine;
  ASSERT_EQ(tsr_report_rank_counters(rep, 0, world_rank(), &mine), TSR_SUCCESS);
  EXPECT_TRUE(tsr_test::same(tsr_test::zero(), mine));
  EXPECT_EQ(mine.control.bytes, 0u);
  EXPECT_EQ(tsr_report_destroy(&rep), TSR_SUCCESS);
  // The energy report: no control traffic line (it prints one when > 0).
  ASSERT_EQ(tsr_counters_reset(ctx), TSR_SUCCESS);
  tsr_energy_report er = nullptr;
  ASSERT_EQ(tsr_energy_report_create(ctx, nullptr, 0, &er), TSR_SUCCESS) << tsr_last_error(ctx);
  size_t need = 0;
  ASSERT_EQ(tsr_energy_report_format(er, TSR_OUTPUT_TABLE, nullptr, 0, &need), TSR_SUCCESS) << tsr_last_error(ctx);
  std::string text(need + 1, '\0');
  ASSERT_EQ(tsr_energy_report_format(er, TSR_OUTPUT_TABLE, &text[0], text.size(), &need), TSR_SUCCESS);
  EXPECT_FALSE(contains(text.c_str(), "control traffic")) << text;
  EXPECT_EQ(tsr_energy_report_destroy(&er), TSR_SUCCESS);
}

// ------------------------------------------------------------- defect 7
// Messages name the argument that differs across ranks, and a count beyond
// what a buffer can hold (PTRDIFF_MAX bytes) on one rank is UNSUPPORTED naming 'count' (and the rank
// elsewhere). Before issue 15's large counts this was any count above INT_MAX.
TEST(Defect7, DifferingArgumentsAreNamed) {
  tsr_test::Ctx ctx;
  tsr_grid grid = nullptr;
  const int dims[3] = {world_size(), 1, 1};
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_1D, dims, &grid), TSR_SUCCESS) << tsr_last_error(ctx);
  std::vector<double> a(8, 1.0), b(8 * world_size(), 0.0);
  if (world_size() > 1) {
    const size_t count = world_rank() == last() ? 3 : 4;
    EXPECT_EQ(tsr_allreduce(grid, TSR_AXIS_ALL, a.data(), b.data(), count, TSR_FLOAT64, TSR_SUM), TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'count' differs across")) << tsr_last_error(ctx);
    EXPECT_TRUE(contains(tsr_last_error(ctx), "from 3 to 4")) << tsr_last_error(ctx);
    EXPECT_EQ(tsr_bcast(grid, TSR_AXIS_ALL, a.data(), 4, TSR_FLOAT64, world_rank() == 0 ? 1 : 0), TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'root' differs across")) << tsr_last_error(ctx);
    EXPECT_EQ(tsr_allgather(grid, TSR_AXIS_ALL, a.data(), 2, b.data(), world_rank() == 0 ? TSR_FLOAT64 : TSR_INT64),
              TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'type' differs across")) << tsr_last_error(ctx);
    EXPECT_EQ(tsr_energy_start(ctx, nullptr), TSR_SUCCESS);
    EXPECT_EQ(tsr_energy_stop(ctx), TSR_SUCCESS);
  }
  // count beyond PTRDIFF_MAX bytes on one rank: UNSUPPORTED everywhere, the message names 'count' and the rank.
  const size_t big = static_cast<size_t>(PTRDIFF_MAX) / sizeof(double) + 1;
  EXPECT_EQ(tsr_allreduce(grid, TSR_AXIS_ALL, a.data(), b.data(), world_rank() == last() ? big : 4, TSR_FLOAT64,
                          TSR_SUM),
            TSR_ERR_UNSUPPORTED);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'count' = " + std::to_string(big))) << tsr_last_error(ctx);
  if (world_rank() != last()) {
    EXPECT_TRUE(contains(tsr_last_error(ctx), "rank " + std::to_string(last()) + " failed")) << tsr_last_error(ctx);
  }
  EXPECT_EQ(tsr_grid_destroy(&grid), TSR_SUCCESS);
}

TEST(Defect7, RingExchangeAndAttentionNameTheArgument) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  tsr_test::Ctx ctx;
  tsr_ring ring = nullptr;
  ASSERT_EQ(tsr_ring_create_comm(ctx, MPI_COMM_WORLD, &ring), TSR_SUCCESS) << tsr_last_error(ctx);
  std::vector<float> x(4, 1.f);
  tsr_ring_buffer bufs[2] = {{x.data(), 2, TSR_FLOAT32, TSR_RING_CIRCULATE}, {x.data() + 2, 2, TSR_FLOAT32, TSR_RING_CIRCULATE}};
  auto fn = [](const tsr_ring_step*, void*) -> tsr_status { return TSR_SUCCESS; };
  EXPECT_EQ(tsr_ring_exchange(ring, bufs, world_rank() == last() ? 1 : 2, fn, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'nbuffers' differs across")) << tsr_last_error(ctx);
  EXPECT_EQ(tsr_ring_destroy(&ring), TSR_SUCCESS);
}

TEST(Defect7, MatricesScatterAndGemmNameTheArgument) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  tsr_test::Ctx ctx;
  tsr_grid grid = nullptr;
  const int dims[3] = {world_size(), 1, 1};
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_1D, dims, &grid), TSR_SUCCESS) << tsr_last_error(ctx);
  const tsr_layout lay = {TSR_DIM_I, TSR_DIM_NONE, TSR_DIM_NONE, 0, 0};
  tsr_matrix m = nullptr;
  EXPECT_EQ(tsr_matrix_create(grid, 8, world_rank() == last() ? 5 : 4, TSR_FLOAT64, &lay, 0, &m), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'n' differs across")) << tsr_last_error(ctx);
  ASSERT_EQ(tsr_matrix_create(grid, 8, 4, TSR_FLOAT64, &lay, 0, &m), TSR_SUCCESS) << tsr_last_error(ctx);
  std::vector<double> global(32, 1.0), local(32, 0.0);
  EXPECT_EQ(tsr_matrix_scatter(m, world_rank() == 0 ? 1 : 0, global.data(), 8, local.data()), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'root' differs across")) << tsr_last_error(ctx);
  tsr_matrix sq = nullptr;
  ASSERT_EQ(tsr_matrix_create(grid, 8, 8, TSR_FLOAT64, &lay, 0, &sq), TSR_SUCCESS) << tsr_last_error(ctx);
  std::vector<double> x(64, 1.0), y(64, 1.0), z(64, 0.0);
  EXPECT_EQ(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, world_rank() == 0 ? 1.0 : 2.0, sq, x.data(), sq,
                     y.data(), 0.0, sq, z.data()),
            TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'alpha' differs across")) << tsr_last_error(ctx);
  EXPECT_EQ(tsr_matrix_destroy(&sq), TSR_SUCCESS);
  EXPECT_EQ(tsr_matrix_destroy(&m), TSR_SUCCESS);
  EXPECT_EQ(tsr_grid_destroy(&grid), TSR_SUCCESS);
}

TEST(Defect7, SmallerOnes) {
  tsr_test::Ctx ctx;
  // Profiles: a number out of range names its key; a directory is IO.
  tsr_energy_profile prof = nullptr;
  EXPECT_EQ(tsr_energy_profile_parse("{\"format\": \"tessera-energy-profile/1\", \"name\": \"x\", \"pue\": {\"value\": "
                                     "1e999}}",
                                     &prof),
            TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "key 'pue.value'")) << tsr_last_error(nullptr);
  EXPECT_FALSE(contains(tsr_last_error(nullptr), "json.exception")) << tsr_last_error(nullptr);
  EXPECT_EQ(tsr_energy_profile_load("/", &prof), TSR_ERR_IO);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'/'")) << tsr_last_error(nullptr);
  EXPECT_EQ(prof, nullptr);
  // Plans and bounds.
  tsr_gemm_problem pb = TSR_GEMM_PROBLEM_INIT;
  pb.m = pb.n = pb.k = 64;
  pb.nranks = 4;
  pb.elem_size = SIZE_MAX;
  tsr_gemm_plan plan;
  EXPECT_EQ(tsr_gemm_plan_create(&pb, &plan), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'elem_size'")) << tsr_last_error(nullptr);
  EXPECT_EQ(tsr_gemm_plan_create(nullptr, &plan), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "argument 'problem' is NULL")) << tsr_last_error(nullptr);
  double bytes = 0;
  EXPECT_EQ(tsr_gemm_lower_bound(64, 64, 64, 0, 4, &bytes), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'elem_size'")) << tsr_last_error(nullptr);
  // Matrices: NULL outputs, header names, types of a redistribution.
  tsr_grid grid = nullptr;
  const int dims[3] = {world_size(), 1, 1};
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_1D, dims, &grid), TSR_SUCCESS) << tsr_last_error(ctx);
  const tsr_layout lay = {TSR_DIM_I, TSR_DIM_NONE, TSR_DIM_NONE, 0, 0};
  tsr_matrix m = nullptr, f = nullptr;
  ASSERT_EQ(tsr_matrix_create(grid, 8, 4, TSR_FLOAT64, &lay, 0, &m), TSR_SUCCESS) << tsr_last_error(ctx);
  ASSERT_EQ(tsr_matrix_create(grid, 8, 4, TSR_FLOAT32, &lay, 0, &f), TSR_SUCCESS) << tsr_last_error(ctx);
  int64_t r = 0, c = 0, ld = 0;
  EXPECT_EQ(tsr_matrix_local_size(m, nullptr, &c, &ld), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "'rows'")) << tsr_last_error(ctx);
  EXPECT_EQ(tsr_matrix_local_size(m, &r, &c, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_matrix_global_index(m, 0, 0, nullptr, &c), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "'global_row'")) << tsr_last_error(ctx);
  std::vector<double> s(32, 0.0), d(32, 0.0);
  EXPECT_EQ(tsr_matrix_redistribute(m, s.data(), f, d.data()), TSR_ERR_INVALID_ARG);
  // Destroying with live dependents: STATE, and nothing destroyed.
  EXPECT_EQ(tsr_grid_destroy(&grid), TSR_ERR_STATE);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "matrix descriptor(s)")) << tsr_last_error(ctx);
  EXPECT_NE(grid, nullptr);
  EXPECT_EQ(tsr_matrix_destroy(&m), TSR_SUCCESS);
  EXPECT_EQ(tsr_matrix_destroy(&f), TSR_SUCCESS);
  EXPECT_EQ(tsr_grid_destroy(&grid), TSR_SUCCESS);
}

TEST(Defect7, ContextsRefuseToDieWithLiveReportsOrOptimizers) {
  tsr_context ctx = nullptr;
  ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS);
  tsr_report rep = nullptr;
  ASSERT_EQ(tsr_report_create(ctx, 0, &rep), TSR_SUCCESS);
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_ERR_STATE);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "report(s)")) << tsr_last_error(ctx);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(tsr_report_destroy(&rep), TSR_SUCCESS);
  tsr_energy_report er = nullptr;
  ASSERT_EQ(tsr_energy_report_create(ctx, nullptr, 0, &er), TSR_SUCCESS);
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_ERR_STATE);
  EXPECT_EQ(tsr_energy_report_destroy(&er), TSR_SUCCESS);
  const size_t sizes[1] = {4};
  tsr_optimizer opt = nullptr;
  ASSERT_EQ(tsr_optimizer_create(ctx, TSR_PRESET_LAMB_APEX, TSR_OPT_REPLICATED, TSR_FLOAT32, 1, sizes, &opt),
            TSR_SUCCESS);
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_ERR_STATE);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "optimizer(s)")) << tsr_last_error(ctx);
  EXPECT_EQ(tsr_optimizer_destroy(&opt), TSR_SUCCESS);
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
  EXPECT_EQ(ctx, nullptr);
}

}  // namespace

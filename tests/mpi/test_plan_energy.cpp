// Planning by energy against the ledger (public API): the plans chosen by
// time, energy and energy x time are executed on simulated nodes, and the
// bytes the energy report measures within and across nodes equal the
// plan's model exactly (the planner and the transport share the wire model
// and the node map), as do the link joules on a synthetic profile. The
// choice is the same on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/tessera.h"
#include "tsr_test.hpp"

namespace {

const char* kProfile = R"({"name": "synthetic", "levels": {"intra_node": {"pj_per_byte": 2}, "inter_node": {"pj_per_byte": 10}},
                           "flop": {"pj_per_flop": 1}, "static": {"watts_per_rank": 0.5}})";

void* alloc(tsr_matrix m) {
  int64_t r = 0, c = 0, ld = 1;
  tsr_matrix_local_size(m, &r, &c, &ld);
  return std::calloc(r > 0 && c > 0 ? static_cast<size_t>(ld * (c - 1) + r) : 1, sizeof(double));
}

TEST(PlanEnergy, ModelledBytesByLevelEqualTheMeasuredOnes) {
  const int p = tsr_test::world_size();
  const int rpn = p >= 4 ? p / 2 : 1;
  tsr_context ctx = nullptr;
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = rpn;
  ASSERT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_SUCCESS);
  tsr_energy_profile prof = nullptr;
  ASSERT_EQ(tsr_energy_profile_parse(kProfile, &prof), TSR_SUCCESS) << tsr_last_error(nullptr);
  const tsr_objective objectives[3] = {TSR_OBJECTIVE_TIME, TSR_OBJECTIVE_ENERGY, TSR_OBJECTIVE_EDP};
  const char* regions[3] = {"time", "energy", "edp"};
  tsr_gemm_plan plans[3];
  for (int o = 0; o < 3; ++o) {
    tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
    pr.m = 96;
    pr.n = 80;
    pr.k = 112;
    pr.nranks = p;
    pr.ranks_per_node = rpn;
    pr.profile = prof;
    pr.objective = objectives[o];
    ASSERT_EQ(tsr_gemm_plan_create(&pr, &plans[o]), TSR_SUCCESS) << tsr_last_error(nullptr);
    // The same plan on every rank.
    int mine[4] = {plans[o].options.algo, plans[o].dims[0], plans[o].dims[1], plans[o].dims[2]}, lo[4], hi[4];
    MPI_Allreduce(mine, lo, 4, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine, hi, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(lo, hi, sizeof lo), 0);
    tsr_grid grid = nullptr;
    ASSERT_EQ(tsr_grid_create(ctx, plans[o].grid_kind, plans[o].dims, &grid), TSR_SUCCESS) << tsr_last_error(ctx);
    tsr_matrix A = nullptr, B = nullptr, C = nullptr;
    ASSERT_EQ(tsr_matrix_create(grid, 96, 112, TSR_FLOAT64, &plans[o].layouts[0], 0, &A), TSR_SUCCESS);
    ASSERT_EQ(tsr_matrix_create(grid, 112, 80, TSR_FLOAT64, &plans[o].layouts[1], 0, &B), TSR_SUCCESS);
    ASSERT_EQ(tsr_matrix_create(grid, 96, 80, TSR_FLOAT64, &plans[o].layouts[2], 0, &C), TSR_SUCCESS);
    void *a = alloc(A), *b = alloc(B), *c = alloc(C);
    ASSERT_EQ(tsr_region_begin(ctx, regions[o]), TSR_SUCCESS);
    ASSERT_EQ(tsr_gemm_execute(&plans[o], 1.0, A, a, B, b, 0.0, C, c), TSR_SUCCESS) << tsr_last_error(ctx);
    ASSERT_EQ(tsr_region_end(ctx, regions[o]), TSR_SUCCESS);
    std::free(a);
    std::free(b);
    std::free(c);
    tsr_matrix_destroy(&A);
    tsr_matrix_destroy(&B);
    tsr_matrix_destroy(&C);
    tsr_grid_destroy(&grid);
  }
  tsr_energy_report rep = nullptr;
  ASSERT_EQ(tsr_energy_report_create(ctx, prof, 0, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  for (int o = 0; o < 3; ++o) {
    int region = -1;
    tsr_energy_estimate sum;
    ASSERT_EQ(tsr_energy_report_find(rep, regions[o], &region), TSR_SUCCESS);
    ASSERT_EQ(tsr_energy_report_stat(rep, region, TSR_STAT_SUM, &sum), TSR_SUCCESS);
    EXPECT_EQ(static_cast<double>(sum.moved_bytes[TSR_LEVEL_INTRA_NODE]), plans[o].intra_node_bytes) << regions[o];
    EXPECT_EQ(static_cast<double>(sum.moved_bytes[TSR_LEVEL_INTER_NODE]), plans[o].inter_node_bytes) << regions[o];
    // Link joules: the report's and the plan's (the plan adds flops and static power).
    const double links = plans[o].intra_node_bytes * 2e-12 + plans[o].inter_node_bytes * 10e-12;
    EXPECT_NEAR(sum.joules[TSR_LEVEL_INTRA_NODE] + sum.joules[TSR_LEVEL_INTER_NODE], links, 1e-9 * links + 1e-18);
  }
  // Energy never costs more joules than time's plan, nor time's more seconds.
  EXPECT_LE(plans[1].joules, plans[0].joules);
  EXPECT_LE(plans[0].time, plans[1].time);
  EXPECT_LE(plans[2].joules * plans[2].time, plans[0].joules * plans[0].time);
  tsr_energy_report_destroy(&rep);
  tsr_energy_profile_destroy(&prof);
  tsr_context_destroy(&ctx);
}

}  // namespace

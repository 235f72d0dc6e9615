// Planning by energy against the ledger (public API): the plans chosen by
// time, energy and energy x time are executed on simulated nodes, and the
// bytes the energy report measures within and across nodes equal the
// plan's model exactly (the planner and the transport share the wire model
// and the node map), as do the link joules on a synthetic profile. The
// choice is the same on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "tessera/tessera.h"
#include "tessera/tessera.hpp"
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

// ------------------------------------------------- the context's objective
alignas(64) unsigned char g_not_a_profile[4096] = {};

// Every rank agrees on the same planner choice (min == max over ranks).
void same_everywhere(const std::vector<int>& mine) {
  std::vector<int> lo(mine.size()), hi(mine.size());
  MPI_Allreduce(mine.data(), lo.data(), static_cast<int>(mine.size()), MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(mine.data(), hi.data(), static_cast<int>(mine.size()), MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi) << "the plan differs across ranks";
}
// The status is the same on every rank.
void every_rank(tsr_status got, tsr_status want, const char* text) {
  EXPECT_EQ(got, want) << tsr_last_error(nullptr);
  if (got == want && want != TSR_SUCCESS) {
    EXPECT_TRUE(tsr_test::contains(tsr_last_error(nullptr), text)) << tsr_last_error(nullptr);
  }
  int bad = got != want, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(any, 0);
}

TEST(ContextObjective, DefaultSetGetAndUsedByTheGemmPlanner) {
  const int p = tsr_test::world_size();
  tsr_context ctx = nullptr;
  ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS);
  tsr_objective o = TSR_OBJECTIVE_EDP;
  ASSERT_EQ(tsr_context_get_objective(ctx, &o), TSR_SUCCESS);
  EXPECT_EQ(o, TSR_OBJECTIVE_TIME);
  // The GEMM worked case of docs/ENERGY.md: 2048^3 on 8 ranks, 2 nodes.
  tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
  EXPECT_EQ(pr.objective, TSR_OBJECTIVE_DEFAULT);
  pr.m = pr.n = pr.k = 2048;
  pr.nranks = 8;
  pr.ranks_per_node = 4;
  tsr_gemm_plan by_default, by_time, by_energy, with_ctx;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &by_default), TSR_SUCCESS);  // no context: time
  EXPECT_EQ(by_default.objective, TSR_OBJECTIVE_TIME);
  pr.objective = TSR_OBJECTIVE_TIME;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &by_time), TSR_SUCCESS);
  pr.objective = TSR_OBJECTIVE_ENERGY;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &by_energy), TSR_SUCCESS);
  EXPECT_NE(by_time.nranks, by_energy.nranks);  // 8 against 4 ranks
  EXPECT_EQ(by_default.nranks, by_time.nranks);
  every_rank(tsr_context_set_objective(ctx, TSR_OBJECTIVE_ENERGY), TSR_SUCCESS, "");
  ASSERT_EQ(tsr_context_get_objective(ctx, &o), TSR_SUCCESS);
  EXPECT_EQ(o, TSR_OBJECTIVE_ENERGY);
  pr.objective = TSR_OBJECTIVE_DEFAULT;
  pr.context = ctx;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &with_ctx), TSR_SUCCESS);
  EXPECT_EQ(with_ctx.objective, TSR_OBJECTIVE_ENERGY);
  EXPECT_EQ(with_ctx.nranks, by_energy.nranks);
  EXPECT_EQ(with_ctx.joules, by_energy.joules);
  pr.objective = TSR_OBJECTIVE_TIME;  // an explicit objective wins over the context's
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &with_ctx), TSR_SUCCESS);
  EXPECT_EQ(with_ctx.nranks, by_time.nranks);
  // An 0.2 problem (without 'context') still plans, by its objective.
  pr.size = offsetof(tsr_gemm_problem, context);
  pr.objective = TSR_OBJECTIVE_ENERGY;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &with_ctx), TSR_SUCCESS);
  EXPECT_EQ(with_ctx.nranks, by_energy.nranks);
  pr.size = sizeof pr;
  // Bad values and values differing across ranks: refused on every rank.
  every_rank(tsr_context_set_objective(ctx, static_cast<tsr_objective>(7)), TSR_ERR_INVALID_ARG, "'objective'");
  every_rank(tsr_context_set_objective(ctx, TSR_OBJECTIVE_DEFAULT), TSR_ERR_INVALID_ARG, "'objective'");
  if (p > 1) {
    const tsr_objective mine = tsr_test::world_rank() == p - 1 ? TSR_OBJECTIVE_EDP : TSR_OBJECTIVE_TIME;
    every_rank(tsr_context_set_objective(ctx, mine), TSR_ERR_INVALID_ARG, "'objective'");
  }
  ASSERT_EQ(tsr_context_get_objective(ctx, &o), TSR_SUCCESS);
  EXPECT_EQ(o, TSR_OBJECTIVE_ENERGY);  // unchanged by the refused calls
  pr.objective = static_cast<tsr_objective>(5);
  every_rank(tsr_gemm_plan_create(&pr, &with_ctx), TSR_ERR_INVALID_ARG, "'objective'");
  tsr_context_destroy(&ctx);
  // The C++ wrapper.
  tessera::context cx(MPI_COMM_WORLD);
  cx.set_objective(TSR_OBJECTIVE_EDP);
  EXPECT_EQ(cx.objective(), TSR_OBJECTIVE_EDP);
}

// ---------------------------------------------------------------- attention
// Synthetic profile for hand computation: self 1, intra 1, inter 100 pJ/B,
// 1 pJ/flop, no static power (a profile without "static" gets 4 W per rank).
const char* kAttnProfile = R"({"name": "attn", "levels": {"self": {"pj_per_byte": 1}, "intra_node": {"pj_per_byte": 1},
                               "inter_node": {"pj_per_byte": 100}}, "flop": {"pj_per_flop": 1}, "static": {"watts_per_rank": 0}})";

tsr_attn_problem attn_problem(tsr_energy_profile prof) {
  tsr_attn_problem a = TSR_ATTN_PROBLEM_INIT;
  a.seq_len = 16;
  a.batch = 1;
  a.heads = 8;
  a.kv_heads = 4;
  a.dim = 8;
  a.type = TSR_FLOAT64;
  a.backward = 0;
  a.nranks = 4;
  a.ranks_per_node = 2;
  a.machine.alpha = 1e-6;
  a.machine.beta = 1e-9;
  a.machine.gamma = 1e-10;
  a.profile = prof;
  return a;
}

const tsr_attn_candidate* find(const std::vector<tsr_attn_candidate>& all, tsr_attn_variant v, tsr_attn_layout l) {
  for (const tsr_attn_candidate& c : all)
    if (c.variant == v && c.layout == l) return &c;
  return nullptr;
}

TEST(AttentionPlan, HandComputedFiguresAndTheObjectiveChangesTheChoice) {
  tsr_energy_profile prof = nullptr;
  ASSERT_EQ(tsr_energy_profile_parse(kAttnProfile, &prof), TSR_SUCCESS) << tsr_last_error(nullptr);
  tsr_attn_problem a = attn_problem(prof);
  size_t count = 0;
  ASSERT_EQ(tsr_attn_plan_candidates(&a, nullptr, 0, &count), TSR_SUCCESS) << tsr_last_error(nullptr);
  ASSERT_EQ(count, 9u);  // 3 variants x 3 layouts (4 divides 8 and 4 heads)
  std::vector<tsr_attn_candidate> all(count);
  ASSERT_EQ(tsr_attn_plan_candidates(&a, all.data(), all.size(), &count), TSR_SUCCESS);
  // N = 16 on 4 ranks: 4 tokens each; one K (or V) block 1*4*4*8*8 = 1024 B.
  // Ring forward: each rank receives the 3 other ranks' K and V from r-1 =
  // 6144 B; ranks 0 and 2 receive across the two nodes.
  const tsr_attn_candidate* ring = find(all, TSR_ATTN_RING, TSR_ATTN_LAYOUT_CONTIGUOUS);
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->bytes, 6144.0);
  EXPECT_EQ(ring->intra_node_bytes, 12288.0);
  EXPECT_EQ(ring->inter_node_bytes, 12288.0);
  EXPECT_EQ(ring->flops, 65536.0);  // 4 B H d x (4 x 16 pairs) x 4 ranks
  EXPECT_EQ(ring->self_bytes, 0.0);
  // Time: a step of compute 1e-10 x 16384 / 4 = 4.096e-7 s; a hop 2 x 1e-6 + 1e-9 x 2048.
  EXPECT_NEAR(ring->time, 4.096e-7 + 3 * 4.048e-6, 1e-18);
  // Joules: 12288 x 1 + 12288 x 100 + 65536 x 1 pJ.
  EXPECT_NEAR(ring->joules, (12288.0 + 1228800.0 + 65536.0) * 1e-12, 1e-12 * ring->joules);
  // Two-pass: the same bytes, the same time (two passes of half the work, one
  // message per hop), plus its score rows at the self level: 4 x 8 B x 8 x 4 x 16 per rank.
  const tsr_attn_candidate* two = find(all, TSR_ATTN_RING_TWO_PASS, TSR_ATTN_LAYOUT_CONTIGUOUS);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->intra_node_bytes, 12288.0);
  EXPECT_EQ(two->inter_node_bytes, 12288.0);
  EXPECT_EQ(two->self_bytes, 65536.0);
  EXPECT_NEAR(two->time, 2 * (2.048e-7 + 3 * 2.024e-6), 1e-18);
  EXPECT_NEAR(two->joules, ring->joules + 65536e-12, 1e-12 * two->joules);
  // All-to-all: per peer (8 + 2x4)/4 x 4 x 8 = 128 elements in, 8/4 x 4 x 9 = 72 out:
  // 3 x (1024 + 576) = 4800 B per rank, 2 of 3 peers on the other node.
  const tsr_attn_candidate* a2a = find(all, TSR_ATTN_ALLTOALL, TSR_ATTN_LAYOUT_CONTIGUOUS);
  ASSERT_NE(a2a, nullptr);
  EXPECT_EQ(a2a->bytes, 4800.0);
  EXPECT_EQ(a2a->intra_node_bytes, 6400.0);
  EXPECT_EQ(a2a->inter_node_bytes, 12800.0);
  EXPECT_EQ(a2a->flops, 65536.0);
  EXPECT_NEAR(a2a->time, (3e-6 + 3072e-9) + (3e-6 + 1728e-9) + 16384e-10, 1e-18);
  EXPECT_NEAR(a2a->joules, (6400.0 + 1280000.0 + 65536.0) * 1e-12, 1e-12 * a2a->joules);
  // The all-to-all is faster, the ring costs fewer joules (fewer inter-node bytes).
  const tsr_objective objs[3] = {TSR_OBJECTIVE_TIME, TSR_OBJECTIVE_ENERGY, TSR_OBJECTIVE_EDP};
  const tsr_attn_variant want[3] = {TSR_ATTN_ALLTOALL, TSR_ATTN_RING, TSR_ATTN_RING};
  for (int o = 0; o < 3; ++o) {
    a.objective = objs[o];
    tsr_attn_plan plan;
    ASSERT_EQ(tsr_attn_plan_create(&a, &plan), TSR_SUCCESS) << tsr_last_error(nullptr);
    EXPECT_EQ(plan.config.variant, want[o]) << o;
    // Non-causal: the layouts tie exactly; the first (contiguous) wins.
    EXPECT_EQ(plan.config.layout, TSR_ATTN_LAYOUT_CONTIGUOUS);
    EXPECT_EQ(plan.objective, objs[o]);
    same_everywhere({plan.config.variant, plan.config.layout});
  }
  // Without the all-to-all (kv_heads 2: 4 does not divide it), ring and
  // two-pass tie in time and bytes; the tie goes to the first considered, the ring.
  a.kv_heads = 2;
  a.objective = TSR_OBJECTIVE_TIME;
  tsr_attn_plan plan;
  ASSERT_EQ(tsr_attn_plan_create(&a, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.config.variant, TSR_ATTN_RING);
  ASSERT_EQ(tsr_attn_plan_candidates(&a, nullptr, 0, &count), TSR_SUCCESS);
  EXPECT_EQ(count, 6u);
  // Causal: contiguous leaves the last rank most of the work; zigzag balances it.
  a.causal = 1;
  ASSERT_EQ(tsr_attn_plan_create(&a, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.config.variant, TSR_ATTN_RING);
  EXPECT_EQ(plan.config.layout, TSR_ATTN_LAYOUT_ZIGZAG);
  // Forward and backward: the ring's backward adds K, V again and the dK, dV sums.
  a.causal = 0;
  a.kv_heads = 4;
  a.backward = 1;
  all.resize(9);
  ASSERT_EQ(tsr_attn_plan_candidates(&a, all.data(), all.size(), &count), TSR_SUCCESS);
  EXPECT_EQ(find(all, TSR_ATTN_RING, TSR_ATTN_LAYOUT_STRIPED)->bytes, 3 * 6144.0);
  // A memory limit: a candidate fits when its workspace (tsr_attn_workspace's,
  // the busiest rank's) is within it.
  const double limit = find(all, TSR_ATTN_RING_TWO_PASS, TSR_ATTN_LAYOUT_CONTIGUOUS)->memory_bytes - 1;
  a.memory_per_rank = limit;
  ASSERT_EQ(tsr_attn_plan_candidates(&a, all.data(), all.size(), &count), TSR_SUCCESS);
  EXPECT_FALSE(find(all, TSR_ATTN_RING_TWO_PASS, TSR_ATTN_LAYOUT_CONTIGUOUS)->fits);
  for (const tsr_attn_candidate& c : all) EXPECT_EQ(c.fits, c.memory_bytes <= limit ? 1 : 0);
  size_t ws = 0;
  tsr_attn_config wc = TSR_ATTN_CONFIG_INIT;
  wc.seq_len = 16;
  wc.type = TSR_FLOAT64;
  wc.variant = TSR_ATTN_RING_TWO_PASS;
  ASSERT_EQ(tsr_attn_workspace(&wc, 4, 0, 1, 8, 4, 8, 0, 1, &ws), TSR_SUCCESS);
  EXPECT_EQ(static_cast<double>(ws), limit + 1);
  a.memory_per_rank = 1;
  EXPECT_EQ(tsr_attn_plan_create(&a, &plan), TSR_ERR_NO_MEMORY);
  EXPECT_GT(plan.missing_bytes, 0);
  // Bad objectives and profiles, refused (the same on every rank: every rank plans).
  a.memory_per_rank = 0;
  a.objective = static_cast<tsr_objective>(3);
  every_rank(tsr_attn_plan_create(&a, &plan), TSR_ERR_INVALID_ARG, "'objective'");
  a.objective = TSR_OBJECTIVE_ENERGY;
  tsr_energy_profile_destroy(&prof);
  a.profile = reinterpret_cast<tsr_energy_profile>(g_not_a_profile);  // zeros: no profile's magic
  every_rank(tsr_attn_plan_create(&a, &plan), TSR_ERR_INVALID_ARG, "'profile'");
  a.profile = nullptr;
  a.variant = TSR_ATTN_ALLTOALL;
  a.nranks = 3;
  every_rank(tsr_attn_plan_create(&a, &plan), TSR_ERR_SHAPE, "'variant'");
  // The C++ wrapper.
  a.variant = -1;
  a.nranks = 4;
  const tsr_attn_plan pp = tessera::plan_attention(a);
  EXPECT_EQ(pp.objective, TSR_OBJECTIVE_ENERGY);
  EXPECT_EQ(tessera::attention_candidates(a).size(), 9u);
}

// The planner's bytes by level equal what the ledger measures when each
// variant runs forward and backward on simulated nodes.
TEST(AttentionPlan, ModelledBytesByLevelEqualTheMeasuredOnes) {
  const int p = tsr_test::world_size();
  const int rpn = p >= 4 ? p / 2 : 1;
  tsr_context ctx = nullptr;
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = rpn;
  ASSERT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_SUCCESS);
  tsr_ring ring = nullptr;
  ASSERT_EQ(tsr_ring_create_comm(ctx, MPI_COMM_WORLD, &ring), TSR_SUCCESS);
  tsr_attn_problem a = TSR_ATTN_PROBLEM_INIT;
  a.seq_len = 37;  // uneven shards
  a.batch = 2;
  a.heads = 8;
  a.kv_heads = 8;
  a.dim = 4;
  a.causal = 1;
  a.has_key_mask = 1;
  a.type = TSR_FLOAT64;
  a.nranks = p;
  a.ranks_per_node = rpn;
  std::vector<tsr_attn_candidate> all(9);
  size_t count = 0;
  ASSERT_EQ(tsr_attn_plan_candidates(&a, all.data(), all.size(), &count), TSR_SUCCESS) << tsr_last_error(nullptr);
  const char* names[3] = {"ring", "two_pass", "alltoall"};
  const int r = tsr_test::world_rank();
  for (int v = 0; v < 3; ++v) {
    const tsr_attn_layout lay = TSR_ATTN_LAYOUT_ZIGZAG;
    tsr_attn_config c = TSR_ATTN_CONFIG_INIT;
    c.variant = static_cast<tsr_attn_variant>(v);
    c.layout = lay;
    c.causal = 1;
    c.seq_len = a.seq_len;
    c.type = TSR_FLOAT64;
    size_t n = 0;
    ASSERT_EQ(tsr_attn_shard_len(lay, a.seq_len, p, r, &n), TSR_SUCCESS);
    const size_t qs = a.batch * a.heads * n * a.dim, ks = a.batch * a.kv_heads * n * a.dim;
    std::vector<double> q(qs + 1, 0.5), k(ks + 1, 0.25), vv(ks + 1, 1.0), out(qs + 1), lse(a.batch * a.heads * n + 1);
    std::vector<double> dout(qs + 1, 1.0), dq(qs + 1), dk(ks + 1), dv(ks + 1);
    std::vector<unsigned char> mask(a.batch * n + 1, 1);
    tsr_attn_tensor tq{q.data(), a.batch, a.heads, n, a.dim}, tk{k.data(), a.batch, a.kv_heads, n, a.dim};
    tsr_attn_tensor tv{vv.data(), a.batch, a.kv_heads, n, a.dim}, to{out.data(), a.batch, a.heads, n, a.dim};
    tsr_attn_tensor tl{lse.data(), a.batch, a.heads, n, 1}, tm{mask.data(), a.batch, 1, n, 1};
    tsr_attn_tensor tdo{dout.data(), a.batch, a.heads, n, a.dim}, tdq{dq.data(), a.batch, a.heads, n, a.dim};
    tsr_attn_tensor tdk{dk.data(), a.batch, a.kv_heads, n, a.dim}, tdv{dv.data(), a.batch, a.kv_heads, n, a.dim};
    ASSERT_EQ(tsr_region_begin(ctx, names[v]), TSR_SUCCESS);
    ASSERT_EQ(tsr_attn_forward(ring, &c, &tq, &tk, &tv, &tm, &to, &tl), TSR_SUCCESS) << tsr_last_error(ctx);
    ASSERT_EQ(tsr_attn_backward(ring, &c, &tq, &tk, &tv, &tm, &to, &tl, &tdo, &tdq, &tdk, &tdv), TSR_SUCCESS)
        << tsr_last_error(ctx);
    ASSERT_EQ(tsr_region_end(ctx, names[v]), TSR_SUCCESS);
  }
  tsr_energy_report rep = nullptr;
  ASSERT_EQ(tsr_energy_report_create(ctx, nullptr, 0, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  for (int v = 0; v < 3; ++v) {
    const tsr_attn_candidate* cd = find(all, static_cast<tsr_attn_variant>(v), TSR_ATTN_LAYOUT_ZIGZAG);
    ASSERT_NE(cd, nullptr) << names[v];
    int region = -1;
    tsr_energy_estimate sum;
    ASSERT_EQ(tsr_energy_report_find(rep, names[v], &region), TSR_SUCCESS);
    ASSERT_EQ(tsr_energy_report_stat(rep, region, TSR_STAT_SUM, &sum), TSR_SUCCESS);
    EXPECT_EQ(static_cast<double>(sum.moved_bytes[TSR_LEVEL_INTRA_NODE]), cd->intra_node_bytes) << names[v];
    EXPECT_EQ(static_cast<double>(sum.moved_bytes[TSR_LEVEL_INTER_NODE]), cd->inter_node_bytes) << names[v];
  }
  tsr_energy_report_destroy(&rep);
  tsr_ring_destroy(&ring);
  tsr_context_destroy(&ctx);
}

// ---------------------------------------------------------------- optimizer
TEST(OptimizerPlan, HandComputedFiguresMemoryLimitAndObjective) {
  const char* prof_json = R"({"name": "opt", "levels": {"self": {"pj_per_byte": 1}, "intra_node": {"pj_per_byte": 2},
                              "inter_node": {"pj_per_byte": 10}}, "static": {"watts_per_rank": 0}})";
  tsr_energy_profile prof = nullptr;
  ASSERT_EQ(tsr_energy_profile_parse(prof_json, &prof), TSR_SUCCESS) << tsr_last_error(nullptr);
  tsr_opt_problem o = TSR_OPT_PROBLEM_INIT;
  o.n = 3 * 16384;
  o.ngroups = 2;
  o.nranks = 4;
  o.ranks_per_node = 2;
  o.bucket_bytes = 65536;  // 16384 floats: 3 buckets
  o.machine.alpha = 1e-6;
  o.machine.beta = 1e-9;
  o.machine.gamma = 1e-10;  // s per byte of kernel traffic
  o.profile = prof;
  tsr_opt_plan plan;
  ASSERT_EQ(tsr_optimizer_plan(&o, &plan), TSR_SUCCESS) << tsr_last_error(nullptr);
  const tsr_opt_candidate& dp = plan.candidates[0];
  const tsr_opt_candidate& sh = plan.candidates[1];
  EXPECT_EQ(dp.dist, TSR_OPT_DATA_PARALLEL);
  EXPECT_EQ(sh.dist, TSR_OPT_SHARDED);
  // Data parallel: 3 ring all-reduces of 16384 floats: 4 x 2 x 12288 B from r-1 each.
  EXPECT_EQ(dp.bytes, 3 * 98304.0);
  EXPECT_EQ(dp.messages, 3 * 6.0);
  EXPECT_EQ(dp.intra_node_bytes, 2 * 294912.0);
  EXPECT_EQ(dp.inter_node_bytes, 2 * 294912.0);
  EXPECT_EQ(dp.kernel_bytes, 44.0 * 49152 * 4);
  EXPECT_EQ(dp.state_bytes, 8.0 * 49152);
  // Time: max(comm 18 alpha + 294912 beta, pass A 16 x 49152 x 1e-10) + pass B 28 x 49152 x 1e-10.
  EXPECT_NEAR(dp.time, 18e-6 + 294912e-9 + 28 * 49152e-10, 1e-15);
  EXPECT_NEAR(dp.joules, (44.0 * 49152 * 4 + 2 * 589824.0 + 10 * 589824.0) * 1e-12, 1e-12 * dp.joules);
  // Sharded: reduce-scatter and all-gather of 36864 floats' worth (4 x 36864 B
  // each from r-1), and the all-reduce of 3L = 6 doubles: 64, 72, 80, 72 B on ranks 0-3.
  EXPECT_EQ(sh.bytes, 2 * 147456.0 + 80);
  EXPECT_EQ(sh.intra_node_bytes, 2 * 294912.0 + 72 + 72);
  EXPECT_EQ(sh.inter_node_bytes, 2 * 294912.0 + 64 + 80);
  EXPECT_EQ(sh.kernel_bytes, 44.0 * 49152);
  EXPECT_EQ(sh.state_bytes, 12.0 * 12288);
  EXPECT_NEAR(sh.time, 12e-6 + (2 * 147456.0 + 80) * 1e-9 + 44 * 12288e-10, 1e-15);
  EXPECT_NEAR(sh.joules, (44.0 * 49152 + 2 * 589968.0 + 10 * 589968.0) * 1e-12, 1e-12 * sh.joules);
  EXPECT_EQ(plan.dist, TSR_OPT_SHARDED);  // faster and cheaper here
  EXPECT_TRUE(sh.chosen);
  same_everywhere({plan.dist});
  // Slow messages (alpha 1e-4) and one bucket make data parallel faster (6
  // messages against 12) while sharded still costs fewer joules (a quarter
  // of the kernel traffic).
  o.machine.alpha = 1e-4;
  o.bucket_bytes = 0;
  o.objective = TSR_OBJECTIVE_TIME;
  ASSERT_EQ(tsr_optimizer_plan(&o, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.dist, TSR_OPT_DATA_PARALLEL);
  EXPECT_LT(plan.candidates[0].time, plan.candidates[1].time);
  o.objective = TSR_OBJECTIVE_ENERGY;
  ASSERT_EQ(tsr_optimizer_plan(&o, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.dist, TSR_OPT_SHARDED);
  // A memory limit only the sharded state fits in: sharded, whatever the objective.
  o.objective = TSR_OBJECTIVE_TIME;
  o.memory_per_rank = 200000;
  ASSERT_EQ(tsr_optimizer_plan(&o, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.dist, TSR_OPT_SHARDED);
  EXPECT_FALSE(plan.candidates[0].fits);
  o.memory_per_rank = 1000;
  EXPECT_EQ(tsr_optimizer_plan(&o, &plan), TSR_ERR_NO_MEMORY);
  EXPECT_EQ(plan.missing_bytes, 12.0 * 12288 - 1000);
  // The context's default objective.
  tsr_context ctx = nullptr;
  ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS);
  ASSERT_EQ(tsr_context_set_objective(ctx, TSR_OBJECTIVE_ENERGY), TSR_SUCCESS);
  o.memory_per_rank = 0;
  o.objective = TSR_OBJECTIVE_DEFAULT;
  o.context = ctx;
  ASSERT_EQ(tsr_optimizer_plan(&o, &plan), TSR_SUCCESS);
  EXPECT_EQ(plan.objective, TSR_OBJECTIVE_ENERGY);
  EXPECT_EQ(plan.dist, TSR_OPT_SHARDED);
  // Bad objective and profile, refused on every rank.
  o.objective = static_cast<tsr_objective>(-2);
  every_rank(tsr_optimizer_plan(&o, &plan), TSR_ERR_INVALID_ARG, "'objective'");
  o.objective = TSR_OBJECTIVE_TIME;
  o.profile = reinterpret_cast<tsr_energy_profile>(g_not_a_profile);
  every_rank(tsr_optimizer_plan(&o, &plan), TSR_ERR_INVALID_ARG, "'profile'");
  o.profile = prof;
  EXPECT_EQ(tessera::plan_optimizer(o).dist, TSR_OPT_DATA_PARALLEL);
  tsr_context_destroy(&ctx);
  tsr_energy_profile_destroy(&prof);
}

}  // namespace

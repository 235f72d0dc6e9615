// Contexts, statuses, messages, versions, regions: every error path of the
// public calls here with its documented code and a message naming the
// argument; the user's communicator is left untouched.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "context.hpp"
#include "tsr_test.hpp"

using namespace tsr_test;

namespace {

TEST(Version, RuntimeMatchesHeaders) {
  int major = -1, minor = -1, patch = -1, code = -1;
  ASSERT_EQ(tsr_get_version(&major, &minor, &patch, &code), TSR_SUCCESS);
  EXPECT_EQ(major, TSR_VERSION_MAJOR);
  EXPECT_EQ(minor, TSR_VERSION_MINOR);
  EXPECT_EQ(patch, TSR_VERSION_PATCH);
  EXPECT_EQ(code, TSR_VERSION_MAJOR * 10000 + TSR_VERSION_MINOR * 100 + TSR_VERSION_PATCH);
  EXPECT_EQ(tsr_get_version(nullptr, nullptr, nullptr, nullptr), TSR_SUCCESS);
  EXPECT_EQ(std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch),
            std::string(TSR_VERSION_STRING));
}

TEST(Status, NamesAndStrings) {
  const char* names[] = {"TSR_SUCCESS",         "TSR_ERR_INVALID_ARG", "TSR_ERR_SHAPE", "TSR_ERR_MPI",
                         "TSR_ERR_NO_MEMORY",   "TSR_ERR_UNSUPPORTED", "TSR_ERR_IO",    "TSR_ERR_NUMERIC",
                         "TSR_ERR_STATE",       "TSR_ERR_INTERNAL"};
  for (int s = 0; s <= TSR_ERR_INTERNAL; ++s) {
    EXPECT_STREQ(tsr_status_name(static_cast<tsr_status>(s)), names[s]);
    EXPECT_GT(std::string(tsr_status_string(static_cast<tsr_status>(s))).size(), 3u);
  }
  EXPECT_STREQ(tsr_status_name(static_cast<tsr_status>(77)), "TSR_ERR_UNKNOWN");
  EXPECT_STREQ(tsr_status_string(static_cast<tsr_status>(77)), "unknown status");
  EXPECT_EQ(tsr_dtype_size(TSR_BYTE), 1u);
  EXPECT_EQ(tsr_dtype_size(TSR_INT32), 4u);
  EXPECT_EQ(tsr_dtype_size(TSR_INT64), 8u);
  EXPECT_EQ(tsr_dtype_size(TSR_FLOAT32), 4u);
  EXPECT_EQ(tsr_dtype_size(TSR_FLOAT64), 8u);
  EXPECT_EQ(tsr_dtype_size(TSR_BFLOAT16), 2u);
  EXPECT_EQ(tsr_dtype_size(static_cast<tsr_dtype>(99)), 0u);
}

TEST(Context, DupsAndLeavesTheUserCommunicatorAlone) {
  MPI_Comm user = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &user), MPI_SUCCESS);
  MPI_Errhandler before = MPI_ERRHANDLER_NULL, after = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(user, &before);
  tsr_context ctx = nullptr;
  ASSERT_EQ(tsr_context_create(user, &ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
  MPI_Comm_get_errhandler(user, &after);
  EXPECT_EQ(before, after);  // only the duplicate got MPI_ERRORS_RETURN
  MPI_Errhandler_free(&before);
  MPI_Errhandler_free(&after);
  int cmp = MPI_UNEQUAL;
  MPI_Comm_compare(user, ctx->comm, &cmp);
  EXPECT_EQ(cmp, MPI_CONGRUENT);  // a duplicate, not the same handle
  int rank = -1, size = -1;
  ASSERT_EQ(tsr_context_rank(ctx, &rank), TSR_SUCCESS);
  ASSERT_EQ(tsr_context_size(ctx, &size), TSR_SUCCESS);
  EXPECT_EQ(rank, world_rank());
  EXPECT_EQ(size, world_size());
  // The context does not depend on the user's handle after creation.
  MPI_Comm_free(&user);
  double x = 1, y = 0;
  ASSERT_EQ(tsr::allreduce(*ctx->world, &x, &y, 1, TSR_FLOAT64, TSR_SUM), TSR_SUCCESS);
  EXPECT_EQ(y, world_size());
  // Nothing was left pending on the world communicator either.
  int flag = 1;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  EXPECT_EQ(flag, 0);
  ASSERT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);  // NULL handle: no-op
}

TEST(Context, SimulatedNodes) {
  Ctx ctx(3);
  int node = -1, nnodes = -1;
  ASSERT_EQ(tsr_context_node(ctx, &node, &nnodes), TSR_SUCCESS);
  EXPECT_EQ(node, world_rank() / 3);
  EXPECT_EQ(nnodes, (world_size() + 2) / 3);
  Ctx real;  // one machine: MPI_Comm_split_type finds a single node
  ASSERT_EQ(tsr_context_node(real, &node, &nnodes), TSR_SUCCESS);
  EXPECT_EQ(node, 0);
  EXPECT_EQ(nnodes, 1);
}

TEST(Context, CreateErrors) {
  tsr_context ctx = reinterpret_cast<tsr_context>(0x1);
  EXPECT_EQ(tsr_context_create(MPI_COMM_NULL, &ctx), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "tsr_context_create: argument 'comm'")) << tsr_last_error(nullptr);
  EXPECT_EQ(tsr_context_create(MPI_COMM_WORLD, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'ctx'"));
  tsr_context_config bad = TSR_CONTEXT_CONFIG_INIT;
  bad.magic = 0;
  EXPECT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &bad, &ctx), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "TSR_CONTEXT_CONFIG_INIT"));
  // A bad argument on one rank only: every rank fails, nobody hangs.
  const int last = world_size() - 1;
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = world_rank() == last ? -4 : 1;
  EXPECT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(ctx, nullptr);
  if (world_rank() == last) {
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "'config->ranks_per_node' is -4")) << tsr_last_error(nullptr);
  } else {
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "rank " + std::to_string(last) + " failed")) << tsr_last_error(nullptr);
  }
  // NULL output on one rank only.
  tsr_context* where = world_rank() == last ? nullptr : &ctx;
  EXPECT_EQ(tsr_context_create(MPI_COMM_WORLD, where), TSR_ERR_INVALID_ARG);
  // An intercommunicator is refused (needs two groups: at least 2 ranks).
  if (world_size() >= 2) {
    MPI_Comm half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    const int color = world_rank() % 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, world_rank(), &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color == 0 ? 1 : 0, 17, &inter);
    EXPECT_EQ(tsr_context_create(inter, &ctx), TSR_ERR_UNSUPPORTED);
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "intercommunicator"));
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
}

TEST(Context, QueryAndDestroyErrors) {
  Ctx ctx;
  EXPECT_EQ(tsr_context_rank(ctx, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "tsr_context_rank: argument 'rank' is NULL")) << tsr_last_error(ctx);
  EXPECT_EQ(tsr_context_size(ctx, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "'size'"));
  int n = 0;
  EXPECT_EQ(tsr_context_node(ctx, nullptr, &n), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "'node'"));
  EXPECT_EQ(tsr_context_node(ctx, &n, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "'nnodes'"));
  EXPECT_EQ(tsr_context_rank(nullptr, &n), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "argument 'ctx' is NULL"));
  EXPECT_EQ(tsr_context_size(nullptr, &n), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_context_node(nullptr, &n, &n), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_context_destroy(nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "tsr_context_destroy: argument 'ctx' is NULL"));
  // Destroying with a live grid is refused on every rank.
  const int dims[3] = {world_size(), 1, 1};
  tsr_grid g = nullptr;
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_1D, dims, &g), TSR_SUCCESS);
  tsr_context c = ctx.ctx;
  EXPECT_EQ(tsr_context_destroy(&c), TSR_ERR_STATE);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "grid(s) of this context are still alive"));
  EXPECT_EQ(c, ctx.ctx);
  ASSERT_EQ(tsr_grid_destroy(&g), TSR_SUCCESS);
}

TEST(Context, MessagesArePerThread) {
  Ctx ctx;
  EXPECT_EQ(tsr_context_rank(ctx, nullptr), TSR_ERR_INVALID_ARG);
  const std::string main_msg = tsr_last_error(ctx);
  std::string other_before, other_after;
  std::thread t([&] {
    other_before = tsr_last_error(ctx);
    int n = 0;
    (void)tsr_context_node(ctx, &n, nullptr);  // local calls may come from any thread
    other_after = tsr_last_error(ctx);
  });
  t.join();
  EXPECT_EQ(other_before, "");
  EXPECT_TRUE(contains(other_after.c_str(), "'nnodes'"));
  EXPECT_EQ(std::string(tsr_last_error(ctx)), main_msg);
  // A success does not clear the message; the next failure replaces it.
  int r = 0;
  EXPECT_EQ(tsr_context_rank(ctx, &r), TSR_SUCCESS);
  EXPECT_EQ(std::string(tsr_last_error(ctx)), main_msg);
}

TEST(Regions, ErrorsAndNesting) {
  Ctx ctx;
  EXPECT_EQ(tsr_region_begin(nullptr, "a"), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_region_end(nullptr, "a"), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_region_begin(ctx, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "'name'"));
  EXPECT_EQ(tsr_region_begin(ctx, ""), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "0 characters"));
  EXPECT_EQ(tsr_region_begin(ctx, std::string(64, 'x').c_str()), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "64 characters"));
  EXPECT_EQ(tsr_region_begin(ctx, "a/b"), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "contains '/'"));
  EXPECT_EQ(tsr_region_begin(ctx, "total"), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_region_end(ctx, "a"), TSR_ERR_STATE);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "without a matching tsr_region_begin"));
  ASSERT_EQ(tsr_region_begin(ctx, "fwd"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_begin(ctx, "attn"), TSR_SUCCESS);
  EXPECT_EQ(tsr_region_end(ctx, "fwd"), TSR_ERR_STATE);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "innermost open region \"fwd/attn\""));
  EXPECT_EQ(tsr_counters_reset(ctx), TSR_ERR_STATE);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "still open"));
  ASSERT_EQ(tsr_region_end(ctx, "attn"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "fwd"), TSR_SUCCESS);
  tsr_counters c;
  EXPECT_EQ(tsr_counters_get(ctx, "fwd/attn", &c), TSR_SUCCESS);
  EXPECT_EQ(tsr_counters_get(ctx, "attn", &c), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "\"attn\" names no region"));
  EXPECT_EQ(tsr_counters_get(ctx, nullptr, &c), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_counters_get(ctx, "total", nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_counters_get(nullptr, "total", &c), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_counters_reset(nullptr), TSR_ERR_INVALID_ARG);
  // Reset zeroes everything and forgets closed regions.
  double x = 1;
  ASSERT_EQ(tsr::sendrecv(*ctx.ctx->world, &x, 1, world_rank(), 0, &x, 1, world_rank(), 0, TSR_FLOAT64), TSR_SUCCESS);
  ASSERT_EQ(tsr_counters_reset(ctx), TSR_SUCCESS);
  EXPECT_TRUE(same(zero(), counters(ctx)));
  EXPECT_EQ(tsr_counters_get(ctx, "fwd", &c), TSR_ERR_INVALID_ARG);
}

}  // namespace

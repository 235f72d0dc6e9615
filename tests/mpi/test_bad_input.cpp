// Bad input to every public function (issue 15): NULL and stale handles
// (a handle whose memory holds what a destroyed one holds: magic 0),
// invalid enums, overflowing sizes, and for collective calls the bad argument
// on one rank only and arguments inconsistent across ranks. Every case checks
// its documented status on every rank (one all-reduce per case), that the
// library printed nothing (stdout and stderr are captured around the calls),
// and a watchdog (alarm) turns a hang into a fast failure.
//
// Coverage.EveryHeaderFunctionHasACase (last) parses include/tessera/*.h for
// TSR_API functions and fails naming every one without a case here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "tessera/tsr_config.h"
#include "tsr_test.hpp"

namespace {

using tsr_test::world_rank;
using tsr_test::world_size;

class Watchdog : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { alarm(60); }
  void OnTestEnd(const ::testing::TestInfo&) override { alarm(0); }
};
const bool g_watchdog = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog);
  return true;
}();

std::set<std::string>& covered() {
  static std::set<std::string> s;
  return s;
}
#define COVER(fn) covered().insert(#fn)

bool last() { return world_rank() == world_size() - 1; }

// What a destroyed handle's memory holds (the library zeroes the magic
// before freeing): reading it is defined, unlike a freed handle.
struct Stale {
  alignas(64) unsigned char bytes[4096] = {};
};
Stale g_stale;
template <class H>
H stale() {
  return reinterpret_cast<H>(&g_stale);
}

// Captures fds 1 and 2 while alive; what was written there fails the test.
class Quiet {
 public:
  Quiet() {
    std::fflush(stdout);
    std::fflush(stderr);
    char name[] = "/tmp/tsr_quiet_XXXXXX";
    fd_ = mkstemp(name);
    unlink(name);
    out_ = dup(1);
    err_ = dup(2);
    dup2(fd_, 1);
    dup2(fd_, 2);
  }
  ~Quiet() {
    std::fflush(stdout);
    std::fflush(stderr);
    dup2(out_, 1);
    dup2(err_, 2);
    close(out_);
    close(err_);
    const off_t n = lseek(fd_, 0, SEEK_END);
    std::string text(static_cast<size_t>(n > 0 ? n : 0), '\0');
    if (n > 0 && pread(fd_, &text[0], text.size(), 0) != n) text = "(could not read the captured output)";
    close(fd_);
    EXPECT_TRUE(text.empty()) << "output while calling the library:\n" << text;
  }

 private:
  int fd_ = -1, out_ = -1, err_ = -1;
};

// got == want on this rank, and on every rank (one all-reduce); where text
// is given, the message contains it (on this rank).
void all_(tsr_status got, tsr_status want, const std::string& what, const char* text = nullptr) {
  EXPECT_EQ(got, want) << what << ": " << tsr_last_error(nullptr);
  if (text != nullptr && got == want && got != TSR_SUCCESS) {
    EXPECT_TRUE(tsr_test::contains(tsr_last_error(nullptr), text)) << what << ": " << tsr_last_error(nullptr);
  }
  int bad = got != want ? 1 : 0, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(any, 0) << what << ": another rank got another status";
}
// A local call: only this rank.
void here_(tsr_status got, tsr_status want, const std::string& what, const char* text = nullptr) {
  EXPECT_EQ(got, want) << what << ": " << tsr_last_error(nullptr);
  if (text != nullptr && got == want && got != TSR_SUCCESS) {
    EXPECT_TRUE(tsr_test::contains(tsr_last_error(nullptr), text)) << what << ": " << tsr_last_error(nullptr);
  }
}

// With the caller's line in a failure.
#define all(...)             \
  do {                       \
    SCOPED_TRACE("all");     \
    all_(__VA_ARGS__);       \
  } while (0)
#define here(...)            \
  do {                       \
    SCOPED_TRACE("here");    \
    here_(__VA_ARGS__);      \
  } while (0)

constexpr tsr_status kInv = TSR_ERR_INVALID_ARG;

// The objects the cases call with: a context, a 1D grid over every rank, a
// matrix, a report, a ring, an optimizer.
struct Env {
  tsr_context ctx = nullptr;
  tsr_grid grid = nullptr;
  tsr_matrix mat = nullptr;
  tsr_report rep = nullptr;
  tsr_ring ring = nullptr;
  tsr_optimizer opt = nullptr;
  tsr_layout lay{TSR_DIM_I, TSR_DIM_NONE, TSR_DIM_NONE, 0, 0};
  Env() {
    EXPECT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS);
    const int dims[3] = {world_size(), 1, 1};
    EXPECT_EQ(tsr_grid_create(ctx, TSR_GRID_1D, dims, &grid), TSR_SUCCESS);
    EXPECT_EQ(tsr_matrix_create(grid, 8, 4, TSR_FLOAT64, &lay, 0, &mat), TSR_SUCCESS);
    EXPECT_EQ(tsr_report_create(ctx, 0, &rep), TSR_SUCCESS);
    EXPECT_EQ(tsr_ring_create(grid, TSR_AXIS_ALL, &ring), TSR_SUCCESS);
    const size_t sizes[1] = {16};
    EXPECT_EQ(tsr_optimizer_create(ctx, TSR_PRESET_LAMB_APEX, TSR_OPT_REPLICATED, TSR_FLOAT32, 1, sizes, &opt),
              TSR_SUCCESS);
  }
  ~Env() {
    EXPECT_EQ(tsr_optimizer_destroy(&opt), TSR_SUCCESS);
    EXPECT_EQ(tsr_ring_destroy(&ring), TSR_SUCCESS);
    EXPECT_EQ(tsr_report_destroy(&rep), TSR_SUCCESS);
    EXPECT_EQ(tsr_matrix_destroy(&mat), TSR_SUCCESS);
    EXPECT_EQ(tsr_grid_destroy(&grid), TSR_SUCCESS);
    EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
  }
};

// ---------------------------------------------------------------- tessera.h
TEST(BadInput, StatusVersionAndErrors) {
  Quiet q;
  COVER(tsr_status_name), COVER(tsr_status_string), COVER(tsr_dtype_size), COVER(tsr_get_version);
  COVER(tsr_last_error);
  EXPECT_STREQ(tsr_status_name(static_cast<tsr_status>(999)), "TSR_ERR_UNKNOWN");
  EXPECT_NE(tsr_status_string(static_cast<tsr_status>(-1)), nullptr);
  EXPECT_EQ(tsr_dtype_size(static_cast<tsr_dtype>(77)), 0u);
  here(tsr_get_version(nullptr, nullptr, nullptr, nullptr), TSR_SUCCESS, "tsr_get_version(NULL...): documented");
  EXPECT_NE(tsr_last_error(stale<tsr_context>()), nullptr);
  EXPECT_NE(tsr_last_error(nullptr), nullptr);
}

TEST(BadInput, Contexts) {
  COVER(tsr_context_create), COVER(tsr_context_create_ex), COVER(tsr_context_destroy), COVER(tsr_context_rank);
  COVER(tsr_context_size), COVER(tsr_context_node);
  Quiet q;
  tsr_context c = nullptr;
  all(tsr_context_create(MPI_COMM_WORLD, nullptr), kInv, "create, NULL ctx", "'ctx'");
  all(tsr_context_create(MPI_COMM_NULL, &c), kInv, "create, MPI_COMM_NULL", "'comm'");
  all(tsr_context_create(MPI_COMM_WORLD, last() ? nullptr : &c), kInv, "create, NULL ctx on one rank");
  EXPECT_EQ(c, nullptr);
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.magic = 0;
  all(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &c), kInv, "create_ex, bad magic", "'config'");
  cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = last() ? -1 : 0;
  all(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &c), kInv, "create_ex, negative ranks_per_node on one rank");
  if (world_size() > 1) {
    cfg.ranks_per_node = last() ? 1 : 2;
    all(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &c), kInv, "create_ex, ranks_per_node differs",
        "'config->ranks_per_node' differs");
  }
  cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.max_chunk = last() ? static_cast<size_t>(INT_MAX) + 1 : 0;
  all(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &c), kInv, "create_ex, max_chunk beyond INT_MAX on one rank",
      "'config->max_chunk'");
  if (world_size() > 1) {
    cfg.max_chunk = last() ? 7 : 8;
    all(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &c), kInv, "create_ex, max_chunk differs",
        "'config->max_chunk' differs");
  }
  EXPECT_EQ(c, nullptr);
  here(tsr_context_destroy(nullptr), kInv, "destroy(NULL)");
  tsr_context st = stale<tsr_context>();
  here(tsr_context_destroy(&st), kInv, "destroy(stale)", "'*ctx'");
  int x = 0, y = 0;
  for (tsr_context h : {static_cast<tsr_context>(nullptr), stale<tsr_context>()}) {
    here(tsr_context_rank(h, &x), kInv, "rank(bad)", "'ctx'");
    here(tsr_context_size(h, &x), kInv, "size(bad)", "'ctx'");
    here(tsr_context_node(h, &x, &y), kInv, "node(bad)", "'ctx'");
  }
  Env e;
  here(tsr_context_rank(e.ctx, nullptr), kInv, "rank(NULL)", "'rank'");
  here(tsr_context_size(e.ctx, nullptr), kInv, "size(NULL)", "'size'");
  here(tsr_context_node(e.ctx, nullptr, &y), kInv, "node(NULL)", "'node'");
  here(tsr_context_node(e.ctx, &x, nullptr), kInv, "node(NULL)", "'nnodes'");
  // Live dependents: STATE everywhere, nothing destroyed.
  all(tsr_context_destroy(&e.ctx), TSR_ERR_STATE, "destroy with live grid, report, ring, optimizer");
  EXPECT_NE(e.ctx, nullptr);
}

TEST(BadInput, Grids) {
  COVER(tsr_grid_dims_create), COVER(tsr_grid_create), COVER(tsr_grid_destroy), COVER(tsr_grid_get_kind);
  COVER(tsr_grid_get_dims), COVER(tsr_grid_is_member), COVER(tsr_grid_my_rank), COVER(tsr_grid_my_coords);
  COVER(tsr_grid_coords), COVER(tsr_grid_rank), COVER(tsr_grid_context_rank), COVER(tsr_grid_rank_of_context_rank);
  COVER(tsr_grid_comm), COVER(tsr_grid_rows_within_node), COVER(tsr_grid_axis_info);
  Env e;
  Quiet q;
  int dims[3] = {0, 0, 0}, n = 0;
  here(tsr_grid_dims_create(static_cast<tsr_grid_kind>(42), 4, 0, dims, &n), kInv, "dims_create kind");
  here(tsr_grid_dims_create(TSR_GRID_1D, 0, 0, dims, &n), kInv, "dims_create nranks 0");
  here(tsr_grid_dims_create(TSR_GRID_1D, 4, 0, nullptr, &n), kInv, "dims_create NULL dims", "'dims'");
  tsr_grid g = nullptr;
  const int good[3] = {world_size(), 1, 1}, bad[3] = {world_size() + 1, 1, 1};
  all(tsr_grid_create(nullptr, TSR_GRID_1D, good, &g), kInv, "create NULL ctx");
  all(tsr_grid_create(e.ctx, static_cast<tsr_grid_kind>(42), good, &g), kInv, "create bad kind", "'kind'");
  all(tsr_grid_create(e.ctx, TSR_GRID_1D, nullptr, &g), kInv, "create NULL dims", "'dims'");
  all(tsr_grid_create(e.ctx, TSR_GRID_1D, good, last() ? nullptr : &g), kInv, "create NULL grid on one rank");
  all(tsr_grid_create(e.ctx, TSR_GRID_1D, bad, &g), TSR_ERR_SHAPE, "create too many ranks");
  if (world_size() > 1) {
    const int two[3] = {1, 1, 1};
    all(tsr_grid_create(e.ctx, TSR_GRID_1D, last() ? two : good, &g), kInv, "create dims differ", "differ");
  }
  EXPECT_EQ(g, nullptr);
  here(tsr_grid_destroy(nullptr), kInv, "destroy(NULL)");
  tsr_grid sg = stale<tsr_grid>();
  here(tsr_grid_destroy(&sg), kInv, "destroy(stale)");
  all(tsr_grid_destroy(&e.grid), TSR_ERR_STATE, "destroy with a live matrix", "matrix");
  tsr_grid_kind k;
  int x = 0, y = 0, c3[3] = {0, 0, 0};
  MPI_Comm comm;
  for (tsr_grid h : {static_cast<tsr_grid>(nullptr), stale<tsr_grid>()}) {
    here(tsr_grid_get_kind(h, &k), kInv, "get_kind(bad)", "'grid'");
    here(tsr_grid_get_dims(h, c3), kInv, "get_dims(bad)");
    here(tsr_grid_is_member(h, &x), kInv, "is_member(bad)");
    here(tsr_grid_my_rank(h, &x), kInv, "my_rank(bad)");
    here(tsr_grid_my_coords(h, c3), kInv, "my_coords(bad)");
    here(tsr_grid_coords(h, 0, c3), kInv, "coords(bad)");
    here(tsr_grid_rank(h, c3, &x), kInv, "rank(bad)");
    here(tsr_grid_context_rank(h, 0, &x), kInv, "context_rank(bad)");
    here(tsr_grid_rank_of_context_rank(h, 0, &x), kInv, "rank_of_context_rank(bad)");
    here(tsr_grid_comm(h, TSR_AXIS_ALL, &comm), kInv, "comm(bad)");
    here(tsr_grid_rows_within_node(h, &x, &y), kInv, "rows_within_node(bad)");
    here(tsr_grid_axis_info(h, TSR_AXIS_ALL, &x, &y), kInv, "axis_info(bad)");
  }
  here(tsr_grid_get_kind(e.grid, nullptr), kInv, "get_kind NULL", "'kind'");
  here(tsr_grid_get_dims(e.grid, nullptr), kInv, "get_dims NULL", "'dims'");
  here(tsr_grid_is_member(e.grid, nullptr), kInv, "is_member NULL", "'member'");
  here(tsr_grid_my_rank(e.grid, nullptr), kInv, "my_rank NULL", "'grid_rank'");
  here(tsr_grid_my_coords(e.grid, nullptr), kInv, "my_coords NULL", "'coords'");
  here(tsr_grid_coords(e.grid, world_size(), c3), kInv, "coords out of range", "'grid_rank'");
  here(tsr_grid_coords(e.grid, 0, nullptr), kInv, "coords NULL", "'coords'");
  const int far[3] = {world_size(), 0, 0};
  here(tsr_grid_rank(e.grid, far, &x), kInv, "rank out of range", "'coords[0]'");
  here(tsr_grid_rank(e.grid, nullptr, &x), kInv, "rank NULL coords", "'coords'");
  here(tsr_grid_context_rank(e.grid, -1, &x), kInv, "context_rank -1", "'grid_rank'");
  here(tsr_grid_rank_of_context_rank(e.grid, world_size(), &x), kInv, "rank_of_context_rank out of range",
       "'context_rank'");
  here(tsr_grid_comm(e.grid, static_cast<tsr_grid_axis>(9), &comm), kInv, "comm bad axis", "'axis'");
  here(tsr_grid_comm(e.grid, TSR_AXIS_ALL, nullptr), kInv, "comm NULL", "'comm'");
  here(tsr_grid_rows_within_node(e.grid, nullptr, &y), kInv, "rows_within_node NULL", "'within'");
  here(tsr_grid_axis_info(e.grid, static_cast<tsr_grid_axis>(-1), &x, &y), kInv, "axis_info bad axis", "'axis'");
  here(tsr_grid_axis_info(e.grid, TSR_AXIS_ALL, nullptr, &y), kInv, "axis_info NULL", "'rank'");
}

TEST(BadInput, AccountedCollectives) {
  COVER(tsr_bcast), COVER(tsr_allreduce), COVER(tsr_allgather), COVER(tsr_reduce_scatter), COVER(tsr_alltoall);
  COVER(tsr_shift);
  Env e;
  Quiet q;
  const int p = world_size();
  std::vector<double> a(4 * p, 1.0), b(4 * p, 0.0);
  const auto A = TSR_AXIS_ALL;
  // More bytes than a buffer can hold (any smaller count is moved, split into
  // chunks of max_chunk elements: test_transport's Split tests).
  const size_t big = static_cast<size_t>(PTRDIFF_MAX) / sizeof(double) + 1;
  const tsr_dtype badt = static_cast<tsr_dtype>(99);
  const tsr_op bado = static_cast<tsr_op>(99);
  // NULL and stale grids, bad axis: every rank passes them (no communicator to agree on otherwise).
  for (tsr_grid h : {static_cast<tsr_grid>(nullptr), stale<tsr_grid>()}) {
    all(tsr_bcast(h, A, a.data(), 1, TSR_FLOAT64, 0), kInv, "bcast bad grid", "'grid'");
    all(tsr_allreduce(h, A, a.data(), b.data(), 1, TSR_FLOAT64, TSR_SUM), kInv, "allreduce bad grid");
    all(tsr_allgather(h, A, a.data(), 1, b.data(), TSR_FLOAT64), kInv, "allgather bad grid");
    all(tsr_reduce_scatter(h, A, a.data(), b.data(), 1, TSR_FLOAT64, TSR_SUM), kInv, "reduce_scatter bad grid");
    all(tsr_alltoall(h, A, a.data(), b.data(), 1, TSR_FLOAT64), kInv, "alltoall bad grid");
    all(tsr_shift(h, A, a.data(), b.data(), 1, TSR_FLOAT64, 1), kInv, "shift bad grid");
  }
  all(tsr_bcast(e.grid, static_cast<tsr_grid_axis>(7), a.data(), 1, TSR_FLOAT64, 0), kInv, "bcast bad axis", "'axis'");
  // One bad argument on the last rank only: every rank fails with its status.
  const bool me = last();
  all(tsr_bcast(e.grid, A, me ? nullptr : a.data(), 1, TSR_FLOAT64, 0), kInv, "bcast NULL buf on one rank");
  all(tsr_bcast(e.grid, A, a.data(), 1, me ? badt : TSR_FLOAT64, 0), kInv, "bcast bad type on one rank");
  all(tsr_bcast(e.grid, A, a.data(), 1, TSR_FLOAT64, me ? p : 0), kInv, "bcast bad root on one rank");
  all(tsr_allreduce(e.grid, A, a.data(), me ? nullptr : b.data(), 1, TSR_FLOAT64, TSR_SUM), kInv,
      "allreduce NULL rbuf on one rank");
  all(tsr_allreduce(e.grid, A, a.data(), b.data(), 1, TSR_FLOAT64, me ? bado : TSR_SUM), kInv,
      "allreduce bad op on one rank");
  all(tsr_allreduce(e.grid, A, a.data(), b.data(), me ? big : 1, TSR_FLOAT64, TSR_SUM), TSR_ERR_UNSUPPORTED,
      "allreduce count beyond PTRDIFF_MAX bytes on one rank");
  all(tsr_allreduce(e.grid, A, a.data(), b.data(), me ? TSR_COUNT_INVALID : 1, TSR_FLOAT64, TSR_SUM), TSR_ERR_SHAPE,
      "allreduce TSR_COUNT_INVALID on one rank");
  all(tsr_allgather(e.grid, A, me ? nullptr : a.data(), 1, b.data(), TSR_FLOAT64), kInv, "allgather NULL on one rank");
  all(tsr_reduce_scatter(e.grid, A, a.data(), a.data(), 1, TSR_FLOAT64, TSR_SUM), kInv, "reduce_scatter in place",
      "same buffer");
  all(tsr_alltoall(e.grid, A, a.data(), me ? a.data() : b.data(), 1, TSR_FLOAT64), kInv, "alltoall in place on one rank");
  all(tsr_shift(e.grid, A, a.data(), me ? nullptr : b.data(), 1, TSR_FLOAT64, 1), kInv, "shift NULL on one rank");
  // Inconsistent across ranks: INVALID_ARG everywhere, naming the argument.
  if (p > 1) {
    all(tsr_allreduce(e.grid, A, a.data(), b.data(), me ? 2 : 1, TSR_FLOAT64, TSR_SUM), kInv, "allreduce count differs",
        "'count' differs");
    all(tsr_allreduce(e.grid, A, a.data(), b.data(), 1, TSR_FLOAT64, me ? TSR_MAX : TSR_SUM), kInv,
        "allreduce op differs", "'op' differs");
    all(tsr_shift(e.grid, A, a.data(), b.data(), 1, TSR_FLOAT64, me ? 2 : 1), kInv, "shift differs", "'shift' differs");
    all(tsr_alltoall(e.grid, A, a.data(), b.data(), 1, me ? TSR_INT64 : TSR_FLOAT64), kInv, "alltoall type differs",
        "'type' differs");
  }
  // And the grid still works.
  all(tsr_allreduce(e.grid, A, a.data(), b.data(), 1, TSR_FLOAT64, TSR_SUM), TSR_SUCCESS, "allreduce after failures");
  EXPECT_EQ(b[0], static_cast<double>(p));
}

TEST(BadInput, RegionsCountersReports) {
  COVER(tsr_region_begin), COVER(tsr_region_end), COVER(tsr_counters_get), COVER(tsr_counters_reset);
  COVER(tsr_report_create), COVER(tsr_report_destroy), COVER(tsr_report_region_count), COVER(tsr_report_region_path);
  COVER(tsr_report_rank_counters), COVER(tsr_report_stats), COVER(tsr_report_format);
  Env e;
  Quiet q;
  here(tsr_region_begin(nullptr, "x"), kInv, "begin NULL ctx");
  here(tsr_region_begin(e.ctx, nullptr), kInv, "begin NULL name", "'name'");
  here(tsr_region_begin(e.ctx, "a/b"), kInv, "begin name with '/'", "'name'");
  here(tsr_region_begin(e.ctx, std::string(100, 'x').c_str()), kInv, "begin long name", "'name'");
  here(tsr_region_end(e.ctx, "never-begun"), TSR_ERR_STATE, "end without begin");
  here(tsr_region_end(stale<tsr_context>(), "x"), kInv, "end stale ctx");
  tsr_counters c;
  here(tsr_counters_get(e.ctx, "no/such", &c), kInv, "counters unknown path");
  here(tsr_counters_get(e.ctx, "total", nullptr), kInv, "counters NULL out", "'out'");
  here(tsr_counters_get(nullptr, "total", &c), kInv, "counters NULL ctx");
  ASSERT_EQ(tsr_region_begin(e.ctx, "open"), TSR_SUCCESS);
  here(tsr_counters_reset(e.ctx), TSR_ERR_STATE, "reset with an open region");
  ASSERT_EQ(tsr_region_end(e.ctx, "open"), TSR_SUCCESS);
  here(tsr_counters_reset(stale<tsr_context>()), kInv, "reset stale ctx");
  tsr_report r = nullptr;
  all(tsr_report_create(e.ctx, -1, &r), kInv, "report root -1", "'root'");
  all(tsr_report_create(e.ctx, 0, last() ? nullptr : &r), kInv, "report NULL on one rank");
  all(tsr_report_create(e.ctx, last() ? world_size() : 0, &r), kInv, "report bad root on one rank");
  if (world_size() > 1) all(tsr_report_create(e.ctx, last() ? 1 : 0, &r), kInv, "report root differs", "'root' differs");
  all(tsr_report_create(nullptr, 0, &r), kInv, "report NULL ctx");
  EXPECT_EQ(r, nullptr);
  here(tsr_report_destroy(nullptr), kInv, "report destroy NULL");
  tsr_report sr = stale<tsr_report>();
  here(tsr_report_destroy(&sr), kInv, "report destroy stale");
  int n = 0;
  const char* path = nullptr;
  size_t need = 0;
  for (tsr_report h : {static_cast<tsr_report>(nullptr), stale<tsr_report>()}) {
    here(tsr_report_region_count(h, &n), kInv, "region_count bad", "'report'");
    here(tsr_report_region_path(h, 0, &path), kInv, "region_path bad");
    here(tsr_report_rank_counters(h, 0, 0, &c), kInv, "rank_counters bad");
    here(tsr_report_stats(h, 0, &c, &c, &c), kInv, "stats bad");
    here(tsr_report_format(h, nullptr, 0, &need), kInv, "format bad");
  }
  here(tsr_report_region_count(e.rep, nullptr), kInv, "region_count NULL", "'count'");
  here(tsr_report_region_path(e.rep, 99, &path), kInv, "region_path 99", "'region'");
  here(tsr_report_region_path(e.rep, 0, nullptr), kInv, "region_path NULL", "'path'");
  here(tsr_report_rank_counters(e.rep, -1, 0, &c), kInv, "rank_counters region -1", "'region'");
  here(tsr_report_rank_counters(e.rep, 0, world_size(), &c), kInv, "rank_counters rank out of range", "'rank'");
  here(tsr_report_rank_counters(e.rep, 0, 0, nullptr), kInv, "rank_counters NULL", "'out'");
  here(tsr_report_stats(e.rep, 5000, &c, nullptr, nullptr), kInv, "stats region", "'region'");
  char small[4];
  here(tsr_report_format(e.rep, nullptr, 10, &need), kInv, "format NULL buf with len", "'buf'");
  here(tsr_report_format(e.rep, small, sizeof small, nullptr), TSR_SUCCESS, "format NULL needed (optional)");
}

// ----------------------------------------------------------------- gemm.h
TEST(BadInput, Matrices) {
  COVER(tsr_matrix_create), COVER(tsr_matrix_destroy), COVER(tsr_matrix_local_size), COVER(tsr_matrix_global_index);
  COVER(tsr_matrix_info), COVER(tsr_matrix_scatter), COVER(tsr_matrix_gather), COVER(tsr_matrix_redistribute);
  COVER(tsr_matrix_create_scalapack);
  Env e;
  Quiet q;
  tsr_matrix m = nullptr;
  const bool me = last();
  all(tsr_matrix_create(nullptr, 4, 4, TSR_FLOAT64, &e.lay, 0, &m), kInv, "create NULL grid");
  all(tsr_matrix_create(e.grid, 4, 4, TSR_INT32, &e.lay, 0, &m), kInv, "create int type", "'type'");
  all(tsr_matrix_create(e.grid, 4, 4, TSR_FLOAT64, nullptr, 0, &m), kInv, "create NULL layout", "'layout'");
  all(tsr_matrix_create(e.grid, me ? -1 : 4, 4, TSR_FLOAT64, &e.lay, 0, &m), TSR_ERR_SHAPE, "create m < 0 on one rank");
  all(tsr_matrix_create(e.grid, 4, 4, TSR_FLOAT64, &e.lay, 0, me ? nullptr : &m), kInv, "create NULL out on one rank");
  all(tsr_matrix_create(e.grid, INT64_MAX, INT64_MAX, TSR_FLOAT64, &e.lay, 0, &m), TSR_ERR_UNSUPPORTED,
      "create huge (local block over INT_MAX)");
  if (world_size() > 1)
    all(tsr_matrix_create(e.grid, me ? 5 : 4, 4, TSR_FLOAT64, &e.lay, 0, &m), kInv, "create m differs", "'m' differs");
  EXPECT_EQ(m, nullptr);
  here(tsr_matrix_destroy(nullptr), kInv, "destroy NULL");
  tsr_matrix sm = stale<tsr_matrix>();
  here(tsr_matrix_destroy(&sm), kInv, "destroy stale");
  int64_t r = 0, c = 0, ld = 0;
  tsr_dtype t;
  tsr_layout l;
  tsr_grid g;
  for (tsr_matrix h : {static_cast<tsr_matrix>(nullptr), stale<tsr_matrix>()}) {
    here(tsr_matrix_local_size(h, &r, &c, &ld), kInv, "local_size bad", "'mat'");
    here(tsr_matrix_global_index(h, 0, 0, &r, &c), kInv, "global_index bad", "'mat'");
    here(tsr_matrix_info(h, &r, &c, &t, &l, &g), kInv, "info bad", "'mat'");
  }
  here(tsr_matrix_local_size(e.mat, &r, nullptr, &ld), kInv, "local_size NULL", "'cols'");
  here(tsr_matrix_global_index(e.mat, -1, 0, &r, &c), kInv, "global_index out of block");
  here(tsr_matrix_global_index(e.mat, 0, 0, &r, nullptr), kInv, "global_index NULL", "'global_col'");
  std::vector<double> glob(32, 1.0), loc(32, 0.0);
  all(tsr_matrix_scatter(e.mat, me ? -1 : 0, glob.data(), 8, loc.data()), kInv, "scatter bad root on one rank");
  all(tsr_matrix_scatter(e.mat, 0, glob.data(), 7, loc.data()), kInv, "scatter ldg < m (on the root)");
  all(tsr_matrix_scatter(e.mat, 0, glob.data(), INT64_MAX, loc.data()), kInv, "scatter huge ldg");
  all(tsr_matrix_gather(e.mat, 0, loc.data(), world_rank() == 0 ? nullptr : glob.data(), 8), kInv,
      "gather NULL global on the root");
  all(tsr_matrix_gather(stale<tsr_matrix>(), 0, loc.data(), glob.data(), 8), kInv, "gather stale");
  if (world_size() > 1)
    all(tsr_matrix_gather(e.mat, me ? 1 : 0, loc.data(), glob.data(), 8), kInv, "gather root differs", "'root' differs");
  tsr_matrix f = nullptr;
  ASSERT_EQ(tsr_matrix_create(e.grid, 8, 4, TSR_FLOAT32, &e.lay, 0, &f), TSR_SUCCESS);
  all(tsr_matrix_redistribute(e.mat, loc.data(), f, glob.data()), kInv, "redistribute types differ");
  all(tsr_matrix_redistribute(e.mat, loc.data(), e.mat, loc.data()), kInv, "redistribute overlap", "overlap");
  all(tsr_matrix_redistribute(nullptr, loc.data(), e.mat, glob.data()), kInv, "redistribute NULL src");
  EXPECT_EQ(tsr_matrix_destroy(&f), TSR_SUCCESS);
  // ScaLAPACK descriptors: NULL desc, bad type, NULL ctx.
  const int desc[9] = {1, -1, 4, 4, 2, 2, 0, 0, 4};
  tsr_status st = tsr_matrix_create_scalapack(e.ctx, nullptr, TSR_FLOAT64, &m);
  all(st, st == TSR_ERR_UNSUPPORTED ? TSR_ERR_UNSUPPORTED : kInv, "create_scalapack NULL desc");
  all(tsr_matrix_create_scalapack(nullptr, desc, TSR_FLOAT64, &m), kInv, "create_scalapack NULL ctx");
  all(tsr_matrix_create_scalapack(e.ctx, desc, TSR_FLOAT64, nullptr), kInv, "create_scalapack NULL out", "'mat'");
}

TEST(BadInput, GemmAndPlans) {
  COVER(tsr_gemm_algo_name), COVER(tsr_gemm), COVER(tsr_gemm_workspace_release), COVER(tsr_gemm_ex);
  COVER(tsr_gemm_layouts), COVER(tsr_gemm_machine_measure), COVER(tsr_gemm_plan_create), COVER(tsr_gemm_plan_format);
  COVER(tsr_gemm_execute), COVER(tsr_gemm_report_format), COVER(tsr_gemm_lower_bound);
  COVER(tsr_pdgemm), COVER(tsr_psgemm), COVER(tsr_scalapack_context);
  Env e;
  Quiet q;
  EXPECT_STREQ(tsr_gemm_algo_name(static_cast<tsr_gemm_algo>(77)), "unknown");
  const bool me = last();
  tsr_matrix sq = nullptr;
  ASSERT_EQ(tsr_matrix_create(e.grid, 8, 8, TSR_FLOAT64, &e.lay, 0, &sq), TSR_SUCCESS);
  std::vector<double> x(64, 1.0), y(64, 1.0), z(64, 0.0);
  all(tsr_gemm(static_cast<tsr_gemm_algo>(77), TSR_NOTRANS, TSR_NOTRANS, 1, sq, x.data(), sq, y.data(), 0, sq, z.data()),
      kInv, "gemm bad algo", "'algo'");
  all(tsr_gemm(TSR_GEMM_AUTO, static_cast<tsr_trans>(5), TSR_NOTRANS, 1, sq, x.data(), sq, y.data(), 0, sq, z.data()),
      kInv, "gemm bad transa", "'transa'");
  all(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1, sq, me ? nullptr : x.data(), sq, y.data(), 0, sq, z.data()),
      kInv, "gemm NULL a on one rank");
  all(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1, sq, x.data(), sq, y.data(), 0, sq, x.data()), kInv,
      "gemm C aliases A", "overlaps");
  all(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1, nullptr, x.data(), nullptr, y.data(), 0, nullptr, z.data()),
      kInv, "gemm NULL matrices");
  all(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1, e.mat, x.data(), sq, y.data(), 0, sq, z.data()),
      TSR_ERR_SHAPE, "gemm shapes");
  if (world_size() > 1)
    all(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, me ? 2 : 1, sq, x.data(), sq, y.data(), 0, sq, z.data()), kInv,
        "gemm alpha differs", "'alpha' differs");
  tsr_gemm_options o = TSR_GEMM_OPTIONS_INIT;
  o.magic = 1;
  all(tsr_gemm_ex(&o, TSR_NOTRANS, TSR_NOTRANS, 1, sq, x.data(), sq, y.data(), 0, sq, z.data()), kInv,
      "gemm_ex options not initialised", "'options'");
  o = TSR_GEMM_OPTIONS_INIT;
  o.panel = me ? -1 : 0;
  all(tsr_gemm_ex(&o, TSR_NOTRANS, TSR_NOTRANS, 1, sq, x.data(), sq, y.data(), 0, sq, z.data()), kInv,
      "gemm_ex negative panel on one rank");
  here(tsr_gemm_workspace_release(stale<tsr_context>()), kInv, "workspace_release stale");
  const int roles[3] = {0, 1, 2};
  tsr_layout lays[3];
  here(tsr_gemm_layouts(static_cast<tsr_gemm_algo>(77), TSR_NOTRANS, TSR_NOTRANS, roles, lays), kInv, "layouts algo");
  here(tsr_gemm_layouts(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, nullptr, lays), kInv, "layouts NULL roles", "'roles'");
  here(tsr_gemm_layouts(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, roles, nullptr), kInv, "layouts NULL", "'layouts'");
  all(tsr_gemm_machine_measure(e.ctx, me ? nullptr : reinterpret_cast<tsr_gemm_machine*>(z.data())), kInv,
      "machine_measure NULL on one rank");
  tsr_gemm_problem pb = TSR_GEMM_PROBLEM_INIT;
  tsr_gemm_plan plan;
  pb.m = pb.n = pb.k = 16;
  pb.nranks = world_size();
  here(tsr_gemm_plan_create(nullptr, &plan), kInv, "plan NULL problem", "'problem'");
  here(tsr_gemm_plan_create(&pb, nullptr), kInv, "plan NULL plan", "'plan'");
  pb.elem_size = SIZE_MAX;
  here(tsr_gemm_plan_create(&pb, &plan), kInv, "plan elem_size SIZE_MAX", "'elem_size'");
  pb.elem_size = 8;
  pb.m = -1;
  here(tsr_gemm_plan_create(&pb, &plan), kInv, "plan m < 0");
  pb.m = 16;
  pb.algo = static_cast<tsr_gemm_algo>(42);
  here(tsr_gemm_plan_create(&pb, &plan), kInv, "plan bad algo", "'algo'");
  pb.algo = TSR_GEMM_AUTO;
  ASSERT_EQ(tsr_gemm_plan_create(&pb, &plan), TSR_SUCCESS);
  size_t need = 0;
  here(tsr_gemm_plan_format(nullptr, nullptr, 0, &need), kInv, "plan_format NULL", "'plan'");
  here(tsr_gemm_plan_format(&plan, nullptr, 10, &need), kInv, "plan_format NULL buf");
  all(tsr_gemm_execute(nullptr, 1, sq, x.data(), sq, y.data(), 0, sq, z.data()), kInv, "execute NULL plan");
  double bytes = 0;
  here(tsr_gemm_report_format(nullptr, "total", &plan, 1, nullptr, 0, &need, &bytes), kInv, "report_format NULL");
  here(tsr_gemm_report_format(e.rep, "no-such-region", &plan, 1, nullptr, 0, &need, &bytes), kInv,
       "report_format unknown region");
  here(tsr_gemm_report_format(e.rep, "total", &plan, 0, nullptr, 0, &need, &bytes), kInv, "report_format calls 0");
  here(tsr_gemm_lower_bound(-1, 1, 1, 8, 1, &bytes), kInv, "lower_bound m < 0");
  here(tsr_gemm_lower_bound(1, 1, 1, 0, 1, &bytes), kInv, "lower_bound elem_size 0", "'elem_size'");
  here(tsr_gemm_lower_bound(1, 1, 1, 8, 0, &bytes), kInv, "lower_bound p 0", "'p'");
  here(tsr_gemm_lower_bound(1, 1, 1, 8, 1, nullptr), kInv, "lower_bound NULL", "'bytes'");
  // The drop-ins: without BLACS linked (this test links libtessera only)
  // they return UNSUPPORTED; test_gemm_scalapack covers them with BLACS.
  tsr_context sc = nullptr;
  here(tsr_scalapack_context(0, nullptr), kInv, "scalapack_context NULL", "'ctx'");
  const tsr_status blacs = tsr_scalapack_context(0, &sc);
  EXPECT_TRUE(blacs == TSR_ERR_UNSUPPORTED || blacs == kInv || blacs == TSR_SUCCESS) << tsr_last_error(nullptr);
  if (blacs == TSR_ERR_UNSUPPORTED) {
    const int one = 1;
    const double d1 = 1;
    const float f1 = 1;
    int desc[9] = {1, 0, 1, 1, 1, 1, 0, 0, 1};
    here(tsr_pdgemm("N", "N", &one, &one, &one, &d1, x.data(), &one, &one, desc, y.data(), &one, &one, desc, &d1,
                    z.data(), &one, &one, desc),
         TSR_ERR_UNSUPPORTED, "pdgemm without BLACS");
    here(tsr_psgemm("N", "N", &one, &one, &one, &f1, nullptr, &one, &one, desc, nullptr, &one, &one, desc, &f1, nullptr,
                    &one, &one, desc),
         TSR_ERR_UNSUPPORTED, "psgemm without BLACS");
  }
  EXPECT_EQ(tsr_matrix_destroy(&sq), TSR_SUCCESS);
}

// ------------------------------------------------------------ attention.h
tsr_status noop(const tsr_ring_step*, void*) { return TSR_SUCCESS; }

TEST(BadInput, Rings) {
  COVER(tsr_ring_create), COVER(tsr_ring_create_comm), COVER(tsr_ring_destroy), COVER(tsr_ring_info);
  COVER(tsr_ring_workspace_peak), COVER(tsr_ring_workspace_held), COVER(tsr_ring_workspace_release);
  COVER(tsr_ring_exchange), COVER(tsr_ring_progress);
  Env e;
  Quiet q;
  const bool me = last();
  tsr_ring r = nullptr;
  all(tsr_ring_create(nullptr, TSR_AXIS_ALL, &r), kInv, "create NULL grid");
  all(tsr_ring_create(e.grid, static_cast<tsr_grid_axis>(9), &r), kInv, "create bad axis", "'axis'");
  all(tsr_ring_create(e.grid, TSR_AXIS_ALL, me ? nullptr : &r), kInv, "create NULL out on one rank");
  all(tsr_ring_create_comm(me ? nullptr : e.ctx, MPI_COMM_WORLD, &r), kInv, "create_comm NULL ctx on one rank");
  all(tsr_ring_create_comm(me ? stale<tsr_context>() : e.ctx, MPI_COMM_WORLD, &r), kInv,
      "create_comm stale ctx on one rank");
  all(tsr_ring_create_comm(e.ctx, MPI_COMM_NULL, &r), kInv, "create_comm MPI_COMM_NULL", "'comm'");
  EXPECT_EQ(r, nullptr);
  here(tsr_ring_destroy(nullptr), kInv, "destroy NULL");
  tsr_ring sr = stale<tsr_ring>();
  here(tsr_ring_destroy(&sr), kInv, "destroy stale");
  int a = 0, b = 0;
  size_t bytes = 0;
  for (tsr_ring h : {static_cast<tsr_ring>(nullptr), stale<tsr_ring>()}) {
    here(tsr_ring_info(h, &a, &b), kInv, "info bad", "'ring'");
    here(tsr_ring_workspace_peak(h, &bytes, 0), kInv, "peak bad");
    here(tsr_ring_workspace_held(h, &bytes), kInv, "held bad");
    here(tsr_ring_workspace_release(h), kInv, "release bad");
    here(tsr_ring_progress(h), kInv, "progress bad");
  }
  here(tsr_ring_info(e.ring, nullptr, &b), kInv, "info NULL", "'rank'");
  here(tsr_ring_workspace_peak(e.ring, nullptr, 0), kInv, "peak NULL", "'bytes'");
  here(tsr_ring_workspace_held(e.ring, nullptr), kInv, "held NULL", "'bytes'");
  std::vector<float> v(8, 1.f);
  tsr_ring_buffer buf{v.data(), 4, TSR_FLOAT32, TSR_RING_ACCUMULATE};
  tsr_ring_buffer badt{v.data(), 4, static_cast<tsr_dtype>(42), TSR_RING_ACCUMULATE};
  all(tsr_ring_exchange(e.ring, &buf, 1, nullptr, nullptr), kInv, "exchange NULL fn", "'fn'");
  all(tsr_ring_exchange(e.ring, nullptr, 1, noop, nullptr), kInv, "exchange NULL buffers", "'buffers'");
  all(tsr_ring_exchange(e.ring, &buf, -1, noop, nullptr), kInv, "exchange nbuffers < 0", "'nbuffers'");
  all(tsr_ring_exchange(e.ring, me ? &badt : &buf, 1, noop, nullptr), kInv, "exchange bad type on one rank");
  tsr_ring_buffer huge{v.data(), static_cast<size_t>(PTRDIFF_MAX) / sizeof(float) + 1, TSR_FLOAT32,
                      TSR_RING_CIRCULATE};
  all(tsr_ring_exchange(e.ring, me ? &huge : &buf, 1, noop, nullptr), TSR_ERR_UNSUPPORTED,
      "exchange count beyond PTRDIFF_MAX bytes");
  all(tsr_ring_exchange(stale<tsr_ring>(), &buf, 1, noop, nullptr), kInv, "exchange stale ring");
  if (world_size() > 1) {
    tsr_ring_buffer circ{v.data(), 4, TSR_FLOAT32, TSR_RING_CIRCULATE};
    all(tsr_ring_exchange(e.ring, me ? &circ : &buf, 1, noop, nullptr), kInv, "exchange modes differ", "differs");
  }
}

TEST(BadInput, AttentionLayoutsAndMerge) {
  COVER(tsr_attn_shard_len), COVER(tsr_attn_positions), COVER(tsr_attn_shard_extract), COVER(tsr_attn_shard_insert);
  COVER(tsr_attn_permute), COVER(tsr_attn_workspace), COVER(tsr_attn_merge);
  Quiet q;
  const auto L = TSR_ATTN_LAYOUT_ZIGZAG;
  const auto bad = static_cast<tsr_attn_layout>(9);
  size_t n = 0;
  std::vector<int64_t> pos(16);
  std::vector<char> full(256), loc(256);
  here(tsr_attn_shard_len(bad, 8, 2, 0, &n), kInv, "shard_len layout", "'layout'");
  here(tsr_attn_shard_len(L, 8, 0, 0, &n), kInv, "shard_len nranks 0", "'nranks'");
  here(tsr_attn_shard_len(L, 8, 2, 2, &n), kInv, "shard_len rank 2 of 2", "'rank'");
  here(tsr_attn_shard_len(L, SIZE_MAX, 2, 0, &n), kInv, "shard_len huge", "'seq_len'");
  here(tsr_attn_shard_len(L, 8, 2, 0, nullptr), kInv, "shard_len NULL", "'local_len'");
  here(tsr_attn_positions(L, 8, 2, 0, nullptr), kInv, "positions NULL", "'positions'");
  here(tsr_attn_positions(bad, 8, 2, 0, pos.data()), kInv, "positions layout");
  here(tsr_attn_shard_extract(L, 8, 2, 0, nullptr, loc.data(), 1, 4), kInv, "extract NULL full", "'full'");
  here(tsr_attn_shard_extract(L, 8, 2, 0, full.data(), loc.data(), SIZE_MAX / 4, 8), kInv, "extract overflow",
       "overflows");
  here(tsr_attn_shard_insert(L, 8, 2, 0, loc.data(), nullptr, 1, 4), kInv, "insert NULL full", "'full'");
  here(tsr_attn_shard_insert(L, 8, 2, 1, loc.data(), full.data(), 4, SIZE_MAX / 8), kInv, "insert overflow");
  here(tsr_attn_permute(L, 8, 2, 0, full.data(), full.data(), 1, 4), kInv, "permute overlap", "overlap");
  here(tsr_attn_permute(L, 8, 2, 0, nullptr, loc.data(), 1, 4), kInv, "permute NULL", "'in'");
  here(tsr_attn_permute(L, 8, 2, 1, full.data(), loc.data(), SIZE_MAX / 4, 8), kInv, "permute overflow");
  tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
  cfg.seq_len = 8;
  size_t bytes = 0;
  here(tsr_attn_workspace(nullptr, 2, 0, 1, 1, 1, 4, 0, 0, &bytes), kInv, "workspace NULL cfg", "'cfg'");
  here(tsr_attn_workspace(&cfg, 0, 0, 1, 1, 1, 4, 0, 0, &bytes), kInv, "workspace nranks 0", "'nranks'");
  here(tsr_attn_workspace(&cfg, 2, 0, 1, 1, 1, 4, 0, 0, nullptr), kInv, "workspace NULL", "'bytes'");
  here(tsr_attn_workspace(&cfg, 2, 0, SIZE_MAX / 2, 4, 4, 1024, 0, 0, &bytes), TSR_ERR_SHAPE, "workspace huge", "overflows");
  tsr_attn_config bc = cfg;
  bc.magic = 0;
  here(tsr_attn_workspace(&bc, 2, 0, 1, 1, 1, 4, 0, 0, &bytes), kInv, "workspace cfg magic");
  std::vector<double> o(8), l(2);
  here(tsr_attn_merge(static_cast<tsr_dtype>(42), 2, 4, o.data(), l.data(), o.data(), l.data()), kInv, "merge type");
  here(tsr_attn_merge(TSR_BFLOAT16, 2, 4, o.data(), l.data(), o.data(), l.data()), TSR_ERR_UNSUPPORTED, "merge bf16");
  here(tsr_attn_merge(TSR_FLOAT64, 2, 4, o.data(), nullptr, o.data(), l.data()), kInv, "merge NULL lse_a", "'lse_a'");
  here(tsr_attn_merge(TSR_FLOAT64, SIZE_MAX / 2, 4, o.data(), l.data(), o.data(), l.data()), kInv, "merge overflow",
       "'rows'");
}

TEST(BadInput, Attention) {
  COVER(tsr_attn_forward), COVER(tsr_attn_backward);
  Env e;
  Quiet q;
  const bool me = last();
  const size_t p = static_cast<size_t>(world_size());
  tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
  cfg.seq_len = 2 * p;
  cfg.type = TSR_FLOAT64;
  const size_t n = 2, d = 4;
  std::vector<double> qb(n * d, 0.1), kb(n * d, 0.2), vb(n * d, 0.3), ob(n * d), lb(n), dob(n * d, 1), dqb(n * d),
      dkb(n * d), dvb(n * d);
  tsr_attn_tensor Q{qb.data(), 1, 1, n, d}, K{kb.data(), 1, 1, n, d}, V{vb.data(), 1, 1, n, d}, O{ob.data(), 1, 1, n, d},
      LS{lb.data(), 1, 1, n, 1}, DO{dob.data(), 1, 1, n, d}, DQ{dqb.data(), 1, 1, n, d}, DK{dkb.data(), 1, 1, n, d},
      DV{dvb.data(), 1, 1, n, d};
  all(tsr_attn_forward(nullptr, &cfg, &Q, &K, &V, nullptr, &O, &LS), kInv, "forward NULL ring");
  all(tsr_attn_forward(e.ring, me ? nullptr : &cfg, &Q, &K, &V, nullptr, &O, &LS), kInv, "forward NULL cfg on one rank");
  all(tsr_attn_forward(e.ring, &cfg, me ? nullptr : &Q, &K, &V, nullptr, &O, &LS), kInv, "forward NULL q on one rank");
  tsr_attn_config bf = cfg;
  bf.type = TSR_BFLOAT16;
  all(tsr_attn_forward(e.ring, me ? &bf : &cfg, &Q, &K, &V, nullptr, &O, &LS), TSR_ERR_UNSUPPORTED,
      "forward bfloat16 on one rank");
  tsr_attn_config bv = cfg;
  bv.variant = static_cast<tsr_attn_variant>(99);
  all(tsr_attn_forward(e.ring, &bv, &Q, &K, &V, nullptr, &O, &LS), kInv, "forward bad variant", "variant");
  tsr_attn_tensor Qs = Q;
  Qs.seq = 3;
  all(tsr_attn_forward(e.ring, &cfg, me ? &Qs : &Q, &K, &V, nullptr, &O, &LS), TSR_ERR_SHAPE,
      "forward wrong shard length on one rank");
  if (p > 1) {
    tsr_attn_config cc = cfg;
    cc.causal = 1;
    all(tsr_attn_forward(e.ring, me ? &cc : &cfg, &Q, &K, &V, nullptr, &O, &LS), kInv, "forward causal differs",
        "'cfg->causal' differs");
  }
  all(tsr_attn_backward(e.ring, &cfg, &Q, &K, &V, nullptr, &O, &LS, &DO, me ? nullptr : &DQ, &DK, &DV), kInv,
      "backward NULL dq on one rank");
  all(tsr_attn_backward(stale<tsr_ring>(), &cfg, &Q, &K, &V, nullptr, &O, &LS, &DO, &DQ, &DK, &DV), kInv,
      "backward stale ring");
}

// ------------------------------------------------------------ optimizer.h
TEST(BadInput, Optimizers) {
  COVER(tsr_optimizer_create), COVER(tsr_optimizer_destroy), COVER(tsr_optimizer_set_param);
  COVER(tsr_optimizer_set_group_param), COVER(tsr_optimizer_get_param), COVER(tsr_optimizer_param_bounds);
  COVER(tsr_optimizer_param_name), COVER(tsr_optimizer_preset_name), COVER(tsr_optimizer_set_schedule);
  COVER(tsr_optimizer_step), COVER(tsr_optimizer_query), COVER(tsr_optimizer_get_state);
  COVER(tsr_optimizer_save), COVER(tsr_optimizer_load);
  Env e;
  Quiet q;
  const bool me = last();
  tsr_optimizer o = nullptr;
  const size_t sizes[2] = {8, 8}, huge[2] = {SIZE_MAX / 2, SIZE_MAX / 2};
  const auto P = TSR_PRESET_LAMB_APEX;
  const auto R = TSR_OPT_REPLICATED;
  all(tsr_optimizer_create(nullptr, P, R, TSR_FLOAT32, 2, sizes, &o), kInv, "create NULL ctx");
  all(tsr_optimizer_create(e.ctx, static_cast<tsr_opt_preset>(999), R, TSR_FLOAT32, 2, sizes, &o), kInv, "create preset",
      "'preset'");
  all(tsr_optimizer_create(e.ctx, P, me ? static_cast<tsr_opt_dist>(9) : R, TSR_FLOAT32, 2, sizes, &o), kInv,
      "create dist on one rank");
  all(tsr_optimizer_create(e.ctx, P, R, TSR_FLOAT64, 2, sizes, &o), kInv, "create float64", "'param_type'");
  all(tsr_optimizer_create(e.ctx, P, R, TSR_FLOAT32, 0, sizes, &o), kInv, "create ngroups 0", "'ngroups'");
  all(tsr_optimizer_create(e.ctx, P, R, TSR_FLOAT32, 2, me ? nullptr : sizes, &o), kInv, "create NULL sizes on one rank");
  all(tsr_optimizer_create(e.ctx, P, R, TSR_FLOAT32, 2, huge, &o), TSR_ERR_UNSUPPORTED, "create overflowing sizes");
  all(tsr_optimizer_create(e.ctx, P, R, TSR_FLOAT32, 2, sizes, me ? nullptr : &o), kInv, "create NULL out on one rank");
  if (world_size() > 1) {
    const size_t other[2] = {8, 9};
    all(tsr_optimizer_create(e.ctx, P, R, TSR_FLOAT32, 2, me ? other : sizes, &o), kInv, "create sizes differ",
        "'group_sizes' differs");
  }
  EXPECT_EQ(o, nullptr);
  here(tsr_optimizer_destroy(nullptr), kInv, "destroy NULL");
  tsr_optimizer so = stale<tsr_optimizer>();
  here(tsr_optimizer_destroy(&so), kInv, "destroy stale");
  double v = 0;
  tsr_opt_bounds b;
  std::vector<float> st(16);
  for (tsr_optimizer h : {static_cast<tsr_optimizer>(nullptr), stale<tsr_optimizer>()}) {
    here(tsr_optimizer_set_param(h, TSR_OPT_LR, 0.1), kInv, "set_param bad", "'opt'");
    here(tsr_optimizer_set_group_param(h, 0, TSR_OPT_LR, 0.1), kInv, "set_group_param bad");
    here(tsr_optimizer_get_param(h, 0, TSR_OPT_LR, &v), kInv, "get_param bad");
    here(tsr_optimizer_set_schedule(h, nullptr, nullptr), kInv, "set_schedule bad");
    here(tsr_optimizer_query(h, TSR_OPTQ_KIND, 0, &v), kInv, "query bad");
    here(tsr_optimizer_get_state(h, TSR_OPT_STATE_M, st.data(), 16), kInv, "get_state bad");
    all(tsr_optimizer_step(h, st.data(), st.data(), 16), kInv, "step bad");
    all(tsr_optimizer_save(h, "/tmp/x"), kInv, "save bad");
    all(tsr_optimizer_load(h, "/tmp/x"), kInv, "load bad");
  }
  const auto badp = static_cast<tsr_opt_param>(TSR_OPT_PARAM_COUNT);
  here(tsr_optimizer_set_param(e.opt, badp, 0.1), kInv, "set_param param");
  here(tsr_optimizer_set_param(e.opt, TSR_OPT_LR, -1.0), kInv, "set_param out of bounds", "TSR_OPT_LR");
  here(tsr_optimizer_set_param(e.opt, TSR_OPT_LR, std::numeric_limits<double>::quiet_NaN()), kInv, "set_param NaN");
  here(tsr_optimizer_set_group_param(e.opt, 5, TSR_OPT_LR, 0.1), kInv, "set_group_param group", "group");
  here(tsr_optimizer_get_param(e.opt, 0, TSR_OPT_LR, nullptr), kInv, "get_param NULL", "'value'");
  here(tsr_optimizer_param_bounds(badp, &b), kInv, "param_bounds param");
  here(tsr_optimizer_param_bounds(TSR_OPT_LR, nullptr), kInv, "param_bounds NULL", "'bounds'");
  EXPECT_STREQ(tsr_optimizer_param_name(badp), "unknown");
  EXPECT_STREQ(tsr_optimizer_preset_name(static_cast<tsr_opt_preset>(-5)), "unknown");
  here(tsr_optimizer_query(e.opt, static_cast<tsr_opt_query>(999), 0, &v), kInv, "query what");
  here(tsr_optimizer_query(e.opt, TSR_OPTQ_KIND, 0, nullptr), kInv, "query NULL", "'value'");
  here(tsr_optimizer_get_state(e.opt, static_cast<tsr_opt_state>(99), st.data(), 16), kInv, "get_state which");
  here(tsr_optimizer_get_state(e.opt, TSR_OPT_STATE_M, st.data(), 15), TSR_ERR_SHAPE, "get_state count");
  std::vector<float> w(16, 0.5f), g(16, 0.01f);
  all(tsr_optimizer_step(e.opt, w.data(), g.data(), me ? 15 : 16), TSR_ERR_SHAPE, "step count on one rank");
  all(tsr_optimizer_step(e.opt, w.data(), me ? nullptr : g.data(), 16), kInv, "step NULL grads on one rank");
  all(tsr_optimizer_step(e.opt, w.data(), w.data(), 16), kInv, "step overlap", "overlap");
  std::vector<float> gn = g;
  if (me) gn[3] = std::numeric_limits<float>::infinity();
  all(tsr_optimizer_step(e.opt, w.data(), gn.data(), 16), TSR_ERR_NUMERIC, "step inf on one rank");
  if (world_size() > 1) {
    ASSERT_EQ(tsr_optimizer_set_param(e.opt, TSR_OPT_WEIGHT_DECAY, me ? 0.5 : 0.01), TSR_SUCCESS);
    all(tsr_optimizer_step(e.opt, w.data(), g.data(), 16), kInv, "step parameters differ", "hyperparameter");
    ASSERT_EQ(tsr_optimizer_set_param(e.opt, TSR_OPT_WEIGHT_DECAY, 0.01), TSR_SUCCESS);
  }
  all(tsr_optimizer_save(e.opt, me ? nullptr : "/tmp/x"), kInv, "save NULL path on one rank");
  all(tsr_optimizer_load(e.opt, nullptr), kInv, "load NULL path", "'path'");
  all(tsr_optimizer_load(e.opt, "/nonexistent/dir/state"), TSR_ERR_IO, "load missing file");
}

// --------------------------------------------------------------- energy.h
TEST(BadInput, EnergyProfilesAndMeters) {
  COVER(tsr_energy_profile_load), COVER(tsr_energy_profile_parse), COVER(tsr_energy_profile_destroy);
  COVER(tsr_energy_profile_name), COVER(tsr_energy_profile_level), COVER(tsr_energy_profile_flop);
  COVER(tsr_energy_profile_pue), COVER(tsr_energy_start), COVER(tsr_energy_stop), COVER(tsr_energy_sample);
  COVER(tsr_energy_meter_status), COVER(tsr_flops_add), COVER(tsr_region_extra_get);
  Env e;
  Quiet q;
  const bool me = last();
  tsr_energy_profile pr = nullptr;
  here(tsr_energy_profile_load(nullptr, &pr), TSR_SUCCESS, "load NULL path: the default (documented)");
  EXPECT_EQ(tsr_energy_profile_destroy(&pr), TSR_SUCCESS);
  here(tsr_energy_profile_load("/nonexistent/profile.json", &pr), TSR_ERR_IO, "load missing", "profile.json");
  here(tsr_energy_profile_load("/", &pr), TSR_ERR_IO, "load a directory");
  here(tsr_energy_profile_load("/", nullptr), kInv, "load NULL out", "'profile'");
  here(tsr_energy_profile_parse(nullptr, &pr), kInv, "parse NULL", "'json'");
  here(tsr_energy_profile_parse("{", &pr), kInv, "parse syntax", "line 1");
  here(tsr_energy_profile_parse("{\"pue\": {\"value\": 1e999}}", &pr), kInv, "parse 1e999", "'pue.value'");
  here(tsr_energy_profile_parse("[1, 2]", &pr), kInv, "parse not an object");
  EXPECT_EQ(pr, nullptr);
  here(tsr_energy_profile_destroy(nullptr), kInv, "destroy NULL");
  tsr_energy_profile sp = stale<tsr_energy_profile>();
  here(tsr_energy_profile_destroy(&sp), kInv, "destroy stale");
  const char *name = nullptr, *file = nullptr;
  tsr_energy_coeff co;
  int present = 0;
  double pue = 0;
  for (tsr_energy_profile h : {static_cast<tsr_energy_profile>(nullptr), stale<tsr_energy_profile>()}) {
    here(tsr_energy_profile_name(h, &name, &file), kInv, "name bad", "'profile'");
    here(tsr_energy_profile_level(h, TSR_LEVEL_SELF, &co), kInv, "level bad");
    here(tsr_energy_profile_flop(h, &co, &present), kInv, "flop bad");
    here(tsr_energy_profile_pue(h, &pue), kInv, "pue bad");
  }
  tsr_energy_config cfg = TSR_ENERGY_CONFIG_INIT;
  tsr_energy_config bad = cfg;
  bad.meters = 64;
  all(tsr_energy_start(nullptr, &cfg), kInv, "start NULL ctx");
  all(tsr_energy_start(e.ctx, me ? &bad : &cfg), kInv, "start bad meters on one rank");
  if (world_size() > 1) {
    tsr_energy_config m = cfg;
    m.comm_matrix = me ? 1 : 0;
    all(tsr_energy_start(e.ctx, &m), kInv, "start comm_matrix differs", "'config->comm_matrix' differs");
  }
  if (me) {
    ASSERT_EQ(tsr_region_begin(e.ctx, "open"), TSR_SUCCESS);
  }
  all(tsr_energy_start(e.ctx, &cfg), TSR_ERR_STATE, "start with an open region on one rank");
  all(tsr_energy_stop(e.ctx), TSR_ERR_STATE, "stop with an open region on one rank");
  if (me) {
    ASSERT_EQ(tsr_region_end(e.ctx, "open"), TSR_SUCCESS);
  }
  all(tsr_energy_stop(stale<tsr_context>()), kInv, "stop stale");
  here(tsr_energy_sample(nullptr), kInv, "sample NULL");
  int dom = 0;
  const char* text = nullptr;
  here(tsr_energy_meter_status(stale<tsr_context>(), &dom, &text), kInv, "meter_status stale");
  here(tsr_flops_add(nullptr, 5), kInv, "flops_add NULL");
  tsr_region_extra x;
  here(tsr_region_extra_get(e.ctx, "no/such", &x), kInv, "extra unknown path");
  here(tsr_region_extra_get(e.ctx, "total", nullptr), kInv, "extra NULL", "'out'");
}

TEST(BadInput, EnergyReports) {
  COVER(tsr_energy_report_create), COVER(tsr_energy_report_destroy), COVER(tsr_energy_report_region_count);
  COVER(tsr_energy_report_region_path), COVER(tsr_energy_report_find), COVER(tsr_energy_report_rank);
  COVER(tsr_energy_report_stat), COVER(tsr_energy_report_source), COVER(tsr_energy_report_matrix);
  COVER(tsr_energy_report_format), COVER(tsr_energy_report_write);
  Env e;
  Quiet q;
  const bool me = last();
  tsr_energy_report r = nullptr;
  all(tsr_energy_report_create(nullptr, nullptr, 0, &r), kInv, "create NULL ctx");
  all(tsr_energy_report_create(e.ctx, nullptr, me ? -1 : 0, &r), kInv, "create bad root on one rank");
  all(tsr_energy_report_create(e.ctx, stale<tsr_energy_profile>(), 0, &r), kInv, "create stale profile");
  all(tsr_energy_report_create(e.ctx, nullptr, 0, me ? nullptr : &r), kInv, "create NULL out on one rank");
  if (world_size() > 1)
    all(tsr_energy_report_create(e.ctx, nullptr, me ? 1 : 0, &r), kInv, "create root differs", "'root'");
  EXPECT_EQ(r, nullptr);
  here(tsr_energy_report_destroy(nullptr), kInv, "destroy NULL");
  tsr_energy_report sr = stale<tsr_energy_report>();
  here(tsr_energy_report_destroy(&sr), kInv, "destroy stale");
  int n = 0, reg = 0, meas = 0;
  const char* s = nullptr;
  tsr_energy_estimate est;
  uint64_t bytes[4], msgs[4];
  size_t need = 0;
  for (tsr_energy_report h : {static_cast<tsr_energy_report>(nullptr), stale<tsr_energy_report>()}) {
    here(tsr_energy_report_region_count(h, &n), kInv, "region_count bad", "'report'");
    here(tsr_energy_report_region_path(h, 0, &s), kInv, "region_path bad");
    here(tsr_energy_report_find(h, "total", &reg), kInv, "find bad");
    here(tsr_energy_report_rank(h, 0, 0, &est), kInv, "rank bad");
    here(tsr_energy_report_stat(h, 0, TSR_STAT_MIN, &est), kInv, "stat bad");
    here(tsr_energy_report_source(h, &meas, &s), kInv, "source bad");
    here(tsr_energy_report_matrix(h, 0, bytes, msgs, 4), kInv, "matrix bad");
    here(tsr_energy_report_format(h, TSR_OUTPUT_TABLE, nullptr, 0, &need), kInv, "format bad");
    here(tsr_energy_report_write(h, TSR_OUTPUT_TABLE, "/tmp/x"), kInv, "write bad");
  }
  ASSERT_EQ(tsr_energy_report_create(e.ctx, nullptr, 0, &r), TSR_SUCCESS);
  here(tsr_energy_report_region_count(r, nullptr), kInv, "region_count NULL", "'count'");
  here(tsr_energy_report_region_path(r, 99, &s), kInv, "region_path 99", "'region'");
  here(tsr_energy_report_find(r, "no-such", &reg), kInv, "find unknown");
  here(tsr_energy_report_find(r, nullptr, &reg), kInv, "find NULL", "'path'");
  here(tsr_energy_report_rank(r, 0, world_size(), &est), kInv, "rank out of range", "'rank'");
  here(tsr_energy_report_stat(r, 0, static_cast<tsr_stat>(42), &est), kInv, "stat bad stat", "'stat'");
  here(tsr_energy_report_stat(r, 0, TSR_STAT_MIN, nullptr), kInv, "stat NULL", "'out'");
  here(tsr_energy_report_matrix(r, 0, bytes, msgs, 4), TSR_ERR_STATE, "matrix without comm_matrix");
  here(tsr_energy_report_format(r, static_cast<tsr_output_format>(9), nullptr, 0, &need), kInv, "format bad format",
       "'format'");
  here(tsr_energy_report_format(r, TSR_OUTPUT_TABLE, nullptr, 0, nullptr), TSR_SUCCESS, "format NULL needed (optional)");
  here(tsr_energy_report_write(r, TSR_OUTPUT_TABLE, nullptr), kInv, "write NULL path", "'path'");
  here(tsr_energy_report_write(r, TSR_OUTPUT_TABLE, "/nonexistent/dir/report.txt"), TSR_ERR_IO, "write bad dir",
       "report.txt");
  EXPECT_EQ(tsr_energy_report_destroy(&r), TSR_SUCCESS);
}

// ------------------------------------------------- checkpoints, energy plans
TEST(BadInput, Checkpoints) {
  COVER(tsr_checkpoint_create), COVER(tsr_checkpoint_open), COVER(tsr_checkpoint_close);
  COVER(tsr_checkpoint_put_matrix), COVER(tsr_checkpoint_put_shard), COVER(tsr_checkpoint_put_replicated);
  COVER(tsr_checkpoint_put_optimizer), COVER(tsr_checkpoint_set_int), COVER(tsr_checkpoint_set_double);
  COVER(tsr_checkpoint_set_string), COVER(tsr_checkpoint_commit), COVER(tsr_checkpoint_array_count);
  COVER(tsr_checkpoint_array_info), COVER(tsr_checkpoint_find_array), COVER(tsr_checkpoint_get_matrix);
  COVER(tsr_checkpoint_get_shard), COVER(tsr_checkpoint_get_replicated), COVER(tsr_checkpoint_get_optimizer);
  COVER(tsr_checkpoint_attr_count), COVER(tsr_checkpoint_attr_info), COVER(tsr_checkpoint_get_int);
  COVER(tsr_checkpoint_get_double), COVER(tsr_checkpoint_get_string), COVER(tsr_checkpoint_format);
  Env e;
  Quiet q;
  const bool me = last();
  char dir[] = "/tmp/tsr_bad_ckpt_XXXXXX";
  if (world_rank() == 0 && mkdtemp(dir) == nullptr) dir[0] = 0;
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  const std::string path = std::string(dir) + "/c.ckpt";
  tsr_checkpoint ck = nullptr;
  all(tsr_checkpoint_create(nullptr, path.c_str(), TSR_CKPT_AUTO, 0, &ck), kInv, "create NULL ctx", "'ctx'");
  all(tsr_checkpoint_create(e.ctx, me ? nullptr : path.c_str(), TSR_CKPT_AUTO, 0, &ck), kInv, "create NULL path on one rank");
  all(tsr_checkpoint_create(e.ctx, path.c_str(), static_cast<tsr_ckpt_format>(me ? 9 : 0), 0, &ck), kInv,
      "create bad format on one rank");
  all(tsr_checkpoint_create(e.ctx, path.c_str(), TSR_CKPT_AUTO, me ? 4 : 0, &ck), kInv, "create bad flags on one rank");
  all(tsr_checkpoint_create(e.ctx, path.c_str(), TSR_CKPT_AUTO, 0, nullptr), kInv, "create NULL out", "'ckpt'");
  all(tsr_checkpoint_open(e.ctx, (path + ".missing").c_str(), &ck), TSR_ERR_IO, "open missing", "c.ckpt.missing");
  all(tsr_checkpoint_open(e.ctx, me ? nullptr : path.c_str(), &ck), kInv, "open NULL path on one rank");
  here(tsr_checkpoint_close(nullptr), kInv, "close NULL", "'ckpt'");
  tsr_checkpoint st = stale<tsr_checkpoint>();
  here(tsr_checkpoint_close(&st), kInv, "close stale", "'ckpt'");
  ASSERT_EQ(tsr_checkpoint_create(e.ctx, path.c_str(), TSR_CKPT_AUTO, 0, &ck), TSR_SUCCESS);
  std::vector<double> x(64, 1.0);
  all(tsr_checkpoint_put_matrix(ck, "m", e.mat, me ? nullptr : x.data()), kInv, "put_matrix NULL local on one rank");
  all(tsr_checkpoint_put_matrix(ck, "m", stale<tsr_matrix>(), x.data()), kInv, "put_matrix stale matrix", "'mat'");
  all(tsr_checkpoint_put_shard(ck, "s", TSR_FLOAT64, 10, SIZE_MAX, 2, x.data()), TSR_ERR_SHAPE, "put_shard overflow");
  all(tsr_checkpoint_put_shard(ck, "s", static_cast<tsr_dtype>(me ? 17 : 4), 0, 0, 0, x.data()), kInv,
      "put_shard bad type on one rank");
  const uint64_t huge[2] = {UINT64_MAX / 4, 16};
  all(tsr_checkpoint_put_replicated(ck, "r", TSR_FLOAT64, 2, huge, x.data()), TSR_ERR_UNSUPPORTED, "put_replicated overflow");
  all(tsr_checkpoint_put_replicated(ck, "r", TSR_FLOAT64, 0, huge, x.data()), kInv, "put_replicated ndims 0", "'ndims'");
  all(tsr_checkpoint_put_optimizer(ck, "o", stale<tsr_optimizer>()), kInv, "put_optimizer stale", "'opt'");
  all(tsr_checkpoint_put_optimizer(ck, me ? "o/p" : "o", e.opt), kInv, "put_optimizer bad prefix on one rank");
  all(tsr_checkpoint_set_int(ck, me ? "" : "k", 1), kInv, "set_int empty key on one rank");
  all(tsr_checkpoint_set_double(ck, nullptr, 1.0), kInv, "set_double NULL key", "'key'");
  all(tsr_checkpoint_set_string(ck, "tessera_x", "v"), kInv, "set_string reserved key", "tessera_");
  int n = 0;
  here(tsr_checkpoint_array_count(ck, &n), TSR_ERR_STATE, "array_count while writing");
  here(tsr_checkpoint_array_info(ck, 0, nullptr, nullptr, nullptr, nullptr), TSR_ERR_STATE, "array_info while writing");
  here(tsr_checkpoint_find_array(ck, "m", nullptr), kInv, "find_array NULL out", "'index'");
  here(tsr_checkpoint_attr_count(ck, &n), TSR_ERR_STATE, "attr_count while writing");
  here(tsr_checkpoint_attr_info(stale<tsr_checkpoint>(), 0, nullptr, nullptr), kInv, "attr_info stale");
  int64_t i64 = 0;
  double d = 0;
  size_t need = 0;
  here(tsr_checkpoint_get_int(ck, "k", &i64), TSR_ERR_STATE, "get_int while writing");
  here(tsr_checkpoint_get_double(ck, "k", nullptr), kInv, "get_double NULL out", "'value'");
  here(tsr_checkpoint_get_string(ck, "k", nullptr, 4, &need), kInv, "get_string NULL buf with len", "'buf'");
  here(tsr_checkpoint_format(ck, nullptr), kInv, "format NULL out", "'format'");
  all(tsr_checkpoint_get_matrix(ck, "m", e.mat, x.data()), TSR_ERR_STATE, "get_matrix while writing");
  all(tsr_checkpoint_get_shard(ck, "s", TSR_FLOAT64, 1, 0, 1, x.data()), TSR_ERR_STATE, "get_shard while writing");
  const uint64_t one[1] = {1};
  all(tsr_checkpoint_get_replicated(ck, "r", TSR_FLOAT64, 1, one, x.data()), TSR_ERR_STATE, "get_replicated while writing");
  all(tsr_checkpoint_get_optimizer(ck, "o", e.opt), TSR_ERR_STATE, "get_optimizer while writing");
  here(tsr_checkpoint_commit(stale<tsr_checkpoint>()), kInv, "commit stale", "'ckpt'");
  ASSERT_EQ(tsr_checkpoint_set_double(ck, "lr", 0.5), TSR_SUCCESS);
  ASSERT_EQ(tsr_checkpoint_commit(ck), TSR_SUCCESS);
  all(tsr_checkpoint_commit(ck), TSR_ERR_STATE, "commit twice", "committed");
  ASSERT_EQ(tsr_checkpoint_close(&ck), TSR_SUCCESS);
  ASSERT_EQ(tsr_checkpoint_open(e.ctx, path.c_str(), &ck), TSR_SUCCESS);
  here(tsr_checkpoint_get_int(ck, "lr", &i64), TSR_ERR_SHAPE, "get_int of a double", "not an integer");
  here(tsr_checkpoint_get_double(ck, "none", &d), kInv, "get_double missing", "'none'");
  all(tsr_checkpoint_put_shard(ck, "s", TSR_FLOAT64, 0, 0, 0, nullptr), TSR_ERR_STATE, "put on a reading handle");
  all(tsr_checkpoint_get_shard(ck, "nope", TSR_FLOAT64, 1, 0, 1, x.data()), TSR_ERR_IO, "get_shard missing array", "'nope'");
  ASSERT_EQ(tsr_checkpoint_close(&ck), TSR_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::remove(path.c_str());
    rmdir(dir);
  }
}

TEST(BadInput, EnergyPlans) {
  COVER(tsr_gemm_plan_candidates), COVER(tsr_energy_profile_static);
  Quiet q;
  size_t n = 0;
  here(tsr_gemm_plan_candidates(nullptr, nullptr, 0, &n), kInv, "candidates NULL problem", "'problem'");
  tsr_gemm_problem p = TSR_GEMM_PROBLEM_INIT;
  p.m = p.n = p.k = 8;
  here(tsr_gemm_plan_candidates(&p, nullptr, 0, nullptr), kInv, "candidates NULL count", "'count'");
  p.objective = static_cast<tsr_objective>(9);
  here(tsr_gemm_plan_candidates(&p, nullptr, 0, &n), kInv, "candidates bad objective", "'objective'");
  tsr_energy_coeff c;
  here(tsr_energy_profile_static(nullptr, &c), kInv, "static NULL profile", "'profile'");
  here(tsr_energy_profile_static(stale<tsr_energy_profile>(), &c), kInv, "static stale profile", "'profile'");
}

TEST(BadInput, Objectives) {
  COVER(tsr_context_set_objective), COVER(tsr_context_get_objective), COVER(tsr_attn_plan_create);
  COVER(tsr_attn_plan_candidates), COVER(tsr_optimizer_plan);
  Env e;
  Quiet q;
  all(tsr_context_set_objective(nullptr, TSR_OBJECTIVE_TIME), kInv, "set_objective NULL ctx", "'ctx'");
  all(tsr_context_set_objective(e.ctx, static_cast<tsr_objective>(3)), kInv, "set_objective 3", "'objective'");
  all(tsr_context_set_objective(e.ctx, world_rank() == 0 ? TSR_OBJECTIVE_ENERGY : TSR_OBJECTIVE_EDP),
      world_size() > 1 ? kInv : TSR_SUCCESS, "set_objective differing", world_size() > 1 ? "'objective'" : nullptr);
  tsr_objective o;
  here(tsr_context_get_objective(e.ctx, nullptr), kInv, "get_objective NULL", "'objective'");
  here(tsr_context_get_objective(stale<tsr_context>(), &o), kInv, "get_objective stale ctx", "'ctx'");
  // Attention plans.
  tsr_attn_plan ap;
  size_t n = 0;
  here(tsr_attn_plan_create(nullptr, &ap), kInv, "attn plan NULL problem", "'problem'");
  tsr_attn_problem a = TSR_ATTN_PROBLEM_INIT;
  here(tsr_attn_plan_create(&a, &ap), kInv, "attn plan seq_len 0", "seq_len");
  a.seq_len = 8;
  here(tsr_attn_plan_create(&a, nullptr), kInv, "attn plan NULL plan", "'plan'");
  a.magic = 0;
  here(tsr_attn_plan_create(&a, &ap), kInv, "attn plan not initialised", "'problem'");
  a.magic = TSR_ATTN_PROBLEM_MAGIC;
  a.heads = 3;
  a.kv_heads = 2;
  here(tsr_attn_plan_create(&a, &ap), TSR_ERR_SHAPE, "attn plan heads", "'heads'");
  a.heads = a.kv_heads = 1;
  a.type = TSR_BFLOAT16;
  here(tsr_attn_plan_create(&a, &ap), kInv, "attn plan type", "'type'");
  a.type = TSR_FLOAT32;
  a.variant = 3;
  here(tsr_attn_plan_create(&a, &ap), kInv, "attn plan variant", "'variant'");
  a.variant = -1;
  a.layout = 5;
  here(tsr_attn_plan_create(&a, &ap), kInv, "attn plan layout", "'layout'");
  a.layout = -1;
  a.nranks = 0;
  here(tsr_attn_plan_create(&a, &ap), kInv, "attn plan nranks", "'nranks'");
  a.nranks = 1;
  a.objective = static_cast<tsr_objective>(4);
  here(tsr_attn_plan_create(&a, &ap), kInv, "attn plan objective", "'objective'");
  a.objective = TSR_OBJECTIVE_DEFAULT;
  a.profile = stale<tsr_energy_profile>();
  here(tsr_attn_plan_create(&a, &ap), kInv, "attn plan stale profile", "'profile'");
  a.profile = nullptr;
  a.context = stale<tsr_context>();
  here(tsr_attn_plan_create(&a, &ap), kInv, "attn plan stale context", "'context'");
  a.context = e.ctx;
  here(tsr_attn_plan_candidates(&a, nullptr, 1, &n), kInv, "attn candidates NULL out", "'out'");
  here(tsr_attn_plan_candidates(&a, nullptr, 0, nullptr), kInv, "attn candidates NULL count", "'count'");
  here(tsr_attn_plan_candidates(nullptr, nullptr, 0, &n), kInv, "attn candidates NULL problem", "'problem'");
  ASSERT_EQ(tsr_attn_plan_candidates(&a, nullptr, 0, &n), TSR_SUCCESS) << tsr_last_error(nullptr);
  EXPECT_EQ(n, 9u);
  // Optimizer plans.
  tsr_opt_plan op;
  here(tsr_optimizer_plan(nullptr, &op), kInv, "opt plan NULL problem", "'problem'");
  tsr_opt_problem pr = TSR_OPT_PROBLEM_INIT;
  here(tsr_optimizer_plan(&pr, &op), kInv, "opt plan n 0", "'n'");
  pr.n = 100;
  here(tsr_optimizer_plan(&pr, nullptr), kInv, "opt plan NULL plan", "'plan'");
  pr.kind = static_cast<tsr_opt_kind>(0);
  here(tsr_optimizer_plan(&pr, &op), kInv, "opt plan kind", "'kind'");
  pr.kind = TSR_OPT_LARS;
  pr.param_type = TSR_FLOAT64;
  here(tsr_optimizer_plan(&pr, &op), kInv, "opt plan param_type", "'param_type'");
  pr.param_type = TSR_BFLOAT16;
  pr.ngroups = 101;
  here(tsr_optimizer_plan(&pr, &op), kInv, "opt plan ngroups", "'ngroups'");
  pr.ngroups = 1;
  pr.bucket_bytes = 100;
  here(tsr_optimizer_plan(&pr, &op), kInv, "opt plan bucket_bytes", "'bucket_bytes'");
  pr.bucket_bytes = 0;
  pr.ranks_per_node = -1;
  here(tsr_optimizer_plan(&pr, &op), kInv, "opt plan ranks_per_node", "'ranks_per_node'");
  pr.ranks_per_node = 0;
  pr.objective = static_cast<tsr_objective>(-5);
  here(tsr_optimizer_plan(&pr, &op), kInv, "opt plan objective", "'objective'");
  pr.objective = TSR_OBJECTIVE_EDP;
  pr.machine.beta = -1;
  here(tsr_optimizer_plan(&pr, &op), kInv, "opt plan machine", "machine");
  pr.machine.beta = 0;
  pr.profile = stale<tsr_energy_profile>();
  here(tsr_optimizer_plan(&pr, &op), kInv, "opt plan stale profile", "'profile'");
  pr.profile = nullptr;
  ASSERT_EQ(tsr_optimizer_plan(&pr, &op), TSR_SUCCESS) << tsr_last_error(nullptr);
  EXPECT_EQ(op.objective, TSR_OBJECTIVE_EDP);
}

// Device binding and pointer spaces (include/tessera/device.h, issue 17).
// Without CUDA every device is unsupported; with CUDA and no GPU (CI) device
// 0 is out of range; on a GPU machine binding device 0 works and a device
// change under live grids is TSR_ERR_STATE.
TEST(BadInput, Devices) {
  COVER(tsr_device_count), COVER(tsr_context_set_device), COVER(tsr_context_get_device), COVER(tsr_pointer_space);
  Quiet q;
  int n = -1;
  here(tsr_device_count(nullptr), kInv, "device_count NULL", "'count'");
  ASSERT_EQ(tsr_device_count(&n), TSR_SUCCESS);
  EXPECT_GE(n, 0);
  if (!TSR_HAVE_CUDA) {
    EXPECT_EQ(n, 0);
  }
  int space = -1;
  double x = 0;
  here(tsr_pointer_space(&x, nullptr), kInv, "pointer_space NULL", "'space'");
  ASSERT_EQ(tsr_pointer_space(&x, &space), TSR_SUCCESS);
  EXPECT_EQ(space, TSR_MEMORY_HOST);
  ASSERT_EQ(tsr_pointer_space(nullptr, &space), TSR_SUCCESS);
  EXPECT_EQ(space, TSR_MEMORY_HOST);
  tsr_context ctx = nullptr;
  ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS);
  int dev = 7;
  void* stream = &x;
  here(tsr_context_get_device(nullptr, &dev, &stream), kInv, "get_device NULL ctx", "'ctx'");
  here(tsr_context_get_device(stale<tsr_context>(), &dev, &stream), kInv, "get_device stale ctx", "'ctx'");
  ASSERT_EQ(tsr_context_get_device(ctx, &dev, &stream), TSR_SUCCESS);
  EXPECT_EQ(dev, -1);
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(tsr_context_get_device(ctx, nullptr, nullptr), TSR_SUCCESS);
  all(tsr_context_set_device(nullptr, -1, nullptr), kInv, "set_device NULL ctx", "'ctx'");
  all(tsr_context_set_device(stale<tsr_context>(), -1, nullptr), kInv, "set_device stale ctx", "'ctx'");
  all(tsr_context_set_device(ctx, -2, nullptr), kInv, "set_device -2", "'device'");
  all(tsr_context_set_device(ctx, -1, &x), kInv, "set_device -1 with a stream", "'stream'");
  all(tsr_context_set_device(ctx, n, nullptr), TSR_HAVE_CUDA ? kInv : TSR_ERR_UNSUPPORTED, "set_device out of range",
      "'device'");
  all(tsr_context_set_device(ctx, last() ? -2 : -1, nullptr), kInv, "set_device bad on one rank",
      last() ? "'device'" : "failed");
  all(tsr_context_set_device(ctx, -1, nullptr), TSR_SUCCESS, "set_device unbind");
  if (n > 0) {
    all(tsr_context_set_device(ctx, 0, &x), kInv, "set_device host pointer as stream", "'stream'");
    Env e;
    all(tsr_context_set_device(e.ctx, 0, nullptr), TSR_ERR_STATE, "set_device under live grids", "grid");
  }
  ASSERT_EQ(tsr_context_get_device(ctx, &dev, &stream), TSR_SUCCESS);
  EXPECT_EQ(dev, -1);
  ASSERT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
}

// ---------------------------------------------------------------- coverage
// Every TSR_API function of the installed headers has a case above. Headers
// added on other branches whose cases come with them may be excluded here by
// prefix until their cases are added (none now).
const char* const kNotYetCovered[] = {"tsr_none_"};

TEST(Coverage, EveryHeaderFunctionHasACase) {
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (u.test_to_run_count() != u.total_test_count()) GTEST_SKIP() << "needs every test of the file to run first";
  std::set<std::string> declared;
  const std::string dir = TSR_TEST_INCLUDE_DIR;
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  const std::regex api(R"(TSR_API[^;{]*?\b(tsr_\w+)\s*\()");
  while (dirent* ent = readdir(d)) {
    const std::string name = ent->d_name;
    if (name.size() < 3 || name.substr(name.size() - 2) != ".h") continue;
    std::ifstream in(dir + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (std::sregex_iterator it(text.begin(), text.end(), api), end; it != end; ++it) declared.insert((*it)[1]);
  }
  closedir(d);
  EXPECT_GT(declared.size(), 100u) << "the header parser found too few functions";
  std::string missing;
  for (const std::string& f : declared) {
    bool skip = false;
    for (const char* pre : kNotYetCovered) skip = skip || f.rfind(pre, 0) == 0;
    if (!skip && covered().count(f) == 0) missing += " " + f;
  }
  EXPECT_TRUE(missing.empty()) << "TSR_API functions without a bad-input case in test_bad_input.cpp:" << missing;
  for (const std::string& f : covered()) EXPECT_TRUE(declared.count(f)) << f << " is covered but not declared";
}

}  // namespace

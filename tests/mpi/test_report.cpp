// Reports: the union of regions over ranks, per-rank counters on the root,
// min/max/sum over ranks against values gathered here with plain MPI, the
// formatted table, and every error path.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "context.hpp"
#include "tsr_test.hpp"

using namespace tsr_test;

namespace {

constexpr size_t kWords = sizeof(tsr_counters) / sizeof(uint64_t);

// Rank r sends r+1 doubles to itself in region "even" or "odd" (by r), and
// everyone sends 1 double in "all/inner".
void traffic(tsr_context ctx) {
  const int me = world_rank();
  std::vector<double> buf(static_cast<size_t>(me) + 1, 1.0);
  const char* mine = me % 2 ? "odd" : "even";
  ASSERT_EQ(tsr_region_begin(ctx, mine), TSR_SUCCESS);
  ASSERT_EQ(tsr::sendrecv(*ctx->world, buf.data(), buf.size(), me, 0, buf.data(), buf.size(), me, 0, TSR_FLOAT64),
            TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, mine), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_begin(ctx, "all"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_begin(ctx, "inner"), TSR_SUCCESS);
  ASSERT_EQ(tsr::sendrecv(*ctx->world, buf.data(), 1, me, 0, buf.data(), 1, me, 0, TSR_FLOAT64), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "inner"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "all"), TSR_SUCCESS);
}

TEST(Report, UnionStatsAndRankCounters) {
  Ctx ctx;
  traffic(ctx);
  const int p = world_size(), me = world_rank(), root = p - 1;
  // Each rank's own view, gathered with plain MPI before the report.
  const char* paths[] = {"total", "all", "all/inner", "even", "odd"};
  std::vector<std::vector<uint64_t>> own(5, std::vector<uint64_t>(kWords, 0));
  for (int g = 0; g < 5; ++g) {
    tsr_counters c = zero();
    if (tsr_counters_get(ctx, paths[g], &c) != TSR_SUCCESS) c = zero();  // region absent here
    std::memcpy(own[static_cast<size_t>(g)].data(), &c, sizeof c);
  }
  std::vector<std::vector<uint64_t>> all(5, std::vector<uint64_t>(kWords * static_cast<size_t>(p)));
  for (int g = 0; g < 5; ++g)
    MPI_Allgather(own[static_cast<size_t>(g)].data(), static_cast<int>(kWords), MPI_UINT64_T,
                  all[static_cast<size_t>(g)].data(), static_cast<int>(kWords), MPI_UINT64_T, MPI_COMM_WORLD);

  tsr_report rep = nullptr;
  ASSERT_EQ(tsr_report_create(ctx, root, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  int n = 0;
  ASSERT_EQ(tsr_report_region_count(rep, &n), TSR_SUCCESS);
  const int expect_regions = p >= 2 ? 5 : 4;  // "odd" only exists with 2+ ranks
  ASSERT_EQ(n, expect_regions);
  std::vector<std::string> got;
  for (int i = 0; i < n; ++i) {
    const char* path = nullptr;
    ASSERT_EQ(tsr_report_region_path(rep, i, &path), TSR_SUCCESS);
    got.emplace_back(path);
  }
  EXPECT_EQ(got[0], "total");
  EXPECT_TRUE(std::is_sorted(got.begin() + 1, got.end()));
  for (int i = 0; i < n; ++i) {
    const int g = static_cast<int>(std::find(std::begin(paths), std::end(paths), got[static_cast<size_t>(i)]) -
                                   std::begin(paths));
    ASSERT_LT(g, 5) << got[static_cast<size_t>(i)];
    tsr_counters mn, mx, sm;
    ASSERT_EQ(tsr_report_stats(rep, i, &mn, &mx, &sm), TSR_SUCCESS);
    const uint64_t* a = reinterpret_cast<const uint64_t*>(&mn);
    const uint64_t* b = reinterpret_cast<const uint64_t*>(&mx);
    const uint64_t* s = reinterpret_cast<const uint64_t*>(&sm);
    for (size_t w = 0; w < kWords; ++w) {
      uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
      for (int r = 0; r < p; ++r) {
        const uint64_t v = all[static_cast<size_t>(g)][static_cast<size_t>(r) * kWords + w];
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        sum += v;
      }
      if (w >= kWords - 2) continue;  // control: the report's own traffic came after the snapshot
      EXPECT_EQ(a[w], lo) << got[static_cast<size_t>(i)] << " word " << w;
      EXPECT_EQ(b[w], hi) << got[static_cast<size_t>(i)] << " word " << w;
      EXPECT_EQ(s[w], sum) << got[static_cast<size_t>(i)] << " word " << w;
    }
    // Per-rank counters: every rank on the root, only itself elsewhere.
    for (int r = 0; r < p; ++r) {
      tsr_counters c;
      const tsr_status st = tsr_report_rank_counters(rep, i, r, &c);
      if (me == root || r == me) {
        ASSERT_EQ(st, TSR_SUCCESS) << tsr_last_error(nullptr);
        // All but the control entry (the report's own agreement came before its snapshot).
        EXPECT_EQ(0, std::memcmp(&c, all[static_cast<size_t>(g)].data() + static_cast<size_t>(r) * kWords,
                                 sizeof c - sizeof(tsr_traffic)))
            << got[static_cast<size_t>(i)] << " rank " << r;
      } else {
        EXPECT_EQ(st, TSR_ERR_INVALID_ARG);
        EXPECT_TRUE(contains(tsr_last_error(nullptr), "only the report's root"));
      }
    }
  }
  // Known values: "even" holds ranks 0,2,4,.. each sending (r+1)*8 bytes to itself.
  const int even = static_cast<int>(std::find(got.begin(), got.end(), "even") - got.begin());
  tsr_counters sm;
  ASSERT_EQ(tsr_report_stats(rep, even, nullptr, nullptr, &sm), TSR_SUCCESS);
  uint64_t want = 0;
  for (int r = 0; r < p; r += 2) want += 8u * static_cast<uint64_t>(r + 1);
  EXPECT_EQ(sm.p2p_sent[TSR_PEER_SELF].bytes, want);

  // Formatting: the size query, a truncated copy, and the full table.
  size_t need = 0;
  ASSERT_EQ(tsr_report_format(rep, nullptr, 0, &need), TSR_SUCCESS);
  std::string table(need + 1, '\0');
  ASSERT_EQ(tsr_report_format(rep, &table[0], table.size(), &need), TSR_SUCCESS);
  table.resize(need);
  for (const std::string& path : got) EXPECT_NE(table.find("region " + path + "\n"), std::string::npos) << path;
  EXPECT_NE(table.find("p2p sent self"), std::string::npos);
  char small[16];
  ASSERT_EQ(tsr_report_format(rep, small, sizeof small, &need), TSR_SUCCESS);
  EXPECT_EQ(std::string(small), table.substr(0, 15));
  ASSERT_EQ(tsr_report_destroy(&rep), TSR_SUCCESS);
  EXPECT_EQ(rep, nullptr);
  EXPECT_EQ(tsr_report_destroy(&rep), TSR_SUCCESS);
}

TEST(Report, Errors) {
  Ctx ctx;
  const int p = world_size(), me = world_rank();
  tsr_report rep = nullptr;
  EXPECT_EQ(tsr_report_create(nullptr, 0, &rep), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_create(ctx, p, &rep), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "'root' = " + std::to_string(p)));
  // A NULL output on one rank only fails everywhere.
  EXPECT_EQ(tsr_report_create(ctx, 0, me == p - 1 ? nullptr : &rep), TSR_ERR_INVALID_ARG);
  if (p > 1) {
    EXPECT_EQ(tsr_report_create(ctx, me == 0 ? 1 : 0, &rep), TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'root' differs across the"));
  }
  EXPECT_EQ(rep, nullptr);
  ASSERT_EQ(tsr_report_create(ctx, 0, &rep), TSR_SUCCESS);
  int n = 0;
  const char* path = nullptr;
  tsr_counters c;
  size_t need = 0;
  EXPECT_EQ(tsr_report_region_count(nullptr, &n), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_region_count(rep, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'count'"));
  EXPECT_EQ(tsr_report_region_path(rep, 5, &path), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'region' = 5"));
  EXPECT_EQ(tsr_report_region_path(rep, 0, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_region_path(nullptr, 0, &path), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_rank_counters(rep, 0, p, &c), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'rank'"));
  EXPECT_EQ(tsr_report_rank_counters(rep, -1, 0, &c), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_rank_counters(rep, 0, me, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_rank_counters(nullptr, 0, me, &c), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_stats(rep, 1, &c, nullptr, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_stats(nullptr, 0, &c, nullptr, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_format(rep, nullptr, 10, &need), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'buf' is NULL"));
  EXPECT_EQ(tsr_report_format(nullptr, nullptr, 0, &need), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_destroy(nullptr), TSR_ERR_INVALID_ARG);
  ASSERT_EQ(tsr_report_destroy(&rep), TSR_SUCCESS);
}

}  // namespace

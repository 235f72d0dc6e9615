// Grid arithmetic without MPI (lib/grid_shape.hpp): which shapes are valid,
// the order in which dims_create prefers them, choosing dimensions with
// constraints and idle ranks, the nearest valid counts in error messages, and
// node-aware placement. Every expectation is computed here by brute force
// from the documented rules, never with the library's own helpers.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "grid_shape.hpp"
#include "tessera/tessera.h"

namespace {

using tsr::Dims;

const tsr_grid_kind kKinds[] = {TSR_GRID_1D, TSR_GRID_2D, TSR_GRID_2P5D, TSR_GRID_3D};

std::string str(const Dims& d) {
  return "{" + std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]) + "}";
}

// The documented rules of tessera.h, written out independently.
bool valid_shape(tsr_grid_kind kind, const Dims& d) {
  if (d[0] < 1 || d[1] < 1 || d[2] < 1) return false;
  switch (kind) {
    case TSR_GRID_1D: return d[1] == 1 && d[2] == 1;
    case TSR_GRID_2D: return d[2] == 1;
    case TSR_GRID_2P5D: return d[0] == d[1] && d[2] <= d[0];
    case TSR_GRID_3D: return d[0] == d[1] && d[1] == d[2];
    case TSR_GRID_3D_ANY: return true;
  }
  return false;
}

bool honours(const Dims& d, const Dims& fixed) {
  for (int a = 0; a < 3; ++a)
    if (fixed[a] > 0 && fixed[a] != d[a]) return false;
  return true;
}

// Preference of dims_create: 2D most square with pr <= pc first (then the
// transposed shapes, most square first); 2.5D largest c first.
std::tuple<int, int> preference(tsr_grid_kind kind, const Dims& d) {
  if (kind == TSR_GRID_2D) return {d[0] > d[1] ? 1 : 0, std::abs(d[1] - d[0])};
  if (kind == TSR_GRID_2P5D) return {0, -d[2]};
  return {0, 0};
}

// Every valid shape with exactly n ranks honouring fixed, in preference order,
// by enumerating all factorisations a*b*c == n.
std::vector<Dims> brute_shapes(tsr_grid_kind kind, int n, const Dims& fixed) {
  std::vector<int> divisors;
  for (int a = 1; a * a <= n; ++a)
    if (n % a == 0) {
      divisors.push_back(a);
      if (a != n / a) divisors.push_back(n / a);
    }
  std::sort(divisors.begin(), divisors.end());
  std::vector<Dims> out;
  for (int a : divisors)
    for (int b : divisors) {
      if ((n / a) % b) continue;
      const Dims d{a, b, n / a / b};
      if (valid_shape(kind, d) && honours(d, fixed)) out.push_back(d);
    }
  std::stable_sort(out.begin(), out.end(),
                   [&](const Dims& x, const Dims& y) { return preference(kind, x) < preference(kind, y); });
  return out;
}

std::string entry(int m, const Dims& d) {
  return std::to_string(m) + " (" + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) +
         ")";
}

// The preferred shape of every count up to kMaxCount, per kind and constraint
// (memoised: the nearest-count searches look at many counts).
constexpr int kMaxCount = 1024;
const std::vector<std::vector<Dims>>& table(tsr_grid_kind kind, const Dims& fixed) {
  static std::map<std::pair<int, Dims>, std::vector<std::vector<Dims>>> memo;
  auto key = std::make_pair(static_cast<int>(kind), fixed);
  auto it = memo.find(key);
  if (it == memo.end()) {
    std::vector<std::vector<Dims>> t(kMaxCount + 1);
    for (int m = 1; m <= kMaxCount; ++m) t[static_cast<size_t>(m)] = brute_shapes(kind, m, fixed);
    it = memo.emplace(key, std::move(t)).first;
  }
  return it->second;
}

// The nearest counts below and above n (n excluded) with a shape honouring
// fixed: {count, preferred shape}, count 0 if there is none up to kMaxCount.
struct Nearest {
  int below = 0, above = 0;
  Dims below_dims{}, above_dims{};
  std::string text() const {
    if (below == 0 && above == 0) return "none";
    if (below == 0) return entry(above, above_dims);
    if (above == 0) return entry(below, below_dims);
    return entry(below, below_dims) + ", " + entry(above, above_dims);
  }
};
Nearest brute_nearest(tsr_grid_kind kind, int n, const Dims& fixed) {
  const std::vector<std::vector<Dims>>& t = table(kind, fixed);
  Nearest r;
  for (int m = n - 1; m >= 1 && r.below == 0; --m)
    if (!t[static_cast<size_t>(m)].empty()) {
      r.below = m;
      r.below_dims = t[static_cast<size_t>(m)][0];
    }
  for (int m = n + 1; m <= kMaxCount && r.above == 0; ++m)
    if (!t[static_cast<size_t>(m)].empty()) {
      r.above = m;
      r.above_dims = t[static_cast<size_t>(m)][0];
    }
  return r;
}

// A set of constraints to try for one kind and n: nothing fixed, each axis
// fixed to every value up to 9, and pairs of axes.
std::vector<Dims> constraints() {
  std::vector<Dims> v{{0, 0, 0}};
  for (int a = 0; a < 3; ++a)
    for (int x = 1; x <= 9; ++x) {
      Dims f{0, 0, 0};
      f[a] = x;
      v.push_back(f);
    }
  for (int x = 1; x <= 4; ++x)
    for (int y = 1; y <= 4; ++y) {
      v.push_back({x, y, 0});
      v.push_back({x, 0, y});
      v.push_back({0, x, y});
    }
  v.push_back({2, 2, 2});
  v.push_back({3, 3, 1});
  return v;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// ------------------------------------------------------------------ kinds
TEST(GridShape, KindNamesAndValidity) {
  EXPECT_STREQ(tsr::grid_kind_name(TSR_GRID_1D), "1D");
  EXPECT_STREQ(tsr::grid_kind_name(TSR_GRID_2D), "2D");
  EXPECT_STREQ(tsr::grid_kind_name(TSR_GRID_2P5D), "2.5D");
  EXPECT_STREQ(tsr::grid_kind_name(TSR_GRID_3D), "3D");
  EXPECT_STREQ(tsr::grid_kind_name(static_cast<tsr_grid_kind>(0)), "unknown");
  EXPECT_STREQ(tsr::grid_kind_name(TSR_GRID_3D_ANY), "3D-any");
  EXPECT_STREQ(tsr::grid_kind_name(static_cast<tsr_grid_kind>(6)), "unknown");
  for (int k = -2; k <= 7; ++k)
    EXPECT_EQ(tsr::grid_kind_valid(static_cast<tsr_grid_kind>(k)), k >= 1 && k <= 5) << "kind " << k;
}

// ------------------------------------------------------------ shape_problem
TEST(GridShape, ShapeProblemMatchesTheDocumentedRules) {
  int valid = 0, invalid = 0;
  for (tsr_grid_kind kind : kKinds)
    for (int a = -2; a <= 6; ++a)
      for (int b = -2; b <= 6; ++b)
        for (int c = -2; c <= 6; ++c) {
          const Dims d{a, b, c};
          const std::string why = tsr::shape_problem(kind, d);
          if (valid_shape(kind, d)) {
            EXPECT_EQ(why, "") << tsr::grid_kind_name(kind) << " " << str(d);
            ++valid;
          } else {
            EXPECT_NE(why, "") << tsr::grid_kind_name(kind) << " " << str(d) << " accepted";
            ++invalid;
          }
        }
  EXPECT_GT(valid, 50);
  EXPECT_GT(invalid, 1000);
  // The reasons say what is wrong.
  EXPECT_TRUE(contains(tsr::shape_problem(TSR_GRID_2D, {2, 0, 1}), ">= 1"));
  EXPECT_TRUE(contains(tsr::shape_problem(TSR_GRID_2D, {2, -3, 1}), "{2,-3,1}"));
  EXPECT_TRUE(contains(tsr::shape_problem(TSR_GRID_1D, {2, 2, 1}), "{p,1,1}"));
  EXPECT_TRUE(contains(tsr::shape_problem(TSR_GRID_2D, {2, 2, 2}), "{pr,pc,1}"));
  EXPECT_TRUE(contains(tsr::shape_problem(TSR_GRID_2P5D, {2, 3, 1}), "dims[0] must equal dims[1]"));
  EXPECT_TRUE(contains(tsr::shape_problem(TSR_GRID_2P5D, {2, 2, 3}), "c <= q"));
  EXPECT_TRUE(contains(tsr::shape_problem(TSR_GRID_3D, {2, 2, 1}), "{q,q,q}"));
  EXPECT_NE(tsr::shape_problem(static_cast<tsr_grid_kind>(9), {1, 1, 1}), "");
  // Boundaries of 2.5D: c == q is valid, c == q + 1 is not.
  for (int q = 1; q <= 10; ++q) {
    EXPECT_EQ(tsr::shape_problem(TSR_GRID_2P5D, {q, q, q}), "") << q;
    EXPECT_EQ(tsr::shape_problem(TSR_GRID_2P5D, {q, q, 1}), "") << q;
    EXPECT_NE(tsr::shape_problem(TSR_GRID_2P5D, {q, q, q + 1}), "") << q;
  }
}

// --------------------------------------------------------------- shapes_for
TEST(GridShape, ShapesForMatchesEnumerationForEveryKindAndCount) {
  for (tsr_grid_kind kind : kKinds)
    for (int n = 1; n <= 64; ++n)
      for (const Dims& fixed : constraints()) {
        const std::vector<Dims>& want = table(kind, fixed)[static_cast<size_t>(n)];
        const std::vector<Dims> got = tsr::shapes_for(kind, n, fixed);
        EXPECT_EQ(got, want) << tsr::grid_kind_name(kind) << " n=" << n << " fixed=" << str(fixed);
      }
  EXPECT_TRUE(tsr::shapes_for(TSR_GRID_1D, 0, {0, 0, 0}).empty());
  EXPECT_TRUE(tsr::shapes_for(TSR_GRID_2D, -4, {0, 0, 0}).empty());
}

TEST(GridShape, ShapesForKnownValues) {
  // A few values written out by hand, as a check on the enumeration itself.
  using V = std::vector<Dims>;
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_1D, 7, {0, 0, 0}), (V{{7, 1, 1}}));
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2D, 12, {0, 0, 0}),
            (V{{3, 4, 1}, {2, 6, 1}, {1, 12, 1}, {4, 3, 1}, {6, 2, 1}, {12, 1, 1}}));
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2D, 16, {0, 0, 0}), (V{{4, 4, 1}, {2, 8, 1}, {1, 16, 1}, {8, 2, 1}, {16, 1, 1}}));
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2D, 12, {0, 3, 0}), (V{{4, 3, 1}}));
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2P5D, 8, {0, 0, 0}), (V{{2, 2, 2}}));
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2P5D, 16, {0, 0, 0}), (V{{4, 4, 1}}));
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2P5D, 36, {0, 0, 0}), (V{{6, 6, 1}}));
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2P5D, 64, {0, 0, 0}), (V{{4, 4, 4}, {8, 8, 1}}));
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2P5D, 64, {0, 0, 1}), (V{{8, 8, 1}}));
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2P5D, 18, {0, 0, 0}), (V{{3, 3, 2}}));
  EXPECT_TRUE(tsr::shapes_for(TSR_GRID_2P5D, 12, {0, 0, 0}).empty());
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_2P5D, 32, {0, 0, 0}), (V{{4, 4, 2}}));
  EXPECT_TRUE(tsr::shapes_for(TSR_GRID_3D, 64, {0, 0, 2}).empty());
  EXPECT_EQ(tsr::shapes_for(TSR_GRID_3D, 64, {0, 0, 0}), (V{{4, 4, 4}}));
}

// -------------------------------------------------------------- choose_dims
TEST(GridShape, ChooseDimsMatchesEnumerationWithoutIdleRanks) {
  for (tsr_grid_kind kind : kKinds)
    for (int n = 1; n <= 64; ++n)
      for (const Dims& fixed : constraints()) {
        const std::vector<Dims>& want = table(kind, fixed)[static_cast<size_t>(n)];
        Dims d = fixed;
        int used = -7;
        const tsr_status st = tsr::choose_dims(kind, n, false, &d, &used);
        const std::string what = std::string(tsr::grid_kind_name(kind)) + " n=" + std::to_string(n) +
                                 " fixed=" + str(fixed);
        if (!want.empty()) {
          ASSERT_EQ(st, TSR_SUCCESS) << what << ": " << tsr_last_error(nullptr);
          EXPECT_EQ(d, want[0]) << what;
          EXPECT_EQ(used, n) << what;
          EXPECT_EQ(d[0] * d[1] * d[2], n) << what;
        } else {
          ASSERT_EQ(st, TSR_ERR_SHAPE) << what << " gave " << str(d);
          EXPECT_EQ(d, fixed) << what << ": dims changed on failure";
        }
      }
}

TEST(GridShape, ChooseDimsWithIdleRanksTakesTheLargestCountThatFits) {
  for (tsr_grid_kind kind : kKinds)
    for (int n = 1; n <= 64; ++n)
      for (const Dims& fixed : constraints()) {
        const std::vector<std::vector<Dims>>& t = table(kind, fixed);
        int m = n;
        while (m >= 1 && t[static_cast<size_t>(m)].empty()) --m;
        Dims d = fixed;
        int used = -7;
        const tsr_status st = tsr::choose_dims(kind, n, true, &d, &used);
        const std::string what = std::string(tsr::grid_kind_name(kind)) + " n=" + std::to_string(n) +
                                 " fixed=" + str(fixed);
        if (m >= 1) {
          ASSERT_EQ(st, TSR_SUCCESS) << what << ": " << tsr_last_error(nullptr);
          EXPECT_EQ(used, m) << what;
          EXPECT_EQ(d, t[static_cast<size_t>(m)][0]) << what;
        } else {
          EXPECT_EQ(st, TSR_ERR_SHAPE) << what;
        }
      }
}

TEST(GridShape, ChooseDimsKnownValues) {
  struct Case {
    tsr_grid_kind kind;
    int n;
    bool idle;
    Dims fixed, want;
    int used;
  };
  const Case cases[] = {
      {TSR_GRID_2D, 12, false, {0, 0, 0}, {3, 4, 1}, 12},  {TSR_GRID_2D, 7, false, {0, 0, 0}, {1, 7, 1}, 7},
      {TSR_GRID_2D, 12, false, {6, 0, 0}, {6, 2, 1}, 12},  {TSR_GRID_2D, 12, false, {0, 0, 1}, {3, 4, 1}, 12},
      {TSR_GRID_2D, 10, true, {3, 0, 0}, {3, 3, 1}, 9},    {TSR_GRID_2P5D, 12, true, {0, 0, 0}, {3, 3, 1}, 9},
      {TSR_GRID_2P5D, 8, false, {0, 0, 0}, {2, 2, 2}, 8},  {TSR_GRID_2P5D, 7, true, {0, 0, 0}, {2, 2, 1}, 4},
      {TSR_GRID_2P5D, 64, false, {0, 0, 0}, {4, 4, 4}, 64}, {TSR_GRID_2P5D, 64, false, {8, 0, 0}, {8, 8, 1}, 64},
      {TSR_GRID_2P5D, 40, true, {0, 0, 2}, {4, 4, 2}, 32}, {TSR_GRID_3D, 27, false, {0, 0, 0}, {3, 3, 3}, 27},
      {TSR_GRID_3D, 26, true, {0, 0, 0}, {2, 2, 2}, 8},    {TSR_GRID_3D, 7, true, {0, 0, 0}, {1, 1, 1}, 1},
      {TSR_GRID_1D, 5, true, {0, 0, 0}, {5, 1, 1}, 5},     {TSR_GRID_1D, 9, true, {4, 0, 0}, {4, 1, 1}, 4},
  };
  for (const Case& c : cases) {
    Dims d = c.fixed;
    int used = 0;
    ASSERT_EQ(tsr::choose_dims(c.kind, c.n, c.idle, &d, &used), TSR_SUCCESS)
        << tsr::grid_kind_name(c.kind) << " " << c.n << ": " << tsr_last_error(nullptr);
    EXPECT_EQ(d, c.want) << tsr::grid_kind_name(c.kind) << " " << c.n << " " << str(c.fixed);
    EXPECT_EQ(used, c.used) << tsr::grid_kind_name(c.kind) << " " << c.n << " " << str(c.fixed);
  }
}

// ------------------------------------------------------------ error messages
TEST(GridShape, ShapeErrorListsTheNearestCountsBelowAndAbove) {
  for (tsr_grid_kind kind : kKinds)
    for (int n = 1; n <= 64; ++n)
      for (const Dims& fixed : constraints()) {
        if (!table(kind, fixed)[static_cast<size_t>(n)].empty()) continue;
        Dims d = fixed;
        int used = 0;
        ASSERT_EQ(tsr::choose_dims(kind, n, false, &d, &used), TSR_ERR_SHAPE);
        // The internal functions leave the message pending; the public call
        // below stores it for tsr_last_error(NULL).
        int pd[3] = {fixed[0], fixed[1], fixed[2]};
        ASSERT_EQ(tsr_grid_dims_create(kind, n, 0, pd, nullptr), TSR_ERR_SHAPE);
        const std::string msg = tsr_last_error(nullptr);
        Nearest near = brute_nearest(kind, n, fixed);
        const std::string want = near.text();
        EXPECT_TRUE(contains(msg, want)) << tsr::grid_kind_name(kind) << " n=" << n << " fixed=" << str(fixed)
                                         << ": expected \"" << want << "\" in \"" << msg << "\"";
        EXPECT_TRUE(contains(msg, "tsr_grid_dims_create")) << msg;
        EXPECT_EQ(pd[0], fixed[0]);
        EXPECT_EQ(pd[1], fixed[1]);
        EXPECT_EQ(pd[2], fixed[2]);
      }
  int d[3] = {0, 0, 0};
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2P5D, 12, 0, d, nullptr), TSR_ERR_SHAPE);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "9 (3x3x1), 16 (4x4x1)")) << tsr_last_error(nullptr);
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_3D, 9, 0, d, nullptr), TSR_ERR_SHAPE);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "8 (2x2x2), 27 (3x3x3)")) << tsr_last_error(nullptr);
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2P5D, 2, 0, d, nullptr), TSR_ERR_SHAPE);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "1 (1x1x1), 4 (2x2x1)")) << tsr_last_error(nullptr);
}

TEST(GridShape, NearestShapesMatchesEnumeration) {
  for (tsr_grid_kind kind : kKinds)
    for (int n = 1; n <= 64; ++n)
      for (const Dims& fixed : constraints()) {
        Nearest near = brute_nearest(kind, n, fixed);
        EXPECT_EQ(tsr::nearest_shapes(kind, n, fixed), near.text())
            << tsr::grid_kind_name(kind) << " n=" << n << " fixed=" << str(fixed);
      }
  EXPECT_EQ(tsr::nearest_shapes(TSR_GRID_3D, 1, {0, 0, 0}), "8 (2x2x2)");
  EXPECT_EQ(tsr::nearest_shapes(TSR_GRID_1D, 5, {0, 2, 0}), "none");
}

// The nearest count above must be found whatever n and the constraints are:
// a constraint can push it beyond 2n+64, and for n >= 2^20 the search above
// is skipped entirely (lib/grid_shape.cpp, nearest_shapes: `limit`).
TEST(GridShape, NearestCountAboveIsFoundBeyondTheSearchLimit) {
  int d[3] = {0, 100, 0};
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2D, 5, 0, d, nullptr), TSR_ERR_SHAPE);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "100 (1x100x1)")) << tsr_last_error(nullptr);

  const int n = (1 << 20) + 1;  // 101^3 = 1030301 < n < 102^3 = 1061208
  int e[3] = {0, 0, 0};
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_3D, n, 0, e, nullptr), TSR_ERR_SHAPE);
  const std::string msg = tsr_last_error(nullptr);
  EXPECT_TRUE(contains(msg, "1030301 (101x101x101)")) << msg;
  EXPECT_TRUE(contains(msg, "1061208 (102x102x102)")) << msg;
}

TEST(GridShape, InvalidArgumentsAreInvalidArgNotShape) {
  for (int k : {0, 6, -1, 100}) {
    Dims d{0, 0, 0};
    int used = 0;
    EXPECT_EQ(tsr::choose_dims(static_cast<tsr_grid_kind>(k), 8, false, &d, &used), TSR_ERR_INVALID_ARG) << k;
    int pd[3] = {0, 0, 0};
    EXPECT_EQ(tsr_grid_dims_create(static_cast<tsr_grid_kind>(k), 8, 1, pd, &used), TSR_ERR_INVALID_ARG) << k;
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "'kind'")) << tsr_last_error(nullptr);
  }
  for (tsr_grid_kind kind : kKinds)
    for (int n : {0, -1, -64, INT_MIN}) {
      for (int idle = 0; idle <= 1; ++idle) {
        int pd[3] = {0, 0, 0}, used = 0;
        EXPECT_EQ(tsr_grid_dims_create(kind, n, idle, pd, &used), TSR_ERR_INVALID_ARG) << n;
        EXPECT_TRUE(contains(tsr_last_error(nullptr), "'nranks'")) << tsr_last_error(nullptr);
      }
    }
  for (tsr_grid_kind kind : kKinds)
    for (int a = 0; a < 3; ++a) {
      int pd[3] = {0, 0, 0}, used = 0;
      pd[a] = -2;
      EXPECT_EQ(tsr_grid_dims_create(kind, 8, 1, pd, &used), TSR_ERR_INVALID_ARG);
      const std::string name = "dims[" + std::to_string(a) + "]";
      EXPECT_TRUE(contains(tsr_last_error(nullptr), name)) << tsr_last_error(nullptr);
      EXPECT_EQ(pd[a], -2);
    }
  int used = 0;
  EXPECT_EQ(tsr_grid_dims_create(TSR_GRID_2D, 8, 0, nullptr, &used), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'dims'")) << tsr_last_error(nullptr);
  int pd[3] = {0, 0, 0};
  EXPECT_EQ(tsr_grid_dims_create(TSR_GRID_2D, 8, 1, pd, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'nused'")) << tsr_last_error(nullptr);
  // nused may be NULL without idle ranks.
  EXPECT_EQ(tsr_grid_dims_create(TSR_GRID_2D, 8, 0, pd, nullptr), TSR_SUCCESS);
  EXPECT_EQ(pd[0], 2);
  EXPECT_EQ(pd[1], 4);
  EXPECT_EQ(pd[2], 1);
}

TEST(GridShape, PublicDimsCreateAgreesWithTheEnumeration) {
  for (tsr_grid_kind kind : kKinds)
    for (int n = 1; n <= 64; ++n) {
      const std::vector<std::vector<Dims>>& t = table(kind, {0, 0, 0});
      int m = n;
      while (t[static_cast<size_t>(m)].empty()) --m;
      const Dims want = t[static_cast<size_t>(m)][0];
      int d[3] = {0, 0, 0}, used = -1;
      ASSERT_EQ(tsr_grid_dims_create(kind, n, 1, d, &used), TSR_SUCCESS) << tsr_last_error(nullptr);
      EXPECT_EQ(used, m);
      EXPECT_EQ((Dims{d[0], d[1], d[2]}), want) << tsr::grid_kind_name(kind) << " " << n;
      int e[3] = {0, 0, 0};
      EXPECT_EQ(tsr_grid_dims_create(kind, n, 0, e, nullptr), m == n ? TSR_SUCCESS : TSR_ERR_SHAPE);
    }
}

// Huge rank counts must still be answered (no overflow in the integer square
// and cube roots of shapes_for). Run in a child process with an alarm, so
// that a hang fails the test instead of the whole executable.
[[noreturn]] void dims_create_and_exit(tsr_grid_kind kind, int n) {
  alarm(4);
  int d[3] = {0, 0, 0};
  const tsr_status st = tsr_grid_dims_create(kind, n, 0, d, nullptr);
  std::_Exit(st == TSR_SUCCESS || st == TSR_ERR_SHAPE ? 0 : 3);
}

TEST(GridShapeDeathTest, HugeRankCountsAreAnsweredPromptly) {
  EXPECT_EXIT(dims_create_and_exit(TSR_GRID_2D, INT_MAX), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(dims_create_and_exit(TSR_GRID_3D, INT_MAX), ::testing::ExitedWithCode(0), "");
}

// The answers at huge counts, computed here with 64-bit arithmetic.
long long isqrt_ll(long long x) {
  long long r = 0;
  while ((r + 1) * (r + 1) <= x) ++r;
  return r;
}
TEST(GridShape, HugeRankCountsGiveTheRightAnswer) {
  const long long big[] = {INT_MAX, INT_MAX - 1, 2146689000LL, 2146689001LL, 1000000007LL};
  for (long long n : big) {
    SCOPED_TRACE("n=" + std::to_string(n));
    // 2D: the most square divisor pair.
    long long pr = 1;
    for (long long a = 1; a * a <= n; ++a)
      if (n % a == 0) pr = a;
    int d[3] = {0, 0, 0};
    ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2D, static_cast<int>(n), 0, d, nullptr), TSR_SUCCESS)
        << tsr_last_error(nullptr);
    EXPECT_EQ(d[0], pr);
    EXPECT_EQ(d[1], n / pr);
    EXPECT_EQ(d[2], 1);
    // 3D: the largest cube that fits.
    long long q = 1;
    while ((q + 1) * (q + 1) * (q + 1) <= n) ++q;
    int e[3] = {0, 0, 0}, used = 0;
    ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_3D, static_cast<int>(n), 1, e, &used), TSR_SUCCESS);
    EXPECT_EQ(used, q * q * q);
    EXPECT_EQ(e[0], q);
    EXPECT_EQ(e[2], q);
    int f[3] = {0, 0, 0};
    const tsr_status st3 = tsr_grid_dims_create(TSR_GRID_3D, static_cast<int>(n), 0, f, nullptr);
    if (q * q * q == n) {
      EXPECT_EQ(st3, TSR_SUCCESS);
    } else {
      EXPECT_EQ(st3, TSR_ERR_SHAPE);
      const std::string qs = std::to_string(q);
      EXPECT_TRUE(contains(tsr_last_error(nullptr), std::to_string(q * q * q) + " (" + qs + "x" + qs + "x" + qs + ")"))
          << tsr_last_error(nullptr);
    }
    // 2.5D with idle ranks: the largest q*q*c <= n with c <= q, largest c on ties.
    long long best = 0, bq = 0, bc = 0;
    for (long long c = 1; c * c * c <= n; ++c) {
      const long long qq = isqrt_ll(n / c);
      if (qq < c) continue;
      const long long m = qq * qq * c;
      if (m > best || (m == best && c > bc)) {
        best = m;
        bq = qq;
        bc = c;
      }
    }
    int g[3] = {0, 0, 0};
    ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2P5D, static_cast<int>(n), 1, g, &used), TSR_SUCCESS);
    EXPECT_EQ(used, best);
    EXPECT_EQ(g[0], bq);
    EXPECT_EQ(g[1], bq);
    EXPECT_EQ(g[2], bc);
  }
}

// ------------------------------------------------------------------ place
// Node sizes of a node map (nodes need not be consecutive).
std::vector<int> node_sizes(const std::vector<int>& node_of) {
  int nn = 0;
  for (int x : node_of) nn = std::max(nn, x + 1);
  std::vector<int> s(static_cast<size_t>(nn), 0);
  for (int x : node_of) s[static_cast<size_t>(x)] += 1;
  return s;
}

void check_place(const std::vector<int>& node_of, int ngrid, int run) {
  SCOPED_TRACE("nranks=" + std::to_string(node_of.size()) + " ngrid=" + std::to_string(ngrid) +
               " run=" + std::to_string(run));
  const int n = static_cast<int>(node_of.size());
  const std::vector<int> order = tsr::place(node_of, ngrid, run);
  ASSERT_EQ(static_cast<int>(order.size()), ngrid);
  std::set<int> used;
  for (int r : order) {
    ASSERT_GE(r, 0);
    ASSERT_LT(r, n);
    EXPECT_TRUE(used.insert(r).second) << "rank " << r << " placed twice";
  }
  // Runs inside one node: the largest possible number is
  // min(ngrid/run, sum over nodes of floor(size/run)).
  int within = 0;
  for (int k = 0; k + run <= ngrid; k += run) {
    bool inside = true;
    for (int x = 1; x < run; ++x) inside = inside && node_of[static_cast<size_t>(order[static_cast<size_t>(k + x)])] ==
                                                      node_of[static_cast<size_t>(order[static_cast<size_t>(k)])];
    within += inside ? 1 : 0;
  }
  int fit = 0;
  for (int s : node_sizes(node_of)) fit += s / run;
  EXPECT_EQ(within, std::min(ngrid / run, fit));
  // Idle ranks come from the leftovers (the ranks of each node, in ascending
  // order, beyond its whole runs) as long as there are enough of them.
  std::set<int> leftovers;
  {
    std::vector<int> seen(node_sizes(node_of).size(), 0);
    const std::vector<int> sizes = node_sizes(node_of);
    for (int r = 0; r < n; ++r) {
      const size_t nd = static_cast<size_t>(node_of[static_cast<size_t>(r)]);
      if (seen[nd] >= sizes[nd] / run * run) leftovers.insert(r);
      seen[nd] += 1;
    }
  }
  std::set<int> idle;
  for (int r = 0; r < n; ++r)
    if (!used.count(r)) idle.insert(r);
  if (idle.size() <= leftovers.size()) {
    for (int r : idle) EXPECT_TRUE(leftovers.count(r)) << "idle rank " << r << " is not a leftover";
  } else {
    for (int r : leftovers) EXPECT_TRUE(idle.count(r)) << "leftover rank " << r << " is in the grid";
  }
}

TEST(GridShape, PlaceUnevenNodes332) {
  const std::vector<int> node_of{0, 0, 0, 1, 1, 1, 2, 2};
  for (int run : {1, 2, 4, 8})
    for (int ngrid = run; ngrid <= 8; ngrid += run) check_place(node_of, ngrid, run);
  // Spelled out: runs of 2 are {0,1}, {3,4}, {6,7}, then the leftovers 2, 5.
  EXPECT_EQ(tsr::place(node_of, 8, 2), (std::vector<int>{0, 1, 3, 4, 6, 7, 2, 5}));
  EXPECT_EQ(tsr::place(node_of, 6, 2), (std::vector<int>{0, 1, 3, 4, 6, 7}));
  // Runs of 4 fit in no node: the ranks in order.
  EXPECT_EQ(tsr::place(node_of, 8, 4), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(tsr::place(node_of, 4, 4), (std::vector<int>{0, 1, 2, 3}));
  // Runs of 3: {0,1,2}, {3,4,5}; ranks 6, 7 stay idle.
  EXPECT_EQ(tsr::place(node_of, 6, 3), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(GridShape, PlaceManyNodeMaps) {
  std::vector<std::vector<int>> maps;
  maps.push_back({0});
  maps.push_back({0, 0, 0, 0, 0, 0});
  maps.push_back({0, 1, 2, 3, 4, 5, 6});
  maps.push_back({0, 0, 1, 1, 2, 2, 3});              // nodes of 2, last of 1
  maps.push_back({0, 0, 0, 0, 1, 1, 1, 1, 2, 2});     // 4, 4, 2
  maps.push_back({0, 1, 0, 1, 0, 1, 0, 1, 2});        // interleaved nodes
  maps.push_back({2, 2, 0, 1, 1, 0, 0, 2, 1, 1, 1, 0}); // unordered ids
  for (int n = 1; n <= 16; ++n) {
    std::vector<int> m(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) m[static_cast<size_t>(r)] = (r * 7 + 3) % 4 % (n < 4 ? n : 4);
    maps.push_back(m);
  }
  for (const std::vector<int>& node_of : maps) {
    const int n = static_cast<int>(node_of.size());
    for (int run = 1; run <= n; ++run)
      for (int ngrid = run; ngrid <= n; ngrid += run) check_place(node_of, ngrid, run);
  }
}

}  // namespace

// ----------------------------------------------------------- 3D, any shape
// TSR_GRID_3D_ANY (shape-driven 3D grids such as a GEMM plan's): every
// a x b x c is valid; shapes come most cubic first (then sorted a <= b <= c).
TEST(GridShape, AnyThreeDimensionalShapeTakesEveryFactorisationMostCubicFirst) {
  EXPECT_EQ(tsr::shape_problem(TSR_GRID_3D_ANY, {2, 3, 5}), "");
  EXPECT_NE(tsr::shape_problem(TSR_GRID_3D_ANY, {0, 3, 5}), "");
  for (int n = 1; n <= 300; ++n) {
    const std::vector<Dims> v = tsr::shapes_for(TSR_GRID_3D_ANY, n, {0, 0, 0});
    size_t count = 0;
    for (int a = 1; a <= n; ++a)
      for (int b = 1; b <= n; ++b)
        if (n % a == 0 && (n / a) % b == 0) ++count;
    ASSERT_EQ(v.size(), count) << n;
    double best = 1e30;
    for (const Dims& d : v) {
      EXPECT_EQ(d[0] * d[1] * d[2], n);
      best = std::min(best, static_cast<double>(std::max({d[0], d[1], d[2]})) / std::min({d[0], d[1], d[2]}));
    }
    const Dims& f = v[0];
    EXPECT_DOUBLE_EQ(static_cast<double>(std::max({f[0], f[1], f[2]})) / std::min({f[0], f[1], f[2]}), best) << n;
    EXPECT_TRUE(f[0] <= f[1] && f[1] <= f[2]) << n << ": " << str(f);
  }
  Dims d{0, 0, 0};
  int used = 0;
  ASSERT_EQ(tsr::choose_dims(TSR_GRID_3D_ANY, 12, false, &d, &used), TSR_SUCCESS);
  EXPECT_EQ(d, (Dims{2, 2, 3}));
  d = {0, 0, 4};
  ASSERT_EQ(tsr::choose_dims(TSR_GRID_3D_ANY, 12, false, &d, &used), TSR_SUCCESS);
  EXPECT_EQ(d, (Dims{1, 3, 4}));
  d = {5, 0, 0};
  ASSERT_EQ(tsr::choose_dims(TSR_GRID_3D_ANY, 12, true, &d, &used), TSR_SUCCESS);
  EXPECT_EQ(used, 10);
  EXPECT_EQ(d[0], 5);
  EXPECT_EQ(d[0] * d[1] * d[2], 10);
  d = {5, 0, 0};
  EXPECT_EQ(tsr::choose_dims(TSR_GRID_3D_ANY, 12, false, &d, &used), TSR_ERR_SHAPE);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "10 (5x1x2)") || contains(tsr::nearest_shapes(TSR_GRID_3D_ANY, 12, {5, 0, 0}), "10"))
      << tsr::nearest_shapes(TSR_GRID_3D_ANY, 12, {5, 0, 0});
  int e[3] = {0, 0, 0};
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_3D_ANY, INT_MAX, 0, e, nullptr), TSR_SUCCESS);  // a prime: 1 x 1 x p
  EXPECT_EQ(static_cast<long long>(e[0]) * e[1] * e[2], static_cast<long long>(INT_MAX));
}

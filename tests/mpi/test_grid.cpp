// Process grids over a context (tsr_grid_*), on every rank count: every
// shape of every kind that fits, with and without idle ranks and simulated
// nodes; coordinates, placement and the axis communicators checked with plain
// MPI against expectations computed here from the documented formulas; and
// every error path with its status and message.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace {

using Dims = std::array<int, 3>;

const tsr_grid_kind kKinds[] = {TSR_GRID_1D, TSR_GRID_2D, TSR_GRID_2P5D, TSR_GRID_3D};
const tsr_grid_axis kAxes[] = {TSR_AXIS_ROW, TSR_AXIS_COL, TSR_AXIS_DEPTH, TSR_AXIS_LAYER, TSR_AXIS_ALL};
const char* const kAxisNames[] = {"ROW", "COL", "DEPTH", "LAYER", "ALL"};

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::string str(const int* d) {
  return "{" + std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]) + "}";
}
bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// Documented validity of shapes (tessera.h, tsr_grid_kind).
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

// Every valid shape of kind with exactly m ranks (any order).
std::vector<Dims> shapes(tsr_grid_kind kind, int m) {
  std::vector<Dims> v;
  for (int a = 1; a <= m; ++a)
    for (int b = 1; b <= m; ++b)
      for (int c = 1; c <= m; ++c)
        if (a * b * c == m && valid_shape(kind, {a, b, c})) v.push_back({a, b, c});
  return v;
}

// The shape tsr_grid_dims_create prefers for exactly m ranks (2D: most square
// with pr <= pc; 2.5D: largest c), or {0,0,0} if none.
Dims preferred(tsr_grid_kind kind, int m) {
  Dims best{0, 0, 0};
  for (const Dims& d : shapes(kind, m)) {
    if (best[0] == 0) {
      best = d;
      continue;
    }
    if (kind == TSR_GRID_2D) {
      const bool ok = d[0] <= d[1], bok = best[0] <= best[1];
      if ((ok && !bok) || (ok == bok && std::abs(d[1] - d[0]) < std::abs(best[1] - best[0]))) best = d;
    } else if (kind == TSR_GRID_2P5D && d[2] > best[2]) {
      best = d;
    }
  }
  return best;
}

std::string entry(int m, const Dims& d) {
  return std::to_string(m) + " (" + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) +
         ")";
}

// Nearest counts below and above m (m excluded) that have a shape.
std::string nearest_below(tsr_grid_kind kind, int m) {
  for (int x = m - 1; x >= 1; --x)
    if (preferred(kind, x)[0] > 0) return entry(x, preferred(kind, x));
  return "";
}
std::string nearest_above(tsr_grid_kind kind, int m) {
  for (int x = m + 1; x <= 4 * m + 64; ++x)
    if (preferred(kind, x)[0] > 0) return entry(x, preferred(kind, x));
  return "";
}

// Coordinates from a grid rank: grid_rank = (k*dims[0] + i)*dims[1] + j.
Dims coords_of(const Dims& d, int g) { return {(g / d[1]) % d[0], g % d[1], g / (d[0] * d[1])}; }
int rank_of(const Dims& d, const Dims& c) { return (c[2] * d[0] + c[0]) * d[1] + c[1]; }

// Expected size of an axis and the coordinates of its member at position q,
// seen from a rank at my coordinates.
int axis_size(const Dims& d, int a) {
  const int s[5] = {d[1], d[0], d[2], d[0] * d[1], d[0] * d[1] * d[2]};
  return s[a];
}
Dims axis_member(const Dims& d, int a, const Dims& me, int q) {
  switch (a) {
    case TSR_AXIS_ROW: return {me[0], q, me[2]};
    case TSR_AXIS_COL: return {q, me[1], me[2]};
    case TSR_AXIS_DEPTH: return {me[0], me[1], q};
    case TSR_AXIS_LAYER: return {q / d[1], q % d[1], me[2]};
    default: return coords_of(d, q);
  }
}
int axis_position(const Dims& d, int a, const Dims& me) {
  const int p[5] = {me[1], me[0], me[2], me[0] * d[1] + me[1], rank_of(d, me)};
  return p[a];
}

// The fastest-varying axis of extent > 1 (1 if there is none).
int run_length(const Dims& d) { return d[1] > 1 ? d[1] : d[0] > 1 ? d[0] : d[2]; }

tsr_context make_context(int ranks_per_node) {
  tsr_context ctx = nullptr;
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = ranks_per_node;
  EXPECT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
  return ctx;
}

// Contexts shared by the tests (creating one costs several collectives),
// created on first use (in the same order on every rank) and destroyed
// after the last test.
std::vector<std::pair<int, tsr_context>>& shared_contexts() {
  static std::vector<std::pair<int, tsr_context>> v;
  return v;
}
tsr_context shared(int ranks_per_node) {
  for (auto& rc : shared_contexts())
    if (rc.first == ranks_per_node) return rc.second;
  shared_contexts().push_back({ranks_per_node, make_context(ranks_per_node)});
  return shared_contexts().back().second;
}
class SharedContexts : public ::testing::Environment {
 public:
  void TearDown() override {
    for (auto& rc : shared_contexts()) EXPECT_EQ(tsr_context_destroy(&rc.second), TSR_SUCCESS);
    shared_contexts().clear();
  }
};
::testing::Environment* const kSharedContexts = ::testing::AddGlobalTestEnvironment(new SharedContexts);

// Node of every context rank: r / ranks_per_node for simulated nodes (and
// tsr_context_node must agree, checked locally), else what tsr_context_node
// reports, gathered with MPI.
std::vector<int> nodes_of(tsr_context ctx, int ranks_per_node) {
  int node = -1, nnodes = 0;
  EXPECT_EQ(tsr_context_node(ctx, &node, &nnodes), TSR_SUCCESS);
  const int n = world_size();
  std::vector<int> all(static_cast<size_t>(n));
  if (ranks_per_node > 0) {
    for (int r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r / ranks_per_node;
    EXPECT_EQ(node, world_rank() / ranks_per_node);
    EXPECT_EQ(nnodes, (n + ranks_per_node - 1) / ranks_per_node);
  } else {
    MPI_Allgather(&node, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  }
  return all;
}

// World ranks of the members of comm, in comm's rank order (local: groups).
std::vector<int> world_ranks_of(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  MPI_Group g = MPI_GROUP_NULL, w = MPI_GROUP_NULL;
  MPI_Comm_group(comm, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &w);
  std::vector<int> in(static_cast<size_t>(size)), out(static_cast<size_t>(size), -1);
  for (int q = 0; q < size; ++q) in[static_cast<size_t>(q)] = q;
  MPI_Group_translate_ranks(g, size, in.data(), w, out.data());
  MPI_Group_free(&g);
  MPI_Group_free(&w);
  return out;
}

// Placement counts computed by hand for some rank counts (see PlacementWithSimulatedNodes).
struct KnownRows {
  int size, rpn;
  Dims dims;
  int within, total;
};
const KnownRows kKnownRows[] = {
    {8, 3, {4, 2, 1}, 3, 4},  // nodes 3,3,2: one pair per node
    {8, 3, {2, 4, 1}, 0, 2},  // rows of 4 fit in no node
    {8, 4, {2, 4, 1}, 2, 2},  // one row per node
    {8, 2, {2, 2, 2}, 4, 4},  // rows of 2 on nodes of 2
    {8, 4, {8, 1, 1}, 0, 1},  // the whole column spans nodes
    {8, 2, {4, 2, 1}, 4, 4},  {6, 3, {2, 3, 1}, 2, 2}, {6, 4, {3, 2, 1}, 3, 3}, {6, 4, {2, 2, 1}, 2, 2},
    {6, 4, {2, 3, 1}, 1, 2},  {5, 2, {2, 2, 1}, 2, 2}, {5, 3, {2, 2, 1}, 2, 2}, {5, 4, {5, 1, 1}, 0, 1},
    {3, 2, {1, 3, 1}, 0, 1},  {3, 2, {1, 1, 1}, 1, 1}, {4, 3, {2, 2, 1}, 1, 2}, {4, 2, {2, 2, 1}, 2, 2},
};

// Everything about one grid, checked on every rank. One MPI_Allgather over
// the world collects what every rank reports; the axis communicators are
// then checked locally through their groups.
void check_grid(tsr_context ctx, int ranks_per_node, const std::vector<int>& node, tsr_grid_kind kind,
                const Dims& d) {
  SCOPED_TRACE("kind " + std::to_string(kind) + " dims " + str(d.data()) + " ranks_per_node " +
               std::to_string(ranks_per_node));
  const int n = world_size(), me = world_rank();
  const int ngrid = d[0] * d[1] * d[2];
  tsr_grid g = nullptr;
  ASSERT_EQ(tsr_grid_create(ctx, kind, d.data(), &g), TSR_SUCCESS) << tsr_last_error(ctx);
  ASSERT_NE(g, nullptr);

  tsr_grid_kind k = TSR_GRID_1D;
  EXPECT_EQ(tsr_grid_get_kind(g, &k), TSR_SUCCESS);
  EXPECT_EQ(k, kind);
  int gd[3] = {0, 0, 0};
  EXPECT_EQ(tsr_grid_get_dims(g, gd), TSR_SUCCESS);
  EXPECT_EQ((Dims{gd[0], gd[1], gd[2]}), d);

  // What this rank reports: grid rank, membership, coordinates, and its
  // position and size on every axis.
  constexpr int kRec = 15;
  int rec[kRec];
  int& grank = rec[0];
  int& member = rec[1];
  int* mc = rec + 2;
  grank = -2;
  member = -1;
  mc[0] = mc[1] = mc[2] = -5;
  EXPECT_EQ(tsr_grid_is_member(g, &member), TSR_SUCCESS);
  EXPECT_EQ(tsr_grid_my_rank(g, &grank), TSR_SUCCESS);
  EXPECT_EQ(tsr_grid_my_coords(g, mc), TSR_SUCCESS);
  MPI_Comm comms[5];
  for (int a = 0; a < 5; ++a) {
    comms[a] = MPI_COMM_WORLD;
    EXPECT_EQ(tsr_grid_comm(g, kAxes[a], &comms[a]), TSR_SUCCESS);
    rec[5 + 2 * a] = -9;
    rec[6 + 2 * a] = -9;
    EXPECT_EQ(tsr_grid_axis_info(g, kAxes[a], &rec[5 + 2 * a], &rec[6 + 2 * a]), TSR_SUCCESS);
  }
  EXPECT_TRUE(member == 0 || member == 1);
  if (member) {
    EXPECT_GE(grank, 0);
    EXPECT_LT(grank, ngrid);
    if (grank >= 0 && grank < ngrid) {
      EXPECT_EQ((Dims{mc[0], mc[1], mc[2]}), coords_of(d, grank));
    }
  } else {
    EXPECT_EQ(grank, -1);
    for (int a = 0; a < 5; ++a) {
      EXPECT_EQ(comms[a], MPI_COMM_NULL) << kAxisNames[a];
      EXPECT_EQ(rec[5 + 2 * a], -1) << kAxisNames[a];
      EXPECT_EQ(rec[6 + 2 * a], 0) << kAxisNames[a];
    }
  }
  std::vector<int> table(static_cast<size_t>(n * kRec));
  MPI_Allgather(rec, kRec, MPI_INT, table.data(), kRec, MPI_INT, MPI_COMM_WORLD);
  auto at = [&](int r, int field) { return table[static_cast<size_t>(r * kRec + field)]; };

  int members = 0;
  for (int r = 0; r < n; ++r) members += at(r, 1);
  EXPECT_EQ(members, ngrid);

  // Grid rank of every context rank, as each rank reports it.
  std::vector<int> ctx_of(static_cast<size_t>(ngrid), -1);
  for (int r = 0; r < n; ++r) {
    const int q = at(r, 0);
    if (q < 0) continue;
    if (q >= ngrid) {
      ADD_FAILURE() << "context rank " << r << " reports grid rank " << q;
      continue;
    }
    EXPECT_EQ(ctx_of[static_cast<size_t>(q)], -1) << "grid rank " << q << " held twice";
    ctx_of[static_cast<size_t>(q)] = r;
  }
  for (int q = 0; q < ngrid; ++q) {
    EXPECT_GE(ctx_of[static_cast<size_t>(q)], 0) << "grid rank " << q << " unheld";
  }

  // The two mappings are inverse permutations and match what ranks report.
  for (int r = 0; r < n; ++r) {
    int q = -7;
    EXPECT_EQ(tsr_grid_rank_of_context_rank(g, r, &q), TSR_SUCCESS);
    EXPECT_EQ(q, at(r, 0)) << "context rank " << r;
    if (q >= 0) {
      int back = -7;
      EXPECT_EQ(tsr_grid_context_rank(g, q, &back), TSR_SUCCESS);
      EXPECT_EQ(back, r);
    }
  }
  for (int q = 0; q < ngrid; ++q) {
    int r = -7;
    EXPECT_EQ(tsr_grid_context_rank(g, q, &r), TSR_SUCCESS);
    EXPECT_EQ(r, ctx_of[static_cast<size_t>(q)]) << "grid rank " << q;
  }

  // Coordinates <-> grid rank for every position.
  for (int q = 0; q < ngrid; ++q) {
    int c[3] = {-1, -1, -1};
    EXPECT_EQ(tsr_grid_coords(g, q, c), TSR_SUCCESS);
    EXPECT_EQ((Dims{c[0], c[1], c[2]}), coords_of(d, q)) << "grid rank " << q;
    int back = -1;
    EXPECT_EQ(tsr_grid_rank(g, c, &back), TSR_SUCCESS);
    EXPECT_EQ(back, q);
  }
  for (int kk = 0; kk < d[2]; ++kk)
    for (int i = 0; i < d[0]; ++i)
      for (int j = 0; j < d[1]; ++j) {
        const int c[3] = {i, j, kk};
        int q = -1;
        EXPECT_EQ(tsr_grid_rank(g, c, &q), TSR_SUCCESS);
        EXPECT_EQ(q, (kk * d[0] + i) * d[1] + j);
      }

  // Axis communicators: membership, order and size.
  const Dims mine{mc[0], mc[1], mc[2]};
  if (member) {
    for (int a = 0; a < 5; ++a) {
      SCOPED_TRACE(std::string("axis ") + kAxisNames[a]);
      const MPI_Comm comm = comms[a];
      if (comm == MPI_COMM_NULL) {
        ADD_FAILURE() << "a member has no communicator";
        continue;
      }
      int cmp = MPI_IDENT;
      MPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
      EXPECT_NE(cmp, MPI_IDENT);
      int csize = 0, crank = -1;
      MPI_Comm_size(comm, &csize);
      MPI_Comm_rank(comm, &crank);
      EXPECT_EQ(csize, axis_size(d, a));
      EXPECT_EQ(crank, axis_position(d, a, mine));
      EXPECT_EQ(rec[6 + 2 * a], csize);
      EXPECT_EQ(rec[5 + 2 * a], crank);
      const std::vector<int> w = world_ranks_of(comm);
      std::set<Dims> got, want;
      for (int q = 0; q < csize; ++q) {
        const int r = w[static_cast<size_t>(q)];
        if (r < 0 || r >= n) {
          ADD_FAILURE() << "position " << q << " is not a world rank";
          continue;
        }
        const Dims c{at(r, 2), at(r, 3), at(r, 4)};
        got.insert(c);
        want.insert(axis_member(d, a, mine, q));
        EXPECT_EQ(c, axis_member(d, a, mine, q)) << "position " << q;
        EXPECT_EQ(at(r, 1), 1) << "position " << q << " is an idle rank";
        // The member's context rank is the one the grid maps its coordinates to.
        EXPECT_EQ(r, ctx_of[static_cast<size_t>(rank_of(d, c))]) << "position " << q;
        // And it reports the same position and size on this axis.
        EXPECT_EQ(at(r, 5 + 2 * a), q);
        EXPECT_EQ(at(r, 6 + 2 * a), csize);
      }
      EXPECT_EQ(got, want);
      EXPECT_EQ(static_cast<int>(got.size()), csize);
    }
  }

  // Placement: runs of the fastest axis inside one node.
  const int run = run_length(d);
  int within = -1, total = -1;
  EXPECT_EQ(tsr_grid_rows_within_node(g, &within, &total), TSR_SUCCESS);
  EXPECT_EQ(total, ngrid / run);
  int counted = 0;
  for (int row = 0; row < ngrid / run; ++row) {
    bool inside = true;
    for (int x = 1; x < run; ++x)
      inside = inside && node[static_cast<size_t>(ctx_of[static_cast<size_t>(row * run + x)])] ==
                             node[static_cast<size_t>(ctx_of[static_cast<size_t>(row * run)])];
    counted += inside ? 1 : 0;
  }
  EXPECT_EQ(within, counted);
  std::vector<int> node_size(static_cast<size_t>(*std::max_element(node.begin(), node.end()) + 1), 0);
  for (int x : node) node_size[static_cast<size_t>(x)] += 1;
  int fit = 0;
  bool multiple = true;
  for (int s : node_size) {
    fit += s / run;
    multiple = multiple && s % run == 0;
  }
  EXPECT_EQ(within, std::min(ngrid / run, fit)) << "not the largest possible number of runs inside a node";
  if (multiple) {
    EXPECT_EQ(within, total);
    // And the communicator of that axis really lives on one node.
    const int runaxis = d[1] > 1 ? TSR_AXIS_ROW : d[0] > 1 ? TSR_AXIS_COL : TSR_AXIS_DEPTH;
    if (member && comms[runaxis] != MPI_COMM_NULL) {
      for (int r : world_ranks_of(comms[runaxis])) {
        EXPECT_EQ(node[static_cast<size_t>(r)], node[static_cast<size_t>(me)]) << "a run spans nodes";
      }
    }
  }
  for (const KnownRows& kr : kKnownRows)
    if (kr.size == n && kr.rpn == ranks_per_node && kr.dims == d) {
      EXPECT_EQ(within, kr.within) << "hand-computed case";
      EXPECT_EQ(total, kr.total) << "hand-computed case";
    }

  EXPECT_EQ(tsr_grid_destroy(&g), TSR_SUCCESS) << tsr_last_error(ctx);
  EXPECT_EQ(g, nullptr);
}

TEST(Grid, ContextRankIsWorldRank) {
  tsr_context ctx = shared(0);
  int r = -1, s = -1;
  EXPECT_EQ(tsr_context_rank(ctx, &r), TSR_SUCCESS);
  EXPECT_EQ(tsr_context_size(ctx, &s), TSR_SUCCESS);
  EXPECT_EQ(r, world_rank());
  EXPECT_EQ(s, world_size());
}

// Every shape of every kind with exactly size ranks, and for every kind the
// grid dims_create chooses with idle ranks allowed (the largest that fits;
// smaller than the context where the kind does not fit).
TEST(Grid, EveryShapeOfEveryKindAndIdleRanks) {
  const int n = world_size();
  tsr_context ctx = shared(0);
  const std::vector<int> node = nodes_of(ctx, 0);
  std::vector<std::pair<tsr_grid_kind, Dims>> todo;
  for (tsr_grid_kind kind : kKinds)
    for (const Dims& d : shapes(kind, n)) todo.push_back({kind, d});
  for (tsr_grid_kind kind : kKinds) {
    int m = n;
    while (preferred(kind, m)[0] == 0) --m;
    int d[3] = {0, 0, 0}, used = -1;
    ASSERT_EQ(tsr_grid_dims_create(kind, n, 1, d, &used), TSR_SUCCESS) << tsr_last_error(nullptr);
    EXPECT_EQ(used, m);
    EXPECT_EQ((Dims{d[0], d[1], d[2]}), preferred(kind, m));
    int e[3] = {0, 0, 0};
    EXPECT_EQ(tsr_grid_dims_create(kind, n, 0, e, nullptr), m == n ? TSR_SUCCESS : TSR_ERR_SHAPE);
    const std::pair<tsr_grid_kind, Dims> kd{kind, {d[0], d[1], d[2]}};
    if (std::find(todo.begin(), todo.end(), kd) == todo.end()) todo.push_back(kd);
  }
  for (const auto& kd : todo) check_grid(ctx, 0, node, kd.first, kd.second);
}

// Simulated nodes of 2, 3 and 4 ranks: placement keeps runs inside nodes as
// far as the node sizes allow. Shapes: those of the hand-computed cases at
// this size (rows of different lengths), else the preferred 2D grid and its
// transpose; with 2 ranks per node also the 2.5D grid that fits (with idle
// ranks where the count does not fit). Few shapes: every grid costs five
// communicator splits.
TEST(Grid, PlacementWithSimulatedNodes) {
  const int n = world_size();
  int d2[3] = {0, 0, 0}, d25[3] = {0, 0, 0}, used = 0;
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2D, n, 0, d2, nullptr), TSR_SUCCESS);
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2P5D, n, 1, d25, &used), TSR_SUCCESS);
  for (int rpn : {2, 3, 4}) {
    std::vector<std::pair<tsr_grid_kind, Dims>> todo;
    for (const KnownRows& kr : kKnownRows)
      if (kr.size == n && kr.rpn == rpn) todo.push_back({kr.dims[2] > 1 ? TSR_GRID_3D : TSR_GRID_2D, kr.dims});
    if (todo.empty()) {
      todo.push_back({TSR_GRID_2D, {d2[0], d2[1], 1}});
      todo.push_back({TSR_GRID_2D, {d2[1], d2[0], 1}});
    }
    if (rpn == 2) todo.push_back({TSR_GRID_2P5D, {d25[0], d25[1], d25[2]}});
    tsr_context ctx = shared(rpn);
    const std::vector<int> node = nodes_of(ctx, rpn);
    std::vector<Dims> done;
    for (const auto& kd : todo) {
      if (std::find(done.begin(), done.end(), kd.second) != done.end()) continue;  // same placement
      done.push_back(kd.second);
      check_grid(ctx, rpn, node, kd.first, kd.second);
    }
  }
}

// The user's communicator keeps its name and error handler, is not one of the
// grid's communicators, and may be freed while the context and grid live.
TEST(Grid, UserCommunicatorIsUntouched) {
  MPI_Comm mine = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &mine);
  MPI_Comm_set_name(mine, const_cast<char*>("user-comm"));
  MPI_Comm_set_errhandler(mine, MPI_ERRORS_ARE_FATAL);
  tsr_context ctx = nullptr;
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = 2;
  ASSERT_EQ(tsr_context_create_ex(mine, &cfg, &ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
  int d[3] = {0, 0, 0};
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2D, world_size(), 0, d, nullptr), TSR_SUCCESS);
  tsr_grid g = nullptr;
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_2D, d, &g), TSR_SUCCESS) << tsr_last_error(ctx);

  char name[MPI_MAX_OBJECT_NAME] = {0};
  int len = 0;
  MPI_Comm_get_name(mine, name, &len);
  EXPECT_STREQ(name, "user-comm");
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(mine, &eh);
  EXPECT_EQ(eh, MPI_ERRORS_ARE_FATAL);
  for (tsr_grid_axis a : kAxes) {
    MPI_Comm c = MPI_COMM_NULL;
    ASSERT_EQ(tsr_grid_comm(g, a, &c), TSR_SUCCESS);
    int cmp = MPI_IDENT;
    MPI_Comm_compare(c, mine, &cmp);
    EXPECT_NE(cmp, MPI_IDENT);
  }
  // No message of tessera's is left pending on it: a probe finds nothing.
  int flag = 1;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, mine, &flag, MPI_STATUS_IGNORE);
  EXPECT_EQ(flag, 0);
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, mine);
  EXPECT_EQ(sum, world_size());
  MPI_Comm_free(&mine);

  // The grid still works after the user's communicator is gone.
  MPI_Comm all = MPI_COMM_NULL;
  ASSERT_EQ(tsr_grid_comm(g, TSR_AXIS_ALL, &all), TSR_SUCCESS);
  sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, all);
  EXPECT_EQ(sum, world_size());
  EXPECT_EQ(tsr_grid_destroy(&g), TSR_SUCCESS);
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
}

// ----------------------------------------------------------------- errors
// The call failed with `want`, and the message (per context and per thread)
// names the function and contains every needle.
void expect_error(tsr_status got, tsr_status want, tsr_context ctx, const char* function,
                  std::initializer_list<std::string> needles) {
  EXPECT_EQ(got, want) << function << ": got " << tsr_status_name(got) << ", expected " << tsr_status_name(want);
  const std::string any = tsr_last_error(nullptr);
  EXPECT_TRUE(contains(any, function)) << "message \"" << any << "\" does not name " << function;
  for (const std::string& n : needles) {
    EXPECT_TRUE(contains(any, n)) << "\"" << n << "\" not in \"" << any << "\"";
  }
  if (ctx != nullptr) {
    EXPECT_EQ(std::string(tsr_last_error(ctx)), any);
  }
}

TEST(GridErrors, NullGrid) {
  tsr_grid_kind k;
  int d[3], x = 0, y = 0;
  MPI_Comm c;
  expect_error(tsr_grid_get_kind(nullptr, &k), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_get_kind", {"'grid'"});
  expect_error(tsr_grid_get_dims(nullptr, d), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_get_dims", {"'grid'"});
  expect_error(tsr_grid_is_member(nullptr, &x), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_is_member", {"'grid'"});
  expect_error(tsr_grid_my_rank(nullptr, &x), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_my_rank", {"'grid'"});
  expect_error(tsr_grid_my_coords(nullptr, d), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_my_coords", {"'grid'"});
  expect_error(tsr_grid_coords(nullptr, 0, d), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_coords", {"'grid'"});
  const int z[3] = {0, 0, 0};
  expect_error(tsr_grid_rank(nullptr, z, &x), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_rank", {"'grid'"});
  expect_error(tsr_grid_context_rank(nullptr, 0, &x), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_context_rank",
               {"'grid'"});
  expect_error(tsr_grid_rank_of_context_rank(nullptr, 0, &x), TSR_ERR_INVALID_ARG, nullptr,
               "tsr_grid_rank_of_context_rank", {"'grid'"});
  expect_error(tsr_grid_comm(nullptr, TSR_AXIS_ROW, &c), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_comm", {"'grid'"});
  expect_error(tsr_grid_rows_within_node(nullptr, &x, &y), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_rows_within_node",
               {"'grid'"});
  expect_error(tsr_grid_axis_info(nullptr, TSR_AXIS_ROW, &x, &y), TSR_ERR_INVALID_ARG, nullptr,
               "tsr_grid_axis_info", {"'grid'"});
  // Destroying: a NULL handle is a no-op, a NULL pointer to a handle is an error.
  tsr_grid none = nullptr;
  EXPECT_EQ(tsr_grid_destroy(&none), TSR_SUCCESS);
  expect_error(tsr_grid_destroy(nullptr), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_destroy", {"'grid'"});
  tsr_context noctx = nullptr;
  EXPECT_EQ(tsr_context_destroy(&noctx), TSR_SUCCESS);
}

TEST(GridErrors, NullOutputsAndOutOfRange) {
  const int n = world_size();
  tsr_context ctx = shared(0);
  int d[3] = {0, 0, 0}, used = 0;
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2D, n, 1, d, &used), TSR_SUCCESS);
  tsr_grid g = nullptr;
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_2D, d, &g), TSR_SUCCESS) << tsr_last_error(ctx);
  int x = 0, y = 0, c[3] = {0, 0, 0};
  MPI_Comm comm = MPI_COMM_NULL;
  expect_error(tsr_grid_get_kind(g, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_get_kind", {"'kind'"});
  expect_error(tsr_grid_get_dims(g, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_get_dims", {"'dims'"});
  expect_error(tsr_grid_is_member(g, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_is_member", {"'member'"});
  expect_error(tsr_grid_my_rank(g, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_my_rank", {"'grid_rank'"});
  expect_error(tsr_grid_my_coords(g, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_my_coords", {"'coords'"});
  expect_error(tsr_grid_coords(g, 0, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_coords", {"'coords'"});
  expect_error(tsr_grid_rank(g, nullptr, &x), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_rank", {"'coords'"});
  expect_error(tsr_grid_rank(g, c, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_rank", {"'grid_rank'"});
  expect_error(tsr_grid_context_rank(g, 0, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_context_rank",
               {"'context_rank'"});
  expect_error(tsr_grid_rank_of_context_rank(g, 0, nullptr), TSR_ERR_INVALID_ARG, ctx,
               "tsr_grid_rank_of_context_rank", {"'grid_rank'"});
  expect_error(tsr_grid_comm(g, TSR_AXIS_ROW, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_comm", {"'comm'"});
  expect_error(tsr_grid_rows_within_node(g, nullptr, &y), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_rows_within_node",
               {"'within'"});
  expect_error(tsr_grid_rows_within_node(g, &x, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_rows_within_node",
               {"'total'"});
  expect_error(tsr_grid_axis_info(g, TSR_AXIS_ROW, nullptr, &y), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_axis_info",
               {"'rank'"});
  expect_error(tsr_grid_axis_info(g, TSR_AXIS_ROW, &x, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_axis_info",
               {"'size'"});

  for (int q : {-1, used, used + 5, -1000}) {
    expect_error(tsr_grid_coords(g, q, c), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_coords",
                 {"'grid_rank' = " + std::to_string(q)});
    expect_error(tsr_grid_context_rank(g, q, &x), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_context_rank",
                 {"'grid_rank' = " + std::to_string(q)});
  }
  for (int r : {-1, n, n + 3}) {
    x = 12345;
    expect_error(tsr_grid_rank_of_context_rank(g, r, &x), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_rank_of_context_rank",
                 {"'context_rank' = " + std::to_string(r)});
    EXPECT_EQ(x, 12345) << "output written on failure";
  }
  for (int a = 0; a < 3; ++a)
    for (int v : {-1, d[a], d[a] + 2}) {
      int cc[3] = {0, 0, 0};
      cc[a] = v;
      expect_error(tsr_grid_rank(g, cc, &x), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_rank",
                   {"'coords[" + std::to_string(a) + "]' = " + std::to_string(v)});
    }
  for (int a : {-1, 5, 17}) {
    expect_error(tsr_grid_comm(g, static_cast<tsr_grid_axis>(a), &comm), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_comm",
                 {"'axis' = " + std::to_string(a)});
    expect_error(tsr_grid_axis_info(g, static_cast<tsr_grid_axis>(a), &x, &y), TSR_ERR_INVALID_ARG, ctx,
                 "tsr_grid_axis_info", {"'axis' = " + std::to_string(a)});
  }
  EXPECT_EQ(tsr_grid_destroy(&g), TSR_SUCCESS);
}

// Errors of tsr_grid_create made the same way on every rank.
TEST(GridErrors, CreateArgumentsOnEveryRank) {
  const int n = world_size();
  tsr_context ctx = shared(0);
  tsr_grid g = nullptr;
  const int ok[3] = {n, 1, 1};
  expect_error(tsr_grid_create(nullptr, TSR_GRID_1D, ok, &g), TSR_ERR_INVALID_ARG, nullptr, "tsr_grid_create",
               {"'ctx'"});
  expect_error(tsr_grid_create(ctx, TSR_GRID_1D, ok, nullptr), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_create",
               {"'grid'"});
  g = reinterpret_cast<tsr_grid>(&g);  // not NULL: a failing create must clear it
  expect_error(tsr_grid_create(ctx, TSR_GRID_1D, nullptr, &g), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_create",
               {"'dims'"});
  EXPECT_EQ(g, nullptr);
  for (int k : {0, 6, -1}) {
    g = reinterpret_cast<tsr_grid>(&g);
    expect_error(tsr_grid_create(ctx, static_cast<tsr_grid_kind>(k), ok, &g), TSR_ERR_INVALID_ARG, ctx,
                 "tsr_grid_create", {"'kind' = " + std::to_string(k)});
    EXPECT_EQ(g, nullptr);
  }

  // Invalid shapes: TSR_ERR_SHAPE naming the nearest valid counts and shapes.
  struct Bad {
    tsr_grid_kind kind;
    Dims d;
  };
  const Bad bad[] = {{TSR_GRID_1D, {1, 2, 1}},   {TSR_GRID_2D, {1, 1, 2}},   {TSR_GRID_2D, {1, 2, 2}},
                     {TSR_GRID_2P5D, {1, 2, 1}}, {TSR_GRID_2P5D, {2, 3, 1}}, {TSR_GRID_2P5D, {1, 1, 3}},
                     {TSR_GRID_3D, {2, 2, 1}},   {TSR_GRID_3D, {1, 2, 3}},   {TSR_GRID_2P5D, {2, 2, 3}}};
  for (const Bad& b : bad) {
    SCOPED_TRACE(std::to_string(b.kind) + " " + str(b.d.data()));
    const int m = b.d[0] * b.d[1] * b.d[2];
    g = reinterpret_cast<tsr_grid>(&g);
    const tsr_status st = tsr_grid_create(ctx, b.kind, b.d.data(), &g);
    expect_error(st, TSR_ERR_SHAPE, ctx, "tsr_grid_create", {"'dims'", str(b.d.data())});
    EXPECT_EQ(g, nullptr);
    if (m <= n) {
      const std::string msg = tsr_last_error(ctx);
      const std::string below = nearest_below(b.kind, m), above = nearest_above(b.kind, m);
      if (!below.empty()) {
        EXPECT_TRUE(contains(msg, below)) << below << " not in " << msg;
      }
      if (!above.empty()) {
        EXPECT_TRUE(contains(msg, above)) << above << " not in " << msg;
      }
      const Dims p = preferred(b.kind, m);
      if (p[0] > 0) {
        const std::string shape = std::to_string(p[0]) + "x" + std::to_string(p[1]) + "x" + std::to_string(p[2]);
        EXPECT_TRUE(contains(msg, shape)) << shape << " not in " << msg;
      }
    }
  }
  for (const Dims& d : {Dims{0, 1, 1}, Dims{1, 1, -3}}) {
    expect_error(tsr_grid_create(ctx, TSR_GRID_2D, d.data(), &g), TSR_ERR_SHAPE, ctx, "tsr_grid_create",
                 {"'dims'", str(d.data())});
  }

  // Valid shapes that need more ranks than the context has.
  int q3 = 1;
  while (q3 * q3 * q3 <= n) ++q3;
  int q2 = 1;
  while (q2 * q2 <= n) ++q2;
  const Bad big[] = {{TSR_GRID_1D, {n + 1, 1, 1}},    {TSR_GRID_2D, {n, 2, 1}},
                     {TSR_GRID_2P5D, {q2, q2, 1}},     {TSR_GRID_3D, {q3, q3, q3}},
                     {TSR_GRID_1D, {1 << 30, 1, 1}}, {TSR_GRID_3D, {2000, 2000, 2000}}};
  for (const Bad& b : big) {
    SCOPED_TRACE(std::to_string(b.kind) + " " + str(b.d.data()));
    g = reinterpret_cast<tsr_grid>(&g);
    expect_error(tsr_grid_create(ctx, b.kind, b.d.data(), &g), TSR_ERR_SHAPE, ctx, "tsr_grid_create",
                 {"'dims'", std::to_string(n)});
    EXPECT_EQ(g, nullptr);
    // The message names the largest count that fits in the context.
    int m = n;
    while (preferred(b.kind, m)[0] == 0) --m;
    EXPECT_TRUE(contains(tsr_last_error(ctx), entry(m, preferred(b.kind, m))))
        << entry(m, preferred(b.kind, m)) << " not in " << tsr_last_error(ctx);
  }

  // A valid grid still builds afterwards.
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_1D, ok, &g), TSR_SUCCESS) << tsr_last_error(ctx);
  EXPECT_EQ(tsr_grid_destroy(&g), TSR_SUCCESS);
}

// "needs N ranks but the context has n; nearest counts that fit: ..." must
// list only counts that fit in the context (lib/grid.cpp, local_checks, passes
// ctx->size + 1 to nearest_shapes, which also lists the next count above).
TEST(GridErrors, TooManyRanksMessageListsOnlyCountsThatFit) {
  const int n = world_size();
  tsr_context ctx = shared(0);
  for (tsr_grid_kind kind : kKinds) {
    int m = n + 1;
    while (preferred(kind, m)[0] == 0) ++m;
    const Dims d = preferred(kind, m);
    tsr_grid g = nullptr;
    expect_error(tsr_grid_create(ctx, kind, d.data(), &g), TSR_ERR_SHAPE, ctx, "tsr_grid_create", {"'dims'"});
    const std::string msg = tsr_last_error(ctx);
    const size_t fit = msg.find("fit");
    ASSERT_NE(fit, std::string::npos) << msg;
    const std::regex entry_re("([0-9]+) \\([0-9]+x[0-9]+x[0-9]+\\)");
    const std::string tail = msg.substr(fit);
    for (std::sregex_iterator it(tail.begin(), tail.end(), entry_re), end; it != end; ++it) {
      EXPECT_LE(std::stoll((*it)[1].str()), n) << "listed as fitting in " << n << " ranks: " << msg;
    }
  }
}

TEST(GridErrors, DimsDifferAcrossRanks) {
  const int n = world_size(), me = world_rank();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  tsr_context ctx = shared(0);
  tsr_grid g = nullptr;
  // Same kind, different dims (each valid on its own).
  const int a[3] = {1, n, 1}, b[3] = {n, 1, 1};
  expect_error(tsr_grid_create(ctx, TSR_GRID_2D, me == 0 ? a : b, &g), TSR_ERR_INVALID_ARG, ctx, "tsr_grid_create",
               {"differ"});
  EXPECT_EQ(g, nullptr);
  // Same dims, different kinds.
  expect_error(tsr_grid_create(ctx, me == n - 1 ? TSR_GRID_2D : TSR_GRID_1D, b, &g), TSR_ERR_INVALID_ARG, ctx,
               "tsr_grid_create", {"differ"});
  EXPECT_EQ(g, nullptr);
  // One rank asks for a smaller grid.
  const int c[3] = {n - 1, 1, 1};
  expect_error(tsr_grid_create(ctx, TSR_GRID_1D, me == n / 2 ? c : b, &g), TSR_ERR_INVALID_ARG, ctx,
               "tsr_grid_create", {"differ"});
  EXPECT_EQ(g, nullptr);
}

// A bad argument on the last rank only: every rank fails with that status,
// the others' message names the failing rank and its reason; nobody hangs.
TEST(GridErrors, BadArgumentOnOneRank) {
  const int n = world_size(), me = world_rank(), bad = n - 1;
  tsr_context ctx = shared(0);
  const int ok[3] = {n, 1, 1};
  const int wrong_shape[3] = {n, 2, 1};   // not 1D
  const int too_big[3] = {n + 1, 1, 1};   // more ranks than the context
  const int zero[3] = {n, 0, 1};
  struct Case {
    const char* what;
    tsr_grid_kind kind;
    const int* dims;
    bool null_grid;
    tsr_status status;
    const char* needle;
  };
  const Case cases[] = {
      {"NULL dims", TSR_GRID_1D, nullptr, false, TSR_ERR_INVALID_ARG, "'dims'"},
      {"NULL grid", TSR_GRID_1D, ok, true, TSR_ERR_INVALID_ARG, "'grid'"},
      {"invalid kind", static_cast<tsr_grid_kind>(9), ok, false, TSR_ERR_INVALID_ARG, "'kind'"},
      {"invalid shape", TSR_GRID_1D, wrong_shape, false, TSR_ERR_SHAPE, "'dims'"},
      {"zero dim", TSR_GRID_1D, zero, false, TSR_ERR_SHAPE, "'dims'"},
      {"too many ranks", TSR_GRID_1D, too_big, false, TSR_ERR_SHAPE, "'dims'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    tsr_grid g = reinterpret_cast<tsr_grid>(&g);
    const bool mine = me == bad;
    const tsr_status st = tsr_grid_create(ctx, mine ? c.kind : TSR_GRID_1D, mine ? c.dims : ok,
                                          mine && c.null_grid ? nullptr : &g);
    EXPECT_EQ(st, c.status) << tsr_status_name(st) << ": " << tsr_last_error(ctx);
    const std::string msg = tsr_last_error(ctx);
    EXPECT_TRUE(contains(msg, "tsr_grid_create")) << msg;
    EXPECT_TRUE(contains(msg, c.needle)) << msg;
    if (!mine) {
      EXPECT_TRUE(contains(msg, "rank " + std::to_string(bad) + " failed")) << msg;
    }
    if (!(mine && c.null_grid)) {
      EXPECT_EQ(g, nullptr);
    }
  }
  tsr_grid g = nullptr;
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_1D, ok, &g), TSR_SUCCESS) << tsr_last_error(ctx);
  EXPECT_EQ(tsr_grid_destroy(&g), TSR_SUCCESS);
}

TEST(GridErrors, ContextDestroyWithLiveGrid) {
  tsr_context ctx = make_context(2);
  const int ok[3] = {world_size(), 1, 1};
  tsr_grid g = nullptr;
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_2D, ok, &g), TSR_SUCCESS);
  tsr_context keep = ctx;
  expect_error(tsr_context_destroy(&ctx), TSR_ERR_STATE, keep, "tsr_context_destroy", {"grid"});
  EXPECT_EQ(ctx, keep) << "the handle must survive a failed destroy";
  // The context and the grid still work.
  int s = 0;
  EXPECT_EQ(tsr_context_size(ctx, &s), TSR_SUCCESS);
  EXPECT_EQ(s, world_size());
  int within = -1, total = -1;
  EXPECT_EQ(tsr_grid_rows_within_node(g, &within, &total), TSR_SUCCESS);
  EXPECT_EQ(tsr_grid_destroy(&g), TSR_SUCCESS);
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);  // NULL: a no-op
}

}  // namespace

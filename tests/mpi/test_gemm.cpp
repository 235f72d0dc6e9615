// Distributed GEMM on 1D, 2D, 2.5D and 3D grids (tsr_gemm, tsr_gemm_ex,
// tsr_gemm_execute): every algorithm and op combination against a serial
// reference computed here from the global matrices (per element, relative to
// sum |alpha a b| + |beta c|: 1e-12 in double, 1e-5 in float), on uneven
// shapes, m = 1, k = 1, k = 0, blocks that are empty, beta != 0 and beta = 0
// with NaN in C; the exact change of every counter of every rank against
// the per-rank formulas of docs/GEMM.md, computed here independently
// (ring all-gather / reduce-scatter, binomial-tree broadcasts, peer classes
// of simulated nodes of 2 ranks); redistribution (scatter, gather, layout
// conversion, block-cyclic) with exact point-to-point counts; the plan run
// end to end; and every error path, which must fail on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gemm_internal.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"
#include "tsr_test.hpp"

namespace {

using tsr_test::contains;
using tsr_test::world_rank;
using tsr_test::world_size;
using Dims = std::array<int, 3>;

constexpr int kRpn = 2;  // simulated ranks per node

// ------------------------------------------------------------- global data
// Element (i, j) of global matrix `id`: a hash in [-1, 1), the same on every rank.
double val(int id, int64_t i, int64_t j) {
  uint64_t h = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(id + 1) ^ (static_cast<uint64_t>(i) * 0xbf58476d1ce4e5b9ull) ^
               (static_cast<uint64_t>(j) * 0x94d049bb133111ebull);
  h ^= h >> 31;
  h *= 0xd6e8feb86659fd39ull;
  h ^= h >> 29;
  return static_cast<double>(h >> 11) / static_cast<double>(1ull << 52) - 1.0;
}

struct Local {
  int64_t rows = 0, cols = 0, ld = 1;
};
Local local_of(tsr_matrix m) {
  Local l;
  EXPECT_EQ(tsr_matrix_local_size(m, &l.rows, &l.cols, &l.ld), TSR_SUCCESS);
  return l;
}

template <class T>
std::vector<T> fill(tsr_matrix m, int id, bool nan = false) {
  const Local l = local_of(m);
  std::vector<T> v(static_cast<size_t>(std::max<int64_t>(1, l.ld * l.cols)), std::numeric_limits<T>::quiet_NaN());
  for (int64_t c = 0; c < l.cols; ++c)
    for (int64_t r = 0; r < l.rows; ++r) {
      int64_t gi = 0, gj = 0;
      EXPECT_EQ(tsr_matrix_global_index(m, r, c, &gi, &gj), TSR_SUCCESS);
      v[static_cast<size_t>(c * l.ld + r)] = nan ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(val(id, gi, gj));
    }
  return v;
}

// Largest relative error of this rank's C against the serial reference.
template <class T>
double local_error(tsr_matrix C, const std::vector<T>& c, int ida, int idb, int idc, bool ta, bool tb, int64_t k,
               double alpha, double beta) {
  const Local l = local_of(C);
  double worst = 0;
  for (int64_t cc = 0; cc < l.cols; ++cc)
    for (int64_t r = 0; r < l.rows; ++r) {
      int64_t i = 0, j = 0;
      tsr_matrix_global_index(C, r, cc, &i, &j);
      long double sum = 0, mag = 0;
      for (int64_t x = 0; x < k; ++x) {
        // op(A)(i, x) and op(B)(x, j), rounded to T as stored.
        const long double a = static_cast<T>(ta ? val(ida, x, i) : val(ida, i, x));
        const long double b = static_cast<T>(tb ? val(idb, j, x) : val(idb, x, j));
        sum += a * b;
        mag += std::fabs(static_cast<double>(a * b));
      }
      const long double c0 = beta == 0 ? 0 : static_cast<T>(val(idc, i, j));
      const long double want = alpha * sum + beta * c0;
      const long double scale = std::fabs(alpha) * mag + std::fabs(beta * static_cast<double>(c0)) + 1e-300;
      const double got = static_cast<double>(c[static_cast<size_t>(cc * l.ld + r)]);
      const double err = std::isfinite(got) ? static_cast<double>(std::fabs(got - want) / scale) : 1e300;
      worst = std::max(worst, err);
    }
  return worst;
}

// The same, agreed (maximum) over all ranks.
template <class T>
double check_c(tsr_matrix C, const std::vector<T>& c, int ida, int idb, int idc, bool ta, bool tb, int64_t k,
               double alpha, double beta) {
  const double worst = local_error<T>(C, c, ida, idb, idc, ta, tb, k, alpha, beta);
  double all = 0;
  MPI_Allreduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

template <class T>
constexpr tsr_dtype dtype() {
  return sizeof(T) == 8 ? TSR_FLOAT64 : TSR_FLOAT32;
}
template <class T>
constexpr double tol() {
  return sizeof(T) == 8 ? 1e-12 : 1e-5;
}

struct Grid {
  tsr_grid g = nullptr;
  Grid(tsr_context ctx, tsr_grid_kind kind, const Dims& d) {
    EXPECT_EQ(tsr_grid_create(ctx, kind, d.data(), &g), TSR_SUCCESS) << tsr_last_error(ctx);
  }
  ~Grid() { EXPECT_EQ(tsr_grid_destroy(&g), TSR_SUCCESS); }
  bool member() const {
    int m = 0;
    tsr_grid_is_member(g, &m);
    return m != 0;
  }
};

struct Mat {
  tsr_matrix h = nullptr;
  Mat(tsr_grid g, int64_t m, int64_t n, tsr_dtype t, const tsr_layout& l, int64_t ld = 0) {
    EXPECT_EQ(tsr_matrix_create(g, m, n, t, &l, ld, &h), TSR_SUCCESS) << tsr_last_error(nullptr);
  }
  ~Mat() { EXPECT_EQ(tsr_matrix_destroy(&h), TSR_SUCCESS); }
};

// One algorithm configuration on a grid.
struct Config {
  tsr_grid_kind kind;
  Dims dims;
  tsr_gemm_algo algo;
  std::array<int, 3> roles;
  int64_t panel = 0;
  int overlap = 1;
  std::string name() const {
    return std::string(tsr_gemm_algo_name(algo)) + " on " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) +
           "x" + std::to_string(dims[2]) + " roles {" + std::to_string(roles[0]) + "," + std::to_string(roles[1]) +
           "," + std::to_string(roles[2]) + "} panel " + std::to_string(panel) + (overlap ? "" : " no-overlap");
  }
};

std::vector<Config> all_configs(int p);
bool only_at_eight(const Config& c);

// The configurations run at a world size. Under oversubscription (8 ranks
// on a small machine) every collective costs a scheduler slice, so 8 ranks
// run the grids only they allow (2.5D with c = 2, 3D on a cube) in full and
// one configuration of the others; 1-4 ranks run every configuration.
std::vector<Config> configs(int p) {
  std::vector<Config> all = all_configs(p);
  if (p < 8) return all;
  std::vector<Config> out;
  bool one_d = false, two_d = false, three_on_2d = false;
  for (const Config& c : all) {
    bool keep = only_at_eight(c);
    if (!keep && c.algo == TSR_GEMM_1D && !one_d) keep = one_d = true;
    if (!keep && c.algo == TSR_GEMM_2D && !two_d) keep = two_d = true;
    if (!keep && c.algo == TSR_GEMM_3D && !three_on_2d) keep = three_on_2d = true;
    if (keep) out.push_back(c);
  }
  return out;
}

// Grids that exist at 8 ranks only: run every shape there.
bool only_at_eight(const Config& c) {
  return c.kind == TSR_GRID_2P5D || c.kind == TSR_GRID_3D || c.kind == TSR_GRID_3D_ANY;
}

// Every configuration that fits the world size.
std::vector<Config> all_configs(int p) {
  std::vector<Config> out;
  for (int r = 0; r < 3; ++r) {  // 1D: p splits m, n or k
    std::array<int, 3> roles{-1, -1, -1};
    if (p > 1) roles[static_cast<size_t>(r)] = 0;
    out.push_back({TSR_GRID_1D, {p, 1, 1}, TSR_GEMM_1D, roles});
    if (p == 1) break;
  }
  int d[3] = {0, 0, 0};
  tsr_grid_dims_create(TSR_GRID_2D, p, 0, d, nullptr);
  const Dims d2{d[0], d[1], 1};
  const int r0 = d2[0] > 1 ? 0 : -1, r1 = d2[1] > 1 ? 1 : -1;
  out.push_back({TSR_GRID_2D, d2, TSR_GEMM_2D, {r0, r1, -1}});
  out.push_back({TSR_GRID_2D, d2, TSR_GEMM_2D, {r1, r0, -1}, 2, 1});
  out.push_back({TSR_GRID_2D, d2, TSR_GEMM_2D, {r0, r1, -1}, 1, 0});
  if (r0 >= 0 && r1 >= 0) {
    out.push_back({TSR_GRID_2D, d2, TSR_GEMM_3D, {r0, r1, -1}});
    out.push_back({TSR_GRID_2D, d2, TSR_GEMM_3D, {r0, -1, r1}});
    out.push_back({TSR_GRID_2D, d2, TSR_GEMM_3D, {-1, r1, r0}});
  }
  if (p == 4) out.push_back({TSR_GRID_3D_ANY, {2, 1, 2}, TSR_GEMM_3D, {0, -1, 2}});
  if (p == 8) {
    out.push_back({TSR_GRID_3D_ANY, {1, 4, 2}, TSR_GEMM_3D, {-1, 1, 2}});
    out.push_back({TSR_GRID_2P5D, {2, 2, 2}, TSR_GEMM_2P5D, {0, 1, 2}});
    out.push_back({TSR_GRID_2P5D, {2, 2, 2}, TSR_GEMM_2P5D, {0, 1, 2}, 1, 1});
    out.push_back({TSR_GRID_3D, {2, 2, 2}, TSR_GEMM_3D, {0, 1, 2}});
    out.push_back({TSR_GRID_3D, {2, 2, 2}, TSR_GEMM_3D, {2, 0, 1}});
  }
  if (p == 1) {
    out.push_back({TSR_GRID_3D, {1, 1, 1}, TSR_GEMM_3D, {-1, -1, -1}});
    out.push_back({TSR_GRID_2P5D, {1, 1, 1}, TSR_GEMM_2P5D, {-1, -1, -1}});
  }
  return out;
}

struct Shape3 {
  int64_t m, n, k;
};
const Shape3 kShapes[] = {{13, 11, 7}, {1, 9, 5}, {6, 5, 1}, {3, 2, 4}, {4, 3, 0}};

// Runs every op on every shape for one configuration and type; beta = 0
// (NaN in C) and beta != 0 alternate with the op, the other way round for
// the other type, so that every op meets both.
//
// What runs (sized for CI on a 2-core machine, where 3 to 8 ranks are
// oversubscribed and MPICH busy-polls): double on every shape; float on the
// uneven and the tiny (empty blocks) shape; at 8 ranks the grids that exist
// only there (2.5D with c = 2 and the cube, roles {0,1,2}, whole panels) in
// full, the others on those two shapes in double.
bool wanted(const Config& cf, const Shape3& sh, bool dbl, int p) {
  const bool main_shape = sh.m == 13 || sh.m == 3;
  if (p < 8) return dbl || main_shape;
  const bool full = only_at_eight(cf) && cf.panel == 0 && cf.roles[0] == 0;
  if (full) return dbl || main_shape;
  return dbl && main_shape && (cf.panel == 0 || sh.m == 13);
}

template <class T>
void run_config(tsr_context ctx, const Config& cf, const Grid& grid) {
  for (const Shape3& sh : kShapes) {
    if (!wanted(cf, sh, sizeof(T) == 8, world_size())) continue;
    for (int op = 0; op < 4; ++op) {
      const bool ta = op & 1, tb = op & 2;
      const bool zero_beta = ((op + (sizeof(T) == 8 ? 0 : 1)) % 2) == 0;
      const double alpha = zero_beta ? 1.5 : -0.75, beta = zero_beta ? 0.0 : 0.5;
      tsr_layout lay[3];
      ASSERT_EQ(tsr_gemm_layouts(cf.algo, ta ? TSR_TRANS : TSR_NOTRANS, tb ? TSR_TRANS : TSR_NOTRANS, cf.roles.data(),
                                 lay),
                TSR_SUCCESS);
      Mat A(grid.g, ta ? sh.k : sh.m, ta ? sh.m : sh.k, dtype<T>(), lay[0]);
      Mat B(grid.g, tb ? sh.n : sh.k, tb ? sh.k : sh.n, dtype<T>(), lay[1]);
      Mat C(grid.g, sh.m, sh.n, dtype<T>(), lay[2], sh.m + 3);  // padded: strided local blocks
      std::vector<T> a = fill<T>(A.h, 1), b = fill<T>(B.h, 2), c = fill<T>(C.h, 3, zero_beta);
      tsr_gemm_options o = TSR_GEMM_OPTIONS_INIT;
      o.algo = cf.algo;
      o.panel = cf.panel;
      o.overlap = cf.overlap;
      const std::string what = cf.name() + ", " + std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" +
                               std::to_string(sh.k) + ", op " + (ta ? "T" : "N") + (tb ? "T" : "N") + ", beta " +
                               std::to_string(beta) + ", " + (sizeof(T) == 8 ? "double" : "float");
      ASSERT_EQ(tsr_gemm_ex(&o, ta ? TSR_TRANS : TSR_NOTRANS, tb ? TSR_TRANS : TSR_NOTRANS, alpha, A.h, a.data(), B.h,
                            b.data(), beta, C.h, c.data()),
                TSR_SUCCESS)
          << what << ": " << tsr_last_error(ctx);
      // Each rank checks its own block (the test main agrees on the verdict).
      EXPECT_LE(local_error<T>(C.h, c, 1, 2, 3, ta, tb, sh.k, alpha, beta), tol<T>()) << what;
    }
  }
}

// The workspace each call reserves covers everything the engines take.
void expect_no_workspace_overflow(tsr_context ctx) {
  const auto* pool = static_cast<const tsr::gemm::Pool*>(ctx->gemm_pool.get());
  EXPECT_EQ(pool ? pool->overflows : 0u, 0u) << "an engine took more workspace than work_bytes() reserved";
}

template <class T>
void run_all(tsr_context ctx) {
  const int p = world_size();
  for (const Config& cf : configs(p)) {
    Grid grid(ctx, cf.kind, cf.dims);
    run_config<T>(ctx, cf, grid);
  }
  expect_no_workspace_overflow(ctx);
}

TEST(Gemm, EveryAlgorithmAndOpAgainstTheSerialReferenceDouble) {
  tsr_test::Ctx ctx;
  run_all<double>(ctx);
}

TEST(Gemm, EveryAlgorithmAndOpAgainstTheSerialReferenceFloat) {
  tsr_test::Ctx ctx;
  run_all<float>(ctx);
}

TEST(Gemm, AutoPicksAnAlgorithmTheLayoutsFit) {
  tsr_test::Ctx ctx;
  const int p = world_size();
  int d[3] = {0, 0, 0};
  tsr_grid_dims_create(TSR_GRID_2D, p, 0, d, nullptr);
  Grid grid(ctx, TSR_GRID_2D, {d[0], d[1], 1});
  const tsr_layout l2 = TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE);
  Mat A(grid.g, 9, 8, TSR_FLOAT64, l2), B(grid.g, 8, 7, TSR_FLOAT64, l2), C(grid.g, 9, 7, TSR_FLOAT64, l2);
  std::vector<double> a = fill<double>(A.h, 1), b = fill<double>(B.h, 2), c = fill<double>(C.h, 3, true);
  ASSERT_EQ(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, A.h, a.data(), B.h, b.data(), 0.0, C.h, c.data()),
            TSR_SUCCESS)
      << tsr_last_error(ctx);
  EXPECT_LE(check_c<double>(C.h, c, 1, 2, 3, false, false, 8, 1.0, 0.0), 1e-12);
}

// ------------------------------------------------------------- counters
// The expected counters of one rank, built here from the documented
// definitions: each collective's payload and ring / binomial-tree wire model.
struct Expect {
  tsr_counters c = tsr_test::zero();
  const tsr_grid grid;
  const Dims dims, me;
  Expect(tsr_grid g, const Dims& d, const Dims& co) : grid(g), dims(d), me(co) {}

  // The peer class of the member at position q along grid dimension dim.
  tsr_peer_class cls(int dim, int q) const {
    Dims o = me;
    o[static_cast<size_t>(dim)] = q;
    if (o == me) return TSR_PEER_SELF;
    int gr = 0, cr = 0;
    tsr_grid_rank(grid, o.data(), &gr);
    tsr_grid_context_rank(grid, gr, &cr);
    return cr / kRpn == world_rank() / kRpn ? TSR_PEER_NODE : TSR_PEER_REMOTE;
  }
  void sent(int dim, int q, uint64_t msgs, uint64_t bytes) {
    c.coll_wire_sent[cls(dim, q)].messages += msgs;
    c.coll_wire_sent[cls(dim, q)].bytes += bytes;
  }
  void recv(int dim, int q, uint64_t msgs, uint64_t bytes) {
    c.coll_wire_recv[cls(dim, q)].messages += msgs;
    c.coll_wire_recv[cls(dim, q)].bytes += bytes;
  }
  void allgatherv(int dim, const std::vector<uint64_t>& b) {
    const int p = dims[static_cast<size_t>(dim)], r = me[static_cast<size_t>(dim)];
    uint64_t sum = 0;
    for (uint64_t x : b) sum += x;
    if (p <= 1 || sum == 0) return;
    c.coll_calls[TSR_COLL_ALLGATHER] += 1;
    c.coll_payload_sent += b[static_cast<size_t>(r)];
    c.coll_payload_recv += sum;
    sent(dim, (r + 1) % p, p - 1, sum - b[static_cast<size_t>((r + 1) % p)]);
    recv(dim, (r + p - 1) % p, p - 1, sum - b[static_cast<size_t>(r)]);
  }
  void reduce_scatterv(int dim, const std::vector<uint64_t>& b) {
    const int p = dims[static_cast<size_t>(dim)], r = me[static_cast<size_t>(dim)];
    uint64_t sum = 0;
    for (uint64_t x : b) sum += x;
    if (p <= 1 || sum == 0) return;
    c.coll_calls[TSR_COLL_REDUCE_SCATTER] += 1;
    c.coll_payload_sent += sum;
    c.coll_payload_recv += b[static_cast<size_t>(r)];
    sent(dim, (r + 1) % p, p - 1, sum - b[static_cast<size_t>(r)]);
    recv(dim, (r + p - 1) % p, p - 1, sum - b[static_cast<size_t>((r + p - 1) % p)]);
  }
  void bcast(int dim, uint64_t n, int root) {
    const int p = dims[static_cast<size_t>(dim)], r = me[static_cast<size_t>(dim)];
    if (p <= 1 || n == 0) return;
    c.coll_calls[TSR_COLL_BCAST] += 1;
    (r == root ? c.coll_payload_sent : c.coll_payload_recv) += n;
    const int v = (r - root + p) % p;
    int low = 1;
    if (v == 0) {
      while (low < p) low <<= 1;
    } else {
      low = v & -v;
      recv(dim, (v - low + root) % p, 1, n);
    }
    for (int m = 1; m < low; m <<= 1)
      if (v + m < p) sent(dim, (v + m + root) % p, 1, n);
  }
};

int64_t bal(int64_t n, int p, int i) { return n / p + (i < n % p ? 1 : 0); }
int64_t bal_off(int64_t n, int p, int i) { return i * (n / p) + std::min<int64_t>(i, n % p); }
int ext(const Dims& d, int role) { return role >= 0 ? d[static_cast<size_t>(role)] : 1; }
int pos(const Dims& c, int role) { return role >= 0 ? c[static_cast<size_t>(role)] : 0; }

// The documented schedule of one rank (docs/GEMM.md), canonical layouts.
Expect expected(tsr_grid grid, const Config& cf, int64_t m, int64_t n, int64_t k, bool ta, bool tb, uint64_t w) {
  int co[3] = {0, 0, 0};
  tsr_grid_my_coords(grid, co);
  const Dims me{co[0], co[1], co[2]};
  Expect e(grid, cf.dims, me);
  const Dims& d = cf.dims;
  const int rm = cf.roles[0], rn = cf.roles[1], rk = cf.roles[2];
  const int64_t mi = bal(m, ext(d, rm), pos(me, rm)), nj = bal(n, ext(d, rn), pos(me, rn));
  auto along = [&](int dim, auto piece) {
    std::vector<uint64_t> v;
    for (int g = 0; g < d[static_cast<size_t>(dim)]; ++g) v.push_back(w * static_cast<uint64_t>(piece(g)));
    return v;
  };
  if (cf.algo == TSR_GEMM_1D || cf.algo == TSR_GEMM_3D) {
    const int64_t kl = bal(k, ext(d, rk), pos(me, rk));
    if (rn >= 0)  // A: m_i x k_l, one of them split again along n's dimension
      e.allgatherv(rn, along(rn, [&](int g) { return ta ? kl * bal(mi, d[rn], g) : mi * bal(kl, d[rn], g); }));
    if (rm >= 0)  // B: k_l x n_j, split again along m's dimension
      e.allgatherv(rm, along(rm, [&](int g) { return tb ? nj * bal(kl, d[rm], g) : kl * bal(nj, d[rm], g); }));
    if (rk >= 0) e.reduce_scatterv(rk, along(rk, [&](int g) { return mi * bal(nj, d[rk], g); }));
    return e;
  }
  // SUMMA (2D, 2.5D): depth rk.
  const int pm = ext(d, rm), pn = ext(d, rn), pd = ext(d, rk), layer = pos(me, rk);
  const int64_t kaj = bal(k, pn, pos(me, rn)), kbi = bal(k, pm, pos(me, rm));
  if (rk >= 0) {
    e.allgatherv(rk, along(rk, [&](int g) { return ta ? kaj * bal(mi, pd, g) : mi * bal(kaj, pd, g); }));
    e.allgatherv(rk, along(rk, [&](int g) { return tb ? nj * bal(kbi, pd, g) : kbi * bal(nj, pd, g); }));
  }
  // Panels: the common refinement of k over pn and over pm, cut at the width.
  std::vector<int64_t> cuts;
  for (int j = 0; j <= pn; ++j) cuts.push_back(j < pn ? bal_off(k, pn, j) : k);
  for (int i = 0; i <= pm; ++i) cuts.push_back(i < pm ? bal_off(k, pm, i) : k);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  struct P {
    int64_t w;
    int ar, br;
  };
  std::vector<P> ps;
  auto owner = [&](int parts, int64_t g) {
    int o = 0;
    while (o + 1 < parts && bal_off(k, parts, o + 1) <= g) ++o;
    return o;
  };
  for (size_t x = 0; x + 1 < cuts.size(); ++x)
    for (int64_t s = cuts[x]; s < cuts[x + 1];) {
      const int64_t wd = cf.panel > 0 ? std::min(cf.panel, cuts[x + 1] - s) : cuts[x + 1] - s;
      ps.push_back({wd, owner(pn, cuts[x]), owner(pm, cuts[x])});
      s += wd;
    }
  const int64_t t0 = bal_off(static_cast<int64_t>(ps.size()), pd, layer), tn = bal(static_cast<int64_t>(ps.size()), pd, layer);
  for (int64_t t = t0; t < t0 + tn; ++t) {
    const P& pp = ps[static_cast<size_t>(t)];
    if (rn >= 0) e.bcast(rn, w * static_cast<uint64_t>(mi * pp.w), pp.ar);
    if (rm >= 0) e.bcast(rm, w * static_cast<uint64_t>(pp.w * nj), pp.br);
  }
  if (rk >= 0) e.reduce_scatterv(rk, along(rk, [&](int g) { return mi * bal(nj, pd, g); }));
  return e;
}

void expect_counters(const tsr_counters& want, const tsr_counters& got, const std::string& what) {
  EXPECT_TRUE(tsr_test::same(tsr_test::data_only(want), tsr_test::data_only(got))) << what;
}

TEST(GemmCounters, EveryRankMovesExactlyTheDocumentedBytes) {
  tsr_test::Ctx ctx(kRpn);
  const int p = world_size();
  const Shape3 shapes[] = {{13, 11, 7}, {16, 8, 12}, {3, 2, 5}};
  for (Config cf : configs(p)) {
    Grid grid(ctx, cf.kind, cf.dims);
    for (const Shape3& sh : shapes)
      for (int op = 0; op < 4; ++op) {
        // 8 ranks: the 2.5D and cube grids on every shape (whole panels), the
        // others once (they run at 2-4 ranks in full).
        if (p == 8 && !(only_at_eight(cf) && cf.panel == 0 && sh.m != 16) && (sh.m != 13 || op != 3)) continue;
        const bool ta = op & 1, tb = op & 2;
        tsr_layout lay[3];
        ASSERT_EQ(tsr_gemm_layouts(cf.algo, ta ? TSR_TRANS : TSR_NOTRANS, tb ? TSR_TRANS : TSR_NOTRANS,
                                   cf.roles.data(), lay),
                  TSR_SUCCESS);
        Mat A(grid.g, ta ? sh.k : sh.m, ta ? sh.m : sh.k, TSR_FLOAT64, lay[0]);
        Mat B(grid.g, tb ? sh.n : sh.k, tb ? sh.k : sh.n, TSR_FLOAT64, lay[1]);
        Mat C(grid.g, sh.m, sh.n, TSR_FLOAT64, lay[2]);
        std::vector<double> a = fill<double>(A.h, 1), b = fill<double>(B.h, 2), c = fill<double>(C.h, 3);
        tsr_gemm_options o = TSR_GEMM_OPTIONS_INIT;
        o.algo = cf.algo;
        o.panel = cf.panel;
        o.overlap = cf.overlap;
        const tsr_counters before = tsr_test::counters(ctx);
        ASSERT_EQ(tsr_gemm_ex(&o, ta ? TSR_TRANS : TSR_NOTRANS, tb ? TSR_TRANS : TSR_NOTRANS, 1.0, A.h, a.data(), B.h,
                              b.data(), 1.0, C.h, c.data()),
                  TSR_SUCCESS)
            << tsr_last_error(ctx);
        const tsr_counters got = tsr_test::diff(before, tsr_test::counters(ctx));
        const std::string what = cf.name() + ", " + std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" +
                                 std::to_string(sh.k) + " op " + (ta ? "T" : "N") + (tb ? "T" : "N");
        if (!grid.member()) {
          expect_counters(tsr_test::zero(), got, what + " (idle)");
          continue;
        }
        const Expect e = expected(grid.g, cf, sh.m, sh.n, sh.k, ta, tb, 8);
        expect_counters(e.c, got, what);
        // The planner's model of this rank says the same.
        int co[3];
        tsr_grid_my_coords(grid.g, co);
        tsr::gemm::Shape s;
        s.m = sh.m;
        s.n = sh.n;
        s.k = sh.k;
        s.ta = ta;
        s.tb = tb;
        s.w = 8;
        const tsr::gemm::Dims dd{cf.dims[0], cf.dims[1], cf.dims[2]};
        const tsr::gemm::Cost model = tsr::gemm::rank_cost(
            cf.algo, dd, tsr::gemm::Roles{cf.roles[0], cf.roles[1], cf.roles[2]}, s, tsr::gemm::normalise(lay[0], dd),
            tsr::gemm::normalise(lay[1], dd), tsr::gemm::normalise(lay[2], dd), cf.panel, {co[0], co[1], co[2]});
        uint64_t wire_recv = 0, wire_sent = 0;
        for (int x = 0; x < 3; ++x) {
          wire_recv += got.coll_wire_recv[x].bytes;
          wire_sent += got.coll_wire_sent[x].bytes;
        }
        EXPECT_EQ(model.payload_sent, got.coll_payload_sent) << what;
        EXPECT_EQ(model.payload_recv, got.coll_payload_recv) << what;
        EXPECT_EQ(model.wire_recv, wire_recv) << what;
        EXPECT_EQ(model.wire_sent, wire_sent) << what;
        // One agreement over the context: control traffic only.
        EXPECT_EQ(got.control.messages, p > 1 ? 4u * static_cast<unsigned>(p - 1) : 0u) << what;
      }
  }
  expect_no_workspace_overflow(ctx);
  // Releasing the workspace is local and leaves the context usable.
  EXPECT_EQ(tsr_gemm_workspace_release(ctx), TSR_SUCCESS);
  EXPECT_EQ(ctx.ctx->gemm_pool, nullptr);
  EXPECT_EQ(tsr_gemm_workspace_release(nullptr), TSR_ERR_INVALID_ARG);
}

// ---------------------------------------------------------- plan, end to end
TEST(GemmPlan, PlanGridScatterExecuteGather) {
  tsr_test::Ctx ctx;
  const int p = world_size(), me = world_rank();
  const int64_t m = 23, n = 17, k = 19;
  for (int op = 0; op < 4; ++op) {
    const bool ta = op & 1, tb = op & 2;
    tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
    pr.m = m;
    pr.n = n;
    pr.k = k;
    pr.nranks = p;
    pr.transa = ta ? TSR_TRANS : TSR_NOTRANS;
    pr.transb = tb ? TSR_TRANS : TSR_NOTRANS;
    tsr_gemm_plan plan;
    ASSERT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_SUCCESS) << tsr_last_error(nullptr);
    Grid grid(ctx, plan.grid_kind, {plan.dims[0], plan.dims[1], plan.dims[2]});
    Mat A(grid.g, ta ? k : m, ta ? m : k, TSR_FLOAT64, plan.layouts[0]);
    Mat B(grid.g, tb ? n : k, tb ? k : n, TSR_FLOAT64, plan.layouts[1]);
    Mat C(grid.g, m, n, TSR_FLOAT64, plan.layouts[2]);
    // Global matrices on the last rank, scattered from there.
    const int root = p - 1;
    auto global = [&](int id, int64_t r, int64_t c) {
      std::vector<double> v(static_cast<size_t>(r * c));
      for (int64_t j = 0; j < c; ++j)
        for (int64_t i = 0; i < r; ++i) v[static_cast<size_t>(j * r + i)] = val(id, i, j);
      return v;
    };
    const std::vector<double> ga = global(1, ta ? k : m, ta ? m : k), gb = global(2, tb ? n : k, tb ? k : n);
    const Local la = local_of(A.h), lb = local_of(B.h), lc = local_of(C.h);
    std::vector<double> a(static_cast<size_t>(la.ld * la.cols + 1)), b(static_cast<size_t>(lb.ld * lb.cols + 1)),
        c(static_cast<size_t>(lc.ld * lc.cols + 1));
    ASSERT_EQ(tsr_matrix_scatter(A.h, root, me == root ? ga.data() : nullptr, ta ? k : m, a.data()), TSR_SUCCESS)
        << tsr_last_error(ctx);
    ASSERT_EQ(tsr_matrix_scatter(B.h, root, me == root ? gb.data() : nullptr, tb ? n : k, b.data()), TSR_SUCCESS);
    ASSERT_EQ(tsr_gemm_execute(&plan, 2.0, A.h, a.data(), B.h, b.data(), 0.0, C.h, c.data()), TSR_SUCCESS)
        << tsr_last_error(ctx);
    std::vector<double> gc(static_cast<size_t>(m * n), -1.0);
    ASSERT_EQ(tsr_matrix_gather(C.h, 0, c.data(), me == 0 ? gc.data() : nullptr, m), TSR_SUCCESS);
    if (me == 0) {
      double worst = 0;
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
          long double s = 0, mag = 0;
          for (int64_t x = 0; x < k; ++x) {
            const double av = ta ? val(1, x, i) : val(1, i, x), bv = tb ? val(2, j, x) : val(2, x, j);
            s += static_cast<long double>(av) * bv;
            mag += std::fabs(av * bv);
          }
          worst = std::max(worst, static_cast<double>(std::fabs(gc[static_cast<size_t>(j * m + i)] - 2 * s) / (2 * mag)));
        }
      EXPECT_LE(worst, 1e-12) << "plan " << tsr_gemm_algo_name(plan.options.algo);
    }
    // The plan's figures: the busiest rank's bytes next to the bound.
    EXPECT_GE(plan.bytes, 0);
    EXPECT_GT(plan.time, 0);
    char text[2048];
    ASSERT_EQ(tsr_gemm_plan_format(&plan, text, sizeof text, nullptr), TSR_SUCCESS);
    EXPECT_TRUE(contains(text, "lower bound")) << text;
  }
}

TEST(GemmPlan, ReportGivesMeasuredBytesAgainstTheBound) {
  tsr_test::Ctx ctx;
  const int p = world_size();
  const int64_t n = 24;  // divides evenly on every plan here: the plan's figure is exact
  tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
  pr.m = pr.n = pr.k = n;
  pr.nranks = p;
  pr.allow_idle = 0;
  tsr_gemm_plan plan;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_SUCCESS);
  Grid grid(ctx, plan.grid_kind, {plan.dims[0], plan.dims[1], plan.dims[2]});
  Mat A(grid.g, n, n, TSR_FLOAT64, plan.layouts[0]), B(grid.g, n, n, TSR_FLOAT64, plan.layouts[1]),
      C(grid.g, n, n, TSR_FLOAT64, plan.layouts[2]);
  std::vector<double> a = fill<double>(A.h, 1), b = fill<double>(B.h, 2), c = fill<double>(C.h, 3);
  ASSERT_EQ(tsr_region_begin(ctx, "gemm"), TSR_SUCCESS);
  for (int call = 0; call < 2; ++call)
    ASSERT_EQ(tsr_gemm_execute(&plan, 1.0, A.h, a.data(), B.h, b.data(), 0.0, C.h, c.data()), TSR_SUCCESS)
        << tsr_last_error(ctx);
  ASSERT_EQ(tsr_region_end(ctx, "gemm"), TSR_SUCCESS);
  tsr_report report = nullptr;
  ASSERT_EQ(tsr_report_create(ctx, 0, &report), TSR_SUCCESS);
  char text[512];
  double measured = -1;
  const tsr_status st = tsr_gemm_report_format(report, "gemm", &plan, 2, text, sizeof text, nullptr, &measured);
  if (world_rank() == 0) {
    ASSERT_EQ(st, TSR_SUCCESS) << tsr_last_error(nullptr);
    EXPECT_DOUBLE_EQ(measured, plan.bytes) << text;
    EXPECT_TRUE(contains(text, "measured / bound")) << text;
  } else if (p > 1) {
    EXPECT_EQ(st, TSR_ERR_INVALID_ARG);
  }
  EXPECT_EQ(tsr_gemm_report_format(report, "nowhere", &plan, 1, text, sizeof text, nullptr, nullptr),
            TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_report_destroy(&report), TSR_SUCCESS);
}

TEST(GemmPlan, MachineMeasurementAgreesOnEveryRank) {
  tsr_test::Ctx ctx;
  tsr_gemm_machine mc{0, 0, 0};
  ASSERT_EQ(tsr_gemm_machine_measure(ctx, &mc), TSR_SUCCESS) << tsr_last_error(ctx);
  EXPECT_GT(mc.alpha, 0);
  EXPECT_GT(mc.beta, 0);
  EXPECT_GT(mc.gamma, 0);
  double v[3] = {mc.alpha, mc.beta, mc.gamma}, lo[3], hi[3];
  MPI_Allreduce(v, lo, 3, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(v, hi, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  for (int x = 0; x < 3; ++x) EXPECT_EQ(lo[x], hi[x]);
  EXPECT_EQ(tsr_gemm_machine_measure(ctx, nullptr), TSR_ERR_INVALID_ARG);
}

// ---------------------------------------------------------- redistribution
TEST(GemmRedistribute, ScatterGatherAndConvertWithExactPointToPointCounts) {
  tsr_test::Ctx ctx;
  const int p = world_size(), me = world_rank();
  const int64_t m = 11, n = 9;
  std::vector<double> global(static_cast<size_t>(m * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) global[static_cast<size_t>(j * m + i)] = val(7, i, j);
  int d[3] = {0, 0, 0};
  tsr_grid_dims_create(TSR_GRID_2D, p, 0, d, nullptr);
  Grid g2(ctx, TSR_GRID_2D, {d[0], d[1], 1});
  Grid g1(ctx, TSR_GRID_1D, {p, 1, 1});
  const tsr_layout layouts[] = {TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE),
                                {TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE, 2, 3},  // block-cyclic
                                TSR_LAYOUT(TSR_DIM_NONE, TSR_DIM_J, TSR_DIM_I),
                                TSR_LAYOUT_REPLICATED};
  const int root = p - 1;
  for (const tsr_layout& l : layouts) {
    Mat M(g2.g, m, n, TSR_FLOAT64, l, 0);
    const Local lm = local_of(M.h);
    std::vector<double> loc(static_cast<size_t>(std::max<int64_t>(1, lm.ld * lm.cols)), -7.0);
    const tsr_counters before = tsr_test::counters(ctx);
    ASSERT_EQ(tsr_matrix_scatter(M.h, root, me == root ? global.data() : nullptr, m, loc.data()), TSR_SUCCESS)
        << tsr_last_error(ctx);
    const tsr_counters got = tsr_test::diff(before, tsr_test::counters(ctx));
    for (int64_t c = 0; c < lm.cols; ++c)
      for (int64_t r = 0; r < lm.rows; ++r) {
        int64_t i = 0, j = 0;
        tsr_matrix_global_index(M.h, r, c, &i, &j);
        EXPECT_EQ(loc[static_cast<size_t>(c * lm.ld + r)], val(7, i, j));
      }
    // The root sends one message per other rank that holds elements.
    std::vector<long long> sizes(static_cast<size_t>(p));
    const long long mine = lm.rows * lm.cols;
    MPI_Allgather(&mine, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
    uint64_t msgs = 0, bytes = 0;
    for (int r = 0; r < p; ++r)
      if (r != root && sizes[static_cast<size_t>(r)] > 0) {
        msgs += 1;
        bytes += 8 * static_cast<uint64_t>(sizes[static_cast<size_t>(r)]);
      }
    const uint64_t sent_m = got.p2p_sent[TSR_PEER_NODE].messages + got.p2p_sent[TSR_PEER_REMOTE].messages;
    const uint64_t sent_b = got.p2p_sent[TSR_PEER_NODE].bytes + got.p2p_sent[TSR_PEER_REMOTE].bytes;
    const uint64_t recv_m = got.p2p_recv[TSR_PEER_NODE].messages + got.p2p_recv[TSR_PEER_REMOTE].messages;
    const uint64_t recv_b = got.p2p_recv[TSR_PEER_NODE].bytes + got.p2p_recv[TSR_PEER_REMOTE].bytes;
    EXPECT_EQ(sent_m, me == root ? msgs : 0u);
    EXPECT_EQ(sent_b, me == root ? bytes : 0u);
    EXPECT_EQ(recv_m, me != root && mine > 0 ? 1u : 0u);
    EXPECT_EQ(recv_b, me != root ? 8u * static_cast<uint64_t>(mine) : 0u);
    EXPECT_EQ(got.coll_payload_sent + got.coll_payload_recv, 0u);
    // Gather back to rank 0: one copy of each element, the original matrix.
    std::vector<double> back(static_cast<size_t>(m * n), 0.0);
    ASSERT_EQ(tsr_matrix_gather(M.h, 0, loc.data(), me == 0 ? back.data() : nullptr, m), TSR_SUCCESS);
    if (me == 0) {
      EXPECT_EQ(back, global);
    }
    // Convert to a 1D column layout and to a block-cyclic one on the other grid.
    for (const tsr_layout& l1 : {tsr_layout TSR_LAYOUT(TSR_DIM_NONE, TSR_DIM_I, TSR_DIM_NONE),
                                 tsr_layout{TSR_DIM_I, TSR_DIM_NONE, TSR_DIM_NONE, 3, 0}}) {
      Mat D(g1.g, m, n, TSR_FLOAT64, l1, 0);
      const Local ld = local_of(D.h);
      std::vector<double> dl(static_cast<size_t>(std::max<int64_t>(1, ld.ld * ld.cols)), -9.0);
      ASSERT_EQ(tsr_matrix_redistribute(M.h, loc.data(), D.h, dl.data()), TSR_SUCCESS) << tsr_last_error(ctx);
      for (int64_t c = 0; c < ld.cols; ++c)
        for (int64_t r = 0; r < ld.rows; ++r) {
          int64_t i = 0, j = 0;
          tsr_matrix_global_index(D.h, r, c, &i, &j);
          EXPECT_EQ(dl[static_cast<size_t>(c * ld.ld + r)], val(7, i, j));
        }
    }
  }
  // 3D layouts on 8 ranks: from a 3D sub-split layout to 2D block-cyclic and back.
  if (p == 8) {
    Grid g3(ctx, TSR_GRID_3D, {2, 2, 2});
    Mat X(g3.g, m, n, TSR_FLOAT64, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_K, TSR_DIM_J));
    Mat Y(g2.g, m, n, TSR_FLOAT64, tsr_layout{TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE, 2, 2});
    std::vector<double> x = fill<double>(X.h, 7), y = fill<double>(Y.h, 0), z = fill<double>(X.h, 0);
    ASSERT_EQ(tsr_matrix_redistribute(X.h, x.data(), Y.h, y.data()), TSR_SUCCESS);
    ASSERT_EQ(tsr_matrix_redistribute(Y.h, y.data(), X.h, z.data()), TSR_SUCCESS);
    EXPECT_EQ(x, z);
  }
}

// --------------------------------------------------------------- errors
// Every rank gets `want`; then a good call still works (nothing left hanging).
struct Fixture {
  tsr_test::Ctx ctx;
  int p = world_size(), me = world_rank();
  Dims dims{1, 1, 1};
  std::unique_ptr<Grid> grid, other;
  std::unique_ptr<Mat> A, B, C;
  std::vector<double> a, b, c;
  tsr_layout lay[3];
  Fixture() {
    int d[3] = {0, 0, 0};
    tsr_grid_dims_create(TSR_GRID_2D, p, 0, d, nullptr);
    dims = {d[0], d[1], 1};
    grid.reset(new Grid(ctx, TSR_GRID_2D, dims));
    other.reset(new Grid(ctx, TSR_GRID_2D, dims));
    const int roles[3] = {d[0] > 1 ? 0 : -1, d[1] > 1 ? 1 : -1, -1};
    tsr_gemm_layouts(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, roles, lay);
    A.reset(new Mat(grid->g, 8, 6, TSR_FLOAT64, lay[0]));
    B.reset(new Mat(grid->g, 6, 7, TSR_FLOAT64, lay[1]));
    C.reset(new Mat(grid->g, 8, 7, TSR_FLOAT64, lay[2]));
    a = fill<double>(A->h, 1);
    b = fill<double>(B->h, 2);
    c = fill<double>(C->h, 3);
  }
  tsr_status good() {
    return tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, A->h, a.data(), B->h, b.data(), 0.0, C->h, c.data());
  }
};

void expect_everywhere(tsr_status got, tsr_status want, tsr_context ctx, const std::string& what,
                       const std::string& text = "") {
  EXPECT_EQ(got, want) << what << ": " << tsr_last_error(ctx);
  int bad = got != want, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(any, 0) << what << ": not the same status on every rank";
  if (!text.empty()) {
    EXPECT_TRUE(contains(tsr_last_error(ctx), text)) << what << ": " << tsr_last_error(ctx);
  }
}

TEST(GemmErrors, BadArgumentsFailOnEveryRankBeforeAnythingMoves) {
  Fixture f;
  tsr_context ctx = f.ctx;
  ASSERT_EQ(f.good(), TSR_SUCCESS) << tsr_last_error(ctx);
  const tsr_counters before = tsr_test::counters(ctx);
  // Mismatched dimensions: C is 8 x 7, op(A) op(B) would be 8 x 8.
  Mat W(f.grid->g, 6, 8, TSR_FLOAT64, f.lay[1]);
  std::vector<double> w = fill<double>(W.h, 4);
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, f.A->h, f.a.data(), W.h, w.data(), 0.0,
                             f.C->h, f.c.data()),
                    TSR_ERR_SHAPE, ctx, "mismatched dimensions", "op(A) is 8 x 6");
  // A descriptor of another grid.
  Mat O(f.other->g, 8, 6, TSR_FLOAT64, f.lay[0]);
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, O.h, f.a.data(), f.B->h, f.b.data(), 0.0,
                             f.C->h, f.c.data()),
                    TSR_ERR_INVALID_ARG, ctx, "descriptor of another grid", "another grid");
  // C aliasing A and B (a buffer large enough for both).
  std::vector<double> shared(f.a.size() + f.c.size() + f.b.size(), 1.0);
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, f.A->h, shared.data(), f.B->h, f.b.data(),
                             0.0, f.C->h, shared.data()),
                    TSR_ERR_INVALID_ARG, ctx, "C aliases A", "aliases A");
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, f.A->h, f.a.data(), f.B->h, shared.data(),
                             0.0, f.C->h, shared.data() + 1),
                    TSR_ERR_INVALID_ARG, ctx, "C aliases B");
  // A NULL buffer on one rank only: everyone fails, the others name that rank.
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, f.A->h, f.me == 0 ? nullptr : f.a.data(),
                             f.B->h, f.b.data(), 0.0, f.C->h, f.c.data()),
                    TSR_ERR_INVALID_ARG, ctx, "NULL a on rank 0", f.me == 0 ? "'a' is NULL" : "rank 0 failed");
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, f.A->h, f.a.data(), f.B->h, f.b.data(), 0.0,
                             f.C->h, nullptr),
                    TSR_ERR_INVALID_ARG, ctx, "NULL c", "'c' is NULL");
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, nullptr, f.a.data(), f.B->h, f.b.data(), 0.0,
                             f.C->h, f.c.data()),
                    TSR_ERR_INVALID_ARG, ctx, "NULL descriptor", "'A' is NULL");
  // Invalid op, algorithm, options.
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, static_cast<tsr_trans>(7), TSR_NOTRANS, 1.0, f.A->h, f.a.data(), f.B->h,
                             f.b.data(), 0.0, f.C->h, f.c.data()),
                    TSR_ERR_INVALID_ARG, ctx, "invalid op", "transa");
  expect_everywhere(tsr_gemm(static_cast<tsr_gemm_algo>(9), TSR_NOTRANS, TSR_NOTRANS, 1.0, f.A->h, f.a.data(), f.B->h,
                             f.b.data(), 0.0, f.C->h, f.c.data()),
                    TSR_ERR_INVALID_ARG, ctx, "invalid algorithm", "algo");
  tsr_gemm_options bad = TSR_GEMM_OPTIONS_INIT;
  bad.magic = 1;
  expect_everywhere(tsr_gemm_ex(&bad, TSR_NOTRANS, TSR_NOTRANS, 1.0, f.A->h, f.a.data(), f.B->h, f.b.data(), 0.0,
                                f.C->h, f.c.data()),
                    TSR_ERR_INVALID_ARG, ctx, "uninitialised options", "TSR_GEMM_OPTIONS_INIT");
  // Arguments that differ across ranks.
  if (f.p > 1)
    expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, f.me == 0 ? 2.0 : 1.0, f.A->h, f.a.data(),
                               f.B->h, f.b.data(), 0.0, f.C->h, f.c.data()),
                      TSR_ERR_INVALID_ARG, ctx, "alpha differs across ranks", "differ");
  // Layouts the algorithm does not take (when the grid has two dimensions).
  if (f.dims[0] > 1 && f.dims[1] > 1) {
    Mat T(f.grid->g, 8, 6, TSR_FLOAT64, TSR_LAYOUT(TSR_DIM_J, TSR_DIM_I, TSR_DIM_NONE));
    std::vector<double> t = fill<double>(T.h, 1);
    expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, T.h, t.data(), f.B->h, f.b.data(), 0.0,
                               f.C->h, f.c.data()),
                      TSR_ERR_SHAPE, ctx, "layout the algorithm does not take", "tsr_gemm_layouts");
  }
  // A block-cyclic operand.
  Mat Y(f.grid->g, 8, 6, TSR_FLOAT64, tsr_layout{f.lay[0].row_dim, f.lay[0].col_dim, TSR_DIM_NONE, 2, 2});
  std::vector<double> y = fill<double>(Y.h, 1);
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, Y.h, y.data(), f.B->h, f.b.data(), 0.0,
                             f.C->h, f.c.data()),
                    f.p > 1 ? TSR_ERR_UNSUPPORTED : TSR_SUCCESS, ctx, "block-cyclic operand");
  // Types that differ.
  Mat F(f.grid->g, 8, 6, TSR_FLOAT32, f.lay[0]);
  std::vector<float> fa(f.a.size() + 1, 1.0f);
  expect_everywhere(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, F.h, fa.data(), f.B->h, f.b.data(), 0.0,
                             f.C->h, f.c.data()),
                    TSR_ERR_INVALID_ARG, ctx, "types differ", "one type");
  // A plan for another grid.
  tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
  pr.m = 8;
  pr.n = 7;
  pr.k = 6;
  pr.nranks = f.p;
  pr.algo = TSR_GEMM_1D;
  tsr_gemm_plan plan;
  ASSERT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_SUCCESS);
  if (f.p > 1 && f.dims[0] > 1 && f.dims[1] > 1)
    expect_everywhere(tsr_gemm_execute(&plan, 1.0, f.A->h, f.a.data(), f.B->h, f.b.data(), 0.0, f.C->h, f.c.data()),
                      TSR_ERR_SHAPE, ctx, "plan for another grid", "plan's grid");
  expect_everywhere(tsr_gemm_execute(nullptr, 1.0, f.A->h, f.a.data(), f.B->h, f.b.data(), 0.0, f.C->h, f.c.data()),
                    TSR_ERR_INVALID_ARG, ctx, "NULL plan", "");
  // None of the failed calls moved data; only agreements (control traffic).
  const tsr_counters after = tsr_test::counters(ctx);
  const tsr_counters moved = tsr_test::diff(before, after);
  EXPECT_EQ(moved.coll_payload_sent + moved.coll_payload_recv, 0u);
  EXPECT_EQ(moved.p2p_sent[TSR_PEER_NODE].bytes + moved.p2p_sent[TSR_PEER_REMOTE].bytes, 0u);
  // And the next good call works.
  ASSERT_EQ(f.good(), TSR_SUCCESS) << tsr_last_error(ctx);
  EXPECT_LE(check_c<double>(f.C->h, f.c, 1, 2, 3, false, false, 6, 1.0, 0.0), 1e-12);
}

TEST(GemmErrors, MatrixDescriptorsAndRedistribution) {
  Fixture f;
  tsr_context ctx = f.ctx;
  tsr_matrix m = nullptr;
  const tsr_layout ok = TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE);
  const tsr_layout twice = TSR_LAYOUT(TSR_DIM_I, TSR_DIM_I, TSR_DIM_NONE);
  expect_everywhere(tsr_matrix_create(f.grid->g, 4, 4, TSR_FLOAT64, &twice, 0, &m), TSR_ERR_INVALID_ARG, ctx,
                    "layout names a dimension twice", "same grid dimension");
  const tsr_layout cyc_sub{TSR_DIM_I, TSR_DIM_NONE, TSR_DIM_J, 2, 0};
  expect_everywhere(tsr_matrix_create(f.grid->g, 4, 4, TSR_FLOAT64, &cyc_sub, 0, &m), TSR_ERR_INVALID_ARG, ctx,
                    "sub_dim with block-cyclic", "block-cyclic");
  expect_everywhere(tsr_matrix_create(f.grid->g, 4, 4, TSR_INT32, &ok, 0, &m), TSR_ERR_INVALID_ARG, ctx, "int matrix",
                    "TSR_FLOAT32");
  expect_everywhere(tsr_matrix_create(f.grid->g, -1, 4, TSR_FLOAT64, &ok, 0, &m), TSR_ERR_SHAPE, ctx, "m < 0");
  // bfloat16 descriptors exist (device GEMM inputs); on host buffers the
  // product is refused, and with a float64 C the types do not fit.
  {
    tsr_matrix h = nullptr, d = nullptr;
    ASSERT_EQ(tsr_matrix_create(f.grid->g, 4, 4, TSR_BFLOAT16, &ok, 0, &h), TSR_SUCCESS) << tsr_last_error(ctx);
    ASSERT_EQ(tsr_matrix_create(f.grid->g, 4, 4, TSR_FLOAT32, &ok, 0, &d), TSR_SUCCESS) << tsr_last_error(ctx);
    std::vector<uint16_t> hb(16, 0x3f80);
    std::vector<float> hc(16, 0.0f);
    expect_everywhere(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, h, hb.data(), h, hb.data(), 0.0, d,
                               hc.data()),
                      TSR_ERR_UNSUPPORTED, ctx, "bfloat16 on host buffers", "CUDA device buffers only");
    expect_everywhere(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, h, hb.data(), h, hb.data(), 0.0, f.C->h,
                               f.c.data()),
                      TSR_ERR_INVALID_ARG, ctx, "bfloat16 A and B with float64 C", "must have one type");
    EXPECT_EQ(tsr_matrix_destroy(&h), TSR_SUCCESS);
    EXPECT_EQ(tsr_matrix_destroy(&d), TSR_SUCCESS);
  }
  // ld too small on one rank: 1 is below the local rows wherever the block has 2 or more.
  expect_everywhere(tsr_matrix_create(f.grid->g, 40, 4, TSR_FLOAT64, &ok, f.me == 0 ? 1 : 0, &m), TSR_ERR_SHAPE, ctx,
                    "ld too small on rank 0", f.me == 0 ? "'ld'" : "rank 0 failed");
  EXPECT_EQ(m, nullptr);
  if (f.p > 1)
    expect_everywhere(tsr_matrix_create(f.grid->g, f.me == 0 ? 5 : 4, 4, TSR_FLOAT64, &ok, 0, &m), TSR_ERR_INVALID_ARG,
                      ctx, "sizes differ across ranks", "argument 'm' differs across");
  // Redistribution: sizes, buffers, overlap, root.
  Mat S(f.grid->g, 8, 6, TSR_FLOAT64, ok);
  Mat T(f.grid->g, 6, 8, TSR_FLOAT64, ok);
  std::vector<double> s = fill<double>(S.h, 1), t = fill<double>(T.h, 1);
  expect_everywhere(tsr_matrix_redistribute(S.h, s.data(), T.h, t.data()), TSR_ERR_SHAPE, ctx, "sizes differ", "8 x 6");
  Mat U(f.other->g, 8, 6, TSR_FLOAT64, TSR_LAYOUT_REPLICATED);
  std::vector<double> u(static_cast<size_t>(local_of(U.h).ld * 6), 0.0);
  expect_everywhere(tsr_matrix_redistribute(S.h, s.data(), U.h, nullptr), TSR_ERR_INVALID_ARG, ctx, "NULL dbuf", "dbuf");
  std::vector<double> big(u.size() + s.size(), 0.0);
  expect_everywhere(tsr_matrix_redistribute(S.h, big.data(), U.h, big.data()), TSR_ERR_INVALID_ARG, ctx,
                    "overlapping buffers", "overlap");
  expect_everywhere(tsr_matrix_scatter(S.h, f.p, nullptr, 8, s.data()), TSR_ERR_INVALID_ARG, ctx, "root out of range",
                    "root");
  expect_everywhere(tsr_matrix_gather(S.h, 0, s.data(), nullptr, 8), TSR_ERR_INVALID_ARG, ctx, "NULL global on root",
                    f.me == 0 ? "'global'" : "rank 0 failed");
  std::vector<double> g(48, 0.0);
  expect_everywhere(tsr_matrix_gather(S.h, 0, s.data(), f.me == 0 ? g.data() : nullptr, 3), TSR_ERR_INVALID_ARG, ctx,
                    "ldg < m", f.me == 0 ? "ldg" : "rank 0 failed");
  ASSERT_EQ(tsr_matrix_redistribute(S.h, s.data(), U.h, u.data()), TSR_SUCCESS) << tsr_last_error(ctx);
  if (local_of(U.h).rows > 0) {
    EXPECT_EQ(u[static_cast<size_t>(local_of(U.h).ld + 2)], val(1, 2, 1));
  }
  // The ScaLAPACK descriptor without ScaLAPACK linked (this test does not link it).
  const int desc[9] = {1, 0, 4, 4, 2, 2, 0, 0, 4};
  expect_everywhere(tsr_matrix_create_scalapack(ctx, desc, TSR_FLOAT64, &m), TSR_ERR_UNSUPPORTED, ctx, "no BLACS",
                    "BLACS");
  double one = 1;
  const int i1 = 1, n4 = 4;
  EXPECT_EQ(tsr_pdgemm("N", "N", &n4, &n4, &n4, &one, nullptr, &i1, &i1, desc, nullptr, &i1, &i1, desc, &one, nullptr,
                       &i1, &i1, desc),
            TSR_ERR_UNSUPPORTED);
}

// ------------------------------------------------------------------- C++
TEST(GemmCpp, WrappersComputeAndShortSpansThrowEverywhere) {
  tsr_test::Ctx ctx;
  tessera::context cx(MPI_COMM_WORLD);
  const int p = world_size();
  const tessera::dims3 d = tessera::grid::dims_for(TSR_GRID_2D, p);
  tessera::grid g(cx, TSR_GRID_2D, d);
  tsr_layout lay[3];
  tessera::gemm_layouts(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, {d[0] > 1 ? 0 : -1, d[1] > 1 ? 1 : -1, -1}, lay);
  tessera::matrix A(g, 7, 5, TSR_FLOAT64, lay[0]), B(g, 5, 6, TSR_FLOAT64, lay[1]), C(g, 7, 6, TSR_FLOAT64, lay[2]);
  std::vector<double> a = fill<double>(A.get(), 1), b = fill<double>(B.get(), 2), c(C.local_elements() + 1);
  tessera::gemm<double>(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, A, a, B, b, 0.0, C, c);
  EXPECT_LE(check_c<double>(C.get(), c, 1, 2, 3, false, false, 5, 1.0, 0.0), 1e-12);
  EXPECT_EQ(C.rows(), 7);
  EXPECT_EQ(C.cols(), 6);
  // A span too short on rank 0 (when it holds elements): every rank throws.
  std::vector<double> shortc(C.local_elements() > 0 && world_rank() == 0 ? C.local_elements() - 1 : c.size());
  int threw = 0;
  try {
    tessera::gemm<double>(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, A, a, B, b, 0.0, C, shortc);
  } catch (const tessera::error& e) {
    threw = 1;
    if (world_rank() == 0 && C.local_elements() > 0) {
      EXPECT_EQ(e.status(), TSR_ERR_SHAPE);
    }
  }
  int all = 0, any = 0, need = world_rank() == 0 && C.local_elements() > 0, needed = 0;
  MPI_Allreduce(&threw, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&threw, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&need, &needed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(all, needed);
  EXPECT_EQ(any, needed);
  // A plan through the wrapper, and its text.
  tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
  pr.m = pr.n = pr.k = 64;
  pr.nranks = p;
  const tsr_gemm_plan plan = tessera::plan_gemm(pr);
  EXPECT_TRUE(contains(tessera::to_string(plan).c_str(), "plan / bound"));
  pr.memory_per_rank = 100;
  try {
    (void)tessera::plan_gemm(pr);
    ADD_FAILURE() << "expected TSR_ERR_NO_MEMORY";
  } catch (const tessera::error& e) {
    EXPECT_EQ(e.status(), TSR_ERR_NO_MEMORY);
  }
}

}  // namespace

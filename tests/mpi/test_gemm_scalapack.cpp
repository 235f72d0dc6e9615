// tessera against Debian's ScaLAPACK on the same data: the pdgemm/psgemm
// drop-in (tsr_pdgemm, tsr_psgemm: same arguments, 1-based submatrix offsets,
// different block sizes per matrix) against pdgemm_/psgemm_, and every
// tessera algorithm (1D, 2D, 2.5D, 3D, after redistribution from the
// block-cyclic layout) against pdgemm_; relative error per element at most
// 1e-12 in double and 1e-5 in float (relative to sum |alpha a b| + |beta c|).
// C outside the submatrix must stay untouched; beta = 0 must not read C.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "context.hpp"
#include "gemm_internal.hpp"
#include "scalapack_dropin.hpp"
#include "tessera/tessera.h"
#include "tsr_test.hpp"

extern "C" {
void Cblacs_pinfo(int* me, int* np);
void Cblacs_get(int ctxt, int what, int* val);
void Cblacs_gridinit(int* ctxt, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int ctxt);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb, const int* irsrc, const int* icsrc,
               const int* ictxt, const int* lld, int* info);
void pdgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
             const double* a, const int* ia, const int* ja, const int* desca, const double* b, const int* ib,
             const int* jb, const int* descb, const double* beta, double* c, const int* ic, const int* jc,
             const int* descc);
void psgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
             const float* a, const int* ia, const int* ja, const int* desca, const float* b, const int* ib,
             const int* jb, const int* descb, const float* beta, float* c, const int* ic, const int* jc,
             const int* descc);
}

namespace {

using tsr_test::contains;
using tsr_test::world_rank;
using tsr_test::world_size;

double val(int id, int64_t i, int64_t j) {
  uint64_t h = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(id + 1) ^ (static_cast<uint64_t>(i) * 0xbf58476d1ce4e5b9ull) ^
               (static_cast<uint64_t>(j) * 0x94d049bb133111ebull);
  h ^= h >> 31;
  h *= 0xd6e8feb86659fd39ull;
  h ^= h >> 29;
  return static_cast<double>(h >> 11) / static_cast<double>(1ull << 52) - 1.0;
}

// A BLACS grid over MPI_COMM_WORLD, row-major, the most square pr x pc.
struct Blacs {
  int ctxt = -1, nprow = 1, npcol = 1, myrow = -1, mycol = -1;
  Blacs() {
    int d[3] = {0, 0, 0};
    tsr_grid_dims_create(TSR_GRID_2D, world_size(), 0, d, nullptr);
    Cblacs_get(-1, 0, &ctxt);
    Cblacs_gridinit(&ctxt, "Row", d[0], d[1]);
    Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
  }
  ~Blacs() { Cblacs_gridexit(ctxt); }
};

// A block-cyclic matrix of the BLACS grid: descriptor and local data.
template <class T>
struct BcMat {
  int desc[9];
  int lr = 0, lc = 0;
  std::vector<T> data;
  BcMat(const Blacs& g, int m, int n, int mb, int nb, int id, bool nan = false) {
    const int zero = 0;
    lr = numroc_(&m, &mb, &g.myrow, &zero, &g.nprow);
    lc = numroc_(&n, &nb, &g.mycol, &zero, &g.npcol);
    const int lld = std::max(1, lr);
    int info = 0;
    descinit_(desc, &m, &n, &mb, &nb, &zero, &zero, &g.ctxt, &lld, &info);
    EXPECT_EQ(info, 0);
    data.assign(static_cast<size_t>(std::max(1, lld * lc)), T(0));
    for (int c = 0; c < lc; ++c)
      for (int r = 0; r < lr; ++r) {
        const int64_t i = global(r, mb, g.myrow, g.nprow), j = global(c, nb, g.mycol, g.npcol);
        data[static_cast<size_t>(c * lld + r)] = nan ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(val(id, i, j));
      }
  }
  // indxl2g (source 0).
  static int64_t global(int l, int nb, int p, int np) { return (static_cast<int64_t>(l / nb) * np + p) * nb + l % nb; }
  int lld() const { return desc[8]; }
  int mb() const { return desc[4]; }
  int nb() const { return desc[5]; }
};

template <class T>
constexpr double tol() {
  return sizeof(T) == 8 ? 1e-12 : 1e-5;
}

// Compares tessera's C with ScaLAPACK's C and with the serial reference:
// inside the window (rows [ic, ic+m), columns [jc, jc+n), 0-based) both must
// match the reference; outside, tessera's C must equal its initial value.
template <class T>
void compare(const Blacs& g, const BcMat<T>& ours, const BcMat<T>& theirs, const BcMat<T>& initial, int ida, int idb,
             int64_t ia, int64_t ja, int64_t ib, int64_t jb, int64_t ic, int64_t jc, int64_t m, int64_t n, int64_t k,
             bool ta, bool tb, double alpha, double beta, const std::string& what) {
  double worst = 0, worst_ref = 0;
  int64_t outside_changed = 0;
  for (int c = 0; c < ours.lc; ++c)
    for (int r = 0; r < ours.lr; ++r) {
      const int64_t i = BcMat<T>::global(r, ours.mb(), g.myrow, g.nprow);
      const int64_t j = BcMat<T>::global(c, ours.nb(), g.mycol, g.npcol);
      const size_t x = static_cast<size_t>(c * ours.lld() + r);
      if (i < ic || i >= ic + m || j < jc || j >= jc + n) {
        const T a = ours.data[x], b = initial.data[x];
        if (!(a == b || (std::isnan(a) && std::isnan(b)))) ++outside_changed;
        continue;
      }
      long double s = 0, mag = 0;
      for (int64_t l = 0; l < k; ++l) {
        const long double av = static_cast<T>(ta ? val(ida, ia + l, ja + (i - ic)) : val(ida, ia + (i - ic), ja + l));
        const long double bv = static_cast<T>(tb ? val(idb, ib + (j - jc), jb + l) : val(idb, ib + l, jb + (j - jc)));
        s += av * bv;
        mag += std::fabs(static_cast<double>(av * bv));
      }
      const long double c0 = beta == 0 ? 0 : static_cast<long double>(initial.data[x]);
      const long double want = alpha * s + beta * c0;
      const double scale = static_cast<double>(std::fabs(alpha) * mag + std::fabs(beta * c0)) + 1e-300;
      const double e1 = std::isfinite(static_cast<double>(ours.data[x]))
                            ? static_cast<double>(std::fabs(ours.data[x] - want)) / scale : 1e300;
      const double e2 = static_cast<double>(std::fabs(ours.data[x] - theirs.data[x])) / scale;
      worst = std::max(worst, std::max(e1, std::isfinite(e2) ? e2 : 1e300));
      worst_ref = std::max(worst_ref, static_cast<double>(std::fabs(theirs.data[x] - want)) / scale);
    }
  double all[3] = {0, 0, 0}, mine[3] = {worst, worst_ref, static_cast<double>(outside_changed)};
  MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_LE(all[0], tol<T>()) << what << ": tessera vs pdgemm and the serial reference";
  EXPECT_LE(all[1], tol<T>()) << what << ": ScaLAPACK itself vs the serial reference";
  EXPECT_EQ(all[2], 0) << what << ": C changed outside the submatrix";
}

template <class T>
void pxgemm(const char* ta, const char* tb, const int* m, const int* n, const int* k, const T* alpha, const T* a,
            const int* ia, const int* ja, const int* da, const T* b, const int* ib, const int* jb, const int* db,
            const T* beta, T* c, const int* ic, const int* jc, const int* dc);
template <>
void pxgemm<double>(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
                    const double* a, const int* ia, const int* ja, const int* da, const double* b, const int* ib,
                    const int* jb, const int* db, const double* beta, double* c, const int* ic, const int* jc,
                    const int* dc) {
  pdgemm_(ta, tb, m, n, k, alpha, a, ia, ja, da, b, ib, jb, db, beta, c, ic, jc, dc);
}
template <>
void pxgemm<float>(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
                   const float* a, const int* ia, const int* ja, const int* da, const float* b, const int* ib,
                   const int* jb, const int* db, const float* beta, float* c, const int* ic, const int* jc,
                   const int* dc) {
  psgemm_(ta, tb, m, n, k, alpha, a, ia, ja, da, b, ib, jb, db, beta, c, ic, jc, dc);
}
tsr_status tsrgemm(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
                   const double* a, const int* ia, const int* ja, const int* da, const double* b, const int* ib,
                   const int* jb, const int* db, const double* beta, double* c, const int* ic, const int* jc,
                   const int* dc) {
  return tsr_pdgemm(ta, tb, m, n, k, alpha, a, ia, ja, da, b, ib, jb, db, beta, c, ic, jc, dc);
}
tsr_status tsrgemm(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
                   const float* a, const int* ia, const int* ja, const int* da, const float* b, const int* ib,
                   const int* jb, const int* db, const float* beta, float* c, const int* ic, const int* jc,
                   const int* dc) {
  return tsr_psgemm(ta, tb, m, n, k, alpha, a, ia, ja, da, b, ib, jb, db, beta, c, ic, jc, dc);
}

template <class T>
void drop_in(const Blacs& g) {
  // Submatrices at 1-based offsets of larger matrices with different blocks.
  const int m = 13, n = 10, k = 9;
  const int ia = 3, ja = 2, ib = 2, jb = 4, ic = 4, jc = 3;
  for (int op = 0; op < 4; ++op)
    for (int bt = 0; bt < 2; ++bt) {
      const bool ta = op & 1, tb = op & 2;
      const char tca = ta ? 'T' : 'N', tcb = tb ? 'C' : 'N';  // 'C' is 'T' for real types
      const int ar = ia - 1 + (ta ? k : m) + 2, ac = ja - 1 + (ta ? m : k) + 1;
      const int br = ib - 1 + (tb ? n : k) + 1, bc = jb - 1 + (tb ? k : n) + 3;
      const int cr = ic - 1 + m + 2, cc = jc - 1 + n + 1;
      const T alpha = T(1.25), beta = bt ? T(-0.5) : T(0);
      BcMat<T> A(g, ar, ac, 3, 2, 1), B(g, br, bc, 2, 4, 2), Cin(g, cr, cc, 4, 3, 3);
      BcMat<T> Cours = Cin, Ctheirs = Cin;
      pxgemm<T>(&tca, &tcb, &m, &n, &k, &alpha, A.data.data(), &ia, &ja, A.desc, B.data.data(), &ib, &jb, B.desc,
                &beta, Ctheirs.data.data(), &ic, &jc, Cin.desc);
      ASSERT_EQ(tsrgemm(&tca, &tcb, &m, &n, &k, &alpha, A.data.data(), &ia, &ja, A.desc, B.data.data(), &ib, &jb,
                        B.desc, &beta, Cours.data.data(), &ic, &jc, Cin.desc),
                TSR_SUCCESS)
          << tsr_last_error(nullptr);
      const std::string what = std::string("drop-in op ") + tca + tcb + " beta " + std::to_string(beta) +
                               (sizeof(T) == 8 ? " double" : " float");
      compare<T>(g, Cours, Ctheirs, Cin, 1, 2, ia - 1, ja - 1, ib - 1, jb - 1, ic - 1, jc - 1, m, n, k, ta, tb, alpha,
                 beta, what);
      // beta = 0 never reads C: NaN in the window does not leak.
      if (!bt) {
        BcMat<T> Cnan(g, cr, cc, 4, 3, 3, true);
        ASSERT_EQ(tsrgemm(&tca, &tcb, &m, &n, &k, &alpha, A.data.data(), &ia, &ja, A.desc, B.data.data(), &ib, &jb,
                          B.desc, &beta, Cnan.data.data(), &ic, &jc, Cnan.desc),
                  TSR_SUCCESS);
        BcMat<T> initial(g, cr, cc, 4, 3, 3, true);
        compare<T>(g, Cnan, Ctheirs, initial, 1, 2, ia - 1, ja - 1, ib - 1, jb - 1, ic - 1, jc - 1, m, n, k, ta, tb,
                   alpha, beta, what + " NaN in C");
      }
    }
}

TEST(GemmScalapack, DropInMatchesPdgemmWithOffsets) {
  Blacs g;
  drop_in<double>(g);
  tsr_context ctx = nullptr;
  ASSERT_EQ(tsr_scalapack_context(g.ctxt, &ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
  tsr_counters c;
  ASSERT_EQ(tsr_counters_get(ctx, "total", &c), TSR_SUCCESS);
  uint64_t moved = c.coll_payload_recv + c.coll_payload_sent;
  for (int x = 0; x < 3; ++x) moved += c.p2p_recv[x].bytes + c.p2p_sent[x].bytes;
  if (world_size() > 1) {
    EXPECT_GT(moved, 0u) << "the drop-in's traffic is accounted in its context";
  }
  const auto* pool = static_cast<const tsr::gemm::Pool*>(ctx->gemm_pool.get());
  EXPECT_EQ(pool ? pool->overflows : 0u, 0u) << "the drop-in took more workspace than it reserved";
}

TEST(GemmScalapack, DropInMatchesPsgemmWithOffsets) {
  Blacs g;
  drop_in<float>(g);
}

TEST(GemmScalapack, DropInErrorsOnEveryRank) {
  Blacs g;
  const int m = 4, n = 4, k = 4, one_i = 1, five = 5;
  const double one = 1;
  BcMat<double> A(g, 4, 4, 2, 2, 1), B(g, 4, 4, 2, 2, 2), C(g, 4, 4, 2, 2, 3);
  auto everywhere = [&](tsr_status got, tsr_status want, const char* what, const char* text) {
    EXPECT_EQ(got, want) << what << ": " << tsr_last_error(nullptr);
    int bad = got != want, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(any, 0) << what;
    if (world_rank() == 0) {
      EXPECT_TRUE(contains(tsr_last_error(nullptr), text)) << what << ": " << tsr_last_error(nullptr);
    }
  };
  everywhere(tsr_pdgemm("X", "N", &m, &n, &k, &one, A.data.data(), &one_i, &one_i, A.desc, B.data.data(), &one_i,
                        &one_i, B.desc, &one, C.data.data(), &one_i, &one_i, C.desc),
             TSR_ERR_INVALID_ARG, "bad trans", "transa");
  everywhere(tsr_pdgemm("N", "N", &m, &n, &k, &one, A.data.data(), &five, &one_i, A.desc, B.data.data(), &one_i,
                        &one_i, B.desc, &one, C.data.data(), &one_i, &one_i, C.desc),
             TSR_ERR_SHAPE, "submatrix outside A", "does not fit");
  int bad_desc[9];
  std::copy(A.desc, A.desc + 9, bad_desc);
  bad_desc[0] = 502;  // a band descriptor
  everywhere(tsr_pdgemm("N", "N", &m, &n, &k, &one, A.data.data(), &one_i, &one_i, bad_desc, B.data.data(), &one_i,
                        &one_i, B.desc, &one, C.data.data(), &one_i, &one_i, C.desc),
             TSR_ERR_INVALID_ARG, "descriptor type", "type 1");
  // NULL local arrays (issue 15, defect 3: these crashed): on every rank,
  // then on the last rank only; the message names the argument. A NULL
  // scalar argument is named too.
  everywhere(tsr_pdgemm("N", "N", &m, &n, &k, &one, nullptr, &one_i, &one_i, A.desc, B.data.data(), &one_i, &one_i,
                        B.desc, &one, C.data.data(), &one_i, &one_i, C.desc),
             TSR_ERR_INVALID_ARG, "a NULL", "argument 'a' is NULL");
  everywhere(tsr_pdgemm("N", "N", &m, &n, &k, &one, A.data.data(), &one_i, &one_i, A.desc, B.data.data(), &one_i,
                        &one_i, B.desc, &one, nullptr, &one_i, &one_i, C.desc),
             TSR_ERR_INVALID_ARG, "c NULL", "argument 'c' is NULL");
  // Rank 0 holds a block of every matrix (a rank that holds none may pass NULL).
  everywhere(tsr_pdgemm("N", "N", &m, &n, &k, &one, A.data.data(), &one_i, &one_i, A.desc, B.data.data(), &one_i,
                        &one_i, B.desc, &one, world_rank() == 0 ? nullptr : C.data.data(), &one_i, &one_i, C.desc),
             TSR_ERR_INVALID_ARG, "c NULL on rank 0 only", "argument 'c' is NULL");
  const float onef = 1;
  std::vector<float> af(A.data.size()), bf(B.data.size()), cf(C.data.size());
  everywhere(tsr_psgemm("N", "N", &m, &n, &k, &onef, af.data(), &one_i, &one_i, A.desc, bf.data(), &one_i, &one_i,
                        B.desc, &onef, nullptr, &one_i, &one_i, C.desc),
             TSR_ERR_INVALID_ARG, "psgemm c NULL", "argument 'c' is NULL");
  everywhere(tsr_pdgemm("N", "N", &m, &n, &k, &one, A.data.data(), &one_i, &one_i, A.desc, B.data.data(), &one_i,
                        &one_i, B.desc, nullptr, C.data.data(), &one_i, &one_i, C.desc),
             TSR_ERR_INVALID_ARG, "beta NULL", "argument 'beta' is NULL");
  // And a good call after the failures.
  ASSERT_EQ(tsr_pdgemm("N", "N", &m, &n, &k, &one, A.data.data(), &one_i, &one_i, A.desc, B.data.data(), &one_i,
                       &one_i, B.desc, &one, C.data.data(), &one_i, &one_i, C.desc),
            TSR_SUCCESS)
      << tsr_last_error(nullptr);
}

// The drop-in on a context of the caller's (what libtessera-scalapack uses,
// lib/scalapack): the same result as pdgemm_, the traffic in that context;
// a context whose ranks are not the grid's order is refused on every rank,
// before anything moves.
TEST(GemmScalapack, DropInOnAGivenContext) {
  Blacs g;
  const int m = 13, n = 10, k = 9, ia = 2, ja = 3, ib = 3, jb = 2, ic = 2, jc = 2;
  const double alpha = 0.75, beta = -1.25;
  BcMat<double> A(g, m + 3, k + 2, 3, 2, 1), B(g, k + 2, n + 1, 2, 4, 2), Cin(g, m + 1, n + 1, 4, 3, 3);
  BcMat<double> Cours = Cin, Ctheirs = Cin;
  pdgemm_("N", "N", &m, &n, &k, &alpha, A.data.data(), &ia, &ja, A.desc, B.data.data(), &ib, &jb, B.desc, &beta,
          Ctheirs.data.data(), &ic, &jc, Cin.desc);
  // The Row grid over MPI_COMM_WORLD: grid rank = world rank.
  tsr_context ctx = nullptr;
  ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS);
  tsr::gemm::ScalapackGrids grids;
  ASSERT_EQ(tsr::gemm::pdgemm_on(ctx, &grids, "N", "N", &m, &n, &k, &alpha, A.data.data(), &ia, &ja, A.desc,
                                 B.data.data(), &ib, &jb, B.desc, &beta, Cours.data.data(), &ic, &jc, Cin.desc),
            TSR_SUCCESS)
      << tsr_last_error(ctx);
  compare<double>(g, Cours, Ctheirs, Cin, 1, 2, ia - 1, ja - 1, ib - 1, jb - 1, ic - 1, jc - 1, m, n, k, false, false,
                  alpha, beta, "drop-in on a given context");
  tsr_counters c;
  ASSERT_EQ(tsr_counters_get(ctx, "total", &c), TSR_SUCCESS);
  uint64_t moved = c.coll_payload_recv + c.coll_payload_sent;
  for (int x = 0; x < 3; ++x) moved += c.p2p_recv[x].bytes + c.p2p_sent[x].bytes;
  if (world_size() > 1) {
    EXPECT_GT(moved, 0u) << "the traffic is charged to the given context";
  }
  // Ranks in reverse order: refused everywhere, C untouched.
  MPI_Comm rev = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size() - 1 - world_rank(), &rev);
  tsr_context bad = nullptr;
  ASSERT_EQ(tsr_context_create(rev, &bad), TSR_SUCCESS);
  tsr::gemm::ScalapackGrids bad_grids;
  BcMat<double> Cbad = Cin;
  const tsr_status st = tsr::gemm::pdgemm_on(bad, &bad_grids, "N", "N", &m, &n, &k, &alpha, A.data.data(), &ia, &ja,
                                             A.desc, B.data.data(), &ib, &jb, B.desc, &beta, Cbad.data.data(), &ic,
                                             &jc, Cin.desc);
  if (world_size() > 1) {
    EXPECT_EQ(st, TSR_ERR_INVALID_ARG);
    if (world_rank() == 0) {
      EXPECT_TRUE(contains(tsr_last_error(bad), "argument 'ctx'")) << tsr_last_error(bad);
    }
    EXPECT_EQ(Cbad.data, Cin.data) << "C changed by a refused call";
  } else {
    EXPECT_EQ(st, TSR_SUCCESS) << tsr_last_error(bad);
  }
  tsr::gemm::free_grids(&grids);
  tsr::gemm::free_grids(&bad_grids);
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS) << "the grids freed, the context goes";
  EXPECT_EQ(tsr_context_destroy(&bad), TSR_SUCCESS);
  MPI_Comm_free(&rev);
}

// Every tessera algorithm on the same data as pdgemm: redistribute from the
// BLACS layout, multiply, redistribute back.
TEST(GemmScalapack, EveryAlgorithmMatchesPdgemm) {
  Blacs g;
  tsr_test::Ctx ctx;
  const int p = world_size();
  const int m = 14, n = 11, k = 10;
  struct Cfg {
    tsr_grid_kind kind;
    std::array<int, 3> dims;
    tsr_gemm_algo algo;
    std::array<int, 3> roles;
  };
  std::vector<Cfg> cfgs;
  cfgs.push_back({TSR_GRID_1D, {p, 1, 1}, TSR_GEMM_1D, {p > 1 ? 0 : -1, -1, -1}});
  cfgs.push_back({TSR_GRID_1D, {p, 1, 1}, TSR_GEMM_1D, {-1, -1, p > 1 ? 0 : -1}});
  int d[3] = {0, 0, 0};
  tsr_grid_dims_create(TSR_GRID_2D, p, 0, d, nullptr);
  const int r0 = d[0] > 1 ? 0 : -1, r1 = d[1] > 1 ? 1 : -1;
  cfgs.push_back({TSR_GRID_2D, {d[0], d[1], 1}, TSR_GEMM_2D, {r0, r1, -1}});
  cfgs.push_back({TSR_GRID_2D, {d[0], d[1], 1}, TSR_GEMM_3D, {r0, r1, -1}});
  if (p == 8) {
    cfgs.push_back({TSR_GRID_2P5D, {2, 2, 2}, TSR_GEMM_2P5D, {0, 1, 2}});
    cfgs.push_back({TSR_GRID_3D, {2, 2, 2}, TSR_GEMM_3D, {0, 1, 2}});
  }
  for (const Cfg& cf : cfgs) {
    tsr_grid grid = nullptr;
    ASSERT_EQ(tsr_grid_create(ctx, cf.kind, cf.dims.data(), &grid), TSR_SUCCESS) << tsr_last_error(ctx);
    for (int op = 0; op < 4; ++op) {
      const bool ta = op & 1, tb = op & 2;
      const char tca = ta ? 'T' : 'N', tcb = tb ? 'T' : 'N';
      const double alpha = 0.5, beta = 2.0;
      BcMat<double> A(g, ta ? k : m, ta ? m : k, 3, 2, 4), B(g, tb ? n : k, tb ? k : n, 2, 3, 5), Cin(g, m, n, 2, 2, 6);
      BcMat<double> Cours = Cin, Ctheirs = Cin;
      const int one = 1;
      pdgemm_(&tca, &tcb, &m, &n, &k, &alpha, A.data.data(), &one, &one, A.desc, B.data.data(), &one, &one, B.desc,
              &beta, Ctheirs.data.data(), &one, &one, Cin.desc);
      tsr_matrix sa = nullptr, sb = nullptr, sc = nullptr, ta_ = nullptr, tb_ = nullptr, tc = nullptr;
      ASSERT_EQ(tsr_matrix_create_scalapack(ctx, A.desc, TSR_FLOAT64, &sa), TSR_SUCCESS) << tsr_last_error(ctx);
      ASSERT_EQ(tsr_matrix_create_scalapack(ctx, B.desc, TSR_FLOAT64, &sb), TSR_SUCCESS);
      ASSERT_EQ(tsr_matrix_create_scalapack(ctx, Cin.desc, TSR_FLOAT64, &sc), TSR_SUCCESS);
      tsr_layout lay[3];
      ASSERT_EQ(tsr_gemm_layouts(cf.algo, ta ? TSR_TRANS : TSR_NOTRANS, tb ? TSR_TRANS : TSR_NOTRANS, cf.roles.data(),
                                 lay),
                TSR_SUCCESS);
      ASSERT_EQ(tsr_matrix_create(grid, ta ? k : m, ta ? m : k, TSR_FLOAT64, &lay[0], 0, &ta_), TSR_SUCCESS);
      ASSERT_EQ(tsr_matrix_create(grid, tb ? n : k, tb ? k : n, TSR_FLOAT64, &lay[1], 0, &tb_), TSR_SUCCESS);
      ASSERT_EQ(tsr_matrix_create(grid, m, n, TSR_FLOAT64, &lay[2], 0, &tc), TSR_SUCCESS);
      auto size = [](tsr_matrix x) {
        int64_t r = 0, c = 0, l = 1;
        tsr_matrix_local_size(x, &r, &c, &l);
        return static_cast<size_t>(std::max<int64_t>(1, l * c));
      };
      std::vector<double> la(size(ta_)), lb(size(tb_)), lc(size(tc));
      ASSERT_EQ(tsr_matrix_redistribute(sa, A.data.data(), ta_, la.data()), TSR_SUCCESS) << tsr_last_error(ctx);
      ASSERT_EQ(tsr_matrix_redistribute(sb, B.data.data(), tb_, lb.data()), TSR_SUCCESS);
      ASSERT_EQ(tsr_matrix_redistribute(sc, Cin.data.data(), tc, lc.data()), TSR_SUCCESS);
      ASSERT_EQ(tsr_gemm(cf.algo, ta ? TSR_TRANS : TSR_NOTRANS, tb ? TSR_TRANS : TSR_NOTRANS, alpha, ta_, la.data(),
                         tb_, lb.data(), beta, tc, lc.data()),
                TSR_SUCCESS)
          << tsr_last_error(ctx);
      ASSERT_EQ(tsr_matrix_redistribute(tc, lc.data(), sc, Cours.data.data()), TSR_SUCCESS);
      compare<double>(g, Cours, Ctheirs, Cin, 4, 5, 0, 0, 0, 0, 0, 0, m, n, k, ta, tb, alpha, beta,
                      std::string(tsr_gemm_algo_name(cf.algo)) + " op " + tca + tcb);
      for (tsr_matrix* x : {&sa, &sb, &sc, &ta_, &tb_, &tc}) tsr_matrix_destroy(x);
    }
    ASSERT_EQ(tsr_grid_destroy(&grid), TSR_SUCCESS);
  }
}

}  // namespace

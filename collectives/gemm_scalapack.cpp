// ScaLAPACK interoperation: descriptors of block-cyclic matrices over a
// BLACS grid, and the pdgemm/psgemm drop-in (redistribute into the plan's
// layouts, multiply, redistribute C's submatrix back).
//
// libtessera does not link ScaLAPACK: the few BLACS calls are weak
// references, resolved when the program links ScaLAPACK (which it does if it
// has BLACS grids to pass in); without it the calls return UNSUPPORTED.
//
// The context tsr_pdgemm uses for a BLACS grid lives as an MPI attribute of
// the grid's communicator (the duplicate BLACS keeps as its "system
// context"): created collectively on first use, destroyed by the attribute's
// delete callback when BLACS frees that communicator (blacs_gridexit), so
// nothing is left behind and nothing is global but the attribute key.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <vector>

#include "core.hpp"
#include "gemm_internal.hpp"
#include "scalapack_dropin.hpp"
#include "transport.hpp"

extern "C" {
void Cblacs_gridinfo(int ctxt, int* nprow, int* npcol, int* myrow, int* mycol)
    __attribute__((weak, visibility("default")));
void Cblacs_get(int ctxt, int what, int* val) __attribute__((weak, visibility("default")));
MPI_Comm Cblacs2sys_handle(int sysctxt) __attribute__((weak, visibility("default")));
}

namespace tsr {
namespace gemm {
namespace {

bool have_blacs() { return Cblacs_gridinfo != nullptr && Cblacs_get != nullptr && Cblacs2sys_handle != nullptr; }

tsr_status no_blacs() {
  return fail(TSR_ERR_UNSUPPORTED, "ScaLAPACK's BLACS is not linked into this program (Cblacs_gridinfo, Cblacs_get "
              "and Cblacs2sys_handle are missing): link ScaLAPACK to use BLACS descriptors");
}


// The block-cyclic distribution of a descriptor, given the grid's rank map.
Dist scalapack_dist(tsr_context ctx, const int* desc, tsr_dtype type, int nprow, int npcol, int myrow, int mycol,
                    std::vector<int> rank_of) {
  Dist d;
  d.ctx = ctx;
  d.dims = {nprow, npcol, 1};
  d.rank_of = std::move(rank_of);
  d.member = myrow >= 0 && mycol >= 0;
  if (d.member) d.coords = {myrow, mycol, 0};
  d.m = desc[2];
  d.n = desc[3];
  d.type = type;
  if (nprow > 1) {
    d.lay.rows.levels = 1;
    d.lay.rows.dim[0] = 0;
    d.lay.rows.parts[0] = nprow;
    d.lay.rows.block = desc[4];
    d.lay.rows.src = desc[6];
  }
  if (npcol > 1) {
    d.lay.cols.levels = 1;
    d.lay.cols.dim[0] = 1;
    d.lay.cols.parts[0] = npcol;
    d.lay.cols.block = desc[5];
    d.lay.cols.src = desc[7];
  }
  d.finish(desc[8]);
  return d;
}

// Checks of one descriptor on a rank of its grid; name: "desca"...
tsr_status check_desc(const int* desc, const char* name, int nprow, int npcol, int myrow, int mycol) {
  if (desc == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", name);
  if (desc[0] != 1)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s': descriptor type %d; only type 1 (block-cyclic 2D) is supported",
                name, desc[0]);
  if (desc[2] < 0 || desc[3] < 0 || desc[4] < 1 || desc[5] < 1)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s': M = %d, N = %d must be >= 0 and MB = %d, NB = %d >= 1", name,
                desc[2], desc[3], desc[4], desc[5]);
  if (desc[6] < 0 || desc[6] >= nprow || desc[7] < 0 || desc[7] >= npcol)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s': RSRC = %d, CSRC = %d are outside the %d x %d grid", name, desc[6],
                desc[7], nprow, npcol);
  // numroc: this rank's local rows.
  Split s;
  if (nprow > 1) {
    s.levels = 1;
    s.dim[0] = 0;
    s.parts[0] = nprow;
    s.block = desc[4];
    s.src = desc[6];
  }
  const int64_t rows = local_len(s, desc[2], Dims{myrow, mycol, 0});
  if (desc[8] < std::max<int64_t>(1, rows))
    return fail(TSR_ERR_INVALID_ARG, "argument '%s': LLD = %d is smaller than this rank's %lld local rows", name,
                desc[8], static_cast<long long>(rows));
  return TSR_SUCCESS;
}

// ------------------------------------------------------------ the cache
struct Cache {
  tsr_context ctx = nullptr;
  ScalapackGrids grids;
};

int g_keyval = MPI_KEYVAL_INVALID;

int delete_cache(MPI_Comm, int, void* attr, void*) {
  Cache* c = static_cast<Cache*>(attr);
  free_grids(&c->grids);
  tsr_context_destroy(&c->ctx);
  delete c;
  return MPI_SUCCESS;
}

// The BLACS grid of ctxt: its communicator, shape and my position
// (myrow = -1 off the grid).
struct Blacs {
  MPI_Comm comm = MPI_COMM_NULL;
  int nprow = -1, npcol = -1, myrow = -1, mycol = -1;
};
Blacs blacs_of(int ctxt) {
  Blacs b;
  Cblacs_gridinfo(ctxt, &b.nprow, &b.npcol, &b.myrow, &b.mycol);
  if (b.myrow < 0 || b.mycol < 0 || b.nprow < 1 || b.npcol < 1) {
    b.myrow = b.mycol = -1;
    return b;
  }
  int sys = -1;
  Cblacs_get(ctxt, 10, &sys);  // the system context of the grid's communicator
  b.comm = Cblacs2sys_handle(sys);
  return b;
}

// The cached context and grids of a BLACS grid's communicator (collective
// over it on first use).
tsr_status cache_of(MPI_Comm comm, Cache** out) {
  if (g_keyval == MPI_KEYVAL_INVALID)
    TSR_MPI_TRY(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cache, &g_keyval, nullptr));
  void* val = nullptr;
  int flag = 0;
  TSR_MPI_TRY(MPI_Comm_get_attr(comm, g_keyval, &val, &flag));
  if (flag) {
    *out = static_cast<Cache*>(val);
    return TSR_SUCCESS;
  }
  std::unique_ptr<Cache> c(new (std::nothrow) Cache());
  if (!c) return fail(TSR_ERR_NO_MEMORY, "allocating the ScaLAPACK context cache");
  if (tsr_context_create(comm, &c->ctx) != TSR_SUCCESS) {
    const std::string msg = tsr_last_error(nullptr);
    return fail(TSR_ERR_MPI, "creating the context of the BLACS grid: %s", msg.c_str());
  }
  const int rc = MPI_Comm_set_attr(comm, g_keyval, c.get());
  if (rc != MPI_SUCCESS) {
    tsr_context_destroy(&c->ctx);
    return mpi_fail(rc, "MPI_Comm_set_attr");
  }
  *out = c.release();
  return TSR_SUCCESS;
}

tsr_status grid_of(tsr_context ctx, ScalapackGrids* c, tsr_grid_kind kind, const int* dims, tsr_grid* out) {
  const std::array<int, 4> key{kind, dims[0], dims[1], dims[2]};
  auto it = c->grids.find(key);
  if (it != c->grids.end()) {
    *out = it->second;
    return TSR_SUCCESS;
  }
  tsr_grid g = nullptr;
  if (tsr_grid_create(ctx, kind, dims, &g) != TSR_SUCCESS) {
    const std::string msg = tsr_last_error(ctx);
    return fail(TSR_ERR_INTERNAL, "creating the plan's grid: %s", msg.c_str());
  }
  c->grids[key] = g;
  *out = g;
  return TSR_SUCCESS;
}

// C's window = beta C's window (k = 0 or alpha = 0), locally.
template <class T>
void scale_window(const Dist& d, T* c, int64_t r0, int64_t c0, int64_t m, int64_t n, T beta) {
  for (const Piece& pc : pieces(d.lay.cols, d.n, d.coords))
    for (int64_t j = std::max(pc.g, c0); j < std::min(pc.g + pc.len, c0 + n); ++j)
      for (const Piece& pr : pieces(d.lay.rows, d.m, d.coords)) {
        const int64_t a = std::max(pr.g, r0), b = std::min(pr.g + pr.len, r0 + m);
        T* col = c + (pc.loc + (j - pc.g)) * d.ld;
        for (int64_t i = a; i < b; ++i) {
          T& x = col[pr.loc + (i - pr.g)];
          x = beta == T(0) ? T(0) : beta * x;
        }
      }
}

template <class T>
tsr_status pxgemm(const char* transa, const char* transb, const int* m, const int* n, const int* k, const T* alpha,
                  const T* a, const int* ia, const int* ja, const int* desca, const T* b, const int* ib, const int* jb,
                  const int* descb, const T* beta, T* c, const int* ic, const int* jc, const int* descc,
                  tsr_context given, ScalapackGrids* given_grids, tsr_context* used) {
  if (given != nullptr) TSR_TRY(check_context(given));
  if (!have_blacs()) return no_blacs();
  TSR_CHECK_NOT_NULL(desca);
  const Blacs g = blacs_of(desca[1]);
  if (g.myrow < 0) return TSR_SUCCESS;  // not in the BLACS grid: nothing to do (as pdgemm)
  tsr_context ctx = given;
  ScalapackGrids* grids = given_grids;
  if (ctx == nullptr) {
    Cache* cache = nullptr;
    TSR_TRY(cache_of(g.comm, &cache));
    ctx = cache->ctx;
    grids = &cache->grids;
  }
  *used = ctx;
  const tsr_dtype type = dtype_of<T>::value;
  bool ta = false, tb = false;
  auto local = [&]() -> tsr_status {
    const struct {
      const void* p;
      const char* name;
    } args[] = {{transa, "transa"}, {transb, "transb"}, {m, "m"},   {n, "n"},   {k, "k"},
                {alpha, "alpha"},   {beta, "beta"},     {ia, "ia"}, {ja, "ja"}, {ib, "ib"},
                {jb, "jb"},         {ic, "ic"},         {jc, "jc"}, {descb, "descb"}, {descc, "descc"}};
    for (const auto& x : args)
      if (x.p == nullptr)
        return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL (pdgemm takes every argument by address)", x.name);
    if (given != nullptr && (ctx->size != g.nprow * g.npcol || ctx->rank != g.myrow * g.npcol + g.mycol))
      return fail(TSR_ERR_INVALID_ARG,
                  "argument 'ctx': rank %d of %d, but this process is (%d, %d) of the %d x %d BLACS grid (the context "
                  "must span the grid, rank prow*npcol + pcol)",
                  ctx->rank, ctx->size, g.myrow, g.mycol, g.nprow, g.npcol);
    auto tr = [](char x, bool* t, const char* name) -> tsr_status {
      if (x == 'N' || x == 'n') *t = false;
      else if (x == 'T' || x == 't' || x == 'C' || x == 'c') *t = true;
      else return fail(TSR_ERR_INVALID_ARG, "argument '%s' = '%c'; expected 'N', 'T' or 'C'", name, x);
      return TSR_SUCCESS;
    };
    TSR_TRY(tr(*transa, &ta, "transa"));
    TSR_TRY(tr(*transb, &tb, "transb"));
    if (*m < 0 || *n < 0 || *k < 0)
      return fail(TSR_ERR_INVALID_ARG, "arguments m = %d, n = %d, k = %d must be >= 0", *m, *n, *k);
    if (*ia < 1 || *ja < 1 || *ib < 1 || *jb < 1 || *ic < 1 || *jc < 1)
      return fail(TSR_ERR_INVALID_ARG, "offsets ia, ja, ib, jb, ic, jc are 1-based and must be >= 1");
    TSR_TRY(check_desc(desca, "desca", g.nprow, g.npcol, g.myrow, g.mycol));
    TSR_TRY(check_desc(descb, "descb", g.nprow, g.npcol, g.myrow, g.mycol));
    TSR_TRY(check_desc(descc, "descc", g.nprow, g.npcol, g.myrow, g.mycol));
    if (descb[1] != desca[1] || descc[1] != desca[1])
      return fail(TSR_ERR_INVALID_ARG, "desca, descb and descc must share one BLACS context (got %d, %d, %d)",
                  desca[1], descb[1], descc[1]);
    const int64_t ar = ta ? *k : *m, ac = ta ? *m : *k, br = tb ? *n : *k, bc = tb ? *k : *n;
    auto inside = [](const int* desc, int i, int j, int64_t r, int64_t cc, const char* name) -> tsr_status {
      if (r > 0 && cc > 0 && (i - 1 + r > desc[2] || j - 1 + cc > desc[3]))
        return fail(TSR_ERR_SHAPE, "the %lld x %lld submatrix of %s at (%d, %d) does not fit its %d x %d matrix",
                    static_cast<long long>(r), static_cast<long long>(cc), name, i, j, desc[2], desc[3]);
      return TSR_SUCCESS;
    };
    TSR_TRY(inside(desca, *ia, *ja, ar, ac, "A"));
    TSR_TRY(inside(descb, *ib, *jb, br, bc, "B"));
    TSR_TRY(inside(descc, *ic, *jc, *m, *n, "C"));
    // The local arrays: NULL only where this rank holds no element of the
    // matrix, or the call does not touch it (A and B with k = 0 or alpha = 0).
    std::vector<int> ranks(static_cast<size_t>(g.nprow * g.npcol));
    for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
    const bool reads_ab = *m > 0 && *n > 0 && *k > 0 && *alpha != T(0);
    const struct {
      const int* desc;
      const void* p;
      const char* name;
      bool used;
    } mats[] = {{desca, a, "a", reads_ab}, {descb, b, "b", reads_ab}, {descc, c, "c", *m > 0 && *n > 0}};
    for (const auto& x : mats) {
      if (x.p != nullptr || !x.used) continue;
      const Dist d = scalapack_dist(ctx, x.desc, type, g.nprow, g.npcol, g.myrow, g.mycol, ranks);
      if (d.rows > 0 && d.cols > 0)
        return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL but this rank holds a %lld x %lld block of it", x.name,
                    static_cast<long long>(d.rows), static_cast<long long>(d.cols));
    }
    return TSR_SUCCESS;
  };
  const tsr_status st = local();
  std::vector<Same> same;
  if (st == TSR_SUCCESS) {
    double al = static_cast<double>(*alpha), be = static_cast<double>(*beta);
    int64_t abits = 0, bbits = 0;
    std::memcpy(&abits, &al, 8);
    std::memcpy(&bbits, &be, 8);
    same = {{"transa", ta},      {"transb", tb},       {"m", *m},   {"n", *n},   {"k", *k},   {"alpha", abits, true},
            {"beta", bbits, true}, {"ia", *ia},        {"ja", *ja}, {"ib", *ib}, {"jb", *jb}, {"ic", *ic},
            {"jc", *jc},         {"desca[2] (M_A)", desca[2]}, {"desca[3] (N_A)", desca[3]},
            {"descb[2] (M_B)", descb[2]}, {"descb[3] (N_B)", descb[3]}, {"descc[2] (M_C)", descc[2]},
            {"descc[3] (N_C)", descc[3]}, {"desca[4] (MB_A)", desca[4]}, {"desca[5] (NB_A)", desca[5]},
            {"descb[4] (MB_B)", descb[4]}, {"descb[5] (NB_B)", descb[5]}, {"descc[4] (MB_C)", descc[4]},
            {"descc[5] (NB_C)", descc[5]}};
  }
  TSR_TRY(agree(*ctx->world, st, same));

  // The BLACS grid over the cached context: context rank = prow*npcol + pcol.
  std::vector<int> rank_of(static_cast<size_t>(g.nprow * g.npcol));
  for (size_t r = 0; r < rank_of.size(); ++r) rank_of[r] = static_cast<int>(r);
  const Dist sa = scalapack_dist(ctx, desca, type, g.nprow, g.npcol, g.myrow, g.mycol, rank_of);
  const Dist sb = scalapack_dist(ctx, descb, type, g.nprow, g.npcol, g.myrow, g.mycol, rank_of);
  const Dist sc = scalapack_dist(ctx, descc, type, g.nprow, g.npcol, g.myrow, g.mycol, rank_of);
  if (*m == 0 || *n == 0) return TSR_SUCCESS;
  if (*k == 0 || *alpha == T(0)) {
    scale_window(sc, c, *ic - 1, *jc - 1, *m, *n, *beta);
    return TSR_SUCCESS;
  }

  // Plan, then redistribute into the plan's layouts on its (cached) grid.
  tsr_gemm_problem prob = TSR_GEMM_PROBLEM_INIT;
  prob.m = *m;
  prob.n = *n;
  prob.k = *k;
  prob.elem_size = sizeof(T);
  prob.nranks = g.nprow * g.npcol;
  prob.transa = ta ? TSR_TRANS : TSR_NOTRANS;
  prob.transb = tb ? TSR_TRANS : TSR_NOTRANS;
  prob.context = ctx;  // its default objective (tsr_context_set_objective on tsr_scalapack_context)
  tsr_gemm_plan plan;
  if (tsr_gemm_plan_create(&prob, &plan) != TSR_SUCCESS) {
    const std::string msg = tsr_last_error(nullptr);
    return fail(TSR_ERR_INTERNAL, "planning: %s", msg.c_str());
  }
  tsr_grid grid = nullptr;
  TSR_TRY(agree(*ctx->world, grid_of(ctx, grids, plan.grid_kind, plan.dims, &grid)));
  const Dist da = grid_dist(grid, ta ? *k : *m, ta ? *m : *k, type, plan.layouts[0], 0);
  const Dist db = grid_dist(grid, tb ? *n : *k, tb ? *k : *n, type, plan.layouts[1], 0);
  const Dist dc = grid_dist(grid, *m, *n, type, plan.layouts[2], 0);
  // Everything this rank will send, receive and compute, sized before
  // anything moves: the three operands in the plan's layouts stay for the
  // whole call, each redistribution and the multiplication use the rest of
  // the context's workspace in turn.
  const Redist ra = plan_redistribution(sa, *ia - 1, *ja - 1, da, 0, 0, da.m, da.n);
  const Redist rb = plan_redistribution(sb, *ib - 1, *jb - 1, db, 0, 0, db.m, db.n);
  const Redist rc = plan_redistribution(sc, *ic - 1, *jc - 1, dc, 0, 0, *m, *n);
  const Redist back = plan_redistribution(dc, 0, 0, sc, *ic - 1, *jc - 1, *m, *n);
  Call call;
  call.grid = grid;
  call.algo = plan.options.algo;
  call.roles.m = plan.roles[0];
  call.roles.n = plan.roles[1];
  call.roles.k = plan.roles[2];
  call.shape.m = *m;
  call.shape.n = *n;
  call.shape.k = *k;
  call.shape.ta = ta;
  call.shape.tb = tb;
  call.shape.w = sizeof(T);
  call.a = &da;
  call.b = &db;
  call.c = &dc;
  call.alpha = static_cast<double>(*alpha);
  call.beta = static_cast<double>(*beta);
  call.panel = plan.options.panel;
  call.overlap = plan.options.overlap != 0;
  const size_t na = static_cast<size_t>(da.rows * da.cols), nb = static_cast<size_t>(db.rows * db.cols),
               nc = static_cast<size_t>(dc.rows * dc.cols);
  const size_t steps = std::max({ra.bytes(), rb.bytes(), *beta != T(0) ? rc.bytes() : size_t(0), work_bytes(call),
                                 back.bytes()});
  TSR_TRY(agree(*ctx->world, reserve(ctx, padded(na * sizeof(T)) + padded(nb * sizeof(T)) + padded(nc * sizeof(T)) +
                                              steps)));
  Arena arena(ctx);
  T* la = arena.take<T>(na);
  T* lb = arena.take<T>(nb);
  T* lc = arena.take<T>(nc);
  TSR_TRY(run_redistribution(ra, a, la, arena));
  TSR_TRY(run_redistribution(rb, b, lb, arena));
  if (*beta != T(0)) TSR_TRY(run_redistribution(rc, c, lc, arena));
  call.abuf = la;
  call.bbuf = lb;
  call.cbuf = lc;
  const size_t mark = arena.mark();
  const tsr_status est = dc.member ? execute(call, arena) : TSR_SUCCESS;
  arena.release(mark);
  TSR_TRY(agree(*ctx->world, est));
  return run_redistribution(back, lc, c, arena);
}

tsr_status create_scalapack(tsr_context ctx, const int* desc, tsr_dtype type, tsr_matrix* mat) {
  TSR_TRY(check_context(ctx));
  Blacs g;
  auto local = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(mat);
    *mat = nullptr;
    TSR_CHECK_NOT_NULL(desc);
    if (!have_blacs()) return no_blacs();
    if (type != TSR_FLOAT32 && type != TSR_FLOAT64)
      return fail(TSR_ERR_INVALID_ARG, "argument 'type' = %s; matrices are TSR_FLOAT32 or TSR_FLOAT64", dtype_name(type));
    if (desc[1] >= 0) {
      Cblacs_gridinfo(desc[1], &g.nprow, &g.npcol, &g.myrow, &g.mycol);
      if (g.myrow < 0) g.nprow = g.npcol = -1;
    }
    if (g.myrow >= 0) TSR_TRY(check_desc(desc, "desc", g.nprow, g.npcol, g.myrow, g.mycol));
    return TSR_SUCCESS;
  };
  TSR_TRY(agree(*ctx->world, local()));
  // Learn every rank's grid position and the descriptor (control traffic).
  const int P = ctx->size;
  std::vector<int> mine{g.myrow, g.mycol, g.nprow, g.npcol, 0, 0, 0, 0, 0, 0};
  if (g.myrow >= 0)
    for (int x = 0; x < 6; ++x) mine[static_cast<size_t>(4 + x)] = desc[2 + x];
  std::vector<int> all(static_cast<size_t>(10 * P));
  TSR_TRY(allgather(*ctx->world, mine.data(), 10, all.data(), TSR_INT32, nullptr, Traffic::control));
  int nprow = -1, npcol = -1;
  std::vector<int> ref;
  tsr_status st = TSR_SUCCESS;
  for (int r = 0; r < P && st == TSR_SUCCESS; ++r) {
    const int* e = &all[static_cast<size_t>(10 * r)];
    if (e[0] < 0) continue;
    if (nprow < 0) {
      nprow = e[2];
      npcol = e[3];
      ref.assign(e + 4, e + 10);
    } else if (e[2] != nprow || e[3] != npcol || !std::equal(ref.begin(), ref.end(), e + 4)) {
      st = fail(TSR_ERR_INVALID_ARG, "rank %d describes another BLACS grid or matrix than the others", r);
    }
  }
  std::vector<int> rank_of;
  if (st == TSR_SUCCESS && nprow < 0) st = fail(TSR_ERR_INVALID_ARG, "no rank of the context is in the BLACS grid");
  if (st == TSR_SUCCESS) {
    rank_of.assign(static_cast<size_t>(nprow * npcol), -1);
    for (int r = 0; r < P && st == TSR_SUCCESS; ++r) {
      const int* e = &all[static_cast<size_t>(10 * r)];
      if (e[0] < 0) continue;
      int& slot = rank_of[static_cast<size_t>(e[0] * npcol + e[1])];
      if (slot >= 0) st = fail(TSR_ERR_INVALID_ARG, "ranks %d and %d hold the same BLACS grid position", slot, r);
      slot = r;
    }
    for (size_t x = 0; x < rank_of.size() && st == TSR_SUCCESS; ++x)
      if (rank_of[x] < 0) st = fail(TSR_ERR_INVALID_ARG, "BLACS grid position %zu has no rank of the context", x);
  }
  if (st != TSR_SUCCESS) return st;  // the same on every rank (computed from the gathered data)
  std::unique_ptr<tsr_matrix_s> out(new (std::nothrow) tsr_matrix_s());
  TSR_TRY(agree(*ctx->world, out ? TSR_SUCCESS : fail(TSR_ERR_NO_MEMORY, "allocating a matrix descriptor")));
  int full[9] = {1, -1, ref[0], ref[1], ref[2], ref[3], ref[4], ref[5], g.myrow >= 0 ? desc[8] : 0};
  out->grid = nullptr;
  out->pub = tsr_layout{TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE, ref[2], ref[3]};
  out->dist = scalapack_dist(ctx, full, type, nprow, npcol, g.myrow, g.mycol, std::move(rank_of));
  *mat = out.release();
  return TSR_SUCCESS;
}

}  // namespace

void free_grids(ScalapackGrids* g) {
  for (auto& x : g->grids) tsr_grid_destroy(&x.second);
  g->grids.clear();
}

tsr_status pdgemm_on(tsr_context ctx, ScalapackGrids* grids, const char* transa, const char* transb, const int* m,
                     const int* n, const int* k, const double* alpha, const double* a, const int* ia, const int* ja,
                     const int* desca, const double* b, const int* ib, const int* jb, const int* descb,
                     const double* beta, double* c, const int* ic, const int* jc, const int* descc) {
  tsr_context used = nullptr;
  if (ctx == nullptr || grids == nullptr)
    return finish(nullptr, "pdgemm_", fail(TSR_ERR_INVALID_ARG, "argument 'ctx' or 'grids' is NULL"));
  const tsr_status st =
      pxgemm<double>(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc, ctx,
                     grids, &used);
  return finish(used, "pdgemm_", st);
}

tsr_status psgemm_on(tsr_context ctx, ScalapackGrids* grids, const char* transa, const char* transb, const int* m,
                     const int* n, const int* k, const float* alpha, const float* a, const int* ia, const int* ja,
                     const int* desca, const float* b, const int* ib, const int* jb, const int* descb,
                     const float* beta, float* c, const int* ic, const int* jc, const int* descc) {
  tsr_context used = nullptr;
  if (ctx == nullptr || grids == nullptr)
    return finish(nullptr, "psgemm_", fail(TSR_ERR_INVALID_ARG, "argument 'ctx' or 'grids' is NULL"));
  const tsr_status st =
      pxgemm<float>(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc, ctx,
                    grids, &used);
  return finish(used, "psgemm_", st);
}

}  // namespace gemm
}  // namespace tsr

using tsr::finish;

extern "C" {

tsr_status tsr_pdgemm(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                      const double* alpha, const double* a, const int* ia, const int* ja, const int* desca,
                      const double* b, const int* ib, const int* jb, const int* descb, const double* beta, double* c,
                      const int* ic, const int* jc, const int* descc) {
  tsr_context used = nullptr;
  const tsr_status st = tsr::gemm::pxgemm<double>(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb,
                                                  beta, c, ic, jc, descc, nullptr, nullptr, &used);
  return finish(used, "tsr_pdgemm", st);
}

tsr_status tsr_psgemm(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                      const float* alpha, const float* a, const int* ia, const int* ja, const int* desca,
                      const float* b, const int* ib, const int* jb, const int* descb, const float* beta, float* c,
                      const int* ic, const int* jc, const int* descc) {
  tsr_context used = nullptr;
  const tsr_status st = tsr::gemm::pxgemm<float>(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb,
                                                 beta, c, ic, jc, descc, nullptr, nullptr, &used);
  return finish(used, "tsr_psgemm", st);
}

tsr_status tsr_scalapack_context(int blacs_context, tsr_context* ctx) {
  tsr_status st = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(ctx);
    *ctx = nullptr;
    if (!tsr::gemm::have_blacs()) return tsr::gemm::no_blacs();
    const tsr::gemm::Blacs g = tsr::gemm::blacs_of(blacs_context);
    if (g.myrow < 0)
      return tsr::fail(TSR_ERR_INVALID_ARG, "this rank is not in the BLACS grid of context %d", blacs_context);
    tsr::gemm::Cache* cache = nullptr;
    TSR_TRY(tsr::gemm::cache_of(g.comm, &cache));
    *ctx = cache->ctx;
    return TSR_SUCCESS;
  }();
  return finish(ctx ? *ctx : nullptr, "tsr_scalapack_context", st);
}

tsr_status tsr_matrix_create_scalapack(tsr_context ctx, const int desc[9], tsr_dtype type, tsr_matrix* mat) {
  tsr_context c = ctx != nullptr && ctx->magic == tsr_context_s::kMagic ? ctx : nullptr;
  return finish(c, "tsr_matrix_create_scalapack", tsr::gemm::create_scalapack(ctx, desc, type, mat));
}

}  // extern "C"

// Distributed GEMM benchmark: tessera's planned algorithm and its 1D, 2D,
// 2.5D and 3D algorithms, the pdgemm drop-in, ScaLAPACK's pdgemm and (when
// built with it) COSMA, on the same ranks and sizes in one run, plus one
// rank's local GEMM for reference. Variants run round-robin, one repetition
// of each in turn (the order rotating by one per round), so that all of
// them see the same machine; each time is
// the slowest rank's (barrier, then max over ranks), and the table gives the
// median over repetitions. Bytes and messages per rank are the busiest
// rank's wire-received bytes and messages from tessera's ledger (data moved
// by ScaLAPACK and COSMA is not visible to it); bytes/LB divides them by
// tsr_gemm_lower_bound. Every variant's result is checked (C v against
// A (B v) for a fixed vector v).
//
//   mpiexec -n 4 bench_gemm [--n 4096 | --m M --n N --k K] [--type double|float]
//           [--reps 5] [--nb 128[,64,...]]
//           [--algos serial,plan,1d,2d,2.5d,3d,3d-cube,dropin,pdgemm,cosma]
//           [--machine measure|default|alpha=A,beta=B,gamma=G] [--csv out.csv] [--json out.json]
//   bench_gemm --plan-only 64 --m 32768 --k 8192 --n 32768 --elem 2   (the planner alone)
//   [--warmup 1]: untimed runs of each variant before the repetitions
//   [--skip-compute] (SimGrid SMPI builds only): the local GEMMs return at
//   once, see skip_compute below; [--shared-malloc BYTES] (with it): large
//   buffers folded by SMPI_SHARED_MALLOC, see shared_threshold below
// --machine alpha=..,beta=..,gamma=.. plans with the given figures (seconds
// per message, per byte, per flop; a field left out or 0 takes the
// planner's default): e.g. a SimGrid platform's link figures, so that the
// plan and its modelled time are those of the simulated machine.
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/tessera.h"

#if TSR_BENCH_SCALAPACK
extern "C" {
void Cblacs_get(int ctxt, int what, int* val);
void Cblacs_gridinit(int* ctxt, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int ctxt);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb, const int* irsrc, const int* icsrc,
               const int* ictxt, const int* lld, int* info);
void pdgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*, const int*,
             const int*, const int*, const double*, const int*, const int*, const int*, const double*, double*,
             const int*, const int*, const int*);
void psgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*, const int*,
             const int*, const int*, const float*, const int*, const int*, const int*, const float*, float*,
             const int*, const int*, const int*);
}
#endif
#if TSR_BENCH_COSMA
#include <cosma/cosma_pxgemm.hpp>
#include <cosma/multiply.hpp>
#endif

#if TSR_BENCH_SMPI
// --skip-compute, SimGrid SMPI builds only (the study's default there, with
// smpi/simulate-computation:no). One process runs every simulated rank, so
// the local GEMMs, which take no simulated time in that mode, were most of
// a simulation's CPU (70 % of a 1024-rank SUMMA). Defined in the executable,
// these two take the place of OpenBLAS's for libtessera (linked statically)
// and return at once when skipping, else call OpenBLAS's (RTLD_NEXT). What
// a GEMM sends, to whom and how much, does not depend on the values, so the
// ledger's bytes and messages and the simulated network time are those of a
// computing run (test study_smpi_exact_bytes runs both ways); the result is
// not checked (check: null). The flag is set once from the command line, the
// same on every simulated rank, so sharing it between ranks (SMPI without
// privatisation) is harmless.
#include <dlfcn.h>
namespace {
bool& skip_compute() {
  static bool skip = false;
  return skip;
}
// OpenBLAS's routine (linked without --as-needed, after this object).
template <class F>
F next_symbol(const char* name, F self) {
  F f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  if (f == nullptr || f == self) {
    std::fprintf(stderr, "bench_gemm: no %s after the program's own (link OpenBLAS)\n", name);
    std::abort();
  }
  return f;
}
}  // namespace
extern "C" {
void cblas_dgemm(OPENBLAS_CONST enum CBLAS_ORDER o, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n,
                 OPENBLAS_CONST blasint k, OPENBLAS_CONST double alpha, OPENBLAS_CONST double* a,
                 OPENBLAS_CONST blasint lda, OPENBLAS_CONST double* b, OPENBLAS_CONST blasint ldb,
                 OPENBLAS_CONST double beta, double* c, OPENBLAS_CONST blasint ldc) {
  if (skip_compute()) return;
  using F = decltype(&cblas_dgemm);
  static const F next = next_symbol<F>("cblas_dgemm", &cblas_dgemm);
  next(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER o, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n,
                 OPENBLAS_CONST blasint k, OPENBLAS_CONST float alpha, OPENBLAS_CONST float* a,
                 OPENBLAS_CONST blasint lda, OPENBLAS_CONST float* b, OPENBLAS_CONST blasint ldb,
                 OPENBLAS_CONST float beta, float* c, OPENBLAS_CONST blasint ldc) {
  if (skip_compute()) return;
  using F = decltype(&cblas_sgemm);
  static const F next = next_symbol<F>("cblas_sgemm", &cblas_sgemm);
  next(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}

// --shared-malloc BYTES (with --skip-compute): every allocation of at least
// BYTES through operator new (bench_gemm's blocks, libtessera's GEMM
// workspace pool, both linked into this program) comes from SimGrid's
// SMPI_SHARED_MALLOC: all of them fold onto one small physical block
// (smpi/shared-malloc:global), and SMPI skips copying message data between
// such buffers. Only the values are lost, and with --skip-compute nothing
// reads them: the ledger's bytes, the messages and the simulated times are
// unchanged (test study_smpi_exact_bytes). 2.5D at n = 4096 on 4096 ranks
// held 20 GB without.
#include <new>
#include <unordered_set>
namespace {
size_t& shared_threshold() {
  static size_t bytes = 0;  // 0: off
  return bytes;
}
// The shared allocations (freed with SMPI_SHARED_FREE); never destroyed, so
// that deletes during exit still find it.
std::unordered_set<void*>& shared_set() {
  static auto* set = new std::unordered_set<void*>();
  return *set;
}
void* alloc(size_t n, bool nothrow) {
  if (shared_threshold() != 0 && n >= shared_threshold() && skip_compute()) {
    void* p = SMPI_SHARED_MALLOC(n);
    if (p != nullptr) {
      shared_set().insert(p);
      return p;
    }
  }
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr && !nothrow) throw std::bad_alloc();
  return p;
}
void* alloc_aligned(size_t n, std::align_val_t al, bool nothrow) {
  const size_t a = static_cast<size_t>(al);
  if (a <= 4096 && shared_threshold() != 0 && n >= shared_threshold() && skip_compute())
    return alloc(n, nothrow);  // SMPI's shared blocks are page aligned
  void* p = std::aligned_alloc(a, (std::max<size_t>(n, 1) + a - 1) / a * a);
  if (p == nullptr && !nothrow) throw std::bad_alloc();
  return p;
}
void release(void* p) {
  if (p == nullptr) return;
  auto& set = shared_set();
  auto it = set.find(p);
  if (it != set.end()) {
    set.erase(it);
    SMPI_SHARED_FREE(p);
    return;
  }
  std::free(p);
}
}  // namespace
void* operator new(size_t n) { return alloc(n, false); }
void* operator new[](size_t n) { return alloc(n, false); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return alloc(n, true); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return alloc(n, true); }
void* operator new(size_t n, std::align_val_t a) { return alloc_aligned(n, a, false); }
void* operator new[](size_t n, std::align_val_t a) { return alloc_aligned(n, a, false); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return alloc_aligned(n, a, true); }
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return alloc_aligned(n, a, true); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
#else
namespace {
bool& skip_compute() {
  static bool skip = false;  // never set outside SMPI builds
  return skip;
}
}  // namespace
#endif

namespace {

// No mutable globals (but skip_compute above): SimGrid SMPI without privatisation (smpirun
// -no-privatize, the cheapest at thousands of simulated ranks) runs every
// rank in one address space, where they would be shared.
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

double val(int id, int64_t i, int64_t j) {
  uint64_t h = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(id + 1) ^ (static_cast<uint64_t>(i) * 0xbf58476d1ce4e5b9ull) ^
               (static_cast<uint64_t>(j) * 0x94d049bb133111ebull);
  h ^= h >> 31;
  h *= 0xd6e8feb86659fd39ull;
  h ^= h >> 29;
  return static_cast<double>(h >> 11) / static_cast<double>(1ull << 52) - 1.0;
}

void die(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "bench_gemm (rank %d): %s\n", world_rank(), msg.c_str());
  MPI_Abort(MPI_COMM_WORLD, code);
}
void usage(const std::string& msg) { die(msg, 2); }  // a bad command line: exit code 2
void ok(tsr_status st, tsr_context ctx, const char* what) {
  if (st != TSR_SUCCESS) die(std::string(what) + ": " + tsr_last_error(ctx));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// A local block: element (r, c) at data[c*ld + r] is global (gi(r), gj(c)).
template <class T>
struct Block {
  std::vector<T> data;
  int64_t rows = 0, cols = 0, ld = 1;
  std::function<int64_t(int64_t)> gi, gj;
  void fill(int id) {
    data.assign(static_cast<size_t>(std::max<int64_t>(1, ld * cols)), T(0));
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t j = gj(c);
      for (int64_t r = 0; r < rows; ++r) data[static_cast<size_t>(c * ld + r)] = static_cast<T>(val(id, gi(r), j));
    }
  }
};

// Relative error of C v against A (B v), all three blocks holding each
// element on exactly one rank (ta, tb: A, B stored transposed).
template <class T>
double check(const Block<T>& A, const Block<T>& B, const Block<T>& C, int64_t m, int64_t n, int64_t k, bool ta,
             bool tb) {
  std::vector<double> v(static_cast<size_t>(n)), u(static_cast<size_t>(k), 0.0), z(static_cast<size_t>(m), 0.0),
      y(static_cast<size_t>(m), 0.0);
  for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(j)] = val(99, j, 0);
  for (int64_t c = 0; c < B.cols; ++c)
    for (int64_t r = 0; r < B.rows; ++r) {
      const int64_t l = tb ? B.gj(c) : B.gi(r), j = tb ? B.gi(r) : B.gj(c);
      u[static_cast<size_t>(l)] += static_cast<double>(B.data[static_cast<size_t>(c * B.ld + r)]) * v[static_cast<size_t>(j)];
    }
  MPI_Allreduce(MPI_IN_PLACE, u.data(), static_cast<int>(k), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  for (int64_t c = 0; c < A.cols; ++c)
    for (int64_t r = 0; r < A.rows; ++r) {
      const int64_t i = ta ? A.gj(c) : A.gi(r), l = ta ? A.gi(r) : A.gj(c);
      z[static_cast<size_t>(i)] += static_cast<double>(A.data[static_cast<size_t>(c * A.ld + r)]) * u[static_cast<size_t>(l)];
    }
  for (int64_t c = 0; c < C.cols; ++c)
    for (int64_t r = 0; r < C.rows; ++r)
      y[static_cast<size_t>(C.gi(r))] += static_cast<double>(C.data[static_cast<size_t>(c * C.ld + r)]) *
                                         v[static_cast<size_t>(C.gj(c))];
  MPI_Allreduce(MPI_IN_PLACE, z.data(), static_cast<int>(m), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, y.data(), static_cast<int>(m), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double err = 0, mag = 0;
  for (int64_t i = 0; i < m; ++i) {
    err = std::max(err, std::fabs(y[static_cast<size_t>(i)] - z[static_cast<size_t>(i)]));
    mag = std::max(mag, std::fabs(z[static_cast<size_t>(i)]));
  }
  return m > 0 ? err / std::max(mag, 1e-300) : 0.0;
}

struct Row {
  std::string name, detail;
  std::vector<double> times;
  double bytes = -1, msgs = -1;  // busiest rank; -1: not measured
  double error = -1;
  bool available = true;
  std::string why;
};

struct Opts {
  int64_t m = 4096, n = 4096, k = 4096;
  bool dbl = true;
  int reps = 5;
  std::vector<int> nbs{128};
  std::vector<std::string> algos{"serial", "plan", "1d", "2d", "2.5d", "3d", "3d-cube", "dropin", "pdgemm", "cosma"};
  bool measure = true;
  int warmup = 1;
  tsr_gemm_machine given{0, 0, 0};  // --machine alpha=..,beta=..,gamma=..
  std::string machine_name = "defaults";
  std::string csv, json;
  bool want(const std::string& a) const { return std::find(algos.begin(), algos.end(), a) != algos.end(); }
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(x);
  return out;
}

// "alpha=A,beta=B,gamma=G" (any subset, any order) -> m; false on a bad key
// or a value that is not a finite number >= 0.
bool parse_machine(const std::string& s, tsr_gemm_machine* m) {
  for (const std::string& kv : split(s)) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return false;
    const std::string key = kv.substr(0, eq), val = kv.substr(eq + 1);
    char* end = nullptr;
    const double x = std::strtod(val.c_str(), &end);
    if (val.empty() || *end != '\0' || !std::isfinite(x) || x < 0) return false;
    if (key == "alpha") m->alpha = x;
    else if (key == "beta") m->beta = x;
    else if (key == "gamma") m->gamma = x;
    else return false;
  }
  return true;
}

// A measured variant: run() once per repetition, then verify().
struct Variant {
  Row row;
  std::function<void()> run;
  std::function<double()> verify;
  tsr_context counted = nullptr;  // whose ledger sees its traffic
};

template <class T>
struct Bench {
  Opts o;
  tsr_context ctx = nullptr;
  tsr_gemm_machine machine{0, 0, 0};  // set from o.given in run()
  tsr_dtype type = sizeof(T) == 8 ? TSR_FLOAT64 : TSR_FLOAT32;
  std::vector<std::unique_ptr<Variant>> vars;
  // Keeps tessera objects alive until the end.
  std::vector<tsr_grid> grids;
  std::vector<tsr_matrix> mats;
  std::vector<std::shared_ptr<void>> keep;

  // Blocks of a balanced tessera matrix (a contiguous rectangle per rank).
  Block<T> tessera_block(tsr_matrix M, int id) {
    Block<T> b;
    ok(tsr_matrix_local_size(M, &b.rows, &b.cols, &b.ld), ctx, "tsr_matrix_local_size");
    int64_t r0 = 0, c0 = 0;
    if (b.rows > 0 && b.cols > 0) ok(tsr_matrix_global_index(M, 0, 0, &r0, &c0), ctx, "tsr_matrix_global_index");
    b.gi = [r0](int64_t r) { return r0 + r; };
    b.gj = [c0](int64_t c) { return c0 + c; };
    b.fill(id);
    return b;
  }

  // cube > 0: the 3D algorithm on the cube grid cube x cube x cube (roles
  // i, j, k for m, n, k) instead of the planner's choice.
  void add_tessera(const std::string& name, tsr_gemm_algo algo, int cube = 0) {
    auto v = std::make_unique<Variant>();
    v->row.name = name;
    tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
    pr.m = o.m;
    pr.n = o.n;
    pr.k = o.k;
    pr.elem_size = sizeof(T);
    pr.nranks = world_size();
    pr.algo = algo;
    pr.allow_idle = algo == TSR_GEMM_AUTO ? 1 : 0;
    pr.machine = machine;
    auto plan = std::make_shared<tsr_gemm_plan>();
    // Rank 0 plans and broadcasts the plan (a plain struct; planning is
    // deterministic, so every rank would find the same): planning costs the
    // chosen plan's joules over every rank of its grid, O(P) per rank, which
    // under SimGrid SMPI, where one process runs every simulated rank, made
    // the planner O(P^2) of the run's CPU (23 % at 512 ranks).
    struct {
      int status;
      char why[1000];
    } res{};
    if (world_rank() == 0) {
      res.status = tsr_gemm_plan_create(&pr, plan.get()) == TSR_SUCCESS ? 0 : 1;
      if (res.status != 0) std::snprintf(res.why, sizeof res.why, "%s", tsr_last_error(nullptr));
    }
    MPI_Bcast(&res, static_cast<int>(sizeof res), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (res.status != 0) {
      v->row.available = false;
      v->row.why = res.why;
      vars.push_back(std::move(v));
      return;
    }
    MPI_Bcast(plan.get(), static_cast<int>(sizeof(tsr_gemm_plan)), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (cube != 0) {
      if (cube < 0) {
        v->row.available = false;
        v->row.why = std::to_string(world_size()) + " ranks are not a cube";
        vars.push_back(std::move(v));
        return;
      }
      plan->grid_kind = TSR_GRID_3D;
      plan->options.algo = TSR_GEMM_3D;
      for (int x = 0; x < 3; ++x) {
        plan->dims[x] = cube;
        plan->roles[x] = cube > 1 ? x : -1;
      }
      plan->nranks = world_size();
      plan->idle_ranks = 0;
      ok(tsr_gemm_layouts(TSR_GEMM_3D, TSR_NOTRANS, TSR_NOTRANS, plan->roles, plan->layouts), nullptr,
         "tsr_gemm_layouts");
    }
    keep.push_back(plan);
    char detail[160];
    std::snprintf(detail, sizeof detail, "%s %dx%dx%d%s%s", tsr_gemm_algo_name(plan->options.algo),
                  plan->dims[0], plan->dims[1], plan->dims[2], plan->idle_ranks ? " idle " : "",
                  plan->idle_ranks ? std::to_string(plan->idle_ranks).c_str() : "");
    v->row.detail = detail;
    tsr_grid g = nullptr;
    ok(tsr_grid_create(ctx, plan->grid_kind, plan->dims, &g), ctx, "tsr_grid_create");
    grids.push_back(g);
    tsr_matrix A = nullptr, B = nullptr, C = nullptr;
    ok(tsr_matrix_create(g, o.m, o.k, type, &plan->layouts[0], 0, &A), ctx, "tsr_matrix_create A");
    ok(tsr_matrix_create(g, o.k, o.n, type, &plan->layouts[1], 0, &B), ctx, "tsr_matrix_create B");
    ok(tsr_matrix_create(g, o.m, o.n, type, &plan->layouts[2], 0, &C), ctx, "tsr_matrix_create C");
    mats.insert(mats.end(), {A, B, C});
    auto blocks = std::make_shared<std::vector<Block<T>>>();
    blocks->push_back(tessera_block(A, 1));
    blocks->push_back(tessera_block(B, 2));
    blocks->push_back(tessera_block(C, 3));
    keep.push_back(blocks);
    tsr_context cx = ctx;
    v->counted = ctx;
    v->run = [plan, A, B, C, blocks, cx]() {
      auto& b = *blocks;
      ok(tsr_gemm_execute(plan.get(), 1.0, A, b[0].data.data(), B, b[1].data.data(), 0.0, C, b[2].data.data()), cx,
         "tsr_gemm_execute");
    };
    const Opts oo = o;
    v->verify = [blocks, oo]() {
      auto& b = *blocks;
      return check<T>(b[0], b[1], b[2], oo.m, oo.n, oo.k, false, false);
    };
    vars.push_back(std::move(v));
  }

  void add_serial() {
    auto v = std::make_unique<Variant>();
    v->row.name = "local GEMM, 1 rank";
    v->row.detail = "cblas, rank 0 alone";
    auto mem = std::make_shared<std::vector<T>>();
    if (world_rank() == 0)
      mem->assign(static_cast<size_t>(o.m * o.k + o.k * o.n + o.m * o.n), T(0.5));
    keep.push_back(mem);
    const Opts oo = o;
    v->run = [mem, oo]() {
      if (world_rank() != 0) return;
      T* a = mem->data();
      T* b = a + oo.m * oo.k;
      T* c = b + oo.k * oo.n;
      const int m = static_cast<int>(oo.m), n = static_cast<int>(oo.n), k = static_cast<int>(oo.k);
      if (sizeof(T) == 8)
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, reinterpret_cast<double*>(a), m,
                    reinterpret_cast<double*>(b), k, 0.0, reinterpret_cast<double*>(c), m);
      else
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, reinterpret_cast<float*>(a), m,
                    reinterpret_cast<float*>(b), k, 0.0f, reinterpret_cast<float*>(c), m);
    };
    v->verify = []() { return 0.0; };
    vars.push_back(std::move(v));
  }

#if TSR_BENCH_SCALAPACK
  struct Blacs {
    int ctxt = -1, nprow = 1, npcol = 1, myrow = -1, mycol = -1;
  };
  std::shared_ptr<Blacs> blacs;

  std::shared_ptr<Blacs> grid_blacs() {
    if (blacs) return blacs;
    blacs = std::make_shared<Blacs>();
    int d[3] = {0, 0, 0};
    tsr_grid_dims_create(TSR_GRID_2D, world_size(), 0, d, nullptr);
    Cblacs_get(-1, 0, &blacs->ctxt);
    Cblacs_gridinit(&blacs->ctxt, "Row", d[0], d[1]);
    Cblacs_gridinfo(blacs->ctxt, &blacs->nprow, &blacs->npcol, &blacs->myrow, &blacs->mycol);
    return blacs;
  }

  struct Bc {
    int desc[9];
    Block<T> blk;
  };
  Bc bc(int64_t m, int64_t n, int nb, int id) {
    std::shared_ptr<Blacs> g = grid_blacs();
    Bc out;
    const int mm = static_cast<int>(m), nn = static_cast<int>(n), zero = 0;
    const int lr = numroc_(&mm, &nb, &g->myrow, &zero, &g->nprow), lc = numroc_(&nn, &nb, &g->mycol, &zero, &g->npcol);
    const int lld = std::max(1, lr);
    int info = 0;
    descinit_(out.desc, &mm, &nn, &nb, &nb, &zero, &zero, &g->ctxt, &lld, &info);
    if (info != 0) die("descinit_ failed");
    out.blk.rows = lr;
    out.blk.cols = lc;
    out.blk.ld = lld;
    const int pr = g->myrow, npr = g->nprow, pc = g->mycol, npc = g->npcol;
    out.blk.gi = [nb, pr, npr](int64_t l) { return (l / nb * npr + pr) * nb + l % nb; };
    out.blk.gj = [nb, pc, npc](int64_t l) { return (l / nb * npc + pc) * nb + l % nb; };
    out.blk.fill(id);
    return out;
  }

  // kind: "pdgemm", "dropin" or "cosma-pxgemm".
  void add_blacs(const std::string& kind, int nb) {
    auto v = std::make_unique<Variant>();
    auto g = grid_blacs();
    v->row.name = kind == "pdgemm" ? "ScaLAPACK pdgemm" : kind == "dropin" ? "tessera pdgemm drop-in" : "COSMA pxgemm";
    v->row.detail = std::to_string(g->nprow) + "x" + std::to_string(g->npcol) + " nb " + std::to_string(nb);
    auto m = std::make_shared<std::vector<Bc>>();
    m->push_back(bc(o.m, o.k, nb, 1));
    m->push_back(bc(o.k, o.n, nb, 2));
    m->push_back(bc(o.m, o.n, nb, 3));
    keep.push_back(m);
    const int mm = static_cast<int>(o.m), nn = static_cast<int>(o.n), kk = static_cast<int>(o.k);
    if (kind == "pdgemm") {
      v->run = [m, mm, nn, kk]() {
        auto& x = *m;
        const int one = 1;
        const T alpha = 1, beta = 0;
        if (sizeof(T) == 8)
          pdgemm_("N", "N", &mm, &nn, &kk, reinterpret_cast<const double*>(&alpha),
                  reinterpret_cast<const double*>(x[0].blk.data.data()), &one, &one, x[0].desc,
                  reinterpret_cast<const double*>(x[1].blk.data.data()), &one, &one, x[1].desc,
                  reinterpret_cast<const double*>(&beta), reinterpret_cast<double*>(x[2].blk.data.data()), &one, &one,
                  x[2].desc);
        else
          psgemm_("N", "N", &mm, &nn, &kk, reinterpret_cast<const float*>(&alpha),
                  reinterpret_cast<const float*>(x[0].blk.data.data()), &one, &one, x[0].desc,
                  reinterpret_cast<const float*>(x[1].blk.data.data()), &one, &one, x[1].desc,
                  reinterpret_cast<const float*>(&beta), reinterpret_cast<float*>(x[2].blk.data.data()), &one, &one,
                  x[2].desc);
      };
    } else if (kind == "dropin") {
      v->run = [m, mm, nn, kk]() {
        auto& x = *m;
        const int one = 1;
        const T alpha = 1, beta = 0;
        tsr_status st;
        if (sizeof(T) == 8)
          st = tsr_pdgemm("N", "N", &mm, &nn, &kk, reinterpret_cast<const double*>(&alpha),
                          reinterpret_cast<const double*>(x[0].blk.data.data()), &one, &one, x[0].desc,
                          reinterpret_cast<const double*>(x[1].blk.data.data()), &one, &one, x[1].desc,
                          reinterpret_cast<const double*>(&beta), reinterpret_cast<double*>(x[2].blk.data.data()), &one,
                          &one, x[2].desc);
        else
          st = tsr_psgemm("N", "N", &mm, &nn, &kk, reinterpret_cast<const float*>(&alpha),
                          reinterpret_cast<const float*>(x[0].blk.data.data()), &one, &one, x[0].desc,
                          reinterpret_cast<const float*>(x[1].blk.data.data()), &one, &one, x[1].desc,
                          reinterpret_cast<const float*>(&beta), reinterpret_cast<float*>(x[2].blk.data.data()), &one,
                          &one, x[2].desc);
        ok(st, nullptr, "tsr_pdgemm");
      };
      v->run();  // first call creates the drop-in's context (collective)
      ok(tsr_scalapack_context(g->ctxt, &v->counted), nullptr, "tsr_scalapack_context");
    } else {
#if TSR_BENCH_COSMA
      v->run = [m, mm, nn, kk]() {
        auto& x = *m;
        cosma::pxgemm<T>('N', 'N', mm, nn, kk, T(1), x[0].blk.data.data(), 1, 1, x[0].desc, x[1].blk.data.data(), 1,
                         1, x[1].desc, T(0), x[2].blk.data.data(), 1, 1, x[2].desc);
      };
#endif
    }
    const Opts oo = o;
    v->verify = [m, oo]() {
      auto& x = *m;
      return check<T>(x[0].blk, x[1].blk, x[2].blk, oo.m, oo.n, oo.k, false, false);
    };
    vars.push_back(std::move(v));
  }
#endif

#if TSR_BENCH_COSMA
  void add_cosma_native() {
    auto v = std::make_unique<Variant>();
    v->row.name = "COSMA native";
    auto strategy = std::make_shared<cosma::Strategy>(static_cast<int>(o.m), static_cast<int>(o.n),
                                                      static_cast<int>(o.k), static_cast<size_t>(world_size()));
    std::ostringstream s;
    s << "divisions";
    for (size_t i = 0; i < strategy->divisors.size(); ++i)
      s << " " << strategy->split_dimension[i] << strategy->divisors[i];
    v->row.detail = s.str();
    auto a = std::make_shared<cosma::CosmaMatrix<T>>('A', *strategy, world_rank());
    auto b = std::make_shared<cosma::CosmaMatrix<T>>('B', *strategy, world_rank());
    auto c = std::make_shared<cosma::CosmaMatrix<T>>('C', *strategy, world_rank());
    keep.insert(keep.end(), {strategy, a, b, c});
    for (auto* M : {a.get(), b.get()}) {
      const int id = M == a.get() ? 1 : 2;
      T* p = M->matrix_pointer();
      for (size_t i = 0; i < M->matrix_size(); ++i) {
        const auto gij = M->global_coordinates(static_cast<int>(i));
        p[i] = static_cast<T>(val(id, gij.first, gij.second));
      }
    }
    v->run = [strategy, a, b, c]() { cosma::multiply<T>(*a, *b, *c, *strategy, MPI_COMM_WORLD, T(1), T(0)); };
    const Opts oo = o;
    v->verify = [a, b, c, oo]() {
      // C v against A (B v), element by element in COSMA's own layout.
      std::vector<double> v(static_cast<size_t>(oo.n)), u(static_cast<size_t>(oo.k), 0.0),
          z(static_cast<size_t>(oo.m), 0.0), y(static_cast<size_t>(oo.m), 0.0);
      for (int64_t j = 0; j < oo.n; ++j) v[static_cast<size_t>(j)] = val(99, j, 0);
      auto each = [](cosma::CosmaMatrix<T>& M, auto f) {
        const T* p = M.matrix_pointer();
        for (size_t e = 0; e < M.matrix_size(); ++e) {
          const auto g = M.global_coordinates(static_cast<int>(e));
          f(g.first, g.second, static_cast<double>(p[e]));
        }
      };
      each(*b, [&](int l, int j, double x) { u[static_cast<size_t>(l)] += x * v[static_cast<size_t>(j)]; });
      MPI_Allreduce(MPI_IN_PLACE, u.data(), static_cast<int>(oo.k), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      each(*a, [&](int i, int l, double x) { z[static_cast<size_t>(i)] += x * u[static_cast<size_t>(l)]; });
      each(*c, [&](int i, int j, double x) { y[static_cast<size_t>(i)] += x * v[static_cast<size_t>(j)]; });
      MPI_Allreduce(MPI_IN_PLACE, z.data(), static_cast<int>(oo.m), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, y.data(), static_cast<int>(oo.m), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      double err = 0, mag = 0;
      for (int64_t i = 0; i < oo.m; ++i) {
        err = std::max(err, std::fabs(y[static_cast<size_t>(i)] - z[static_cast<size_t>(i)]));
        mag = std::max(mag, std::fabs(z[static_cast<size_t>(i)]));
      }
      return err / std::max(mag, 1e-300);
    };
    vars.push_back(std::move(v));
  }
#endif

  void unavailable(const std::string& name, const std::string& why) {
    auto v = std::make_unique<Variant>();
    v->row.name = name;
    v->row.available = false;
    v->row.why = why;
    vars.push_back(std::move(v));
  }

  void setup() {
    if (o.measure) ok(tsr_gemm_machine_measure(ctx, &machine), ctx, "tsr_gemm_machine_measure");
    if (o.want("serial")) add_serial();
    if (o.want("plan")) add_tessera("tessera plan", TSR_GEMM_AUTO);
    if (o.want("1d")) add_tessera("tessera 1D", TSR_GEMM_1D);
    if (o.want("2d")) add_tessera("tessera 2D (SUMMA)", TSR_GEMM_2D);
    if (o.want("2.5d")) add_tessera("tessera 2.5D", TSR_GEMM_2P5D);
    if (o.want("3d")) add_tessera("tessera 3D", TSR_GEMM_3D);
    if (o.want("3d-cube")) {
      int q = 1;
      while ((q + 1) * (q + 1) * (q + 1) <= world_size()) ++q;
      add_tessera("tessera 3D on the cube", TSR_GEMM_3D, q * q * q == world_size() ? q : -1);
    }
#if TSR_BENCH_SCALAPACK
    for (int nb : o.nbs) {
      if (o.want("dropin")) add_blacs("dropin", nb);
      if (o.want("pdgemm")) add_blacs("pdgemm", nb);
#if TSR_BENCH_COSMA
      if (o.want("cosma")) add_blacs("cosma-pxgemm", nb);
#endif
    }
#else
    if (o.want("pdgemm") || o.want("dropin")) unavailable("ScaLAPACK pdgemm", "built without ScaLAPACK");
#endif
#if TSR_BENCH_COSMA
    if (o.want("cosma")) add_cosma_native();
#else
    if (o.want("cosma")) unavailable("COSMA", "find_package(cosma) did not find COSMA when tessera was configured");
#endif
  }

  void measure() {
    // One warm-up run of each, then the repetitions round-robin, each round
    // starting one variant later (every variant takes every position: the
    // one after the single-rank GEMM starts with the other ranks' CPU
    // share used up, and would otherwise always be that one).
    const size_t nv = vars.size();
    for (int rep = -o.warmup; rep < o.reps; ++rep)
      for (size_t i = 0; i < nv; ++i) {
        auto& v = vars[(i + static_cast<size_t>(rep + o.warmup)) % nv];
        if (!v->row.available) continue;
        tsr_counters before{}, after{};
        if (v->counted) tsr_counters_get(v->counted, "total", &before);
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        v->run();
        const double t = MPI_Wtime() - t0;
        double tmax = 0;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (v->counted) tsr_counters_get(v->counted, "total", &after);
        if (rep < 0) continue;
        v->row.times.push_back(tmax);
        if (v->counted) {
          double mine[2] = {0, 0}, all[2] = {0, 0};
          for (int c = 0; c < TSR_PEER_CLASSES; ++c) {
            mine[0] += static_cast<double>(after.coll_wire_recv[c].bytes - before.coll_wire_recv[c].bytes +
                                           after.p2p_recv[c].bytes - before.p2p_recv[c].bytes);
            mine[1] += static_cast<double>(after.coll_wire_recv[c].messages - before.coll_wire_recv[c].messages +
                                           after.p2p_recv[c].messages - before.p2p_recv[c].messages);
          }
          MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          v->row.bytes = all[0];
          v->row.msgs = all[1];
        }
      }
    for (auto& v : vars)
      if (v->row.available) v->row.error = skip_compute() ? std::nan("") : v->verify();
  }

  void report() {
    if (world_rank() != 0) return;
    double lb = 0;
    tsr_gemm_lower_bound(o.m, o.n, o.k, sizeof(T), world_size(), &lb);
    const double flops = 2.0 * static_cast<double>(o.m) * static_cast<double>(o.n) * static_cast<double>(o.k);
    std::printf("\ntessera bench_gemm: %lld x %lld x %lld %s on %d ranks, %d repetitions (median of the slowest rank)\n",
                static_cast<long long>(o.m), static_cast<long long>(o.n), static_cast<long long>(o.k),
                sizeof(T) == 8 ? "double" : "float", world_size(), o.reps);
    std::printf("machine: alpha %.3g s, beta %.3g s/B, gamma %.3g s/flop (%s); lower bound %.4g bytes per rank\n",
                machine.alpha, machine.beta, machine.gamma, o.measure ? "measured" : o.machine_name.c_str(), lb);
    std::printf("%-26s %-24s %10s %10s %9s %12s %8s %8s %9s\n", "variant", "grid", "time s", "best s", "GFLOP/s",
                "bytes/rank", "msgs", "bytes/LB", "check");
    for (auto& v : vars) {
      const Row& r = v->row;
      if (!r.available) {
        std::printf("%-26s n/a: %s\n", r.name.c_str(), r.why.c_str());
        continue;
      }
      const double t = median(r.times), best = *std::min_element(r.times.begin(), r.times.end());
      char bytes[32] = "-", msgs[32] = "-", ratio[32] = "-";
      if (r.bytes >= 0) {
        std::snprintf(bytes, sizeof bytes, "%.4g", r.bytes);
        std::snprintf(msgs, sizeof msgs, "%.0f", r.msgs);
        if (lb > 0) std::snprintf(ratio, sizeof ratio, "%.3f", r.bytes / lb);
      }
      char err[32] = "skipped";
      if (!std::isnan(r.error)) std::snprintf(err, sizeof err, "%.1e", r.error);
      std::printf("%-26s %-24s %10.4f %10.4f %9.2f %12s %8s %8s %9s\n", r.name.c_str(), r.detail.c_str(), t, best,
                  flops / t * 1e-9, bytes, msgs, ratio, err);
    }
    // Ratios the issue asks for.
    auto find = [&](const std::string& prefix) -> const Row* {
      for (auto& v : vars)
        if (v->row.available && v->row.name.rfind(prefix, 0) == 0) return &v->row;
      return nullptr;
    };
    const Row* plan = find("tessera plan");
    const Row* serial = find("local GEMM");
    std::printf("\n");
    if (plan) {
      const double tp = median(plan->times);
      double best_pd = 0;
      std::string best_pd_detail;
      for (auto& v : vars)
        if (v->row.available && v->row.name == "ScaLAPACK pdgemm" &&
            (best_pd == 0 || median(v->row.times) < best_pd)) {
          best_pd = median(v->row.times);
          best_pd_detail = v->row.detail;
        }
      if (best_pd > 0)
        std::printf("tessera plan / ScaLAPACK pdgemm (%s, fastest block size run): %.3fx its speed\n",
                    best_pd_detail.c_str(), best_pd / tp);
      for (auto& v : vars)
        if (v->row.available && v->row.name.rfind("COSMA", 0) == 0)
          std::printf("tessera plan / %s (%s): %.3fx its speed\n", v->row.name.c_str(), v->row.detail.c_str(),
                      median(v->row.times) / tp);
      if (serial)
        std::printf("tessera plan on %d ranks: %.1f%% of %d x the single-rank GEMM rate\n", world_size(),
                    100.0 * (median(serial->times) / tp) / world_size(), world_size());
    }
    if (!o.csv.empty()) {
      FILE* f = std::fopen(o.csv.c_str(), "w");
      if (!f) die("cannot write " + o.csv);
      std::fprintf(f, "variant,grid,m,n,k,type,ranks,time_median_s,time_best_s,gflops,bytes_per_rank,msgs_per_rank,"
                      "bytes_over_lower_bound,check\n");
      for (auto& v : vars) {
        const Row& r = v->row;
        if (!r.available) continue;
        const double t = median(r.times), best = *std::min_element(r.times.begin(), r.times.end());
        char err[32] = "";  // empty: not checked (--skip-compute)
        if (!std::isnan(r.error)) std::snprintf(err, sizeof err, "%.3e", r.error);
        std::fprintf(f, "\"%s\",\"%s\",%lld,%lld,%lld,%s,%d,%.6f,%.6f,%.3f,%.0f,%.0f,%.4f,%s\n", r.name.c_str(),
                     r.detail.c_str(), static_cast<long long>(o.m), static_cast<long long>(o.n),
                     static_cast<long long>(o.k), sizeof(T) == 8 ? "double" : "float", world_size(), t, best,
                     flops / t * 1e-9, r.bytes, r.msgs, r.bytes >= 0 && lb > 0 ? r.bytes / lb : -1.0, err);
      }
      std::fclose(f);
    }
    if (!o.json.empty()) {
      FILE* f = std::fopen(o.json.c_str(), "w");
      if (!f) die("cannot write " + o.json);
      std::fprintf(f, "{\n  \"m\": %lld, \"n\": %lld, \"k\": %lld, \"type\": \"%s\", \"ranks\": %d, \"reps\": %d,\n",
                   static_cast<long long>(o.m), static_cast<long long>(o.n), static_cast<long long>(o.k),
                   sizeof(T) == 8 ? "double" : "float", world_size(), o.reps);
      std::fprintf(f, "  \"machine\": {\"alpha\": %.6g, \"beta\": %.6g, \"gamma\": %.6g},\n", machine.alpha,
                   machine.beta, machine.gamma);
      std::fprintf(f, "  \"lower_bound_bytes\": %.0f,\n  \"variants\": [\n", lb);
      bool first = true;
      for (auto& v : vars) {
        const Row& r = v->row;
        if (!r.available) continue;
        const double t = median(r.times), best = *std::min_element(r.times.begin(), r.times.end());
        char err[32] = "null";  // not checked (--skip-compute)
        if (!std::isnan(r.error)) std::snprintf(err, sizeof err, "%.3e", r.error);
        std::fprintf(f, "%s    {\"variant\": \"%s\", \"grid\": \"%s\", \"time_median_s\": %.6f, \"time_best_s\": %.6f, "
                        "\"gflops\": %.3f, \"bytes_per_rank\": %.0f, \"msgs_per_rank\": %.0f, "
                        "\"bytes_over_lower_bound\": %.4f, \"check\": %s, \"times_s\": [",
                     first ? "" : ",\n", r.name.c_str(), r.detail.c_str(), t, best, flops / t * 1e-9, r.bytes, r.msgs,
                     r.bytes >= 0 && lb > 0 ? r.bytes / lb : -1.0, err);
        for (size_t i = 0; i < r.times.size(); ++i) std::fprintf(f, "%s%.6f", i ? ", " : "", r.times[i]);
        std::fprintf(f, "]}");
        first = false;
      }
      std::fprintf(f, "\n  ]\n}\n");
      std::fclose(f);
    }
  }
};

template <class T>
void run(const Opts& o) {
  Bench<T> b;
  b.o = o;
  b.machine = o.given;
  ok(tsr_context_create(MPI_COMM_WORLD, &b.ctx), nullptr, "tsr_context_create");
  b.setup();
  b.measure();
  b.report();
  for (tsr_matrix& m : b.mats) tsr_matrix_destroy(&m);
  for (tsr_grid& g : b.grids) tsr_grid_destroy(&g);
  tsr_context_destroy(&b.ctx);
#if TSR_BENCH_SCALAPACK
  if (b.blacs) Cblacs_gridexit(b.blacs->ctxt);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  Opts o;
  bool square = true;
  int plan_ranks = 0;
  size_t elem = 8;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--skip-compute") {
#if TSR_BENCH_SMPI
      skip_compute() = true;
      --i;
      continue;
#else
      usage("--skip-compute: only in a SimGrid SMPI build (smpicxx), where compute takes no simulated time");
#endif
    }
    if (i + 1 >= argc) usage("option " + a + " needs a value");
    const std::string v = argv[i + 1];
    if (a == "--shared-malloc") {
#if TSR_BENCH_SMPI
      shared_threshold() = static_cast<size_t>(std::max(0LL, std::atoll(v.c_str())));
      continue;
#else
      usage("--shared-malloc: only in a SimGrid SMPI build (smpicxx), with --skip-compute");
#endif
    }
    if (a == "--n") o.n = std::atoll(v.c_str());
    else if (a == "--m") { o.m = std::atoll(v.c_str()); square = false; }
    else if (a == "--k") { o.k = std::atoll(v.c_str()); square = false; }
    else if (a == "--type") o.dbl = v != "float";
    else if (a == "--reps") o.reps = std::max(1, std::atoi(v.c_str()));
    else if (a == "--nb") {
      o.nbs.clear();
      for (const std::string& x : split(v)) o.nbs.push_back(std::max(1, std::atoi(x.c_str())));
    } else if (a == "--algos") o.algos = split(v);
    else if (a == "--machine") {
      o.measure = v == "measure";
      if (!o.measure && v != "default") {
        if (!parse_machine(v, &o.given)) usage("--machine: expected measure, default or alpha=A,beta=B,gamma=G, got " + v);
        o.machine_name = "given: " + v;
      }
    }
    else if (a == "--csv") o.csv = v;
    else if (a == "--json") o.json = v;
    else if (a == "--plan-only") plan_ranks = std::atoi(v.c_str());
    else if (a == "--elem") elem = static_cast<size_t>(std::atoi(v.c_str()));
    else if (a == "--warmup") o.warmup = std::max(0, std::atoi(v.c_str()));
    else usage("unknown option " + a);
  }
  if (square) o.m = o.k = o.n;
#if TSR_BENCH_SMPI
  if (shared_threshold() != 0 && !skip_compute())
    usage("--shared-malloc needs --skip-compute (the shared buffers' values are not kept)");
#endif
  if (plan_ranks > 0) {
    // --plan-only R: the planner's choice per algorithm for R ranks (no run).
    if (world_rank() == 0) {
      const tsr_gemm_algo algos[] = {TSR_GEMM_AUTO, TSR_GEMM_1D, TSR_GEMM_2D, TSR_GEMM_2P5D, TSR_GEMM_3D};
      for (tsr_gemm_algo a : algos) {
        tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
        pr.m = o.m;
        pr.n = o.n;
        pr.k = o.k;
        pr.elem_size = elem;
        pr.nranks = plan_ranks;
        pr.algo = a;
        pr.allow_idle = a == TSR_GEMM_AUTO ? 1 : 0;
        pr.machine = o.given;
        tsr_gemm_plan plan;
        if (tsr_gemm_plan_create(&pr, &plan) != TSR_SUCCESS) {
          std::printf("%s: %s\n", tsr_gemm_algo_name(a), tsr_last_error(nullptr));
          continue;
        }
        char text[2048];
        tsr_gemm_plan_format(&plan, text, sizeof text, nullptr);
        std::printf("[%s] %s  bytes per rank %.1f MiB, bound %.1f MiB\n", a == TSR_GEMM_AUTO ? "planned" : "only",
                    text, plan.bytes / 1048576.0, plan.lower_bound_bytes / 1048576.0);
      }
    }
    MPI_Finalize();
    return 0;
  }
  if (o.dbl)
    run<double>(o);
  else
    run<float>(o);
  MPI_Finalize();
  return 0;
}

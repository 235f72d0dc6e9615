// The distributed GEMM (tsr_gemm_ex, tsr_gemm_execute) on CUDA device
// buffers (issue 17): every algorithm the world size allows (1D, 2D, 2.5D,
// 3D, and the planner's choice), every op, alpha and beta (beta = 0 with NaN
// in C), uneven shapes with empty blocks and a padded leading dimension of C,
// float32 and bfloat16 inputs (float32 C), each case against
//  - the host GEMM on the same matrices (float32; |dev - host| <= 1e-5 times
//    sum |alpha a b| + |beta c| per element: cuBLAS and CBLAS add in other
//    orders), and
//  - a float64 reference of the inputs as stored (float32: 1e-5 relative as
//    above; bfloat16 inputs, exact in float32 products, float32
//    accumulation: 1e-2, the brief's bound, though the error is far smaller),
// and the ledger of the device call equal to the host call's (float32: the
// same collectives, payload and wire bytes; wire bytes of device memory to
// the rank itself and same-node peers are charged to device_to_device_bytes,
// docs/ACCOUNTING.md), no host<->device bytes charged (nothing is staged).
// Bad input: device buffers on an unbound context (STATE), host and device
// operands mixed (INVALID_ARG), memory of another device (INVALID_ARG, with
// two devices), bfloat16 on host buffers and float64 on the device
// (UNSUPPORTED), each on every rank with its message.
//
// Several ranks need device transport between them (NCCL across GPUs, or a
// CUDA-aware MPI): where the grid cannot move device memory tsr_gemm refuses
// with UNSUPPORTED on every rank, and the multi-rank cases print the
// library's message and skip. Every case prints one line "case ...: ok |
// FAIL ..." on rank 0 so that one run on a GPU tells what is wrong.
//
// Exits 77 on every rank (CTest: skipped) when some rank sees no CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "device.hpp"
#include "tessera/device.h"
#include "tessera/gemm.h"
#include "tessera/tessera.h"

namespace {

using Dims = std::array<int, 3>;

int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size_of() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

bool contains(const char* s, const char* what) { return s != nullptr && std::strstr(s, what) != nullptr; }

// Element (i, j) of global matrix `id`: a hash in [-1, 1), the same on every
// rank (tests/mpi/test_gemm.cpp's).
double val(int id, int64_t i, int64_t j) {
  uint64_t h = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(id + 1) ^ (static_cast<uint64_t>(i) * 0xbf58476d1ce4e5b9ull) ^
               (static_cast<uint64_t>(j) * 0x94d049bb133111ebull);
  h ^= h >> 31;
  h *= 0xd6e8feb86659fd39ull;
  h ^= h >> 29;
  return static_cast<double>(h >> 11) / static_cast<double>(1ull << 52) - 1.0;
}

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A stored value as the inputs hold it (float32 or rounded to bfloat16).
double stored(double v, bool bf) {
  const float f = static_cast<float>(v);
  return bf ? from_bf16(to_bf16(f)) : f;
}

struct BoundCtx {
  tsr_context ctx = nullptr;
  explicit BoundCtx(bool bind = true) {
    EXPECT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
    int n = 0;
    EXPECT_EQ(tsr_device_count(&n), TSR_SUCCESS);
    if (bind) {
      EXPECT_EQ(tsr_context_set_device(ctx, rank_of() % std::max(n, 1), nullptr), TSR_SUCCESS) << tsr_last_error(ctx);
    }
  }
  ~BoundCtx() { EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS) << tsr_last_error(ctx); }
};

struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(n, 1)), cudaSuccess);
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void put(const void* h) { EXPECT_EQ(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice), cudaSuccess); }
  void get(void* h) const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h, p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
};

struct Grid {
  tsr_grid g = nullptr;
  Grid(tsr_context ctx, tsr_grid_kind kind, const Dims& d) {
    EXPECT_EQ(tsr_grid_create(ctx, kind, d.data(), &g), TSR_SUCCESS) << tsr_last_error(ctx);
  }
  ~Grid() { EXPECT_EQ(tsr_grid_destroy(&g), TSR_SUCCESS); }
};

struct Mat {
  tsr_matrix h = nullptr;
  int64_t rows = 0, cols = 0, ld = 1;
  Mat(tsr_grid g, int64_t m, int64_t n, tsr_dtype t, const tsr_layout& l, int64_t ldw = 0) {
    EXPECT_EQ(tsr_matrix_create(g, m, n, t, &l, ldw, &h), TSR_SUCCESS) << tsr_last_error(nullptr);
    EXPECT_EQ(tsr_matrix_local_size(h, &rows, &cols, &ld), TSR_SUCCESS);
  }
  ~Mat() { EXPECT_EQ(tsr_matrix_destroy(&h), TSR_SUCCESS); }
  size_t elems() const { return static_cast<size_t>(std::max<int64_t>(1, ld * cols)); }
  // This rank's block of global matrix id (NaN in C's padding and for nan).
  std::vector<double> values(int id, bool bf, bool nan = false) const {
    std::vector<double> v(elems(), std::numeric_limits<double>::quiet_NaN());
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t gi = 0, gj = 0;
        EXPECT_EQ(tsr_matrix_global_index(h, r, c, &gi, &gj), TSR_SUCCESS);
        if (!nan) v[static_cast<size_t>(c * ld + r)] = stored(val(id, gi, gj), bf);
      }
    return v;
  }
};

std::vector<float> as_f32(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }
std::vector<uint16_t> as_bf16(const std::vector<double>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_bf16(static_cast<float>(v[i]));
  return out;
}

// One algorithm configuration (tests/mpi/test_gemm.cpp's, the subset that
// fits the world size).
struct Config {
  tsr_grid_kind kind;
  Dims dims;
  tsr_gemm_algo algo;
  std::array<int, 3> roles;
  int64_t panel = 0;
  std::string name() const {
    return std::string(tsr_gemm_algo_name(algo)) + " on " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) +
           "x" + std::to_string(dims[2]) + " roles {" + std::to_string(roles[0]) + "," + std::to_string(roles[1]) +
           "," + std::to_string(roles[2]) + "} panel " + std::to_string(panel);
  }
};

std::vector<Config> configs(int p) {
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
  out.push_back({TSR_GRID_2D, d2, TSR_GEMM_2D, {r1, r0, -1}, 2});
  if (r0 >= 0 && r1 >= 0) {
    out.push_back({TSR_GRID_2D, d2, TSR_GEMM_3D, {r0, r1, -1}});
    out.push_back({TSR_GRID_2D, d2, TSR_GEMM_3D, {r0, -1, r1}});
    out.push_back({TSR_GRID_2D, d2, TSR_GEMM_3D, {-1, r1, r0}});
  }
  if (p == 4) out.push_back({TSR_GRID_3D_ANY, {2, 1, 2}, TSR_GEMM_3D, {0, -1, 2}});
  if (p == 8) {
    out.push_back({TSR_GRID_2P5D, {2, 2, 2}, TSR_GEMM_2P5D, {0, 1, 2}});
    out.push_back({TSR_GRID_3D, {2, 2, 2}, TSR_GEMM_3D, {0, 1, 2}});
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
const Shape3 kShapes[] = {{13, 11, 7}, {1, 9, 5}, {6, 5, 1}, {3, 2, 4}, {4, 3, 0}, {70, 45, 130}};

// Per element: |got - want| / (sum |alpha a b| + |beta c|), worst over this
// rank's block; want from the stored inputs in long double.
double ref_error(const Mat& C, const std::vector<float>& got, int ida, int idb, int idc, bool ta, bool tb, int64_t k,
                 double alpha, double beta, bool bf) {
  double worst = 0;
  for (int64_t cc = 0; cc < C.cols; ++cc)
    for (int64_t r = 0; r < C.rows; ++r) {
      int64_t i = 0, j = 0;
      tsr_matrix_global_index(C.h, r, cc, &i, &j);
      long double sum = 0, mag = 0;
      for (int64_t x = 0; x < k; ++x) {
        const long double a = stored(ta ? val(ida, x, i) : val(ida, i, x), bf);
        const long double b = stored(tb ? val(idb, j, x) : val(idb, x, j), bf);
        sum += a * b;
        mag += std::fabs(static_cast<double>(a * b));
      }
      const long double c0 = beta == 0 ? 0 : stored(val(idc, i, j), false);
      const long double want = alpha * sum + beta * c0;
      const long double scale = std::fabs(alpha) * mag + std::fabs(beta * static_cast<double>(c0)) + 1e-300;
      const double g = got[static_cast<size_t>(cc * C.ld + r)];
      worst = std::max(worst, std::isfinite(g) ? static_cast<double>(std::fabs(g - want) / scale) : 1e300);
    }
  return worst;
}

// |dev - host| per element relative to the same scale.
double host_error(const Mat& C, const std::vector<float>& dev, const std::vector<float>& host, int ida, int idb, int idc,
                  bool ta, bool tb, int64_t k, double alpha, double beta) {
  double worst = 0;
  for (int64_t cc = 0; cc < C.cols; ++cc)
    for (int64_t r = 0; r < C.rows; ++r) {
      int64_t i = 0, j = 0;
      tsr_matrix_global_index(C.h, r, cc, &i, &j);
      double mag = 0;
      for (int64_t x = 0; x < k; ++x)
        mag += std::fabs(stored(ta ? val(ida, x, i) : val(ida, i, x), false) *
                         stored(tb ? val(idb, j, x) : val(idb, x, j), false));
      const double scale = std::fabs(alpha) * mag + (beta == 0 ? 0 : std::fabs(beta * val(idc, i, j))) + 1e-300;
      const size_t at = static_cast<size_t>(cc * C.ld + r);
      const double d = std::fabs(static_cast<double>(dev[at]) - static_cast<double>(host[at]));
      worst = std::max(worst, std::isfinite(dev[at]) && std::isfinite(host[at]) ? d / scale : 1e300);
    }
  return worst;
}

double max_all(double v) {
  double all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

tsr_counters counters(tsr_context ctx, const char* region) {
  tsr_counters c{};
  EXPECT_EQ(tsr_counters_get(ctx, region, &c), TSR_SUCCESS) << tsr_last_error(ctx);
  return c;
}

uint64_t wire_bytes(const tsr_traffic* t) {
  uint64_t s = 0;
  for (int i = 0; i < TSR_PEER_CLASSES; ++i) s += t[i].bytes;
  return s;
}
uint64_t wire_msgs(const tsr_traffic* t) {
  uint64_t s = 0;
  for (int i = 0; i < TSR_PEER_CLASSES; ++i) s += t[i].messages;
  return s;
}

// The device call's ledger against the host call's; "" when they agree.
std::string ledger_diff(const tsr_counters& h, const tsr_counters& d) {
  std::string why;
  auto check = [&](const char* what, uint64_t x, uint64_t y) {
    if (x != y) why += std::string(" ") + what + " host " + std::to_string(x) + " device " + std::to_string(y) + ";";
  };
  for (int k = 0; k < TSR_COLL_KINDS; ++k) check("coll_calls", h.coll_calls[k], d.coll_calls[k]);
  check("coll_payload_sent", h.coll_payload_sent, d.coll_payload_sent);
  check("coll_payload_recv", h.coll_payload_recv, d.coll_payload_recv);
  check("control.bytes", h.control.bytes, d.control.bytes);
  check("control.messages", h.control.messages, d.control.messages);
  // Wire bytes: device-to-device bytes are the host run's self and
  // intra-node wire bytes sent (sent side only).
  check("wire sent bytes (+ device_to_device)", wire_bytes(h.coll_wire_sent) + wire_bytes(h.p2p_sent),
        wire_bytes(d.coll_wire_sent) + wire_bytes(d.p2p_sent) + d.device_to_device_bytes);
  check("host_to_device_bytes", 0, d.host_to_device_bytes);
  check("device_to_host_bytes", 0, d.device_to_host_bytes);
  check("host run device_to_device_bytes", 0, h.device_to_device_bytes);
  if (d.device_to_device_bytes == 0) {  // no device traffic: every wire entry the same
    check("wire sent messages", wire_msgs(h.coll_wire_sent), wire_msgs(d.coll_wire_sent));
    check("wire recv bytes", wire_bytes(h.coll_wire_recv), wire_bytes(d.coll_wire_recv));
  }
  return why;
}

// Set when a multi-rank device call is refused for want of device
// transport (the library's message), so that the rest skip.
std::string g_no_transport;

// One case: host run (float32 inputs only) and device run on the same
// matrices; returns false when the device path is unavailable here.
bool run_case(tsr_context ctx, const Config& cf, const Grid& grid, const Shape3& sh, int op, bool bf, bool use_plan) {
  const bool ta = op & 1, tb = op & 2;
  const bool zero_beta = (op % 2) == (bf ? 1 : 0);
  const double alpha = zero_beta ? 1.5 : -0.75, beta = zero_beta ? 0.0 : 0.5;
  const tsr_trans TA = ta ? TSR_TRANS : TSR_NOTRANS, TB = tb ? TSR_TRANS : TSR_NOTRANS;
  tsr_layout lay[3];
  EXPECT_EQ(tsr_gemm_layouts(cf.algo, TA, TB, cf.roles.data(), lay), TSR_SUCCESS);
  const tsr_dtype in = bf ? TSR_BFLOAT16 : TSR_FLOAT32;
  Mat A(grid.g, ta ? sh.k : sh.m, ta ? sh.m : sh.k, in, lay[0]);
  Mat B(grid.g, tb ? sh.n : sh.k, tb ? sh.k : sh.n, in, lay[1]);
  Mat C(grid.g, sh.m, sh.n, TSR_FLOAT32, lay[2], sh.m + 3);  // padded: strided local blocks
  const std::vector<double> av = A.values(1, bf), bv = B.values(2, bf), cv = C.values(3, false, zero_beta);
  const size_t es = bf ? 2 : 4;
  DevBuf da(A.elems() * es), db(B.elems() * es), dc(C.elems() * 4);
  if (bf) {
    da.put(as_bf16(av).data());
    db.put(as_bf16(bv).data());
  } else {
    da.put(as_f32(av).data());
    db.put(as_f32(bv).data());
  }
  std::vector<float> c0 = as_f32(cv);
  dc.put(c0.data());
  tsr_gemm_options o = TSR_GEMM_OPTIONS_INIT;
  o.algo = cf.algo;
  o.panel = cf.panel;
  std::string what = cf.name() + (use_plan ? " (plan)" : "") + ", " + std::to_string(sh.m) + "x" +
                     std::to_string(sh.n) + "x" + std::to_string(sh.k) + ", op " + (ta ? "T" : "N") + (tb ? "T" : "N") +
                     ", alpha " + std::to_string(alpha) + ", beta " + std::to_string(beta) + ", " +
                     (bf ? "bfloat16" : "float32");
  tsr_gemm_plan plan{};
  if (use_plan) {
    tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
    pr.m = sh.m;
    pr.n = sh.n;
    pr.k = sh.k;
    pr.elem_size = es;
    pr.nranks = size_of();
    pr.transa = TA;
    pr.transb = TB;
    EXPECT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_SUCCESS) << tsr_last_error(nullptr);
  }
  // Host run (float32 inputs): the reference result and ledger.
  std::vector<float> host = c0;
  std::vector<float> ha = as_f32(av), hb = as_f32(bv);
  tsr_counters hc{};
  if (!bf && !use_plan) {
    EXPECT_EQ(tsr_region_begin(ctx, "host"), TSR_SUCCESS);
    EXPECT_EQ(tsr_gemm_ex(&o, TA, TB, alpha, A.h, ha.data(), B.h, hb.data(), beta, C.h, host.data()), TSR_SUCCESS)
        << what << ": host: " << tsr_last_error(ctx);
    EXPECT_EQ(tsr_region_end(ctx, "host"), TSR_SUCCESS);
    hc = counters(ctx, "host");
  }
  EXPECT_EQ(tsr_region_begin(ctx, "device"), TSR_SUCCESS);
  tsr_status st = TSR_SUCCESS;
  if (use_plan) {
    // The plan's layouts may differ from this configuration's: only run
    // when they are the ones the matrices have (plan on 1 rank: always).
    st = tsr_gemm_execute(&plan, alpha, A.h, da.p, B.h, db.p, beta, C.h, dc.p);
  } else {
    st = tsr_gemm_ex(&o, TA, TB, alpha, A.h, da.p, B.h, db.p, beta, C.h, dc.p);
  }
  EXPECT_EQ(tsr_region_end(ctx, "device"), TSR_SUCCESS);
  const tsr_counters dcn = counters(ctx, "device");
  EXPECT_EQ(tsr_counters_reset(ctx), TSR_SUCCESS);
  if (st == TSR_ERR_UNSUPPORTED && size_of() > 1 && contains(tsr_last_error(ctx), "cannot move device memory")) {
    g_no_transport = tsr_last_error(ctx);
    return false;
  }
  if (st == TSR_ERR_SHAPE && use_plan) {
    if (rank_of() == 0) std::printf("case %s: skipped (the plan's layouts differ: %s)\n", what.c_str(), tsr_last_error(ctx));
    return true;
  }
  EXPECT_EQ(st, TSR_SUCCESS) << what << ": device: " << tsr_last_error(ctx);
  std::vector<float> dev(C.elems());
  dc.get(dev.data());
  const double tol = bf ? 1e-2 : 1e-5;
  const double eref = max_all(ref_error(C, dev, 1, 2, 3, ta, tb, sh.k, alpha, beta, bf));
  double ehost = 0;
  std::string ledger;
  if (!bf && !use_plan) {
    ehost = max_all(host_error(C, dev, host, 1, 2, 3, ta, tb, sh.k, alpha, beta));
    ledger = ledger_diff(hc, dcn);
  }
  int bad_ledger = ledger.empty() ? 0 : 1, any_bad = 0;
  MPI_Allreduce(&bad_ledger, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_LE(eref, tol) << what << ": against the float64 reference";
  EXPECT_LE(ehost, 1e-5) << what << ": against the host GEMM";
  EXPECT_TRUE(ledger.empty()) << what << ": ledger differs on rank " << rank_of() << ":" << ledger;
  if (rank_of() == 0) {
    const bool ok = st == TSR_SUCCESS && eref <= tol && ehost <= 1e-5 && !any_bad;
    std::printf("case %s: %s (vs float64 %.2e, vs host %.2e, tol %.0e%s)\n", what.c_str(), ok ? "ok" : "FAIL", eref,
                ehost, tol, any_bad ? ", LEDGER DIFFERS" : "");
    std::fflush(stdout);
  }
  return true;
}

TEST(CudaGemm, EveryAlgorithmOpAndTypeAgainstHostAndFloat64) {
  BoundCtx bc;
  const int p = size_of();
  for (const Config& cf : configs(p)) {
    Grid grid(bc.ctx, cf.kind, cf.dims);
    for (const Shape3& sh : kShapes)
      for (int op = 0; op < 4; ++op)
        for (int bf = 0; bf < 2; ++bf) {
          if (!run_case(bc.ctx, cf, grid, sh, op, bf != 0, false)) {
            if (rank_of() == 0) std::printf("SKIP: %d ranks: %s\n", p, g_no_transport.c_str());
            GTEST_SKIP() << g_no_transport;
          }
          if (::testing::Test::HasFatalFailure()) return;
        }
  }
}

TEST(CudaGemm, PlannedExecution) {
  BoundCtx bc;
  if (!g_no_transport.empty()) GTEST_SKIP() << g_no_transport;
  const int p = size_of();
  // The plan's grid and layouts (tsr_gemm_plan_create) on device buffers.
  for (const Shape3& sh : {Shape3{64, 48, 80}, Shape3{13, 11, 7}})
    for (int op = 0; op < 4; ++op)
      for (int bf = 0; bf < 2; ++bf) {
        tsr_gemm_problem pr = TSR_GEMM_PROBLEM_INIT;
        pr.m = sh.m;
        pr.n = sh.n;
        pr.k = sh.k;
        pr.elem_size = bf ? 2 : 4;
        pr.nranks = p;
        pr.transa = (op & 1) ? TSR_TRANS : TSR_NOTRANS;
        pr.transb = (op & 2) ? TSR_TRANS : TSR_NOTRANS;
        tsr_gemm_plan plan{};
        ASSERT_EQ(tsr_gemm_plan_create(&pr, &plan), TSR_SUCCESS) << tsr_last_error(nullptr);
        const Config cf{plan.grid_kind, {plan.dims[0], plan.dims[1], plan.dims[2]}, plan.options.algo,
                        {plan.roles[0], plan.roles[1], plan.roles[2]}, plan.options.panel};
        Grid grid(bc.ctx, cf.kind, cf.dims);
        if (!run_case(bc.ctx, cf, grid, sh, op, bf != 0, true)) GTEST_SKIP() << g_no_transport;
      }
}

// Every rank gets `want` and a message containing `msg`.
void expect_everywhere(tsr_context ctx, tsr_status st, tsr_status want, const char* msg, const char* what) {
  const int mine = st == want && contains(tsr_last_error(ctx), msg) ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(st, want) << what << ": " << tsr_last_error(ctx);
  EXPECT_TRUE(contains(tsr_last_error(ctx), msg)) << what << ": message \"" << tsr_last_error(ctx)
                                                  << "\" does not contain \"" << msg << "\"";
  if (rank_of() == 0) {
    std::printf("bad input %s: %s (%s: %s)\n", what, all ? "ok" : "FAIL", tsr_status_name(st), tsr_last_error(ctx));
    std::fflush(stdout);
  }
}

TEST(CudaGemm, BadInputOnEveryRank) {
  const int p = size_of();
  const tsr_layout rep = TSR_LAYOUT_REPLICATED;
  int dims[3] = {p, 1, 1};
  DevBuf d1(64 * 4), d2(64 * 4), d3(64 * 4), d8(64 * 8);
  std::vector<float> h(64, 1.0f);
  {
    // Device buffers on an unbound context.
    BoundCtx un(false);
    tsr_grid grid = nullptr;
    ASSERT_EQ(tsr_grid_create(un.ctx, TSR_GRID_1D, dims, &grid), TSR_SUCCESS) << tsr_last_error(un.ctx);
    tsr_matrix A = nullptr;
    ASSERT_EQ(tsr_matrix_create(grid, 8, 8, TSR_FLOAT32, &rep, 8, &A), TSR_SUCCESS) << tsr_last_error(un.ctx);
    expect_everywhere(un.ctx, tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, A, d1.p, A, d2.p, 0.0, A, d3.p),
                      TSR_ERR_STATE, "'a'", "device buffers on an unbound context");
    EXPECT_EQ(tsr_matrix_destroy(&A), TSR_SUCCESS);
    EXPECT_EQ(tsr_grid_destroy(&grid), TSR_SUCCESS);
  }
  BoundCtx bc;
  tsr_grid grid = nullptr;
  ASSERT_EQ(tsr_grid_create(bc.ctx, TSR_GRID_1D, dims, &grid), TSR_SUCCESS) << tsr_last_error(bc.ctx);
  tsr_matrix A = nullptr, H = nullptr, D = nullptr;
  ASSERT_EQ(tsr_matrix_create(grid, 8, 8, TSR_FLOAT32, &rep, 8, &A), TSR_SUCCESS) << tsr_last_error(bc.ctx);
  ASSERT_EQ(tsr_matrix_create(grid, 8, 8, TSR_BFLOAT16, &rep, 8, &H), TSR_SUCCESS) << tsr_last_error(bc.ctx);
  ASSERT_EQ(tsr_matrix_create(grid, 8, 8, TSR_FLOAT64, &rep, 8, &D), TSR_SUCCESS) << tsr_last_error(bc.ctx);
  // Host and device operands mixed.
  expect_everywhere(bc.ctx, tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, A, d1.p, A, h.data(), 0.0, A, d3.p),
                    TSR_ERR_INVALID_ARG, "one memory space", "host b with device a and c");
  // Mixed on one rank only: still every rank.
  expect_everywhere(bc.ctx,
                    tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, A, d1.p, A, rank_of() == 0 ? h.data() : d2.p,
                             0.0, A, d3.p),
                    TSR_ERR_INVALID_ARG, "", "host b on rank 0 only");
  // bfloat16 inputs on host buffers.
  std::vector<uint16_t> hb(64, 0x3f80);
  std::vector<float> hc(64, 0.0f);
  expect_everywhere(bc.ctx, tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, H, hb.data(), H, hb.data(), 0.0, A,
                                     hc.data()),
                    TSR_ERR_UNSUPPORTED, "bfloat16 products run on CUDA device buffers only", "bfloat16 on the host");
  // float64 on the device.
  DevBuf e1(64 * 8), e2(64 * 8);
  expect_everywhere(bc.ctx, tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, D, e1.p, D, e2.p, 0.0, D, d8.p),
                    TSR_ERR_UNSUPPORTED, "writes TSR_FLOAT32 C", "float64 on the device");
  // bfloat16 C is not an output type.
  DevBuf b1(64 * 2), b2(64 * 2), b3(64 * 2);
  expect_everywhere(bc.ctx, tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, H, b1.p, H, b2.p, 0.0, H, b3.p),
                    TSR_ERR_UNSUPPORTED, "writes TSR_FLOAT32 C", "bfloat16 C on the device");
  // Memory of another device (two devices or more).
  int ndev = 0;
  EXPECT_EQ(tsr_device_count(&ndev), TSR_SUCCESS);
  int min_dev = 0;
  MPI_Allreduce(&ndev, &min_dev, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (min_dev >= 2) {
    int mine = -1;
    EXPECT_EQ(tsr_context_get_device(bc.ctx, &mine, nullptr), TSR_SUCCESS);
    const int other = (mine + 1) % ndev;
    int prev = 0;
    cudaGetDevice(&prev);
    cudaSetDevice(other);
    void* q = nullptr;
    EXPECT_EQ(cudaMalloc(&q, 64 * 4), cudaSuccess);
    cudaSetDevice(prev);
    expect_everywhere(bc.ctx, tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, A, q, A, d2.p, 0.0, A, d3.p),
                      TSR_ERR_INVALID_ARG, "'a'", "a on another device");
    cudaFree(q);
  } else if (rank_of() == 0) {
    std::printf("bad input a on another device: skipped (one CUDA device)\n");
  }
  EXPECT_EQ(tsr_matrix_destroy(&A), TSR_SUCCESS);
  EXPECT_EQ(tsr_matrix_destroy(&H), TSR_SUCCESS);
  EXPECT_EQ(tsr_matrix_destroy(&D), TSR_SUCCESS);
  EXPECT_EQ(tsr_grid_destroy(&grid), TSR_SUCCESS);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 2;
  const int mine = tsr::device::available() ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (rank_of() == 0) std::printf("SKIP: test_cuda_gemm needs a CUDA device on every rank; some rank sees none\n");
    MPI_Finalize();
    return 77;
  }
  // Buffers on the device each rank's context binds (rank % devices).
  int ndev = 1;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) ndev = 1;
  if (cudaSetDevice(rank_of() % ndev) != cudaSuccess) std::printf("rank %d: cudaSetDevice failed\n", rank_of());
  ::testing::InitGoogleTest(&argc, argv);
  const int local = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}

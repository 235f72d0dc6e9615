// The CUDA kernels (issue 17) against the CPU: cuBLAS local products against
// a float64 product of the same (exactly representable) inputs; the fused
// LAMB / LARS passes against the CPU kernels (kernels.hpp) on the same
// inputs and coefficients; the attention block against the float64
// reference of the CPU attention tests (tests/common/attn_reference.hpp).
// Bad device pointers and sizes are refused with a message naming the
// argument. Exits 77 (CTest: skipped) when no CUDA device is visible.
//
// Tolerances (and why):
//  GEMM, float32 C: exact. Inputs are multiples of 1/64 in [-1, 1] (exact in
//    bfloat16 and float16), so every product and partial sum of k <= 200
//    terms is exact in float32 whatever the order cuBLAS adds in.
//  GEMM, bfloat16 / float16 C: the exact value rounded once to the output
//    type: |err| <= 2^-8 |c| (bfloat16, 8-bit significand) and 2^-11 |c|
//    (float16, 11 bits), plus the smallest normal for values near zero.
//  Optimizer: w, m, v and the bfloat16 copy bitwise equal to the CPU kernels
//    (the same float32 operations, no fused multiply-adds); the float64 sums
//    of squares to 1e-12 relative (the same terms, another addition order).
//  Attention: float32 arithmetic against float64: 2e-5 absolute on O (|O| <=
//    1), 1e-4 on the LSE, and 1e-4 relative to the largest |entry| on dQ, dK,
//    dV (sums of up to N products).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "attn_cuda.hpp"
#include "tessera/tsr_config.h"
#include "attn_reference.hpp"
#include "core.hpp"
#include "device.hpp"
#include "gemm_cuda.hpp"
#include "kernels.hpp"
#include "opt_cuda.hpp"

namespace {

using tsr_test::uniform;

// Device memory for a test (freed at scope end).
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    if (count) {
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), count * sizeof(T)), cudaSuccess);
    }
  }
  Dev(const std::vector<T>& h) : Dev(h.size()) { put(h); }  // NOLINT
  ~Dev() {
    if (p) cudaFree(p);
  }
  void put(const std::vector<T>& h) {
    ASSERT_EQ(h.size(), n);
    if (n) {
      ASSERT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  std::vector<T> get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (n) {
      EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return h;
  }
};

std::string msg() { return tsr::pending_message(); }

// ------------------------------------------------------------------ GEMM
uint16_t to_bf16(float f) {  // exact for the test's inputs
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// float16 <-> float for normal values and zero (the test's range).
uint16_t to_f16(float f) {
  if (f == 0.0f) return std::signbit(f) ? 0x8000 : 0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  const uint32_t mant = u & 0x7fffffu;
  // round to nearest even on the 13 dropped bits
  uint32_t m = mant >> 13;
  const uint32_t rest = mant & 0x1fffu;
  uint32_t e = static_cast<uint32_t>(exp);
  if (rest > 0x1000u || (rest == 0x1000u && (m & 1u))) {
    if (++m == 0x400u) {
      m = 0;
      ++e;
    }
  }
  return static_cast<uint16_t>(sign | (e << 10) | m);
}
float from_f16(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0 && m == 0) {
    float f;
    std::memcpy(&f, &sign, 4);
    return f;
  }
  float v = std::ldexp(1.0f + static_cast<float>(m) / 1024.0f, static_cast<int>(e) - 15);
  return sign ? -v : v;
}

float grid64(uint64_t seed, size_t i) { return std::round(static_cast<float>(uniform(seed, i)) * 64.0f) / 64.0f; }

struct GemmCase {
  tsr::cuda::Elem in, out;
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

void run_gemm(tsr::cuda::Blas& blas, const GemmCase& c) {
  using tsr::cuda::Elem;
  const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k, br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
  const int64_t lda = ar + 3, ldb = br + 1, ldc = c.m + 2;
  std::vector<float> A(static_cast<size_t>(lda * ac)), B(static_cast<size_t>(ldb * bc)),
      C(static_cast<size_t>(ldc * c.n));
  for (size_t i = 0; i < A.size(); ++i) A[i] = grid64(1, i);
  for (size_t i = 0; i < B.size(); ++i) B[i] = grid64(2, i);
  for (size_t i = 0; i < C.size(); ++i) C[i] = grid64(3, i);
  std::vector<double> want(C.size());
  for (int64_t j = 0; j < c.n; ++j)
    for (int64_t i = 0; i < c.m; ++i) {
      double s = 0;
      for (int64_t l = 0; l < c.k; ++l) {
        const double a = c.ta ? A[static_cast<size_t>(l + i * lda)] : A[static_cast<size_t>(i + l * lda)];
        const double b = c.tb ? B[static_cast<size_t>(j + l * ldb)] : B[static_cast<size_t>(l + j * ldb)];
        s += a * b;
      }
      const size_t x = static_cast<size_t>(i + j * ldc);
      want[x] = c.alpha * s + (c.beta == 0 ? 0.0 : c.beta * static_cast<double>(C[x]));
    }
  auto pack = [&](const std::vector<float>& v, Elem e) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = e == Elem::bf16 ? to_bf16(v[i]) : to_f16(v[i]);
    return h;
  };
  std::vector<double> got(C.size());
  tsr_status st;
  if (c.in == Elem::f32) {
    Dev<float> a(A), b(B), cc(C);
    st = tsr::cuda::gemm(blas, c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.p, lda, b.p, ldb, c.beta, cc.p, ldc, c.in, c.out);
    const std::vector<float> r = cc.get();
    for (size_t i = 0; i < r.size(); ++i) got[i] = r[i];
  } else {
    Dev<uint16_t> a(pack(A, c.in)), b(pack(B, c.in));
    if (c.out == Elem::f32) {
      Dev<float> cc(C);
      st = tsr::cuda::gemm(blas, c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.p, lda, b.p, ldb, c.beta, cc.p, ldc, c.in,
                           c.out);
      const std::vector<float> r = cc.get();
      for (size_t i = 0; i < r.size(); ++i) got[i] = r[i];
    } else {
      Dev<uint16_t> cc(pack(C, c.out));
      st = tsr::cuda::gemm(blas, c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.p, lda, b.p, ldb, c.beta, cc.p, ldc, c.in,
                           c.out);
      const std::vector<uint16_t> r = cc.get();
      for (size_t i = 0; i < r.size(); ++i) got[i] = c.out == Elem::bf16 ? from_bf16(r[i]) : from_f16(r[i]);
    }
  }
  ASSERT_EQ(st, TSR_SUCCESS) << msg();
  const double rel = c.out == Elem::f32 ? 0.0 : c.out == Elem::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  for (int64_t j = 0; j < c.n; ++j)
    for (int64_t i = 0; i < c.m; ++i) {
      const size_t x = static_cast<size_t>(i + j * ldc);
      ASSERT_LE(std::fabs(got[x] - want[x]), rel * std::fabs(want[x]) + (rel > 0 ? 6.2e-5 : 0.0))
          << tsr::cuda::elem_name(c.in) << "->" << tsr::cuda::elem_name(c.out) << " ta " << c.ta << " tb " << c.tb
          << " at (" << i << ", " << j << ")";
    }
  // Padding rows of C untouched.
  if (c.out == Elem::f32 && c.m > 0) {
    for (int64_t j = 0; j < c.n; ++j) {
      ASSERT_EQ(got[static_cast<size_t>(c.m + j * ldc)], C[static_cast<size_t>(c.m + j * ldc)]);
    }
  }
}

TEST(CudaGemm, MatchesFloat64ProductForEveryTypeAndTranspose) {
  using tsr::cuda::Elem;
  tsr::cuda::Blas blas;
  ASSERT_EQ(blas.init(0, nullptr), TSR_SUCCESS) << msg();
  for (Elem in : {Elem::f32, Elem::bf16, Elem::f16})
    for (Elem out : {in, Elem::f32})
      for (int t = 0; t < 4; ++t) {
        run_gemm(blas, GemmCase{in, out, (t & 1) != 0, (t & 2) != 0, 67, 45, 131, 1.0f, 0.0f});
        run_gemm(blas, GemmCase{in, out, (t & 1) != 0, (t & 2) != 0, 33, 70, 17, 0.5f, 0.25f});
        if (in == Elem::f32) break;
      }
}

TEST(CudaGemm, KZeroScalesCAndBetaZeroNeverReadsIt) {
  using tsr::cuda::Elem;
  tsr::cuda::Blas blas;
  ASSERT_EQ(blas.init(0, nullptr), TSR_SUCCESS) << msg();
  run_gemm(blas, GemmCase{Elem::f32, Elem::f32, false, false, 9, 7, 0, 1.0f, 0.5f});
  std::vector<float> nan(20, std::nanf(""));
  Dev<float> c(nan);
  ASSERT_EQ(tsr::cuda::gemm(blas, false, false, 4, 5, 0, 1.0f, nullptr, 4, nullptr, 1, 0.0f, c.p, 4, Elem::f32,
                            Elem::f32),
            TSR_SUCCESS)
      << msg();
  for (float x : c.get()) ASSERT_EQ(x, 0.0f);
}

TEST(CudaGemm, RefusesHostPointersBadLeadingDimensionsAndTypes) {
  using tsr::cuda::Elem;
  tsr::cuda::Blas blas;
  ASSERT_EQ(blas.init(0, nullptr), TSR_SUCCESS) << msg();
  Dev<float> a(64), b(64), c(64);
  std::vector<float> host(64);
  EXPECT_EQ(tsr::cuda::gemm(blas, false, false, 8, 8, 8, 1, host.data(), 8, b.p, 8, 0, c.p, 8, Elem::f32, Elem::f32),
            TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("argument 'a'"), std::string::npos) << msg();
  EXPECT_EQ(tsr::cuda::gemm(blas, false, false, 8, 8, 8, 1, a.p, 8, b.p, 8, 0, host.data(), 8, Elem::f32, Elem::f32),
            TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("argument 'c'"), std::string::npos) << msg();
  EXPECT_EQ(tsr::cuda::gemm(blas, false, false, 8, 8, 8, 1, a.p, 7, b.p, 8, 0, c.p, 8, Elem::f32, Elem::f32),
            TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("'lda'"), std::string::npos) << msg();
  EXPECT_EQ(tsr::cuda::gemm(blas, false, true, 8, 8, 4, 1, a.p, 8, b.p, 4, 0, c.p, 8, Elem::f32, Elem::f32),
            TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("'ldb'"), std::string::npos) << msg();
  EXPECT_EQ(tsr::cuda::gemm(blas, false, false, 8, 8, 8, 1, a.p, 8, b.p, 8, 0, c.p, 8, Elem::bf16, Elem::f16),
            TSR_ERR_UNSUPPORTED);
  EXPECT_EQ(tsr::cuda::gemm(blas, false, false, -1, 8, 8, 1, a.p, 8, b.p, 8, 0, c.p, 8, Elem::f32, Elem::f32),
            TSR_ERR_SHAPE);
  tsr::cuda::Blas none;
  EXPECT_EQ(tsr::cuda::gemm(none, false, false, 8, 8, 8, 1, a.p, 8, b.p, 8, 0, c.p, 8, Elem::f32, Elem::f32),
            TSR_ERR_STATE);
  tsr::cuda::Blas bad;
  EXPECT_EQ(bad.init(1 << 20, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("'device'"), std::string::npos) << msg();
}

TEST(CudaGemm, RefusesMemoryOfAnotherDevice) {
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  if (n < 2) GTEST_SKIP() << "one CUDA device: no memory of another device to refuse";
  using tsr::cuda::Elem;
  tsr::cuda::Blas blas;
  ASSERT_EQ(blas.init(0, nullptr), TSR_SUCCESS) << msg();
  Dev<float> a(64), c(64);
  float* b1 = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&b1), 64 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(tsr::cuda::gemm(blas, false, false, 8, 8, 8, 1, a.p, 8, b1, 8, 0, c.p, 8, Elem::f32, Elem::f32),
            TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("memory of CUDA device 1"), std::string::npos) << msg();
  cudaFree(b1);
}

// ------------------------------------------------------------- optimizer
using tsr::opt::LambCoef;
using tsr::opt::LarsCoef;
using tsr::opt::Sums;
namespace oc = tsr::opt::cuda;

struct OptData {
  std::vector<float> g, w, m, v;
  std::vector<uint16_t> gb;
  explicit OptData(size_t n) : g(n), w(n), m(n), v(n), gb(n) {
    for (size_t i = 0; i < n; ++i) {
      g[i] = static_cast<float>(uniform(11, i)) * 0.1f;
      w[i] = static_cast<float>(uniform(12, i));
      m[i] = static_cast<float>(uniform(13, i)) * 0.01f;
      v[i] = static_cast<float>(std::fabs(uniform(14, i))) * 1e-4f;
      gb[i] = to_bf16(g[i]);  // truncation: some bfloat16 value
    }
  }
};

// Tasks covering [0, n) of two groups split at `cut`, in pieces of at most `chunk`.
std::vector<oc::Task> tasks_for(size_t n, size_t cut, size_t chunk, int op0, int op1) {
  std::vector<oc::Task> t;
  for (int grp = 0; grp < 2; ++grp) {
    const size_t lo = grp == 0 ? 0 : cut, hi = grp == 0 ? cut : n;
    for (size_t b = lo; b < hi; b += chunk) {
      const size_t e = std::min(hi, b + chunk);
      t.push_back(oc::Task{b, b, b, b, static_cast<uint32_t>(e - b), grp, grp == 0 ? op0 : op1, 0});
    }
  }
  return t;
}

void expect_sums(const Sums& want, const Sums& got, const char* what, size_t task) {
  auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), 1e-300); };
  EXPECT_TRUE(near(want.a, got.a) && near(want.b, got.b) && near(want.c, got.c))
      << what << " task " << task << ": want {" << want.a << ", " << want.b << ", " << want.c << "} got {" << got.a
      << ", " << got.b << ", " << got.c << "}";
}

LambCoef lamb_coef(float gs) {
  LambCoef c{};
  c.gs = gs;
  c.l2 = 0;
  c.b1 = 0.9f;
  c.a1 = 0.1f;
  c.b2 = 0.999f;
  c.a2 = 0.001f;
  c.bc1 = static_cast<float>(1.0 / (1.0 - std::pow(0.9, 3)));
  c.bc2 = static_cast<float>(1.0 / (1.0 - std::pow(0.999, 3)));
  c.ei = 0;
  c.eo = 1e-6f;
  c.wd = 0.01f;
  return c;
}

TEST(CudaOptimizer, LambPassesMatchTheCpuKernels) {
  const size_t n = 70001, cut = 40000, chunk = 16384;
  for (bool bf16 : {false, true}) {
    OptData d(n);
    LambCoef lc[2] = {lamb_coef(0.5f), lamb_coef(0.25f)};
    lc[1].l2 = 0.001f;  // L2 mode in group 1
    lc[1].wd = 0;
    lc[1].ei = 1e-8f;   // optax eps_root
    const float kf[2] = {0.01f, 0.003f};
    Dev<float> g(d.g), w(d.w), m(d.m), v(d.v);
    Dev<uint16_t> gb(d.gb), p(n);
    const void* gp = bf16 ? static_cast<const void*>(gb.p) : g.p;
    oc::Runner r;
    ASSERT_EQ(r.init(0, nullptr), TSR_SUCCESS) << msg();
    for (int op : {oc::kLambNorms, oc::kLambUnorm, oc::kSumsq}) {
      const std::vector<oc::Task> t = tasks_for(n, cut, chunk, op, op);
      std::vector<Sums> got(t.size());
      ASSERT_EQ(r.pass_a(t, gp, bf16, w.p, m.p, v.p, lc, nullptr, 2, got.data()), TSR_SUCCESS) << msg();
      for (size_t i = 0; i < t.size(); ++i) {
        const size_t b = t[i].g_off, k = t[i].n;
        const LambCoef& c = lc[t[i].group];
        Sums want;
        if (op == oc::kSumsq) want = {bf16 ? tsr::opt::sumsq_bf16(&d.gb[b], k) : tsr::opt::sumsq_f32(&d.g[b], k), 0, 0};
        else if (op == oc::kLambNorms)
          want = bf16 ? tsr::opt::lamb_norms_bf16(&d.gb[b], &d.w[b], &d.m[b], &d.v[b], k, c)
                      : tsr::opt::lamb_norms_f32(&d.g[b], &d.w[b], &d.m[b], &d.v[b], k, c);
        else
          want = bf16 ? tsr::opt::lamb_unorm_bf16(&d.gb[b], &d.w[b], &d.m[b], &d.v[b], k, c)
                      : tsr::opt::lamb_unorm_f32(&d.g[b], &d.w[b], &d.m[b], &d.v[b], k, c);
        expect_sums(want, got[i], "LAMB pass A", i);
      }
    }
    const std::vector<oc::Task> t = tasks_for(n, cut, chunk, oc::kLambUpdate, oc::kLambUpdate);
    ASSERT_EQ(r.pass_b(t, gp, bf16, w.p, m.p, v.p, bf16 ? p.p : nullptr, lc, kf, nullptr, 2), TSR_SUCCESS) << msg();
    std::vector<uint16_t> pw(n);
    for (int grp = 0; grp < 2; ++grp) {
      const size_t lo = grp ? cut : 0, k = grp ? n - cut : cut;
      if (bf16)
        tsr::opt::lamb_update_bf16(&d.gb[lo], &d.w[lo], &d.m[lo], &d.v[lo], &pw[lo], k, lc[grp], kf[grp]);
      else
        tsr::opt::lamb_update_f32(&d.g[lo], &d.w[lo], &d.m[lo], &d.v[lo], k, lc[grp], kf[grp]);
    }
    EXPECT_EQ(w.get(), d.w) << "w (bf16 grads " << bf16 << ")";
    EXPECT_EQ(m.get(), d.m) << "m";
    EXPECT_EQ(v.get(), d.v) << "v";
    if (bf16) {
      EXPECT_EQ(p.get(), pw) << "bfloat16 parameters";
    }
  }
}

TEST(CudaOptimizer, LarsPassesMatchTheCpuKernels) {
  const size_t n = 50000, cut = 17000, chunk = 16384;
  for (bool bf16 : {false, true})
    for (int variant = 0; variant < 3; ++variant) {  // momentum, nesterov, none
      OptData d(n);
      LarsCoef lc[2];
      for (LarsCoef& c : lc) {
        c.gs = 0.5f;
        c.wd = 1e-4f;
        c.mu = variant == 2 ? 0.0f : 0.9f;
        c.a = 0.02f;
        c.b = 1.0f;
        c.nesterov = variant == 1;
        c.has_v = variant != 2;
      }
      lc[1].a = 1.0f;  // "popular" momentum coefficients in group 1
      lc[1].b = 0.05f;
      Dev<float> g(d.g), w(d.w), m(d.m);
      Dev<uint16_t> gb(d.gb), p(n);
      const void* gp = bf16 ? static_cast<const void*>(gb.p) : g.p;
      oc::Runner r;
      ASSERT_EQ(r.init(0, nullptr), TSR_SUCCESS) << msg();
      const std::vector<oc::Task> ta = tasks_for(n, cut, chunk, oc::kLarsNorms, oc::kLarsUnorm);
      std::vector<Sums> got(ta.size());
      ASSERT_EQ(r.pass_a(ta, gp, bf16, w.p, m.p, nullptr, nullptr, lc, 2, got.data()), TSR_SUCCESS) << msg();
      for (size_t i = 0; i < ta.size(); ++i) {
        const size_t b = ta[i].g_off, k = ta[i].n;
        Sums want;
        if (ta[i].op == oc::kLarsNorms)
          want = bf16 ? tsr::opt::lars_norms_bf16(&d.gb[b], &d.w[b], k) : tsr::opt::lars_norms_f32(&d.g[b], &d.w[b], k);
        else
          want = bf16 ? tsr::opt::lars_unorm_bf16(&d.gb[b], &d.w[b], &d.m[b], k, lc[1])
                      : tsr::opt::lars_unorm_f32(&d.g[b], &d.w[b], &d.m[b], k, lc[1]);
        expect_sums(want, got[i], "LARS pass A", i);
      }
      const std::vector<oc::Task> tb = tasks_for(n, cut, chunk, oc::kLarsUpdate, oc::kLarsUpdate);
      ASSERT_EQ(r.pass_b(tb, gp, bf16, w.p, m.p, nullptr, bf16 ? p.p : nullptr, nullptr, nullptr, lc, 2), TSR_SUCCESS)
          << msg();
      std::vector<uint16_t> pw(n);
      for (int grp = 0; grp < 2; ++grp) {
        const size_t lo = grp ? cut : 0, k = grp ? n - cut : cut;
        if (bf16) tsr::opt::lars_update_bf16(&d.gb[lo], &d.w[lo], &d.m[lo], &pw[lo], k, lc[grp]);
        else tsr::opt::lars_update_f32(&d.g[lo], &d.w[lo], &d.m[lo], k, lc[grp]);
      }
      EXPECT_EQ(w.get(), d.w) << "w, variant " << variant << " bf16 " << bf16;
      EXPECT_EQ(m.get(), d.m) << "momentum, variant " << variant;
      if (bf16) {
      EXPECT_EQ(p.get(), pw) << "bfloat16 parameters";
    }
    }
}

// Every kernel configuration (vector width, unroll, elements per block)
// against the scalar one (vec 1, unroll 1, one block per task, the walk of
// the first CUDA kernels): w, m, v and the bfloat16 copy bit for bit, the
// float64 sums to 1e-12 relative (another fixed order of additions). Tasks
// of odd sizes (1 to 16384 elements) at odd offsets, the arrays shifted
// against each other (g, w, m, v, p each misaligned differently, and all
// misaligned alike, so that the head peeling and the per-array fallback
// to element loads both run), float32 and bfloat16 gradients, LAMB and
// LARS (momentum, Nesterov, none).
struct Shift {
  size_t g, w, s, p, m, v;  // task offsets' shifts (elements); m and v base pointer shifts
};

struct VecRun {
  std::vector<Sums> sums;
  std::vector<float> w, m, v;
  std::vector<uint16_t> p;
};

VecRun run_config(const oc::KernelConfig& cfg, bool lamb, bool bf16, int lars_variant, const Shift& sh,
                  const std::vector<oc::Task>& ta, const std::vector<oc::Task>& tb, const OptData& d) {
  VecRun out;
  const size_t n = d.g.size();
  Dev<float> g(d.g), w(d.w), m(d.m), v(d.v);
  Dev<uint16_t> gb(d.gb), p(n);
  EXPECT_EQ(cudaMemset(p.p, 0, n * 2), cudaSuccess);
  const void* gp = bf16 ? static_cast<const void*>(gb.p) : g.p;
  oc::Runner r;
  EXPECT_EQ(r.init(0, nullptr), TSR_SUCCESS) << msg();
  EXPECT_EQ(r.set_config(cfg), TSR_SUCCESS) << msg();
  LambCoef lc[2] = {lamb_coef(0.5f), lamb_coef(0.25f)};
  lc[1].l2 = 0.001f;
  lc[1].wd = 0;
  const float kf[2] = {0.01f, 0.003f};
  LarsCoef pc[2];
  for (LarsCoef& c : pc) {
    c.gs = 0.5f;
    c.wd = 1e-4f;
    c.mu = lars_variant == 2 ? 0.0f : 0.9f;
    c.a = 0.02f;
    c.b = 1.0f;
    c.nesterov = lars_variant == 1;
    c.has_v = lars_variant != 2;
  }
  out.sums.resize(ta.size());
  float* mp = m.p + sh.m;
  float* vp = v.p + sh.v;
  if (lamb) {
    EXPECT_EQ(r.pass_a(ta, gp, bf16, w.p, mp, vp, lc, nullptr, 2, out.sums.data()), TSR_SUCCESS) << msg();
    EXPECT_EQ(r.pass_b(tb, gp, bf16, w.p, mp, vp, bf16 ? p.p : nullptr, lc, kf, nullptr, 2), TSR_SUCCESS) << msg();
  } else {
    EXPECT_EQ(r.pass_a(ta, gp, bf16, w.p, mp, nullptr, nullptr, pc, 2, out.sums.data()), TSR_SUCCESS) << msg();
    EXPECT_EQ(r.pass_b(tb, gp, bf16, w.p, mp, nullptr, bf16 ? p.p : nullptr, nullptr, nullptr, pc, 2), TSR_SUCCESS)
        << msg();
  }
  out.w = w.get();
  out.m = m.get();
  out.v = v.get();
  out.p = p.get();
  return out;
}

TEST(CudaOptimizer, EveryKernelConfigurationEqualsTheScalarWalkBitForBit) {
  const uint32_t sizes[] = {1, 3, 7, 8, 9, 31, 255, 1000, 4095, 4097, 8191, 16383, 16384, 12345};
  const Shift shifts[] = {{0, 0, 0, 0, 0, 0}, {3, 3, 3, 3, 0, 0}, {1, 3, 2, 5, 0, 1}, {0, 2, 0, 1, 1, 0}};
  size_t total = 0;
  for (uint32_t k : sizes) total += k + 3;
  OptData d(total + 16);
  oc::KernelConfig scalar;
  scalar.vec = 1;
  scalar.unroll = 1;
  scalar.block_elems = 0;
  std::vector<oc::KernelConfig> cfgs;
  for (int vu : {14, 41, 42, 44, 81, 82})
    for (uint32_t be : {0u, 8u, 4096u}) {
      oc::KernelConfig c;
      c.vec = vu / 10;
      c.unroll = vu % 10;
      c.block_elems = be;
      cfgs.push_back(c);
    }
  oc::KernelConfig bad;
  bad.vec = 2;
  oc::Runner r0;
  ASSERT_EQ(r0.init(0, nullptr), TSR_SUCCESS) << msg();
  EXPECT_EQ(r0.set_config(bad), TSR_ERR_INVALID_ARG);
  for (const Shift& sh : shifts)
    for (int algo = 0; algo < 4; ++algo)  // LAMB, LARS momentum, Nesterov, none
      for (bool bf16 : {false, true}) {
        const bool lamb = algo == 0;
        std::vector<oc::Task> ta, tb;
        size_t b = 0;
        int i = 0;
        for (uint32_t k : sizes) {
          b += 1 + (i % 3);  // odd gaps: tasks at every residue
          const int grp = i % 2;
          int opa;
          if (lamb) opa = i % 3 == 0 ? oc::kLambNorms : i % 3 == 1 ? oc::kLambUnorm : oc::kSumsq;
          else opa = i % 3 == 0 ? oc::kLarsNorms : i % 3 == 1 ? oc::kLarsUnorm : oc::kNone;
          ta.push_back(oc::Task{b + sh.g, b + sh.w, b + sh.s, b + sh.p, k, grp, opa, 0});
          tb.push_back(oc::Task{b + sh.g, b + sh.w, b + sh.s, b + sh.p, k, grp,
                                lamb ? oc::kLambUpdate : oc::kLarsUpdate, 0});
          b += k;
          ++i;
        }
        const int lv = lamb ? 0 : algo - 1;
        const VecRun want = run_config(scalar, lamb, bf16, lv, sh, ta, tb, d);
        for (const oc::KernelConfig& c : cfgs) {
          SCOPED_TRACE(::testing::Message() << "config v" << c.vec << "u" << c.unroll << "b" << c.block_elems
                                            << " algo " << algo << " bf16 " << bf16 << " shifts " << sh.g << sh.w
                                            << sh.s << sh.p << sh.m << sh.v);
          const VecRun got = run_config(c, lamb, bf16, lv, sh, ta, tb, d);
          for (size_t t = 0; t < ta.size(); ++t) expect_sums(want.sums[t], got.sums[t], "pass A", t);
          EXPECT_EQ(std::memcmp(got.w.data(), want.w.data(), got.w.size() * 4), 0) << "w";
          EXPECT_EQ(std::memcmp(got.m.data(), want.m.data(), got.m.size() * 4), 0) << "m";
          EXPECT_EQ(std::memcmp(got.v.data(), want.v.data(), got.v.size() * 4), 0) << "v";
          EXPECT_EQ(got.p, want.p) << "bfloat16 parameters";
        }
      }
}

TEST(CudaOptimizer, ConversionsMatchTheCpu) {
  const size_t n = 5000;
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = static_cast<float>(uniform(5, i)) * 1e3f;
  f[7] = std::nanf("");
  f[8] = INFINITY;
  std::vector<uint16_t> want(n);
  tsr::opt::f32_to_bf16(f.data(), want.data(), n);
  std::vector<float> back(n);
  tsr::opt::bf16_to_f32(want.data(), back.data(), n);
  Dev<float> df(f), db(n);
  Dev<uint16_t> dh(n);
  oc::Runner r;
  ASSERT_EQ(r.init(0, nullptr), TSR_SUCCESS) << msg();
  ASSERT_EQ(r.f32_to_bf16(df.p, dh.p, n), TSR_SUCCESS) << msg();
  ASSERT_EQ(r.bf16_to_f32(dh.p, db.p, n), TSR_SUCCESS) << msg();
  EXPECT_EQ(dh.get(), want);
  const std::vector<float> got = db.get();
  EXPECT_EQ(std::memcmp(got.data(), back.data(), n * sizeof(float)), 0);
}

TEST(CudaOptimizer, RefusesHostPointers) {
  const size_t n = 100;
  OptData d(n);
  Dev<float> w(d.w), m(d.m), v(d.v);
  LambCoef lc[2] = {lamb_coef(1), lamb_coef(1)};
  oc::Runner r;
  ASSERT_EQ(r.init(0, nullptr), TSR_SUCCESS) << msg();
  const std::vector<oc::Task> t = tasks_for(n, 50, 64, oc::kLambNorms, oc::kLambNorms);
  std::vector<Sums> s(t.size());
  EXPECT_EQ(r.pass_a(t, d.g.data(), false, w.p, m.p, v.p, lc, nullptr, 2, s.data()), TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("argument 'grads'"), std::string::npos) << msg();
  Dev<float> g(d.g);
  EXPECT_EQ(r.pass_a(t, g.p, false, d.w.data(), m.p, v.p, lc, nullptr, 2, s.data()), TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("argument 'params'"), std::string::npos) << msg();
  oc::Runner none;
  EXPECT_EQ(none.pass_a(t, g.p, false, w.p, m.p, v.p, lc, nullptr, 2, s.data()), TSR_ERR_STATE);
}

// ------------------------------------------------------------- attention
struct AttnCase {
  size_t B, H, G, N, d;
  bool causal, mask;
  size_t split;  // keys in two blocks [0, split), [split, N) of the local order (0: one block)
  bool zigzag;   // local order = the zigzag layout's chunks 0, 3, 1, 2 (positions not increasing)
};

// Runs the block on tensors in a local token order (row i at position
// perm[i]) and checks every output against the float64 reference of the
// same tokens in natural order.
void run_attn(const AttnCase& c) {
  namespace ac = tsr::attn::cuda;
  const size_t N = c.N, d = c.d, BH = c.B * c.H, BG = c.B * c.G;
  std::vector<size_t> perm(N);
  for (size_t i = 0; i < N; ++i) perm[i] = i;
  if (c.zigzag) {
    const size_t q = N / 4, order[4] = {0, 3, 1, 2};
    size_t x = 0;
    for (size_t ch : order)
      for (size_t t = ch * q; t < (ch == 3 ? N : (ch + 1) * q); ++t) perm[x++] = t;
  }
  tsr_test::AttnShape s;
  s.B = c.B;
  s.H = c.H;
  s.G = c.G;
  s.N = N;
  s.d = d;
  s.causal = c.causal;
  s.scale = 1.0 / std::sqrt(static_cast<double>(d));
  // Local tensors (float), and the same values in natural order (double).
  std::vector<float> ql(BH * N * d), dol(ql.size()), kl(BG * N * d), vl(kl.size());
  std::vector<uint8_t> ml;
  for (size_t i = 0; i < ql.size(); ++i) {
    ql[i] = static_cast<float>(uniform(21, i));
    dol[i] = static_cast<float>(uniform(24, i));
  }
  for (size_t i = 0; i < kl.size(); ++i) {
    kl[i] = static_cast<float>(uniform(22, i));
    vl[i] = static_cast<float>(uniform(23, i));
  }
  tsr_test::AttnFull f;
  f.q.resize(ql.size());
  f.dout.resize(ql.size());
  f.k.resize(kl.size());
  f.v.resize(kl.size());
  for (size_t r = 0; r < BH; ++r)
    for (size_t i = 0; i < N; ++i)
      for (size_t e = 0; e < d; ++e) {
        f.q[(r * N + perm[i]) * d + e] = ql[(r * N + i) * d + e];
        f.dout[(r * N + perm[i]) * d + e] = dol[(r * N + i) * d + e];
      }
  for (size_t r = 0; r < BG; ++r)
    for (size_t i = 0; i < N; ++i)
      for (size_t e = 0; e < d; ++e) {
        f.k[(r * N + perm[i]) * d + e] = kl[(r * N + i) * d + e];
        f.v[(r * N + perm[i]) * d + e] = vl[(r * N + i) * d + e];
      }
  if (c.mask) {
    ml.assign(c.B * N, 1);
    for (size_t j = 0; j < N; ++j) ml[j] = j % 3 != 1;  // batch 0: every third key hidden
    if (c.B > 1)
      for (size_t j = 0; j < N; ++j) ml[N + j] = 0;  // batch 1: nothing visible
    f.mask.assign(c.B * N, 1);
    for (size_t b = 0; b < c.B; ++b)
      for (size_t j = 0; j < N; ++j) f.mask[b * N + perm[j]] = ml[b * N + j];
  }
  const tsr_test::AttnRef ref = tsr_test::attention_reference(s, f);

  struct KB {
    size_t lo, hi;
  };
  std::vector<KB> blocks;
  if (c.split == 0) blocks.push_back({0, N});
  else blocks = {{0, c.split}, {c.split, N}};
  const ac::Shape sh{c.B, c.H, c.G, d, static_cast<float>(s.scale), c.causal};
  const ac::On on{0, nullptr};
  std::vector<int64_t> qpos(N);
  for (size_t i = 0; i < N; ++i) qpos[i] = static_cast<int64_t>(perm[i]);
  Dev<float> q(ql), dout(dol), o(ql.size()), m(BH * N), l(BH * N), lse(BH * N), delta(BH * N), dq(ql.size());
  Dev<int64_t> dqpos(qpos);
  ASSERT_EQ(ac::fwd_init(on, sh, N, o.p, m.p, l.p), TSR_SUCCESS) << msg();
  ASSERT_EQ(cudaMemset(dq.p, 0, ql.size() * sizeof(float)), cudaSuccess);
  std::vector<std::vector<float>> kb, vb;
  std::vector<std::vector<uint8_t>> mb;
  std::vector<std::vector<int64_t>> pb;
  for (const KB& b : blocks) {
    const size_t len = b.hi - b.lo;
    std::vector<float> kk(BG * len * d), vv(kk.size());
    for (size_t bg = 0; bg < BG; ++bg)
      for (size_t j = 0; j < len; ++j)
        for (size_t e = 0; e < d; ++e) {
          kk[(bg * len + j) * d + e] = kl[(bg * N + b.lo + j) * d + e];
          vv[(bg * len + j) * d + e] = vl[(bg * N + b.lo + j) * d + e];
        }
    std::vector<uint8_t> mm;
    if (c.mask)
      for (size_t bb = 0; bb < c.B; ++bb)
        for (size_t j = 0; j < len; ++j) mm.push_back(ml[bb * N + b.lo + j]);
    std::vector<int64_t> pp(len);
    for (size_t j = 0; j < len; ++j) pp[j] = static_cast<int64_t>(perm[b.lo + j]);
    kb.push_back(kk);
    vb.push_back(vv);
    mb.push_back(mm);
    pb.push_back(pp);
  }
  for (size_t x = 0; x < blocks.size(); ++x) {
    Dev<float> k(kb[x]), v(vb[x]);
    Dev<uint8_t> km(mb[x]);
    Dev<int64_t> kp(pb[x]);
    ASSERT_EQ(ac::fwd_block(on, sh, q.p, N, dqpos.p, k.p, v.p, blocks[x].hi - blocks[x].lo, kp.p,
                            c.mask ? km.p : nullptr, o.p, m.p, l.p),
              TSR_SUCCESS)
        << msg();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ASSERT_EQ(ac::fwd_finish(on, sh, N, o.p, m.p, l.p, lse.p), TSR_SUCCESS) << msg();
  const std::vector<float> go = o.get(), gl = lse.get();
  for (size_t r = 0; r < BH; ++r)
    for (size_t i = 0; i < N; ++i) {
      const double want = ref.lse[r * N + perm[i]];
      const float got = gl[r * N + i];
      if (std::isinf(want)) {
        ASSERT_TRUE(std::isinf(got) && got < 0) << "LSE at row " << r << ", token " << i;
      } else {
        ASSERT_NEAR(got, want, 1e-4) << "LSE at row " << r << ", token " << i;
      }
      for (size_t e = 0; e < d; ++e)
        ASSERT_NEAR(go[(r * N + i) * d + e], ref.o[(r * N + perm[i]) * d + e], 2e-5)
            << "O at row " << r << ", token " << i << ", " << e;
    }
  // Backward from the forward's O and LSE, as the ring does.
  ASSERT_EQ(ac::bwd_delta(on, sh, N, o.p, dout.p, delta.p), TSR_SUCCESS) << msg();
  std::vector<float> gdk(kl.size(), 0.0f), gdv(kl.size(), 0.0f);
  for (size_t x = 0; x < blocks.size(); ++x) {
    const size_t len = blocks[x].hi - blocks[x].lo;
    Dev<float> k(kb[x]), v(vb[x]), dk(std::vector<float>(kb[x].size(), 0.0f)), dv(std::vector<float>(kb[x].size(), 0.0f));
    Dev<uint8_t> km(mb[x]);
    Dev<int64_t> kp(pb[x]);
    ASSERT_EQ(ac::bwd_block(on, sh, q.p, N, dqpos.p, k.p, v.p, len, kp.p, c.mask ? km.p : nullptr, dout.p, lse.p,
                            delta.p, dq.p, dk.p, dv.p),
              TSR_SUCCESS)
        << msg();
    const std::vector<float> hk = dk.get(), hv = dv.get();
    for (size_t bg = 0; bg < BG; ++bg)
      for (size_t j = 0; j < len; ++j)
        for (size_t e = 0; e < d; ++e) {
          gdk[(bg * N + blocks[x].lo + j) * d + e] = hk[(bg * len + j) * d + e];
          gdv[(bg * N + blocks[x].lo + j) * d + e] = hv[(bg * len + j) * d + e];
        }
  }
  // got (local order, rows of N tokens) against want (natural order).
  auto check = [&](const std::vector<float>& got, const std::vector<double>& want, size_t rows, const char* what) {
    double mx = 0;
    for (double w : want) mx = std::max(mx, std::fabs(w));
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < N; ++i)
        for (size_t e = 0; e < d; ++e)
          ASSERT_NEAR(got[(r * N + i) * d + e], want[(r * N + perm[i]) * d + e], 1e-4 * std::max(mx, 1.0))
              << what << " at row " << r << ", token " << i << ", " << e;
  };
  check(dq.get(), ref.dq, BH, "dQ");
  check(gdk, ref.dk, BG, "dK");
  check(gdv, ref.dv, BG, "dV");
}

TEST(CudaAttention, ForwardAndBackwardMatchTheFloat64Reference) {
  run_attn({1, 2, 2, 70, 64, false, false, 0, false});
  run_attn({1, 2, 2, 70, 64, true, false, 33, false});
  run_attn({2, 4, 2, 100, 40, true, true, 37, false});  // GQA, key mask, an empty batch row, d not a multiple of 32
  run_attn({1, 2, 1, 45, 160, false, true, 20, false});
  run_attn({1, 1, 1, 40, 256, true, false, 13, false});  // d = 256: shared memory above 48 KiB
  run_attn({1, 2, 2, 83, 32, true, false, 41, true});    // zigzag order: causal by position, not by index
  run_attn({2, 2, 1, 64, 16, true, true, 0, true});
}

TEST(CudaAttention, RefusesBadShapesAndHostPointers) {
  namespace ac = tsr::attn::cuda;
  const ac::On on{0, nullptr};
  Dev<float> q(64 * 4), k(64 * 4), v(64 * 4), o(64 * 4), m(4), l(4);
  ac::Shape s{1, 1, 1, 64, 0.125f, false};
  std::vector<float> host(64 * 4);
  EXPECT_EQ(ac::fwd_block(on, s, host.data(), 4, nullptr, k.p, v.p, 4, nullptr, nullptr, o.p, m.p, l.p),
            TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("argument 'q'"), std::string::npos) << msg();
  s.causal = true;  // positions needed
  EXPECT_EQ(ac::fwd_block(on, s, q.p, 4, nullptr, k.p, v.p, 4, nullptr, nullptr, o.p, m.p, l.p), TSR_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("'qpos'"), std::string::npos) << msg();
  ac::Shape big{1, 1, 1, 300, 1, false};
  EXPECT_EQ(ac::fwd_block(on, big, q.p, 4, nullptr, k.p, v.p, 4, nullptr, nullptr, o.p, m.p, l.p),
            TSR_ERR_UNSUPPORTED);
  ac::Shape gqa{1, 3, 2, 64, 1, false};
  EXPECT_EQ(ac::fwd_init(on, gqa, 4, o.p, m.p, l.p), TSR_ERR_SHAPE);
}

}  // namespace

int main(int argc, char** argv) {
  if (!tsr::device::available()) {
    std::printf("SKIP: test_cuda_kernels needs a CUDA device; %s\n",
                TSR_HAVE_CUDA ? "this process sees none (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them)"
                              : "this build has no CUDA (TSR_WITH_CUDA=OFF)");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

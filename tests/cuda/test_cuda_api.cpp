// The public API on CUDA device buffers (issue 17). tsr_gemm runs on device
// buffers (test_cuda_gemm.cpp) and tsr_attn_forward/backward on device
// tensors (test_cuda_attention.cpp); here: host and device operands mixed
// are refused. tsr_optimizer_step on
// device buffers runs the CUDA kernels, checked against the same
// optimizer on host buffers, step by step: parameters, trust ratios, state,
// passes and the step's kernel bytes (TSR_OPTQ_STEP_BYTES: the same formula
// on both paths). Replicated, data parallel and sharded, LAMB and LARS
// presets (paper, optax eps_root, SimCLR "popular" momentum), float32 and
// bfloat16 parameters. Bad buffers refused with a message.
//
// Tolerances: the device kernels compute every element as the CPU kernels
// do (bitwise, see optimizers/cuda/opt_cuda.hpp) but add the float64 sums of
// squares in another order, so the trust ratios differ in their last bits
// (1e-9 relative here) and the float32 parameters by a few ulp per step:
// 1e-5 relative to max |w| after three steps; bfloat16 parameters one
// bfloat16 ulp (2^-7 relative: 7 stored significand bits).
//
// Exits 77 on every rank (CTest: skipped) when some rank sees no CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "attn_reference.hpp"
#include "device.hpp"
#include "tessera/attention.h"
#include "tessera/device.h"
#include "tessera/gemm.h"
#include "tessera/optimizer.h"
#include "tessera/tessera.h"

namespace {

using tsr_test::uniform;

int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

struct BoundCtx {
  tsr_context ctx = nullptr;
  BoundCtx() {
    EXPECT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
    int n = 0;
    EXPECT_EQ(tsr_device_count(&n), TSR_SUCCESS);
    EXPECT_EQ(tsr_context_set_device(ctx, rank_of() % std::max(n, 1), nullptr), TSR_SUCCESS) << tsr_last_error(ctx);
  }
  ~BoundCtx() { EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS) << tsr_last_error(ctx); }
};

template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(count, 1) * sizeof(T)), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& h) {
    ASSERT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

uint16_t bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double query(tsr_optimizer o, tsr_opt_query q, int g = 0) {
  double v = 0;
  EXPECT_EQ(tsr_optimizer_query(o, q, g, &v), TSR_SUCCESS) << tsr_last_error(nullptr);
  return v;
}

struct Case {
  tsr_opt_preset preset;
  tsr_opt_dist dist;
  tsr_dtype type;
  double max_grad_norm;
};

void run_case(tsr_context ctx, const Case& c) {
  const std::vector<size_t> sizes{40000, 17, 30001};
  size_t n = 0;
  for (size_t s : sizes) n += s;
  const bool b16 = c.type == TSR_BFLOAT16;
  const size_t es = b16 ? 2 : 4;
  tsr_optimizer ho = nullptr, dopt = nullptr;
  ASSERT_EQ(tsr_optimizer_create(ctx, c.preset, c.dist, c.type, sizes.size(), sizes.data(), &ho), TSR_SUCCESS)
      << tsr_last_error(ctx);
  ASSERT_EQ(tsr_optimizer_create(ctx, c.preset, c.dist, c.type, sizes.size(), sizes.data(), &dopt), TSR_SUCCESS)
      << tsr_last_error(ctx);
  for (tsr_optimizer o : {ho, dopt}) {
    ASSERT_EQ(tsr_optimizer_set_param(o, TSR_OPT_LR, 0.01), TSR_SUCCESS) << tsr_last_error(ctx);
    if (c.max_grad_norm > 0) {
      ASSERT_EQ(tsr_optimizer_set_param(o, TSR_OPT_MAX_GRAD_NORM, c.max_grad_norm), TSR_SUCCESS) << tsr_last_error(ctx);
    }
  }
  std::vector<unsigned char> hp(n * es), hg(n * es);
  for (size_t i = 0; i < n; ++i) {
    const float w = static_cast<float>(uniform(31, i));
    if (b16) {
      const uint16_t x = bf16(w);
      std::memcpy(&hp[i * 2], &x, 2);
    } else {
      std::memcpy(&hp[i * 4], &w, 4);
    }
  }
  Dev<unsigned char> dp(n * es), dg(n * es);
  dp.put(hp);
  const int r = rank_of();
  for (int t = 1; t <= 3; ++t) {
    for (size_t i = 0; i < n; ++i) {
      const float g = static_cast<float>(uniform(100 + t * 10 + r, i)) * (t == 2 ? 50.0f : 0.5f);
      if (b16) {
        const uint16_t x = bf16(g);
        std::memcpy(&hg[i * 2], &x, 2);
      } else {
        std::memcpy(&hg[i * 4], &g, 4);
      }
    }
    dg.put(hg);  // data parallel reduces in place: both paths start from the same gradients
    ASSERT_EQ(tsr_optimizer_step(ho, hp.data(), hg.data(), n), TSR_SUCCESS) << tsr_last_error(ctx);
    ASSERT_EQ(tsr_optimizer_step(dopt, dp.p, dg.p, n), TSR_SUCCESS) << tsr_last_error(ctx);
    EXPECT_EQ(query(ho, TSR_OPTQ_STEP_BYTES), query(dopt, TSR_OPTQ_STEP_BYTES)) << "step " << t;
    EXPECT_EQ(query(ho, TSR_OPTQ_PASSES), query(dopt, TSR_OPTQ_PASSES)) << "step " << t;
    EXPECT_EQ(query(ho, TSR_OPTQ_NORM_ALLREDUCES), query(dopt, TSR_OPTQ_NORM_ALLREDUCES)) << "step " << t;
    EXPECT_NEAR(query(ho, TSR_OPTQ_CLIP_FACTOR), query(dopt, TSR_OPTQ_CLIP_FACTOR), 1e-9) << "step " << t;
    for (int g = 0; g < static_cast<int>(sizes.size()); ++g) {
      const double a = query(ho, TSR_OPTQ_TRUST_RATIO, g), b = query(dopt, TSR_OPTQ_TRUST_RATIO, g);
      EXPECT_NEAR(a, b, 1e-9 * std::max(1.0, std::fabs(a))) << "trust ratio, group " << g << ", step " << t;
    }
    const std::vector<unsigned char> got = dp.get();
    double mx = 0, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      float a, b;
      if (b16) {
        uint16_t x, y;
        std::memcpy(&x, &hp[i * 2], 2);
        std::memcpy(&y, &got[i * 2], 2);
        a = f32(x);
        b = f32(y);
      } else {
        std::memcpy(&a, &hp[i * 4], 4);
        std::memcpy(&b, &got[i * 4], 4);
      }
      mx = std::max(mx, static_cast<double>(std::fabs(a)));
      const double e =
          std::fabs(static_cast<double>(a) - b) / (b16 ? std::max({std::fabs(a), std::fabs(b), 1e-30f}) : 1.0f);
      if (e > worst) worst = e, at = i;
    }
    const double tol = b16 ? std::ldexp(1.0, -7) : 1e-5 * mx;
    EXPECT_LE(worst, tol) << "parameters, step " << t << ", worst at " << at << " (preset "
                          << tsr_optimizer_preset_name(c.preset) << ", dist " << c.dist << ", type " << c.type << ")";
  }
  // The state read back from the device.
  double k = query(ho, TSR_OPTQ_SHARD_SIZE);
  std::vector<float> ms(static_cast<size_t>(k)), md(ms.size());
  ASSERT_EQ(tsr_optimizer_get_state(ho, TSR_OPT_STATE_M, ms.data(), ms.size()), TSR_SUCCESS) << tsr_last_error(ctx);
  ASSERT_EQ(tsr_optimizer_get_state(dopt, TSR_OPT_STATE_M, md.data(), md.size()), TSR_SUCCESS) << tsr_last_error(ctx);
  double mm = 0;
  for (float x : ms) mm = std::max(mm, static_cast<double>(std::fabs(x)));
  for (size_t i = 0; i < ms.size(); ++i) ASSERT_NEAR(ms[i], md[i], 1e-5 * mm + 1e-30) << "state m at " << i;
  EXPECT_EQ(tsr_optimizer_destroy(&ho), TSR_SUCCESS);
  EXPECT_EQ(tsr_optimizer_destroy(&dopt), TSR_SUCCESS);
}

TEST(CudaOptimizer, DeviceStepsMatchHostSteps) {
  BoundCtx bc;
  for (tsr_opt_dist dist : {TSR_OPT_REPLICATED, TSR_OPT_DATA_PARALLEL, TSR_OPT_SHARDED})
    for (tsr_dtype type : {TSR_FLOAT32, TSR_BFLOAT16}) {
      run_case(bc.ctx, {TSR_PRESET_LAMB_PAPER, dist, type, 0.0});
      run_case(bc.ctx, {TSR_PRESET_LARS_PAPER, dist, type, 0.0});
    }
  run_case(bc.ctx, {TSR_PRESET_LAMB_OPTAX, TSR_OPT_REPLICATED, TSR_FLOAT32, 1.0});  // clipping: pass A', then G first
  run_case(bc.ctx, {TSR_PRESET_LARS_SIMCLR_POPULAR, TSR_OPT_SHARDED, TSR_FLOAT32, 1.0});
}

TEST(CudaOptimizer, RefusesMixedAndUnboundBuffers) {
  BoundCtx bc;
  const size_t sizes[1] = {1000};
  tsr_optimizer o = nullptr;
  ASSERT_EQ(tsr_optimizer_create(bc.ctx, TSR_PRESET_LAMB_PAPER, TSR_OPT_REPLICATED, TSR_FLOAT32, 1, sizes, &o),
            TSR_SUCCESS);
  Dev<float> dp(1000);
  std::vector<float> hg(1000, 0.1f);
  EXPECT_EQ(tsr_optimizer_step(o, dp.p, hg.data(), 1000), TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::string(tsr_last_error(bc.ctx)).find("'params' is device memory but 'grads' is host memory"),
            std::string::npos)
      << tsr_last_error(bc.ctx);
  EXPECT_EQ(query(o, TSR_OPTQ_STEP), 0.0);
  EXPECT_EQ(tsr_optimizer_destroy(&o), TSR_SUCCESS);

  tsr_context plain = nullptr;  // not bound to a device
  ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &plain), TSR_SUCCESS);
  ASSERT_EQ(tsr_optimizer_create(plain, TSR_PRESET_LAMB_PAPER, TSR_OPT_REPLICATED, TSR_FLOAT32, 1, sizes, &o),
            TSR_SUCCESS);
  Dev<float> dg(1000);
  EXPECT_EQ(tsr_optimizer_step(o, dp.p, dg.p, 1000), TSR_ERR_STATE);
  EXPECT_NE(std::string(tsr_last_error(plain)).find("'params'"), std::string::npos) << tsr_last_error(plain);
  EXPECT_EQ(tsr_optimizer_destroy(&o), TSR_SUCCESS);
  EXPECT_EQ(tsr_context_destroy(&plain), TSR_SUCCESS);
}

TEST(CudaOptimizer, HostStepAfterDeviceStepsContinuesTheState) {
  BoundCtx bc;
  const size_t sizes[2] = {5000, 3000};
  const size_t n = 8000;
  tsr_optimizer ho = nullptr, mo = nullptr;
  ASSERT_EQ(tsr_optimizer_create(bc.ctx, TSR_PRESET_LAMB_PAPER, TSR_OPT_REPLICATED, TSR_FLOAT32, 2, sizes, &ho),
            TSR_SUCCESS);
  ASSERT_EQ(tsr_optimizer_create(bc.ctx, TSR_PRESET_LAMB_PAPER, TSR_OPT_REPLICATED, TSR_FLOAT32, 2, sizes, &mo),
            TSR_SUCCESS);
  std::vector<float> hw(n), mw(n), g(n);
  for (size_t i = 0; i < n; ++i) hw[i] = mw[i] = static_cast<float>(uniform(41, i));
  Dev<float> dw(n), dg(n);
  dw.put(mw);
  for (int t = 1; t <= 3; ++t) {
    for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(uniform(50 + t, i));
    ASSERT_EQ(tsr_optimizer_step(ho, hw.data(), g.data(), n), TSR_SUCCESS) << tsr_last_error(bc.ctx);
    if (t < 3) {
      dg.put(g);
      ASSERT_EQ(tsr_optimizer_step(mo, dw.p, dg.p, n), TSR_SUCCESS) << tsr_last_error(bc.ctx);
      if (t == 2) mw = dw.get();
    } else {
      ASSERT_EQ(tsr_optimizer_step(mo, mw.data(), g.data(), n), TSR_SUCCESS) << tsr_last_error(bc.ctx);
    }
  }
  double mx = 0;
  for (float x : hw) mx = std::max(mx, static_cast<double>(std::fabs(x)));
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(hw[i], mw[i], 1e-5 * mx) << "at " << i;
  EXPECT_EQ(tsr_optimizer_destroy(&ho), TSR_SUCCESS);
  EXPECT_EQ(tsr_optimizer_destroy(&mo), TSR_SUCCESS);
}

TEST(CudaApi, GemmAndAttentionRefuseDeviceBuffers) {
  BoundCtx bc;
  int dims[3] = {0, 1, 1};
  MPI_Comm_size(MPI_COMM_WORLD, &dims[0]);
  tsr_grid grid = nullptr;
  ASSERT_EQ(tsr_grid_create(bc.ctx, TSR_GRID_1D, dims, &grid), TSR_SUCCESS) << tsr_last_error(bc.ctx);
  // tsr_gemm runs on device buffers (tests/cuda/test_cuda_gemm.cpp); mixed
  // host and device operands are refused.
  const tsr_layout rep = TSR_LAYOUT_REPLICATED;
  tsr_matrix A = nullptr;
  ASSERT_EQ(tsr_matrix_create(grid, 8, 8, TSR_FLOAT32, &rep, 8, &A), TSR_SUCCESS) << tsr_last_error(bc.ctx);
  Dev<float> da(64);
  std::vector<float> hb(64, 1.0f), hc(64, 0.0f);
  EXPECT_EQ(tsr_gemm(TSR_GEMM_AUTO, TSR_NOTRANS, TSR_NOTRANS, 1.0, A, da.p, A, hb.data(), 0.0, A, hc.data()),
            TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::string(tsr_last_error(bc.ctx)).find("one memory space"), std::string::npos)
      << tsr_last_error(bc.ctx);
  EXPECT_EQ(tsr_matrix_destroy(&A), TSR_SUCCESS);

  tsr_ring ring = nullptr;
  ASSERT_EQ(tsr_ring_create(grid, TSR_AXIS_COL, &ring), TSR_SUCCESS) << tsr_last_error(bc.ctx);
  int p = 1, r = 0;
  ASSERT_EQ(tsr_ring_info(ring, &r, &p), TSR_SUCCESS);
  tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
  cfg.seq_len = 16 * static_cast<size_t>(p);
  const size_t n = 16, d = 8;
  Dev<float> dq(n * d);
  std::vector<float> k(n * d, 0.5f), v(n * d, 0.5f), o(n * d), lse(n);
  tsr_attn_tensor tq{dq.p, 1, 1, n, d}, tk{k.data(), 1, 1, n, d}, tv{v.data(), 1, 1, n, d}, to{o.data(), 1, 1, n, d},
      tl{lse.data(), 1, 1, n, 1};
  // Ring attention runs on device tensors (test_cuda_attention) but refuses
  // host and device tensors mixed in one call.
  EXPECT_EQ(tsr_attn_forward(ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl), TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::string(tsr_last_error(bc.ctx)).find("k.data is host memory but q.data is CUDA device memory"),
            std::string::npos)
      << tsr_last_error(bc.ctx);
  EXPECT_EQ(tsr_ring_destroy(&ring), TSR_SUCCESS);
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
    if (rank_of() == 0) std::printf("SKIP: test_cuda_api needs a CUDA device on every rank; some rank sees none\n");
    MPI_Finalize();
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int local = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}

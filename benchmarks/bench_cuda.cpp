// bench_cuda: the CUDA kernels (issue 17) against their yardsticks, measured
// side by side in one run, nccl-tests-style table (one line per case):
//
//   bench_cuda [--reps 9] [--gemm 4096,8192] [--dgemm 4096,8192] [--lamb 1e7,1e8] [--attn 4096]
//              [--lamb-variants all|v4u2b4096,...] [--ring 4096]
//
//  gemm  tessera's local product (tsr::cuda::gemm: argument and pointer
//        checks, then cublasGemmEx_64, CUBLAS_COMPUTE_32F) against plain
//        cublasGemmEx on its own handle, same shapes, types and stream, for
//        float32, bfloat16 and float16 inputs (C float32; C in the input type
//        for the 16-bit types too). ratio = cuBLAS time / tessera time
//        (target >= 0.80).
//  dgemm the distributed GEMM's public path at 1 rank: tsr_gemm_ex on
//        device buffers (context bound to device 0 and the benchmark's
//        stream, 1x1x1 grid, TSR_GEMM_AUTO; checks, agreement, workspace,
//        cuBLAS product) against plain cublasGemmEx, float32 and bfloat16
//        inputs, C float32. ratio = cuBLAS time / tsr_gemm time (target
//        >= 0.80). Initialises MPI (singleton) if nobody has.
//  lamb  one LAMB step of the fused kernels (pass A with its sums to the
//        host, the per-group sums and trust ratio on the host, pass B) over n
//        float32 parameters in work items of 16384 elements, against
//        cudaMemcpy device-to-device of a buffer of 8 bytes per parameter
//        (the footprint of the step's w, g, m, v) in the same run. GB/s =
//        bytes read + written / time; the step moves 44 bytes per parameter
//        (pass A reads g, w, m, v; pass B reads them and writes w, m, v).
//        ratio = step GB/s / copy GB/s (target >= 0.80). The step runs the
//        library's default kernel configuration (opt_cuda.hpp KernelConfig,
//        named in the header line).
//  lamb-variants  the same step for each kernel configuration vVuUbB
//        (vec V elements per access, U vectors in flight per thread, B
//        elements per thread block, 0: one block per 16384-element task)
//        against the same copy, one line per configuration; every round
//        times the copy and then every configuration, the configurations'
//        order rotated from round to round. "all" = the list in
//        kAllVariants. Float32 gradients (44 bytes per parameter, as
//        above), then bfloat16 gradients with the bfloat16 parameter copy
//        written (42: pass A reads g 2 + w, m, v 12; pass B reads 14,
//        writes w, m, v 12 and the copy 2). Per-element results are the
//        same in every configuration (tests/cuda), so only time differs.
//  attn  the attention block, forward (fwd_block + fwd_finish) and
//        backward (bwd_delta + bwd_block), B=1, H=16, d=128, N queries and
//        keys, causal off and on: TFLOP/s from 4 B H N^2 d (forward) and 10 B
//        H N^2 d (backward) (halved for causal).
//  ring  tessera's ring attention on device tensors (tsr_attn_forward and
//        tsr_attn_backward, TSR_ATTN_RING, one rank: a ring over
//        MPI_COMM_SELF, context bound to device 0 and the benchmark's
//        stream; argument checks, agreement, workspace from cudaMallocAsync,
//        the same CUDA block kernels) against the bare block kernels of
//        `attn` on the same shapes (B=1, H=16, d=128, N tokens, causal off
//        and on), alternated within every round. ratio = block time / ring
//        time (1.0: the ring adds nothing at one rank).
// Each figure is the median of --reps timed rounds (CUDA events) after one
// warm-up; the variants of a case alternate within every round; min and
// max are printed as the spread. Exit 2 for a bad command line; exit 0 with
// a note when no CUDA device is visible.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <mpi.h>

#include "attn_cuda.hpp"
#include "tessera/attention.h"
#include "tessera/device.h"
#include "tessera/tessera.h"
#include "core.hpp"
#include "device.hpp"
#include "gemm_cuda.hpp"
#include "kernels.hpp"
#include "opt_cuda.hpp"
#include "tessera/tessera.h"

namespace {

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "bench_cuda: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
#define TK(x)                                                                                       \
  do {                                                                                              \
    tsr_status s_ = (x);                                                                            \
    if (s_ != TSR_SUCCESS) {                                                                        \
      std::fprintf(stderr, "bench_cuda: %s: %s\n", #x, tsr::pending_message().c_str());            \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)
#define BK(x)                                                                              \
  do {                                                                                     \
    cublasStatus_t s_ = (x);                                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                     \
      std::fprintf(stderr, "bench_cuda: %s: %s\n", #x, cublasGetStatusString(s_));         \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

struct Stat {
  double med, lo, hi;
};
Stat stat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

std::vector<double> parse_list(const char* s, bool* ok) {
  std::vector<double> v;
  std::string str(s);
  size_t p = 0;
  while (p <= str.size()) {
    const size_t q = str.find(',', p);
    const std::string tok = str.substr(p, q == std::string::npos ? std::string::npos : q - p);
    char* end = nullptr;
    const double x = std::strtod(tok.c_str(), &end);
    if (tok.empty() || *end != '\0' || !(x >= 0)) *ok = false;
    v.push_back(x);
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return v;
}

// Milliseconds of f() on the stream (CUDA events).
template <class F>
double time_ms(cudaStream_t s, F f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  f();
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms;
}

void fill(void* p, size_t bytes, cudaStream_t s) {
  // Small values in every type: 0x3c00 is 1.0 in float16 and ~0.0078 in
  // bfloat16; as float32 pairs it is ~0.0078 too.
  CK(cudaMemsetAsync(p, 0x3c, bytes, s));
}

void header(const char* what) {
  std::printf("#\n# %s\n", what);
}

// ------------------------------------------------------------------ GEMM
void bench_gemm(const std::vector<double>& sizes, int reps, cudaStream_t s) {
  using tsr::cuda::Elem;
  header("gemm: C = A B (column-major, no transpose), float32 accumulation");
  std::printf("# %8s %6s %6s %12s %12s %12s %12s %7s %17s\n", "n", "in", "out", "tsr_ms", "cublas_ms", "tsr_TFLOPs",
              "cublas_TFLOPs", "ratio", "ratio_min..max");
  tsr::cuda::Blas blas;
  TK(blas.init(0, s));
  cublasHandle_t plain;
  BK(cublasCreate(&plain));
  BK(cublasSetStream(plain, s));
  for (double nd : sizes) {
    const int64_t n = static_cast<int64_t>(nd);
    const size_t elems = static_cast<size_t>(n * n);
    void *a, *b, *c;
    CK(cudaMalloc(&a, elems * 4));
    CK(cudaMalloc(&b, elems * 4));
    CK(cudaMalloc(&c, elems * 4));
    fill(a, elems * 4, s);
    fill(b, elems * 4, s);
    struct T {
      Elem in, out;
    };
    for (T t : {T{Elem::f32, Elem::f32}, T{Elem::bf16, Elem::f32}, T{Elem::bf16, Elem::bf16}, T{Elem::f16, Elem::f32},
                T{Elem::f16, Elem::f16}}) {
      const cudaDataType_t ti = t.in == Elem::f32 ? CUDA_R_32F : t.in == Elem::bf16 ? CUDA_R_16BF : CUDA_R_16F;
      const cudaDataType_t to = t.out == Elem::f32 ? CUDA_R_32F : ti;
      const float one = 1, zero = 0;
      auto ours = [&] { TK(tsr::cuda::gemm(blas, false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n, t.in, t.out)); };
      auto theirs = [&] {
        BK(cublasGemmEx(plain, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(n),
                        static_cast<int>(n), &one, a, ti, static_cast<int>(n), b, ti, static_cast<int>(n), &zero, c,
                        to, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      };
      ours();
      theirs();
      std::vector<double> to_ms, tc_ms, ratio;
      for (int r = 0; r < reps; ++r) {
        double x, y;
        if (r % 2 == 0) {
          x = time_ms(s, ours);
          y = time_ms(s, theirs);
        } else {
          y = time_ms(s, theirs);
          x = time_ms(s, ours);
        }
        to_ms.push_back(x);
        tc_ms.push_back(y);
        ratio.push_back(y / x);
      }
      const Stat so = stat(to_ms), sc = stat(tc_ms), sr = stat(ratio);
      const double fl = 2.0 * nd * nd * nd;
      std::printf("  %8lld %6s %6s %12.4f %12.4f %12.2f %12.2f %7.3f %8.3f..%-8.3f\n", static_cast<long long>(n),
                  tsr::cuda::elem_name(t.in), tsr::cuda::elem_name(t.out), so.med, sc.med, fl / so.med * 1e-9,
                  fl / sc.med * 1e-9, sr.med, sr.lo, sr.hi);
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
  }
  BK(cublasDestroy(plain));
}

// ------------------------------------------------------- distributed GEMM
// tsr_gemm_ex on device buffers at 1 rank (a context bound to device 0 and
// the stream s, a 1x1x1 grid, TSR_GEMM_AUTO: the whole public path with its
// argument checks, agreement, workspace and cuBLAS product) against plain
// cublasGemmEx on the same sizes, types and stream.
void bench_dgemm(const std::vector<double>& sizes, int reps, cudaStream_t s) {
  header("dgemm: tsr_gemm_ex on device buffers, 1 rank (the public path) vs plain cublasGemmEx, C float32");
  std::printf("# %8s %6s %12s %12s %12s %12s %7s %17s\n", "n", "in", "tsr_gemm_ms", "cublas_ms", "tsr_TFLOPs",
              "cublas_TFLOPs", "ratio", "ratio_min..max");
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      std::fprintf(stderr, "bench_cuda: MPI_Init failed; no dgemm figures\n");
      return;
    }
  }
  tsr_context ctx = nullptr;
#define DK(x)                                                                                \
  do {                                                                                       \
    tsr_status s_ = (x);                                                                     \
    if (s_ != TSR_SUCCESS) {                                                                 \
      std::fprintf(stderr, "bench_cuda: %s: %s\n", #x, tsr_last_error(ctx));                 \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)
  DK(tsr_context_create(MPI_COMM_SELF, &ctx));
  DK(tsr_context_set_device(ctx, 0, s));
  tsr_grid grid = nullptr;
  int dims[3] = {1, 1, 1};
  DK(tsr_grid_create(ctx, TSR_GRID_3D, dims, &grid));
  cublasHandle_t plain;
  BK(cublasCreate(&plain));
  BK(cublasSetStream(plain, s));
  const tsr_layout whole = TSR_LAYOUT_REPLICATED;
  for (double nd : sizes) {
    const int64_t n = static_cast<int64_t>(nd);
    const size_t elems = static_cast<size_t>(n * n);
    void *a, *b, *c;
    CK(cudaMalloc(&a, elems * 4));
    CK(cudaMalloc(&b, elems * 4));
    CK(cudaMalloc(&c, elems * 4));
    fill(a, elems * 4, s);
    fill(b, elems * 4, s);
    for (tsr_dtype in : {TSR_FLOAT32, TSR_BFLOAT16}) {
      tsr_matrix A = nullptr, B = nullptr, C = nullptr;
      DK(tsr_matrix_create(grid, n, n, in, &whole, n, &A));
      DK(tsr_matrix_create(grid, n, n, in, &whole, n, &B));
      DK(tsr_matrix_create(grid, n, n, TSR_FLOAT32, &whole, n, &C));
      const cudaDataType_t ti = in == TSR_FLOAT32 ? CUDA_R_32F : CUDA_R_16BF;
      const float one = 1, zero = 0;
      auto ours = [&] { DK(tsr_gemm_ex(nullptr, TSR_NOTRANS, TSR_NOTRANS, 1.0, A, a, B, b, 0.0, C, c)); };
      auto theirs = [&] {
        BK(cublasGemmEx(plain, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(n),
                        static_cast<int>(n), &one, a, ti, static_cast<int>(n), b, ti, static_cast<int>(n), &zero, c,
                        CUDA_R_32F, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      };
      ours();
      theirs();
      std::vector<double> to_ms, tc_ms, ratio;
      for (int r = 0; r < reps; ++r) {
        double x, y;
        if (r % 2 == 0) {
          x = time_ms(s, ours);
          y = time_ms(s, theirs);
        } else {
          y = time_ms(s, theirs);
          x = time_ms(s, ours);
        }
        to_ms.push_back(x);
        tc_ms.push_back(y);
        ratio.push_back(y / x);
      }
      const Stat so = stat(to_ms), sc = stat(tc_ms), sr = stat(ratio);
      const double fl = 2.0 * nd * nd * nd;
      std::printf("  %8lld %6s %12.4f %12.4f %12.2f %12.2f %7.3f %8.3f..%-8.3f\n", static_cast<long long>(n),
                  in == TSR_FLOAT32 ? "f32" : "bf16", so.med, sc.med, fl / so.med * 1e-9, fl / sc.med * 1e-9, sr.med,
                  sr.lo, sr.hi);
      DK(tsr_matrix_destroy(&A));
      DK(tsr_matrix_destroy(&B));
      DK(tsr_matrix_destroy(&C));
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
  }
  BK(cublasDestroy(plain));
  DK(tsr_grid_destroy(&grid));
  DK(tsr_context_destroy(&ctx));
#undef DK
}

// ------------------------------------------------------------------ LAMB
void bench_lamb(const std::vector<double>& sizes, int reps, cudaStream_t s) {
  namespace oc = tsr::opt::cuda;
  const oc::KernelConfig dc;
  std::printf("#\n# lamb: one fused LAMB step (float32, kernel configuration v%du%db%u) vs cudaMemcpy "
              "device-to-device, same run\n",
              dc.vec, dc.unroll, dc.block_elems);
  std::printf("# %12s %10s %10s %12s %12s %7s %17s\n", "n", "step_ms", "copy_ms", "step_GB/s", "copy_GB/s", "ratio",
              "ratio_min..max");
  for (double nd : sizes) {
    const size_t n = static_cast<size_t>(nd);
    float *g, *w, *m, *v, *src, *dst;
    CK(cudaMalloc(reinterpret_cast<void**>(&g), n * 4));
    CK(cudaMalloc(reinterpret_cast<void**>(&w), n * 4));
    CK(cudaMalloc(reinterpret_cast<void**>(&m), n * 4));
    CK(cudaMalloc(reinterpret_cast<void**>(&v), n * 4));
    CK(cudaMalloc(reinterpret_cast<void**>(&src), n * 8));
    CK(cudaMalloc(reinterpret_cast<void**>(&dst), n * 8));
    CK(cudaMemsetAsync(g, 0, n * 4, s));
    CK(cudaMemsetAsync(w, 0, n * 4, s));
    CK(cudaMemsetAsync(m, 0, n * 4, s));
    CK(cudaMemsetAsync(v, 0, n * 4, s));
    CK(cudaMemsetAsync(src, 0, n * 8, s));
    std::vector<oc::Task> ta, tb;
    const size_t chunk = 16384;
    for (size_t b = 0; b < n; b += chunk) {
      const uint32_t len = static_cast<uint32_t>(std::min(chunk, n - b));
      ta.push_back(oc::Task{b, b, b, b, len, 0, oc::kLambNorms, 0});
      tb.push_back(oc::Task{b, b, b, b, len, 0, oc::kLambUpdate, 0});
    }
    tsr::opt::LambCoef c{0.5f, 0.0f, 0.9f, 0.1f, 0.999f, 0.001f, 1.0f, 1.0f, 0.0f, 1e-6f, 0.01f};
    std::vector<tsr::opt::Sums> sums(ta.size());
    oc::Runner r;
    TK(r.init(0, s));
    auto step = [&] {
      TK(r.pass_a(ta, g, false, w, m, v, &c, nullptr, 1, sums.data()));
      double su = 0, sw = 0;
      for (const tsr::opt::Sums& x : sums) sw += x.b, su += x.c;
      const float k = static_cast<float>(1e-3 * (sw > 0 && su > 0 ? std::sqrt(sw / su) : 1.0));
      TK(r.pass_b(tb, g, false, w, m, v, nullptr, &c, &k, nullptr, 1));
    };
    auto copy = [&] { CK(cudaMemcpyAsync(dst, src, n * 8, cudaMemcpyDeviceToDevice, s)); };
    step();
    copy();
    std::vector<double> ts, tc, ratio;
    for (int i = 0; i < reps; ++i) {
      double x, y;
      if (i % 2 == 0) {
        x = time_ms(s, step);
        y = time_ms(s, copy);
      } else {
        y = time_ms(s, copy);
        x = time_ms(s, step);
      }
      ts.push_back(x);
      tc.push_back(y);
      ratio.push_back((44.0 * nd / x) / (16.0 * nd / y));
    }
    const Stat a = stat(ts), b = stat(tc), q = stat(ratio);
    std::printf("  %12zu %10.4f %10.4f %12.1f %12.1f %7.3f %8.3f..%-8.3f\n", n, a.med, b.med, 44.0 * nd / a.med * 1e-6,
                16.0 * nd / b.med * 1e-6, q.med, q.lo, q.hi);
    for (float* p : {g, w, m, v, src, dst}) CK(cudaFree(p));
  }
}

// -------------------------------------------------- LAMB kernel variants
const char* const kAllVariants =
    "v1u1b0,v4u1b0,v4u2b0,v1u4b4096,v4u1b4096,v4u2b2048,v4u2b4096,v4u2b8192,v4u4b4096,v8u1b4096,v8u2b4096";

// "v4u2b4096,..." -> configurations; false on a bad or unbuilt one.
bool parse_variants(const std::string& list, std::vector<tsr::opt::cuda::KernelConfig>* out) {
  const std::string l = list == "all" ? kAllVariants : list;
  size_t p = 0;
  while (p <= l.size()) {
    const size_t q = l.find(',', p);
    const std::string tok = l.substr(p, q == std::string::npos ? std::string::npos : q - p);
    int vv = 0, uu = 0;
    unsigned bb = 0;
    char tail = 0;
    if (std::sscanf(tok.c_str(), "v%du%db%u%c", &vv, &uu, &bb, &tail) != 3) return false;
    tsr::opt::cuda::KernelConfig c;
    c.vec = vv;
    c.unroll = uu;
    c.block_elems = bb;
    if (!c.valid()) return false;
    out->push_back(c);
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return !out->empty();
}

void bench_lamb_variants(const std::vector<double>& sizes, const std::vector<tsr::opt::cuda::KernelConfig>& cfgs,
                         int reps, cudaStream_t s) {
  namespace oc = tsr::opt::cuda;
  header("lamb-variants: the fused LAMB step per kernel configuration vs cudaMemcpy device-to-device, same run, "
         "rotated order; grads f32: 44 B/param; grads bf16 (+ bf16 parameter copy): 42 B/param");
  std::printf("# %12s %5s %12s %10s %10s %12s %12s %7s %17s\n", "n", "grads", "config", "step_ms", "copy_ms",
              "step_GB/s", "copy_GB/s", "ratio", "ratio_min..max");
  const size_t nv = cfgs.size();
  for (double nd : sizes) {
    const size_t n = static_cast<size_t>(nd);
    float *g, *w, *m, *v, *src, *dst;
    uint16_t *gb, *p;
    CK(cudaMalloc(reinterpret_cast<void**>(&g), n * 4));
    CK(cudaMalloc(reinterpret_cast<void**>(&w), n * 4));
    CK(cudaMalloc(reinterpret_cast<void**>(&m), n * 4));
    CK(cudaMalloc(reinterpret_cast<void**>(&v), n * 4));
    CK(cudaMalloc(reinterpret_cast<void**>(&gb), n * 2));
    CK(cudaMalloc(reinterpret_cast<void**>(&p), n * 2));
    CK(cudaMalloc(reinterpret_cast<void**>(&src), n * 8));
    CK(cudaMalloc(reinterpret_cast<void**>(&dst), n * 8));
    for (float* q : {g, w, m, v}) CK(cudaMemsetAsync(q, 0, n * 4, s));
    CK(cudaMemsetAsync(gb, 0, n * 2, s));
    CK(cudaMemsetAsync(src, 0, n * 8, s));
    std::vector<oc::Task> ta, tb;
    const size_t chunk = 16384;
    for (size_t b = 0; b < n; b += chunk) {
      const uint32_t len = static_cast<uint32_t>(std::min(chunk, n - b));
      ta.push_back(oc::Task{b, b, b, b, len, 0, oc::kLambNorms, 0});
      tb.push_back(oc::Task{b, b, b, b, len, 0, oc::kLambUpdate, 0});
    }
    tsr::opt::LambCoef c{0.5f, 0.0f, 0.9f, 0.1f, 0.999f, 0.001f, 1.0f, 1.0f, 0.0f, 1e-6f, 0.01f};
    std::vector<tsr::opt::Sums> sums(ta.size());
    std::vector<oc::Runner> runs(nv);
    for (size_t i = 0; i < nv; ++i) {
      TK(runs[i].init(0, s));
      TK(runs[i].set_config(cfgs[i]));
    }
    for (bool bf16 : {false, true}) {
      const void* gp = bf16 ? static_cast<const void*>(gb) : g;
      uint16_t* pp = bf16 ? p : nullptr;
      const double bytes = (bf16 ? 42.0 : 44.0) * nd;
      auto step = [&](oc::Runner& r) {
        TK(r.pass_a(ta, gp, bf16, w, m, v, &c, nullptr, 1, sums.data()));
        double su = 0, sw = 0;
        for (const tsr::opt::Sums& x : sums) sw += x.b, su += x.c;
        const float k = static_cast<float>(1e-3 * (sw > 0 && su > 0 ? std::sqrt(sw / su) : 1.0));
        TK(r.pass_b(tb, gp, bf16, w, m, v, pp, &c, &k, nullptr, 1));
      };
      auto copy = [&] { CK(cudaMemcpyAsync(dst, src, n * 8, cudaMemcpyDeviceToDevice, s)); };
      for (oc::Runner& r : runs) step(r);
      copy();
      std::vector<std::vector<double>> ts(nv), ratio(nv);
      std::vector<double> tc;
      for (int i = 0; i < reps; ++i) {
        const double y = time_ms(s, copy);
        tc.push_back(y);
        for (size_t j = 0; j < nv; ++j) {
          const size_t k = (j + static_cast<size_t>(i)) % nv;
          const double x = time_ms(s, [&] { step(runs[k]); });
          ts[k].push_back(x);
          ratio[k].push_back((bytes / x) / (16.0 * nd / y));
        }
      }
      const Stat b = stat(tc);
      for (size_t k = 0; k < nv; ++k) {
        const Stat a = stat(ts[k]), q = stat(ratio[k]);
        char name[64];
        std::snprintf(name, sizeof name, "v%du%db%u", cfgs[k].vec, cfgs[k].unroll, cfgs[k].block_elems);
        std::printf("  %12zu %5s %12s %10.4f %10.4f %12.1f %12.1f %7.3f %8.3f..%-8.3f\n", n, bf16 ? "bf16" : "f32",
                    name, a.med, b.med, bytes / a.med * 1e-6, 16.0 * nd / b.med * 1e-6, q.med, q.lo, q.hi);
      }
    }
    for (float* q : {g, w, m, v, src, dst}) CK(cudaFree(q));
    CK(cudaFree(gb));
    CK(cudaFree(p));
  }
}

// ------------------------------------------------------------- attention
void bench_attn(const std::vector<double>& sizes, int reps, cudaStream_t s) {
  namespace ac = tsr::attn::cuda;
  header("attn: attention block, float32, B=1 H=16 d=128, N queries x N keys");
  std::printf("# %8s %7s %10s %10s %12s %12s\n", "N", "causal", "fwd_ms", "bwd_ms", "fwd_TFLOPs", "bwd_TFLOPs");
  for (double nd : sizes) {
    const size_t N = static_cast<size_t>(nd), H = 16, d = 128;
    const size_t e = H * N * d;
    float *q, *k, *v, *o, *mm, *l, *lse, *dout, *delta, *dq, *dk, *dv;
    for (float** p : {&q, &k, &v, &o, &dout, &dq, &dk, &dv}) CK(cudaMalloc(reinterpret_cast<void**>(p), e * 4));
    for (float** p : {&mm, &l, &lse, &delta}) CK(cudaMalloc(reinterpret_cast<void**>(p), H * N * 4));
    for (float* p : {q, k, v, dout}) CK(cudaMemsetAsync(p, 0x3c, e * 4, s));
    std::vector<int64_t> pos(N);
    for (size_t i = 0; i < N; ++i) pos[i] = static_cast<int64_t>(i);
    int64_t* dpos;
    CK(cudaMalloc(reinterpret_cast<void**>(&dpos), N * 8));
    CK(cudaMemcpy(dpos, pos.data(), N * 8, cudaMemcpyHostToDevice));
    for (bool causal : {false, true}) {
      const ac::Shape sh{1, H, H, d, 1.0f / std::sqrt(128.0f), causal};
      const ac::On on{0, s};
      auto fwd = [&] {
        TK(ac::fwd_init(on, sh, N, o, mm, l));
        TK(ac::fwd_block(on, sh, q, N, dpos, k, v, N, dpos, nullptr, o, mm, l));
        TK(ac::fwd_finish(on, sh, N, o, mm, l, lse));
      };
      auto bwd = [&] {
        TK(ac::bwd_delta(on, sh, N, o, dout, delta));
        TK(ac::bwd_block(on, sh, q, N, dpos, k, v, N, dpos, nullptr, dout, lse, delta, dq, dk, dv));
      };
      fwd();
      bwd();
      std::vector<double> tf, tb;
      for (int i = 0; i < reps; ++i) {
        tf.push_back(time_ms(s, fwd));
        tb.push_back(time_ms(s, bwd));
      }
      const double f = ac::fwd_flops(sh, N, N) * (causal ? 0.5 : 1.0);
      const Stat a = stat(tf), b = stat(tb);
      std::printf("  %8zu %7d %10.3f %10.3f %12.2f %12.2f\n", N, causal ? 1 : 0, a.med, b.med, f / a.med * 1e-9,
                  2.5 * f / b.med * 1e-9);
    }
    for (float* p : {q, k, v, o, dout, dq, dk, dv, mm, l, lse, delta}) CK(cudaFree(p));
    CK(cudaFree(dpos));
  }
}

// ------------------------------------------------- ring attention (1 rank)
#define TT(x)                                                                                     \
  do {                                                                                            \
    if ((x) != TSR_SUCCESS) {                                                                     \
      std::fprintf(stderr, "bench_cuda: %s: %s\n", #x, tsr_last_error(nullptr));                  \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

void bench_ring(const std::vector<double>& sizes, int reps, cudaStream_t s) {
  namespace ac = tsr::attn::cuda;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      std::fprintf(stderr, "bench_cuda: MPI_Init_thread failed\n");
      std::exit(1);
    }
  }
  tsr_context ctx = nullptr;
  TT(tsr_context_create(MPI_COMM_SELF, &ctx));
  TT(tsr_context_set_device(ctx, 0, s));
  tsr_ring ring = nullptr;
  TT(tsr_ring_create_comm(ctx, MPI_COMM_SELF, &ring));
  header("ring: tsr ring attention on device tensors, 1 rank, float32, B=1 H=16 d=128, vs the bare block kernels");
  std::printf("# %8s %7s %10s %10s %10s %10s %12s %12s %9s %9s\n", "N", "causal", "fwd_ms", "bwd_ms", "blk_fwd_ms",
              "blk_bwd_ms", "fwd_TFLOPs", "bwd_TFLOPs", "fwd_ratio", "bwd_ratio");
  for (double nd : sizes) {
    const size_t N = static_cast<size_t>(nd), H = 16, d = 128;
    const size_t e = H * N * d;
    float *q, *k, *v, *o, *mm, *l, *lse, *dout, *delta, *dq, *dk, *dv, *o2, *lse2;
    for (float** p : {&q, &k, &v, &o, &dout, &dq, &dk, &dv, &o2}) CK(cudaMalloc(reinterpret_cast<void**>(p), e * 4));
    for (float** p : {&mm, &l, &lse, &delta, &lse2}) CK(cudaMalloc(reinterpret_cast<void**>(p), H * N * 4));
    for (float* p : {q, k, v, dout}) CK(cudaMemsetAsync(p, 0x3c, e * 4, s));
    std::vector<int64_t> pos(N);
    for (size_t i = 0; i < N; ++i) pos[i] = static_cast<int64_t>(i);
    int64_t* dpos;
    CK(cudaMalloc(reinterpret_cast<void**>(&dpos), N * 8));
    CK(cudaMemcpy(dpos, pos.data(), N * 8, cudaMemcpyHostToDevice));
    for (bool causal : {false, true}) {
      const ac::Shape sh{1, H, H, d, 1.0f / std::sqrt(128.0f), causal};
      const ac::On on{0, s};
      tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
      cfg.causal = causal ? 1 : 0;
      cfg.seq_len = N;
      tsr_attn_tensor tq{q, 1, H, N, d}, tk{k, 1, H, N, d}, tv{v, 1, H, N, d}, to{o2, 1, H, N, d},
          tl{lse2, 1, H, N, 1}, tdo{dout, 1, H, N, d}, tdq{dq, 1, H, N, d}, tdk{dk, 1, H, N, d},
          tdv{dv, 1, H, N, d};
      auto rfwd = [&] { TT(tsr_attn_forward(ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl)); };
      auto rbwd = [&] { TT(tsr_attn_backward(ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl, &tdo, &tdq, &tdk, &tdv)); };
      auto bfwd = [&] {
        TK(ac::fwd_init(on, sh, N, o, mm, l));
        TK(ac::fwd_block(on, sh, q, N, dpos, k, v, N, dpos, nullptr, o, mm, l));
        TK(ac::fwd_finish(on, sh, N, o, mm, l, lse));
      };
      auto bbwd = [&] {
        CK(cudaMemsetAsync(dq, 0, e * 4, s));
        CK(cudaMemsetAsync(dk, 0, e * 4, s));
        CK(cudaMemsetAsync(dv, 0, e * 4, s));
        TK(ac::bwd_delta(on, sh, N, o, dout, delta));
        TK(ac::bwd_block(on, sh, q, N, dpos, k, v, N, dpos, nullptr, dout, lse, delta, dq, dk, dv));
      };
      rfwd();
      rbwd();
      bfwd();
      bbwd();
      std::vector<double> rf, rb, bf, bb;
      for (int i = 0; i < reps; ++i) {
        rf.push_back(time_ms(s, rfwd));
        bf.push_back(time_ms(s, bfwd));
        rb.push_back(time_ms(s, rbwd));
        bb.push_back(time_ms(s, bbwd));
      }
      const double f = ac::fwd_flops(sh, N, N) * (causal ? 0.5 : 1.0);
      const Stat a = stat(rf), b = stat(rb), c = stat(bf), dd = stat(bb);
      std::printf("  %8zu %7d %10.3f %10.3f %10.3f %10.3f %12.2f %12.2f %9.3f %9.3f\n", N, causal ? 1 : 0, a.med,
                  b.med, c.med, dd.med, f / a.med * 1e-9, 2.5 * f / b.med * 1e-9, c.med / a.med, dd.med / b.med);
    }
    for (float* p : {q, k, v, o, dout, dq, dk, dv, mm, l, lse, delta, o2, lse2}) CK(cudaFree(p));
    CK(cudaFree(dpos));
  }
  TT(tsr_ring_destroy(&ring));
  TT(tsr_context_set_device(ctx, -1, nullptr));
  TT(tsr_context_destroy(&ctx));
}

int usage(const char* msg) {
  std::fprintf(stderr, "bench_cuda: %s\nusage: bench_cuda [--reps N] [--gemm n,...] [--dgemm n,...] [--lamb n,...] "
               "[--attn N,...] [--lamb-variants all|vVuUbB,...] [--ring N,...]\n", msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  std::vector<double> gemm{4096, 8192}, dgemm{4096, 8192}, lamb{1e7, 1e8}, attn{4096}, ringn{4096};
  std::vector<tsr::opt::cuda::KernelConfig> variants;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    bool ok = true;
    if (a == "--reps") {
      reps = std::atoi(argv[++i]);
      if (reps < 1) return usage("--reps must be >= 1");
    } else if (a == "--gemm") {
      gemm = parse_list(argv[++i], &ok);
    } else if (a == "--dgemm") {
      dgemm = parse_list(argv[++i], &ok);
    } else if (a == "--lamb") {
      lamb = parse_list(argv[++i], &ok);
    } else if (a == "--lamb-variants") {
      ok = parse_variants(argv[++i], &variants);
    } else if (a == "--attn") {
      attn = parse_list(argv[++i], &ok);
    } else if (a == "--ring") {
      ringn = parse_list(argv[++i], &ok);
    } else {
      return usage(("unknown option " + a).c_str());
    }
    if (!ok) return usage(("bad list after " + a).c_str());
  }
  if (!tsr::device::available()) {
    std::printf("# bench_cuda: no CUDA device visible; nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# bench_cuda: device 0 %s, %d SMs, %.0f GiB; reps %d (median, spread min..max)\n", prop.name,
              prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1 << 30), reps);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (double& x : gemm) x = std::floor(x);
  if (!gemm.empty() && gemm[0] > 0) bench_gemm(gemm, reps, s);
  for (double& x : dgemm) x = std::floor(x);
  if (!dgemm.empty() && dgemm[0] > 0) bench_dgemm(dgemm, reps, s);
  if (!lamb.empty() && lamb[0] > 0) bench_lamb(lamb, reps, s);
  if (!variants.empty() && !lamb.empty() && lamb[0] > 0) bench_lamb_variants(lamb, variants, reps, s);
  if (!attn.empty() && attn[0] > 0) bench_attn(attn, reps, s);
  if (!ringn.empty() && ringn[0] > 0) bench_ring(ringn, reps, s);
  CK(cudaStreamDestroy(s));
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Finalize();
  return 0;
}

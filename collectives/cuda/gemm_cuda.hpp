// Local matrix products on a CUDA device through cuBLAS (issue 17): float32,
// bfloat16 or float16 inputs, float32 accumulation (CUBLAS_COMPUTE_32F, no
// TF32), column-major like the grid GEMM's CBLAS products (gemm_exec.cpp).
// Built only with TSR_HAVE_CUDA. Not installed. docs/GEMM.md, "CUDA".
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tessera/tessera.h"

namespace tsr {
namespace cuda {

// Element types of the device products.
enum class Elem { f32 = 0, bf16 = 1, f16 = 2 };
const char* elem_name(Elem e);
size_t elem_size(Elem e);

// A cuBLAS handle bound to one device and one stream. Not thread-safe: one
// per stream (a context bound to a device owns one). Every product is
// asynchronous on that stream.
class Blas {
 public:
  Blas() = default;
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  ~Blas();
  // Creates the handle on `device` (INVALID_ARG for a device this process
  // does not see, UNSUPPORTED without a usable driver) and binds `stream`
  // (0: the device's default stream).
  tsr_status init(int device, cudaStream_t stream);
  bool ready() const { return handle_ != nullptr; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  void* handle() const { return handle_; }  // cublasHandle_t

 private:
  void* handle_ = nullptr;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
};

// C (m x n, element type `out`) = alpha op(A) op(B) + beta C with A, B of
// element type `in` (op(A) m x k, op(B) k x n, column-major, leading
// dimensions in elements), accumulated in float32; `out` is `in` or f32.
// k = 0 (or alpha = 0 with m, n > 0 handled by cuBLAS): C = beta C, and
// beta = 0 never reads C. Checks before launching: sizes >= 0, leading
// dimensions large enough (INVALID_ARG naming lda/ldb/ldc), A, B, C memory
// of the handle's device (INVALID_ARG naming a/b/c), `out` allowed
// (UNSUPPORTED). Asynchronous: returns once queued on blas.stream().
tsr_status gemm(Blas& blas, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc, Elem in, Elem out);

// ------------------------------------------------ the grid GEMM's device ops
// Stream-ordered pieces of the distributed GEMM on device buffers
// (collectives/gemm_exec.cpp, "local ops"). All asynchronous on `s`, every
// CUDA return code and launch checked; nothing touches host memory.

// dst (rows x cols elements of es bytes, leading dimension dld) = src (sld):
// one cudaMemcpyAsync when both are tight, else cudaMemcpy2DAsync (column
// by column where a pitch exceeds what cudaMemcpy2D takes). Device to device.
tsr_status copy2d(void* dst, int64_t dld, const void* src, int64_t sld, int64_t rows, int64_t cols, size_t es,
                  cudaStream_t s);
// C = beta C for float32 C (beta = 1: nothing; beta = 0: zeros, C not read).
tsr_status scale_f32(float* c, int64_t ldc, int64_t m, int64_t n, float beta, cudaStream_t s);
// C = beta C + R for float32 m x n blocks (beta = 0: C = R, C not read).
tsr_status axpby_f32(float* c, int64_t ldc, int64_t m, int64_t n, float beta, const float* r, int64_t ldr,
                     cudaStream_t s);

// The grid GEMM's cuBLAS handle of a context (kept in the context's GEMM
// pool, gemm_internal.hpp, as *slot): created on first use, re-created when
// the context's device or stream changed. *out: the handle, ready.
tsr_status context_blas(std::shared_ptr<void>* slot, int device, cudaStream_t stream, Blas** out);

}  // namespace cuda
}  // namespace tsr

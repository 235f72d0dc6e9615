// cuBLAS local products (gemm_cuda.hpp).
#include "gemm_cuda.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <memory>
#include <new>

#include "cuda_util.hpp"

namespace tsr {
namespace cuda {
namespace {

tsr_status blas_fail(cublasStatus_t s, const char* what) {
  tsr_status st = TSR_ERR_INTERNAL;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) st = TSR_ERR_NO_MEMORY;
  else if (s == CUBLAS_STATUS_NOT_INITIALIZED || s == CUBLAS_STATUS_ARCH_MISMATCH || s == CUBLAS_STATUS_NOT_SUPPORTED)
    st = TSR_ERR_UNSUPPORTED;
  else if (s == CUBLAS_STATUS_INVALID_VALUE)
    st = TSR_ERR_INVALID_ARG;
  return fail(st, "%s: cuBLAS error %s (%s)", what, cublasGetStatusName(s), cublasGetStatusString(s));
}

#define TSR_CUBLAS_TRY(call, what)                                    \
  do {                                                                \
    const cublasStatus_t tsr_blas_s_ = (call);                        \
    if (tsr_blas_s_ != CUBLAS_STATUS_SUCCESS) return blas_fail(tsr_blas_s_, what); \
  } while (0)

cudaDataType_t data_type(Elem e) {
  switch (e) {
    case Elem::bf16: return CUDA_R_16BF;
    case Elem::f16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

template <class T>
__device__ inline float to_f(T x) { return static_cast<float>(x); }
template <>
__device__ inline float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__device__ inline float to_f<__half>(__half x) { return __half2float(x); }
template <class T>
__device__ inline T from_f(float x) { return static_cast<T>(x); }
template <>
__device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <>
__device__ inline __half from_f<__half>(float x) { return __float2half(x); }

// C = beta C (beta = 0: C = 0 without reading it), column-major m x n.
template <class T>
__global__ void scale_kernel(T* c, int64_t ldc, int64_t m, int64_t n, float beta) {
  const int64_t total = m * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i % m, col = i / m;
    T* p = c + r + col * ldc;
    *p = beta == 0.0f ? from_f<T>(0.0f) : from_f<T>(beta * to_f(*p));
  }
}

template <class T>
tsr_status scale(T* c, int64_t ldc, int64_t m, int64_t n, float beta, cudaStream_t s) {
  if (beta == 1.0f) return TSR_SUCCESS;
  const int64_t total = m * n;
  const int threads = 256;
  const int64_t want = (total + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65535 ? want : 65535);
  scale_kernel<T><<<blocks, threads, 0, s>>>(c, ldc, m, n, beta);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the C = beta C kernel");
  return TSR_SUCCESS;
}

}  // namespace

const char* elem_name(Elem e) {
  switch (e) {
    case Elem::bf16: return "bfloat16";
    case Elem::f16: return "float16";
    default: return "float32";
  }
}
size_t elem_size(Elem e) { return e == Elem::f32 ? 4 : 2; }

Blas::~Blas() {
  if (handle_) {
    DeviceGuard g;
    if (g.enter(device_) == TSR_SUCCESS) (void)cublasDestroy(static_cast<cublasHandle_t>(handle_));
  }
}

tsr_status Blas::init(int device, cudaStream_t stream) {
  if (handle_) return fail(TSR_ERR_STATE, "the cuBLAS handle is already initialised");
  DeviceGuard g;
  TSR_TRY(g.enter(device));
  cublasHandle_t h = nullptr;
  TSR_CUBLAS_TRY(cublasCreate(&h), "creating a cuBLAS handle");
  cublasStatus_t s = cublasSetStream(h, stream);
  // Float32 products stay float32: the default math mode, with
  // CUBLAS_COMPUTE_32F in every call (never the _FAST_TF32 compute types).
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) {
    (void)cublasDestroy(h);
    return blas_fail(s, "binding the cuBLAS handle to the stream");
  }
  handle_ = h;
  device_ = device;
  stream_ = stream;
  return TSR_SUCCESS;
}

tsr_status gemm(Blas& blas, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc, Elem in, Elem out) {
  if (!blas.ready()) return fail(TSR_ERR_STATE, "the cuBLAS handle is not initialised");
  if (m < 0 || n < 0 || k < 0)
    return fail(TSR_ERR_SHAPE, "negative size: m = %lld, n = %lld, k = %lld", static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k));
  if (out != in && out != Elem::f32)
    return fail(TSR_ERR_UNSUPPORTED, "a %s product writes %s or float32 C, not %s", elem_name(in), elem_name(in),
                elem_name(out));
  const int64_t arows = ta ? k : m, brows = tb ? n : k;
  if (lda < (arows > 1 ? arows : 1))
    return fail(TSR_ERR_INVALID_ARG, "argument 'lda' = %lld; op(A) stores %lld rows", static_cast<long long>(lda),
                static_cast<long long>(arows));
  if (ldb < (brows > 1 ? brows : 1))
    return fail(TSR_ERR_INVALID_ARG, "argument 'ldb' = %lld; op(B) stores %lld rows", static_cast<long long>(ldb),
                static_cast<long long>(brows));
  if (ldc < (m > 1 ? m : 1))
    return fail(TSR_ERR_INVALID_ARG, "argument 'ldc' = %lld; C has %lld rows", static_cast<long long>(ldc),
                static_cast<long long>(m));
  if (m == 0 || n == 0) return TSR_SUCCESS;
  const int dev = blas.device();
  TSR_TRY(check_device_ptr(c, "c", dev));
  if (k > 0) {
    TSR_TRY(check_device_ptr(a, "a", dev));
    TSR_TRY(check_device_ptr(b, "b", dev));
  }
  DeviceGuard g;
  TSR_TRY(g.enter(dev));
  if (k == 0) {
    switch (out) {
      case Elem::bf16: return scale(static_cast<__nv_bfloat16*>(c), ldc, m, n, beta, blas.stream());
      case Elem::f16: return scale(static_cast<__half*>(c), ldc, m, n, beta, blas.stream());
      default: return scale(static_cast<float*>(c), ldc, m, n, beta, blas.stream());
    }
  }
  TSR_CUBLAS_TRY(cublasGemmEx_64(static_cast<cublasHandle_t>(blas.handle()), ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, a, data_type(in), lda, b,
                                 data_type(in), ldb, &beta, c, data_type(out), ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  return TSR_SUCCESS;
}

}  // namespace cuda
}  // namespace tsr

// ------------------------------------------------ the grid GEMM's device ops
namespace tsr {
namespace cuda {
namespace {

unsigned blocks_for(int64_t total, int threads) {
  const int64_t want = (total + threads - 1) / threads;
  return static_cast<unsigned>(want < 65535 ? (want > 0 ? want : 1) : 65535);
}

__global__ void axpby_kernel(float* c, int64_t ldc, int64_t m, int64_t n, float beta, const float* r, int64_t ldr) {
  const int64_t total = m * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i % m, col = i / m;
    float* p = c + row + col * ldc;
    const float x = r[row + col * ldr];
    *p = beta == 0.0f ? x : beta * *p + x;
  }
}

}  // namespace

tsr_status copy2d(void* dst, int64_t dld, const void* src, int64_t sld, int64_t rows, int64_t cols, size_t es,
                  cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return TSR_SUCCESS;
  if (dst == nullptr || src == nullptr) return fail(TSR_ERR_INTERNAL, "a device copy of a null block");
  const size_t width = static_cast<size_t>(rows) * es;
  if ((dld == rows && sld == rows) || cols == 1) {
    TSR_CUDA_CHECK(cudaMemcpyAsync(dst, src, width * static_cast<size_t>(cols), cudaMemcpyDeviceToDevice, s),
                   "packing a GEMM block on the device (cudaMemcpyAsync)");
    return TSR_SUCCESS;
  }
  const size_t dp = static_cast<size_t>(dld) * es, sp = static_cast<size_t>(sld) * es;
  const size_t kMaxPitch = static_cast<size_t>(1) << 30;  // under every device's cudaDevAttrMaxPitch
  if (dp <= kMaxPitch && sp <= kMaxPitch) {
    TSR_CUDA_CHECK(cudaMemcpy2DAsync(dst, dp, src, sp, width, static_cast<size_t>(cols), cudaMemcpyDeviceToDevice, s),
                   "packing a GEMM block on the device (cudaMemcpy2DAsync)");
    return TSR_SUCCESS;
  }
  for (int64_t j = 0; j < cols; ++j)
    TSR_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + static_cast<size_t>(j) * dp,
                                   static_cast<const char*>(src) + static_cast<size_t>(j) * sp, width,
                                   cudaMemcpyDeviceToDevice, s),
                   "packing a GEMM column on the device (cudaMemcpyAsync)");
  return TSR_SUCCESS;
}

tsr_status scale_f32(float* c, int64_t ldc, int64_t m, int64_t n, float beta, cudaStream_t s) {
  if (m <= 0 || n <= 0) return TSR_SUCCESS;
  return scale(c, ldc, m, n, beta, s);
}

tsr_status axpby_f32(float* c, int64_t ldc, int64_t m, int64_t n, float beta, const float* r, int64_t ldr,
                     cudaStream_t s) {
  if (m <= 0 || n <= 0) return TSR_SUCCESS;
  if (beta == 0.0f) return copy2d(c, ldc, r, ldr, m, n, sizeof(float), s);
  const int threads = 256;
  axpby_kernel<<<blocks_for(m * n, threads), threads, 0, s>>>(c, ldc, m, n, beta, r, ldr);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the C = beta C + R kernel");
  return TSR_SUCCESS;
}

tsr_status context_blas(std::shared_ptr<void>* slot, int device, cudaStream_t stream, Blas** out) {
  Blas* b = static_cast<Blas*>(slot->get());
  if (b == nullptr || b->device() != device || b->stream() != stream) {
    slot->reset();
    std::shared_ptr<Blas> fresh(new (std::nothrow) Blas());
    if (!fresh) return fail(TSR_ERR_NO_MEMORY, "allocating the GEMM's cuBLAS handle");
    TSR_TRY(fresh->init(device, stream));
    *slot = fresh;
    b = fresh.get();
  }
  *out = b;
  return TSR_SUCCESS;
}

}  // namespace cuda
}  // namespace tsr

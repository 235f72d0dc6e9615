// Device memory and element-wise steps of the ring exchange engine
// (ring_device.hpp). Every CUDA return code is checked.
#include <cuda_runtime_api.h>

#include "cuda_util.hpp"
#include "ring_device.hpp"

namespace tsr {
namespace ringdev {
namespace {

template <class T>
__global__ void add_kernel(T* acc, const T* x, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    acc[i] += x[i];
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

tsr_status alloc(int device, void* stream, size_t bytes, void** p) {
  *p = nullptr;
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device));
  TSR_CUDA_CHECK(cudaMallocAsync(p, bytes, as_stream(stream)), "cudaMallocAsync (ring workspace on the device)");
  return TSR_SUCCESS;
}

void release(int device, void* stream, void* p) noexcept {
  if (p == nullptr) return;
  tsr::cuda::DeviceGuard guard;
  if (guard.enter(device) != TSR_SUCCESS) return;
  if (cudaFreeAsync(p, as_stream(stream)) != cudaSuccess) (void)cudaGetLastError();
}

tsr_status zero(int device, void* stream, void* p, size_t bytes) {
  if (bytes == 0) return TSR_SUCCESS;
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device));
  TSR_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, as_stream(stream)), "cudaMemsetAsync (a travelling sum on the device)");
  return TSR_SUCCESS;
}

tsr_status add(int device, void* stream, tsr_dtype type, void* acc, const void* x, size_t n) {
  if (n == 0) return TSR_SUCCESS;
  if (type != TSR_FLOAT32 && type != TSR_FLOAT64)
    return fail(TSR_ERR_INTERNAL, "device sum of a ring buffer of type %d", static_cast<int>(type));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device));
  const size_t b = (n + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(b < 65535 ? b : 65535);
  if (type == TSR_FLOAT64)
    add_kernel<double><<<blocks, 256, 0, as_stream(stream)>>>(static_cast<double*>(acc), static_cast<const double*>(x), n);
  else
    add_kernel<float><<<blocks, 256, 0, as_stream(stream)>>>(static_cast<float*>(acc), static_cast<const float*>(x), n);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the ring's travelling-sum addition");
  return TSR_SUCCESS;
}

}  // namespace ringdev
}  // namespace tsr

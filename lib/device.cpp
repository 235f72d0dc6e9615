// Pointer classification, the context's device binding and the CUDA helpers
// of the device backend (lib/device.hpp, lib/cuda_check.hpp).
#include "device.hpp"

#include "context.hpp"
#include "core.hpp"
#include "tessera/tsr_config.h"

#if TSR_HAVE_CUDA
#include "cuda_check.hpp"
#endif

namespace tsr {

#if TSR_HAVE_CUDA
tsr_status cuda_fail(cudaError_t rc, const char* what) {
  (void)cudaGetLastError();  // clear a non-sticky error so that later calls start clean
  const tsr_status st = rc == cudaErrorMemoryAllocation ? TSR_ERR_NO_MEMORY
                        : rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver ||
                                  rc == cudaErrorInvalidDevice
                            ? TSR_ERR_UNSUPPORTED
                            : TSR_ERR_STATE;
  return fail(st, "%s failed: %s (%s)", what, cudaGetErrorName(rc), cudaGetErrorString(rc));
}
#endif

namespace device {

Space space_of(const void* p, int* device) noexcept {
  if (device != nullptr) *device = -1;
#if TSR_HAVE_CUDA
  if (p == nullptr) return Space::host;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "invalid value" of an unknown pointer
    return Space::host;
  }
  if (attr.type != cudaMemoryTypeDevice) return Space::host;
  if (device != nullptr) *device = attr.device;
  return Space::device;
#else
  (void)p;
  return Space::host;
#endif
}

Space space_of(const void* p) noexcept { return space_of(p, nullptr); }

int count() noexcept {
#if TSR_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

bool available() noexcept { return count() > 0; }

int context_device(const tsr_context_s* ctx) noexcept { return ctx->cuda_device; }
void* context_stream(const tsr_context_s* ctx) noexcept { return ctx->cuda_stream; }

Guard::Guard(int device) noexcept {
#if TSR_HAVE_CUDA
  if (device < 0) return;
  cudaError_t rc = cudaGetDevice(&previous_);
  if (rc == cudaSuccess && previous_ != device) rc = cudaSetDevice(device);
  if (rc != cudaSuccess) {
    status_ = cuda_fail(rc, "cudaSetDevice");
    previous_ = -1;
  }
#else
  (void)device;
#endif
}

Guard::~Guard() {
#if TSR_HAVE_CUDA
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
#endif
}

void synchronize(const tsr_context_s* ctx) noexcept {
#if TSR_HAVE_CUDA
  if (ctx->cuda_device < 0) return;
  Guard g(ctx->cuda_device);
  if (g.status() != TSR_SUCCESS) return;
  if (cudaStreamSynchronize(static_cast<cudaStream_t>(ctx->cuda_stream)) != cudaSuccess) (void)cudaGetLastError();
#else
  (void)ctx;
#endif
}

tsr_status check_buffer(const tsr_context_s* ctx, const void* buf, const char* arg, Space* space) {
  int dev = -1;
  const Space s = space_of(buf, &dev);
  if (space != nullptr) *space = s;
  if (s == Space::host) return TSR_SUCCESS;
  if (ctx->cuda_device < 0)
    return fail(TSR_ERR_STATE, "argument '%s' is memory of CUDA device %d but the context is bound to no device: "
                "call tsr_context_set_device first", arg, dev);
  if (dev != ctx->cuda_device)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is memory of CUDA device %d but the context is bound to device %d",
                arg, dev, ctx->cuda_device);
  return TSR_SUCCESS;
}

}  // namespace device
}  // namespace tsr

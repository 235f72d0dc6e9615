// include/tessera/device.h: device count, the context's device binding,
// pointer spaces.
#include <vector>

#include "context.hpp"
#include "core.hpp"
#include "device.hpp"
#include "device_transport.hpp"
#include "tessera/tsr_config.h"

#if TSR_HAVE_CUDA
#include "cuda_check.hpp"
#endif

namespace tsr {
namespace {

// Local checks of tsr_context_set_device (before the agreement).
tsr_status check_binding(tsr_context ctx, int device, void* stream) {
  if (device < -1)
    return fail(TSR_ERR_INVALID_ARG, "argument 'device' = %d; expected -1 (unbind) or a CUDA device ordinal", device);
  if (device == -1) {
    if (stream != nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'stream' is not NULL with device -1 (unbind)");
  } else {
#if TSR_HAVE_CUDA
    const int n = device::count();
    if (device >= n)
      return fail(TSR_ERR_INVALID_ARG, "argument 'device' = %d; this process sees %d CUDA device(s) (0 .. %d)", device,
                  n, n - 1);
    if (stream != nullptr) {
      int sdev = -1;
      const cudaError_t rc = cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &sdev);
      if (rc != cudaSuccess) {
        cuda_fail(rc, "cudaStreamGetDevice");
        return fail(TSR_ERR_INVALID_ARG, "argument 'stream' is not a usable CUDA stream (%s)", pending_message().c_str());
      }
      if (sdev != device)
        return fail(TSR_ERR_INVALID_ARG, "argument 'stream' belongs to CUDA device %d, not to 'device' = %d", sdev,
                    device);
    }
#else
    return fail(TSR_ERR_UNSUPPORTED, "argument 'device' = %d: this tessera was built without CUDA (TSR_WITH_CUDA=OFF); "
                "only -1 (host memory) is possible", device);
#endif
  }
  if (device != ctx->cuda_device && (ctx->live_grids > 0 || ctx->live_rings > 0))
    return fail(TSR_ERR_STATE, "changing the device from %d to %d while %d grid(s) and %d ring(s) of the context live: "
                "destroy them first (their transport is tied to the device)", ctx->cuda_device, device,
                ctx->live_grids, ctx->live_rings);
  return TSR_SUCCESS;
}

tsr_status set_device(tsr_context ctx, int device, void* stream) {
  TSR_TRY(check_context(ctx));
  // Devices and streams differ across ranks by design: only errors are agreed.
  TSR_TRY(agree(*ctx->world, check_binding(ctx, device, stream)));
  const int old = ctx->cuda_device;
  ctx->cuda_device = device;
  ctx->cuda_stream = stream;
  if (device == old) return TSR_SUCCESS;
  // The context's own communicator follows the device (collective).
  const tsr_status st = agree(*ctx->world, device::attach(*ctx->world));
  if (st != TSR_SUCCESS) {
    device::detach(*ctx->world);
    ctx->cuda_device = -1;
    ctx->cuda_stream = nullptr;
  }
  return st;
}

}  // namespace
}  // namespace tsr

using tsr::finish;

extern "C" {

tsr_status tsr_device_count(int* count) {
  if (count == nullptr) return finish(nullptr, "tsr_device_count", tsr::fail(TSR_ERR_INVALID_ARG, "argument 'count' is NULL"));
  *count = tsr::device::count();
  return TSR_SUCCESS;
}

tsr_status tsr_context_set_device(tsr_context ctx, int device, void* stream) {
  const tsr_status st = tsr::set_device(ctx, device, stream);
  return finish(ctx, "tsr_context_set_device", st);
}

tsr_status tsr_context_get_device(tsr_context ctx, int* device, void** stream) {
  tsr_status st = tsr::check_context(ctx);
  if (st != TSR_SUCCESS) return finish(nullptr, "tsr_context_get_device", st);
  if (device != nullptr) *device = ctx->cuda_device;
  if (stream != nullptr) *stream = ctx->cuda_stream;
  return TSR_SUCCESS;
}

tsr_status tsr_pointer_space(const void* ptr, int* space) {
  if (space == nullptr)
    return finish(nullptr, "tsr_pointer_space", tsr::fail(TSR_ERR_INVALID_ARG, "argument 'space' is NULL"));
  *space = tsr::device::space_of(ptr) == tsr::device::Space::device ? TSR_MEMORY_DEVICE : TSR_MEMORY_HOST;
  return TSR_SUCCESS;
}

}  // extern "C"

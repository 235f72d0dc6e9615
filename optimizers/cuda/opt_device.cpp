// The optimizer's device state (opt_device.hpp).
#include "opt_device.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <new>

#include "context.hpp"
#include "cuda_util.hpp"

namespace tsr {
namespace opt {
namespace cuda {
namespace {

tsr_status copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s, const char* what) {
  if (bytes == 0) return TSR_SUCCESS;
  TSR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s), what);
  return TSR_SUCCESS;
}

}  // namespace

tsr_status enter(tsr_optimizer_s& o) {
  const int device = o.ctx->cuda_device;
  void* stream = o.ctx->cuda_stream;
  DeviceState* d = static_cast<DeviceState*>(o.dev.get());
  if (d && (d->device != device || d->stream != stream)) {  // the binding changed: through the host
    TSR_TRY(leave(o));
    d = nullptr;
  }
  if (d) return TSR_SUCCESS;
  std::shared_ptr<DeviceState> nd(new (std::nothrow) DeviceState());
  if (!nd) return fail(TSR_ERR_NO_MEMORY, "allocating the optimizer's device state");
  nd->device = device;
  nd->stream = stream;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  TSR_TRY(nd->run.init(device, s));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device));
  const size_t k = o.local();
  const size_t fb = k * sizeof(float);
  TSR_TRY(nd->m.reserve(fb ? fb : 1, "allocating the optimizer state on the device"));
  if (o.v.size()) TSR_TRY(nd->v.reserve(fb, "allocating the optimizer state on the device"));
  if (o.master.size()) TSR_TRY(nd->master.reserve(fb, "allocating the master weights on the device"));
  if (o.gslice.size())
    TSR_TRY(nd->gslice.reserve(o.gslice.size(), "allocating the gradient slice on the device"));
  TSR_TRY(copy(nd->m.get(), o.m.data(), fb, cudaMemcpyHostToDevice, s, "copying the optimizer state to the device"));
  if (o.v.size())
    TSR_TRY(copy(nd->v.get(), o.v.data(), fb, cudaMemcpyHostToDevice, s, "copying the optimizer state to the device"));
  if (o.master.size() && o.master_ready)
    TSR_TRY(copy(nd->master.get(), o.master.data(), fb, cudaMemcpyHostToDevice, s,
                 "copying the master weights to the device"));
  TSR_CUDA_CHECK(cudaStreamSynchronize(s), "waiting for the optimizer state to reach the device");
  o.dev = nd;
  o.host_stale = false;
  return TSR_SUCCESS;
}

tsr_status sync_host(tsr_optimizer_s& o) {
  DeviceState* d = static_cast<DeviceState*>(o.dev.get());
  if (!d || !o.host_stale) return TSR_SUCCESS;
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(d->device));
  cudaStream_t s = static_cast<cudaStream_t>(d->stream);
  const size_t fb = o.local() * sizeof(float);
  TSR_TRY(copy(o.m.data(), d->m.get(), fb, cudaMemcpyDeviceToHost, s, "copying the optimizer state to the host"));
  if (o.v.size())
    TSR_TRY(copy(o.v.data(), d->v.get(), fb, cudaMemcpyDeviceToHost, s, "copying the optimizer state to the host"));
  if (o.master.size() && o.master_ready)
    TSR_TRY(copy(o.master.data(), d->master.get(), fb, cudaMemcpyDeviceToHost, s,
                 "copying the master weights to the host"));
  TSR_CUDA_CHECK(cudaStreamSynchronize(s), "waiting for the optimizer state to reach the host");
  o.host_stale = false;
  return TSR_SUCCESS;
}

tsr_status leave(tsr_optimizer_s& o) {
  TSR_TRY(sync_host(o));
  o.dev.reset();
  return TSR_SUCCESS;
}

}  // namespace cuda
}  // namespace opt
}  // namespace tsr

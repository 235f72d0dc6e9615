// The optimizer's state on a CUDA device (issue 17): while tsr_optimizer_step
// takes device buffers, m, v (LAMB), the momentum (LARS), the float32 master
// weights (bfloat16 parameters) and the sharded gradient slice live in
// device memory of the context's device, and the fused passes run there
// (opt_cuda.hpp) on the context's stream. Built only with TSR_HAVE_CUDA.
#pragma once

#include "opt_cuda.hpp"
#include "optimizer_impl.hpp"

namespace tsr {
namespace opt {
namespace cuda {

struct DeviceState {
  Runner run;
  tsr::cuda::DeviceBuffer m, v, master, gslice;
  int device = -1;
  void* stream = nullptr;
  float* m_ptr() const { return static_cast<float*>(m.get()); }
  float* v_ptr() const { return static_cast<float*>(v.get()); }
  float* master_ptr() const { return static_cast<float*>(master.get()); }
  unsigned char* gslice_ptr() const { return static_cast<unsigned char*>(gslice.get()); }
};

// Before a device step: the device state for the context's device and
// stream, created (and the host state copied up) on first use or when the
// binding changed.
tsr_status enter(tsr_optimizer_s& o);
// Copies a newer device state back into o.m, o.v, o.master (waits for the stream).
tsr_status sync_host(tsr_optimizer_s& o);
// Back to host steps: sync_host, then drop the device state.
tsr_status leave(tsr_optimizer_s& o);

}  // namespace cuda
}  // namespace opt
}  // namespace tsr

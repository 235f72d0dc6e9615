// Pointer classification for the device backend (lib/device.hpp).
#include "device.hpp"

#include "tessera/tsr_config.h"

#if TSR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tsr {
namespace device {

Space space_of(const void* p) noexcept {
#if TSR_HAVE_CUDA
  if (p == nullptr) return Space::host;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "invalid value" of an unknown pointer
    return Space::host;
  }
  return attr.type == cudaMemoryTypeDevice ? Space::device : Space::host;
#else
  (void)p;
  return Space::host;
#endif
}

bool available() noexcept {
#if TSR_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
#else
  return false;
#endif
}

}  // namespace device
}  // namespace tsr

// Device (CUDA) memory as the rest of the library sees it. Built without
// CUDA (TSR_HAVE_CUDA 0) every pointer is host memory and no device is bound.
// The CUDA runtime, transport backends and kernels build on this (issue 17).
#pragma once

namespace tsr {
namespace device {

enum class Space { host = 0, device = 1 };

// Where `p` lives: device for CUDA device memory (cudaMemoryTypeDevice),
// host for host memory, registered or managed memory and NULL. Never fails:
// a pointer CUDA does not know is host memory.
Space space_of(const void* p) noexcept;

// True when this build has CUDA and the process sees at least one device.
bool available() noexcept;

}  // namespace device
}  // namespace tsr

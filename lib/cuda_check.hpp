// CUDA return codes as tessera statuses. Include only from sources compiled
// with TSR_HAVE_CUDA (it includes the CUDA runtime header).
#pragma once

#include <cuda_runtime_api.h>

#include "core.hpp"

namespace tsr {

// A failed CUDA runtime call as a status with CUDA's error name and text:
// TSR_ERR_NO_MEMORY for cudaErrorMemoryAllocation, TSR_ERR_UNSUPPORTED where
// no usable device or driver is present, else TSR_ERR_STATE (the device or
// its stream is in an error state, often from an earlier asynchronous
// failure). Clears CUDA's last (non-sticky) error.
tsr_status cuda_fail(cudaError_t rc, const char* what);

}  // namespace tsr

#define TSR_CUDA_TRY(call)                                                        \
  do {                                                                            \
    cudaError_t tsr_cuda_rc_ = (call);                                            \
    if (tsr_cuda_rc_ != cudaSuccess) return ::tsr::cuda_fail(tsr_cuda_rc_, #call); \
  } while (0)

// Device (CUDA) memory for the ring exchange engine and ring attention
// (issue 17, docs/GPU.md "Ring attention"): workspace buffers from
// cudaMallocAsync on the context's stream, and the two element-wise steps
// the engine itself performs (zeroing a travelling sum, adding an arrived sum
// into a contribution). Every call is ordered on `stream` (a cudaStream_t;
// null: the device's default stream) of `device` and never synchronises.
// In a build without CUDA every call fails with TSR_ERR_INTERNAL (no caller
// reaches them: no pointer is device memory there). Not installed.
#pragma once

#include <cstddef>

#include "core.hpp"

namespace tsr {
namespace ringdev {

// *p = n bytes of device memory (cudaMallocAsync on stream); n > 0.
tsr_status alloc(int device, void* stream, size_t bytes, void** p);
// cudaFreeAsync on stream (errors ignored: called from destructors).
void release(int device, void* stream, void* p) noexcept;
// bytes zero bytes at p (cudaMemsetAsync).
tsr_status zero(int device, void* stream, void* p, size_t bytes);
// acc[i] += x[i] for i < n, type TSR_FLOAT32 or TSR_FLOAT64.
tsr_status add(int device, void* stream, tsr_dtype type, void* acc, const void* x, size_t n);

}  // namespace ringdev
}  // namespace tsr

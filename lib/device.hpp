// Device (CUDA) memory as the rest of the library sees it. Built without
// CUDA (TSR_HAVE_CUDA 0) every pointer is host memory and no device is bound.
// The CUDA runtime, transport backends and kernels build on this (issue 17;
// docs/GPU.md). No CUDA header here: CUDA-only helpers are in cuda_check.hpp.
#pragma once

#include "tessera/tessera.h"

struct tsr_context_s;

namespace tsr {
namespace device {

enum class Space { host = 0, device = 1 };

// Where `p` lives: device for CUDA device memory (cudaMemoryTypeDevice),
// host for host memory, registered or managed memory and NULL. Never fails:
// a pointer CUDA does not know is host memory.
Space space_of(const void* p) noexcept;
// The same, and the device ordinal of device memory in *device (-1 for host).
Space space_of(const void* p, int* device) noexcept;

// True when this build has CUDA and the process sees at least one device.
bool available() noexcept;
// Devices this process sees (0 without CUDA or without a usable device).
int count() noexcept;

// The context's binding (tsr_context_set_device): the device ordinal (-1:
// unbound) and the cudaStream_t (nullptr: the device's default stream).
// ctx must be live.
int context_device(const tsr_context_s* ctx) noexcept;
void* context_stream(const tsr_context_s* ctx) noexcept;

// Makes `device` the calling thread's current CUDA device for the guard's
// lifetime and restores the previous one after (CUDA launches need the
// stream's device current; tessera never leaves the caller's current device
// changed). No-op for device < 0 and without CUDA. status(): TSR_SUCCESS or
// the failure of cudaGetDevice/cudaSetDevice (with its message).
class Guard {
 public:
  explicit Guard(int device) noexcept;
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  tsr_status status() const noexcept { return status_; }

 private:
  int previous_ = -1;
  tsr_status status_ = TSR_SUCCESS;
};

// Waits for the work queued on the context's stream (a no-op when unbound
// or without CUDA; errors are left to the next checked CUDA call). For meter
// reads at region boundaries only: never in the transport's hot path.
void synchronize(const tsr_context_s* ctx) noexcept;

// Checks a buffer given to a call on ctx, before the call's agreement: host
// memory always passes; device memory needs a build with CUDA, a context
// bound to a device (TSR_ERR_STATE otherwise) and to the buffer's own device
// (TSR_ERR_INVALID_ARG otherwise), each message naming `arg`. *space (may be
// null) gets where buf lives.
tsr_status check_buffer(const tsr_context_s* ctx, const void* buf, const char* arg, Space* space = nullptr);

}  // namespace device
}  // namespace tsr

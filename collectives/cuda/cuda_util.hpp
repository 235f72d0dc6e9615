// Checked CUDA calls for the device kernels (issue 17): every CUDA or cuBLAS
// return code becomes a tessera status with a message (core.hpp's fail()),
// and device pointers are checked against the device the caller binds.
// Built only with TSR_HAVE_CUDA. Not installed.
#pragma once

#include <cuda_runtime_api.h>

#include "core.hpp"

namespace tsr {
namespace cuda {

// A failed CUDA runtime call as a status: NO_MEMORY for allocation
// failures, UNSUPPORTED where there is no usable device or driver,
// INVALID_ARG for invalid values or pointers, INTERNAL otherwise. Clears
// CUDA's last (non-sticky) error.
inline tsr_status cuda_fail(cudaError_t e, const char* what) {
  (void)cudaGetLastError();
  tsr_status st = TSR_ERR_INTERNAL;
  if (e == cudaErrorMemoryAllocation) st = TSR_ERR_NO_MEMORY;
  else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice)
    st = TSR_ERR_UNSUPPORTED;
  else if (e == cudaErrorInvalidValue || e == cudaErrorInvalidDevicePointer)
    st = TSR_ERR_INVALID_ARG;
  return fail(st, "%s: CUDA error %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

#define TSR_CUDA_CHECK(call, what)                                       \
  do {                                                                     \
    const cudaError_t tsr_cuda_e_ = (call);                                \
    if (tsr_cuda_e_ != cudaSuccess) return ::tsr::cuda::cuda_fail(tsr_cuda_e_, what); \
  } while (0)

// Makes `device` current for the guard's lifetime and restores the caller's
// device afterwards (the library never leaves the current device changed).
class DeviceGuard {
 public:
  DeviceGuard() = default;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() {
    if (set_) (void)cudaSetDevice(prev_);
  }
  tsr_status enter(int device) {
    if (device < 0) return fail(TSR_ERR_INVALID_ARG, "argument 'device' = %d is not a CUDA device", device);
    int n = 0;
    TSR_CUDA_CHECK(cudaGetDeviceCount(&n), "counting CUDA devices");
    if (device >= n) return fail(TSR_ERR_INVALID_ARG, "argument 'device' = %d; this process sees %d CUDA devices", device, n);
    TSR_CUDA_CHECK(cudaGetDevice(&prev_), "reading the current CUDA device");
    if (prev_ != device) {
      TSR_CUDA_CHECK(cudaSetDevice(device), "selecting the CUDA device");
      set_ = true;
    }
    return TSR_SUCCESS;
  }

 private:
  int prev_ = 0;
  bool set_ = false;
};

// TSR_SUCCESS when p is memory of CUDA device `device` (or p is null and
// null_ok); else INVALID_ARG naming the argument: host memory, or memory of
// another device.
inline tsr_status check_device_ptr(const void* p, const char* name, int device, bool null_ok = false) {
  if (p == nullptr) {
    if (null_ok) return TSR_SUCCESS;
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", name);
  }
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is not CUDA device memory (CUDA does not know the pointer)", name);
  }
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is %s memory; expected memory of CUDA device %d", name,
                a.type == cudaMemoryTypeHost ? "pinned host" : "host", device);
  if (a.device != device)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is memory of CUDA device %d; the call runs on CUDA device %d", name,
                a.device, device);
  return TSR_SUCCESS;
}

// Device memory owned by RAII (cudaFree on destruction), grown on demand.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_) (void)cudaFree(p_);
  }
  // At least `bytes` bytes (contents not kept when it grows).
  tsr_status reserve(size_t bytes, const char* what) {
    if (bytes <= size_) return TSR_SUCCESS;
    if (p_) (void)cudaFree(p_);
    p_ = nullptr;
    size_ = 0;
    TSR_CUDA_CHECK(cudaMalloc(&p_, bytes), what);
    size_ = bytes;
    return TSR_SUCCESS;
  }
  void* get() const { return p_; }
  size_t size() const { return size_; }

 private:
  void* p_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cuda
}  // namespace tsr

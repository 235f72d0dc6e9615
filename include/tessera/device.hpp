// tessera device memory, C++17 wrappers over include/tessera/device.h.
// Included by tessera.hpp.
//
//   cudaStream_t s; cudaSetDevice(local_rank % tessera::device_count()); cudaStreamCreate(&s);
//   tessera::context ctx(MPI_COMM_WORLD);
//   tessera::set_device(ctx, local_rank % tessera::device_count(), s);  // collective
//   tessera::grid g(ctx, TSR_GRID_2D, dims);   // created after binding: device transport
//   g.allreduce(TSR_AXIS_ROW, x_dev, y_dev);  // device spans: NCCL on stream s
#ifndef TESSERA_DEVICE_HPP
#define TESSERA_DEVICE_HPP

#include "tessera/tessera.hpp"

namespace tessera {

enum class memory_space { host = TSR_MEMORY_HOST, device = TSR_MEMORY_DEVICE };

// CUDA devices this process sees (0 without CUDA). Local.
inline int device_count() {
  int n = 0;
  check(tsr_device_count(&n));
  return n;
}

// Where p lives. Local.
inline memory_space pointer_space(const void* p) {
  int s = TSR_MEMORY_HOST;
  check(tsr_pointer_space(p, &s));
  return static_cast<memory_space>(s);
}

// Binds ctx to a device and stream (a cudaStream_t as void*; -1 unbinds).
// Collective over ctx.
inline void set_device(const context& ctx, int device, void* stream = nullptr) {
  check(tsr_context_set_device(ctx.get(), device, stream), ctx.get());
}

struct device_binding {
  int device;    // -1: unbound
  void* stream;  // a cudaStream_t; nullptr: the default stream
};
// The context's binding. Local.
inline device_binding get_device(const context& ctx) {
  device_binding b{-1, nullptr};
  check(tsr_context_get_device(ctx.get(), &b.device, &b.stream), ctx.get());
  return b;
}

}  // namespace tessera

#endif  // TESSERA_DEVICE_HPP

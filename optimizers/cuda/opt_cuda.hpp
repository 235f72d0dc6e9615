// The fused LAMB and LARS passes on a CUDA device (issue 17): multi-tensor
// apply, one launch over many ranges of many groups through a task table
// (one thread block per task), with the arithmetic of the CPU kernels
// (kernels.hpp) element for element: float32, no fused multiply-adds
// (compiled with --fmad=false), IEEE square roots and divisions, the same
// bfloat16 rounding. Per-element results (w, m, v, the bfloat16 copy) are
// therefore bitwise those of the CPU kernels for the same coefficients; the
// float64 sums of squares differ from the CPU's 16-lane order only in the
// order of the additions. Built only with TSR_HAVE_CUDA. Not installed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda_util.hpp"
#include "kernels.hpp"

namespace tsr {
namespace opt {
namespace cuda {

// What pass A computes for a task (the CPU kernel of the same name).
enum OpA : int32_t {
  kNone = 0,       // Sums{} (no read)
  kSumsq = 1,      // {sum G^2, 0, 0}                  sumsq_*
  kLambNorms = 2,  // {sum G^2, sum w^2, sum u^2}      lamb_norms_*
  kLambUnorm = 3,  // {0, 0, sum u^2}                  lamb_unorm_*
  kLarsUnorm = 4,  // {sum G^2, sum w^2, sum upd^2}    lars_unorm_* (coefficients from `lars`)
  kLarsNorms = 5   // {sum G^2, sum w^2, sum G*w}      lars_norms_*
};
// What pass B does for a task.
enum OpB : int32_t { kLambUpdate = 0, kLarsUpdate = 1 };

// One contiguous range of one group. Offsets are in elements from the base
// pointers of the launch; p_off is ignored without a bfloat16 output.
struct Task {
  uint64_t g_off, w_off, s_off, p_off;
  uint32_t n;
  int32_t group;
  int32_t op;
  int32_t pad;
};

// How the passes walk memory (opt_cuda.cu): `vec` elements per access
// (1: element by element; 4: float4 / 4 x bfloat16; 8: two float4 / 8 x
// bfloat16) where the addresses allow it, `unroll` vectors per thread
// loaded before any is used, `block_elems` elements per thread block (a
// multiple of 8; 0: one block per task). Instantiated: vec x unroll in 1x1,
// 1x4, 4x1, 4x2, 4x4, 8x1, 8x2. Per-element results are the same bits in
// every configuration; the float64 sums differ in the order of additions
// (each configuration's order is fixed). The default is the fastest
// float32 configuration measured on an H200 (2026-12-04, docs/GPU.md "Runs
// on a GPU": 0.84 / 0.83 of the copy bandwidth at 1e7 / 1e8 parameters);
// bench_cuda --lamb-variants measures the others in the same run.
struct KernelConfig {
  int vec = 8;
  int unroll = 1;
  uint32_t block_elems = 4096;
  bool valid() const;
};

// The device scratch of one optimizer on one device and stream: the task
// table, the coefficients, the per-task sums. Every call checks its
// pointers (memory of the runner's device, INVALID_ARG naming the argument).
class Runner {
 public:
  tsr_status init(int device, cudaStream_t stream);
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // INVALID_ARG for a configuration that is not instantiated.
  tsr_status set_config(const KernelConfig& c);
  const KernelConfig& config() const { return cfg_; }

  // Pass A: out[i] = task i's sums (host memory, tasks.size() entries).
  // Waits for the stream: the sums go to the host, where the per-group sums
  // and the norm all-reduce are formed as for the CPU kernels. lamb
  // (ngroups) for the LAMB ops, lars (ngroups) for kLarsUnorm; either may be
  // null when no task uses it.
  tsr_status pass_a(const std::vector<Task>& tasks, const void* g, bool bf16, const float* w, const float* m,
                    const float* v, const LambCoef* lamb, const LarsCoef* lars, size_t ngroups, Sums* out);
  // Pass B: w' (and m', v' or the momentum, and the bfloat16 copy p when not
  // null) in place. lamb and k (ngroups) for kLambUpdate, lars (ngroups)
  // for kLarsUpdate. Asynchronous on the stream.
  tsr_status pass_b(const std::vector<Task>& tasks, const void* g, bool bf16, float* w, float* m, float* v,
                    uint16_t* p, const LambCoef* lamb, const float* k, const LarsCoef* lars, size_t ngroups);

  // bfloat16 <-> float32 arrays on the device (asynchronous).
  tsr_status bf16_to_f32(const uint16_t* in, float* out, size_t n);
  tsr_status f32_to_bf16(const float* in, uint16_t* out, size_t n);

 private:
  // slot 0: pass A's table, 1: pass B's.
  tsr_status upload(int slot, const std::vector<Task>& tasks, const void* lamb, size_t lamb_bytes, const void* lars,
                    size_t lars_bytes, const float* k, size_t k_bytes);
  uint32_t parts_for(const std::vector<Task>& tasks) const;
  struct Table {
    tsr::cuda::DeviceBuffer dev;
    std::vector<Task> host;  // what dev holds when valid
    bool valid = false;
  };
  // Page-locked host memory (cudaFreeHost on destruction), grown on demand.
  struct Pinned {
    void* p = nullptr;
    size_t size = 0;
    Pinned() = default;
    Pinned(const Pinned&) = delete;
    Pinned& operator=(const Pinned&) = delete;
    ~Pinned() {
      if (p) (void)cudaFreeHost(p);
    }
  };
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  KernelConfig cfg_;
  Pinned host_sums_;  // pass A's sums land here (a faster copy than into pageable memory)
  Table table_[2];
  tsr::cuda::DeviceBuffer coef_, sums_;
  std::vector<unsigned char> staging_;
};

}  // namespace cuda
}  // namespace opt
}  // namespace tsr

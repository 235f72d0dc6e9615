// The optimizer object behind tsr_optimizer, its parameter table and
// presets, and the layout arithmetic (groups, slices, work items). Not
// installed; tests reach it through tessera_internal.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "tessera/optimizer.h"

namespace tsr {
namespace opt {

// ------------------------------------------------------------- parameters
constexpr int kParams = TSR_OPT_PARAM_COUNT;
using Values = std::array<double, kParams>;

struct ParamInfo {
  const char* name;
  double lower, upper;
  bool lower_open, upper_open, integer;
  unsigned kinds;  // bit (1 << tsr_opt_kind)
  bool global;
};
constexpr unsigned kLambBit = 1u << TSR_OPT_LAMB, kLarsBit = 1u << TSR_OPT_LARS, kBoth = kLambBit | kLarsBit;

// nullptr for a value that is not a tsr_opt_param.
const ParamInfo* param_info(int param);
// TSR_SUCCESS, or TSR_ERR_INVALID_ARG with a message naming the parameter,
// the value and the bounds (or the kind it belongs to).
tsr_status check_value(tsr_opt_kind kind, int param, double value);

struct Preset {
  tsr_opt_preset id;
  const char* name;
  tsr_opt_kind kind;
  Values values;
};
// nullptr for an unknown preset.
const Preset* preset_info(int preset);
const std::vector<Preset>& presets();

// ----------------------------------------------------------------- layout
// Work items are cut at group boundaries, slice boundaries and multiples of
// kChunk (global element index), so that the norms of a group are summed
// over the same pieces whatever the thread count.
constexpr size_t kChunk = 16384;

struct Item {
  int group;
  size_t begin, end;  // global element range
};

// Balanced contiguous slices of n elements over p ranks: rank r gets
// n/p + (r < n%p) elements starting at displs[r].
void slices(size_t n, int p, std::vector<size_t>* counts, std::vector<size_t>* displs);
// The items covering [lo, hi) for groups at offsets (size ngroups+1).
std::vector<Item> cut(const std::vector<size_t>& offset, size_t lo, size_t hi, size_t chunk = kChunk);
// Data-parallel buckets: bucket b covers elements [b*E, min(n, (b+1)*E)) with
// E = max(kChunk, bucket_bytes/elem_size rounded down to a multiple of kChunk).
size_t bucket_elems(double bucket_bytes, size_t elem_size);

// --------------------------------------------------------------- buffers
// A 64-byte aligned array of T, zero-filled.
template <class T>
class Buffer {
 public:
  Buffer() = default;
  bool allocate(size_t n);
  T* data() const { return p_.get(); }
  size_t size() const { return n_; }

 private:
  struct Free {
    void operator()(T* p) const;
  };
  std::unique_ptr<T, Free> p_;
  size_t n_ = 0;
};

}  // namespace opt
}  // namespace tsr

struct tsr_optimizer_s {
  static constexpr unsigned kMagic = 0x0b71a1e5u;
  unsigned magic = kMagic;
  tsr_context ctx = nullptr;
  tsr_opt_kind kind = TSR_OPT_LAMB;
  tsr_opt_preset preset = TSR_PRESET_LAMB_PAPER;
  tsr_opt_dist dist = TSR_OPT_REPLICATED;
  tsr_dtype type = TSR_FLOAT32;  // parameters and gradients
  int rank = 0, nranks = 1;

  // Layout.
  size_t n = 0;
  std::vector<size_t> offset;             // ngroups + 1
  size_t lo = 0, hi = 0;                  // this rank's state range [lo, hi)
  std::vector<size_t> counts, displs;     // balanced slices (sharded layout and file layout)
  std::vector<tsr::opt::Item> items;      // cover [lo, hi)
  size_t bucket = 0;                      // data parallel: elements per bucket (from BUCKET_BYTES)
  // tsr_optimizer_set_norm_reduction: the per-group sums are weighted and
  // summed over norm_ctx's ranks (tensor parallelism); nullptr: off.
  tsr_context norm_ctx = nullptr;
  std::vector<double> norm_weight;        // per group
  std::vector<size_t> bucket_first;       // first item of every bucket, plus items.size()

  // Hyperparameters, per group (global ones are kept in every row).
  std::vector<tsr::opt::Values> hyper;
  bool hyper_dirty = true;    // hyper changed since hyper_digest was taken
  uint64_t hyper_digest = 0;  // of every value but TSR_OPT_THREADS
  tsr_opt_schedule schedule = nullptr;
  void* schedule_user = nullptr;

  // State: m and v (LAMB) or the momentum in m (LARS); float32 master weights
  // for bfloat16 parameters; the gradient slice (sharded).
  tsr::opt::Buffer<float> m, v, master;
  tsr::opt::Buffer<unsigned char> gslice;
  bool master_ready = false;
  std::vector<tsr::opt::Sums> partial;  // per item
  // CUDA (issue 17): the state on the device while steps take device
  // buffers (optimizers/cuda/opt_device.hpp; null until the first device
  // step, and in builds without CUDA). While `host_stale`, m, v and master
  // above are older than the device's copies (get_state and saving copy
  // them back first).
  std::shared_ptr<void> dev;
  bool host_stale = false;
  bool on_device = false;  // this step's buffers are device memory

  // Counters and what the last step did.
  int64_t step = 0, skipped = 0;
  bool last_skipped = false;
  bool last_clipped = false;  // the last step taken clipped (LAMB: take the gradient norm first)
  double grad_norm = 0, clip = 1;
  std::vector<double> ratio, lr;  // per group
  int passes = 0, norm_allreduces = 0;
  uint64_t step_bytes = 0;

  size_t ngroups() const { return offset.size() - 1; }
  size_t local() const { return hi - lo; }
};

namespace tsr {
tsr_status check_optimizer(tsr_optimizer opt, const char* argname = "opt");
}  // namespace tsr

// tessera C++ API for the optimizers (LAMB, LARS): an RAII owner over
// tsr_optimizer, included by tessera/tessera.hpp. See tessera/optimizer.h for
// the model and docs/OPTIMIZERS.md for the rules.
//
//   tessera::optimizer opt(ctx, TSR_PRESET_LAMB_PAPER, {4096, 64}, TSR_OPT_SHARDED);
//   opt.set(1, TSR_OPT_DECAY, 0).set(1, TSR_OPT_ADAPT, 0);   // group 1: biases
//   opt.schedule([](std::int64_t t, int, double lr) { return lr * std::min(1.0, t / 100.0); });
//   for (...) {
//     backward(params, grads);
//     if (!opt.step(params, grads)) scaler.backoff();   // skipped: non-finite gradients
//   }
//   opt.save("state.h5");
#ifndef TESSERA_OPTIMIZER_HPP
#define TESSERA_OPTIMIZER_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/optimizer.h"
#include "tessera/tessera.hpp"

namespace tessera {

// Owns a tsr_optimizer (move-only). Construction is collective over the
// context; destruction is local. Must not outlive its context.
class optimizer {
 public:
  // Learning-rate schedule: (step t >= 1, group, the group's TSR_OPT_LR) -> lr.
  using schedule_fn = std::function<double(std::int64_t t, int group, double lr)>;

  optimizer(const context& ctx, tsr_opt_preset preset, const std::vector<std::size_t>& group_sizes,
            tsr_opt_dist dist = TSR_OPT_DATA_PARALLEL, tsr_dtype param_type = TSR_FLOAT32)
      : optimizer(ctx.get(), preset, group_sizes, dist, param_type) {}
  // Over a context owned elsewhere (e.g. by C code).
  optimizer(tsr_context ctx, tsr_opt_preset preset, const std::vector<std::size_t>& group_sizes,
            tsr_opt_dist dist = TSR_OPT_DATA_PARALLEL, tsr_dtype param_type = TSR_FLOAT32)
      : ctx_(ctx) {
    check(tsr_optimizer_create(ctx_, preset, dist, param_type, group_sizes.size(), group_sizes.data(), &h_), ctx_);
  }
  ~optimizer() { tsr_optimizer_destroy(&h_); }
  optimizer(optimizer&& o) noexcept
      : h_(std::exchange(o.h_, nullptr)), ctx_(o.ctx_), sched_(std::move(o.sched_)) {}
  optimizer& operator=(optimizer&& o) noexcept {
    if (this != &o) {
      tsr_optimizer_destroy(&h_);
      h_ = std::exchange(o.h_, nullptr);
      ctx_ = o.ctx_;
      sched_ = std::move(o.sched_);
    }
    return *this;
  }
  optimizer(const optimizer&) = delete;
  optimizer& operator=(const optimizer&) = delete;

  [[nodiscard]] tsr_optimizer get() const noexcept { return h_; }

  // A parameter for every group (or the optimizer-wide one). Local.
  optimizer& set(tsr_opt_param p, double value) {
    check(tsr_optimizer_set_param(h_, p, value), ctx_);
    return *this;
  }
  // A group parameter for one group. Local.
  optimizer& set(int group, tsr_opt_param p, double value) {
    check(tsr_optimizer_set_group_param(h_, group, p, value), ctx_);
    return *this;
  }
  [[nodiscard]] double get(tsr_opt_param p, int group = 0) const {
    double v = 0;
    check(tsr_optimizer_get_param(h_, group, p, &v), ctx_);
    return v;
  }
  [[nodiscard]] static tsr_opt_bounds bounds(tsr_opt_param p) {
    tsr_opt_bounds b{};
    check(tsr_optimizer_param_bounds(p, &b));
    return b;
  }

  // Install a schedule (an empty function removes it). An exception thrown by
  // the schedule makes the next step fail with TSR_ERR_INVALID_ARG on every
  // rank.
  void schedule(schedule_fn fn) {
    if (!fn) {
      check(tsr_optimizer_set_schedule(h_, nullptr, nullptr), ctx_);
      sched_.reset();
      return;
    }
    auto f = std::make_unique<schedule_fn>(std::move(fn));
    check(tsr_optimizer_set_schedule(h_, &trampoline, f.get()), ctx_);
    sched_ = std::move(f);
  }

  // One step (collective). T: float for TSR_FLOAT32, std::uint16_t for
  // TSR_BFLOAT16 parameters. Returns false when the step was skipped because
  // of non-finite gradients (TSR_ERR_NUMERIC), true when taken; throws on any
  // other error. A span of the wrong size or type fails on every rank.
  template <class T>
  bool step(span<T> params, span<T> grads) {
    static_assert(std::is_same<T, float>::value || std::is_same<T, std::uint16_t>::value,
                  "tessera::optimizer::step: parameters are float (float32) or std::uint16_t (bfloat16)");
    const tsr_dtype mine = std::is_same<T, float>::value ? TSR_FLOAT32 : TSR_BFLOAT16;
    const std::size_t n = static_cast<std::size_t>(query(TSR_OPTQ_PARAMS));
    std::string bad;
    tsr_status why = TSR_ERR_SHAPE;
    if (static_cast<tsr_dtype>(static_cast<int>(query(TSR_OPTQ_PARAM_TYPE))) != mine) {
      why = TSR_ERR_INVALID_ARG;
      bad = std::string("tessera::optimizer::step: spans of ") + (mine == TSR_FLOAT32 ? "float" : "std::uint16_t") +
            ", but the optimizer's parameters are " + (mine == TSR_FLOAT32 ? "bfloat16" : "float32");
    } else if (params.size() != n || grads.size() != n) {
      bad = "tessera::optimizer::step: params span has " + std::to_string(params.size()) + " and grads span " +
            std::to_string(grads.size()) + " elements; expected " + std::to_string(n);
    }
    const tsr_status st = tsr_optimizer_step(h_, params.data(), grads.data(), bad.empty() ? n : TSR_COUNT_INVALID);
    if (!bad.empty()) throw error(why, bad);
    if (st == TSR_ERR_NUMERIC) return false;
    check(st, ctx_);
    return true;
  }
  template <class T>
  bool step(std::vector<T>& params, std::vector<T>& grads) {
    return step(span<T>(params), span<T>(grads));
  }

  [[nodiscard]] double query(tsr_opt_query q, int group = 0) const {
    double v = 0;
    check(tsr_optimizer_query(h_, q, group, &v), ctx_);
    return v;
  }
  [[nodiscard]] std::int64_t steps() const { return static_cast<std::int64_t>(query(TSR_OPTQ_STEP)); }
  [[nodiscard]] std::int64_t skipped() const { return static_cast<std::int64_t>(query(TSR_OPTQ_SKIPPED)); }
  // This rank's part of a state array (TSR_OPTQ_SHARD_SIZE elements).
  [[nodiscard]] std::vector<float> state(tsr_opt_state which) const {
    std::vector<float> s(static_cast<std::size_t>(query(TSR_OPTQ_SHARD_SIZE)));
    check(tsr_optimizer_get_state(h_, which, s.data(), s.size()), ctx_);
    return s;
  }
  // The inverse of state(): overwrite this rank's part of a state array
  // (TSR_OPTQ_SHARD_SIZE elements). Local.
  // Throws TSR_ERR_INVALID_ARG for a state the optimizer does not have,
  // TSR_ERR_SHAPE for another size.
  optimizer& set_state(tsr_opt_state which, span<const float> in) {
    check(tsr_optimizer_set_state(h_, which, in.data(), in.size()), ctx_);
    return *this;
  }
  optimizer& set_state(tsr_opt_state which, const std::vector<float>& in) {
    return set_state(which, span<const float>(in.data(), in.size()));
  }
  // The step count (TSR_OPTQ_STEP): the next step is step + 1. Local; every
  // rank sets the same value. Throws TSR_ERR_INVALID_ARG for step < 0.
  optimizer& set_step(std::int64_t step) {
    check(tsr_optimizer_set_step(h_, step), ctx_);
    return *this;
  }
  // Tensor parallelism (tsr_optimizer_set_norm_reduction; local): the
  // per-group sums a step assembles are multiplied by this rank's weights[g]
  // and summed over norm_ctx, so that trust ratios and the gradient norm are
  // those of the whole tensors. weights: one per group (>= 0, finite), or
  // empty for all 1. The steps become collective over norm_ctx too; norm_ctx
  // must not be the optimizer's context and must outlive the optimizer (or
  // clear_norm_reduction() be called first).
  optimizer& set_norm_reduction(const context& norm_ctx, const std::vector<double>& weights = {}) {
    return set_norm_reduction(norm_ctx.get(), weights);
  }
  // Over a context owned elsewhere (e.g. by C code).
  optimizer& set_norm_reduction(tsr_context norm_ctx, const std::vector<double>& weights = {}) {
    const std::size_t ng = weights.empty() ? static_cast<std::size_t>(query(TSR_OPTQ_GROUPS)) : weights.size();
    check(tsr_optimizer_set_norm_reduction(h_, norm_ctx, ng, weights.empty() ? nullptr : weights.data()), ctx_);
    return *this;
  }
  // Remove the reduction: the steps reduce over the optimizer's context only.
  optimizer& clear_norm_reduction() {
    check(tsr_optimizer_set_norm_reduction(h_, nullptr, 0, nullptr), ctx_);
    return *this;
  }
  void save(const std::string& path) { check(tsr_optimizer_save(h_, path.c_str()), ctx_); }
  void load(const std::string& path) { check(tsr_optimizer_load(h_, path.c_str()), ctx_); }

 private:
  static double trampoline(std::int64_t t, int group, double lr, void* user) noexcept {
    try {
      return (*static_cast<schedule_fn*>(user))(t, group, lr);
    } catch (...) {
      return std::numeric_limits<double>::quiet_NaN();
    }
  }

  tsr_optimizer h_ = nullptr;
  tsr_context ctx_ = nullptr;
  std::unique_ptr<schedule_fn> sched_;
};

// Data parallel or sharded (tsr_optimizer_plan; local): both steps' figures
// and the choice. Throws TSR_ERR_NO_MEMORY when neither fits.
inline tsr_opt_plan plan_optimizer(const tsr_opt_problem& problem) {
  tsr_opt_plan p{};
  check(tsr_optimizer_plan(&problem, &p));
  return p;
}

}  // namespace tessera

#endif  // TESSERA_OPTIMIZER_HPP

// tsr_optimizer: creation, hyperparameters, queries, and the step: gradient
// communication through the transport, the fused passes over memory
// (kernels.cpp), the norm all-reduce, the update and the parameter
// all-gather. docs/OPTIMIZERS.md describes the algorithm and its costs.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#include "context.hpp"
#include "core.hpp"
#include "device.hpp"
#include "optimizer_impl.hpp"
#include "tessera/tsr_config.h"
#include "transport.hpp"
#if TSR_HAVE_CUDA
#include "opt_device.hpp"
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

namespace tsr {

tsr_status check_optimizer(tsr_optimizer opt, const char* argname) {
  if (opt == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", argname);
  if (opt->magic != tsr_optimizer_s::kMagic)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is not a live tessera optimizer", argname);
  return TSR_SUCCESS;
}

namespace opt {
namespace {

// A 64-bit hash of words (for the agreement digests).
struct Hash {
  uint64_t h = 0x6a09e667f3bcc909ull;
  void add(uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  void add(double d) {
    uint64_t u;
    std::memcpy(&u, &d, sizeof u);
    add(u);
  }
};

// ------------------------------------------------------------------ create
tsr_status create(tsr_context ctx, tsr_opt_preset preset, tsr_opt_dist dist, tsr_dtype type, size_t ngroups,
                  const size_t* sizes, tsr_optimizer* out) {
  if (out != nullptr) *out = nullptr;
  TSR_TRY(check_context(ctx));
  const Comm& world = *ctx->world;
  // Local checks, then one agreement on them and on a digest of the arguments.
  tsr_status local = TSR_SUCCESS;
  const Preset* pr = preset_info(preset);
  size_t n = 0;
  bool too_big = false;
  if (out == nullptr) {
    local = fail(TSR_ERR_INVALID_ARG, "argument 'opt' is NULL");
  } else if (pr == nullptr) {
    local = fail(TSR_ERR_INVALID_ARG, "argument 'preset' = %d is not a tsr_opt_preset", static_cast<int>(preset));
  } else if (dist != TSR_OPT_REPLICATED && dist != TSR_OPT_DATA_PARALLEL && dist != TSR_OPT_SHARDED) {
    local = fail(TSR_ERR_INVALID_ARG, "argument 'dist' = %d is not a tsr_opt_dist", static_cast<int>(dist));
  } else if (type != TSR_FLOAT32 && type != TSR_BFLOAT16) {
    local = fail(TSR_ERR_INVALID_ARG, "argument 'param_type' = %s; expected TSR_FLOAT32 or TSR_BFLOAT16",
                 dtype_valid(type) ? dtype_name(type) : "not a tsr_dtype");
  } else if (ngroups == 0 || ngroups > static_cast<size_t>(INT_MAX)) {
    local = fail(TSR_ERR_INVALID_ARG, "argument 'ngroups' = %zu; expected 1 .. INT_MAX groups", ngroups);
  } else if (sizes == nullptr) {
    local = fail(TSR_ERR_INVALID_ARG, "argument 'group_sizes' is NULL");
  } else {
    for (size_t g = 0; g < ngroups; ++g) {
      if (sizes[g] > (SIZE_MAX >> 4) - n) too_big = true;
      if (!too_big) n += sizes[g];
    }
    if (too_big)
      local = fail(TSR_ERR_UNSUPPORTED, "argument 'group_sizes': the groups hold more elements than tessera can address");
    else if (dist == TSR_OPT_SHARDED && n > static_cast<size_t>(INT_MAX))
      local = fail(TSR_ERR_UNSUPPORTED, "the groups hold %zu elements; TSR_OPT_SHARDED moves the flat array with one "
                   "reduce-scatter and one all-gather, limited to INT_MAX elements", n);
  }
  if (out != nullptr) *out = nullptr;
  Hash h;
  if (local == TSR_SUCCESS)
    for (size_t g = 0; g < ngroups; ++g) h.add(static_cast<uint64_t>(sizes[g]));
  tsr_status st = agree(world, local,
                        std::vector<Same>{{"preset", preset},
                                          {"dist", dist},
                                          {"param_type", type},
                                          {"ngroups", static_cast<int64_t>(ngroups)},
                                          {"group_sizes", static_cast<int64_t>(h.h & 0x7fffffffffffffffull), true}});
  TSR_TRY(st);

  // Build it (allocation failures are agreed on below).
  std::unique_ptr<tsr_optimizer_s> o(new (std::nothrow) tsr_optimizer_s());
  local = o ? TSR_SUCCESS : fail(TSR_ERR_NO_MEMORY, "allocating an optimizer");
  if (local == TSR_SUCCESS) {
    try {
      o->ctx = ctx;
      o->kind = pr->kind;
      o->preset = preset;
      o->dist = dist;
      o->type = type;
      o->rank = world.rank();
      o->nranks = world.size();
      o->n = n;
      o->offset.assign(ngroups + 1, 0);
      for (size_t g = 0; g < ngroups; ++g) o->offset[g + 1] = o->offset[g] + sizes[g];
      slices(n, o->nranks, &o->counts, &o->displs);
      if (dist == TSR_OPT_SHARDED) {
        o->lo = o->displs[static_cast<size_t>(o->rank)];
        o->hi = o->lo + o->counts[static_cast<size_t>(o->rank)];
      } else {
        o->lo = 0;
        o->hi = n;
      }
      o->hyper.assign(ngroups, pr->values);
      o->ratio.assign(ngroups, 1.0);
      o->lr.assign(ngroups, 0.0);
      const size_t k = o->local();
      bool ok = o->m.allocate(k);
      if (ok && o->kind == TSR_OPT_LAMB) ok = o->v.allocate(k);
      if (ok && type == TSR_BFLOAT16) ok = o->master.allocate(k);
      if (ok && dist == TSR_OPT_SHARDED) ok = o->gslice.allocate(k * tsr_dtype_size(type));
      if (!ok) {
        local = fail(TSR_ERR_NO_MEMORY, "allocating the optimizer state (%zu elements per array)", k);
      } else {  // the work items, once the state (some 10^4 times larger) fits
        o->items = cut(o->offset, o->lo, o->hi);
        o->partial.resize(o->items.size());
      }
    } catch (const std::bad_alloc&) {
      local = fail(TSR_ERR_NO_MEMORY, "allocating the optimizer layout");
    }
  }
  TSR_TRY(agree(world, local));
  o->ctx->live_optimizers += 1;
  *out = o.release();
  return TSR_SUCCESS;
}

// ---------------------------------------------------------------- helpers
bool adapts(const Values& h) {
  const double a = h[TSR_OPT_ADAPT];
  if (a == 0) return false;
  if (a == 1) return true;
  return h[TSR_OPT_DECAY] == 1 && h[TSR_OPT_WEIGHT_DECAY] > 0;
}
double decay_of(const Values& h) { return h[TSR_OPT_DECAY] == 1 ? h[TSR_OPT_WEIGHT_DECAY] : 0.0; }

// Runs f(i) for the items [a, b), on OpenMP threads where there are several.
template <class F>
void for_items(const tsr_optimizer_s& o, size_t a, size_t b, F f) {
#ifdef _OPENMP
  const int want = static_cast<int>(o.hyper[0][TSR_OPT_THREADS]);
  const int threads = want > 0 ? want : omp_get_max_threads();
  if (threads > 1 && b - a > 1) {
    const long long lo = static_cast<long long>(a), hi = static_cast<long long>(b);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long long i = lo; i < hi; ++i) f(static_cast<size_t>(i));
    return;
  }
#else
  (void)o;
#endif
  for (size_t i = a; i < b; ++i) f(i);
}

// Where the step reads and writes.
struct Bufs {
  const unsigned char* g;  // gradients; element `gbase` is at g
  size_t gbase;
  float* w;                // float32 weights (the parameters, or the master copy); element `wbase` at w
  size_t wbase;
  uint16_t* p;             // bfloat16 parameters (global index), or null
};

template <class T>
const T* gptr(const Bufs& b, size_t i) {
  return reinterpret_cast<const T*>(b.g) + (i - b.gbase);
}

// LAMB coefficients of a group for the gradient scale gs (kernels.hpp).
LambCoef lamb_coef(const Values& h, int64_t t, double gs) {
  LambCoef c{};
  const double wd = decay_of(h), b1 = h[TSR_OPT_BETA1], b2 = h[TSR_OPT_BETA2];
  const bool l2 = h[TSR_OPT_DECAY_MODE] == 1;
  c.gs = static_cast<float>(gs);
  c.l2 = static_cast<float>(l2 ? wd : 0.0);
  c.wd = static_cast<float>(l2 ? 0.0 : wd);
  c.b1 = static_cast<float>(b1);
  c.a1 = static_cast<float>(h[TSR_OPT_GRAD_AVERAGING] == 1 ? 1.0 - b1 : 1.0);
  c.b2 = static_cast<float>(b2);
  c.a2 = static_cast<float>(1.0 - b2);
  const bool bc = h[TSR_OPT_BIAS_CORRECTION] == 1;
  const double td = static_cast<double>(t);
  c.bc1 = static_cast<float>(bc ? 1.0 / (1.0 - std::pow(b1, td)) : 1.0);
  c.bc2 = static_cast<float>(bc ? 1.0 / (1.0 - std::pow(b2, td)) : 1.0);
  const double eps = h[TSR_OPT_EPS];
  // optax's eps_root inside the square root, with eps outside (or inside too).
  c.ei = static_cast<float>(h[TSR_OPT_EPS_ROOT] + (h[TSR_OPT_EPS_MODE] == 1 ? eps : 0.0));
  c.eo = static_cast<float>(h[TSR_OPT_EPS_MODE] == 1 ? 0.0 : eps);
  return c;
}

// The LAMB step factor of a group: lr * ratio (* DeepSpeed's bias correction).
double lamb_factor(const Values& h, int64_t t, double lr, double ratio) {
  double k = lr * ratio;
  if (h[TSR_OPT_BIAS_CORRECTION] == 2) {
    const double td = static_cast<double>(t);
    k *= std::sqrt(1.0 - std::pow(h[TSR_OPT_BETA2], td)) / (1.0 - std::pow(h[TSR_OPT_BETA1], td));
  }
  return k;
}

double clampd(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }

// The step, after the agreement. Returns TSR_ERR_NUMERIC for a skipped step.
class Stepper {
 public:
  Stepper(tsr_optimizer_s& o, void* params, void* grads, int64_t t)
      : o_(o), world_(*o.ctx->world), params_(params), grads_(grads), t_(t), ng_(o.ngroups()) {}

  // The whole step: check(), then apply().
  tsr_status run() {
    TSR_TRY(check());
    return apply();
  }

  // Steps 1-3: gradients in, the norms, the clip factor; TSR_ERR_NUMERIC
  // (nothing changed) where a norm is not finite.
  tsr_status check() {
    o_.passes = 0;
    o_.norm_allreduces = 0;
    o_.step_bytes = 0;
    esize_ = tsr_dtype_size(o_.type);
    bf16_ = o_.type == TSR_BFLOAT16;
    lamb_ = o_.kind == TSR_OPT_LAMB;
    popular_.assign(ng_, 0);
    unorm_ = lamb_;
    if (!lamb_)
      for (size_t g = 0; g < ng_; ++g)
        if (o_.hyper[g][TSR_OPT_MOMENTUM_MODE] == 2) popular_[g] = 1, unorm_ = true;
    const Values& h0 = o_.hyper[0];
    scale_ = 1.0 / (h0[TSR_OPT_LOSS_SCALE] * (o_.dist == TSR_OPT_REPLICATED ? 1.0 : o_.nranks));
    adapt_.resize(ng_);
    for (size_t g = 0; g < ng_; ++g) adapt_[g] = adapts(o_.hyper[g]);

#if TSR_HAVE_CUDA
    dev_ = o_.on_device ? static_cast<cuda::DeviceState*>(o_.dev.get()) : nullptr;
    if (dev_) {
      if (bf16_ && !o_.master_ready) {
        TSR_TRY(dev_->run.bf16_to_f32(static_cast<const uint16_t*>(params_) + o_.lo, dev_->master_ptr(), o_.local()));
        o_.master_ready = true;
        o_.host_stale = true;
      }
      bufs_.w = bf16_ ? dev_->master_ptr() : static_cast<float*>(params_);
    }
#endif
    if (bf16_ && !o_.master_ready) {
      bf16_to_f32(static_cast<const uint16_t*>(params_) + o_.lo, o_.master.data(), o_.local());
      o_.master_ready = true;
    }
    if (!o_.on_device) bufs_.w = bf16_ ? o_.master.data() : static_cast<float*>(params_);
    bufs_.wbase = bf16_ ? o_.lo : 0;
    bufs_.p = bf16_ ? static_cast<uint16_t*>(params_) : nullptr;

    // Clipping and LAMB: the update norm depends on the clip factor, which
    // depends on the global gradient norm. After a step that clipped (the
    // common steady state), take the gradient norm first (pass G), then pass
    // A at the right scale; otherwise run pass A at clip factor 1 and, only if
    // clipping then scales, the update norms again (pass A').
    const double maxn = h0[TSR_OPT_MAX_GRAD_NORM];
    // (So for LARS groups with the "popular" momentum, whose ratio needs the
    // norm of the momentum update: unorm_.)
    const bool norm_first = unorm_ && maxn > 0 && o_.last_clipped;

    // 1. Gradients in, and the first pass over them.
    coefs(scale_);
    if (o_.dist == TSR_OPT_DATA_PARALLEL) {
      TSR_TRY(data_parallel_in(norm_first));
    } else {
      if (o_.dist == TSR_OPT_SHARDED) {
        unsigned char* slice = o_.gslice.data();
#if TSR_HAVE_CUDA
        if (dev_) slice = dev_->gslice_ptr();  // the device transport reduces into device memory
#endif
        TSR_TRY(reduce_scatterv(world_, grads_, slice, o_.counts.data(), o_.type, TSR_SUM));
        bufs_.g = slice;
        bufs_.gbase = o_.lo;
      } else {
        bufs_.g = static_cast<const unsigned char*>(grads_);
        bufs_.gbase = 0;
      }
      if (norm_first) TSR_TRY(pass_g(0, o_.items.size()));
      else TSR_TRY(pass_a(0, o_.items.size(), true));
    }
    o_.passes = 1;
    gs_ = scale_;
    if (norm_first) {
      // Per-group sums of G^2, assembled over the ranks (L float64).
      std::vector<double> g2s(ng_, 0.0);
      for (size_t i = 0; i < o_.items.size(); ++i) g2s[static_cast<size_t>(o_.items[i].group)] += o_.partial[i].a;
      if (o_.dist == TSR_OPT_SHARDED) {
        TSR_TRY(allreduce(world_, g2s.data(), g2s.data(), g2s.size(), TSR_FLOAT64, TSR_SUM));
        o_.norm_allreduces += 1;
      }
      TSR_TRY(norm_reduce(g2s, 1));
      TSR_TRY(clip_from(g2s, 1));
      gs_ = scale_ * o_.clip;
      coefs(gs_);
      TSR_TRY(pass_a(0, o_.items.size(), true, false));  // the gradient norm is known: skip plain groups
      o_.passes += 1;
    }

    // 2. Per-group sums, assembled over the ranks in one all-reduce (3L float64).
    sums_.assign(3 * ng_, 0.0);
    for (size_t i = 0; i < o_.items.size(); ++i) {
      const size_t g = static_cast<size_t>(o_.items[i].group);
      sums_[3 * g] += o_.partial[i].a;
      sums_[3 * g + 1] += o_.partial[i].b;
      sums_[3 * g + 2] += o_.partial[i].c;
    }
    if (o_.dist == TSR_OPT_SHARDED) {
      TSR_TRY(allreduce(world_, sums_.data(), sums_.data(), sums_.size(), TSR_FLOAT64, TSR_SUM));
      o_.norm_allreduces += 1;
    }
    TSR_TRY(norm_reduce(sums_, 3));
    if (!norm_first) {
      TSR_TRY(clip_from(sums_, 3));
      gs_ = scale_ * o_.clip;
    }
    for (size_t g = 0; g < ng_; ++g)
      if (adapt_[g] && !(std::isfinite(sums_[3 * g + 1]) && std::isfinite(sums_[3 * g + 2])))
        return skip("group %zu: the %s norm is not finite", g,
                    std::isfinite(sums_[3 * g + 1]) ? (lamb_ ? "update" : "gradient-weight") : "weight");

    // 3. Pass A ran at clip factor 1 but clipping scales: LAMB needs the
    // update norms at the clipped scale (LARS gets them from the sums).
    if (!norm_first && o_.clip != 1.0 && unorm_) {
      coefs(gs_);
      TSR_TRY(pass_a(0, o_.items.size(), false));
      o_.passes += 1;
      usums_.assign(ng_, 0.0);
      for (size_t i = 0; i < o_.items.size(); ++i) usums_[static_cast<size_t>(o_.items[i].group)] += o_.partial[i].c;
      if (o_.dist == TSR_OPT_SHARDED) {
        TSR_TRY(allreduce(world_, usums_.data(), usums_.data(), usums_.size(), TSR_FLOAT64, TSR_SUM));
        o_.norm_allreduces += 1;
      }
      TSR_TRY(norm_reduce(usums_, 1));
      for (size_t g = 0; g < ng_; ++g) {
        if (!lamb_ && !popular_[g]) continue;  // classic LARS: its sums hold at any scale
        if (adapt_[g] && !std::isfinite(usums_[g])) return skip("group %zu: the update norm is not finite", g);
        sums_[3 * g + 2] = usums_[g];
      }
    }

    return TSR_SUCCESS;
  }

  // Steps 4-5, after check() succeeded: the update, and the parameters to
  // every rank.
  tsr_status apply() {
    // 4. Ratios and pass B.
    ratios(gs_);
    TSR_TRY(pass_b());
    o_.passes += 1;

    // 5. Everyone's updated slice to everyone.
    if (o_.dist == TSR_OPT_SHARDED) {
      unsigned char* p = static_cast<unsigned char*>(params_);
      TSR_TRY(allgatherv(world_, p + o_.lo * esize_, o_.local(), p, o_.counts.data(), o_.displs.data(), o_.type));
    }
    o_.last_clipped = o_.clip != 1.0;
    return TSR_SUCCESS;
  }

 private:
  // tsr_optimizer_set_norm_reduction: the assembled per-group sums (k per
  // group) times this rank's group weights, summed over the norm context's
  // ranks (one all-reduce of k*L float64 on its transport and ledger).
  tsr_status norm_reduce(std::vector<double>& v, size_t k) {
    if (o_.norm_ctx == nullptr) return TSR_SUCCESS;
    for (size_t g = 0; g < ng_; ++g)
      for (size_t j = 0; j < k; ++j) v[k * g + j] *= o_.norm_weight[g];
    TSR_TRY(allreduce(*o_.norm_ctx->world, v.data(), v.data(), v.size(), TSR_FLOAT64, TSR_SUM));
    o_.norm_allreduces += 1;
    return TSR_SUCCESS;
  }

  // The global gradient norm from per-group sums of G^2 (every `stride`-th
  // value), the same way on every route: groups in order. Sets the clip
  // factor, or skips the step.
  tsr_status clip_from(const std::vector<double>& v, size_t stride) {
    double g2 = 0;
    for (size_t g = 0; g < ng_; ++g) g2 += v[stride * g];
    o_.grad_norm = scale_ * std::sqrt(g2);
    if (!std::isfinite(g2)) return skip("the gradient norm is not finite (sum of squares %g)", g2);
    const double maxn = o_.hyper[0][TSR_OPT_MAX_GRAD_NORM];
    o_.clip = maxn > 0 && o_.grad_norm > maxn ? maxn / o_.grad_norm : 1.0;
    return TSR_SUCCESS;
  }

  tsr_status skip(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return fail(TSR_ERR_NUMERIC, "step %lld skipped: %s; parameters, state and step count are unchanged",
                static_cast<long long>(t_), why);
  }

  void coefs(double gs) {
    lcoef_.resize(ng_);
    for (size_t g = 0; g < ng_; ++g) lcoef_[g] = lamb_coef(o_.hyper[g], t_, gs);
    if (!lamb_) {  // pass A of the "popular" LARS momentum: the update at this scale
      pcoef_.resize(ng_);
      for (size_t g = 0; g < ng_; ++g) pcoef_[g] = popular_coef(o_.hyper[g], gs);
    }
  }

  // LARS "popular" momentum (MOMENTUM_MODE 2): v' = mu*v + d, w -= (lr*r)*upd.
  static LarsCoef popular_coef(const Values& h, double gs) {
    LarsCoef c{};
    c.gs = static_cast<float>(gs);
    c.wd = static_cast<float>(decay_of(h));
    c.mu = static_cast<float>(h[TSR_OPT_MOMENTUM]);
    c.a = 1.0f;
    c.b = 0.0f;
    c.nesterov = h[TSR_OPT_NESTEROV] == 1;
    c.has_v = h[TSR_OPT_MOMENTUM] != 0;
    return c;
  }

  // Pass A over items [a, b): all = G^2, w^2 and u^2 (LAMB) or G^2, w^2, G*w
  // (LARS); !all = u^2 only (LAMB, the clipped scale). Groups without
  // adaptation contribute G^2 (read g only) where `plain`, else nothing.
  tsr_status pass_a(size_t a, size_t b, bool all, bool plain = true) {
    const bool lamb = lamb_, bf16 = bf16_;
    uint64_t bytes = 0;
    for (size_t i = a; i < b; ++i) {
      const Item& it = o_.items[i];
      const uint64_t k = it.end - it.begin;
      const bool ad = adapt_[static_cast<size_t>(it.group)];
      const uint64_t ge = esize_;
      if (!ad) bytes += all && plain ? k * ge : 0;
      else if (lamb) bytes += k * (ge + 12);
      else if (popular_[static_cast<size_t>(it.group)]) bytes += k * (ge + 8);
      else bytes += all ? k * (ge + 4) : 0;
    }
    o_.step_bytes += bytes;
#if TSR_HAVE_CUDA
    if (dev_) return dev_pass_a(a, b, all, plain);
#endif
    for_items(o_, a, b, [&](size_t i) {
      const Item& it = o_.items[i];
      const size_t k = it.end - it.begin;
      Sums& s = o_.partial[i];
      if (!adapt_[static_cast<size_t>(it.group)]) {
        if (all && plain) s = {bf16 ? sumsq_bf16(gptr<uint16_t>(bufs_, it.begin), k) : sumsq_f32(gptr<float>(bufs_, it.begin), k), 0, 0};
        else s = Sums{};
        return;
      }
      const float* w = bufs_.w + (it.begin - bufs_.wbase);
      if (lamb) {
        const float* m = o_.m.data() + (it.begin - o_.lo);
        const float* v = o_.v.data() + (it.begin - o_.lo);
        const LambCoef& c = lcoef_[static_cast<size_t>(it.group)];
        if (bf16)
          s = all ? lamb_norms_bf16(gptr<uint16_t>(bufs_, it.begin), w, m, v, k, c)
                  : lamb_unorm_bf16(gptr<uint16_t>(bufs_, it.begin), w, m, v, k, c);
        else
          s = all ? lamb_norms_f32(gptr<float>(bufs_, it.begin), w, m, v, k, c)
                  : lamb_unorm_f32(gptr<float>(bufs_, it.begin), w, m, v, k, c);
      } else if (popular_[static_cast<size_t>(it.group)]) {
        const float* v = o_.m.data() + (it.begin - o_.lo);
        const LarsCoef& c = pcoef_[static_cast<size_t>(it.group)];
        s = bf16 ? lars_unorm_bf16(gptr<uint16_t>(bufs_, it.begin), w, v, k, c)
                 : lars_unorm_f32(gptr<float>(bufs_, it.begin), w, v, k, c);
      } else if (all) {
        s = bf16 ? lars_norms_bf16(gptr<uint16_t>(bufs_, it.begin), w, k) : lars_norms_f32(gptr<float>(bufs_, it.begin), w, k);
      }
    });
    return TSR_SUCCESS;
  }

  // Pass G over items [a, b): the gradients' sums of squares only.
  tsr_status pass_g(size_t a, size_t b) {
    uint64_t bytes = 0;
    for (size_t i = a; i < b; ++i) bytes += (o_.items[i].end - o_.items[i].begin) * esize_;
    o_.step_bytes += bytes;
#if TSR_HAVE_CUDA
    if (dev_) return dev_pass_g(a, b);
#endif
    const bool bf16 = bf16_;
    for_items(o_, a, b, [&](size_t i) {
      const Item& it = o_.items[i];
      const size_t k = it.end - it.begin;
      o_.partial[i] = {bf16 ? sumsq_bf16(gptr<uint16_t>(bufs_, it.begin), k) : sumsq_f32(gptr<float>(bufs_, it.begin), k),
                       0, 0};
    });
    return TSR_SUCCESS;
  }

  // Data parallel: every bucket's all-reduce starts at once (nonblocking, in
  // place on the caller's gradients); the first pass (A, or G) runs on each
  // bucket as soon as it has arrived, while the later ones are still in flight.
  tsr_status data_parallel_in(bool norm_first) {
    unsigned char* g = static_cast<unsigned char*>(grads_);
    bufs_.g = g;
    bufs_.gbase = 0;
    const size_t nb = o_.bucket_first.size() - 1;
    std::vector<Request> reqs(nb);
    const size_t e = o_.bucket;
    tsr_status st = TSR_SUCCESS;
    size_t started = 0;
    for (; started < nb && st == TSR_SUCCESS; ++started) {
      const size_t b0 = started * e, b1 = std::min(o_.n, b0 + e);
      st = allreduce(world_, g + b0 * esize_, g + b0 * esize_, b1 - b0, o_.type, TSR_SUM, &reqs[started]);
    }
    if (st != TSR_SUCCESS) {
      wait_all(world_, reqs.data(), started);
      return st;
    }
    for (size_t b = 0; b < nb; ++b) {
      st = wait(world_, &reqs[b]);
      if (st != TSR_SUCCESS) {
        wait_all(world_, reqs.data() + b + 1, nb - b - 1);
        return st;
      }
      if (norm_first) st = pass_g(o_.bucket_first[b], o_.bucket_first[b + 1]);
      else st = pass_a(o_.bucket_first[b], o_.bucket_first[b + 1], true);
      if (st != TSR_SUCCESS) {
        wait_all(world_, reqs.data() + b + 1, nb - b - 1);
        return st;
      }
      int done = 0;  // let MPI progress the buckets still in flight
      for (size_t q = b + 1; q < nb && q < b + 3; ++q) test(world_, &reqs[q], &done);
    }
    return TSR_SUCCESS;
  }

  void ratios(double gs) {
    if (lamb_) kfac_.resize(ng_);
    else lcoefs_.resize(ng_);
    for (size_t g = 0; g < ng_; ++g) {
      const Values& h = o_.hyper[g];
      double r = 1.0;
      if (lamb_) {
        if (adapt_[g]) {
          const double a = clampd(std::sqrt(sums_[3 * g + 1]), h[TSR_OPT_NORM_MIN], h[TSR_OPT_NORM_MAX]);
          const double b = std::sqrt(sums_[3 * g + 2]);
          if (a > 0 && b > 0) r = clampd(h[TSR_OPT_TRUST_COEFF] * a / b, h[TSR_OPT_TRUST_MIN], h[TSR_OPT_TRUST_MAX]);
        }
        kfac_[g] = static_cast<float>(lamb_factor(h, t_, o_.lr[g], r));
      } else {
        const double wd = decay_of(h);
        if (popular_[g]) {  // SimCLR classic_momentum=False: eta*|w| / (|upd| + eps)
          if (adapt_[g]) {
            const double wn = std::sqrt(sums_[3 * g + 1]), un = std::sqrt(sums_[3 * g + 2]);
            if (wn > 0 && un > 0)
              r = clampd(h[TSR_OPT_TRUST_COEFF] * wn / (un + h[TSR_OPT_EPS]), h[TSR_OPT_TRUST_MIN],
                         h[TSR_OPT_TRUST_MAX]);
          }
          LarsCoef c = popular_coef(h, gs);
          c.b = static_cast<float>(o_.lr[g] * r);
          lcoefs_[g] = c;
          o_.ratio[g] = r;
          continue;
        }
        if (adapt_[g]) {
          const double g2 = sums_[3 * g], w2 = sums_[3 * g + 1], gw = sums_[3 * g + 2];
          const double wn = std::sqrt(w2);
          double gn;
          if (h[TSR_OPT_LARS_DENOM] == 0) {
            gn = gs * std::sqrt(g2);
          } else {  // |gs*G + wd*w| from the three sums
            gn = std::sqrt(std::max(0.0, gs * gs * g2 + 2.0 * gs * wd * gw + wd * wd * w2));
          }
          if (wn > 0 && gn > 0) {
            const double den = h[TSR_OPT_LARS_DENOM] == 0 ? gn + wd * wn + h[TSR_OPT_EPS] : gn + h[TSR_OPT_EPS];
            r = clampd(h[TSR_OPT_TRUST_COEFF] * wn / den, h[TSR_OPT_TRUST_MIN], h[TSR_OPT_TRUST_MAX]);
          }
        }
        LarsCoef& c = lcoefs_[g];
        const double lr = o_.lr[g], mu = h[TSR_OPT_MOMENTUM];
        const bool paper = h[TSR_OPT_MOMENTUM_MODE] == 0;
        c.gs = static_cast<float>(gs);
        c.wd = static_cast<float>(wd);
        c.mu = static_cast<float>(mu);
        c.a = static_cast<float>(paper ? lr * r : r);
        c.b = static_cast<float>(paper ? 1.0 : lr);
        c.nesterov = h[TSR_OPT_NESTEROV] == 1;
        c.has_v = mu != 0;
      }
      o_.ratio[g] = r;
    }
  }

  tsr_status pass_b() {
    const bool lamb = lamb_, bf16 = bf16_;
    uint64_t bytes = 0;
    for (const Item& it : o_.items) {
      const uint64_t k = it.end - it.begin;
      if (lamb) bytes += k * (esize_ + 12 + 12 + (bf16 ? 2 : 0));
      else if (lcoefs_[static_cast<size_t>(it.group)].has_v) bytes += k * (esize_ + 8 + 8 + (bf16 ? 2 : 0));
      else bytes += k * (esize_ + 4 + 4 + (bf16 ? 2 : 0));
    }
    o_.step_bytes += bytes;
#if TSR_HAVE_CUDA
    if (dev_) return dev_pass_b();
#endif
    for_items(o_, 0, o_.items.size(), [&](size_t i) {
      const Item& it = o_.items[i];
      const size_t k = it.end - it.begin, g = static_cast<size_t>(it.group);
      float* w = bufs_.w + (it.begin - bufs_.wbase);
      float* m = o_.m.data() + (it.begin - o_.lo);
      uint16_t* p = bufs_.p ? bufs_.p + it.begin : nullptr;
      if (lamb) {
        float* v = o_.v.data() + (it.begin - o_.lo);
        if (bf16) lamb_update_bf16(gptr<uint16_t>(bufs_, it.begin), w, m, v, p, k, lcoef_[g], kfac_[g]);
        else lamb_update_f32(gptr<float>(bufs_, it.begin), w, m, v, k, lcoef_[g], kfac_[g]);
      } else {
        if (bf16) lars_update_bf16(gptr<uint16_t>(bufs_, it.begin), w, m, p, k, lcoefs_[g]);
        else lars_update_f32(gptr<float>(bufs_, it.begin), w, m, k, lcoefs_[g]);
      }
    });
    return TSR_SUCCESS;
  }

#if TSR_HAVE_CUDA
  // ---- The same passes on the device (optimizers/cuda): one launch over
  // the items [a, b), each item a task with the operation the CPU loop
  // above would run; the per-item sums come back into o_.partial.
  cuda::Task task(const Item& it, int32_t op) const {
    cuda::Task t{};
    t.g_off = it.begin - bufs_.gbase;
    t.w_off = it.begin - bufs_.wbase;
    t.s_off = it.begin - o_.lo;
    t.p_off = it.begin;
    t.n = static_cast<uint32_t>(it.end - it.begin);
    t.group = it.group;
    t.op = op;
    return t;
  }

  tsr_status dev_pass_a(size_t a, size_t b, bool all, bool plain) {
    std::vector<cuda::Task> tasks;
    tasks.reserve(b - a);
    for (size_t i = a; i < b; ++i) {
      const Item& it = o_.items[i];
      const size_t g = static_cast<size_t>(it.group);
      int32_t op;
      if (!adapt_[g]) op = all && plain ? cuda::kSumsq : cuda::kNone;
      else if (lamb_) op = all ? cuda::kLambNorms : cuda::kLambUnorm;
      else if (popular_[g]) op = cuda::kLarsUnorm;
      else op = all ? cuda::kLarsNorms : cuda::kNone;
      tasks.push_back(task(it, op));
    }
    return dev_->run.pass_a(tasks, bufs_.g, bf16_, bufs_.w, dev_->m_ptr(), dev_->v_ptr(), lcoef_.data(),
                            lamb_ ? nullptr : pcoef_.data(), ng_, o_.partial.data() + a);
  }

  tsr_status dev_pass_g(size_t a, size_t b) {
    std::vector<cuda::Task> tasks;
    tasks.reserve(b - a);
    for (size_t i = a; i < b; ++i) tasks.push_back(task(o_.items[i], cuda::kSumsq));
    return dev_->run.pass_a(tasks, bufs_.g, bf16_, bufs_.w, dev_->m_ptr(), dev_->v_ptr(), nullptr, nullptr, ng_,
                            o_.partial.data() + a);
  }

  tsr_status dev_pass_b() {
    std::vector<cuda::Task> tasks;
    tasks.reserve(o_.items.size());
    for (const Item& it : o_.items) tasks.push_back(task(it, lamb_ ? cuda::kLambUpdate : cuda::kLarsUpdate));
    TSR_TRY(dev_->run.pass_b(tasks, bufs_.g, bf16_, bufs_.w, dev_->m_ptr(), dev_->v_ptr(), bufs_.p,
                             lamb_ ? lcoef_.data() : nullptr, lamb_ ? kfac_.data() : nullptr,
                             lamb_ ? nullptr : lcoefs_.data(), ng_));
    o_.host_stale = true;
    return TSR_SUCCESS;
  }
#endif

  tsr_optimizer_s& o_;
  const Comm& world_;
  void* params_;
  void* grads_;
  const int64_t t_;
  const size_t ng_;
  size_t esize_ = 4;
  bool bf16_ = false, lamb_ = true;
  double scale_ = 1, gs_ = 1;
  Bufs bufs_{};
  std::vector<char> adapt_;
  std::vector<LambCoef> lcoef_;
  std::vector<LarsCoef> lcoefs_, pcoef_;
  std::vector<char> popular_;  // LARS groups with MOMENTUM_MODE 2
  bool unorm_ = false;         // some group's ratio needs the update norm (LAMB, popular LARS)
  std::vector<float> kfac_;
  std::vector<double> sums_, usums_;
#if TSR_HAVE_CUDA
  cuda::DeviceState* dev_ = nullptr;  // the state on the device (device steps)
#endif
};

// Local checks of a step, the learning rates, and the digest every rank must share.
tsr_status prepare_step(tsr_optimizer_s& o, const void* params, const void* grads, size_t count, int64_t t,
                        std::vector<Same>* same) {
  Hash h;  // the schedule's values
  if (count == TSR_COUNT_INVALID)
    return fail(TSR_ERR_SHAPE, "argument 'count' is TSR_COUNT_INVALID: the caller found a size error on this rank");
  if (count != o.n)
    return fail(TSR_ERR_SHAPE, "argument 'count' = %zu; the optimizer's groups hold %zu elements", count, o.n);
  if (o.n > 0 && params == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'params' is NULL");
  if (o.n > 0 && grads == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'grads' is NULL");
  const size_t bytes = o.n * tsr_dtype_size(o.type);
  const uintptr_t p0 = reinterpret_cast<uintptr_t>(params), g0 = reinterpret_cast<uintptr_t>(grads);
  if (o.n > 0 && p0 < g0 + bytes && g0 < p0 + bytes)
    return fail(TSR_ERR_INVALID_ARG, "arguments 'params' and 'grads' overlap");
  for (size_t g = 0; g < o.ngroups(); ++g) {
    const Values& v = o.hyper[g];
    if (v[TSR_OPT_TRUST_MIN] > v[TSR_OPT_TRUST_MAX])
      return fail(TSR_ERR_INVALID_ARG, "group %zu: TSR_OPT_TRUST_MIN = %g exceeds TSR_OPT_TRUST_MAX = %g", g,
                  v[TSR_OPT_TRUST_MIN], v[TSR_OPT_TRUST_MAX]);
    if (o.kind == TSR_OPT_LAMB && v[TSR_OPT_NORM_MIN] > v[TSR_OPT_NORM_MAX])
      return fail(TSR_ERR_INVALID_ARG, "group %zu: TSR_OPT_NORM_MIN = %g exceeds TSR_OPT_NORM_MAX = %g", g,
                  v[TSR_OPT_NORM_MIN], v[TSR_OPT_NORM_MAX]);
    double lr = v[TSR_OPT_LR];
    if (o.schedule) {
      lr = o.schedule(t, static_cast<int>(g), lr, o.schedule_user);
      if (!std::isfinite(lr) || lr < 0)
        return fail(TSR_ERR_INVALID_ARG, "the schedule returned %g for group %zu at step %lld; expected a finite "
                    "learning rate >= 0", lr, g, static_cast<long long>(t));
    }
    o.lr[g] = lr;
    if (o.schedule) h.add(lr);
  }
  if (o.hyper_dirty) {  // the parameters' digest, taken again only after they changed
    Hash hp;
    for (const Values& v : o.hyper)
      for (int p = 0; p < kParams; ++p)
        if (p != TSR_OPT_THREADS) hp.add(v[static_cast<size_t>(p)]);
    o.hyper_digest = hp.h;
    o.hyper_dirty = false;
  }
  *same = {{"the step number (steps taken or loaded, plus one)", t},
           {"a hyperparameter (tsr_optimizer_set_param, _set_group_param)",
            static_cast<int64_t>(o.hyper_digest & 0x7fffffffffffffffull), true},
           {"a learning rate of the schedule (tsr_optimizer_set_schedule)",
            static_cast<int64_t>(h.h & 0x7fffffffffffffffull), true}};
  return TSR_SUCCESS;
}

// Where this step's buffers live (issue 17): both host memory (the CPU
// kernels; a device state left by earlier steps is copied back first), or
// both memory of the device the context is bound to (the CUDA kernels on the
// context's stream, with the state moved to the device at the first such
// step). Sets o.on_device.
tsr_status device_mode(tsr_optimizer_s& o, const void* params, const void* grads) {
  o.on_device = false;
  device::Space sp = device::Space::host, sg = device::Space::host;
  TSR_TRY(device::check_buffer(o.ctx, params, "params", &sp));
  TSR_TRY(device::check_buffer(o.ctx, grads, "grads", &sg));
  if (o.n > 0 && sp != sg)
    return fail(TSR_ERR_INVALID_ARG, "argument 'params' is %s memory but 'grads' is %s memory; expected both on the "
                "host or both on the context's CUDA device", sp == device::Space::device ? "device" : "host",
                sg == device::Space::device ? "device" : "host");
#if TSR_HAVE_CUDA
  if (sp == device::Space::device && o.n > 0) {
    TSR_TRY(cuda::enter(o));
    o.on_device = true;
    return TSR_SUCCESS;
  }
  if (o.dev) TSR_TRY(cuda::leave(o));  // back to host buffers: the state follows
#endif
  return TSR_SUCCESS;
}

tsr_status step(tsr_optimizer opt, void* params, void* grads, size_t count) {
  TSR_TRY(check_optimizer(opt));
  tsr_optimizer_s& o = *opt;
  const Comm& world = *o.ctx->world;
  const int64_t t = o.step + 1;
  std::vector<Same> same;
  std::vector<double> lr_before = o.lr;
  const double clip_before = o.clip, norm_before = o.grad_norm;
  tsr_status local = prepare_step(o, params, grads, count, t, &same);
  if (local == TSR_SUCCESS) local = device_mode(o, params, grads);
  Stepper s(o, params, grads, t);
  // Replicated steps decide locally whether the norms are finite (nothing is
  // reduced): decide before the agreement, so that a non-finite value on one
  // rank skips the step on every rank (no second agreement, no extra bytes).
  const bool checked_first = o.dist == TSR_OPT_REPLICATED;
  // With a norm context the check reduces over norm_ctx: agree there first
  // on the local checks, so that a rank whose arguments fail never leaves
  // its norm_ctx peers waiting in the reduction (one small control
  // all-reduce on norm_ctx per step, replicated mode only).
  if (checked_first && o.norm_ctx != nullptr) local = agree(*o.norm_ctx->world, local);
  if (checked_first && local == TSR_SUCCESS) local = s.check();
  tsr_status st = agree(world, local, same);
  if (st == TSR_SUCCESS) {
    if (o.dist == TSR_OPT_DATA_PARALLEL) {  // buckets follow TSR_OPT_BUCKET_BYTES
      const size_t e = bucket_elems(o.hyper[0][TSR_OPT_BUCKET_BYTES], tsr_dtype_size(o.type));
      if (e != o.bucket || o.bucket_first.empty()) {
        o.bucket = e;
        o.bucket_first.clear();
        const size_t nb = o.n == 0 ? 0 : (o.n + e - 1) / e;
        size_t i = 0;
        for (size_t b = 0; b < nb; ++b) {
          o.bucket_first.push_back(i);
          while (i < o.items.size() && o.items[i].begin < (b + 1) * e) ++i;
        }
        o.bucket_first.push_back(o.items.size());
      }
    }
    o.last_skipped = false;
    st = checked_first ? s.apply() : s.run();
  } else if (st != TSR_ERR_NUMERIC) {
    o.lr = lr_before;
    o.clip = clip_before;
    o.grad_norm = norm_before;
    return st;
  }
  if (st == TSR_ERR_NUMERIC) {  // skipped (on every rank): parameters, state and step count unchanged
    o.last_skipped = true;
    o.skipped += 1;
    o.clip = 1.0;
  }
  if (st == TSR_SUCCESS) o.step = t;
  return st;
}

tsr_status set_one(tsr_optimizer_s& o, size_t g, tsr_opt_param p, double value) {
  o.hyper[g][static_cast<size_t>(p)] = value + 0.0;  // -0 is 0
  o.hyper_dirty = true;
  return TSR_SUCCESS;
}

tsr_status query(tsr_optimizer opt, tsr_opt_query what, int group, double* value) {
  TSR_TRY(check_optimizer(opt));
  TSR_CHECK_NOT_NULL(value);
  const tsr_optimizer_s& o = *opt;
  const bool per_group = what == TSR_OPTQ_GROUP_OFFSET || what == TSR_OPTQ_GROUP_SIZE ||
                         what == TSR_OPTQ_TRUST_RATIO || what == TSR_OPTQ_LR;
  if (per_group && (group < 0 || static_cast<size_t>(group) >= o.ngroups()))
    return fail(TSR_ERR_INVALID_ARG, "argument 'group' = %d; expected 0 <= group < %zu", group, o.ngroups());
  const size_t g = static_cast<size_t>(group);
  switch (what) {
    case TSR_OPTQ_KIND: *value = o.kind; break;
    case TSR_OPTQ_DIST: *value = o.dist; break;
    case TSR_OPTQ_PARAMS: *value = static_cast<double>(o.n); break;
    case TSR_OPTQ_GROUPS: *value = static_cast<double>(o.ngroups()); break;
    case TSR_OPTQ_GROUP_OFFSET: *value = static_cast<double>(o.offset[g]); break;
    case TSR_OPTQ_GROUP_SIZE: *value = static_cast<double>(o.offset[g + 1] - o.offset[g]); break;
    case TSR_OPTQ_SHARD_OFFSET: *value = static_cast<double>(o.lo); break;
    case TSR_OPTQ_SHARD_SIZE: *value = static_cast<double>(o.local()); break;
    case TSR_OPTQ_STEP: *value = static_cast<double>(o.step); break;
    case TSR_OPTQ_SKIPPED: *value = static_cast<double>(o.skipped); break;
    case TSR_OPTQ_LAST_SKIPPED: *value = o.last_skipped ? 1 : 0; break;
    case TSR_OPTQ_GRAD_NORM: *value = o.grad_norm; break;
    case TSR_OPTQ_CLIP_FACTOR: *value = o.clip; break;
    case TSR_OPTQ_TRUST_RATIO: *value = o.ratio[g]; break;
    case TSR_OPTQ_LR: *value = o.lr[g]; break;
    case TSR_OPTQ_PASSES: *value = o.passes; break;
    case TSR_OPTQ_NORM_ALLREDUCES: *value = o.norm_allreduces; break;
    case TSR_OPTQ_STEP_BYTES: *value = static_cast<double>(o.step_bytes); break;
    case TSR_OPTQ_STATE_BYTES:
      *value = static_cast<double>(4 * (o.m.size() + o.v.size() + o.master.size()) + o.gslice.size() +
                                   o.partial.size() * sizeof(Sums));
      break;
    case TSR_OPTQ_PARAM_TYPE: *value = o.type; break;
    default:
      return fail(TSR_ERR_INVALID_ARG, "argument 'what' = %d is not a tsr_opt_query", static_cast<int>(what));
  }
  return TSR_SUCCESS;
}

// The state array `which` of this optimizer, checked against `count` and
// the caller's buffer `buf` (named `name`: get_state's out, set_state's in):
// the array, or a failure naming the argument.
tsr_status state_array(tsr_optimizer_s& o, tsr_opt_state which, const void* buf, const char* name, size_t count,
                       Buffer<float>** b) {
  *b = nullptr;
  if (which == TSR_OPT_STATE_M) *b = &o.m;
  else if (which == TSR_OPT_STATE_V && o.kind == TSR_OPT_LAMB) *b = &o.v;
  else if (which == TSR_OPT_STATE_MASTER && o.type == TSR_BFLOAT16) *b = &o.master;
  if (!*b)
    return fail(TSR_ERR_INVALID_ARG, "argument 'which' = %d: this %s optimizer with %s parameters has no such state",
                static_cast<int>(which), o.kind == TSR_OPT_LAMB ? "LAMB" : "LARS", dtype_name(o.type));
  if (count != o.local())
    return fail(TSR_ERR_SHAPE, "argument 'count' = %zu; this rank holds %zu elements of state", count, o.local());
  if (count > 0 && buf == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", name);
  return TSR_SUCCESS;
}

tsr_status get_state(tsr_optimizer opt, tsr_opt_state which, float* out, size_t count) {
  TSR_TRY(check_optimizer(opt));
  tsr_optimizer_s& o = *opt;
  Buffer<float>* b = nullptr;
  TSR_TRY(state_array(o, which, out, "out", count, &b));
#if TSR_HAVE_CUDA
  TSR_TRY(cuda::sync_host(o));  // the device's state, if newer
#endif
  if (which == TSR_OPT_STATE_MASTER && !o.master_ready) {
    std::fill(out, out + count, 0.0f);  // not initialised before the first step
    return TSR_SUCCESS;
  }
  if (count > 0) std::memcpy(out, b->data(), count * sizeof(float));
  return TSR_SUCCESS;
}

tsr_status set_state(tsr_optimizer opt, tsr_opt_state which, const float* in, size_t count) {
  TSR_TRY(check_optimizer(opt));
  tsr_optimizer_s& o = *opt;
  Buffer<float>* b = nullptr;
  TSR_TRY(state_array(o, which, in, "in", count, &b));
#if TSR_HAVE_CUDA
  // The other arrays as the device has them, then the host copy is the
  // state: it goes to the device at the next device step (as after a load).
  TSR_TRY(cuda::sync_host(o));
  o.dev.reset();
  o.host_stale = false;
#endif
  if (count > 0) std::memcpy(b->data(), in, count * sizeof(float));
  if (which == TSR_OPT_STATE_MASTER) o.master_ready = true;
  return TSR_SUCCESS;
}

tsr_status set_step(tsr_optimizer opt, int64_t step) {
  TSR_TRY(check_optimizer(opt));
  if (step < 0) return fail(TSR_ERR_INVALID_ARG, "argument 'step' = %lld; expected >= 0", static_cast<long long>(step));
  opt->step = step;
  return TSR_SUCCESS;
}

tsr_status set_norm_reduction(tsr_optimizer opt, tsr_context norm_ctx, size_t ngroups, const double* weights) {
  TSR_TRY(check_optimizer(opt));
  tsr_optimizer_s& o = *opt;
  std::vector<double> w(o.ngroups(), 1.0);
  if (norm_ctx != nullptr) {
    TSR_TRY(check_context(norm_ctx));
    if (norm_ctx == o.ctx)
      return fail(TSR_ERR_INVALID_ARG, "argument 'norm_ctx' is the optimizer's own context; pass another one (the "
                  "tensor-parallel ranks)");
    if (ngroups != o.ngroups())
      return fail(TSR_ERR_INVALID_ARG, "argument 'ngroups' = %zu; the optimizer has %zu groups", ngroups, o.ngroups());
    if (weights != nullptr)
      for (size_t g = 0; g < ngroups; ++g) {
        if (!std::isfinite(weights[g]) || weights[g] < 0)
          return fail(TSR_ERR_INVALID_ARG, "argument 'weights': weights[%zu] = %g; expected a finite weight >= 0", g,
                      weights[g]);
        w[g] = weights[g];
      }
  }
  if (o.norm_ctx != nullptr) o.norm_ctx->live_optimizers -= 1;
  o.norm_ctx = norm_ctx;
  o.norm_weight = norm_ctx != nullptr ? w : std::vector<double>();
  if (norm_ctx != nullptr) norm_ctx->live_optimizers += 1;
  return TSR_SUCCESS;
}

}  // namespace
}  // namespace opt
}  // namespace tsr

using tsr::finish;

namespace {
tsr_context ctx_of(tsr_optimizer o) {
  return o != nullptr && o->magic == tsr_optimizer_s::kMagic ? o->ctx : nullptr;
}
}  // namespace

extern "C" {

tsr_status tsr_optimizer_create(tsr_context ctx, tsr_opt_preset preset, tsr_opt_dist dist, tsr_dtype param_type,
                                size_t ngroups, const size_t* group_sizes, tsr_optimizer* opt) {
  const tsr_status st = tsr::opt::create(ctx, preset, dist, param_type, ngroups, group_sizes, opt);
  return finish(ctx != nullptr && ctx->magic == tsr_context_s::kMagic ? ctx : nullptr, "tsr_optimizer_create", st);
}

tsr_status tsr_optimizer_destroy(tsr_optimizer* opt) {
  if (opt == nullptr)
    return finish(nullptr, "tsr_optimizer_destroy", tsr::fail(TSR_ERR_INVALID_ARG, "argument 'opt' is NULL"));
  if (*opt == nullptr) return TSR_SUCCESS;
  const tsr_status st = tsr::check_optimizer(*opt, "*opt");
  if (st != TSR_SUCCESS) return finish(nullptr, "tsr_optimizer_destroy", st);
  (*opt)->magic = 0;
  (*opt)->ctx->live_optimizers -= 1;
  if ((*opt)->norm_ctx != nullptr) (*opt)->norm_ctx->live_optimizers -= 1;
  delete *opt;
  *opt = nullptr;
  return TSR_SUCCESS;
}

tsr_status tsr_optimizer_set_param(tsr_optimizer opt, tsr_opt_param param, double value) {
  tsr_status st = tsr::check_optimizer(opt);
  if (st == TSR_SUCCESS) st = tsr::opt::check_value(opt->kind, param, value);
  if (st == TSR_SUCCESS)
    for (size_t g = 0; g < opt->ngroups(); ++g) tsr::opt::set_one(*opt, g, param, value);
  return finish(ctx_of(opt), "tsr_optimizer_set_param", st);
}

tsr_status tsr_optimizer_set_group_param(tsr_optimizer opt, int group, tsr_opt_param param, double value) {
  tsr_status st = tsr::check_optimizer(opt);
  if (st == TSR_SUCCESS && (group < 0 || static_cast<size_t>(group) >= opt->ngroups()))
    st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'group' = %d; expected 0 <= group < %zu", group, opt->ngroups());
  if (st == TSR_SUCCESS) st = tsr::opt::check_value(opt->kind, param, value);
  if (st == TSR_SUCCESS && tsr::opt::param_info(param)->global)
    st = tsr::fail(TSR_ERR_INVALID_ARG, "%s is optimizer-wide: set it with tsr_optimizer_set_param",
                   tsr::opt::param_info(param)->name);
  if (st == TSR_SUCCESS) tsr::opt::set_one(*opt, static_cast<size_t>(group), param, value);
  return finish(ctx_of(opt), "tsr_optimizer_set_group_param", st);
}

tsr_status tsr_optimizer_get_param(tsr_optimizer opt, int group, tsr_opt_param param, double* value) {
  tsr_status st = tsr::check_optimizer(opt);
  const tsr::opt::ParamInfo* pi = tsr::opt::param_info(param);
  if (st == TSR_SUCCESS && value == nullptr) st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'value' is NULL");
  if (st == TSR_SUCCESS && pi == nullptr)
    st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'param' = %d is not a tsr_opt_param", static_cast<int>(param));
  if (st == TSR_SUCCESS && pi->global) group = 0;
  if (st == TSR_SUCCESS && (group < 0 || static_cast<size_t>(group) >= opt->ngroups()))
    st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'group' = %d; expected 0 <= group < %zu", group, opt->ngroups());
  if (st == TSR_SUCCESS) *value = opt->hyper[static_cast<size_t>(group)][static_cast<size_t>(param)];
  return finish(ctx_of(opt), "tsr_optimizer_get_param", st);
}

tsr_status tsr_optimizer_param_bounds(tsr_opt_param param, tsr_opt_bounds* bounds) {
  const tsr::opt::ParamInfo* pi = tsr::opt::param_info(param);
  tsr_status st = TSR_SUCCESS;
  if (pi == nullptr)
    st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'param' = %d is not a tsr_opt_param", static_cast<int>(param));
  else if (bounds == nullptr)
    st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'bounds' is NULL");
  if (st == TSR_SUCCESS) {
    bounds->lower = pi->lower;
    bounds->upper = pi->upper;
    bounds->lower_open = pi->lower_open;
    bounds->upper_open = pi->upper_open;
    bounds->integer = pi->integer;
    bounds->kinds = pi->kinds;
    bounds->global = pi->global;
  }
  return finish(nullptr, "tsr_optimizer_param_bounds", st);
}

const char* tsr_optimizer_param_name(tsr_opt_param param) {
  const tsr::opt::ParamInfo* pi = tsr::opt::param_info(param);
  return pi ? pi->name : "unknown";
}

const char* tsr_optimizer_preset_name(tsr_opt_preset preset) {
  const tsr::opt::Preset* p = tsr::opt::preset_info(preset);
  return p ? p->name : "unknown";
}

tsr_status tsr_optimizer_set_schedule(tsr_optimizer opt, tsr_opt_schedule fn, void* user) {
  tsr_status st = tsr::check_optimizer(opt);
  if (st == TSR_SUCCESS) {
    opt->schedule = fn;
    opt->schedule_user = fn ? user : nullptr;
  }
  return finish(ctx_of(opt), "tsr_optimizer_set_schedule", st);
}

tsr_status tsr_optimizer_step(tsr_optimizer opt, void* params, void* grads, size_t count) {
  return finish(ctx_of(opt), "tsr_optimizer_step", tsr::opt::step(opt, params, grads, count));
}

tsr_status tsr_optimizer_query(tsr_optimizer opt, tsr_opt_query what, int group, double* value) {
  return finish(ctx_of(opt), "tsr_optimizer_query", tsr::opt::query(opt, what, group, value));
}

tsr_status tsr_optimizer_get_state(tsr_optimizer opt, tsr_opt_state which, float* out, size_t count) {
  return finish(ctx_of(opt), "tsr_optimizer_get_state", tsr::opt::get_state(opt, which, out, count));
}

tsr_status tsr_optimizer_set_state(tsr_optimizer opt, tsr_opt_state which, const float* in, size_t count) {
  return finish(ctx_of(opt), "tsr_optimizer_set_state", tsr::opt::set_state(opt, which, in, count));
}

tsr_status tsr_optimizer_set_step(tsr_optimizer opt, int64_t step) {
  return finish(ctx_of(opt), "tsr_optimizer_set_step", tsr::opt::set_step(opt, step));
}

tsr_status tsr_optimizer_set_norm_reduction(tsr_optimizer opt, tsr_context norm_ctx, size_t ngroups,
                                            const double* weights) {
  return finish(ctx_of(opt), "tsr_optimizer_set_norm_reduction",
                tsr::opt::set_norm_reduction(opt, norm_ctx, ngroups, weights));
}

}  // extern "C"

// The hyperparameter table (names, bounds, scope), the presets, and the pure
// layout arithmetic of the optimizers. docs/OPTIMIZERS.md has the same
// tables with their sources; tests/unit/test_optimizer_unit.cpp checks them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core.hpp"
#include "optimizer_impl.hpp"

namespace tsr {
namespace opt {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// name, lower, upper, lower_open, upper_open, integer, kinds, global
const ParamInfo kInfo[kParams] = {
    {"TSR_OPT_LR", 0, kInf, false, true, false, kBoth, false},
    {"TSR_OPT_WEIGHT_DECAY", 0, kInf, false, true, false, kBoth, false},
    {"TSR_OPT_DECAY", 0, 1, false, false, true, kBoth, false},
    {"TSR_OPT_ADAPT", 0, 2, false, false, true, kBoth, false},
    {"TSR_OPT_EPS", 0, kInf, false, true, false, kBoth, false},
    {"TSR_OPT_TRUST_COEFF", 0, kInf, true, true, false, kBoth, false},
    {"TSR_OPT_TRUST_MIN", 0, kInf, false, true, false, kBoth, false},
    {"TSR_OPT_TRUST_MAX", 0, kInf, true, false, false, kBoth, false},
    {"TSR_OPT_NORM_MIN", 0, kInf, false, true, false, kLambBit, false},
    {"TSR_OPT_NORM_MAX", 0, kInf, true, false, false, kLambBit, false},
    {"TSR_OPT_BETA1", 0, 1, false, true, false, kLambBit, false},
    {"TSR_OPT_BETA2", 0, 1, false, true, false, kLambBit, false},
    {"TSR_OPT_BIAS_CORRECTION", 0, 2, false, false, true, kLambBit, false},
    {"TSR_OPT_EPS_MODE", 0, 1, false, false, true, kLambBit, false},
    {"TSR_OPT_DECAY_MODE", 0, 1, false, false, true, kLambBit, false},
    {"TSR_OPT_GRAD_AVERAGING", 0, 1, false, false, true, kLambBit, false},
    {"TSR_OPT_MOMENTUM", 0, 1, false, true, false, kLarsBit, false},
    {"TSR_OPT_NESTEROV", 0, 1, false, false, true, kLarsBit, false},
    {"TSR_OPT_LARS_DENOM", 0, 1, false, false, true, kLarsBit, false},
    {"TSR_OPT_MOMENTUM_MODE", 0, 2, false, false, true, kLarsBit, false},
    {"TSR_OPT_MAX_GRAD_NORM", 0, kInf, false, true, false, kBoth, true},
    {"TSR_OPT_LOSS_SCALE", 0, kInf, true, true, false, kBoth, true},
    {"TSR_OPT_BUCKET_BYTES", 4096, 1073741824.0, false, false, true, kBoth, true},
    {"TSR_OPT_THREADS", 0, 4096, false, false, true, kBoth, true},
    {"TSR_OPT_EPS_ROOT", 0, kInf, false, true, false, kLambBit, false},
};

// The values every preset starts from; each preset then sets what its
// source fixes. Parameters of the other kind keep these values (unused).
Values base() {
  Values v{};
  v[TSR_OPT_LR] = 1e-3;
  v[TSR_OPT_WEIGHT_DECAY] = 0;
  v[TSR_OPT_DECAY] = 1;
  v[TSR_OPT_ADAPT] = 1;
  v[TSR_OPT_EPS] = 1e-6;
  v[TSR_OPT_TRUST_COEFF] = 1;
  v[TSR_OPT_TRUST_MIN] = 0;
  v[TSR_OPT_TRUST_MAX] = kInf;
  v[TSR_OPT_NORM_MIN] = 0;
  v[TSR_OPT_NORM_MAX] = kInf;
  v[TSR_OPT_BETA1] = 0.9;
  v[TSR_OPT_BETA2] = 0.999;
  v[TSR_OPT_BIAS_CORRECTION] = 1;
  v[TSR_OPT_EPS_MODE] = 0;
  v[TSR_OPT_DECAY_MODE] = 0;
  v[TSR_OPT_GRAD_AVERAGING] = 1;
  v[TSR_OPT_MOMENTUM] = 0.9;
  v[TSR_OPT_NESTEROV] = 0;
  v[TSR_OPT_LARS_DENOM] = 0;
  v[TSR_OPT_MOMENTUM_MODE] = 0;
  v[TSR_OPT_MAX_GRAD_NORM] = 0;
  v[TSR_OPT_LOSS_SCALE] = 1;
  v[TSR_OPT_BUCKET_BYTES] = 25.0 * 1024 * 1024;
  v[TSR_OPT_THREADS] = 0;
  v[TSR_OPT_EPS_ROOT] = 0;
  return v;
}

struct Setting {
  tsr_opt_param p;
  double v;
};
Preset make(tsr_opt_preset id, const char* name, tsr_opt_kind kind, std::initializer_list<Setting> s) {
  Preset p{id, name, kind, base()};
  if (kind == TSR_OPT_LARS) {  // LARS defaults differ from LAMB's in lr and eps
    p.values[TSR_OPT_LR] = 1.0;
    p.values[TSR_OPT_EPS] = 0;
    p.values[TSR_OPT_TRUST_COEFF] = 1e-3;
  }
  for (const Setting& x : s) p.values[x.p] = x.v;
  return p;
}

// docs/OPTIMIZERS.md, "Presets", gives the source of every value.
std::vector<Preset> make_presets() {
  return {
      // LAMB, You et al. 2019, Algorithm 2: eps outside sqrt(v^), decoupled
      // decay inside the ratio, bias correction, phi = identity, all layers.
      make(TSR_PRESET_LAMB_PAPER, "TSR_PRESET_LAMB_PAPER", TSR_OPT_LAMB, {{TSR_OPT_WEIGHT_DECAY, 0.01}}),
      // apex FusedLAMB: adam_w_mode, bias_correction, grad_averaging,
      // max_grad_norm 1.0, ratio only where weight decay is non-zero.
      make(TSR_PRESET_LAMB_APEX, "TSR_PRESET_LAMB_APEX", TSR_OPT_LAMB,
           {{TSR_OPT_WEIGHT_DECAY, 0.01}, {TSR_OPT_MAX_GRAD_NORM, 1.0}, {TSR_OPT_ADAPT, 2}}),
      make(TSR_PRESET_LAMB_NVLAMB, "TSR_PRESET_LAMB_NVLAMB", TSR_OPT_LAMB,
           {{TSR_OPT_WEIGHT_DECAY, 0.01}, {TSR_OPT_MAX_GRAD_NORM, 1.0}, {TSR_OPT_ADAPT, 1}}),
      // DeepSpeed FusedLamb: eps 1e-8 on the raw second moment, bias
      // correction applied to the step after the ratio, ratio in [0.01, 10].
      make(TSR_PRESET_LAMB_DEEPSPEED, "TSR_PRESET_LAMB_DEEPSPEED", TSR_OPT_LAMB,
           {{TSR_OPT_EPS, 1e-8}, {TSR_OPT_BIAS_CORRECTION, 2}, {TSR_OPT_TRUST_MIN, 0.01}, {TSR_OPT_TRUST_MAX, 10}}),
      // torch-optimizer Lamb: debias=False, clamp_value 10 on the weight norm.
      make(TSR_PRESET_LAMB_TORCH_OPTIMIZER, "TSR_PRESET_LAMB_TORCH_OPTIMIZER", TSR_OPT_LAMB,
           {{TSR_OPT_BIAS_CORRECTION, 0}, {TSR_OPT_NORM_MAX, 10}}),
      make(TSR_PRESET_LAMB_TFA, "TSR_PRESET_LAMB_TFA", TSR_OPT_LAMB, {}),
      make(TSR_PRESET_LAMB_OPTAX, "TSR_PRESET_LAMB_OPTAX", TSR_OPT_LAMB, {}),
      // LARS, You et al. 2017, Algorithm 1: |g| + beta*|w| denominator, no eps,
      // momentum with the learning rate inside.
      make(TSR_PRESET_LARS_PAPER, "TSR_PRESET_LARS_PAPER", TSR_OPT_LARS, {{TSR_OPT_WEIGHT_DECAY, 5e-4}}),
      // MLPerf TF2 LARS: epsilon 0 falls back to the Keras epsilon 1e-7.
      make(TSR_PRESET_LARS_MLPERF, "TSR_PRESET_LARS_MLPERF", TSR_OPT_LARS,
           {{TSR_OPT_WEIGHT_DECAY, 1e-4}, {TSR_OPT_EPS, 1e-7}}),
      make(TSR_PRESET_LARS_SIMCLR, "TSR_PRESET_LARS_SIMCLR", TSR_OPT_LARS, {{TSR_OPT_LARS_DENOM, 1}}),
      // timm Lars: lr 1.0, no momentum, eps 1e-8, torch-style momentum,
      // adapt only where weight decay is non-zero (always_adapt=False).
      make(TSR_PRESET_LARS_TIMM, "TSR_PRESET_LARS_TIMM", TSR_OPT_LARS,
           {{TSR_OPT_MOMENTUM, 0}, {TSR_OPT_EPS, 1e-8}, {TSR_OPT_MOMENTUM_MODE, 1}, {TSR_OPT_ADAPT, 2}}),
      make(TSR_PRESET_LARS_OPTAX, "TSR_PRESET_LARS_OPTAX", TSR_OPT_LARS, {{TSR_OPT_LARS_DENOM, 1}}),
      // SimCLR lars_optimizer.py with classic_momentum=False (the "popular"
      // form): momentum on the (decayed) gradient, the ratio from the norm of
      // the momentum update, eeta 1e-3, no epsilon (google-research/simclr
      // 036ea7ba).
      make(TSR_PRESET_LARS_SIMCLR_POPULAR, "TSR_PRESET_LARS_SIMCLR_POPULAR", TSR_OPT_LARS,
           {{TSR_OPT_LARS_DENOM, 1}, {TSR_OPT_MOMENTUM_MODE, 2}, {TSR_OPT_EPS, 0}}),
  };
}

std::string fmt_bound(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

}  // namespace

const ParamInfo* param_info(int param) {
  if (param < 0 || param >= kParams) return nullptr;
  return &kInfo[param];
}

tsr_status check_value(tsr_opt_kind kind, int param, double value) {
  const ParamInfo* pi = param_info(param);
  if (!pi) return fail(TSR_ERR_INVALID_ARG, "argument 'param' = %d is not a tsr_opt_param", param);
  if (!(pi->kinds & (1u << kind)))
    return fail(TSR_ERR_INVALID_ARG, "%s applies to %s only, not to this %s optimizer", pi->name,
                kind == TSR_OPT_LAMB ? "LARS" : "LAMB", kind == TSR_OPT_LAMB ? "LAMB" : "LARS");
  const bool below = pi->lower_open ? !(value > pi->lower) : !(value >= pi->lower);
  const bool above = pi->upper_open ? !(value < pi->upper) : !(value <= pi->upper);
  if (std::isnan(value) || below || above)
    return fail(TSR_ERR_INVALID_ARG, "%s = %g is out of bounds: expected %s%s, %s%s", pi->name, value,
                pi->lower_open ? "(" : "[", fmt_bound(pi->lower).c_str(), fmt_bound(pi->upper).c_str(),
                pi->upper_open ? ")" : "]");
  if (pi->integer && value != std::floor(value))
    return fail(TSR_ERR_INVALID_ARG, "%s = %g must be an integer in [%s, %s]", pi->name, value,
                fmt_bound(pi->lower).c_str(), fmt_bound(pi->upper).c_str());
  return TSR_SUCCESS;
}

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = make_presets();
  return all;
}

const Preset* preset_info(int preset) {
  for (const Preset& p : presets())
    if (static_cast<int>(p.id) == preset) return &p;
  return nullptr;
}

void slices(size_t n, int p, std::vector<size_t>* counts, std::vector<size_t>* displs) {
  const size_t q = static_cast<size_t>(p);
  counts->assign(q, 0);
  displs->assign(q, 0);
  size_t at = 0;
  for (size_t r = 0; r < q; ++r) {
    (*counts)[r] = n / q + (r < n % q ? 1 : 0);
    (*displs)[r] = at;
    at += (*counts)[r];
  }
}

std::vector<Item> cut(const std::vector<size_t>& offset, size_t lo, size_t hi, size_t chunk) {
  std::vector<Item> items;
  const size_t ng = offset.size() - 1;
  for (size_t g = 0; g < ng; ++g) {
    size_t b = std::max(offset[g], lo);
    const size_t e = std::min(offset[g + 1], hi);
    while (b < e) {
      const size_t next = std::min(e, (b / chunk + 1) * chunk);
      items.push_back({static_cast<int>(g), b, next});
      b = next;
    }
  }
  return items;
}

size_t bucket_elems(double bucket_bytes, size_t elem_size) {
  const size_t e = static_cast<size_t>(bucket_bytes) / elem_size / kChunk * kChunk;
  return std::max(e, kChunk);
}

template <class T>
bool Buffer<T>::allocate(size_t n) {
  p_.reset();
  n_ = 0;
  if (n == 0) return true;
  if (n > (SIZE_MAX - 64) / sizeof(T)) return false;
  const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
  void* mem = std::aligned_alloc(64, bytes);
  if (!mem) return false;
  std::memset(mem, 0, bytes);
  p_.reset(static_cast<T*>(mem));
  n_ = n;
  return true;
}

template <class T>
void Buffer<T>::Free::operator()(T* p) const {
  std::free(p);
}

template class Buffer<float>;
template class Buffer<unsigned char>;

}  // namespace opt
}  // namespace tsr

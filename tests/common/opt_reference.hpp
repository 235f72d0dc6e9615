// An independent float64 implementation of LAMB and LARS, written from the
// papers' formulas (You et al. 2019, Algorithm 2; You et al. 2017,
// Algorithm 1) with the variants docs/OPTIMIZERS.md lists, element by
// element, for the optimizer tests. It shares no code with optimizers/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tessera/optimizer.h"

namespace tsr_test {

// Every hyperparameter of one group, indexed by tsr_opt_param.
using Hyper = std::vector<double>;

struct RefOptimizer {
  tsr_opt_kind kind = TSR_OPT_LAMB;
  std::vector<size_t> off;      // group offsets, ngroups + 1
  std::vector<Hyper> hyper;     // per group
  std::vector<double> w, m, v;  // m: LAMB first moment / LARS momentum
  int64_t t = 0, skipped = 0;
  // Of the last step:
  double grad_norm = 0, clip = 1;
  std::vector<double> ratio, lr;

  RefOptimizer(tsr_opt_kind k, const std::vector<size_t>& sizes, const std::vector<float>& w0) : kind(k) {
    off.assign(sizes.size() + 1, 0);
    for (size_t g = 0; g < sizes.size(); ++g) off[g + 1] = off[g] + sizes[g];
    w.assign(w0.begin(), w0.end());
    m.assign(w.size(), 0.0);
    v.assign(w.size(), 0.0);
    ratio.assign(sizes.size(), 1.0);
    lr.assign(sizes.size(), 0.0);
  }

  static double clamp(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }
  double h(size_t g, tsr_opt_param p) const { return hyper[g][static_cast<size_t>(p)]; }
  double decay(size_t g) const { return h(g, TSR_OPT_DECAY) == 1 ? h(g, TSR_OPT_WEIGHT_DECAY) : 0.0; }
  bool adapt(size_t g) const {
    const double a = h(g, TSR_OPT_ADAPT);
    return a == 1 || (a == 2 && decay(g) > 0);
  }

  // One step with the averaged, unscaled gradient `grad` (before clipping)
  // and the per-group learning rates lrs. Returns false (and changes
  // nothing but the skip counter) if the gradient norm is not finite.
  bool step(const std::vector<double>& grad, const std::vector<double>& lrs) {
    double ss = 0;
    for (double x : grad) ss += x * x;
    grad_norm = std::sqrt(ss);
    if (!std::isfinite(ss)) {
      ++skipped;
      clip = 1;
      return false;
    }
    const double maxn = hyper[0][TSR_OPT_MAX_GRAD_NORM];
    clip = maxn > 0 && grad_norm > maxn ? maxn / grad_norm : 1.0;
    ++t;
    lr = lrs;
    for (size_t g = 0; g + 1 < off.size(); ++g) (kind == TSR_OPT_LAMB ? lamb(g, grad) : lars(g, grad));
    return true;
  }

  // LAMB, Algorithm 2, with the variants: L2 or decoupled decay, eps inside
  // or outside the root, bias correction none / on m and v / after the ratio
  // (DeepSpeed), grad averaging, phi clamp, ratio clamp, trust coefficient.
  void lamb(size_t g, const std::vector<double>& grad) {
    const double b1 = h(g, TSR_OPT_BETA1), b2 = h(g, TSR_OPT_BETA2), eps = h(g, TSR_OPT_EPS), wd = decay(g);
    const int bc = static_cast<int>(h(g, TSR_OPT_BIAS_CORRECTION));
    const bool l2 = h(g, TSR_OPT_DECAY_MODE) == 1, inside = h(g, TSR_OPT_EPS_MODE) == 1;
    const double td = static_cast<double>(t);
    std::vector<double> u(off[g + 1] - off[g]);
    double wn2 = 0, un2 = 0;
    for (size_t i = off[g]; i < off[g + 1]; ++i) {
      double gi = clip * grad[i];
      if (l2) gi += wd * w[i];
      m[i] = b1 * m[i] + (h(g, TSR_OPT_GRAD_AVERAGING) == 1 ? 1 - b1 : 1.0) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      const double mh = bc == 1 ? m[i] / (1 - std::pow(b1, td)) : m[i];
      const double vh = bc == 1 ? v[i] / (1 - std::pow(b2, td)) : v[i];
      // optax scale_by_adam: mu_hat / (sqrt(nu_hat + eps_root) + eps).
      const double root = h(g, TSR_OPT_EPS_ROOT);
      const double den = inside ? std::sqrt(vh + root + eps) : std::sqrt(vh + root) + eps;
      const double ui = mh / den + (l2 ? 0.0 : wd * w[i]);
      u[i - off[g]] = ui;
      wn2 += w[i] * w[i];
      un2 += ui * ui;
    }
    double r = 1;
    if (adapt(g)) {
      const double phi = clamp(std::sqrt(wn2), h(g, TSR_OPT_NORM_MIN), h(g, TSR_OPT_NORM_MAX));
      const double un = std::sqrt(un2);
      if (phi > 0 && un > 0) r = clamp(h(g, TSR_OPT_TRUST_COEFF) * phi / un, h(g, TSR_OPT_TRUST_MIN), h(g, TSR_OPT_TRUST_MAX));
    }
    ratio[g] = r;
    double step = lr[g] * r;
    if (bc == 2) step *= std::sqrt(1 - std::pow(b2, td)) / (1 - std::pow(b1, td));
    for (size_t i = off[g]; i < off[g + 1]; ++i) w[i] -= step * u[i - off[g]];
  }

  // LARS, Algorithm 1: local lr = eta*|w| / (|g| + beta*|w| + eps) (or
  // |g + beta*w| + eps), momentum with the learning rate inside (paper) or
  // after (torch), Nesterov.
  void lars(size_t g, const std::vector<double>& grad) {
    const double wd = decay(g), mu = h(g, TSR_OPT_MOMENTUM), eps = h(g, TSR_OPT_EPS);
    if (h(g, TSR_OPT_MOMENTUM_MODE) == 2) return lars_popular(g, grad);
    double wn2 = 0, gn2 = 0, dn2 = 0;
    for (size_t i = off[g]; i < off[g + 1]; ++i) {
      const double gi = clip * grad[i], di = gi + wd * w[i];
      wn2 += w[i] * w[i];
      gn2 += gi * gi;
      dn2 += di * di;
    }
    const double wn = std::sqrt(wn2), gn = std::sqrt(gn2), dn = std::sqrt(dn2);
    double r = 1;
    if (adapt(g)) {
      const bool paper = h(g, TSR_OPT_LARS_DENOM) == 0;
      const double gnorm = paper ? gn : dn;
      if (wn > 0 && gnorm > 0) {
        const double den = paper ? gn + wd * wn + eps : dn + eps;
        r = clamp(h(g, TSR_OPT_TRUST_COEFF) * wn / den, h(g, TSR_OPT_TRUST_MIN), h(g, TSR_OPT_TRUST_MAX));
      }
    }
    ratio[g] = r;
    const bool paper_momentum = h(g, TSR_OPT_MOMENTUM_MODE) == 0, nesterov = h(g, TSR_OPT_NESTEROV) == 1;
    for (size_t i = off[g]; i < off[g + 1]; ++i) {
      const double di = clip * grad[i] + wd * w[i];
      if (paper_momentum) {
        m[i] = mu * m[i] + lr[g] * r * di;
        w[i] -= nesterov ? mu * m[i] + lr[g] * r * di : m[i];
      } else {
        m[i] = mu * m[i] + r * di;
        w[i] -= lr[g] * (nesterov ? r * di + mu * m[i] : m[i]);
      }
      if (mu == 0) m[i] = 0;  // tessera keeps no momentum buffer without momentum
    }
  }

  // SimCLR lars_optimizer.py, classic_momentum=False:
  //   grad += weight_decay * param            (where decay applies)
  //   next_v = momentum * v + grad
  //   update = nesterov ? momentum * next_v + grad : next_v
  //   trust_ratio = eeta * |param| / |update|  (1 where either norm is 0)
  //   param -= learning_rate * trust_ratio * update
  // (plus tessera's eps in the denominator and ratio clamp, 0 and none here).
  void lars_popular(size_t g, const std::vector<double>& grad) {
    const double wd = decay(g), mu = h(g, TSR_OPT_MOMENTUM), eps = h(g, TSR_OPT_EPS);
    const bool nesterov = h(g, TSR_OPT_NESTEROV) == 1;
    std::vector<double> upd(off[g + 1] - off[g]);
    double wn2 = 0, un2 = 0;
    for (size_t i = off[g]; i < off[g + 1]; ++i) {
      const double di = clip * grad[i] + wd * w[i];
      m[i] = mu * m[i] + di;
      const double ui = nesterov ? mu * m[i] + di : m[i];
      upd[i - off[g]] = ui;
      wn2 += w[i] * w[i];
      un2 += ui * ui;
    }
    double r = 1;
    const double wn = std::sqrt(wn2), un = std::sqrt(un2);
    if (adapt(g) && wn > 0 && un > 0)
      r = clamp(h(g, TSR_OPT_TRUST_COEFF) * wn / (un + eps), h(g, TSR_OPT_TRUST_MIN), h(g, TSR_OPT_TRUST_MAX));
    ratio[g] = r;
    for (size_t i = off[g]; i < off[g + 1]; ++i) {
      w[i] -= lr[g] * r * upd[i - off[g]];
      if (mu == 0) m[i] = 0;
    }
  }
};

}  // namespace tsr_test

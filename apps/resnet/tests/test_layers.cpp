// Finite-difference gradient tests, in double, for every layer of the kit.
//
// For a layer y = f(x, p) and a fixed random r, the scalar L = sum(r * y)
// has dL/dx = backward(dy = r). Each entry of the analytic gradient is
// compared with the central difference (L(x + h) - L(x - h)) / 2h, h = 1e-5.
// Tolerance: |analytic - numeric| <= 1e-7 * max(1, max|analytic|). Why: in
// double the central difference has truncation error ~h^2 |f'''| ~ 1e-10 for
// these O(1) smooth functions and rounding error ~eps*|L|/h ~ 1e-11*|L|
// (|L| <= 1e2 here), so 1e-7 leaves a margin of 100x or more, while any
// error in a formula (a wrong index, a missing term, a factor) is O(1e-2) or
// larger. ReLU is tested at points at least 1e-3 away from its kink.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "../data.hpp"
#include "../layers.hpp"

using namespace resnet;
using V = std::vector<double>;

static int failures = 0;

static V rnd(std::size_t n, std::uint64_t seed, double lo = -1, double hi = 1) {
  V v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * ((mix64(seed * 1000003 + i) >> 11) * (1.0 / 9007199254740992.0));
  return v;
}

static double dot(const V& a, const V& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Compare analytic gradient `g` of loss() with respect to the entries of v.
static void check(const std::string& name, V& v, const V& g, const std::function<double()>& loss) {
  const double h = 1e-5;
  double gmax = 0, err = 0;
  for (double x : g) gmax = std::max(gmax, std::fabs(x));
  // At most 400 entries, spread over the array.
  std::size_t stride = v.size() > 400 ? v.size() / 400 : 1;
  for (std::size_t i = 0; i < v.size(); i += stride) {
    double keep = v[i];
    v[i] = keep + h;
    double lp = loss();
    v[i] = keep - h;
    double lm = loss();
    v[i] = keep;
    err = std::max(err, std::fabs((lp - lm) / (2 * h) - g[i]));
  }
  double tol = 1e-7 * std::max(1.0, gmax);
  bool ok = err <= tol && gmax > 0;
  std::printf("%-44s max|grad| %.3e  max err %.3e  tol %.1e  %s\n", name.c_str(), gmax, err, tol,
              ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

static void test_conv(int C, int N, int H, int W, int K, int R, int stride, int pad) {
  ConvShape s{C, N, H, W, K, R, stride, pad};
  V x = rnd(static_cast<std::size_t>(C) * N * H * W, 1), w = rnd(static_cast<std::size_t>(K) * C * R * R, 2);
  V r = rnd(s.out_elems(), 3), y(s.out_elems()), col(s.col_elems());  // the whole batch: any chunk fits
  auto loss = [&] {
    conv_forward(s, x.data(), w.data(), y.data(), col.data());
    return dot(r, y);
  };
  V dw(w.size(), 0.0), dx(x.size(), 0.0);
  conv_backward(s, x.data(), w.data(), r.data(), dw.data(), dx.data(), col.data());
  char name[96];
  std::snprintf(name, sizeof name, "conv %dx%d s%d p%d C%d K%d %dx%d: ", R, R, stride, pad, C, K, H, W);
  check(std::string(name) + "dx", x, dx, loss);
  check(std::string(name) + "dw", w, dw, loss);
  // The weight gradient accumulates (+=).
  V dw2(w.size(), 1.0);
  conv_backward(s, x.data(), w.data(), r.data(), dw2.data(), static_cast<double*>(nullptr), col.data());
  double e = 0;
  for (std::size_t i = 0; i < w.size(); ++i) e = std::max(e, std::fabs(dw2[i] - 1.0 - dw[i]));
  if (e > 1e-12) {
    std::printf("conv backward does not accumulate into dw (err %.3e) FAILED\n", e);
    ++failures;
  }
}

// The direct float kernels (conv_direct.hpp) against the im2col path in
// double (itself checked by finite differences above) on odd shapes: the
// forward output, the input gradient (direct for stride 1) and the weight
// gradient (direct for 3x3 and 1x1; accumulated), at each vector width the CPU has (16: AVX-512, 8: AVX2), and the
// float im2col path for comparison. Tolerance 1e-5 * max(1, max|ref|): float
// rounding of sums of at most C*R*R = 576 terms of size <= 1 is ~1e-6, a
// wrong index or a missing tap is O(1e-1).
static void test_direct(int C, int N, int H, int W, int K, int R, int stride, int pad) {
  ConvShape sd{C, N, H, W, K, R, stride, pad};
  V xd = rnd(static_cast<std::size_t>(C) * N * H * W, 11), wd = rnd(static_cast<std::size_t>(K) * C * R * R, 12);
  V dyd = rnd(sd.out_elems(), 13), yd(sd.out_elems()), dxd(xd.size()), dwd(wd.size(), 0.0), cold(sd.col_elems());
  conv_forward(sd, xd.data(), wd.data(), yd.data(), cold.data());
  conv_backward(sd, xd.data(), wd.data(), dyd.data(), dwd.data(), dxd.data(), cold.data());
  using F = std::vector<float>;
  auto tof = [](const V& v) { return F(v.begin(), v.end()); };
  F x = tof(xd), w = tof(wd), dy = tof(dyd);
  auto err = [](const F& a, const V& ref) {
    double m = 1, e = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      m = std::max(m, std::fabs(ref[i]));
      e = std::max(e, std::fabs(a[i] - ref[i]));
    }
    return e / m;
  };
  const int best = set_conv_direct_width(16);
  for (int width : {16, 8, 0}) {
    if (width > best || set_conv_direct_width(width) != width) continue;
    // y and dx start as garbage (overwritten), dw as 0.5 (accumulated into).
    F y(yd.size(), 7.0f), dx(xd.size(), 7.0f), dw(wd.size(), 0.5f), col(sd.col_elems());
    conv_forward(sd, x.data(), w.data(), y.data(), col.data());
    conv_backward(sd, x.data(), w.data(), dy.data(), dw.data(), dx.data(), col.data());
    for (float& v : dw) v -= 0.5f;
    double ey = err(y, yd), ex = err(dx, dxd), ew = err(dw, dwd);
    bool ok = ey <= 1e-5 && ex <= 1e-5 && ew <= 1e-5;
    char name[128];
    std::snprintf(name, sizeof name, "float %s w%-2d %dx%d s%d p%d C%d K%d N%d %dx%d", width ? "direct" : "im2col",
                  width, R, R, stride, pad, C, K, N, H, W);
    std::printf("%-52s rel err y %.1e dx %.1e dw %.1e  %s\n", name, ey, ex, ew, ok ? "ok" : "FAILED");
    if (!ok) ++failures;
  }
  set_conv_direct_width(best);
}

// Batch norm in training mode, optionally split into `parts` replicas whose
// statistics are summed (synchronised batch norm simulated in one process):
// the result must be the full-batch batch norm.
static void test_bn(int parts) {
  const int C = 3, N = 8, HW = 5;
  const std::size_t m = static_cast<std::size_t>(N) * HW, mp = m / parts;
  V x = rnd(C * m, 11, -2, 3), gamma = rnd(C, 12, 0.5, 1.5), beta = rnd(C, 13), r = rnd(C * m, 14);
  V y(C * m), mean(C * parts), rstd(C * parts);
  // Replica q holds samples [q*N/parts, (q+1)*N/parts) of every channel.
  auto slice = [&](const V& full, int q) {
    V s(C * mp);
    for (int c = 0; c < C; ++c)
      for (std::size_t i = 0; i < mp; ++i) s[c * mp + i] = full[c * m + q * mp + i];
    return s;
  };
  auto unslice = [&](V& full, const V& s, int q) {
    for (int c = 0; c < C; ++c)
      for (std::size_t i = 0; i < mp; ++i) full[c * m + q * mp + i] = s[c * mp + i];
  };
  auto forward = [&]() {
    std::vector<V> sums(parts, V(2 * C));
    V tot(2 * C, 0.0);
    for (int q = 0; q < parts; ++q) {
      V xs = slice(x, q);
      bn_sums(C, mp, xs.data(), sums[q].data());
      for (int i = 0; i < 2 * C; ++i) tot[i] += sums[q][i];
    }
    for (int q = 0; q < parts; ++q) {
      V xs = slice(x, q), ys(C * mp);
      bn_forward_apply(C, mp, double(m), tot.data(), 1e-5, xs.data(), gamma.data(), beta.data(), ys.data(),
                       mean.data() + q * C, rstd.data() + q * C);
      unslice(y, ys, q);
    }
  };
  auto loss = [&] {
    forward();
    return dot(r, y);
  };
  forward();
  V dx(C * m), dgamma(C, 0.0), dbeta(C, 0.0);
  std::vector<V> local(parts, V(2 * C));
  V tot(2 * C, 0.0);
  for (int q = 0; q < parts; ++q) {
    V xs = slice(x, q), rs = slice(r, q);
    bn_backward_sums(C, mp, rs.data(), xs.data(), mean.data() + q * C, rstd.data() + q * C, local[q].data());
    for (int i = 0; i < 2 * C; ++i) tot[i] += local[q][i];
  }
  for (int q = 0; q < parts; ++q) {
    V xs = slice(x, q), rs = slice(r, q), dxs(C * mp);
    bn_backward_apply(C, mp, double(m), tot.data(), local[q].data(), rs.data(), xs.data(), mean.data() + q * C,
                      rstd.data() + q * C, gamma.data(), dxs.data(), dgamma.data(), dbeta.data());
    unslice(dx, dxs, q);
  }
  std::string p = "batchnorm train, " + std::to_string(parts) + " replica(s): ";
  check(p + "dx", x, dx, loss);
  check(p + "dgamma", gamma, dgamma, loss);
  check(p + "dbeta", beta, dbeta, loss);

  // Running statistics: unbiased variance, momentum 0.1, from (0, 1).
  V rm(C, 0.0), rv(C, 1.0), sx(2 * C);
  bn_sums(C, m, x.data(), sx.data());
  bn_update_running(C, double(m), sx.data(), 0.1, rm.data(), rv.data());
  for (int c = 0; c < C; ++c) {
    double mu = 0, v = 0;
    for (std::size_t i = 0; i < m; ++i) mu += x[c * m + i];
    mu /= m;
    for (std::size_t i = 0; i < m; ++i) v += (x[c * m + i] - mu) * (x[c * m + i] - mu);
    v /= (m - 1);
    if (std::fabs(rm[c] - 0.1 * mu) > 1e-12 || std::fabs(rv[c] - (0.9 + 0.1 * v)) > 1e-12) {
      std::printf("batchnorm running statistics wrong on channel %d FAILED\n", c);
      ++failures;
    }
  }
}

static void test_bn_eval() {
  const int C = 2;
  const std::size_t m = 6;
  V x = rnd(C * m, 21), gamma = rnd(C, 22), beta = rnd(C, 23), rm = rnd(C, 24), rv = rnd(C, 25, 0.5, 2);
  V y(C * m);
  bn_forward_eval(C, m, 1e-5, x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), y.data());
  double e = 0;
  for (int c = 0; c < C; ++c)
    for (std::size_t i = 0; i < m; ++i)
      e = std::max(e, std::fabs(y[c * m + i] - (gamma[c] * (x[c * m + i] - rm[c]) / std::sqrt(rv[c] + 1e-5) + beta[c])));
  std::printf("%-44s max err %.3e  %s\n", "batchnorm eval against the formula", e, e < 1e-12 ? "ok" : "FAILED");
  if (e >= 1e-12) ++failures;
}

static void test_relu_add() {
  const std::size_t n = 50;
  V x = rnd(n, 31), b = rnd(n, 32), r = rnd(n, 33), y(n);
  for (double& v : x)
    if (std::fabs(v) < 1e-3) v = 0.5;  // away from the kink
  auto loss = [&] {
    add_forward(n, x.data(), b.data(), y.data());
    relu_forward(n, y.data());
    return dot(r, y);
  };
  loss();
  V dx(n);
  relu_backward(n, y.data(), r.data(), dx.data());
  for (std::size_t i = 0; i < n; ++i)
    if (std::fabs(x[i] + b[i]) < 1e-3) b[i] += 0.01;
  loss();
  relu_backward(n, y.data(), r.data(), dx.data());
  check("relu(x + b) (residual add then ReLU): dx", x, dx, loss);
  check("relu(x + b) (residual add then ReLU): db", b, dx, loss);
}

static void test_gap_linear_xent() {
  const int C = 4, N = 3, HW = 6, K = 5;
  V x = rnd(static_cast<std::size_t>(C) * N * HW, 41), w = rnd(static_cast<std::size_t>(K) * C, 42),
    b = rnd(K, 43);
  std::vector<int> labels = {1, 4, 0};
  V pooled(C * N), logits(N * K), dlog(N * K), dpool(C * N), dx(x.size()), dw(w.size(), 0.0), db(K, 0.0);
  const double scale = 1.0 / N;
  auto loss = [&] {
    gap_forward(C, N, HW, x.data(), pooled.data());
    linear_forward(C, N, K, pooled.data(), w.data(), b.data(), logits.data());
    return scale * softmax_xent(N, K, logits.data(), labels.data(), scale, static_cast<double*>(nullptr), nullptr);
  };
  loss();
  int correct = 0;
  softmax_xent(N, K, logits.data(), labels.data(), scale, dlog.data(), &correct);
  linear_backward(C, N, K, pooled.data(), w.data(), dlog.data(), dw.data(), db.data(), dpool.data());
  gap_backward(C, N, HW, dpool.data(), dx.data());
  check("GAP + linear + softmax cross-entropy: dx", x, dx, loss);
  check("GAP + linear + softmax cross-entropy: dw", w, dw, loss);
  check("GAP + linear + softmax cross-entropy: db", b, db, loss);
  // Cross-entropy against a direct evaluation, and the arg-max count.
  double direct = 0;
  int ref_correct = 0;
  for (int n = 0; n < N; ++n) {
    double s = 0;
    int arg = 0;
    for (int k = 0; k < K; ++k) {
      s += std::exp(logits[n * K + k]);
      if (logits[n * K + k] > logits[n * K + arg]) arg = k;
    }
    direct += std::log(s) - logits[n * K + labels[n]];
    ref_correct += arg == labels[n];
  }
  double got = softmax_xent(N, K, logits.data(), labels.data(), 1.0, static_cast<double*>(nullptr), nullptr);
  bool ok = std::fabs(got - direct) < 1e-12 && correct == ref_correct;
  std::printf("%-44s %s\n", "softmax cross-entropy value and accuracy", ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

int main() {
  // Whole batch in one im2col chunk, then one image per chunk (3 chunks).
  for (std::size_t chunk : {std::size_t(1) << 20, std::size_t(1)}) {
    conv_chunk_floats() = chunk;
    std::printf("convolutions with im2col chunks of %s\n", chunk > 1 ? "the whole batch" : "one image");
    test_conv(2, 3, 5, 6, 3, 3, 1, 1);  // the 3x3 convolutions of a stage
    test_conv(2, 3, 6, 5, 3, 3, 2, 1);  // the first convolution of stages 2 and 3
    test_conv(3, 3, 4, 4, 2, 1, 1, 0);  // 1x1 (the pointwise GEMM path)
    test_conv(3, 3, 6, 6, 4, 1, 2, 0);  // the 1x1 stride-2 shortcut
  }
  conv_chunk_floats() = std::size_t(1) << 17;
  std::printf("direct float convolutions (best vector width here: %d floats)\n", set_conv_direct_width(16));
  test_direct(2, 3, 5, 6, 3, 3, 1, 1);     // odd plane, C != K, K < one vector
  test_direct(3, 1, 7, 9, 5, 3, 1, 1);     // batch 1
  test_direct(3, 3, 6, 5, 20, 3, 2, 1);    // stride 2, odd width, K = one vector + a part
  test_direct(5, 3, 9, 7, 7, 3, 2, 1);     // stride 2, odd plane
  test_direct(4, 3, 8, 8, 6, 3, 1, 0);     // no padding
  test_direct(3, 2, 9, 8, 4, 5, 1, 2);     // 5x5
  test_direct(3, 3, 6, 6, 17, 1, 2, 0);    // the 1x1 stride-2 shortcut
  test_direct(1, 3, 28, 28, 16, 3, 1, 1);  // the stem
  test_direct(16, 2, 28, 28, 16, 3, 1, 1); // stage 1
  test_direct(16, 3, 28, 28, 32, 3, 2, 1); // into stage 2
  test_direct(32, 1, 14, 14, 48, 3, 1, 1); // 3 vectors of 16
  test_direct(64, 3, 7, 7, 64, 3, 1, 1);   // stage 3
  test_bn(1);
  test_bn(2);
  test_bn(4);
  test_bn_eval();
  test_relu_add();
  test_gap_linear_xent();
  if (failures) std::printf("%d check(s) FAILED\n", failures);
  else std::printf("all gradient checks passed\n");
  return failures ? 1 : 0;
}

#include "resnet.hpp"

#include <cmath>
#include <stdexcept>

#include "data.hpp"

namespace resnet {

int ResNet::add_group(const std::string& name, std::size_t size, bool adapt) {
  groups_.push_back(ParamGroup{name, nparams_, size, adapt});
  nparams_ += size;
  return static_cast<int>(groups_.size()) - 1;
}

ResNet::Conv ResNet::make_conv(const std::string& name, int C, int K, int R, int stride, int H, int W) {
  Conv c{C, K, R, stride, R / 2, H, W, 0};
  c.w = groups_[add_group(name + ".weight", static_cast<std::size_t>(K) * C * R * R, true)].offset;
  return c;
}

int ResNet::make_bn(const std::string& name, int C, int HW) {
  BN b;
  b.C = C;
  b.HW = HW;
  b.gamma = groups_[add_group(name + ".gamma", C, false)].offset;
  b.beta = groups_[add_group(name + ".beta", C, false)].offset;
  b.run_mean.assign(C, 0.0f);
  b.run_var.assign(C, 1.0f);
  b.mean.assign(C, 0.0f);
  b.rstd.assign(C, 1.0f);
  bns_.push_back(std::move(b));
  return static_cast<int>(bns_.size()) - 1;
}

ResNet::ResNet(const ModelConfig& cfg) : cfg_(cfg) {
  if (cfg.depth < 8 || (cfg.depth - 2) % 6 != 0) {
    throw std::invalid_argument("depth " + std::to_string(cfg.depth) +
                                " is not 6n+2 with n >= 1 (8, 14, 20, 26, 32, 44, 56, 110, ...)");
  }
  if (cfg.width < 1 || cfg.width > 512) {
    throw std::invalid_argument("width " + std::to_string(cfg.width) + " is not in 1..512");
  }
  const int n = (cfg.depth - 2) / 6;
  int H = cfg.height, W = cfg.width_px, C = cfg.width;
  stem_ = make_conv("stem.conv", cfg.channels, C, 3, 1, H, W);
  stem_bn_ = make_bn("stem.bn", C, H * W);
  for (int stage = 0; stage < 3; ++stage) {
    const int Cout = cfg.width << stage;
    for (int i = 0; i < n; ++i) {
      const int stride = (stage > 0 && i == 0) ? 2 : 1;
      const std::string p = "stage" + std::to_string(stage + 1) + ".block" + std::to_string(i + 1);
      Block b{};
      b.Cin = C;
      b.Cout = Cout;
      b.Hin = H;
      b.Win = W;
      b.Hout = (H + 2 - 3) / stride + 1;
      b.Wout = (W + 2 - 3) / stride + 1;
      b.c1 = make_conv(p + ".conv1", C, Cout, 3, stride, H, W);
      b.bn1 = make_bn(p + ".bn1", Cout, b.Hout * b.Wout);
      b.c2 = make_conv(p + ".conv2", Cout, Cout, 3, 1, b.Hout, b.Wout);
      b.bn2 = make_bn(p + ".bn2", Cout, b.Hout * b.Wout);
      b.proj = stride != 1 || C != Cout;
      if (b.proj) {
        b.c3 = make_conv(p + ".shortcut.conv", C, Cout, 1, stride, H, W);
        b.c3.pad = 0;
        b.bn3 = make_bn(p + ".shortcut.bn", Cout, b.Hout * b.Wout);
      }
      blocks_.push_back(b);
      C = Cout;
      H = b.Hout;
      W = b.Wout;
    }
  }
  fc_in_ = C;
  fc_w_ = groups_[add_group("fc.weight", static_cast<std::size_t>(cfg.classes) * C, true)].offset;
  fc_b_ = groups_[add_group("fc.bias", cfg.classes, false)].offset;
}

namespace {
// Standard normal from two hashed uniforms (Box-Muller).
double normal_at(std::uint64_t seed, std::uint64_t group, std::uint64_t i) {
  std::uint64_t r = hash3(seed, group, i);
  double u1 = ((r >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  double u2 = ((mix64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}
double uniform_at(std::uint64_t seed, std::uint64_t group, std::uint64_t i) {
  return ((hash3(seed, group, i) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
}  // namespace

void ResNet::init(std::uint64_t seed, float* params) {
  auto conv_init = [&](const Conv& c, std::uint64_t gid) {
    double sd = std::sqrt(2.0 / (double(c.K) * c.R * c.R));  // fan out
    std::size_t cnt = static_cast<std::size_t>(c.K) * c.C * c.R * c.R;
    for (std::size_t i = 0; i < cnt; ++i) params[c.w + i] = static_cast<float>(sd * normal_at(seed, gid, i));
  };
  std::uint64_t gid = 1;
  conv_init(stem_, gid++);
  for (const Block& b : blocks_) {
    conv_init(b.c1, gid++);
    conv_init(b.c2, gid++);
    if (b.proj) conv_init(b.c3, gid++);
  }
  for (BN& b : bns_) {
    for (int c = 0; c < b.C; ++c) {
      params[b.gamma + c] = 1.0f;
      params[b.beta + c] = 0.0f;
    }
    b.run_mean.assign(b.C, 0.0f);
    b.run_var.assign(b.C, 1.0f);
  }
  const double bound = 1.0 / std::sqrt(double(fc_in_));
  for (std::size_t i = 0; i < static_cast<std::size_t>(cfg_.classes) * fc_in_; ++i)
    params[fc_w_ + i] = static_cast<float>(bound * (2 * uniform_at(seed, 1000, i) - 1));
  for (int k = 0; k < cfg_.classes; ++k)
    params[fc_b_ + k] = static_cast<float>(bound * (2 * uniform_at(seed, 1001, k) - 1));
}

void ResNet::ensure(int N) {
  if (N == N_) return;
  N_ = N;
  std::size_t col = 0, maxact = 0;
  auto see = [&](const Conv& c) {
    ConvShape s = c.shape(N);
    col = std::max(col, conv_scratch_elems(s));
    maxact = std::max(maxact, s.out_elems());
    maxact = std::max(maxact, static_cast<std::size_t>(s.C) * N * s.H * s.W);
  };
  see(stem_);
  for (const Block& b : blocks_) {
    see(b.c1);
    see(b.c2);
    if (b.proj) see(b.c3);
  }
  col_.resize(col);
  const std::size_t a0 = stem_.shape(N).out_elems();
  z0_.resize(a0);
  h0_.resize(a0);
  act_.resize(blocks_.size());
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    std::size_t e = static_cast<std::size_t>(b.Cout) * N * b.Hout * b.Wout;
    act_[i].z1.resize(e);
    act_[i].h1.resize(e);
    act_[i].z2.resize(e);
    act_[i].out.resize(e);
    act_[i].z3.resize(b.proj ? e : 0);
  }
  tmp1_.resize(maxact);
  tmp2_.resize(maxact);
  tmp3_.resize(maxact);
  dA_.resize(maxact);
  dB_.resize(maxact);
  pooled_.resize(static_cast<std::size_t>(fc_in_) * N);
  dpooled_.resize(pooled_.size());
  logits_.resize(static_cast<std::size_t>(N) * cfg_.classes);
  dlogits_.resize(logits_.size());
}

void ResNet::bn_train(BN& b, int N, const float* params, const float* x, float* y, const SumFn& sync) {
  const std::size_t m = static_cast<std::size_t>(N) * b.HW;
  sums_.resize(2 * b.C + 1);
  bn_sums(b.C, m, x, sums_.data());
  sums_[2 * b.C] = static_cast<double>(m);
  if (sync) sync(sums_.data(), sums_.size());  // one fused all-reduce: sum, sum of squares, count
  const double M = sums_[2 * b.C];
  bn_forward_apply(b.C, m, M, sums_.data(), bn_eps, x, params + b.gamma, params + b.beta, y, b.mean.data(),
                   b.rstd.data());
  bn_update_running(b.C, M, sums_.data(), bn_momentum, b.run_mean.data(), b.run_var.data());
}

void ResNet::bn_back(BN& b, int N, const float* params, const float* dy, const float* x, float* dx,
                     float* grads, const SumFn& sync) {
  const std::size_t m = static_cast<std::size_t>(N) * b.HW;
  sums_.resize(2 * b.C + 1);
  local_.resize(2 * b.C + 1);
  bn_backward_sums(b.C, m, dy, x, b.mean.data(), b.rstd.data(), local_.data());
  local_[2 * b.C] = static_cast<double>(m);
  sums_ = local_;
  if (sync) sync(sums_.data(), sums_.size());
  bn_backward_apply(b.C, m, sums_[2 * b.C], sums_.data(), local_.data(), dy, x, b.mean.data(), b.rstd.data(),
                    params + b.gamma, dx, grads + b.gamma, grads + b.beta);
}

double ResNet::train_step(const float* params, const float* images, const int* labels, int N,
                          double loss_scale, float* grads, const SumFn& sync, int* correct) {
  ensure(N);
  // ---- forward
  conv_forward(stem_.shape(N), images, params + stem_.w, z0_.data(), col_.data());
  bn_train(bns_[stem_bn_], N, params, z0_.data(), h0_.data(), sync);
  relu_forward(h0_.size(), h0_.data());
  const float* a = h0_.data();
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    BlockAct& A = act_[i];
    const std::size_t e = A.out.size();
    conv_forward(b.c1.shape(N), a, params + b.c1.w, A.z1.data(), col_.data());
    bn_train(bns_[b.bn1], N, params, A.z1.data(), A.h1.data(), sync);
    relu_forward(e, A.h1.data());
    conv_forward(b.c2.shape(N), A.h1.data(), params + b.c2.w, A.z2.data(), col_.data());
    bn_train(bns_[b.bn2], N, params, A.z2.data(), A.out.data(), sync);
    if (b.proj) {
      conv_forward(b.c3.shape(N), a, params + b.c3.w, A.z3.data(), col_.data());
      bn_train(bns_[b.bn3], N, params, A.z3.data(), tmp1_.data(), sync);
      add_forward(e, A.out.data(), tmp1_.data(), A.out.data());
    } else {
      add_forward(e, A.out.data(), a, A.out.data());
    }
    relu_forward(e, A.out.data());
    a = A.out.data();
  }
  const Block& last = blocks_.back();
  const int HW = last.Hout * last.Wout;
  gap_forward(fc_in_, N, HW, a, pooled_.data());
  linear_forward(fc_in_, N, cfg_.classes, pooled_.data(), params + fc_w_, params + fc_b_, logits_.data());
  double loss = softmax_xent(N, cfg_.classes, logits_.data(), labels, loss_scale, dlogits_.data(), correct);

  // ---- backward
  linear_backward(fc_in_, N, cfg_.classes, pooled_.data(), params + fc_w_, dlogits_.data(), grads + fc_w_,
                  grads + fc_b_, dpooled_.data());
  float* dout = dA_.data();  // gradient w.r.t. the current block's output
  float* din = dB_.data();   // gradient w.r.t. its input
  gap_backward(fc_in_, N, HW, dpooled_.data(), dout);
  for (std::size_t i = blocks_.size(); i-- > 0;) {
    Block& b = blocks_[i];
    BlockAct& A = act_[i];
    const std::size_t e = A.out.size();
    const float* ain = i == 0 ? h0_.data() : act_[i - 1].out.data();
    const std::size_t ein = static_cast<std::size_t>(b.Cin) * N * b.Hin * b.Win;
    relu_backward(e, A.out.data(), dout, dout);  // d(u2 + shortcut)
    bn_back(bns_[b.bn2], N, params, dout, A.z2.data(), tmp1_.data(), grads, sync);
    conv_backward(b.c2.shape(N), A.h1.data(), params + b.c2.w, tmp1_.data(), grads + b.c2.w, tmp2_.data(),
                  col_.data());
    relu_backward(e, A.h1.data(), tmp2_.data(), tmp2_.data());
    bn_back(bns_[b.bn1], N, params, tmp2_.data(), A.z1.data(), tmp1_.data(), grads, sync);
    conv_backward(b.c1.shape(N), ain, params + b.c1.w, tmp1_.data(), grads + b.c1.w, din, col_.data());
    if (b.proj) {
      bn_back(bns_[b.bn3], N, params, dout, A.z3.data(), tmp1_.data(), grads, sync);
      conv_backward(b.c3.shape(N), ain, params + b.c3.w, tmp1_.data(), grads + b.c3.w, tmp3_.data(),
                    col_.data());
      add_forward(ein, din, tmp3_.data(), din);
    } else {
      add_forward(ein, din, dout, din);
    }
    std::swap(dout, din);
  }
  relu_backward(h0_.size(), h0_.data(), dout, dout);
  bn_back(bns_[stem_bn_], N, params, dout, z0_.data(), tmp1_.data(), grads, sync);
  conv_backward(stem_.shape(N), images, params + stem_.w, tmp1_.data(), grads + stem_.w,
                static_cast<float*>(nullptr), col_.data());
  return loss;
}

double ResNet::evaluate(const float* params, const float* images, const int* labels, int N, int* correct) {
  ensure(N);
  auto bn_eval = [&](const BN& b, const float* x, float* y) {
    bn_forward_eval(b.C, static_cast<std::size_t>(N) * b.HW, bn_eps, x, params + b.gamma, params + b.beta,
                    b.run_mean.data(), b.run_var.data(), y);
  };
  conv_forward(stem_.shape(N), images, params + stem_.w, z0_.data(), col_.data());
  bn_eval(bns_[stem_bn_], z0_.data(), h0_.data());
  relu_forward(h0_.size(), h0_.data());
  const float* a = h0_.data();
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    BlockAct& A = act_[i];
    const std::size_t e = A.out.size();
    conv_forward(b.c1.shape(N), a, params + b.c1.w, A.z1.data(), col_.data());
    bn_eval(bns_[b.bn1], A.z1.data(), A.h1.data());
    relu_forward(e, A.h1.data());
    conv_forward(b.c2.shape(N), A.h1.data(), params + b.c2.w, A.z2.data(), col_.data());
    bn_eval(bns_[b.bn2], A.z2.data(), A.out.data());
    if (b.proj) {
      conv_forward(b.c3.shape(N), a, params + b.c3.w, A.z3.data(), col_.data());
      bn_eval(bns_[b.bn3], A.z3.data(), tmp1_.data());
      add_forward(e, A.out.data(), tmp1_.data(), A.out.data());
    } else {
      add_forward(e, A.out.data(), a, A.out.data());
    }
    relu_forward(e, A.out.data());
    a = A.out.data();
  }
  const Block& last = blocks_.back();
  gap_forward(fc_in_, N, last.Hout * last.Wout, a, pooled_.data());
  linear_forward(fc_in_, N, cfg_.classes, pooled_.data(), params + fc_w_, params + fc_b_, logits_.data());
  return softmax_xent(N, cfg_.classes, logits_.data(), labels, 1.0, static_cast<float*>(nullptr), correct);
}

std::vector<float> ResNet::running_stats() const {
  std::vector<float> v;
  for (const BN& b : bns_) {
    v.insert(v.end(), b.run_mean.begin(), b.run_mean.end());
    v.insert(v.end(), b.run_var.begin(), b.run_var.end());
  }
  return v;
}

void ResNet::set_running_stats(const std::vector<float>& v) {
  std::size_t k = 0;
  for (BN& b : bns_) {
    if (k + 2 * static_cast<std::size_t>(b.C) > v.size()) throw std::invalid_argument("running stats too short");
    std::copy(v.begin() + k, v.begin() + k + b.C, b.run_mean.begin());
    k += b.C;
    std::copy(v.begin() + k, v.begin() + k + b.C, b.run_var.begin());
    k += b.C;
  }
  if (k != v.size()) throw std::invalid_argument("running stats of the wrong size");
}

double ResNet::forward_flops_per_sample() const {
  double f = stem_.shape(1).flops();
  for (const Block& b : blocks_) {
    f += b.c1.shape(1).flops() + b.c2.shape(1).flops();
    if (b.proj) f += b.c3.shape(1).flops();
  }
  return f + 2.0 * fc_in_ * cfg_.classes;
}

}  // namespace resnet

// ResNet-(6n+2) for 28x28x1 images (He et al. 2016, the CIFAR variant):
// a 3x3 stem convolution, 3 stages of n basic blocks with w, 2w, 4w channels
// (strides 1, 2, 2; a 1x1 convolution + batch norm on the shortcut where the
// shape changes), global average pooling and a linear classifier.
//
// All trainable parameters live in one flat float array, cut into named
// groups (one per tensor) in the order tessera's optimizer takes them;
// batch-norm running statistics are buffers outside it. The forward caches
// what the backward needs; the backward accumulates into a flat gradient
// array of the same layout. No MPI here: synchronised batch norm calls a
// reduction the caller supplies.
#ifndef TSR_APPS_RESNET_RESNET_HPP
#define TSR_APPS_RESNET_RESNET_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layers.hpp"

namespace resnet {

struct ModelConfig {
  int depth = 20;    // 6n+2
  int width = 16;    // channels of the first stage
  int classes = 10;
  int height = 28, width_px = 28, channels = 1;
};

// One parameter tensor: elements [offset, offset + size) of the flat array.
// adapt: a weight (layer adaptation and weight decay); false for batch-norm
// parameters and biases (the MLPerf skip list).
struct ParamGroup {
  std::string name;
  std::size_t offset = 0, size = 0;
  bool adapt = true;
};

// Sums a buffer of doubles over the replicas in place (synchronised batch
// norm). Empty: per-replica statistics.
using SumFn = std::function<void(double* buf, std::size_t count)>;

class ResNet {
 public:
  // Throws std::invalid_argument for a depth that is not 6n+2 >= 8 or a bad width.
  explicit ResNet(const ModelConfig& cfg);

  const ModelConfig& config() const { return cfg_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }
  std::size_t num_params() const { return nparams_; }
  // Deterministic initialisation from a seed: Kaiming normal (fan out) for
  // convolutions, PyTorch's uniform(+-1/sqrt(fan_in)) for the classifier,
  // gamma 1 and beta 0, running mean 0 and variance 1.
  void init(std::uint64_t seed, float* params);
  std::vector<float> init(std::uint64_t seed) {
    std::vector<float> p(nparams_);
    init(seed, p.data());
    return p;
  }

  // One training forward and backward on N images (CNHW with C = 1, i.e. N
  // images of height x width floats). Sets grads += d(loss * loss_scale)/d params
  // where loss is the SUM of the per-sample losses (pass 1/B for a mean over a
  // global batch of B). Updates the running statistics. Returns the summed
  // loss; *correct += correctly classified samples. sync: see SumFn.
  double train_step(const float* params, const float* images, const int* labels, int N,
                    double loss_scale, float* grads, const SumFn& sync, int* correct);

  // Inference with the running statistics: predictions for N images; returns
  // the summed loss, *correct += correct ones.
  double evaluate(const float* params, const float* images, const int* labels, int N, int* correct);

  // The running statistics, all batch norms back to back (mean then variance
  // per layer): for averaging over replicas and for checkpoints.
  std::vector<float> running_stats() const;
  void set_running_stats(const std::vector<float>& v);

  // Multiply-adds x 2 of one forward pass per sample (convolutions and the classifier).
  double forward_flops_per_sample() const;
  double bn_momentum = 0.1, bn_eps = 1e-5;

 private:
  struct Conv {
    int C, K, R, stride, pad, H, W;  // input shape per sample
    std::size_t w;                   // offset of the weights [K][C*R*R]
    ConvShape shape(int N) const { return ConvShape{C, N, H, W, K, R, stride, pad}; }
  };
  struct BN {
    int C, HW;
    std::size_t gamma, beta;
    std::vector<float> run_mean, run_var;
    std::vector<float> mean, rstd;  // of the last training batch
  };
  struct Block {
    Conv c1, c2, c3;
    int bn1, bn2, bn3;
    bool proj;
    int Cin, Cout, Hin, Win, Hout, Wout;
  };
  int add_group(const std::string& name, std::size_t size, bool adapt);
  Conv make_conv(const std::string& name, int C, int K, int R, int stride, int H, int W);
  int make_bn(const std::string& name, int C, int HW);
  void ensure(int N);
  void bn_train(BN& b, int N, const float* params, const float* x, float* y, const SumFn& sync);
  void bn_back(BN& b, int N, const float* params, const float* dy, const float* x, float* dx,
               float* grads, const SumFn& sync);

  ModelConfig cfg_;
  std::vector<ParamGroup> groups_;
  std::size_t nparams_ = 0;
  Conv stem_;
  int stem_bn_ = 0;
  std::vector<BN> bns_;
  std::vector<Block> blocks_;
  std::size_t fc_w_ = 0, fc_b_ = 0;
  int fc_in_ = 0;

  // Workspace for batch size N_.
  int N_ = 0;
  std::vector<float> col_;
  std::vector<float> z0_, h0_;
  struct BlockAct {
    std::vector<float> z1, h1, z2, out, z3;
  };
  std::vector<BlockAct> act_;
  std::vector<float> tmp1_, tmp2_, tmp3_, dA_, dB_;
  std::vector<float> pooled_, logits_, dlogits_, dpooled_;
  std::vector<double> sums_, local_;
};

}  // namespace resnet

#endif

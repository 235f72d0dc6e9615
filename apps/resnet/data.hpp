// Fashion-MNIST for the sample ResNet: the IDX loader (gzip through zlib),
// the per-epoch sample order and the random crop/flip augmentation, all
// determined by a seed, the epoch and the global sample position only, so
// that a global batch is the same whatever the number of ranks.
#ifndef TSR_APPS_RESNET_DATA_HPP
#define TSR_APPS_RESNET_DATA_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace resnet {

// Images (n x rows x cols bytes, row major) and their labels (0..9).
struct Dataset {
  int n = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> images;
  std::vector<std::uint8_t> labels;
};

// The directory Debian's dataset-fashion-mnist installs.
inline const char* default_data_dir() { return "/usr/share/datasets/fashion-mnist"; }

// Read an IDX image file (magic 0x00000803) or label file (0x00000801),
// gzip-compressed or plain (zlib reads both). At most `limit` items (0: all).
// Throws std::runtime_error naming the file and what is wrong (missing,
// wrong magic, truncated, corrupt stream, labels out of range).
void read_idx_images(const std::string& path, int limit, Dataset& out);
void read_idx_labels(const std::string& path, int limit, Dataset& out);

// "train" (train-*-idx?-ubyte.gz) or "t10k" (the test set) from dir; checks
// that images and labels agree in count. limit: first `limit` items (0: all).
Dataset load_fashion_mnist(const std::string& dir, const std::string& split, int limit = 0);

// 64-bit mixing (splitmix64 finaliser): the source of every random choice.
std::uint64_t mix64(std::uint64_t x);
inline std::uint64_t hash3(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return mix64(mix64(mix64(a) ^ b) ^ c);
}

// The sample order of an epoch: a permutation of 0..n-1 that depends only on
// (seed, epoch) (Fisher-Yates over splitmix64; no std:: distributions, whose
// output differs between standard libraries).
std::vector<int> epoch_order(int n, std::uint64_t seed, int epoch);

// Augmentation of one sample: shift (dx, dy) in [-pad, pad] (a random crop of
// the image zero-padded by pad) and a horizontal flip, from
// (seed, epoch, global position).
struct Augment {
  int dx = 0, dy = 0;
  bool flip = false;
};
Augment augment_for(std::uint64_t seed, int epoch, long long position, int pad);

// Pixel normalisation (Fashion-MNIST training-set mean and standard deviation).
constexpr float kMean = 0.2860f;
constexpr float kStd = 0.3530f;

// Fill count images (rows*cols floats each, back to back: the CNHW layout with
// C = 1) and labels for samples order[first .. first+count). With pad > 0 each
// sample is augmented by augment_for(seed, epoch, first + i, pad); pad 0: none.
void make_batch(const Dataset& d, const std::vector<int>& order, long long first, int count,
                std::uint64_t seed, int epoch, int pad, float* images, int* labels);

}  // namespace resnet

#endif

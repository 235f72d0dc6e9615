// Counter-based random numbers for the sample apps: every number is a pure
// function of (seed, stream, index), so that a value never depends on which
// rank draws it or in what order (the layout-independence the apps need).
#pragma once

#include <cmath>
#include <cstdint>

namespace gpt {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 64 random bits for (seed, stream, index).
inline uint64_t hash3(uint64_t seed, uint64_t stream, uint64_t index) {
  return splitmix64(seed ^ splitmix64(stream ^ splitmix64(index)));
}

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<double>(hash3(seed, stream, index) >> 11) * (1.0 / 9007199254740992.0);
}

// Standard normal (Box-Muller on two counter-derived uniforms).
inline double normal(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = uniform01(seed, stream, 2 * index);
  double u2 = uniform01(seed, stream, 2 * index + 1);
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Streams (keep distinct).
enum : uint64_t {
  STREAM_TRAIN_BATCH = 0x7472616e,
  STREAM_VAL_BATCH = 0x76616c,
  STREAM_SAMPLE = 0x73616d70,
  STREAM_INIT = 0x1000000  // + parameter tensor index
};

}  // namespace gpt

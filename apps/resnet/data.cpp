#include "data.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <utility>
#include <cstring>
#include <stdexcept>

namespace resnet {
namespace {

struct GzFile {
  gzFile f = nullptr;
  std::string path;
  explicit GzFile(const std::string& p) : path(p) {
    f = gzopen(p.c_str(), "rb");
    if (!f) {
      throw std::runtime_error("cannot open " + p + ": " +
                               (errno ? std::strerror(errno) : "zlib could not open it") +
                               " (install Debian's dataset-fashion-mnist, or pass --data DIR)");
    }
  }
  ~GzFile() {
    if (f) gzclose(f);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Read exactly len bytes or throw (truncated file or corrupt stream).
  void read(void* buf, std::size_t len, const char* what) {
    unsigned char* p = static_cast<unsigned char*>(buf);
    while (len > 0) {
      unsigned chunk = len > (1u << 30) ? (1u << 30) : static_cast<unsigned>(len);
      int got = gzread(f, p, chunk);
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(f, &code);
        throw std::runtime_error(path + ": corrupt compressed data while reading " + what + " (" +
                                 (msg ? msg : "zlib error") + ")");
      }
      if (got == 0) {
        int code = 0;
        const char* msg = gzerror(f, &code);
        std::string why = code != Z_OK && msg && *msg ? std::string(" (") + msg + ")" : "";
        throw std::runtime_error(path + ": file ends early while reading " + what +
                                 " (truncated or damaged)" + why);
      }
      p += got;
      len -= static_cast<std::size_t>(got);
    }
  }
  // Read exactly len bytes into out (resized to len), growing it as the data
  // arrive (64 KiB, then doubling), so that a header announcing more than the
  // file holds fails with "file ends early" after allocating at most twice
  // what the file held, instead of allocating the announced size first (up to
  // 2^48 bytes: std::bad_alloc; a seed of tests/fuzz/fuzz_idx).
  void read_all(std::vector<std::uint8_t>& out, std::size_t len, const char* what) {
    out.clear();
    while (out.size() < len) {
      const std::size_t at = out.size(), want = at < (std::size_t{1} << 16) ? std::size_t{1} << 16 : at;
      const std::size_t step = len - at < want ? len - at : want;
      out.resize(at + step);
      read(out.data() + at, step, what);
    }
  }
  std::uint32_t be32(const char* what) {
    unsigned char b[4];
    read(b, 4, what);
    return (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) |
           std::uint32_t(b[3]);
  }
};

}  // namespace

void read_idx_images(const std::string& path, int limit, Dataset& out) {
  GzFile g(path);
  std::uint32_t magic = g.be32("the header");
  if (magic != 0x00000803u) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%08x", magic);
    throw std::runtime_error(path + ": not an IDX image file (magic " + buf + ", expected 0x00000803)");
  }
  std::uint32_t n = g.be32("the header"), rows = g.be32("the header"), cols = g.be32("the header");
  if (n == 0 || n > (1u << 24) || rows == 0 || cols == 0 || rows > 4096 || cols > 4096) {
    throw std::runtime_error(path + ": implausible IDX header (" + std::to_string(n) + " images of " +
                             std::to_string(rows) + "x" + std::to_string(cols) + ")");
  }
  int take = (limit > 0 && static_cast<std::uint32_t>(limit) < n) ? limit : static_cast<int>(n);
  out.n = take;
  out.rows = static_cast<int>(rows);
  out.cols = static_cast<int>(cols);
  g.read_all(out.images, static_cast<std::size_t>(take) * rows * cols, "the pixels");
  if (take == static_cast<int>(n)) {
    unsigned char extra;
    if (gzread(g.f, &extra, 1) != 0) {
      throw std::runtime_error(path + ": data after the " + std::to_string(n) + " images the header announces");
    }
  }
}

void read_idx_labels(const std::string& path, int limit, Dataset& out) {
  GzFile g(path);
  std::uint32_t magic = g.be32("the header");
  if (magic != 0x00000801u) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%08x", magic);
    throw std::runtime_error(path + ": not an IDX label file (magic " + buf + ", expected 0x00000801)");
  }
  std::uint32_t n = g.be32("the header");
  if (n == 0 || n > (1u << 24)) {
    throw std::runtime_error(path + ": implausible IDX header (" + std::to_string(n) + " labels)");
  }
  int take = (limit > 0 && static_cast<std::uint32_t>(limit) < n) ? limit : static_cast<int>(n);
  g.read_all(out.labels, static_cast<std::size_t>(take), "the labels");
  for (int i = 0; i < take; ++i) {
    if (out.labels[i] > 9) {
      throw std::runtime_error(path + ": label " + std::to_string(out.labels[i]) + " of item " +
                               std::to_string(i) + " is not a class 0..9");
    }
  }
  if (take == static_cast<int>(n)) {
    unsigned char extra;
    if (gzread(g.f, &extra, 1) != 0) {
      throw std::runtime_error(path + ": data after the " + std::to_string(n) + " labels the header announces");
    }
  }
}

Dataset load_fashion_mnist(const std::string& dir, const std::string& split, int limit) {
  if (split != "train" && split != "t10k") throw std::runtime_error("unknown split '" + split + "'");
  Dataset d;
  read_idx_images(dir + "/" + split + "-images-idx3-ubyte.gz", limit, d);
  read_idx_labels(dir + "/" + split + "-labels-idx1-ubyte.gz", limit, d);
  if (d.labels.size() != static_cast<std::size_t>(d.n)) {
    throw std::runtime_error(dir + "/" + split + ": " + std::to_string(d.n) + " images but " +
                             std::to_string(d.labels.size()) + " labels");
  }
  return d;
}

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

namespace {
// Uniform in [0, bound) from 64 random bits (modulo; the bias is below
// 2^-40 for the bounds used here).
inline std::uint64_t bounded(std::uint64_t r, std::uint64_t bound) { return r % bound; }
}  // namespace

std::vector<int> epoch_order(int n, std::uint64_t seed, int epoch) {
  std::vector<int> order(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) order[i] = i;
  std::uint64_t state = hash3(seed, 0x5eed0fda7aull, static_cast<std::uint64_t>(epoch));
  for (int i = n - 1; i > 0; --i) {
    state += 0x9e3779b97f4a7c15ull;
    int j = static_cast<int>(bounded(mix64(state), static_cast<std::uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

Augment augment_for(std::uint64_t seed, int epoch, long long position, int pad) {
  Augment a;
  if (pad <= 0) return a;
  std::uint64_t r = hash3(seed ^ 0xa0a0a0a0ull, static_cast<std::uint64_t>(epoch),
                          static_cast<std::uint64_t>(position));
  std::uint64_t span = 2 * static_cast<std::uint64_t>(pad) + 1;
  a.dx = static_cast<int>(r % span) - pad;
  a.dy = static_cast<int>((r / span) % span) - pad;
  a.flip = ((r >> 40) & 1u) != 0;
  return a;
}

void make_batch(const Dataset& d, const std::vector<int>& order, long long first, int count,
                std::uint64_t seed, int epoch, int pad, float* images, int* labels) {
  const int R = d.rows, C = d.cols;
  const float scale = 1.0f / (255.0f * kStd), shift = kMean / kStd;
  for (int i = 0; i < count; ++i) {
    long long pos = first + i;
    int idx = order[static_cast<std::size_t>(pos % static_cast<long long>(order.size()))];
    const std::uint8_t* src = d.images.data() + static_cast<std::size_t>(idx) * R * C;
    float* dst = images + static_cast<std::size_t>(i) * R * C;
    labels[i] = d.labels[static_cast<std::size_t>(idx)];
    Augment a = augment_for(seed, epoch, pos, pad);
    for (int y = 0; y < R; ++y) {
      int sy = y + a.dy;
      for (int x = 0; x < C; ++x) {
        int sx0 = a.flip ? C - 1 - x : x;
        int sx = sx0 + a.dx;
        float v = 0.0f;
        if (sy >= 0 && sy < R && sx >= 0 && sx < C) v = src[sy * C + sx] * scale;
        // Zero padding is black (pixel value 0) before normalisation.
        dst[y * C + x] = (sy >= 0 && sy < R && sx >= 0 && sx < C) ? v - shift : -shift;
      }
    }
  }
}

}  // namespace resnet

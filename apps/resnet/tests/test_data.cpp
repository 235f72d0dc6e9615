// The Fashion-MNIST loader and the batch pipeline.
//   test_data SCRATCH_DIR [REAL_DATA_DIR]
// Writes small IDX files (gzip and plain) into SCRATCH_DIR and checks that
// they read back exactly; that a wrong magic, a truncated file, a corrupt
// gzip stream, a missing file, a bad label and an image/label count mismatch
// each fail with a message naming the file and the fault; that the epoch
// order is a permutation fixed by (seed, epoch); that augmentation stays in
// range and does what it says; that a batch split over ranks is the same
// samples. With REAL_DATA_DIR (Debian's dataset-fashion-mnist) it also reads
// the real test set: 10,000 28x28 images, 1,000 per class.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "../data.hpp"

using namespace resnet;

static int failures = 0;
#define CHECK(cond, ...)                         \
  do {                                           \
    if (!(cond)) {                               \
      std::printf("FAILED line %d: ", __LINE__); \
      std::printf(__VA_ARGS__);                  \
      std::printf("\n");                         \
      ++failures;                                \
    }                                            \
  } while (0)

static std::vector<unsigned char> idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims,
                                            const std::vector<unsigned char>& payload) {
  std::vector<unsigned char> b;
  auto be = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
  };
  be(magic);
  for (auto d : dims) be(d);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

static void write_gz(const std::string& path, const std::vector<unsigned char>& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, b.data(), static_cast<unsigned>(b.size()));
  gzclose(f);
}
static std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
static void write_file(const std::string& path, const std::vector<unsigned char>& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Expect load to throw with a message containing each of the needles.
template <class F>
static void expect_error(const char* what, F load, std::vector<std::string> needles) {
  try {
    load();
    CHECK(false, "%s: no error", what);
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    for (const auto& n : needles) CHECK(msg.find(n) != std::string::npos, "%s: message '%s' lacks '%s'", what, msg.c_str(), n.c_str());
    std::printf("%-28s -> %s\n", what, msg.c_str());
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: test_data SCRATCH_DIR [REAL_DATA_DIR]\n");
    return 2;
  }
  const std::string dir = argv[1];
  mkdir(dir.c_str(), 0755);
  // 5 images of 4x3 with known pixels, labels 0..4.
  const int n = 5, R = 4, C = 3;
  std::vector<unsigned char> pix(n * R * C), lab = {0, 1, 2, 3, 9};
  for (std::size_t i = 0; i < pix.size(); ++i) pix[i] = static_cast<unsigned char>((i * 37 + 11) & 0xff);
  auto img = idx_bytes(0x803, {n, R, C}, pix);
  auto lbl = idx_bytes(0x801, {n}, lab);
  write_gz(dir + "/train-images-idx3-ubyte.gz", img);
  write_gz(dir + "/train-labels-idx1-ubyte.gz", lbl);
  {
    Dataset d = load_fashion_mnist(dir, "train");
    CHECK(d.n == n && d.rows == R && d.cols == C, "shape %d %d %d", d.n, d.rows, d.cols);
    CHECK(d.images == std::vector<std::uint8_t>(pix.begin(), pix.end()), "pixels differ");
    CHECK(d.labels == std::vector<std::uint8_t>(lab.begin(), lab.end()), "labels differ");
    Dataset d3 = load_fashion_mnist(dir, "train", 3);
    CHECK(d3.n == 3 && d3.labels.size() == 3 && d3.images.size() == 3u * R * C, "limit 3");
    // zlib reads an uncompressed copy too.
    write_file(dir + "/plain-images", img);
    Dataset p;
    read_idx_images(dir + "/plain-images", 0, p);
    CHECK(p.images == d.images, "plain file differs");
  }
  // Faults.
  write_gz(dir + "/badmagic.gz", idx_bytes(0x802, {n, R, C}, pix));
  expect_error("wrong magic", [&] { Dataset d; read_idx_images(dir + "/badmagic.gz", 0, d); },
               {"badmagic.gz", "magic 0x00000802", "0x00000803"});
  expect_error("labels as images", [&] { Dataset d; read_idx_images(dir + "/train-labels-idx1-ubyte.gz", 0, d); },
               {"not an IDX image file"});
  {
    auto full = read_file(dir + "/train-images-idx3-ubyte.gz");
    auto cut = std::vector<unsigned char>(full.begin(), full.begin() + full.size() / 2);
    write_file(dir + "/truncated.gz", cut);
    expect_error("truncated gzip", [&] { Dataset d; read_idx_images(dir + "/truncated.gz", 0, d); },
                 {"truncated.gz"});
    // Header intact, pixels missing (an uncompressed IDX cut short).
    auto shortplain = std::vector<unsigned char>(img.begin(), img.begin() + 16 + 7);
    write_file(dir + "/short.idx", shortplain);
    expect_error("truncated pixels", [&] { Dataset d; read_idx_images(dir + "/short.idx", 0, d); },
                 {"short.idx", "ends early", "pixels"});
    // A header announcing 2^24 images of 4096 x 4096 (2^48 bytes) in a file
    // of 32 bytes: "ends early", without allocating the announced size first
    // (found by tests/fuzz/fuzz_idx: it threw std::bad_alloc).
    std::vector<unsigned char> huge = idx_bytes(0x803, {1u << 24, 4096, 4096}, std::vector<unsigned char>(16, 7));
    write_file(dir + "/huge-header.idx", huge);
    expect_error("header larger than the file", [&] { Dataset d; read_idx_images(dir + "/huge-header.idx", 0, d); },
                 {"huge-header.idx", "ends early", "pixels"});
    // A corrupted deflate stream (bytes in the middle of a larger file flipped).
    std::vector<unsigned char> big(20000);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<unsigned char>(mix64(i) & 0xff);
    write_gz(dir + "/big.gz", idx_bytes(0x803, {20, 40, 25}, big));
    auto z = read_file(dir + "/big.gz");
    for (std::size_t i = z.size() / 3; i < z.size() / 3 + 64; ++i) z[i] ^= 0x5a;
    write_file(dir + "/corrupt.gz", z);
    expect_error("corrupt gzip stream", [&] { Dataset d; read_idx_images(dir + "/corrupt.gz", 0, d); },
                 {"corrupt.gz"});
  }
  expect_error("missing file", [&] { load_fashion_mnist(dir + "/nowhere", "train"); },
               {"nowhere/train-images-idx3-ubyte.gz", "dataset-fashion-mnist", "--data"});
  write_gz(dir + "/badlabel.gz", idx_bytes(0x801, {3}, {1, 10, 2}));
  expect_error("label 10", [&] { Dataset d; read_idx_labels(dir + "/badlabel.gz", 0, d); },
               {"label 10 of item 1"});
  {
    std::string mdir = dir + "/mismatch";
    mkdir(mdir.c_str(), 0755);
    write_gz(mdir + "/t10k-images-idx3-ubyte.gz", img);
    write_gz(mdir + "/t10k-labels-idx1-ubyte.gz", idx_bytes(0x801, {4}, {0, 1, 2, 3}));
    expect_error("count mismatch", [&] { load_fashion_mnist(mdir, "t10k"); }, {"5 images but 4 labels"});
  }

  // Epoch order: a permutation, fixed by (seed, epoch), different across epochs and seeds.
  {
    auto a = epoch_order(1000, 7, 0), b = epoch_order(1000, 7, 0), c = epoch_order(1000, 7, 1),
         e = epoch_order(1000, 8, 0);
    auto s = a;
    std::sort(s.begin(), s.end());
    bool perm = true;
    for (int i = 0; i < 1000; ++i) perm = perm && s[i] == i;
    CHECK(perm, "epoch_order is not a permutation");
    CHECK(a == b, "epoch_order not deterministic");
    CHECK(a != c && a != e, "epoch_order ignores epoch or seed");
    // The stream's first values are fixed (a change would change every curve).
    std::printf("epoch_order(1000, 7, 0) starts %d %d %d %d\n", a[0], a[1], a[2], a[3]);
  }
  // Augmentation: shifts in [-pad, pad], all 2*(2p+1)^2 cases reached, about half flipped.
  {
    std::set<int> seen;
    int flips = 0;
    for (int i = 0; i < 4000; ++i) {
      Augment g = augment_for(3, 2, i, 2);
      CHECK(std::abs(g.dx) <= 2 && std::abs(g.dy) <= 2, "shift out of range");
      seen.insert((g.dx + 2) * 10 + (g.dy + 2) + (g.flip ? 100 : 0));
      flips += g.flip;
    }
    CHECK(seen.size() == 50u, "only %zu of 50 augmentations seen", seen.size());
    CHECK(flips > 1800 && flips < 2200, "%d flips of 4000", flips);
    Augment none = augment_for(3, 2, 5, 0);
    CHECK(none.dx == 0 && none.dy == 0 && !none.flip, "pad 0 augments");
  }
  // make_batch: pad 0 gives the normalised pixels; an augmented sample is the
  // shifted, flipped source with zero (black) fill; a batch split over ranks
  // is the same samples.
  {
    Dataset d = load_fashion_mnist(dir, "train");
    std::vector<int> order = {4, 2, 0, 1, 3};
    std::vector<float> x(n * R * C);
    std::vector<int> y(n);
    make_batch(d, order, 0, n, 1, 0, 0, x.data(), y.data());
    double e = 0;
    for (int i = 0; i < n; ++i) {
      CHECK(y[i] == lab[order[i]], "label of sample %d", i);
      for (int k = 0; k < R * C; ++k)
        e = std::max(e, std::fabs(x[i * R * C + k] - (pix[order[i] * R * C + k] / 255.0 - kMean) / kStd));
    }
    CHECK(e < 1e-5, "normalised pixels off by %g", e);
    make_batch(d, order, 0, n, 9, 3, 1, x.data(), y.data());
    for (int i = 0; i < n; ++i) {
      Augment g = augment_for(9, 3, i, 1);
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
          int sr = r + g.dy, sc = (g.flip ? C - 1 - c : c) + g.dx;
          double want = (sr >= 0 && sr < R && sc >= 0 && sc < C) ? pix[order[i] * R * C + sr * C + sc] / 255.0 : 0.0;
          want = (want - kMean) / kStd;
          CHECK(std::fabs(x[i * R * C + r * C + c] - want) < 1e-5, "augmented pixel %d %d %d", i, r, c);
        }
    }
    std::vector<float> part(2 * R * C);
    std::vector<int> py(2);
    make_batch(d, order, 3, 2, 9, 3, 1, part.data(), py.data());
    CHECK(std::equal(part.begin(), part.end(), x.begin() + 3 * R * C) && py[0] == y[3] && py[1] == y[4],
          "a rank's slice differs from the same samples of the whole batch");
  }

  // The real test set, when installed.
  if (argc > 2) {
    std::string real = argv[2];
    struct stat st;
    if (stat((real + "/t10k-images-idx3-ubyte.gz").c_str(), &st) != 0) {
      std::printf("%s has no Fashion-MNIST: real-data checks skipped\n", real.c_str());
    } else {
      Dataset t = load_fashion_mnist(real, "t10k");
      CHECK(t.n == 10000 && t.rows == 28 && t.cols == 28, "t10k shape %d %d %d", t.n, t.rows, t.cols);
      std::vector<int> per(10, 0);
      for (auto l : t.labels) per[l]++;
      for (int k = 0; k < 10; ++k) CHECK(per[k] == 1000, "class %d has %d test images", k, per[k]);
      double mean = 0;
      for (auto p : t.images) mean += p;
      mean /= 255.0 * t.images.size();
      std::printf("Fashion-MNIST t10k: %d images, 1000 per class, mean pixel %.4f\n", t.n, mean);
      CHECK(std::fabs(mean - 0.2868) < 0.002, "t10k mean pixel %.4f", mean);
      Dataset tr = load_fashion_mnist(real, "train", 256);
      CHECK(tr.n == 256 && tr.labels.size() == 256u, "train limit");
    }
  }
  if (failures) std::printf("%d check(s) FAILED\n", failures);
  else std::printf("all data checks passed\n");
  return failures ? 1 : 0;
}

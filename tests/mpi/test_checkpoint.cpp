// Checkpoints (tessera/io.h) through the public API: bit-identical round trips
// of every dtype and layout, reads into other layouts, grids and rank counts
// (sub-communicators of the world), optimizer states resharded, exact disk
// bytes, and every error path with the same status on every rank. Both file
// formats (HDF5 where built). The crash test (ckpt_kill.py), h5py
// (ckpt_h5py.py) and the full-disk case (ckpt_tool fsize) are separate tests.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "tessera/tessera.hpp"
#include "tessera/tsr_config.h"
#include "tsr_test.hpp"

namespace {

namespace fs = std::filesystem;

int g_rank = 0, g_size = 1;
std::string g_dir;

std::string path_of(const std::string& name) { return g_dir + "/" + name; }

void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

class Env : public ::testing::Environment {
 public:
  void SetUp() override {
    g_rank = tsr_test::world_rank();
    g_size = tsr_test::world_size();
    char buf[256] = {0};
    if (g_rank == 0) {
      std::snprintf(buf, sizeof buf, "%s/tsr_ckpt_XXXXXX", fs::temp_directory_path().c_str());
      if (!mkdtemp(buf)) buf[0] = 0;
    }
    MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
    g_dir = buf;
  }
  void TearDown() override {
    barrier();
    if (g_rank == 0 && !g_dir.empty()) fs::remove_all(g_dir);
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new Env);

// ---------------------------------------------------------------- values
// A value that any conversion, transposition or misplacement would change.
double mat_value(int64_t i, int64_t j, int salt) { return static_cast<double>(i) * 1009.0 + j * 0.5 + salt * 1e-3; }

struct Mat {
  tsr_matrix h = nullptr;
  std::vector<unsigned char> buf;
  tsr_dtype type = TSR_FLOAT64;
  ~Mat() { tsr_matrix_destroy(&h); }
};

void make(tsr_grid grid, int64_t m, int64_t n, tsr_dtype type, tsr_layout lay, Mat* out, int64_t ld = 0) {
  out->type = type;
  ASSERT_EQ(tsr_matrix_create(grid, m, n, type, &lay, ld, &out->h), TSR_SUCCESS) << tsr_last_error(nullptr);
  int64_t r = 0, c = 0, l = 0;
  ASSERT_EQ(tsr_matrix_local_size(out->h, &r, &c, &l), TSR_SUCCESS);
  out->buf.assign(static_cast<size_t>(c > 0 ? l * (c - 1) + r : 0) * tsr_dtype_size(type) + 1, 0xEE);
}

// Fill (or check, returning the number of wrong elements) a matrix's local block.
int64_t visit(const Mat& a, int salt, bool fill) {
  int64_t r = 0, c = 0, l = 0, bad = 0;
  EXPECT_EQ(tsr_matrix_local_size(a.h, &r, &c, &l), TSR_SUCCESS);
  for (int64_t j = 0; j < c; ++j)
    for (int64_t i = 0; i < r; ++i) {
      int64_t gi = 0, gj = 0;
      EXPECT_EQ(tsr_matrix_global_index(a.h, i, j, &gi, &gj), TSR_SUCCESS);
      const double v = mat_value(gi, gj, salt);
      unsigned char* at = const_cast<unsigned char*>(a.buf.data()) + static_cast<size_t>(j * l + i) * tsr_dtype_size(a.type);
      if (a.type == TSR_FLOAT64) {
        if (fill) std::memcpy(at, &v, 8);
        else { double x; std::memcpy(&x, at, 8); bad += x != v; }
      } else {
        const float f = static_cast<float>(v);
        if (fill) std::memcpy(at, &f, 4);
        else { float x; std::memcpy(&x, at, 4); bad += std::memcmp(&x, &f, 4) != 0; }
      }
    }
  return bad;
}
void fill(Mat& a, int salt) { visit(a, salt, true); }
int64_t wrong(const Mat& a, int salt) { return visit(a, salt, false); }

// Balanced share of n over p parts.
void share(uint64_t n, int p, int r, uint64_t* off, uint64_t* cnt) {
  const uint64_t P = static_cast<uint64_t>(p), R = static_cast<uint64_t>(r);
  *cnt = n / P + (R < n % P);
  *off = R * (n / P) + (R < n % P ? R : n % P);
}

// Element k of a typed test array, as bytes.
void elem(tsr_dtype t, uint64_t k, int salt, unsigned char* out) {
  const int64_t x = static_cast<int64_t>(k) * 7919 + salt;
  switch (t) {
    case TSR_BYTE: out[0] = static_cast<unsigned char>(x); break;
    case TSR_INT32: { int32_t v = static_cast<int32_t>(x * 65537); std::memcpy(out, &v, 4); break; }
    case TSR_INT64: { int64_t v = x * 4294967311LL; std::memcpy(out, &v, 8); break; }
    case TSR_FLOAT32: { float v = static_cast<float>(x) / 3.0f; std::memcpy(out, &v, 4); break; }
    case TSR_FLOAT64: { double v = static_cast<double>(x) / 3.0; std::memcpy(out, &v, 8); break; }
    case TSR_BFLOAT16: { uint16_t v = static_cast<uint16_t>(x * 40503 + 21); std::memcpy(out, &v, 2); break; }
  }
}
std::vector<unsigned char> elems(tsr_dtype t, uint64_t off, uint64_t cnt, int salt) {
  const size_t es = tsr_dtype_size(t);
  std::vector<unsigned char> v(cnt * es + 1, 0);
  for (uint64_t k = 0; k < cnt; ++k) elem(t, off + k, salt, v.data() + k * es);
  return v;
}

const tsr_dtype kTypes[] = {TSR_BYTE, TSR_INT32, TSR_INT64, TSR_FLOAT32, TSR_FLOAT64, TSR_BFLOAT16};

// A context over a sub-communicator of the first q world ranks (others: null).
struct Sub {
  MPI_Comm comm = MPI_COMM_NULL;
  tsr_context ctx = nullptr;
  explicit Sub(int q) {
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < q ? 0 : MPI_UNDEFINED, g_rank, &comm);
    if (comm != MPI_COMM_NULL) {
      EXPECT_EQ(tsr_context_create(comm, &ctx), TSR_SUCCESS);
    }
  }
  ~Sub() {
    if (ctx) tsr_context_destroy(&ctx);
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

struct Grid {
  tsr_grid h = nullptr;
  Grid(tsr_context ctx, tsr_grid_kind kind, int d0 = 0, int d1 = 0, int d2 = 0) {
    int size = 0;
    tsr_context_size(ctx, &size);
    int dims[3] = {d0, d1, d2};
    if (kind == TSR_GRID_1D) { dims[1] = dims[2] = 1; }
    if (kind == TSR_GRID_2D) dims[2] = 1;
    if (dims[0] == 0 || dims[1] == 0 || dims[2] == 0) {
      EXPECT_EQ(tsr_grid_dims_create(kind, size, 0, dims, nullptr), TSR_SUCCESS) << tsr_last_error(nullptr);
    }
    EXPECT_EQ(tsr_grid_create(ctx, kind, dims, &h), TSR_SUCCESS) << tsr_last_error(ctx);
  }
  ~Grid() { tsr_grid_destroy(&h); }
};

// Every rank got st, and (on failure) a message containing each of words.
void expect_status(tsr_context ctx, tsr_status got, tsr_status want, std::vector<std::string> words = {}) {
  EXPECT_EQ(got, want) << tsr_status_name(got) << ": " << tsr_last_error(ctx);
  if (got != TSR_SUCCESS) {
    for (const std::string& w : words)
      EXPECT_TRUE(tsr_test::contains(tsr_last_error(ctx), w)) << "message lacks '" << w << "': " << tsr_last_error(ctx);
  }
  int mine = got, lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi) << "ranks returned different statuses";
}

std::vector<std::string> temporaries() {
  std::vector<std::string> t;
  for (const auto& e : fs::directory_iterator(g_dir))
    if (e.path().filename().string().find(".tsr-tmp-") != std::string::npos) t.push_back(e.path().string());
  return t;
}

std::string slurp(const std::string& f) {
  std::ifstream in(f, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class Ckpt : public ::testing::TestWithParam<tsr_ckpt_format> {
 protected:
  void SetUp() override {
    if (GetParam() == TSR_CKPT_HDF5 && !TSR_HAVE_HDF5) GTEST_SKIP() << "built without parallel HDF5";
    ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS);
  }
  void TearDown() override {
    if (ctx) tsr_context_destroy(&ctx);
  }
  std::string file(const std::string& stem) const {
    return path_of(stem + (GetParam() == TSR_CKPT_HDF5 ? ".h5" : ".bin"));
  }
  tsr_context ctx = nullptr;
};

// -------------------------------------------------------------- round trip
TEST_P(Ckpt, RoundTripEveryTypeAndLayoutBitIdentical) {
  Grid g1(ctx, TSR_GRID_1D), g2(ctx, TSR_GRID_2D), g3(ctx, TSR_GRID_3D_ANY);
  struct Case {
    const char* name;
    tsr_grid grid;
    tsr_layout lay;
    tsr_dtype type;
  };
  const std::vector<Case> cases = {
      {"rows_1d", g1.h, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_NONE, TSR_DIM_NONE), TSR_FLOAT64},
      {"cols_1d", g1.h, TSR_LAYOUT(TSR_DIM_NONE, TSR_DIM_I, TSR_DIM_NONE), TSR_FLOAT32},
      {"summa_2d", g2.h, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE), TSR_FLOAT64},
      {"sub_3d", g3.h, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_K), TSR_FLOAT32},
      {"copies_3d", g3.h, TSR_LAYOUT(TSR_DIM_K, TSR_DIM_NONE, TSR_DIM_NONE), TSR_FLOAT64},
      {"replicated", g2.h, TSR_LAYOUT_REPLICATED, TSR_FLOAT64},
      {"cyclic_2d", g2.h, {TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE, 3, 4}, TSR_FLOAT64},
  };
  std::vector<Mat> mats(cases.size());
  const int64_t m = 37, n = 29;
  const std::string f = file("roundtrip");
  {
    tsr_checkpoint ck = nullptr;
    ASSERT_EQ(tsr_checkpoint_create(ctx, f.c_str(), GetParam(), 0, &ck), TSR_SUCCESS) << tsr_last_error(ctx);
    for (size_t c = 0; c < cases.size(); ++c) {
      make(cases[c].grid, m, n, cases[c].type, cases[c].lay, &mats[c], c == 2 ? 40 : 0);
      fill(mats[c], static_cast<int>(c));
      ASSERT_EQ(tsr_checkpoint_put_matrix(ck, cases[c].name, mats[c].h, mats[c].buf.data()), TSR_SUCCESS)
          << tsr_last_error(ctx);
    }
    std::vector<std::vector<unsigned char>> keep;
    for (tsr_dtype t : kTypes) {
      uint64_t off = 0, cnt = 0;
      share(101, g_size, g_rank, &off, &cnt);
      keep.push_back(elems(t, off, cnt, t));
      const std::string name = std::string("shard_") + std::to_string(t);
      ASSERT_EQ(tsr_checkpoint_put_shard(ck, name.c_str(), t, 101, off, cnt, keep.back().data()), TSR_SUCCESS)
          << tsr_last_error(ctx);
      const uint64_t shape[3] = {2, 3, 4};
      keep.push_back(elems(t, 0, 24, 100 + t));
      const std::string rname = std::string("rep_") + std::to_string(t);
      ASSERT_EQ(tsr_checkpoint_put_replicated(ck, rname.c_str(), t, 1 + t % 3, shape, keep.back().data()), TSR_SUCCESS)
          << tsr_last_error(ctx);
    }
    ASSERT_EQ(tsr_checkpoint_put_shard(ck, "empty", TSR_FLOAT32, 0, 0, 0, nullptr), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_int(ck, "step", -1234567890123LL), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_double(ck, "lr", 1.0 / 3.0), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_double(ck, "nan", std::nan("")), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_string(ck, "config", "layers=4 width=256 \xc3\xbc"), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_string(ck, "blank", ""), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_int(ck, "overwritten", 1), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_int(ck, "overwritten", 2), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_commit(ck), TSR_SUCCESS) << tsr_last_error(ctx);
    expect_status(ctx, tsr_checkpoint_commit(ck), TSR_ERR_STATE, {"committed"});
    ASSERT_EQ(tsr_checkpoint_close(&ck), TSR_SUCCESS);
    EXPECT_EQ(ck, nullptr);
  }
  EXPECT_TRUE(temporaries().empty());
  tsr_checkpoint ck = nullptr;
  ASSERT_EQ(tsr_checkpoint_open(ctx, f.c_str(), &ck), TSR_SUCCESS) << tsr_last_error(ctx);
  tsr_ckpt_format fmt = TSR_CKPT_AUTO;
  ASSERT_EQ(tsr_checkpoint_format(ck, &fmt), TSR_SUCCESS);
  EXPECT_EQ(fmt, GetParam());
  int count = 0;
  ASSERT_EQ(tsr_checkpoint_array_count(ck, &count), TSR_SUCCESS);
  EXPECT_EQ(count, static_cast<int>(cases.size() + 2 * 6 + 1));
  for (size_t c = 0; c < cases.size(); ++c) {
    const char* name = nullptr;
    tsr_dtype t;
    int nd = 0;
    uint64_t shape[3];
    ASSERT_EQ(tsr_checkpoint_array_info(ck, static_cast<int>(c), &name, &t, &nd, shape), TSR_SUCCESS);
    EXPECT_STREQ(name, cases[c].name);
    EXPECT_EQ(t, cases[c].type);
    EXPECT_EQ(nd, 2);
    EXPECT_EQ(shape[0], 37u);
    EXPECT_EQ(shape[1], 29u);
    Mat back;
    make(cases[c].grid, m, n, cases[c].type, cases[c].lay, &back, c == 2 ? 40 : 0);
    ASSERT_EQ(tsr_checkpoint_get_matrix(ck, cases[c].name, back.h, back.buf.data()), TSR_SUCCESS) << tsr_last_error(ctx);
    EXPECT_EQ(wrong(back, static_cast<int>(c)), 0) << cases[c].name;
  }
  for (tsr_dtype t : kTypes) {
    uint64_t off = 0, cnt = 0;
    share(101, g_size, g_rank, &off, &cnt);
    std::vector<unsigned char> got(cnt * tsr_dtype_size(t) + 1, 0);
    const std::string name = std::string("shard_") + std::to_string(t);
    ASSERT_EQ(tsr_checkpoint_get_shard(ck, name.c_str(), t, 101, off, cnt, got.data()), TSR_SUCCESS) << tsr_last_error(ctx);
    EXPECT_EQ(got, elems(t, off, cnt, t)) << name;
    const uint64_t shape[3] = {2, 3, 4};
    std::vector<unsigned char> rep(24 * tsr_dtype_size(t) + 1, 0);
    const std::string rname = std::string("rep_") + std::to_string(t);
    ASSERT_EQ(tsr_checkpoint_get_replicated(ck, rname.c_str(), t, 1 + t % 3, shape, rep.data()), TSR_SUCCESS);
    const uint64_t used = t % 3 == 0 ? 2 : t % 3 == 1 ? 6 : 24;
    std::vector<unsigned char> want = elems(t, 0, used, 100 + t);
    rep.resize(want.size() - 1);
    want.pop_back();
    EXPECT_EQ(rep, want) << rname;
  }
  int64_t step = 0;
  double lr = 0, nan = 0;
  char buf[64];
  size_t need = 0;
  EXPECT_EQ(tsr_checkpoint_get_int(ck, "step", &step), TSR_SUCCESS);
  EXPECT_EQ(step, -1234567890123LL);
  EXPECT_EQ(tsr_checkpoint_get_double(ck, "lr", &lr), TSR_SUCCESS);
  EXPECT_EQ(lr, 1.0 / 3.0);
  EXPECT_EQ(tsr_checkpoint_get_double(ck, "nan", &nan), TSR_SUCCESS);
  EXPECT_TRUE(std::isnan(nan));
  EXPECT_EQ(tsr_checkpoint_get_string(ck, "config", buf, sizeof buf, &need), TSR_SUCCESS);
  EXPECT_STREQ(buf, "layers=4 width=256 \xc3\xbc");
  EXPECT_EQ(need, std::strlen("layers=4 width=256 \xc3\xbc"));
  EXPECT_EQ(tsr_checkpoint_get_string(ck, "config", buf, 7, &need), TSR_SUCCESS);  // truncated like snprintf
  EXPECT_STREQ(buf, "layers");
  EXPECT_EQ(tsr_checkpoint_get_string(ck, "blank", nullptr, 0, &need), TSR_SUCCESS);
  EXPECT_EQ(need, 0u);
  EXPECT_EQ(tsr_checkpoint_get_int(ck, "overwritten", &step), TSR_SUCCESS);
  EXPECT_EQ(step, 2);
  int nattr = 0;
  EXPECT_EQ(tsr_checkpoint_attr_count(ck, &nattr), TSR_SUCCESS);
  EXPECT_EQ(nattr, 6);
  const char* key = nullptr;
  tsr_attr_kind kind;
  EXPECT_EQ(tsr_checkpoint_attr_info(ck, 0, &key, &kind), TSR_SUCCESS);  // sorted by key
  EXPECT_STREQ(key, "blank");
  EXPECT_EQ(kind, TSR_ATTR_STRING);
  EXPECT_EQ(tsr_checkpoint_get_int(ck, "lr", &step), TSR_ERR_SHAPE);
  EXPECT_TRUE(tsr_test::contains(tsr_last_error(ctx), "is a double, not an integer"));
  EXPECT_EQ(tsr_checkpoint_get_int(ck, "missing", &step), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(tsr_test::contains(tsr_last_error(ctx), "no attribute 'missing'"));
  int idx = 7;
  EXPECT_EQ(tsr_checkpoint_find_array(ck, "nope", &idx), TSR_SUCCESS);
  EXPECT_EQ(idx, -1);
  EXPECT_EQ(tsr_checkpoint_find_array(ck, "summa_2d", &idx), TSR_SUCCESS);
  EXPECT_EQ(idx, 2);
  EXPECT_EQ(tsr_checkpoint_close(&ck), TSR_SUCCESS);
}

// ---------------------------------------------------------------- resharding
// A matrix written on one grid and rank count reads into others: every
// layout kind on the world, and a 2D layout on a sub-communicator.
void reshard_from(tsr_context ctx, tsr_ckpt_format fmt, const std::string& f, tsr_grid wgrid, tsr_layout wlay) {
  const int64_t m = 41, n = 23;
  {
    Mat w;
    make(wgrid, m, n, TSR_FLOAT64, wlay, &w);
    fill(w, 5);
    auto ck = tessera::checkpoint::create(ctx, f, fmt);
    ck.put("W", w.h, w.buf.data()).set("written_ranks", g_size);
    ck.commit();
  }
  Grid g1(ctx, TSR_GRID_1D), g2(ctx, TSR_GRID_2D), g3(ctx, TSR_GRID_3D_ANY);
  const std::vector<std::pair<tsr_grid, tsr_layout>> targets = {
      {g1.h, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_NONE, TSR_DIM_NONE)},
      {g1.h, TSR_LAYOUT(TSR_DIM_NONE, TSR_DIM_I, TSR_DIM_NONE)},
      {g2.h, TSR_LAYOUT(TSR_DIM_J, TSR_DIM_I, TSR_DIM_NONE)},
      {g2.h, {TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE, 2, 5}},
      {g3.h, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_K, TSR_DIM_J)},
      {g3.h, TSR_LAYOUT_REPLICATED},
  };
  auto ck = tessera::checkpoint::open(ctx, f);
  for (size_t t = 0; t < targets.size(); ++t) {
    Mat r;
    make(targets[t].first, m, n, TSR_FLOAT64, targets[t].second, &r);
    ck.get("W", r.h, r.buf.data());
    EXPECT_EQ(wrong(r, 5), 0) << "target layout " << t;
  }
  // Fewer ranks: the first q of them, on their own 2D grid.
  const int q = g_size > 2 ? 3 : 1;
  Sub sub(q);
  if (sub.ctx) {
    Grid gs(sub.ctx, TSR_GRID_2D);
    Mat r;
    make(gs.h, m, n, TSR_FLOAT64, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE), &r);
    auto sck = tessera::checkpoint::open(sub.ctx, f);
    EXPECT_EQ(sck.get_int("written_ranks"), g_size);
    sck.get("W", r.h, r.buf.data());
    EXPECT_EQ(wrong(r, 5), 0) << "on " << q << " ranks";
  }
}

TEST_P(Ckpt, MatrixFrom2DReadsIntoEveryLayoutAndFewerRanks) {
  Grid g(ctx, TSR_GRID_2D);
  reshard_from(ctx, GetParam(), file("reshard2d"), g.h, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE));
}

TEST_P(Ckpt, MatrixFromBlockCyclicReadsElsewhere) {
  Grid g(ctx, TSR_GRID_2D);
  reshard_from(ctx, GetParam(), file("reshardcyc"), g.h, {TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE, 4, 3});
}

// The cases: 2.5D 2x2x2 to 2D 2x3 (2 idle ranks) and to 3 ranks.
TEST_P(Ckpt, From2p5D222To2D23And3Ranks) {
  if (g_size != 8) GTEST_SKIP() << "needs 8 ranks";
  Grid g(ctx, TSR_GRID_2P5D, 2, 2, 2);
  const std::string f = file("from2p5d");
  reshard_from(ctx, GetParam(), f, g.h, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_K));
  Grid g23(ctx, TSR_GRID_2D, 2, 3, 1);
  Mat r;
  make(g23.h, 41, 23, TSR_FLOAT64, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE), &r);
  auto ck = tessera::checkpoint::open(ctx, f);
  ck.get("W", r.h, r.buf.data());
  EXPECT_EQ(wrong(r, 5), 0);
}

// 2D 2x2 to 1D 4 (covered by every 4-rank run above, named here).
TEST_P(Ckpt, From2D22To1D4) {
  if (g_size != 4) GTEST_SKIP() << "needs 4 ranks";
  Grid g(ctx, TSR_GRID_2D, 2, 2, 1), g1(ctx, TSR_GRID_1D, 4, 1, 1);
  Mat w, r;
  make(g.h, 64, 48, TSR_FLOAT32, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE), &w);
  fill(w, 9);
  const std::string f = file("from2d22");
  {
    auto ck = tessera::checkpoint::create(ctx, f, GetParam());
    ck.put("X", w.h, w.buf.data());
    ck.commit();
  }
  make(g1.h, 64, 48, TSR_FLOAT32, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_NONE, TSR_DIM_NONE), &r);
  auto ck = tessera::checkpoint::open(ctx, f);
  ck.get("X", r.h, r.buf.data());
  EXPECT_EQ(wrong(r, 9), 0);
}

TEST_P(Ckpt, ShardsReadWithOtherBoundaries) {
  const uint64_t G = 1003;
  const std::string f = file("shards");
  {
    uint64_t off = 0, cnt = 0;
    share(G, g_size, g_rank, &off, &cnt);
    std::vector<unsigned char> mine = elems(TSR_FLOAT64, off, cnt, 3);
    auto ck = tessera::checkpoint::create(ctx, f, GetParam());
    ck.put_shard("x", reinterpret_cast<const double*>(mine.data()), cnt, off, G);
    ck.commit();
  }
  auto ck = tessera::checkpoint::open(ctx, f);
  // Reversed boundaries, overlapping reads, a whole-array read.
  uint64_t off = 0, cnt = 0;
  share(G, g_size, g_size - 1 - g_rank, &off, &cnt);
  std::vector<double> got(cnt + 1);
  ck.get_shard("x", got.data(), cnt, off, G);
  std::vector<unsigned char> want = elems(TSR_FLOAT64, off, cnt, 3);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), cnt * 8), 0);
  std::vector<double> all(G);
  ck.get_shard("x", all.data(), G, 0, G);
  want = elems(TSR_FLOAT64, 0, G, 3);
  EXPECT_EQ(std::memcmp(all.data(), want.data(), G * 8), 0);
}

// Sharded LAMB written on p ranks, with the model, loads on about half of
// them (4 -> 2) and continues exactly like the original.
TEST_P(Ckpt, ShardedOptimizerStateToFewerRanks) {
  const std::vector<size_t> sizes = {1000, 37, 5};
  size_t n = 0;
  for (size_t s : sizes) n += s;
  std::vector<float> params(n), grads(n);
  for (size_t i = 0; i < n; ++i) params[i] = std::sin(0.1f * static_cast<float>(i));
  tessera::optimizer a(ctx, TSR_PRESET_LAMB_PAPER, sizes, TSR_OPT_SHARDED);
  for (int s = 1; s <= 3; ++s) {
    for (size_t i = 0; i < n; ++i) grads[i] = std::cos(0.37f * static_cast<float>(i) + s);
    ASSERT_EQ(tsr_optimizer_step(a.get(), params.data(), grads.data(), n), TSR_SUCCESS) << tsr_last_error(ctx);
  }
  const std::string f = file("optimizer");
  {
    auto ck = tessera::checkpoint::create(ctx, f, GetParam());
    ck.put_replicated("params", params).put("opt", a.get()).set("step", 3);
    ck.commit();
  }
  // The original takes one more step: the reference.
  std::vector<float> ref = params;
  for (size_t i = 0; i < n; ++i) grads[i] = std::cos(0.37f * static_cast<float>(i) + 4);
  ASSERT_EQ(tsr_optimizer_step(a.get(), ref.data(), grads.data(), n), TSR_SUCCESS);
  const int q = g_size >= 4 ? g_size / 2 : g_size;
  Sub sub(q);
  if (sub.ctx) {
    tessera::optimizer b(sub.ctx, TSR_PRESET_LAMB_PAPER, sizes, TSR_OPT_SHARDED);
    auto ck = tessera::checkpoint::open(sub.ctx, f);
    std::vector<float> p2(n);
    ck.get_replicated("params", p2);
    ck.get("opt", b.get());
    EXPECT_EQ(p2, params);
    EXPECT_EQ(ck.get_string("opt.optimizer"), "lamb");
    ASSERT_EQ(tsr_optimizer_step(b.get(), p2.data(), grads.data(), n), TSR_SUCCESS) << tsr_last_error(sub.ctx);
    EXPECT_EQ(p2, ref) << "the resumed step differs from the original's";
  }
}

// A state file of tsr_optimizer_save is a checkpoint with the optimizer at prefix "".
TEST_P(Ckpt, OptimizerStateFileIsACheckpoint) {
  const std::vector<size_t> sizes = {64, 3};
  std::vector<float> p(67, 0.5f), g(67, 0.25f);
  tessera::optimizer a(ctx, TSR_PRESET_LARS_PAPER, sizes, TSR_OPT_DATA_PARALLEL);
  ASSERT_EQ(tsr_optimizer_step(a.get(), p.data(), g.data(), 67), TSR_SUCCESS);
  const std::string f = file("state");
  ASSERT_EQ(tsr_optimizer_save(a.get(), f.c_str()), TSR_SUCCESS);
  tessera::optimizer b(ctx, TSR_PRESET_LARS_PAPER, sizes, TSR_OPT_SHARDED);
  auto ck = tessera::checkpoint::open(ctx, f);
  ck.get("", b.get());
  double steps = 0;
  ASSERT_EQ(tsr_optimizer_query(b.get(), TSR_OPTQ_STEP, 0, &steps), TSR_SUCCESS);
  EXPECT_EQ(steps, 1.0);
}

// ---------------------------------------------------------------- accounting
TEST_P(Ckpt, DiskBytesAreChargedExactly) {
  const uint64_t G = 777;
  uint64_t off = 0, cnt = 0;
  share(G, g_size, g_rank, &off, &cnt);
  std::vector<double> x(cnt + 1, 1.5);
  std::vector<int32_t> r(10, 7);
  const std::string f = file("bytes");
  const tsr_counters c0 = tsr_test::counters(ctx);
  {
    tsr_checkpoint ck = nullptr;
    ASSERT_EQ(tsr_checkpoint_create(ctx, f.c_str(), GetParam(), 0, &ck), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_put_shard(ck, "x", TSR_FLOAT64, G, off, cnt, x.data()), TSR_SUCCESS);
    const uint64_t shape[1] = {10};
    ASSERT_EQ(tsr_checkpoint_put_replicated(ck, "r", TSR_INT32, 1, shape, r.data()), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_int(ck, "step", 3), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_commit(ck), TSR_SUCCESS);
    tsr_checkpoint_close(&ck);
  }
  const tsr_counters c1 = tsr_test::counters(ctx);
  // Binary header and table (docs/FILES.md): 40 + (52 + 1) * 2 + (12 + 4 + 8).
  const uint64_t head = GetParam() == TSR_CKPT_BINARY ? 40 + 53 * 2 + 24 : 0;
  const uint64_t want = cnt * 8 + (g_rank == 0 ? 40 + head : 0);
  EXPECT_EQ(c1.disk_write_bytes - c0.disk_write_bytes, want);
  EXPECT_EQ(c1.disk_read_bytes, c0.disk_read_bytes);
  // Reading: this rank's elements; rank 0 also the description, at open and at each get.
  tsr_checkpoint ck = nullptr;
  ASSERT_EQ(tsr_checkpoint_open(ctx, f.c_str(), &ck), TSR_SUCCESS);
  ASSERT_EQ(tsr_checkpoint_get_shard(ck, "x", TSR_FLOAT64, G, off, cnt, x.data()), TSR_SUCCESS);
  tsr_checkpoint_close(&ck);
  const tsr_counters c2 = tsr_test::counters(ctx);
  const uint64_t probe = GetParam() == TSR_CKPT_BINARY ? head : 8;
  EXPECT_EQ(c2.disk_read_bytes - c1.disk_read_bytes, cnt * 8 + (g_rank == 0 ? 2 * probe : 0));
}

// ----------------------------------------------------------------- errors
TEST_P(Ckpt, BadFilesFailOnEveryRankNamingThePath) {
  tsr_checkpoint ck = nullptr;
  const std::string missing = path_of("missing.ckpt");
  expect_status(ctx, tsr_checkpoint_open(ctx, missing.c_str(), &ck), TSR_ERR_IO, {missing, "no such file"});
  EXPECT_EQ(ck, nullptr);
  const std::string text = path_of("notes.txt");
  if (g_rank == 0) std::ofstream(text) << "This is a text file, long enough to hold a header of forty bytes.\n";
  barrier();
  expect_status(ctx, tsr_checkpoint_open(ctx, text.c_str(), &ck), TSR_ERR_IO, {text, "not a tessera file"});
  // A truncated checkpoint.
  const std::string good = file("good"), cut = file("cut");
  {
    std::vector<float> v(4096, 1.0f);
    uint64_t off = 0, cnt = 0;
    share(4096, g_size, g_rank, &off, &cnt);
    auto w = tessera::checkpoint::create(ctx, good, GetParam());
    w.put_shard("v", v.data(), cnt, off, 4096);
    w.commit();
  }
  if (g_rank == 0) {
    const std::string bytes = slurp(good);
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  barrier();
  tsr_status st = tsr_checkpoint_open(ctx, cut.c_str(), &ck);
  if (st == TSR_SUCCESS) {  // HDF5 may list a truncated file: then the read fails
    std::vector<float> v(4096);
    st = tsr_checkpoint_get_shard(ck, "v", TSR_FLOAT32, 4096, 0, 4096, v.data());
    tsr_checkpoint_close(&ck);
  }
  expect_status(ctx, st, TSR_ERR_IO, {cut});
  // Wrong name, type, shape.
  ASSERT_EQ(tsr_checkpoint_open(ctx, good.c_str(), &ck), TSR_SUCCESS);
  std::vector<float> v(4096);
  std::vector<double> d(4096);
  expect_status(ctx, tsr_checkpoint_get_shard(ck, "w", TSR_FLOAT32, 4096, 0, 1, v.data()), TSR_ERR_IO, {good, "no array 'w'"});
  expect_status(ctx, tsr_checkpoint_get_shard(ck, "v", TSR_FLOAT64, 4096, 0, 1, d.data()), TSR_ERR_INVALID_ARG,
                {"'v'", "TSR_FLOAT32"});
  expect_status(ctx, tsr_checkpoint_get_shard(ck, "v", TSR_FLOAT32, 4095, 0, 1, v.data()), TSR_ERR_SHAPE,
                {"'v'", "global_count"});
  expect_status(ctx, tsr_checkpoint_get_shard(ck, "v", TSR_FLOAT32, 4096, 4000, 97, v.data()), TSR_ERR_SHAPE,
                {"outside"});
  const uint64_t shape[2] = {64, 64};
  expect_status(ctx, tsr_checkpoint_get_replicated(ck, "v", TSR_FLOAT32, 2, shape, v.data()), TSR_ERR_SHAPE,
                {"'v'", "4096", "64x64"});
  Grid g(ctx, TSR_GRID_2D);
  Mat mat;
  make(g.h, 64, 64, TSR_FLOAT32, TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE), &mat);
  expect_status(ctx, tsr_checkpoint_get_matrix(ck, "v", mat.h, mat.buf.data()), TSR_ERR_SHAPE, {"'v'"});
  // A handle being read takes no puts, and one being written no gets.
  expect_status(ctx, tsr_checkpoint_put_shard(ck, "z", TSR_FLOAT32, 1, 0, g_rank == 0, v.data()), TSR_ERR_STATE,
                {"opened for reading"});
  tsr_checkpoint_close(&ck);
  ASSERT_EQ(tsr_checkpoint_create(ctx, file("w").c_str(), GetParam(), 0, &ck), TSR_SUCCESS);
  expect_status(ctx, tsr_checkpoint_get_shard(ck, "v", TSR_FLOAT32, 4096, 0, 1, v.data()), TSR_ERR_STATE,
                {"being written"});
  int count = 0;
  EXPECT_EQ(tsr_checkpoint_array_count(ck, &count), TSR_ERR_STATE);
  tsr_checkpoint_close(&ck);
  EXPECT_FALSE(fs::exists(file("w")));  // closed without a commit: nothing written
}

TEST_P(Ckpt, BadArgumentsOnOneRankFailEveryRank) {
  const int last = g_size - 1;
  tsr_checkpoint ck = nullptr;
  expect_status(ctx, tsr_checkpoint_create(ctx, file("args").c_str(), static_cast<tsr_ckpt_format>(g_rank == last ? 7 : GetParam()),
                                           0, &ck), TSR_ERR_INVALID_ARG, {});
  EXPECT_EQ(ck, nullptr);
  expect_status(ctx, tsr_checkpoint_create(ctx, file("args").c_str(), GetParam(), g_rank == last ? 8 : 0, &ck),
                TSR_ERR_INVALID_ARG, {});
  const std::string other = g_rank == last ? file("other") : file("args");
  expect_status(ctx, tsr_checkpoint_create(ctx, other.c_str(), GetParam(), 0, &ck), g_size > 1 ? TSR_ERR_INVALID_ARG : TSR_SUCCESS,
                {"differ"});
  tsr_checkpoint_close(&ck);
  ASSERT_EQ(tsr_checkpoint_create(ctx, file("args").c_str(), GetParam(), 0, &ck), TSR_SUCCESS);
  uint64_t off = 0, cnt = 0;
  share(100, g_size, g_rank, &off, &cnt);
  std::vector<float> v(100, 2.0f);
  // NULL data on the last rank only (which holds elements).
  expect_status(ctx, tsr_checkpoint_put_shard(ck, "a", TSR_FLOAT32, 100, off, cnt, g_rank == last ? nullptr : v.data()),
                TSR_ERR_INVALID_ARG, {"'local'"});
  // A name that differs on one rank.
  if (g_size > 1)
    expect_status(ctx, tsr_checkpoint_put_shard(ck, g_rank == last ? "b2" : "b", TSR_FLOAT32, 100, off, cnt, v.data()),
                  TSR_ERR_INVALID_ARG, {"differ"});
  // Shards that overlap, or leave a gap.
  expect_status(ctx, tsr_checkpoint_put_shard(ck, "c", TSR_FLOAT32, 100, 0, cnt, v.data()),
                g_size > 1 ? TSR_ERR_SHAPE : TSR_SUCCESS, {"do not tile"});
  expect_status(ctx, tsr_checkpoint_put_shard(ck, "d", TSR_FLOAT32, 101, off, cnt, v.data()), TSR_ERR_SHAPE, {"'d'"});
  expect_status(ctx, tsr_checkpoint_put_shard(ck, "bad/name", TSR_FLOAT32, 100, off, cnt, v.data()), TSR_ERR_INVALID_ARG,
                {"'name'"});
  expect_status(ctx, tsr_checkpoint_put_shard(ck, "tessera_x", TSR_FLOAT32, 100, off, cnt, v.data()), TSR_ERR_INVALID_ARG,
                {"tessera_"});
  expect_status(ctx, tsr_checkpoint_put_shard(ck, "e", static_cast<tsr_dtype>(g_rank == last ? 9 : 3), 100, off, cnt,
                                              v.data()), TSR_ERR_INVALID_ARG, {});
  ASSERT_EQ(tsr_checkpoint_put_shard(ck, "ok", TSR_FLOAT32, 100, off, cnt, v.data()), TSR_SUCCESS);
  expect_status(ctx, tsr_checkpoint_put_shard(ck, "ok", TSR_FLOAT32, 100, off, cnt, v.data()), TSR_ERR_INVALID_ARG,
                {"already"});
  const uint64_t huge[3] = {UINT64_MAX / 2, 4, 1};
  expect_status(ctx, tsr_checkpoint_put_replicated(ck, "huge", TSR_FLOAT64, 2, huge, v.data()), TSR_ERR_UNSUPPORTED,
                {"overflow"});
  expect_status(ctx, tsr_checkpoint_put_replicated(ck, "nd", TSR_FLOAT64, g_rank == last ? 4 : 1, huge + 1, v.data()),
                TSR_ERR_INVALID_ARG, {});
  expect_status(ctx, tsr_checkpoint_set_string(ck, "k", g_rank == last ? nullptr : "x"), TSR_ERR_INVALID_ARG, {"'value'"});
  if (g_size > 1)
    expect_status(ctx, tsr_checkpoint_set_int(ck, "k", g_rank == last ? 2 : 1), TSR_ERR_INVALID_ARG, {"differs"});
  tsr_checkpoint_close(&ck);
}

TEST_P(Ckpt, AFailedCommitKeepsThePreviousCheckpoint) {
  const std::string f = file("keep");
  std::vector<float> v(8, 1.0f);
  {
    auto ck = tessera::checkpoint::create(ctx, f, GetParam());
    ck.put_replicated("v", v).set("step", 1);
    ck.commit();
  }
  barrier();
  const std::string before = g_rank == 0 ? slurp(f) : std::string();
  // Replicated data that differ on one rank: refused at commit.
  if (g_size > 1) {
    if (g_rank == g_size - 1) v[3] = 2.0f;
    tsr_checkpoint ck = nullptr;
    ASSERT_EQ(tsr_checkpoint_create(ctx, f.c_str(), GetParam(), 0, &ck), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_put_replicated(ck, "v", TSR_FLOAT32, 1, std::vector<uint64_t>{8}.data(), v.data()), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_int(ck, "step", 2), TSR_SUCCESS);
    expect_status(ctx, tsr_checkpoint_commit(ck), TSR_ERR_INVALID_ARG, {"'v'", "differ across ranks"});
    tsr_checkpoint_close(&ck);
  }
  // The target is a non-empty directory: the rename fails after the temporary is complete.
  const std::string dir = file("a-directory");
  if (g_rank == 0) {
    fs::create_directory(dir);
    std::ofstream(dir + "/inside") << "x";
  }
  barrier();
  {
    tsr_checkpoint ck = nullptr;
    ASSERT_EQ(tsr_checkpoint_create(ctx, dir.c_str(), GetParam(), 0, &ck), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_int(ck, "step", 3), TSR_SUCCESS);
    expect_status(ctx, tsr_checkpoint_commit(ck), TSR_ERR_IO, {dir, "rename"});
    tsr_checkpoint_close(&ck);
  }
  // An unwritable directory (root writes anywhere it could chmod: procfs then).
  const std::string ro = geteuid() == 0 ? std::string("/proc/tessera.ckpt") : path_of("ro/x.ckpt");
  if (geteuid() != 0 && g_rank == 0) {
    fs::create_directory(path_of("ro"));
    fs::permissions(path_of("ro"), fs::perms::owner_read | fs::perms::owner_exec);
  }
  barrier();
  {
    tsr_checkpoint ck = nullptr;
    ASSERT_EQ(tsr_checkpoint_create(ctx, ro.c_str(), GetParam(), 0, &ck), TSR_SUCCESS);
    ASSERT_EQ(tsr_checkpoint_set_int(ck, "step", 4), TSR_SUCCESS);
    expect_status(ctx, tsr_checkpoint_commit(ck), TSR_ERR_IO, {ro});
    tsr_checkpoint_close(&ck);
  }
  barrier();
  EXPECT_TRUE(temporaries().empty());
  if (g_rank == 0) {
    EXPECT_TRUE(slurp(f) == before);
  }
  auto ck = tessera::checkpoint::open(ctx, f);
  EXPECT_EQ(ck.get_int("step"), 1);
}

TEST_P(Ckpt, CppErrorsCarryTheStatus) {
  try {
    auto ck = tessera::checkpoint::open(ctx, path_of("none.ckpt"));
    ADD_FAILURE() << "no exception";
  } catch (const tessera::error& e) {
    EXPECT_EQ(e.status(), TSR_ERR_IO);
    EXPECT_TRUE(tsr_test::contains(e.what(), "none.ckpt"));
  }
  EXPECT_EQ(tsr_checkpoint_close(nullptr), TSR_ERR_INVALID_ARG);
  tsr_checkpoint null = nullptr;
  EXPECT_EQ(tsr_checkpoint_close(&null), TSR_SUCCESS);
  EXPECT_EQ(tsr_checkpoint_commit(nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(tsr_test::contains(tsr_last_error(nullptr), "'ckpt'"));
}

INSTANTIATE_TEST_SUITE_P(Formats, Ckpt, ::testing::Values(TSR_CKPT_BINARY, TSR_CKPT_HDF5),
                         [](const ::testing::TestParamInfo<tsr_ckpt_format>& i) {
                           return std::string(i.param == TSR_CKPT_HDF5 ? "hdf5" : "binary");
                         });

}  // namespace

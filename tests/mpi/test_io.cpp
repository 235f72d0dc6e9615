// The I/O layer (lib/io.hpp): round trips in both formats with a different
// decomposition on read, empty blocks, attrs, exact disk byte counts, every
// error with one status on all ranks and the file name in the message, crash
// safety, and that HDF5 files open in h5dump and h5py.
//
// Every I/O call is a chain of collectives, slow on oversubscribed ranks, so
// one reference file per format is written at start-up and the tests that only
// need some valid file (errors, truncation, tools) use it or a copy of it.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "context.hpp"
#include "core.hpp"
#include "io.hpp"
#include "tessera/tsr_config.h"

#if TSR_HAVE_HDF5
#include <hdf5.h>
#endif

namespace {

using tsr::io::Block;
using tsr::io::DatasetInfo;
using tsr::io::Format;
using Attrs = tsr::io::Attrs;
namespace fs = std::filesystem;

tsr_context g_ctx = nullptr;
std::string g_dir;  // a fresh directory shared by all ranks
int g_rank = 0, g_size = 1;

const tsr::Comm& world() { return *g_ctx->world; }
std::string path_of(const std::string& name) { return g_dir + "/" + name; }
void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

// ---------------------------------------------------------------- data
struct Spec {
  std::string name;
  tsr_dtype type;
  int ndims;
  uint64_t global[3];
};

// Float64/float32/int64/bf16 in 1, 2 and 3 dimensions; kOthers: the other
// types. kSmall for the error tests: every collective costs time on
// oversubscribed ranks.
const std::vector<Spec> kSpecs = {
    {"vec", TSR_FLOAT64, 1, {37, 1, 1}},
    {"mat", TSR_FLOAT32, 2, {13, 7, 1}},
    {"cube", TSR_INT64, 3, {5, 4, 3}},
    {"half", TSR_BFLOAT16, 2, {6, 9, 1}},
};
const std::vector<Spec> kOthers = {{"ids.v2", TSR_INT32, 1, {11, 1, 1}}, {"raw-bytes", TSR_BYTE, 3, {2, 3, 4}}};
const std::vector<Spec> kSmall = {kSpecs[0], kSpecs[2]};

// Element gi (row-major global index) of dataset number `set`. Values that
// any conversion or misplacement would change.
void element(tsr_dtype t, int set, uint64_t gi, unsigned char* dst) {
  switch (t) {
    case TSR_BYTE: { const uint8_t v = static_cast<uint8_t>(gi * 7 + static_cast<uint64_t>(set)); std::memcpy(dst, &v, 1); break; }
    case TSR_INT32: { const int32_t v = static_cast<int32_t>(gi) * 1000 - set; std::memcpy(dst, &v, 4); break; }
    case TSR_INT64: { const int64_t v = static_cast<int64_t>(gi) * 1000003 - (int64_t{set} << 40); std::memcpy(dst, &v, 8); break; }
    case TSR_FLOAT32: { const float v = static_cast<float>(gi) * 0.5f + static_cast<float>(set); std::memcpy(dst, &v, 4); break; }
    case TSR_FLOAT64: { const double v = static_cast<double>(gi) / 3.0 + set; std::memcpy(dst, &v, 8); break; }
    case TSR_BFLOAT16: { const uint16_t v = static_cast<uint16_t>(gi * 40503u + static_cast<uint64_t>(set) * 7u); std::memcpy(dst, &v, 2); break; }
  }
}

uint64_t elements(const Block& b) {
  uint64_t n = 1;
  for (int d = 0; d < b.ndims; ++d) n *= b.extent[d];
  return n;
}

// The values block b should hold, in its row-major order.
std::vector<unsigned char> expected(const Block& b, int set) {
  const size_t es = tsr_dtype_size(b.type);
  std::vector<unsigned char> out(elements(b) * es);
  size_t k = 0;
  for (uint64_t i = 0; i < b.extent[0]; ++i)
    for (uint64_t j = 0; j < b.extent[1]; ++j)
      for (uint64_t l = 0; l < b.extent[2]; ++l, ++k) {
        const uint64_t gi = ((b.offset[0] + i) * b.global[1] + b.offset[1] + j) * b.global[2] + b.offset[2] + l;
        element(b.type, set, gi, &out[k * es]);
      }
  return out;
}

Block whole(const Spec& s) {
  Block b;
  b.name = s.name;
  b.type = s.type;
  b.ndims = s.ndims;
  for (int d = 0; d < 3; ++d) {
    b.global[d] = s.global[d];
    b.offset[d] = 0;
    b.extent[d] = s.global[d];
  }
  return b;
}

// Blocks with their own storage.
struct Blocks {
  std::vector<Block> blocks;
  std::vector<std::vector<unsigned char>> mem;
  std::vector<int> set;

  // Dataset s split along `axis` into `parts`, part `part`; filled for writing.
  void add(const Spec& s, int set_no, int axis, int part, int parts, bool fill) {
    Block b = whole(s);
    const uint64_t n = s.global[axis], p = static_cast<uint64_t>(parts), q = static_cast<uint64_t>(part);
    b.offset[axis] = n * q / p;
    b.extent[axis] = n * (q + 1) / p - b.offset[axis];
    add(b, set_no, fill);
  }
  void add(const Block& b, int set_no, bool fill) {
    blocks.push_back(b);
    set.push_back(set_no);
    mem.push_back(fill ? expected(b, set_no) : std::vector<unsigned char>(elements(b) * tsr_dtype_size(b.type), 0xEE));
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i].data = mem[i].empty() ? nullptr : mem[i].data();
  }
  uint64_t bytes() const {
    uint64_t n = 0;
    for (const auto& m : mem) n += m.size();
    return n;
  }
  void expect_values() const {
    for (size_t i = 0; i < blocks.size(); ++i)
      EXPECT_TRUE(mem[i] == expected(blocks[i], set[i])) << "dataset " << blocks[i].name << " on rank " << g_rank;
  }
};

// Written by rows (axis 0, in rank order); read by the last axis in reverse
// rank order, so every rank reads data other ranks wrote.
Blocks by_rows(const std::vector<Spec>& specs) {
  Blocks w;
  for (size_t i = 0; i < specs.size(); ++i) w.add(specs[i], static_cast<int>(i), 0, g_rank, g_size, true);
  return w;
}
Blocks by_columns(const std::vector<Spec>& specs) {
  Blocks r;
  for (size_t i = 0; i < specs.size(); ++i)
    r.add(specs[i], static_cast<int>(i), specs[i].ndims - 1, g_size - 1 - g_rank, g_size, false);
  return r;
}

// --------------------------------------------------------------- checks
// The same status on every rank, and a message naming the file.
void expect_error(tsr_status st, tsr_status code, const std::string& file, const char* words = nullptr) {
  const std::string msg = tsr::pending_message();
  EXPECT_EQ(st, code) << tsr_status_name(st) << ": " << msg;
  int mine = st, lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi) << "ranks returned different statuses";
  EXPECT_NE(msg.find(file), std::string::npos) << "message does not name '" << file << "': " << msg;
  if (words) {
    EXPECT_NE(msg.find(words), std::string::npos) << "message lacks '" << words << "': " << msg;
  }
}

#define EXPECT_OK(call)                                                         \
  do {                                                                          \
    const tsr_status st_ = (call);                                              \
    EXPECT_EQ(st_, TSR_SUCCESS) << tsr_status_name(st_) << ": " << tsr::pending_message(); \
  } while (0)

std::vector<std::string> temporaries() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(g_dir))
    if (e.path().filename().string().find(".tsr-tmp-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Rank 0 changes the file, everyone waits.
void rank0_spit(const std::string& path, const std::string& bytes) {
  if (g_rank == 0) spit(path, bytes);
  barrier();
}

// Binary header and table bytes, by the formula of docs/FILES.md.
uint64_t binary_head_bytes(const std::vector<Spec>& specs, const Attrs& attrs) {
  uint64_t n = 40;
  for (const Spec& s : specs) n += 52 + s.name.size();
  // Version 02: key length, key, kind, value length, value (numbers: 8 bytes).
  for (const auto& kv : attrs)
    n += 12 + kv.first.size() + (kv.second.kind == TSR_ATTR_STRING ? kv.second.text.size() : 8);
  return n;
}

tsr_counters counters() {
  tsr_counters c;
  EXPECT_EQ(tsr_counters_get(g_ctx, "total", &c), TSR_SUCCESS);
  return c;
}

const char* format_name(Format f) { return f == Format::hdf5 ? "hdf5" : f == Format::binary ? "binary" : "automatic"; }

// Rank 0 copies a file, everyone waits.
void rank0_copy(const std::string& from, const std::string& to) {
  if (g_rank == 0) fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  barrier();
}

// ------------------------------------------------------ reference files
const Attrs kAttrs = {{"step", "1200"}, {"optimizer.name", "adam w"}, {"empty", ""}, {"utf8", "gr\xc3\xbc\xc3\x9f"}};

// kSpecs written by rows with kAttrs, in the given format.
std::string reference(Format f) { return path_of(std::string("reference.") + format_name(f)); }

class IoEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &g_ctx), TSR_SUCCESS);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    char name[64] = "/tmp/tsr-io-XXXXXX";
    if (g_rank == 0 && mkdtemp(name) == nullptr) name[0] = '\0';
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    g_dir = name;
    ASSERT_FALSE(g_dir.empty()) << "mkdtemp failed";
    Blocks w = by_rows(kSpecs);
    EXPECT_OK(tsr::io::write(world(), reference(Format::binary), w.blocks, kAttrs, Format::binary));
    if (TSR_HAVE_HDF5) EXPECT_OK(tsr::io::write(world(), reference(Format::hdf5), w.blocks, kAttrs, Format::hdf5));
  }
  void TearDown() override {
    barrier();
    if (g_rank == 0) {
      std::error_code ec;
      fs::remove_all(g_dir, ec);
    }
    tsr_context_destroy(&g_ctx);
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new IoEnvironment);

// ============================================================ both formats
class IoFormat : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    if (GetParam() == Format::hdf5 && !TSR_HAVE_HDF5) GTEST_SKIP() << "built without parallel HDF5 (TSR_HAVE_HDF5 = 0)";
  }
  std::string file(const std::string& stem) const { return path_of(stem + "." + format_name(GetParam())); }
  std::string ref() const { return reference(GetParam()); }
};

// Values, attrs and the listing survive a write by rows and a read by
// columns, and the disk bytes are exactly the documented ones.
TEST_P(IoFormat, RoundTripWithAnotherDecompositionAndExactBytes) {
  const std::string f = file("roundtrip");
  const bool binary = GetParam() == Format::binary;
  const uint64_t head = binary_head_bytes(kSpecs, kAttrs);
  Blocks w = by_rows(kSpecs);
  ASSERT_EQ(tsr_counters_reset(g_ctx), TSR_SUCCESS);
  EXPECT_OK(tsr::io::write(world(), f, w.blocks, kAttrs, GetParam()));
  tsr_counters c = counters();
  EXPECT_EQ(c.disk_write_bytes, w.bytes() + (binary && g_rank == 0 ? head : 0));
  EXPECT_EQ(c.disk_read_bytes, 0u);
  EXPECT_TRUE(temporaries().empty());
  if (binary) {
    uint64_t data = 0;
    for (const Spec& s : kSpecs) data += s.global[0] * s.global[1] * s.global[2] * tsr_dtype_size(s.type);
    EXPECT_EQ(fs::file_size(f), head + data);
  }
  // Reading: this rank's blocks, plus what rank 0 reads to learn the format
  // (the 8-byte HDF5 signature, or the binary header and table).
  const uint64_t probe = g_rank != 0 ? 0 : binary ? head : 8;
  Blocks r = by_columns(kSpecs);
  Attrs got;
  ASSERT_EQ(tsr_counters_reset(g_ctx), TSR_SUCCESS);
  EXPECT_OK(tsr::io::read(world(), f, r.blocks, &got));
  c = counters();
  EXPECT_EQ(c.disk_read_bytes, r.bytes() + probe);
  EXPECT_EQ(c.disk_write_bytes, 0u);
  r.expect_values();
  EXPECT_EQ(got, kAttrs);

  std::vector<DatasetInfo> sets;
  Format fmt = Format::automatic;
  Attrs seen;
  ASSERT_EQ(tsr_counters_reset(g_ctx), TSR_SUCCESS);
  EXPECT_OK(tsr::io::inspect(world(), f, &sets, &fmt, &seen));
  c = counters();
  EXPECT_EQ(c.disk_read_bytes, probe);
  EXPECT_EQ(c.disk_write_bytes, 0u);
  EXPECT_EQ(fmt, GetParam());
  EXPECT_EQ(seen, kAttrs);
  ASSERT_EQ(sets.size(), kSpecs.size());
  for (size_t i = 0; i < sets.size(); ++i) {
    EXPECT_EQ(sets[i].name, kSpecs[i].name);
    EXPECT_EQ(sets[i].type, kSpecs[i].type);
    EXPECT_EQ(sets[i].ndims, kSpecs[i].ndims);
    for (int d = 0; d < 3; ++d) EXPECT_EQ(sets[i].global[d], kSpecs[i].global[d]) << sets[i].name << " dim " << d;
  }
}

TEST_P(IoFormat, EmptyBlocksAndEmptyDatasets) {
  const std::string f = file("empty");
  std::vector<Spec> specs = kOthers;
  specs.push_back({"nothing", TSR_FLOAT64, 2, {0, 5, 1}});
  // The last rank writes everything, rank 0 reads everything; the others
  // take part with empty blocks (extent 0 in dimension 0).
  Blocks w, r;
  for (size_t i = 0; i < specs.size(); ++i) {
    Block b = whole(specs[i]);
    if (g_rank != g_size - 1) b.extent[0] = 0;
    w.add(b, static_cast<int>(i), true);
    b = whole(specs[i]);
    if (g_rank != 0) b.extent[0] = 0;
    r.add(b, static_cast<int>(i), false);
  }
  ASSERT_EQ(tsr_counters_reset(g_ctx), TSR_SUCCESS);
  EXPECT_OK(tsr::io::write(world(), f, w.blocks, {}, GetParam()));
  const uint64_t head = GetParam() == Format::binary && g_rank == 0 ? binary_head_bytes(specs, {}) : 0;
  EXPECT_EQ(counters().disk_write_bytes, w.bytes() + head);
  EXPECT_OK(tsr::io::read(world(), f, r.blocks, nullptr));
  r.expect_values();
  std::vector<DatasetInfo> sets;
  EXPECT_OK(tsr::io::inspect(world(), f, &sets, nullptr, nullptr));
  ASSERT_EQ(sets.size(), specs.size());
  EXPECT_EQ(sets.back().global[0], 0u);
  EXPECT_EQ(sets.back().global[1], 5u);
}

TEST_P(IoFormat, NoDatasetsAtAll) {
  const std::string f = file("nodata");
  EXPECT_OK(tsr::io::write(world(), f, {}, {{"only", "attrs"}}, GetParam()));
  std::vector<DatasetInfo> sets(3);
  Attrs attrs;
  EXPECT_OK(tsr::io::inspect(world(), f, &sets, nullptr, &attrs));
  EXPECT_TRUE(sets.empty());
  EXPECT_EQ(attrs, (Attrs{{"only", "attrs"}}));
}

TEST_P(IoFormat, OverwritesAnExistingFile) {
  const std::string f = file("twice");
  rank0_copy(ref(), f);
  const std::vector<Spec> one = {kSpecs[1]};
  Blocks w = by_rows(one);
  EXPECT_OK(tsr::io::write(world(), f, w.blocks, {{"v", "2"}}, GetParam()));
  std::vector<DatasetInfo> sets;
  Attrs attrs;
  EXPECT_OK(tsr::io::inspect(world(), f, &sets, nullptr, &attrs));
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].name, "mat");
  EXPECT_EQ(attrs, (Attrs{{"v", "2"}}));
}

TEST_P(IoFormat, FormatComesFromTheContentNotTheName) {
  const std::string f = path_of(GetParam() == Format::hdf5 ? "looks-binary.tsr" : "looks-hdf5.h5");
  rank0_copy(ref(), f);
  Format fmt = Format::automatic;
  EXPECT_OK(tsr::io::inspect(world(), f, nullptr, &fmt, nullptr));
  EXPECT_EQ(fmt, GetParam());
  const std::vector<Spec> one = {kSpecs[0]};
  Blocks r = by_columns(one);
  EXPECT_OK(tsr::io::read(world(), f, r.blocks, nullptr));
  r.expect_values();
}

TEST_P(IoFormat, UnknownDatasetName) {
  Blocks r;
  r.add(Spec{"missing", TSR_FLOAT64, 1, {37, 1, 1}}, 0, 0, g_rank, g_size, false);
  expect_error(tsr::io::read(world(), ref(), r.blocks, nullptr), TSR_ERR_IO, ref(), "no dataset 'missing'");
}

TEST_P(IoFormat, BlockOutsideTheGlobalShape) {
  const std::string f = file("outside");
  Blocks w = by_rows(kSmall);
  if (g_rank == g_size - 1) w.blocks[1].extent[0] += 1;  // "cube": one row past the end
  expect_error(tsr::io::write(world(), f, w.blocks, {}, GetParam()), TSR_ERR_SHAPE, f, "outside the global shape");
  EXPECT_FALSE(fs::exists(f));
  Blocks r = by_columns(kSmall);
  if (g_rank == 0) r.blocks[1].offset[2] = 3;  // "cube": extent 1..3 at offset 3 of 3
  expect_error(tsr::io::read(world(), ref(), r.blocks, nullptr), TSR_ERR_SHAPE, ref(), "outside the global shape");
}

TEST_P(IoFormat, ReadWithWrongTypeOrShape) {
  Blocks r = by_columns(kSmall);
  std::vector<Block> typed = r.blocks, shaped = r.blocks;
  typed[0].type = TSR_INT64;  // same size as the file's float64
  expect_error(tsr::io::read(world(), ref(), typed, nullptr), TSR_ERR_INVALID_ARG, ref(), "TSR_FLOAT64");
  shaped[1].global[1] = 8;
  expect_error(tsr::io::read(world(), ref(), shaped, nullptr), TSR_ERR_SHAPE, ref(), "5x4x3");
}

TEST_P(IoFormat, MismatchedDatasetListsOnWrite) {
  if (g_size == 1) GTEST_SKIP() << "needs two ranks to disagree";
  const std::string f = file("mismatch");
  Blocks w = by_rows(kSmall);
  std::vector<Block> named = w.blocks, shaped = w.blocks, shorter = w.blocks;
  if (g_rank == g_size - 1) {
    named[1].name = "cube2";
    shaped[0].global[0] = 38;
    shorter.pop_back();
  }
  for (const auto* blocks : {&named, &shaped, &shorter}) {
    expect_error(tsr::io::write(world(), f, *blocks, {}, GetParam()), TSR_ERR_INVALID_ARG, f, "differ across");
    EXPECT_FALSE(fs::exists(f));
  }
  Attrs attrs = {{"rank", g_rank == 0 ? "zero" : "other"}};
  expect_error(tsr::io::write(world(), f, w.blocks, attrs, GetParam()), TSR_ERR_INVALID_ARG, f, "differ across");
  EXPECT_TRUE(temporaries().empty());
}

TEST_P(IoFormat, UnwritableDirectory) {
  // Root may write into any directory it could chmod, so it takes procfs.
  const bool root = geteuid() == 0;
  const std::string dir = root ? std::string("/proc") : path_of("readonly");
  if (!root && g_rank == 0) {
    fs::create_directory(dir);
    chmod(dir.c_str(), 0555);
  }
  barrier();
  Blocks w = by_rows(kSmall);
  const std::string f = dir + "/tessera-" + format_name(GetParam());
  expect_error(tsr::io::write(world(), f, w.blocks, {}, GetParam()), TSR_ERR_IO, f, "temporary");
  const std::string g = path_of("no/such/dir/file");
  expect_error(tsr::io::write(world(), g, w.blocks, {}, GetParam()), TSR_ERR_IO, g, "temporary");
}

TEST_P(IoFormat, FailedWriteKeepsTheOldFileAndLeavesNoTemporary) {
  const std::string f = file("keep");
  rank0_copy(ref(), f);
  const std::string before = slurp(f);
  Blocks w = by_rows(kSmall);
  // Fails in the checks, before a temporary exists.
  std::vector<Block> bad = w.blocks;
  bad[0].extent[0] = 1000;
  expect_error(tsr::io::write(world(), f, bad, {{"version", "new"}}, GetParam()), TSR_ERR_SHAPE, f);
  EXPECT_TRUE(slurp(f) == before);
  EXPECT_TRUE(temporaries().empty());
  // Fails once the temporary is complete: the target is a non-empty directory.
  const std::string d = file("a-directory");
  if (g_rank == 0) {
    fs::create_directory(d);
    spit(d + "/inside", "x");
  }
  barrier();
  expect_error(tsr::io::write(world(), d, w.blocks, {}, GetParam()), TSR_ERR_IO, d, "rename");
  EXPECT_TRUE(temporaries().empty()) << temporaries().front();
  EXPECT_TRUE(fs::is_directory(d));
  EXPECT_TRUE(slurp(f) == before);
  Attrs attrs;
  EXPECT_OK(tsr::io::inspect(world(), f, nullptr, nullptr, &attrs));
  EXPECT_EQ(attrs, kAttrs);
}

TEST_P(IoFormat, TruncatedFile) {
  const std::string f = file("truncated");
  const std::string whole = slurp(ref());
  rank0_spit(f, whole.substr(0, whole.size() - 1));
  Blocks r = by_columns(kSmall);
  const char* words = GetParam() == Format::binary ? "truncated" : nullptr;
  expect_error(tsr::io::read(world(), f, r.blocks, nullptr), TSR_ERR_IO, f, words);
  expect_error(tsr::io::inspect(world(), f, nullptr, nullptr, nullptr), TSR_ERR_IO, f, words);
  rank0_spit(f, whole.substr(0, 20));
  expect_error(tsr::io::read(world(), f, r.blocks, nullptr), TSR_ERR_IO, f, words);
}

TEST_P(IoFormat, BadNamesAndAttrs) {
  const std::string f = file("names");
  Blocks w = by_rows(kSmall);
  std::vector<Block> slash = w.blocks, twice = w.blocks, dot = w.blocks, null_data = w.blocks;
  slash[0].name = "a/b";
  twice[1].name = twice[0].name;
  dot[0].name = "..";
  if (g_rank == 0) null_data[0].data = nullptr;  // rank 0 always has rows of "vec"
  expect_error(tsr::io::write(world(), f, slash, {}, GetParam()), TSR_ERR_INVALID_ARG, f, "'a/b'");
  expect_error(tsr::io::write(world(), f, twice, {}, GetParam()), TSR_ERR_INVALID_ARG, f, "twice");
  expect_error(tsr::io::write(world(), f, dot, {}, GetParam()), TSR_ERR_INVALID_ARG, f, "'..'");
  expect_error(tsr::io::write(world(), f, null_data, {}, GetParam()), TSR_ERR_INVALID_ARG, f, "NULL");
  expect_error(tsr::io::write(world(), f, w.blocks, {{"tessera_format", "x"}}, GetParam()), TSR_ERR_INVALID_ARG, f,
               "reserved");
  expect_error(tsr::io::write(world(), f, w.blocks, {{"k", std::string("a\0b", 3)}}, GetParam()), TSR_ERR_INVALID_ARG,
               f, "NUL");
  EXPECT_FALSE(fs::exists(f));
  EXPECT_TRUE(temporaries().empty());
}

// Rank 0 fails with one status, the last rank with another: every rank
// returns the status of the lowest failing rank.
TEST_P(IoFormat, DifferentErrorsOnDifferentRanksGiveOneStatus) {
  if (g_size == 1) GTEST_SKIP() << "needs two ranks to fail differently";
  const std::string f = file("two-errors");
  Blocks w = by_rows(kSmall);
  std::vector<Block> bad = w.blocks;
  if (g_rank == 0) bad[0].extent[0] = 1000;         // TSR_ERR_SHAPE
  if (g_rank == g_size - 1) bad[0].data = nullptr;  // TSR_ERR_INVALID_ARG
  expect_error(tsr::io::write(world(), f, bad, {}, GetParam()), TSR_ERR_SHAPE, f);
  EXPECT_FALSE(fs::exists(f));
}

INSTANTIATE_TEST_SUITE_P(Formats, IoFormat, ::testing::Values(Format::binary, Format::hdf5),
                         [](const ::testing::TestParamInfo<Format>& i) { return std::string(format_name(i.param)); });

// ============================================================ format-free
TEST(Io, AutomaticFormatFollowsTheBuild) {
  const std::string f = path_of("automatic");
  EXPECT_OK(tsr::io::write(world(), f, {}, {}));
  Format fmt = Format::automatic;
  EXPECT_OK(tsr::io::inspect(world(), f, nullptr, &fmt, nullptr));
  EXPECT_EQ(fmt, TSR_HAVE_HDF5 ? Format::hdf5 : Format::binary);
}

TEST(Io, NonexistentFile) {
  const std::string f = path_of("does-not-exist");
  Blocks r = by_columns(kSmall);
  expect_error(tsr::io::read(world(), f, r.blocks, nullptr), TSR_ERR_IO, f, "no such file");
  expect_error(tsr::io::inspect(world(), f, nullptr, nullptr, nullptr), TSR_ERR_IO, f, "no such file");
}

TEST(Io, ForeignFilesAreNotTesseraFiles) {
  Blocks r = by_columns(kSmall);
  const std::string text = path_of("notes.txt"), tiny = path_of("tiny"), empty = path_of("empty");
  rank0_spit(text, "This is a text file, long enough to hold a header of forty bytes.\n");
  rank0_spit(tiny, "TSR");
  rank0_spit(empty, "");
  for (const std::string& f : {text, tiny, empty}) {
    expect_error(tsr::io::read(world(), f, r.blocks, nullptr), TSR_ERR_IO, f, "not a tessera file");
    expect_error(tsr::io::inspect(world(), f, nullptr, nullptr, nullptr), TSR_ERR_IO, f, "not a tessera file");
  }
}

TEST(Io, BinaryVersionByteOrderAndSizes) {
  const std::string f = path_of("patched.bin");
  const std::string good = slurp(reference(Format::binary));
  std::string v = good, e = good, t = good;
  v[7] = '9';
  std::swap(e[8], e[11]);  // the endianness marker 01020304 reversed
  std::swap(e[9], e[10]);
  t[24] = static_cast<char>(t[24] + 1);  // the table size no longer matches the table
  rank0_spit(f, v);
  expect_error(tsr::io::inspect(world(), f, nullptr, nullptr, nullptr), TSR_ERR_IO, f, "version");
  rank0_spit(f, e);
  expect_error(tsr::io::inspect(world(), f, nullptr, nullptr, nullptr), TSR_ERR_UNSUPPORTED, f, "byte order");
  rank0_spit(f, t);
  expect_error(tsr::io::inspect(world(), f, nullptr, nullptr, nullptr), TSR_ERR_IO, f, "not a valid");
  rank0_spit(f, good + "extra");
  expect_error(tsr::io::inspect(world(), f, nullptr, nullptr, nullptr), TSR_ERR_IO, f, "more than");
}

TEST(Io, DifferentPathsAcrossRanks) {
  if (g_size == 1) GTEST_SKIP() << "needs two ranks to disagree";
  const std::string f = path_of("p" + std::to_string(g_rank == 0));
  Blocks w = by_rows(kSmall);
  expect_error(tsr::io::write(world(), f, w.blocks, {}, Format::binary), TSR_ERR_INVALID_ARG, f, "differ across");
  expect_error(tsr::io::read(world(), f, w.blocks, nullptr), TSR_ERR_INVALID_ARG, f, "differ across");
  expect_error(tsr::io::inspect(world(), f, nullptr, nullptr, nullptr), TSR_ERR_INVALID_ARG, f, "differ across");
}

// ================================================================== HDF5
#if TSR_HAVE_HDF5
// Rank 0's verdict for all ranks, so that every rank skips or runs alike.
bool all_of_rank0(bool v) {
  int x = v ? 1 : 0;
  MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return x != 0;
}

TEST(IoHdf5, ForeignHdf5FileIsNotATesseraFile) {
  const std::string f = path_of("foreign.h5");
  if (g_rank == 0) {
    const hid_t file = H5Fcreate(f.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t n = 4;
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t dset = H5Dcreate2(file, "vec", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(dset);
    H5Sclose(space);
    H5Fclose(file);
  }
  barrier();
  Blocks r;
  r.add(Spec{"vec", TSR_FLOAT64, 1, {4, 1, 1}}, 0, 0, g_rank, g_size, false);
  expect_error(tsr::io::read(world(), f, r.blocks, nullptr), TSR_ERR_IO, f, "not a tessera file");
  expect_error(tsr::io::inspect(world(), f, nullptr, nullptr, nullptr), TSR_ERR_IO, f, "not a tessera file");
}

TEST(IoHdf5, ReadableByH5dump) {
  const std::string f = reference(Format::hdf5);
  if (!all_of_rank0(g_rank == 0 && std::system("command -v h5dump > /dev/null 2>&1") == 0))
    GTEST_SKIP() << "h5dump is not on PATH (Debian: hdf5-tools)";
  if (g_rank != 0) return;
  FILE* p = popen(("h5dump -H " + f + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  for (const char* s : {"DATASET \"vec\"", "DATASET \"half\"", "H5T_STD_U16LE", "ATTRIBUTE \"tessera_format\"",
                        "ATTRIBUTE \"tessera_dtype\"", "ATTRIBUTE \"step\"", "( 5, 4, 3 )"})
    EXPECT_NE(out.find(s), std::string::npos) << "h5dump -H output lacks " << s << ":\n" << out;
}

TEST(IoHdf5, ReadableByH5py) {
  const std::string f = reference(Format::hdf5);
  if (!all_of_rank0(g_rank == 0 && std::system("/usr/bin/python3 -c 'import h5py' > /dev/null 2>&1") == 0))
    GTEST_SKIP() << "/usr/bin/python3 cannot import h5py (Debian: python3-h5py)";
  if (g_rank != 0) return;
  // Values as element() makes them, for datasets 0 (vec), 2 (cube) and 3 (half).
  const std::string script = path_of("check.py");
  spit(script,
       "import sys, h5py, numpy as np\n"
       "s = lambda x: x.decode() if isinstance(x, bytes) else str(x)\n"
       "f = h5py.File(sys.argv[1], 'r')\n"
       "assert s(f.attrs['tessera_format']) == 'tessera-hdf5', f.attrs['tessera_format']\n"
       "assert int(f.attrs['tessera_format_version']) == 2\n"
       "assert s(f.attrs['step']) == '1200' and s(f.attrs['optimizer.name']) == 'adam w'\n"
       "assert sorted(f.keys()) == sorted(['vec', 'mat', 'cube', 'half']), list(f.keys())\n"
       "assert f['vec'].dtype == np.float64 and np.array_equal(f['vec'][:], np.arange(37) / 3.0)\n"
       "c = f['cube']\n"
       "assert c.shape == (5, 4, 3) and c.dtype == np.int64\n"
       "assert np.array_equal(c[:].ravel(), np.arange(60, dtype=np.int64) * 1000003 - (2 << 40))\n"
       "h = f['half']\n"
       "assert h.shape == (6, 9) and h.dtype == np.uint16 and s(h.attrs['tessera_dtype']) == 'bfloat16'\n"
       "assert np.array_equal(h[:].ravel(), ((np.arange(54) * 40503 + 21) % 65536).astype(np.uint16))\n");
  const std::string cmd = "/usr/bin/python3 " + script + " " + f + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "h5py could not read " << f << " (run: " << cmd << ")";
}

TEST(IoHdf5, ApplicationErrorPrintingIsRestored) {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &func, &data);
  const std::string f = reference(Format::hdf5);
  Blocks r;
  r.add(Spec{"missing", TSR_FLOAT64, 1, {37, 1, 1}}, 0, 0, g_rank, g_size, false);
  expect_error(tsr::io::read(world(), f, r.blocks, nullptr), TSR_ERR_IO, f);
  H5E_auto2_t after = nullptr;
  void* after_data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &after, &after_data);
  EXPECT_TRUE(after == func && after_data == data) << "HDF5's automatic error printing was not restored";
}
#else
TEST(IoHdf5, Skipped) { GTEST_SKIP() << "built without parallel HDF5 (TSR_HAVE_HDF5 = 0): HDF5 tests skipped"; }
#endif

}  // namespace

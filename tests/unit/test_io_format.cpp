// The decoder of a tessera file's first bytes (lib/io_format.hpp: sniffing,
// the TSRBIN01/02 header and table, docs/FILES.md) on bytes in memory: the
// files the writer's own encoder makes, the fuzzer's seed corpus
// (tests/fuzz/corpus/tsrbin, written by tests/fuzz/make_corpus.py from the
// format's description) and the inputs that crashed it once (crash-*), each
// with its documented status and message.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core.hpp"
#include "io_format.hpp"

namespace {

using tsr::io::Format;
using tsr::io::Meta;

std::vector<uint8_t> corpus_file(const std::string& name) {
  const std::string path = std::string(TSR_FUZZ_CORPUS) + "/tsrbin/" + name;
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct Parsed {
  tsr_status st;
  Format fmt = Format::automatic;
  Meta m;
  std::string msg;
};

Parsed parse(const std::vector<uint8_t>& b) {
  Parsed p;
  p.st = tsr::io::parse_file(b.data(), b.size(), "f.bin", &p.fmt, &p.m);
  p.msg = p.st == TSR_SUCCESS ? "" : tsr::pending_message();
  return p;
}

void expect_error(const std::vector<uint8_t>& b, tsr_status st, const char* needle) {
  const Parsed p = parse(b);
  EXPECT_EQ(p.st, st) << p.msg;
  EXPECT_NE(p.msg.find("file 'f.bin'"), std::string::npos) << p.msg;
  EXPECT_NE(p.msg.find(needle), std::string::npos) << p.msg << " (expected '" << needle << "')";
}

// A file as the writer makes it: header and table from describe(), then the data.
std::vector<uint8_t> written(Meta* m) {
  const std::string head = tsr::io::describe(m);
  std::vector<uint8_t> b(head.begin(), head.end());
  b.resize(m->file_bytes, 0xab);
  return b;
}

Meta two_sets() {
  Meta m;
  tsr::io::Entry a, c;
  a.info = {"w", TSR_FLOAT32, 2, {3, 4, 1}};
  c.info = {"opt.m", TSR_BFLOAT16, 1, {5, 1, 1}};
  m.sets = {a, c};
  m.attrs["epoch"] = tsr::io::Value::integer(-7);
  m.attrs["lr"] = tsr::io::Value::real(0.25);
  m.attrs["note"] = "text";
  return m;
}

void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); }

TEST(IoFormat, WriterFilesRoundTrip) {
  Meta m = two_sets();
  const std::vector<uint8_t> b = written(&m);
  const Parsed p = parse(b);
  ASSERT_EQ(p.st, TSR_SUCCESS) << p.msg;
  EXPECT_EQ(p.fmt, Format::binary);
  ASSERT_EQ(p.m.sets.size(), 2u);
  EXPECT_EQ(p.m.sets[0].info.name, "w");
  EXPECT_EQ(p.m.sets[0].info.type, TSR_FLOAT32);
  EXPECT_EQ(p.m.sets[0].bytes, 48u);
  EXPECT_EQ(p.m.sets[1].info.name, "opt.m");
  EXPECT_EQ(p.m.sets[1].offset, p.m.sets[0].offset + 48);
  EXPECT_EQ(p.m.sets[1].bytes, 10u);
  EXPECT_EQ(p.m.file_bytes, b.size());
  EXPECT_EQ(p.m.attrs, m.attrs);
  // Header 40 + table: 2 entries (52 + name) + 3 attrs (12 + key + value).
  EXPECT_EQ(p.m.sets[0].offset, 40u + (52 + 1) + (52 + 5) + (12 + 5 + 8) + (12 + 2 + 8) + (12 + 4 + 4));
}

TEST(IoFormat, SeedCorpusDecodes) {
  Parsed p = parse(corpus_file("seed-two-sets.bin"));
  ASSERT_EQ(p.st, TSR_SUCCESS) << p.msg;
  ASSERT_EQ(p.m.sets.size(), 2u);
  EXPECT_EQ(p.m.sets[0].info.name, "w");
  EXPECT_EQ(p.m.sets[1].info.type, TSR_INT64);
  ASSERT_EQ(p.m.attrs.size(), 3u);
  EXPECT_EQ(p.m.attrs.at("epoch"), tsr::io::Value::integer(3));
  EXPECT_EQ(p.m.attrs.at("lr"), tsr::io::Value::real(0.5));
  EXPECT_EQ(p.m.attrs.at("note"), tsr::io::Value("checkpoint"));

  p = parse(corpus_file("seed-v01.bin"));
  ASSERT_EQ(p.st, TSR_SUCCESS) << p.msg;
  EXPECT_EQ(p.m.attrs.at("b"), tsr::io::Value("two"));

  p = parse(corpus_file("seed-optimizer-state.bin"));
  ASSERT_EQ(p.st, TSR_SUCCESS) << p.msg;
  EXPECT_EQ(p.m.sets.size(), 4u);
  EXPECT_EQ(p.m.attrs.at("optimizer"), tsr::io::Value("lamb"));

  EXPECT_EQ(parse(corpus_file("seed-empty.bin")).st, TSR_SUCCESS);
  EXPECT_EQ(parse(corpus_file("seed-cube.bin")).st, TSR_SUCCESS);
  p = parse(corpus_file("seed-hdf5-signature.bin"));
  EXPECT_EQ(p.st, TSR_SUCCESS);
  EXPECT_EQ(p.fmt, Format::hdf5);
}

TEST(IoFormat, DamagedFilesFailWithTheirStatus) {
  expect_error(corpus_file("seed-truncated-header.bin"), TSR_ERR_IO, "is truncated: 20 bytes, less than the 40-byte header");
  expect_error(corpus_file("seed-truncated-table.bin"), TSR_ERR_IO, "is truncated: its header says 254 bytes, the file has 60");
  expect_error(corpus_file("seed-trailing.bin"), TSR_ERR_IO, "has 255 bytes, more than the 254");
  expect_error(corpus_file("seed-version99.bin"), TSR_ERR_IO, "binary format version '99'");
  expect_error(corpus_file("seed-other-order.bin"), TSR_ERR_UNSUPPORTED, "other byte order");
  expect_error({}, TSR_ERR_IO, "is not a tessera file");
  expect_error({'T', 'S', 'R'}, TSR_ERR_IO, "is not a tessera file");
  Meta m = two_sets();
  std::vector<uint8_t> b = written(&m);
  b[44] = '/';  // the first dataset's name "w" becomes "/", not a dataset name
  expect_error(b, TSR_ERR_IO, "a dataset entry has a bad name, type or shape");
}

// Inputs that crashed the decoder under tests/fuzz/fuzz_tsrbin, kept in the
// corpus as regression inputs, and the same defects made by hand.
TEST(IoFormat, FuzzerRegressions) {
  // UBSan: a dataset type outside tsr_dtype loaded into the enumeration.
  expect_error(corpus_file("crash-dtype-out-of-enum"), TSR_ERR_IO, "a dataset entry has a bad name, type or shape");
  Meta m = two_sets();
  std::vector<uint8_t> b = written(&m);
  put_u32(b, 40 + 4 + 1, 66);  // the first entry's type field
  expect_error(b, TSR_ERR_IO, "a dataset entry has a bad name, type or shape");
  // Out of memory: a dataset count of 2^26 allocated before the table was read.
  expect_error(corpus_file("crash-dataset-count-oom"), TSR_ERR_IO, "counts more datasets or attributes than its table");
  for (size_t field : {12, 16}) {  // ndatasets, nattrs
    for (uint32_t count : {0xffffffffu, 1u << 26}) {
      b = written(&m);
      put_u32(b, field, count);
      expect_error(b, TSR_ERR_IO, "counts more datasets or attributes than its table");
    }
  }
}

TEST(IoFormat, NullDataIsAnArgumentError) {
  Format fmt;
  Meta m;
  EXPECT_EQ(tsr::io::parse_file(nullptr, 3, "f.bin", &fmt, &m), TSR_ERR_INVALID_ARG);
  EXPECT_NE(tsr::pending_message().find("argument 'data' is NULL"), std::string::npos);
}

}  // namespace

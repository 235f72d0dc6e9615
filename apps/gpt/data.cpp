#include "data.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "rng.hpp"

namespace gpt {

const char* const kAustenRdb = "/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb";

namespace {

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw DataError("cannot open data file '" + path + "'");
  std::vector<unsigned char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw DataError("cannot read data file '" + path + "'");
  return buf;
}

uint32_t be32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

// Inflate one zlib stream starting at in[0..avail) into out, which must come
// to exactly `expect` bytes; returns bytes consumed. The output grows as the
// stream produces it (doubling, never beyond expect + 1 bytes: one more
// detects a longer stream), so a record header announcing up to 1 GiB costs
// only what the stream really holds (found by tests/fuzz/fuzz_rdb: allocating
// and zeroing the announced length first made every damaged record slow).
size_t inflate_one(const unsigned char* in, size_t avail, size_t expect, std::vector<unsigned char>& out,
                   const std::string& where) {
  out.clear();
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (inflateInit(&zs) != Z_OK) throw DataError(where + ": zlib inflateInit failed");
  zs.next_in = const_cast<unsigned char*>(in);
  zs.avail_in = static_cast<uInt>(avail);
  int rc = Z_OK;
  for (;;) {
    if (zs.avail_out == 0) {  // out is full: grow it, unless it already holds more than expected
      const size_t have = out.size();
      if (have > expect) break;
      const size_t grow = std::min(expect + 1 - have, std::max<size_t>(have, size_t{1} << 16));
      out.resize(have + grow);
      zs.next_out = out.data() + have;
      zs.avail_out = static_cast<uInt>(grow);
    }
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_OK || (rc == Z_BUF_ERROR && zs.avail_out == 0)) continue;
    break;  // damaged, or the input ended before the stream did
  }
  size_t used = zs.total_in, produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || produced != expect)
    throw DataError(where + ": the zlib stream is damaged or its length differs from the header (" +
                    std::to_string(produced) + " of " + std::to_string(expect) + " bytes)");
  out.resize(expect);
  return used;
}

// Parse R's XDR serialization of a character vector.
std::string parse_strsxp(const std::vector<unsigned char>& s, const std::string& where) {
  size_t p = 0;
  auto need = [&](size_t n) {
    if (p + n > s.size()) throw DataError(where + ": the serialized record ends early");
  };
  auto i32 = [&]() {
    need(4);
    int32_t v = static_cast<int32_t>(be32(&s[p]));
    p += 4;
    return v;
  };
  need(2);
  if (s[0] != 'X' || s[1] != '\n')
    throw DataError(where + ": not R's XDR serialization (expected \"X\\n\", the format differs)");
  p = 2;
  int32_t version = i32();
  i32();  // writer version
  i32();  // minimal reader version
  if (version == 3) {
    int32_t nelen = i32();
    if (nelen < 0 || nelen > 64) throw DataError(where + ": bad native-encoding length");
    need(static_cast<size_t>(nelen));
    p += static_cast<size_t>(nelen);
  } else if (version != 2) {
    throw DataError(where + ": R serialization version " + std::to_string(version) +
                    " (expected 2 or 3)");
  }
  int32_t flags = i32();
  if ((flags & 0xff) != 16)
    throw DataError(where + ": the record is not a character vector (R type " +
                    std::to_string(flags & 0xff) + ", expected 16 = STRSXP)");
  int32_t n = i32();
  if (n < 0) throw DataError(where + ": negative vector length");
  std::string text;
  for (int32_t i = 0; i < n; ++i) {
    int32_t cflags = i32();
    if ((cflags & 0xff) != 9)
      throw DataError(where + ": element " + std::to_string(i) + " is not a CHARSXP");
    int32_t len = i32();
    if (len >= 0) {
      need(static_cast<size_t>(len));
      text.append(reinterpret_cast<const char*>(&s[p]), static_cast<size_t>(len));
      p += static_cast<size_t>(len);
    }  // -1 = NA: an empty line
    text.push_back('\n');
  }
  return text;
}

}  // namespace

std::vector<std::string> read_rdb_strings(const std::string& path) {
  std::vector<unsigned char> buf = read_file(path);
  return parse_rdb_strings(buf.data(), buf.size(), path);
}

std::vector<std::string> parse_rdb_strings(const unsigned char* data, size_t size, const std::string& path) {
  const unsigned char* buf = data;
  std::vector<std::string> out;
  size_t p = 0;
  std::vector<unsigned char> raw;
  while (p < size) {
    std::string where = path + " record " + std::to_string(out.size()) + " at byte " + std::to_string(p);
    if (p + 5 > size) throw DataError(where + ": truncated record header");
    uint32_t len = be32(&buf[p]);
    p += 4;
    if (buf[p] != 0x78)
      throw DataError(where + ": expected a zlib stream (0x78) after the length, found byte 0x" +
                      [&] {
                        char h[8];
                        std::snprintf(h, sizeof h, "%02x", buf[p]);
                        return std::string(h);
                      }() +
                      " (compressed with another method? the format differs)");
    if (len > (1u << 30)) throw DataError(where + ": implausible record length");
    p += inflate_one(&buf[p], size - p, len, raw, where);
    out.push_back(parse_strsxp(raw, where));
  }
  if (out.empty()) throw DataError(path + ": no records");
  return out;
}

std::string load_text(const std::string& path) {
  std::string text;
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".rdb") == 0) {
    for (const std::string& s : read_rdb_strings(path)) {
      if (!text.empty()) text += "\n\n";
      text += s;
    }
  } else {
    std::vector<unsigned char> b = read_file(path);
    text.assign(b.begin(), b.end());
  }
  if (text.empty()) throw DataError("data file '" + path + "' holds no text");
  return text;
}

Split split_text(const std::string& text, double val_frac, size_t seq) {
  if (!(val_frac > 0.0 && val_frac < 1.0)) throw DataError("--val-frac must be in (0, 1)");
  size_t nval = static_cast<size_t>(static_cast<double>(text.size()) * val_frac);
  size_t ntrain = text.size() - nval;
  if (nval < seq + 1 || ntrain < seq + 1)
    throw DataError("the text (" + std::to_string(text.size()) +
                    " bytes) is too short for --seq " + std::to_string(seq) + " and --val-frac: " +
                    "both parts need at least seq+1 bytes; give a longer text or a shorter --seq");
  Split s;
  s.train.assign(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(ntrain));
  s.val.assign(text.begin() + static_cast<std::ptrdiff_t>(ntrain), text.end());
  return s;
}

size_t batch_start(uint64_t seed, uint64_t stream, uint64_t step, size_t b, size_t data_len,
                   size_t seq) {
  size_t range = data_len - seq;  // starts 0 .. data_len-seq-1 keep seq+1 bytes
  return static_cast<size_t>(hash3(seed, stream, (step << 20) ^ b) % range);
}

void fill_batch(const std::vector<uint8_t>& data, uint64_t seed, uint64_t stream, uint64_t step,
                size_t b0, size_t nb, size_t seq, const int64_t* pos, size_t npos, int32_t* x,
                int32_t* y) {
  for (size_t i = 0; i < nb; ++i) {
    size_t s = batch_start(seed, stream, step, b0 + i, data.size(), seq);
    for (size_t t = 0; t < npos; ++t) {
      size_t q = s + static_cast<size_t>(pos[t]);
      x[i * npos + t] = data[q];
      y[i * npos + t] = data[q + 1];
    }
  }
}

double unigram_entropy(const std::vector<uint8_t>& data) {
  double cnt[256] = {0};
  for (uint8_t c : data) cnt[c] += 1;
  double h = 0, n = static_cast<double>(data.size());
  for (double c : cnt)
    if (c > 0) h -= c / n * std::log(c / n);
  return h;
}

}  // namespace gpt

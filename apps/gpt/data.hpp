// Text data for the sample GPT: Jane Austen's six novels from Debian's
// r-cran-janeaustenr (an R lazy-load database), or any text file; a
// train/validation split; batches drawn from the seed so that every layout
// sees the same tokens. Byte-level: one token per byte (vocabulary 256).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpt {

// Default location of the Austen text (package r-cran-janeaustenr).
extern const char* const kAustenRdb;

struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The records of an R lazy-load database holding character vectors: each
// record is [u32 big-endian length][zlib stream] inflating to R's XDR
// serialization of a STRSXP. Returns one string per record, its elements
// joined with '\n'. Throws DataError naming the file and what differs.
std::vector<std::string> read_rdb_strings(const std::string& path);
// The same over bytes in memory (what read_rdb_strings parses; the fuzzer,
// tests/fuzz/fuzz_rdb.cpp, calls it); path names them in messages.
std::vector<std::string> parse_rdb_strings(const unsigned char* data, size_t size, const std::string& path);

// Text of a file: an .rdb is parsed as above (records joined by "\n\n"),
// anything else is read as bytes. Throws DataError (missing, empty, bad).
std::string load_text(const std::string& path);

struct Split {
  std::vector<uint8_t> train, val;
};
// The last val_frac of the text is held out (at least seq+1 bytes in each
// part, else DataError saying how long the text must be).
Split split_text(const std::string& text, double val_frac, size_t seq);

// Start offset of global sequence b of batch `step` drawn from `data`
// (a window of seq+1 tokens fits): a pure function of (seed, stream, step, b).
size_t batch_start(uint64_t seed, uint64_t stream, uint64_t step, size_t b, size_t data_len,
                   size_t seq);

// Tokens and targets of global sequences [b0, b0+nb) of batch `step`, for the
// token positions `pos` (global positions within the sequence, local order):
// x[i*npos + t] = data[start_i + pos[t]], y = the next byte.
void fill_batch(const std::vector<uint8_t>& data, uint64_t seed, uint64_t stream, uint64_t step,
                size_t b0, size_t nb, size_t seq, const int64_t* pos, size_t npos, int32_t* x,
                int32_t* y);

// Entropy of the byte unigram distribution of the data, in nats.
double unigram_entropy(const std::vector<uint8_t>& data);

}  // namespace gpt

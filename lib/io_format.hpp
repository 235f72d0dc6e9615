// The I/O layer's decoder of a file's first bytes (the format, and for the
// binary format TSRBIN01/TSRBIN02 its 40-byte header and its dataset and
// attribute table, docs/FILES.md), over bytes in memory: the code io::read
// and io::inspect run on what rank 0 reads, exposed so that the fuzzer
// (tests/fuzz/fuzz_tsrbin.cpp) and unit tests drive it without MPI or files.
// Not installed, not public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io.hpp"

namespace tsr {
namespace io {

// One dataset as the file describes it (offset: meaningful in binary files only).
struct Entry {
  DatasetInfo info;
  uint64_t offset = 0, bytes = 0;
};
struct Meta {
  Format fmt = Format::binary;
  std::vector<Entry> sets;
  Attrs attrs;
  uint64_t file_bytes = 0;
};

constexpr uint64_t kHeaderBytes = 40;                    // the binary format's header
constexpr uint64_t kMaxTableBytes = uint64_t{64} << 20;  // refuse absurd (corrupt) tables
constexpr size_t kMaxName = 255, kMaxValue = 65535;      // dataset names, attribute keys; values

// The format and description of the file whose bytes are data[0, size),
// named path in messages: sniff_with and decode below, as io::read and
// io::inspect run them; an HDF5 file gives *fmt = Format::hdf5 and m
// untouched (HDF5's own library decodes it).
// Errors: TSR_ERR_IO (not a tessera file, truncated, an inconsistent or
// malformed header or table), TSR_ERR_UNSUPPORTED (the other byte order),
// TSR_ERR_INVALID_ARG (data NULL with size > 0). Never throws for any bytes.
tsr_status parse_file(const uint8_t* data, size_t size, const std::string& path, Format* fmt, Meta* m);

// Reads len bytes at offset off of a file into *out (fewer at its end).
using ReadAt = std::function<tsr_status(uint64_t off, uint64_t len, std::string* out)>;

// The format from a file's first bytes and, for the binary format, its
// header and table (*head), checked against the file's size, read through
// read (rank 0: MPI-IO; parse_file: memory).
tsr_status sniff_with(const std::string& path, uint64_t size, const ReadAt& read, Format* fmt, std::string* head);

// Decodes the header and table sniff_with returned (every rank decodes the
// same bytes, broadcast by rank 0). m->fmt is left to the caller.
tsr_status decode(const std::string& head, const std::string& path, Meta* m);

// The header and table of a binary file holding m's datasets back to back
// (sets offsets, sizes and file_bytes in m): what the writer puts first, and
// the form in which rank 0 ships an HDF5 file's description to the others.
std::string describe(Meta* m);

// p = elem * d[0] * ... * d[nd-1]; false on overflow.
bool product(int nd, const uint64_t* d, uint64_t elem, uint64_t* p);

}  // namespace io
}  // namespace tsr

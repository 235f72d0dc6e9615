// The I/O layer: files tessera writes and reads (checkpoints, optimizer
// states, reports). One dataset per global row-major array; every rank writes
// or reads its own rectangular block of it, collectively. Two formats: parallel
// HDF5 (when the build has it) and a plain MPI-IO binary format, both laid out
// in docs/FILES.md. Not installed.
//
// Writes are crash-safe: the file is written under a temporary name in the
// same directory and renamed over `path` only once every rank has finished,
// so `path` holds either the old file or the complete new one.
//
// Every byte a rank moves to or from the file itself is charged to its ledger
// (disk_write / disk_read); docs/FILES.md gives the exact counts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/io.h"
#include "tessera/tessera.h"
#include "transport.hpp"

namespace tsr {
namespace io {

// automatic: hdf5 if the build has parallel HDF5 (TSR_HAVE_HDF5), else binary.
enum class Format { automatic, hdf5, binary };

// This rank's rectangular block of a global row-major N-d array, N = 1..3.
struct Block {
  std::string name;  // dataset name: 1..255 of [A-Za-z0-9_.-], not "." or "..", unique within the file
  tsr_dtype type = TSR_BYTE;
  int ndims = 1;
  uint64_t global[3] = {1, 1, 1};  // unused dims: 1
  uint64_t offset[3] = {0, 0, 0};  // unused dims: 0
  uint64_t extent[3] = {1, 1, 1};  // unused dims: 1; at most INT_MAX elements per block
  void* data = nullptr;            // extent[0]*...*extent[ndims-1] elements, row-major
};

// An attribute value: a string (the default, and what an attribute made from
// a string literal is), a 64-bit integer or a double.
struct Value {
  tsr_attr_kind kind = TSR_ATTR_STRING;
  std::string text;
  int64_t i = 0;
  double d = 0;

  Value() = default;
  Value(std::string s) : text(std::move(s)) {}  // NOLINT: implicit, as a string attribute
  Value(const char* s) : text(s) {}              // NOLINT
  static Value integer(int64_t v) {
    Value x;
    x.kind = TSR_ATTR_INT64;
    x.i = v;
    return x;
  }
  static Value real(double v) {
    Value x;
    x.kind = TSR_ATTR_DOUBLE;
    x.d = v;
    return x;
  }
  // Doubles compare by bit pattern (a NaN equals itself).
  bool operator==(const Value& o) const;
  bool operator!=(const Value& o) const { return !(*this == o); }
};
using Attrs = std::map<std::string, Value>;

struct DatasetInfo {
  std::string name;
  tsr_dtype type = TSR_BYTE;
  int ndims = 1;
  uint64_t global[3] = {1, 1, 1};
};

// Collective over comm. Every rank passes the same dataset names, types and
// global shapes in the same order, and the same attrs, each with its own
// block (blocks may be empty: an extent of 0). attrs: small string metadata;
// keys as dataset names, not starting with "tessera_" (reserved); values
// without NUL bytes.
// A valid dataset name or attribute key: 1..255 characters of
// [A-Za-z0-9_.-], not "." or "..".
bool name_valid(const std::string& s);

// sync: flush the file and, after the rename, its directory to stable
// storage (false: atomic against a killed process, not against a crash of
// the machine).
tsr_status write(const Comm& comm, const std::string& path, const std::vector<Block>& blocks, const Attrs& attrs,
                 Format fmt = Format::automatic, bool sync = true);

// Collective. Every rank names the same datasets in the same order, each with
// the type and global shape it has in the file and the block this rank wants
// (any decomposition, not necessarily the writer's); data is filled. The format
// is taken from the file's first bytes. attrs may be null.
tsr_status read(const Comm& comm, const std::string& path, std::vector<Block>& blocks, Attrs* attrs);

// Collective: the datasets of a file (in the order they were written), its
// format and its attrs. Any output may be null.
tsr_status inspect(const Comm& comm, const std::string& path, std::vector<DatasetInfo>* sets, Format* fmt,
                   Attrs* attrs);

}  // namespace io
}  // namespace tsr

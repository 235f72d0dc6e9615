// Fuzz harness: the decoder of a tessera file's first bytes, tsr::io::parse_file
// (lib/io_format.hpp): format sniffing, the TSRBIN01/TSRBIN02 40-byte header
// and the dataset and attribute table (docs/FILES.md). The same functions
// decode what rank 0 reads in io::read / io::inspect, i.e. for
// tsr_checkpoint_open, tsr_optimizer_load and every file read.
// Contract checked: any bytes give TSR_SUCCESS, TSR_ERR_IO or
// TSR_ERR_UNSUPPORTED with a message naming the file, never a crash, an
// exception or an allocation beyond the table's size; a file that decodes
// has every dataset valid and inside the file.
#include <cstdint>
#include <cstring>
#include <string>

#include "core.hpp"
#include "fuzz_check.hpp"
#include "io_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tsr::io::Format fmt = tsr::io::Format::automatic;
  tsr::io::Meta m;
  const tsr_status st = tsr::io::parse_file(data, size, "fuzz.bin", &fmt, &m);
  if (st != TSR_SUCCESS) {
    FUZZ_CHECK(st == TSR_ERR_IO || st == TSR_ERR_UNSUPPORTED, "status %d", static_cast<int>(st));
    const std::string& msg = tsr::pending_message();
    FUZZ_CHECK(msg.find("fuzz.bin") != std::string::npos, "message '%s'", msg.c_str());
    return 0;
  }
  if (fmt == tsr::io::Format::hdf5) {
    FUZZ_CHECK(size >= 8 && std::memcmp(data, "\x89HDF\r\n\x1a\n", 8) == 0, "HDF5 without its signature");
    return 0;
  }
  FUZZ_CHECK(fmt == tsr::io::Format::binary && m.fmt == fmt, "format");
  FUZZ_CHECK(m.file_bytes == size, "file_bytes %llu of a %zu-byte file", static_cast<unsigned long long>(m.file_bytes),
             size);
  for (const tsr::io::Entry& e : m.sets) {
    FUZZ_CHECK(tsr::io::name_valid(e.info.name), "dataset name");
    FUZZ_CHECK(tsr::dtype_valid(e.info.type), "dataset type");
    FUZZ_CHECK(e.info.ndims >= 1 && e.info.ndims <= 3, "ndims %d", e.info.ndims);
    FUZZ_CHECK(e.offset <= size && e.bytes <= size - e.offset, "dataset outside the file");
  }
  for (const auto& kv : m.attrs) {
    FUZZ_CHECK(tsr::io::name_valid(kv.first), "attribute key");
    FUZZ_CHECK(kv.second.kind == TSR_ATTR_STRING || kv.second.kind == TSR_ATTR_INT64 ||
                   kv.second.kind == TSR_ATTR_DOUBLE,
               "attribute kind");
  }
  return 0;
}

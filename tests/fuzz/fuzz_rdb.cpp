// Fuzz harness: the sample GPT's reader of R lazy-load databases (.rdb,
// apps/gpt/data.cpp, gpt::parse_rdb_strings: big-endian record lengths, zlib
// streams, R's XDR serialization of character vectors).
// Contract checked: any bytes give records or gpt::DataError, never a crash
// or another exception (std::bad_alloc included: a record header must not
// make it allocate more than its compressed bytes can hold).
#include <cstdint>
#include <string>
#include <vector>

#include "data.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::vector<std::string> recs = gpt::parse_rdb_strings(data, size, "fuzz.rdb");
    FUZZ_CHECK(!recs.empty(), "no records and no error");
    size_t bytes = 0;
    for (const std::string& r : recs) bytes += r.size();
    (void)bytes;
  } catch (const gpt::DataError& e) {
    FUZZ_CHECK(std::string(e.what()).find("fuzz.rdb") != std::string::npos, "message '%s'", e.what());
  }
  return 0;
}

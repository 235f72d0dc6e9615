// Standalone driver for the fuzz harnesses (tests/fuzz/fuzz_*.cpp) when they
// are built without libFuzzer (any compiler, the ordinary test suites): runs
// LLVMFuzzerTestOneInput once on every file named on the command line, or in
// a directory named there (not recursive), in name order. Exit status 0 when
// every input passed the harness's checks (a failing check aborts), 2 for a
// bad command line or an unreadable input, 1 when no input was found.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional, as with libFuzzer: called once before the first input.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

bool is_dir(const std::string& p) {
  struct stat sb;
  return ::stat(p.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
}

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == ".." || name[0] == '.') continue;
      const std::string p = dir + "/" + name;
      if (!is_dir(p)) out.push_back(p);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n  runs the fuzz harness once on every input\n", argv[0]);
    return 2;
  }
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!a.empty() && a[0] == '-') continue;  // libFuzzer flags (-runs=0, ...): ignored here
    if (is_dir(a)) {
      const std::vector<std::string> files = list(a);
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else {
      inputs.push_back(a);
    }
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  size_t bytes = 0;
  for (const std::string& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], p.c_str());
      return 2;
    }
    const std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // A copy of exactly size bytes on the heap, so that an out-of-bounds read
    // can be caught by a sanitizer or valgrind, as with libFuzzer.
    std::vector<uint8_t> data(buf.begin(), buf.end());
    uint8_t* p0 = data.empty() ? nullptr : data.data();
    LLVMFuzzerTestOneInput(p0, data.size());
    bytes += data.size();
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "%s: no inputs found\n", argv[0]);
    return 1;
  }
  std::printf("%s: %zu inputs (%zu bytes) replayed, all passed\n", argv[0], inputs.size(), bytes);
  return 0;
}

// Fuzz harness: the sample ResNet's IDX reader (apps/resnet/data.cpp,
// resnet::read_idx_images / read_idx_labels: gzip or plain, through zlib's
// gzread). The input is handed over as a file (an anonymous in-memory file,
// memfd, named by /proc/self/fd/N), as the reader takes a path; both readers
// run on it, in full and with a limit of 2 items.
// Contract checked: any bytes give a dataset consistent with its header or
// std::runtime_error naming the file, never a crash or another exception
// (std::bad_alloc included: a header must not make it allocate what the file
// cannot hold).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "data.hpp"
#include "fuzz_check.hpp"

namespace {

const std::string& input_path(int* fd_out) {
  static int fd = -1;
  static std::string path;
  if (fd < 0) {
    fd = static_cast<int>(::memfd_create("fuzz_idx", 0));
    FUZZ_CHECK(fd >= 0, "memfd_create failed");
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  *fd_out = fd;
  return path;
}

void expect_error_names_file(const std::runtime_error& e, const std::string& path) {
  FUZZ_CHECK(std::string(e.what()).find(path) != std::string::npos, "message '%s'", e.what());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = -1;
  const std::string& path = input_path(&fd);
  FUZZ_CHECK(::ftruncate(fd, 0) == 0, "ftruncate");
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    FUZZ_CHECK(w > 0, "pwrite");
    done += static_cast<size_t>(w);
  }
  for (int limit : {0, 2}) {
    try {
      resnet::Dataset d;
      resnet::read_idx_images(path, limit, d);
      FUZZ_CHECK(d.n > 0 && d.rows > 0 && d.cols > 0, "empty image set");
      FUZZ_CHECK(limit == 0 || d.n <= limit, "limit");
      FUZZ_CHECK(d.images.size() == static_cast<size_t>(d.n) * static_cast<size_t>(d.rows) * static_cast<size_t>(d.cols),
                 "image bytes");
    } catch (const std::runtime_error& e) {
      expect_error_names_file(e, path);
    }
    try {
      resnet::Dataset d;
      resnet::read_idx_labels(path, limit, d);
      FUZZ_CHECK(!d.labels.empty() && (limit == 0 || d.labels.size() <= static_cast<size_t>(limit)), "labels");
      for (uint8_t l : d.labels) FUZZ_CHECK(l <= 9, "label %d", l);
    } catch (const std::runtime_error& e) {
      expect_error_names_file(e, path);
    }
  }
  return 0;
}

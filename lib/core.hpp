// Internal core of tessera: error recording, MPI call checking, collective
// agreement on errors. Not installed.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tsr {

// Records msg (printf-style) as the calling thread's pending error message and
// returns status. Every failing internal path goes through here, so a status
// never travels without a message.
tsr_status fail(tsr_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The calling thread's pending message (what the last fail() recorded).
const std::string& pending_message();
void set_pending_message(std::string msg);

// Converts an MPI return code into TSR_ERR_MPI with MPI's error text.
tsr_status mpi_fail(int rc, const char* what);

// Called at the public API boundary: on failure, prefixes the pending message
// with the function name (once) and stores it for tsr_last_error(ctx) and
// tsr_last_error(NULL). Returns status unchanged.
tsr_status finish(tsr_context ctx, const char* function, tsr_status status);

// The calling thread's last message stored by finish().
const char* last_message();

// FNV-1a over arguments that must be equal on every rank: what collective
// calls agree on (with the status) before they communicate. Chain calls by
// passing the previous digest as h.
inline uint64_t digest(std::initializer_list<int64_t> xs, uint64_t h = 1469598103934665603ull) {
  for (int64_t x : xs)
    for (int b = 0; b < 8; ++b) {
      h ^= static_cast<uint64_t>(x >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  return h;
}

// Strings packed into one buffer for a collective (each followed by a '\0')
// and unpacked again.
inline std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) {
    s += x;
    s.push_back('\0');
  }
  return s;
}
inline std::vector<std::string> split(const char* p, size_t n) {
  std::vector<std::string> v;
  size_t start = 0;
  for (size_t i = 0; i < n; ++i)
    if (p[i] == '\0') {
      v.emplace_back(p + start, i - start);
      start = i + 1;
    }
  return v;
}

// *out = the product of xs; false (*out untouched) where it overflows size_t.
// Every size product formed from arguments goes through here (or through an
// equivalent bound checked first), so that huge sizes fail with a status
// instead of wrapping into a short buffer.
inline bool checked_mul(size_t* out, std::initializer_list<size_t> xs) {
  size_t r = 1;
  for (size_t x : xs) {
    if (x != 0 && r > SIZE_MAX / x) {
      for (size_t y : xs)
        if (y == 0) {  // a zero factor: the product is 0 whatever the others
          *out = 0;
          return true;
        }
      return false;
    }
    r *= x;
  }
  *out = r;
  return true;
}

const char* dtype_name(tsr_dtype type);
bool dtype_valid(tsr_dtype type);
bool op_valid(tsr_op op);

}  // namespace tsr

#define TSR_TRY(expr)                                 \
  do {                                                \
    tsr_status tsr_try_status_ = (expr);              \
    if (tsr_try_status_ != TSR_SUCCESS) return tsr_try_status_; \
  } while (0)

#define TSR_MPI_TRY(call)                                 \
  do {                                                    \
    int tsr_mpi_rc_ = (call);                             \
    if (tsr_mpi_rc_ != MPI_SUCCESS) return ::tsr::mpi_fail(tsr_mpi_rc_, #call); \
  } while (0)

// Argument check for pointers: TSR_ERR_INVALID_ARG naming the argument.
#define TSR_CHECK_NOT_NULL(ptr) \
  do { if ((ptr) == nullptr) return ::tsr::fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", #ptr); } while (0)

// Status names, error messages, MPI error conversion.
#include <cstdio>
#include <cstring>

#include "context.hpp"
#include "core.hpp"

namespace tsr {
namespace {
thread_local std::string t_pending;  // message of the last fail() on this thread
thread_local std::string t_last;     // last message stored by finish() on this thread
}  // namespace

tsr_status fail(tsr_status status, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  t_pending = buf;
  return status;
}

const std::string& pending_message() { return t_pending; }
void set_pending_message(std::string msg) { t_pending = std::move(msg); }

tsr_status mpi_fail(int rc, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
    std::snprintf(text, sizeof text, "MPI error code %d", rc);
  }
  return fail(TSR_ERR_MPI, "%s failed: %s", what, text);
}

tsr_status finish(tsr_context ctx, const char* function, tsr_status status) {
  if (status == TSR_SUCCESS) return status;
  std::string msg = t_pending.empty() ? std::string(tsr_status_string(status)) : t_pending;
  size_t flen = std::strlen(function);
  if (msg.compare(0, flen, function) != 0 || msg.size() <= flen || msg[flen] != ':') {
    msg = std::string(function) + ": " + msg;
  }
  t_pending.clear();
  t_last = msg;
  if (ctx != nullptr && ctx->magic == tsr_context_s::kMagic) {
    std::lock_guard<std::mutex> lock(ctx->error_mutex);
    ctx->errors[std::this_thread::get_id()] = msg;
  }
  return status;
}

const char* last_message() { return t_last.c_str(); }

const char* dtype_name(tsr_dtype type) {
  switch (type) {
    case TSR_BYTE: return "TSR_BYTE";
    case TSR_INT32: return "TSR_INT32";
    case TSR_INT64: return "TSR_INT64";
    case TSR_FLOAT32: return "TSR_FLOAT32";
    case TSR_FLOAT64: return "TSR_FLOAT64";
    case TSR_BFLOAT16: return "TSR_BFLOAT16";
  }
  return "unknown";
}
bool dtype_valid(tsr_dtype type) { return type >= TSR_BYTE && type <= TSR_BFLOAT16; }
bool op_valid(tsr_op op) { return op >= TSR_SUM && op <= TSR_MAX; }

}  // namespace tsr

extern "C" {

const char* tsr_status_name(tsr_status status) {
  switch (status) {
    case TSR_SUCCESS: return "TSR_SUCCESS";
    case TSR_ERR_INVALID_ARG: return "TSR_ERR_INVALID_ARG";
    case TSR_ERR_SHAPE: return "TSR_ERR_SHAPE";
    case TSR_ERR_MPI: return "TSR_ERR_MPI";
    case TSR_ERR_NO_MEMORY: return "TSR_ERR_NO_MEMORY";
    case TSR_ERR_UNSUPPORTED: return "TSR_ERR_UNSUPPORTED";
    case TSR_ERR_IO: return "TSR_ERR_IO";
    case TSR_ERR_NUMERIC: return "TSR_ERR_NUMERIC";
    case TSR_ERR_STATE: return "TSR_ERR_STATE";
    case TSR_ERR_INTERNAL: return "TSR_ERR_INTERNAL";
  }
  return "TSR_ERR_UNKNOWN";
}

const char* tsr_status_string(tsr_status status) {
  switch (status) {
    case TSR_SUCCESS: return "success";
    case TSR_ERR_INVALID_ARG: return "invalid argument";
    case TSR_ERR_SHAPE: return "sizes or grid shape do not fit";
    case TSR_ERR_MPI: return "an MPI call failed";
    case TSR_ERR_NO_MEMORY: return "out of memory";
    case TSR_ERR_UNSUPPORTED: return "not supported by this build or backend";
    case TSR_ERR_IO: return "file input/output failed";
    case TSR_ERR_NUMERIC: return "non-finite or unusable numbers";
    case TSR_ERR_STATE: return "call out of order";
    case TSR_ERR_INTERNAL: return "internal error in tessera";
  }
  return "unknown status";
}

size_t tsr_dtype_size(tsr_dtype type) {
  switch (type) {
    case TSR_BYTE: return 1;
    case TSR_INT32: return 4;
    case TSR_INT64: return 8;
    case TSR_FLOAT32: return 4;
    case TSR_FLOAT64: return 8;
    case TSR_BFLOAT16: return 2;
  }
  return 0;
}

tsr_status tsr_get_version(int* major, int* minor, int* patch, int* code) {
  if (major) *major = TSR_VERSION_MAJOR;
  if (minor) *minor = TSR_VERSION_MINOR;
  if (patch) *patch = TSR_VERSION_PATCH;
  if (code) *code = TSR_VERSION_CODE;
  return TSR_SUCCESS;
}

const char* tsr_last_error(tsr_context ctx) {
  if (ctx == nullptr) return tsr::last_message();
  if (ctx->magic != tsr_context_s::kMagic) return "tsr_last_error: argument 'ctx' is not a live tessera context";
  std::lock_guard<std::mutex> lock(ctx->error_mutex);
  auto it = ctx->errors.find(std::this_thread::get_id());
  return it == ctx->errors.end() ? "" : it->second.c_str();
}

}  // extern "C"

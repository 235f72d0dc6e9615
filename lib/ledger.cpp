// Regions and counters of one rank.
#include "ledger.hpp"

#include <cstring>

#include "core.hpp"

namespace tsr {

namespace {
constexpr size_t kWords = sizeof(tsr_counters) / sizeof(uint64_t);
static_assert(sizeof(tsr_counters) % sizeof(uint64_t) == 0, "tsr_counters must be a uint64_t array");
tsr_counters zero() {
  tsr_counters c;
  std::memset(&c, 0, sizeof c);
  return c;
}
}  // namespace

void accumulate(tsr_counters& a, const tsr_counters& b) {
  uint64_t* x = reinterpret_cast<uint64_t*>(&a);
  const uint64_t* y = reinterpret_cast<const uint64_t*>(&b);
  for (size_t i = 0; i < kWords; ++i) x[i] += y[i];
}

Ledger::Ledger() {
  frames_.reserve(8);
  push("total");
}

void Ledger::push(const std::string& path) {
  auto it = regions_.emplace(path, zero()).first;  // existing path: accumulates
  frames_.push_back(Frame{path, &it->second, zero()});
  top_ = &frames_.back().open;
}

tsr_status Ledger::begin(const char* name) {
  TSR_CHECK_NOT_NULL(name);
  const size_t len = std::strlen(name);
  if (len == 0 || len > 63)
    return fail(TSR_ERR_INVALID_ARG, "argument 'name' has %zu characters; expected 1 to 63", len);
  if (std::strchr(name, '/') != nullptr)
    return fail(TSR_ERR_INVALID_ARG, "argument 'name' (\"%s\") contains '/'; region names may not", name);
  if (frames_.size() == 1 && std::strcmp(name, "total") == 0)
    return fail(TSR_ERR_INVALID_ARG, "argument 'name': \"total\" is reserved for the root region");
  push(frames_.size() == 1 ? std::string(name) : frames_.back().path + "/" + name);
  return TSR_SUCCESS;
}

tsr_status Ledger::end(const char* name) {
  TSR_CHECK_NOT_NULL(name);
  if (frames_.size() == 1)
    return fail(TSR_ERR_STATE, "tsr_region_end(\"%s\") without a matching tsr_region_begin", name);
  const std::string& path = frames_.back().path;
  const size_t slash = path.rfind('/');
  if (path.compare(slash == std::string::npos ? 0 : slash + 1, std::string::npos, name) != 0)
    return fail(TSR_ERR_STATE, "argument 'name' (\"%s\") does not match the innermost open region \"%s\"", name,
                path.c_str());
  const Frame done = frames_.back();
  frames_.pop_back();
  accumulate(*done.stored, done.open);
  accumulate(frames_.back().open, done.open);  // the enclosing region includes it
  top_ = &frames_.back().open;
  return TSR_SUCCESS;
}

tsr_status Ledger::reset() {
  if (frames_.size() != 1)
    return fail(TSR_ERR_STATE, "region \"%s\" is still open: end it before resetting the counters",
                frames_.back().path.c_str());
  frames_.clear();
  regions_.clear();
  push("total");
  return TSR_SUCCESS;
}

bool Ledger::get(const std::string& path, tsr_counters* out) const {
  auto it = regions_.find(path);
  if (it == regions_.end()) return false;
  *out = it->second;
  // If the region is open, add its open frame and every frame inside it.
  for (size_t i = 0; i < frames_.size(); ++i)
    if (frames_[i].path == path) {
      for (size_t j = i; j < frames_.size(); ++j) accumulate(*out, frames_[j].open);
      break;
    }
  return true;
}

std::map<std::string, tsr_counters> Ledger::snapshot() const {
  std::map<std::string, tsr_counters> all;
  for (const auto& kv : regions_) get(kv.first, &all[kv.first]);
  return all;
}

}  // namespace tsr

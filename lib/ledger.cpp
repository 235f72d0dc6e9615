// Regions and counters of one rank.
#include "ledger.hpp"

#include <cstring>

#include "core.hpp"

namespace tsr {

Ledger::Ledger() {
  tsr_counters& total = regions_["total"];
  std::memset(&total, 0, sizeof total);
  open_.push_back(&total);
  paths_.push_back("total");
}

tsr_status Ledger::begin(const char* name) {
  TSR_CHECK_NOT_NULL(name);
  const size_t len = std::strlen(name);
  if (len == 0 || len > 63)
    return fail(TSR_ERR_INVALID_ARG, "argument 'name' has %zu characters; expected 1 to 63", len);
  if (std::strchr(name, '/') != nullptr)
    return fail(TSR_ERR_INVALID_ARG, "argument 'name' (\"%s\") contains '/'; region names may not", name);
  std::string path = open_.size() == 1 ? std::string(name) : paths_.back() + "/" + name;
  if (path == "total") return fail(TSR_ERR_INVALID_ARG, "argument 'name': \"total\" is reserved for the root region");
  auto it = regions_.find(path);
  if (it == regions_.end()) {
    tsr_counters zero;
    std::memset(&zero, 0, sizeof zero);
    it = regions_.emplace(path, zero).first;
  }
  open_.push_back(&it->second);
  paths_.push_back(std::move(path));
  return TSR_SUCCESS;
}

tsr_status Ledger::end(const char* name) {
  TSR_CHECK_NOT_NULL(name);
  if (open_.size() == 1)
    return fail(TSR_ERR_STATE, "tsr_region_end(\"%s\") without a matching tsr_region_begin", name);
  const std::string& path = paths_.back();
  const size_t slash = path.rfind('/');
  const std::string inner = slash == std::string::npos ? path : path.substr(slash + 1);
  if (inner != name)
    return fail(TSR_ERR_STATE, "argument 'name' (\"%s\") does not match the innermost open region \"%s\"", name,
                path.c_str());
  open_.pop_back();
  paths_.pop_back();
  return TSR_SUCCESS;
}

tsr_status Ledger::reset() {
  if (open_.size() != 1)
    return fail(TSR_ERR_STATE, "region \"%s\" is still open: end it before resetting the counters",
                paths_.back().c_str());
  regions_.clear();
  tsr_counters& total = regions_["total"];
  std::memset(&total, 0, sizeof total);
  open_.assign(1, &total);
  return TSR_SUCCESS;
}

const tsr_counters* Ledger::find(const std::string& path) const {
  auto it = regions_.find(path);
  return it == regions_.end() ? nullptr : &it->second;
}

}  // namespace tsr

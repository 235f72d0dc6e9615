// Regions and counters of one rank.
#include "ledger.hpp"

#include <algorithm>
#include <cstring>

#include "core.hpp"
#include "energy/meters.hpp"

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

namespace {
// The parts of RegionExtra that fold into enclosing regions: flops and the row.
void fold(RegionExtra& a, const RegionExtra& b) {
  a.x.flops += b.x.flops;
  if (a.row.size() < b.row.size()) a.row.resize(b.row.size(), 0);
  for (size_t i = 0; i < b.row.size(); ++i) a.row[i] += b.row[i];
}
}  // namespace

void Ledger::open_measure(Frame& f) const {
  f.t0 = energy::now_ns();
  f.mask0 = meter_ ? meter_(f.e0) : 0;
}

// Adds one visit of a frame, from its begin to now, to x: the time, and the
// meter delta of the domains read at both ends. A region's mask keeps only
// the domains read on every visit.
void Ledger::add_open_measure(const Frame& f, tsr_region_extra* x) const {
  x->nanoseconds += energy::now_ns() - f.t0;
  uint64_t e1[TSR_DOMAINS] = {0, 0, 0};
  const int mask1 = f.mask0 != 0 && meter_ ? meter_(e1) : 0;
  const uint64_t both = static_cast<uint64_t>(f.mask0 & mask1);
  for (int d = 0; d < TSR_DOMAINS; ++d)
    if (both & (1u << d)) x->measured_uj[d] += e1[d] - f.e0[d];
  const bool first = x->entries <= 1 && x->measured_mask == 0;
  x->measured_mask = first ? both : x->measured_mask & both;
}

void Ledger::close_measure(Frame& f) { add_open_measure(f, &f.stored_x->x); }

Ledger::Ledger() {
  frames_.reserve(8);
  push("total");
}

void Ledger::push(const std::string& path) {
  auto it = regions_.emplace(path, zero()).first;  // existing path: accumulates
  RegionExtra& ex = extras_[path];
  ex.x.entries += 1;
  frames_.emplace_back();
  Frame& f = frames_.back();
  f.path = path;
  f.stored = &it->second;
  f.open = zero();
  f.stored_x = &ex;
  if (matrix_n_ > 0) f.open_x.row.assign(2 * static_cast<size_t>(matrix_n_), 0);
  open_measure(f);
  top_ = &f.open;
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
  close_measure(frames_.back());
  const Frame done = frames_.back();
  frames_.pop_back();
  accumulate(*done.stored, done.open);
  accumulate(frames_.back().open, done.open);  // the enclosing region includes it
  fold(*done.stored_x, done.open_x);
  fold(frames_.back().open_x, done.open_x);
  if (matrix_n_ > 0 && frames_.back().open_x.row.size() < 2 * static_cast<size_t>(matrix_n_))
    frames_.back().open_x.row.resize(2 * static_cast<size_t>(matrix_n_), 0);
  top_ = &frames_.back().open;
  return TSR_SUCCESS;
}

tsr_status Ledger::reset() {
  if (frames_.size() != 1)
    return fail(TSR_ERR_STATE, "region \"%s\" is still open: end it before resetting the counters",
                frames_.back().path.c_str());
  frames_.clear();
  regions_.clear();
  extras_.clear();
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

bool Ledger::get_extra(const std::string& path, RegionExtra* out) const {
  auto it = extras_.find(path);
  if (it == extras_.end()) return false;
  *out = it->second;
  for (size_t i = 0; i < frames_.size(); ++i)
    if (frames_[i].path == path) {
      for (size_t j = i; j < frames_.size(); ++j) fold(*out, frames_[j].open_x);
      add_open_measure(frames_[i], &out->x);
      break;
    }
  if (matrix_n_ > 0 && out->row.size() < 2 * static_cast<size_t>(matrix_n_))
    out->row.resize(2 * static_cast<size_t>(matrix_n_), 0);
  return true;
}

std::map<std::string, RegionExtra> Ledger::snapshot_extra() const {
  std::map<std::string, RegionExtra> all;
  for (const auto& kv : extras_) get_extra(kv.first, &all[kv.first]);
  return all;
}

void Ledger::set_meter(MeterReader reader) {
  // Only "total" is open (the API checks): end its current measurement with
  // the old reader (time and energy so far are stored) and start a new one.
  for (Frame& f : frames_) close_measure(f);
  meter_ = std::move(reader);
  for (Frame& f : frames_) open_measure(f);
}

void Ledger::sample_meter() const {
  if (!meter_) return;
  uint64_t e[TSR_DOMAINS];
  meter_(e);
}

void Ledger::set_matrix(int nranks) {
  matrix_n_ = nranks > 0 ? nranks : 0;
  if (matrix_n_ == 0) return;
  for (Frame& f : frames_)
    if (f.open_x.row.size() < 2 * static_cast<size_t>(matrix_n_)) f.open_x.row.resize(2 * static_cast<size_t>(matrix_n_), 0);
}

}  // namespace tsr

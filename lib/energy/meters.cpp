// RAPL (powercap sysfs) and NVML (dlopen) readers.
#include "energy/meters.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace tsr {
namespace energy {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

namespace {

std::string read_line(const std::string& path, int* err) {
  std::ifstream in(path);
  std::string s;
  if (!in || !std::getline(in, s)) {
    *err = errno != 0 ? errno : EIO;
    return std::string();
  }
  *err = 0;
  return s;
}

bool parse_u64(const std::string& s, uint64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str()) return false;
  while (*end == '\n' || *end == ' ') ++end;
  if (*end != '\0') return false;
  *v = x;
  return true;
}

// "intel-rapl:N" (depth 1) or "intel-rapl:N:M" (depth 2); 0 otherwise.
int rapl_depth(const char* name) {
  const char* p = "intel-rapl:";
  if (std::strncmp(name, p, std::strlen(p)) != 0) return 0;
  int depth = 0;
  for (const char* c = name + std::strlen(p); *c;) {
    if (!(*c >= '0' && *c <= '9')) return 0;
    while (*c >= '0' && *c <= '9') ++c;
    ++depth;
    if (*c == ':') ++c;
    else if (*c != '\0') return 0;
  }
  return depth;
}

std::string errtext(int err) { return err == EACCES || err == EPERM ? "permission denied" : std::strerror(err); }

}  // namespace

// ------------------------------------------------------------------- RAPL
Rapl::~Rapl() {
  for (Zone& z : zones_)
    if (z.fd >= 0) ::close(z.fd);
}

bool Rapl::read_u64(int fd, uint64_t* v) {
  char buf[32];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  return parse_u64(buf, v);
}

int Rapl::open(const std::string& root, std::string* note) {
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) {
    *note = "RAPL: no powercap directory " + root + " (" + errtext(errno) + ")";
    return 0;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (rapl_depth(e->d_name) > 0) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  if (names.empty()) {
    *note = "RAPL: no intel-rapl zone under " + root;
    return 0;
  }
  std::string problems, ignored;
  int broken = 0;  // domains with a zone that cannot be read: dropped whole
  for (const std::string& n : names) {
    const std::string dir = root + "/" + n;
    int err = 0;
    std::string name = read_line(dir + "/name", &err);
    if (err != 0) {
      problems += "; " + dir + "/name: " + errtext(err);
      continue;
    }
    int domain = -1;
    if (rapl_depth(n.c_str()) == 1 && name.compare(0, 7, "package") == 0) domain = TSR_DOMAIN_PACKAGE;
    else if (name == "dram") domain = TSR_DOMAIN_DRAM;
    if (domain < 0) {
      ignored += (ignored.empty() ? "" : ", ") + n + " (" + name + ")";
      continue;
    }
    uint64_t range = 0;
    const std::string rs = read_line(dir + "/max_energy_range_uj", &err);
    if (err != 0 || !parse_u64(rs, &range) || range == 0) {
      problems += "; " + dir + "/max_energy_range_uj: " + (err != 0 ? errtext(err) : "not a positive integer");
      broken |= 1 << domain;
      continue;
    }
    const std::string path = dir + "/energy_uj";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      problems += "; " + path + ": " + errtext(errno);
      broken |= 1 << domain;
      continue;
    }
    uint64_t v = 0;
    if (!read_u64(fd, &v)) {
      problems += "; " + path + ": " + (errno == EACCES || errno == EPERM ? errtext(errno) : "unreadable value");
      broken |= 1 << domain;
      ::close(fd);
      continue;
    }
    Zone z;
    z.dir = dir;
    z.name = name;
    z.domain = domain;
    z.fd = fd;
    z.range = range;
    z.last = v;
    zones_.push_back(z);
  }
  // A domain is the node's sum over its zones: with one zone unreadable the
  // sum would be short, so such a domain is not read at all.
  drop(broken);
  int npkg = 0, ndram = 0;
  for (const Zone& z : zones_) (z.domain == TSR_DOMAIN_PACKAGE ? npkg : ndram) += 1;
  last_ns_ = now_ns();
  std::string s = "RAPL: ";
  if (domains_ == 0) s += "no readable package or dram zone under " + root;
  else
    s += std::to_string(npkg) + " package zone(s), " + std::to_string(ndram) + " dram zone(s) under " + root;
  if (!problems.empty()) s += " (not readable: " + problems.substr(2) + ")";
  if (!ignored.empty()) s += " (not used: " + ignored + ")";
  *note = s;
  return domains_;
}

void Rapl::drop(int domains) {
  for (size_t i = 0; i < zones_.size();) {
    if (domains & (1 << zones_[i].domain)) {
      ::close(zones_[i].fd);
      zones_.erase(zones_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  domains_ = 0;
  for (const Zone& z : zones_) domains_ |= 1 << z.domain;
}

void Rapl::sample(uint64_t acc[TSR_DOMAINS]) {
  if (zones_.empty()) return;
  const uint64_t t = now_ns();
  max_gap_ns_ = std::max(max_gap_ns_, t - last_ns_);
  last_ns_ = t;
  // Read every zone first: a domain with a failed read is dropped whole (its
  // sum would be short) and adds nothing for this interval.
  std::vector<uint64_t> now(zones_.size(), 0);
  int failed = 0;
  for (size_t i = 0; i < zones_.size(); ++i) {
    const Zone& z = zones_[i];
    if (!read_u64(z.fd, &now[i]) || now[i] > z.range) {
      errors_ += (errors_.empty() ? "" : "; ") + z.dir + "/energy_uj: read failed; " +
                 (z.domain == TSR_DOMAIN_PACKAGE ? "package" : "dram") + " domain no longer read";
      failed |= 1 << z.domain;
    }
  }
  for (size_t i = 0; i < zones_.size(); ++i) {
    Zone& z = zones_[i];
    if (failed & (1 << z.domain)) continue;
    // The counter runs from 0 to max_energy_range_uj and wraps to 0; one
    // wrap between two reads is recovered (up to one energy unit).
    acc[z.domain] += now[i] >= z.last ? now[i] - z.last : (z.range - z.last) + now[i];
    z.last = now[i];
  }
  if (failed) drop(failed);
}

double Rapl::min_range_joules() const {
  uint64_t r = 0;
  for (const Zone& z : zones_) r = r == 0 ? z.range : std::min(r, z.range);
  return static_cast<double>(r) * 1e-6;
}

// ------------------------------------------------------------------- NVML
namespace {
constexpr int kNvmlSuccess = 0;
}

Nvml::~Nvml() { close(); }

void Nvml::close() {
  if (inited_ && shutdown_ != nullptr) shutdown_();
  inited_ = false;
  if (lib_ != nullptr) ::dlclose(lib_);
  lib_ = nullptr;
  devices_.clear();
  last_mj_.clear();
  domains_ = 0;
}

int Nvml::open(const std::string& library, std::string* note) {
  lib_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    const char* e = ::dlerror();
    *note = "NVML: not present (" + std::string(e ? e : library + ": cannot be loaded") + ")";
    return 0;
  }
  auto init = reinterpret_cast<int (*)()>(::dlsym(lib_, "nvmlInit_v2"));
  shutdown_ = reinterpret_cast<int (*)()>(::dlsym(lib_, "nvmlShutdown"));
  auto count = reinterpret_cast<int (*)(unsigned*)>(::dlsym(lib_, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<int (*)(unsigned, void**)>(::dlsym(lib_, "nvmlDeviceGetHandleByIndex_v2"));
  energy_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(::dlsym(lib_, "nvmlDeviceGetTotalEnergyConsumption"));
  auto errstr = reinterpret_cast<const char* (*)(int)>(::dlsym(lib_, "nvmlErrorString"));
  if (!init || !shutdown_ || !count || !handle || !energy_) {
    *note = "NVML: " + library + " lacks nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2 or "
            "nvmlDeviceGetTotalEnergyConsumption";
    close();
    return 0;
  }
  auto why = [&](int rc) { return errstr ? std::string(errstr(rc)) : "error " + std::to_string(rc); };
  int rc = init();
  if (rc != kNvmlSuccess) {
    *note = "NVML: nvmlInit_v2 failed: " + why(rc);
    close();
    return 0;
  }
  inited_ = true;
  unsigned n = 0;
  rc = count(&n);
  if (rc != kNvmlSuccess || n == 0) {
    *note = rc != kNvmlSuccess ? "NVML: nvmlDeviceGetCount_v2 failed: " + why(rc) : "NVML: no GPU";
    close();
    return 0;
  }
  std::string skipped;
  for (unsigned i = 0; i < n; ++i) {
    void* dev = nullptr;
    unsigned long long mj = 0;
    rc = handle(i, &dev);
    if (rc == kNvmlSuccess) rc = energy_(dev, &mj);
    if (rc != kNvmlSuccess) {
      skipped += (skipped.empty() ? "" : "; ") + ("GPU " + std::to_string(i) + ": " + why(rc));
      continue;
    }
    devices_.push_back(dev);
    last_mj_.push_back(mj);
  }
  if (devices_.empty()) {
    *note = "NVML: no GPU reports its total energy (" + skipped + ")";
    close();
    return 0;
  }
  domains_ = 1 << TSR_DOMAIN_GPU;
  *note = "NVML: " + std::to_string(devices_.size()) + " of " + std::to_string(n) + " GPU(s) via " + library;
  if (!skipped.empty()) *note += " (not readable: " + skipped + ")";
  return domains_;
}

void Nvml::sample(uint64_t acc[TSR_DOMAINS]) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    unsigned long long mj = 0;
    if (energy_(devices_[i], &mj) != kNvmlSuccess) continue;  // keep the last value; next read catches up
    // Millijoules since the driver was loaded: 64 bits, no wrap.
    if (mj >= last_mj_[i]) acc[TSR_DOMAIN_GPU] += (mj - last_mj_[i]) * 1000ull;
    last_mj_[i] = mj;
  }
}

// ----------------------------------------------------------------- Meters
void Meters::open(int mask, const std::string& powercap_root, const std::string& nvml_library) {
  close();
  rapl_.reset(new Rapl());
  nvml_.reset(new Nvml());
  std::string a = "RAPL: not requested", b = "NVML: not requested";
  if (mask & TSR_METER_RAPL) rapl_->open(powercap_root, &a);
  if (mask & TSR_METER_NVML) nvml_->open(nvml_library, &b);
  status_ = a + "; " + b;
}

void Meters::close() {
  rapl_.reset();
  nvml_.reset();
  std::fill(acc_, acc_ + TSR_DOMAINS, 0);
  status_.clear();
}

void Meters::read(uint64_t out[TSR_DOMAINS]) {
  if (rapl_) rapl_->sample(acc_);
  if (nvml_) nvml_->sample(acc_);
  std::copy(acc_, acc_ + TSR_DOMAINS, out);
}

std::string Meters::warnings() const {
  if (!rapl_) return std::string();
  const Rapl& rapl = *rapl_;
  std::string w = rapl.errors();
  const double range = rapl.min_range_joules();
  // At 400 W a node's package counter covers range/400 seconds; two reads
  // further apart than that may have missed a wrap.
  if (range > 0 && static_cast<double>(rapl.max_gap_ns()) * 1e-9 > range / 400.0) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "RAPL: %.0f s between two reads, more than the %.0f s a counter covers at 400 W: "
                  "a wrap may have been missed (call tsr_energy_sample more often)",
                  static_cast<double>(rapl.max_gap_ns()) * 1e-9, range / 400.0);
    w += (w.empty() ? "" : "; ") + std::string(buf);
  }
  return w;
}

}  // namespace energy
}  // namespace tsr

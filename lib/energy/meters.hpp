// Real energy counters: RAPL through the Linux powercap sysfs (package and
// DRAM zones, wrap-around handled) and NVML total GPU energy, loaded at run
// time with dlopen (no link dependency on NVML). No MPI here: the caller
// decides which rank reads (one per node). Readings are cumulative
// microjoules since open(), per tsr_energy_domain.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tsr {
namespace energy {

uint64_t now_ns();  // steady clock

class Rapl {
 public:
  Rapl() = default;
  ~Rapl();
  Rapl(const Rapl&) = delete;
  Rapl& operator=(const Rapl&) = delete;
  // Opens every readable zone named package-* (top-level intel-rapl:N) or
  // dram (intel-rapl:N or intel-rapl:N:M) under root. Returns the domains it
  // can read (bits of tsr_energy_domain; 0: none) and a description of what it
  // found or why nothing is readable in *note.
  int open(const std::string& root, std::string* note);
  // Adds this read's increments (modulo max_energy_range_uj) to acc[domain].
  void sample(uint64_t acc[TSR_DOMAINS]);
  int domains() const { return domains_; }
  // Longest time between two samples, and the shortest counter range (J).
  uint64_t max_gap_ns() const { return max_gap_ns_; }
  double min_range_joules() const;
  // Reads that failed after open (the zone is then dropped; noted here).
  const std::string& errors() const { return errors_; }

 private:
  struct Zone {
    std::string dir, name;
    int domain = -1;
    int fd = -1;
    uint64_t range = 0;  // max_energy_range_uj
    uint64_t last = 0;
  };
  static bool read_u64(int fd, uint64_t* v);
  void drop(int domains);  // closes every zone of these domains
  std::vector<Zone> zones_;
  int domains_ = 0;
  uint64_t last_ns_ = 0, max_gap_ns_ = 0;
  std::string errors_;
};

class Nvml {
 public:
  Nvml() = default;
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  // dlopen(library), nvmlInit_v2, every device whose total energy can be
  // read. Returns TSR_DOMAIN_GPU's bit or 0, with the reason in *note.
  int open(const std::string& library, std::string* note);
  void sample(uint64_t acc[TSR_DOMAINS]);
  int domains() const { return domains_; }

 private:
  void close();
  void* lib_ = nullptr;
  bool inited_ = false;
  int (*shutdown_)() = nullptr;
  int (*energy_)(void*, unsigned long long*) = nullptr;
  std::vector<void*> devices_;
  std::vector<unsigned long long> last_mj_;
  int domains_ = 0;
};

// Both meters, as one node's reader.
class Meters {
 public:
  // mask: TSR_METER_RAPL | TSR_METER_NVML bits to try.
  void open(int mask, const std::string& powercap_root, const std::string& nvml_library);
  void close();
  // Cumulative microjoules per domain since open().
  void read(uint64_t out[TSR_DOMAINS]);
  int domains() const { return (rapl_ ? rapl_->domains() : 0) | (nvml_ ? nvml_->domains() : 0); }
  const std::string& status() const { return status_; }
  // Warnings worth a line in a report (possible missed wraps, failed reads).
  std::string warnings() const;

 private:
  std::unique_ptr<Rapl> rapl_;
  std::unique_ptr<Nvml> nvml_;
  uint64_t acc_[TSR_DOMAINS] = {0, 0, 0};
  std::string status_;
};

}  // namespace energy
}  // namespace tsr

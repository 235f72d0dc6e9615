// tessera energy accounting, C++17 wrappers over include/tessera/energy.h:
// RAII owners, exceptions (tessera::error). Included by tessera.hpp.
//
//   tessera::energy_start(ctx);                      // meters, where readable
//   { tessera::region r(ctx, "step"); ... }          // move data
//   tessera::energy_report rep(ctx);                 // collective
//   if (ctx.rank() == 0) std::fputs(rep.str().c_str(), stdout);
//   rep.write(TSR_OUTPUT_JSON, "energy.json");       // on the root
#ifndef TESSERA_ENERGY_HPP
#define TESSERA_ENERGY_HPP

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/tessera.hpp"

namespace tessera {

// A machine profile (move-only). Local.
class energy_profile {
 public:
  // $TSR_ENERGY_PROFILE if set, else the built-in default.
  energy_profile() { check(tsr_energy_profile_load(nullptr, &h_)); }
  explicit energy_profile(const std::string& path) { check(tsr_energy_profile_load(path.c_str(), &h_)); }
  static energy_profile parse(const std::string& json) {
    energy_profile p(nullptr);
    check(tsr_energy_profile_parse(json.c_str(), &p.h_));
    return p;
  }
  ~energy_profile() { tsr_energy_profile_destroy(&h_); }
  energy_profile(energy_profile&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  energy_profile& operator=(energy_profile&& o) noexcept {
    if (this != &o) {
      tsr_energy_profile_destroy(&h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  energy_profile(const energy_profile&) = delete;
  energy_profile& operator=(const energy_profile&) = delete;

  [[nodiscard]] tsr_energy_profile get() const noexcept { return h_; }
  [[nodiscard]] std::string name() const {
    const char* n = nullptr;
    check(tsr_energy_profile_name(h_, &n, nullptr));
    return n;
  }
  [[nodiscard]] std::string file() const {
    const char* f = nullptr;
    check(tsr_energy_profile_name(h_, nullptr, &f));
    return f;
  }
  [[nodiscard]] tsr_energy_coeff level(tsr_level l) const {
    tsr_energy_coeff c{};
    check(tsr_energy_profile_level(h_, l, &c));
    return c;
  }
  // {figure, present}
  [[nodiscard]] std::pair<tsr_energy_coeff, bool> flop() const {
    tsr_energy_coeff c{};
    int present = 0;
    check(tsr_energy_profile_flop(h_, &c, &present));
    return {c, present != 0};
  }
  [[nodiscard]] double pue() const {
    double p = 0;
    check(tsr_energy_profile_pue(h_, &p));
    return p;
  }

 private:
  explicit energy_profile(std::nullptr_t) noexcept {}
  tsr_energy_profile h_ = nullptr;
};

// Settings of energy_start (see tsr_energy_config).
struct energy_config {
  int meters = TSR_METERS_AUTO;
  std::string powercap_root;  // empty: /sys/class/powercap
  std::string nvml_library;   // empty: libnvidia-ml.so.1
  bool comm_matrix = false;
};

// Collective over the context.
inline void energy_start(const context& ctx, const energy_config& cfg = energy_config()) {
  tsr_energy_config c = TSR_ENERGY_CONFIG_INIT;
  c.meters = cfg.meters;
  c.powercap_root = cfg.powercap_root.empty() ? nullptr : cfg.powercap_root.c_str();
  c.nvml_library = cfg.nvml_library.empty() ? nullptr : cfg.nvml_library.c_str();
  c.comm_matrix = cfg.comm_matrix ? 1 : 0;
  check(tsr_energy_start(ctx.get(), &c), ctx.get());
}
inline void energy_stop(const context& ctx) { check(tsr_energy_stop(ctx.get()), ctx.get()); }
// Local.
inline void energy_sample(const context& ctx) { check(tsr_energy_sample(ctx.get()), ctx.get()); }
inline void flops_add(const context& ctx, std::uint64_t flops) { check(tsr_flops_add(ctx.get(), flops), ctx.get()); }
inline tsr_region_extra region_extra(const context& ctx, const char* path = "total") {
  tsr_region_extra x{};
  check(tsr_region_extra_get(ctx.get(), path, &x), ctx.get());
  return x;
}

// An energy report (collective to take, local to read; move-only).
class energy_report {
 public:
  explicit energy_report(const context& ctx, const energy_profile* profile = nullptr, int root = 0) {
    check(tsr_energy_report_create(ctx.get(), profile ? profile->get() : nullptr, root, &h_), ctx.get());
  }
  ~energy_report() { tsr_energy_report_destroy(&h_); }
  energy_report(energy_report&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  energy_report& operator=(energy_report&& o) noexcept {
    if (this != &o) {
      tsr_energy_report_destroy(&h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  energy_report(const energy_report&) = delete;
  energy_report& operator=(const energy_report&) = delete;

  [[nodiscard]] tsr_energy_report get() const noexcept { return h_; }
  [[nodiscard]] std::vector<std::string> regions() const {
    int n = 0;
    check(tsr_energy_report_region_count(h_, &n));
    std::vector<std::string> v;
    for (int i = 0; i < n; ++i) {
      const char* p = nullptr;
      check(tsr_energy_report_region_path(h_, i, &p));
      v.emplace_back(p);
    }
    return v;
  }
  [[nodiscard]] int find(const std::string& path) const {
    int g = 0;
    check(tsr_energy_report_find(h_, path.c_str(), &g));
    return g;
  }
  [[nodiscard]] tsr_energy_estimate rank(int region, int r) const {
    tsr_energy_estimate e{};
    check(tsr_energy_report_rank(h_, region, r, &e));
    return e;
  }
  [[nodiscard]] tsr_energy_estimate stat(int region, tsr_stat s) const {
    tsr_energy_estimate e{};
    check(tsr_energy_report_stat(h_, region, s, &e));
    return e;
  }
  [[nodiscard]] bool measured() const {
    int m = 0;
    check(tsr_energy_report_source(h_, &m, nullptr));
    return m != 0;
  }
  [[nodiscard]] std::string source() const {
    const char* t = nullptr;
    check(tsr_energy_report_source(h_, nullptr, &t));
    return t;
  }
  // bytes[from * size + to] (root only; needs comm_matrix).
  [[nodiscard]] std::vector<std::uint64_t> matrix(int region, int size) const {
    std::vector<std::uint64_t> b(static_cast<std::size_t>(size) * static_cast<std::size_t>(size));
    check(tsr_energy_report_matrix(h_, region, b.data(), nullptr, b.size()));
    return b;
  }
  [[nodiscard]] std::string str(tsr_output_format fmt = TSR_OUTPUT_TABLE) const {
    std::size_t n = 0;
    check(tsr_energy_report_format(h_, fmt, nullptr, 0, &n));
    std::string s(n + 1, '\0');
    check(tsr_energy_report_format(h_, fmt, &s[0], s.size(), &n));
    s.resize(n);
    return s;
  }
  void write(tsr_output_format fmt, const std::string& path) const {
    check(tsr_energy_report_write(h_, fmt, path.c_str()));
  }

 private:
  tsr_energy_report h_ = nullptr;
};

}  // namespace tessera

#endif  // TESSERA_ENERGY_HPP

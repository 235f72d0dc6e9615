// Fuzz harness: the machine (energy) profile parser, tsr::energy::parse_profile
// (lib/energy/profile.cpp; format in docs/ENERGY.md), which
// tsr_energy_profile_load and TSR_ENERGY_PROFILE feed with a file's bytes.
// Contract checked: any bytes give TSR_SUCCESS or TSR_ERR_INVALID_ARG with a
// message naming the profile, never a crash or an exception; a profile that
// parses has every figure finite, >= 0 and low <= value <= high, pue >= 1.
#include <cmath>
#include <cstdint>
#include <string>

#include "core.hpp"
#include "energy/profile.hpp"
#include "fuzz_check.hpp"

namespace {

void check_coeff(const tsr::energy::Coeff& c, const char* what) {
  FUZZ_CHECK(std::isfinite(c.value) && std::isfinite(c.low) && std::isfinite(c.high), "%s not finite", what);
  FUZZ_CHECK(c.low >= 0 && c.low <= c.value && c.value <= c.high, "%s: %g <= %g <= %g broken", what, c.low, c.value,
             c.high);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const tsr::energy::Profile& base = tsr::energy::default_profile();
  tsr::energy::Profile p;
  const tsr_status st = tsr::energy::parse_profile(text, "fuzz.json", base, &p);
  if (st != TSR_SUCCESS) {
    FUZZ_CHECK(st == TSR_ERR_INVALID_ARG, "status %d", static_cast<int>(st));
    const std::string& msg = tsr::pending_message();
    FUZZ_CHECK(msg.find("energy profile fuzz.json") != std::string::npos, "message '%s'", msg.c_str());
    return 0;
  }
  FUZZ_CHECK(std::isfinite(p.pue) && p.pue >= 1.0, "pue %g", p.pue);
  for (int l = 0; l < TSR_LEVELS; ++l) check_coeff(p.level[l], tsr::energy::level_key(static_cast<tsr_level>(l)));
  if (p.has_flop) check_coeff(p.flop, "flop");
  check_coeff(p.static_power, "static");
  FUZZ_CHECK(!p.name.empty(), "empty name");
  (void)p.digest();
  return 0;
}

// Machine profiles: energy per byte moved at each level (and optionally per
// flop), each with a [low, high] range and its source. JSON, parsed with
// nlohmann-json; format in docs/ENERGY.md. No MPI here: libtessera and the
// PMPI tool (lib/pmpi) share this code.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/tessera.h"

namespace tsr {
namespace energy {

// The level names used in profiles and reports ("self", "intra_node", ...).
const char* level_key(tsr_level level);
// Human-readable ("intra-node", "host<->device", ...).
const char* level_label(tsr_level level);

struct Coeff {
  double value = 0, low = 0, high = 0;  // pJ per byte (levels) or per flop
  std::string source, composition, uncertainty;
  std::string origin;  // the profile (name and file) this figure came from
};

struct Profile {
  std::string name, file, description;
  double pue = 1.0;
  std::string pue_source;
  Coeff level[TSR_LEVELS];
  bool has_flop = false;
  Coeff flop;
  Coeff static_power;  // W per rank (planners: static power x modelled time); zeros if the profile has none
  uint64_t digest() const;  // of every number and the name: equal profiles, equal digests
};

// The built-in default profile, as shipped in lib/energy/profiles/default-2025.json.
const std::string& default_profile_json();
const Profile& default_profile();

// Parses `text` (named `origin` in messages: a file name or "<string>") on top
// of `base`: the levels, pue and flop it lists replace base's; everything else
// is kept. Errors (TSR_ERR_INVALID_ARG via fail()): JSON syntax errors name the
// line and column, bad values and unknown or duplicate keys name the key path.
tsr_status parse_profile(const std::string& text, const std::string& origin, const Profile& base, Profile* out);

// The profile behind a public handle, or null if it is not a live one.
const Profile* profile_of(tsr_energy_profile handle);

// Reads a profile file over the default (TSR_ERR_IO if it cannot be read).
// path empty: $TSR_ENERGY_PROFILE if set and not empty, else the default.
tsr_status load_profile(const std::string& path, Profile* out);

}  // namespace energy
}  // namespace tsr

// Machine profiles: JSON parsing (nlohmann-json) with errors that name the
// line and column or the key, the built-in default, user overrides.
#include "energy/profile.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <vector>

#include "core.hpp"

namespace tsr {
namespace energy {

namespace {
using json = nlohmann::json;

const char* const kKeys[TSR_LEVELS] = {"self",          "intra_node", "inter_node", "host_device",
                                       "device_device", "disk_read",  "disk_write"};
const char* const kLabels[TSR_LEVELS] = {"self",           "intra-node", "inter-node", "host<->device",
                                         "device<->device", "disk read",  "disk write"};

// The first duplicate key of any object, found while parsing (nlohmann keeps
// the last value silently).
struct DupFinder {
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string current;
  };
  std::vector<Frame> stack;
  std::string duplicate;  // key path of the first duplicate
  // The key path being parsed ("levels.self.pj_per_byte"), for messages
  // about a value the JSON library rejects.
  std::string path() const {
    std::string p;
    for (const Frame& g : stack)
      if (g.object && !g.current.empty()) p += (p.empty() ? "" : ".") + g.current;
    return p;
  }
  bool operator()(int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start: stack.push_back({true, {}, {}}); break;
      case json::parse_event_t::array_start: stack.push_back({false, {}, {}}); break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case json::parse_event_t::key:
        if (!stack.empty()) {
          Frame& f = stack.back();
          f.current = parsed.get<std::string>();
          if (!f.keys.insert(f.current).second && duplicate.empty()) {
            for (const Frame& g : stack)
              if (g.object) duplicate += (duplicate.empty() ? "" : ".") + g.current;
          }
        }
        break;
      case json::parse_event_t::value: break;
    }
    return true;
  }
};

class Parser {
 public:
  explicit Parser(std::string origin) : origin_(std::move(origin)) {}

  tsr_status bad(const std::string& key, const std::string& what) const {
    return fail(TSR_ERR_INVALID_ARG, "energy profile %s: key '%s': %s", origin_.c_str(), key.c_str(), what.c_str());
  }

  tsr_status number(const json& v, const std::string& key, double* out) const {
    if (!v.is_number()) return bad(key, std::string("expected a number, got ") + v.type_name());
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0) return bad(key, "expected a finite number >= 0, got " + v.dump());
    *out = d;
    return TSR_SUCCESS;
  }

  tsr_status text(const json& v, const std::string& key, std::string* out) const {
    if (!v.is_string()) return bad(key, std::string("expected a string, got ") + v.type_name());
    *out = v.get<std::string>();
    return TSR_SUCCESS;
  }

  // A figure: {"<unit_key>": x, "low": l, "high": h, "source": ..., ...}.
  tsr_status coeff(const json& v, const std::string& key, const char* unit_key, const std::string& origin,
                   Coeff* out) const {
    if (!v.is_object()) return bad(key, std::string("expected an object, got ") + v.type_name());
    Coeff c;
    bool have_value = false, have_low = false, have_high = false;
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string k = key + "." + it.key();
      if (it.key() == unit_key) {
        TSR_TRY(number(it.value(), k, &c.value));
        have_value = true;
      } else if (it.key() == "low") {
        TSR_TRY(number(it.value(), k, &c.low));
        have_low = true;
      } else if (it.key() == "high") {
        TSR_TRY(number(it.value(), k, &c.high));
        have_high = true;
      } else if (it.key() == "source") {
        TSR_TRY(text(it.value(), k, &c.source));
      } else if (it.key() == "composition") {
        TSR_TRY(text(it.value(), k, &c.composition));
      } else if (it.key() == "uncertainty") {
        TSR_TRY(text(it.value(), k, &c.uncertainty));
      } else {
        return bad(k, std::string("unknown key; expected ") + unit_key +
                          ", low, high, source, composition or uncertainty");
      }
    }
    if (!have_value) return bad(key, std::string("missing '") + unit_key + "'");
    if (!have_low) c.low = c.value;
    if (!have_high) c.high = c.value;
    if (!(c.low <= c.value && c.value <= c.high))
      return bad(key, "expected low <= " + std::string(unit_key) + " <= high, got " + json(c.low).dump() + ", " +
                          json(c.value).dump() + ", " + json(c.high).dump());
    if (c.source.empty()) c.source = "no source given in " + origin;
    if (!have_low && !have_high && c.uncertainty.empty()) c.uncertainty = "no range given";
    c.origin = origin;
    *out = c;
    return TSR_SUCCESS;
  }

  tsr_status profile(const json& doc, const std::string& origin, Profile* p) const {
    if (!doc.is_object())
      return fail(TSR_ERR_INVALID_ARG, "energy profile %s: expected a JSON object at the top level, got %s",
                  origin_.c_str(), doc.type_name());
    bool named = false;
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      if (k == "format") {
        std::string f;
        TSR_TRY(text(v, k, &f));
        if (f != "tessera-energy-profile/1") return bad(k, "expected \"tessera-energy-profile/1\", got \"" + f + "\"");
      } else if (k == "name") {
        TSR_TRY(text(v, k, &p->name));
        if (p->name.empty()) return bad(k, "expected a non-empty name");
        named = true;
      } else if (k == "description") {
        TSR_TRY(text(v, k, &p->description));
      } else if (k == "units") {
        if (!v.is_object() && !v.is_string()) return bad(k, std::string("expected an object or a string, got ") + v.type_name());
      } else if (k == "pue") {
        double pue = 0;
        std::string src = "set in " + origin;
        if (v.is_object()) {
          bool have = false;
          for (auto jt = v.begin(); jt != v.end(); ++jt) {
            if (jt.key() == "value") {
              TSR_TRY(number(jt.value(), "pue.value", &pue));
              have = true;
            } else if (jt.key() == "source") {
              TSR_TRY(text(jt.value(), "pue.source", &src));
            } else {
              return bad("pue." + jt.key(), "unknown key; expected value or source");
            }
          }
          if (!have) return bad(k, "missing 'value'");
        } else {
          TSR_TRY(number(v, k, &pue));
        }
        if (pue < 1.0) return bad(k, "a power usage effectiveness is >= 1, got " + json(pue).dump());
        p->pue = pue;
        p->pue_source = src;
      } else if (k == "levels") {
        if (!v.is_object()) return bad(k, std::string("expected an object, got ") + v.type_name());
        for (auto jt = v.begin(); jt != v.end(); ++jt) {
          int lv = -1;
          for (int l = 0; l < TSR_LEVELS; ++l)
            if (jt.key() == kKeys[l]) lv = l;
          if (lv < 0)
            return bad("levels." + jt.key(),
                       "unknown level; expected self, intra_node, inter_node, host_device, device_device, disk_read "
                       "or disk_write");
          TSR_TRY(coeff(jt.value(), "levels." + jt.key(), "pj_per_byte", origin, &p->level[lv]));
        }
      } else if (k == "flop") {
        if (v.is_null()) {  // null: no per-flop term
          p->has_flop = false;
          p->flop = Coeff();
        } else {
          TSR_TRY(coeff(v, k, "pj_per_flop", origin, &p->flop));
          p->has_flop = true;
        }
      } else if (k == "static") {
        TSR_TRY(coeff(v, k, "watts_per_rank", origin, &p->static_power));
      } else {
        return bad(k, "unknown key; expected format, name, description, units, pue, levels, flop or static");
      }
    }
    if (!named) p->name = origin;
    return TSR_SUCCESS;
  }

 private:
  std::string origin_;
};

uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

const char* level_key(tsr_level level) {
  return static_cast<unsigned>(level) < TSR_LEVELS ? kKeys[level] : "unknown";
}
const char* level_label(tsr_level level) {
  return static_cast<unsigned>(level) < TSR_LEVELS ? kLabels[level] : "unknown";
}

uint64_t Profile::digest() const {
  uint64_t h = 1469598103934665603ull;
  h = fnv(h, name.data(), name.size());
  h = fnv(h, &pue, sizeof pue);
  for (const Coeff& c : level) {
    h = fnv(h, &c.value, sizeof c.value);
    h = fnv(h, &c.low, sizeof c.low);
    h = fnv(h, &c.high, sizeof c.high);
  }
  const double f[7] = {has_flop ? 1.0 : 0.0, flop.value, flop.low, flop.high, static_power.value, static_power.low,
                       static_power.high};
  return fnv(h, f, sizeof f);
}

tsr_status parse_profile(const std::string& text, const std::string& origin, const Profile& base, Profile* out) {
  DupFinder dups;
  json doc;
  try {
    doc = json::parse(text, std::ref(dups), /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string what = e.what();
    const size_t at = what.find("at line ");
    what = at == std::string::npos ? what : what.substr(at);
    const std::string key = dups.path();
    return fail(TSR_ERR_INVALID_ARG, "energy profile %s: JSON syntax error %s%s%s", origin.c_str(), what.c_str(),
                key.empty() ? "" : " (after key ", key.empty() ? "" : ("'" + key + "')").c_str());
  } catch (const std::exception& e) {
    // e.g. "[json.exception.out_of_range.406] number overflow parsing '1e999'": name the key, drop the library's tag.
    std::string what = e.what();
    const size_t tag = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && tag != std::string::npos) what = what.substr(tag + 2);
    if (what.rfind("number overflow parsing ", 0) == 0)
      what = "the number " + what.substr(24) + " is out of range (not a finite double)";
    const std::string key = dups.path();
    return fail(TSR_ERR_INVALID_ARG, "energy profile %s: %s%s", origin.c_str(),
                key.empty() ? "" : ("key '" + key + "': ").c_str(), what.c_str());
  }
  if (!dups.duplicate.empty())
    return fail(TSR_ERR_INVALID_ARG, "energy profile %s: key '%s' appears twice", origin.c_str(),
                dups.duplicate.c_str());
  Profile p = base;
  p.file.clear();
  try {
    TSR_TRY(Parser(origin).profile(doc, origin, &p));
  } catch (const std::exception& e) {
    return fail(TSR_ERR_INVALID_ARG, "energy profile %s: %s", origin.c_str(), e.what());
  }
  *out = std::move(p);
  return TSR_SUCCESS;
}

const Profile& default_profile() {
  static const Profile p = [] {
    Profile base;
    Profile q;
    // The shipped default parses: test_energy_profile checks it, so a failure
    // here is a build defect; keep an empty profile named so rather than abort.
    if (parse_profile(default_profile_json(), "default-2025", base, &q) != TSR_SUCCESS) q.name = "invalid-default";
    q.file.clear();
    return q;
  }();
  return p;
}

tsr_status load_profile(const std::string& path_arg, Profile* out) {
  std::string path = path_arg;
  if (path.empty()) {
    const char* env = std::getenv("TSR_ENERGY_PROFILE");
    if (env != nullptr) path = env;
  }
  if (path.empty()) {
    *out = default_profile();
    return TSR_SUCCESS;
  }
  struct stat sb;
  if (::stat(path.c_str(), &sb) == 0 && !S_ISREG(sb.st_mode))
    return fail(TSR_ERR_IO, "cannot read energy profile '%s': not a regular file%s", path.c_str(),
                S_ISDIR(sb.st_mode) ? " (a directory)" : "");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return fail(TSR_ERR_IO, "cannot read energy profile '%s': %s%s", path.c_str(), std::strerror(err),
                path_arg.empty() ? " (named by TSR_ENERGY_PROFILE)" : "");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return fail(TSR_ERR_IO, "cannot read energy profile '%s'", path.c_str());
  Profile p;
  TSR_TRY(parse_profile(ss.str(), path, default_profile(), &p));
  p.file = path;
  *out = std::move(p);
  return TSR_SUCCESS;
}

}  // namespace energy
}  // namespace tsr

// The public energy API (include/tessera/energy.h): profiles, meters on a
// context, flops, extra region counters, energy reports gathered through the
// transport (as control traffic, after the snapshot).
#include <algorithm>
#include <cstring>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "context.hpp"
#include "device.hpp"
#include "core.hpp"
#include "energy/meters.hpp"
#include "energy/profile.hpp"
#include "energy/report_core.hpp"

struct tsr_energy_profile_s {
  static constexpr unsigned kMagic = 0x9e0f11e5u;
  unsigned magic = kMagic;
  tsr::energy::Profile p;
};

struct tsr_energy_report_s {
  static constexpr unsigned kMagic = 0x4e9e4e9eu;
  unsigned magic = kMagic;
  tsr_context ctx = nullptr;  // its live_reports counts this report
  tsr::energy::ReportData d;
  std::string source;
};

namespace tsr {
namespace energy {

const Profile* profile_of(tsr_energy_profile h) {
  return h != nullptr && h->magic == tsr_energy_profile_s::kMagic ? &h->p : nullptr;
}

struct ContextEnergy {
  bool started = false;
  bool leader = false;  // lowest context rank of a real shared-memory node
  bool leader_known = false;
  Meters meters;
  std::string status;  // what this rank's meters read, or why none
};

void destroy(ContextEnergy* e) { delete e; }

namespace {

constexpr size_t kWords = sizeof(tsr_counters) / sizeof(uint64_t);
constexpr size_t kXWords = sizeof(tsr_region_extra) / sizeof(uint64_t);
static_assert(sizeof(tsr_region_extra) % sizeof(uint64_t) == 0, "tsr_region_extra must be a uint64_t array");

tsr_status check_profile(tsr_energy_profile p) {
  if (p == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'profile' is NULL");
  if (p->magic != tsr_energy_profile_s::kMagic)
    return fail(TSR_ERR_INVALID_ARG, "argument 'profile' is not a live energy profile");
  return TSR_SUCCESS;
}

tsr_status check_report(tsr_energy_report r) {
  if (r == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'report' is NULL");
  if (r->magic != tsr_energy_report_s::kMagic)
    return fail(TSR_ERR_INVALID_ARG, "argument 'report' is not a live energy report");
  return TSR_SUCCESS;
}

tsr_status check_region(tsr_energy_report r, int region) {
  if (region < 0 || region >= static_cast<int>(r->d.paths.size()))
    return fail(TSR_ERR_INVALID_ARG, "argument 'region' = %d; expected 0 <= region < %zu", region,
                r->d.paths.size());
  return TSR_SUCCESS;
}

ContextEnergy& energy_of(tsr_context ctx) {
  if (!ctx->energy) ctx->energy.reset(new ContextEnergy());
  return *ctx->energy;
}

// Every rank's value of x must be the same: one MAX all-reduce of {x, -x}
// per value (charged as control).
tsr_status same_everywhere(const Comm& w, const std::vector<int64_t>& xs, bool* same) {
  std::vector<int64_t> in, out(2 * xs.size());
  for (int64_t x : xs) {
    in.push_back(x);
    in.push_back(-x);
  }
  TSR_TRY(allreduce(w, in.data(), out.data(), in.size(), TSR_INT64, TSR_MAX, nullptr, Traffic::control));
  *same = true;
  for (size_t i = 0; i < xs.size(); ++i)
    if (out[2 * i] != -out[2 * i + 1]) *same = false;
  return TSR_SUCCESS;
}


// Lists of lines inside one of the 0-separated fields above.
std::string join_with(const std::vector<std::string>& v, char sep) {
  std::string s;
  for (const std::string& x : v) s += x + sep;
  return s;
}

std::vector<std::string> split_with(const std::string& s, char sep) {
  std::vector<std::string> v;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == sep) {
      v.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return v;
}

// Gathers one string per rank to root (others get an empty vector).
tsr_status gather_strings(const Comm& w, int root, const std::string& mine, std::vector<std::string>* all) {
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lens(static_cast<size_t>(w.size()));
  TSR_TRY(gather(w, &len, 1, lens.data(), TSR_INT64, root, nullptr, Traffic::control));
  all->clear();
  if (w.rank() != root) {
    if (len > 0) TSR_TRY(send(w, mine.data(), mine.size(), TSR_BYTE, root, 7102, nullptr, Traffic::control));
    return TSR_SUCCESS;
  }
  for (int r = 0; r < w.size(); ++r) {
    std::string s;
    if (r == root) {
      s = mine;
    } else if (lens[static_cast<size_t>(r)] > 0) {
      s.resize(static_cast<size_t>(lens[static_cast<size_t>(r)]));
      TSR_TRY(recv(w, &s[0], s.size(), TSR_BYTE, r, 7102, nullptr, Traffic::control));
    }
    all->push_back(std::move(s));
  }
  return TSR_SUCCESS;
}

// Broadcasts a string from root.
tsr_status bcast_string(const Comm& w, int root, std::string* s) {
  int64_t len = static_cast<int64_t>(s->size());
  TSR_TRY(bcast(w, &len, 1, TSR_INT64, root, nullptr, Traffic::control));
  s->resize(static_cast<size_t>(len));
  if (len > 0) TSR_TRY(bcast(w, &(*s)[0], s->size(), TSR_BYTE, root, nullptr, Traffic::control));
  return TSR_SUCCESS;
}

// ------------------------------------------------------------ start / stop
tsr_status start(tsr_context ctx, const tsr_energy_config* cfg) {
  TSR_TRY(check_context(ctx));
  tsr_status local = TSR_SUCCESS;
  int meters = TSR_METERS_AUTO, matrix = 0;
  std::string root = "/sys/class/powercap", lib = "libnvidia-ml.so.1";
  if (cfg != nullptr) {
    if (cfg->magic != TSR_ENERGY_CONFIG_MAGIC || cfg->size < offsetof(tsr_energy_config, meters) + sizeof(int)) {
      local = fail(TSR_ERR_INVALID_ARG, "argument 'config' was not initialised with TSR_ENERGY_CONFIG_INIT");
    } else {
      meters = cfg->meters;
      if (cfg->size >= offsetof(tsr_energy_config, powercap_root) + sizeof(char*) && cfg->powercap_root != nullptr)
        root = cfg->powercap_root;
      if (cfg->size >= offsetof(tsr_energy_config, nvml_library) + sizeof(char*) && cfg->nvml_library != nullptr)
        lib = cfg->nvml_library;
      if (cfg->size >= offsetof(tsr_energy_config, comm_matrix) + sizeof(int)) matrix = cfg->comm_matrix != 0;
      if (meters & ~TSR_METERS_AUTO)
        local = fail(TSR_ERR_INVALID_ARG, "argument 'config->meters' = %d; expected a mask of TSR_METER_RAPL (1) and "
                     "TSR_METER_NVML (2)", meters);
      else if (root.empty())
        local = fail(TSR_ERR_INVALID_ARG, "argument 'config->powercap_root' is empty");
      else if (lib.empty())
        local = fail(TSR_ERR_INVALID_ARG, "argument 'config->nvml_library' is empty");
    }
  }
  if (local == TSR_SUCCESS && ctx->ledger.open_regions() > 0)
    local = fail(TSR_ERR_STATE, "%zu region(s) are open: tsr_energy_start needs every region but \"total\" closed, so "
                 "that meters see whole regions", ctx->ledger.open_regions());
  TSR_TRY(agree(*ctx->world, local,
                std::vector<Same>{{"config->meters", meters},
                                  {"config->comm_matrix", matrix ? 1 : 0},
                                  {"config->powercap_root", hash_bytes(root.data(), root.size()), true},
                                  {"config->nvml_library", hash_bytes(lib.data(), lib.size()), true}}));

  ContextEnergy& e = energy_of(ctx);
  if (!e.leader_known) {
    // The node's lowest rank reads the meters: real shared-memory nodes,
    // even when the context simulates nodes. (Communicator setup, uncounted
    // like tsr_context_create's.)
    MPI_Comm node = MPI_COMM_NULL;
    TSR_MPI_TRY(MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node));
    int nr = 0;
    const int rc = MPI_Comm_rank(node, &nr);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_rank (node)");
    e.leader = nr == 0;
    e.leader_known = true;
  }
  ctx->ledger.set_meter(nullptr);
  e.meters.close();
  if (e.leader && meters != TSR_METERS_NONE) {
    e.meters.open(meters, root, lib);
    e.status = e.meters.status();
    if (e.meters.domains() != 0) {
      Meters* m = &e.meters;
      ctx->ledger.set_meter([m, ctx](uint64_t* uj) {
        // GPU energy (NVML) of a device-bound context: the work queued on
        // its stream belongs to the region being closed, so wait for it
        // before reading (docs/GPU.md; only with NVML read, at region
        // boundaries).
        if ((m->domains() & (1 << TSR_DOMAIN_GPU)) != 0 && ctx->cuda_device >= 0) device::synchronize(ctx);
        m->read(uj);
        return m->domains();
      });
    }
  } else if (e.leader) {
    e.status = "meters not requested (TSR_METERS_NONE)";
  } else {
    e.status = "not a meter reader: the lowest rank of this node reads the node's meters";
  }
  e.started = true;
  ctx->ledger.set_matrix(matrix ? ctx->size : 0);
  return TSR_SUCCESS;
}

tsr_status stop(tsr_context ctx) {
  TSR_TRY(check_context(ctx));
  tsr_status local = TSR_SUCCESS;
  if (ctx->ledger.open_regions() > 0)
    local = fail(TSR_ERR_STATE, "%zu region(s) are open: end them before tsr_energy_stop", ctx->ledger.open_regions());
  TSR_TRY(agree(*ctx->world, local));
  ctx->ledger.set_meter(nullptr);
  ctx->ledger.set_matrix(0);
  if (ctx->energy) {
    ctx->energy->meters.close();
    ctx->energy->started = false;
    ctx->energy->status = "meters stopped (tsr_energy_stop)";
  }
  return TSR_SUCCESS;
}

// ------------------------------------------------------------------ report
tsr_status create_report(tsr_context ctx, tsr_energy_profile profile, int root, tsr_energy_report* out) {
  TSR_TRY(check_context(ctx));
  // Snapshot first, before any agreement: the report's own traffic is not in it.
  const std::map<std::string, tsr_counters> snap = ctx->ledger.snapshot();
  const std::map<std::string, RegionExtra> snapx = ctx->ledger.snapshot_extra();
  tsr_status local = TSR_SUCCESS;
  Profile prof;
  if (out == nullptr) local = fail(TSR_ERR_INVALID_ARG, "argument 'report' is NULL");
  else if (root < 0 || root >= ctx->size)
    local = fail(TSR_ERR_INVALID_ARG, "argument 'root' = %d; expected 0 <= root < %d", root, ctx->size);
  else if (profile != nullptr) local = check_profile(profile);
  if (local == TSR_SUCCESS) {
    if (profile != nullptr) prof = profile->p;
    else local = load_profile(std::string(), &prof);
  }
  const Comm& w = *ctx->world;
  TSR_TRY(agree(w, local));
  bool same = true;
  const int64_t pd = static_cast<int64_t>(prof.digest() & 0x7fffffffffffffffull);
  const int matrix_mine = ctx->ledger.matrix_on() ? 1 : 0;
  TSR_TRY(same_everywhere(w, {root, pd}, &same));
  if (!same)
    return fail(TSR_ERR_INVALID_ARG, "argument 'root' (%d here) or the energy profile (\"%s\" here) differs across "
                "ranks", root, prof.name.c_str());
  *out = nullptr;

  std::vector<std::string> names;
  for (const auto& kv : snap) names.push_back(kv.first);

  // Union of region paths.
  std::vector<std::string> all_names;
  TSR_TRY(gather_strings(w, root, join(names), &all_names));
  std::string merged;
  if (ctx->rank == root) {
    std::set<std::string> u;
    for (const std::string& s : all_names)
      for (std::string& p : split(s.data(), s.size())) u.insert(std::move(p));
    std::vector<std::string> v(u.begin(), u.end());
    v.erase(std::remove(v.begin(), v.end(), std::string("total")), v.end());
    v.insert(v.begin(), "total");
    merged = join(v);
  }
  TSR_TRY(bcast_string(w, root, &merged));
  int matrix_any = 0;
  TSR_TRY(allreduce(w, &matrix_mine, &matrix_any, 1, TSR_INT32, TSR_MAX, nullptr, Traffic::control));

  std::unique_ptr<tsr_energy_report_s> r(new (std::nothrow) tsr_energy_report_s());
  if (!r) return fail(TSR_ERR_NO_MEMORY, "allocating an energy report");
  ReportData& d = r->d;
  d.producer = std::string("libtessera ") + TSR_VERSION_STRING;
  {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (MPI_Get_library_version(v, &n) == MPI_SUCCESS) {
      std::string s(v, static_cast<size_t>(n));
      d.mpi = s.substr(0, s.find_first_of("\n,"));
    }
  }
  d.nranks = ctx->size;
  d.nnodes = ctx->nnodes;
  d.root = root;
  d.my_rank = ctx->rank;
  d.node_of = ctx->node_of;
  d.profile = prof;
  d.paths = split(merged.data(), merged.size());
  d.matrix = matrix_any != 0;
  d.models = transport_models();
  const size_t nreg = d.paths.size();
  const size_t rowwords = d.matrix ? 2 * static_cast<size_t>(ctx->size) : 0;
  const size_t per = kWords + kXWords + rowwords;

  // This rank's data, in the merged order (absent regions: zeros).
  std::vector<uint64_t> mine(nreg * per, 0);
  for (size_t g = 0; g < nreg; ++g) {
    uint64_t* at = mine.data() + g * per;
    auto c = snap.find(d.paths[g]);
    if (c != snap.end()) std::memcpy(at, &c->second, sizeof(tsr_counters));
    auto x = snapx.find(d.paths[g]);
    if (x != snapx.end()) {
      std::memcpy(at + kWords, &x->second.x, sizeof(tsr_region_extra));
      for (size_t i = 0; i < rowwords && i < x->second.row.size(); ++i) at[kWords + kXWords + i] = x->second.row[i];
    }
  }
  std::vector<uint64_t> all;
  if (ctx->rank == root) all.assign(mine.size() * static_cast<size_t>(ctx->size), 0);
  TSR_TRY(gather(w, mine.data(), mine.size(), all.data(), TSR_INT64, root, nullptr, Traffic::control));

  // Meter status of every node reader (and its warnings).
  ContextEnergy* e = ctx->energy.get();
  std::string status;
  if (e != nullptr && e->leader && e->started) {
    status = "rank " + std::to_string(ctx->rank) + ": " + e->status;
    const std::string warn = e->meters.warnings();
    if (!warn.empty()) status += '\0' + warn;
  }
  std::vector<std::string> statuses;
  TSR_TRY(gather_strings(w, root, status, &statuses));

  auto unpack = [&](const uint64_t* at, tsr_counters* c, RegionExtra* x) {
    std::memcpy(c, at, sizeof(tsr_counters));
    std::memcpy(&x->x, at + kWords, sizeof(tsr_region_extra));
    x->row.assign(at + kWords + kXWords, at + per);
  };
  std::string shared;  // root -> all: measured flag, meter lines, notes, stats
  if (ctx->rank == root) {
    d.all_ranks = true;
    d.counters.assign(static_cast<size_t>(ctx->size), std::vector<tsr_counters>(nreg));
    d.extras.assign(static_cast<size_t>(ctx->size), std::vector<RegionExtra>(nreg));
    for (int k = 0; k < ctx->size; ++k)
      for (size_t g = 0; g < nreg; ++g)
        unpack(all.data() + (static_cast<size_t>(k) * nreg + g) * per, &d.counters[static_cast<size_t>(k)][g],
               &d.extras[static_cast<size_t>(k)][g]);
    for (const std::string& s : statuses) {
      if (s.empty()) continue;
      const std::vector<std::string> parts = split((s + '\0').data(), s.size() + 1);
      d.meter_status.push_back(parts[0]);
      for (size_t i = 1; i < parts.size(); ++i) d.notes.push_back(parts[i]);
    }
    d.compute_stats();
    d.measured = !d.stats.empty() && d.stats[0].est[TSR_STAT_SUM].measured_ranks > 0;
    for (size_t g = 0; g < nreg && !d.measured; ++g) d.measured = d.stats[g].est[TSR_STAT_SUM].measured_ranks > 0;
    std::vector<std::string> pack = {d.measured ? "1" : "0", join_with(d.meter_status, '\n'),
                                     join_with(d.notes, '\n')};
    shared = join(pack);
  }
  TSR_TRY(bcast_string(w, root, &shared));
  std::vector<uint64_t> stats_words;
  const size_t swords = sizeof(RegionStats) / sizeof(uint64_t);
  static_assert(sizeof(RegionStats) % sizeof(uint64_t) == 0, "RegionStats is sent as 64-bit words");
  if (ctx->rank == root) {
    stats_words.resize(nreg * swords);
    std::memcpy(stats_words.data(), d.stats.data(), nreg * sizeof(RegionStats));
  } else {
    stats_words.assign(nreg * swords, 0);
  }
  TSR_TRY(bcast(w, stats_words.data(), stats_words.size(), TSR_INT64, root, nullptr, Traffic::control));
  if (ctx->rank != root) {
    d.all_ranks = false;
    d.counters.assign(1, std::vector<tsr_counters>(nreg));
    d.extras.assign(1, std::vector<RegionExtra>(nreg));
    for (size_t g = 0; g < nreg; ++g) unpack(mine.data() + g * per, &d.counters[0][g], &d.extras[0][g]);
    d.stats.resize(nreg);
    std::memcpy(d.stats.data(), stats_words.data(), nreg * sizeof(RegionStats));
    const std::vector<std::string> parts = split(shared.data(), shared.size());
    d.measured = !parts.empty() && parts[0] == "1";
    if (parts.size() > 1) d.meter_status = split_with(parts[1], '\n');
    if (parts.size() > 2) d.notes = split_with(parts[2], '\n');
  }
  r->source = d.source_line();
  r->ctx = ctx;
  ctx->live_reports += 1;
  *out = r.release();
  return TSR_SUCCESS;
}

tsr_status format(const tsr_energy_report_s& r, tsr_output_format fmt, std::string* out) {
  switch (fmt) {
    case TSR_OUTPUT_TABLE: *out = format_table(r.d); return TSR_SUCCESS;
    case TSR_OUTPUT_JSON: *out = format_json(r.d); return TSR_SUCCESS;
    case TSR_OUTPUT_CSV: *out = format_csv(r.d); return TSR_SUCCESS;
    case TSR_OUTPUT_MATRIX_CSV:
      if (!r.d.matrix)
        return fail(TSR_ERR_STATE, "no communication matrix was recorded (tsr_energy_config.comm_matrix = 0)");
      if (!r.d.all_ranks)
        return fail(TSR_ERR_STATE, "the communication matrix is held by the report's root (rank %d) only", r.d.root);
      *out = format_matrix_csv(r.d);
      return TSR_SUCCESS;
  }
  return fail(TSR_ERR_INVALID_ARG, "argument 'format' = %d is not a tsr_output_format", static_cast<int>(fmt));
}

}  // namespace
}  // namespace energy
}  // namespace tsr

using tsr::fail;
using tsr::finish;

namespace {
tsr_context live(tsr_context ctx) { return ctx != nullptr && ctx->magic == tsr_context_s::kMagic ? ctx : nullptr; }
}  // namespace

extern "C" {

// ----------------------------------------------------------------- profiles
tsr_status tsr_energy_profile_load(const char* path, tsr_energy_profile* profile) {
  tsr_status st = profile == nullptr ? fail(TSR_ERR_INVALID_ARG, "argument 'profile' is NULL") : TSR_SUCCESS;
  if (st == TSR_SUCCESS) {
    *profile = nullptr;
    std::unique_ptr<tsr_energy_profile_s> p(new (std::nothrow) tsr_energy_profile_s());
    if (!p) st = fail(TSR_ERR_NO_MEMORY, "allocating an energy profile");
    if (st == TSR_SUCCESS) st = tsr::energy::load_profile(path ? path : "", &p->p);
    if (st == TSR_SUCCESS) *profile = p.release();
  }
  return finish(nullptr, "tsr_energy_profile_load", st);
}

tsr_status tsr_energy_profile_parse(const char* json, tsr_energy_profile* profile) {
  tsr_status st = profile == nullptr ? fail(TSR_ERR_INVALID_ARG, "argument 'profile' is NULL") : TSR_SUCCESS;
  if (st == TSR_SUCCESS && json == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'json' is NULL");
  if (profile != nullptr) *profile = nullptr;
  if (st == TSR_SUCCESS) {
    std::unique_ptr<tsr_energy_profile_s> p(new (std::nothrow) tsr_energy_profile_s());
    if (!p) st = fail(TSR_ERR_NO_MEMORY, "allocating an energy profile");
    if (st == TSR_SUCCESS)
      st = tsr::energy::parse_profile(json, "<string>", tsr::energy::default_profile(), &p->p);
    if (st == TSR_SUCCESS) *profile = p.release();
  }
  return finish(nullptr, "tsr_energy_profile_parse", st);
}

tsr_status tsr_energy_profile_destroy(tsr_energy_profile* profile) {
  tsr_status st = profile == nullptr ? fail(TSR_ERR_INVALID_ARG, "argument 'profile' is NULL") : TSR_SUCCESS;
  if (st == TSR_SUCCESS && *profile != nullptr) st = tsr::energy::check_profile(*profile);
  if (st == TSR_SUCCESS && *profile != nullptr) {
    (*profile)->magic = 0;
    delete *profile;
    *profile = nullptr;
  }
  return finish(nullptr, "tsr_energy_profile_destroy", st);
}

tsr_status tsr_energy_profile_name(tsr_energy_profile profile, const char** name, const char** file) {
  tsr_status st = tsr::energy::check_profile(profile);
  if (st == TSR_SUCCESS) {
    if (name) *name = profile->p.name.c_str();
    if (file) *file = profile->p.file.c_str();
  }
  return finish(nullptr, "tsr_energy_profile_name", st);
}

tsr_status tsr_energy_profile_level(tsr_energy_profile profile, tsr_level level, tsr_energy_coeff* out) {
  tsr_status st = tsr::energy::check_profile(profile);
  if (st == TSR_SUCCESS && (static_cast<unsigned>(level) >= TSR_LEVELS))
    st = fail(TSR_ERR_INVALID_ARG, "argument 'level' = %d is not a tsr_level", static_cast<int>(level));
  if (st == TSR_SUCCESS && out == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL");
  if (st == TSR_SUCCESS) {
    const tsr::energy::Coeff& c = profile->p.level[level];
    *out = tsr_energy_coeff{c.value, c.low, c.high, c.source.c_str(), c.origin.c_str()};
  }
  return finish(nullptr, "tsr_energy_profile_level", st);
}

tsr_status tsr_energy_profile_flop(tsr_energy_profile profile, tsr_energy_coeff* out, int* present) {
  tsr_status st = tsr::energy::check_profile(profile);
  if (st == TSR_SUCCESS && out == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL");
  if (st == TSR_SUCCESS && present == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'present' is NULL");
  if (st == TSR_SUCCESS) {
    const tsr::energy::Coeff& c = profile->p.flop;
    *present = profile->p.has_flop ? 1 : 0;
    *out = profile->p.has_flop ? tsr_energy_coeff{c.value, c.low, c.high, c.source.c_str(), c.origin.c_str()}
                               : tsr_energy_coeff{0, 0, 0, "", ""};
  }
  return finish(nullptr, "tsr_energy_profile_flop", st);
}

tsr_status tsr_energy_profile_static(tsr_energy_profile profile, tsr_energy_coeff* out) {
  tsr_status st = tsr::energy::check_profile(profile);
  if (st == TSR_SUCCESS && out == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL");
  if (st == TSR_SUCCESS) {
    const tsr::energy::Coeff& c = profile->p.static_power;
    *out = tsr_energy_coeff{c.value, c.low, c.high, c.source.c_str(), c.origin.c_str()};
  }
  return finish(nullptr, "tsr_energy_profile_static", st);
}

tsr_status tsr_energy_profile_pue(tsr_energy_profile profile, double* pue) {
  tsr_status st = tsr::energy::check_profile(profile);
  if (st == TSR_SUCCESS && pue == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'pue' is NULL");
  if (st == TSR_SUCCESS) *pue = profile->p.pue;
  return finish(nullptr, "tsr_energy_profile_pue", st);
}

// ------------------------------------------------------------- measuring
tsr_status tsr_energy_start(tsr_context ctx, const tsr_energy_config* config) {
  return finish(live(ctx), "tsr_energy_start", tsr::energy::start(ctx, config));
}

tsr_status tsr_energy_stop(tsr_context ctx) { return finish(live(ctx), "tsr_energy_stop", tsr::energy::stop(ctx)); }

tsr_status tsr_energy_sample(tsr_context ctx) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS) ctx->ledger.sample_meter();
  return finish(live(ctx), "tsr_energy_sample", st);
}

tsr_status tsr_energy_meter_status(tsr_context ctx, int* domains, const char** text) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS && domains == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'domains' is NULL");
  if (st == TSR_SUCCESS && text == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'text' is NULL");
  if (st == TSR_SUCCESS) {
    static const char* const kNotStarted = "meters not started (tsr_energy_start)";
    const tsr::energy::ContextEnergy* e = ctx->energy.get();
    *domains = e != nullptr && e->started ? e->meters.domains() : 0;
    *text = e != nullptr && !e->status.empty() ? e->status.c_str() : kNotStarted;
  }
  return finish(live(ctx), "tsr_energy_meter_status", st);
}

tsr_status tsr_flops_add(tsr_context ctx, uint64_t flops) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS) ctx->ledger.flops(flops);
  return finish(live(ctx), "tsr_flops_add", st);
}

tsr_status tsr_region_extra_get(tsr_context ctx, const char* path, tsr_region_extra* out) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS && path == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'path' is NULL");
  if (st == TSR_SUCCESS && out == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL");
  if (st == TSR_SUCCESS) {
    tsr::RegionExtra x;
    if (!ctx->ledger.get_extra(path, &x))
      st = fail(TSR_ERR_INVALID_ARG, "argument 'path' = \"%s\" names no region of this rank", path);
    else
      *out = x.x;
  }
  return finish(live(ctx), "tsr_region_extra_get", st);
}

// ---------------------------------------------------------------- reports
tsr_status tsr_energy_report_create(tsr_context ctx, tsr_energy_profile profile, int root, tsr_energy_report* report) {
  return finish(live(ctx), "tsr_energy_report_create", tsr::energy::create_report(ctx, profile, root, report));
}

tsr_status tsr_energy_report_destroy(tsr_energy_report* report) {
  tsr_status st = report == nullptr ? fail(TSR_ERR_INVALID_ARG, "argument 'report' is NULL") : TSR_SUCCESS;
  if (st == TSR_SUCCESS && *report != nullptr) st = tsr::energy::check_report(*report);
  if (st == TSR_SUCCESS && *report != nullptr) {
    (*report)->magic = 0;
    (*report)->ctx->live_reports -= 1;
    delete *report;
    *report = nullptr;
  }
  return finish(nullptr, "tsr_energy_report_destroy", st);
}

tsr_status tsr_energy_report_region_count(tsr_energy_report report, int* count) {
  tsr_status st = tsr::energy::check_report(report);
  if (st == TSR_SUCCESS && count == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'count' is NULL");
  if (st == TSR_SUCCESS) *count = static_cast<int>(report->d.paths.size());
  return finish(nullptr, "tsr_energy_report_region_count", st);
}

tsr_status tsr_energy_report_region_path(tsr_energy_report report, int region, const char** path) {
  tsr_status st = tsr::energy::check_report(report);
  if (st == TSR_SUCCESS) st = tsr::energy::check_region(report, region);
  if (st == TSR_SUCCESS && path == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'path' is NULL");
  if (st == TSR_SUCCESS) *path = report->d.paths[static_cast<size_t>(region)].c_str();
  return finish(nullptr, "tsr_energy_report_region_path", st);
}

tsr_status tsr_energy_report_find(tsr_energy_report report, const char* path, int* region) {
  tsr_status st = tsr::energy::check_report(report);
  if (st == TSR_SUCCESS && path == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'path' is NULL");
  if (st == TSR_SUCCESS && region == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'region' is NULL");
  if (st == TSR_SUCCESS) {
    const auto& p = report->d.paths;
    const auto it = std::find(p.begin(), p.end(), std::string(path));
    if (it == p.end()) st = fail(TSR_ERR_INVALID_ARG, "argument 'path' = \"%s\" names no region of the report", path);
    else *region = static_cast<int>(it - p.begin());
  }
  return finish(nullptr, "tsr_energy_report_find", st);
}

tsr_status tsr_energy_report_rank(tsr_energy_report report, int region, int rank, tsr_energy_estimate* out) {
  tsr_status st = tsr::energy::check_report(report);
  if (st == TSR_SUCCESS) st = tsr::energy::check_region(report, region);
  if (st == TSR_SUCCESS && out == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL");
  if (st == TSR_SUCCESS && (rank < 0 || rank >= report->d.nranks))
    st = fail(TSR_ERR_INVALID_ARG, "argument 'rank' = %d; expected 0 <= rank < %d", rank, report->d.nranks);
  if (st == TSR_SUCCESS && rank != report->d.my_rank && !report->d.all_ranks)
    st = fail(TSR_ERR_INVALID_ARG, "argument 'rank' = %d: only the report's root (%d) holds other ranks' figures", rank,
              report->d.root);
  if (st == TSR_SUCCESS) *out = report->d.rank_estimate(region, report->d.all_ranks ? rank : 0);
  return finish(nullptr, "tsr_energy_report_rank", st);
}

tsr_status tsr_energy_report_stat(tsr_energy_report report, int region, tsr_stat stat, tsr_energy_estimate* out) {
  tsr_status st = tsr::energy::check_report(report);
  if (st == TSR_SUCCESS) st = tsr::energy::check_region(report, region);
  if (st == TSR_SUCCESS && static_cast<unsigned>(stat) > TSR_STAT_SUM)
    st = fail(TSR_ERR_INVALID_ARG, "argument 'stat' = %d is not a tsr_stat", static_cast<int>(stat));
  if (st == TSR_SUCCESS && out == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL");
  if (st == TSR_SUCCESS) *out = report->d.stats[static_cast<size_t>(region)].est[stat];
  return finish(nullptr, "tsr_energy_report_stat", st);
}

tsr_status tsr_energy_report_source(tsr_energy_report report, int* measured, const char** text) {
  tsr_status st = tsr::energy::check_report(report);
  if (st == TSR_SUCCESS) {
    if (measured) *measured = report->d.measured ? 1 : 0;
    if (text) *text = report->source.c_str();
  }
  return finish(nullptr, "tsr_energy_report_source", st);
}

tsr_status tsr_energy_report_matrix(tsr_energy_report report, int region, uint64_t* bytes, uint64_t* messages,
                                    size_t len) {
  tsr_status st = tsr::energy::check_report(report);
  if (st == TSR_SUCCESS) st = tsr::energy::check_region(report, region);
  const size_t p = st == TSR_SUCCESS ? static_cast<size_t>(report->d.nranks) : 0;
  if (st == TSR_SUCCESS && !report->d.matrix)
    st = fail(TSR_ERR_STATE, "no communication matrix was recorded (tsr_energy_config.comm_matrix = 0)");
  if (st == TSR_SUCCESS && !report->d.all_ranks)
    st = fail(TSR_ERR_STATE, "the communication matrix is held by the report's root (rank %d) only", report->d.root);
  if (st == TSR_SUCCESS && len != p * p)
    st = fail(TSR_ERR_INVALID_ARG, "argument 'len' = %zu; expected size * size = %zu", len, p * p);
  if (st == TSR_SUCCESS) {
    for (size_t k = 0; k < p; ++k) {
      const std::vector<uint64_t>& row = report->d.extras[k][static_cast<size_t>(region)].row;
      for (size_t q = 0; q < p; ++q) {
        if (messages) messages[k * p + q] = 2 * q < row.size() ? row[2 * q] : 0;
        if (bytes) bytes[k * p + q] = 2 * q + 1 < row.size() ? row[2 * q + 1] : 0;
      }
    }
  }
  return finish(nullptr, "tsr_energy_report_matrix", st);
}

tsr_status tsr_energy_report_format(tsr_energy_report report, tsr_output_format format, char* buf, size_t len,
                                    size_t* needed) {
  tsr_status st = tsr::energy::check_report(report);
  if (st == TSR_SUCCESS && buf == nullptr && len > 0)
    st = fail(TSR_ERR_INVALID_ARG, "argument 'buf' is NULL with len = %zu", len);
  std::string s;
  if (st == TSR_SUCCESS) st = tsr::energy::format(*report, format, &s);
  if (st == TSR_SUCCESS) {
    if (needed) *needed = s.size();
    if (len > 0) {
      const size_t n = std::min(len - 1, s.size());
      std::memcpy(buf, s.data(), n);
      buf[n] = '\0';
    }
  }
  return finish(nullptr, "tsr_energy_report_format", st);
}

tsr_status tsr_energy_report_write(tsr_energy_report report, tsr_output_format format, const char* path) {
  tsr_status st = tsr::energy::check_report(report);
  if (st == TSR_SUCCESS && path == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'path' is NULL");
  std::string s;
  if (st == TSR_SUCCESS) st = tsr::energy::format(*report, format, &s);
  if (st == TSR_SUCCESS) st = tsr::energy::write_file(path, s);
  return finish(nullptr, "tsr_energy_report_write", st);
}

}  // extern "C"

// Energy reports, independent of how the data was gathered: one rank's
// ledgers per region -> moved bytes per level -> modelled joules (profile)
// and measured joules (meters); statistics over ranks; the readable table,
// JSON, CSV and the rank x rank matrix. libtessera (lib/energy_api.cpp) and
// the PMPI tool (lib/pmpi) fill a ReportData and format it with these
// functions. No MPI here.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "energy/profile.hpp"
#include "ledger.hpp"

namespace tsr {
namespace energy {

// Moved bytes and messages per level from one rank's counters (link levels:
// point-to-point sent + modelled collective wire sent; control excluded).
void moved(const tsr_counters& c, uint64_t bytes[TSR_LEVELS], uint64_t messages[TSR_LEVELS]);

// One rank's figures.
tsr_energy_estimate estimate(const Profile& p, const tsr_counters& c, const tsr_region_extra& x);

// Statistic over ranks, field by field. Measured fields: over the estimates
// that measured the domain (measured_ranks counts the ranks with any).
tsr_energy_estimate statistic(const std::vector<tsr_energy_estimate>& v, tsr_stat s);

// Call statistics of one MPI function (PMPI tool).
struct CallStat {
  uint64_t calls = 0;
  uint64_t bytes = 0;  // application payload (sent + received, as defined per call)
};

// Per region: statistics over ranks of the estimates and of the counters.
struct RegionStats {
  tsr_energy_estimate est[4];  // by tsr_stat
  tsr_counters cmin, cmax, csum;
};

struct ReportData {
  std::string producer;  // "libtessera 0.1.0", "libtessera-pmpi 0.1.0"
  std::string mpi;       // the MPI library's version string
  int nranks = 1, nnodes = 1, root = 0, my_rank = 0;
  bool simulated_nodes = false;
  std::vector<int> node_of;  // per rank
  Profile profile;
  std::vector<std::string> paths;  // sorted, "total" first
  // [rank][region]: every rank's data where all_ranks (the root), else one
  // entry: this rank's.
  bool all_ranks = false;
  std::vector<std::vector<tsr_counters>> counters;
  std::vector<std::vector<RegionExtra>> extras;
  std::vector<RegionStats> stats;  // per region
  bool matrix = false;             // extras carry matrix rows
  // Meters: any rank measured anything, and one status line per node.
  bool measured = false;
  std::vector<std::string> meter_status;  // per node ("node 0: RAPL: ...; NVML: ...")
  std::vector<std::string> notes;         // warnings, coverage notes
  std::vector<std::pair<std::string, std::string>> models;  // what -> how it is counted or modelled
  // PMPI tool: per-function call statistics [rank][region][function].
  std::vector<std::string> functions;
  std::vector<std::vector<std::vector<CallStat>>> calls;
  // The control entry is library-internal agreement traffic (libtessera).
  bool has_control = true;

  // "model only (...)" or "measured and modelled (...)".
  std::string source_line() const;
  // Fills stats from counters/extras (needs all_ranks).
  void compute_stats();
  // The estimate of rank r (all_ranks) or of this rank (r == my_rank).
  tsr_energy_estimate rank_estimate(int region, int rank) const;
};

// The collective models libtessera's transport assumes (docs/ACCOUNTING.md).
std::vector<std::pair<std::string, std::string>> transport_models();

std::string format_table(const ReportData& r);
std::string format_json(const ReportData& r);
std::string format_csv(const ReportData& r);
std::string format_matrix_csv(const ReportData& r);

// Writes text to path through a temporary file in the same directory and a
// rename. TSR_ERR_IO names the file.
tsr_status write_file(const std::string& path, const std::string& text);

}  // namespace energy
}  // namespace tsr

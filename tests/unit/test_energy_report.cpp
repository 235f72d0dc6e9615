// The energy model and the report formats, on hand-made ledgers: moved bytes
// per level from the counters, modelled joules against hand arithmetic with
// the default figures, statistics over ranks (measured ones over the ranks
// that measured), and the table, JSON, CSV and matrix outputs read back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core.hpp"
#include "energy/report_core.hpp"

namespace {

using namespace tsr::energy;
using json = nlohmann::json;

tsr_counters zero() {
  tsr_counters c;
  std::memset(&c, 0, sizeof c);
  return c;
}

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// Rank r: p2p to itself 10 B, to its node 100*(r+1) B in 2 messages, to
// another node 1000 B; modelled wire 50 B within the node; 4096 B written,
// 512 B read; 7 B host->device and 3 B back; 11 B device->device; 1e6 flops.
tsr_counters counters_of(int r) {
  tsr_counters c = zero();
  c.p2p_sent[TSR_PEER_SELF] = {1, 10};
  c.p2p_sent[TSR_PEER_NODE] = {2, 100u * static_cast<uint64_t>(r + 1)};
  c.p2p_sent[TSR_PEER_REMOTE] = {1, 1000};
  c.p2p_recv[TSR_PEER_NODE] = {5, 999};  // receives do not count as moved
  c.coll_wire_sent[TSR_PEER_NODE] = {3, 50};
  c.coll_wire_recv[TSR_PEER_REMOTE] = {3, 77};
  c.coll_calls[TSR_COLL_ALLREDUCE] = 1;
  c.coll_payload_sent = 40;
  c.coll_payload_recv = 40;
  c.disk_write_bytes = 4096;
  c.disk_read_bytes = 512;
  c.host_to_device_bytes = 7;
  c.device_to_host_bytes = 3;
  c.device_to_device_bytes = 11;
  c.control = {6, 72};
  return c;
}

TEST(EnergyModel, MovedBytesAndJoulesByHand) {
  const Profile& p = default_profile();
  tsr_region_extra x{};
  x.flops = 1000000;
  x.nanoseconds = 2500000000ull;
  const tsr_energy_estimate e = estimate(p, counters_of(1), x);
  const uint64_t want[TSR_LEVELS] = {10, 200 + 50, 1000, 10, 11, 512, 4096};
  const uint64_t msgs[TSR_LEVELS] = {1, 5, 1, 0, 0, 0, 0};
  const double pj[TSR_LEVELS] = {320, 320, 3000, 250, 100, 2000, 2000};
  const double lo[TSR_LEVELS] = {25, 25, 500, 100, 40, 1000, 1000};
  const double hi[TSR_LEVELS] = {700, 700, 6000, 600, 250, 30000, 30000};
  double tot = 0, tlo = 0, thi = 0;
  for (int l = 0; l < TSR_LEVELS; ++l) {
    EXPECT_EQ(e.moved_bytes[l], want[l]) << l;
    EXPECT_EQ(e.moved_messages[l], msgs[l]) << l;
    EXPECT_DOUBLE_EQ(e.joules[l], static_cast<double>(want[l]) * pj[l] * 1e-12) << l;
    EXPECT_DOUBLE_EQ(e.joules_low[l], static_cast<double>(want[l]) * lo[l] * 1e-12) << l;
    EXPECT_DOUBLE_EQ(e.joules_high[l], static_cast<double>(want[l]) * hi[l] * 1e-12) << l;
    tot += static_cast<double>(want[l]) * pj[l] * 1e-12;
    tlo += static_cast<double>(want[l]) * lo[l] * 1e-12;
    thi += static_cast<double>(want[l]) * hi[l] * 1e-12;
  }
  EXPECT_EQ(e.flops, 1000000u);
  EXPECT_DOUBLE_EQ(e.flop_joules, 1e6 * 20e-12);
  EXPECT_DOUBLE_EQ(e.flop_joules_low, 1e6 * 4.6e-12);
  EXPECT_DOUBLE_EQ(e.total_joules, tot + 1e6 * 20e-12);
  EXPECT_DOUBLE_EQ(e.total_joules_low, tlo + 1e6 * 4.6e-12);
  EXPECT_DOUBLE_EQ(e.total_joules_high, thi + 1e6 * 50e-12);
  EXPECT_DOUBLE_EQ(e.seconds, 2.5);
  EXPECT_EQ(e.measured_mask, 0);
  EXPECT_EQ(e.measured_ranks, 0);
  EXPECT_EQ(e.measured_joules[0], 0.0);

  // PUE multiplies every modelled joule; no flop figure, no flop joules.
  Profile q;
  ASSERT_EQ(parse_profile(R"({"pue": 1.5, "flop": null})", "<test>", default_profile(), &q), TSR_SUCCESS);
  const tsr_energy_estimate f = estimate(q, counters_of(1), x);
  EXPECT_DOUBLE_EQ(f.joules[TSR_LEVEL_INTER_NODE], 1000 * 3000e-12 * 1.5);
  EXPECT_EQ(f.flop_joules, 0.0);
  EXPECT_DOUBLE_EQ(f.total_joules, tot * 1.5);
}

TEST(EnergyModel, StatisticsOverRanks) {
  const Profile& p = default_profile();
  std::vector<tsr_energy_estimate> v;
  for (int r = 0; r < 4; ++r) {
    tsr_region_extra x{};
    x.nanoseconds = static_cast<uint64_t>(r + 1) * 1000000000ull;
    if (r == 0 || r == 2) {  // node readers: package measured, dram on rank 2 only
      x.measured_mask = r == 0 ? 1 : 3;
      x.measured_uj[TSR_DOMAIN_PACKAGE] = r == 0 ? 3000000 : 5000000;
      x.measured_uj[TSR_DOMAIN_DRAM] = 250000;
    }
    v.push_back(estimate(p, counters_of(r), x));
  }
  const tsr_energy_estimate mn = statistic(v, TSR_STAT_MIN), mx = statistic(v, TSR_STAT_MAX),
                            sm = statistic(v, TSR_STAT_SUM), me = statistic(v, TSR_STAT_MEAN);
  EXPECT_EQ(mn.moved_bytes[TSR_LEVEL_INTRA_NODE], 150u);
  EXPECT_EQ(mx.moved_bytes[TSR_LEVEL_INTRA_NODE], 450u);
  EXPECT_EQ(sm.moved_bytes[TSR_LEVEL_INTRA_NODE], 100u + 200 + 300 + 400 + 4 * 50);
  EXPECT_EQ(me.moved_bytes[TSR_LEVEL_INTRA_NODE], 300u);  // 1200 / 4
  EXPECT_DOUBLE_EQ(sm.seconds, 10.0);
  EXPECT_DOUBLE_EQ(me.seconds, 2.5);
  EXPECT_DOUBLE_EQ(sm.joules[TSR_LEVEL_INTRA_NODE], 1200 * 320e-12);
  // Measured: package over ranks 0 and 2, dram over rank 2 alone.
  EXPECT_EQ(sm.measured_mask, 3);
  EXPECT_EQ(sm.measured_ranks, 2);
  EXPECT_DOUBLE_EQ(sm.measured_joules[TSR_DOMAIN_PACKAGE], 8.0);
  EXPECT_DOUBLE_EQ(mn.measured_joules[TSR_DOMAIN_PACKAGE], 3.0);
  EXPECT_DOUBLE_EQ(mx.measured_joules[TSR_DOMAIN_PACKAGE], 5.0);
  EXPECT_DOUBLE_EQ(me.measured_joules[TSR_DOMAIN_PACKAGE], 4.0);
  EXPECT_DOUBLE_EQ(sm.measured_joules[TSR_DOMAIN_DRAM], 0.25);
  EXPECT_DOUBLE_EQ(me.measured_joules[TSR_DOMAIN_DRAM], 0.25);
  EXPECT_EQ(sm.measured_mask & (1 << TSR_DOMAIN_GPU), 0);
}

// Three ranks, two nodes (0,0,1), regions "total" and "step", a matrix.
ReportData sample(bool measured) {
  ReportData d;
  d.producer = "unit test";
  d.nranks = 3;
  d.nnodes = 2;
  d.node_of = {0, 0, 1};
  d.profile = default_profile();
  d.paths = {"total", "step"};
  d.all_ranks = true;
  d.matrix = true;
  d.models = transport_models();
  d.counters.assign(3, std::vector<tsr_counters>(2));
  d.extras.assign(3, std::vector<tsr::RegionExtra>(2));
  for (int r = 0; r < 3; ++r)
    for (int g = 0; g < 2; ++g) {
      d.counters[r][g] = g == 0 ? counters_of(r) : zero();
      if (g == 1) d.counters[r][g].p2p_sent[TSR_PEER_NODE] = {1, 8};
      tsr::RegionExtra& x = d.extras[r][g];
      x.x.nanoseconds = 1000000000ull;
      x.row.assign(6, 0);
      x.row[2 * ((r + 1) % 3)] = 1;  // one message of 8 bytes to the right
      x.row[2 * ((r + 1) % 3) + 1] = 8;
      if (measured && (r == 0 || r == 2)) {
        x.x.measured_mask = 1;
        x.x.measured_uj[0] = 2000000;
      }
    }
  d.meter_status = {measured ? "rank 0: RAPL: 1 package zone(s)" : "rank 0: RAPL: no powercap directory /x (No such file or directory); NVML: not present (libnvidia-ml.so.1: cannot open shared object file)"};
  d.measured = measured;
  d.compute_stats();
  return d;
}

TEST(EnergyReport, ModelOnlyInEveryFormat) {
  const ReportData d = sample(false);
  EXPECT_TRUE(has(d.source_line(), "model only: no energy counter could be read")) << d.source_line();
  const std::string table = format_table(d);
  EXPECT_TRUE(has(table, "energy source: model only")) << table;
  EXPECT_TRUE(has(table, "libnvidia-ml.so.1")) << table;
  EXPECT_TRUE(has(table, "region step")) << table;
  EXPECT_TRUE(has(table, "not measured")) << table;
  EXPECT_TRUE(has(table, "intra-node")) << table;
  EXPECT_FALSE(has(table, "[measured]")) << table;

  const json j = json::parse(format_json(d));
  EXPECT_EQ(j["format"], "tessera-energy-report/1");
  EXPECT_EQ(j["energy_source"], "model only");
  EXPECT_EQ(j["ranks"], 3);
  EXPECT_EQ(j["profile"]["name"], "default-2025");
  EXPECT_EQ(j["profile"]["levels"]["inter_node"]["pj_per_byte"], 3000.0);
  EXPECT_TRUE(has(j["profile"]["levels"]["inter_node"]["source"].get<std::string>(), "Kogge"));
  ASSERT_EQ(j["regions"].size(), 2u);
  const json& total = j["regions"][0];
  EXPECT_EQ(total["path"], "total");
  EXPECT_TRUE(total["statistics"]["sum"]["measured_joules"].is_null());
  EXPECT_EQ(total["statistics"]["sum"]["moved_bytes"]["intra_node"], 100u + 200 + 300 + 3 * 50);
  EXPECT_EQ(total["statistics"]["min"]["moved_bytes"]["intra_node"], 150u);
  ASSERT_EQ(total["ranks"].size(), 3u);
  EXPECT_EQ(total["ranks"][2]["node"], 1);
  EXPECT_EQ(total["ranks"][1]["moved_bytes"]["inter_node"], 1000u);
  const json& jt = total["ranks"][1]["modelled_joules"]["inter_node"];  // [low, typical, high]
  EXPECT_DOUBLE_EQ(jt[0].get<double>(), 1000 * 500e-12);
  EXPECT_DOUBLE_EQ(jt[1].get<double>(), 1000 * 3000e-12);
  EXPECT_DOUBLE_EQ(jt[2].get<double>(), 1000 * 6000e-12);
  EXPECT_TRUE(total["ranks"][1]["measured_joules"].is_null());
  EXPECT_EQ(total["ranks"][0]["application"]["p2p_recv"]["node"]["bytes"], 999u);
  EXPECT_EQ(total["ranks"][0]["application"]["control"]["bytes"], 72u);
  EXPECT_EQ(j["regions"][1]["matrix"]["bytes"][2][0], 8u);
  EXPECT_EQ(j["regions"][1]["matrix"]["messages"][0][1], 1u);
  EXPECT_EQ(j["regions"][1]["matrix"]["bytes"][0][0], 0u);
  EXPECT_EQ(j["models"]["allreduce"], "ring: reduce-scatter then all-gather, 2(p-1) steps");

  // CSV: header + per region 3 ranks + 4 statistics; measured columns empty.
  const std::string csv = format_csv(d);
  std::istringstream in(csv);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u + 2 * (3 + 4));
  const size_t ncol = static_cast<size_t>(std::count(lines[0].begin(), lines[0].end(), ',')) + 1;
  for (const std::string& l : lines) EXPECT_EQ(static_cast<size_t>(std::count(l.begin(), l.end(), ',')) + 1, ncol) << l;
  EXPECT_TRUE(has(lines[0], "measured_joules_package,measured_joules_dram,measured_joules_gpu"));
  EXPECT_EQ(lines[2].substr(0, 30), "total,1,0,model only,1,0,10,25");  // rank 1: 250 B intra, 10 B self
  EXPECT_TRUE(has(lines[2], ",,,")) << lines[2];                  // empty measured cells
  EXPECT_EQ(lines[7].substr(0, 10), "total,sum,");

  const std::string m = format_matrix_csv(d);
  EXPECT_TRUE(has(m, "region,quantity,from,to_0,to_1,to_2\n")) << m;
  EXPECT_TRUE(has(m, "step,bytes,0,0,8,0\n")) << m;
  EXPECT_TRUE(has(m, "step,bytes,2,8,0,0\n")) << m;
  EXPECT_TRUE(has(m, "step,messages,1,0,0,1\n")) << m;
}

TEST(EnergyReport, MeasuredAndModelled) {
  const ReportData d = sample(true);
  EXPECT_TRUE(has(d.source_line(), "measured and modelled: measured package")) << d.source_line();
  const std::string table = format_table(d);
  EXPECT_TRUE(has(table, "package 4 J (per node 2 .. 2) [measured]")) << table;
  const json j = json::parse(format_json(d));
  EXPECT_EQ(j["energy_source"], "measured and modelled");
  EXPECT_DOUBLE_EQ(j["regions"][0]["statistics"]["sum"]["measured_joules"]["package"].get<double>(), 4.0);
  EXPECT_EQ(j["regions"][0]["statistics"]["sum"]["measured_ranks"], 2);
  EXPECT_TRUE(j["regions"][0]["ranks"][1]["measured_joules"].is_null());
  EXPECT_DOUBLE_EQ(j["regions"][0]["ranks"][2]["measured_joules"]["package"].get<double>(), 2.0);
  const std::string csv = format_csv(d);
  EXPECT_TRUE(has(csv, ",2,,,")) << csv;  // rank 0 or 2: package 2 J, dram and gpu empty
}

TEST(EnergyReport, WriteFile) {
  char dir[] = "/tmp/tsr_report_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/r.json";
  ASSERT_EQ(write_file(path, "{}\n"), TSR_SUCCESS);
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(s, "{}\n");
  EXPECT_EQ(write_file(std::string(dir) + "/no/such/dir/r.json", "x"), TSR_ERR_IO);
  EXPECT_TRUE(has(tsr::pending_message(), "/no/such/dir/r.json")) << tsr::pending_message();
  std::remove(path.c_str());
  rmdir(dir);
}

}  // namespace

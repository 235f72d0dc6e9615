// Energy accounting on a context: the model-only path (no counter readable:
// the report says so and why, never a zero measurement), modelled joules per
// region and rank against hand-computed moved bytes with simulated nodes,
// measured joules from a fake powercap tree read by the node's lowest rank
// (wrap-around inside a region), the communication matrix, flops, disk bytes
// from the I/O layer, the four output formats and files, the C++ wrappers,
// and every error path on every rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "context.hpp"
#include "io.hpp"
#include "tessera/tessera.hpp"
#include "tsr_test.hpp"

using namespace tsr_test;
using json = nlohmann::json;

namespace {

constexpr uint64_t kRange = 262143328850ull;

// A directory every rank can see (rank 0 makes it).
std::string shared_tmpdir() {
  char path[256] = {0};
  if (world_rank() == 0) {
    std::snprintf(path, sizeof path, "/tmp/tsr_energy_XXXXXX");
    if (mkdtemp(path) == nullptr) path[0] = '\0';
    chmod(path, 0755);
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

void rmdir_all(const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0 && !dir.empty()) std::system(("rm -rf " + dir).c_str());
}

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text << "\n"; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string format(tsr_energy_report r, tsr_output_format f) {
  size_t n = 0;
  EXPECT_EQ(tsr_energy_report_format(r, f, nullptr, 0, &n), TSR_SUCCESS) << tsr_last_error(nullptr);
  std::string s(n + 1, '\0');
  EXPECT_EQ(tsr_energy_report_format(r, f, &s[0], s.size(), &n), TSR_SUCCESS);
  s.resize(n);
  return s;
}

tsr_status start(tsr_context ctx, const char* powercap, int matrix) {
  tsr_energy_config cfg = TSR_ENERGY_CONFIG_INIT;
  cfg.powercap_root = powercap;
  cfg.nvml_library = "libtsr-no-such-nvml.so.1";
  cfg.comm_matrix = matrix;
  return tsr_energy_start(ctx, &cfg);
}

int region_of(tsr_energy_report r, const char* path) {
  int g = -1;
  EXPECT_EQ(tsr_energy_report_find(r, path, &g), TSR_SUCCESS) << path;
  return g;
}

// ---------------------------------------------------------------- model only
TEST(Energy, ModelOnlyWhenNoCounterCanBeRead) {
  Ctx ctx;
  const int me = world_rank();
  // Never started: the report says so.
  tsr_energy_report rep = nullptr;
  ASSERT_EQ(tsr_energy_report_create(ctx, nullptr, 0, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  int measured = -1;
  const char* text = nullptr;
  ASSERT_EQ(tsr_energy_report_source(rep, &measured, &text), TSR_SUCCESS);
  EXPECT_EQ(measured, 0);
  EXPECT_TRUE(contains(text, "model only: no energy meter was started")) << text;
  tsr_energy_report_destroy(&rep);

  ASSERT_EQ(start(ctx, "/nonexistent/tsr-powercap", 0), TSR_SUCCESS) << tsr_last_error(ctx);
  int domains = -1;
  ASSERT_EQ(tsr_energy_meter_status(ctx, &domains, &text), TSR_SUCCESS);
  EXPECT_EQ(domains, 0);
  if (me == 0) {
    EXPECT_TRUE(contains(text, "RAPL: no powercap directory /nonexistent/tsr-powercap")) << text;
    EXPECT_TRUE(contains(text, "NVML: not present")) << text;
  } else {
    EXPECT_TRUE(contains(text, "not a meter reader")) << text;  // one reader per node: rank 0 here
  }
  ASSERT_EQ(tsr_region_begin(ctx, "step"), TSR_SUCCESS);
  double x = 1, y = 0;
  ASSERT_EQ(tsr::allreduce(*ctx.ctx->world, &x, &y, 1, TSR_FLOAT64, TSR_SUM), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "step"), TSR_SUCCESS);
  ASSERT_EQ(tsr_energy_report_create(ctx, nullptr, 0, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  ASSERT_EQ(tsr_energy_report_source(rep, &measured, &text), TSR_SUCCESS);
  EXPECT_EQ(measured, 0);
  EXPECT_TRUE(contains(text, "model only: no energy counter could be read")) << text;
  EXPECT_TRUE(contains(text, "/nonexistent/tsr-powercap")) << text;
  const int g = region_of(rep, "step");
  tsr_energy_estimate e;
  ASSERT_EQ(tsr_energy_report_stat(rep, g, TSR_STAT_SUM, &e), TSR_SUCCESS);
  EXPECT_EQ(e.measured_mask, 0);
  EXPECT_EQ(e.measured_ranks, 0);
  for (double j : e.measured_joules) EXPECT_EQ(j, 0.0);
  if (world_size() > 1) {
    EXPECT_GT(e.total_joules, 0.0);
  }
  const std::string table = format(rep, TSR_OUTPUT_TABLE);
  EXPECT_TRUE(contains(table.c_str(), "energy source: model only")) << table;
  EXPECT_TRUE(contains(table.c_str(), "not measured")) << table;
  const json j = json::parse(format(rep, TSR_OUTPUT_JSON));
  EXPECT_EQ(j["energy_source"], "model only");
  for (const json& reg : j["regions"]) EXPECT_TRUE(reg["statistics"]["sum"]["measured_joules"].is_null());
  ASSERT_EQ(tsr_energy_report_destroy(&rep), TSR_SUCCESS);
  ASSERT_EQ(tsr_energy_stop(ctx), TSR_SUCCESS);
}

// ------------------------------------------------------------- exact model
// Expected moved bytes of this rank per level for a ring send of n bytes to
// the right and a ring all-reduce of `count` doubles, with nodes of 2 ranks.
int level_of(int me, int peer, int rpn) {
  if (peer == me) return TSR_LEVEL_SELF;
  return me / rpn == peer / rpn ? TSR_LEVEL_INTRA_NODE : TSR_LEVEL_INTER_NODE;
}
uint64_t chunk(uint64_t count, int p, int i) { return count / p + (static_cast<uint64_t>(i) < count % p ? 1 : 0); }

TEST(Energy, ModelledJoulesPerRegionAndRankAreExact) {
  const int p = world_size(), me = world_rank(), rpn = 2;
  Ctx ctx(rpn);
  ASSERT_EQ(start(ctx, "/nonexistent/tsr-powercap", 1), TSR_SUCCESS) << tsr_last_error(ctx);
  const tsr::Comm& w = *ctx.ctx->world;
  const size_t n = 1000;  // doubles
  std::vector<double> a(n, 1.0), b(n);
  ASSERT_EQ(tsr_region_begin(ctx, "ring"), TSR_SUCCESS);
  ASSERT_EQ(tsr::sendrecv(w, a.data(), n, (me + 1) % p, 5, b.data(), n, (me + p - 1) % p, 5, TSR_FLOAT64), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "ring"), TSR_SUCCESS);
  const uint64_t count = 10;
  ASSERT_EQ(tsr_region_begin(ctx, "reduce"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_begin(ctx, "inner"), TSR_SUCCESS);
  ASSERT_EQ(tsr::allreduce(w, a.data(), b.data(), count, TSR_FLOAT64, TSR_SUM), TSR_SUCCESS);
  ASSERT_EQ(tsr_flops_add(ctx, 12345), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "inner"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "reduce"), TSR_SUCCESS);
  tsr_region_extra x;
  ASSERT_EQ(tsr_region_extra_get(ctx, "reduce/inner", &x), TSR_SUCCESS);
  EXPECT_EQ(x.flops, 12345u);
  EXPECT_EQ(x.entries, 1u);
  EXPECT_GT(x.nanoseconds, 0u);
  ASSERT_EQ(tsr_region_extra_get(ctx, "total", &x), TSR_SUCCESS);
  EXPECT_EQ(x.flops, 12345u);  // folded into the enclosing regions

  // Expected per rank r: bytes by level in "ring" and "reduce", matrix rows.
  auto ring_of = [&](int r, uint64_t lv[TSR_LEVELS]) {
    for (int l = 0; l < TSR_LEVELS; ++l) lv[l] = 0;
    lv[level_of(r, (r + 1) % p, rpn)] += n * 8;
  };
  auto reduce_of = [&](int r, uint64_t lv[TSR_LEVELS]) {
    for (int l = 0; l < TSR_LEVELS; ++l) lv[l] = 0;
    if (p == 1) return;
    const uint64_t sent = (count - chunk(count, p, (r + 1) % p)) + (count - chunk(count, p, (r + 2) % p));
    lv[level_of(r, (r + 1) % p, rpn)] += sent * 8;
  };
  const double pj[TSR_LEVELS] = {320, 320, 3000, 250, 100, 2000, 2000};
  tsr_energy_report rep = nullptr;
  ASSERT_EQ(tsr_energy_report_create(ctx, nullptr, 0, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  const int gring = region_of(rep, "ring"), gred = region_of(rep, "reduce"), ginner = region_of(rep, "reduce/inner");
  int nreg = 0;
  ASSERT_EQ(tsr_energy_report_region_count(rep, &nreg), TSR_SUCCESS);
  EXPECT_EQ(nreg, 4);
  uint64_t sum_ring[TSR_LEVELS] = {0}, sum_red[TSR_LEVELS] = {0};
  for (int r = 0; r < p; ++r) {
    uint64_t lr[TSR_LEVELS], ld[TSR_LEVELS];
    ring_of(r, lr);
    reduce_of(r, ld);
    for (int l = 0; l < TSR_LEVELS; ++l) {
      sum_ring[l] += lr[l];
      sum_red[l] += ld[l];
    }
    if (me != 0 && r != me) continue;
    tsr_energy_estimate e;
    ASSERT_EQ(tsr_energy_report_rank(rep, gring, r, &e), TSR_SUCCESS) << tsr_last_error(nullptr);
    double tot = 0;
    for (int l = 0; l < TSR_LEVELS; ++l) {
      EXPECT_EQ(e.moved_bytes[l], lr[l]) << "rank " << r << " level " << l;
      EXPECT_DOUBLE_EQ(e.joules[l], static_cast<double>(lr[l]) * pj[l] * 1e-12) << r << " " << l;
      tot += static_cast<double>(lr[l]) * pj[l] * 1e-12;
    }
    EXPECT_DOUBLE_EQ(e.total_joules, tot);
    EXPECT_EQ(e.flops, 0u);
    ASSERT_EQ(tsr_energy_report_rank(rep, ginner, r, &e), TSR_SUCCESS);
    tot = 0;
    for (int l = 0; l < TSR_LEVELS; ++l) {
      EXPECT_EQ(e.moved_bytes[l], ld[l]) << "rank " << r << " level " << l;
      tot += static_cast<double>(ld[l]) * pj[l] * 1e-12;
    }
    EXPECT_EQ(e.flops, 12345u);
    EXPECT_DOUBLE_EQ(e.flop_joules, 12345 * 20e-12);
    EXPECT_DOUBLE_EQ(e.total_joules, tot + 12345 * 20e-12);
    EXPECT_EQ(e.moved_messages[level_of(r, (r + 1) % p, rpn)], p > 1 ? 2u * static_cast<uint64_t>(p - 1) : 0u);
  }
  // Statistics on every rank.
  tsr_energy_estimate s;
  ASSERT_EQ(tsr_energy_report_stat(rep, gring, TSR_STAT_SUM, &s), TSR_SUCCESS);
  for (int l = 0; l < TSR_LEVELS; ++l) EXPECT_EQ(s.moved_bytes[l], sum_ring[l]) << l;
  ASSERT_EQ(tsr_energy_report_stat(rep, gred, TSR_STAT_SUM, &s), TSR_SUCCESS);
  for (int l = 0; l < TSR_LEVELS; ++l) EXPECT_EQ(s.moved_bytes[l], sum_red[l]) << l;
  EXPECT_EQ(s.flops, 12345u * static_cast<uint64_t>(p));
  ASSERT_EQ(tsr_energy_report_stat(rep, gring, TSR_STAT_MAX, &s), TSR_SUCCESS);
  for (int l = 0; l < TSR_LEVELS; ++l) {
    uint64_t want = 0;
    for (int r = 0; r < p; ++r) {
      uint64_t lr[TSR_LEVELS];
      ring_of(r, lr);
      want = std::max(want, lr[l]);
    }
    EXPECT_EQ(s.moved_bytes[l], want) << l;
  }
  // The matrix on the root: rank r sends n doubles to r+1 in "ring", and the
  // all-reduce's ring traffic to r+1 in "reduce".
  const size_t pp = static_cast<size_t>(p) * static_cast<size_t>(p);
  std::vector<uint64_t> mb(pp), mm(pp);
  if (me == 0) {
    ASSERT_EQ(tsr_energy_report_matrix(rep, gring, mb.data(), mm.data(), pp), TSR_SUCCESS) << tsr_last_error(nullptr);
    for (int r = 0; r < p; ++r)
      for (int q = 0; q < p; ++q) {
        EXPECT_EQ(mb[static_cast<size_t>(r * p + q)], q == (r + 1) % p ? n * 8 : 0u) << r << "->" << q;
        EXPECT_EQ(mm[static_cast<size_t>(r * p + q)], q == (r + 1) % p ? 1u : 0u) << r << "->" << q;
      }
    ASSERT_EQ(tsr_energy_report_matrix(rep, gred, mb.data(), nullptr, pp), TSR_SUCCESS);
    for (int r = 0; r < p; ++r) {
      uint64_t ld[TSR_LEVELS];
      reduce_of(r, ld);
      uint64_t want = 0;
      for (uint64_t v : ld) want += v;
      for (int q = 0; q < p; ++q)
        EXPECT_EQ(mb[static_cast<size_t>(r * p + q)], q == (r + 1) % p ? want : 0u) << r << "->" << q;
    }
    const std::string m = format(rep, TSR_OUTPUT_MATRIX_CSV);
    EXPECT_TRUE(contains(m.c_str(), "ring,bytes,0,")) << m;
  } else {
    EXPECT_EQ(tsr_energy_report_matrix(rep, gring, mb.data(), nullptr, pp), TSR_ERR_STATE);
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "root (rank 0) only"));
    size_t need = 0;
    EXPECT_EQ(tsr_energy_report_format(rep, TSR_OUTPUT_MATRIX_CSV, nullptr, 0, &need), TSR_ERR_STATE);
  }
  ASSERT_EQ(tsr_energy_report_destroy(&rep), TSR_SUCCESS);

  // The energy report's application ledger is the accounting report's.
  tsr_report plain = nullptr;
  ASSERT_EQ(tsr_energy_report_create(ctx, nullptr, 0, &rep), TSR_SUCCESS);
  ASSERT_EQ(tsr_report_create(ctx, 0, &plain), TSR_SUCCESS);
  tsr_counters sum;
  ASSERT_EQ(tsr_report_stats(plain, 1, nullptr, nullptr, &sum), TSR_SUCCESS);  // region 1: "reduce"
  const json j = json::parse(format(rep, TSR_OUTPUT_JSON));
  const json& app = j["regions"][1]["application"]["sum"];
  EXPECT_EQ(j["regions"][1]["path"], "reduce");
  EXPECT_EQ(app["collective_payload_sent"], sum.coll_payload_sent);
  EXPECT_EQ(app["collective_wire_sent_model"]["node"]["bytes"], sum.coll_wire_sent[TSR_PEER_NODE].bytes);
  EXPECT_EQ(app["collective_wire_sent_model"]["remote"]["bytes"], sum.coll_wire_sent[TSR_PEER_REMOTE].bytes);
  tsr_report_destroy(&plain);
  tsr_energy_report_destroy(&rep);
  ASSERT_EQ(tsr_energy_stop(ctx), TSR_SUCCESS);
}

// ------------------------------------------------------- measured (fake RAPL)
TEST(Energy, MeasuredByTheNodeReaderWithWrapAround) {
  Ctx ctx;
  const int me = world_rank();
  const std::string root = shared_tmpdir();
  ASSERT_FALSE(root.empty());
  const std::string pkg = root + "/intel-rapl:0", dram = root + "/intel-rapl:0:0";
  if (me == 0) {
    mkdir(pkg.c_str(), 0755);
    mkdir(dram.c_str(), 0755);
    put(pkg + "/name", "package-0");
    put(pkg + "/max_energy_range_uj", std::to_string(kRange));
    put(pkg + "/energy_uj", "1000");
    put(dram + "/name", "dram");
    put(dram + "/max_energy_range_uj", "65712999613");
    put(dram + "/energy_uj", "50");
  }
  // A region entered before the meters start is never measured.
  ASSERT_EQ(tsr_region_begin(ctx, "before"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "before"), TSR_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(start(ctx, root.c_str(), 0), TSR_SUCCESS) << tsr_last_error(ctx);
  int domains = 0;
  const char* text = nullptr;
  ASSERT_EQ(tsr_energy_meter_status(ctx, &domains, &text), TSR_SUCCESS);
  EXPECT_EQ(domains, me == 0 ? 3 : 0) << text;  // rank 0: the lowest rank of the (one) node
  if (me == 0) {
    EXPECT_TRUE(contains(text, "1 package zone(s), 1 dram zone(s)")) << text;
    put(pkg + "/energy_uj", "5000");
  }
  ASSERT_EQ(tsr_region_begin(ctx, "phase"), TSR_SUCCESS);  // reads 5000
  if (me == 0) {
    put(pkg + "/energy_uj", std::to_string(kRange - 100));
    ASSERT_EQ(tsr_energy_sample(ctx), TSR_SUCCESS);  // kRange - 100 - 5000
    put(pkg + "/energy_uj", "23");                    // wrapped: 100 + 23
    put(dram + "/energy_uj", "80");
  }
  ASSERT_EQ(tsr_region_end(ctx, "phase"), TSR_SUCCESS);
  const uint64_t want_phase = (kRange - 100 - 5000) + 100 + 23;
  tsr_region_extra x;
  ASSERT_EQ(tsr_region_extra_get(ctx, "phase", &x), TSR_SUCCESS);
  if (me == 0) {
    EXPECT_EQ(x.measured_mask, 3u);
    EXPECT_EQ(x.measured_uj[TSR_DOMAIN_PACKAGE], want_phase);
    EXPECT_EQ(x.measured_uj[TSR_DOMAIN_DRAM], 30u);
  } else {
    EXPECT_EQ(x.measured_mask, 0u);
    EXPECT_EQ(x.measured_uj[TSR_DOMAIN_PACKAGE], 0u);
  }
  // Visited again after the meters stopped: no longer measured over the whole region.
  ASSERT_EQ(tsr_region_begin(ctx, "again"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "again"), TSR_SUCCESS);

  tsr_energy_report rep = nullptr;
  ASSERT_EQ(tsr_energy_report_create(ctx, nullptr, 0, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  int measured = 0;
  ASSERT_EQ(tsr_energy_report_source(rep, &measured, &text), TSR_SUCCESS);
  EXPECT_EQ(measured, 1);
  EXPECT_TRUE(contains(text, "measured and modelled: measured package, dram")) << text;
  tsr_energy_estimate e;
  ASSERT_EQ(tsr_energy_report_stat(rep, region_of(rep, "phase"), TSR_STAT_SUM, &e), TSR_SUCCESS);
  EXPECT_EQ(e.measured_mask, 3);
  EXPECT_EQ(e.measured_ranks, 1);  // one node
  EXPECT_DOUBLE_EQ(e.measured_joules[TSR_DOMAIN_PACKAGE], static_cast<double>(want_phase) * 1e-6);
  EXPECT_DOUBLE_EQ(e.measured_joules[TSR_DOMAIN_DRAM], 30e-6);
  ASSERT_EQ(tsr_energy_report_stat(rep, region_of(rep, "phase"), TSR_STAT_MEAN, &e), TSR_SUCCESS);
  EXPECT_DOUBLE_EQ(e.measured_joules[TSR_DOMAIN_PACKAGE], static_cast<double>(want_phase) * 1e-6);  // over nodes
  ASSERT_EQ(tsr_energy_report_stat(rep, region_of(rep, "before"), TSR_STAT_SUM, &e), TSR_SUCCESS);
  EXPECT_EQ(e.measured_mask, 0);
  ASSERT_EQ(tsr_energy_report_stat(rep, 0, TSR_STAT_SUM, &e), TSR_SUCCESS);  // total: since the start
  EXPECT_DOUBLE_EQ(e.measured_joules[TSR_DOMAIN_PACKAGE], static_cast<double>(4000 + want_phase) * 1e-6);
  const json j = json::parse(format(rep, TSR_OUTPUT_JSON));
  EXPECT_EQ(j["energy_source"], "measured and modelled");
  if (me == 0) {
    const json& ranks = j["regions"][static_cast<size_t>(region_of(rep, "phase"))]["ranks"];
    EXPECT_DOUBLE_EQ(ranks[0]["measured_joules"]["dram"].get<double>(), 30e-6);
    for (size_t r = 1; r < ranks.size(); ++r) EXPECT_TRUE(ranks[r]["measured_joules"].is_null());
  }
  tsr_energy_report_destroy(&rep);
  ASSERT_EQ(tsr_energy_stop(ctx), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_begin(ctx, "again"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "again"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_extra_get(ctx, "again", &x), TSR_SUCCESS);
  EXPECT_EQ(x.entries, 2u);
  EXPECT_EQ(x.measured_mask, 0u);
  rmdir_all(root);
}

// ------------------------------------------------------------ disk, files
TEST(Energy, DiskBytesFromTheIoLayerAndReportFiles) {
  Ctx ctx;
  const int p = world_size(), me = world_rank();
  const std::string dir = shared_tmpdir();
  ASSERT_FALSE(dir.empty());
  std::vector<double> block(64, 1.5);
  tsr::io::Block b;
  b.name = "x";
  b.type = TSR_FLOAT64;
  b.global[0] = 64 * static_cast<uint64_t>(p);
  b.offset[0] = 64 * static_cast<uint64_t>(me);
  b.extent[0] = 64;
  b.data = block.data();
  ASSERT_EQ(tsr_region_begin(ctx, "ckpt"), TSR_SUCCESS);
  ASSERT_EQ(tsr::io::write(*ctx.ctx->world, dir + "/ckpt.bin", {b}, {}, tsr::io::Format::binary), TSR_SUCCESS)
      << tsr::pending_message();
  ASSERT_EQ(tsr_region_end(ctx, "ckpt"), TSR_SUCCESS);
  const tsr_counters c = counters(ctx, "ckpt");
  tsr_energy_report rep = nullptr;
  ASSERT_EQ(tsr_energy_report_create(ctx, nullptr, p - 1, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  tsr_energy_estimate e;
  ASSERT_EQ(tsr_energy_report_rank(rep, region_of(rep, "ckpt"), me, &e), TSR_SUCCESS);
  if (me != 0) {  // docs/FILES.md: B off rank 0
    EXPECT_EQ(e.moved_bytes[TSR_LEVEL_DISK_WRITE], 64u * 8);
  }
  EXPECT_EQ(e.moved_bytes[TSR_LEVEL_DISK_WRITE], c.disk_write_bytes);
  EXPECT_GE(e.moved_bytes[TSR_LEVEL_DISK_WRITE], 64u * 8);
  EXPECT_DOUBLE_EQ(e.joules[TSR_LEVEL_DISK_WRITE], static_cast<double>(c.disk_write_bytes) * 2000e-12);
  EXPECT_EQ(e.moved_bytes[TSR_LEVEL_DISK_READ], 0u);

  // Files on the root (rank p-1): what format() gives, renamed into place.
  if (me == p - 1) {
    const tsr_output_format fmts[3] = {TSR_OUTPUT_TABLE, TSR_OUTPUT_JSON, TSR_OUTPUT_CSV};
    const char* names[3] = {"/e.txt", "/e.json", "/e.csv"};
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(tsr_energy_report_write(rep, fmts[k], (dir + names[k]).c_str()), TSR_SUCCESS) << tsr_last_error(nullptr);
      EXPECT_EQ(slurp(dir + names[k]), format(rep, fmts[k])) << names[k];
    }
    const json j = json::parse(slurp(dir + "/e.json"));
    EXPECT_EQ(j["ranks"], p);
    EXPECT_EQ(j["regions"][1]["path"], "ckpt");
    EXPECT_EQ(j["regions"][1]["ranks"].size(), static_cast<size_t>(p));
    // CSV: header, then per region p ranks and 4 statistics.
    const std::string csv = slurp(dir + "/e.csv");
    EXPECT_EQ(static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')), 1u + 2u * (static_cast<size_t>(p) + 4));
    EXPECT_EQ(tsr_energy_report_write(rep, TSR_OUTPUT_JSON, (dir + "/no/such/dir/e.json").c_str()), TSR_ERR_IO);
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "/no/such/dir/e.json"));
    EXPECT_EQ(tsr_energy_report_write(rep, TSR_OUTPUT_MATRIX_CSV, (dir + "/m.csv").c_str()), TSR_ERR_STATE);
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "no communication matrix was recorded"));
  } else {
    // Off the root: statistics only (no per-rank entries).
    const json j = json::parse(format(rep, TSR_OUTPUT_JSON));
    EXPECT_FALSE(j["regions"][1].contains("ranks"));
    EXPECT_TRUE(j["regions"][1].contains("statistics"));
  }
  tsr_energy_report_destroy(&rep);
  rmdir_all(dir);
}

// ------------------------------------------------------------------ errors
TEST(Energy, ErrorsFailOnEveryRank) {
  Ctx ctx;
  const int p = world_size(), me = world_rank();
  tsr_energy_config bad = TSR_ENERGY_CONFIG_INIT;
  bad.magic = 0;
  EXPECT_EQ(tsr_energy_start(ctx, &bad), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "TSR_ENERGY_CONFIG_INIT"));
  tsr_energy_config cfg = TSR_ENERGY_CONFIG_INIT;
  cfg.meters = 8;
  EXPECT_EQ(tsr_energy_start(ctx, &cfg), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "'config->meters' = 8"));
  // Bad on the last rank only: fails everywhere, the others name that rank.
  EXPECT_EQ(tsr_energy_start(ctx, me == p - 1 ? &bad : nullptr), TSR_ERR_INVALID_ARG);
  if (me != p - 1) {
    EXPECT_TRUE(contains(tsr_last_error(ctx), "rank " + std::to_string(p - 1) + " failed"));
  }
  if (p > 1) {  // settings that differ across ranks
    cfg = TSR_ENERGY_CONFIG_INIT;
    cfg.comm_matrix = me == 0;
    EXPECT_EQ(tsr_energy_start(ctx, &cfg), TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'config->comm_matrix' differs across"));
  }
  // An open region on rank 0 only: STATE everywhere.
  if (me == 0) {
    ASSERT_EQ(tsr_region_begin(ctx, "open"), TSR_SUCCESS);
  }
  EXPECT_EQ(tsr_energy_start(ctx, nullptr), TSR_ERR_STATE);
  EXPECT_EQ(tsr_energy_stop(ctx), TSR_ERR_STATE);
  if (me == 0) {
    EXPECT_TRUE(contains(tsr_last_error(ctx), "region(s) are open"));
    ASSERT_EQ(tsr_region_end(ctx, "open"), TSR_SUCCESS);
  }
  EXPECT_EQ(tsr_energy_start(nullptr, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_stop(nullptr), TSR_ERR_INVALID_ARG);

  // Reports.
  tsr_energy_report rep = nullptr;
  EXPECT_EQ(tsr_energy_report_create(ctx, nullptr, p, &rep), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "'root' = " + std::to_string(p)));
  EXPECT_EQ(tsr_energy_report_create(ctx, nullptr, 0, me == p - 1 ? nullptr : &rep), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(rep, nullptr);
  tsr_energy_profile other = nullptr;
  ASSERT_EQ(tsr_energy_profile_parse(R"({"name": "other", "pue": 2.0})", &other), TSR_SUCCESS);
  if (p > 1) {
    EXPECT_EQ(tsr_energy_report_create(ctx, me == 0 ? other : nullptr, 0, &rep), TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(tsr_last_error(ctx), "differs across ranks")) << tsr_last_error(ctx);
    EXPECT_EQ(rep, nullptr);
  }
  int junk[4] = {0, 0, 0, 0};
  tsr_energy_profile dead = reinterpret_cast<tsr_energy_profile>(junk);  // not a profile
  EXPECT_EQ(tsr_energy_report_create(ctx, dead, 0, &rep), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "not a live energy profile"));
  // A profile passed by every rank is used.
  ASSERT_EQ(tsr_energy_report_create(ctx, other, 0, &rep), TSR_SUCCESS) << tsr_last_error(ctx);
  const std::string table = format(rep, TSR_OUTPUT_TABLE);
  EXPECT_TRUE(contains(table.c_str(), "profile: other (built-in), PUE 2.00")) << table.substr(0, 400);
  tsr_energy_profile_destroy(&other);

  int n = 0;
  const char* path = nullptr;
  tsr_energy_estimate e;
  size_t need = 0;
  EXPECT_EQ(tsr_energy_report_region_count(rep, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_report_region_count(nullptr, &n), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_report_region_path(rep, 9, &path), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'region' = 9"));
  EXPECT_EQ(tsr_energy_report_find(rep, "nope", &n), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "\"nope\""));
  EXPECT_EQ(tsr_energy_report_rank(rep, 0, p, &e), TSR_ERR_INVALID_ARG);
  if (p > 1) {
    EXPECT_EQ(tsr_energy_report_rank(rep, 0, me == 0 ? 1 : 0, &e), me == 0 ? TSR_SUCCESS : TSR_ERR_INVALID_ARG);
    if (me != 0) {
      EXPECT_TRUE(contains(tsr_last_error(nullptr), "only the report's root"));
    }
  }
  EXPECT_EQ(tsr_energy_report_stat(rep, 0, static_cast<tsr_stat>(4), &e), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_report_stat(rep, 0, TSR_STAT_SUM, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_report_format(rep, static_cast<tsr_output_format>(9), nullptr, 0, &need), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_report_format(rep, TSR_OUTPUT_JSON, nullptr, 5, &need), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_report_matrix(rep, 0, nullptr, nullptr, 1), TSR_ERR_STATE);
  EXPECT_EQ(tsr_energy_report_write(rep, TSR_OUTPUT_JSON, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_report_destroy(nullptr), TSR_ERR_INVALID_ARG);
  ASSERT_EQ(tsr_energy_report_destroy(&rep), TSR_SUCCESS);
  EXPECT_EQ(tsr_energy_report_destroy(&rep), TSR_SUCCESS);  // NULL: no-op

  // Local calls.
  tsr_region_extra x;
  EXPECT_EQ(tsr_region_extra_get(ctx, "nope", &x), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(ctx), "\"nope\""));
  EXPECT_EQ(tsr_region_extra_get(ctx, "total", nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_region_extra_get(ctx, nullptr, &x), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_flops_add(nullptr, 1), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_sample(nullptr), TSR_ERR_INVALID_ARG);
  int d = 0;
  EXPECT_EQ(tsr_energy_meter_status(ctx, &d, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_meter_status(ctx, &d, &path), TSR_SUCCESS);
  EXPECT_TRUE(contains(path, "meters not started"));
}

// ---------------------------------------------------------------- C++ API
TEST(Energy, CxxWrappers) {
  tessera::context ctx(MPI_COMM_WORLD);
  tessera::energy_config cfg;
  cfg.powercap_root = "/nonexistent/tsr-powercap";
  cfg.nvml_library = "libtsr-no-such-nvml.so.1";
  cfg.comm_matrix = true;
  tessera::energy_start(ctx, cfg);
  {
    tessera::region r(ctx, "work");
    tessera::flops_add(ctx, 100);
  }
  EXPECT_EQ(tessera::region_extra(ctx, "work").flops, 100u);
  tessera::energy_profile prof;
  EXPECT_EQ(prof.name(), "default-2025");
  EXPECT_EQ(prof.level(TSR_LEVEL_INTER_NODE).value, 3000.0);
  EXPECT_TRUE(prof.flop().second);
  tessera::energy_report rep(ctx, &prof);
  EXPECT_FALSE(rep.measured());
  EXPECT_NE(rep.source().find("model only"), std::string::npos);
  EXPECT_EQ(rep.regions(), (std::vector<std::string>{"total", "work"}));
  EXPECT_EQ(rep.stat(rep.find("work"), TSR_STAT_SUM).flops, 100u * static_cast<uint64_t>(ctx.size()));
  EXPECT_NE(rep.str().find("region work"), std::string::npos);
  if (ctx.rank() == 0) {
    EXPECT_EQ(rep.matrix(0, ctx.size()).size(), static_cast<size_t>(ctx.size() * ctx.size()));
  }
  try {
    (void)rep.find("missing");
    ADD_FAILURE() << "no exception";
  } catch (const tessera::error& e) {
    EXPECT_EQ(e.status(), TSR_ERR_INVALID_ARG);
  }
  try {
    tessera::energy_profile bad = tessera::energy_profile::parse("{\"levels\": 3}");
    ADD_FAILURE() << "no exception";
  } catch (const tessera::error& e) {
    EXPECT_EQ(e.status(), TSR_ERR_INVALID_ARG);
    EXPECT_NE(std::string(e.what()).find("'levels'"), std::string::npos) << e.what();
  }
  tessera::energy_stop(ctx);
}

}  // namespace

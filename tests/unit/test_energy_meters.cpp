// Real energy counters against fakes: a powercap sysfs tree in a temporary
// directory (package and DRAM zones summed, other zones ignored, wrap-around
// of energy_uj at max_energy_range_uj, permission errors, a zone failing
// mid-run), and NVML through the dlopen path: not present, a library without
// the NVML symbols, and a stub with per-GPU energies.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "energy/meters.hpp"

namespace {

using tsr::energy::Meters;
using tsr::energy::Nvml;
using tsr::energy::Rapl;

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// A fake /sys/class/powercap.
struct FakePowercap {
  std::string root;
  FakePowercap() {
    char tmpl[] = "/tmp/tsr_powercap_XXXXXX";
    root = mkdtemp(tmpl);
    chmod(root.c_str(), 0755);
  }
  ~FakePowercap() { std::system(("rm -rf " + root).c_str()); }
  void zone(const std::string& name, const std::string& label, uint64_t range, uint64_t energy) {
    const std::string d = root + "/" + name;
    mkdir(d.c_str(), 0755);
    put(name + "/name", label);
    put(name + "/max_energy_range_uj", std::to_string(range));
    set(name, energy);
  }
  void set(const std::string& zone, uint64_t energy) { put(zone + "/energy_uj", std::to_string(energy)); }
  void put(const std::string& rel, const std::string& text) {
    std::ofstream(root + "/" + rel) << text << "\n";
  }
};

constexpr uint64_t kRange = 262143328850ull;  // a package zone's max_energy_range_uj

TEST(Rapl, SumsPackageAndDramZonesAndIgnoresOthers) {
  FakePowercap f;
  f.zone("intel-rapl:0", "package-0", kRange, 1000);
  f.zone("intel-rapl:0:0", "core", kRange, 77);
  f.zone("intel-rapl:0:1", "dram", 65712999613ull, 500);
  f.zone("intel-rapl:1", "package-1", kRange, 2000);
  f.zone("intel-rapl:1:0", "dram", 65712999613ull, 40);
  f.zone("intel-rapl:2", "psys", kRange, 9);
  f.zone("intel-rapl-mmio:0", "package-0", kRange, 5);  // the same energy via MMIO: not used
  mkdir((f.root + "/intel-rapl").c_str(), 0755);       // the control type directory
  Rapl r;
  std::string note;
  EXPECT_EQ(r.open(f.root, &note), (1 << TSR_DOMAIN_PACKAGE) | (1 << TSR_DOMAIN_DRAM));
  EXPECT_TRUE(has(note, "2 package zone(s), 2 dram zone(s)")) << note;
  EXPECT_TRUE(has(note, "intel-rapl:0:0 (core)")) << note;
  EXPECT_TRUE(has(note, "intel-rapl:2 (psys)")) << note;
  uint64_t acc[TSR_DOMAINS] = {0, 0, 0};
  r.sample(acc);  // nothing moved since open
  EXPECT_EQ(acc[TSR_DOMAIN_PACKAGE], 0u);
  f.set("intel-rapl:0", 5000);
  f.set("intel-rapl:1", 2500);
  f.set("intel-rapl:0:1", 700);
  f.set("intel-rapl:1:0", 41);
  f.set("intel-rapl:0:0", 1000000);  // core: ignored
  r.sample(acc);
  EXPECT_EQ(acc[TSR_DOMAIN_PACKAGE], 4000u + 500u);
  EXPECT_EQ(acc[TSR_DOMAIN_DRAM], 200u + 1u);
  EXPECT_EQ(acc[TSR_DOMAIN_GPU], 0u);
  EXPECT_TRUE(r.errors().empty());
}

TEST(Rapl, WrapAroundAtMaxEnergyRange) {
  FakePowercap f;
  f.zone("intel-rapl:0", "package-0", kRange, kRange - 100);
  Rapl r;
  std::string note;
  ASSERT_EQ(r.open(f.root, &note), 1 << TSR_DOMAIN_PACKAGE) << note;
  uint64_t acc[TSR_DOMAINS] = {0, 0, 0};
  f.set("intel-rapl:0", 50);  // wrapped: 100 up to the range, then 0 -> 50
  r.sample(acc);
  EXPECT_EQ(acc[TSR_DOMAIN_PACKAGE], 150u);
  f.set("intel-rapl:0", 1050);
  r.sample(acc);
  EXPECT_EQ(acc[TSR_DOMAIN_PACKAGE], 1150u);
  f.set("intel-rapl:0", kRange);  // the top value itself, then wrap to 0
  r.sample(acc);
  f.set("intel-rapl:0", 0);
  r.sample(acc);
  EXPECT_EQ(acc[TSR_DOMAIN_PACKAGE], 1150u + (kRange - 1050));
  EXPECT_GT(r.min_range_joules(), 262143.0);
  EXPECT_LT(r.min_range_joules(), 262144.0);
}

TEST(Rapl, PermissionDeniedGivesNoDomainAndSaysWhy) {
  FakePowercap f;
  f.zone("intel-rapl:0", "package-0", kRange, 10);
  f.zone("intel-rapl:0:0", "dram", kRange, 10);
  f.zone("intel-rapl:1", "package-1", kRange, 10);
  // energy_uj root-only, as since Linux 5.10 (CVE-2020-8694); the rest readable.
  chmod((f.root + "/intel-rapl:0/energy_uj").c_str(), 0400);
  chmod((f.root + "/intel-rapl:0:0/energy_uj").c_str(), 0400);
  Rapl r;
  std::string note;
  int got = 0;
  if (geteuid() == 0) {
    // Root reads everything: read as an unprivileged user instead.
    ASSERT_EQ(seteuid(65534), 0);
    got = r.open(f.root, &note);
    ASSERT_EQ(seteuid(0), 0);
  } else {
    chmod((f.root + "/intel-rapl:0/energy_uj").c_str(), 0);
    chmod((f.root + "/intel-rapl:0:0/energy_uj").c_str(), 0);
    got = r.open(f.root, &note);
  }
  // Socket 0's package zone is unreadable, so the node's package sum would be
  // short: the package domain is dropped whole, and so is dram.
  EXPECT_EQ(got, 0) << note;
  EXPECT_TRUE(has(note, "intel-rapl:0/energy_uj: permission denied")) << note;
  EXPECT_TRUE(has(note, "no readable package or dram zone")) << note;
}

TEST(Rapl, NothingThereAndBrokenZones) {
  Rapl a;
  std::string note;
  EXPECT_EQ(a.open("/nonexistent/powercap", &note), 0);
  EXPECT_TRUE(has(note, "no powercap directory /nonexistent/powercap")) << note;
  FakePowercap empty;
  Rapl b;
  EXPECT_EQ(b.open(empty.root, &note), 0);
  EXPECT_TRUE(has(note, "no intel-rapl zone under")) << note;
  FakePowercap f;
  f.zone("intel-rapl:0", "package-0", 0, 10);  // range 0: unusable
  f.zone("intel-rapl:0:0", "dram", kRange, 10);
  Rapl c;
  EXPECT_EQ(c.open(f.root, &note), 1 << TSR_DOMAIN_DRAM);
  EXPECT_TRUE(has(note, "max_energy_range_uj: not a positive integer")) << note;
  // A zone that fails mid-run drops its domain and says so.
  uint64_t acc[TSR_DOMAINS] = {0, 0, 0};
  f.put("intel-rapl:0:0/energy_uj", "garbage");
  c.sample(acc);
  EXPECT_EQ(c.domains(), 0);
  EXPECT_EQ(acc[TSR_DOMAIN_DRAM], 0u);
  EXPECT_TRUE(has(c.errors(), "dram domain no longer read")) << c.errors();
}

TEST(Nvml, NotPresent) {
  Nvml n;
  std::string note;
  EXPECT_EQ(n.open("libtsr-no-such-nvml.so.1", &note), 0);
  EXPECT_TRUE(has(note, "NVML: not present")) << note;
  EXPECT_TRUE(has(note, "libtsr-no-such-nvml.so.1")) << note;
  uint64_t acc[TSR_DOMAINS] = {0, 0, 0};
  n.sample(acc);
  EXPECT_EQ(acc[TSR_DOMAIN_GPU], 0u);
  // A library that loads but is not NVML.
  Nvml m;
  EXPECT_EQ(m.open("libm.so.6", &note), 0);
  EXPECT_TRUE(has(note, "lacks nvmlInit_v2")) << note;
}

TEST(Nvml, StubThroughTheDlopenPath) {
  setenv("TSR_NVML_STUB_ENERGY", "1000,ns,5000", 1);
  Nvml n;
  std::string note;
  ASSERT_EQ(n.open(TSR_TEST_NVML_STUB, &note), 1 << TSR_DOMAIN_GPU) << note;
  EXPECT_TRUE(has(note, "2 of 3 GPU(s)")) << note;
  EXPECT_TRUE(has(note, "GPU 1: stub error 3")) << note;
  uint64_t acc[TSR_DOMAINS] = {0, 0, 0};
  setenv("TSR_NVML_STUB_ENERGY", "1250,ns,5001", 1);
  n.sample(acc);
  EXPECT_EQ(acc[TSR_DOMAIN_GPU], (250u + 1u) * 1000u);  // mJ -> uJ
  setenv("TSR_NVML_STUB_INIT", "9", 1);
  Nvml m;
  EXPECT_EQ(m.open(TSR_TEST_NVML_STUB, &note), 0);
  EXPECT_TRUE(has(note, "nvmlInit_v2 failed: stub error 9")) << note;
  unsetenv("TSR_NVML_STUB_INIT");
  setenv("TSR_NVML_STUB_ENERGY", "ns", 1);
  Nvml k;
  EXPECT_EQ(k.open(TSR_TEST_NVML_STUB, &note), 0);
  EXPECT_TRUE(has(note, "no GPU reports its total energy")) << note;
  unsetenv("TSR_NVML_STUB_ENERGY");
}

TEST(Meters, BothTogetherAndNoneRequested) {
  FakePowercap f;
  f.zone("intel-rapl:0", "package-0", kRange, 100);
  setenv("TSR_NVML_STUB_ENERGY", "7", 1);
  Meters m;
  m.open(TSR_METER_RAPL | TSR_METER_NVML, f.root, TSR_TEST_NVML_STUB);
  EXPECT_EQ(m.domains(), (1 << TSR_DOMAIN_PACKAGE) | (1 << TSR_DOMAIN_GPU));
  EXPECT_TRUE(has(m.status(), "RAPL: 1 package zone(s), 0 dram zone(s)")) << m.status();
  EXPECT_TRUE(has(m.status(), "NVML: 1 of 1 GPU(s)")) << m.status();
  f.set("intel-rapl:0", 160);
  setenv("TSR_NVML_STUB_ENERGY", "9", 1);
  uint64_t uj[TSR_DOMAINS];
  m.read(uj);
  EXPECT_EQ(uj[TSR_DOMAIN_PACKAGE], 60u);
  EXPECT_EQ(uj[TSR_DOMAIN_GPU], 2000u);
  m.read(uj);  // cumulative
  EXPECT_EQ(uj[TSR_DOMAIN_PACKAGE], 60u);
  EXPECT_TRUE(m.warnings().empty());
  m.open(TSR_METERS_NONE, f.root, TSR_TEST_NVML_STUB);
  EXPECT_EQ(m.domains(), 0);
  EXPECT_EQ(m.status(), "RAPL: not requested; NVML: not requested");
  unsetenv("TSR_NVML_STUB_ENERGY");
}

}  // namespace

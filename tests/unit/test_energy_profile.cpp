// Machine profiles: the shipped default (every figure with its source and
// range, the values of the reference table), user overrides level by level,
// TSR_ENERGY_PROFILE, and every malformed-profile error naming the line and
// column or the key.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tessera/tessera.h"

namespace {

bool contains(const char* hay, const std::string& needle) {
  return hay != nullptr && std::string(hay).find(needle) != std::string::npos;
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/tsr_profile_XXXXXX.json";
    const int fd = mkstemps(tmpl, 5);
    path = tmpl;
    if (fd >= 0) {
      const ssize_t n = write(fd, text.data(), text.size());
      (void)n;
      close(fd);
    }
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// Parses text; expects failure with `status` and a message containing each needle.
void expect_error(const std::string& text, tsr_status status, std::initializer_list<std::string> needles) {
  tsr_energy_profile p = nullptr;
  EXPECT_EQ(tsr_energy_profile_parse(text.c_str(), &p), status) << text;
  EXPECT_EQ(p, nullptr);
  for (const std::string& n : needles) EXPECT_TRUE(contains(tsr_last_error(nullptr), n)) << tsr_last_error(nullptr);
}

TEST(EnergyProfile, DefaultHasEveryFigureWithSourceAndRange) {
  unsetenv("TSR_ENERGY_PROFILE");
  tsr_energy_profile p = nullptr;
  ASSERT_EQ(tsr_energy_profile_load(nullptr, &p), TSR_SUCCESS) << tsr_last_error(nullptr);
  const char *name = nullptr, *file = nullptr;
  ASSERT_EQ(tsr_energy_profile_name(p, &name, &file), TSR_SUCCESS);
  EXPECT_STREQ(name, "default-2025");
  EXPECT_STREQ(file, "");
  // pJ per byte: typical, low, high (docs/ENERGY.md, reference table 3.2).
  const double want[TSR_LEVELS][3] = {{320, 25, 700},   {320, 25, 700},     {3000, 500, 6000}, {250, 100, 600},
                                      {100, 40, 250},   {2000, 1000, 30000}, {2000, 1000, 30000}};
  for (int l = 0; l < TSR_LEVELS; ++l) {
    tsr_energy_coeff c;
    ASSERT_EQ(tsr_energy_profile_level(p, static_cast<tsr_level>(l), &c), TSR_SUCCESS);
    EXPECT_EQ(c.value, want[l][0]) << l;
    EXPECT_EQ(c.low, want[l][1]) << l;
    EXPECT_EQ(c.high, want[l][2]) << l;
    EXPECT_GT(std::string(c.source).size(), 20u) << l;
    EXPECT_STREQ(c.origin, "default-2025");
  }
  tsr_energy_coeff f;
  int present = 0;
  ASSERT_EQ(tsr_energy_profile_flop(p, &f, &present), TSR_SUCCESS);
  EXPECT_EQ(present, 1);
  EXPECT_EQ(f.value, 20);
  EXPECT_EQ(f.low, 4.6);
  EXPECT_EQ(f.high, 50);
  EXPECT_TRUE(contains(f.source, "Dally"));
  double pue = 0;
  ASSERT_EQ(tsr_energy_profile_pue(p, &pue), TSR_SUCCESS);
  EXPECT_EQ(pue, 1.0);
  ASSERT_EQ(tsr_energy_profile_destroy(&p), TSR_SUCCESS);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(tsr_energy_profile_destroy(&p), TSR_SUCCESS);  // NULL: no-op
}

TEST(EnergyProfile, ShippedFileEqualsBuiltIn) {
  // The installed file and the compiled-in text are the same document.
  tsr_energy_profile a = nullptr, b = nullptr;
  ASSERT_EQ(tsr_energy_profile_load(TSR_TEST_DEFAULT_PROFILE, &a), TSR_SUCCESS) << tsr_last_error(nullptr);
  ASSERT_EQ(tsr_energy_profile_load(nullptr, &b), TSR_SUCCESS);
  const char* file = nullptr;
  ASSERT_EQ(tsr_energy_profile_name(a, nullptr, &file), TSR_SUCCESS);
  EXPECT_STREQ(file, TSR_TEST_DEFAULT_PROFILE);
  for (int l = 0; l < TSR_LEVELS; ++l) {
    tsr_energy_coeff x, y;
    ASSERT_EQ(tsr_energy_profile_level(a, static_cast<tsr_level>(l), &x), TSR_SUCCESS);
    ASSERT_EQ(tsr_energy_profile_level(b, static_cast<tsr_level>(l), &y), TSR_SUCCESS);
    EXPECT_EQ(x.value, y.value);
    EXPECT_EQ(x.low, y.low);
    EXPECT_EQ(x.high, y.high);
    EXPECT_STREQ(x.source, y.source);
  }
  tsr_energy_profile_destroy(&a);
  tsr_energy_profile_destroy(&b);
}

TEST(EnergyProfile, UserProfileOverridesLevelByLevel) {
  TempFile f(R"({
    // comments are allowed
    "format": "tessera-energy-profile/1",
    "name": "my-cluster",
    "pue": {"value": 1.25, "source": "site measurement 2025"},
    "levels": {
      "inter_node": {"pj_per_byte": 1500, "low": 1000, "high": 2000, "source": "our switch power"},
      "disk_write": {"pj_per_byte": 5000}
    }
  })");
  tsr_energy_profile p = nullptr;
  ASSERT_EQ(tsr_energy_profile_load(f.path.c_str(), &p), TSR_SUCCESS) << tsr_last_error(nullptr);
  const char *name = nullptr, *file = nullptr;
  tsr_energy_profile_name(p, &name, &file);
  EXPECT_STREQ(name, "my-cluster");
  EXPECT_EQ(std::string(file), f.path);
  tsr_energy_coeff c;
  tsr_energy_profile_level(p, TSR_LEVEL_INTER_NODE, &c);
  EXPECT_EQ(c.value, 1500);
  EXPECT_EQ(c.low, 1000);
  EXPECT_EQ(c.high, 2000);
  EXPECT_STREQ(c.source, "our switch power");
  EXPECT_EQ(std::string(c.origin), f.path);
  tsr_energy_profile_level(p, TSR_LEVEL_DISK_WRITE, &c);
  EXPECT_EQ(c.value, 5000);
  EXPECT_EQ(c.low, 5000);  // no range given: the range is the value
  EXPECT_EQ(c.high, 5000);
  EXPECT_TRUE(contains(c.source, "no source given"));
  tsr_energy_profile_level(p, TSR_LEVEL_INTRA_NODE, &c);  // kept from the default
  EXPECT_EQ(c.value, 320);
  EXPECT_STREQ(c.origin, "default-2025");
  double pue = 0;
  tsr_energy_profile_pue(p, &pue);
  EXPECT_EQ(pue, 1.25);
  tsr_energy_profile_destroy(&p);

  // The same through TSR_ENERGY_PROFILE (path NULL or "").
  setenv("TSR_ENERGY_PROFILE", f.path.c_str(), 1);
  ASSERT_EQ(tsr_energy_profile_load("", &p), TSR_SUCCESS) << tsr_last_error(nullptr);
  tsr_energy_profile_name(p, &name, nullptr);
  EXPECT_STREQ(name, "my-cluster");
  tsr_energy_profile_destroy(&p);
  setenv("TSR_ENERGY_PROFILE", "/nonexistent/dir/profile.json", 1);
  EXPECT_EQ(tsr_energy_profile_load(nullptr, &p), TSR_ERR_IO);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "/nonexistent/dir/profile.json"));
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "TSR_ENERGY_PROFILE"));
  unsetenv("TSR_ENERGY_PROFILE");
}

TEST(EnergyProfile, SyntaxErrorsNameLineAndColumn) {
  expect_error("{\n  \"levels\": {\n    \"self\": {\"pj_per_byte\": 1,}\n  }\n}", TSR_ERR_INVALID_ARG,
               {"<string>", "line 3, column"});
  expect_error("{\"name\": \"x\"", TSR_ERR_INVALID_ARG, {"line 1, column"});
  expect_error("", TSR_ERR_INVALID_ARG, {"syntax error"});
  TempFile f("{\n\n  \"name\": oops\n}");
  tsr_energy_profile p = nullptr;
  EXPECT_EQ(tsr_energy_profile_load(f.path.c_str(), &p), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), f.path));
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "line 3, column")) << tsr_last_error(nullptr);
}

TEST(EnergyProfile, BadValuesNameTheKey) {
  expect_error(R"({"levels": {"self": {"pj_per_byte": "320"}}})", TSR_ERR_INVALID_ARG,
               {"'levels.self.pj_per_byte'", "expected a number, got string"});
  expect_error(R"({"levels": {"self": {"pj_per_byte": -1}}})", TSR_ERR_INVALID_ARG,
               {"'levels.self.pj_per_byte'", ">= 0"});
  expect_error(R"({"levels": {"self": {"low": 1}}})", TSR_ERR_INVALID_ARG, {"'levels.self'", "missing 'pj_per_byte'"});
  expect_error(R"({"levels": {"inter_node": {"pj_per_byte": 10, "low": 20, "high": 30}}})", TSR_ERR_INVALID_ARG,
               {"'levels.inter_node'", "low <= pj_per_byte <= high"});
  expect_error(R"({"levels": {"infiniband": {"pj_per_byte": 10}}})", TSR_ERR_INVALID_ARG,
               {"'levels.infiniband'", "unknown level"});
  expect_error(R"({"levels": {"self": {"pj_per_byte": 10, "colour": "red"}}})", TSR_ERR_INVALID_ARG,
               {"'levels.self.colour'", "unknown key"});
  expect_error(R"({"levls": {}})", TSR_ERR_INVALID_ARG, {"'levls'", "unknown key"});
  expect_error(R"({"format": "tessera-energy-profile/2"})", TSR_ERR_INVALID_ARG, {"'format'"});
  expect_error(R"({"pue": 0.9})", TSR_ERR_INVALID_ARG, {"'pue'", ">= 1"});
  expect_error(R"({"pue": {"source": "x"}})", TSR_ERR_INVALID_ARG, {"'pue'", "missing 'value'"});
  expect_error(R"({"flop": {"pj_per_byte": 3}})", TSR_ERR_INVALID_ARG, {"'flop.pj_per_byte'"});
  expect_error(R"({"levels": {"self": {"pj_per_byte": 1}, "self": {"pj_per_byte": 2}}})", TSR_ERR_INVALID_ARG,
               {"'levels.self'", "appears twice"});
  expect_error(R"([1, 2])", TSR_ERR_INVALID_ARG, {"top level"});
  expect_error(R"({"name": ""})", TSR_ERR_INVALID_ARG, {"'name'"});
}

TEST(EnergyProfile, ArgumentErrors) {
  tsr_energy_profile p = nullptr;
  EXPECT_EQ(tsr_energy_profile_load(nullptr, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_profile_parse(nullptr, &p), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'json'"));
  EXPECT_EQ(tsr_energy_profile_load("/nonexistent.json", &p), TSR_ERR_IO);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "/nonexistent.json"));
  ASSERT_EQ(tsr_energy_profile_load(nullptr, &p), TSR_SUCCESS);
  tsr_energy_coeff c;
  int present = 0;
  EXPECT_EQ(tsr_energy_profile_level(p, TSR_LEVELS, &c), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(nullptr), "'level' = 7"));
  EXPECT_EQ(tsr_energy_profile_level(p, TSR_LEVEL_SELF, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_profile_level(nullptr, TSR_LEVEL_SELF, &c), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_profile_flop(p, &c, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_profile_pue(p, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_profile_name(nullptr, nullptr, nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_energy_profile_destroy(nullptr), TSR_ERR_INVALID_ARG);
  // An empty profile keeps the default's figures; "flop": null removes the per-flop term.
  tsr_energy_profile q = nullptr;
  ASSERT_EQ(tsr_energy_profile_parse("{}", &q), TSR_SUCCESS);
  ASSERT_EQ(tsr_energy_profile_flop(q, &c, &present), TSR_SUCCESS);
  EXPECT_EQ(present, 1);
  tsr_energy_profile_destroy(&q);
  ASSERT_EQ(tsr_energy_profile_parse(R"({"flop": null})", &q), TSR_SUCCESS);
  ASSERT_EQ(tsr_energy_profile_flop(q, &c, &present), TSR_SUCCESS);
  EXPECT_EQ(present, 0);
  EXPECT_EQ(c.value, 0);
  tsr_energy_profile_destroy(&q);
  tsr_energy_profile_destroy(&p);
}

}  // namespace

// Small helpers shared by tessera's MPI tests.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>

#include "tessera/tessera.h"

namespace tsr_test {

inline int world_rank() { int r = 0; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
inline int world_size() { int s = 0; MPI_Comm_size(MPI_COMM_WORLD, &s); return s; }

// A context on MPI_COMM_WORLD, optionally with simulated nodes.
struct Ctx {
  tsr_context ctx = nullptr;
  explicit Ctx(int ranks_per_node = 0) {
    tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
    cfg.ranks_per_node = ranks_per_node;
    EXPECT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
  }
  ~Ctx() { EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS) << tsr_last_error(ctx); }
  operator tsr_context() const { return ctx; }  // NOLINT
};

inline tsr_counters counters(tsr_context ctx, const char* path = "total") {
  tsr_counters c;
  std::memset(&c, 0, sizeof c);
  EXPECT_EQ(tsr_counters_get(ctx, path, &c), TSR_SUCCESS) << tsr_last_error(ctx);
  return c;
}

// b - a, word by word (tsr_counters is an array of uint64_t).
inline tsr_counters diff(const tsr_counters& a, const tsr_counters& b) {
  tsr_counters d;
  const uint64_t* x = reinterpret_cast<const uint64_t*>(&a);
  const uint64_t* y = reinterpret_cast<const uint64_t*>(&b);
  uint64_t* z = reinterpret_cast<uint64_t*>(&d);
  for (size_t i = 0; i < sizeof d / sizeof(uint64_t); ++i) z[i] = y[i] - x[i];
  return d;
}

inline tsr_counters zero() {
  tsr_counters c;
  std::memset(&c, 0, sizeof c);
  return c;
}

// Word-by-word comparison with the name of the first differing field.
inline ::testing::AssertionResult same(const tsr_counters& want, const tsr_counters& got) {
  const uint64_t* x = reinterpret_cast<const uint64_t*>(&want);
  const uint64_t* y = reinterpret_cast<const uint64_t*>(&got);
  for (size_t i = 0; i < sizeof want / sizeof(uint64_t); ++i)
    if (x[i] != y[i]) {
      return ::testing::AssertionFailure() << "tsr_counters word " << i << ": want " << x[i] << ", got " << y[i]
                                           << " (words: 0-11 p2p_sent/recv[3]{msgs,bytes}, 12-27 coll_calls, "
                                              "28-29 payload sent/recv, 30-41 wire sent/recv[3]{msgs,bytes}, "
                                              "42-46 h2d d2h d2d disk_r disk_w, 47-48 control)";
    }
  return ::testing::AssertionSuccess();
}

// The data part of the counters (everything but the control entry).
inline tsr_counters data_only(tsr_counters c) {
  c.control.messages = 0;
  c.control.bytes = 0;
  return c;
}

inline bool contains(const char* haystack, const std::string& needle) {
  return haystack != nullptr && std::string(haystack).find(needle) != std::string::npos;
}

}  // namespace tsr_test

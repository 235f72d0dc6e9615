// Issue 15, counts beyond INT_MAX: a transfer of more elements than the
// context's max_chunk is split into several MPI calls (lib/transport.cpp).
// A real 2^31-element transfer does not fit this test's memory and time, so
// the split path is exercised with max_chunk = 7 and 2: every
// point-to-point and collective call of the transport, blocking and
// nonblocking, odd counts, must give the same bytes as the unsplit call on a
// context with the default max_chunk, and charge exactly the same counters
// (a split call is counted once, as the logical call). Values are integers
// (also in float64), so reductions are exact whatever order MPI sums in; a
// few are checked against closed forms too.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "context.hpp"
#include "core.hpp"
#include "tessera/attention.h"
#include "tessera/tessera.h"
#include "transport.hpp"
#include "tsr_test.hpp"

using namespace tsr_test;

namespace {

constexpr int kRpn = 2;

tsr_context make(size_t max_chunk) {
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = kRpn;
  cfg.max_chunk = max_chunk;
  tsr_context ctx = nullptr;
  EXPECT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
  return ctx;
}

// One operation on communicator c: returns the bytes it produced on this
// rank; req null means blocking, else the operation is started on *req and
// completed with settle() before its buffers are read.
using Op = std::function<std::vector<unsigned char>(const tsr::Comm& c, tsr::Request* req)>;

bool g_split = false;  // the last settled request held more than one MPI request

void settle(const tsr::Comm& c, tsr::Request* req) {
  if (req == nullptr) return;
  g_split = !req->parts.empty();
  EXPECT_EQ(tsr::wait(c, req), TSR_SUCCESS) << tsr::pending_message();
  EXPECT_FALSE(req->active());
}

struct Outcome {
  std::vector<unsigned char> bytes;
  tsr_counters counted;
  bool split = false;  // nonblocking: the request held more than one MPI request
};

Outcome run(tsr_context ctx, const Op& op, bool nonblocking) {
  Outcome o;
  const tsr_counters before = counters(ctx);
  tsr::Request r;
  g_split = false;
  o.bytes = op(*ctx->world, nonblocking ? &r : nullptr);
  o.split = g_split;
  EXPECT_FALSE(r.active());
  o.counted = diff(before, counters(ctx));
  return o;
}

template <class T>
std::vector<unsigned char> raw(const std::vector<T>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

class Split : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    whole_ = make(0);
    split_ = make(GetParam());
  }
  void TearDown() override {
    EXPECT_EQ(tsr_context_destroy(&whole_), TSR_SUCCESS);
    EXPECT_EQ(tsr_context_destroy(&split_), TSR_SUCCESS);
  }
  // Runs op on both contexts, blocking and nonblocking: same bytes, same
  // counters; returns the bytes (for closed-form checks). `splits`: whether
  // the call is large enough to be split at this max_chunk (then the
  // nonblocking request must hold several MPI requests).
  std::vector<unsigned char> check(const std::string& what, const Op& op, bool splits, bool nonblocking = true) {
    const Outcome ref = run(whole_, op, false);
    EXPECT_FALSE(ref.split);
    for (bool nb : {false, true}) {
      if (nb && !nonblocking) continue;
      const Outcome got = run(split_, op, nb);
      EXPECT_TRUE(got.bytes == ref.bytes) << what << (nb ? " (nonblocking)" : " (blocking)");
      EXPECT_TRUE(same(ref.counted, got.counted)) << what << (nb ? " (nonblocking)" : " (blocking)");
      if (nb) {
        EXPECT_EQ(got.split, splits) << what;
      }
    }
    return ref.bytes;
  }
  tsr_context whole_ = nullptr, split_ = nullptr;
  const int me = world_rank(), p = world_size();
  int mod(int a) const { return ((a % p) + p) % p; }
  size_t T() const { return GetParam(); }
};

// Odd counts around the threshold, and a few times it.
const size_t kCounts[] = {0, 1, 6, 7, 8, 13, 23, 50};

template <class T>
std::vector<T> pattern(size_t n, int rank, int salt) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<int64_t>(i) * 3 + rank * 1000 + salt * 7 + 1);
  return v;
}

TEST_P(Split, PointToPoint) {
  const int right = mod(me + 1), left = mod(me - 1);
  for (size_t base : kCounts) {
    // Every rank sends base + rank elements: neighbours differ.
    const size_t out = base + static_cast<size_t>(me), in = base + static_cast<size_t>(left);
    const std::string w = "count " + std::to_string(base);
    check("send/recv " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<double> s = pattern<double>(out, me, 1), r(in, -1);
      if (req == nullptr) {
        tsr::Request a;
        EXPECT_EQ(tsr::recv(c, r.data(), in, TSR_FLOAT64, left, 5, &a), TSR_SUCCESS);
        EXPECT_EQ(tsr::send(c, s.data(), out, TSR_FLOAT64, right, 5), TSR_SUCCESS);  // blocking send
        EXPECT_EQ(tsr::wait(c, &a), TSR_SUCCESS);
      } else {  // both nonblocking
        tsr::Request sreq;
        EXPECT_EQ(tsr::recv(c, r.data(), in, TSR_FLOAT64, left, 5, req), TSR_SUCCESS);
        EXPECT_EQ(tsr::send(c, s.data(), out, TSR_FLOAT64, right, 5, &sreq), TSR_SUCCESS);
        EXPECT_EQ(sreq.parts.empty(), out <= T());
        EXPECT_EQ(tsr::wait(c, &sreq), TSR_SUCCESS);
        settle(c, req);
      }
      const std::vector<double> want = pattern<double>(in, left, 1);
      EXPECT_TRUE(r == want) << w;
      return raw(r);
    }, in > T());
    check("sendrecv " + w, [&](const tsr::Comm& c, tsr::Request*) {
      std::vector<int32_t> s = pattern<int32_t>(out, me, 2), r(in, -1);
      EXPECT_EQ(tsr::sendrecv(c, s.data(), out, right, 6, r.data(), in, left, 6, TSR_INT32), TSR_SUCCESS);
      EXPECT_TRUE(r == pattern<int32_t>(in, left, 2)) << w;
      return raw(r);
    }, false, false);
    check("sendrecv in place " + w, [&](const tsr::Comm& c, tsr::Request*) {
      std::vector<int32_t> b = pattern<int32_t>(base, me, 3);
      EXPECT_EQ(tsr::sendrecv(c, b.data(), base, right, 7, b.data(), base, left, 7, TSR_INT32), TSR_SUCCESS);
      EXPECT_TRUE(b == pattern<int32_t>(base, left, 3)) << w;
      return raw(b);
    }, false, false);
  }
}

// The point-to-point request itself: a split message is several MPI requests.
TEST_P(Split, NonblockingMessageIsSeveralRequests) {
  const int right = mod(me + 1), left = mod(me - 1);
  const size_t n = 3 * T() + 1;
  std::vector<int64_t> s = pattern<int64_t>(n, me, 4), r(n, -1);
  tsr::Request a, b;
  ASSERT_EQ(tsr::recv(*split_->world, r.data(), n, TSR_INT64, left, 8, &a), TSR_SUCCESS);
  ASSERT_EQ(tsr::send(*split_->world, s.data(), n, TSR_INT64, right, 8, &b), TSR_SUCCESS);
  EXPECT_EQ(a.parts.size(), 3u);
  EXPECT_EQ(b.parts.size(), 3u);
  int done = 0;
  while (!done) ASSERT_EQ(tsr::test(*split_->world, &a, &done), TSR_SUCCESS);
  EXPECT_FALSE(a.active());
  ASSERT_EQ(tsr::wait(*split_->world, &b), TSR_SUCCESS);
  EXPECT_TRUE(r == pattern<int64_t>(n, left, 4));
}

TEST_P(Split, Collectives) {
  const int root = p - 1;
  for (size_t n : kCounts) {
    const std::string w = "count " + std::to_string(n);
    const bool one = n > T();                                      // one buffer of n
    const size_t per = std::max<size_t>(1, T() / static_cast<size_t>(p));
    const bool blocks = n > per;                                    // p blocks of n, in chunks of per
    check("bcast " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<int32_t> b = me == root ? pattern<int32_t>(n, me, 5) : std::vector<int32_t>(n, -1);
      EXPECT_EQ(tsr::bcast(c, b.data(), n, TSR_INT32, root, req), TSR_SUCCESS);
      settle(c, req);
      return raw(b);
    }, one);
    check("reduce " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<double> s = pattern<double>(n, me, 6), r(n, -1);
      EXPECT_EQ(tsr::reduce(c, s.data(), r.data(), n, TSR_FLOAT64, TSR_SUM, 0, req), TSR_SUCCESS);
      settle(c, req);
      return raw(me == 0 ? r : std::vector<double>());
    }, one);
    check("reduce in place " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<int64_t> s = pattern<int64_t>(n, me, 7);
      EXPECT_EQ(tsr::reduce(c, s.data(), me == 0 ? s.data() : nullptr, n, TSR_INT64, TSR_MAX, 0, req), TSR_SUCCESS);
      settle(c, req);
      return raw(me == 0 ? s : std::vector<int64_t>());
    }, one);
    const std::vector<unsigned char> sum = check("allreduce " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<double> s = pattern<double>(n, me, 8), r(n, -1);
      EXPECT_EQ(tsr::allreduce(c, s.data(), r.data(), n, TSR_FLOAT64, TSR_SUM, req), TSR_SUCCESS);
      settle(c, req);
      return raw(r);
    }, one);
    for (size_t i = 0; i < n; ++i) {  // closed form: sum over ranks of 3i + 1000r + 57
      double v;
      std::memcpy(&v, sum.data() + i * sizeof v, sizeof v);
      EXPECT_EQ(v, p * (3.0 * i + 57) + 1000.0 * p * (p - 1) / 2) << w << " element " << i;
    }
    check("allreduce in place " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<int32_t> b = pattern<int32_t>(n, me, 9);
      EXPECT_EQ(tsr::allreduce(c, b.data(), b.data(), n, TSR_INT32, TSR_MIN, req), TSR_SUCCESS);
      settle(c, req);
      return raw(b);
    }, one);
    const std::vector<unsigned char> ag = check("allgather " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<int32_t> s = pattern<int32_t>(n, me, 10), r(n * p, -1);
      EXPECT_EQ(tsr::allgather(c, s.data(), n, r.data(), TSR_INT32, req), TSR_SUCCESS);
      settle(c, req);
      return raw(r);
    }, blocks);
    for (int r = 0; r < p && n > 0; ++r) {  // (memcmp of no bytes still needs pointers)
      const std::vector<int32_t> want = pattern<int32_t>(n, r, 10);
      EXPECT_EQ(std::memcmp(ag.data() + r * n * 4, want.data(), n * 4), 0) << w << " block " << r;
    }
    check("allgather in place " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<int32_t> r(n * p, -1);
      const std::vector<int32_t> s = pattern<int32_t>(n, me, 11);
      std::copy(s.begin(), s.end(), r.begin() + static_cast<std::ptrdiff_t>(n * me));
      EXPECT_EQ(tsr::allgather(c, r.data() + n * me, n, r.data(), TSR_INT32, req), TSR_SUCCESS);
      settle(c, req);
      return raw(r);
    }, blocks);
    // Uneven blocks with gaps between them in rbuf.
    std::vector<size_t> counts(p), displs(p);
    size_t end = 0, total = 0;
    for (int r = 0; r < p; ++r) {
      counts[r] = n + 2 * static_cast<size_t>(r);
      displs[r] = end + 1;
      end = displs[r] + counts[r];
      total += counts[r];
    }
    // Split calls: one MPI request per chunk of each block.
    size_t chunks = 0;
    for (int r = 0; r < p; ++r) chunks += (counts[r] + T() - 1) / T();
    // (On one rank allgatherv is a local copy: no MPI call at all.)
    const bool vsplit = (end > T() || counts[p - 1] > T()) && chunks > 1 && p > 1;
    const bool rsplit = total > T() && chunks > 1;
    check("allgatherv " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<int64_t> s = pattern<int64_t>(counts[me], me, 12), r(end, -1);
      EXPECT_EQ(tsr::allgatherv(c, s.data(), counts[me], r.data(), counts.data(), displs.data(), TSR_INT64, req),
                TSR_SUCCESS);
      settle(c, req);
      for (int q = 0; q < p; ++q)
        for (size_t i = 0; i < counts[q]; ++i)
          EXPECT_EQ(r[displs[q] + i], pattern<int64_t>(counts[q], q, 12)[i]) << w;
      return raw(r);
    }, vsplit);
    check("reduce_scatterv " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<double> s = pattern<double>(total, me, 13), r(counts[me], -1);
      EXPECT_EQ(tsr::reduce_scatterv(c, s.data(), r.data(), counts.data(), TSR_FLOAT64, TSR_SUM, req), TSR_SUCCESS);
      settle(c, req);
      return raw(r);
    }, rsplit);
    check("reduce_scatter " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<int32_t> s = pattern<int32_t>(n * p, me, 14), r(n, -1);
      EXPECT_EQ(tsr::reduce_scatter(c, s.data(), r.data(), n, TSR_INT32, TSR_SUM, req), TSR_SUCCESS);
      settle(c, req);
      return raw(r);
    }, n * p > T() && n * p > 1);
    check("alltoall " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<int32_t> s = pattern<int32_t>(n * p, me, 15), r(n * p, -1);
      EXPECT_EQ(tsr::alltoall(c, s.data(), r.data(), n, TSR_INT32, req), TSR_SUCCESS);
      settle(c, req);
      return raw(r);
    }, blocks);
    check("gather " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<double> s = pattern<double>(n, me, 16), r(me == 1 % p ? n * p : 0, -1);
      EXPECT_EQ(tsr::gather(c, s.data(), n, r.data(), TSR_FLOAT64, 1 % p, req), TSR_SUCCESS);
      settle(c, req);
      return raw(r);
    }, blocks);
    check("scatter " + w, [&](const tsr::Comm& c, tsr::Request* req) {
      std::vector<double> s = me == 0 ? pattern<double>(n * p, me, 17) : std::vector<double>(), r(n, -1);
      EXPECT_EQ(tsr::scatter(c, s.data(), n, r.data(), TSR_FLOAT64, 0, req), TSR_SUCCESS);
      settle(c, req);
      return raw(r);
    }, blocks);
  }
}

// The public API over a split context: the accounted collectives and the ring
// exchange give the same values and counters as with the default max_chunk.
TEST_P(Split, PublicCollectivesAndRingExchange) {
  tsr_grid g[2] = {nullptr, nullptr};
  tsr_ring ring[2] = {nullptr, nullptr};
  const int dims[3] = {p, 1, 1};
  tsr_context ctxs[2] = {whole_, split_};
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(tsr_grid_create(ctxs[k], TSR_GRID_1D, dims, &g[k]), TSR_SUCCESS) << tsr_last_error(ctxs[k]);
    ASSERT_EQ(tsr_ring_create_comm(ctxs[k], MPI_COMM_WORLD, &ring[k]), TSR_SUCCESS) << tsr_last_error(ctxs[k]);
  }
  const size_t n = 2 * T() + 3;
  std::vector<double> out[2], all[2];
  tsr_counters got[2];
  for (int k = 0; k < 2; ++k) {
    const tsr_counters before = counters(ctxs[k]);
    std::vector<double> s = pattern<double>(n * p, me, 18), r(n * p, -1), a(n, 0);
    EXPECT_EQ(tsr_allreduce(g[k], TSR_AXIS_ALL, s.data(), r.data(), n, TSR_FLOAT64, TSR_SUM), TSR_SUCCESS);
    EXPECT_EQ(tsr_alltoall(g[k], TSR_AXIS_ALL, s.data(), r.data() , n, TSR_FLOAT64), TSR_SUCCESS);
    EXPECT_EQ(tsr_shift(g[k], TSR_AXIS_ALL, s.data(), a.data(), n, TSR_FLOAT64, 1), TSR_SUCCESS);
    // Ring exchange: one circulating and one accumulating buffer of odd
    // counts that differ across ranks.
    const size_t rn = n + static_cast<size_t>(me);
    std::vector<double> circ = pattern<double>(rn, me, 19), acc(rn, 0);
    tsr_ring_buffer b[2] = {{circ.data(), rn, TSR_FLOAT64, TSR_RING_CIRCULATE},
                            {acc.data(), rn, TSR_FLOAT64, TSR_RING_ACCUMULATE}};
    std::vector<double> seen;  // per step: the sum of the source's circulating block
    auto fn = [](const tsr_ring_step* st, void* user) -> tsr_status {
      const double* blk = static_cast<const double*>(st->blocks[0]);
      double sum = 0;
      for (size_t i = 0; i < st->counts[0]; ++i) sum += blk[i];
      static_cast<std::vector<double>*>(user)->push_back(sum);
      double* mine = static_cast<double*>(st->blocks[1]);
      for (size_t i = 0; i < st->counts[1]; ++i) mine[i] = 100.0 * st->rank + static_cast<double>(i);
      return TSR_SUCCESS;
    };
    EXPECT_EQ(tsr_ring_exchange(ring[k], b, 2, fn, &seen), TSR_SUCCESS) << tsr_last_error(ctxs[k]);
    ASSERT_EQ(seen.size(), static_cast<size_t>(p));
    for (int st = 0; st < p; ++st) {
      const int src = mod(me - st);
      const std::vector<double> v = pattern<double>(n + static_cast<size_t>(src), src, 19);
      double want = 0;
      for (double x : v) want += x;
      EXPECT_EQ(seen[st], want) << "step " << st;
    }
    for (size_t i = 0; i < rn; ++i) EXPECT_EQ(acc[i], 100.0 * p * (p - 1) / 2 + p * static_cast<double>(i)) << i;
    a.insert(a.end(), acc.begin(), acc.end());
    out[k] = r;
    out[k].insert(out[k].end(), a.begin(), a.end());
    all[k] = s;
    got[k] = diff(before, counters(ctxs[k]));
  }
  EXPECT_TRUE(out[0] == out[1]);
  EXPECT_TRUE(same(got[0], got[1]));
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(tsr_ring_destroy(&ring[k]), TSR_SUCCESS);
    EXPECT_EQ(tsr_grid_destroy(&g[k]), TSR_SUCCESS);
  }
}

INSTANTIATE_TEST_SUITE_P(MaxChunk, Split, ::testing::Values(size_t{7}, size_t{2}),
                         [](const ::testing::TestParamInfo<size_t>& i) { return "max_chunk_" + std::to_string(i.param); });

// The setting: 0 is the default (INT_MAX), above INT_MAX is refused, and
// ranks must agree.
TEST(SplitSetting, ValidatedAndAgreed) {
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  EXPECT_EQ(cfg.max_chunk, 0u);
  tsr_context ctx = nullptr;
  ASSERT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_SUCCESS);
  EXPECT_EQ(ctx->world->max_chunk(), static_cast<size_t>(INT_MAX));
  ASSERT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
  cfg.max_chunk = static_cast<size_t>(INT_MAX) + 1;
  EXPECT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(tsr_last_error(nullptr), "config->max_chunk"), nullptr) << tsr_last_error(nullptr);
  EXPECT_EQ(ctx, nullptr);
  if (world_size() > 1) {
    cfg.max_chunk = world_rank() == 0 ? 7 : 8;
    EXPECT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_ERR_INVALID_ARG);
    EXPECT_NE(std::strstr(tsr_last_error(nullptr), "'config->max_chunk' differs"), nullptr) << tsr_last_error(nullptr);
  }
  // A config from before the field (smaller size) keeps the default.
  cfg.max_chunk = 3;
  cfg.size = offsetof(tsr_context_config, max_chunk);
  ASSERT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), TSR_SUCCESS);
  EXPECT_EQ(ctx->world->max_chunk(), static_cast<size_t>(INT_MAX));
  ASSERT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
}

}  // namespace

// The collective wire models over many communicator sizes: what one rank sends
// another receives (edge by edge), and the totals equal the textbook volumes.
#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "transport.hpp"

namespace {

using Edges = std::map<std::pair<int, int>, std::pair<uint64_t, uint64_t>>;  // (from,to) -> (msgs, bytes)

// Checks that every rank's sent edges match the receivers' recv edges, and
// returns the total bytes sent.
template <class Model>
uint64_t consistent(int p, Model model) {
  Edges out, in;
  uint64_t total = 0;
  for (int r = 0; r < p; ++r) {
    tsr::WireModel m = model(r);
    for (const tsr::WireEdge& e : m.sent) {
      auto& x = out[{r, e.peer}];
      x.first += e.messages;
      x.second += e.bytes;
      total += e.bytes;
      EXPECT_NE(e.peer, r) << "no self edges in collective models";
    }
    for (const tsr::WireEdge& e : m.recv) {
      auto& x = in[{e.peer, r}];
      x.first += e.messages;
      x.second += e.bytes;
    }
  }
  EXPECT_EQ(out, in) << "sent and received edges differ at p = " << p;
  return total;
}

TEST(Models, EdgesMatchAndTotalsAreTextbook) {
  for (int p = 1; p <= 40; ++p) {
    const uint64_t n = 96;
    for (int root : {0, p / 2, p - 1}) {
      EXPECT_EQ(consistent(p, [&](int r) { return tsr::model_bcast(r, p, root, n); }), (p - 1) * n);
      EXPECT_EQ(consistent(p, [&](int r) { return tsr::model_reduce(r, p, root, n); }), (p - 1) * n);
      EXPECT_EQ(consistent(p, [&](int r) { return tsr::model_gather(r, p, root, n); }), (p - 1) * n);
      EXPECT_EQ(consistent(p, [&](int r) { return tsr::model_scatter(r, p, root, n); }), (p - 1) * n);
    }
    for (uint64_t count : {1u, 7u, 1000u})
      EXPECT_EQ(consistent(p, [&](int r) { return tsr::model_allreduce(r, p, count, 4); }), 2u * (p - 1) * count * 4);
    std::vector<uint64_t> blocks(static_cast<size_t>(p));
    uint64_t sum = 0;
    for (int r = 0; r < p; ++r) sum += blocks[static_cast<size_t>(r)] = 8u * static_cast<uint64_t>(r % 3 + 1);
    EXPECT_EQ(consistent(p, [&](int r) { return tsr::model_allgatherv(r, p, blocks); }), (p - 1) * sum);
    EXPECT_EQ(consistent(p, [&](int r) { return tsr::model_reduce_scatterv(r, p, blocks); }), (p - 1) * sum);
    EXPECT_EQ(consistent(p, [&](int r) { return tsr::model_alltoall(r, p, n); }), static_cast<uint64_t>(p) * (p - 1) * n);
    EXPECT_EQ(consistent(p, [&](int r) { return tsr::model_barrier(r, p); }), 0u);
    // A binomial tree has depth ceil(log2 p): every rank receives at most once.
    for (int r = 0; r < p; ++r) EXPECT_LE(tsr::model_bcast(r, p, 0, n).recv.size(), 1u);
  }
}

}  // namespace

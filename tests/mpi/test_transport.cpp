// The transport: every call moves the right data and charges exactly the
// documented counters (docs/ACCOUNTING.md). Expectations are computed here by
// simulating each assumed algorithm step by step, not with the library's
// closed forms. Nodes are simulated (2 ranks per node) so that all three peer
// classes occur.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "context.hpp"
#include "core.hpp"
#include "transport.hpp"
#include "tsr_test.hpp"

using namespace tsr_test;

namespace {

constexpr int kRpn = 2;  // simulated ranks per node

struct Fixture : ::testing::Test {
  Ctx ctx{kRpn};
  const tsr::Comm& w() const { return *ctx.ctx->world; }
  int me = world_rank(), p = world_size();
  tsr_peer_class cls(int peer) const {
    return peer == me ? TSR_PEER_SELF : peer / kRpn == me / kRpn ? TSR_PEER_NODE : TSR_PEER_REMOTE;
  }
  int mod(int a) const { return ((a % p) + p) % p; }
  // Adds a modelled wire edge to the expectation.
  void wire_sent(tsr_counters& e, int peer, uint64_t msgs, uint64_t bytes) const {
    e.coll_wire_sent[cls(peer)].messages += msgs;
    e.coll_wire_sent[cls(peer)].bytes += bytes;
  }
  void wire_recv(tsr_counters& e, int peer, uint64_t msgs, uint64_t bytes) const {
    e.coll_wire_recv[cls(peer)].messages += msgs;
    e.coll_wire_recv[cls(peer)].bytes += bytes;
  }
  template <class F>
  tsr_counters measure(F f) {
    const tsr_counters before = counters(ctx);
    f();
    return data_only(diff(before, counters(ctx)));
  }
};

using Transport = Fixture;

TEST_F(Transport, PointToPointRingBlockingAndNonblocking) {
  const int right = mod(me + 1), left = mod(me - 1);
  std::vector<double> out(100), in(100, -1);
  std::iota(out.begin(), out.end(), 1000.0 * me);
  tsr_counters e = zero();
  e.p2p_sent[cls(right)] = {2, 2 * 800};
  e.p2p_recv[cls(left)] = {2, 2 * 800};
  tsr_counters got = measure([&] {
    tsr::Request r[2];
    ASSERT_EQ(tsr::recv(w(), in.data(), in.size(), TSR_FLOAT64, left, 3, &r[0]), TSR_SUCCESS);
    ASSERT_EQ(tsr::send(w(), out.data(), out.size(), TSR_FLOAT64, right, 3, &r[1]), TSR_SUCCESS);
    ASSERT_EQ(tsr::wait_all(w(), r, 2), TSR_SUCCESS);
    EXPECT_EQ(in[0], 1000.0 * left);
    EXPECT_EQ(in[99], 1000.0 * left + 99);
    ASSERT_EQ(tsr::sendrecv(w(), out.data(), out.size(), right, 4, in.data(), in.size(), left, 4, TSR_FLOAT64),
              TSR_SUCCESS);
    EXPECT_EQ(in[5], 1000.0 * left + 5);
  });
  EXPECT_TRUE(same(e, got));
}

TEST_F(Transport, SendToSelfIsClassSelf) {
  std::vector<int32_t> a(7, me), b(7, -1);
  tsr_counters e = zero();
  e.p2p_sent[TSR_PEER_SELF] = {1, 28};
  e.p2p_recv[TSR_PEER_SELF] = {1, 28};
  EXPECT_TRUE(same(e, measure([&] {
    ASSERT_EQ(tsr::sendrecv(w(), a.data(), 7, me, 1, b.data(), 7, me, 1, TSR_INT32), TSR_SUCCESS);
  })));
  EXPECT_EQ(b[6], me);
}

// Binomial tree, written with "parent = v without its lowest set bit" and
// "children = v + 2^k for 2^k below v's lowest set bit" (relative ranks).
void binomial(int v, int p, int* parent, std::vector<int>* children) {
  const int low = v == 0 ? 1 << 30 : (v & -v);
  *parent = v == 0 ? -1 : v - low;
  children->clear();
  for (int bit = 1; bit < low && v + bit < p; bit <<= 1) children->push_back(v + bit);
}

TEST_F(Transport, BcastAndReduceFromEveryRoot) {
  for (int root = 0; root < p; ++root) {
    std::vector<double> buf(33, me == root ? 7.5 : 0.0);
    const uint64_t n = 33 * 8;
    int parent = 0;
    std::vector<int> kids;
    binomial(mod(me - root), p, &parent, &kids);
    tsr_counters e = zero();
    e.coll_calls[TSR_COLL_BCAST] = 1;
    (me == root ? e.coll_payload_sent : e.coll_payload_recv) = n;
    if (parent >= 0) wire_recv(e, mod(parent + root), 1, n);
    for (int k : kids) wire_sent(e, mod(k + root), 1, n);
    EXPECT_TRUE(same(e, measure([&] {
      ASSERT_EQ(tsr::bcast(w(), buf.data(), buf.size(), TSR_FLOAT64, root), TSR_SUCCESS);
    }))) << "bcast root " << root;
    EXPECT_EQ(buf[32], 7.5);

    std::vector<double> x(33, me + 1.0), y(33, -1.0);
    tsr_counters r = zero();
    r.coll_calls[TSR_COLL_REDUCE] = 1;
    r.coll_payload_sent = n;
    r.coll_payload_recv = me == root ? n : 0;
    if (parent >= 0) wire_sent(r, mod(parent + root), 1, n);
    for (int k : kids) wire_recv(r, mod(k + root), 1, n);
    EXPECT_TRUE(same(r, measure([&] {
      ASSERT_EQ(tsr::reduce(w(), x.data(), y.data(), 33, TSR_FLOAT64, TSR_SUM, root), TSR_SUCCESS);
    }))) << "reduce root " << root;
    if (me == root) {
      EXPECT_EQ(y[0], p * (p + 1) / 2.0);
    }
  }
}

// Ring all-reduce simulated step by step over chunks of count/p (+1 for the
// first count%p chunks).
void ring_allreduce(int r, int p, uint64_t count, uint64_t* sent, uint64_t* recv) {
  std::vector<uint64_t> chunk(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) chunk[static_cast<size_t>(i)] = count / p + (static_cast<uint64_t>(i) < count % p);
  auto at = [&](int i) { return chunk[static_cast<size_t>(((i % p) + p) % p)]; };
  *sent = *recv = 0;
  for (int s = 0; s < p - 1; ++s) {  // reduce-scatter
    *sent += at(r - s);
    *recv += at(r - s - 1);
  }
  for (int s = 0; s < p - 1; ++s) {  // allgather
    *sent += at(r + 1 - s);
    *recv += at(r - s);
  }
}

TEST_F(Transport, AllreduceRingModelUnevenChunks) {
  for (uint64_t count : {1u, 5u, 7u, 64u, 1001u}) {
    std::vector<float> x(count), y(count);
    for (uint64_t i = 0; i < count; ++i) x[i] = static_cast<float>(me * 1000 + i);
    uint64_t s = 0, r = 0;
    ring_allreduce(me, p, count, &s, &r);
    tsr_counters e = zero();
    e.coll_calls[TSR_COLL_ALLREDUCE] = 1;
    e.coll_payload_sent = e.coll_payload_recv = count * 4;
    if (p > 1) {
      wire_sent(e, mod(me + 1), 2 * (p - 1), s * 4);
      wire_recv(e, mod(me - 1), 2 * (p - 1), r * 4);
    }
    EXPECT_TRUE(same(e, measure([&] {
      ASSERT_EQ(tsr::allreduce(w(), x.data(), y.data(), count, TSR_FLOAT32, TSR_SUM), TSR_SUCCESS);
    }))) << "count " << count;
    const double want = 1000.0 * p * (p - 1) / 2 + static_cast<double>(p) * (count - 1);
    EXPECT_EQ(y[count - 1], static_cast<float>(want));
  }
}

TEST_F(Transport, AllreduceInPlaceNonblockingAndOps) {
  std::vector<int64_t> v(10, me + 1);
  tsr::Request req;
  ASSERT_EQ(tsr::allreduce(w(), v.data(), v.data(), v.size(), TSR_INT64, TSR_MAX, &req), TSR_SUCCESS);
  ASSERT_EQ(tsr::wait(w(), &req), TSR_SUCCESS);
  EXPECT_FALSE(req.active());
  EXPECT_EQ(v[9], p);
  std::vector<int32_t> m(3, me + 2), out(3);
  ASSERT_EQ(tsr::allreduce(w(), m.data(), out.data(), 3, TSR_INT32, TSR_MIN), TSR_SUCCESS);
  EXPECT_EQ(out[0], 2);
  std::vector<double> q(2, 2.0), qo(2);
  ASSERT_EQ(tsr::allreduce(w(), q.data(), qo.data(), 2, TSR_FLOAT64, TSR_PROD), TSR_SUCCESS);
  EXPECT_EQ(qo[1], static_cast<double>(1ull << p));
}

TEST_F(Transport, Bfloat16SumAccumulatesInFloat) {
  // bf16 of 1.0 is 0x3f80; the sum of p ones is p, exact in bf16 for p <= 256.
  std::vector<uint16_t> a(9, 0x3f80), b(9, 0);
  ASSERT_EQ(tsr::allreduce(w(), a.data(), b.data(), 9, TSR_BFLOAT16, TSR_SUM), TSR_SUCCESS);
  float f = 0;
  uint32_t u = static_cast<uint32_t>(b[4]) << 16;
  std::memcpy(&f, &u, 4);
  EXPECT_EQ(f, static_cast<float>(p));
}

TEST_F(Transport, AllgatherAndAllgathervRing) {
  const size_t c = 6;
  std::vector<int32_t> mine(c, me), all(c * static_cast<size_t>(p), -1);
  tsr_counters e = zero();
  e.coll_calls[TSR_COLL_ALLGATHER] = 1;
  e.coll_payload_sent = c * 4;
  e.coll_payload_recv = c * 4 * static_cast<uint64_t>(p);
  if (p > 1) {
    wire_sent(e, mod(me + 1), p - 1, (p - 1) * c * 4);
    wire_recv(e, mod(me - 1), p - 1, (p - 1) * c * 4);
  }
  EXPECT_TRUE(same(e, measure([&] {
    ASSERT_EQ(tsr::allgather(w(), mine.data(), c, all.data(), TSR_INT32), TSR_SUCCESS);
  })));
  for (int r = 0; r < p; ++r) EXPECT_EQ(all[static_cast<size_t>(r) * c + c - 1], r);

  // Uneven: rank r contributes r+1 elements; ring step s forwards block r-s.
  std::vector<size_t> counts(static_cast<size_t>(p)), displs(static_cast<size_t>(p));
  size_t total = 0;
  for (int r = 0; r < p; ++r) {
    counts[static_cast<size_t>(r)] = static_cast<size_t>(r) + 1;
    displs[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  std::vector<double> v(counts[static_cast<size_t>(me)], me + 0.5), out(total, -1);
  uint64_t s = 0, r = 0;
  for (int k = 0; k < p - 1; ++k) {
    s += counts[static_cast<size_t>(mod(me - k))];
    r += counts[static_cast<size_t>(mod(me - k - 1))];
  }
  tsr_counters ev = zero();
  ev.coll_calls[TSR_COLL_ALLGATHER] = 1;
  ev.coll_payload_sent = v.size() * 8;
  ev.coll_payload_recv = total * 8;
  if (p > 1) {
    wire_sent(ev, mod(me + 1), p - 1, s * 8);
    wire_recv(ev, mod(me - 1), p - 1, r * 8);
  }
  tsr::Request req;
  EXPECT_TRUE(same(ev, measure([&] {
    ASSERT_EQ(tsr::allgatherv(w(), v.data(), v.size(), out.data(), counts.data(), displs.data(), TSR_FLOAT64, &req),
              TSR_SUCCESS);
    ASSERT_EQ(tsr::wait(w(), &req), TSR_SUCCESS);
  })));
  for (int k = 0; k < p; ++k) EXPECT_EQ(out[displs[static_cast<size_t>(k)]], k + 0.5);
}

TEST_F(Transport, ReduceScatterRingEvenAndUneven) {
  std::vector<size_t> counts(static_cast<size_t>(p));
  size_t total = 0;
  for (int r = 0; r < p; ++r) total += counts[static_cast<size_t>(r)] = static_cast<size_t>(2 * r + 1);
  std::vector<double> in(total, 1.0), out(counts[static_cast<size_t>(me)], 0);
  uint64_t s = 0, r = 0;
  for (int k = 0; k < p - 1; ++k) {  // step k: send block me-k-1, receive block me-k-2
    s += counts[static_cast<size_t>(mod(me - k - 1))];
    r += counts[static_cast<size_t>(mod(me - k - 2))];
  }
  tsr_counters e = zero();
  e.coll_calls[TSR_COLL_REDUCE_SCATTER] = 1;
  e.coll_payload_sent = total * 8;
  e.coll_payload_recv = out.size() * 8;
  if (p > 1) {
    wire_sent(e, mod(me + 1), p - 1, s * 8);
    wire_recv(e, mod(me - 1), p - 1, r * 8);
  }
  EXPECT_TRUE(same(e, measure([&] {
    ASSERT_EQ(tsr::reduce_scatterv(w(), in.data(), out.data(), counts.data(), TSR_FLOAT64, TSR_SUM), TSR_SUCCESS);
  })));
  EXPECT_EQ(out.back(), static_cast<double>(p));

  std::vector<int32_t> blk(4 * static_cast<size_t>(p)), got(4);
  for (size_t i = 0; i < blk.size(); ++i) blk[i] = static_cast<int32_t>(i);
  ASSERT_EQ(tsr::reduce_scatter(w(), blk.data(), got.data(), 4, TSR_INT32, TSR_SUM), TSR_SUCCESS);
  EXPECT_EQ(got[3], p * (4 * me + 3));
}

TEST_F(Transport, AlltoallGatherScatterBarrier) {
  const size_t c = 3;
  std::vector<int32_t> s(c * static_cast<size_t>(p)), r(c * static_cast<size_t>(p), -1);
  for (int q = 0; q < p; ++q)
    for (size_t i = 0; i < c; ++i) s[static_cast<size_t>(q) * c + i] = 100 * me + q;
  tsr_counters e = zero();
  e.coll_calls[TSR_COLL_ALLTOALL] = 1;
  e.coll_payload_sent = e.coll_payload_recv = c * 4 * static_cast<uint64_t>(p);
  for (int q = 0; q < p; ++q)
    if (q != me) {
      wire_sent(e, q, 1, c * 4);
      wire_recv(e, q, 1, c * 4);
    }
  EXPECT_TRUE(same(e, measure([&] {
    ASSERT_EQ(tsr::alltoall(w(), s.data(), r.data(), c, TSR_INT32), TSR_SUCCESS);
  })));
  for (int q = 0; q < p; ++q) EXPECT_EQ(r[static_cast<size_t>(q) * c], 100 * q + me);

  const int root = p - 1;
  std::vector<double> one(2, me), all(2 * static_cast<size_t>(p), -1);
  tsr_counters g = zero();
  g.coll_calls[TSR_COLL_GATHER] = 1;
  g.coll_payload_sent = 16;
  g.coll_payload_recv = me == root ? 16 * static_cast<uint64_t>(p) : 0;
  if (me != root) wire_sent(g, root, 1, 16);
  else
    for (int q = 0; q < p; ++q)
      if (q != root) wire_recv(g, q, 1, 16);
  EXPECT_TRUE(same(g, measure([&] {
    ASSERT_EQ(tsr::gather(w(), one.data(), 2, all.data(), TSR_FLOAT64, root), TSR_SUCCESS);
  })));
  if (me == root) {
    for (int q = 0; q < p; ++q) EXPECT_EQ(all[2 * static_cast<size_t>(q) + 1], q);
  }

  for (int q = 0; q < p; ++q) all[2 * static_cast<size_t>(q)] = all[2 * static_cast<size_t>(q) + 1] = 10.0 * q;
  tsr_counters sc = zero();
  sc.coll_calls[TSR_COLL_SCATTER] = 1;
  sc.coll_payload_sent = me == root ? 16 * static_cast<uint64_t>(p) : 0;
  sc.coll_payload_recv = 16;
  if (me != root) wire_recv(sc, root, 1, 16);
  else
    for (int q = 0; q < p; ++q)
      if (q != root) wire_sent(sc, q, 1, 16);
  EXPECT_TRUE(same(sc, measure([&] {
    ASSERT_EQ(tsr::scatter(w(), all.data(), 2, one.data(), TSR_FLOAT64, root), TSR_SUCCESS);
  })));
  EXPECT_EQ(one[1], 10.0 * me);

  // Dissemination barrier: ceil(log2 p) zero-byte rounds.
  tsr_counters b = zero();
  b.coll_calls[TSR_COLL_BARRIER] = 1;
  for (int d = 1; d < p; d *= 2) {
    wire_sent(b, mod(me + d), 1, 0);
    wire_recv(b, mod(me - d), 1, 0);
  }
  tsr::Request req;
  EXPECT_TRUE(same(b, measure([&] {
    ASSERT_EQ(tsr::barrier(w(), &req), TSR_SUCCESS);
    int done = 0;
    while (!done) ASSERT_EQ(tsr::test(w(), &req, &done), TSR_SUCCESS);
  })));
}

TEST_F(Transport, ControlTrafficIsSeparate) {
  const tsr_counters before = counters(ctx);
  double x = 1, y = 0;
  ASSERT_EQ(tsr::allreduce(w(), &x, &y, 1, TSR_FLOAT64, TSR_SUM, nullptr, tsr::Traffic::control), TSR_SUCCESS);
  const tsr_counters d = diff(before, counters(ctx));
  EXPECT_TRUE(same(zero(), data_only(d)));
  uint64_t s = 0, r = 0;
  ring_allreduce(me, p, 1, &s, &r);
  EXPECT_EQ(d.control.bytes, 8 * (s + r));
  EXPECT_EQ(d.control.messages, p > 1 ? 4u * (p - 1) : 0u);
}

TEST_F(Transport, RegionsChargeEveryOpenRegion) {
  ASSERT_EQ(tsr_region_begin(ctx, "outer"), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_begin(ctx, "inner"), TSR_SUCCESS);
  double x = 0;
  ASSERT_EQ(tsr::sendrecv(w(), &x, 1, me, 0, &x, 1, me, 0, TSR_FLOAT64), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "inner"), TSR_SUCCESS);
  ASSERT_EQ(tsr::sendrecv(w(), &x, 1, me, 0, &x, 1, me, 0, TSR_FLOAT64), TSR_SUCCESS);
  ASSERT_EQ(tsr_region_end(ctx, "outer"), TSR_SUCCESS);
  EXPECT_EQ(counters(ctx, "outer/inner").p2p_sent[TSR_PEER_SELF].bytes, 8u);
  EXPECT_EQ(counters(ctx, "outer").p2p_sent[TSR_PEER_SELF].bytes, 16u);
  EXPECT_EQ(counters(ctx, "total").p2p_recv[TSR_PEER_SELF].messages, 2u);
}

TEST_F(Transport, ErrorsComeBackAsStatuses) {
  double x = 0;
  // An MPI error on the library's communicator is returned, not fatal.
  EXPECT_EQ(tsr::send(w(), &x, 1, TSR_FLOAT64, me, -5), TSR_ERR_MPI);
  EXPECT_TRUE(contains(tsr::pending_message().c_str(), "MPI_Send")) << tsr::pending_message();
  EXPECT_EQ(tsr::send(w(), nullptr, 1, TSR_FLOAT64, me, 0), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr::pending_message().c_str(), "'buf'"));
  EXPECT_EQ(tsr::send(w(), &x, 1, static_cast<tsr_dtype>(42), me, 0), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr::pending_message().c_str(), "'type'"));
  EXPECT_EQ(tsr::recv(w(), &x, 1, TSR_FLOAT64, p, 0), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr::pending_message().c_str(), "'peer'"));
  EXPECT_EQ(tsr::bcast(w(), &x, 1, TSR_FLOAT64, -1), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr::pending_message().c_str(), "'root'"));
  EXPECT_EQ(tsr::allreduce(w(), &x, &x, 1, TSR_FLOAT64, static_cast<tsr_op>(9)), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr::pending_message().c_str(), "'op'"));
  EXPECT_EQ(tsr::send(w(), &x, static_cast<size_t>(PTRDIFF_MAX) + 1, TSR_BYTE, me, 0), TSR_ERR_UNSUPPORTED);
  EXPECT_TRUE(contains(tsr::pending_message().c_str(), "PTRDIFF_MAX"));
  // None of the rejected calls was charged.
  EXPECT_TRUE(same(zero(), data_only(counters(ctx))));
}

TEST_F(Transport, AgreeNamesTheFailingRank) {
  const int bad = p - 1;
  tsr_status local = me == bad ? tsr::fail(TSR_ERR_SHAPE, "argument 'm' is wrong here") : TSR_SUCCESS;
  EXPECT_EQ(tsr::agree(w(), local), TSR_ERR_SHAPE);
  if (me == bad) {
    EXPECT_EQ(tsr::pending_message(), "argument 'm' is wrong here");
  } else {
    EXPECT_TRUE(contains(tsr::pending_message().c_str(), "rank " + std::to_string(bad) + " failed: argument 'm'"));
  }
  uint64_t v = me == 0 ? 1 : 2;
  EXPECT_EQ(tsr::agree(w(), TSR_SUCCESS, &v), p > 1 ? TSR_ERR_INVALID_ARG : TSR_SUCCESS);
  v = 5;
  EXPECT_EQ(tsr::agree(w(), TSR_SUCCESS, &v), TSR_SUCCESS);
}

}  // namespace

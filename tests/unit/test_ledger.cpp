// The ledger: O(1) charging to the innermost frame, folded on region end and
// on read, so that every region reads inclusive counts at all times.
#include <gtest/gtest.h>

#include "ledger.hpp"

namespace {

uint64_t sent(const tsr::Ledger& l, const char* path) {
  tsr_counters c;
  EXPECT_TRUE(l.get(path, &c)) << path;
  return c.p2p_sent[TSR_PEER_NODE].bytes;
}

TEST(Ledger, InclusiveCountsWhileOpenAndAfterClose) {
  tsr::Ledger l;
  l.p2p_sent(TSR_PEER_NODE, 1, tsr::Traffic::data);
  ASSERT_EQ(l.begin("a"), TSR_SUCCESS);
  l.p2p_sent(TSR_PEER_NODE, 10, tsr::Traffic::data);
  ASSERT_EQ(l.begin("b"), TSR_SUCCESS);
  l.p2p_sent(TSR_PEER_NODE, 100, tsr::Traffic::data);
  EXPECT_EQ(sent(l, "total"), 111u);
  EXPECT_EQ(sent(l, "a"), 110u);
  EXPECT_EQ(sent(l, "a/b"), 100u);
  ASSERT_EQ(l.end("b"), TSR_SUCCESS);
  l.p2p_sent(TSR_PEER_NODE, 1000, tsr::Traffic::data);
  EXPECT_EQ(sent(l, "a/b"), 100u);
  EXPECT_EQ(sent(l, "a"), 1110u);
  ASSERT_EQ(l.end("a"), TSR_SUCCESS);
  EXPECT_EQ(sent(l, "total"), 1111u);
  // Re-entering a path accumulates.
  ASSERT_EQ(l.begin("a"), TSR_SUCCESS);
  ASSERT_EQ(l.begin("b"), TSR_SUCCESS);
  l.p2p_sent(TSR_PEER_NODE, 5, tsr::Traffic::data);
  EXPECT_EQ(sent(l, "a/b"), 105u);
  ASSERT_EQ(l.end("b"), TSR_SUCCESS);
  ASSERT_EQ(l.end("a"), TSR_SUCCESS);
  EXPECT_EQ(sent(l, "a"), 1115u);
  EXPECT_EQ(sent(l, "total"), 1116u);
  const auto snap = l.snapshot();
  ASSERT_EQ(snap.size(), 3u);
  EXPECT_EQ(snap.at("a/b").p2p_sent[TSR_PEER_NODE].messages, 2u);
  EXPECT_EQ(snap.at("total").p2p_sent[TSR_PEER_NODE].messages, 5u);
}

TEST(Ledger, EveryEntryAndControl) {
  tsr::Ledger l;
  ASSERT_EQ(l.begin("x"), TSR_SUCCESS);
  l.p2p_recv(TSR_PEER_REMOTE, 7, tsr::Traffic::data);
  l.coll_call(TSR_COLL_BCAST, 3, 4, tsr::Traffic::data);
  l.coll_call(TSR_COLL_BCAST, 3, 4, tsr::Traffic::control);  // not a data call
  l.coll_wire_sent(TSR_PEER_SELF, 2, 9, tsr::Traffic::data);
  l.coll_wire_recv(TSR_PEER_NODE, 3, 11, tsr::Traffic::data);
  l.coll_wire_sent(TSR_PEER_NODE, 1, 24, tsr::Traffic::control);
  l.p2p_sent(TSR_PEER_NODE, 8, tsr::Traffic::control);
  l.disk_read(1);
  l.disk_write(2);
  l.host_to_device(3);
  l.device_to_host(4);
  l.device_to_device(5);
  ASSERT_EQ(l.end("x"), TSR_SUCCESS);
  tsr_counters c;
  ASSERT_TRUE(l.get("x", &c));
  EXPECT_EQ(c.p2p_recv[TSR_PEER_REMOTE].messages, 1u);
  EXPECT_EQ(c.p2p_recv[TSR_PEER_REMOTE].bytes, 7u);
  EXPECT_EQ(c.coll_calls[TSR_COLL_BCAST], 1u);
  EXPECT_EQ(c.coll_payload_sent, 3u);
  EXPECT_EQ(c.coll_payload_recv, 4u);
  EXPECT_EQ(c.coll_wire_sent[TSR_PEER_SELF].messages, 2u);
  EXPECT_EQ(c.coll_wire_recv[TSR_PEER_NODE].bytes, 11u);
  EXPECT_EQ(c.control.messages, 2u);
  EXPECT_EQ(c.control.bytes, 32u);
  EXPECT_EQ(c.disk_read_bytes + c.disk_write_bytes, 3u);
  EXPECT_EQ(c.host_to_device_bytes, 3u);
  EXPECT_EQ(c.device_to_host_bytes, 4u);
  EXPECT_EQ(c.device_to_device_bytes, 5u);
  EXPECT_FALSE(l.get("y", &c));
  ASSERT_EQ(l.reset(), TSR_SUCCESS);
  EXPECT_FALSE(l.get("x", &c));
}

}  // namespace

namespace {

// Device memory (issue 17, docs/ACCOUNTING.md "Device memory"): data between
// device buffers to and from the rank itself or a same-node peer is charged,
// sent side only, to device_to_device_bytes instead of the self / intra-node
// entries; to and from other nodes it stays inter-node. Exact arithmetic.
TEST(Ledger, DeviceChargesPointToPoint) {
  tsr::Ledger l;
  using tsr::Traffic;
  l.p2p_sent(TSR_PEER_SELF, 8, Traffic::data, true);
  l.p2p_sent(TSR_PEER_NODE, 100, Traffic::data, true);
  l.p2p_sent(TSR_PEER_REMOTE, 1000, Traffic::data, true);
  l.p2p_recv(TSR_PEER_NODE, 30, Traffic::data, true);
  l.p2p_recv(TSR_PEER_REMOTE, 300, Traffic::data, true);
  l.p2p_sent(TSR_PEER_NODE, 5, Traffic::data, false);   // host memory: as before
  l.p2p_sent(TSR_PEER_NODE, 24, Traffic::control, true);  // control is never device traffic
  tsr_counters c;
  ASSERT_TRUE(l.get("total", &c));
  EXPECT_EQ(c.device_to_device_bytes, 108u);
  EXPECT_EQ(c.p2p_sent[TSR_PEER_SELF].bytes, 0u);
  EXPECT_EQ(c.p2p_sent[TSR_PEER_NODE].bytes, 5u);
  EXPECT_EQ(c.p2p_sent[TSR_PEER_NODE].messages, 1u);
  EXPECT_EQ(c.p2p_sent[TSR_PEER_REMOTE].bytes, 1000u);
  EXPECT_EQ(c.p2p_sent[TSR_PEER_REMOTE].messages, 1u);
  EXPECT_EQ(c.p2p_recv[TSR_PEER_NODE].bytes, 0u);
  EXPECT_EQ(c.p2p_recv[TSR_PEER_REMOTE].bytes, 300u);
  EXPECT_EQ(c.control.bytes, 24u);
  EXPECT_EQ(c.host_to_device_bytes, 0u);
  EXPECT_EQ(c.device_to_host_bytes, 0u);
}

TEST(Ledger, DeviceChargesCollectiveWire) {
  tsr::Ledger l;
  using tsr::Traffic;
  // A rank with wire edges to itself, two same-node peers and one remote peer.
  l.coll_wire_sent(TSR_PEER_SELF, 1, 16, Traffic::data, true);
  l.coll_wire_sent(TSR_PEER_NODE, 2, 4096, Traffic::data, true);
  l.coll_wire_sent(TSR_PEER_NODE, 1, 2048, Traffic::data, true);
  l.coll_wire_sent(TSR_PEER_REMOTE, 3, 6144, Traffic::data, true);
  l.coll_wire_recv(TSR_PEER_NODE, 2, 4096, Traffic::data, true);
  l.coll_wire_recv(TSR_PEER_REMOTE, 3, 6144, Traffic::data, true);
  ASSERT_EQ(l.begin("host"), TSR_SUCCESS);
  l.coll_wire_sent(TSR_PEER_NODE, 1, 512, Traffic::data, false);
  ASSERT_EQ(l.end("host"), TSR_SUCCESS);
  tsr_counters c, h;
  ASSERT_TRUE(l.get("total", &c));
  ASSERT_TRUE(l.get("host", &h));
  EXPECT_EQ(c.device_to_device_bytes, 16u + 4096u + 2048u);
  EXPECT_EQ(c.coll_wire_sent[TSR_PEER_SELF].bytes, 0u);
  EXPECT_EQ(c.coll_wire_sent[TSR_PEER_NODE].bytes, 512u);
  EXPECT_EQ(c.coll_wire_sent[TSR_PEER_NODE].messages, 1u);
  EXPECT_EQ(c.coll_wire_sent[TSR_PEER_REMOTE].bytes, 6144u);
  EXPECT_EQ(c.coll_wire_sent[TSR_PEER_REMOTE].messages, 3u);
  EXPECT_EQ(c.coll_wire_recv[TSR_PEER_NODE].bytes, 0u);
  EXPECT_EQ(c.coll_wire_recv[TSR_PEER_REMOTE].bytes, 6144u);
  EXPECT_EQ(h.device_to_device_bytes, 0u);
  EXPECT_EQ(h.coll_wire_sent[TSR_PEER_NODE].bytes, 512u);
}

}  // namespace

// The byte ledger of one rank: counters per region, charged by the transport
// and the I/O layer. Not thread-safe: a context is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tsr {

// Which ledger entry a transfer is charged to.
enum class Traffic { data, control };

class Ledger {
 public:
  Ledger();

  tsr_status begin(const char* name);
  tsr_status end(const char* name);
  tsr_status reset();
  // Counters of a region path; nullptr if the path is unknown.
  const tsr_counters* find(const std::string& path) const;
  const std::map<std::string, tsr_counters>& regions() const { return regions_; }

  // Charging: each call adds to every open region and to "total".
  void p2p_sent(tsr_peer_class c, uint64_t bytes, Traffic t) {
    for (tsr_counters* k : open_) add(t == Traffic::data ? k->p2p_sent[c] : k->control, bytes);
  }
  void p2p_recv(tsr_peer_class c, uint64_t bytes, Traffic t) {
    for (tsr_counters* k : open_) add(t == Traffic::data ? k->p2p_recv[c] : k->control, bytes);
  }
  void coll_call(tsr_coll_kind kind, uint64_t payload_sent, uint64_t payload_recv, Traffic t) {
    if (t == Traffic::control) return;  // control collectives are charged by their wire model
    for (tsr_counters* k : open_) {
      k->coll_calls[kind] += 1;
      k->coll_payload_sent += payload_sent;
      k->coll_payload_recv += payload_recv;
    }
  }
  void coll_wire_sent(tsr_peer_class c, uint64_t msgs, uint64_t bytes, Traffic t) {
    for (tsr_counters* k : open_) add(t == Traffic::data ? k->coll_wire_sent[c] : k->control, bytes, msgs);
  }
  void coll_wire_recv(tsr_peer_class c, uint64_t msgs, uint64_t bytes, Traffic t) {
    for (tsr_counters* k : open_) {
      // Control traffic counts what this rank sends and receives together.
      add(t == Traffic::data ? k->coll_wire_recv[c] : k->control, bytes, msgs);
    }
  }
  void disk_read(uint64_t bytes) { for (tsr_counters* k : open_) k->disk_read_bytes += bytes; }
  void disk_write(uint64_t bytes) { for (tsr_counters* k : open_) k->disk_write_bytes += bytes; }
  void host_to_device(uint64_t bytes) { for (tsr_counters* k : open_) k->host_to_device_bytes += bytes; }
  void device_to_host(uint64_t bytes) { for (tsr_counters* k : open_) k->device_to_host_bytes += bytes; }
  void device_to_device(uint64_t bytes) { for (tsr_counters* k : open_) k->device_to_device_bytes += bytes; }

  int open_depth() const { return static_cast<int>(open_.size()) - 1; }

 private:
  static void add(tsr_traffic& t, uint64_t bytes, uint64_t msgs = 1) {
    t.messages += msgs;
    t.bytes += bytes;
  }
  std::map<std::string, tsr_counters> regions_;  // node-based: pointers stay valid
  std::vector<tsr_counters*> open_;              // "total" first, then the open stack
  std::vector<std::string> paths_;               // paths of open_ (same order)
};

}  // namespace tsr

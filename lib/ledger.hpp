// The byte ledger of one rank: counters per region, charged by the transport
// and the I/O layer. Not thread-safe: a context is used by one thread at a time.
//
// Charging is O(1) whatever the nesting depth: a charge goes to the innermost
// open frame only; when a region ends, its frame is folded into the region's
// stored counters and into the enclosing frame. Reads fold the open frames
// on the fly, so every region always reads inclusive counts.
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
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  tsr_status begin(const char* name);
  tsr_status end(const char* name);
  tsr_status reset();
  // Inclusive counters of a region path; false if the path is unknown.
  bool get(const std::string& path, tsr_counters* out) const;
  // Every region's inclusive counters, by path ("total" included).
  std::map<std::string, tsr_counters> snapshot() const;

  void p2p_sent(tsr_peer_class c, uint64_t bytes, Traffic t) {
    add(t == Traffic::data ? top_->p2p_sent[c] : top_->control, 1, bytes);
  }
  void p2p_recv(tsr_peer_class c, uint64_t bytes, Traffic t) {
    add(t == Traffic::data ? top_->p2p_recv[c] : top_->control, 1, bytes);
  }
  void coll_call(tsr_coll_kind kind, uint64_t payload_sent, uint64_t payload_recv, Traffic t) {
    if (t == Traffic::control) return;  // control collectives are charged by their wire model
    top_->coll_calls[kind] += 1;
    top_->coll_payload_sent += payload_sent;
    top_->coll_payload_recv += payload_recv;
  }
  // Control traffic counts what this rank sends and receives together.
  void coll_wire_sent(tsr_peer_class c, uint64_t msgs, uint64_t bytes, Traffic t) {
    add(t == Traffic::data ? top_->coll_wire_sent[c] : top_->control, msgs, bytes);
  }
  void coll_wire_recv(tsr_peer_class c, uint64_t msgs, uint64_t bytes, Traffic t) {
    add(t == Traffic::data ? top_->coll_wire_recv[c] : top_->control, msgs, bytes);
  }
  void disk_read(uint64_t bytes) { top_->disk_read_bytes += bytes; }
  void disk_write(uint64_t bytes) { top_->disk_write_bytes += bytes; }
  void host_to_device(uint64_t bytes) { top_->host_to_device_bytes += bytes; }
  void device_to_host(uint64_t bytes) { top_->device_to_host_bytes += bytes; }
  void device_to_device(uint64_t bytes) { top_->device_to_device_bytes += bytes; }

 private:
  struct Frame {
    std::string path;
    tsr_counters* stored;  // the region's counters in regions_ (closed part)
    tsr_counters open;     // charged since this frame began, not yet folded
  };
  static void add(tsr_traffic& t, uint64_t msgs, uint64_t bytes) {
    t.messages += msgs;
    t.bytes += bytes;
  }
  void push(const std::string& path);

  std::map<std::string, tsr_counters> regions_;  // node-based: pointers stay valid
  std::vector<Frame> frames_;                    // frames_[0] is "total"
  tsr_counters* top_ = nullptr;                  // &frames_.back().open
};

// a += b, word by word.
void accumulate(tsr_counters& a, const tsr_counters& b);

}  // namespace tsr

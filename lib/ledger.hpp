// The byte ledger of one rank: counters per region, charged by the transport
// and the I/O layer. Not thread-safe: a context is used by one thread at a time.
//
// Charging is O(1) whatever the nesting depth: a charge goes to the innermost
// open frame only; when a region ends, its frame is folded into the region's
// stored counters and into the enclosing frame. Reads fold the open frames
// on the fly, so every region always reads inclusive counts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tsr {

// Which ledger entry a transfer is charged to.
enum class Traffic { data, control };

// What a region records besides tsr_counters (energy accounting): flops,
// wall time, meter readings (tsr_region_extra), and the row of the
// communication matrix: row[2*r] messages and row[2*r+1] bytes sent to
// context rank r (data traffic only; empty when the matrix is off).
struct RegionExtra {
  tsr_region_extra x{};
  std::vector<uint64_t> row;
};

// Reads the node's meters: cumulative microjoules per tsr_energy_domain into
// uj, returns the mask of domains read.
using MeterReader = std::function<int(uint64_t* uj)>;

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
  // The extras of a region path (open regions: up to now); false if unknown.
  bool get_extra(const std::string& path, RegionExtra* out) const;
  std::map<std::string, RegionExtra> snapshot_extra() const;
  // Regions open besides "total", and the innermost open region's path.
  size_t open_regions() const { return frames_.size() - 1; }
  const std::string& current_path() const { return frames_.back().path; }

  // Meters read at every region begin and end (null: none). Switching folds
  // the reading so far into "total" and starts a new one.
  void set_meter(MeterReader reader);
  // Reads the meter now (folds nothing; keeps RAPL reads frequent).
  void sample_meter() const;
  // Communication matrix over nranks context ranks (0: off).
  void set_matrix(int nranks);
  bool matrix_on() const { return matrix_n_ > 0; }
  int matrix_size() const { return matrix_n_; }
  void peer_sent(int context_rank, uint64_t msgs, uint64_t bytes) {
    uint64_t* r = frames_.back().open_x.row.data() + 2 * static_cast<size_t>(context_rank);
    r[0] += msgs;
    r[1] += bytes;
  }
  void flops(uint64_t n) { frames_.back().open_x.x.flops += n; }

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
  // Data between device memories (the device transport, docs/ACCOUNTING.md
  // "Device memory"): bytes to and from the rank itself and same-node peers
  // go device to device (NVLink, PCIe peer) and are charged, sent side only,
  // to device_to_device_bytes instead of the self / intra-node entries;
  // bytes to and from other nodes stay inter-node (p2p or wire entries, as
  // for host memory). Control traffic never lives on a device. With
  // device == false these are p2p_sent, p2p_recv, coll_wire_sent and
  // coll_wire_recv.
  void p2p_sent(tsr_peer_class c, uint64_t bytes, Traffic t, bool device) {
    if (device && t == Traffic::data && c != TSR_PEER_REMOTE) top_->device_to_device_bytes += bytes;
    else p2p_sent(c, bytes, t);
  }
  void p2p_recv(tsr_peer_class c, uint64_t bytes, Traffic t, bool device) {
    if (!(device && t == Traffic::data && c != TSR_PEER_REMOTE)) p2p_recv(c, bytes, t);
  }
  void coll_wire_sent(tsr_peer_class c, uint64_t msgs, uint64_t bytes, Traffic t, bool device) {
    if (device && t == Traffic::data && c != TSR_PEER_REMOTE) top_->device_to_device_bytes += bytes;
    else coll_wire_sent(c, msgs, bytes, t);
  }
  void coll_wire_recv(tsr_peer_class c, uint64_t msgs, uint64_t bytes, Traffic t, bool device) {
    if (!(device && t == Traffic::data && c != TSR_PEER_REMOTE)) coll_wire_recv(c, msgs, bytes, t);
  }
  void disk_read(uint64_t bytes) { top_->disk_read_bytes += bytes; }
  void disk_write(uint64_t bytes) { top_->disk_write_bytes += bytes; }
  void host_to_device(uint64_t bytes) { top_->host_to_device_bytes += bytes; }
  void device_to_host(uint64_t bytes) { top_->device_to_host_bytes += bytes; }
  void device_to_device(uint64_t bytes) { top_->device_to_device_bytes += bytes; }

 private:
  struct Frame {
    std::string path;
    tsr_counters* stored = nullptr;  // the region's counters in regions_ (closed part)
    tsr_counters open;     // charged since this frame began, not yet folded
    RegionExtra* stored_x = nullptr;  // the region's extras in extras_
    RegionExtra open_x;               // flops and matrix row since this frame began
    uint64_t t0 = 0;                  // steady clock at begin (ns)
    uint64_t e0[TSR_DOMAINS] = {0, 0, 0};
    int mask0 = 0;                    // domains read at begin
  };
  static void add(tsr_traffic& t, uint64_t msgs, uint64_t bytes) {
    t.messages += msgs;
    t.bytes += bytes;
  }
  void push(const std::string& path);
  // Meter and clock bookkeeping of a frame's visit.
  void open_measure(Frame& f) const;
  void close_measure(Frame& f);
  void add_open_measure(const Frame& f, tsr_region_extra* x) const;

  std::map<std::string, tsr_counters> regions_;  // node-based: pointers stay valid
  std::map<std::string, RegionExtra> extras_;
  MeterReader meter_;
  int matrix_n_ = 0;
  std::vector<Frame> frames_;                    // frames_[0] is "total"
  tsr_counters* top_ = nullptr;                  // &frames_.back().open
};

// a += b, word by word.
void accumulate(tsr_counters& a, const tsr_counters& b);

}  // namespace tsr

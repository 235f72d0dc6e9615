// The transport's view of a communicator and of a request in flight: shared
// by the transport front (transport.hpp) and the backends (backend.hpp).
#pragma once

#include <memory>
#include <vector>

#include "ledger.hpp"
#include "tessera/tessera.h"

struct tsr_context_s;

namespace tsr {

class Backend;
class MpiBackend;
class DeviceComm;  // lib/device_transport.cpp: a communicator's NCCL state

// A nonblocking operation in flight. A transfer split into chunks (more
// elements than the context's max_chunk, see transport.hpp) is several MPI
// operations: the first in `mpi`, the others in `parts`.
struct Request {
  MPI_Request mpi = MPI_REQUEST_NULL;
  std::vector<MPI_Request> parts;  // the further chunks of a split operation
  std::vector<int> scratch;        // count/displacement arrays MPI reads until completion
  // A device operation (NCCL, lib/device_transport.cpp) posted into the
  // communicator's pending group: wait/test start the group and order the
  // context's stream after it.
  bool device = false;
  bool active() const { return mpi != MPI_REQUEST_NULL || !parts.empty() || device; }
};

// A communicator as the transport sees it: the MPI communicator, the class of
// every peer (self / same node / other node), the ledger to charge and the
// backend that moves the bytes.
class Comm {
 public:
  // Wraps comm, whose ranks must all belong to ctx. If owned, the Comm frees
  // comm when destroyed. Local (uses the context's node map and
  // MPI_Group_translate_ranks).
  static tsr_status wrap(tsr_context_s* ctx, MPI_Comm comm, bool owned, std::unique_ptr<Comm>* out);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  MPI_Comm mpi() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  tsr_peer_class peer_class(int peer) const {
    return static_cast<tsr_peer_class>(peer_class_[static_cast<size_t>(peer)]);
  }
  int context_rank(int peer) const { return context_rank_[static_cast<size_t>(peer)]; }
  Ledger& ledger() const { return *ledger_; }
  Backend& backend() const { return *backend_; }
  // The host MPI backend when it is this communicator's backend, else null:
  // lets the point-to-point hot path call it without virtual dispatch.
  MpiBackend* host_mpi() const { return host_mpi_; }
  tsr_context_s* context() const { return ctx_; }
  // The most elements one MPI call of this communicator is given (the
  // context's tsr_context_config.max_chunk; INT_MAX by default). Larger
  // transfers are split (transport.hpp).
  size_t max_chunk() const { return max_chunk_; }
  // The device transport of this communicator (lib/device_transport.hpp),
  // null on the host-only path. device_route(): whether calls on this
  // communicator may carry device buffers (then backend() routes them and
  // host_mpi() is null).
  DeviceComm* device() const { return device_.get(); }
  bool device_route() const { return device_ != nullptr; }
  // Installs (d, b) or, with d null, restores the host MPI backend.
  void set_device(std::shared_ptr<DeviceComm> d, Backend* b);

 private:
  Comm() = default;
  tsr_context_s* ctx_ = nullptr;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0, size_ = 0;
  std::vector<unsigned char> peer_class_;
  std::vector<int> context_rank_;
  Backend* backend_ = nullptr;
  MpiBackend* host_mpi_ = nullptr;
  Ledger* ledger_ = nullptr;
  size_t max_chunk_ = 0;
  std::shared_ptr<DeviceComm> device_;
};

}  // namespace tsr

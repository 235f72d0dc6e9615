// The one transport layer. Every byte tessera moves between ranks goes through
// the functions in this header, which charge the ledger (exact payload, and
// the modelled wire traffic of collectives, see docs/ACCOUNTING.md) and then
// hand the operation to the communicator's backend. Algorithms (collectives/,
// optimizers/) call only these functions, never MPI directly, so a device
// backend (NCCL, CUDA-aware MPI) can be slotted in under them.
//
// Conventions: counts are in elements of `type`; a call with req == nullptr
// is blocking, otherwise it starts a nonblocking operation completed by
// wait()/wait_all(). A call is charged once the backend has accepted (started)
// it; a call rejected by a check or by MPI is not charged. In-place
// forms: pass the same pointer as send and receive buffer where noted.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "ledger.hpp"
#include "tessera/tessera.h"

struct tsr_context_s;

namespace tsr {

class Backend;

// A nonblocking operation in flight.
struct Request {
  MPI_Request mpi = MPI_REQUEST_NULL;
  std::vector<int> scratch;  // count/displacement arrays MPI reads until completion
  bool active() const { return mpi != MPI_REQUEST_NULL; }
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
  tsr_context_s* context() const { return ctx_; }

 private:
  Comm() = default;
  tsr_context_s* ctx_ = nullptr;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0, size_ = 0;
  std::vector<unsigned char> peer_class_;
  std::vector<int> context_rank_;
  Backend* backend_ = nullptr;
  Ledger* ledger_ = nullptr;
};

// ----------------------------------------------------------- point to point
tsr_status send(const Comm& c, const void* buf, size_t count, tsr_dtype type, int peer, int tag,
                Request* req = nullptr, Traffic t = Traffic::data);
tsr_status recv(const Comm& c, void* buf, size_t count, tsr_dtype type, int peer, int tag,
                Request* req = nullptr, Traffic t = Traffic::data);
// Blocking exchange: sends to dest and receives from source at once.
// sbuf == rbuf (with scount == rcount) exchanges in place.
tsr_status sendrecv(const Comm& c, const void* sbuf, size_t scount, int dest, int stag, void* rbuf,
                    size_t rcount, int source, int rtag, tsr_dtype type, Traffic t = Traffic::data);

// --------------------------------------------------------------- collectives
tsr_status barrier(const Comm& c, Request* req = nullptr, Traffic t = Traffic::data);
tsr_status bcast(const Comm& c, void* buf, size_t count, tsr_dtype type, int root,
                 Request* req = nullptr, Traffic t = Traffic::data);
// sbuf == rbuf at the root means in place. rbuf is ignored on non-roots.
tsr_status reduce(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type,
                  tsr_op op, int root, Request* req = nullptr, Traffic t = Traffic::data);
// sbuf == rbuf means in place.
tsr_status allreduce(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type,
                     tsr_op op, Request* req = nullptr, Traffic t = Traffic::data);
// Each rank contributes count elements; rbuf holds size*count, rank order.
tsr_status allgather(const Comm& c, const void* sbuf, size_t count, void* rbuf, tsr_dtype type,
                     Request* req = nullptr, Traffic t = Traffic::data);
// Rank r contributes counts[r] elements at rbuf + displs[r] (elements).
tsr_status allgatherv(const Comm& c, const void* sbuf, size_t count, void* rbuf,
                      const size_t* counts, const size_t* displs, tsr_dtype type,
                      Request* req = nullptr, Traffic t = Traffic::data);
// sbuf holds size*count elements; rank r receives the reduction of block r.
tsr_status reduce_scatter(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type,
                          tsr_op op, Request* req = nullptr, Traffic t = Traffic::data);
// Uneven form: block r has counts[r] elements, blocks packed in rank order.
tsr_status reduce_scatterv(const Comm& c, const void* sbuf, void* rbuf, const size_t* counts,
                           tsr_dtype type, tsr_op op, Request* req = nullptr,
                           Traffic t = Traffic::data);
// count elements to and from every rank (sbuf and rbuf hold size*count).
tsr_status alltoall(const Comm& c, const void* sbuf, void* rbuf, size_t count, tsr_dtype type,
                    Request* req = nullptr, Traffic t = Traffic::data);
// Root receives size*count elements in rank order; rbuf ignored elsewhere.
tsr_status gather(const Comm& c, const void* sbuf, size_t count, void* rbuf, tsr_dtype type,
                  int root, Request* req = nullptr, Traffic t = Traffic::data);
// Root sends block r (count elements) of sbuf to rank r; sbuf ignored elsewhere.
tsr_status scatter(const Comm& c, const void* sbuf, size_t count, void* rbuf, tsr_dtype type,
                   int root, Request* req = nullptr, Traffic t = Traffic::data);

// ---------------------------------------------------------------- completion
tsr_status wait(const Comm& c, Request* req);
tsr_status wait_all(const Comm& c, Request* reqs, size_t n);
// *done = 1 when the operation has completed (the request is then inactive).
tsr_status test(const Comm& c, Request* req, int* done);

// ------------------------------------------------------- collective checks
// Agree on an error before communicating: every rank passes its local status
// (with its pending message). If any rank failed, every rank returns the
// status of the lowest failing rank; the other ranks get a message naming
// that rank (its rank in c) and carrying its message. If `same` is given, every rank
// must also pass the same value (a digest of sizes, types, root...), else all
// ranks get TSR_ERR_INVALID_ARG. One 24-byte all-reduce when all succeeded
// (plus a 516-byte broadcast on failure). Charged as control traffic.
tsr_status agree(const Comm& c, tsr_status local, const uint64_t* same = nullptr);
// The same on a bare MPI communicator; charges `ledger` if not null.
tsr_status agree_raw(MPI_Comm comm, Ledger* ledger, tsr_status local, const uint64_t* same = nullptr);

// The modelled wire traffic of a collective for one rank (exposed for tests
// and for the energy model). Peers are ranks of the communicator.
struct WireEdge {
  int peer;
  uint64_t messages;
  uint64_t bytes;
};
struct WireModel {
  std::vector<WireEdge> sent, recv;
};
// Binomial-tree bcast / reduce (n bytes), ring allreduce over elements,
// ring allgather(v)/reduce-scatter(v), direct alltoall, gather and scatter,
// dissemination barrier. counts are per-rank element counts where they matter.
WireModel model_bcast(int rank, int size, int root, uint64_t bytes);
WireModel model_reduce(int rank, int size, int root, uint64_t bytes);
WireModel model_allreduce(int rank, int size, uint64_t count, uint64_t elem_size);
WireModel model_allgatherv(int rank, int size, const std::vector<uint64_t>& block_bytes);
WireModel model_reduce_scatterv(int rank, int size, const std::vector<uint64_t>& block_bytes);
WireModel model_alltoall(int rank, int size, uint64_t bytes_per_peer);
WireModel model_gather(int rank, int size, int root, uint64_t bytes_per_rank);
WireModel model_scatter(int rank, int size, int root, uint64_t bytes_per_rank);
WireModel model_barrier(int rank, int size);

}  // namespace tsr

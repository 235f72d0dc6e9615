// The wire models of collectives: the messages and bytes an assumed
// algorithm puts on the wire from and to one rank (docs/ACCOUNTING.md). Pure
// arithmetic, no MPI: the transport charges them, the energy model and the
// PMPI tool (lib/pmpi) use the same functions.
#pragma once

#include <cstdint>
#include <vector>

namespace tsr {

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
// The same, filling m (its vectors keep their capacity: no allocation in a
// steady state), and equal-block forms of allgather and reduce-scatter.
void model_bcast_into(WireModel& m, int rank, int size, int root, uint64_t bytes);
void model_reduce_into(WireModel& m, int rank, int size, int root, uint64_t bytes);
void model_allreduce_into(WireModel& m, int rank, int size, uint64_t count, uint64_t elem_size);
void model_allgatherv_into(WireModel& m, int rank, int size, const std::vector<uint64_t>& block_bytes);
void model_reduce_scatterv_into(WireModel& m, int rank, int size, const std::vector<uint64_t>& block_bytes);
void model_alltoall_into(WireModel& m, int rank, int size, uint64_t bytes_per_peer);
void model_gather_into(WireModel& m, int rank, int size, int root, uint64_t bytes_per_rank);
void model_scatter_into(WireModel& m, int rank, int size, int root, uint64_t bytes_per_rank);
void model_barrier_into(WireModel& m, int rank, int size);
void model_allgather_equal_into(WireModel& m, int rank, int size, uint64_t block);
void model_reduce_scatter_equal_into(WireModel& m, int rank, int size, uint64_t block);

}  // namespace tsr

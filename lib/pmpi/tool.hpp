// libtessera-pmpi: the accounting core behind the PMPI wrappers (wrap_c.cpp,
// wrap_fortran.cpp). Interception-agnostic: the wrappers call on_send,
// on_recv, on_coll, on_disk and the request table; this file keeps the same
// ledger as libtessera (lib/ledger.hpp: application payload by peer class,
// modelled collective wire traffic, regions from MPI_Pcontrol, meters, the
// communication matrix) plus calls and bytes per MPI function, and writes the
// energy report at MPI_Finalize (lib/energy/report_core.hpp).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "tessera/tessera.h"
#include "wire_model.hpp"

namespace tsr {
namespace pmpi {

// Every MPI function the tool accounts, in report order.
#define TSR_PMPI_FUNCTIONS(X)                                                                                   \
  X(Send) X(Bsend) X(Ssend) X(Rsend) X(Isend) X(Ibsend) X(Issend) X(Irsend) X(Send_init) X(Bsend_init)           \
  X(Ssend_init) X(Rsend_init) X(Recv) X(Irecv) X(Recv_init) X(Mrecv) X(Imrecv) X(Sendrecv) X(Sendrecv_replace)  \
  X(Isendrecv) X(Isendrecv_replace) X(Barrier) X(Bcast) X(Reduce) X(Allreduce) X(Gather) X(Gatherv) X(Scatter)  \
  X(Scatterv) X(Allgather) X(Allgatherv) X(Alltoall) X(Alltoallv) X(Alltoallw) X(Reduce_scatter)                \
  X(Reduce_scatter_block) X(Scan) X(Exscan) X(Neighbor_allgather) X(Neighbor_allgatherv) X(Neighbor_alltoall)  \
  X(Neighbor_alltoallv) X(Neighbor_alltoallw) X(Ibarrier) X(Ibcast) X(Ireduce) X(Iallreduce) X(Igather)        \
  X(Igatherv) X(Iscatter) X(Iscatterv) X(Iallgather) X(Iallgatherv) X(Ialltoall) X(Ialltoallv) X(Ialltoallw)    \
  X(Ireduce_scatter) X(Ireduce_scatter_block) X(Iscan) X(Iexscan) X(Ineighbor_allgather)                        \
  X(Ineighbor_allgatherv) X(Ineighbor_alltoall) X(Ineighbor_alltoallv) X(Ineighbor_alltoallw)                   \
  X(Barrier_init) X(Bcast_init) X(Reduce_init) X(Allreduce_init) X(Gather_init) X(Gatherv_init)                  \
  X(Scatter_init) X(Scatterv_init) X(Allgather_init) X(Allgatherv_init) X(Alltoall_init) X(Alltoallv_init)      \
  X(Alltoallw_init) X(Reduce_scatter_init) X(Reduce_scatter_block_init) X(Scan_init) X(Exscan_init)             \
  X(Neighbor_allgather_init) X(Neighbor_allgatherv_init) X(Neighbor_alltoall_init) X(Neighbor_alltoallv_init)  \
  X(Neighbor_alltoallw_init)                                                                                   \
  X(Put) X(Get) X(Accumulate) X(Get_accumulate) X(Fetch_and_op) X(Compare_and_swap) X(Rput) X(Rget)              \
  X(Raccumulate) X(Rget_accumulate) X(File_read) X(File_read_at) X(File_read_all) X(File_read_at_all)            \
  X(File_read_shared) X(File_read_ordered) X(File_iread) X(File_iread_at) X(File_iread_all)                     \
  X(File_iread_at_all) X(File_iread_shared) X(File_read_all_end) X(File_read_at_all_end)                        \
  X(File_read_ordered_end) X(File_write) X(File_write_at) X(File_write_all) X(File_write_at_all)               \
  X(File_write_shared) X(File_write_ordered) X(File_iwrite) X(File_iwrite_at) X(File_iwrite_all)                \
  X(File_iwrite_at_all) X(File_iwrite_shared) X(File_write_all_end) X(File_write_at_all_end)                    \
  X(File_write_ordered_end)

enum Fn : int {
#define TSR_PMPI_ENUM(name) F_##name,
  TSR_PMPI_FUNCTIONS(TSR_PMPI_ENUM)
#undef TSR_PMPI_ENUM
  kFunctions
};

// coll_calls slot for collectives outside tsr_coll_kind (scan, exscan,
// neighbourhood): the last reserved slot.
constexpr int kCollOther = TSR_COLL_KINDS - 1;

// Depth of wrapper calls on this thread: a wrapper that finds it non-zero is
// running inside another wrapper (a Fortran binding calling the C function,
// an MPI library calling itself) and passes through without counting.
// Initial-exec TLS: one %fs-relative load, not a __tls_get_addr call (the
// tool is loaded at startup, by LD_PRELOAD or the link line).
extern __thread int t_depth __attribute__((tls_model("initial-exec")));
struct Nest {
  Nest() { ++t_depth; }
  ~Nest() { --t_depth; }
};

// The arguments of the point-to-point call in progress on this thread
// (MPI_Send, MPI_Isend, MPI_Recv and their forms), stored before the
// library is called and read back after it: the wrapper keeps nothing in
// registers across the call, so the hot path saves none (no pushes before
// the call, no pops after a receive returns: both on the critical path of a
// request-reply exchange).
struct P2pCall {
  MPI_Comm comm;
  MPI_Datatype type;
  long long count;
  int peer;
  MPI_Status* st;  // a receive's status (the caller's, or the wrapper's own)
};
extern __thread P2pCall t_call __attribute__((tls_model("initial-exec")));

// A communicator as the tool sees it (cached as an attribute).
struct CommInfo {
  int rank = 0, size = 0;        // in the local group
  bool inter = false;            // intercommunicator: peers are in the remote group
  std::vector<int> world;        // peer rank -> MPI_COMM_WORLD rank
  std::vector<unsigned char> cls;  // peer rank -> tsr_peer_class
  int npeers = 0;                // world.size()
};

// ready(): set up (after MPI_Init) and not yet finalised; comm_info(c):
// nullptr when not ready or MPI_COMM_NULL; type_size(t): bytes of one
// element; status_bytes(st) (all inline, state.hpp).
const CommInfo* win_info(MPI_Win w);    // the window's group as a CommInfo
bool regions_enabled();                 // TSR_PMPI_PCONTROL=1

// Accounting (thread-safe under MPI_THREAD_MULTIPLE). peer: rank in ci's
// (remote) group; MPI_PROC_NULL peers are skipped. call: count one call of f
// (false for the second half of a combined call such as MPI_Sendrecv).
// (on_send, on_recv: the status gives bytes and source, on_recv_bytes: inline, state.hpp)
// A collective: payload this rank contributed and obtained, and the modelled
// wire edges (peers are ranks of ci). kind: tsr_coll_kind or kCollOther.
void on_coll(Fn f, const CommInfo* ci, int kind, uint64_t sent, uint64_t recv, const WireModel& m);
void on_disk(Fn f, bool write, uint64_t bytes);

// Requests whose bytes are known only at completion (receives) or that
// charge at every start (persistent operations).
struct Deferred {
  Fn f;
  const CommInfo* ci = nullptr;
  enum Kind { recv, send, coll, disk_read, disk_write } kind = recv;
  bool persistent = false;
  bool call = true;          // recv: count a call at completion (not for MPI_Isendrecv's receive half)
  bool posted = false;       // recv: charge the posted size from peer, not the status (MPI_Isendrecv)
  int peer = MPI_PROC_NULL;  // send
  uint64_t bytes = 0;        // send; recv: the posted size (used if freed unfinished)
  int coll_kind = 0;         // coll
  uint64_t sent = 0, got = 0;
  WireModel model;
};
void req_add(MPI_Request r, Deferred d);
bool req_pending();                              // any entry at all (cheap)
void req_started(MPI_Request r);                 // MPI_Start: persistent sends and collectives charge
void req_done(MPI_Request r, const MPI_Status* st);  // completed: receives charge; non-persistent entries go
void req_freed(MPI_Request r);                   // MPI_Request_free
void req_forget(MPI_Request r);                  // a new request reuses a handle: drop any stale entry
bool req_persistent(MPI_Request r);              // the entry of r is a persistent request
// Matched probes: the message's communicator, for MPI_Mrecv.
void msg_add(MPI_Message m, const CommInfo* ci);
const CommInfo* msg_take(MPI_Message m);

// Fortran: is this buffer address Fortran's MPI_IN_PLACE?
bool fortran_in_place(const void* p);

void setup(int provided);   // after PMPI_Init*: node map, meters, settings
void finalize();            // before PMPI_Finalize: gather and write the report (once)
void pcontrol(int level, const char* name);

// Wire models beyond libtessera's (docs/ENERGY.md states them).
// (m is filled; it starts empty.)
void model_scan_into(WireModel& m, int rank, int size, uint64_t bytes);  // recursive doubling
// Direct exchange with per-peer bytes (alltoallv/w, gatherv, scatterv).
void model_direct_into(WireModel& m, int rank, const std::vector<uint64_t>& to, const std::vector<uint64_t>& from);

}  // namespace pmpi
}  // namespace tsr

#include "state.hpp"

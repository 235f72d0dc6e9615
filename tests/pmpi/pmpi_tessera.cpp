// A tessera run under the PMPI tool: libtessera's own ledger and the tool's
// must agree. Region "transport" moves data through the transport directly
// (point-to-point, nonblocking, and every collective on the world and on grid
// axes): the tool sees exactly the calls the transport makes, so every
// counter must match, the modelled wire traffic included (the tool uses the
// same models). Region "public" uses the public collectives, which also agree
// on their arguments: one 24-byte control all-reduce per call, charged by
// tessera as control and seen by the tool as an MPI_Allreduce, so the tool's
// collective calls and payload exceed tessera's by exactly that. Each rank
// writes tessera's figures to <dir>/expect.<rank>.json for pmpi_test.py.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "context.hpp"
#include "tessera/tessera.h"
#include "transport.hpp"

namespace {

int g_rank = 0;

void ok(tsr_status st, const char* what) {
  if (st != TSR_SUCCESS) {
    std::fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, what, tsr_last_error(nullptr));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}
#define OK(call) ok((call), #call)

std::string traffic(const tsr_traffic (&t)[TSR_PEER_CLASSES]) {
  char b[256];
  std::snprintf(b, sizeof b, "{\"self\": [%llu, %llu], \"node\": [%llu, %llu], \"remote\": [%llu, %llu]}",
                static_cast<unsigned long long>(t[0].messages), static_cast<unsigned long long>(t[0].bytes),
                static_cast<unsigned long long>(t[1].messages), static_cast<unsigned long long>(t[1].bytes),
                static_cast<unsigned long long>(t[2].messages), static_cast<unsigned long long>(t[2].bytes));
  return b;
}

uint64_t calls(const tsr_counters& c) {
  uint64_t n = 0;
  for (uint64_t k : c.coll_calls) n += k;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  const char* rpn_env = std::getenv("TSR_PMPI_RANKS_PER_NODE");
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = rpn_env ? std::atoi(rpn_env) : 0;  // the tool's nodes
  tsr_context ctx = nullptr;
  OK(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx));
  int dims[3] = {0, 0, 0};
  OK(tsr_grid_dims_create(TSR_GRID_2D, p, 0, dims, nullptr));
  tsr_grid grid = nullptr;
  OK(tsr_grid_create(ctx, TSR_GRID_2D, dims, &grid));
  const tsr::Comm& w = *ctx->world;
  const int me = g_rank, right = (me + 1) % p, left = (me + p - 1) % p;
  std::vector<double> a(4096, 1.0), b(4096 * static_cast<size_t>(p), 0.0);

  // ---------------------------------------------------------- transport
  OK(tsr_region_begin(ctx, "transport"));
  MPI_Pcontrol(1, "transport");
  OK(tsr::sendrecv(w, a.data(), 300, right, 1, b.data(), 300, left, 1, TSR_FLOAT64));
  tsr::Request rq[2];
  OK(tsr::recv(w, b.data(), 77, TSR_INT32, left, 2, &rq[0]));
  OK(tsr::send(w, a.data(), 77, TSR_INT32, right, 2, &rq[1]));
  OK(tsr::wait_all(w, rq, 2));
  for (int i = 0; i < 3; ++i) OK(tsr::allreduce(w, a.data(), b.data(), 1000, TSR_FLOAT64, TSR_SUM));
  OK(tsr::bcast(w, a.data(), 123, TSR_FLOAT32, p - 1));
  OK(tsr::reduce(w, a.data(), b.data(), 50, TSR_FLOAT64, TSR_SUM, 0));
  OK(tsr::allgather(w, a.data(), 64, b.data(), TSR_FLOAT64));
  OK(tsr::reduce_scatter(w, a.data(), b.data(), 32, TSR_FLOAT64, TSR_SUM));
  OK(tsr::alltoall(w, a.data(), b.data(), 16, TSR_FLOAT64));
  OK(tsr::gather(w, a.data(), 8, b.data(), TSR_INT64, p - 1));
  OK(tsr::scatter(w, a.data(), 8, b.data(), TSR_INT64, 0));
  OK(tsr::barrier(w));
  {  // the grid's axis communicators (split from the context's)
    MPI_Comm row = MPI_COMM_NULL, col = MPI_COMM_NULL;
    OK(tsr_grid_comm(grid, TSR_AXIS_ROW, &row));
    OK(tsr_grid_comm(grid, TSR_AXIS_COL, &col));
    std::unique_ptr<tsr::Comm> r, c;
    OK(tsr::Comm::wrap(ctx, row, false, &r));
    OK(tsr::Comm::wrap(ctx, col, false, &c));
    for (int i = 0; i < 2; ++i) OK(tsr::allreduce(*r, a.data(), b.data(), 200, TSR_FLOAT64, TSR_SUM));
    OK(tsr::allgather(*c, a.data(), 40, b.data(), TSR_FLOAT64));
  }
  MPI_Pcontrol(-1, "transport");
  OK(tsr_region_end(ctx, "transport"));

  // ------------------------------------------------------------- public
  OK(tsr_region_begin(ctx, "public"));
  MPI_Pcontrol(1, "public");
  OK(tsr_allreduce(grid, TSR_AXIS_ROW, a.data(), b.data(), 100, TSR_FLOAT64, TSR_SUM));
  OK(tsr_bcast(grid, TSR_AXIS_COL, a.data(), 60, TSR_FLOAT64, 0));
  OK(tsr_shift(grid, TSR_AXIS_ALL, a.data(), b.data(), 20, TSR_FLOAT64, 1));
  const int agree_calls = 3;  // one control all-reduce of 3 int64 per public call
  MPI_Pcontrol(-1, "public");
  OK(tsr_region_end(ctx, "public"));

  tsr_counters t{}, u{};
  OK(tsr_counters_get(ctx, "transport", &t));
  OK(tsr_counters_get(ctx, "public", &u));
  if (t.control.bytes != 0) {
    std::fprintf(stderr, "rank %d: control traffic inside region transport\n", me);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  if (argc > 1) {
    char path[600];
    std::snprintf(path, sizeof path, "%s/expect.%d.json", argv[1], me);
    std::FILE* f = std::fopen(path, "w");
    if (f == nullptr) {
      std::perror(path);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const tsr_counters& c = t;
    std::fprintf(f, "{\"rank\": %d, \"regions\": {\n \"transport\": {\"p2p_sent\": %s, \"p2p_recv\": %s,\n", me,
                 traffic(c.p2p_sent).c_str(), traffic(c.p2p_recv).c_str());
    std::fprintf(f, "  \"collective_wire_sent_model\": %s, \"collective_wire_recv_model\": %s,\n",
                 traffic(c.coll_wire_sent).c_str(), traffic(c.coll_wire_recv).c_str());
    std::fprintf(f, "  \"collective_calls\": %llu, \"collective_payload_sent\": %llu, \"collective_payload_recv\": %llu,\n",
                 static_cast<unsigned long long>(calls(c)), static_cast<unsigned long long>(c.coll_payload_sent),
                 static_cast<unsigned long long>(c.coll_payload_recv));
    std::fprintf(f, "  \"moved_bytes\": {\"self\": %llu, \"intra_node\": %llu, \"inter_node\": %llu}},\n",
                 static_cast<unsigned long long>(c.p2p_sent[0].bytes + c.coll_wire_sent[0].bytes),
                 static_cast<unsigned long long>(c.p2p_sent[1].bytes + c.coll_wire_sent[1].bytes),
                 static_cast<unsigned long long>(c.p2p_sent[2].bytes + c.coll_wire_sent[2].bytes));
    const uint64_t extra = static_cast<uint64_t>(agree_calls) * 24;
    std::fprintf(f, " \"public\": {\"p2p_sent\": %s, \"p2p_recv\": %s,\n", traffic(u.p2p_sent).c_str(),
                 traffic(u.p2p_recv).c_str());
    std::fprintf(f, "  \"collective_calls\": %llu, \"collective_payload_sent\": %llu, \"collective_payload_recv\": %llu}\n",
                 static_cast<unsigned long long>(calls(u) + agree_calls),
                 static_cast<unsigned long long>(u.coll_payload_sent + extra),
                 static_cast<unsigned long long>(u.coll_payload_recv + extra));
    std::fprintf(f, "}}\n");
    std::fclose(f);
  }
  OK(tsr_grid_destroy(&grid));
  OK(tsr_context_destroy(&ctx));
  MPI_Finalize();
  return 0;
}

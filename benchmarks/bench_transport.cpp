// Cost of tessera's transport front (argument checks + exact accounting) on a
// 1 KiB message loop, measured side by side with raw MPI on the same
// communicator: every round times both, back to back in alternating order
// (ABBA), so that both see the same machine noise; the overhead is the median
// of the per-round ratios.
//
//   mpiexec -n 2 bench_transport [--bytes 1024] [--iters 20000] [--rounds 21] [--regions 1]
//
// Prints one table from rank 0 (per-message times in microseconds).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "context.hpp"
#include "transport.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Send, class Recv>
double pingpong(MPI_Comm comm, int rank, int iters, Send send, Recv recv) {
  MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) {
      send(1);
      recv(1);
    } else if (rank == 1) {
      recv(0);
      send(0);
    }
  }
  const double t = MPI_Wtime() - t0;
  double tmax = 0;
  MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, comm);
  return tmax / (2.0 * iters);  // one message = half a round trip
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  size_t bytes = 1024;
  int iters = 20000, rounds = 21, regions = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--bytes") bytes = std::strtoul(argv[i + 1], nullptr, 10);
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--regions") regions = std::atoi(argv[i + 1]);
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) std::fprintf(stderr, "bench_transport needs 2 ranks\n");
    MPI_Finalize();
    return 1;
  }
  tsr_context ctx = nullptr;
  if (tsr_context_create(MPI_COMM_WORLD, &ctx) != TSR_SUCCESS) {
    std::fprintf(stderr, "%s\n", tsr_last_error(nullptr));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int r = 0; r < regions; ++r) tsr_region_begin(ctx, ("r" + std::to_string(r)).c_str());
  const tsr::Comm& c = *ctx->world;
  std::vector<unsigned char> buf(bytes, 1);
  auto raw_send = [&](int peer) { MPI_Send(buf.data(), static_cast<int>(bytes), MPI_UINT8_T, peer, 0, ctx->comm); };
  auto raw_recv = [&](int peer) {
    MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_UINT8_T, peer, 0, ctx->comm, MPI_STATUS_IGNORE);
  };
  auto tsr_send = [&](int peer) { tsr::send(c, buf.data(), bytes, TSR_BYTE, peer, 0); };
  auto tsr_recv = [&](int peer) { tsr::recv(c, buf.data(), bytes, TSR_BYTE, peer, 0); };

  pingpong(ctx->comm, rank, iters / 4, raw_send, raw_recv);  // warm-up
  pingpong(ctx->comm, rank, iters / 4, tsr_send, tsr_recv);
  // Each round times both variants back to back (order alternating, ABBA) and
  // keeps their ratio: pairing cancels the slow drifts of a shared machine.
  std::vector<double> raw, acc, ratio;
  for (int r = 0; r < rounds; ++r) {
    double a = 0, b = 0;
    if (r % 2 == 0) {
      a = pingpong(ctx->comm, rank, iters, raw_send, raw_recv);
      b = pingpong(ctx->comm, rank, iters, tsr_send, tsr_recv);
    } else {
      b = pingpong(ctx->comm, rank, iters, tsr_send, tsr_recv);
      a = pingpong(ctx->comm, rank, iters, raw_send, raw_recv);
    }
    raw.push_back(a);
    acc.push_back(b);
    ratio.push_back(b / a);
  }
  tsr_counters cnt;
  tsr_counters_get(ctx, "total", &cnt);
  if (rank == 0) {
    const double mr = median(raw), ma = median(acc);
    std::printf("bench_transport: %zu-byte ping-pong, 2 of %d ranks, %d rounds x %d round trips, %d open region(s)\n",
                bytes, size, rounds, iters, regions);
    std::printf("  raw MPI on the same communicator : median %.4f us/message (min %.4f)\n", mr * 1e6,
                *std::min_element(raw.begin(), raw.end()) * 1e6);
    std::printf("  tessera transport (checks+ledger): median %.4f us/message (min %.4f)\n", ma * 1e6,
                *std::min_element(acc.begin(), acc.end()) * 1e6);
    std::vector<double> q = ratio;
    std::sort(q.begin(), q.end());
    const size_t n = q.size();
    std::printf("  overhead: %+.2f %% (median of per-round ratios; quartiles %+.2f %% .. %+.2f %%), %+.1f ns/message\n",
                (median(ratio) - 1.0) * 100.0, (q[n / 4] - 1.0) * 100.0, (q[(3 * n) / 4] - 1.0) * 100.0,
                (ma - mr) * 1e9);
    std::printf("  messages counted on rank 0: %llu sent, %llu received\n",
                static_cast<unsigned long long>(cnt.p2p_sent[TSR_PEER_NODE].messages),
                static_cast<unsigned long long>(cnt.p2p_recv[TSR_PEER_NODE].messages));
  }
  for (int r = regions - 1; r >= 0; --r) tsr_region_end(ctx, ("r" + std::to_string(r)).c_str());
  tsr_context_destroy(&ctx);
  MPI_Finalize();
  return 0;
}

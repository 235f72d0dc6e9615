/* Overhead of the PMPI tool (libtessera-pmpi.so), measured side by side in
 * one run: every round times the same loop twice, once through the PMPI_
 * entry points (which the tool does not intercept) and once through the MPI_
 * ones (which it does), back to back in alternating order (ABBA), and keeps
 * the ratio; the overhead is the median of the per-round ratios. Without the
 * tool preloaded MPI_X and PMPI_X are the same function, which gives the
 * noise floor of the method; with benchmarks/pmpi_null.c (libtsr_pmpi_null.so,
 * an interposer that only forwards) preloaded instead, it gives the cost of
 * interposition alone.
 *
 *   mpiexec -n 2 env LD_PRELOAD=libtessera-pmpi.so TSR_PMPI_TABLE=0 bench_pmpi pingpong [--bytes 8] [--iters 20000] [--rounds 101]
 *   mpiexec -n 4 env LD_PRELOAD=libtessera-pmpi.so TSR_PMPI_TABLE=0 bench_pmpi allreduce [--count 8] [--iters 2000] [--rounds 101]
 *
 * Prints one table from rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
static double quantile(double* v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[(int)(q * (n - 1) + 0.5)];
}

static int me, np;
static char* buf;

/* One timed loop; via_pmpi selects the entry points. Returns seconds per
 * operation (a message for the ping-pong, a call for the all-reduce), the
 * slowest rank's. */
static double loop(int pingpong, int via_pmpi, int iters, int n) {
  PMPI_Barrier(MPI_COMM_WORLD);
  const double t0 = PMPI_Wtime();
  if (pingpong) {
    for (int i = 0; i < iters && me < 2; ++i) {
      if (me == 0) {
        if (via_pmpi) {
          PMPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
          PMPI_Recv(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
          MPI_Recv(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
      } else {
        if (via_pmpi) {
          PMPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          PMPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        } else {
          MPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
      }
    }
  } else {
    double* x = (double*)buf;
    double* y = x + n;
    for (int i = 0; i < iters; ++i) {
      if (via_pmpi) PMPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      else MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
  }
  const double t = PMPI_Wtime() - t0;
  double tmax = 0;
  PMPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return tmax / (pingpong ? 2.0 * iters : (double)iters);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  const int pingpong = argc > 1 && strcmp(argv[1], "pingpong") == 0;
  if (argc < 2 || (!pingpong && strcmp(argv[1], "allreduce") != 0) || (pingpong && np < 2)) {
    if (me == 0) fprintf(stderr, "usage: bench_pmpi pingpong|allreduce [--bytes B] [--count N] [--iters I] [--rounds R]\n");
    MPI_Finalize();
    return 1;
  }
  int bytes = 8, count = 8, iters = pingpong ? 20000 : 2000, rounds = 101;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--bytes") == 0) bytes = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--count") == 0) count = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--iters") == 0) iters = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
  }
  const int n = pingpong ? bytes : count;
  buf = calloc((size_t)(pingpong ? bytes : 2 * count * (int)sizeof(double)) + 16, 1);
  const char* pre = getenv("LD_PRELOAD");
  const int tool = pre != NULL && (strstr(pre, "tessera-pmpi") != NULL || strstr(pre, "pmpi_null") != NULL);

  loop(pingpong, 1, iters / 4, n); /* warm-up, both paths */
  loop(pingpong, 0, iters / 4, n);
  double* raw = malloc(sizeof(double) * (size_t)rounds);
  double* via = malloc(sizeof(double) * (size_t)rounds);
  double* ratio = malloc(sizeof(double) * (size_t)rounds);
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      raw[r] = loop(pingpong, 1, iters, n);
      via[r] = loop(pingpong, 0, iters, n);
    } else {
      via[r] = loop(pingpong, 0, iters, n);
      raw[r] = loop(pingpong, 1, iters, n);
    }
    ratio[r] = via[r] / raw[r];
  }
  if (me == 0) {
    const double mr = quantile(raw, rounds, 0.5), mv = quantile(via, rounds, 0.5);
    const double q1 = quantile(ratio, rounds, 0.25), q2 = quantile(ratio, rounds, 0.5),
                 q3 = quantile(ratio, rounds, 0.75);
    if (pingpong)
      printf("bench_pmpi pingpong: %d-byte messages, ranks 0 and 1 of %d, %d rounds x %d round trips, preloaded: %s\n", bytes,
             np, rounds, iters, tool ? pre : "NOT preloaded (control: MPI_X and PMPI_X are one function)");
    else
      printf("bench_pmpi allreduce: %d doubles on %d ranks, %d rounds x %d calls, preloaded: %s\n", count, np, rounds, iters,
             tool ? pre : "NOT preloaded (control: MPI_X and PMPI_X are one function)");
    printf("  PMPI_ (not intercepted): median %.4f us/%s\n", mr * 1e6, pingpong ? "message" : "call");
    printf("  MPI_  (through the tool): median %.4f us/%s\n", mv * 1e6, pingpong ? "message" : "call");
    printf("  overhead: %+.2f %% (median of per-round ratios; quartiles %+.2f %% .. %+.2f %%), %+.1f ns/%s\n",
           (q2 - 1.0) * 100.0, (q1 - 1.0) * 100.0, (q3 - 1.0) * 100.0, (mv - mr) * 1e9, pingpong ? "message" : "call");
  }
  free(raw);
  free(via);
  free(ratio);
  free(buf);
  MPI_Finalize();
  return 0;
}

/* tessera_demo: moves data through 1D, 2D, 2.5D and 3D process grids with
 * tessera's accounted collectives, checks every result, and prints the
 * accounting report and the energy report (rank 0). Uses only the public C
 * API.
 *
 *   mpiexec -n 8 tessera_demo [--ranks-per-node N] [--count N] [--energy-out PREFIX]
 *
 * With 8 ranks the grids are 8 (1D), 2x4 (2D), 2x2x2 (2.5D, c = 2) and 2x2x2
 * (3D). Other rank counts work too: each grid takes the largest shape that
 * fits, the remaining ranks sit that grid out. --ranks-per-node N treats
 * ranks [k*N, (k+1)*N) as node k, so that the report splits the traffic into
 * intra-node ("node") and inter-node ("remote") bytes on a single machine.
 * The energy report converts the bytes moved at each level into modelled
 * joules with the machine profile ($TSR_ENERGY_PROFILE or the built-in
 * default) and adds measured joules where RAPL or NVML can be read;
 * --energy-out PREFIX also writes PREFIX.txt, .json, .csv and .matrix.csv.
 * Exit status: 0 when every value was right, 1 otherwise. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera/tessera.h>

static int g_rank = 0;
static long g_wrong = 0; /* wrong values seen on this rank */

/* A tessera call that must succeed; a failure is a bug here (or in tessera):
 * report it and stop the whole job. */
#define CALL(ctx, expr)                                                                  \
  do {                                                                                   \
    tsr_status st_ = (expr);                                                             \
    if (st_ != TSR_SUCCESS) {                                                            \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", g_rank, #expr, tsr_status_name(st_), \
              tsr_last_error(ctx));                                                      \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                      \
    }                                                                                    \
  } while (0)

static void expect(const char* what, double got, double want, long index) {
  if (got != want) {
    if (g_wrong < 5)
      fprintf(stderr, "rank %d: %s: element %ld is %.17g, expected %.17g\n", g_rank, what, index, got, want);
    ++g_wrong;
  }
}

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", g_rank, n);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

static const char* axis_name(tsr_grid_axis a) {
  switch (a) {
    case TSR_AXIS_ROW: return "row";
    case TSR_AXIS_COL: return "col";
    case TSR_AXIS_DEPTH: return "depth";
    case TSR_AXIS_LAYER: return "layer";
    default: return "all";
  }
}

/* Every helper below is collective over one axis of the grid; `me` is the
 * caller's position on the axis and `p` its size. Values are small integers,
 * so that float64 sums are exact and can be compared with ==. */

/* bcast of n doubles from the last member of the axis. */
static void demo_bcast(tsr_context ctx, tsr_grid g, tsr_grid_axis a, size_t n) {
  int me, p;
  CALL(ctx, tsr_grid_axis_info(g, a, &me, &p));
  const int root = p - 1;
  double* buf = xmalloc(n * sizeof *buf);
  for (size_t k = 0; k < n; ++k) buf[k] = me == root ? (double)(k % 1000) + 0.5 : -1.0;
  CALL(ctx, tsr_bcast(g, a, buf, n, TSR_FLOAT64, root));
  char what[64];
  snprintf(what, sizeof what, "bcast on %s", axis_name(a));
  for (size_t k = 0; k < n; ++k) expect(what, buf[k], (double)(k % 1000) + 0.5, (long)k);
  free(buf);
}

/* allreduce: float64 sum of n elements (in place), and int64 max. */
static void demo_allreduce(tsr_context ctx, tsr_grid g, tsr_grid_axis a, size_t n) {
  int me, p;
  CALL(ctx, tsr_grid_axis_info(g, a, &me, &p));
  double* x = xmalloc(n * sizeof *x);
  for (size_t k = 0; k < n; ++k) x[k] = (double)(me + 1) + (double)(k % 7);
  CALL(ctx, tsr_allreduce(g, a, x, x, n, TSR_FLOAT64, TSR_SUM));
  char what[64];
  snprintf(what, sizeof what, "allreduce(sum) on %s", axis_name(a));
  for (size_t k = 0; k < n; ++k) expect(what, x[k], p * (p + 1) / 2.0 + (double)p * (double)(k % 7), (long)k);
  free(x);

  int64_t mine = 10 * (int64_t)me, top = -1;
  CALL(ctx, tsr_allreduce(g, a, &mine, &top, 1, TSR_INT64, TSR_MAX));
  snprintf(what, sizeof what, "allreduce(max) on %s", axis_name(a));
  expect(what, (double)top, 10.0 * (p - 1), 0);
}

/* allgather: n int32 from each member, in axis order. */
static void demo_allgather(tsr_context ctx, tsr_grid g, tsr_grid_axis a, size_t n) {
  int me, p;
  CALL(ctx, tsr_grid_axis_info(g, a, &me, &p));
  int32_t* s = xmalloc(n * sizeof *s);
  int32_t* r = xmalloc((size_t)p * n * sizeof *r);
  for (size_t k = 0; k < n; ++k) s[k] = (int32_t)(1000 * me + (int)(k % 1000));
  CALL(ctx, tsr_allgather(g, a, s, n, r, TSR_INT32));
  char what[64];
  snprintf(what, sizeof what, "allgather on %s", axis_name(a));
  for (int q = 0; q < p; ++q)
    for (size_t k = 0; k < n; ++k)
      expect(what, r[(size_t)q * n + k], 1000.0 * q + (double)(k % 1000), (long)((size_t)q * n + k));
  free(s);
  free(r);
}

/* reduce_scatter: block b of every member's p*n doubles is summed into member b. */
static void demo_reduce_scatter(tsr_context ctx, tsr_grid g, tsr_grid_axis a, size_t n) {
  int me, p;
  CALL(ctx, tsr_grid_axis_info(g, a, &me, &p));
  double* s = xmalloc((size_t)p * n * sizeof *s);
  double* r = xmalloc(n * sizeof *r);
  for (int b = 0; b < p; ++b)
    for (size_t k = 0; k < n; ++k) s[(size_t)b * n + k] = (double)(me + b) + (double)(k % 5);
  CALL(ctx, tsr_reduce_scatter(g, a, s, r, n, TSR_FLOAT64, TSR_SUM));
  char what[64];
  snprintf(what, sizeof what, "reduce_scatter on %s", axis_name(a));
  /* sum over members m of (m + me + k%5) */
  for (size_t k = 0; k < n; ++k)
    expect(what, r[k], p * (p - 1) / 2.0 + (double)p * (me + (double)(k % 5)), (long)k);
  free(s);
  free(r);
}

/* alltoall: member m sends block b = {m, b, k} to member b (a transpose). */
static void demo_alltoall(tsr_context ctx, tsr_grid g, tsr_grid_axis a, size_t n) {
  int me, p;
  CALL(ctx, tsr_grid_axis_info(g, a, &me, &p));
  double* s = xmalloc((size_t)p * n * sizeof *s);
  double* r = xmalloc((size_t)p * n * sizeof *r);
  for (int b = 0; b < p; ++b)
    for (size_t k = 0; k < n; ++k) s[(size_t)b * n + k] = 1e6 * me + 1e3 * b + (double)(k % 1000);
  CALL(ctx, tsr_alltoall(g, a, s, r, n, TSR_FLOAT64));
  char what[64];
  snprintf(what, sizeof what, "alltoall on %s", axis_name(a));
  for (int b = 0; b < p; ++b)
    for (size_t k = 0; k < n; ++k)
      expect(what, r[(size_t)b * n + k], 1e6 * b + 1e3 * me + (double)(k % 1000), (long)((size_t)b * n + k));
  free(s);
  free(r);
}

/* shift by `by` positions (cyclic): receive from the member `by` behind. */
static void demo_shift(tsr_context ctx, tsr_grid g, tsr_grid_axis a, size_t n, int by) {
  int me, p;
  CALL(ctx, tsr_grid_axis_info(g, a, &me, &p));
  double* s = xmalloc(n * sizeof *s);
  double* r = xmalloc(n * sizeof *r);
  for (size_t k = 0; k < n; ++k) s[k] = 1e4 * me + (double)(k % 1000);
  CALL(ctx, tsr_shift(g, a, s, r, n, TSR_FLOAT64, by));
  const int from = (((me - by) % p) + p) % p;
  char what[64];
  snprintf(what, sizeof what, "shift(%+d) on %s", by, axis_name(a));
  for (size_t k = 0; k < n; ++k) expect(what, r[k], 1e4 * from + (double)(k % 1000), (long)k);
  free(s);
  free(r);
}

/* Builds one grid inside its own region, runs `steps` on it, frees it. */
typedef void (*steps_fn)(tsr_context ctx, tsr_grid g, size_t n);

static void run_grid(tsr_context ctx, const char* region, tsr_grid_kind kind, size_t n, steps_fn steps) {
  int nranks = 0, dims[3] = {0, 0, 0}, nused = 0, member = 0, within = 0, total = 0;
  CALL(ctx, tsr_context_size(ctx, &nranks));
  CALL(NULL, tsr_grid_dims_create(kind, nranks, 1, dims, &nused));
  CALL(ctx, tsr_region_begin(ctx, region));
  tsr_grid g = NULL;
  CALL(ctx, tsr_grid_create(ctx, kind, dims, &g));
  CALL(ctx, tsr_grid_rows_within_node(g, &within, &total));
  if (g_rank == 0)
    printf("  %-5s grid %dx%dx%d on %d of %d ranks; %d of %d rows inside a node\n", region, dims[0], dims[1],
           dims[2], nused, nranks, within, total);
  CALL(ctx, tsr_grid_is_member(g, &member));
  if (member) steps(ctx, g, n);
  CALL(ctx, tsr_grid_destroy(&g));
  CALL(ctx, tsr_region_end(ctx, region));
}

/* 1D (data parallel): one axis spans the grid. */
static void steps_1d(tsr_context ctx, tsr_grid g, size_t n) {
  demo_bcast(ctx, g, TSR_AXIS_ALL, n);         /* parameters from one rank   */
  demo_allreduce(ctx, g, TSR_AXIS_ALL, n);     /* gradient all-reduce        */
  demo_reduce_scatter(ctx, g, TSR_AXIS_ALL, n / 8 + 1); /* ZeRO-style shards */
  demo_allgather(ctx, g, TSR_AXIS_ALL, n / 8 + 1);
  demo_shift(ctx, g, TSR_AXIS_ALL, n / 4, 1);  /* ring step                  */
}

/* 2D (SUMMA-like): broadcasts along rows and columns, reductions on rows. */
static void steps_2d(tsr_context ctx, tsr_grid g, size_t n) {
  demo_bcast(ctx, g, TSR_AXIS_ROW, n);         /* A panel along the row      */
  demo_bcast(ctx, g, TSR_AXIS_COL, n);         /* B panel along the column   */
  demo_allreduce(ctx, g, TSR_AXIS_ROW, n / 2);
  demo_reduce_scatter(ctx, g, TSR_AXIS_COL, n / 4);
  demo_allgather(ctx, g, TSR_AXIS_ROW, n / 4);
  demo_alltoall(ctx, g, TSR_AXIS_ROW, n / 8 + 1);
  demo_shift(ctx, g, TSR_AXIS_ROW, n / 2, -1); /* Cannon-style skew          */
  demo_shift(ctx, g, TSR_AXIS_COL, n / 2, 1);
}

/* 2.5D (Solomonik-Demmel): replicate along depth, work in layers, reduce back. */
static void steps_2p5d(tsr_context ctx, tsr_grid g, size_t n) {
  demo_bcast(ctx, g, TSR_AXIS_DEPTH, n);       /* replicate the inputs       */
  demo_shift(ctx, g, TSR_AXIS_ROW, n / 2, 1);  /* layer-local shifts         */
  demo_shift(ctx, g, TSR_AXIS_COL, n / 2, 1);
  demo_allreduce(ctx, g, TSR_AXIS_LAYER, n / 8 + 1);
  demo_reduce_scatter(ctx, g, TSR_AXIS_DEPTH, n / 2); /* sum the layers      */
}

/* 3D: gather the operands along rows and columns, reduce along the fibers. */
static void steps_3d(tsr_context ctx, tsr_grid g, size_t n) {
  demo_allgather(ctx, g, TSR_AXIS_ROW, n / 2);
  demo_allgather(ctx, g, TSR_AXIS_COL, n / 2);
  demo_reduce_scatter(ctx, g, TSR_AXIS_DEPTH, n / 2);
  demo_alltoall(ctx, g, TSR_AXIS_DEPTH, n / 8 + 1);
  demo_shift(ctx, g, TSR_AXIS_DEPTH, n / 4, -1);
  demo_allreduce(ctx, g, TSR_AXIS_ALL, 16);
}

static int usage(const char* argv0) {
  if (g_rank == 0)
    fprintf(stderr, "usage: %s [--ranks-per-node N] [--count N] [--energy-out PREFIX]\n"
                    "  --ranks-per-node N  simulate nodes of N consecutive ranks (default: detect)\n"
                    "  --count N           elements per message, about (default 4096)\n"
                    "  --energy-out PREFIX write the energy report to PREFIX.txt, .json, .csv, .matrix.csv\n",
            argv0);
  return 1;
}

int main(int argc, char** argv) {
  int provided = 0, nranks = 0, node = 0, nnodes = 0;
  int ranks_per_node = 0;
  long count = 4096;
  const char* energy_out = NULL;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  if (provided < MPI_THREAD_FUNNELED) {
    if (g_rank == 0) fprintf(stderr, "MPI provides thread level %d; tessera needs MPI_THREAD_FUNNELED\n", provided);
    MPI_Finalize();
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    char* end = NULL;
    if (strcmp(argv[i], "--ranks-per-node") == 0 && i + 1 < argc) {
      ranks_per_node = (int)strtol(argv[++i], &end, 10);
      if (*end != '\0' || ranks_per_node < 0) ranks_per_node = -1;
    } else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
      count = strtol(argv[++i], &end, 10);
      if (*end != '\0' || count < 8 || count > (1L << 24)) count = -1;
    } else if (strcmp(argv[i], "--energy-out") == 0 && i + 1 < argc && argv[i + 1][0] != '\0') {
      energy_out = argv[++i];
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(argv[0]);
      MPI_Finalize();
      return 0;
    } else {
      ranks_per_node = -1;
    }
    if (ranks_per_node < 0 || count < 0) {
      int rc = usage(argv[0]);
      MPI_Finalize();
      return rc;
    }
  }

  tsr_context ctx = NULL;
  tsr_context_config config = TSR_CONTEXT_CONFIG_INIT;
  config.ranks_per_node = ranks_per_node;
  CALL(NULL, tsr_context_create_ex(MPI_COMM_WORLD, &config, &ctx));
  CALL(ctx, tsr_context_size(ctx, &nranks));
  CALL(ctx, tsr_context_node(ctx, &node, &nnodes));
  int major = 0, minor = 0, patch = 0;
  CALL(NULL, tsr_get_version(&major, &minor, &patch, NULL));
  if (g_rank == 0) {
    printf("tessera_demo (tessera %d.%d.%d): %d ranks on %d node(s)%s, about %ld elements per message\n", major,
           minor, patch, nranks, nnodes, ranks_per_node > 0 ? " (simulated)" : "", count);
  }

  /* Energy: meters where readable (one reader per node), and the matrix. */
  tsr_energy_config energy = TSR_ENERGY_CONFIG_INIT;
  energy.comm_matrix = 1;
  CALL(ctx, tsr_energy_start(ctx, &energy));

  const size_t n = (size_t)count;
  run_grid(ctx, "1d", TSR_GRID_1D, n, steps_1d);
  run_grid(ctx, "2d", TSR_GRID_2D, n, steps_2d);
  run_grid(ctx, "2.5d", TSR_GRID_2P5D, n, steps_2p5d);
  run_grid(ctx, "3d", TSR_GRID_3D, n, steps_3d);

  /* The report: a collective snapshot; the table is printed by rank 0. */
  tsr_report report = NULL;
  CALL(ctx, tsr_report_create(ctx, 0, &report));
  if (g_rank == 0) {
    size_t len = 0;
    CALL(NULL, tsr_report_format(report, NULL, 0, &len));
    char* text = xmalloc(len + 1);
    CALL(NULL, tsr_report_format(report, text, len + 1, NULL));
    printf("\n%s", text);
    free(text);

    /* The headline: how much of the modelled wire traffic left a node. */
    tsr_counters sum;
    CALL(NULL, tsr_report_stats(report, 0, NULL, NULL, &sum));
    const double intra = (double)sum.coll_wire_sent[TSR_PEER_NODE].bytes + (double)sum.p2p_sent[TSR_PEER_NODE].bytes;
    const double inter =
        (double)sum.coll_wire_sent[TSR_PEER_REMOTE].bytes + (double)sum.p2p_sent[TSR_PEER_REMOTE].bytes;
    printf("\nbytes sent, all ranks: %.0f intra-node, %.0f inter-node (%.1f%% inter-node)\n", intra, inter,
           intra + inter > 0 ? 100.0 * inter / (intra + inter) : 0.0);
  }
  CALL(NULL, tsr_report_destroy(&report));

  /* The energy report: the same regions in joules (modelled, and measured
   * where a meter could be read). Collective; rank 0 prints and writes. */
  tsr_energy_report er = NULL;
  CALL(ctx, tsr_energy_report_create(ctx, NULL, 0, &er));
  if (g_rank == 0) {
    size_t len = 0;
    CALL(NULL, tsr_energy_report_format(er, TSR_OUTPUT_TABLE, NULL, 0, &len));
    char* text = xmalloc(len + 1);
    CALL(NULL, tsr_energy_report_format(er, TSR_OUTPUT_TABLE, text, len + 1, NULL));
    printf("\n%s", text);
    free(text);
    if (energy_out != NULL) {
      const char* ext[4] = {".txt", ".json", ".csv", ".matrix.csv"};
      const tsr_output_format fmt[4] = {TSR_OUTPUT_TABLE, TSR_OUTPUT_JSON, TSR_OUTPUT_CSV, TSR_OUTPUT_MATRIX_CSV};
      for (int k = 0; k < 4; ++k) {
        char* path = xmalloc(strlen(energy_out) + 16);
        sprintf(path, "%s%s", energy_out, ext[k]);
        CALL(NULL, tsr_energy_report_write(er, fmt[k], path));
        printf("wrote %s\n", path);
        free(path);
      }
    }
  }
  CALL(NULL, tsr_energy_report_destroy(&er));
  CALL(ctx, tsr_energy_stop(ctx));
  CALL(ctx, tsr_context_destroy(&ctx));

  long wrong = 0;
  MPI_Allreduce(&g_wrong, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%s: %ld wrong value(s)\n", wrong == 0 ? "PASSED" : "FAILED", wrong);
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}

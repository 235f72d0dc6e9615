/*
 * bench_energy_gemm: the energy report of the distributed GEMM algorithms
 * side by side. One problem (C = A B, m x n x k), the same ranks, each
 * algorithm (1D, 2D, 2.5D where the rank count has a grid for it, 3D) on
 * the grid and layouts its own plan picks, each in its own region; then one
 * energy report: per region, the bytes each level moved (self, intra-node,
 * inter-node), the modelled joules with the profile's range, measured joules
 * where RAPL/NVML can be read ("model only" where not), time and flops.
 * Uses only the public C API (tessera.h, gemm.h, energy.h).
 *
 *   mpiexec -n 8 bench_energy_gemm [--m M] [--n N] [--k K] [--reps R]
 *       [--ranks-per-node P] [--profile FILE] [--out PREFIX] [--full] [--csv FILE]
 *
 * --ranks-per-node simulates nodes of P ranks (default: detect them), so
 * that one machine shows how each algorithm splits its traffic between
 * intra-node and inter-node links. --out writes PREFIX.json, PREFIX.csv and
 * PREFIX.txt (the full table). --full prints the full table on stdout too.
 * --csv appends the summary table, one row per algorithm and per call
 * (header first when the file is empty): ranks,nodes,m,n,k,reps,algo,grid,
 * self_bytes,intra_bytes,inter_bytes (summed over ranks),
 * busiest_recv_bytes,lower_bound_bytes,comm_joules,comm_joules_low,
 * comm_joules_high,compute_joules,time_s (slowest rank),energy_source.
 * Exit status: 0, 1 on a tessera error (the message is printed), 2 on bad
 * arguments.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

#define NVAR 5

static int check(tsr_status st, tsr_context ctx, const char* what) {
  if (st == TSR_SUCCESS) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "[rank %d] %s: %s: %s\n", rank, what, tsr_status_name(st), ctx ? tsr_last_error(ctx) : "");
  return 1;
}
#define CHECK(call, what)                        \
  do {                                           \
    if (check((call), ctx, (what))) goto failed; \
  } while (0)

static int parse_i64(const char* s, long long* out) {
  char* end = NULL;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v < 1) return 1;
  *out = v;
  return 0;
}

/* Fill a local block with values in [-1, 1) that depend on the global index
 * (the same matrix whatever the layout). */
static void fill(tsr_matrix mat, double* buf, unsigned seed) {
  int64_t rows = 0, cols = 0, ld = 1;
  tsr_matrix_local_size(mat, &rows, &cols, &ld);
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) {
      int64_t gi = 0, gj = 0;
      tsr_matrix_global_index(mat, i, j, &gi, &gj);
      unsigned h = (unsigned)(gi * 2654435761u) ^ (unsigned)(gj * 40503u) ^ seed;
      h ^= h >> 13;
      h *= 0x5bd1e995u;
      h ^= h >> 15;
      buf[i + j * ld] = (double)(h % 2000u) / 1000.0 - 1.0;
    }
}

static double* alloc_local(tsr_matrix mat) {
  int64_t rows = 0, cols = 0, ld = 1;
  tsr_matrix_local_size(mat, &rows, &cols, &ld);
  size_t n = (rows > 0 && cols > 0) ? (size_t)(ld * (cols - 1) + rows) : 1;
  return (double*)calloc(n, sizeof(double));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  long long m = 2048, n = 2048, k = 2048, reps = 3, rpn = 0;
  const char* profile_path = NULL;
  const char* out = NULL;
  const char* csv_path = NULL;
  int full = 0, bad = 0;
  for (int i = 1; i < argc && !bad; ++i) {
    const char* a = argv[i];
    const int more = i + 1 < argc;
    if (!strcmp(a, "--m") && more) bad = parse_i64(argv[++i], &m);
    else if (!strcmp(a, "--n") && more) bad = parse_i64(argv[++i], &n);
    else if (!strcmp(a, "--k") && more) bad = parse_i64(argv[++i], &k);
    else if (!strcmp(a, "--reps") && more) bad = parse_i64(argv[++i], &reps);
    else if (!strcmp(a, "--ranks-per-node") && more) bad = parse_i64(argv[++i], &rpn);
    else if (!strcmp(a, "--profile") && more) profile_path = argv[++i];
    else if (!strcmp(a, "--out") && more) out = argv[++i];
    else if (!strcmp(a, "--full")) full = 1;
    else if (!strcmp(a, "--csv") && more) csv_path = argv[++i];
    else bad = 1;
  }
  if (bad) {
    if (rank == 0)
      fprintf(stderr,
              "usage: bench_energy_gemm [--m M] [--n N] [--k K] [--reps R] [--ranks-per-node P]\n"
              "                         [--profile FILE] [--out PREFIX] [--full] [--csv FILE]\n"
              "                         (M, N, K, R, P: positive integers)\n");
    MPI_Finalize();
    return 2;
  }

  tsr_context ctx = NULL;
  tsr_energy_profile profile = NULL;
  tsr_energy_report rep = NULL;
  tsr_report counters = NULL;
  int failed_rc = 0;
  tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
  cfg.ranks_per_node = (int)rpn;
  if (check(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx), NULL, "tsr_context_create_ex")) goto failed;
  CHECK(tsr_energy_profile_load(profile_path, &profile), "tsr_energy_profile_load");
  CHECK(tsr_energy_start(ctx, NULL), "tsr_energy_start");

  /* The four algorithms on the grids of their plans, and 3D on the cube
   * q x q x q when the rank count is a cube and the 3D plan took another
   * shape (the plan picks grids by shape, e.g. 2x4x1 for a square problem on
   * 8 ranks). */
  const tsr_gemm_algo algos[NVAR] = {TSR_GEMM_1D, TSR_GEMM_2D, TSR_GEMM_2P5D, TSR_GEMM_3D, TSR_GEMM_3D};
  const char* names[NVAR] = {"1D", "2D", "2.5D", "3D", "3D-cube"};
  tsr_gemm_plan plans[NVAR];
  int planned[NVAR] = {0, 0, 0, 0, 0};
  for (int a = 0; a < NVAR; ++a) {
    if (a == NVAR - 1) { /* the cube */
      int q = 1;
      while ((q + 1) * (q + 1) * (q + 1) <= size) ++q;
      if (q < 2 || q * q * q != size || !planned[3] ||
          (plans[3].dims[0] == q && plans[3].dims[1] == q && plans[3].dims[2] == q))
        continue;
      plans[a] = plans[3];
      plans[a].grid_kind = TSR_GRID_3D;
      for (int d = 0; d < 3; ++d) {
        plans[a].dims[d] = q;
        plans[a].roles[d] = d;
      }
      plans[a].nranks = size;
      plans[a].flops = 2.0 * (double)m * (double)n * (double)k / (double)size;
      CHECK(tsr_gemm_layouts(TSR_GEMM_3D, TSR_NOTRANS, TSR_NOTRANS, plans[a].roles, plans[a].layouts),
            "tsr_gemm_layouts");
      planned[a] = 1;
    } else {
      tsr_gemm_problem pb = TSR_GEMM_PROBLEM_INIT;
      pb.m = m;
      pb.n = n;
      pb.k = k;
      pb.elem_size = sizeof(double);
      pb.nranks = size;
      pb.algo = algos[a];
      pb.allow_idle = 0; /* every algorithm on all the ranks: the same machine for each */
      tsr_status st = tsr_gemm_plan_create(&pb, &plans[a]);
      if (st == TSR_ERR_SHAPE) {
        if (rank == 0)
          printf("# %s: no grid on %d ranks (%s), skipped\n", names[a], size, tsr_last_error(NULL));
        continue;
      }
      CHECK(st, "tsr_gemm_plan_create");
      planned[a] = 1;
    }

    tsr_grid grid = NULL;
    tsr_matrix A = NULL, B = NULL, C = NULL;
    double *pa = NULL, *pbuf = NULL, *pc = NULL;
    const tsr_gemm_plan* pl = &plans[a];
    CHECK(tsr_grid_create(ctx, pl->grid_kind, pl->dims, &grid), "tsr_grid_create");
    CHECK(tsr_matrix_create(grid, m, k, TSR_FLOAT64, &pl->layouts[0], 0, &A), "tsr_matrix_create A");
    CHECK(tsr_matrix_create(grid, k, n, TSR_FLOAT64, &pl->layouts[1], 0, &B), "tsr_matrix_create B");
    CHECK(tsr_matrix_create(grid, m, n, TSR_FLOAT64, &pl->layouts[2], 0, &C), "tsr_matrix_create C");
    pa = alloc_local(A);
    pbuf = alloc_local(B);
    pc = alloc_local(C);
    if (!pa || !pbuf || !pc) {
      fprintf(stderr, "[rank %d] out of memory\n", rank);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fill(A, pa, 1u);
    fill(B, pbuf, 2u);
    /* One warm-up call outside the region (workspace, first touch). */
    CHECK(tsr_gemm_execute(pl, 1.0, A, pa, B, pbuf, 0.0, C, pc), "tsr_gemm_execute");
    MPI_Barrier(MPI_COMM_WORLD);
    const char* region = names[a];
    int member = 0;
    tsr_grid_is_member(grid, &member);
    CHECK(tsr_region_begin(ctx, region), "tsr_region_begin");
    for (long long r = 0; r < reps; ++r) {
      CHECK(tsr_gemm_execute(pl, 1.0, A, pa, B, pbuf, 0.0, C, pc), "tsr_gemm_execute");
      /* This rank's local GEMM flops: its share of the product (the plan's
       * busiest-rank figure; balanced blocks differ by at most a row). */
      if (member) CHECK(tsr_flops_add(ctx, (uint64_t)pl->flops), "tsr_flops_add");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(tsr_region_end(ctx, region), "tsr_region_end");
    tsr_matrix_destroy(&A);
    tsr_matrix_destroy(&B);
    tsr_matrix_destroy(&C);
    tsr_grid_destroy(&grid);
    free(pa);
    free(pbuf);
    free(pc);
  }

  CHECK(tsr_report_create(ctx, 0, &counters), "tsr_report_create");
  CHECK(tsr_energy_report_create(ctx, profile, 0, &rep), "tsr_energy_report_create");
  if (rank == 0) {
    const char* source = NULL;
    const char *pname = NULL, *pfile = NULL;
    tsr_energy_report_source(rep, NULL, &source);
    tsr_energy_profile_name(profile, &pname, &pfile);
    int nnodes = 1, node = 0;
    tsr_context_node(ctx, &node, &nnodes);
    printf("# bench_energy_gemm: C = A B, %lld x %lld x %lld double, %d ranks on %d node(s), "
           "%lld call(s) per algorithm\n",
           m, n, k, size, nnodes, reps);
    printf("# profile %s%s%s; energy source: %s\n", pname, pfile && *pfile ? " from " : "",
           pfile ? pfile : "", source);
    printf("# per call, summed over ranks: bytes moved per level, modelled joules (typical [low .. high]);\n"
           "# busiest rank's received bytes against the lower bound; time of the slowest rank\n");
    printf("%-7s %-9s %13s %13s %13s %11s %23s %12s %9s %10s\n", "algo", "grid", "self B", "intra B",
           "inter B", "comm J", "range J", "compute J", "recv/LB", "time s");
    FILE* csv = NULL;
    if (csv_path) {
      csv = fopen(csv_path, "a");
      if (!csv) {
        fprintf(stderr, "bench_energy_gemm: cannot write %s\n", csv_path);
        failed_rc = 1;
      } else if (ftell(csv) == 0) {
        fprintf(csv, "ranks,nodes,m,n,k,reps,algo,grid,self_bytes,intra_bytes,inter_bytes,busiest_recv_bytes,"
                     "lower_bound_bytes,comm_joules,comm_joules_low,comm_joules_high,compute_joules,time_s,"
                     "energy_source\n");
      }
    }
    for (int a = 0; a < NVAR; ++a) {
      if (!planned[a]) continue;
      const char* region = names[a];
      int idx = -1;
      if (tsr_energy_report_find(rep, region, &idx) != TSR_SUCCESS) continue;
      tsr_energy_estimate sum, mx;
      tsr_energy_report_stat(rep, idx, TSR_STAT_SUM, &sum);
      tsr_energy_report_stat(rep, idx, TSR_STAT_MAX, &mx);
      const double r = (double)reps;
      double comm = 0, lo = 0, hi = 0;
      for (int l = TSR_LEVEL_SELF; l <= TSR_LEVEL_INTER_NODE; ++l) {
        comm += sum.joules[l];
        lo += sum.joules_low[l];
        hi += sum.joules_high[l];
      }
      double recv = 0;
      char line[512];
      size_t need = 0;
      tsr_gemm_report_format(counters, region, &plans[a], (int)reps, line, sizeof line, &need, &recv);
      char grid[32];
      snprintf(grid, sizeof grid, "%dx%dx%d", plans[a].dims[0], plans[a].dims[1], plans[a].dims[2]);
      char range[64];
      snprintf(range, sizeof range, "[%.3g .. %.3g]", lo / r, hi / r);
      printf("%-7s %-9s %13.0f %13.0f %13.0f %11.4g %23s %12.4g %9.3f %10.4f\n", region, grid,
             (double)sum.moved_bytes[TSR_LEVEL_SELF] / r, (double)sum.moved_bytes[TSR_LEVEL_INTRA_NODE] / r,
             (double)sum.moved_bytes[TSR_LEVEL_INTER_NODE] / r, comm / r, range, sum.flop_joules / r,
             plans[a].lower_bound_bytes > 0 ? recv / plans[a].lower_bound_bytes : 0.0, mx.seconds / r);
      if (csv)
        fprintf(csv, "%d,%d,%lld,%lld,%lld,%lld,%s,%s,%.0f,%.0f,%.0f,%.0f,%.0f,%.6g,%.6g,%.6g,%.6g,%.6f,%s\n", size,
                nnodes, m, n, k, reps, region, grid, (double)sum.moved_bytes[TSR_LEVEL_SELF] / r,
                (double)sum.moved_bytes[TSR_LEVEL_INTRA_NODE] / r, (double)sum.moved_bytes[TSR_LEVEL_INTER_NODE] / r,
                recv, plans[a].lower_bound_bytes, comm / r, lo / r, hi / r, sum.flop_joules / r, mx.seconds / r,
                source);
    }
    if (csv) fclose(csv);
    if (full) {
      size_t need = 0;
      tsr_energy_report_format(rep, TSR_OUTPUT_TABLE, NULL, 0, &need);
      char* text = (char*)malloc(need + 1);
      if (text && tsr_energy_report_format(rep, TSR_OUTPUT_TABLE, text, need + 1, &need) == TSR_SUCCESS)
        fputs(text, stdout);
      free(text);
    }
    if (out) {
      char path[4096];
      const char* ext[3] = {"json", "csv", "txt"};
      const tsr_output_format fmt[3] = {TSR_OUTPUT_JSON, TSR_OUTPUT_CSV, TSR_OUTPUT_TABLE};
      for (int f = 0; f < 3; ++f) {
        snprintf(path, sizeof path, "%s.%s", out, ext[f]);
        if (check(tsr_energy_report_write(rep, fmt[f], path), ctx, "tsr_energy_report_write")) failed_rc = 1;
        else printf("# wrote %s\n", path);
      }
    }
  }
  tsr_energy_report_destroy(&rep);
  tsr_report_destroy(&counters);
  CHECK(tsr_energy_stop(ctx), "tsr_energy_stop");
  tsr_energy_profile_destroy(&profile);
  tsr_context_destroy(&ctx);
  MPI_Finalize();
  return failed_rc;

failed:
  /* A failed collective call fails on every rank (tessera agrees on errors),
   * so every rank gets here together. */
  tsr_energy_report_destroy(&rep);
  tsr_report_destroy(&counters);
  tsr_energy_profile_destroy(&profile);
  tsr_context_destroy(&ctx);
  MPI_Finalize();
  return 1;
}

/*
 * bench_plan_energy: the GEMM plans chosen by time, by energy and by
 * energy x time for one problem, every candidate the planner considered
 * (for a time-against-joules plot with the Pareto front: plot_pareto.py),
 * and, with --run, the time- and energy-optimal plans executed side by side
 * with their measured bytes by level and energy report. Public C API only.
 *
 *   bench_plan_energy --ranks P [--m M] [--n N] [--k K] [--elem 8]
 *       [--ranks-per-node R] [--profile FILE] [--csv FILE]
 *   mpiexec -n P bench_plan_energy --run [--reps N] ... (same options)
 *
 * Without --run it plans only (no MPI communication; any P). --run executes
 * the plans on the ranks of the job (P = the job's size), each in its own
 * region ("plan-time", "plan-energy"), one warm-up call outside, and prints
 * the energy report's bytes per level and modelled joules per call next to
 * the plan's model: the modelled intra- and inter-node bytes must equal the
 * measured ones (the planner and the transport use the same wire model and
 * node map). --ranks-per-node simulates nodes in both. Exit status: 0, 1 on
 * a tessera error, 2 on bad arguments.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

static const char* obj_name(int o) { return o == 0 ? "time" : o == 1 ? "energy" : "energy-x-time"; }
static const char* kind_name(int k) {
  static const char* names[] = {"?", "1D", "2D", "2.5D", "3D", "3D-any"};
  return k >= 1 && k <= 5 ? names[k] : "?";
}
static char dim_char(int d) { return d < 0 ? '-' : "ijk"[d]; }

static int parse_ll(const char* s, long long* out, long long lo) {
  char* end = NULL;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v < lo) return 1;
  *out = v;
  return 0;
}

static int usage(int rank, const char* why) {
  if (rank == 0)
    fprintf(stderr, "bench_plan_energy: %s\nusage: bench_plan_energy --ranks P [--m M] [--n N] [--k K] [--elem 8] "
                    "[--ranks-per-node R] [--profile FILE] [--csv FILE] [--run] [--reps N]\n", why);
  return 2;
}

/* Fill a local block with values that depend on the global index only. */
static void fill(tsr_matrix mat, void* buf, int dbl) {
  int64_t rows = 0, cols = 0, ld = 1, i, j, gi, gj;
  tsr_matrix_local_size(mat, &rows, &cols, &ld);
  for (j = 0; j < cols; ++j)
    for (i = 0; i < rows; ++i) {
      tsr_matrix_global_index(mat, i, j, &gi, &gj);
      double v = (double)((gi * 131 + gj * 71) % 1000) / 1000.0 - 0.5;
      if (dbl) ((double*)buf)[i + j * ld] = v;
      else ((float*)buf)[i + j * ld] = (float)v;
    }
}

static void* alloc_local(tsr_matrix mat, size_t es) {
  int64_t rows = 0, cols = 0, ld = 1;
  tsr_matrix_local_size(mat, &rows, &cols, &ld);
  return calloc(rows > 0 && cols > 0 ? (size_t)(ld * (cols - 1) + rows) : 1, es);
}

/* Run one plan reps times in region `name` (one warm-up call outside). */
static int run_plan(tsr_context ctx, const tsr_gemm_plan* plan, const char* name, long long reps, double* seconds) {
  tsr_grid grid = NULL;
  tsr_matrix A = NULL, B = NULL, C = NULL;
  void *a = NULL, *b = NULL, *c = NULL;
  const tsr_dtype t = plan->elem_size == 8 ? TSR_FLOAT64 : TSR_FLOAT32;
  const int64_t ar = plan->m, ac = plan->k, br = plan->k, bc = plan->n;
  long long r;
  int rc = 1;
  double t0;
  if (tsr_grid_create(ctx, plan->grid_kind, plan->dims, &grid) != TSR_SUCCESS) goto out;
  if (tsr_matrix_create(grid, ar, ac, t, &plan->layouts[0], 0, &A) != TSR_SUCCESS) goto out;
  if (tsr_matrix_create(grid, br, bc, t, &plan->layouts[1], 0, &B) != TSR_SUCCESS) goto out;
  if (tsr_matrix_create(grid, plan->m, plan->n, t, &plan->layouts[2], 0, &C) != TSR_SUCCESS) goto out;
  a = alloc_local(A, plan->elem_size);
  b = alloc_local(B, plan->elem_size);
  c = alloc_local(C, plan->elem_size);
  if (!a || !b || !c) goto out;
  fill(A, a, t == TSR_FLOAT64);
  fill(B, b, t == TSR_FLOAT64);
  if (tsr_gemm_execute(plan, 1.0, A, a, B, b, 0.0, C, c) != TSR_SUCCESS) goto out;
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = MPI_Wtime();
  if (tsr_region_begin(ctx, name) != TSR_SUCCESS) goto out;
  for (r = 0; r < reps; ++r)
    if (tsr_gemm_execute(plan, 1.0, A, a, B, b, 0.0, C, c) != TSR_SUCCESS) goto out;
  if (tsr_region_end(ctx, name) != TSR_SUCCESS) goto out;
  *seconds = (MPI_Wtime() - t0) / (double)reps;
  MPI_Allreduce(MPI_IN_PLACE, seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  rc = 0;
out:
  if (rc) fprintf(stderr, "%s: %s\n", name, tsr_last_error(ctx));
  free(a);
  free(b);
  free(c);
  tsr_matrix_destroy(&A);
  tsr_matrix_destroy(&B);
  tsr_matrix_destroy(&C);
  tsr_grid_destroy(&grid);
  return rc;
}

int main(int argc, char** argv) {
  long long m = 4096, n = 4096, k = 4096, elem = 8, ranks = 0, rpn = 0, reps = 3;
  const char* profile_path = NULL;
  const char* csv = NULL;
  int run = 0, rank = 0, size = 1, i, o, rc = 0;
  tsr_energy_profile profile = NULL;
  tsr_gemm_plan plans[3];
  tsr_gemm_candidate* cand[3] = {NULL, NULL, NULL};
  size_t count[3] = {0, 0, 0};
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const int more = i + 1 < argc;
    int bad = 0;
    if (!strcmp(a, "--m") && more) bad = parse_ll(argv[++i], &m, 1);
    else if (!strcmp(a, "--n") && more) bad = parse_ll(argv[++i], &n, 1);
    else if (!strcmp(a, "--k") && more) bad = parse_ll(argv[++i], &k, 1);
    else if (!strcmp(a, "--elem") && more) bad = parse_ll(argv[++i], &elem, 1);
    else if (!strcmp(a, "--ranks") && more) bad = parse_ll(argv[++i], &ranks, 1);
    else if (!strcmp(a, "--ranks-per-node") && more) bad = parse_ll(argv[++i], &rpn, 0);
    else if (!strcmp(a, "--reps") && more) bad = parse_ll(argv[++i], &reps, 1);
    else if (!strcmp(a, "--profile") && more) profile_path = argv[++i];
    else if (!strcmp(a, "--csv") && more) csv = argv[++i];
    else if (!strcmp(a, "--run")) run = 1;
    else bad = 1;
    if (bad) {
      rc = usage(rank, a);
      goto done;
    }
  }
  if (run && ranks == 0) ranks = size;
  if (ranks == 0) {
    rc = usage(rank, "--ranks is required without --run");
    goto done;
  }
  if (run && ranks != size) {
    rc = usage(rank, "--run plans for the job's ranks: leave --ranks out or give the job's size");
    goto done;
  }
  if (run && elem != 4 && elem != 8) {
    rc = usage(rank, "--run multiplies float (--elem 4) or double (--elem 8)");
    goto done;
  }
  if (tsr_energy_profile_load(profile_path, &profile) != TSR_SUCCESS) {
    fprintf(stderr, "%s\n", tsr_last_error(NULL));
    rc = 1;
    goto done;
  }
  for (o = 0; o < 3; ++o) {
    tsr_gemm_problem p = TSR_GEMM_PROBLEM_INIT;
    tsr_status st;
    p.m = m;
    p.n = n;
    p.k = k;
    p.elem_size = (size_t)elem;
    p.nranks = (int)ranks;
    p.ranks_per_node = (int)rpn;
    p.profile = profile;
    p.objective = (tsr_objective)o;
    st = tsr_gemm_plan_create(&p, &plans[o]);
    if (st == TSR_SUCCESS) st = tsr_gemm_plan_candidates(&p, NULL, 0, &count[o]);
    if (st == TSR_SUCCESS) cand[o] = calloc(count[o] ? count[o] : 1, sizeof(tsr_gemm_candidate));
    if (st == TSR_SUCCESS) st = tsr_gemm_plan_candidates(&p, cand[o], count[o], &count[o]);
    if (st != TSR_SUCCESS) {
      fprintf(stderr, "planning by %s: %s\n", obj_name(o), tsr_last_error(NULL));
      rc = 1;
      goto done;
    }
  }
  if (rank == 0) {
    const char* name = NULL;
    tsr_energy_profile_name(profile, &name, NULL);
    printf("# GEMM %lld x %lld x %lld, %lld-byte elements, %lld ranks, %lld per node, profile %s; %zu candidates\n",
           m, n, k, elem, ranks, rpn, name, count[0]);
    printf("# %-14s %-6s %-9s %5s %4s %12s %12s %25s %14s %14s\n", "objective", "algo", "grid", "ranks", "idle",
           "time_s", "joules", "joules [low .. high]", "intra_B", "inter_B");
    for (o = 0; o < 3; ++o) {
      const tsr_gemm_plan* p = &plans[o];
      char grid[32];
      snprintf(grid, sizeof grid, "%dx%dx%d", p->dims[0], p->dims[1], p->dims[2]);
      printf("  %-14s %-6s %-9s %5d %4d %12.5g %12.5g %12.4g .. %-10.4g %14.0f %14.0f\n", obj_name(o),
             tsr_gemm_algo_name(p->options.algo), grid, p->nranks, p->idle_ranks, p->time, p->joules, p->joules_low,
             p->joules_high, p->intra_node_bytes, p->inter_node_bytes);
    }
    if (csv) {
      FILE* f = fopen(csv, "w");
      size_t c;
      if (!f) {
        fprintf(stderr, "cannot write %s\n", csv);
        rc = 1;
        goto done;
      }
      fprintf(f, "algo,grid_kind,d0,d1,d2,roles,panel,ranks,time_s,joules,joules_low,joules_high,busiest_bytes,"
                 "intra_bytes,inter_bytes,memory_bytes,fits,chosen_time,chosen_energy,chosen_edp\n");
      for (c = 0; c < count[0]; ++c) {
        const tsr_gemm_candidate* x = &cand[0][c];
        fprintf(f, "%s,%s,%d,%d,%d,%c%c%c,%lld,%d,%.9g,%.9g,%.9g,%.9g,%.0f,%.0f,%.0f,%.0f,%d,%d,%d,%d\n",
                tsr_gemm_algo_name(x->algo), kind_name(x->grid_kind), x->dims[0], x->dims[1], x->dims[2],
                dim_char(x->roles[0]), dim_char(x->roles[1]), dim_char(x->roles[2]), x->panel,
                x->dims[0] * x->dims[1] * x->dims[2], x->time, x->joules, x->joules_low, x->joules_high, x->bytes,
                x->intra_node_bytes, x->inter_node_bytes, x->memory_bytes, x->fits, cand[0][c].chosen,
                c < count[1] ? cand[1][c].chosen : 0, c < count[2] ? cand[2][c].chosen : 0);
      }
      fclose(f);
      printf("# every candidate: %s (plot: python3 benchmarks/plot_pareto.py %s)\n", csv, csv);
    }
  }
  if (run) {
    tsr_context ctx = NULL;
    tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
    tsr_energy_report rep = NULL;
    double sec[2] = {0, 0};
    const char* regions[2] = {"plan-time", "plan-energy"};
    cfg.ranks_per_node = (int)rpn;
    if (tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &ctx) != TSR_SUCCESS) {
      fprintf(stderr, "%s\n", tsr_last_error(NULL));
      rc = 1;
      goto done;
    }
    for (o = 0; o < 2 && rc == 0; ++o) rc = run_plan(ctx, &plans[o], regions[o], reps, &sec[o]);
    if (rc == 0 && tsr_energy_report_create(ctx, profile, 0, &rep) != TSR_SUCCESS) rc = 1;
    if (rc == 0 && rank == 0) {
      printf("# executed (%lld calls each, per call; model only unless a meter is read)\n", reps);
      printf("# %-12s %12s %14s %14s %14s %14s %12s\n", "region", "wall_s", "intra_B", "model_intra_B", "inter_B",
             "model_inter_B", "links_J");
      for (o = 0; o < 2; ++o) {
        int region = -1;
        tsr_energy_estimate sum;
        memset(&sum, 0, sizeof sum);
        if (tsr_energy_report_find(rep, regions[o], &region) != TSR_SUCCESS ||
            tsr_energy_report_stat(rep, region, TSR_STAT_SUM, &sum) != TSR_SUCCESS) {
          rc = 1;
          break;
        }
        printf("  %-12s %12.4f %14.0f %14.0f %14.0f %14.0f %12.5g\n", regions[o], sec[o],
               (double)sum.moved_bytes[TSR_LEVEL_INTRA_NODE] / (double)reps, plans[o].intra_node_bytes,
               (double)sum.moved_bytes[TSR_LEVEL_INTER_NODE] / (double)reps, plans[o].inter_node_bytes,
               (sum.joules[TSR_LEVEL_INTRA_NODE] + sum.joules[TSR_LEVEL_INTER_NODE]) / (double)reps);
      }
    }
    tsr_energy_report_destroy(&rep);
    if (rc) fprintf(stderr, "%s\n", tsr_last_error(ctx));
    tsr_context_destroy(&ctx);
  }
done:
  for (o = 0; o < 3; ++o) free(cand[o]);
  tsr_energy_profile_destroy(&profile);
  MPI_Finalize();
  return rc;
}

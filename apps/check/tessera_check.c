/* tessera_check: an installation check on the public API only, for sites
 * (`mpiexec -n 2 tessera_check`) and for `spack test run tessera`.
 *
 *  gemm  C = A B on a 2D grid of all ranks (SUMMA), m = 37, n = 29, k = 23
 *        (not multiples of the grid, so blocks are uneven), A(i,l) = i+1+l,
 *        B(l,j) = l-j, scattered from rank 0, gathered back and compared
 *        element by element with the closed form
 *          C(i,j) = sum_l (a+l)(l-j), a = i+1
 *                 = a*S1 - a*j*k + S2 - j*S1, S1 = k(k-1)/2, S2 = (k-1)k(2k-1)/6
 *        (exact in double: integers below 2^53). With more than one rank the
 *        ledger of the region "gemm" must show bytes received on every rank.
 *  lamb  one data-parallel LAMB step (TSR_PRESET_LAMB_PAPER, float32, one
 *        group of n = 1000): rank r holds the gradient (r+1)*G, so the
 *        averaged gradient is g = G*(P+1)/2; the first step of the paper's
 *        rule is u = g/(|g| + eps) + wd*w, ratio = |w|/|u|,
 *        w' = w - lr*ratio*u (docs/OPTIMIZERS.md, section 2), computed here
 *        in double and compared with a relative tolerance of 1e-5; the step
 *        also moves |w - w'| = lr*|w| exactly (the paper's property).
 *
 * Prints one line per check on rank 0 and "tessera_check: PASSED" or
 * "tessera_check: FAILED"; exit status 0, 1 (a wrong value or a failed
 * call) or 2 (bad command line). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera/tessera.h>

static int g_rank = 0;

/* A failed call: the message on every rank, then the program fails. */
static int failed_call(tsr_status st, const char* what) {
  if (st == TSR_SUCCESS) return 0;
  fprintf(stderr, "rank %d: %s failed: %s (%s)\n", g_rank, what, tsr_status_name(st), tsr_last_error(NULL));
  return 1;
}
#define CALL(x)                              \
  do {                                       \
    if (failed_call((x), #x)) goto cleanup;  \
  } while (0)

/* 0 if every rank's ok is 1. */
static int all_ok(int ok) {
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

static int check_gemm(tsr_context ctx, int nranks) {
  const int64_t m = 37, n = 29, k = 23;
  int ok = 0, dims[3] = {0, 0, 0};
  tsr_grid grid = NULL;
  tsr_matrix A = NULL, B = NULL, C = NULL;
  double *ga = NULL, *gb = NULL, *gc = NULL, *la = NULL, *lb = NULL, *lc = NULL;
  tsr_layout lay[3];
  const int roles[3] = {TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE};
  int64_t r = 0, c = 0, ld = 0, wrong = 0;
  tsr_counters cnt;

  CALL(tsr_grid_dims_create(TSR_GRID_2D, nranks, 0, dims, NULL));
  CALL(tsr_grid_create(ctx, TSR_GRID_2D, dims, &grid));
  CALL(tsr_gemm_layouts(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, roles, lay));
  CALL(tsr_matrix_create(grid, m, k, TSR_FLOAT64, &lay[0], 0, &A));
  CALL(tsr_matrix_create(grid, k, n, TSR_FLOAT64, &lay[1], 0, &B));
  CALL(tsr_matrix_create(grid, m, n, TSR_FLOAT64, &lay[2], 0, &C));
  ga = calloc((size_t)(m * k), sizeof(double));
  gb = calloc((size_t)(k * n), sizeof(double));
  gc = calloc((size_t)(m * n), sizeof(double));
  if (!ga || !gb || !gc) goto cleanup;
  for (int64_t l = 0; l < k; ++l)
    for (int64_t i = 0; i < m; ++i) ga[i + l * m] = (double)(i + 1 + l);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t l = 0; l < k; ++l) gb[l + j * k] = (double)(l - j);
  CALL(tsr_matrix_local_size(A, &r, &c, &ld));
  la = calloc((size_t)(ld * (c > 0 ? c : 1)), sizeof(double));
  CALL(tsr_matrix_local_size(B, &r, &c, &ld));
  lb = calloc((size_t)(ld * (c > 0 ? c : 1)), sizeof(double));
  CALL(tsr_matrix_local_size(C, &r, &c, &ld));
  lc = calloc((size_t)(ld * (c > 0 ? c : 1)), sizeof(double));
  if (!la || !lb || !lc) goto cleanup;
  CALL(tsr_matrix_scatter(A, 0, ga, m, la));
  CALL(tsr_matrix_scatter(B, 0, gb, k, lb));
  CALL(tsr_counters_reset(ctx));
  CALL(tsr_region_begin(ctx, "gemm"));
  CALL(tsr_gemm(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, 1.0, A, la, B, lb, 0.0, C, lc));
  CALL(tsr_region_end(ctx, "gemm"));
  CALL(tsr_counters_get(ctx, "gemm", &cnt));
  CALL(tsr_matrix_gather(C, 0, lc, gc, m));
  if (g_rank == 0) {
    const double s1 = (double)(k * (k - 1) / 2), s2 = (double)((k - 1) * k * (2 * k - 1) / 6);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        const double a = (double)(i + 1), jj = (double)j;
        const double want = a * s1 - a * jj * (double)k + s2 - jj * s1;
        if (gc[i + j * m] != want) {
          if (wrong < 3)
            fprintf(stderr, "gemm: C(%lld,%lld) = %.17g, expected %.17g\n", (long long)i, (long long)j,
                    gc[i + j * m], want);
          ++wrong;
        }
      }
  }
  {
    uint64_t recv = cnt.coll_payload_recv;
    for (int p = 0; p < TSR_PEER_CLASSES; ++p) recv += cnt.p2p_recv[p].bytes;
    ok = wrong == 0 && (nranks == 1 || recv > 0);
    if (nranks > 1 && recv == 0) fprintf(stderr, "rank %d: gemm: the ledger shows no bytes received\n", g_rank);
    if (g_rank == 0)
      printf("gemm: %lld x %lld x %lld on a %d x %d grid (2D SUMMA): %lld wrong value(s), "
             "rank 0 received %llu bytes\n",
             (long long)m, (long long)n, (long long)k, dims[0], dims[1], (long long)wrong,
             (unsigned long long)recv);
  }
cleanup:
  tsr_matrix_destroy(&A);
  tsr_matrix_destroy(&B);
  tsr_matrix_destroy(&C);
  tsr_grid_destroy(&grid);
  free(ga);
  free(gb);
  free(gc);
  free(la);
  free(lb);
  free(lc);
  return all_ok(ok);
}

static int check_lamb(tsr_context ctx, int nranks) {
  enum { N = 1000 };
  int ok = 0;
  size_t sizes[1] = {N};
  tsr_optimizer opt = NULL;
  float w[N], grad[N];
  double w0[N], g[N], u[N], lr = 0, wd = 0, eps = 0, nw = 0, nu = 0, nd = 0, worst = 0;
  CALL(tsr_optimizer_create(ctx, TSR_PRESET_LAMB_PAPER, TSR_OPT_DATA_PARALLEL, TSR_FLOAT32, 1, sizes, &opt));
  CALL(tsr_optimizer_set_param(opt, TSR_OPT_LR, 0.01));
  CALL(tsr_optimizer_get_param(opt, 0, TSR_OPT_LR, &lr));
  CALL(tsr_optimizer_get_param(opt, 0, TSR_OPT_WEIGHT_DECAY, &wd));
  CALL(tsr_optimizer_get_param(opt, 0, TSR_OPT_EPS, &eps));
  for (int i = 0; i < N; ++i) {
    w[i] = (float)(1.0 + 0.001 * i);
    /* values exact in float, no zero; the sum over ranks is exact too */
    const float G = (float)((i % 7) - 3.5) / 8.0f;
    grad[i] = (float)(g_rank + 1) * G;
    w0[i] = (double)w[i];
    g[i] = (double)G * (nranks + 1) / 2.0;
  }
  CALL(tsr_optimizer_step(opt, w, grad, N));
  for (int i = 0; i < N; ++i) {
    u[i] = g[i] / (fabs(g[i]) + eps) + wd * w0[i];
    nw += w0[i] * w0[i];
    nu += u[i] * u[i];
  }
  nw = sqrt(nw);
  nu = sqrt(nu);
  for (int i = 0; i < N; ++i) {
    const double want = w0[i] - lr * (nw / nu) * u[i];
    const double err = fabs((double)w[i] - want) / fabs(want);
    if (err > worst) worst = err;
    nd += ((double)w[i] - w0[i]) * ((double)w[i] - w0[i]);
  }
  nd = sqrt(nd);
  ok = worst <= 1e-5 && fabs(nd - lr * nw) <= 1e-3 * lr * nw;
  if (g_rank == 0)
    printf("lamb: one data-parallel step on %d rank(s), n = %d: largest relative error %.2e, "
           "|w - w'| / (lr |w|) = %.6f\n",
           nranks, N, worst, nd / (lr * nw));
cleanup:
  tsr_optimizer_destroy(&opt);
  return all_ok(ok);
}

int main(int argc, char** argv) {
  int provided = 0, nranks = 0, gemm_ok = 0, lamb_ok = 0;
  tsr_context ctx = NULL;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (argc > 1) {
    if (g_rank == 0) fprintf(stderr, "usage: mpiexec -n <ranks> %s (no arguments)\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  if (tsr_context_create(MPI_COMM_WORLD, &ctx) != TSR_SUCCESS) {
    fprintf(stderr, "rank %d: tsr_context_create failed: %s\n", g_rank, tsr_last_error(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  gemm_ok = check_gemm(ctx, nranks);
  lamb_ok = check_lamb(ctx, nranks);
  tsr_context_destroy(&ctx);
  if (g_rank == 0) printf("tessera_check: %s\n", gemm_ok && lamb_ok ? "PASSED" : "FAILED");
  MPI_Finalize();
  return gemm_ok && lamb_ok ? 0 : 1;
}

/* The machine's single-precision GEMM rate through CBLAS: the yardstick the
 * sample applications' GFLOP/s are judged against (apps/gpt/README.md).
 *
 *   OPENBLAS_NUM_THREADS=1 build/benchmarks/bench_sgemm [--reps R] [--shapes gpt|square|all]
 *
 * Shapes: "square" is n^3 for n = 512, 1024, 2048 (the peak); "gpt" are the
 * forward GEMMs of the GPT app's default model (2048 tokens, width 256):
 * QKV, attention projection, MLP up and down, and the LM head, in the
 * row-major orientation the app calls (X[m x k] * W[k x n]). Every shape is
 * timed R times, the shapes interleaved round by round so that a burst of
 * load from other tenants hits all of them alike; the best and the median
 * GFLOP/s (2 m n k / s) are printed, one line per shape, nccl-tests style.
 * The thread count is BLAS's own (OPENBLAS_NUM_THREADS). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  const char *name;
  int m, n, k;
} shape;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void usage(const char *argv0) {
  fprintf(stderr, "usage: %s [--reps R (>= 1)] [--shapes gpt|square|all]\n", argv0);
  exit(2);
}

int main(int argc, char **argv) {
  int reps = 7;
  const char *set = "all";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      char *end = NULL;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 1000) usage(argv[0]);
      reps = (int)v;
    } else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
      set = argv[++i];
      if (strcmp(set, "gpt") && strcmp(set, "square") && strcmp(set, "all")) usage(argv[0]);
    } else {
      usage(argv[0]);
    }
  }
  static const shape all[] = {
      {"square 512", 512, 512, 512},      {"square 1024", 1024, 1024, 1024},
      {"square 2048", 2048, 2048, 2048},  {"gpt qkv", 2048, 768, 256},
      {"gpt attn-proj", 2048, 256, 256},  {"gpt mlp-up", 2048, 1024, 256},
      {"gpt mlp-down", 2048, 256, 1024},  {"gpt lm-head", 2048, 256, 256},
  };
  enum { NS = sizeof all / sizeof all[0] };
  shape sel[NS];
  int ns = 0;
  for (int s = 0; s < NS; ++s)
    if (!strcmp(set, "all") || !strncmp(all[s].name, set, strlen(set))) sel[ns++] = all[s];

  size_t maxa = 0, maxb = 0, maxc = 0;
  for (int s = 0; s < ns; ++s) {
    size_t a = (size_t)sel[s].m * (size_t)sel[s].k, b = (size_t)sel[s].k * (size_t)sel[s].n,
           c = (size_t)sel[s].m * (size_t)sel[s].n;
    if (a > maxa) maxa = a;
    if (b > maxb) maxb = b;
    if (c > maxc) maxc = c;
  }
  float *A = malloc(maxa * sizeof *A), *B = malloc(maxb * sizeof *B), *C = malloc(maxc * sizeof *C);
  double *t = malloc((size_t)ns * (size_t)reps * sizeof *t);
  if (!A || !B || !C || !t) {
    fprintf(stderr, "bench_sgemm: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < maxa; ++i) A[i] = (float)((i * 7u) % 13u) / 13.0f - 0.5f;
  for (size_t i = 0; i < maxb; ++i) B[i] = (float)((i * 5u) % 11u) / 11.0f - 0.5f;
  memset(C, 0, maxc * sizeof *C);

  const char *thr = getenv("OPENBLAS_NUM_THREADS");
  printf("# cblas_sgemm, row-major C = A B, %d reps per shape, shapes interleaved; OPENBLAS_NUM_THREADS=%s\n",
         reps, thr ? thr : "(unset)");
  /* One untimed call per shape first: page faults and BLAS's buffers. */
  for (int s = 0; s < ns; ++s)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sel[s].m, sel[s].n, sel[s].k, 1.0f, A, sel[s].k, B,
                sel[s].n, 0.0f, C, sel[s].n);
  for (int r = 0; r < reps; ++r)
    for (int s = 0; s < ns; ++s) {
      double t0 = now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sel[s].m, sel[s].n, sel[s].k, 1.0f, A, sel[s].k, B,
                  sel[s].n, 0.0f, C, sel[s].n);
      t[s * reps + r] = now() - t0;
    }
  printf("%-14s %6s %6s %6s %10s %10s %10s\n", "# shape", "m", "n", "k", "best_ms", "GF/s_best", "GF/s_med");
  for (int s = 0; s < ns; ++s) {
    double *ts = t + (size_t)s * (size_t)reps;
    qsort(ts, (size_t)reps, sizeof *ts, cmp);
    double flop = 2.0 * sel[s].m * (double)sel[s].n * sel[s].k;
    double med = (reps % 2) ? ts[reps / 2] : 0.5 * (ts[reps / 2 - 1] + ts[reps / 2]);
    printf("%-14s %6d %6d %6d %10.3f %10.1f %10.1f\n", sel[s].name, sel[s].m, sel[s].n, sel[s].k, 1e3 * ts[0],
           flop / ts[0] * 1e-9, flop / med * 1e-9);
  }
  free(A);
  free(B);
  free(C);
  free(t);
  return 0;
}

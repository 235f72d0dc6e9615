/* libtessera-scalapack against plain ScaLAPACK in one run: the same pdgemm_
 * call (C = A B, n x n doubles, nb x nb blocks on the most square BLACS grid)
 * through ScaLAPACK's pdgemm_ (this program links ScaLAPACK) and through the
 * shim's pdgemm_ (dlopen'ed from --shim, RTLD_LOCAL: the program's own
 * pdgemm_ stays ScaLAPACK's), alternating ABBA per repetition. Each time is
 * the slowest rank's (MPI_Wtime around the call, after a barrier). One
 * untimed call of each first (the shim creates its tessera context and
 * workspace there). Prints per size the median [min .. max] of each and the
 * ratio of the medians; checks that both give the same C (1e-12 of the
 * bound sum |a||b|).
 *
 *   mpiexec -n 4 bench_scalapack_shim [--sizes 1024,1536,2048] [--reps 7]
 *                                     [--nb 64] [--shim PATH]
 * Exit status 2 for a bad command line. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TSR_SHIM_PATH
#define TSR_SHIM_PATH "libtessera-scalapack.so"
#endif

typedef void (*pdgemm_fn)(const char*, const char*, const int*, const int*, const int*, const double*, const double*,
                          const int*, const int*, const int*, const double*, const int*, const int*, const int*,
                          const double*, double*, const int*, const int*, const int*);
void pdgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
             const double* a, const int* ia, const int* ja, const int* desca, const double* b, const int* ib,
             const int* jb, const int* descb, const double* beta, double* c, const int* ic, const int* jc,
             const int* descc);
void Cblacs_get(int ctxt, int what, int* val);
void Cblacs_gridinit(int* ctxt, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int ctxt);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb, const int* irsrc,
               const int* icsrc, const int* ictxt, const int* lld, int* info);

static int cmp(const void* x, const void* y) {
  const double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

static void usage(int me, const char* msg) {
  if (me == 0)
    fprintf(stderr, "bench_scalapack_shim: %s\nusage: bench_scalapack_shim [--sizes N,N,...] [--reps R] [--nb NB] "
                    "[--shim PATH]\n", msg);
  MPI_Finalize();
  exit(2);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, np = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int sizes[16] = {1024, 1536, 2048}, nsizes = 3, reps = 7, nb = 64;
  const char* shim = TSR_SHIM_PATH;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--sizes") != 0 && strcmp(argv[i], "--reps") != 0 && strcmp(argv[i], "--nb") != 0 &&
        strcmp(argv[i], "--shim") != 0)
      usage(me, "unknown option");
    if (i + 1 >= argc) usage(me, "an option needs a value");
    if (strcmp(argv[i], "--sizes") == 0) {
      nsizes = 0;
      for (char* s = strtok(argv[++i], ","); s != NULL && nsizes < 16; s = strtok(NULL, ","))
        if ((sizes[nsizes++] = atoi(s)) < 1) usage(me, "sizes must be >= 1");
    } else if (strcmp(argv[i], "--reps") == 0) {
      if ((reps = atoi(argv[++i])) < 1 || reps > 1000) usage(me, "--reps must be 1..1000");
    } else if (strcmp(argv[i], "--nb") == 0) {
      if ((nb = atoi(argv[++i])) < 1) usage(me, "--nb must be >= 1");
    } else if (strcmp(argv[i], "--shim") == 0) {
      shim = argv[++i];
    } else {
      usage(me, "unknown option");
    }
  }
  void* lib = dlopen(shim, RTLD_NOW | RTLD_LOCAL);
  pdgemm_fn through = NULL;
  if (lib != NULL) {
    void* sym = dlsym(lib, "pdgemm_");
    memcpy(&through, &sym, sizeof through); /* object to function pointer (POSIX), without ISO C's warning */
  }
  if (through == NULL) {
    if (me == 0) fprintf(stderr, "bench_scalapack_shim: cannot load pdgemm_ from %s: %s\n", shim, dlerror());
    MPI_Finalize();
    return 1;
  }
  int pr = 1;
  for (int d = 1; d * d <= np; ++d)
    if (np % d == 0) pr = d;
  int ctxt = 0, nprow = 0, npcol = 0, myrow = 0, mycol = 0;
  Cblacs_get(-1, 0, &ctxt);
  Cblacs_gridinit(&ctxt, "Row", pr, np / pr);
  Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
  if (me == 0)
    printf("bench_scalapack_shim: pdgemm_ C = A B, doubles, %d x %d blocks, %d x %d grid, %d reps (ABBA), "
           "slowest rank's time\n%6s %28s %28s %10s %12s\n",
           nb, nb, nprow, npcol, reps, "n", "ScaLAPACK s median [min..max]", "shim s median [min..max]",
           "shim/plain", "max diff/bnd");
  for (int s = 0; s < nsizes; ++s) {
    const int n = sizes[s], zero = 0, one = 1;
    const int lr = numroc_(&n, &nb, &myrow, &zero, &nprow), lc = numroc_(&n, &nb, &mycol, &zero, &npcol);
    const int lld = lr > 1 ? lr : 1;
    int desc[9], info = 0;
    descinit_(desc, &n, &n, &nb, &nb, &zero, &zero, &ctxt, &lld, &info);
    const size_t len = (size_t)lld * (size_t)(lc > 0 ? lc : 1);
    double* a = malloc(len * sizeof(double));
    double* b = malloc(len * sizeof(double));
    double* c0 = malloc(len * sizeof(double));
    double* c1 = malloc(len * sizeof(double));
    for (size_t i = 0; i < len; ++i) {
      a[i] = sin(0.001 * (double)i + me);
      b[i] = cos(0.002 * (double)i - me);
    }
    const double alpha = 1.0, beta = 0.0;
    double* t[2] = {malloc(sizeof(double) * (size_t)reps), malloc(sizeof(double) * (size_t)reps)};
    for (int r = -1; r < reps; ++r)
      for (int x = 0; x < 2; ++x) {
        const int v = (r < 0 || r % 2 == 0) ? x : 1 - x; /* ABBA */
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        (v == 0 ? pdgemm_ : through)("N", "N", &n, &n, &n, &alpha, a, &one, &one, desc, b, &one, &one, desc, &beta,
                                     v == 0 ? c0 : c1, &one, &one, desc);
        double dt = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 0) t[v][r] = dt;
      }
    /* |a|, |b| <= 1: sum |a||b| <= n. */
    double diff = 0.0;
    for (size_t i = 0; i < (size_t)lr * (size_t)lc; ++i)
      diff = fmax(diff, fabs(c0[(i % (size_t)lr) + (i / (size_t)lr) * (size_t)lld] -
                             c1[(i % (size_t)lr) + (i / (size_t)lr) * (size_t)lld]) / n);
    MPI_Allreduce(MPI_IN_PLACE, &diff, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(t[0], (size_t)reps, sizeof(double), cmp);
    qsort(t[1], (size_t)reps, sizeof(double), cmp);
    const double m0 = t[0][reps / 2], m1 = t[1][reps / 2];
    if (me == 0)
      printf("%6d %10.4f [%6.4f..%6.4f] %10.4f [%6.4f..%6.4f] %10.3f %12.2e%s\n", n, m0, t[0][0], t[0][reps - 1], m1,
             t[1][0], t[1][reps - 1], m1 / m0, diff, diff > 1e-12 ? "  MISMATCH" : "");
    free(t[0]);
    free(t[1]);
    free(a);
    free(b);
    free(c0);
    free(c1);
  }
  Cblacs_gridexit(ctxt);
  MPI_Finalize();
  return 0;
}

/* ScaLAPACK's pdgemm (Debian's libscalapack for the MPI in use, BLACS over
 * MPI) under the PMPI tool: C = A*B with M = N = K = 96 in 16x16 blocks on the
 * most square Pr x Pc process grid, inside MPI_Pcontrol region "pdgemm". The
 * result is checked against the product computed here from the same
 * formulas; rank 0 writes the problem and the largest error to
 * <dir>/expect.0.json for pmpi_test.py, which checks the bytes moved. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

void Cblacs_pinfo(int* me, int* np);
void Cblacs_get(int ctxt, int what, int* val);
void Cblacs_gridinit(int* ctxt, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int ctxt);
void Cblacs_exit(int keep_mpi);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb, const int* irsrc,
               const int* icsrc, const int* ictxt, const int* lld, int* info);
void pdgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
             const double* a, const int* ia, const int* ja, const int* desca, const double* b, const int* ib,
             const int* jb, const int* descb, const double* beta, double* c, const int* ic, const int* jc,
             const int* descc);

static double fa(int i, int j) { return 1.0 + (double)((3 * i + 5 * j) % 7) / 8.0; }
static double fb(int i, int j) { return (double)((2 * i + j) % 5) / 4.0 - 0.5; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, np = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int pr = 1;
  for (int d = 1; d * d <= np; ++d)
    if (np % d == 0) pr = d;
  const int pc = np / pr;
  int ctxt = 0, nprow = 0, npcol = 0, myrow = 0, mycol = 0, info = 0;
  Cblacs_get(-1, 0, &ctxt);
  Cblacs_gridinit(&ctxt, "Row", pr, pc);
  Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
  const int n = 96, nb = 16, zero = 0, one = 1;
  const int mloc = numroc_(&n, &nb, &myrow, &zero, &nprow), nloc = numroc_(&n, &nb, &mycol, &zero, &npcol);
  const int lld = mloc > 1 ? mloc : 1;
  int desc[9];
  descinit_(desc, &n, &n, &nb, &nb, &zero, &zero, &ctxt, &lld, &info);
  double* A = malloc(sizeof(double) * (size_t)(mloc * nloc + 1));
  double* B = malloc(sizeof(double) * (size_t)(mloc * nloc + 1));
  double* C = malloc(sizeof(double) * (size_t)(mloc * nloc + 1));
  /* Local (li, lj) <-> global (i, j), block-cyclic from process (0, 0). */
#define GI(li) ((((li) / nb) * nprow + myrow) * nb + (li) % nb)
#define GJ(lj) ((((lj) / nb) * npcol + mycol) * nb + (lj) % nb)
  for (int lj = 0; lj < nloc; ++lj)
    for (int li = 0; li < mloc; ++li) {
      A[li + lj * lld] = fa(GI(li), GJ(lj));
      B[li + lj * lld] = fb(GI(li), GJ(lj));
      C[li + lj * lld] = 0.0;
    }
  const double alpha = 1.0, beta = 0.0;
  MPI_Pcontrol(1, "pdgemm");
  pdgemm_("N", "N", &n, &n, &n, &alpha, A, &one, &one, desc, B, &one, &one, desc, &beta, C, &one, &one, desc);
  MPI_Pcontrol(-1, "pdgemm");
  double err = 0.0;
  for (int lj = 0; lj < nloc; ++lj)
    for (int li = 0; li < mloc; ++li) {
      double s = 0.0;
      for (int k = 0; k < n; ++k) s += fa(GI(li), k) * fb(k, GJ(lj));
      err = fmax(err, fabs(s - C[li + lj * lld]));
    }
  double maxerr = 0.0;
  MPI_Allreduce(&err, &maxerr, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (me == 0 && argc > 1) {
    char path[600];
    snprintf(path, sizeof path, "%s/expect.0.json", argv[1]);
    FILE* f = fopen(path, "w");
    if (f == NULL) {
      perror(path);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fprintf(f, "{\"m\": %d, \"n\": %d, \"k\": %d, \"pr\": %d, \"pc\": %d, \"max_error\": %.3e}\n", n, n, n, nprow,
            npcol, maxerr);
    fclose(f);
  }
  free(A);
  free(B);
  free(C);
  Cblacs_gridexit(ctxt);
  Cblacs_exit(1);
  MPI_Finalize();
  return maxerr < 1e-9 ? 0 : 1;
}

/* libtessera-scalapack without ScaLAPACK (no BLACS, no pdgemm_ to fall back
 * on): pdgemm_ must not abort; it reports like PXERBLA on stderr and leaves C
 * untouched. Exit status 0 when both hold. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void pdgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
             const double* a, const int* ia, const int* ja, const int* desca, const double* b, const int* ib,
             const int* jb, const int* descb, const double* beta, double* c, const int* ic, const int* jc,
             const int* descc);

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int two = 2, one = 1;
  const int desc[9] = {1, 0, 2, 2, 1, 1, 0, 0, 2};
  const double alpha = 1.0, beta = 0.0, a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1};
  double c[4] = {7, 7, 7, 7};
  /* What pdgemm_ writes to stderr, captured in a file. */
  FILE* log = tmpfile();
  const int saved = dup(2);
  fflush(stderr);
  dup2(fileno(log), 2);
  pdgemm_("N", "N", &two, &two, &two, &alpha, a, &one, &one, desc, b, &one, &one, desc, &beta, c, &one, &one, desc);
  fflush(stderr);
  dup2(saved, 2);
  char text[2048] = {0};
  rewind(log);
  const size_t got = fread(text, 1, sizeof text - 1, log);
  text[got] = '\0';
  fclose(log);
  const int untouched = c[0] == 7 && c[1] == 7 && c[2] == 7 && c[3] == 7;
  const int said = strstr(text, "On entry to PDGEMM (libtessera-scalapack)") != NULL &&
                   strstr(text, "no ScaLAPACK pdgemm_ follows") != NULL;
  printf("shim_no_scalapack: C %s; pdgemm_ said: %s", untouched ? "untouched" : "WRITTEN", text);
  printf("%s\n", untouched && said ? "PASS" : "FAIL");
  MPI_Finalize();
  return untouched && said ? 0 : 1;
}

/* Install test, C99: uses only the installed tessera package. Creates a
 * context on MPI_COMM_WORLD and a 2D grid, does one all-reduce along the grid
 * rows, checks the value, takes one sharded LAMB step (the optimizer header
 * from C99, and a static libtessera.a bringing what its kernels link), prints
 * OK on rank 0, and frees everything. */
#include <mpi.h>
#include <stdio.h>
#include <tessera/tessera.h>

static int fail(const char* what) {
  fprintf(stderr, "consumer (C): %s: %s\n", what, tsr_last_error(NULL));
  return 1;
}

int main(int argc, char** argv) {
  int provided = 0, rank = 0, nranks = 0, bad = 0, anybad = 0;
  int dims[3] = {0, 0, 0}, coords[3], code = 0;
  double x[2], y[2] = {0, 0};
  tsr_context ctx = NULL;
  tsr_grid grid = NULL;

  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  if (tsr_get_version(NULL, NULL, NULL, &code) != TSR_SUCCESS || code != TSR_VERSION_CODE) {
    fprintf(stderr, "consumer (C): library version %d, headers %d\n", code, TSR_VERSION_CODE);
    bad = 1;
  }
  if (tsr_context_create(MPI_COMM_WORLD, &ctx) != TSR_SUCCESS) bad = fail("tsr_context_create");
  if (!bad && tsr_grid_dims_create(TSR_GRID_2D, nranks, 0, dims, NULL) != TSR_SUCCESS)
    bad = fail("tsr_grid_dims_create");
  if (!bad && tsr_grid_create(ctx, TSR_GRID_2D, dims, &grid) != TSR_SUCCESS) bad = fail("tsr_grid_create");
  if (!bad && tsr_grid_my_coords(grid, coords) != TSR_SUCCESS) bad = fail("tsr_grid_my_coords");
  if (!bad) {
    x[0] = 1.0;
    x[1] = coords[1] + 1.0; /* j + 1: the row sums to pc*(pc+1)/2 */
    if (tsr_allreduce(grid, TSR_AXIS_ROW, x, y, 2, TSR_FLOAT64, TSR_SUM) != TSR_SUCCESS)
      bad = fail("tsr_allreduce");
  }
  if (!bad && (y[0] != dims[1] || y[1] != dims[1] * (dims[1] + 1) / 2.0)) {
    fprintf(stderr, "consumer (C): rank %d: got {%g, %g}, expected {%d, %g}\n", rank, y[0], y[1], dims[1],
            dims[1] * (dims[1] + 1) / 2.0);
    bad = 1;
  }
  if (!bad) {
    size_t sizes[2] = {6, 2}, i;
    float w[8], g[8];
    double steps = 0;
    tsr_optimizer opt = NULL;
    for (i = 0; i < 8; ++i) {
      w[i] = 1.0f;
      g[i] = (float)(i + 1);
    }
    if (tsr_optimizer_create(ctx, TSR_PRESET_LAMB_PAPER, TSR_OPT_SHARDED, TSR_FLOAT32, 2, sizes, &opt) != TSR_SUCCESS)
      bad = fail("tsr_optimizer_create");
    if (!bad && tsr_optimizer_set_param(opt, TSR_OPT_LR, 0.1) != TSR_SUCCESS) bad = fail("tsr_optimizer_set_param");
    if (!bad && tsr_optimizer_step(opt, w, g, 8) != TSR_SUCCESS) bad = fail("tsr_optimizer_step");
    if (!bad && tsr_optimizer_query(opt, TSR_OPTQ_STEP, 0, &steps) != TSR_SUCCESS) bad = fail("tsr_optimizer_query");
    if (!bad && (steps != 1 || !(w[0] < 1.0f) || !(w[7] < 1.0f))) {
      fprintf(stderr, "consumer (C): rank %d: after one LAMB step: steps %g, w[0] %g, w[7] %g\n", rank, steps, w[0], w[7]);
      bad = 1;
    }
    if (tsr_optimizer_destroy(&opt) != TSR_SUCCESS) bad = fail("tsr_optimizer_destroy");
  }
  if (tsr_grid_destroy(&grid) != TSR_SUCCESS) bad = fail("tsr_grid_destroy");
  if (tsr_context_destroy(&ctx) != TSR_SUCCESS) bad = fail("tsr_context_destroy");

  MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && !anybad) printf("OK\n");
  MPI_Finalize();
  return anybad;
}

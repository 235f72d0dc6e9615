/* An existing MPI code keeps MPI_Init, MPI_Finalize and its communicators;
 * tessera borrows a communicator (it works on a duplicate). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <tessera/tessera.h>

#define TSR_CHECK(call)                                                   \
  do {                                                                    \
    if ((call) != TSR_SUCCESS) {                                          \
      fprintf(stderr, "%s failed: %s\n", #call, tsr_last_error(NULL));    \
      MPI_Abort(MPI_COMM_WORLD, 1);                                       \
    }                                                                     \
  } while (0)

int main(int argc, char** argv) {
  int provided = 0, rank = 0, nranks = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  tsr_context ctx = NULL;
  TSR_CHECK(tsr_context_create(MPI_COMM_WORLD, &ctx));

  int dims[3] = {0, 0, 0}; /* 0: let tessera choose (most square pr x pc) */
  tsr_grid grid = NULL;
  TSR_CHECK(tsr_grid_dims_create(TSR_GRID_2D, nranks, 0, dims, NULL));
  TSR_CHECK(tsr_grid_create(ctx, TSR_GRID_2D, dims, &grid));

  double x[4] = {1, 2, 3, 4}, y[4];
  TSR_CHECK(tsr_region_begin(ctx, "step"));
  /* Sum over the dims[1] ranks of this rank's grid row. */
  TSR_CHECK(tsr_allreduce(grid, TSR_AXIS_ROW, x, y, 4, TSR_FLOAT64, TSR_SUM));
  TSR_CHECK(tsr_region_end(ctx, "step"));

  tsr_report report = NULL; /* every rank's counters, gathered on rank 0 */
  TSR_CHECK(tsr_report_create(ctx, 0, &report));
  if (rank == 0) {
    size_t len = 0;
    TSR_CHECK(tsr_report_format(report, NULL, 0, &len));
    char* text = malloc(len + 1);
    TSR_CHECK(tsr_report_format(report, text, len + 1, NULL));
    fputs(text, stdout);
    free(text);
  }
  TSR_CHECK(tsr_report_destroy(&report));
  TSR_CHECK(tsr_grid_destroy(&grid));
  TSR_CHECK(tsr_context_destroy(&ctx));
  MPI_Finalize();
  return y[3] == 4.0 * dims[1] ? 0 : 1;
}

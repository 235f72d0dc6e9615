/* The public header compiles as C99 (-std=c99 -pedantic) and the C API works
 * from C: context, grid, accounted collective, regions, report, errors. */
#include <stdio.h>
#include <string.h>

#include "tessera/tessera.h"

static int passed = 0, failed = 0, rank = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (cond) {                                                                \
      ++passed;                                                                \
    } else {                                                                   \
      ++failed;                                                                \
      printf("[rank %d] %s:%d: CHECK(%s) failed\n", rank, __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

int main(int argc, char** argv) {
  int provided = 0, size = 1, dims[3] = {0, 0, 0}, coords[3], any = 0, i;
  tsr_context ctx = NULL;
  tsr_grid grid = NULL;
  tsr_report rep = NULL;
  tsr_counters c;
  double x[4], y[4];
  char table[4096];
  size_t need = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  CHECK(tsr_context_create(MPI_COMM_WORLD, &ctx) == TSR_SUCCESS);
  CHECK(tsr_grid_dims_create(TSR_GRID_2D, size, 0, dims, NULL) == TSR_SUCCESS);
  CHECK(dims[0] * dims[1] == size && dims[0] <= dims[1] && dims[2] == 1);
  CHECK(tsr_grid_create(ctx, TSR_GRID_2D, dims, &grid) == TSR_SUCCESS);
  CHECK(tsr_grid_my_coords(grid, coords) == TSR_SUCCESS);
  CHECK(tsr_region_begin(ctx, "c-api") == TSR_SUCCESS);
  for (i = 0; i < 4; ++i) x[i] = coords[1] + i;
  CHECK(tsr_allreduce(grid, TSR_AXIS_ROW, x, y, 4, TSR_FLOAT64, TSR_SUM) == TSR_SUCCESS);
  /* sum over j of (j + 3) for j < dims[1] */
  CHECK(y[3] == dims[1] * (dims[1] - 1) / 2.0 + 3.0 * dims[1]);
  CHECK(tsr_region_end(ctx, "c-api") == TSR_SUCCESS);
  CHECK(tsr_counters_get(ctx, "c-api", &c) == TSR_SUCCESS);
  CHECK(c.coll_calls[TSR_COLL_ALLREDUCE] == 1 && c.coll_payload_sent == 32);

  /* Errors: status, name and a message naming the argument. */
  CHECK(tsr_allreduce(grid, TSR_AXIS_ROW, x, NULL, 4, TSR_FLOAT64, TSR_SUM) == TSR_ERR_INVALID_ARG);
  CHECK(strstr(tsr_last_error(ctx), "tsr_allreduce") != NULL);
  CHECK(strstr(tsr_last_error(ctx), "'rbuf'") != NULL);
  CHECK(strcmp(tsr_status_name(TSR_ERR_SHAPE), "TSR_ERR_SHAPE") == 0);
  dims[0] = dims[1] = dims[2] = 0;
  CHECK(tsr_grid_dims_create(TSR_GRID_3D, 5, 0, dims, NULL) == TSR_ERR_SHAPE);
  CHECK(strstr(tsr_last_error(NULL), "1 (1x1x1), 8 (2x2x2)") != NULL);

  CHECK(tsr_report_create(ctx, 0, &rep) == TSR_SUCCESS);
  CHECK(tsr_report_format(rep, table, sizeof table, &need) == TSR_SUCCESS);
  CHECK(strstr(table, "region c-api") != NULL);
  CHECK(tsr_report_destroy(&rep) == TSR_SUCCESS && rep == NULL);
  CHECK(tsr_grid_destroy(&grid) == TSR_SUCCESS && grid == NULL);
  CHECK(tsr_context_destroy(&ctx) == TSR_SUCCESS && ctx == NULL);

  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%d passed, %d failed\n", passed, any);
  MPI_Finalize();
  return any != 0;
}

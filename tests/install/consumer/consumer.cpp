// Install test, C++17: the C API from C++, with only the installed tessera
// package. Same check as consumer.c, plus one LARS step through the C++
// wrapper (tessera/optimizer.hpp).
#include <mpi.h>

#include <array>
#include <cstdio>
#include <tessera/tessera.h>
#include <tessera/tessera.hpp>
#include <vector>

namespace {
bool ok(tsr_status st, const char* what) {
  if (st == TSR_SUCCESS) return true;
  std::fprintf(stderr, "consumer (C++): %s: %s: %s\n", what, tsr_status_name(st), tsr_last_error(nullptr));
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0, rank = 0, nranks = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  int bad = 0;
  tsr_context ctx = nullptr;
  tsr_grid grid = nullptr;
  std::array<int, 3> dims{0, 0, 0}, coords{};
  std::vector<double> x(2), y(2, 0.0);
  bad |= !ok(tsr_context_create(MPI_COMM_WORLD, &ctx), "tsr_context_create");
  bad = bad || !ok(tsr_grid_dims_create(TSR_GRID_2D, nranks, 0, dims.data(), nullptr), "tsr_grid_dims_create");
  bad = bad || !ok(tsr_grid_create(ctx, TSR_GRID_2D, dims.data(), &grid), "tsr_grid_create");
  bad = bad || !ok(tsr_grid_my_coords(grid, coords.data()), "tsr_grid_my_coords");
  if (!bad) {
    x = {1.0, coords[1] + 1.0};
    bad = !ok(tsr_allreduce(grid, TSR_AXIS_ROW, x.data(), y.data(), x.size(), TSR_FLOAT64, TSR_SUM),
              "tsr_allreduce");
  }
  const double pc = dims[1];
  if (!bad && (y[0] != pc || y[1] != pc * (pc + 1) / 2)) {
    std::fprintf(stderr, "consumer (C++): rank %d: got {%g, %g}, expected {%g, %g}\n", rank, y[0], y[1], pc,
                 pc * (pc + 1) / 2);
    bad = 1;
  }
  if (!bad) {
    try {
      tessera::optimizer opt(ctx, TSR_PRESET_LARS_PAPER, {5, 3}, TSR_OPT_DATA_PARALLEL);
      std::vector<float> w(8, 1.0f), g(8, 0.5f);
      if (!opt.step(w, g) || opt.steps() != 1 || !(w[0] < 1.0f)) {
        std::fprintf(stderr, "consumer (C++): rank %d: the LARS step did not move the weights\n", rank);
        bad = 1;
      }
    } catch (const tessera::error& e) {
      std::fprintf(stderr, "consumer (C++): %s\n", e.what());
      bad = 1;
    }
  }
  bad |= !ok(tsr_grid_destroy(&grid), "tsr_grid_destroy");
  bad |= !ok(tsr_context_destroy(&ctx), "tsr_context_destroy");

  int anybad = 0;
  MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && !anybad) std::printf("OK\n");
  MPI_Finalize();
  return anybad;
}

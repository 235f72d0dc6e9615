// The same with the header-only C++17 API: RAII owners, exceptions.
#include <mpi.h>

#include <cstdio>
#include <tessera/tessera.hpp>
#include <vector>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  bool ok = false;
  try {
    tessera::context ctx(MPI_COMM_WORLD);
    const tessera::dims3 dims = tessera::grid::dims_for(TSR_GRID_2D, ctx.size());
    tessera::grid grid(ctx, TSR_GRID_2D, dims);

    std::vector<double> x{1, 2, 3, 4}, y(4);
    {
      tessera::region step(ctx, "step");
      grid.allreduce(TSR_AXIS_ROW, tessera::span<const double>(x), tessera::span<double>(y));
    }
    const std::string table = tessera::report(ctx).str();  // collective
    if (ctx.rank() == 0) std::fputs(table.c_str(), stdout);
    ok = y[3] == 4.0 * dims[1];
  } catch (const tessera::error& e) {  // status name and message
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }  // grid, then context, freed here (collective)
  MPI_Finalize();
  return ok ? 0 : 1;
}

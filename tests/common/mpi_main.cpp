// GoogleTest main for multi-rank tests: MPI_THREAD_FUNNELED (the level tessera
// documents), output from rank 0 only, and one verdict for all ranks: a test
// that failed on any rank fails the run, and every rank exits with that code.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 2;
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  const int local = RUN_ALL_TESTS();
  // Report which ranks failed (rank 0 prints), then agree on the verdict.
  int any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (any != 0) {
    int failed = local != 0 ? 1 : 0, nfailed = 0;
    MPI_Reduce(&failed, &nfailed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) std::printf("[tessera] tests failed on %d of %d rank(s)\n", nfailed, size);
    if (local != 0 && rank != 0)
      std::printf("[tessera] rank %d had failures (rerun with --gtest_filter to see them)\n", rank);
  }
  MPI_Finalize();
  return any;
}

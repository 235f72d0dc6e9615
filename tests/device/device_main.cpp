// GoogleTest main for the GPU (`cuda`-labelled) tests: like
// tests/common/mpi_main.cpp (MPI_THREAD_FUNNELED, output from rank 0, one
// verdict for all ranks), but where this process sees no CUDA device every
// rank exits with 77, which CTest reports as skipped (SKIP_RETURN_CODE), after
// rank 0 says why. The device check uses the public API (tsr_device_count).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>

#include "tessera/tessera.h"

namespace {
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestStart(const ::testing::TestInfo& t) override { test_ = std::string(t.test_suite_name()) + "." + t.name(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::printf("[rank %d] %s %s:%d: %s\n", rank_, test_.c_str(), r.file_name() ? r.file_name() : "?",
                r.line_number(), r.summary());
    std::fflush(stdout);
  }

 private:
  int rank_;
  std::string test_;
};
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 2;
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Skip on every rank alike: the smallest device count of all ranks.
  int n = 0, least = 0;
  if (tsr_device_count(&n) != TSR_SUCCESS) n = 0;
  MPI_Allreduce(&n, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (least == 0) {
    if (rank == 0) {
      std::printf("SKIP: no CUDA device visible (tsr_device_count = %d on rank 0, 0 on some rank): the cuda tests "
                  "need a GPU\n", n);
      std::fflush(stdout);
    }
    MPI_Finalize();
    return 77;
  }
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}

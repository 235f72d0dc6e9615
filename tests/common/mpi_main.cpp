// GoogleTest main for multi-rank tests: MPI_THREAD_FUNNELED (the level tessera
// documents), output from rank 0 only, and one verdict for all ranks: a test
// that failed on any rank fails the run, and every rank exits with that code.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>

namespace {
// On ranks other than 0: print only failed assertions, prefixed with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // (current_test_info() would deadlock inside OnTestPartResult: keep the name.)
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
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
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
  }
  MPI_Finalize();
  return any;
}

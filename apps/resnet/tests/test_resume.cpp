// Checkpoint and bit-identical resume. On the ranks of the launch: train 8
// steps straight; train the same 8-step schedule but stop after 3 and write
// a checkpoint; resume from it and finish. The resumed run's losses for
// steps 4..8 and its final parameters must equal the straight run's BIT FOR
// BIT (memcmp), for LARS with data-parallel state and per-replica batch
// norm, and for sharded LARS state with synchronised batch norm. A resume
// with another batch size must be refused with a message.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer.hpp"

using namespace resnet;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  const std::string data = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const std::string dir = argc > 2 ? argv[2] : ".";
  int failures = 0;
  for (int variant = 0; variant < 2; ++variant) {
    TrainConfig c;
    c.data_dir = data;
    c.depth = 8;
    c.width = 8;
    c.batch = 16 * P;
    c.train_limit = 64 * P;  // 4 steps per epoch: the resume crosses an epoch
    c.test_limit = 100;
    c.max_steps = 8;
    c.warmup_epochs = 0.5;
    c.quiet = true;
    c.report = false;
    c.eval_every = 1;
    c.seed = 11;
    c.sync_bn = variant == 1;
    c.dist = variant == 1 ? "sharded" : "dp";
    std::string err = finalize_config(c, P);
    if (!err.empty()) throw std::runtime_error(err);
    TrainResult straight = train(MPI_COMM_WORLD, c);
    TrainConfig a = c;
    a.stop_after = 3;
    a.checkpoint = dir + "/resume_test_" + std::to_string(variant) + ".ckpt";
    TrainResult first = train(MPI_COMM_WORLD, a);
    TrainConfig b = c;
    b.resume = a.checkpoint;
    TrainResult second = train(MPI_COMM_WORLD, b);
    if (rank == 0) {
      bool ok = first.step_loss.size() == 3 && second.first_step == 4 && second.step_loss.size() == 5 &&
                std::memcmp(first.step_loss.data(), straight.step_loss.data(), 3 * sizeof(double)) == 0 &&
                std::memcmp(second.step_loss.data(), straight.step_loss.data() + 3, 5 * sizeof(double)) == 0 &&
                second.params.size() == straight.params.size() &&
                std::memcmp(second.params.data(), straight.params.data(), straight.params.size() * sizeof(float)) == 0;
      std::printf("%s, %s BN, %d rank(s): straight loss %.6f -> %.6f, resumed at step 4 -> %.6f: %s\n",
                  c.dist == "dp" ? "data-parallel LARS" : "sharded LARS", c.sync_bn ? "synchronised" : "per-replica", P,
                  straight.step_loss.front(), straight.step_loss.back(), second.step_loss.empty() ? -1.0 : second.step_loss.back(),
                  ok ? "bit-identical ok" : "FAILED (differs)");
      if (!ok) ++failures;
    }
    if (variant == 0) {
      TrainConfig d = c;
      d.batch = 32 * P;
      d.resume = a.checkpoint;
      finalize_config(d, P);
      std::string msg;
      try {
        train(MPI_COMM_WORLD, d);
      } catch (const std::runtime_error& e) {
        msg = e.what();
      }
      bool ok = msg.find("the checkpoint has batch " + std::to_string(16 * P)) != std::string::npos;
      if (rank == 0) std::printf("resume with another batch: '%s' %s\n", msg.c_str(), ok ? "ok" : "FAILED");
      if (!ok) ++failures;
    }
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf(all ? "resume checks FAILED\n" : "all resume checks passed\n");
  MPI_Finalize();
  return all ? 1 : 0;
}

// The training loop of the sample ResNet over tessera: data parallel over
// the ranks of a communicator, LARS (or SGD with momentum: LARS with layer
// adaptation off) from tessera's optimizer, synchronised or per-replica
// batch norm. Used by tessera_resnet and by the tests.
#ifndef TSR_APPS_RESNET_TRAINER_HPP
#define TSR_APPS_RESNET_TRAINER_HPP

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace resnet {

struct TrainConfig {
  std::string data_dir;          // default: Debian's dataset-fashion-mnist
  int train_limit = 0;           // first n training images (0: all 60,000)
  int test_limit = 0;            // first n test images (0: all 10,000)
  int depth = 20, width = 16;
  int batch = 128;               // global batch per optimizer step
  int micro = 0;                 // global micro-batch (gradient accumulation); 0: = batch
  double epochs = 1;             // epoch budget (fractional allowed)
  long long max_steps = 0;       // stop after this many steps (0: the epoch budget)
  std::string optimizer = "lars";  // "lars" or "sgd"
  double lr = -1;                // base learning rate; < 0: the default for the optimizer and batch
  double warmup_epochs = -1;     // < 0: default
  double weight_decay = 5e-4;
  double momentum = 0.9;
  double trust = 1e-3;           // LARS eta
  std::string dist = "dp";       // "dp" (data parallel) or "sharded" (ZeRO-1 style state)
  bool sync_bn = false;
  std::uint64_t seed = 1;
  int pad = 2;                   // random-crop padding, with random flips (0: no augmentation)
  int eval_every = 1;            // test accuracy every this many epochs (0: at the end only)
  std::string csv;               // prefix of the CSV files ("": none)
  bool quiet = false;            // no per-step lines
  bool report = true;            // accounting and energy report at the end
  std::string checkpoint;        // write a checkpoint here at the end ("": none)
  std::string resume;            // start from this checkpoint ("": fresh)
  long long checkpoint_every = 0;  // also every this many steps
  long long stop_after = 0;      // stop after this step (the schedule still runs to the end); 0: no
};

struct TrainResult {
  std::vector<double> step_loss, step_lr, step_acc;
  double test_acc = -1, test_loss = -1;
  double images_per_s = 0, seconds = 0;
  long long steps = 0;           // the last step taken (counting from the start, resumed or not)
  long long first_step = 1;      // the first step this run took (> 1 after a resume)
  std::vector<float> params;  // final parameters (rank 0)
};

// Fill defaults that depend on other settings (lr, warmup) and check the
// configuration against the number of ranks. Returns "" if it is valid, else
// a message naming the option. Local (every rank gets the same answer).
std::string finalize_config(TrainConfig& cfg, int nranks);

// Train on comm (collective). Throws std::runtime_error on data or tessera
// errors (the message says which). Prints progress on rank 0 unless quiet.
TrainResult train(MPI_Comm comm, const TrainConfig& cfg);

}  // namespace resnet

#endif

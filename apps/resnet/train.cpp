// tessera_resnet: train a ResNet-(6n+2) on Fashion-MNIST, data parallel over
// the MPI ranks, with tessera's LARS (or SGD with momentum). See
// apps/resnet/README.md.
//
//   mpiexec -n 2 tessera_resnet --epochs 10 --batch 128 --optimizer lars --csv run
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "trainer.hpp"

namespace {

const char* kUsage =
    "usage: tessera_resnet [options]\n"
    "  --data DIR            Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)\n"
    "  --depth N             6n+2 (default 20)          --width N   first-stage channels (16)\n"
    "  --batch N             global batch (128)         --micro N   global micro-batch: gradient\n"
    "                        accumulation over batch/micro passes (default: batch)\n"
    "  --epochs X            epoch budget (1)           --steps N   stop after N steps\n"
    "  --optimizer lars|sgd  LARS, MLPerf recipe (default) or SGD with momentum (LARS, no adaptation)\n"
    "  --lr X                base learning rate (lars: 2*sqrt(batch/128), sgd: 0.1*batch/128)\n"
    "  --warmup X            warmup epochs (0 at batch <= 256, else 2); then polynomial (power 2) decay\n"
    "  --wd X (5e-4)  --momentum X (0.9)  --trust X (LARS eta, 1e-3)\n"
    "  --dist dp|sharded     optimizer state replicated (dp) or sharded over the ranks\n"
    "  --sync-bn             synchronised batch norm (default: per replica)\n"
    "  --seed N (1)  --pad N (random crop padding with flips, 2; 0: no augmentation)\n"
    "  --train-limit N  --test-limit N   use the first N images only\n"
    "  --eval-every N        test accuracy every N epochs (1; 0: at the end)\n"
    "  --csv PREFIX          write PREFIX_steps.csv and PREFIX_epochs.csv\n"
    "  --checkpoint PATH     write a checkpoint at the end (and every N steps: --checkpoint-every N)\n"
    "  --resume PATH         continue from a checkpoint (same model, batch, seed, optimizer): bit-identical\n"
    "  --stop-after N        stop after step N (the schedule still spans the whole budget)\n"
    "  --quiet               no per-step lines    --no-report   no accounting/energy report\n";

bool parse(int argc, char** argv, resnet::TrainConfig& c, std::string& err, bool& help) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char*& out) {
      if (i + 1 >= argc) {
        err = a + " needs a value";
        return false;
      }
      out = argv[++i];
      return true;
    };
    auto num = [&](double& out) {
      const char* v;
      if (!val(v)) return false;
      char* end = nullptr;
      out = std::strtod(v, &end);
      if (!*v || *end) {
        err = a + " '" + v + "': not a number";
        return false;
      }
      return true;
    };
    auto integer = [&](long long& out) {
      const char* v;
      if (!val(v)) return false;
      char* end = nullptr;
      out = std::strtoll(v, &end, 10);
      if (!*v || *end) {
        err = a + " '" + v + "': not an integer";
        return false;
      }
      if (out < -1000000000LL || out > 1000000000LL) {
        err = a + " '" + v + "': out of range";
        return false;
      }
      return true;
    };
    long long n = 0;
    double x = 0;
    const char* s = nullptr;
    if (a == "-h" || a == "--help") {
      help = true;
      return true;
    } else if (a == "--data") {
      if (!val(s)) return false;
      c.data_dir = s;
    } else if (a == "--depth") {
      if (!integer(n)) return false;
      c.depth = static_cast<int>(n);
    } else if (a == "--width") {
      if (!integer(n)) return false;
      c.width = static_cast<int>(n);
    } else if (a == "--batch") {
      if (!integer(n)) return false;
      c.batch = static_cast<int>(n);
    } else if (a == "--micro") {
      if (!integer(n)) return false;
      if (n == 0) {
        err = "--micro 0: must be at least 1";
        return false;
      }
      c.micro = static_cast<int>(n);
    } else if (a == "--epochs") {
      if (!num(c.epochs)) return false;
    } else if (a == "--steps") {
      if (!integer(c.max_steps)) return false;
    } else if (a == "--optimizer") {
      if (!val(s)) return false;
      c.optimizer = s;
    } else if (a == "--lr") {
      if (!num(x)) return false;
      if (!(x > 0)) {
        err = "--lr must be > 0";
        return false;
      }
      c.lr = x;
    } else if (a == "--warmup") {
      if (!num(x)) return false;
      if (x < 0) {
        err = "--warmup must be >= 0";
        return false;
      }
      c.warmup_epochs = x;
    } else if (a == "--wd") {
      if (!num(c.weight_decay)) return false;
    } else if (a == "--momentum") {
      if (!num(c.momentum)) return false;
    } else if (a == "--trust") {
      if (!num(c.trust)) return false;
    } else if (a == "--dist") {
      if (!val(s)) return false;
      c.dist = s;
    } else if (a == "--sync-bn") {
      c.sync_bn = true;
    } else if (a == "--seed") {
      if (!integer(n)) return false;
      if (n < 0) {
        err = "--seed must be >= 0";
        return false;
      }
      c.seed = static_cast<std::uint64_t>(n);
    } else if (a == "--pad") {
      if (!integer(n)) return false;
      c.pad = static_cast<int>(n);
    } else if (a == "--train-limit") {
      if (!integer(n)) return false;
      c.train_limit = static_cast<int>(n);
    } else if (a == "--test-limit") {
      if (!integer(n)) return false;
      c.test_limit = static_cast<int>(n);
    } else if (a == "--eval-every") {
      if (!integer(n)) return false;
      c.eval_every = static_cast<int>(n);
    } else if (a == "--csv") {
      if (!val(s)) return false;
      c.csv = s;
    } else if (a == "--checkpoint") {
      if (!val(s)) return false;
      c.checkpoint = s;
    } else if (a == "--checkpoint-every") {
      if (!integer(c.checkpoint_every)) return false;
    } else if (a == "--resume") {
      if (!val(s)) return false;
      c.resume = s;
    } else if (a == "--stop-after") {
      if (!integer(c.stop_after)) return false;
    } else if (a == "--quiet") {
      c.quiet = true;
    } else if (a == "--no-report") {
      c.report = false;
    } else {
      err = "unknown option '" + a + "'";
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  resnet::TrainConfig cfg;
  std::string err;
  bool help = false;
  // Every rank parses the same command line and reaches the same verdict,
  // so every rank prints the message and exits with 2 (no communication).
  if (parse(argc, argv, cfg, err, help) && !help) err = resnet::finalize_config(cfg, size);
  if (help) {
    if (rank == 0) std::fputs(kUsage, stdout);
    MPI_Finalize();
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "tessera_resnet (rank %d): %s\n%s", rank, err.c_str(), rank == 0 ? kUsage : "");
    MPI_Finalize();
    return 2;
  }
  int rc = 0;
  try {
    resnet::train(MPI_COMM_WORLD, cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera_resnet (rank %d): %s\n", rank, e.what());
    rc = 1;
  }
  if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);  // a data or library error may leave peers waiting
  MPI_Finalize();
  return rc;
}

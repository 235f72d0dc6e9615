#include "trainer.hpp"

#include <tessera/energy.h>
#include <tessera/io.h>
#include <tessera/optimizer.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "data.hpp"
#include "resnet.hpp"

namespace resnet {

std::string finalize_config(TrainConfig& c, int P) {
  auto bad = [](const std::string& s) { return s; };
  if (c.depth < 8 || (c.depth - 2) % 6 != 0)
    return bad("--depth " + std::to_string(c.depth) + ": must be 6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, 110)");
  if (c.width < 1 || c.width > 256) return bad("--width " + std::to_string(c.width) + ": must be in 1..256");
  if (c.batch < 1) return bad("--batch " + std::to_string(c.batch) + ": must be at least 1");
  if (c.micro == 0) c.micro = c.batch;
  if (c.micro < 1 || c.batch % c.micro != 0)
    return bad("--micro " + std::to_string(c.micro) + ": must divide --batch " + std::to_string(c.batch));
  if (c.micro % P != 0)
    return bad("--micro " + std::to_string(c.micro) + " (the global micro-batch; --batch when --micro is not given)"
               " is not a multiple of the " + std::to_string(P) + " ranks");
  if (c.optimizer != "lars" && c.optimizer != "sgd")
    return bad("--optimizer '" + c.optimizer + "': must be lars or sgd");
  if (c.dist != "dp" && c.dist != "sharded") return bad("--dist '" + c.dist + "': must be dp or sharded");
  if (!(c.epochs > 0) && c.max_steps <= 0) return bad("--epochs must be > 0 (or give --steps)");
  if (c.max_steps < 0) return bad("--steps must be >= 0");
  if (c.train_limit < 0 || c.test_limit < 0) return bad("--train-limit and --test-limit must be >= 0");
  if (c.train_limit > 0 && c.train_limit < c.batch)
    return bad("--train-limit " + std::to_string(c.train_limit) + " is smaller than --batch " + std::to_string(c.batch));
  if (c.pad < 0 || c.pad > 8) return bad("--pad " + std::to_string(c.pad) + ": must be in 0..8");
  if (c.weight_decay < 0) return bad("--wd must be >= 0");
  if (c.momentum < 0 || c.momentum >= 1) return bad("--momentum must be in [0, 1)");
  if (!(c.trust > 0)) return bad("--trust must be > 0");
  if (c.eval_every < 0) return bad("--eval-every must be >= 0");
  if (c.checkpoint_every < 0) return bad("--checkpoint-every must be >= 0");
  if (c.checkpoint_every > 0 && c.checkpoint.empty()) return bad("--checkpoint-every needs --checkpoint PATH");
  if (c.stop_after < 0) return bad("--stop-after must be >= 0");
  // Defaults: SGD lr 0.1 per 128 images (linear scaling, Goyal et al. 2017);
  // LARS lr 2 at 128 growing with the square root of the batch (the LARS
  // paper's scaling); warmup: 0 at batch <= 256, else 2 epochs.
  const double k = c.batch / 128.0;
  if (c.lr < 0) c.lr = c.optimizer == "sgd" ? 0.1 * k : 2.0 * std::sqrt(k);
  if (c.warmup_epochs < 0) c.warmup_epochs = c.batch <= 256 ? 0.0 : 2.0;
  if (c.data_dir.empty()) c.data_dir = default_data_dir();
  return "";
}

namespace {

void ck(tsr_status s, tsr_context ctx, const char* what) {
  if (s != TSR_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed: " + tsr_status_name(s) + ": " + tsr_last_error(ctx));
  }
}

struct Schedule {
  long long warmup = 0, total = 1;
  double factor(long long t) const {
    if (warmup > 0 && t <= warmup) return double(t) / double(warmup);
    // Polynomial decay, power 2 (the MLPerf LARS recipe), from the end of the
    // warmup to the last step; the last step keeps a small positive rate.
    double span = double(total - warmup) + 1.0;
    double f = 1.0 - double(t - warmup) / span;
    return f > 0 ? f * f : 0.0;
  }
};

double schedule_cb(int64_t t, int /*group*/, double lr, void* user) {
  return lr * static_cast<const Schedule*>(user)->factor(t);
}

struct Ckpt {
  tsr_checkpoint h = nullptr;
  ~Ckpt() { tsr_checkpoint_close(&h); }
};

struct Ctx {
  tsr_context ctx = nullptr;
  tsr_grid grid = nullptr;
  tsr_optimizer opt = nullptr;
  ~Ctx() {
    tsr_optimizer_destroy(&opt);
    tsr_grid_destroy(&grid);
    tsr_context_destroy(&ctx);
  }
};

void bar(char* out, std::size_t len, double frac) {
  const int w = 20;
  int k = static_cast<int>(frac * w + 0.5);
  std::size_t i = 0;
  out[i++] = '[';
  for (int j = 0; j < w && i + 2 < len; ++j) out[i++] = j < k ? '#' : '.';
  out[i++] = ']';
  out[i] = 0;
}

}  // namespace

TrainResult train(MPI_Comm comm, const TrainConfig& cfg) {
  Ctx C;
  ck(tsr_context_create(comm, &C.ctx), nullptr, "tsr_context_create");
  int rank = 0, P = 1;
  tsr_context_rank(C.ctx, &rank);
  tsr_context_size(C.ctx, &P);
  int dims[3] = {0, 0, 0};
  ck(tsr_grid_dims_create(TSR_GRID_1D, P, 0, dims, nullptr), nullptr, "tsr_grid_dims_create");
  ck(tsr_grid_create(C.ctx, TSR_GRID_1D, dims, &C.grid), C.ctx, "tsr_grid_create");
  tsr_energy_start(C.ctx, nullptr);  // model-only where no meter can be read; not fatal
  const bool root = rank == 0;
  const bool talk = root && !cfg.quiet;
  // Tuning knob: floats per im2col chunk (default 2^17 = 512 KiB).
  if (const char* e = std::getenv("TSR_RESNET_CHUNK_FLOATS")) {
    long long v = std::atoll(e);
    if (v >= 1024) conv_chunk_floats() = static_cast<std::size_t>(v);
  }

  // Every rank reads the data (a rank's batch slice needs any sample).
  Dataset train_set = load_fashion_mnist(cfg.data_dir, "train", cfg.train_limit);
  Dataset test_set = load_fashion_mnist(cfg.data_dir, "t10k", cfg.test_limit);
  const int HW = train_set.rows * train_set.cols;

  ModelConfig mc;
  mc.depth = cfg.depth;
  mc.width = cfg.width;
  mc.height = train_set.rows;
  mc.width_px = train_set.cols;
  ResNet net(mc);
  std::vector<float> params = net.init(cfg.seed), grads(net.num_params());

  // The optimizer: one group per tensor; biases and batch-norm parameters get
  // no weight decay and no layer adaptation (the MLPerf skip list); SGD with
  // momentum is LARS with adaptation off everywhere.
  std::vector<std::size_t> sizes;
  for (const auto& g : net.groups()) sizes.push_back(g.size);
  const tsr_opt_dist dist = cfg.dist == "sharded" ? TSR_OPT_SHARDED : TSR_OPT_DATA_PARALLEL;
  ck(tsr_optimizer_create(C.ctx, TSR_PRESET_LARS_MLPERF, dist, TSR_FLOAT32, sizes.size(), sizes.data(), &C.opt),
     C.ctx, "tsr_optimizer_create");
  ck(tsr_optimizer_set_param(C.opt, TSR_OPT_LR, cfg.lr), C.ctx, "set lr");
  ck(tsr_optimizer_set_param(C.opt, TSR_OPT_WEIGHT_DECAY, cfg.weight_decay), C.ctx, "set weight decay");
  ck(tsr_optimizer_set_param(C.opt, TSR_OPT_MOMENTUM, cfg.momentum), C.ctx, "set momentum");
  ck(tsr_optimizer_set_param(C.opt, TSR_OPT_TRUST_COEFF, cfg.trust), C.ctx, "set trust coefficient");
  for (std::size_t g = 0; g < net.groups().size(); ++g) {
    const bool w = net.groups()[g].adapt;
    ck(tsr_optimizer_set_group_param(C.opt, static_cast<int>(g), TSR_OPT_DECAY, w ? 1 : 0), C.ctx, "set decay");
    ck(tsr_optimizer_set_group_param(C.opt, static_cast<int>(g), TSR_OPT_ADAPT,
                                     (w && cfg.optimizer == "lars") ? 1 : 0),
       C.ctx, "set adapt");
  }
  const long long steps_per_epoch = train_set.n / cfg.batch;
  if (steps_per_epoch < 1) throw std::runtime_error("fewer training images than one batch");
  long long total = static_cast<long long>(std::floor(cfg.epochs * steps_per_epoch + 1e-9));
  if (cfg.max_steps > 0) total = cfg.max_steps;
  if (total < 1) total = 1;
  Schedule sched;
  sched.warmup = static_cast<long long>(std::llround(cfg.warmup_epochs * steps_per_epoch));
  sched.total = total;
  if (sched.warmup >= total) sched.warmup = total - 1;
  ck(tsr_optimizer_set_schedule(C.opt, schedule_cb, &sched), C.ctx, "tsr_optimizer_set_schedule");

  // Checkpoints: the parameters (replicated), the batch-norm running
  // statistics (one shard per rank: per-replica statistics differ), the whole
  // optimizer state, the step and the settings a resume must share. The data
  // order and augmentation follow from (seed, step), so a resumed run takes
  // exactly the steps the uninterrupted run would have taken.
  const std::size_t nstats = net.running_stats().size();
  auto save = [&](long long steps_done) {
    tsr_region_begin(C.ctx, "checkpoint");
    Ckpt k;
    ck(tsr_checkpoint_create(C.ctx, cfg.checkpoint.c_str(), TSR_CKPT_AUTO, 0, &k.h), C.ctx, "tsr_checkpoint_create");
    std::vector<float> rs = net.running_stats();
    const uint64_t shape[1] = {params.size()};
    ck(tsr_checkpoint_put_replicated(k.h, "params", TSR_FLOAT32, 1, shape, params.data()), C.ctx, "checkpoint params");
    ck(tsr_checkpoint_put_shard(k.h, "bn_running", TSR_FLOAT32, static_cast<uint64_t>(P) * nstats,
                                static_cast<uint64_t>(rank) * nstats, nstats, rs.data()),
       C.ctx, "checkpoint bn_running");
    ck(tsr_checkpoint_put_optimizer(k.h, "opt", C.opt), C.ctx, "checkpoint optimizer");
    ck(tsr_checkpoint_set_int(k.h, "step", steps_done), C.ctx, "checkpoint step");
    ck(tsr_checkpoint_set_int(k.h, "ranks", P), C.ctx, "checkpoint ranks");
    ck(tsr_checkpoint_set_int(k.h, "depth", cfg.depth), C.ctx, "checkpoint depth");
    ck(tsr_checkpoint_set_int(k.h, "width", cfg.width), C.ctx, "checkpoint width");
    ck(tsr_checkpoint_set_int(k.h, "batch", cfg.batch), C.ctx, "checkpoint batch");
    ck(tsr_checkpoint_set_int(k.h, "seed", static_cast<int64_t>(cfg.seed)), C.ctx, "checkpoint seed");
    ck(tsr_checkpoint_set_int(k.h, "sync_bn", cfg.sync_bn ? 1 : 0), C.ctx, "checkpoint sync_bn");
    ck(tsr_checkpoint_set_string(k.h, "optimizer", cfg.optimizer.c_str()), C.ctx, "checkpoint optimizer name");
    ck(tsr_checkpoint_commit(k.h), C.ctx, "tsr_checkpoint_commit");
    tsr_region_end(C.ctx, "checkpoint");
    if (root && !cfg.quiet) std::printf("checkpoint: step %lld written to %s\n", steps_done, cfg.checkpoint.c_str());
  };
  long long start_step = 0;
  if (!cfg.resume.empty()) {
    Ckpt k;
    ck(tsr_checkpoint_open(C.ctx, cfg.resume.c_str(), &k.h), C.ctx, "tsr_checkpoint_open");
    auto get_int = [&](const char* key) {
      int64_t v = 0;
      ck(tsr_checkpoint_get_int(k.h, key, &v), C.ctx, "checkpoint attribute");
      return v;
    };
    auto must = [&](const char* key, int64_t want) {
      int64_t got = get_int(key);
      if (got != want)
        throw std::runtime_error("--resume " + cfg.resume + ": the checkpoint has " + key + " " + std::to_string(got) +
                                 ", this run " + std::to_string(want));
    };
    must("depth", cfg.depth);
    must("width", cfg.width);
    must("batch", cfg.batch);
    must("seed", static_cast<int64_t>(cfg.seed));
    must("sync_bn", cfg.sync_bn ? 1 : 0);
    char name[16] = {0};
    std::size_t need = 0;
    ck(tsr_checkpoint_get_string(k.h, "optimizer", name, sizeof name, &need), C.ctx, "checkpoint optimizer name");
    if (cfg.optimizer != name)
      throw std::runtime_error("--resume " + cfg.resume + ": the checkpoint was written by " + name + ", this run uses " +
                               cfg.optimizer);
    start_step = get_int("step");
    const int64_t old_ranks = get_int("ranks");
    const uint64_t shape[1] = {params.size()};
    ck(tsr_checkpoint_get_replicated(k.h, "params", TSR_FLOAT32, 1, shape, params.data()), C.ctx, "resume params");
    std::vector<float> rs(nstats);
    // Per-replica statistics: rank r takes those of old rank r mod old ranks
    // (the same rank at the same rank count).
    ck(tsr_checkpoint_get_shard(k.h, "bn_running", TSR_FLOAT32, static_cast<uint64_t>(old_ranks) * nstats,
                                static_cast<uint64_t>(rank % old_ranks) * nstats, nstats, rs.data()),
       C.ctx, "resume bn_running");
    net.set_running_stats(rs);
    ck(tsr_checkpoint_get_optimizer(k.h, "opt", C.opt), C.ctx, "resume optimizer");
    if (start_step >= total)
      throw std::runtime_error("--resume " + cfg.resume + ": the checkpoint is at step " + std::to_string(start_step) +
                               ", the run has " + std::to_string(total) + " steps");
    if (root && !cfg.quiet) std::printf("resumed from %s at step %lld\n", cfg.resume.c_str(), start_step);
  }
  long long last_step = total;
  if (cfg.stop_after > 0 && cfg.stop_after < total) last_step = cfg.stop_after;

  const int accum = cfg.batch / cfg.micro;
  const int local = cfg.micro / P;
  std::vector<float> images(static_cast<std::size_t>(local) * HW);
  std::vector<int> labels(local);
  SumFn sync;
  if (cfg.sync_bn) {
    sync = [&](double* buf, std::size_t n) {
      ck(tsr_allreduce(C.grid, TSR_AXIS_ALL, buf, buf, n, TSR_FLOAT64, TSR_SUM), C.ctx, "batch-norm all-reduce");
    };
  }

  // Test accuracy with the running statistics (averaged over the replicas
  // first when each replica keeps its own), the test set split over ranks.
  auto evaluate = [&](double* loss_out) {
    tsr_region_begin(C.ctx, "eval");
    // Per-replica statistics are averaged for the evaluation only (each
    // replica keeps its own for training, so that evaluating changes nothing).
    std::vector<float> own;
    if (!cfg.sync_bn && P > 1) {
      own = net.running_stats();
      std::vector<float> rs = own;
      ck(tsr_allreduce(C.grid, TSR_AXIS_ALL, rs.data(), rs.data(), rs.size(), TSR_FLOAT32, TSR_SUM), C.ctx,
         "running-statistics all-reduce");
      for (float& v : rs) v /= static_cast<float>(P);
      net.set_running_stats(rs);
    }
    const int lo = static_cast<int>(static_cast<long long>(test_set.n) * rank / P);
    const int hi = static_cast<int>(static_cast<long long>(test_set.n) * (rank + 1) / P);
    std::vector<int> order(test_set.n);
    for (int i = 0; i < test_set.n; ++i) order[i] = i;
    const int chunk = 250;
    std::vector<float> x(static_cast<std::size_t>(chunk) * HW);
    std::vector<int> y(chunk);
    double sums[2] = {0, 0};
    for (int i = lo; i < hi; i += chunk) {
      int n = std::min(chunk, hi - i);
      make_batch(test_set, order, i, n, 0, 0, 0, x.data(), y.data());
      int correct = 0;
      sums[0] += net.evaluate(params.data(), x.data(), y.data(), n, &correct);
      sums[1] += correct;
    }
    ck(tsr_allreduce(C.grid, TSR_AXIS_ALL, sums, sums, 2, TSR_FLOAT64, TSR_SUM), C.ctx, "eval all-reduce");
    if (!own.empty()) net.set_running_stats(own);
    tsr_region_end(C.ctx, "eval");
    *loss_out = sums[0] / test_set.n;
    return sums[1] / test_set.n;
  };

  std::FILE* steps_csv = nullptr;
  std::FILE* epochs_csv = nullptr;
  if (root && !cfg.csv.empty()) {
    steps_csv = std::fopen((cfg.csv + "_steps.csv").c_str(), "w");
    epochs_csv = std::fopen((cfg.csv + "_epochs.csv").c_str(), "w");
    if (!steps_csv || !epochs_csv) throw std::runtime_error("cannot write " + cfg.csv + "_*.csv");
    std::fprintf(steps_csv, "step,epoch,lr,loss,train_acc,images_per_s,images_per_cpu_s\n");
    std::fprintf(epochs_csv, "epoch,steps,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s\n");
  }
  if (talk) {
    std::printf("ResNet-%d (width %d, %zu parameters in %zu groups) on %d+%d Fashion-MNIST images, %d rank(s)\n",
                cfg.depth, cfg.width, net.num_params(), net.groups().size(), train_set.n, test_set.n, P);
    std::printf("%s, %s state, batch %d (micro %d, %d per rank), lr %g, warmup %lld of %lld steps, wd %g, "
                "%s batch norm, seed %llu\n",
                cfg.optimizer == "lars" ? "LARS (MLPerf recipe)" : "SGD with momentum",
                cfg.dist == "sharded" ? "sharded" : "data-parallel", cfg.batch, cfg.micro, local, cfg.lr,
                sched.warmup, total, cfg.weight_decay, cfg.sync_bn ? "synchronised" : "per-replica",
                static_cast<unsigned long long>(cfg.seed));
    std::fflush(stdout);
  }

  TrainResult res;
  const double flops_per_image = 3.0 * net.forward_flops_per_sample();
  double train_seconds = 0, epoch_seconds = 0, epoch_loss = 0, epoch_acc = 0;
  long long epoch_steps = 0;
  std::vector<int> order;
  int order_epoch = -1;
  using clock = std::chrono::steady_clock;
  res.first_step = start_step + 1;
  for (long long step = start_step; step < last_step; ++step) {
    const int epoch = static_cast<int>(step / steps_per_epoch);
    const long long in_epoch = step % steps_per_epoch;
    if (epoch != order_epoch) {
      order = epoch_order(train_set.n, cfg.seed, epoch);
      order_epoch = epoch;
    }
    auto t0 = clock::now();
    const std::clock_t c0 = std::clock();
    tsr_region_begin(C.ctx, "train");
    tsr_region_begin(C.ctx, "forward_backward");
    std::fill(grads.begin(), grads.end(), 0.0f);
    double stats[2] = {0, 0};  // loss sum, correct
    for (int a = 0; a < accum; ++a) {
      const long long first = in_epoch * cfg.batch + static_cast<long long>(a) * cfg.micro +
                              static_cast<long long>(rank) * local;
      make_batch(train_set, order, first, local, cfg.seed, epoch, cfg.pad, images.data(), labels.data());
      int correct = 0;
      stats[0] += net.train_step(params.data(), images.data(), labels.data(), local,
                                 1.0 / (static_cast<double>(local) * accum), grads.data(), sync, &correct);
      stats[1] += correct;
    }
    tsr_flops_add(C.ctx, static_cast<uint64_t>(flops_per_image * local * accum));
    tsr_region_end(C.ctx, "forward_backward");
    tsr_region_begin(C.ctx, "optimizer");
    tsr_status st = tsr_optimizer_step(C.opt, params.data(), grads.data(), params.size());
    tsr_region_end(C.ctx, "optimizer");
    if (st == TSR_ERR_NUMERIC) {
      if (root) std::fprintf(stderr, "step %lld: non-finite gradients, step skipped by the optimizer\n", step + 1);
    } else {
      ck(st, C.ctx, "tsr_optimizer_step");
    }
    ck(tsr_allreduce(C.grid, TSR_AXIS_ALL, stats, stats, 2, TSR_FLOAT64, TSR_SUM), C.ctx, "loss all-reduce");
    tsr_region_end(C.ctx, "train");
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    // This process's CPU time for the step: on a shared machine, images per
    // CPU-second are steadier than images per wall-clock second.
    const double cpu = double(std::clock() - c0) / CLOCKS_PER_SEC;
    train_seconds += dt;
    epoch_seconds += dt;
    const double loss = stats[0] / cfg.batch, acc = stats[1] / cfg.batch;
    double lr_used = 0;
    tsr_optimizer_query(C.opt, TSR_OPTQ_LR, 0, &lr_used);
    res.step_loss.push_back(loss);
    res.step_lr.push_back(lr_used);
    res.step_acc.push_back(acc);
    epoch_loss += loss;
    epoch_acc += acc;
    ++epoch_steps;
    const double ips = cfg.batch / dt;
    if (talk) {
      char b[64];
      bar(b, sizeof b, double(in_epoch + 1) / steps_per_epoch);
      std::printf("step %6lld/%lld epoch %d %s lr %.5f loss %.4f acc %.3f %.1f img/s\n", step + 1, total, epoch + 1, b,
                  lr_used, loss, acc, ips);
      std::fflush(stdout);
    }
    if (steps_csv)
      std::fprintf(steps_csv, "%lld,%d,%.9g,%.9g,%.6f,%.2f,%.2f\n", step + 1, epoch + 1, lr_used, loss, acc, ips,
                   cpu > 0 ? local * accum / cpu : 0.0);
    const bool epoch_end = in_epoch + 1 == steps_per_epoch || step + 1 == last_step;
    if (epoch_end) {
      const bool last = step + 1 == last_step;
      double tl = -1, ta = -1;
      if (last || (cfg.eval_every > 0 && (epoch + 1) % cfg.eval_every == 0)) ta = evaluate(&tl);
      const double eips = epoch_steps * double(cfg.batch) / epoch_seconds;
      if (root && !cfg.quiet)
        std::printf("epoch %d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s, %.1f img/s\n", epoch + 1,
                    epoch_loss / epoch_steps, epoch_acc / epoch_steps, tl, ta, epoch_seconds, eips);
      if (epochs_csv)
        std::fprintf(epochs_csv, "%d,%lld,%.6f,%.6f,%.6f,%.6f,%.2f,%.2f\n", epoch + 1, epoch_steps,
                     epoch_loss / epoch_steps, epoch_acc / epoch_steps, tl, ta, epoch_seconds, eips);
      if (last) {
        res.test_acc = ta;
        res.test_loss = tl;
      }
      epoch_loss = epoch_acc = epoch_seconds = 0;
      epoch_steps = 0;
      std::fflush(stdout);
    }
    if (!cfg.checkpoint.empty() &&
        (step + 1 == last_step || (cfg.checkpoint_every > 0 && (step + 1) % cfg.checkpoint_every == 0)))
      save(step + 1);
  }
  res.steps = last_step;
  res.seconds = train_seconds;
  res.images_per_s = (last_step - start_step) * double(cfg.batch) / train_seconds;
  if (steps_csv) std::fclose(steps_csv);
  if (epochs_csv) std::fclose(epochs_csv);
  if (root && !cfg.quiet) {
    std::printf("final: test accuracy %.4f (loss %.4f) after %lld steps, %.1f img/s over the training steps\n",
                res.test_acc, res.test_loss, last_step, res.images_per_s);
  }
  if (cfg.report) {
    tsr_report rep = nullptr;
    ck(tsr_report_create(C.ctx, 0, &rep), C.ctx, "tsr_report_create");
    if (root) {
      std::size_t need = 0;
      tsr_report_format(rep, nullptr, 0, &need);
      std::string text(need + 1, '\0');
      tsr_report_format(rep, &text[0], text.size(), &need);
      std::printf("\n--- tessera accounting (per region, over ranks) ---\n%s\n", text.c_str());
    }
    tsr_report_destroy(&rep);
    tsr_energy_report erep = nullptr;
    if (tsr_energy_report_create(C.ctx, nullptr, 0, &erep) == TSR_SUCCESS) {
      if (root) {
        std::size_t need = 0;
        tsr_energy_report_format(erep, TSR_OUTPUT_TABLE, nullptr, 0, &need);
        std::string text(need + 1, '\0');
        tsr_energy_report_format(erep, TSR_OUTPUT_TABLE, &text[0], text.size(), &need);
        std::printf("--- tessera energy (per region) ---\n%s\n", text.c_str());
      }
      tsr_energy_report_destroy(&erep);
    }
    std::fflush(stdout);
  }
  tsr_energy_stop(C.ctx);
  if (root) res.params = params;
  return res;
}

}  // namespace resnet

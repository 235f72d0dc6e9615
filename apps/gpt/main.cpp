// tessera-gpt: a decoder-only GPT trained on Jane Austen's novels (or any
// text) with tessera: data parallelism with data-parallel or sharded LAMB
// (AdamW = LAMB without layer adaptation), sequence parallelism with ring
// attention (causal, zigzag layout), the same loss curve on every layout.
// Uses only tessera's public API. See apps/gpt/README.md.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data.hpp"
#include "grid_model.hpp"
#include "model.hpp"
#include "rng.hpp"
#include "tessera/tessera.h"

using namespace gpt;

namespace {

struct Options {
  std::string data;  // empty: Austen
  Shape shape;
  size_t batch = 16;  // global sequences per step
  int steps = 200;
  std::string optimizer = "lamb";  // lamb | adamw
  std::string dist = "dp";         // dp | sharded
  double lr = 0;                   // 0: 2e-2 (lamb), 1e-3 (adamw)
  double min_lr_frac = 0.1;
  int warmup = -1;  // -1: min(100, steps/10)
  double wd = 0.01, clip = 1.0;
  int dp = 0, sp = 1, tp = 1;  // dp 0: world size / (sp tp)
  std::string tp_mode = "1d";  // 1d | 2d | 2.5d | 3d
  int tp_depth = 0;            // 2.5d: c (q x q x c = tp)
  int tp_q = 1, tp_c = 1;      // derived: the grid q x q (x c | x q)
  uint64_t seed = 1;
  double val_frac = 0.1;
  int eval_every = 0, eval_batches = 8;
  int sample = 300;
  std::string prompt = "It is a truth universally acknowledged";
  double temperature = 0.8;
  std::string csv;
  std::string expect_curve;
  bool check_grad = false;  // compare the first step's gradient with one rank's
  double curve_tol = 1e-4;
  int log_every = 1;
  bool report = true;
  std::string checkpoint, resume;
  int checkpoint_every = 0;
  int stop_after = 0;  // 0: run to --steps (else stop after this step, as if killed)
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* kUsage =
    "usage: tessera-gpt [options]   (run under mpiexec; any rank count that fits the layout)\n"
    "model:    --layers L (4) --width C (256) --heads H (4) --seq T (128)\n"
    "data:     --data FILE (default: Jane Austen, " "r-cran-janeaustenr's Rdata.rdb; any text file)\n"
    "          --val-frac F (0.1) --seed S (1)\n"
    "training: --steps N (200) --batch B (16, global sequences) --optimizer lamb|adamw\n"
    "          --lr X (lamb 2e-2, adamw 1e-3) --warmup N --min-lr-frac F (0.1) --wd X (0.01)\n"
    "          --clip X (1.0, global gradient norm; 0 off)\n"
    "layout:   --dp D (ranks/(sp tp)) data-parallel replicas, --sp S (1) sequence-parallel ranks\n"
    "          (ring attention, zigzag), --tp T (1) tensor-parallel ranks in each replica,\n"
    "          --tp-mode 1d|2d|2.5d|3d (1d): 1d Megatron (heads and MLP units split, any T\n"
    "          dividing the heads); 2d SUMMA on q x q = T; 2.5d on q x q x c = T with\n"
    "          --tp-depth c (1 <= c <= q); 3d on q x q x q = T (tessera's grid GEMM; heads\n"
    "          divisible by q, the replica's batch by q (2d), q c (2.5d), q^2 (3d)),\n"
    "          --dist dp|sharded (LAMB state replicated or sharded)\n"
    "output:   --eval-every N (0: at the end) --eval-batches N (8) --csv FILE\n"
    "          --sample N (300 bytes) --prompt TEXT --temperature X (0.8) --log-every N (1;\n"
    "          > 1: a progress bar between the lines on a terminal)\n"
    "          --no-report --expect-curve CSV [--curve-tol X (1e-4)] --check-grad (the first\n"
    "          step's averaged gradient against the whole batch's on one rank, per tensor)\n"
    "checkpoints: --checkpoint FILE --checkpoint-every N (and at the end) --resume FILE\n"
    "          (any layout: written on one, resumed on another) --stop-after N (stop early)\n";

template <class T>
T parse_num(const std::string& opt, const char* s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (!s[0] || *end || errno) throw UsageError(opt + " needs a number, got '" + s + "'");
  if (std::is_integral<T>::value) {
    if (v != std::floor(v) || v < 0) throw UsageError(opt + " needs a non-negative integer, got '" + s + "'");
  }
  return static_cast<T>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") throw UsageError("");
    else if (a == "--data") o.data = val();
    else if (a == "--layers") o.shape.layers = parse_num<size_t>(a, val());
    else if (a == "--width") o.shape.width = parse_num<size_t>(a, val());
    else if (a == "--heads") o.shape.heads = parse_num<size_t>(a, val());
    else if (a == "--seq") o.shape.seq = parse_num<size_t>(a, val());
    else if (a == "--batch") o.batch = parse_num<size_t>(a, val());
    else if (a == "--steps") o.steps = parse_num<int>(a, val());
    else if (a == "--optimizer") o.optimizer = val();
    else if (a == "--dist") o.dist = val();
    else if (a == "--lr") o.lr = parse_num<double>(a, val());
    else if (a == "--min-lr-frac") o.min_lr_frac = parse_num<double>(a, val());
    else if (a == "--warmup") o.warmup = parse_num<int>(a, val());
    else if (a == "--wd") o.wd = parse_num<double>(a, val());
    else if (a == "--clip") o.clip = parse_num<double>(a, val());
    else if (a == "--dp") o.dp = parse_num<int>(a, val());
    else if (a == "--sp") o.sp = parse_num<int>(a, val());
    else if (a == "--tp") o.tp = parse_num<int>(a, val());
    else if (a == "--tp-mode") o.tp_mode = val();
    else if (a == "--tp-depth") o.tp_depth = parse_num<int>(a, val());
    else if (a == "--seed") o.seed = parse_num<uint64_t>(a, val());
    else if (a == "--val-frac") o.val_frac = parse_num<double>(a, val());
    else if (a == "--eval-every") o.eval_every = parse_num<int>(a, val());
    else if (a == "--eval-batches") o.eval_batches = parse_num<int>(a, val());
    else if (a == "--sample") o.sample = parse_num<int>(a, val());
    else if (a == "--prompt") o.prompt = val();
    else if (a == "--temperature") o.temperature = parse_num<double>(a, val());
    else if (a == "--csv") o.csv = val();
    else if (a == "--expect-curve") o.expect_curve = val();
    else if (a == "--curve-tol") o.curve_tol = parse_num<double>(a, val());
    else if (a == "--log-every") o.log_every = parse_num<int>(a, val());
    else if (a == "--no-report") o.report = false;
    else if (a == "--check-grad") o.check_grad = true;
    else if (a == "--checkpoint") o.checkpoint = val();
    else if (a == "--checkpoint-every") o.checkpoint_every = parse_num<int>(a, val());
    else if (a == "--resume") o.resume = val();
    else if (a == "--stop-after") o.stop_after = parse_num<int>(a, val());
    else throw UsageError("unknown option '" + a + "'");
  }
  if (o.optimizer != "lamb" && o.optimizer != "adamw")
    throw UsageError("--optimizer must be lamb or adamw, got '" + o.optimizer + "'");
  if (o.tp_mode != "1d" && o.tp_mode != "2d" && o.tp_mode != "2.5d" && o.tp_mode != "3d")
    throw UsageError("--tp-mode must be 1d, 2d, 2.5d or 3d, got '" + o.tp_mode + "'");
  if (o.tp_depth && o.tp_mode != "2.5d") throw UsageError("--tp-depth is for --tp-mode 2.5d only");
  if (o.dist != "dp" && o.dist != "sharded") throw UsageError("--dist must be dp or sharded, got '" + o.dist + "'");
  if (o.lr == 0) o.lr = o.optimizer == "lamb" ? 2e-2 : 1e-3;
  if (o.warmup < 0) o.warmup = std::min(100, o.steps / 10);
  if (o.log_every < 1) o.log_every = 1;
  if (o.temperature <= 0) throw UsageError("--temperature must be > 0");
  if (o.checkpoint_every > 0 && o.checkpoint.empty()) throw UsageError("--checkpoint-every needs --checkpoint FILE");
  return o;
}

// The configuration checks every rank makes (same inputs, same verdict).
void check_config(Options& o, int world) {
  const Shape& s = o.shape;
  if (s.layers < 1 || s.width < 1 || s.heads < 1 || s.seq < 2 || o.batch < 1)
    throw UsageError("--layers, --width, --heads, --batch must be >= 1 and --seq >= 2");
  if (s.width % s.heads)
    throw UsageError("--heads " + std::to_string(s.heads) + " does not divide --width " + std::to_string(s.width) +
                     ": choose a head count that divides the width");
  if (o.sp < 1 || o.tp < 1) throw UsageError("--sp and --tp must be >= 1");
  if (o.dp == 0) {
    if (world % (o.sp * o.tp))
      throw UsageError("--sp " + std::to_string(o.sp) + " x --tp " + std::to_string(o.tp) + " does not divide the " +
                       std::to_string(world) + " ranks: run on a multiple of sp x tp ranks");
    o.dp = world / (o.sp * o.tp);
  }
  if (o.dp * o.sp * o.tp != world)
    throw UsageError("the layout --dp " + std::to_string(o.dp) + " x --sp " + std::to_string(o.sp) + " x --tp " +
                     std::to_string(o.tp) + " needs " + std::to_string(o.dp * o.sp * o.tp) + " ranks, but " +
                     std::to_string(world) + " are running: change --dp/--sp/--tp or the rank count");
  if (o.tp_mode == "1d" && s.heads % static_cast<size_t>(o.tp))
    throw UsageError("--tp " + std::to_string(o.tp) + " does not divide --heads " + std::to_string(s.heads) +
                     " (tensor parallelism splits the heads): choose a --tp that divides the head count");
  if (o.batch % static_cast<size_t>(o.dp))
    throw UsageError("--batch " + std::to_string(o.batch) + " is not divisible by --dp " + std::to_string(o.dp) +
                     ": use a batch that is a multiple of the data-parallel replicas");
  if (o.tp_mode != "1d") {
    const std::string T = std::to_string(o.tp);
    auto root = [](int v, int k) {  // the integer k-th root of v, or 0
      for (int r = 1; r <= v; ++r) {
        long long p = 1;
        for (int i = 0; i < k; ++i) p *= r;
        if (p == v) return r;
        if (p > v) break;
      }
      return 0;
    };
    int q = 0, c = 1;
    if (o.tp_mode == "2d") {
      q = root(o.tp, 2);
      if (!q) throw UsageError("--tp-mode 2d needs --tp = q x q (4, 9, 16, ...), got --tp " + T + ": change --tp");
    } else if (o.tp_mode == "3d") {
      q = root(o.tp, 3);
      if (!q) throw UsageError("--tp-mode 3d needs --tp = q x q x q (8, 27, ...), got --tp " + T + ": change --tp");
    } else {
      c = o.tp_depth;
      if (c < 1) throw UsageError("--tp-mode 2.5d needs --tp-depth c (the grid is q x q x c = --tp, 1 <= c <= q)");
      q = o.tp % c ? 0 : root(o.tp / c, 2);
      if (!q || c > q)
        throw UsageError("--tp-mode 2.5d needs --tp = q x q x c with 1 <= c <= q; --tp " + T + " and --tp-depth " +
                         std::to_string(c) + " do not fit (e.g. --tp 8 --tp-depth 2): change --tp or --tp-depth");
    }
    if (s.heads % static_cast<size_t>(q))
      throw UsageError("--heads " + std::to_string(s.heads) + " is not divisible by q = " + std::to_string(q) +
                       " (--tp-mode " + o.tp_mode + " splits the heads over q ranks of the grid): choose --heads a multiple of q");
    size_t split = static_cast<size_t>(o.tp_mode == "3d" ? q * q : q * c);
    size_t bl = o.batch / static_cast<size_t>(o.dp);
    if (bl % split)
      throw UsageError("--batch " + std::to_string(o.batch) + " / --dp " + std::to_string(o.dp) + " = " + std::to_string(bl) +
                       " sequences per replica is not divisible by " + std::to_string(split) + " (--tp-mode " + o.tp_mode +
                       " splits whole sequences over " + (o.tp_mode == "3d" ? "q x q" : o.tp_mode == "2d" ? "q" : "q x c") +
                       " ranks): use a batch that is a multiple of " + std::to_string(split * static_cast<size_t>(o.dp)));
    o.tp_q = q, o.tp_c = c;
  }
  if (o.sp > 1 && s.seq % (2 * static_cast<size_t>(o.sp)))
    throw UsageError("--seq " + std::to_string(s.seq) + " is not divisible by 2 x --sp = " + std::to_string(2 * o.sp) +
                     " (the zigzag layout gives each sequence rank two equal chunks): change --seq or --sp");
}

void die_tsr(tsr_context ctx, const char* what, tsr_status st) {
  std::fprintf(stderr, "tessera-gpt: %s failed: %s: %s\n", what, tsr_status_name(st),
               ctx ? tsr_last_error(ctx) : tsr_last_error(nullptr));
  MPI_Abort(MPI_COMM_WORLD, 1);
}
#define TSR_OK(ctx, call)                       \
  do {                                          \
    tsr_status st_ = (call);                    \
    if (st_ != TSR_SUCCESS) die_tsr(ctx, #call, st_); \
  } while (0)

struct Schedule {
  double base, min_frac;
  int warmup, steps;
};
double schedule_fn(int64_t t, int, double lr, void* user) {
  const Schedule* s = static_cast<const Schedule*>(user);
  (void)lr;
  if (t <= s->warmup) return s->base * static_cast<double>(t) / static_cast<double>(s->warmup);
  double prog = s->steps > s->warmup ? static_cast<double>(t - s->warmup) / static_cast<double>(s->steps - s->warmup) : 1.0;
  prog = std::min(1.0, prog);
  double m = s->min_frac;
  return s->base * (m + (1 - m) * 0.5 * (1 + std::cos(3.141592653589793 * prog)));
}

// Reads "step,loss,..." lines (header skipped): loss[step] (NaN where absent).
std::vector<double> read_curve(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw UsageError("--expect-curve: cannot open '" + path + "'");
  std::vector<double> loss;
  std::string line;
  std::getline(f, line);
  while (std::getline(f, line)) {
    std::istringstream is(line);
    std::string step, l;
    std::getline(is, step, ',');
    std::getline(is, l, ',');
    if (l.empty()) continue;
    size_t st = static_cast<size_t>(std::strtol(step.c_str(), nullptr, 10));
    if (loss.size() <= st) loss.resize(st + 1, NAN);
    loss[st] = std::strtod(l.c_str(), nullptr);
  }
  return loss;
}

// This rank's part of the parameters (LocalParams) and the way to the whole
// tensors: the blocks of the tensor-parallel ranks tile every sharded
// tensor, the replicated tensors are taken from tensor-parallel rank 0.
struct Parts {
  const LocalParams* lp = nullptr;
  std::vector<ParamTensor> whole;  // param_layout: the whole model, canonical offsets
  size_t n_whole = 0;
  tsr_grid grid = nullptr;  // DP x SP x TP; the tensor-parallel ranks are its depth axis
  int tpi = 0, tp = 1;
  // full (n_whole) = the whole tensors assembled from every tensor-parallel
  // rank's local array (collective over the depth axis).
  tsr_status to_full(const float* loc, std::vector<float>& full) const {
    full.assign(n_whole, 0.0f);
    for (size_t k = 0; k < whole.size(); ++k) {
      const ParamTensor& t = lp->t[k];
      float* f = full.data() + whole[k].offset;
      if (lp->sharded(k)) {
        for (size_t i = 0; i < t.size; ++i) f[lp->gidx[k][i]] = loc[t.offset + i];
      } else if (tpi == 0) {
        std::memcpy(f, loc + t.offset, t.size * sizeof(float));
      }
    }
    if (tp == 1) return TSR_SUCCESS;
    return tsr_allreduce(grid, TSR_AXIS_DEPTH, full.data(), full.data(), n_whole, TSR_FLOAT32, TSR_SUM);
  }
  // loc = this rank's elements of the whole tensors (local).
  void to_local(const std::vector<float>& full, float* loc) const {
    for (size_t k = 0; k < whole.size(); ++k) {
      const ParamTensor& t = lp->t[k];
      const float* f = full.data() + whole[k].offset;
      for (size_t i = 0; i < t.size; ++i) loc[t.offset + i] = f[lp->sharded(k) ? lp->gidx[k][i] : i];
    }
  }
};

// The optimizer's whole state array `which` of this rank's local array
// (sharded over the replicas: assembled over them).
tsr_status opt_state_local(tsr_optimizer opt, tsr_grid grid, tsr_opt_state which, size_t n, std::vector<float>& out) {
  double lo = 0, cnt = 0, dist = 0;
  tsr_optimizer_query(opt, TSR_OPTQ_SHARD_OFFSET, 0, &lo);
  tsr_optimizer_query(opt, TSR_OPTQ_SHARD_SIZE, 0, &cnt);
  tsr_optimizer_query(opt, TSR_OPTQ_DIST, 0, &dist);
  out.assign(n, 0.0f);
  tsr_status st = tsr_optimizer_get_state(opt, which, out.data() + static_cast<size_t>(lo), static_cast<size_t>(cnt));
  if (st == TSR_SUCCESS && static_cast<int>(dist) == TSR_OPT_SHARDED)
    st = tsr_allreduce(grid, TSR_AXIS_LAYER, out.data(), out.data(), n, TSR_FLOAT32, TSR_SUM);
  return st;
}

// Checkpoints through tessera's public API (tessera/io.h): every parameter
// tensor whole, by name, and LAMB's m and v of every tensor whole
// ("opt.m.NAME", "opt.v.NAME") with the optimizer's step count: the file
// does not depend on the layout (the whole tensors are assembled from the
// tensor-parallel blocks and the replicas' optimizer shards while writing).
// Returns the status; the message is in tsr_last_error(ctx).
tsr_status write_checkpoint(tsr_context ctx, const std::string& path, const Parts& parts, const std::vector<float>& P,
                            tsr_optimizer opt, const Options& o, int64_t step) {
  std::vector<float> fp, fm, fv, lm, lv;
  const size_t n = parts.lp->n;
  tsr_status st = parts.to_full(P.data(), fp);
  if (st == TSR_SUCCESS) st = opt_state_local(opt, parts.grid, TSR_OPT_STATE_M, n, lm);
  if (st == TSR_SUCCESS) st = opt_state_local(opt, parts.grid, TSR_OPT_STATE_V, n, lv);
  if (st == TSR_SUCCESS) st = parts.to_full(lm.data(), fm);
  if (st == TSR_SUCCESS) st = parts.to_full(lv.data(), fv);
  if (st != TSR_SUCCESS) return st;
  double ostep = 0;
  tsr_optimizer_query(opt, TSR_OPTQ_STEP, 0, &ostep);
  tsr_checkpoint ck = nullptr;
  st = tsr_checkpoint_create(ctx, path.c_str(), TSR_CKPT_AUTO, 0, &ck);
  if (st != TSR_SUCCESS) return st;
  const Shape& s = o.shape;
  for (const ParamTensor& t : parts.whole) {
    uint64_t shape[1] = {t.size};
    if (st == TSR_SUCCESS) st = tsr_checkpoint_put_replicated(ck, t.name.c_str(), TSR_FLOAT32, 1, shape, fp.data() + t.offset);
    if (st == TSR_SUCCESS)
      st = tsr_checkpoint_put_replicated(ck, ("opt.m." + t.name).c_str(), TSR_FLOAT32, 1, shape, fm.data() + t.offset);
    if (st == TSR_SUCCESS)
      st = tsr_checkpoint_put_replicated(ck, ("opt.v." + t.name).c_str(), TSR_FLOAT32, 1, shape, fv.data() + t.offset);
  }
  const std::pair<const char*, int64_t> ints[] = {{"step", step}, {"layers", (int64_t)s.layers}, {"width", (int64_t)s.width},
                                                  {"heads", (int64_t)s.heads}, {"seq", (int64_t)s.seq},
                                                  {"vocab", (int64_t)s.vocab}, {"seed", (int64_t)o.seed}, {"steps", o.steps},
                                                  {"opt_step", static_cast<int64_t>(ostep)}};
  for (const auto& kv : ints)
    if (st == TSR_SUCCESS) st = tsr_checkpoint_set_int(ck, kv.first, kv.second);
  if (st == TSR_SUCCESS) st = tsr_checkpoint_set_string(ck, "optimizer", o.optimizer.c_str());
  if (st == TSR_SUCCESS) st = tsr_checkpoint_set_string(ck, "model", "tessera-gpt: decoder-only, pre-LN, byte-level");
  if (st == TSR_SUCCESS) st = tsr_checkpoint_commit(ck);
  tsr_checkpoint_close(&ck);
  return st;
}

// Reads a checkpoint; returns the step it was written at, or -1 with msg set
// (a mismatch of the model or the run: exit 2). The whole tensors are read
// on every rank, and each keeps its blocks and its optimizer shard.
int64_t read_checkpoint(tsr_context ctx, const std::string& path, const Parts& parts, std::vector<float>& P,
                        tsr_optimizer opt, const Options& o, std::string& msg) {
  tsr_checkpoint ck = nullptr;
  tsr_status st = tsr_checkpoint_open(ctx, path.c_str(), &ck);
  if (st != TSR_SUCCESS) {
    msg = std::string("--resume: ") + tsr_last_error(ctx);
    return -1;
  }
  const Shape& s = o.shape;
  const std::pair<const char*, int64_t> want[] = {{"layers", (int64_t)s.layers}, {"width", (int64_t)s.width},
                                                  {"heads", (int64_t)s.heads}, {"seq", (int64_t)s.seq},
                                                  {"vocab", (int64_t)s.vocab}, {"seed", (int64_t)o.seed}, {"steps", o.steps}};
  for (const auto& kv : want) {
    int64_t v = 0;
    if (tsr_checkpoint_get_int(ck, kv.first, &v) != TSR_SUCCESS || v != kv.second) {
      msg = "--resume " + path + ": the checkpoint has " + kv.first + " = " + std::to_string(v) + ", this run " +
            std::to_string(kv.second) + ": resume with the options it was written with (--" + kv.first + ")";
      tsr_checkpoint_close(&ck);
      return -1;
    }
  }
  char kind[16] = {0};
  size_t need = 0;
  tsr_checkpoint_get_string(ck, "optimizer", kind, sizeof kind, &need);
  if (o.optimizer != kind) {
    msg = "--resume " + path + ": written with --optimizer " + kind + ", this run uses " + o.optimizer;
    tsr_checkpoint_close(&ck);
    return -1;
  }
  int64_t step = 0, ostep = 0;
  st = tsr_checkpoint_get_int(ck, "step", &step);
  if (st == TSR_SUCCESS) st = tsr_checkpoint_get_int(ck, "opt_step", &ostep);
  std::vector<float> fp(parts.n_whole), fm(parts.n_whole), fv(parts.n_whole);
  for (const ParamTensor& t : parts.whole) {
    uint64_t shape[1] = {t.size};
    if (st == TSR_SUCCESS) st = tsr_checkpoint_get_replicated(ck, t.name.c_str(), TSR_FLOAT32, 1, shape, fp.data() + t.offset);
    if (st == TSR_SUCCESS)
      st = tsr_checkpoint_get_replicated(ck, ("opt.m." + t.name).c_str(), TSR_FLOAT32, 1, shape, fm.data() + t.offset);
    if (st == TSR_SUCCESS)
      st = tsr_checkpoint_get_replicated(ck, ("opt.v." + t.name).c_str(), TSR_FLOAT32, 1, shape, fv.data() + t.offset);
  }
  if (st == TSR_SUCCESS) {
    const size_t n = parts.lp->n;
    std::vector<float> lm(n), lv(n);
    parts.to_local(fp, P.data());
    parts.to_local(fm, lm.data());
    parts.to_local(fv, lv.data());
    double lo = 0, cnt = 0;
    tsr_optimizer_query(opt, TSR_OPTQ_SHARD_OFFSET, 0, &lo);
    tsr_optimizer_query(opt, TSR_OPTQ_SHARD_SIZE, 0, &cnt);
    st = tsr_optimizer_set_state(opt, TSR_OPT_STATE_M, lm.data() + static_cast<size_t>(lo), static_cast<size_t>(cnt));
    if (st == TSR_SUCCESS)
      st = tsr_optimizer_set_state(opt, TSR_OPT_STATE_V, lv.data() + static_cast<size_t>(lo), static_cast<size_t>(cnt));
    if (st == TSR_SUCCESS) st = tsr_optimizer_set_step(opt, ostep);
  }
  if (st != TSR_SUCCESS) {
    msg = std::string("--resume: ") + tsr_status_name(st) + ": " + tsr_last_error(ctx);
    tsr_checkpoint_close(&ck);
    return -1;
  }
  tsr_checkpoint_close(&ck);
  return step;
}

// Peak resident memory of this process (VmHWM of /proc/self/status), bytes;
// 0 where it cannot be read.
double peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, 6, "VmHWM:") == 0) return std::strtod(line.c_str() + 6, nullptr) * 1024.0;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world = 1, wrank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  Options o;
  std::string text;
  try {
    o = parse(argc, argv);
    check_config(o, world);
    text = load_text(o.data.empty() ? kAustenRdb : o.data);
  } catch (const UsageError& e) {
    if (!*e.what()) {
      if (wrank == 0) std::fputs(kUsage, stdout);
      MPI_Finalize();
      return 0;
    }
    std::fprintf(stderr, "tessera-gpt: error (rank %d): %s\n", wrank, e.what());
    if (wrank == 0) std::fputs(kUsage, stderr);
    MPI_Finalize();
    return 2;
  } catch (const DataError& e) {
    std::fprintf(stderr, "tessera-gpt: error (rank %d): %s%s\n", wrank, e.what(),
                 o.data.empty() ? " (install the Jane Austen text: apt-get install --no-install-recommends "
                                  "r-cran-janeaustenr, or give --data FILE)"
                                : "");
    MPI_Finalize();
    return 2;
  }
  Split split;
  try {
    split = split_text(text, o.val_frac, o.shape.seq);
  } catch (const DataError& e) {
    std::fprintf(stderr, "tessera-gpt: error (rank %d): %s\n", wrank, e.what());
    MPI_Finalize();
    return 2;
  }
  const bool root = wrank == 0;

  // --- tessera: a context, a DP x SP x TP grid (axes COL, ROW, DEPTH), a
  // ring over the sequence axis, tensor-parallel all-reduces on the depth axis ---
  tsr_context ctx = nullptr;
  TSR_OK(nullptr, tsr_context_create(MPI_COMM_WORLD, &ctx));
  tsr_grid grid = nullptr;
  int dims[3] = {o.dp, o.sp, o.tp};
  TSR_OK(ctx, tsr_grid_create(ctx, TSR_GRID_3D_ANY, dims, &grid));
  int coords[3];
  TSR_OK(ctx, tsr_grid_my_coords(grid, coords));
  const int dpi = coords[0], spi = coords[1], tpi = coords[2];
  tsr_ring ring = nullptr;
  TSR_OK(ctx, tsr_ring_create(grid, TSR_AXIS_ROW, &ring));

  const Shape& S = o.shape;
  const size_t Bl = o.batch / static_cast<size_t>(o.dp);
  size_t Tl = 0;
  TSR_OK(ctx, tsr_attn_shard_len(TSR_ATTN_LAYOUT_ZIGZAG, S.seq, o.sp, spi, &Tl));
  std::vector<int64_t> pos(Tl);
  TSR_OK(ctx, tsr_attn_positions(TSR_ATTN_LAYOUT_ZIGZAG, S.seq, o.sp, spi, pos.data()));
  TensorParallel<float> tpar;
  tpar.size = o.tp;
  tpar.rank = tpi;
  tpar.allreduce_sum = [&](float* buf, size_t count) {
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_DEPTH, buf, buf, count, TSR_FLOAT32, TSR_SUM));
  };
  tpar.allreduce_max = [&](float* buf, size_t count) {
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_DEPTH, buf, buf, count, TSR_FLOAT32, TSR_MAX));
  };
  // 2D / 2.5D / 3D: a context over the replica's tensor-parallel ranks (the
  // depth axis of the grid above) and the q x q (x c | x q) grid on it; the
  // linear layers run tessera's grid GEMM there (grid_model.hpp).
  const bool gridtp = o.tp_mode != "1d";
  tsr_context tpctx = nullptr;
  tsr_grid tpgrid = nullptr;
  std::unique_ptr<Model<float>> model1;
  std::unique_ptr<GridModel> modelg;
  if (gridtp) {
    MPI_Comm depth = MPI_COMM_NULL;
    TSR_OK(ctx, tsr_grid_comm(grid, TSR_AXIS_DEPTH, &depth));
    TSR_OK(nullptr, tsr_context_create(depth, &tpctx));
    int tdims[3] = {o.tp_q, o.tp_q, o.tp_mode == "3d" ? o.tp_q : o.tp_c};
    tsr_grid_kind kind = o.tp_mode == "3d" ? TSR_GRID_3D : o.tp_mode == "2d" ? TSR_GRID_2D : TSR_GRID_2P5D;
    TSR_OK(tpctx, tsr_grid_create(tpctx, kind, tdims, &tpgrid));
    // the sequence ring joins ranks of equal tensor-parallel coordinates
    int tr = 0;
    TSR_OK(tpctx, tsr_grid_my_rank(tpgrid, &tr));
    int lo = tr, hi = tr;
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_ROW, &lo, &lo, 1, TSR_INT32, TSR_MIN));
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_ROW, &hi, &hi, 1, TSR_INT32, TSR_MAX));
    if (lo != hi) {
      std::fprintf(stderr, "tessera-gpt: the tensor-parallel grids of a sequence ring differ in their placement\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    try {
      modelg.reset(new GridModel(S, ring, TSR_ATTN_LAYOUT_ZIGZAG, tpgrid,
                                 o.tp_mode == "2d" ? TpMode::TWO_D : o.tp_mode == "3d" ? TpMode::THREE_D : TpMode::TWO_P5_D,
                                 Bl, pos));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessera-gpt: error (rank %d): %s\n", wrank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else {
    model1.reset(new Model<float>(S, ring, TSR_ATTN_LAYOUT_ZIGZAG, tpar));
    model1->resize(Bl, pos, S.seq);
  }
  auto model_forward = [&](const float* P, const int32_t* x, const int32_t* y) {
    return modelg ? modelg->forward(P, x, y) : model1->forward(P, x, y);
  };
  auto model_backward = [&](const float* P, float* G, const int32_t* x, const int32_t* y, float sc) {
    if (modelg) modelg->backward(P, G, x, y, sc);
    else model1->backward(P, G, x, y, sc);
  };
  // The optimizer's context: the replicas of this rank's tensor-parallel
  // blocks (the DP x SP ranks of equal TP coordinate: the grid's layer);
  // the tensor-parallel ranks complete its norms (tp1ctx for 1D, tpctx
  // for the grids).
  tsr_context optctx = nullptr, tp1ctx = nullptr;
  {
    MPI_Comm layer = MPI_COMM_NULL;
    TSR_OK(ctx, tsr_grid_comm(grid, TSR_AXIS_LAYER, &layer));
    TSR_OK(nullptr, tsr_context_create(layer, &optctx));
    if (!gridtp && o.tp > 1) {
      MPI_Comm depth = MPI_COMM_NULL;
      TSR_OK(ctx, tsr_grid_comm(grid, TSR_AXIS_DEPTH, &depth));
      TSR_OK(nullptr, tsr_context_create(depth, &tp1ctx));
    }
  }
  tsr_context normctx = gridtp ? tpctx : tp1ctx;
  // regions on every context (each has its own ledger)
  auto region = [&](const char* name, bool begin) {
    for (tsr_context c : {ctx, tpctx, optctx, tp1ctx})
      if (c) TSR_OK(c, begin ? tsr_region_begin(c, name) : tsr_region_end(c, name));
  };
  const LocalParams& lp = modelg ? modelg->local() : model1->local();
  const auto& layout = lp.t;
  const size_t n = lp.n;
  Parts parts;
  parts.lp = &lp;
  parts.whole = param_layout(S);
  parts.n_whole = param_count(parts.whole);
  parts.grid = grid;
  parts.tpi = tpi;
  parts.tp = o.tp;
  std::vector<float> P(n), G(n);
  init_local(P.data(), lp, S, o.seed);

  // --- the optimizer: one group per tensor (this rank's part of it), in
  // the local array's order ---
  std::vector<size_t> sizes;
  std::vector<double> nweights;
  for (size_t k : lp.order) {
    sizes.push_back(layout[k].size);
    nweights.push_back(lp.sharded(k) || tpi == 0 ? 1.0 : 0.0);  // replicated tensors: counted once
  }
  tsr_optimizer opt = nullptr;
  tsr_opt_dist dist = o.dist == "sharded" ? TSR_OPT_SHARDED : TSR_OPT_DATA_PARALLEL;
  TSR_OK(optctx, tsr_optimizer_create(optctx, TSR_PRESET_LAMB_APEX, dist, TSR_FLOAT32, sizes.size(), sizes.data(), &opt));
  TSR_OK(optctx, tsr_optimizer_set_param(opt, TSR_OPT_LR, o.lr));
  TSR_OK(optctx, tsr_optimizer_set_param(opt, TSR_OPT_WEIGHT_DECAY, o.wd));
  TSR_OK(optctx, tsr_optimizer_set_param(opt, TSR_OPT_MAX_GRAD_NORM, o.clip));
  const bool lamb = o.optimizer == "lamb";
  for (size_t g = 0; g < lp.order.size(); ++g) {
    const ParamTensor& t = layout[lp.order[g]];
    TSR_OK(optctx, tsr_optimizer_set_group_param(opt, static_cast<int>(g), TSR_OPT_DECAY, t.matrix ? 1 : 0));
    TSR_OK(optctx, tsr_optimizer_set_group_param(opt, static_cast<int>(g), TSR_OPT_ADAPT, lamb && t.matrix ? 1 : 0));
  }
  // LAMB's trust ratios and the clipping norm of the whole tensors: the
  // per-tensor sums of squares completed over the tensor-parallel ranks
  if (normctx) TSR_OK(optctx, tsr_optimizer_set_norm_reduction(opt, normctx, nweights.size(), nweights.data()));
  Schedule sched{o.lr, o.min_lr_frac, std::max(1, o.warmup), o.steps};
  TSR_OK(optctx, tsr_optimizer_set_schedule(opt, schedule_fn, &sched));

  const double tokens_per_step = static_cast<double>(o.batch * S.seq);
  const double C = static_cast<double>(S.width), L = static_cast<double>(S.layers);
  const double flop_per_token = 2 * 12 * C * C * L + 2 * C * static_cast<double>(S.vocab) + 4 * static_cast<double>(S.seq) * C * L;
  const double flop_per_step = 3 * flop_per_token * tokens_per_step;  // the PyTorch baseline's count
  if (root) {
    std::printf("tessera-gpt: %zu layers, width %zu, %zu heads, seq %zu, vocab %zu: %zu parameters in %zu groups\n",
                S.layers, S.width, S.heads, S.seq, S.vocab, parts.n_whole, layout.size());
    std::printf("data: %s, %zu bytes (train %zu, validation %zu)\n", o.data.empty() ? "Jane Austen's novels" : o.data.c_str(),
                text.size(), split.train.size(), split.val.size());
    std::string tpd = o.tp_mode == "1d" ? "Megatron 1D"
                      : o.tp_mode == "2d" ? std::to_string(o.tp_q) + "x" + std::to_string(o.tp_q) + " 2D: " + modelg->describe()
                      : o.tp_mode == "3d" ? std::to_string(o.tp_q) + "x" + std::to_string(o.tp_q) + "x" + std::to_string(o.tp_q) + " 3D: " + modelg->describe()
                      : std::to_string(o.tp_q) + "x" + std::to_string(o.tp_q) + "x" + std::to_string(o.tp_c) + " 2.5D: " + modelg->describe();
    std::printf("layout: %d ranks = DP %d x SP %d (ring attention, zigzag; %zu tokens per rank per sequence) "
                "x TP %d (%s); %s %s, lr %g, warmup %d, batch %zu x %zu tokens\n",
                world, o.dp, o.sp, Tl, o.tp, tpd.c_str(), o.optimizer == "lamb" ? "LAMB" : "AdamW (LAMB without layer adaptation)",
                o.dist == "sharded" ? "sharded" : "data-parallel", o.lr, o.warmup, o.batch, S.seq);
  }
  {  // memory: this rank's parameters, gradients and optimizer state
    double sb = 0;
    tsr_optimizer_query(opt, TSR_OPTQ_STATE_BYTES, 0, &sb);
    double mine[3] = {4.0 * static_cast<double>(n), 4.0 * static_cast<double>(n), sb}, mx[3];
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_ALL, mine, mx, 3, TSR_FLOAT64, TSR_MAX));
    if (root)
      std::printf("params per rank: %.2f MB (whole model %.2f MB), gradients %.2f MB, optimizer state %.2f MB "
                  "(largest rank; %s LAMB state of the whole model: %.2f MB)\n",
                  mx[0] / 1e6, 4.0 * static_cast<double>(parts.n_whole) / 1e6, mx[1] / 1e6, mx[2] / 1e6,
                  o.dist == "sharded" ? "sharded:" : "data-parallel:", 8.0 * static_cast<double>(parts.n_whole) / 1e6);
  }
  if (root) std::fflush(stdout);

  std::vector<int32_t> x(Bl * Tl), y(Bl * Tl);
  const float scale = 1.0f / static_cast<float>(Bl * Tl);
  const double nreplicas = static_cast<double>(o.dp * o.sp * o.tp);  // TP ranks hold equal losses
  auto global_mean = [&](double local_sum_mean) {
    double v = local_sum_mean;
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_ALL, &v, &v, 1, TSR_FLOAT64, TSR_SUM));
    return v / nreplicas;
  };
  auto evaluate = [&]() {
    region("eval", true);
    double sum = 0;
    for (int i = 0; i < o.eval_batches; ++i) {
      fill_batch(split.val, o.seed, STREAM_VAL_BATCH, static_cast<uint64_t>(i), static_cast<size_t>(dpi) * Bl, Bl, S.seq,
                 pos.data(), Tl, x.data(), y.data());
      sum += model_forward(P.data(), x.data(), y.data()) / static_cast<double>(Bl * Tl);
    }
    double v = global_mean(sum / std::max(1, o.eval_batches));
    region("eval", false);
    return v;
  };

  FILE* csv = nullptr;
  if (root && !o.csv.empty()) {
    csv = std::fopen(o.csv.c_str(), "w");
    if (!csv) std::fprintf(stderr, "tessera-gpt: warning: cannot write --csv %s\n", o.csv.c_str());
    else std::fprintf(csv, "step,loss,lr,ms,tokens_per_s,val_loss\n");
  }
  int first_step = 1;
  if (!o.resume.empty()) {
    std::string msg;
    region("checkpoint", true);
    int64_t at = read_checkpoint(ctx, o.resume, parts, P, opt, o, msg);
    region("checkpoint", false);
    if (at < 0) {
      std::fprintf(stderr, "tessera-gpt: error (rank %d): %s\n", wrank, msg.c_str());
      tsr_optimizer_destroy(&opt);
      modelg.reset();
      tsr_grid_destroy(&tpgrid);
      tsr_context_destroy(&tpctx);
      tsr_context_destroy(&tp1ctx);
      tsr_context_destroy(&optctx);
      tsr_ring_destroy(&ring);
      tsr_grid_destroy(&grid);
      tsr_context_destroy(&ctx);
      MPI_Finalize();
      return 2;
    }
    first_step = static_cast<int>(at) + 1;
    if (root) std::printf("resumed from %s at step %lld\n", o.resume.c_str(), static_cast<long long>(at));
  }
  auto checkpoint = [&](int step) {
    region("checkpoint", true);
    double t0 = MPI_Wtime();
    TSR_OK(ctx, write_checkpoint(ctx, o.checkpoint, parts, P, opt, o, step));
    region("checkpoint", false);
    if (root) std::printf("checkpoint: step %d written to %s (%.0f ms)\n", step, o.checkpoint.c_str(), (MPI_Wtime() - t0) * 1e3);
  };
  // --check-grad: the gradient the optimizer averages over all ranks against
  // the gradient of the whole batch computed on every rank alone (the 1-rank
  // model); per tensor, the largest difference relative to the tensor's
  // largest gradient. Catches what the loss curve cannot: a tensor's
  // gradient off by a constant factor (Adam and LAMB normalise it away).
  bool grad_fail = false;
  auto check_gradient = [&](int step) {
    std::vector<float> avg, fullP;  // the whole tensors' gradient averaged over the replicas; the whole model
    TSR_OK(ctx, parts.to_full(G.data(), avg));
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_LAYER, avg.data(), avg.data(), avg.size(), TSR_FLOAT32, TSR_SUM));
    for (float& v : avg) v /= static_cast<float>(o.dp * o.sp);
    TSR_OK(ctx, parts.to_full(P.data(), fullP));
    const size_t nw = parts.n_whole;
    tsr_context sctx = nullptr;
    tsr_ring sring = nullptr;
    TSR_OK(nullptr, tsr_context_create(MPI_COMM_SELF, &sctx));
    TSR_OK(sctx, tsr_ring_create_comm(sctx, MPI_COMM_SELF, &sring));
    {
      Model<float> ref(S, sring, TSR_ATTN_LAYOUT_CONTIGUOUS);
      std::vector<int64_t> fp(S.seq);
      for (size_t t = 0; t < S.seq; ++t) fp[t] = static_cast<int64_t>(t);
      ref.resize(o.batch, fp, S.seq);
      std::vector<int32_t> fx(o.batch * S.seq), fy(o.batch * S.seq);
      fill_batch(split.train, o.seed, STREAM_TRAIN_BATCH, static_cast<uint64_t>(step), 0, o.batch, S.seq, fp.data(), S.seq,
                 fx.data(), fy.data());
      std::vector<float> rg(nw);
      ref.forward(fullP.data(), fx.data(), fy.data());
      ref.backward(fullP.data(), rg.data(), fx.data(), fy.data(), 1.0f / static_cast<float>(o.batch * S.seq));
      double worst = 0;
      std::string at;
      for (const ParamTensor& t : parts.whole) {
        double mx = 0, d = 0;
        for (size_t i = t.offset; i < t.offset + t.size; ++i) {
          mx = std::max(mx, static_cast<double>(std::fabs(rg[i])));
          d = std::max(d, static_cast<double>(std::fabs(rg[i] - avg[i])));
        }
        double r = mx > 0 ? d / mx : d;
        if (!(r <= worst)) worst = r, at = t.name;
      }
      grad_fail = !(worst <= 1e-4);
      if (root)
        std::printf("gradient check (step %d): max per-tensor relative difference %.3e (%s) against the whole batch on "
                    "one rank: %s (tolerance 1.0e-04)\n", step, worst, at.c_str(), grad_fail ? "FAIL" : "PASS");
    }
    tsr_ring_destroy(&sring);
    tsr_context_destroy(&sctx);
  };
  const int last_step = o.stop_after > 0 ? std::min(o.stop_after, o.steps) : o.steps;
  const bool progress_bar = root && o.log_every > 1 && isatty(fileno(stdout));
  std::vector<std::pair<int, double>> curve;
  double total_ms = 0, best_ms = 1e300;
  std::vector<double> step_ms;
  for (int step = first_step; step <= last_step; ++step) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    fill_batch(split.train, o.seed, STREAM_TRAIN_BATCH, static_cast<uint64_t>(step), static_cast<size_t>(dpi) * Bl, Bl,
               S.seq, pos.data(), Tl, x.data(), y.data());
    region("forward", true);
    double local = model_forward(P.data(), x.data(), y.data()) * static_cast<double>(scale);
    region("forward", false);
    region("backward", true);
    model_backward(P.data(), G.data(), x.data(), y.data(), scale);
    region("backward", false);
    if (o.check_grad && step == first_step) check_gradient(step);
    region("optimizer", true);
    tsr_status st = tsr_optimizer_step(opt, P.data(), G.data(), n);
    if (st == TSR_ERR_NUMERIC) {
      if (root) std::printf("step %d: gradient not finite, step skipped by the optimizer\n", step);
    } else if (st != TSR_SUCCESS) {
      die_tsr(optctx, "tsr_optimizer_step", st);
    }
    double loss = global_mean(local);
    region("optimizer", false);
    TSR_OK(ctx, tsr_flops_add(ctx, static_cast<uint64_t>(flop_per_step / nreplicas)));
    double ms = (MPI_Wtime() - t0) * 1e3;
    double lr_used = 0;
    tsr_optimizer_query(opt, TSR_OPTQ_LR, 0, &lr_used);
    curve.push_back({step, loss});
    step_ms.push_back(ms);
    if (step > 1) total_ms += ms, best_ms = std::min(best_ms, ms);
    double val = NAN;
    if (o.eval_every > 0 && step % o.eval_every == 0 && step != o.steps) val = evaluate();
    if (root) {
      const bool line = step % o.log_every == 0 || step == 1 || step == last_step;
      if (!line && progress_bar) {  // a progress bar between the step lines on a terminal
        int w = 30, done = static_cast<int>(30.0 * step / last_step);
        std::printf("\r[%.*s%*s] step %d/%d  loss %.4f  %.1f ms ", done, "##############################", w - done, "",
                    step, last_step, loss, ms);
      }
      if (line)
        std::printf("%s", progress_bar ? "\r\033[K" : "");
      if (line)
        std::printf("step %5d/%d  loss %.4f  lr %.2e  %8.0f tok/s  %8.1f ms%s\n", step, o.steps, loss, lr_used,
                    tokens_per_step / (ms / 1e3), ms,
                    std::isnan(val) ? "" : ("  val " + std::to_string(val)).c_str());
      if (csv) {
        std::fprintf(csv, "%d,%.17g,%.6g,%.3f,%.1f,", step, loss, lr_used, ms, tokens_per_step / (ms / 1e3));
        if (!std::isnan(val)) std::fprintf(csv, "%.9g", val);
        std::fprintf(csv, "\n");
      }
      std::fflush(stdout);
    }
    if (!o.checkpoint.empty() && ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || step == last_step))
      checkpoint(step);
  }
  double val = evaluate();
  double h1 = unigram_entropy(split.val);
  if (root) {
    std::vector<double> sorted(step_ms.begin() + (step_ms.size() > 1 ? 1 : 0), step_ms.end());  // first step: warm-up
    std::sort(sorted.begin(), sorted.end());
    double med = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    std::printf("validation loss %.4f nats/byte (unigram entropy of the validation text %.4f)\n", val, h1);
    if (!sorted.empty())
      std::printf("step time (all but the first step, %d..%d): median %.1f ms, min %.1f ms; %.0f tokens/s; %.1f GFLOP/s "
                  "(%.1f GFLOP per step, 3 x forward matmul FLOPs)\n",
                  first_step + 1, last_step, med, best_ms, tokens_per_step / (med / 1e3), flop_per_step / (med / 1e3) / 1e9, flop_per_step / 1e9);
    if (csv) {
      std::fprintf(csv, "%d,,,,,%.9g\n", last_step, val);
      std::fclose(csv);
    }
  }

  // --- sample text from the trained model (rank 0, a ring of its own) ---
  std::vector<float> fullP;
  if (o.sample > 0) TSR_OK(ctx, parts.to_full(P.data(), fullP));
  if (root && o.sample > 0) {
    tsr_context sctx = nullptr;
    tsr_ring sring = nullptr;
    TSR_OK(nullptr, tsr_context_create(MPI_COMM_SELF, &sctx));
    TSR_OK(sctx, tsr_ring_create_comm(sctx, MPI_COMM_SELF, &sring));
    Model<float> gen(S, sring, TSR_ATTN_LAYOUT_CONTIGUOUS);
    std::vector<int32_t> ctxt;
    for (unsigned char c : o.prompt) ctxt.push_back(c);
    if (ctxt.empty()) ctxt.push_back('\n');
    std::string out;
    for (int i = 0; i < o.sample; ++i) {
      size_t w = std::min(ctxt.size(), S.seq);
      std::vector<int64_t> gp(w);
      for (size_t t = 0; t < w; ++t) gp[t] = static_cast<int64_t>(t);
      gen.resize(1, gp, w);
      gen.forward(fullP.data(), ctxt.data() + (ctxt.size() - w), nullptr);
      const float* lg = gen.logits() + (w - 1) * S.vocab;
      double m = lg[0];
      for (size_t v = 1; v < S.vocab; ++v) m = std::max(m, static_cast<double>(lg[v]));
      std::vector<double> pr(S.vocab);
      double sum = 0;
      for (size_t v = 0; v < S.vocab; ++v) sum += pr[v] = std::exp((lg[v] - m) / o.temperature);
      double u = uniform01(o.seed, STREAM_SAMPLE, static_cast<uint64_t>(i)) * sum;
      size_t pick = 0;
      for (; pick + 1 < S.vocab && u >= pr[pick]; ++pick) u -= pr[pick];
      ctxt.push_back(static_cast<int32_t>(pick));
      out.push_back(static_cast<char>(pick));
    }
    std::printf("sample (temperature %g):\n%s%s\n", o.temperature, o.prompt.c_str(), out.c_str());
    tsr_ring_destroy(&sring);
    tsr_context_destroy(&sctx);
  }

  // --- accounting and energy ---
  if (o.report) {
    // Bytes per step by region, summed over all ranks and both contexts:
    // point-to-point payload sent plus the modelled wire bytes of the
    // collectives sent (docs/ACCOUNTING.md).
    const char* regs[3] = {"forward", "backward", "optimizer"};
    double sums[6] = {0, 0, 0, 0, 0, 0};
    for (int r = 0; r < 3; ++r)
      for (tsr_context c : {ctx, tpctx, optctx, tp1ctx}) {
        if (!c) continue;
        tsr_counters k;
        if (tsr_counters_get(c, regs[r], &k) != TSR_SUCCESS) continue;
        double b = 0;
        for (int pc = 0; pc < TSR_PEER_CLASSES; ++pc) b += static_cast<double>(k.p2p_sent[pc].bytes + k.coll_wire_sent[pc].bytes);
        sums[r + (c == tpctx || c == tp1ctx ? 3 : 0)] += b;
      }
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_ALL, sums, sums, 6, TSR_FLOAT64, TSR_SUM));
    const double ns = std::max(1, last_step - first_step + 1);
    if (root)
      std::printf("bytes sent per step, all ranks (p2p payload + modelled collective wire bytes): forward %.0f, "
                  "backward %.0f, optimizer %.0f (of which on the tensor-parallel grids: %.0f, %.0f, %.0f)\n",
                  (sums[0] + sums[3]) / ns, (sums[1] + sums[4]) / ns, (sums[2] + sums[5]) / ns, sums[3] / ns, sums[4] / ns,
                  sums[5] / ns);
    if (tpctx) {  // the tensor-parallel context's ledger (replica 0's grid, printed by world rank 0)
      tsr_report trep = nullptr;
      TSR_OK(tpctx, tsr_report_create(tpctx, 0, &trep));
      size_t tneed = 0;
      tsr_report_format(trep, nullptr, 0, &tneed);
      std::string tbuf(tneed + 1, '\0');
      tsr_report_format(trep, &tbuf[0], tbuf.size(), &tneed);
      if (root) std::printf("--- tensor-parallel grid of replica 0: bytes by region (tessera accounting) ---\n%s\n", tbuf.c_str());
      tsr_report_destroy(&trep);
      tsr_energy_report ter = nullptr;
      if (tsr_energy_report_create(tpctx, nullptr, 0, &ter) == TSR_SUCCESS) {
        tneed = 0;
        tsr_energy_report_format(ter, TSR_OUTPUT_TABLE, nullptr, 0, &tneed);
        std::string teb(tneed + 1, '\0');
        tsr_energy_report_format(ter, TSR_OUTPUT_TABLE, &teb[0], teb.size(), &tneed);
        if (root) std::printf("--- tensor-parallel grid of replica 0: modelled energy ---\n%s\n", teb.c_str());
        tsr_energy_report_destroy(&ter);
      }
    }
    tsr_report rep = nullptr;
    TSR_OK(ctx, tsr_report_create(ctx, 0, &rep));
    size_t need = 0;
    tsr_report_format(rep, nullptr, 0, &need);
    std::string buf(need + 1, '\0');
    tsr_report_format(rep, &buf[0], buf.size(), &need);
    if (root) std::printf("--- bytes by region and level (tessera accounting) ---\n%s\n", buf.c_str());
    tsr_report_destroy(&rep);
    tsr_energy_report er = nullptr;
    if (tsr_energy_report_create(ctx, nullptr, 0, &er) == TSR_SUCCESS) {
      need = 0;
      tsr_energy_report_format(er, TSR_OUTPUT_TABLE, nullptr, 0, &need);
      std::string eb(need + 1, '\0');
      tsr_energy_report_format(er, TSR_OUTPUT_TABLE, &eb[0], eb.size(), &need);
      if (root) std::printf("--- modelled energy ---\n%s\n", eb.c_str());
      tsr_energy_report_destroy(&er);
    } else if (root) {
      std::printf("(no energy report: %s)\n", tsr_last_error(ctx));
    }
  }

  int rc = 0;
  if (!o.expect_curve.empty()) {  // every rank holds the curve: every rank decides
    try {
      std::vector<double> ref = read_curve(o.expect_curve);
      double worst = 0;
      int at = 0;
      size_t nn = 0;
      for (const auto& sl : curve) {
        size_t st = static_cast<size_t>(sl.first);
        if (st >= ref.size() || std::isnan(ref[st])) continue;
        ++nn;
        double r = std::fabs(sl.second - ref[st]) / std::fabs(ref[st]);
        if (r > worst || std::isnan(r)) worst = std::isnan(r) ? INFINITY : std::max(worst, r), at = sl.first;
      }
      bool ok = nn == curve.size() && nn > 0 && worst <= o.curve_tol;
      if (root) std::printf("curve check: max relative loss difference %.3e (step %d) over %zu steps vs %s: %s (tolerance %.1e)\n",
                  worst, at, nn, o.expect_curve.c_str(), ok ? "PASS" : "FAIL", o.curve_tol);
      if (!ok) rc = 1;
    } catch (const std::exception& e) {
      if (root) std::printf("curve check: FAIL: %s\n", e.what());
      rc = 1;
    }
  }
  if (grad_fail) rc = 1;
  {  // peak resident memory per rank (VmHWM)
    double mine = peak_rss_bytes(), lo = mine, hi = mine;
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_ALL, &mine, &lo, 1, TSR_FLOAT64, TSR_MIN));
    TSR_OK(ctx, tsr_allreduce(grid, TSR_AXIS_ALL, &mine, &hi, 1, TSR_FLOAT64, TSR_MAX));
    if (root) std::printf("peak RSS per rank (VmHWM): min %.1f MB, max %.1f MB\n", lo / 1e6, hi / 1e6);
  }
  tsr_optimizer_destroy(&opt);
  modelg.reset();
  tsr_grid_destroy(&tpgrid);
  tsr_context_destroy(&tpctx);
  tsr_context_destroy(&tp1ctx);
  tsr_context_destroy(&optctx);
  tsr_ring_destroy(&ring);
  tsr_grid_destroy(&grid);
  tsr_context_destroy(&ctx);
  MPI_Finalize();
  return rc;
}

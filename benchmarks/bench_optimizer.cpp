// bench_optimizer: the fused LAMB and LARS steps against this machine's copy
// bandwidth, measured in the same run, and against a naive implementation
// that makes one pass over memory per formula; and the distributed step's
// communication per rank, sharded vs data parallel.
//
//   bench_optimizer [--sizes 1e6,1e7,1e8] [--threads 1,2] [--reps 15]
//       kernels: one rank (run it alone, or under mpiexec -n 1)
//   mpiexec -n P bench_optimizer --dist [--sizes 1e7] [--reps 5] [--modes LIST] [--csv FILE]
//       distributed: P ranks, data parallel vs sharded (--modes: a subset of
//       dp-lamb,sharded-lamb,sharded-lamb-clip,dp-lars,sharded-lars, all by
//       default); --csv appends one
//       row per size and mode (header first when the file is empty):
//       ranks,n,groups,mode,time_median_s,time_min_s,time_max_s,
//       wire_sent_bytes,wire_recv_bytes,messages,norm_allreduces,state_bytes
//       (per rank and step, max over ranks; the table's figures)
//
// Kernel mode, per parameter count n and thread count:
//  - copy bandwidth: memcpy and a plain copy loop over a source and a
//    destination of 8 bytes per parameter each (the footprint of the fp32
//    LAMB step's w, g, m, v), bytes = read + written; the larger of the two
//    is "copy";
//  - fused steps: tsr_optimizer_step (replicated, one rank) for LAMB fp32,
//    LARS fp32, LAMB bf16, and LAMB fp32 clipping every step; bytes = what
//    the step's kernels read and write (TSR_OPTQ_STEP_BYTES,
//    docs/OPTIMIZERS.md);
//  - naive LAMB: the same update as one loop per formula (norm of g, m*=b1,
//    m+=(1-b1)g, v*=b2, g^2, v+=(1-b2)g^2, bias corrections, sqrt, +eps,
//    divide, +wd*w, norms of w and u, w-=lr*r*u), timed side by side.
// Every figure is the median over --reps rounds; each round times copy,
// fused and naive back to back (in rotating order) so that drift on a shared
// machine affects all of them alike.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "tessera/tessera.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<double> parse_list(const char* s) {
  std::vector<double> v;
  std::string str(s);
  size_t at = 0;
  while (at <= str.size()) {
    const size_t comma = std::min(str.find(',', at), str.size());
    v.push_back(std::atof(str.substr(at, comma - at).c_str()));
    at = comma + 1;
  }
  return v;
}

// Large, page-aligned, first-touched by the threads that will use them.
struct Array {
  float* p = nullptr;
  size_t n = 0;
  explicit Array(size_t count, [[maybe_unused]] int threads, float value) : n(count) {
    p = static_cast<float*>(std::aligned_alloc(4096, (n * sizeof(float) + 4095) / 4096 * 4096));
    if (!p) {
      std::fprintf(stderr, "out of memory (%zu floats)\n", n);
      std::exit(1);
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long long i = 0; i < static_cast<long long>(n); ++i) p[i] = value;
  }
  ~Array() { std::free(p); }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
};

// ------------------------------------------------------------------ copies
double time_memcpy(float* dst, const float* src, size_t n, [[maybe_unused]] int threads) {
  const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
  {
    int t = 0, nt = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    nt = omp_get_num_threads();
#endif
    const size_t a = n * static_cast<size_t>(t) / static_cast<size_t>(nt);
    const size_t b = n * static_cast<size_t>(t + 1) / static_cast<size_t>(nt);
    std::memcpy(dst + a, src + a, (b - a) * sizeof(float));
  }
  return seconds(t0, Clock::now());
}

double time_loop_copy(float* __restrict dst, const float* __restrict src, size_t n, [[maybe_unused]] int threads) {
  const auto t0 = Clock::now();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (long long i = 0; i < static_cast<long long>(n); ++i) dst[i] = src[i];
  return seconds(t0, Clock::now());
}

// The fp32 LAMB step's memory traffic with trivial arithmetic: a read-only
// pass over g, w, m, v (16 B/param), then a pass that reads them and writes
// w, m, v (28 B/param). The bandwidth a perfect kernel with the step's
// access pattern would get on this machine.
double time_pattern(float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v, size_t n,
                    [[maybe_unused]] int threads, double* sink) {
  const auto t0 = Clock::now();
  float s = 0;
#pragma omp parallel for simd schedule(static) num_threads(threads) reduction(+ : s)
  for (long long i = 0; i < static_cast<long long>(n); ++i) s += g[i] + w[i] + m[i] + v[i];
#pragma omp parallel for simd schedule(static) num_threads(threads)
  for (long long i = 0; i < static_cast<long long>(n); ++i) {
    const float mm = 0.5f * m[i] + g[i], vv = 0.5f * v[i] + g[i];
    m[i] = mm;
    v[i] = vv;
    w[i] -= 1e-9f * (mm + vv);
  }
  const double t = seconds(t0, Clock::now());
  *sink += s;
  return t;
}

// ------------------------------------------------------------ naive LAMB
// One loop per formula, as an eager framework runs LAMB (torch-optimizer
// style, with bias correction): every line below is a pass over memory.
// Returns the bytes those passes read and write.
struct Naive {
  size_t n;
  std::vector<size_t> off;
  Array t1, t2;  // temporaries, reused as an eager framework's allocator would
  Naive(size_t count, const std::vector<size_t>& offsets, int threads)
      : n(count), off(offsets), t1(count, threads, 0), t2(count, threads, 0) {}

  uint64_t step(float* w, const float* g, float* m, float* v, int64_t t, [[maybe_unused]] int threads) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-6f, wd = 0.01f, lr = 1e-3f;
    const float bc1 = 1.0f / (1.0f - std::pow(b1, static_cast<float>(t)));
    const float bc2 = 1.0f / (1.0f - std::pow(b2, static_cast<float>(t)));
    uint64_t bytes = 0;
    double gn = 0;
#define TSR_FOR(a, b) _Pragma("omp parallel for schedule(static) num_threads(threads)") for (long long i = (a); i < (b); ++i)
    {
      double s = 0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : s)
      for (long long i = 0; i < static_cast<long long>(n); ++i) s += static_cast<double>(g[i]) * g[i];
      gn = std::sqrt(s);  // the global gradient norm (clipping, overflow check)
      bytes += 4 * n;
    }
    if (!std::isfinite(gn)) return bytes;
    float* sq = t1.p;
    float* u = t2.p;
    for (size_t k = 0; k + 1 < off.size(); ++k) {
      const long long a = static_cast<long long>(off[k]), b = static_cast<long long>(off[k + 1]);
      const uint64_t e = static_cast<uint64_t>(b - a);
      TSR_FOR(a, b) m[i] *= b1;
      TSR_FOR(a, b) m[i] += (1 - b1) * g[i];
      TSR_FOR(a, b) v[i] *= b2;
      TSR_FOR(a, b) sq[i] = g[i] * g[i];
      TSR_FOR(a, b) v[i] += (1 - b2) * sq[i];
      TSR_FOR(a, b) u[i] = m[i] * bc1;     // m hat
      TSR_FOR(a, b) sq[i] = v[i] * bc2;    // v hat
      TSR_FOR(a, b) sq[i] = std::sqrt(sq[i]);
      TSR_FOR(a, b) sq[i] += eps;
      TSR_FOR(a, b) u[i] /= sq[i];
      TSR_FOR(a, b) u[i] += wd * w[i];
      bytes += e * (8 + 12 + 8 + 8 + 12 + 8 + 8 + 8 + 8 + 12 + 12);
      double ws = 0, us = 0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : ws)
      for (long long i = a; i < b; ++i) ws += static_cast<double>(w[i]) * w[i];
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : us)
      for (long long i = a; i < b; ++i) us += static_cast<double>(u[i]) * u[i];
      bytes += e * 8;
      const double r = ws > 0 && us > 0 ? std::sqrt(ws) / std::sqrt(us) : 1.0;
      const float k2 = static_cast<float>(lr * r);
      TSR_FOR(a, b) w[i] -= k2 * u[i];
      bytes += e * 12;
    }
#undef TSR_FOR
    return bytes;
  }
};

// Layers: blocks of 1M parameters (a 1024 x 1024 weight) with a 1024-element
// bias after each, excluded from decay and adaptation.
std::vector<size_t> layers(size_t n) {
  std::vector<size_t> s;
  const size_t block = 1u << 20, bias = 1024;
  size_t left = n;
  while (left > 0) {
    const size_t wsz = std::min(block, left);
    s.push_back(wsz);
    left -= wsz;
    if (left >= bias) {
      s.push_back(bias);
      left -= bias;
    }
  }
  return s;
}

void exclude_biases(tessera::optimizer& o, const std::vector<size_t>& s) {
  for (size_t g = 0; g < s.size(); ++g)
    if (s[g] == 1024) o.set(static_cast<int>(g), TSR_OPT_DECAY, 0).set(static_cast<int>(g), TSR_OPT_ADAPT, 0);
}

struct Fused {
  const char* name;
  tsr_opt_preset preset;
  tsr_dtype type;
  double clip;  // TSR_OPT_MAX_GRAD_NORM
};

void kernel_mode(const std::vector<double>& sizes, const std::vector<double>& thread_list, int reps) {
  tessera::context self(MPI_COMM_SELF);
  std::printf("bench_optimizer: kernels %s, %d reps (median); GB/s = (bytes read + bytes written) / time\n",
              tsr::opt::kernel_isa(), reps);
  // The last one clips every step: after the warm-up it takes the gradient
  // norm first (docs/OPTIMIZERS.md, section 6), 48 B/param.
  const Fused fused[] = {{"LAMB fp32", TSR_PRESET_LAMB_PAPER, TSR_FLOAT32, 0},
                         {"LARS fp32", TSR_PRESET_LARS_PAPER, TSR_FLOAT32, 0},
                         {"LAMB bf16", TSR_PRESET_LAMB_PAPER, TSR_BFLOAT16, 0},
                         {"LAMB clip", TSR_PRESET_LAMB_PAPER, TSR_FLOAT32, 1e-6}};
  for (double tf : thread_list) {
    const int threads = std::max(1, static_cast<int>(tf));
    for (double nf : sizes) {
      const size_t n = static_cast<size_t>(nf);
      const std::vector<size_t> sz = layers(n);
      std::vector<size_t> off(1, 0);
      for (size_t x : sz) off.push_back(off.back() + x);
      // Copy: source and destination of 8 bytes per parameter each.
      Array src(2 * n, threads, 1.0f), dst(2 * n, threads, 0.0f);
      // Step arrays (fp32 LAMB: w, g; m, v belong to the optimizer).
      Array w(n, threads, 0.5f), g(n, threads, 0.0f);
#pragma omp parallel for schedule(static) num_threads(threads)
      for (long long i = 0; i < static_cast<long long>(n); ++i) {
        w.p[i] = 0.5f + 1e-3f * static_cast<float>(i % 1000);
        g.p[i] = 1e-3f * static_cast<float>(static_cast<long long>(i % 2001) - 1000);
      }
      std::vector<uint16_t> wb(n), gb(n);
      tsr::opt::f32_to_bf16(w.p, wb.data(), n);
      tsr::opt::f32_to_bf16(g.p, gb.data(), n);
      Array nw(n, threads, 0.5f), nm(n, threads, 0.0f), nv(n, threads, 0.0f);
      std::memcpy(nw.p, w.p, n * sizeof(float));
      Naive naive(n, off, threads);
      Array pm(n, threads, 0.0f), pv(n, threads, 0.0f);
      double sink = 0;

      std::vector<tessera::optimizer> opts;
      for (const Fused& f : fused) {
        opts.emplace_back(self, f.preset, sz, TSR_OPT_REPLICATED, f.type);
        exclude_biases(opts.back(), sz);
        opts.back().set(TSR_OPT_THREADS, threads).set(TSR_OPT_MAX_GRAD_NORM, f.clip);
      }
      const size_t nf_ = opts.size();
      std::vector<std::vector<double>> t_fused(nf_);
      std::vector<double> t_memcpy, t_loop, t_naive, t_pattern;
      std::vector<double> bytes_fused(nf_, 0);
      uint64_t bytes_naive = 0;
      int64_t t_naive_step = 0;
      for (int rep = -1; rep < reps; ++rep) {  // rep -1: warm-up
        for (int slot = 0; slot < 3; ++slot) {
          const int what = (slot + std::max(rep, 0)) % 3;
          if (what == 0) {
            const double a = time_memcpy(dst.p, src.p, 2 * n, threads);
            const double b = time_loop_copy(dst.p, src.p, 2 * n, threads);
            const double c = time_pattern(nw.p, g.p, pm.p, pv.p, n, threads, &sink);
            if (rep >= 0) {
              t_memcpy.push_back(a);
              t_loop.push_back(b);
              t_pattern.push_back(c);
            }
          } else if (what == 1) {
            for (size_t k = 0; k < nf_; ++k) {
              const auto t0 = Clock::now();
              bool ok = fused[k].type == TSR_FLOAT32 ? opts[k].step(tessera::span<float>(w.p, n), tessera::span<float>(g.p, n))
                                                     : opts[k].step(tessera::span<uint16_t>(wb.data(), n),
                                                                    tessera::span<uint16_t>(gb.data(), n));
              const double s = seconds(t0, Clock::now());
              if (!ok) std::fprintf(stderr, "step skipped?\n");
              if (rep >= 0) t_fused[k].push_back(s);
              bytes_fused[k] = opts[k].query(TSR_OPTQ_STEP_BYTES);
            }
          } else {
            const auto t0 = Clock::now();
            bytes_naive = naive.step(nw.p, g.p, nm.p, nv.p, ++t_naive_step, threads);
            const double s = seconds(t0, Clock::now());
            if (rep >= 0) t_naive.push_back(s);
          }
        }
      }
      const double copy_bytes = 2.0 * 2.0 * static_cast<double>(n) * 4.0;  // read + write of 8 B/param
      const double bw_memcpy = copy_bytes / median(t_memcpy) / 1e9, bw_loop = copy_bytes / median(t_loop) / 1e9;
      const double bw_copy = std::max(bw_memcpy, bw_loop);
      std::printf("\nn = %zu parameters (%zu groups), %d thread(s)\n", n, sz.size(), threads);
      std::printf("  copy bandwidth: memcpy %.2f GB/s, copy loop %.2f GB/s -> copy = %.2f GB/s\n", bw_memcpy, bw_loop,
                  bw_copy);
      const double bw_pattern = 44.0 * static_cast<double>(n) / median(t_pattern) / 1e9;
      std::printf("  the LAMB fp32 step's traffic (16 B read-only pass + 28 B update pass) with trivial arithmetic: "
                  "%.2f GB/s\n", bw_pattern);
      for (size_t k = 0; k < nf_; ++k) {
        const double s = median(t_fused[k]);
        const double bw = bytes_fused[k] / s / 1e9;
        std::printf("  fused %-9s: %8.3f ms/step, %5.1f B/param, %6.2f GB/s = %5.1f %% of copy, %5.1f %% of the "
                    "same-traffic stream\n", fused[k].name, s * 1e3, bytes_fused[k] / static_cast<double>(n), bw,
                    100.0 * bw / bw_copy, 100.0 * bw / bw_pattern);
      }
      const double sn = median(t_naive), sf = median(t_fused[0]);
      std::printf("  naive LAMB fp32: %8.3f ms/step, %5.1f B/param, %6.2f GB/s; fused LAMB is %.2fx faster "
                  "(%.2f GB/s effective at the fused step's bytes)\n",
                  sn * 1e3, static_cast<double>(bytes_naive) / static_cast<double>(n),
                  static_cast<double>(bytes_naive) / sn / 1e9, sn / sf, bytes_fused[0] / sn / 1e9);
      if (sink == 42) std::printf(" ");  // keep the pattern's reads
      std::fflush(stdout);
    }
  }
}

// ------------------------------------------------------------ distributed
void dist_mode(const std::vector<double>& sizes, int reps, const std::string& csv_path,
               const std::vector<std::string>& wanted) {
  int rank = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  tessera::context ctx(MPI_COMM_WORLD);
  FILE* csv = nullptr;
  if (rank == 0 && !csv_path.empty()) {
    csv = std::fopen(csv_path.c_str(), "a");
    if (!csv) {
      std::fprintf(stderr, "bench_optimizer: cannot write %s\n", csv_path.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (std::ftell(csv) == 0)
      std::fprintf(csv, "ranks,n,groups,mode,time_median_s,time_min_s,time_max_s,wire_sent_bytes,wire_recv_bytes,"
                        "messages,norm_allreduces,state_bytes\n");
  }
  if (rank == 0)
    std::printf("bench_optimizer --dist: %d ranks, per rank and step (max over ranks; times: median of %d steps)\n", p,
                reps);
  struct Mode {
    const char* key;
    const char* name;
    tsr_opt_dist dist;
    tsr_opt_preset preset;
    double clip;
  };
  const Mode modes[] = {{"dp-lamb", "data parallel LAMB", TSR_OPT_DATA_PARALLEL, TSR_PRESET_LAMB_PAPER, 0},
                        {"sharded-lamb", "sharded LAMB", TSR_OPT_SHARDED, TSR_PRESET_LAMB_PAPER, 0},
                        {"sharded-lamb-clip", "sharded LAMB, clipping", TSR_OPT_SHARDED, TSR_PRESET_LAMB_PAPER, 1e-3},
                        {"dp-lars", "data parallel LARS", TSR_OPT_DATA_PARALLEL, TSR_PRESET_LARS_PAPER, 0},
                        {"sharded-lars", "sharded LARS", TSR_OPT_SHARDED, TSR_PRESET_LARS_PAPER, 0}};
  for (double nf : sizes) {
    const size_t n = static_cast<size_t>(nf);
    const std::vector<size_t> sz = layers(n);
    if (rank == 0)
      std::printf("\nn = %zu parameters (%zu groups)\n%-24s %10s %14s %14s %10s %9s %14s\n", n, sz.size(), "mode",
                  "ms/step", "wire sent B", "wire recv B", "messages", "norm AR", "state B/rank");
    std::vector<float> w(n, 0.5f), g(n);
    for (const Mode& m : modes) {
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), std::string(m.key)) == wanted.end()) continue;
      tessera::optimizer opt(ctx, m.preset, sz, m.dist);
      exclude_biases(opt, sz);
      opt.set(TSR_OPT_MAX_GRAD_NORM, m.clip);
      std::vector<double> times;
      tsr_counters c0{}, c1{};
      for (int s = -1; s < reps; ++s) {
        for (size_t i = 0; i < n; ++i) g[i] = 1e-3f * static_cast<float>(static_cast<long long>((i + 7 * static_cast<size_t>(rank)) % 2001) - 1000);
        if (s == 0) c0 = ctx.counters();
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = Clock::now();
        opt.step(w, g);
        double dt = seconds(t0, Clock::now()), mx = 0;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (s >= 0) times.push_back(mx);
      }
      c1 = ctx.counters();
      uint64_t v[4] = {0, 0, 0, 0}, mxv[4];
      for (int k = 0; k < TSR_PEER_CLASSES; ++k) {
        v[0] += c1.coll_wire_sent[k].bytes - c0.coll_wire_sent[k].bytes;
        v[1] += c1.coll_wire_recv[k].bytes - c0.coll_wire_recv[k].bytes;
        v[2] += c1.coll_wire_sent[k].messages - c0.coll_wire_sent[k].messages;
      }
      v[3] = static_cast<uint64_t>(opt.query(TSR_OPTQ_STATE_BYTES));
      MPI_Allreduce(v, mxv, 4, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
      const double R = reps;
      if (rank == 0)
        std::printf("%-24s %10.3f %14.0f %14.0f %10.1f %9.0f %14llu\n", m.name, median(times) * 1e3,
                    static_cast<double>(mxv[0]) / R, static_cast<double>(mxv[1]) / R, static_cast<double>(mxv[2]) / R,
                    opt.query(TSR_OPTQ_NORM_ALLREDUCES), static_cast<unsigned long long>(mxv[3]));
      if (csv)
        std::fprintf(csv, "%d,%zu,%zu,\"%s\",%.6f,%.6f,%.6f,%.0f,%.0f,%.1f,%.0f,%llu\n", p, n, sz.size(), m.name,
                     median(times), *std::min_element(times.begin(), times.end()),
                     *std::max_element(times.begin(), times.end()), static_cast<double>(mxv[0]) / R,
                     static_cast<double>(mxv[1]) / R, static_cast<double>(mxv[2]) / R,
                     opt.query(TSR_OPTQ_NORM_ALLREDUCES), static_cast<unsigned long long>(mxv[3]));
      std::fflush(stdout);
    }
  }
  if (csv) std::fclose(csv);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  bool dist = false;
  std::vector<double> sizes, threads{1};
  int reps = 15;
  std::string csv;
  std::vector<std::string> modes;
  bool bad_modes = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dist") dist = true;
    else if (a == "--sizes" && i + 1 < argc) sizes = parse_list(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = parse_list(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--csv" && i + 1 < argc) csv = argv[++i];
    else if (a == "--modes" && i + 1 < argc) {
      const std::string list = argv[++i];
      for (size_t b = 0; b <= list.size();) {
        const size_t e = std::min(list.find(',', b), list.size());
        modes.push_back(list.substr(b, e - b));
        b = e + 1;
      }
      for (const std::string& m : modes)
        if (m != "dp-lamb" && m != "sharded-lamb" && m != "sharded-lamb-clip" && m != "dp-lars" && m != "sharded-lars")
          bad_modes = true;
    } else bad_modes = true;
    if (bad_modes) {
      std::fprintf(stderr,
                   "usage: %s [--dist] [--sizes n,n,...] [--threads t,t,...] [--reps r] [--csv FILE]\n"
                   "  [--modes dp-lamb,sharded-lamb,sharded-lamb-clip,dp-lars,sharded-lars] (with --dist)\n",
                   argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  if (sizes.empty()) sizes = dist ? std::vector<double>{1e7} : std::vector<double>{1e6, 1e7, 1e8};
  try {
    if (dist) dist_mode(sizes, reps, csv, modes);
    else kernel_mode(sizes, threads, reps);
  } catch (const tessera::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}

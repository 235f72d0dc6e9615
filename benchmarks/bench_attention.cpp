// Ring attention benchmark (run by hand, never by ctest). Three modes:
//
//   sweep    time, bytes and peak memory per rank of the ring, two-pass and
//            all-to-all variants (forward, backward) over sequence lengths,
//            on all ranks of MPI_COMM_WORLD. Run it at p = 1 for one-rank
//            full attention and at p > 1 for the split.
//   overlap  side by side in one run, alternating rounds: every rank runs
//            the one-rank blockwise attention of the whole sequence at once
//            (a ring over MPI_COMM_SELF: no communication), then the ring
//            over all p ranks; per round ratio = ring / (one-rank / p).
//            Target at p = 2: <= 1.15.
//   causal   side by side, alternating: the non-causal ring and the causal
//            ring (zigzag, and contiguous and striped for contrast); per
//            round ratio = (time / visible pairs) causal over non-causal.
//            Target for zigzag: <= 1.10.
//
// Memory per rank is reported three ways: tensors (the q, k, v, out, lse,
// and for the backward dout, dq, dk, dv shards this program allocates, exact),
// workspace (tsr_ring_workspace_peak: every byte tessera allocated during the
// call, exact; the ring keeps it between calls and this program releases it
// between configurations), and VmHWM (the process's peak resident set from
// /proc/self/status, reset before each configuration by writing 5 to
// /proc/self/clear_refs; includes MPI, the libraries and page rounding).
// Times: per call, the slowest rank's; the median over repetitions.
// Bytes: what the call put on the wire from this rank (point-to-point
// payload plus the modelled wire bytes of collectives; control excluded),
// the largest over ranks.
//
//   mpiexec -n 2 bench_attention --mode overlap --seq 8192
//   mpiexec -n 4 bench_attention --mode sweep --seq 1024,2048,4096 --causal 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/tessera.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

struct Opts {
  std::string mode = "sweep";
  std::vector<size_t> seqs{1024, 2048, 4096, 8192, 16384, 32768};
  std::vector<tsr_attn_variant> variants{TSR_ATTN_RING, TSR_ATTN_RING_TWO_PASS, TSR_ATTN_ALLTOALL};
  size_t batch = 1, heads = 8, kv_heads = 8, dim = 64;
  int causal = 1;
  tsr_attn_layout layout = TSR_ATTN_LAYOUT_ZIGZAG;
  int backward = 1;
  int reps = 3, rounds = 7;
  double max_workspace_gb = 4.0;
  std::string csv;
};

const char* vname(tsr_attn_variant v) {
  return v == TSR_ATTN_RING ? "ring" : v == TSR_ATTN_RING_TWO_PASS ? "two-pass" : "all-to-all";
}
const char* lname(tsr_attn_layout l) {
  return l == TSR_ATTN_LAYOUT_CONTIGUOUS ? "contiguous" : l == TSR_ATTN_LAYOUT_ZIGZAG ? "zigzag" : "striped";
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    const size_t e = s.find(',', b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

bool parse(int argc, char** argv, Opts* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
    if (a == "--mode") o->mode = next();
    else if (a == "--seq") {
      o->seqs.clear();
      for (const std::string& x : split(next())) o->seqs.push_back(std::stoul(x));
    } else if (a == "--variants") {
      o->variants.clear();
      for (const std::string& x : split(next()))
        o->variants.push_back(x == "ring" ? TSR_ATTN_RING : x == "two-pass" ? TSR_ATTN_RING_TWO_PASS : TSR_ATTN_ALLTOALL);
    } else if (a == "--batch") o->batch = std::stoul(next());
    else if (a == "--heads") o->heads = std::stoul(next());
    else if (a == "--kv-heads") o->kv_heads = std::stoul(next());
    else if (a == "--dim") o->dim = std::stoul(next());
    else if (a == "--causal") o->causal = std::stoi(next());
    else if (a == "--layout") {
      const std::string l = next();
      o->layout = l == "contiguous" ? TSR_ATTN_LAYOUT_CONTIGUOUS : l == "striped" ? TSR_ATTN_LAYOUT_STRIPED : TSR_ATTN_LAYOUT_ZIGZAG;
    } else if (a == "--backward") o->backward = std::stoi(next());
    else if (a == "--reps") o->reps = std::stoi(next());
    else if (a == "--rounds") o->rounds = std::stoi(next());
    else if (a == "--max-workspace-gb") o->max_workspace_gb = std::stod(next());
    else if (a == "--csv") o->csv = next();
    else return false;
  }
  return true;
}

long vm_hwm_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) v = std::atol(line + 6);
  std::fclose(f);
  return v;
}
bool reset_hwm() {
#if defined(__GLIBC__)
  malloc_trim(0);  // give freed heap memory back first
#endif
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

void die(const char* what, tsr_status st) {
  std::fprintf(stderr, "%s failed: %s: %s\n", what, tsr_status_name(st), tsr_last_error(nullptr));
  MPI_Abort(MPI_COMM_WORLD, 2);
}
#define CHECK(call)                       \
  do {                                    \
    const tsr_status st_ = (call);        \
    if (st_ != TSR_SUCCESS) die(#call, st_); \
  } while (0)

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The shard tensors of one configuration on one rank (float32).
struct Problem {
  tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
  size_t n = 0;
  std::vector<float> q, k, v, o, lse, dout, dq, dk, dv;
  tsr_attn_tensor tq{}, tk{}, tv{}, to{}, tl{}, tdo{}, tdq{}, tdk{}, tdv{};
  size_t tensor_bytes = 0;

  Problem(const Opts& op, tsr_attn_variant var, tsr_attn_layout layout, int causal, size_t N, int p, int r,
          bool backward) {
    cfg.variant = var;
    cfg.layout = layout;
    cfg.causal = causal;
    cfg.seq_len = N;
    CHECK(tsr_attn_shard_len(layout, N, p, r, &n));
    const size_t B = op.batch, H = op.heads, G = op.kv_heads, d = op.dim;
    std::vector<int64_t> pos(n);
    CHECK(tsr_attn_positions(layout, N, p, r, pos.data()));
    // Values depend on the global position only (the same problem for every p).
    auto fill = [&](std::vector<float>& x, size_t heads, float salt) {
      x.resize(B * heads * n * d);
      for (size_t bh = 0; bh < B * heads; ++bh)
        for (size_t i = 0; i < n; ++i)
          for (size_t e = 0; e < d; ++e)
            x[(bh * n + i) * d + e] = std::sin(salt + 0.37f * static_cast<float>(bh) + 0.011f * static_cast<float>(pos[i]) +
                                               0.7f * static_cast<float>(e));
    };
    fill(q, H, 0.1f), fill(k, G, 1.3f), fill(v, G, 2.9f);
    o.assign(B * H * n * d, 0), lse.assign(B * H * n, 0);
    tq = {q.data(), B, H, n, d}, tk = {k.data(), B, G, n, d}, tv = {v.data(), B, G, n, d};
    to = {o.data(), B, H, n, d}, tl = {lse.data(), B, H, n, 1};
    tensor_bytes = (q.size() + k.size() + v.size() + o.size() + lse.size()) * sizeof(float);
    if (backward) {
      fill(dout, H, 4.1f);
      dq.assign(q.size(), 0), dk.assign(k.size(), 0), dv.assign(v.size(), 0);
      tdo = {dout.data(), B, H, n, d}, tdq = {dq.data(), B, H, n, d}, tdk = {dk.data(), B, G, n, d}, tdv = {dv.data(), B, G, n, d};
      tensor_bytes += (dout.size() + dq.size() + dk.size() + dv.size()) * sizeof(float);
    }
  }
  void forward(tsr_ring ring) { CHECK(tsr_attn_forward(ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl)); }
  void backward(tsr_ring ring) {
    CHECK(tsr_attn_backward(ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl, &tdo, &tdq, &tdk, &tdv));
  }
};

uint64_t wire_bytes(const tsr_counters& c) {
  uint64_t b = 0;
  for (int k = 0; k < TSR_PEER_CLASSES; ++k) b += c.p2p_sent[k].bytes + c.coll_wire_sent[k].bytes;
  return b;
}
uint64_t wire_msgs(const tsr_counters& c) {
  uint64_t m = 0;
  for (int k = 0; k < TSR_PEER_CLASSES; ++k) m += c.p2p_sent[k].messages + c.coll_wire_sent[k].messages;
  return m;
}
tsr_counters counters(tsr_context ctx) {
  tsr_counters c;
  CHECK(tsr_counters_get(ctx, "total", &c));
  return c;
}

double max_over(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}
uint64_t max_over(uint64_t x) {
  uint64_t m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return m;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const double x = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(x);
  return i + 1 < v.size() ? v[i] + (x - static_cast<double>(i)) * (v[i + 1] - v[i]) : v[i];
}

// Times one call on every rank (barrier first); the slowest rank's time.
template <class F>
double timed(F&& f) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  f();
  return max_over(now() - t0);
}

// ------------------------------------------------------------------- sweep
int sweep(const Opts& op, tsr_context ctx, tsr_ring ring, int p, int r) {
  FILE* csv = nullptr;
  if (r == 0 && !op.csv.empty()) {
    csv = std::fopen(op.csv.c_str(), "a");
    if (csv && std::ftell(csv) == 0)
      std::fprintf(csv, "p,variant,layout,causal,N,batch,heads,kv_heads,dim,dir,time_s,bytes_sent,msgs_sent,"
                        "tensor_bytes,workspace_bytes,tessera_peak_bytes,vmhwm_kib\n");
  }
  if (r == 0)
    std::printf("# p=%d batch=%zu heads=%zu kv_heads=%zu dim=%zu float32 %s%s, median of %d\n"
                "# %-10s %6s %4s %9s %12s %8s %11s %11s %11s %10s\n",
                p, op.batch, op.heads, op.kv_heads, op.dim, op.causal ? "causal " : "non-causal ", lname(op.layout),
                op.reps, "variant", "N", "dir", "time_s", "bytes/rank", "msgs", "tensors_MB", "workspc_MB",
                "tessera_MB", "VmHWM_MB");
  const bool can_reset = reset_hwm();
  for (size_t N : op.seqs)
    for (tsr_attn_variant var : op.variants) {
      tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
      cfg.variant = var, cfg.layout = op.layout, cfg.causal = op.causal, cfg.seq_len = N;
      size_t ws = 0, wsb = 0;
      const tsr_status q1 = tsr_attn_workspace(&cfg, p, r, op.batch, op.heads, op.kv_heads, op.dim, 0, 0, &ws);
      const tsr_status q2 = tsr_attn_workspace(&cfg, p, r, op.batch, op.heads, op.kv_heads, op.dim, 0, 1, &wsb);
      const double worst = max_over(q1 == TSR_SUCCESS ? static_cast<double>(ws) / 1e9 : 1e30);
      const double worst_b = max_over(q2 == TSR_SUCCESS ? static_cast<double>(wsb) / 1e9 : 1e30);
      const int dirs = op.backward && worst_b <= op.max_workspace_gb ? 2 : 1;
      if (r == 0 && op.backward && dirs == 1 && worst <= op.max_workspace_gb)
        std::printf("  %-10s %6zu  bwd skipped: workspace %.1f GB per rank > --max-workspace-gb %.1f\n", vname(var), N,
                    worst_b, op.max_workspace_gb);
      if (worst > op.max_workspace_gb) {
        if (r == 0) {
          if (worst >= 1e30)
            std::printf("  %-10s %6zu  skipped: not possible here (%s)\n", vname(var), N, tsr_last_error(nullptr));
          else
            std::printf("  %-10s %6zu  skipped: workspace %.1f GB per rank > --max-workspace-gb %.1f\n", vname(var), N,
                        worst, op.max_workspace_gb);
        }
        continue;
      }
      CHECK(tsr_ring_workspace_release(ring));  // nothing kept from the previous configuration
      MPI_Barrier(MPI_COMM_WORLD);
      if (can_reset) reset_hwm();
      Problem pr(op, var, op.layout, op.causal, N, p, r, dirs == 2);
      for (int dir = 0; dir < dirs; ++dir) {
        std::vector<double> t;
        uint64_t bytes = 0, msgs = 0;
        size_t peak = 0;
        CHECK(tsr_ring_workspace_peak(ring, &peak, 1));
        if (dir == 1) pr.forward(ring);  // the backward needs out and lse
        for (int k = 0; k < op.reps; ++k) {
          const tsr_counters a = counters(ctx);
          t.push_back(timed([&] { dir == 0 ? pr.forward(ring) : pr.backward(ring); }));
          const tsr_counters b = counters(ctx);
          tsr_counters dlt;
          const uint64_t* x = reinterpret_cast<const uint64_t*>(&a);
          const uint64_t* y = reinterpret_cast<const uint64_t*>(&b);
          uint64_t* z = reinterpret_cast<uint64_t*>(&dlt);
          for (size_t w = 0; w < sizeof dlt / sizeof(uint64_t); ++w) z[w] = y[w] - x[w];
          bytes = wire_bytes(dlt), msgs = wire_msgs(dlt);
        }
        CHECK(tsr_ring_workspace_peak(ring, &peak, 1));
        const uint64_t mb = max_over(static_cast<uint64_t>(bytes)), mm = max_over(static_cast<uint64_t>(msgs));
        const uint64_t tb = max_over(static_cast<uint64_t>(pr.tensor_bytes)), wb = max_over(static_cast<uint64_t>(peak));
        const uint64_t tp = max_over(static_cast<uint64_t>(pr.tensor_bytes + peak));
        const long hwm = can_reset ? vm_hwm_kib() : -1;
        const uint64_t mh = max_over(static_cast<uint64_t>(hwm < 0 ? 0 : hwm));
        const double med = median(t);
        if (r == 0) {
          std::printf("  %-10s %6zu %4s %9.4f %12llu %8llu %11.1f %11.1f %11.1f %10.1f\n", vname(var), N,
                      dir ? "bwd" : "fwd", med, static_cast<unsigned long long>(mb), static_cast<unsigned long long>(mm),
                      static_cast<double>(tb) / 1e6, static_cast<double>(wb) / 1e6, static_cast<double>(tp) / 1e6,
                      can_reset ? static_cast<double>(mh) * 1024 / 1e6 : -1.0);
          if (csv)
            std::fprintf(csv, "%d,%s,%s,%d,%zu,%zu,%zu,%zu,%zu,%s,%.6f,%llu,%llu,%llu,%llu,%llu,%lld\n", p, vname(var),
                         lname(op.layout), op.causal, N, op.batch, op.heads, op.kv_heads, op.dim, dir ? "bwd" : "fwd",
                         med, static_cast<unsigned long long>(mb), static_cast<unsigned long long>(mm),
                         static_cast<unsigned long long>(tb), static_cast<unsigned long long>(wb),
                         static_cast<unsigned long long>(tp), can_reset ? static_cast<long long>(mh) : -1LL);
          std::fflush(stdout);
        }
      }
    }
  if (csv) std::fclose(csv);
  if (r == 0 && !can_reset) std::printf("# VmHWM could not be reset (/proc/self/clear_refs): not reported\n");
  return 0;
}

// ----------------------------------------------------------------- overlap
int overlap(const Opts& op, tsr_ring ring, tsr_ring self, int p, int r) {
  for (size_t N : op.seqs) {
    Problem one(op, TSR_ATTN_RING, op.layout, op.causal, N, 1, 0, op.backward != 0);
    Problem split(op, TSR_ATTN_RING, op.layout, op.causal, N, p, r, op.backward != 0);
    one.forward(self), split.forward(ring);  // warm up
    std::vector<double> rf, rb, t1f, tpf, t1b, tpb, tcomm;
    // The forward's communication alone: the same K and V blocks around the
    // same ring with an empty step (what there is to hide behind compute).
    tsr_ring_buffer kv[2] = {{split.k.data(), split.k.size(), TSR_FLOAT32, TSR_RING_CIRCULATE},
                             {split.v.data(), split.v.size(), TSR_FLOAT32, TSR_RING_CIRCULATE}};
    auto nothing = [](const tsr_ring_step*, void*) { return TSR_SUCCESS; };
    for (int k = 0; k < op.rounds; ++k) {
      tcomm.push_back(timed([&] { CHECK(tsr_ring_exchange(ring, kv, 2, nothing, nullptr)); }));
      const double a = timed([&] { one.forward(self); });
      const double b = timed([&] { split.forward(ring); });
      t1f.push_back(a), tpf.push_back(b), rf.push_back(b / (a / p));
      if (op.backward) {
        const double c = timed([&] { one.backward(self); });
        const double d = timed([&] { split.backward(ring); });
        t1b.push_back(c), tpb.push_back(d), rb.push_back(d / (c / p));
      }
    }
    if (r == 0) {
      std::printf("overlap p=%d N=%zu batch=%zu heads=%zu kv_heads=%zu dim=%zu %s %s, %d rounds\n", p, N, op.batch,
                  op.heads, op.kv_heads, op.dim, op.causal ? "causal" : "non-causal", lname(op.layout), op.rounds);
      std::printf("  forward : one-rank %.4f s (median), ring %.4f s; ratio ring/(one-rank/p) median %.3f "
                  "(quartiles %.3f .. %.3f); K,V exchange alone %.4f s\n",
                  median(t1f), median(tpf), median(rf), quantile(rf, 0.25), quantile(rf, 0.75), median(tcomm));
      if (op.backward)
        std::printf("  backward: one-rank %.4f s (median), ring %.4f s; ratio ring/(one-rank/p) median %.3f "
                    "(quartiles %.3f .. %.3f)\n",
                    median(t1b), median(tpb), median(rb), quantile(rb, 0.25), quantile(rb, 0.75));
      std::fflush(stdout);
    }
  }
  return 0;
}

// ------------------------------------------------------------------ causal
int causal(const Opts& op, tsr_ring ring, int p, int r) {
  const tsr_attn_layout lays[] = {TSR_ATTN_LAYOUT_ZIGZAG, TSR_ATTN_LAYOUT_STRIPED, TSR_ATTN_LAYOUT_CONTIGUOUS};
  for (size_t N : op.seqs) {
    const double wn = static_cast<double>(N) * static_cast<double>(N);       // visible pairs, non-causal
    const double wc = static_cast<double>(N) * (static_cast<double>(N) + 1) / 2;  // causal
    Problem nc(op, TSR_ATTN_RING, TSR_ATTN_LAYOUT_ZIGZAG, 0, N, p, r, op.backward != 0);
    std::vector<Problem> cs;
    for (tsr_attn_layout l : lays) cs.emplace_back(op, TSR_ATTN_RING, l, 1, N, p, r, op.backward != 0);
    nc.forward(ring);
    for (Problem& c : cs) c.forward(ring);
    std::vector<std::vector<double>> rf(3), rb(3);
    std::vector<double> tn, tnb;
    std::vector<std::vector<double>> tc(3), tcb(3);
    for (int k = 0; k < op.rounds; ++k) {
      const double a = timed([&] { nc.forward(ring); });
      const double ab = op.backward ? timed([&] { nc.backward(ring); }) : 0;
      tn.push_back(a), tnb.push_back(ab);
      for (size_t i = 0; i < cs.size(); ++i) {
        const double b = timed([&] { cs[i].forward(ring); });
        rf[i].push_back((b / wc) / (a / wn)), tc[i].push_back(b);
        if (op.backward) {
          const double bb = timed([&] { cs[i].backward(ring); });
          rb[i].push_back((bb / wc) / (ab / wn)), tcb[i].push_back(bb);
        }
      }
    }
    if (r == 0) {
      std::printf("causal p=%d N=%zu batch=%zu heads=%zu kv_heads=%zu dim=%zu, %d rounds; ratio = (time/visible "
                  "pairs) causal / non-causal\n",
                  p, N, op.batch, op.heads, op.kv_heads, op.dim, op.rounds);
      std::printf("  non-causal: forward %.4f s, backward %.4f s (medians)\n", median(tn), median(tnb));
      for (size_t i = 0; i < cs.size(); ++i) {
        std::printf("  causal %-10s: forward %.4f s, ratio median %.3f (quartiles %.3f .. %.3f)", lname(lays[i]),
                    median(tc[i]), median(rf[i]), quantile(rf[i], 0.25), quantile(rf[i], 0.75));
        if (op.backward)
          std::printf("; backward %.4f s, ratio median %.3f (quartiles %.3f .. %.3f)", median(tcb[i]), median(rb[i]),
                      quantile(rb[i], 0.25), quantile(rb[i], 0.75));
        std::printf("\n");
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
#if defined(__GLIBC__)
  // Large blocks always from mmap and back to the system when freed, so that
  // one configuration's peak does not linger in the next one's VmHWM.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  mallopt(M_TRIM_THRESHOLD, 512 * 1024);
#endif
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Opts op;
  if (!parse(argc, argv, &op) || (op.mode != "sweep" && op.mode != "overlap" && op.mode != "causal")) {
    if (rank == 0)
      std::fprintf(stderr, "usage: bench_attention [--mode sweep|overlap|causal] [--seq N,N,...] "
                           "[--variants ring,two-pass,alltoall] [--batch B] [--heads H] [--kv-heads G] [--dim d] "
                           "[--causal 0|1] [--layout contiguous|zigzag|striped] [--backward 0|1] [--reps R] "
                           "[--rounds K] [--max-workspace-gb X] [--csv FILE]\n");
    MPI_Finalize();
    return 1;
  }
  tsr_context ctx = nullptr, self_ctx = nullptr;
  tsr_ring ring = nullptr, self = nullptr;
  CHECK(tsr_context_create(MPI_COMM_WORLD, &ctx));
  CHECK(tsr_ring_create_comm(ctx, MPI_COMM_WORLD, &ring));
  CHECK(tsr_context_create(MPI_COMM_SELF, &self_ctx));
  CHECK(tsr_ring_create_comm(self_ctx, MPI_COMM_SELF, &self));
  int rc = 0;
  if (op.mode == "sweep") rc = sweep(op, ctx, ring, size, rank);
  if (op.mode == "overlap") rc = overlap(op, ring, self, size, rank);
  if (op.mode == "causal") rc = causal(op, ring, size, rank);
  CHECK(tsr_ring_destroy(&self));
  CHECK(tsr_ring_destroy(&ring));
  CHECK(tsr_context_destroy(&self_ctx));
  CHECK(tsr_context_destroy(&ctx));
  MPI_Finalize();
  return rc;
}

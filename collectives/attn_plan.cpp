// The attention planner (tsr_attn_plan_create, tsr_attn_plan_candidates):
// every variant and layout with its modelled time and joules, the choice by
// time, energy or energy x time. Pure arithmetic on the exact byte formulas
// of docs/ATTENTION.md and the transport's wire models (so that the bytes by
// level are those the ledger measures), no communication.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attention_impl.hpp"
#include "context.hpp"
#include "core.hpp"
#include "energy/profile.hpp"
#include "gemm_core.hpp"
#include "wire_model.hpp"

namespace tsr {
namespace attn {
namespace {

struct Checked {
  tsr_attn_problem p;
  int objective = TSR_OBJECTIVE_TIME;
  gemm::Machine mc;
  gemm::EnergyModel em;
};

tsr_status check_problem(const tsr_attn_problem* problem, Checked* out) {
  TSR_CHECK_NOT_NULL(problem);
  const tsr_attn_problem* in = problem;
  if (in->magic != TSR_ATTN_PROBLEM_MAGIC || in->size < sizeof(tsr_attn_problem))
    return fail(TSR_ERR_INVALID_ARG, "argument 'problem' is not initialised with TSR_ATTN_PROBLEM_INIT");
  const tsr_attn_problem& p = *in;
  if (p.seq_len == 0 || p.batch == 0 || p.heads == 0 || p.kv_heads == 0 || p.dim == 0)
    return fail(TSR_ERR_INVALID_ARG,
                "problem sizes seq_len = %zu, batch = %zu, heads = %zu, kv_heads = %zu, dim = %zu must be >= 1",
                p.seq_len, p.batch, p.heads, p.kv_heads, p.dim);
  // Keep every product below 2^53 (exact in a double) with room to spare.
  const double big = static_cast<double>(p.seq_len) * static_cast<double>(p.seq_len) * static_cast<double>(p.batch) *
                     static_cast<double>(p.heads) * static_cast<double>(p.dim);
  if (!(big < 1e30)) return fail(TSR_ERR_INVALID_ARG, "problem sizes are too large (seq_len^2 x batch x heads x dim >= 1e30)");
  if (p.heads % p.kv_heads != 0)
    return fail(TSR_ERR_SHAPE, "problem 'heads' = %zu is not a multiple of 'kv_heads' = %zu", p.heads, p.kv_heads);
  if (p.type != TSR_FLOAT32 && p.type != TSR_FLOAT64)
    return fail(TSR_ERR_INVALID_ARG, "problem 'type' = %d must be TSR_FLOAT32 or TSR_FLOAT64", static_cast<int>(p.type));
  if (p.nranks < 1) return fail(TSR_ERR_INVALID_ARG, "problem 'nranks' = %d must be >= 1", p.nranks);
  if (p.ranks_per_node < 0)
    return fail(TSR_ERR_INVALID_ARG, "problem 'ranks_per_node' = %d must be >= 0 (0: one node)", p.ranks_per_node);
  if (p.variant < -1 || p.variant > TSR_ATTN_ALLTOALL)
    return fail(TSR_ERR_INVALID_ARG, "problem 'variant' = %d is neither -1 (any) nor a tsr_attn_variant", p.variant);
  if (p.layout < -1 || p.layout > TSR_ATTN_LAYOUT_STRIPED)
    return fail(TSR_ERR_INVALID_ARG, "problem 'layout' = %d is neither -1 (any) nor a tsr_attn_layout", p.layout);
  if (p.backward != 0 && p.backward != 1)
    return fail(TSR_ERR_INVALID_ARG, "problem 'backward' = %d must be 0 or 1", p.backward);
  if (!(p.memory_per_rank >= 0) || !(p.machine.alpha >= 0) || !(p.machine.beta >= 0) || !(p.machine.gamma >= 0))
    return fail(TSR_ERR_INVALID_ARG, "problem 'memory_per_rank' and the machine parameters must be >= 0");
  TSR_TRY(check_objective(static_cast<int>(p.objective), p.context, "problem"));
  if (p.profile != nullptr && energy::profile_of(p.profile) == nullptr)
    return fail(TSR_ERR_INVALID_ARG, "problem 'profile' is not a live tsr_energy_profile");
  const int np = p.nranks;
  if (p.variant == TSR_ATTN_ALLTOALL && (p.heads % static_cast<size_t>(np) != 0 || p.kv_heads % static_cast<size_t>(np) != 0))
    return fail(TSR_ERR_SHAPE, "problem 'variant' TSR_ATTN_ALLTOALL needs nranks = %d to divide heads = %zu and kv_heads = %zu",
                np, p.heads, p.kv_heads);
  out->p = p;
  out->objective = resolve_objective(static_cast<int>(p.objective), p.context);
  out->mc = gemm::make_machine(p.machine);
  out->em = gemm::make_energy_model(p.profile, p.ranks_per_node);
  return TSR_SUCCESS;
}

// Received bytes of one rank, by sender (ring ranks).
struct Recv {
  std::vector<std::pair<int, double>> edges;
  double total = 0;
  void add(int from, double b) {
    if (b <= 0) return;
    edges.push_back({from, b});
    total += b;
  }
  void add(const WireModel& m) {
    for (const WireEdge& e : m.recv) add(e.peer, static_cast<double>(e.bytes));
  }
};

// Time of `passes` ring passes of the busiest rank: each pass overlaps the
// hop of step s+1 with the compute of step s (p steps, p-1 hops), the
// compute spread evenly over the steps.
double ring_time(const gemm::Machine& mc, int p, double flops, double bytes, double msgs_per_hop, int passes) {
  const double step = mc.gamma * flops / (static_cast<double>(p) * passes);
  if (p == 1) return mc.gamma * flops;
  const double hop = mc.alpha * msgs_per_hop + mc.beta * bytes / (static_cast<double>(p - 1) * passes);
  return passes * (step + (p - 1) * std::max(step, hop));
}

void evaluate(const Checked& ck, tsr_attn_variant var, tsr_attn_layout lay, tsr_attn_candidate* c) {
  const tsr_attn_problem& pb = ck.p;
  const int p = pb.nranks;
  const double B = static_cast<double>(pb.batch), H = static_cast<double>(pb.heads),
               G = static_cast<double>(pb.kv_heads), d = static_cast<double>(pb.dim);
  const size_t N = pb.seq_len;
  const double e = static_cast<double>(tsr_dtype_size(pb.type));
  const bool mask = pb.has_key_mask != 0, bwd = pb.backward != 0;
  std::vector<double> n(static_cast<size_t>(p)), pairs(static_cast<size_t>(p));
  double nmax = 0, all_pairs = 0;
  std::vector<int64_t> pos;
  for (int r = 0; r < p; ++r) {
    const size_t nr = shard_len(lay, N, p, r);
    n[static_cast<size_t>(r)] = static_cast<double>(nr);
    nmax = std::max(nmax, static_cast<double>(nr));
    double vis = static_cast<double>(nr) * static_cast<double>(N);
    if (pb.causal) {
      pos.resize(nr);
      if (nr > 0) positions(lay, N, p, r, pos.data());
      vis = 0;
      for (int64_t x : pos) vis += static_cast<double>(x + 1);
    }
    pairs[static_cast<size_t>(r)] = vis;
    all_pairs += vis;
  }
  auto kv = [&](int j) { return B * G * n[static_cast<size_t>((j % p + p) % p)] * d * e; };
  auto mk = [&](int j) { return mask ? B * n[static_cast<size_t>((j % p + p) % p)] : 0.0; };
  const int rpn = pb.ranks_per_node > 0 ? pb.ranks_per_node : p;
  std::memset(c, 0, sizeof *c);
  c->variant = var;
  c->layout = lay;
  double worst_time = 0, worst_bytes = 0;
  for (int r = 0; r < p; ++r) {
    Recv rv;
    double flops = 0, time = 0, self = 0;
    const double nr = n[static_cast<size_t>(r)];
    const int prev = (r + p - 1) % p;
    if (var == TSR_ATTN_RING || var == TSR_ATTN_RING_TWO_PASS) {
      // Forward: every K, V (and mask) block but its own arrives from r-1.
      double fwd = 0;
      for (int j = 0; j < p; ++j)
        if (j != r) fwd += 2 * kv(j) + mk(j);
      const double full = B * H * d * nr * static_cast<double>(N);  // every pair: the two-pass computes them all
      const double f_fwd = 4 * (var == TSR_ATTN_RING ? B * H * d * pairs[static_cast<size_t>(r)] : full);
      rv.add(prev, fwd);
      flops += f_fwd;
      time += var == TSR_ATTN_RING ? ring_time(ck.mc, p, f_fwd, fwd, 2 + mask, 1)
                                   : ring_time(ck.mc, p, f_fwd, fwd, 1 + 0.5 * mask, 2);
      if (var == TSR_ATTN_RING_TWO_PASS) self += 4 * e * B * H * nr * static_cast<double>(N);
      if (bwd) {
        const double f_bwd = 2.5 * f_fwd;
        if (var == TSR_ATTN_RING) {
          double w = fwd;  // K, V again, and the travelling dK, dV sums: every block but r-1's
          for (int j = 0; j < p; ++j)
            if (j != prev) w += 2 * kv(j);
          rv.add(prev, w);
          flops += f_bwd;
          time += ring_time(ck.mc, p, f_bwd, w, 4 + mask, 1);
        } else {
          double w = 0;  // K (+mask), V, K passes
          for (int j = 0; j < p; ++j)
            if (j != r) w += 3 * kv(j) + mk(j);
          rv.add(prev, w);
          std::vector<uint64_t> blocks(static_cast<size_t>(p));
          for (int j = 0; j < p; ++j) blocks[static_cast<size_t>(j)] = static_cast<uint64_t>(kv(j));
          const WireModel rs = model_reduce_scatterv(r, p, blocks);
          double wrs = 0;
          for (const WireEdge& x : rs.recv) wrs += static_cast<double>(x.bytes);
          rv.add(rs);
          rv.add(rs);  // dK and dV
          flops += f_bwd;
          time += ring_time(ck.mc, p, f_bwd, w, 1 + mask / 3.0, 3) +
                  (p > 1 ? 2 * (ck.mc.alpha * (p - 1) + ck.mc.beta * wrs) : 0.0);
          self += 6 * e * B * H * nr * static_cast<double>(N);
        }
      }
    } else {  // all-to-all: heads scattered, every rank runs H/p heads over the whole sequence
      const double pp = static_cast<double>(p);
      const double cin = B * (H + 2 * G) / pp * nmax * d, cout = B * H / pp * nmax * (d + 1);
      const double f_fwd = 4 * B * (H / pp) * d * all_pairs;
      auto a2a = [&](double count) {
        const WireModel m = model_alltoall(r, p, static_cast<uint64_t>(count * e));
        rv.add(m);
        double w = 0;
        for (const WireEdge& x : m.recv) w += static_cast<double>(x.bytes);
        return p > 1 ? ck.mc.alpha * (p - 1) + ck.mc.beta * w : 0.0;
      };
      auto gather_mask = [&]() {
        if (!mask) return 0.0;
        const WireModel m = model_allgatherv(r, p, std::vector<uint64_t>(static_cast<size_t>(p), static_cast<uint64_t>(B * nmax)));
        rv.add(m);
        double w = 0;
        for (const WireEdge& x : m.recv) w += static_cast<double>(x.bytes);
        return p > 1 ? ck.mc.alpha * (p - 1) + ck.mc.beta * w : 0.0;
      };
      time += a2a(cin) + a2a(cout) + gather_mask() + ck.mc.gamma * f_fwd;
      flops += f_fwd;
      if (bwd) {
        const double bin = B * nmax * ((2 * H + 2 * G) / pp * d + 2 * H / pp), bout = B * nmax * (H + 2 * G) / pp * d;
        time += a2a(bin) + a2a(bout) + gather_mask() + ck.mc.gamma * 2.5 * f_fwd;
        flops += 2.5 * f_fwd;
      }
    }
    const int node = r / rpn;
    for (const auto& ed : rv.edges) (ed.first / rpn == node ? c->intra_node_bytes : c->inter_node_bytes) += ed.second;
    c->flops += flops;
    c->self_bytes += self;
    worst_time = std::max(worst_time, time);
    worst_bytes = std::max(worst_bytes, rv.total);
    tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
    cfg.variant = var;
    cfg.layout = lay;
    cfg.causal = pb.causal;
    cfg.seq_len = N;
    cfg.type = pb.type;
    size_t ws = 0, wb = 0;
    if (workspace(&cfg, p, r, pb.batch, pb.heads, pb.kv_heads, pb.dim, mask, 0, &ws) == TSR_SUCCESS &&
        (!bwd || workspace(&cfg, p, r, pb.batch, pb.heads, pb.kv_heads, pb.dim, mask, 1, &wb) == TSR_SUCCESS))
      c->memory_bytes = std::max(c->memory_bytes, static_cast<double>(std::max(ws, wb)));
    else
      c->memory_bytes = std::numeric_limits<double>::infinity();  // a message over INT_MAX elements: never fits
  }
  c->time = worst_time;
  c->bytes = worst_bytes;
  auto joules = [&](const gemm::EnergyFigures& f) {
    return c->self_bytes * f.self + c->intra_node_bytes * f.intra + c->inter_node_bytes * f.inter + c->flops * f.flop +
           f.static_watts * p * c->time;
  };
  c->joules = joules(ck.em.typical);
  c->joules_low = joules(ck.em.low);
  c->joules_high = joules(ck.em.high);
  c->fits = pb.memory_per_rank <= 0 || c->memory_bytes <= pb.memory_per_rank;
}

double objective_value(const tsr_attn_candidate& c, int objective) {
  return objective == TSR_OBJECTIVE_ENERGY ? c.joules : objective == TSR_OBJECTIVE_EDP ? c.joules * c.time : c.time;
}

// Every candidate, evaluated, in the order considered; *best the chosen one
// (index), false if none fits (then *best needs least memory).
bool plan_all(const Checked& ck, std::vector<tsr_attn_candidate>* all, size_t* best) {
  const tsr_attn_problem& pb = ck.p;
  const size_t np = static_cast<size_t>(pb.nranks);
  for (int v = 0; v <= TSR_ATTN_ALLTOALL; ++v) {
    if (pb.variant >= 0 && v != pb.variant) continue;
    if (v == TSR_ATTN_ALLTOALL && (pb.heads % np != 0 || pb.kv_heads % np != 0)) continue;
    for (int l = 0; l <= TSR_ATTN_LAYOUT_STRIPED; ++l) {
      if (pb.layout >= 0 && l != pb.layout) continue;
      tsr_attn_candidate c;
      evaluate(ck, static_cast<tsr_attn_variant>(v), static_cast<tsr_attn_layout>(l), &c);
      all->push_back(c);
    }
  }
  bool found = false;
  size_t least = 0;
  for (size_t i = 0; i < all->size(); ++i) {
    const tsr_attn_candidate& c = (*all)[i];
    if (c.memory_bytes < (*all)[least].memory_bytes) least = i;
    if (!c.fits) continue;
    if (!found) {
      found = true;
      *best = i;
      continue;
    }
    const tsr_attn_candidate& b = (*all)[*best];
    const double oc = objective_value(c, ck.objective), ob = objective_value(b, ck.objective);
    if (oc != ob ? oc < ob : c.time != b.time ? c.time < b.time : c.bytes < b.bytes) *best = i;
  }
  if (!found) *best = least;
  for (size_t i = 0; i < all->size(); ++i) (*all)[i].chosen = i == *best ? 1 : 0;
  return found;
}

tsr_status plan_create(const tsr_attn_problem* problem, tsr_attn_plan* plan) {
  TSR_CHECK_NOT_NULL(plan);
  Checked ck;
  TSR_TRY(check_problem(problem, &ck));
  std::vector<tsr_attn_candidate> all;
  size_t best = 0;
  const bool fits = plan_all(ck, &all, &best);
  std::memset(plan, 0, sizeof *plan);
  const tsr_attn_config defaults = TSR_ATTN_CONFIG_INIT;
  plan->config = defaults;
  plan->config.variant = all[best].variant;
  plan->config.layout = all[best].layout;
  plan->config.causal = ck.p.causal;
  plan->config.seq_len = ck.p.seq_len;
  plan->config.type = ck.p.type;
  plan->objective = static_cast<tsr_objective>(ck.objective);
  plan->choice = all[best];
  if (!fits) {
    plan->missing_bytes = all[best].memory_bytes - ck.p.memory_per_rank;
    return fail(TSR_ERR_NO_MEMORY,
                "no attention variant fits in %.0f bytes of workspace per rank: the least (variant %d, layout %d) "
                "needs %.0f bytes",
                ck.p.memory_per_rank, static_cast<int>(all[best].variant), static_cast<int>(all[best].layout),
                all[best].memory_bytes);
  }
  return TSR_SUCCESS;
}

tsr_status plan_candidates(const tsr_attn_problem* problem, tsr_attn_candidate* out, size_t cap, size_t* count) {
  TSR_CHECK_NOT_NULL(count);
  if (out == nullptr && cap > 0) return fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL with cap = %zu", cap);
  Checked ck;
  TSR_TRY(check_problem(problem, &ck));
  std::vector<tsr_attn_candidate> all;
  size_t best = 0;
  plan_all(ck, &all, &best);
  *count = all.size();
  for (size_t i = 0; i < all.size() && i < cap; ++i) out[i] = all[i];
  return TSR_SUCCESS;
}

}  // namespace
}  // namespace attn
}  // namespace tsr

extern "C" {

tsr_status tsr_attn_plan_create(const tsr_attn_problem* problem, tsr_attn_plan* plan) {
  return tsr::finish(nullptr, "tsr_attn_plan_create", tsr::attn::plan_create(problem, plan));
}

tsr_status tsr_attn_plan_candidates(const tsr_attn_problem* problem, tsr_attn_candidate* out, size_t cap,
                                    size_t* count) {
  return tsr::finish(nullptr, "tsr_attn_plan_candidates", tsr::attn::plan_candidates(problem, out, cap, count));
}

}  // extern "C"

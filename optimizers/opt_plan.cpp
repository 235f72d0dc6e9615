// The optimizer planner (tsr_optimizer_plan): a data-parallel and a sharded
// step side by side (bytes by level from the transport's wire models, the
// kernels' memory traffic, the state per rank, modelled time and joules) and
// the choice by time, energy or energy x time within a memory limit. Pure
// arithmetic, no communication (docs/OPTIMIZERS.md, "Planning").
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "context.hpp"
#include "core.hpp"
#include "energy/profile.hpp"
#include "gemm_core.hpp"
#include "tessera/optimizer.h"
#include "wire_model.hpp"

namespace tsr {
namespace opt_plan {
namespace {

constexpr size_t kChunk = 16384;  // the kernels' work-item size (optimizers/params.cpp)

struct Checked {
  tsr_opt_problem p;
  int objective = TSR_OBJECTIVE_TIME;
  gemm::Machine mc;
  double mem_beta = 1e-10;
  gemm::EnergyModel em;
};

tsr_status check_problem(const tsr_opt_problem* problem, Checked* out) {
  TSR_CHECK_NOT_NULL(problem);
  const tsr_opt_problem* in = problem;
  if (in->magic != TSR_OPT_PROBLEM_MAGIC || in->size < sizeof(tsr_opt_problem))
    return fail(TSR_ERR_INVALID_ARG, "argument 'problem' is not initialised with TSR_OPT_PROBLEM_INIT");
  const tsr_opt_problem& p = *in;
  if (p.kind != TSR_OPT_LAMB && p.kind != TSR_OPT_LARS)
    return fail(TSR_ERR_INVALID_ARG, "problem 'kind' = %d is not TSR_OPT_LAMB or TSR_OPT_LARS", static_cast<int>(p.kind));
  if (p.param_type != TSR_FLOAT32 && p.param_type != TSR_BFLOAT16)
    return fail(TSR_ERR_INVALID_ARG, "problem 'param_type' = %d must be TSR_FLOAT32 or TSR_BFLOAT16",
                static_cast<int>(p.param_type));
  if (p.n == 0 || p.n > (size_t{1} << 52)) return fail(TSR_ERR_INVALID_ARG, "problem 'n' = %zu must be in [1, 2^52]", p.n);
  if (p.ngroups == 0 || p.ngroups > p.n)
    return fail(TSR_ERR_INVALID_ARG, "problem 'ngroups' = %zu must be in [1, n = %zu]", p.ngroups, p.n);
  if (p.nranks < 1) return fail(TSR_ERR_INVALID_ARG, "problem 'nranks' = %d must be >= 1", p.nranks);
  if (p.ranks_per_node < 0)
    return fail(TSR_ERR_INVALID_ARG, "problem 'ranks_per_node' = %d must be >= 0 (0: one node)", p.ranks_per_node);
  if (!(p.bucket_bytes == 0 || (p.bucket_bytes >= 4096 && p.bucket_bytes <= 1073741824.0)))
    return fail(TSR_ERR_INVALID_ARG, "problem 'bucket_bytes' = %g must be 0 (default) or in [4096, 2^30]", p.bucket_bytes);
  if (!(p.memory_per_rank >= 0) || !(p.machine.alpha >= 0) || !(p.machine.beta >= 0) || !(p.machine.gamma >= 0))
    return fail(TSR_ERR_INVALID_ARG, "problem 'memory_per_rank' and the machine parameters must be >= 0");
  TSR_TRY(check_objective(static_cast<int>(p.objective), p.context, "problem"));
  if (p.profile != nullptr && energy::profile_of(p.profile) == nullptr)
    return fail(TSR_ERR_INVALID_ARG, "problem 'profile' is not a live tsr_energy_profile");
  out->p = p;
  out->objective = resolve_objective(static_cast<int>(p.objective), p.context);
  tsr_gemm_machine m = p.machine;
  m.gamma = 0;
  out->mc = gemm::make_machine(m);
  if (p.machine.gamma > 0) out->mem_beta = p.machine.gamma;
  out->em = gemm::make_energy_model(p.profile, p.ranks_per_node);
  return TSR_SUCCESS;
}

void evaluate(const Checked& ck, tsr_opt_dist dist, tsr_opt_candidate* c) {
  const tsr_opt_problem& pb = ck.p;
  const int p = pb.nranks;
  const size_t n = pb.n, L = pb.ngroups;
  const bool bf16 = pb.param_type == TSR_BFLOAT16, lamb = pb.kind == TSR_OPT_LAMB;
  const uint64_t e = bf16 ? 2 : 4;
  // Kernel bytes per parameter (docs/OPTIMIZERS.md section 6): pass A, pass B.
  const double pass_a = lamb ? (bf16 ? 14 : 16) : (bf16 ? 6 : 8);
  const double pass_b = lamb ? 28 : 20;
  const double state_per = lamb ? 8 : 4;  // m, v or the momentum, float32
  const int rpn = pb.ranks_per_node > 0 ? pb.ranks_per_node : p;
  std::memset(c, 0, sizeof *c);
  c->dist = dist;
  auto slice = [&](int q) { return n / static_cast<size_t>(p) + (static_cast<size_t>(q) < n % static_cast<size_t>(p) ? 1 : 0); };
  std::vector<uint64_t> blocks(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) blocks[static_cast<size_t>(q)] = e * slice(q);
  size_t E = 0, nb = 0;
  if (dist == TSR_OPT_DATA_PARALLEL) {
    const double bb = pb.bucket_bytes > 0 ? pb.bucket_bytes : 25.0 * 1024 * 1024;
    E = std::max(static_cast<size_t>(bb) / e / kChunk * kChunk, kChunk);
    nb = (n + E - 1) / E;
  }
  double worst_t = 0;
  for (int r = 0; r < p; ++r) {
    double recv = 0, msgs = 0, t = 0;
    const int node = r / rpn;
    auto take = [&](const WireModel& m) {
      double w = 0;
      for (const WireEdge& x : m.recv) {
        const double b = static_cast<double>(x.bytes);
        w += b;
        msgs += static_cast<double>(x.messages);
        (x.peer / rpn == node ? c->intra_node_bytes : c->inter_node_bytes) += b;
      }
      recv += w;
      return w;
    };
    const double lat = p > 1 ? ck.mc.alpha : 0.0;
    if (dist == TSR_OPT_DATA_PARALLEL) {
      double w = 0;
      for (size_t b = 0; b < nb; ++b) w += take(model_allreduce(r, p, std::min(E, n - b * E), e));
      const double comm = lat * 2.0 * (p - 1) * static_cast<double>(nb) + ck.mc.beta * w;
      t = std::max(comm, ck.mem_beta * pass_a * static_cast<double>(n)) + ck.mem_beta * pass_b * static_cast<double>(n);
      c->kernel_bytes += (pass_a + pass_b) * static_cast<double>(n);
      const double st = state_per * static_cast<double>(n) + (bf16 ? 4.0 * static_cast<double>(n) : 0.0);
      c->state_bytes = std::max(c->state_bytes, st);
    } else {
      const double cr = static_cast<double>(slice(r)), cmax = static_cast<double>(slice(0));
      const double wrs = take(model_reduce_scatterv(r, p, blocks));
      const double war = take(model_allreduce(r, p, 3 * L, 8));
      const double wag = take(model_allgatherv(r, p, blocks));
      t = lat * 4.0 * (p - 1) + ck.mc.beta * (wrs + war + wag) + ck.mem_beta * (pass_a + pass_b) * cmax;
      c->kernel_bytes += (pass_a + pass_b) * cr;
      const double st = (state_per + (bf16 ? 4.0 : 0.0)) * cr + static_cast<double>(e) * cr;
      c->state_bytes = std::max(c->state_bytes, st);
    }
    worst_t = std::max(worst_t, t);
    c->bytes = std::max(c->bytes, recv);
    c->messages = std::max(c->messages, msgs);
  }
  c->time = worst_t;
  auto joules = [&](const gemm::EnergyFigures& f) {
    return c->kernel_bytes * f.self + c->intra_node_bytes * f.intra + c->inter_node_bytes * f.inter +
           f.static_watts * p * c->time;
  };
  c->joules = joules(ck.em.typical);
  c->joules_low = joules(ck.em.low);
  c->joules_high = joules(ck.em.high);
  c->fits = pb.memory_per_rank <= 0 || c->state_bytes <= pb.memory_per_rank;
}

double value(const tsr_opt_candidate& c, int objective) {
  return objective == TSR_OBJECTIVE_ENERGY ? c.joules : objective == TSR_OBJECTIVE_EDP ? c.joules * c.time : c.time;
}

tsr_status plan(const tsr_opt_problem* problem, tsr_opt_plan* plan) {
  TSR_CHECK_NOT_NULL(plan);
  tsr_opt_plan* out = plan;
  Checked ck;
  TSR_TRY(check_problem(problem, &ck));
  std::memset(out, 0, sizeof *out);
  out->objective = static_cast<tsr_objective>(ck.objective);
  evaluate(ck, TSR_OPT_DATA_PARALLEL, &out->candidates[0]);
  evaluate(ck, TSR_OPT_SHARDED, &out->candidates[1]);
  const tsr_opt_candidate &dp = out->candidates[0], &sh = out->candidates[1];
  int pick = 0;
  if (!dp.fits && !sh.fits) {
    out->dist = TSR_OPT_SHARDED;
    out->candidates[1].chosen = 1;
    out->missing_bytes = sh.state_bytes - ck.p.memory_per_rank;
    return fail(TSR_ERR_NO_MEMORY,
                "neither step fits in %.0f bytes of optimizer state per rank: sharded needs %.0f, data parallel %.0f",
                ck.p.memory_per_rank, sh.state_bytes, dp.state_bytes);
  }
  if (!dp.fits) {
    pick = 1;
  } else if (sh.fits) {
    const double a = value(dp, ck.objective), b = value(sh, ck.objective);
    pick = b != a ? (b < a ? 1 : 0) : sh.time != dp.time ? (sh.time < dp.time ? 1 : 0) : sh.state_bytes < dp.state_bytes ? 1 : 0;
  }
  out->candidates[pick].chosen = 1;
  out->dist = pick ? TSR_OPT_SHARDED : TSR_OPT_DATA_PARALLEL;
  return TSR_SUCCESS;
}

}  // namespace
}  // namespace opt_plan
}  // namespace tsr

extern "C" tsr_status tsr_optimizer_plan(const tsr_opt_problem* problem, tsr_opt_plan* plan) {
  return tsr::finish(nullptr, "tsr_optimizer_plan", tsr::opt_plan::plan(problem, plan));
}

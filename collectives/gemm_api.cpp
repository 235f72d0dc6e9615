// Public GEMM entry points: argument checks agreed over the context before
// anything moves, then the engines (gemm_exec.cpp); the planner's public
// face and the machine measurement.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <cstddef>

#include "core.hpp"
#include "device.hpp"
#include "device_transport.hpp"
#include "energy/profile.hpp"
#include "gemm_internal.hpp"
#include "transport.hpp"

namespace tsr {
namespace gemm {
namespace {

int64_t bits(double v) {
  int64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  if (a == nullptr || b == nullptr || an == 0 || bn == 0) return false;
  const uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bn && y < x + an;
}
size_t extent(const Dist& d) {
  if (!d.member || d.rows == 0 || d.cols == 0) return 0;
  return static_cast<size_t>(d.ld * (d.cols - 1) + d.rows) * tsr_dtype_size(d.type);
}

bool same_layout(const Layout& x, const Layout& y) {
  auto eq = [](const Split& a, const Split& b) {
    return a.levels == b.levels && a.block == b.block && (a.levels < 1 || a.dim[0] == b.dim[0]) &&
           (a.levels < 2 || a.dim[1] == b.dim[1]);
  };
  return eq(x.rows, y.rows) && eq(x.cols, y.cols);
}

const char* dim_name(int d) { return d == 0 ? "I" : d == 1 ? "J" : d == 2 ? "K" : "NONE"; }

}  // namespace

tsr_status prepare(const tsr_gemm_options* opt, tsr_trans ta, tsr_trans tb, double alpha, tsr_matrix A,
                   const void* a, tsr_matrix B, const void* b, double beta, tsr_matrix C, void* c, Call* call,
                   const tsr_gemm_plan* plan) {
  // The context to agree on: from any live descriptor.
  tsr_matrix any = nullptr;
  for (tsr_matrix x : {C, A, B})
    if (!any && x != nullptr && x->magic == tsr_matrix_s::kMagic) any = x;
  if (any == nullptr) {
    TSR_TRY(check_matrix(C, "C"));
    TSR_TRY(check_matrix(A, "A"));
    return check_matrix(B, "B");
  }
  tsr_context ctx = any->dist.ctx;
  tsr_gemm_options o = TSR_GEMM_OPTIONS_INIT;
  Roles roles;
  tsr_gemm_algo algo = TSR_GEMM_AUTO;
  int64_t m = 0, n = 0, k = 0;
  int space = 0;  // 0 host, 1 CUDA device (agreed)
  auto local = [&]() -> tsr_status {
    if (opt != nullptr) {
      if (opt->magic != TSR_GEMM_MAGIC || opt->size < sizeof(tsr_gemm_options))
        return fail(TSR_ERR_INVALID_ARG, "argument 'options' is not initialised with TSR_GEMM_OPTIONS_INIT");
      o = *opt;
    }
    if (o.algo < TSR_GEMM_AUTO || o.algo > TSR_GEMM_3D)
      return fail(TSR_ERR_INVALID_ARG, "argument 'algo' = %d is not a tsr_gemm_algo", static_cast<int>(o.algo));
    if (o.panel < 0)
      return fail(TSR_ERR_INVALID_ARG, "option 'panel' = %lld must be >= 0", static_cast<long long>(o.panel));
    if (ta != TSR_NOTRANS && ta != TSR_TRANS)
      return fail(TSR_ERR_INVALID_ARG, "argument 'transa' = %d is not TSR_NOTRANS or TSR_TRANS", static_cast<int>(ta));
    if (tb != TSR_NOTRANS && tb != TSR_TRANS)
      return fail(TSR_ERR_INVALID_ARG, "argument 'transb' = %d is not TSR_NOTRANS or TSR_TRANS", static_cast<int>(tb));
    TSR_TRY(check_matrix(A, "A"));
    TSR_TRY(check_matrix(B, "B"));
    TSR_TRY(check_matrix(C, "C"));
    if (A->dist.ctx != ctx || B->dist.ctx != ctx || C->dist.ctx != ctx)
      return fail(TSR_ERR_INVALID_ARG, "arguments 'A', 'B' and 'C' belong to different contexts");
    if (C->grid == nullptr || A->grid == nullptr || B->grid == nullptr)
      return fail(TSR_ERR_UNSUPPORTED, "a ScaLAPACK descriptor cannot be multiplied directly: redistribute it onto a "
                  "tessera grid first (tsr_matrix_redistribute), or call tsr_pdgemm");
    if (A->grid != C->grid) return fail(TSR_ERR_INVALID_ARG, "argument 'A' is a matrix of another grid than 'C'");
    if (B->grid != C->grid) return fail(TSR_ERR_INVALID_ARG, "argument 'B' is a matrix of another grid than 'C'");
    if (check_grid(C->grid, "C's grid") != TSR_SUCCESS)
      return fail(TSR_ERR_STATE, "the grid of 'C' was destroyed before its matrices");
    const Dist &da = A->dist, &db = B->dist, &dc = C->dist;
    // One type, or bfloat16 inputs with float32 C (device buffers only).
    const bool mixed = da.type == TSR_BFLOAT16 && db.type == TSR_BFLOAT16 && dc.type == TSR_FLOAT32;
    if (!mixed && (da.type != dc.type || db.type != dc.type))
      return fail(TSR_ERR_INVALID_ARG, "'A', 'B' and 'C' must have one type, or A and B TSR_BFLOAT16 with C "
                  "TSR_FLOAT32 (got %s, %s, %s)", dtype_name(da.type), dtype_name(db.type), dtype_name(dc.type));
    m = dc.m;
    n = dc.n;
    const int64_t am = ta ? da.n : da.m, ak = ta ? da.m : da.n;
    const int64_t bk = tb ? db.n : db.m, bn = tb ? db.m : db.n;
    if (am != m || bn != n || ak != bk)
      return fail(TSR_ERR_SHAPE, "op(A) is %lld x %lld and op(B) %lld x %lld, so C must be %lld x %lld with "
                  "equal inner sizes; C is %lld x %lld",
                  static_cast<long long>(am), static_cast<long long>(ak), static_cast<long long>(bk),
                  static_cast<long long>(bn), static_cast<long long>(am), static_cast<long long>(bn),
                  static_cast<long long>(m), static_cast<long long>(n));
    k = ak;
    for (tsr_matrix x : {A, B, C})
      if (x->dist.lay.cyclic())
        return fail(TSR_ERR_UNSUPPORTED, "%s has a block-cyclic layout: the algorithms take balanced blocks; "
                    "redistribute first (tsr_matrix_redistribute)", x == A ? "A" : x == B ? "B" : "C");
    if (dc.member) {
      if (da.rows * da.cols > 0 && a == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'a' is NULL");
      if (db.rows * db.cols > 0 && b == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'b' is NULL");
      if (dc.rows * dc.cols > 0 && c == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'c' is NULL");
      if (overlap(c, extent(dc), a, extent(da))) return fail(TSR_ERR_INVALID_ARG, "argument 'c' overlaps 'a' (C aliases A)");
      if (overlap(c, extent(dc), b, extent(db))) return fail(TSR_ERR_INVALID_ARG, "argument 'c' overlaps 'b' (C aliases B)");
      // Device operands (issue 17): a, b and c all in one memory space;
      // device memory needs a context bound to its device.
      const char* host_arg = nullptr;
      const char* dev_arg = nullptr;
      for (const std::pair<const void*, const char*>& x :
           {std::make_pair(a, "a"), std::make_pair(static_cast<const void*>(b), "b"),
            std::make_pair(static_cast<const void*>(c), "c")}) {
        if (x.first == nullptr) continue;
        device::Space sp = device::Space::host;
        TSR_TRY(device::check_buffer(ctx, x.first, x.second, &sp));
        if (sp == device::Space::device) {
          if (!dev_arg) dev_arg = x.second;
        } else if (!host_arg) {
          host_arg = x.second;
        }
      }
      if (host_arg && dev_arg)
        return fail(TSR_ERR_INVALID_ARG, "argument '%s' is host memory but '%s' is CUDA device memory: pass a, b and "
                    "c in one memory space", host_arg, dev_arg);
      // A rank with no local blocks follows its context's binding.
      space = dev_arg ? 1 : host_arg ? 0 : (ctx->cuda_device >= 0 ? 1 : 0);
    } else {
      space = ctx->cuda_device >= 0 ? 1 : 0;
    }
    if (space == 1) {
      if (dc.type != TSR_FLOAT32)
        return fail(TSR_ERR_UNSUPPORTED, "C is %s: the device GEMM writes TSR_FLOAT32 C (A and B TSR_FLOAT32 or "
                    "TSR_BFLOAT16)", dtype_name(dc.type));
      // Every axis the call may use must move device buffers.
      for (int x = 0; x < 3; ++x) {
        static const tsr_grid_axis kAx[3] = {TSR_AXIS_COL, TSR_AXIS_ROW, TSR_AXIS_DEPTH};
        const char* why = nullptr;
        if (dc.dims[static_cast<size_t>(x)] > 1 && !device::can_move_device(*C->grid->comms[kAx[x]], &why))
          return fail(TSR_ERR_UNSUPPORTED, "tsr_gemm on CUDA device buffers: grid dimension %d cannot move device "
                      "memory: %s", x, why ? why : "no device transport");
      }
    } else if (da.type == TSR_BFLOAT16) {
      return fail(TSR_ERR_UNSUPPORTED, "A and B are TSR_BFLOAT16: bfloat16 products run on CUDA device buffers only "
                  "(a context bound with tsr_context_set_device); convert to TSR_FLOAT32 on the host");
    }
    Shape s;
    s.m = m;
    s.n = n;
    s.k = k;
    s.ta = ta == TSR_TRANS;
    s.tb = tb == TSR_TRANS;
    s.w = static_cast<int64_t>(tsr_dtype_size(da.type));  // the inputs' (panels, gathers)
    if (plan != nullptr) {
      if (plan->m != m || plan->n != n || plan->k != k || plan->transa != ta || plan->transb != tb ||
          plan->elem_size != tsr_dtype_size(da.type))
        return fail(TSR_ERR_SHAPE, "the plan is for %lld x %lld x %lld (elements of %zu bytes, op %c%c), not for "
                    "these operands (%lld x %lld x %lld, %zu bytes, op %c%c)",
                    static_cast<long long>(plan->m), static_cast<long long>(plan->n), static_cast<long long>(plan->k),
                    plan->elem_size, plan->transa ? 'T' : 'N', plan->transb ? 'T' : 'N', static_cast<long long>(m),
                    static_cast<long long>(n), static_cast<long long>(k), tsr_dtype_size(da.type), ta ? 'T' : 'N',
                    tb ? 'T' : 'N');
      for (int x = 0; x < 3; ++x)
        if (plan->dims[x] != dc.dims[static_cast<size_t>(x)])
          return fail(TSR_ERR_SHAPE, "the plan's grid is %dx%dx%d but the operands' grid is %dx%dx%d", plan->dims[0],
                      plan->dims[1], plan->dims[2], dc.dims[0], dc.dims[1], dc.dims[2]);
      const char* names[3] = {"A", "B", "C"};
      const Dist* ds[3] = {&da, &db, &dc};
      for (int x = 0; x < 3; ++x)
        if (!same_layout(normalise(plan->layouts[x], dc.dims), ds[x]->lay))
          return fail(TSR_ERR_SHAPE, "%s's layout differs from the plan's {row %s, col %s, sub %s}", names[x],
                      dim_name(plan->layouts[x].row_dim), dim_name(plan->layouts[x].col_dim),
                      dim_name(plan->layouts[x].sub_dim));
    }
    std::string why;
    if (o.algo == TSR_GEMM_AUTO) {
      std::string why2;
      if (match(TSR_GEMM_3D, dc.dims, s, da.lay, db.lay, dc.lay, &roles, &why)) {
        algo = TSR_GEMM_3D;
      } else if (match(TSR_GEMM_2P5D, dc.dims, s, da.lay, db.lay, dc.lay, &roles, &why2)) {
        algo = roles.k >= 0 ? TSR_GEMM_2P5D : TSR_GEMM_2D;
      } else {
        return fail(TSR_ERR_SHAPE, "%s; %s", why.c_str(), why2.c_str());
      }
    } else {
      algo = o.algo;
      if (!match(algo, dc.dims, s, da.lay, db.lay, dc.lay, &roles, &why)) return fail(TSR_ERR_SHAPE, "%s", why.c_str());
    }
    call->shape = s;
    call->grid = C->grid;
    call->algo = algo;
    call->roles = roles;
    call->a = &A->dist;
    call->b = &B->dist;
    call->c = &C->dist;
    call->abuf = a;
    call->bbuf = b;
    call->cbuf = c;
    call->alpha = alpha;
    call->beta = beta;
    call->panel = o.panel;
    call->overlap = o.overlap != 0;
    call->device = space == 1;
    // Message sizes and the workspace, before anything moves: a rank whose
    // gathered blocks exceed MPI's int counts, or that is short of memory,
    // fails the call everywhere. Device calls: the workspace on the device.
    TSR_TRY(count_limits(*call));
    if (call->device) {
      TSR_TRY(reserve(ctx, 0));
      return device_prepare(ctx, call);
    }
    return reserve(ctx, work_bytes(*call));
  };
  tsr_status st = local();
  st = agree(*ctx->world, st,
               std::vector<Same>{{"algo", o.algo}, {"transa", ta}, {"transb", tb}, {"m (the rows of C)", m, true},
                                 {"n (the columns of C)", n, true}, {"k (the inner size)", k, true},
                                 {"alpha", bits(alpha), true}, {"beta", bits(beta), true}, {"options->panel", o.panel},
                                 {"options->overlap", o.overlap ? 1 : 0},
                                 {"the memory space of a, b and c (0 host, 1 CUDA device)", space}});
  if (st != TSR_SUCCESS) (void)device_release(ctx, call);
  return st;
}

namespace {

tsr_context ctx_of(tsr_matrix x, tsr_matrix y, tsr_matrix z) {
  for (tsr_matrix m : {x, y, z})
    if (m != nullptr && m->magic == tsr_matrix_s::kMagic) return m->dist.ctx;
  return nullptr;
}

tsr_status run(const tsr_gemm_options* opt, tsr_trans ta, tsr_trans tb, double alpha, tsr_matrix A, const void* a,
               tsr_matrix B, const void* b, double beta, tsr_matrix C, void* c, const tsr_gemm_plan* plan) {
  Call call;
  TSR_TRY(prepare(opt, ta, tb, alpha, A, a, B, b, beta, C, c, &call, plan));
  if (!C->dist.member) return TSR_SUCCESS;  // idle rank
  Arena arena(C->dist.ctx);
  const tsr_status st = execute(call, arena);
  const tsr_status rel = device_release(C->dist.ctx, &call);
  return st != TSR_SUCCESS ? st : rel;
}

Machine machine_of(const tsr_gemm_machine& m) {
  Machine mc;
  if (m.alpha > 0) mc.alpha = m.alpha;
  if (m.beta > 0) mc.beta = m.beta;
  if (m.gamma > 0) mc.gamma = m.gamma;
  return mc;
}

// A checked problem, in the planner's terms.
struct Problem {
  Shape s;
  Machine mc;
  int objective = TSR_OBJECTIVE_TIME;
  EnergyModel em;
};

}  // namespace

EnergyModel make_energy_model(tsr_energy_profile profile, int ranks_per_node) {
  const energy::Profile& pr = profile ? *energy::profile_of(profile) : energy::default_profile();
  EnergyModel em;
  em.ranks_per_node = ranks_per_node;
  const double j = 1e-12 * pr.pue;  // pJ -> J, at the wall
  auto figures = [&](int which) {   // 0 typical, 1 low, 2 high
    auto pick = [&](const energy::Coeff& c) { return which == 0 ? c.value : which == 1 ? c.low : c.high; };
    EnergyFigures f;
    f.self = j * pick(pr.level[TSR_LEVEL_SELF]);
    f.intra = j * pick(pr.level[TSR_LEVEL_INTRA_NODE]);
    f.inter = j * pick(pr.level[TSR_LEVEL_INTER_NODE]);
    f.flop = pr.has_flop ? j * pick(pr.flop) : 0.0;
    f.static_watts = pr.pue * pick(pr.static_power);
    return f;
  };
  em.typical = figures(0);
  em.low = figures(1);
  em.high = figures(2);
  return em;
}

Machine make_machine(const tsr_gemm_machine& m) { return machine_of(m); }

namespace {

// The energy model from a profile (NULL: the built-in default), PUE folded in.
EnergyModel energy_model(const tsr_gemm_problem* p) { return make_energy_model(p->profile, p->ranks_per_node); }

tsr_status check_problem(const tsr_gemm_problem* p, Problem* out) {
  if (p == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'problem' is NULL");
  // Problems initialised by a 0.1 header end before 'objective', by a 0.2
  // header before 'context'.
  const size_t v1 = offsetof(tsr_gemm_problem, objective), v2 = offsetof(tsr_gemm_problem, context);
  if (p->magic != TSR_GEMM_MAGIC || (p->size != v1 && p->size != v2 && p->size < sizeof(tsr_gemm_problem)))
    return fail(TSR_ERR_INVALID_ARG, "argument 'problem' is not initialised with TSR_GEMM_PROBLEM_INIT");
  if (p->m < 0 || p->n < 0 || p->k < 0)
    return fail(TSR_ERR_INVALID_ARG, "problem sizes m = %lld, n = %lld, k = %lld must be >= 0",
                static_cast<long long>(p->m), static_cast<long long>(p->n), static_cast<long long>(p->k));
  if (p->elem_size == 0 || p->elem_size > kMaxElemSize)
    return fail(TSR_ERR_INVALID_ARG, "problem 'elem_size' = %zu; expected 1 .. %zu bytes", p->elem_size, kMaxElemSize);
  if (p->nranks < 1) return fail(TSR_ERR_INVALID_ARG, "problem 'nranks' = %d must be >= 1", p->nranks);
  if (p->algo < TSR_GEMM_AUTO || p->algo > TSR_GEMM_3D)
    return fail(TSR_ERR_INVALID_ARG, "problem 'algo' = %d is not a tsr_gemm_algo", static_cast<int>(p->algo));
  if (p->transa != TSR_NOTRANS && p->transa != TSR_TRANS)
    return fail(TSR_ERR_INVALID_ARG, "problem 'transa' = %d is not a tsr_trans", static_cast<int>(p->transa));
  if (p->transb != TSR_NOTRANS && p->transb != TSR_TRANS)
    return fail(TSR_ERR_INVALID_ARG, "problem 'transb' = %d is not a tsr_trans", static_cast<int>(p->transb));
  if (!(p->memory_per_rank >= 0) || !(p->machine.alpha >= 0) || !(p->machine.beta >= 0) || !(p->machine.gamma >= 0))
    return fail(TSR_ERR_INVALID_ARG, "problem 'memory_per_rank' and the machine parameters must be >= 0");
  // The caller's fields (only its struct's size of them), the newer fields'
  // defaults after: an 0.1 problem plans by time on one node, an 0.2 one
  // has no context.
  tsr_gemm_problem q;
  std::memset(&q, 0, sizeof q);
  std::memcpy(&q, p, std::min(p->size, sizeof q));
  if (p->size == v1) {
    q.objective = TSR_OBJECTIVE_TIME;
    q.ranks_per_node = 0;
    q.profile = nullptr;
  }
  if (p->size < sizeof(tsr_gemm_problem)) q.context = nullptr;
  TSR_TRY(check_objective(static_cast<int>(q.objective), q.context, "problem"));
  q.objective = static_cast<tsr_objective>(resolve_objective(static_cast<int>(q.objective), q.context));
  if (q.ranks_per_node < 0)
    return fail(TSR_ERR_INVALID_ARG, "problem 'ranks_per_node' = %d must be >= 0 (0: one node)", q.ranks_per_node);
  if (q.profile != nullptr && energy::profile_of(q.profile) == nullptr)
    return fail(TSR_ERR_INVALID_ARG, "problem 'profile' is not a live tsr_energy_profile");
  out->s.m = p->m;
  out->s.n = p->n;
  out->s.k = p->k;
  out->s.ta = p->transa == TSR_TRANS;
  out->s.tb = p->transb == TSR_TRANS;
  out->s.w = static_cast<int64_t>(p->elem_size);
  out->mc = machine_of(p->machine);
  out->objective = q.objective;
  out->em = energy_model(&q);
  if (candidates(out->s, p->nranks, p->allow_idle != 0, p->algo).empty())
    return fail(TSR_ERR_SHAPE, "no %s grid fits %d ranks%s (2.5D needs q*q*c ranks with 2 <= c <= q, or q*q for c = 1; "
                "3D at least two grid dimensions of extent > 1 or a 1D grid)",
                tsr_gemm_algo_name(p->algo), p->nranks, p->allow_idle ? "" : " without idle ranks (allow_idle = 0)");
  return TSR_SUCCESS;
}

bool same_candidate(const Candidate& x, const Candidate& y) {
  return x.algo == y.algo && x.kind == y.kind && x.dims == y.dims && x.roles.m == y.roles.m && x.roles.n == y.roles.n &&
         x.roles.k == y.roles.k && x.panel == y.panel;
}

tsr_status plan_create(const tsr_gemm_problem* p, tsr_gemm_plan* plan) {
  TSR_CHECK_NOT_NULL(plan);
  Problem pb;
  TSR_TRY(check_problem(p, &pb));
  const Shape& s = pb.s;
  const Machine& mc = pb.mc;
  Candidate best;
  const bool fits =
      choose(s, p->nranks, p->allow_idle != 0, p->algo, p->memory_per_rank, mc, pb.objective, &pb.em, &best, nullptr);
  std::memset(plan, 0, sizeof *plan);
  const tsr_gemm_options defaults = TSR_GEMM_OPTIONS_INIT;
  plan->options = defaults;
  plan->options.algo = best.algo;
  plan->options.panel = best.panel;
  plan->grid_kind = best.kind;
  for (int x = 0; x < 3; ++x) plan->dims[x] = best.dims[static_cast<size_t>(x)];
  plan->nranks = best.dims[0] * best.dims[1] * best.dims[2];
  plan->idle_ranks = p->nranks - plan->nranks;
  plan->roles[0] = best.roles.m;
  plan->roles[1] = best.roles.n;
  plan->roles[2] = best.roles.k;
  canonical(best.algo, s.ta, s.tb, best.roles, plan->layouts);
  plan->m = p->m;
  plan->n = p->n;
  plan->k = p->k;
  plan->elem_size = p->elem_size;
  plan->transa = p->transa;
  plan->transb = p->transb;
  plan->flops = best.flops;
  plan->bytes = best.bytes;
  plan->messages = best.msgs;
  plan->time = best.time;
  plan->lower_bound_bytes = lower_bound_words(p->m, p->n, p->k, p->nranks) * static_cast<double>(p->elem_size);
  plan->memory_bytes = best.memory;
  plan->missing_bytes = fits ? 0.0 : best.memory - p->memory_per_rank;
  plan->machine.alpha = mc.alpha;
  plan->machine.beta = mc.beta;
  plan->machine.gamma = mc.gamma;
  plan->objective = static_cast<tsr_objective>(pb.objective);
  plan->joules = best.joules;
  plan->joules_low = best.joules_low;
  plan->joules_high = best.joules_high;
  plan->intra_node_bytes = best.intra_bytes;
  plan->inter_node_bytes = best.inter_bytes;
  if (!fits)
    return fail(TSR_ERR_NO_MEMORY, "no algorithm fits in %.0f bytes per rank: the plan needing least memory (%s on "
                "%dx%dx%d) needs %.0f bytes per rank, %.0f bytes (%.1f%%) more",
                p->memory_per_rank, tsr_gemm_algo_name(best.algo), best.dims[0], best.dims[1], best.dims[2],
                best.memory, plan->missing_bytes, 100.0 * plan->missing_bytes / std::max(1.0, p->memory_per_rank));
  return TSR_SUCCESS;
}

tsr_status plan_candidates(const tsr_gemm_problem* p, tsr_gemm_candidate* out, size_t cap, size_t* count) {
  TSR_CHECK_NOT_NULL(count);
  if (out == nullptr && cap > 0) return fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL with cap = %zu", cap);
  Problem pb;
  TSR_TRY(check_problem(p, &pb));
  Candidate best;
  std::vector<Candidate> all;
  choose(pb.s, p->nranks, p->allow_idle != 0, p->algo, p->memory_per_rank, pb.mc, pb.objective, &pb.em, &best, &all);
  *count = all.size();
  for (size_t i = 0; i < all.size() && i < cap; ++i) {
    const Candidate& c = all[i];
    tsr_gemm_candidate& o = out[i];
    std::memset(&o, 0, sizeof o);
    o.algo = c.algo;
    o.grid_kind = c.kind;
    for (int x = 0; x < 3; ++x) o.dims[x] = c.dims[static_cast<size_t>(x)];
    o.roles[0] = c.roles.m;
    o.roles[1] = c.roles.n;
    o.roles[2] = c.roles.k;
    o.panel = static_cast<long long>(c.panel);
    o.time = c.time;
    o.joules = c.joules;
    o.joules_low = c.joules_low;
    o.joules_high = c.joules_high;
    o.bytes = c.bytes;
    o.intra_node_bytes = c.intra_bytes;
    o.inter_node_bytes = c.inter_bytes;
    o.memory_bytes = c.memory;
    o.fits = p->memory_per_rank <= 0 || c.memory <= p->memory_per_rank;
    o.chosen = same_candidate(c, best) ? 1 : 0;
  }
  return TSR_SUCCESS;
}

std::string plan_text(const tsr_gemm_plan& p) {
  char buf[1536];
  const char* kinds[] = {"?", "1D", "2D", "2.5D", "3D", "3D-any"};
  const double ratio = p.lower_bound_bytes > 0 ? p.bytes / p.lower_bound_bytes : 0.0;
  std::snprintf(buf, sizeof buf,
                "tessera GEMM plan: %lld x %lld x %lld, %zu-byte elements, op %c%c\n"
                "  algorithm %s on a %s grid %dx%dx%d (%d ranks, %d idle); m by %s, n by %s, %s by %s; panel %lld\n"
                "  per rank (busiest): %.4g flops, %.4g bytes received, %.4g messages, %.4g bytes of memory\n"
                "  lower bound %.4g bytes received: plan / bound = %.3f\n"
                "  modelled time %.4g s (alpha %.3g s, beta %.3g s/B, gamma %.3g s/flop)%s\n"
                "  modelled energy %.4g J [%.3g, %.3g] (all ranks; %.4g B within nodes, %.4g B across); chosen by %s\n",
                static_cast<long long>(p.m), static_cast<long long>(p.n), static_cast<long long>(p.k), p.elem_size,
                p.transa ? 'T' : 'N', p.transb ? 'T' : 'N', tsr_gemm_algo_name(p.options.algo),
                kinds[p.grid_kind >= 1 && p.grid_kind <= 5 ? p.grid_kind : 0], p.dims[0], p.dims[1], p.dims[2],
                p.nranks, p.idle_ranks, dim_name(p.roles[0]), dim_name(p.roles[1]),
                engine_of(p.options.algo) == Engine::summa ? "depth" : "k", dim_name(p.roles[2]),
                static_cast<long long>(p.options.panel), p.flops, p.bytes, p.messages, p.memory_bytes,
                p.lower_bound_bytes, ratio, p.time, p.machine.alpha, p.machine.beta, p.machine.gamma,
                p.missing_bytes > 0 ? "; DOES NOT FIT the memory budget" : "", p.joules, p.joules_low, p.joules_high,
                p.intra_node_bytes, p.inter_node_bytes,
                p.objective == TSR_OBJECTIVE_ENERGY ? "energy" : p.objective == TSR_OBJECTIVE_EDP ? "energy x time" : "time");
  return buf;
}

tsr_status measure(tsr_context ctx, tsr_gemm_machine* out) {
  TSR_TRY(check_context(ctx));
  TSR_TRY(agree(*ctx->world, out ? TSR_SUCCESS : fail(TSR_ERR_INVALID_ARG, "argument 'machine' is NULL")));
  const Comm& world = *ctx->world;
  using clock = std::chrono::steady_clock;
  // gamma: a local GEMM on every rank at once.
  const int nn = 512;
  std::vector<double> a(static_cast<size_t>(nn) * nn, 1.0), b(a), c(a.size(), 0.0);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = clock::now();
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, nn, nn, nn, 1.0, a.data(), nn, b.data(), nn, 0.0, c.data(),
                nn);
    best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
  }
  double v[3] = {0, 0, best / (2.0 * nn * nn * nn)};
  // alpha and beta: ping-pong between ranks 0 and 1 (control traffic).
  if (ctx->size > 1 && ctx->rank <= 1) {
    const int peer = 1 - ctx->rank;
    std::vector<unsigned char> buf(4u << 20);
    // Seconds per message of `bytes`, half a round trip.
    auto pingpong = [&](size_t bytes, int reps, double* t) -> tsr_status {
      const auto t0 = clock::now();
      for (int r = 0; r < reps; ++r) {
        if (ctx->rank == 0) {
          TSR_TRY(send(world, buf.data(), bytes, TSR_BYTE, peer, 0x7e52, nullptr, Traffic::control));
          TSR_TRY(recv(world, buf.data(), bytes, TSR_BYTE, peer, 0x7e52, nullptr, Traffic::control));
        } else {
          TSR_TRY(recv(world, buf.data(), bytes, TSR_BYTE, peer, 0x7e52, nullptr, Traffic::control));
          TSR_TRY(send(world, buf.data(), bytes, TSR_BYTE, peer, 0x7e52, nullptr, Traffic::control));
        }
      }
      *t = std::chrono::duration<double>(clock::now() - t0).count() / (2.0 * reps);
      return TSR_SUCCESS;
    };
    double warm = 0, t_small = 0, t_big = 0;
    TSR_TRY(pingpong(8, 10, &warm));
    TSR_TRY(pingpong(8, 200, &t_small));
    TSR_TRY(pingpong(buf.size(), 5, &t_big));
    v[0] = t_small;
    v[1] = std::max(1e-13, (t_big - t_small) / static_cast<double>(buf.size()));
  }
  double all[3];
  TSR_TRY(allreduce(world, v, all, 3, TSR_FLOAT64, TSR_MAX, nullptr, Traffic::control));
  out->alpha = all[0] > 0 ? all[0] : Machine().alpha;
  out->beta = all[1] > 0 ? all[1] : Machine().beta;
  out->gamma = all[2];
  return TSR_SUCCESS;
}

}  // namespace
}  // namespace gemm
}  // namespace tsr

using tsr::finish;

extern "C" {

const char* tsr_gemm_algo_name(tsr_gemm_algo algo) {
  switch (algo) {
    case TSR_GEMM_AUTO: return "auto";
    case TSR_GEMM_1D: return "1D";
    case TSR_GEMM_2D: return "2D";
    case TSR_GEMM_2P5D: return "2.5D";
    case TSR_GEMM_3D: return "3D";
  }
  return "unknown";
}

tsr_status tsr_gemm(tsr_gemm_algo algo, tsr_trans transa, tsr_trans transb, double alpha, tsr_matrix A, const void* a,
                    tsr_matrix B, const void* b, double beta, tsr_matrix C, void* c) {
  tsr_gemm_options o = TSR_GEMM_OPTIONS_INIT;
  o.algo = algo;
  return finish(tsr::gemm::ctx_of(C, A, B), "tsr_gemm",
                tsr::gemm::run(&o, transa, transb, alpha, A, a, B, b, beta, C, c, nullptr));
}

tsr_status tsr_gemm_ex(const tsr_gemm_options* options, tsr_trans transa, tsr_trans transb, double alpha, tsr_matrix A,
                       const void* a, tsr_matrix B, const void* b, double beta, tsr_matrix C, void* c) {
  return finish(tsr::gemm::ctx_of(C, A, B), "tsr_gemm_ex",
                tsr::gemm::run(options, transa, transb, alpha, A, a, B, b, beta, C, c, nullptr));
}

tsr_status tsr_gemm_execute(const tsr_gemm_plan* plan, double alpha, tsr_matrix A, const void* a, tsr_matrix B,
                            const void* b, double beta, tsr_matrix C, void* c) {
  tsr_status st;
  if (plan == nullptr) {
    // Every rank must find the same problem: fail through the agreement.
    tsr_gemm_options bad = TSR_GEMM_OPTIONS_INIT;
    bad.magic = 0;
    st = tsr::gemm::run(&bad, TSR_NOTRANS, TSR_NOTRANS, alpha, A, a, B, b, beta, C, c, nullptr);
    if (st != TSR_SUCCESS) st = tsr::fail(st, "argument 'plan' is NULL");
  } else {
    st = tsr::gemm::run(&plan->options, plan->transa, plan->transb, alpha, A, a, B, b, beta, C, c, plan);
  }
  return finish(tsr::gemm::ctx_of(C, A, B), "tsr_gemm_execute", st);
}

tsr_status tsr_gemm_layouts(tsr_gemm_algo algo, tsr_trans transa, tsr_trans transb, const int roles[3],
                            tsr_layout layouts[3]) {
  tsr_status st = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(roles);
    TSR_CHECK_NOT_NULL(layouts);
    if (algo < TSR_GEMM_1D || algo > TSR_GEMM_3D)
      return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'algo' = %d is not TSR_GEMM_1D, _2D, _2P5D or _3D",
                       static_cast<int>(algo));
    if ((transa != TSR_NOTRANS && transa != TSR_TRANS) || (transb != TSR_NOTRANS && transb != TSR_TRANS))
      return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'transa'/'transb' must be TSR_NOTRANS or TSR_TRANS");
    for (int x = 0; x < 3; ++x) {
      if (roles[x] < -1 || roles[x] > 2)
        return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'roles[%d]' = %d is not a tsr_grid_dim", x, roles[x]);
      for (int y = 0; y < x; ++y)
        if (roles[x] >= 0 && roles[x] == roles[y])
          return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'roles[%d]' and 'roles[%d]' name the same grid dimension",
                           y, x);
    }
    tsr::gemm::Roles r;
    r.m = roles[0];
    r.n = roles[1];
    r.k = roles[2];
    tsr::gemm::canonical(algo, transa == TSR_TRANS, transb == TSR_TRANS, r, layouts);
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_gemm_layouts", st);
}

tsr_status tsr_gemm_plan_create(const tsr_gemm_problem* problem, tsr_gemm_plan* plan) {
  return finish(nullptr, "tsr_gemm_plan_create", tsr::gemm::plan_create(problem, plan));
}

tsr_status tsr_gemm_plan_candidates(const tsr_gemm_problem* problem, tsr_gemm_candidate* out, size_t cap,
                                    size_t* count) {
  return finish(nullptr, "tsr_gemm_plan_candidates", tsr::gemm::plan_candidates(problem, out, cap, count));
}

tsr_status tsr_gemm_plan_format(const tsr_gemm_plan* plan, char* buf, size_t len, size_t* needed) {
  tsr_status st = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(plan);
    if (buf == nullptr && len > 0) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'buf' is NULL with len = %zu", len);
    const std::string text = tsr::gemm::plan_text(*plan);
    if (needed) *needed = text.size();
    if (len > 0) {
      const size_t n = std::min(len - 1, text.size());
      std::memcpy(buf, text.data(), n);
      buf[n] = '\0';
    }
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_gemm_plan_format", st);
}

tsr_status tsr_gemm_report_format(tsr_report report, const char* region, const tsr_gemm_plan* plan, int calls,
                                  char* buf, size_t len, size_t* needed, double* bytes) {
  tsr_status st = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(report);
    TSR_CHECK_NOT_NULL(region);
    TSR_CHECK_NOT_NULL(plan);
    if (calls < 1) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'calls' = %d must be >= 1", calls);
    if (buf == nullptr && len > 0) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'buf' is NULL with len = %zu", len);
    int count = 0, idx = -1;
    if (tsr_report_region_count(report, &count) != TSR_SUCCESS) return tsr::fail(TSR_ERR_INVALID_ARG, "bad report");
    for (int r = 0; r < count && idx < 0; ++r) {
      const char* path = nullptr;
      if (tsr_report_region_path(report, r, &path) == TSR_SUCCESS && std::strcmp(path, region) == 0) idx = r;
    }
    if (idx < 0) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'region' = \"%s\" is not in the report", region);
    const int ranks = plan->nranks + plan->idle_ranks;
    double worst = 0, worst_msgs = 0;
    int who = 0;
    for (int r = 0; r < ranks; ++r) {
      tsr_counters c;
      if (tsr_report_rank_counters(report, idx, r, &c) != TSR_SUCCESS)
        return tsr::fail(TSR_ERR_INVALID_ARG, "the report does not hold rank %d's counters: call this on the report's "
                         "root (and for a plan of this context's size, %d ranks)", r, ranks);
      double b = 0, msgs = 0;
      for (int x = 0; x < TSR_PEER_CLASSES; ++x) {
        b += static_cast<double>(c.coll_wire_recv[x].bytes + c.p2p_recv[x].bytes);
        msgs += static_cast<double>(c.coll_wire_recv[x].messages + c.p2p_recv[x].messages);
      }
      if (b > worst || r == 0) {
        worst = b;
        worst_msgs = msgs;
        who = r;
      }
    }
    worst /= calls;
    worst_msgs /= calls;
    if (bytes) *bytes = worst;
    char text[512];
    std::snprintf(text, sizeof text,
                  "%s: busiest rank (%d) received %.6g bytes in %.6g messages per call; plan %.6g bytes; lower bound "
                  "%.6g bytes; measured / bound = %.3f\n",
                  region, who, worst, worst_msgs, plan->bytes, plan->lower_bound_bytes,
                  plan->lower_bound_bytes > 0 ? worst / plan->lower_bound_bytes : 0.0);
    const size_t n = std::strlen(text);
    if (needed) *needed = n;
    if (len > 0) {
      const size_t c = std::min(len - 1, n);
      std::memcpy(buf, text, c);
      buf[c] = '\0';
    }
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_gemm_report_format", st);
}

tsr_status tsr_gemm_lower_bound(int64_t m, int64_t n, int64_t k, size_t elem_size, int p, double* bytes) {
  tsr_status st = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(bytes);
    if (m < 0 || n < 0 || k < 0 || p < 1)
      return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'm', 'n', 'k' must be >= 0 and 'p' >= 1 (got %lld, %lld, %lld, "
                       "p = %d)", static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), p);
    if (elem_size == 0 || elem_size > tsr::gemm::kMaxElemSize)
      return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'elem_size' = %zu; expected 1 .. %zu bytes", elem_size,
                       tsr::gemm::kMaxElemSize);
    *bytes = tsr::gemm::lower_bound_words(m, n, k, p) * static_cast<double>(elem_size);
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_gemm_lower_bound", st);
}

tsr_status tsr_gemm_workspace_release(tsr_context ctx) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_context(ctx));
    ctx->gemm_pool.reset();
    return TSR_SUCCESS;
  }();
  return finish(ctx != nullptr && ctx->magic == tsr_context_s::kMagic ? ctx : nullptr, "tsr_gemm_workspace_release", st);
}

tsr_status tsr_gemm_machine_measure(tsr_context ctx, tsr_gemm_machine* machine) {
  tsr_context c = ctx != nullptr && ctx->magic == tsr_context_s::kMagic ? ctx : nullptr;
  return finish(c, "tsr_gemm_machine_measure", tsr::gemm::measure(ctx, machine));
}

}  // extern "C"

// tsr_context: creation from a borrowed communicator, node detection, queries.
#include "context.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <new>

#include "core.hpp"

namespace tsr {

tsr_status check_context(tsr_context ctx, const char* argname) {
  if (ctx == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", argname);
  if (ctx->magic != tsr_context_s::kMagic)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is not a live tessera context", argname);
  return TSR_SUCCESS;
}

tsr_status Comm::wrap(tsr_context_s* ctx, MPI_Comm comm, bool owned, std::unique_ptr<Comm>* out) {
  std::unique_ptr<Comm> c(new (std::nothrow) Comm());
  if (!c) return fail(TSR_ERR_NO_MEMORY, "allocating a communicator");
  c->ctx_ = ctx;
  c->comm_ = comm;
  c->owned_ = owned;
  c->backend_ = ctx->backend.get();
  c->host_mpi_ = ctx->backend.get();
  c->ledger_ = &ctx->ledger;
  c->max_chunk_ = ctx->max_chunk;
  TSR_MPI_TRY(MPI_Comm_rank(comm, &c->rank_));
  TSR_MPI_TRY(MPI_Comm_size(comm, &c->size_));
  const size_t n = static_cast<size_t>(c->size_);
  std::vector<int> mine(n);
  for (size_t i = 0; i < n; ++i) mine[i] = static_cast<int>(i);
  c->context_rank_.assign(n, MPI_UNDEFINED);
  MPI_Group g = MPI_GROUP_NULL, gctx = MPI_GROUP_NULL;
  TSR_MPI_TRY(MPI_Comm_group(comm, &g));
  int rc = MPI_Comm_group(ctx->comm, &gctx);
  if (rc == MPI_SUCCESS)
    rc = MPI_Group_translate_ranks(g, c->size_, mine.data(), gctx, c->context_rank_.data());
  MPI_Group_free(&g);
  if (gctx != MPI_GROUP_NULL) MPI_Group_free(&gctx);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Group_translate_ranks");
  const int me = c->context_rank_[static_cast<size_t>(c->rank_)];
  if (me == MPI_UNDEFINED) return fail(TSR_ERR_INTERNAL, "communicator is not part of the context");
  c->peer_class_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int cr = c->context_rank_[i];
    if (cr == MPI_UNDEFINED) return fail(TSR_ERR_INTERNAL, "communicator rank %zu is not in the context", i);
    c->peer_class_[i] = static_cast<unsigned char>(
        static_cast<int>(i) == c->rank_ ? TSR_PEER_SELF
        : ctx->node_of[static_cast<size_t>(cr)] == ctx->node_of[static_cast<size_t>(me)] ? TSR_PEER_NODE
                                                                                           : TSR_PEER_REMOTE);
  }
  c->owned_ = owned;
  *out = std::move(c);
  return TSR_SUCCESS;
}

void Comm::set_device(std::shared_ptr<DeviceComm> d, Backend* b) {
  if (d && b != nullptr) {
    device_ = std::move(d);
    backend_ = b;
    host_mpi_ = nullptr;
  } else {
    device_.reset();
    backend_ = ctx_->backend.get();
    host_mpi_ = ctx_->backend.get();
  }
}

Comm::~Comm() {
  if (owned_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

namespace {

// Node of every rank: dense ids in order of each node's lowest rank.
tsr_status detect_nodes(tsr_context_s* ctx, int ranks_per_node) {
  const size_t n = static_cast<size_t>(ctx->size);
  ctx->node_of.assign(n, 0);
  std::vector<int> leader(n);
  if (ranks_per_node > 0) {
    for (size_t r = 0; r < n; ++r) leader[r] = static_cast<int>(r) / ranks_per_node * ranks_per_node;
  } else {
    MPI_Comm node = MPI_COMM_NULL;
    TSR_MPI_TRY(MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node));
    int mine = ctx->rank, low = 0;
    int rc = MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Allreduce (node leaders)");
    TSR_MPI_TRY(MPI_Allgather(&low, 1, MPI_INT, leader.data(), 1, MPI_INT, ctx->comm));
  }
  std::vector<int> leaders(leader);
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  for (size_t r = 0; r < n; ++r)
    ctx->node_of[r] = static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), leader[r]) - leaders.begin());
  ctx->nnodes = static_cast<int>(leaders.size());
  return TSR_SUCCESS;
}

tsr_status create(MPI_Comm comm, const tsr_context_config* config, tsr_context* out) {
  if (out != nullptr) *out = nullptr;
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (!inited || finalized)
    return fail(TSR_ERR_STATE, "MPI is %s: call MPI_Init_thread first (tessera never initialises MPI)",
                finalized ? "already finalised" : "not initialised");
  if (comm == MPI_COMM_NULL) return fail(TSR_ERR_INVALID_ARG, "argument 'comm' is MPI_COMM_NULL");
  int inter = 0;
  TSR_MPI_TRY(MPI_Comm_test_inter(comm, &inter));
  if (inter) return fail(TSR_ERR_UNSUPPORTED, "argument 'comm' is an intercommunicator; pass an intracommunicator");

  // Local checks of the config; agreed on below, after the duplicate exists.
  tsr_status local = out == nullptr ? fail(TSR_ERR_INVALID_ARG, "argument 'ctx' is NULL") : TSR_SUCCESS;
  int rpn = 0;
  size_t chunk = 0;
  if (local == TSR_SUCCESS && config != nullptr) {
    if (config->magic != TSR_CONFIG_MAGIC || config->size < sizeof(size_t) + sizeof(unsigned))
      local = fail(TSR_ERR_INVALID_ARG,
                   "argument 'config' was not initialised with TSR_CONTEXT_CONFIG_INIT");
    else if (config->size >= offsetof(tsr_context_config, ranks_per_node) + sizeof(int))
      rpn = config->ranks_per_node;
    if (local == TSR_SUCCESS && config->size >= offsetof(tsr_context_config, max_chunk) + sizeof(size_t))
      chunk = config->max_chunk;
    if (local == TSR_SUCCESS && rpn < 0)
      local = fail(TSR_ERR_INVALID_ARG, "argument 'config->ranks_per_node' is %d; expected >= 0", rpn);
    if (local == TSR_SUCCESS && chunk > static_cast<size_t>(INT_MAX))
      local = fail(TSR_ERR_INVALID_ARG, "argument 'config->max_chunk' is %zu; expected 0 (default: INT_MAX) to "
                   "INT_MAX elements", chunk);
  }
  if (chunk == 0) chunk = static_cast<size_t>(INT_MAX);

  std::unique_ptr<tsr_context_s> ctx(new (std::nothrow) tsr_context_s());
  if (!ctx && local == TSR_SUCCESS) local = fail(TSR_ERR_NO_MEMORY, "allocating a context");
  MPI_Comm dup = MPI_COMM_NULL;
  TSR_MPI_TRY(MPI_Comm_dup(comm, &dup));
  int rc = MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&dup);
    return mpi_fail(rc, "MPI_Comm_set_errhandler");
  }
  // Settings that differ across ranks would give different node maps.
  tsr_status st = agree_raw(dup, nullptr, local,
                            std::vector<Same>{{"config->ranks_per_node", rpn},
                                              {"config->max_chunk", static_cast<int64_t>(chunk)}});
  if (st != TSR_SUCCESS) {
    MPI_Comm_free(&dup);
    return st;
  }
  ctx->comm = dup;
  ctx->max_chunk = chunk;
  MPI_Comm_rank(dup, &ctx->rank);
  MPI_Comm_size(dup, &ctx->size);
  st = detect_nodes(ctx.get(), rpn);
  if (st == TSR_SUCCESS) st = MpiBackend::create(&ctx->backend);
  if (st == TSR_SUCCESS) st = Comm::wrap(ctx.get(), dup, false, &ctx->world);
  st = agree_raw(dup, nullptr, st);
  if (st != TSR_SUCCESS) {
    ctx->world.reset();
    MPI_Comm_free(&ctx->comm);
    return st;
  }
  *out = ctx.release();
  return TSR_SUCCESS;
}

}  // namespace
}  // namespace tsr

using tsr::finish;

extern "C" {

tsr_status tsr_context_create(MPI_Comm comm, tsr_context* ctx) {
  return finish(nullptr, "tsr_context_create", tsr::create(comm, nullptr, ctx));
}

tsr_status tsr_context_create_ex(MPI_Comm comm, const tsr_context_config* config, tsr_context* ctx) {
  return finish(nullptr, "tsr_context_create_ex", tsr::create(comm, config, ctx));
}

tsr_status tsr_context_destroy(tsr_context* ctx) {
  if (ctx == nullptr)
    return finish(nullptr, "tsr_context_destroy", tsr::fail(TSR_ERR_INVALID_ARG, "argument 'ctx' is NULL"));
  if (*ctx == nullptr) return TSR_SUCCESS;
  tsr_status st = tsr::check_context(*ctx, "*ctx");
  if (st != TSR_SUCCESS) return finish(nullptr, "tsr_context_destroy", st);
  tsr_context c = *ctx;
  st = c->live_grids > 0 ? tsr::fail(TSR_ERR_STATE, "%d grid(s) of this context are still alive: destroy them first",
                                     c->live_grids)
       : c->live_rings > 0 ? tsr::fail(TSR_ERR_STATE, "%d ring(s) of this context are still alive: destroy them first",
                                       c->live_rings)
       : c->live_reports > 0
           ? tsr::fail(TSR_ERR_STATE, "%d report(s) of this context are still alive: destroy them first",
                       c->live_reports.load())
       : c->live_optimizers > 0
           ? tsr::fail(TSR_ERR_STATE, "%d optimizer(s) of this context are still alive: destroy them first",
                       c->live_optimizers.load())
           : TSR_SUCCESS;
  st = tsr::agree(*c->world, st);
  if (st != TSR_SUCCESS) return finish(c, "tsr_context_destroy", st);
  c->world.reset();
  MPI_Comm_free(&c->comm);
  c->magic = 0;
  delete c;
  *ctx = nullptr;
  return TSR_SUCCESS;
}

tsr_status tsr_context_rank(tsr_context ctx, int* rank) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS && rank == nullptr) st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'rank' is NULL");
  if (st == TSR_SUCCESS) *rank = ctx->rank;
  return finish(ctx, "tsr_context_rank", st);
}

tsr_status tsr_context_size(tsr_context ctx, int* size) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS && size == nullptr) st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'size' is NULL");
  if (st == TSR_SUCCESS) *size = ctx->size;
  return finish(ctx, "tsr_context_size", st);
}

tsr_status tsr_context_node(tsr_context ctx, int* node, int* nnodes) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS && node == nullptr) st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'node' is NULL");
  if (st == TSR_SUCCESS && nnodes == nullptr) st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'nnodes' is NULL");
  if (st == TSR_SUCCESS) {
    *node = ctx->node_of[static_cast<size_t>(ctx->rank)];
    *nnodes = ctx->nnodes;
  }
  return finish(ctx, "tsr_context_node", st);
}

tsr_status tsr_context_set_objective(tsr_context ctx, tsr_objective objective) {
  tsr_status st = tsr::check_context(ctx);
  if (st != TSR_SUCCESS) return finish(nullptr, "tsr_context_set_objective", st);
  const int o = static_cast<int>(objective);
  tsr_status local = TSR_SUCCESS;
  if (o != TSR_OBJECTIVE_TIME && o != TSR_OBJECTIVE_ENERGY && o != TSR_OBJECTIVE_EDP)
    local = tsr::fail(TSR_ERR_INVALID_ARG,
                      "argument 'objective' = %d is not TSR_OBJECTIVE_TIME, TSR_OBJECTIVE_ENERGY or TSR_OBJECTIVE_EDP", o);
  st = tsr::agree(*ctx->world, local, std::vector<tsr::Same>{{"objective", o}});
  if (st == TSR_SUCCESS) ctx->objective = o;
  return finish(ctx, "tsr_context_set_objective", st);
}

tsr_status tsr_context_get_objective(tsr_context ctx, tsr_objective* objective) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS && objective == nullptr) st = tsr::fail(TSR_ERR_INVALID_ARG, "argument 'objective' is NULL");
  if (st == TSR_SUCCESS) *objective = static_cast<tsr_objective>(ctx->objective);
  return finish(ctx, "tsr_context_get_objective", st);
}

}  // extern "C"

namespace tsr {

int resolve_objective(int objective, tsr_context ctx) {
  if (objective != TSR_OBJECTIVE_DEFAULT) return objective;
  return ctx != nullptr ? ctx->objective : TSR_OBJECTIVE_TIME;
}

tsr_status check_objective(int objective, tsr_context ctx, const char* what) {
  if (objective != TSR_OBJECTIVE_DEFAULT && objective != TSR_OBJECTIVE_TIME && objective != TSR_OBJECTIVE_ENERGY &&
      objective != TSR_OBJECTIVE_EDP)
    return fail(TSR_ERR_INVALID_ARG,
                "%s 'objective' = %d is not a tsr_objective (TSR_OBJECTIVE_DEFAULT, _TIME, _ENERGY or _EDP)", what,
                objective);
  if (ctx != nullptr && check_context(ctx) != TSR_SUCCESS)
    return fail(TSR_ERR_INVALID_ARG, "%s 'context' is not a live tsr_context (NULL: none)", what);
  return TSR_SUCCESS;
}

}  // namespace tsr

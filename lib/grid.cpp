// tsr_grid: 1D, 2D, 2.5D and 3D process grids over a context.
#include "grid.hpp"

#include <new>

#include "core.hpp"
#include "device_transport.hpp"

namespace tsr {

tsr_status check_grid(tsr_grid grid, const char* argname) {
  if (grid == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", argname);
  if (grid->magic != tsr_grid_s::kMagic)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is not a live tessera grid", argname);
  return TSR_SUCCESS;
}

namespace {

tsr_status local_checks(tsr_context ctx, tsr_grid_kind kind, const int* dims, tsr_grid* grid) {
  TSR_CHECK_NOT_NULL(grid);
  *grid = nullptr;
  TSR_CHECK_NOT_NULL(dims);
  if (!grid_kind_valid(kind))
    return fail(TSR_ERR_INVALID_ARG, "argument 'kind' = %d is not a tsr_grid_kind", static_cast<int>(kind));
  const Dims d{dims[0], dims[1], dims[2]};
  const std::string why = shape_problem(kind, d);
  if (!why.empty()) {
    const long long n = static_cast<long long>(d[0]) * d[1] * d[2];
    const int around = n >= 1 && n <= ctx->size ? static_cast<int>(n) : ctx->size;
    const std::vector<Dims> here = shapes_for(kind, around, Dims{0, 0, 0});
    std::string at = here.empty() ? "none" : std::to_string(here[0][0]) + "x" + std::to_string(here[0][1]) + "x" +
                                                 std::to_string(here[0][2]);
    return fail(TSR_ERR_SHAPE, "argument 'dims' = {%d,%d,%d} is not a %s shape: %s; valid %s shape for %d ranks: %s; "
                "nearest other counts: %s",
                d[0], d[1], d[2], grid_kind_name(kind), why.c_str(), grid_kind_name(kind), around, at.c_str(),
                nearest_shapes(kind, around, Dims{0, 0, 0}).c_str());
  }
  const long long n = static_cast<long long>(d[0]) * d[1] * d[2];
  if (n > ctx->size)
    return fail(TSR_ERR_SHAPE, "argument 'dims' = {%d,%d,%d} needs %lld ranks but the context has %d; "
                "the largest %s grid that fits: %s",
                d[0], d[1], d[2], n, ctx->size, grid_kind_name(kind), largest_fit(kind, ctx->size, Dims{0, 0, 0}).c_str());
  return TSR_SUCCESS;
}

tsr_status build(tsr_context ctx, tsr_grid_kind kind, const Dims& d, tsr_grid* out) {
  std::unique_ptr<tsr_grid_s> g(new (std::nothrow) tsr_grid_s());
  if (!g) return fail(TSR_ERR_NO_MEMORY, "allocating a grid");
  g->ctx = ctx;
  g->kind = kind;
  g->dims = d;
  g->size = d[0] * d[1] * d[2];
  const int run = d[1] > 1 ? d[1] : d[0] > 1 ? d[0] : d[2];
  g->context_rank_of = place(ctx->node_of, g->size, run);
  g->grid_rank_of.assign(static_cast<size_t>(ctx->size), -1);
  for (int r = 0; r < g->size; ++r) g->grid_rank_of[static_cast<size_t>(g->context_rank_of[static_cast<size_t>(r)])] = r;
  g->grid_rank = g->grid_rank_of[static_cast<size_t>(ctx->rank)];
  if (g->grid_rank >= 0) g->coords = g->coords_of(g->grid_rank);

  // Rows (runs of the fastest axis) that lie inside one node.
  const int rows = g->size / run;
  g->rows_total = rows;
  for (int row = 0; row < rows; ++row) {
    const int node = ctx->node_of[static_cast<size_t>(g->context_rank_of[static_cast<size_t>(row * run)])];
    bool inside = true;
    for (int x = 1; x < run; ++x)
      inside = inside && ctx->node_of[static_cast<size_t>(g->context_rank_of[static_cast<size_t>(row * run + x)])] == node;
    g->rows_within += inside ? 1 : 0;
  }

  // One split per axis (collective over the context; idle ranks pass MPI_UNDEFINED).
  const bool member = g->grid_rank >= 0;
  const int i = g->coords[0], j = g->coords[1], k = g->coords[2];
  const int color[5] = {k * d[0] + i, k * d[1] + j, i * d[1] + j, k, 0};
  const int key[5] = {j, i, k, i * d[1] + j, g->grid_rank};
  tsr_status st = TSR_SUCCESS;
  for (int a = 0; a < 5; ++a) {
    MPI_Comm sub = MPI_COMM_NULL;
    int rc = MPI_Comm_split(ctx->comm, member ? color[a] : MPI_UNDEFINED, member ? key[a] : 0, &sub);
    if (rc != MPI_SUCCESS) {
      st = mpi_fail(rc, "MPI_Comm_split");
      continue;  // keep splitting so that every rank makes the same calls
    }
    if (sub == MPI_COMM_NULL) continue;
    if (st == TSR_SUCCESS) {
      rc = MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
      if (rc != MPI_SUCCESS) st = mpi_fail(rc, "MPI_Comm_set_errhandler");
    }
    if (st == TSR_SUCCESS) st = Comm::wrap(ctx, sub, true, &g->comms[a]);
    if (st != TSR_SUCCESS && !g->comms[a]) MPI_Comm_free(&sub);
  }
  TSR_TRY(agree(*ctx->world, st));
  // Device transport (NCCL) on every axis when the context is bound to a
  // device: each attach is collective over its axis; every axis is attached
  // even after a failure, so that every rank makes the same calls.
  if (ctx->cuda_device >= 0) {
    for (int a = 0; a < 5; ++a) {
      if (!g->comms[a]) continue;
      const tsr_status at = device::attach(*g->comms[a]);
      if (st == TSR_SUCCESS) st = at;
    }
    TSR_TRY(agree(*ctx->world, st));
  }
  ctx->live_grids += 1;
  *out = g.release();
  return TSR_SUCCESS;
}

tsr_status create(tsr_context ctx, tsr_grid_kind kind, const int* dims, tsr_grid* grid) {
  TSR_TRY(check_context(ctx));
  TSR_TRY(agree(*ctx->world, local_checks(ctx, kind, dims, grid)));
  // Everyone passed the local checks: do all ranks ask for the same grid?
  int mine[8] = {static_cast<int>(kind), dims[0], dims[1], dims[2], -static_cast<int>(kind), -dims[0], -dims[1], -dims[2]};
  int all[8];
  TSR_TRY(allreduce(*ctx->world, mine, all, 8, TSR_INT32, TSR_MAX, nullptr, Traffic::control));
  for (int a = 0; a < 4; ++a)
    if (all[a] != -all[a + 4])
      return fail(TSR_ERR_INVALID_ARG, "arguments 'kind' and 'dims' differ across ranks (this rank: %s {%d,%d,%d}); "
                  "every rank must ask for the same grid", grid_kind_name(kind), dims[0], dims[1], dims[2]);
  return build(ctx, kind, Dims{dims[0], dims[1], dims[2]}, grid);
}

tsr_status destroy(tsr_grid* grid) {
  TSR_CHECK_NOT_NULL(grid);
  if (*grid == nullptr) return TSR_SUCCESS;
  TSR_TRY(check_grid(*grid, "*grid"));
  tsr_grid g = *grid;
  TSR_TRY(agree(*g->ctx->world, g->live_matrices > 0 ? fail(TSR_ERR_STATE, "%d matrix descriptor(s) on this grid are "
                                                            "still alive: destroy them first", g->live_matrices.load())
                                                     : TSR_SUCCESS));
  for (auto& c : g->comms) c.reset();
  g->ctx->live_grids -= 1;
  g->magic = 0;
  delete g;
  *grid = nullptr;
  return TSR_SUCCESS;
}

tsr_context ctx_of(tsr_grid grid) {
  return grid != nullptr && grid->magic == tsr_grid_s::kMagic ? grid->ctx : nullptr;
}

}  // namespace
}  // namespace tsr

using tsr::fail;
using tsr::finish;

#define TSR_GRID_QUERY(fname, body)                                  \
  tsr_status st = tsr::check_grid(grid);                             \
  if (st == TSR_SUCCESS) st = [&]() -> tsr_status { body }();        \
  return finish(tsr::ctx_of(grid), fname, st)

extern "C" {

tsr_status tsr_grid_dims_create(tsr_grid_kind kind, int nranks, int allow_idle, int dims[3], int* nused) {
  tsr_status st = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(dims);
    if (allow_idle && nused == nullptr)
      return fail(TSR_ERR_INVALID_ARG, "argument 'nused' is NULL but allow_idle is set");
    tsr::Dims d{dims[0], dims[1], dims[2]};
    int used = 0;
    TSR_TRY(tsr::choose_dims(kind, nranks, allow_idle != 0, &d, &used));
    for (int a = 0; a < 3; ++a) dims[a] = d[a];
    if (nused) *nused = used;
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_grid_dims_create", st);
}

tsr_status tsr_grid_create(tsr_context ctx, tsr_grid_kind kind, const int dims[3], tsr_grid* grid) {
  tsr_context c = ctx != nullptr && ctx->magic == tsr_context_s::kMagic ? ctx : nullptr;
  return finish(c, "tsr_grid_create", tsr::create(ctx, kind, dims, grid));
}

tsr_status tsr_grid_destroy(tsr_grid* grid) {
  tsr_context c = grid != nullptr ? tsr::ctx_of(*grid) : nullptr;
  return finish(c, "tsr_grid_destroy", tsr::destroy(grid));
}

tsr_status tsr_grid_get_kind(tsr_grid grid, tsr_grid_kind* kind) {
  TSR_GRID_QUERY("tsr_grid_get_kind", TSR_CHECK_NOT_NULL(kind); *kind = grid->kind; return TSR_SUCCESS;);
}

tsr_status tsr_grid_get_dims(tsr_grid grid, int dims[3]) {
  TSR_GRID_QUERY("tsr_grid_get_dims", TSR_CHECK_NOT_NULL(dims);
                 for (int a = 0; a < 3; ++a) dims[a] = grid->dims[a]; return TSR_SUCCESS;);
}

tsr_status tsr_grid_is_member(tsr_grid grid, int* member) {
  TSR_GRID_QUERY("tsr_grid_is_member", TSR_CHECK_NOT_NULL(member); *member = grid->grid_rank >= 0;
                 return TSR_SUCCESS;);
}

tsr_status tsr_grid_my_rank(tsr_grid grid, int* grid_rank) {
  TSR_GRID_QUERY("tsr_grid_my_rank", TSR_CHECK_NOT_NULL(grid_rank); *grid_rank = grid->grid_rank;
                 return TSR_SUCCESS;);
}

tsr_status tsr_grid_my_coords(tsr_grid grid, int coords[3]) {
  TSR_GRID_QUERY("tsr_grid_my_coords", TSR_CHECK_NOT_NULL(coords);
                 for (int a = 0; a < 3; ++a) coords[a] = grid->coords[a]; return TSR_SUCCESS;);
}

tsr_status tsr_grid_coords(tsr_grid grid, int grid_rank, int coords[3]) {
  TSR_GRID_QUERY("tsr_grid_coords", TSR_CHECK_NOT_NULL(coords);
                 if (grid_rank < 0 || grid_rank >= grid->size) return fail(
                     TSR_ERR_INVALID_ARG, "argument 'grid_rank' = %d; expected 0 <= grid_rank < %d", grid_rank,
                     grid->size);
                 tsr::Dims c = grid->coords_of(grid_rank);
                 for (int a = 0; a < 3; ++a) coords[a] = c[a]; return TSR_SUCCESS;);
}

tsr_status tsr_grid_rank(tsr_grid grid, const int coords[3], int* grid_rank) {
  TSR_GRID_QUERY("tsr_grid_rank", TSR_CHECK_NOT_NULL(coords); TSR_CHECK_NOT_NULL(grid_rank);
                 for (int a = 0; a < 3; ++a) if (coords[a] < 0 || coords[a] >= grid->dims[a]) return fail(
                     TSR_ERR_INVALID_ARG, "argument 'coords[%d]' = %d; expected 0 <= coords[%d] < %d", a, coords[a],
                     a, grid->dims[a]);
                 *grid_rank = grid->rank_of(tsr::Dims{coords[0], coords[1], coords[2]}); return TSR_SUCCESS;);
}

tsr_status tsr_grid_context_rank(tsr_grid grid, int grid_rank, int* context_rank) {
  TSR_GRID_QUERY("tsr_grid_context_rank", TSR_CHECK_NOT_NULL(context_rank);
                 if (grid_rank < 0 || grid_rank >= grid->size) return fail(
                     TSR_ERR_INVALID_ARG, "argument 'grid_rank' = %d; expected 0 <= grid_rank < %d", grid_rank,
                     grid->size);
                 *context_rank = grid->context_rank_of[static_cast<size_t>(grid_rank)]; return TSR_SUCCESS;);
}

tsr_status tsr_grid_rank_of_context_rank(tsr_grid grid, int context_rank, int* grid_rank) {
  TSR_GRID_QUERY("tsr_grid_rank_of_context_rank", TSR_CHECK_NOT_NULL(grid_rank);
                 if (context_rank < 0 || context_rank >= grid->ctx->size) return fail(
                     TSR_ERR_INVALID_ARG, "argument 'context_rank' = %d; expected 0 <= context_rank < %d",
                     context_rank, grid->ctx->size);
                 *grid_rank = grid->grid_rank_of[static_cast<size_t>(context_rank)]; return TSR_SUCCESS;);
}

tsr_status tsr_grid_comm(tsr_grid grid, tsr_grid_axis axis, MPI_Comm* comm) {
  TSR_GRID_QUERY("tsr_grid_comm", TSR_CHECK_NOT_NULL(comm);
                 if (axis < TSR_AXIS_ROW || axis > TSR_AXIS_ALL) return fail(
                     TSR_ERR_INVALID_ARG, "argument 'axis' = %d is not a tsr_grid_axis", static_cast<int>(axis));
                 *comm = grid->comms[axis] ? grid->comms[axis]->mpi() : MPI_COMM_NULL; return TSR_SUCCESS;);
}

tsr_status tsr_grid_rows_within_node(tsr_grid grid, int* within, int* total) {
  TSR_GRID_QUERY("tsr_grid_rows_within_node", TSR_CHECK_NOT_NULL(within); TSR_CHECK_NOT_NULL(total);
                 *within = grid->rows_within; *total = grid->rows_total; return TSR_SUCCESS;);
}

}  // extern "C"

// Public accounted collectives on a grid axis: check locally, agree on the
// axis (status and a digest of the arguments), then call the transport.
#include <climits>
#include <cstdint>
#include <vector>

#include "core.hpp"
#include "device.hpp"
#include "device_transport.hpp"
#include "grid.hpp"

namespace tsr {
namespace {


// Checks that do not depend on the other ranks; on success *comm is the axis.
tsr_status axis_of(tsr_grid grid, tsr_grid_axis axis, const Comm** comm) {
  TSR_TRY(check_grid(grid));
  if (axis < TSR_AXIS_ROW || axis > TSR_AXIS_ALL)
    return fail(TSR_ERR_INVALID_ARG, "argument 'axis' = %d is not a tsr_grid_axis", static_cast<int>(axis));
  if (grid->grid_rank < 0)
    return fail(TSR_ERR_STATE, "this rank is idle in the grid (not a member): it must not call collectives on it");
  *comm = grid->comms[axis].get();
  return TSR_SUCCESS;
}

// blocks: how many blocks of count elements the largest buffer holds (the
// axis size for allgather, reduce-scatter and all-to-all). Any count whose
// buffer can exist is moved (split into chunks of at most the context's
// max_chunk elements per MPI call where needed, see transport.hpp).
tsr_status check_spaces(const Comm& c, size_t count, const void* a, const char* an, const void* b, const char* bn);

tsr_status check_common(const Comm& c, tsr_dtype type, size_t count, const void* a, const char* an, const void* b,
                        const char* bn, size_t blocks = 1) {
  if (count == TSR_COUNT_INVALID)
    return fail(TSR_ERR_SHAPE, "argument 'count' is TSR_COUNT_INVALID: the caller found a size error on this rank");
  if (!dtype_valid(type)) return fail(TSR_ERR_INVALID_ARG, "argument 'type' = %d is not a tsr_dtype", static_cast<int>(type));
  if (count > 0 && a == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL with count = %zu", an, count);
  if (count > 0 && bn != nullptr && b == nullptr)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL with count = %zu", bn, count);
  if (count > static_cast<size_t>(PTRDIFF_MAX) / tsr_dtype_size(type) / blocks)
    return fail(TSR_ERR_UNSUPPORTED, "argument 'count' = %zu: %zu block(s) of that many %zu-byte elements exceed "
                "the largest buffer (PTRDIFF_MAX bytes)", count, blocks, tsr_dtype_size(type));
  return check_spaces(c, count, a, an, b, bn);
}

// Device buffers (docs/GPU.md): of the context's device, both buffers in one
// space, on an axis that can move device memory. Host buffers pass.
tsr_status check_spaces(const Comm& c, size_t count, const void* a, const char* an, const void* b, const char* bn) {
  if (count == 0) return TSR_SUCCESS;
  device::Space sa = device::Space::host, sb = device::Space::host;
  TSR_TRY(device::check_buffer(c.context(), a, an, &sa));
  if (bn != nullptr) TSR_TRY(device::check_buffer(c.context(), b, bn, &sb));
  if (bn != nullptr && sa != sb)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is %s memory but '%s' is %s memory: pass both in one space", an,
                sa == device::Space::device ? "CUDA device" : "host", bn, sb == device::Space::device ? "CUDA device" : "host");
  const char* why = nullptr;
  if (sa == device::Space::device && !device::can_move_device(c, &why))
    return fail(TSR_ERR_UNSUPPORTED, "argument '%s' is CUDA device memory, which this grid axis cannot move: %s", an, why);
  return TSR_SUCCESS;
}

// The memory space of a call's buffers, agreed on the axis (each space takes
// its own route: every rank must take the same): 0 host, 1 device.
int64_t space_arg(const void* a, const void* b = nullptr) {
  return device::space_of(a) == device::Space::device || device::space_of(b) == device::Space::device ? 1 : 0;
}
std::vector<Same> with_space(std::vector<Same> v, int64_t space) {
  v.push_back({"memory space of the buffers (0: host, 1: CUDA device)", space});
  return v;
}

tsr_status check_op_arg(tsr_op op) {
  if (!op_valid(op)) return fail(TSR_ERR_INVALID_ARG, "argument 'op' = %d is not a tsr_op", static_cast<int>(op));
  return TSR_SUCCESS;
}

// Runs `local` (the local checks), agrees on the axis, then runs `move`.
template <class Local, class Move>
tsr_status run(tsr_grid grid, tsr_grid_axis axis, const std::vector<Same>& same, Local local, Move move) {
  const Comm* c = nullptr;
  TSR_TRY(axis_of(grid, axis, &c));
  TSR_TRY(agree(*c, local(*c), same));
  return move(*c);
}

// What every rank of the axis must pass alike: the call (which collective)
// and its count, type and one of root, op or shift.
std::vector<Same> named(int call, size_t count, tsr_dtype type, int64_t x = 0, const char* xname = nullptr) {
  std::vector<Same> v{{"the collective called", call, true}, {"count", static_cast<int64_t>(count)}, {"type", type}};
  if (xname) v.push_back({xname, x});
  return v;
}

tsr_context ctx_of(tsr_grid g) { return g != nullptr && g->magic == tsr_grid_s::kMagic ? g->ctx : nullptr; }

}  // namespace
}  // namespace tsr

using tsr::finish;

extern "C" {

tsr_status tsr_bcast(tsr_grid grid, tsr_grid_axis axis, void* buf, size_t count, tsr_dtype type, int root) {
  tsr_status st = tsr::run(
      grid, axis, tsr::with_space(tsr::named(1, count, type, root, "root"), tsr::space_arg(buf)),
      [&](const tsr::Comm& c) {
        TSR_TRY(tsr::check_common(c, type, count, buf, "buf", nullptr, nullptr));
        if (root < 0 || root >= c.size())
          return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'root' = %d; expected 0 <= root < %d (axis size)", root,
                           c.size());
        return TSR_SUCCESS;
      },
      [&](const tsr::Comm& c) { return tsr::bcast(c, buf, count, type, root); });
  return finish(tsr::ctx_of(grid), "tsr_bcast", st);
}

tsr_status tsr_allreduce(tsr_grid grid, tsr_grid_axis axis, const void* sbuf, void* rbuf, size_t count,
                         tsr_dtype type, tsr_op op) {
  tsr_status st = tsr::run(
      grid, axis, tsr::with_space(tsr::named(2, count, type, op, "op"), tsr::space_arg(sbuf, rbuf)),
      [&](const tsr::Comm& c) {
        TSR_TRY(tsr::check_common(c, type, count, sbuf, "sbuf", rbuf, "rbuf"));
        return tsr::check_op_arg(op);
      },
      [&](const tsr::Comm& c) { return tsr::allreduce(c, sbuf, rbuf, count, type, op); });
  return finish(tsr::ctx_of(grid), "tsr_allreduce", st);
}

tsr_status tsr_allgather(tsr_grid grid, tsr_grid_axis axis, const void* sbuf, size_t count, void* rbuf,
                         tsr_dtype type) {
  tsr_status st = tsr::run(
      grid, axis, tsr::with_space(tsr::named(3, count, type), tsr::space_arg(sbuf, rbuf)),
      [&](const tsr::Comm& c) {
        return tsr::check_common(c, type, count, sbuf, "sbuf", rbuf, "rbuf", static_cast<size_t>(c.size()));
      },
      [&](const tsr::Comm& c) { return tsr::allgather(c, sbuf, count, rbuf, type); });
  return finish(tsr::ctx_of(grid), "tsr_allgather", st);
}

tsr_status tsr_reduce_scatter(tsr_grid grid, tsr_grid_axis axis, const void* sbuf, void* rbuf, size_t count,
                              tsr_dtype type, tsr_op op) {
  tsr_status st = tsr::run(
      grid, axis, tsr::with_space(tsr::named(4, count, type, op, "op"), tsr::space_arg(sbuf, rbuf)),
      [&](const tsr::Comm& c) {
        TSR_TRY(tsr::check_common(c, type, count, sbuf, "sbuf", rbuf, "rbuf", static_cast<size_t>(c.size())));
        if (sbuf == rbuf && count > 0)
          return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'sbuf' and 'rbuf' are the same buffer; "
                           "tsr_reduce_scatter is not in place");
        return tsr::check_op_arg(op);
      },
      [&](const tsr::Comm& c) { return tsr::reduce_scatter(c, sbuf, rbuf, count, type, op); });
  return finish(tsr::ctx_of(grid), "tsr_reduce_scatter", st);
}

tsr_status tsr_alltoall(tsr_grid grid, tsr_grid_axis axis, const void* sbuf, void* rbuf, size_t count,
                        tsr_dtype type) {
  tsr_status st = tsr::run(
      grid, axis, tsr::with_space(tsr::named(5, count, type), tsr::space_arg(sbuf, rbuf)),
      [&](const tsr::Comm& c) {
        TSR_TRY(tsr::check_common(c, type, count, sbuf, "sbuf", rbuf, "rbuf", static_cast<size_t>(c.size())));
        if (sbuf == rbuf && count > 0)
          return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'sbuf' and 'rbuf' are the same buffer; "
                           "tsr_alltoall is not in place");
        return TSR_SUCCESS;
      },
      [&](const tsr::Comm& c) { return tsr::alltoall(c, sbuf, rbuf, count, type); });
  return finish(tsr::ctx_of(grid), "tsr_alltoall", st);
}

tsr_status tsr_shift(tsr_grid grid, tsr_grid_axis axis, const void* sbuf, void* rbuf, size_t count, tsr_dtype type,
                     int shift) {
  tsr_status st = tsr::run(
      grid, axis, tsr::with_space(tsr::named(6, count, type, shift, "shift"), tsr::space_arg(sbuf, rbuf)),
      [&](const tsr::Comm& c) {
        TSR_TRY(tsr::check_common(c, type, count, sbuf, "sbuf", rbuf, "rbuf"));
        if (sbuf == rbuf && count > 0)
          return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'sbuf' and 'rbuf' are the same buffer; tsr_shift is not in place");
        return TSR_SUCCESS;
      },
      [&](const tsr::Comm& c) {
        const int p = c.size();
        const int s = ((shift % p) + p) % p;
        return tsr::sendrecv(c, sbuf, count, (c.rank() + s) % p, 0, rbuf, count, (c.rank() - s + p) % p, 0, type);
      });
  return finish(tsr::ctx_of(grid), "tsr_shift", st);
}

tsr_status tsr_grid_axis_info(tsr_grid grid, tsr_grid_axis axis, int* rank, int* size) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_grid(grid));
    TSR_CHECK_NOT_NULL(rank);
    TSR_CHECK_NOT_NULL(size);
    if (axis < TSR_AXIS_ROW || axis > TSR_AXIS_ALL)
      return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'axis' = %d is not a tsr_grid_axis", static_cast<int>(axis));
    const tsr::Comm* c = grid->comms[axis].get();
    *rank = c ? c->rank() : -1;
    *size = c ? c->size() : 0;
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(grid), "tsr_grid_axis_info", st);
}

}  // extern "C"

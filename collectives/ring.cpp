// Rings (tsr_ring_*) and the ring exchange engine.
#include "ring.hpp"

#include <climits>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "device.hpp"
#include "device_transport.hpp"
#include "grid.hpp"
#include "tessera/tsr_config.h"

namespace tsr {

tsr_status check_ring(tsr_ring ring, const char* argname) {
  if (ring == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", argname);
  if (ring->magic != tsr_ring_s::kMagic)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is not a live tsr_ring (destroyed or corrupt)", argname);
  return TSR_SUCCESS;
}

namespace {

void add_into(tsr_dtype type, void* acc, const void* x, size_t n) {
  if (type == TSR_FLOAT64) {
    double* a = static_cast<double*>(acc);
    const double* b = static_cast<const double*>(x);
    for (size_t i = 0; i < n; ++i) a[i] += b[i];
  } else {
    float* a = static_cast<float*>(acc);
    const float* b = static_cast<const float*>(x);
    for (size_t i = 0; i < n; ++i) a[i] += b[i];
  }
}

size_t max_count(const RingBuf& b) {
  size_t m = 0;
  for (size_t c : b.counts) m = c > m ? c : m;
  return m;
}

}  // namespace

tsr_status RingExchange::zero(void* p, size_t bytes) const {
  if (bytes == 0) return TSR_SUCCESS;
  if (device_ >= 0) return ringdev::zero(device_, stream_, p, bytes);
  std::memset(p, 0, bytes);
  return TSR_SUCCESS;
}

tsr_status RingExchange::add(tsr_dtype type, void* acc, const void* x, size_t n) const {
  if (device_ >= 0) return ringdev::add(device_, stream_, type, acc, x, n);
  add_into(type, acc, x, n);
  return TSR_SUCCESS;
}

tsr_status RingExchange::prepare() {
  const int p = p_;
  slots_.clear();
  first_slot_.clear();
  for (size_t i = 0; i < bufs_.size(); ++i) {
    const RingBuf& b = bufs_[i];
    if (b.counts.size() != static_cast<size_t>(p))
      return fail(TSR_ERR_INTERNAL, "ring buffer %zu has %zu counts for %d ranks", i, b.counts.size(), p);
    const size_t m = max_count(b);
    if (m > static_cast<size_t>(PTRDIFF_MAX) / tsr_dtype_size(b.type))
      return fail(TSR_ERR_UNSUPPORTED, "a block of ring buffer %zu has %zu elements, more than the largest buffer "
                  "(PTRDIFF_MAX bytes)", i, m);
    first_slot_.push_back(slots_.size());
    // Circulate: the receive slots alternate over p-1 hops (one slot at p = 2).
    // Accumulate: contribution, incoming sum, outgoing sum (no third at p = 2).
    const int nslots = b.accumulate ? (p >= 3 ? 3 : p == 2 ? 2 : 0) : (p >= 3 ? 2 : p - 1);
    for (int k = 0; k < nslots; ++k) {
      slots_.emplace_back();
      TSR_TRY(slots_.back().alloc(&mem_, m * tsr_dtype_size(b.type), "a ring exchange block"));
    }
  }
  return TSR_SUCCESS;
}

void RingExchange::poke() {
  if (ring_ == nullptr) return;
  const Comm& c = *ring_->comm;
  for (Request& r : reqs_) {
    if (!r.active()) continue;
    int done = 0;
    (void)test(c, &r, &done);
  }
}

tsr_status RingExchange::run(tsr_ring_s& ring, const RingStepFn& fn, tsr_status* callback_status) {
  *callback_status = TSR_SUCCESS;
  const Comm& c = *ring.comm;
  const int p = c.size(), r = c.rank();
  if (p != p_ || first_slot_.size() != bufs_.size())
    return fail(TSR_ERR_INTERNAL, "ring exchange run without prepare() for this ring");
  const int next = ring_mod(r + 1, p), prev = ring_mod(r - 1, p);
  const size_t nb = bufs_.size();
  // Requests: per buffer [0] circulate recv, [1] circulate send, [2] accumulate
  // recv, [3..5] accumulate send of slot 0..2.
  reqs_.assign(6 * nb, Request());
  std::vector<void*> blocks(nb, nullptr), cur(nb, nullptr);
  std::vector<size_t> counts(nb, 0);
  std::vector<int> nxt(nb, 0);  // circulate: the slot the next block arrives in
  // Accumulate slot roles, the same for every accumulate buffer.
  int cidx = 0, ridx = 1, fidx = 2;
  for (size_t i = 0; i < nb; ++i) {
    RingBuf& b = bufs_[i];
    if (b.accumulate) {
      TSR_TRY(zero(b.data, b.counts[static_cast<size_t>(r)] * tsr_dtype_size(b.type)));
    } else {
      cur[i] = b.data;
    }
  }
  struct Running {  // lets tsr_ring_progress reach this exchange
    tsr_ring_s& ring;
    RingExchange* x;
    Running(tsr_ring_s& rs, RingExchange* xx) : ring(rs), x(xx) {
      ring.running = x;
      x->ring_ = &ring;
    }
    ~Running() {
      ring.running = nullptr;
      x->ring_ = nullptr;
    }
  } running(ring, this);
  auto slot = [&](size_t i, int k) { return slots_[first_slot_[i] + static_cast<size_t>(k)].data(); };
  // Device buffers: a message of no elements still moves (both sides know
  // every count), from a device pointer, so that both sides take the same
  // route (a null or host pointer of an empty block would go to host MPI):
  // the buffer's first slot, which is device memory. A buffer empty on
  // every rank (no slot memory) moves nothing on the device.
  auto mv = [&](size_t i, void* p, size_t count) -> void* {
    if (device_ < 0 || count > 0) return p;
    return first_slot_[i] < slots_.size() ? slot(i, 0) : nullptr;
  };
  auto skip = [&](size_t i) { return device_ >= 0 && max_count(bufs_[i]) == 0; };
  auto wait_req = [&](size_t k) -> tsr_status { return reqs_[k].active() ? wait(c, &reqs_[k]) : TSR_SUCCESS; };

  for (int s = 0; s < p; ++s) {
    const int src = ring_mod(r - s, p);
    const int nsrc = ring_mod(src - 1, p);  // the source of step s+1
    // Post the circulation for step s+1 before this step's callback runs.
    if (s + 1 < p) {
      for (size_t i = 0; i < nb; ++i) {
        RingBuf& b = bufs_[i];
        if (b.accumulate || skip(i)) continue;
        TSR_TRY(recv(c, slot(i, nxt[i]), b.counts[static_cast<size_t>(nsrc)], b.type, prev,
                     kTagCirculate + static_cast<int>(i), &reqs_[6 * i]));
        TSR_TRY(send(c, mv(i, cur[i], b.counts[static_cast<size_t>(src)]), b.counts[static_cast<size_t>(src)], b.type,
                     next, kTagCirculate + static_cast<int>(i), &reqs_[6 * i + 1]));
      }
    }
    for (size_t i = 0; i < nb; ++i) {
      RingBuf& b = bufs_[i];
      counts[i] = b.counts[static_cast<size_t>(src)];
      if (!b.accumulate) {
        blocks[i] = cur[i];
      } else if (s == 0) {
        blocks[i] = b.data;
      } else {
        TSR_TRY(wait_req(6 * i + 3 + static_cast<size_t>(cidx)));  // the slot's previous sum has left
        blocks[i] = slot(i, cidx);
        TSR_TRY(zero(blocks[i], counts[i] * tsr_dtype_size(b.type)));
      }
    }
    // Device buffers: start the transfers posted for step s+1 now (NCCL group
    // on the communicator's stream, after the work already on the context's
    // stream), so that they run while this step's kernels do.
    if (device_ >= 0 && s + 1 < p) TSR_TRY(device::start(c));
    if (*callback_status == TSR_SUCCESS) {
      const tsr_status st = fn(s, src, blocks.data());
      if (st != TSR_SUCCESS) *callback_status = st;
    }
    if (s >= 1) {
      for (size_t i = 0; i < nb; ++i) {
        RingBuf& b = bufs_[i];
        if (!b.accumulate || skip(i)) continue;
        if (s >= 2) {  // the sum for src so far, from rank-1
          TSR_TRY(wait_req(6 * i + 2));
          TSR_TRY(add(b.type, slot(i, cidx), slot(i, ridx), counts[i]));
        }
        TSR_TRY(send(c, slot(i, cidx), counts[i], b.type, next, kTagAccumulate + static_cast<int>(i),
                     &reqs_[6 * i + 3 + static_cast<size_t>(cidx)]));
        // The next sum to arrive: for the block of step s+1, or (after the
        // last step) the complete sum for this rank's own block.
        TSR_TRY(recv(c, slot(i, ridx), b.counts[static_cast<size_t>(nsrc)], b.type, prev,
                     kTagAccumulate + static_cast<int>(i), &reqs_[6 * i + 2]));
      }
      std::swap(cidx, fidx);  // the sent slot is in flight; the free one takes contributions
    }
    if (s + 1 < p) {
      for (size_t i = 0; i < nb; ++i) {
        if (bufs_[i].accumulate) continue;
        TSR_TRY(wait_req(6 * i));
        TSR_TRY(wait_req(6 * i + 1));
        if (skip(i)) continue;
        cur[i] = slot(i, nxt[i]);
        nxt[i] ^= 1;
      }
    }
  }
  if (p > 1) {
    for (size_t i = 0; i < nb; ++i) {
      RingBuf& b = bufs_[i];
      if (!b.accumulate || skip(i)) continue;
      TSR_TRY(wait_req(6 * i + 2));
      TSR_TRY(add(b.type, b.data, slot(i, ridx), b.counts[static_cast<size_t>(r)]));
      for (size_t k = 3; k < 6; ++k) TSR_TRY(wait_req(6 * i + k));
    }
  }
  return TSR_SUCCESS;
}

#if !TSR_HAVE_CUDA
namespace ringdev {  // ring_device.hpp without CUDA: never reached (no pointer is device memory)
tsr_status alloc(int, void*, size_t, void** p) {
  *p = nullptr;
  return fail(TSR_ERR_INTERNAL, "device workspace in a build without CUDA");
}
void release(int, void*, void*) noexcept {}
tsr_status zero(int, void*, void*, size_t) { return fail(TSR_ERR_INTERNAL, "device memset in a build without CUDA"); }
tsr_status add(int, void*, tsr_dtype, void*, const void*, size_t) {
  return fail(TSR_ERR_INTERNAL, "device sum in a build without CUDA");
}
}  // namespace ringdev
#endif

namespace {

tsr_context ctx_of(tsr_ring r) { return r != nullptr && r->magic == tsr_ring_s::kMagic ? r->ctx : nullptr; }

// Duplicates comm (collective over it) and wraps the duplicate as the ring's
// transport communicator.
tsr_status make_ring(tsr_context ctx, MPI_Comm comm, tsr_ring* out) {
  MPI_Comm dup = MPI_COMM_NULL;
  TSR_MPI_TRY(MPI_Comm_dup(comm, &dup));
  std::unique_ptr<tsr_ring_s> r(new (std::nothrow) tsr_ring_s());
  if (!r) {
    MPI_Comm_free(&dup);
    return fail(TSR_ERR_NO_MEMORY, "allocating a ring");
  }
  r->ctx = ctx;
  tsr_status st = Comm::wrap(ctx, dup, true, &r->comm);
  // Device transport (NCCL) when the context is bound to a device: collective
  // over the ring, agreed (lib/device_transport.hpp, docs/GPU.md).
  if (st == TSR_SUCCESS && ctx->cuda_device >= 0) st = agree(*r->comm, device::attach(*r->comm));
  if (st != TSR_SUCCESS) {
    if (!r->comm) MPI_Comm_free(&dup);
    return st;
  }
  ctx->live_rings += 1;
  *out = r.release();
  return TSR_SUCCESS;
}

}  // namespace
}  // namespace tsr

using tsr::finish;

extern "C" {

tsr_status tsr_ring_create(tsr_grid grid, tsr_grid_axis axis, tsr_ring* ring) {
  tsr_context ctx = grid != nullptr && grid->magic == tsr_grid_s::kMagic ? grid->ctx : nullptr;
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_grid(grid));
    if (axis < TSR_AXIS_ROW || axis > TSR_AXIS_ALL)
      return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'axis' = %d is not a tsr_grid_axis", static_cast<int>(axis));
    if (grid->grid_rank < 0)
      return tsr::fail(TSR_ERR_STATE, "this rank is idle in the grid (not a member): it must not create a ring on it");
    const tsr::Comm& c = *grid->comms[axis];
    tsr_status local = ring == nullptr ? tsr::fail(TSR_ERR_INVALID_ARG, "argument 'ring' is NULL") : TSR_SUCCESS;
    TSR_TRY(tsr::agree(c, local));
    *ring = nullptr;
    return tsr::make_ring(grid->ctx, c.mpi(), ring);
  }();
  return finish(ctx, "tsr_ring_create", st);
}

tsr_status tsr_ring_create_comm(tsr_context ctx, MPI_Comm comm, tsr_ring* ring) {
  const bool ctx_ok = tsr::check_context(ctx) == TSR_SUCCESS;
  tsr_status st = [&]() -> tsr_status {
    // Without a communicator nothing can be agreed on; with one, every other
    // check (ctx included) is agreed on over comm, so that a bad argument on
    // one rank fails the call on every rank instead of leaving them blocked.
    if (comm == MPI_COMM_NULL) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'comm' is MPI_COMM_NULL");
    int inter = 0;
    TSR_MPI_TRY(MPI_Comm_test_inter(comm, &inter));
    if (inter) return tsr::fail(TSR_ERR_UNSUPPORTED, "argument 'comm' is an intercommunicator");
    auto local = [&]() -> tsr_status {
      TSR_TRY(tsr::check_context(ctx));
      // Every rank of comm must be a rank of the context (its ledger and node map).
      int n = 0;
      TSR_MPI_TRY(MPI_Comm_size(comm, &n));
      std::vector<int> mine(static_cast<size_t>(n)), theirs(static_cast<size_t>(n), MPI_UNDEFINED);
      for (int i = 0; i < n; ++i) mine[static_cast<size_t>(i)] = i;
      MPI_Group g = MPI_GROUP_NULL, gc = MPI_GROUP_NULL;
      TSR_MPI_TRY(MPI_Comm_group(comm, &g));
      int rc = MPI_Comm_group(ctx->comm, &gc);
      if (rc == MPI_SUCCESS) rc = MPI_Group_translate_ranks(g, n, mine.data(), gc, theirs.data());
      MPI_Group_free(&g);
      if (gc != MPI_GROUP_NULL) MPI_Group_free(&gc);
      if (rc != MPI_SUCCESS) return tsr::mpi_fail(rc, "MPI_Group_translate_ranks");
      for (int i = 0; i < n; ++i)
        if (theirs[static_cast<size_t>(i)] == MPI_UNDEFINED)
          return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'comm': its rank %d is not a rank of the context's "
                           "communicator", i);
      if (ring == nullptr) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'ring' is NULL");
      return TSR_SUCCESS;
    };
    TSR_TRY(tsr::agree_raw(comm, ctx_ok ? &ctx->ledger : nullptr, local()));
    *ring = nullptr;
    return tsr::make_ring(ctx, comm, ring);
  }();
  return finish(ctx_ok ? ctx : nullptr, "tsr_ring_create_comm", st);
}

tsr_status tsr_ring_destroy(tsr_ring* ring) {
  if (ring == nullptr)
    return finish(nullptr, "tsr_ring_destroy", tsr::fail(TSR_ERR_INVALID_ARG, "argument 'ring' is NULL"));
  if (*ring == nullptr) return TSR_SUCCESS;
  tsr_status st = tsr::check_ring(*ring, "*ring");
  if (st != TSR_SUCCESS) return finish(nullptr, "tsr_ring_destroy", st);
  tsr_ring r = *ring;
  tsr_context ctx = r->ctx;
  r->comm.reset();  // frees the duplicate
  ctx->live_rings -= 1;
  r->magic = 0;
  delete r;
  *ring = nullptr;
  return TSR_SUCCESS;
}

tsr_status tsr_ring_info(tsr_ring ring, int* rank, int* size) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ring(ring));
    TSR_CHECK_NOT_NULL(rank);
    TSR_CHECK_NOT_NULL(size);
    *rank = ring->comm->rank();
    *size = ring->comm->size();
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ring), "tsr_ring_info", st);
}

tsr_status tsr_ring_workspace_peak(tsr_ring ring, size_t* bytes, int reset) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ring(ring));
    TSR_CHECK_NOT_NULL(bytes);
    *bytes = ring->mem.peak;
    if (reset) ring->mem.peak = ring->mem.current;
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ring), "tsr_ring_workspace_peak", st);
}

tsr_status tsr_ring_workspace_release(tsr_ring ring) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ring(ring));
    if (ring->running)
      return tsr::fail(TSR_ERR_STATE, "tsr_ring_workspace_release called from inside a ring exchange step");
    ring->mem.release_arena();
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ring), "tsr_ring_workspace_release", st);
}

tsr_status tsr_ring_workspace_held(tsr_ring ring, size_t* bytes) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ring(ring));
    TSR_CHECK_NOT_NULL(bytes);
    *bytes = ring->mem.capacity;
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ring), "tsr_ring_workspace_held", st);
}

tsr_status tsr_ring_progress(tsr_ring ring) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ring(ring));
    if (ring->running) ring->running->poke();
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ring), "tsr_ring_progress", st);
}

tsr_status tsr_ring_exchange(tsr_ring ring, const tsr_ring_buffer* buffers, int nbuffers, tsr_ring_step_fn fn,
                             void* user) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ring(ring));
    if (ring->running)
      return tsr::fail(TSR_ERR_STATE, "tsr_ring_exchange called from inside a step callback of the same ring");
    const tsr::Comm& c = *ring->comm;
    const int p = c.size(), me = c.rank();
    // Local checks, then agreement on them and on nbuffers, types and modes.
    uint64_t same = tsr::digest({0x7269, nbuffers});
    // Device buffers (docs/GPU.md, "Ring attention"): every non-empty buffer
    // in device memory of the context's device; slots then on the device too.
    bool on_device = false;
    tsr_status local = [&]() -> tsr_status {
      if (nbuffers < 0) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'nbuffers' = %d is negative", nbuffers);
      if (nbuffers > 0 && buffers == nullptr)
        return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'buffers' is NULL with nbuffers = %d", nbuffers);
      if (fn == nullptr) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'fn' is NULL");
      for (int i = 0; i < nbuffers; ++i) {
        const tsr_ring_buffer& b = buffers[i];
        if (!tsr::dtype_valid(b.type))
          return tsr::fail(TSR_ERR_INVALID_ARG, "buffers[%d].type = %d is not a tsr_dtype", i, static_cast<int>(b.type));
        if (b.mode != TSR_RING_CIRCULATE && b.mode != TSR_RING_ACCUMULATE)
          return tsr::fail(TSR_ERR_INVALID_ARG, "buffers[%d].mode = %d is not a tsr_ring_mode", i, static_cast<int>(b.mode));
        if (b.mode == TSR_RING_ACCUMULATE && b.type != TSR_FLOAT32 && b.type != TSR_FLOAT64)
          return tsr::fail(TSR_ERR_INVALID_ARG, "buffers[%d]: TSR_RING_ACCUMULATE needs TSR_FLOAT32 or TSR_FLOAT64, "
                           "not %s", i, tsr::dtype_name(b.type));
        if (b.count > 0 && b.data == nullptr)
          return tsr::fail(TSR_ERR_INVALID_ARG, "buffers[%d].data is NULL with count = %zu", i, b.count);
        if (b.count > static_cast<size_t>(PTRDIFF_MAX) / tsr_dtype_size(b.type))
          return tsr::fail(TSR_ERR_UNSUPPORTED, "buffers[%d].count = %zu: more bytes than the largest buffer "
                           "(PTRDIFF_MAX); any smaller count is moved, split into messages of at most the "
                           "context's max_chunk elements", i, b.count);
      }
      int first_dev = -1, first_host = -1;
      for (int i = 0; i < nbuffers; ++i) {
        if (buffers[i].count == 0 || buffers[i].data == nullptr) continue;
        tsr::device::Space sp = tsr::device::Space::host;
        const std::string arg = "buffers[" + std::to_string(i) + "].data";
        TSR_TRY(tsr::device::check_buffer(ring->ctx, buffers[i].data, arg.c_str(), &sp));
        int& first = sp == tsr::device::Space::device ? first_dev : first_host;
        if (first < 0) first = i;
      }
      if (first_dev >= 0 && first_host >= 0)
        return tsr::fail(TSR_ERR_INVALID_ARG, "buffers[%d].data is host memory but buffers[%d].data is CUDA device "
                         "memory: pass the buffers of one exchange in one memory space", first_host, first_dev);
      on_device = first_dev >= 0;
      const char* why = nullptr;
      if (on_device && p > 1 && !tsr::device::can_move_device(c, &why))
        return tsr::fail(TSR_ERR_UNSUPPORTED, "buffers[%d].data is CUDA device memory, which the ring cannot move: %s",
                         first_dev, why);
      return TSR_SUCCESS;
    }();
    if (local == TSR_SUCCESS)
      for (int i = 0; i < nbuffers; ++i) same = tsr::digest({buffers[i].type, buffers[i].mode}, same);
    TSR_TRY(tsr::agree(c, local, std::vector<tsr::Same>{{"nbuffers", nbuffers},
                                                         {"buffers[i].type or .mode", static_cast<int64_t>(same & 0x7fffffffffffffffull), true},
                                                         {"the buffers' memory (0: host, 1: CUDA device)", on_device}}));
    // Everyone's counts (control traffic), then the slots.
    const size_t nb = static_cast<size_t>(nbuffers);
    std::vector<int64_t> mine(nb + 1, 0), all((nb + 1) * static_cast<size_t>(p), 0);
    for (size_t i = 0; i < nb; ++i) mine[i] = static_cast<int64_t>(buffers[i].count);
    TSR_TRY(tsr::allgather(c, mine.data(), nb + 1, all.data(), TSR_INT64, nullptr, tsr::Traffic::control));
    std::vector<tsr::RingBuf> bufs(nb);
    for (size_t i = 0; i < nb; ++i) {
      bufs[i].data = buffers[i].data;
      bufs[i].type = buffers[i].type;
      bufs[i].accumulate = buffers[i].mode == TSR_RING_ACCUMULATE;
      bufs[i].counts.resize(static_cast<size_t>(p));
      for (int j = 0; j < p; ++j)
        bufs[i].counts[static_cast<size_t>(j)] = static_cast<size_t>(all[static_cast<size_t>(j) * (nb + 1) + i]);
    }
    tsr::RingExchange x(ring->mem, p, std::move(bufs));
    tsr_status ready = [&]() -> tsr_status {
      if (on_device) {  // slots from cudaMallocAsync on the context's stream
        x.set_device(ring->ctx->cuda_device, ring->ctx->cuda_stream);
        tsr::DeviceMode mode(ring->mem, true, ring->ctx->cuda_device, ring->ctx->cuda_stream);
        return x.prepare();
      }
      tsr::Tracker dry;  // size the ring's workspace arena, then take the slots from it
      dry.dry = true;
      tsr::RingExchange plan(dry, p, x.buffers());
      TSR_TRY(plan.prepare());
      TSR_TRY(ring->mem.reserve(dry.dry_arena_peak));
      return x.prepare();
    }();
    TSR_TRY(tsr::agree(c, ready));
    tsr_ring_step step{};
    step.rank = me;
    step.size = p;
    step.nbuffers = nbuffers;
    std::vector<size_t> counts(nb);
    int failed_step = -1;
    tsr_status cb = TSR_SUCCESS;
    TSR_TRY(x.run(
        *ring, [&](int s, int src, void* const* blocks) -> tsr_status {
          step.step = s;
          step.source = src;
          step.blocks = blocks;
          for (size_t i = 0; i < nb; ++i)
            counts[i] = static_cast<size_t>(all[static_cast<size_t>(src) * (nb + 1) + i]);
          step.counts = counts.data();
          const tsr_status r = fn(&step, user);
          if (r != TSR_SUCCESS) failed_step = s;
          return r;
        },
        &cb));
    if (cb != TSR_SUCCESS) {
      const bool known = cb >= TSR_ERR_INVALID_ARG && cb <= TSR_ERR_INTERNAL;
      cb = tsr::fail(known ? cb : TSR_ERR_INVALID_ARG, "the step callback returned %s (%d) at step %d",
                     tsr_status_name(cb), static_cast<int>(cb), failed_step);
    }
    return tsr::agree(c, cb);
  }();
  return finish(tsr::ctx_of(ring), "tsr_ring_exchange", st);
}

}  // extern "C"

// Distributed matrix descriptors (tsr_matrix) and redistribution: scatter
// from a root, gather to a root, and conversion between any two layouts of
// one context, point to point through the transport.
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <new>

#include "core.hpp"
#include "gemm_internal.hpp"
#include "transport.hpp"

namespace tsr {
namespace gemm {

void Dist::finish(int64_t want_ld) {
  rows = member ? local_len(lay.rows, m, coords) : 0;
  cols = member ? local_len(lay.cols, n, coords) : 0;
  ld = want_ld > 0 ? want_ld : std::max<int64_t>(1, rows);
}

tsr_status check_matrix(tsr_matrix m, const char* argname) {
  if (m == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", argname);
  if (m->magic != tsr_matrix_s::kMagic)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is not a live tessera matrix", argname);
  return TSR_SUCCESS;
}

Dist grid_dist(tsr_grid grid, int64_t m, int64_t n, tsr_dtype type, const tsr_layout& layout, int64_t ld) {
  Dist d;
  d.ctx = grid->ctx;
  d.dims = {grid->dims[0], grid->dims[1], grid->dims[2]};
  d.rank_of = grid->context_rank_of;
  d.member = grid->grid_rank >= 0;
  if (d.member) d.coords = {grid->coords[0], grid->coords[1], grid->coords[2]};
  d.m = m;
  d.n = n;
  d.type = type;
  d.lay = normalise(layout, d.dims);
  d.finish(ld);
  return d;
}

Dist root_dist(tsr_context ctx, int root, int64_t m, int64_t n, tsr_dtype type, int64_t ld) {
  Dist d;
  d.ctx = ctx;
  d.rank_of = {root};
  d.member = ctx->rank == root;
  d.m = m;
  d.n = n;
  d.type = type;
  d.finish(ld);
  return d;
}

namespace {

constexpr int kTag = 0x7e51;


// Pieces of a split clipped to the window [off, off + len), in window indices.
std::vector<Piece> window(const Split& s, int64_t n, const Dims& c, int64_t off, int64_t len) {
  std::vector<Piece> out;
  for (const Piece& p : pieces(s, n, c)) {
    const int64_t a = std::max(p.g, off), b = std::min(p.g + p.len, off + len);
    if (b > a) out.push_back({a - off, b - a, p.loc + (a - p.g)});
  }
  return out;
}

std::vector<Isect> intersect(const std::vector<Piece>& x, const std::vector<Piece>& y) {
  std::vector<Isect> out;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const int64_t a = std::max(x[i].g, y[j].g), b = std::min(x[i].g + x[i].len, y[j].g + y[j].len);
    if (b > a) out.push_back({b - a, x[i].loc + (a - x[i].g), y[j].loc + (a - y[j].g)});
    if (x[i].g + x[i].len < y[j].g + y[j].len)
      ++i;
    else
      ++j;
  }
  return out;
}
int64_t total(const std::vector<Isect>& v) {
  int64_t t = 0;
  for (const Isect& s : v) t += s.len;
  return t;
}

// Copies of a layout: the grid dimensions it does not use, and which copy
// a position holds (mixed radix, dimension 0 fastest).
struct Replicas {
  int count = 1;
  int index(const Dist& d, const Dims& c) const {
    int idx = 0, radix = 1;
    for (int x = 0; x < 3; ++x)
      if (d.dims[static_cast<size_t>(x)] > 1 && !d.lay.uses(x)) {
        idx += radix * c[static_cast<size_t>(x)];
        radix *= d.dims[static_cast<size_t>(x)];
      }
    return idx;
  }
};
Replicas replicas(const Dist& d) {
  Replicas r;
  for (int x = 0; x < 3; ++x)
    if (d.dims[static_cast<size_t>(x)] > 1 && !d.lay.uses(x)) r.count *= d.dims[static_cast<size_t>(x)];
  return r;
}

// Moves the intersection (columns outer, rows inner) between a local block
// and a packed buffer.
void pack(const unsigned char* src, int64_t ld, size_t es, const std::vector<Isect>& ri, const std::vector<Isect>& ci,
          unsigned char* out, bool source_side) {
  for (const Isect& c : ci)
    for (int64_t j = 0; j < c.len; ++j) {
      const int64_t col = (source_side ? c.sloc : c.dloc) + j;
      for (const Isect& r : ri) {
        const int64_t row = source_side ? r.sloc : r.dloc;
        const size_t n = static_cast<size_t>(r.len) * es;
        std::memcpy(out, src + (static_cast<size_t>(col * ld + row)) * es, n);
        out += n;
      }
    }
}
void unpack(const unsigned char* in, unsigned char* dst, int64_t ld, size_t es, const std::vector<Isect>& ri,
            const std::vector<Isect>& ci) {
  for (const Isect& c : ci)
    for (int64_t j = 0; j < c.len; ++j) {
      const int64_t col = c.dloc + j;
      for (const Isect& r : ri) {
        const size_t n = static_cast<size_t>(r.len) * es;
        std::memcpy(dst + (static_cast<size_t>(col * ld + r.dloc)) * es, in, n);
        in += n;
      }
    }
}

}  // namespace

// ---------------------------------------------------------------- pool
Pool::~Pool() { ::operator delete[](mem, std::align_val_t(kAlign)); }

tsr_status reserve(tsr_context ctx, size_t bytes) {
  std::shared_ptr<Pool> pool = std::static_pointer_cast<Pool>(ctx->gemm_pool);
  if (!pool) {
    pool.reset(new (std::nothrow) Pool());
    if (!pool) return fail(TSR_ERR_NO_MEMORY, "allocating the GEMM workspace pool");
    ctx->gemm_pool = pool;
  }
  if (pool->cap >= bytes) return TSR_SUCCESS;
  ::operator delete[](pool->mem, std::align_val_t(kAlign));
  pool->mem = nullptr;
  pool->cap = 0;
  pool->mem = static_cast<unsigned char*>(::operator new[](bytes, std::align_val_t(kAlign), std::nothrow));
  if (pool->mem == nullptr)
    return fail(TSR_ERR_NO_MEMORY, "allocating %zu bytes of GEMM workspace on this rank", bytes);
  pool->cap = bytes;
  return TSR_SUCCESS;
}

Arena::Arena(tsr_context ctx) {
  pool_ = static_cast<Pool*>(ctx->gemm_pool.get());
  if (pool_) {
    base_ = pool_->mem;
    cap_ = pool_->cap;
  }
}

Arena::~Arena() {
  if (overflowed_ && pool_) pool_->overflows += 1;
}

void* Arena::bytes(size_t n) {
  if (n == 0) return nullptr;
  const size_t p = padded(n);
  if (used_ + p <= cap_) {
    void* out = base_ + used_;
    used_ += p;
    return out;
  }
  overflowed_ = true;
  extra_.emplace_back(new (std::nothrow) unsigned char[p]);
  return extra_.back().get();
}

// ------------------------------------------------------- redistribution
size_t Redist::bytes() const {
  const size_t es = tsr_dtype_size(src->type);
  size_t b = 0;
  for (const Message& x : sends) b += padded(x.count * es);
  for (const Message& x : recvs) b += padded(x.count * es);
  return b;
}

Redist plan_redistribution(const Dist& src, int64_t sr0, int64_t sc0, const Dist& dst, int64_t dr0, int64_t dc0,
                           int64_t m, int64_t n) {
  Redist r;
  r.src = &src;
  r.dst = &dst;
  const int me = src.ctx->rank;
  const Replicas rep = replicas(src);
  // What this rank receives: from the chosen copy of every source position.
  std::vector<Piece> drp, dcp;
  if (dst.member && m > 0 && n > 0) {
    drp = window(dst.lay.rows, dst.m, dst.coords, dr0, m);
    dcp = window(dst.lay.cols, dst.n, dst.coords, dc0, n);
  }
  if (!drp.empty() && !dcp.empty()) {
    for (int gs = 0; gs < src.size(); ++gs) {
      const Dims sc = src.coords_of(gs);
      if (rep.index(src, sc) != me % rep.count) continue;
      Message msg;
      msg.ri = intersect(window(src.lay.rows, src.m, sc, sr0, m), drp);
      msg.ci = intersect(window(src.lay.cols, src.n, sc, sc0, n), dcp);
      msg.count = static_cast<size_t>(total(msg.ri) * total(msg.ci));
      if (msg.count == 0) continue;
      msg.peer = src.rank_of[static_cast<size_t>(gs)];
      if (msg.peer == me) {
        r.self = true;
        r.local = std::move(msg);
      } else {
        r.recvs.push_back(std::move(msg));
      }
    }
  }
  // What this rank sends: to every destination position whose chosen copy it holds.
  std::vector<Piece> srp, scp;
  if (src.member && m > 0 && n > 0) {
    srp = window(src.lay.rows, src.m, src.coords, sr0, m);
    scp = window(src.lay.cols, src.n, src.coords, sc0, n);
  }
  if (!srp.empty() && !scp.empty()) {
    const int mine = rep.index(src, src.coords);
    for (int gd = 0; gd < dst.size(); ++gd) {
      const int peer = dst.rank_of[static_cast<size_t>(gd)];
      if (peer == me || peer % rep.count != mine) continue;
      const Dims dc = dst.coords_of(gd);
      Message msg;
      msg.peer = peer;
      msg.ri = intersect(srp, window(dst.lay.rows, dst.m, dc, dr0, m));
      msg.ci = intersect(scp, window(dst.lay.cols, dst.n, dc, dc0, n));
      msg.count = static_cast<size_t>(total(msg.ri) * total(msg.ci));
      if (msg.count > 0) r.sends.push_back(std::move(msg));
    }
  }
  return r;
}

tsr_status run_redistribution(const Redist& r, const void* sbuf, void* dbuf, Arena& arena) {
  const Dist& src = *r.src;
  const Dist& dst = *r.dst;
  const Comm& world = *src.ctx->world;
  const tsr_dtype type = src.type;
  const size_t es = tsr_dtype_size(type);
  const unsigned char* sb = static_cast<const unsigned char*>(sbuf);
  unsigned char* db = static_cast<unsigned char*>(dbuf);
  const size_t mark = arena.mark();
  std::vector<Request> rreq(r.recvs.size()), sreq(r.sends.size());
  std::vector<unsigned char*> rbuf(r.recvs.size());
  // Post the receives, then pack and send, copy locally, wait, unpack.
  tsr_status st = TSR_SUCCESS;
  for (size_t x = 0; x < r.recvs.size() && st == TSR_SUCCESS; ++x) {
    const Message& msg = r.recvs[x];
    if (msg.count > static_cast<size_t>(INT_MAX)) {
      st = fail(TSR_ERR_UNSUPPORTED, "a redistribution message of %zu elements exceeds INT_MAX", msg.count);
      break;
    }
    rbuf[x] = static_cast<unsigned char*>(arena.bytes(msg.count * es));
    if (rbuf[x] == nullptr) st = fail(TSR_ERR_NO_MEMORY, "a redistribution buffer of %zu bytes", msg.count * es);
    if (st == TSR_SUCCESS) st = recv(world, rbuf[x], msg.count, type, msg.peer, kTag, &rreq[x]);
  }
  for (size_t x = 0; x < r.sends.size() && st == TSR_SUCCESS; ++x) {
    const Message& msg = r.sends[x];
    if (msg.count > static_cast<size_t>(INT_MAX)) {
      st = fail(TSR_ERR_UNSUPPORTED, "a redistribution message of %zu elements exceeds INT_MAX", msg.count);
      break;
    }
    unsigned char* buf = static_cast<unsigned char*>(arena.bytes(msg.count * es));
    if (buf == nullptr) {
      st = fail(TSR_ERR_NO_MEMORY, "a redistribution buffer of %zu bytes", msg.count * es);
      break;
    }
    pack(sb, src.ld, es, msg.ri, msg.ci, buf, true);
    st = send(world, buf, msg.count, type, msg.peer, kTag, &sreq[x]);
  }
  if (r.self && st == TSR_SUCCESS) {
    for (const Isect& c : r.local.ci)
      for (int64_t j = 0; j < c.len; ++j)
        for (const Isect& rr : r.local.ri)
          std::memcpy(db + static_cast<size_t>((c.dloc + j) * dst.ld + rr.dloc) * es,
                      sb + static_cast<size_t>((c.sloc + j) * src.ld + rr.sloc) * es, static_cast<size_t>(rr.len) * es);
  }
  tsr_status wst = TSR_SUCCESS;
  for (Request& q : rreq)
    if (q.active()) {
      const tsr_status x = wait(world, &q);
      if (wst == TSR_SUCCESS) wst = x;
    }
  for (Request& q : sreq)
    if (q.active()) {
      const tsr_status x = wait(world, &q);
      if (wst == TSR_SUCCESS) wst = x;
    }
  if (st == TSR_SUCCESS) st = wst;
  if (st == TSR_SUCCESS)
    for (size_t x = 0; x < r.recvs.size(); ++x) unpack(rbuf[x], db, dst.ld, es, r.recvs[x].ri, r.recvs[x].ci);
  arena.release(mark);
  return st;
}

namespace {

tsr_context ctx_of(tsr_matrix m) {
  return m != nullptr && m->magic == tsr_matrix_s::kMagic ? m->dist.ctx : nullptr;
}

bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  if (a == nullptr || b == nullptr || an == 0 || bn == 0) return false;
  const uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bn && y < x + an;
}

size_t extent(const Dist& d) {
  if (d.rows == 0 || d.cols == 0) return 0;
  return static_cast<size_t>(d.ld * (d.cols - 1) + d.rows) * tsr_dtype_size(d.type);
}

tsr_status check_local(const Dist& d, const void* buf, const char* name) {
  if (d.member && d.rows > 0 && d.cols > 0 && buf == nullptr)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL but this rank's local block is %lld x %lld", name,
                static_cast<long long>(d.rows), static_cast<long long>(d.cols));
  return TSR_SUCCESS;
}

tsr_status create(tsr_grid grid, int64_t m, int64_t n, tsr_dtype type, const tsr_layout* layout, int64_t ld,
                  tsr_matrix* mat) {
  TSR_TRY(check_grid(grid));
  tsr_context ctx = grid->ctx;
  Dims dims{grid->dims[0], grid->dims[1], grid->dims[2]};
  auto local = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(mat);
    *mat = nullptr;
    TSR_CHECK_NOT_NULL(layout);
    if (type != TSR_FLOAT32 && type != TSR_FLOAT64 && type != TSR_BFLOAT16)
      return fail(TSR_ERR_INVALID_ARG, "argument 'type' = %s; matrices are TSR_FLOAT32, TSR_FLOAT64 or TSR_BFLOAT16 "
                  "(bfloat16: inputs of device GEMMs)", dtype_name(type));
    const std::string why = layout_problem(*layout, dims);
    if (!why.empty()) return fail(TSR_ERR_INVALID_ARG, "argument 'layout': %s", why.c_str());
    if (m < 0 || n < 0)
      return fail(TSR_ERR_SHAPE, "arguments 'm' = %lld and 'n' = %lld must be >= 0", static_cast<long long>(m),
                  static_cast<long long>(n));
    if (ld < 0) return fail(TSR_ERR_SHAPE, "argument 'ld' = %lld must be >= 0", static_cast<long long>(ld));
    return TSR_SUCCESS;
  };
  tsr_status st = local();
  Dist d;
  if (st == TSR_SUCCESS) {
    d = grid_dist(grid, m, n, type, *layout, ld);
    if (ld > 0 && ld < std::max<int64_t>(1, d.rows))
      st = fail(TSR_ERR_SHAPE, "argument 'ld' = %lld is smaller than this rank's %lld local rows",
                static_cast<long long>(ld), static_cast<long long>(d.rows));
    else if (d.rows > static_cast<int64_t>(INT_MAX) || d.cols > static_cast<int64_t>(INT_MAX) ||
             d.rows * d.cols > static_cast<int64_t>(INT_MAX) || d.ld > static_cast<int64_t>(INT_MAX))
      st = fail(TSR_ERR_UNSUPPORTED, "this rank's local block of %lld x %lld (ld %lld) exceeds INT_MAX elements",
                static_cast<long long>(d.rows), static_cast<long long>(d.cols), static_cast<long long>(d.ld));
  }
  std::unique_ptr<tsr_matrix_s> out;
  if (st == TSR_SUCCESS) {
    out.reset(new (std::nothrow) tsr_matrix_s());
    if (!out) st = fail(TSR_ERR_NO_MEMORY, "allocating a matrix descriptor");
  }
  const bool ok = st == TSR_SUCCESS;
  TSR_TRY(agree(*ctx->world, st,
                std::vector<Same>{{"m", m}, {"n", n}, {"type", type}, {"layout->row_dim", ok ? layout->row_dim : 0},
                                  {"layout->col_dim", ok ? layout->col_dim : 0},
                                  {"layout->sub_dim", ok ? layout->sub_dim : 0},
                                  {"layout->row_block", ok ? layout->row_block : 0},
                                  {"layout->col_block", ok ? layout->col_block : 0}}));
  out->grid = grid;
  out->pub = *layout;
  out->dist = std::move(d);
  grid->live_matrices += 1;
  *mat = out.release();
  return TSR_SUCCESS;
}

// scatter (to_root false) or gather (true) between mat and a global matrix on root.
tsr_status root_move(tsr_matrix mat, int root, const void* from, void* to, int64_t ldg, bool to_root) {
  TSR_TRY(check_matrix(mat, "mat"));
  const Dist& d = mat->dist;
  tsr_context ctx = d.ctx;
  auto local = [&]() -> tsr_status {
    if (root < 0 || root >= ctx->size)
      return fail(TSR_ERR_INVALID_ARG, "argument 'root' = %d; expected 0 <= root < %d (context size)", root,
                  ctx->size);
    const void* global = to_root ? to : from;
    const void* loc = to_root ? from : to;
    if (ctx->rank == root) {
      if (ldg < std::max<int64_t>(1, d.m))
        return fail(TSR_ERR_INVALID_ARG, "argument 'ldg' = %lld is smaller than m = %lld", static_cast<long long>(ldg),
                    static_cast<long long>(d.m));
      if (global == nullptr && d.m > 0 && d.n > 0) return fail(TSR_ERR_INVALID_ARG, "argument 'global' is NULL on the root");
      size_t span = 0;  // elements of the global matrix: ldg*(n-1) + m, checked
      if (!checked_mul(&span, {static_cast<size_t>(ldg), static_cast<size_t>(std::max<int64_t>(0, d.n - 1)),
                               tsr_dtype_size(d.type)}) ||
          span > SIZE_MAX / 2)
        return fail(TSR_ERR_INVALID_ARG, "argument 'ldg' = %lld: ldg*(n-1) elements overflow size_t",
                    static_cast<long long>(ldg));
    }
    TSR_TRY(check_local(d, loc, "local"));
    if (ctx->rank == root && overlap(global, static_cast<size_t>(ldg * std::max<int64_t>(0, d.n - 1) + d.m) *
                                                 tsr_dtype_size(d.type),
                                     loc, extent(d)))
      return fail(TSR_ERR_INVALID_ARG, "arguments 'global' and 'local' overlap");
    return TSR_SUCCESS;
  };
  const std::vector<Same> same{{"root", root}, {"mat (its global size)", d.m * 65537 + d.n, true},
                               {"mat (its type)", d.type, true}, {"the call (scatter or gather)", to_root ? 1 : 0, true}};
  tsr_status st = local();
  const Dist r = st == TSR_SUCCESS ? root_dist(ctx, root, d.m, d.n, d.type, ldg) : Dist();
  Redist plan;
  if (st == TSR_SUCCESS) {
    plan = to_root ? plan_redistribution(d, 0, 0, r, 0, 0, d.m, d.n) : plan_redistribution(r, 0, 0, d, 0, 0, d.m, d.n);
    st = reserve(ctx, plan.bytes());
  }
  TSR_TRY(agree(*ctx->world, st, same));
  Arena arena(ctx);
  return run_redistribution(plan, from, to, arena);
}

}  // namespace
}  // namespace gemm
}  // namespace tsr

using tsr::finish;

extern "C" {

tsr_status tsr_matrix_create(tsr_grid grid, int64_t m, int64_t n, tsr_dtype type, const tsr_layout* layout, int64_t ld,
                             tsr_matrix* mat) {
  tsr_context c = grid != nullptr && grid->magic == tsr_grid_s::kMagic ? grid->ctx : nullptr;
  return finish(c, "tsr_matrix_create", tsr::gemm::create(grid, m, n, type, layout, ld, mat));
}

tsr_status tsr_matrix_destroy(tsr_matrix* mat) {
  tsr_status st = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(mat);
    if (*mat == nullptr) return TSR_SUCCESS;
    TSR_TRY(tsr::gemm::check_matrix(*mat, "*mat"));
    (*mat)->magic = 0;
    if ((*mat)->grid != nullptr) (*mat)->grid->live_matrices -= 1;
    delete *mat;
    *mat = nullptr;
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_matrix_destroy", st);
}

tsr_status tsr_matrix_local_size(tsr_matrix mat, int64_t* rows, int64_t* cols, int64_t* ld) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::gemm::check_matrix(mat, "mat"));
    TSR_CHECK_NOT_NULL(rows);
    TSR_CHECK_NOT_NULL(cols);
    TSR_CHECK_NOT_NULL(ld);
    *rows = mat->dist.rows;
    *cols = mat->dist.cols;
    *ld = mat->dist.ld;
    return TSR_SUCCESS;
  }();
  return finish(tsr::gemm::ctx_of(mat), "tsr_matrix_local_size", st);
}

tsr_status tsr_matrix_global_index(tsr_matrix mat, int64_t local_row, int64_t local_col, int64_t* global_row,
                                   int64_t* global_col) {
  const int64_t lr = local_row, lc = local_col;
  int64_t* gr = global_row;
  int64_t* gc = global_col;
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::gemm::check_matrix(mat, "mat"));
    TSR_CHECK_NOT_NULL(global_row);
    TSR_CHECK_NOT_NULL(global_col);
    const tsr::gemm::Dist& d = mat->dist;
    if (lr < 0 || lr >= d.rows || lc < 0 || lc >= d.cols)
      return tsr::fail(TSR_ERR_INVALID_ARG, "local index (%lld, %lld) is outside this rank's %lld x %lld block",
                       static_cast<long long>(lr), static_cast<long long>(lc), static_cast<long long>(d.rows),
                       static_cast<long long>(d.cols));
    auto find = [](const std::vector<tsr::gemm::Piece>& ps, int64_t l) {
      for (const tsr::gemm::Piece& p : ps)
        if (l >= p.loc && l < p.loc + p.len) return p.g + (l - p.loc);
      return int64_t(-1);
    };
    *gr = find(tsr::gemm::pieces(d.lay.rows, d.m, d.coords), lr);
    *gc = find(tsr::gemm::pieces(d.lay.cols, d.n, d.coords), lc);
    return TSR_SUCCESS;
  }();
  return finish(tsr::gemm::ctx_of(mat), "tsr_matrix_global_index", st);
}

tsr_status tsr_matrix_info(tsr_matrix mat, int64_t* m, int64_t* n, tsr_dtype* type, tsr_layout* layout,
                           tsr_grid* grid) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::gemm::check_matrix(mat, "mat"));
    if (m) *m = mat->dist.m;
    if (n) *n = mat->dist.n;
    if (type) *type = mat->dist.type;
    if (layout) *layout = mat->pub;
    if (grid) *grid = mat->grid;
    return TSR_SUCCESS;
  }();
  return finish(tsr::gemm::ctx_of(mat), "tsr_matrix_info", st);
}

tsr_status tsr_matrix_scatter(tsr_matrix mat, int root, const void* global, int64_t ldg, void* local) {
  return finish(tsr::gemm::ctx_of(mat), "tsr_matrix_scatter",
                tsr::gemm::root_move(mat, root, global, local, ldg, false));
}

tsr_status tsr_matrix_gather(tsr_matrix mat, int root, const void* local, void* global, int64_t ldg) {
  return finish(tsr::gemm::ctx_of(mat), "tsr_matrix_gather", tsr::gemm::root_move(mat, root, local, global, ldg, true));
}

tsr_status tsr_matrix_redistribute(tsr_matrix src, const void* sbuf, tsr_matrix dst, void* dbuf) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::gemm::check_matrix(src, "src"));
    TSR_TRY(tsr::gemm::check_matrix(dst, "dst"));
    const tsr::gemm::Dist &s = src->dist, &d = dst->dist;
    if (s.ctx != d.ctx)
      return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'src' and 'dst' belong to different contexts");
    auto local = [&]() -> tsr_status {
      if (s.type != d.type)
        return tsr::fail(TSR_ERR_INVALID_ARG, "'src' is %s but 'dst' is %s: a redistribution does not convert types",
                         tsr::dtype_name(s.type), tsr::dtype_name(d.type));
      if (s.m != d.m || s.n != d.n)
        return tsr::fail(TSR_ERR_SHAPE, "'src' is %lld x %lld %s but 'dst' is %lld x %lld %s",
                         static_cast<long long>(s.m), static_cast<long long>(s.n), tsr::dtype_name(s.type),
                         static_cast<long long>(d.m), static_cast<long long>(d.n), tsr::dtype_name(d.type));
      TSR_TRY(tsr::gemm::check_local(s, sbuf, "sbuf"));
      TSR_TRY(tsr::gemm::check_local(d, dbuf, "dbuf"));
      if (tsr::gemm::overlap(sbuf, tsr::gemm::extent(s), dbuf, tsr::gemm::extent(d)))
        return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'sbuf' and 'dbuf' overlap");
      return TSR_SUCCESS;
    };
    const std::vector<tsr::Same> same{{"src (its global size)", s.m * 65537 + s.n, true},
                                      {"src (its type)", s.type, true}, {"dst (its global size)", d.m * 65537 + d.n, true},
                                      {"dst (its type)", d.type, true}};
    tsr_status lst = local();
    tsr::gemm::Redist plan;
    if (lst == TSR_SUCCESS) {
      plan = tsr::gemm::plan_redistribution(s, 0, 0, d, 0, 0, s.m, s.n);
      lst = tsr::gemm::reserve(s.ctx, plan.bytes());
    }
    TSR_TRY(tsr::agree(*s.ctx->world, lst, same));
    tsr::gemm::Arena arena(s.ctx);
    return tsr::gemm::run_redistribution(plan, sbuf, dbuf, arena);
  }();
  return finish(tsr::gemm::ctx_of(src), "tsr_matrix_redistribute", st);
}

}  // extern "C"

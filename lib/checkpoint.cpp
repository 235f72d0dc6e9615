// Checkpoints (include/tessera/io.h): distributed matrices, shard arrays,
// replicated arrays, optimizer states and typed attributes in one file of the
// I/O layer (io.hpp), committed atomically; read back into any layout.
//
// Matrices are stored m x n row-major at their global shape. A rank's local
// block of a balanced layout is one rectangle of the matrix: it is written
// (by one replica) and read (by every replica) directly as an I/O block, so
// no data move between ranks; block-cyclic layouts go through the balanced
// layout on the same grid by redistribution (the transport).
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <new>
#include <set>

#include "context.hpp"
#include "core.hpp"
#include "gemm_internal.hpp"
#include "io.hpp"
#include "optimizer_impl.hpp"
#include "state_io.hpp"
#include "tessera/io.h"
#include "tessera/tsr_config.h"
#include "transport.hpp"

namespace {

enum class Kind { matrix, shard, replicated, optimizer };

struct Put {
  Kind kind = Kind::shard;
  std::string name;              // array name, or the optimizer's prefix
  tsr_matrix mat = nullptr;      // matrix
  const void* data = nullptr;    // matrix local buffer, shard, replicated data
  tsr::io::Block block;          // shard and replicated: the I/O block (data at commit)
  tsr_optimizer opt = nullptr;   // optimizer
};

}  // namespace

struct tsr_checkpoint_s {
  static constexpr unsigned kMagic = 0x636b7074u;
  unsigned magic = kMagic;
  tsr_context ctx = nullptr;
  std::string path;
  bool writing = false;
  bool committed = false;
  bool sync = true;
  tsr::io::Format fmt = tsr::io::Format::binary;
  // writing
  std::vector<Put> puts;
  std::set<std::string> names;  // arrays put so far (optimizers: their datasets)
  tsr::io::Attrs attrs;         // user attributes
  std::set<std::string> opt_keys;  // attribute keys of the optimizers put
  // reading
  std::vector<tsr::io::DatasetInfo> sets;
  std::vector<std::string> keys;  // attrs' keys, sorted
};

namespace tsr {
namespace {

using io::Attrs;
using io::Block;
using io::Value;

tsr_status check_ckpt(tsr_checkpoint c) {
  if (c == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'ckpt' is NULL");
  if (c->magic != tsr_checkpoint_s::kMagic)
    return fail(TSR_ERR_INVALID_ARG, "argument 'ckpt' is not a live tessera checkpoint");
  return TSR_SUCCESS;
}

tsr_context ctx_of(tsr_checkpoint c) {
  return c != nullptr && c->magic == tsr_checkpoint_s::kMagic ? c->ctx : nullptr;
}

const char* P(const tsr_checkpoint_s& c) { return c.path.c_str(); }

// The checks every collective call on a handle makes, as a local status.
tsr_status check_mode(const tsr_checkpoint_s& c, bool writing) {
  if (writing && !c.writing)
    return fail(TSR_ERR_STATE, "checkpoint '%s' was opened for reading; create a new one to write", P(c));
  if (writing && c.committed)
    return fail(TSR_ERR_STATE, "checkpoint '%s' is committed; create a new one to write again", P(c));
  if (!writing && c.writing)
    return fail(TSR_ERR_STATE, "checkpoint '%s' is being written; open it to read", P(c));
  return TSR_SUCCESS;
}

// Local status, then (once every rank passed) the description digest: a
// mismatch names the array and what must agree.
tsr_status agree2(const Comm& w, tsr_status local, uint64_t same, const tsr_checkpoint_s& c, const std::string& name,
                  const char* what) {
  TSR_TRY(agree(w, local));
  const tsr_status st = agree(w, TSR_SUCCESS, &same);
  if (st != TSR_ERR_INVALID_ARG) return st;
  return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s', array '%s': %s differ across the %d ranks; every rank must pass the same",
              P(c), name.c_str(), what, w.size());
}

uint64_t hash_str(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

tsr_status check_name(const tsr_checkpoint_s& c, const char* name, const char* arg) {
  if (name == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", arg);
  if (!io::name_valid(name) || std::strncmp(name, "tessera_", 8) == 0)
    return fail(TSR_ERR_INVALID_ARG,
                "checkpoint '%s': argument '%s' = '%s' is not 1..255 characters of [A-Za-z0-9_.-] "
                "(nor '.', '..', nor starting with 'tessera_')",
                P(c), arg, name);
  return TSR_SUCCESS;
}

tsr_status check_new_name(const tsr_checkpoint_s& c, const char* name) {
  TSR_TRY(check_name(c, name, "name"));
  if (c.names.count(name))
    return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s': an array named '%s' was already put", P(c), name);
  return TSR_SUCCESS;
}

// ------------------------------------------------------------ create/open
tsr_status create(tsr_context ctx, const char* path, tsr_ckpt_format format, int flags, tsr_checkpoint* out) {
  TSR_TRY(check_context(ctx));
  const Comm& w = *ctx->world;
  auto local = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(out);
    *out = nullptr;
    TSR_CHECK_NOT_NULL(path);
    if (*path == '\0') return fail(TSR_ERR_INVALID_ARG, "argument 'path' is empty");
    if (format != TSR_CKPT_AUTO && format != TSR_CKPT_HDF5 && format != TSR_CKPT_BINARY)
      return fail(TSR_ERR_INVALID_ARG, "argument 'format' = %d is not a tsr_ckpt_format", static_cast<int>(format));
    if (flags & ~TSR_CKPT_NO_SYNC)
      return fail(TSR_ERR_INVALID_ARG, "argument 'flags' = %d: only TSR_CKPT_NO_SYNC (1) is defined", flags);
    if (format == TSR_CKPT_HDF5 && !TSR_HAVE_HDF5)
      return fail(TSR_ERR_UNSUPPORTED, "checkpoint '%s': this build has no parallel HDF5; use TSR_CKPT_BINARY or "
                  "TSR_CKPT_AUTO", path);
    return TSR_SUCCESS;
  };
  tsr_status st = local();
  const uint64_t same = st == TSR_SUCCESS ? digest({format, flags}, hash_str(path)) : 0;
  TSR_TRY(agree(w, st));
  st = agree(w, TSR_SUCCESS, &same);
  if (st != TSR_SUCCESS)
    return fail(st, "arguments 'path', 'format' or 'flags' differ across the %d ranks; every rank must pass the same",
                w.size());
  std::unique_ptr<tsr_checkpoint_s> c(new (std::nothrow) tsr_checkpoint_s());
  TSR_TRY(agree(w, c ? TSR_SUCCESS : fail(TSR_ERR_NO_MEMORY, "allocating a checkpoint")));
  c->ctx = ctx;
  c->path = path;
  c->writing = true;
  c->sync = (flags & TSR_CKPT_NO_SYNC) == 0;
  c->fmt = format == TSR_CKPT_BINARY ? io::Format::binary
           : format == TSR_CKPT_HDF5 ? io::Format::hdf5
                                     : (TSR_HAVE_HDF5 ? io::Format::hdf5 : io::Format::binary);
  *out = c.release();
  return TSR_SUCCESS;
}

tsr_status open(tsr_context ctx, const char* path, tsr_checkpoint* out) {
  TSR_TRY(check_context(ctx));
  const Comm& w = *ctx->world;
  auto local = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(out);
    *out = nullptr;
    TSR_CHECK_NOT_NULL(path);
    return TSR_SUCCESS;
  };
  TSR_TRY(agree(w, local()));
  std::unique_ptr<tsr_checkpoint_s> c(new (std::nothrow) tsr_checkpoint_s());
  TSR_TRY(agree(w, c ? TSR_SUCCESS : fail(TSR_ERR_NO_MEMORY, "allocating a checkpoint")));
  c->ctx = ctx;
  c->path = path;
  Attrs attrs;
  TSR_TRY(io::inspect(w, path, &c->sets, &c->fmt, &attrs));
  c->attrs = std::move(attrs);
  for (const auto& kv : c->attrs) c->keys.push_back(kv.first);
  *out = c.release();
  return TSR_SUCCESS;
}

// ----------------------------------------------------------------- matrices
const gemm::Dist& dist_of(tsr_matrix m) { return m->dist; }

// This rank's local block of a balanced layout as one rectangle of the
// matrix: rows [r0, r0 + nr), columns [c0, c0 + nc).
struct Rect {
  int64_t r0 = 0, nr = 0, c0 = 0, nc = 0;
};
bool rect_of(const gemm::Dist& d, Rect* r) {
  *r = Rect();
  if (!d.member || d.rows == 0 || d.cols == 0) return true;
  const std::vector<gemm::Piece> rp = gemm::pieces(d.lay.rows, d.m, d.coords);
  const std::vector<gemm::Piece> cp = gemm::pieces(d.lay.cols, d.n, d.coords);
  if (rp.size() != 1 || cp.size() != 1) return false;
  *r = {rp[0].g, rp[0].len, cp[0].g, cp[0].len};
  return true;
}

// The replica of a block that writes it: coordinate 0 along every grid
// dimension the layout does not use.
bool writes(const gemm::Dist& d) {
  if (!d.member) return false;
  for (int k = 0; k < 3; ++k)
    if (!d.lay.rows.has(k) && !d.lay.cols.has(k) && d.coords[k] != 0) return false;
  return true;
}

tsr_status check_matrix_for(const tsr_checkpoint_s& c, tsr_matrix mat, const void* local, const char* arg) {
  TSR_TRY(gemm::check_matrix(mat, "mat"));
  const gemm::Dist& d = dist_of(mat);
  if (d.ctx != c.ctx)
    return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s': argument 'mat' belongs to another context", P(c));
  if (d.lay.cyclic() && mat->grid == nullptr)
    return fail(TSR_ERR_UNSUPPORTED, "checkpoint '%s': argument 'mat' is a ScaLAPACK descriptor; redistribute it to a "
                "matrix on a tessera grid first", P(c));
  if (d.member && d.rows > 0 && d.cols > 0 && local == nullptr)
    return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL but this rank's local block is %" PRId64 " x %" PRId64, arg,
                d.rows, d.cols);
  return TSR_SUCCESS;
}

uint64_t matrix_digest(const gemm::Dist& d, const std::string& name) {
  return digest({d.m, d.n, d.type}, hash_str(name));
}

// A balanced twin of a block-cyclic matrix (same grid, size and type), with
// its local buffer.
struct Twin {
  tsr_matrix mat = nullptr;
  std::vector<unsigned char> buf;
  Twin() = default;
  Twin(const Twin&) = delete;
  Twin& operator=(const Twin&) = delete;
  ~Twin() { tsr_matrix_destroy(&mat); }
};

tsr_status make_twin(tsr_matrix src, Twin* t) {
  const gemm::Dist& d = dist_of(src);
  tsr_layout bal = src->pub;
  bal.row_block = 0;
  bal.col_block = 0;
  TSR_TRY(tsr_matrix_create(src->grid, d.m, d.n, d.type, &bal, 0, &t->mat));
  const gemm::Dist& e = dist_of(t->mat);
  tsr_status st = TSR_SUCCESS;
  try {
    t->buf.resize(static_cast<size_t>(e.rows * e.cols) * tsr_dtype_size(e.type));
  } catch (const std::bad_alloc&) {
    st = fail(TSR_ERR_NO_MEMORY, "allocating a %" PRId64 " x %" PRId64 " block", e.rows, e.cols);
  }
  return agree(*d.ctx->world, st);
}

// Column-major local block (ld) <-> row-major rectangle.
void to_rows(const unsigned char* src, int64_t ld, int64_t nr, int64_t nc, size_t es, unsigned char* dst) {
  for (int64_t i = 0; i < nr; ++i)
    for (int64_t j = 0; j < nc; ++j)
      std::memcpy(dst + static_cast<size_t>(i * nc + j) * es, src + static_cast<size_t>(j * ld + i) * es, es);
}
void from_rows(const unsigned char* src, int64_t nr, int64_t nc, size_t es, unsigned char* dst, int64_t ld) {
  for (int64_t j = 0; j < nc; ++j)
    for (int64_t i = 0; i < nr; ++i)
      std::memcpy(dst + static_cast<size_t>(j * ld + i) * es, src + static_cast<size_t>(i * nc + j) * es, es);
}

// The I/O block of a balanced matrix's rectangle (empty for ranks that do not write / read).
Block matrix_block(const std::string& name, const gemm::Dist& d, const Rect& r, bool active, void* data) {
  Block b;
  b.name = name;
  b.type = d.type;
  b.ndims = 2;
  b.global[0] = static_cast<uint64_t>(d.m);
  b.global[1] = static_cast<uint64_t>(d.n);
  if (active && r.nr > 0 && r.nc > 0) {
    b.offset[0] = static_cast<uint64_t>(r.r0);
    b.offset[1] = static_cast<uint64_t>(r.c0);
    b.extent[0] = static_cast<uint64_t>(r.nr);
    b.extent[1] = static_cast<uint64_t>(r.nc);
  } else {
    b.extent[0] = 0;
    b.extent[1] = 0;
  }
  b.data = data;
  return b;
}

tsr_status put_matrix(tsr_checkpoint c, const char* name, tsr_matrix mat, const void* local) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  auto check = [&]() -> tsr_status {
    TSR_TRY(check_mode(*c, true));
    TSR_TRY(check_new_name(*c, name));
    return check_matrix_for(*c, mat, local, "local");
  };
  const tsr_status st = check();
  const std::string n = st == TSR_SUCCESS ? name : "";
  TSR_TRY(agree2(w, st, st == TSR_SUCCESS ? matrix_digest(mat->dist, n) : 0, *c, n, "the name, size and type"));
  Put p;
  p.kind = Kind::matrix;
  p.name = n;
  p.mat = mat;
  p.data = local;
  c->puts.push_back(p);
  c->names.insert(n);
  return TSR_SUCCESS;
}

tsr_status get_matrix(tsr_checkpoint c, const char* name, tsr_matrix mat, void* local) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  auto check = [&]() -> tsr_status {
    TSR_TRY(check_mode(*c, false));
    TSR_TRY(check_name(*c, name, "name"));
    return check_matrix_for(*c, mat, local, "local");
  };
  const tsr_status st = check();
  const std::string n = st == TSR_SUCCESS ? name : "";
  TSR_TRY(agree2(w, st, st == TSR_SUCCESS ? matrix_digest(mat->dist, n) : 0, *c, n, "the name, size and type"));
  Twin twin;
  tsr_matrix target = mat;
  void* tbuf = local;
  if (mat->dist.lay.cyclic()) {
    TSR_TRY(make_twin(mat, &twin));
    target = twin.mat;
    tbuf = twin.buf.data();
  }
  const gemm::Dist& d = dist_of(target);
  Rect r;
  std::vector<unsigned char> rows;
  tsr_status ls = rect_of(d, &r) ? TSR_SUCCESS
                                 : fail(TSR_ERR_UNSUPPORTED, "checkpoint '%s', array '%s': layout with split blocks", P(*c), n.c_str());
  if (ls == TSR_SUCCESS) {
    try {
      rows.resize(static_cast<size_t>(r.nr * r.nc) * tsr_dtype_size(d.type));
    } catch (const std::bad_alloc&) {
      ls = fail(TSR_ERR_NO_MEMORY, "checkpoint '%s', array '%s': allocating %" PRId64 " x %" PRId64 " elements", P(*c),
                n.c_str(), r.nr, r.nc);
    }
  }
  TSR_TRY(agree(w, ls));
  std::vector<Block> blocks{matrix_block(n, d, r, true, rows.data())};
  TSR_TRY(io::read(w, c->path, blocks, nullptr));
  if (r.nr > 0 && r.nc > 0)
    from_rows(rows.data(), r.nr, r.nc, tsr_dtype_size(d.type), static_cast<unsigned char*>(tbuf), d.ld);
  if (target != mat) TSR_TRY(tsr_matrix_redistribute(target, tbuf, mat, local));
  return TSR_SUCCESS;
}

// ------------------------------------------------------------ shard arrays
tsr_status put_shard(tsr_checkpoint c, const char* name, tsr_dtype type, uint64_t global, uint64_t offset,
                     uint64_t count, const void* local) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  auto check = [&]() -> tsr_status {
    TSR_TRY(check_mode(*c, true));
    TSR_TRY(check_new_name(*c, name));
    if (!dtype_valid(type))
      return fail(TSR_ERR_INVALID_ARG, "argument 'type' = %d is not a tsr_dtype", static_cast<int>(type));
    if (offset > global || count > global - offset)
      return fail(TSR_ERR_SHAPE, "checkpoint '%s', array '%s': shard [offset %" PRIu64 ", + count %" PRIu64
                  ") lies outside global_count %" PRIu64, P(*c), name, offset, count, global);
    if (count > 0 && local == nullptr)
      return fail(TSR_ERR_INVALID_ARG, "argument 'local' is NULL for a shard of %" PRIu64 " elements", count);
    return TSR_SUCCESS;
  };
  const tsr_status st = check();
  const std::string n = st == TSR_SUCCESS ? name : "";
  TSR_TRY(agree2(w, st, digest({type, static_cast<int64_t>(global)}, hash_str(n)), *c, n,
                 "the name, type and global_count"));
  // The shards must tile [0, global): one all-gather of (offset, count).
  const uint64_t mine[2] = {offset, count};
  std::vector<uint64_t> all(2 * static_cast<size_t>(w.size()));
  TSR_TRY(allgather(w, mine, 2, all.data(), TSR_INT64, nullptr, Traffic::control));
  std::vector<std::pair<uint64_t, uint64_t>> s;
  for (int r = 0; r < w.size(); ++r)
    if (all[2 * r + 1] > 0) s.emplace_back(all[2 * r], all[2 * r + 1]);
  std::sort(s.begin(), s.end());
  uint64_t at = 0;
  for (const auto& x : s) {
    if (x.first != at)
      return fail(TSR_ERR_SHAPE, "checkpoint '%s', array '%s': the ranks' shards do not tile [0, %" PRIu64 "): %s at %" PRIu64,
                  P(*c), n.c_str(), global, x.first > at ? "a gap" : "an overlap", std::min(at, x.first));
    at += x.second;
  }
  if (at != global)
    return fail(TSR_ERR_SHAPE, "checkpoint '%s', array '%s': the ranks' shards cover [0, %" PRIu64 ") of global_count %" PRIu64,
                P(*c), n.c_str(), at, global);
  Put p;
  p.kind = Kind::shard;
  p.name = n;
  p.block.name = n;
  p.block.type = type;
  p.block.ndims = 1;
  p.block.global[0] = global;
  p.block.offset[0] = count ? offset : 0;
  p.block.extent[0] = count;
  p.data = local;
  c->puts.push_back(p);
  c->names.insert(n);
  return TSR_SUCCESS;
}

const io::DatasetInfo* find_set(const tsr_checkpoint_s& c, const std::string& name) {
  for (const io::DatasetInfo& s : c.sets)
    if (s.name == name) return &s;
  return nullptr;
}

uint64_t elements(const io::DatasetInfo& s) {
  uint64_t n = 1;
  for (int k = 0; k < s.ndims; ++k) n *= s.global[k];  // the I/O layer checked the byte size
  return n;
}

// The array name of the file, of kind type and ndims (0: any).
tsr_status find_typed(const tsr_checkpoint_s& c, const std::string& name, tsr_dtype type, const io::DatasetInfo** out) {
  const io::DatasetInfo* s = find_set(c, name);
  if (s == nullptr) return fail(TSR_ERR_IO, "checkpoint '%s' has no array '%s'", P(c), name.c_str());
  if (s->type != type)
    return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s', array '%s': the file holds %s, argument 'type' is %s", P(c),
                name.c_str(), dtype_name(s->type), dtype_name(type));
  *out = s;
  return TSR_SUCCESS;
}

tsr_status get_shard(tsr_checkpoint c, const char* name, tsr_dtype type, uint64_t global, uint64_t offset,
                     uint64_t count, void* local) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  const io::DatasetInfo* s = nullptr;
  auto check = [&]() -> tsr_status {
    TSR_TRY(check_mode(*c, false));
    TSR_TRY(check_name(*c, name, "name"));
    if (!dtype_valid(type))
      return fail(TSR_ERR_INVALID_ARG, "argument 'type' = %d is not a tsr_dtype", static_cast<int>(type));
    TSR_TRY(find_typed(*c, name, type, &s));
    if (s->ndims != 1)
      return fail(TSR_ERR_SHAPE, "checkpoint '%s', array '%s' has %d dimensions; shards are read from 1D arrays", P(*c),
                  name, s->ndims);
    if (global != elements(*s))
      return fail(TSR_ERR_SHAPE, "checkpoint '%s', array '%s' has %" PRIu64 " elements, argument 'global_count' is %" PRIu64,
                  P(*c), name, elements(*s), global);
    if (offset > global || count > global - offset)
      return fail(TSR_ERR_SHAPE, "checkpoint '%s', array '%s': [offset %" PRIu64 ", + count %" PRIu64
                  ") lies outside global_count %" PRIu64, P(*c), name, offset, count, global);
    if (count > 0 && local == nullptr)
      return fail(TSR_ERR_INVALID_ARG, "argument 'local' is NULL for %" PRIu64 " elements", count);
    return TSR_SUCCESS;
  };
  const tsr_status st = check();
  const std::string n = st == TSR_SUCCESS ? name : "";
  TSR_TRY(agree2(w, st, digest({type, static_cast<int64_t>(global)}, hash_str(n)), *c, n,
                 "the name, type and global_count"));
  Block b;
  b.name = n;
  b.type = type;
  b.global[0] = global;
  b.offset[0] = count ? offset : 0;
  b.extent[0] = count;
  b.data = local;
  std::vector<Block> blocks{b};
  return io::read(w, c->path, blocks, nullptr);
}

// ------------------------------------------------------- replicated arrays
tsr_status check_shape(const tsr_checkpoint_s& c, const char* name, int ndims, const uint64_t* shape, tsr_dtype type,
                       const void* data, const char* dataarg) {
  if (!dtype_valid(type))
    return fail(TSR_ERR_INVALID_ARG, "argument 'type' = %d is not a tsr_dtype", static_cast<int>(type));
  if (ndims < 1 || ndims > 3) return fail(TSR_ERR_INVALID_ARG, "argument 'ndims' = %d, expected 1..3", ndims);
  TSR_CHECK_NOT_NULL(shape);
  uint64_t bytes = tsr_dtype_size(type);
  for (int k = 0; k < ndims; ++k)
    if (__builtin_mul_overflow(bytes, shape[k], &bytes))
      return fail(TSR_ERR_UNSUPPORTED, "checkpoint '%s', array '%s': the shape's byte count overflows", P(c), name);
  if (bytes > 0 && data == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", dataarg);
  return TSR_SUCCESS;
}

uint64_t shape_digest(const std::string& name, tsr_dtype type, int ndims, const uint64_t* shape) {
  uint64_t h = digest({type, ndims}, hash_str(name));
  for (int k = 0; k < ndims; ++k) h = digest({static_cast<int64_t>(shape[k])}, h);
  return h;
}

tsr_status put_replicated(tsr_checkpoint c, const char* name, tsr_dtype type, int ndims, const uint64_t* shape,
                          const void* data) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  auto check = [&]() -> tsr_status {
    TSR_TRY(check_mode(*c, true));
    TSR_TRY(check_new_name(*c, name));
    return check_shape(*c, name, ndims, shape, type, data, "data");
  };
  const tsr_status st = check();
  const std::string n = st == TSR_SUCCESS ? name : "";
  TSR_TRY(agree2(w, st, st == TSR_SUCCESS ? shape_digest(n, type, ndims, shape) : 0, *c, n, "the name, type and shape"));
  Put p;
  p.kind = Kind::replicated;
  p.name = n;
  p.block.name = n;
  p.block.type = type;
  p.block.ndims = ndims;
  for (int k = 0; k < ndims; ++k) {
    p.block.global[k] = shape[k];
    p.block.extent[k] = w.rank() == 0 ? shape[k] : 0;
  }
  p.data = data;
  c->puts.push_back(p);
  c->names.insert(n);
  return TSR_SUCCESS;
}

tsr_status get_replicated(tsr_checkpoint c, const char* name, tsr_dtype type, int ndims, const uint64_t* shape,
                          void* data) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  auto check = [&]() -> tsr_status {
    TSR_TRY(check_mode(*c, false));
    TSR_TRY(check_name(*c, name, "name"));
    TSR_TRY(check_shape(*c, name, ndims, shape, type, data, "data"));
    const io::DatasetInfo* s = nullptr;
    TSR_TRY(find_typed(*c, name, type, &s));
    bool same = s->ndims == ndims;
    for (int k = 0; same && k < ndims; ++k) same = s->global[k] == shape[k];
    if (!same) {
      std::string have, want;
      for (int k = 0; k < s->ndims; ++k) have += (k ? "x" : "") + std::to_string(s->global[k]);
      for (int k = 0; k < ndims; ++k) want += (k ? "x" : "") + std::to_string(shape[k]);
      return fail(TSR_ERR_SHAPE, "checkpoint '%s', array '%s' has shape %s; arguments 'ndims' and 'shape' say %s",
                  P(*c), name, have.c_str(), want.c_str());
    }
    return TSR_SUCCESS;
  };
  const tsr_status st = check();
  const std::string n = st == TSR_SUCCESS ? name : "";
  TSR_TRY(agree2(w, st, st == TSR_SUCCESS ? shape_digest(n, type, ndims, shape) : 0, *c, n, "the name, type and shape"));
  Block b;
  b.name = n;
  b.type = type;
  b.ndims = ndims;
  for (int k = 0; k < ndims; ++k) {
    b.global[k] = shape[k];
    b.extent[k] = shape[k];
  }
  b.data = data;
  std::vector<Block> blocks{b};
  return io::read(w, c->path, blocks, nullptr);
}

// A 64-bit digest of bytes (for comparing replicas; not cryptographic).
uint64_t bytes_digest(const void* p, size_t n) {
  const unsigned char* s = static_cast<const unsigned char*>(p);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    std::memcpy(&x, s + i, 8);
    h = (h ^ x) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  for (; i < n; ++i) h = (h ^ s[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

// -------------------------------------------------------------- optimizers
std::string opt_prefix(const char* prefix) { return prefix && *prefix ? std::string(prefix) + "." : std::string(); }

tsr_status put_optimizer(tsr_checkpoint c, const char* prefix, tsr_optimizer opt) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  std::vector<Block> blocks;
  Attrs attrs;
  opt::StateParts keep;
  auto check = [&]() -> tsr_status {
    TSR_TRY(check_mode(*c, true));
    if (prefix && *prefix) TSR_TRY(check_name(*c, prefix, "prefix"));
    TSR_TRY(check_optimizer(opt));
    if (opt->ctx != c->ctx)
      return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s': argument 'opt' belongs to another context", P(*c));
    TSR_TRY(opt::state_blocks(opt, opt_prefix(prefix), &keep, &blocks, &attrs));
    for (const Block& b : blocks)
      if (c->names.count(b.name))
        return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s': the optimizer's array '%s' clashes with one already put "
                    "(choose another 'prefix')", P(*c), b.name.c_str());
    for (const auto& kv : attrs)
      if (c->opt_keys.count(kv.first))
        return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s': an optimizer with 'prefix' '%s' was already put", P(*c),
                    prefix ? prefix : "");
    return TSR_SUCCESS;
  };
  const tsr_status st = check();
  const std::string n = st == TSR_SUCCESS ? opt_prefix(prefix) : "";
  uint64_t same = hash_str(n);
  for (const Block& b : blocks) same = digest({b.type, static_cast<int64_t>(b.global[0]), static_cast<int64_t>(b.global[1])},
                                              hash_str(b.name, same));
  TSR_TRY(agree2(w, st, same, *c, n.empty() ? std::string("(optimizer)") : n, "the prefix and the optimizer's shape"));
  Put p;
  p.kind = Kind::optimizer;
  p.name = n;
  p.opt = opt;
  c->puts.push_back(p);
  for (const Block& b : blocks) c->names.insert(b.name);
  for (const auto& kv : attrs) c->opt_keys.insert(kv.first);
  return TSR_SUCCESS;
}

tsr_status get_optimizer(tsr_checkpoint c, const char* prefix, tsr_optimizer opt) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  auto check = [&]() -> tsr_status {
    TSR_TRY(check_mode(*c, false));
    if (prefix && *prefix) TSR_TRY(check_name(*c, prefix, "prefix"));
    TSR_TRY(check_optimizer(opt));
    if (opt->ctx != c->ctx)
      return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s': argument 'opt' belongs to another context", P(*c));
    return TSR_SUCCESS;
  };
  const tsr_status st = check();
  const std::string n = st == TSR_SUCCESS ? opt_prefix(prefix) : "";
  TSR_TRY(agree2(w, st, hash_str(n), *c, n, "the prefixes"));
  const std::string where = "checkpoint '" + c->path + "', optimizer '" + (prefix ? prefix : "") + "'";
  return opt::state_restore(opt, c->path, n, c->sets, c->attrs, where);
}

// ---------------------------------------------------------------- attrs
tsr_status set_attr(tsr_checkpoint c, const char* key, const Value& v, bool value_null = false) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  auto check = [&]() -> tsr_status {
    TSR_TRY(check_mode(*c, true));
    TSR_TRY(check_name(*c, key, "key"));
    if (value_null) return fail(TSR_ERR_INVALID_ARG, "argument 'value' is NULL");
    if (c->opt_keys.count(key))
      return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s': attribute '%s' belongs to an optimizer put", P(*c), key);
    if (v.text.size() > 65535)
      return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s': argument 'value' of attribute '%s' exceeds 65535 bytes", P(*c), key);
    return TSR_SUCCESS;
  };
  const tsr_status st = check();
  int64_t bits = v.i;
  if (v.kind == TSR_ATTR_DOUBLE) std::memcpy(&bits, &v.d, 8);
  const std::string k = st == TSR_SUCCESS ? key : "";
  TSR_TRY(agree(w, st));
  const uint64_t same = digest({v.kind, bits}, hash_str(v.text, hash_str(k)));
  const tsr_status agreed = agree(w, TSR_SUCCESS, &same);
  if (agreed != TSR_SUCCESS)
    return fail(agreed, "checkpoint '%s': attribute '%s': argument 'key' or 'value' differs across the %d ranks", P(*c),
                k.c_str(), w.size());
  c->attrs[k] = v;
  return TSR_SUCCESS;
}

const Value* find_attr(const tsr_checkpoint_s& c, const char* key, tsr_attr_kind kind, tsr_status* st) {
  *st = TSR_SUCCESS;
  if (key == nullptr) {
    *st = fail(TSR_ERR_INVALID_ARG, "argument 'key' is NULL");
    return nullptr;
  }
  auto it = c.attrs.find(key);
  if (it == c.attrs.end()) {
    *st = fail(TSR_ERR_INVALID_ARG, "checkpoint '%s' has no attribute '%s'", P(c), key);
    return nullptr;
  }
  if (it->second.kind != kind) {
    static const char* const kinds[] = {"a string", "an integer", "a double"};
    *st = fail(TSR_ERR_SHAPE, "checkpoint '%s': attribute '%s' is %s, not %s", P(c), key, kinds[it->second.kind],
               kinds[kind]);
    return nullptr;
  }
  return &it->second;
}

// ----------------------------------------------------------------- commit
tsr_status commit(tsr_checkpoint c) {
  TSR_TRY(check_ckpt(c));
  const Comm& w = *c->ctx->world;
  TSR_TRY(agree(w, check_mode(*c, true)));
  std::vector<Block> blocks;
  std::vector<std::unique_ptr<Twin>> twins;
  std::vector<std::vector<unsigned char>> rows;
  std::vector<std::unique_ptr<opt::StateParts>> parts;
  Attrs attrs = c->attrs;
  std::vector<std::pair<std::string, uint64_t>> replicas;
  rows.reserve(c->puts.size());
  for (const Put& p : c->puts) {
    if (p.kind == Kind::shard || p.kind == Kind::replicated) {
      Block b = p.block;
      b.data = const_cast<void*>(p.data);  // written, not modified
      blocks.push_back(b);
      if (p.kind == Kind::replicated) {
        uint64_t bytes = tsr_dtype_size(b.type);
        for (int k = 0; k < b.ndims; ++k) bytes *= b.global[k];
        replicas.emplace_back(p.name, bytes_digest(p.data, bytes));
      }
    } else if (p.kind == Kind::optimizer) {
      parts.emplace_back(new opt::StateParts());
      TSR_TRY(agree(w, opt::state_blocks(p.opt, p.name, parts.back().get(), &blocks, &attrs)));
    } else {
      tsr_matrix m = p.mat;
      const void* local = p.data;
      if (m->dist.lay.cyclic()) {
        twins.emplace_back(new Twin());
        TSR_TRY(make_twin(m, twins.back().get()));
        TSR_TRY(tsr_matrix_redistribute(m, local, twins.back()->mat, twins.back()->buf.data()));
        m = twins.back()->mat;
        local = twins.back()->buf.data();
      }
      const gemm::Dist& d = dist_of(m);
      Rect r;
      const bool me = writes(d);
      tsr_status ls = rect_of(d, &r) ? TSR_SUCCESS
                                     : fail(TSR_ERR_UNSUPPORTED, "checkpoint '%s', array '%s': layout with split blocks",
                                            P(*c), p.name.c_str());
      rows.emplace_back();
      if (ls == TSR_SUCCESS && me) {
        try {
          rows.back().resize(static_cast<size_t>(r.nr * r.nc) * tsr_dtype_size(d.type));
          to_rows(static_cast<const unsigned char*>(local), d.ld, r.nr, r.nc, tsr_dtype_size(d.type), rows.back().data());
        } catch (const std::bad_alloc&) {
          ls = fail(TSR_ERR_NO_MEMORY, "checkpoint '%s', array '%s': allocating %" PRId64 " x %" PRId64 " elements",
                    P(*c), p.name.c_str(), r.nr, r.nc);
        }
      }
      TSR_TRY(agree(w, ls));
      blocks.push_back(matrix_block(p.name, d, r, me, rows.back().data()));
    }
  }
  for (const std::string& k : c->opt_keys)
    if (c->attrs.count(k))
      return agree(w, fail(TSR_ERR_INVALID_ARG, "checkpoint '%s': attribute '%s' is also an optimizer's", P(*c), k.c_str()));
  // Replicated data must be the same on every rank: max of h and of ~h.
  if (!replicas.empty()) {
    std::vector<int64_t> h(2 * replicas.size()), top(h.size());
    for (size_t i = 0; i < replicas.size(); ++i) {
      h[i] = static_cast<int64_t>(replicas[i].second);
      h[replicas.size() + i] = ~h[i];
    }
    TSR_TRY(allreduce(w, h.data(), top.data(), h.size(), TSR_INT64, TSR_MAX, nullptr, Traffic::control));
    for (size_t i = 0; i < replicas.size(); ++i)
      if (top[i] != ~top[replicas.size() + i])
        return fail(TSR_ERR_INVALID_ARG, "checkpoint '%s', array '%s': the replicated data differ across ranks "
                    "(put_replicated needs the same bytes on every rank)", P(*c), replicas[i].first.c_str());
  }
  TSR_TRY(io::write(w, c->path, blocks, attrs, c->fmt, c->sync));
  c->committed = true;
  return TSR_SUCCESS;
}

}  // namespace
}  // namespace tsr

using tsr::finish;

extern "C" {

tsr_status tsr_checkpoint_create(tsr_context ctx, const char* path, tsr_ckpt_format format, int flags,
                                 tsr_checkpoint* ckpt) {
  return finish(ctx, "tsr_checkpoint_create", tsr::create(ctx, path, format, flags, ckpt));
}

tsr_status tsr_checkpoint_open(tsr_context ctx, const char* path, tsr_checkpoint* ckpt) {
  return finish(ctx, "tsr_checkpoint_open", tsr::open(ctx, path, ckpt));
}

tsr_status tsr_checkpoint_close(tsr_checkpoint* ckpt) {
  tsr_status st = [&]() -> tsr_status {
    TSR_CHECK_NOT_NULL(ckpt);
    if (*ckpt == nullptr) return TSR_SUCCESS;
    TSR_TRY(tsr::check_ckpt(*ckpt));
    (*ckpt)->magic = 0;
    delete *ckpt;
    *ckpt = nullptr;
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_checkpoint_close", st);
}

tsr_status tsr_checkpoint_put_matrix(tsr_checkpoint ckpt, const char* name, tsr_matrix mat, const void* local) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_put_matrix", tsr::put_matrix(ckpt, name, mat, local));
}

tsr_status tsr_checkpoint_put_shard(tsr_checkpoint ckpt, const char* name, tsr_dtype type, uint64_t global_count,
                                    uint64_t offset, uint64_t count, const void* local) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_put_shard",
                tsr::put_shard(ckpt, name, type, global_count, offset, count, local));
}

tsr_status tsr_checkpoint_put_replicated(tsr_checkpoint ckpt, const char* name, tsr_dtype type, int ndims,
                                         const uint64_t* shape, const void* data) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_put_replicated",
                tsr::put_replicated(ckpt, name, type, ndims, shape, data));
}

tsr_status tsr_checkpoint_put_optimizer(tsr_checkpoint ckpt, const char* prefix, tsr_optimizer opt) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_put_optimizer", tsr::put_optimizer(ckpt, prefix, opt));
}

tsr_status tsr_checkpoint_set_int(tsr_checkpoint ckpt, const char* key, int64_t value) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_set_int", tsr::set_attr(ckpt, key, tsr::io::Value::integer(value)));
}

tsr_status tsr_checkpoint_set_double(tsr_checkpoint ckpt, const char* key, double value) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_set_double", tsr::set_attr(ckpt, key, tsr::io::Value::real(value)));
}

tsr_status tsr_checkpoint_set_string(tsr_checkpoint ckpt, const char* key, const char* value) {
  const tsr_status st = tsr::set_attr(ckpt, key, tsr::io::Value(value ? value : ""), value == nullptr);
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_set_string", st);
}

tsr_status tsr_checkpoint_commit(tsr_checkpoint ckpt) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_commit", tsr::commit(ckpt));
}

tsr_status tsr_checkpoint_array_count(tsr_checkpoint ckpt, int* count) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ckpt(ckpt));
    TSR_CHECK_NOT_NULL(count);
    TSR_TRY(tsr::check_mode(*ckpt, false));
    *count = static_cast<int>(ckpt->sets.size());
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_array_count", st);
}

tsr_status tsr_checkpoint_array_info(tsr_checkpoint ckpt, int index, const char** name, tsr_dtype* type, int* ndims,
                                     uint64_t shape[3]) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ckpt(ckpt));
    TSR_TRY(tsr::check_mode(*ckpt, false));
    if (index < 0 || static_cast<size_t>(index) >= ckpt->sets.size())
      return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'index' = %d; the checkpoint has %zu arrays", index,
                       ckpt->sets.size());
    const tsr::io::DatasetInfo& s = ckpt->sets[static_cast<size_t>(index)];
    if (name) *name = s.name.c_str();
    if (type) *type = s.type;
    if (ndims) *ndims = s.ndims;
    if (shape)
      for (int k = 0; k < 3; ++k) shape[k] = s.global[k];
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_array_info", st);
}

tsr_status tsr_checkpoint_find_array(tsr_checkpoint ckpt, const char* name, int* index) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ckpt(ckpt));
    TSR_CHECK_NOT_NULL(name);
    TSR_CHECK_NOT_NULL(index);
    TSR_TRY(tsr::check_mode(*ckpt, false));
    *index = -1;
    for (size_t i = 0; i < ckpt->sets.size(); ++i)
      if (ckpt->sets[i].name == name) *index = static_cast<int>(i);
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_find_array", st);
}

tsr_status tsr_checkpoint_get_matrix(tsr_checkpoint ckpt, const char* name, tsr_matrix mat, void* local) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_get_matrix", tsr::get_matrix(ckpt, name, mat, local));
}

tsr_status tsr_checkpoint_get_shard(tsr_checkpoint ckpt, const char* name, tsr_dtype type, uint64_t global_count,
                                    uint64_t offset, uint64_t count, void* local) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_get_shard",
                tsr::get_shard(ckpt, name, type, global_count, offset, count, local));
}

tsr_status tsr_checkpoint_get_replicated(tsr_checkpoint ckpt, const char* name, tsr_dtype type, int ndims,
                                         const uint64_t* shape, void* data) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_get_replicated",
                tsr::get_replicated(ckpt, name, type, ndims, shape, data));
}

tsr_status tsr_checkpoint_get_optimizer(tsr_checkpoint ckpt, const char* prefix, tsr_optimizer opt) {
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_get_optimizer", tsr::get_optimizer(ckpt, prefix, opt));
}

tsr_status tsr_checkpoint_attr_count(tsr_checkpoint ckpt, int* count) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ckpt(ckpt));
    TSR_CHECK_NOT_NULL(count);
    TSR_TRY(tsr::check_mode(*ckpt, false));
    *count = static_cast<int>(ckpt->keys.size());
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_attr_count", st);
}

tsr_status tsr_checkpoint_attr_info(tsr_checkpoint ckpt, int index, const char** key, tsr_attr_kind* kind) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ckpt(ckpt));
    TSR_TRY(tsr::check_mode(*ckpt, false));
    if (index < 0 || static_cast<size_t>(index) >= ckpt->keys.size())
      return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'index' = %d; the checkpoint has %zu attributes", index,
                       ckpt->keys.size());
    const std::string& k = ckpt->keys[static_cast<size_t>(index)];
    if (key) *key = k.c_str();
    if (kind) *kind = ckpt->attrs.at(k).kind;
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_attr_info", st);
}

tsr_status tsr_checkpoint_get_int(tsr_checkpoint ckpt, const char* key, int64_t* value) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ckpt(ckpt));
    TSR_CHECK_NOT_NULL(value);
    TSR_TRY(tsr::check_mode(*ckpt, false));
    tsr_status s = TSR_SUCCESS;
    const tsr::io::Value* v = tsr::find_attr(*ckpt, key, TSR_ATTR_INT64, &s);
    if (v) *value = v->i;
    return s;
  }();
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_get_int", st);
}

tsr_status tsr_checkpoint_get_double(tsr_checkpoint ckpt, const char* key, double* value) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ckpt(ckpt));
    TSR_CHECK_NOT_NULL(value);
    TSR_TRY(tsr::check_mode(*ckpt, false));
    tsr_status s = TSR_SUCCESS;
    const tsr::io::Value* v = tsr::find_attr(*ckpt, key, TSR_ATTR_DOUBLE, &s);
    if (v) *value = v->d;
    return s;
  }();
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_get_double", st);
}

tsr_status tsr_checkpoint_get_string(tsr_checkpoint ckpt, const char* key, char* buf, size_t len, size_t* needed) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ckpt(ckpt));
    TSR_CHECK_NOT_NULL(needed);
    if (buf == nullptr && len > 0) return tsr::fail(TSR_ERR_INVALID_ARG, "argument 'buf' is NULL but 'len' = %zu", len);
    TSR_TRY(tsr::check_mode(*ckpt, false));
    tsr_status s = TSR_SUCCESS;
    const tsr::io::Value* v = tsr::find_attr(*ckpt, key, TSR_ATTR_STRING, &s);
    if (!v) return s;
    *needed = v->text.size();
    if (len > 0) {
      const size_t n = std::min(len - 1, v->text.size());
      std::memcpy(buf, v->text.data(), n);
      buf[n] = '\0';
    }
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_get_string", st);
}

tsr_status tsr_checkpoint_format(tsr_checkpoint ckpt, tsr_ckpt_format* format) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_ckpt(ckpt));
    TSR_CHECK_NOT_NULL(format);
    *format = ckpt->fmt == tsr::io::Format::hdf5 ? TSR_CKPT_HDF5 : TSR_CKPT_BINARY;
    return TSR_SUCCESS;
  }();
  return finish(tsr::ctx_of(ckpt), "tsr_checkpoint_format", st);
}

}  // extern "C"

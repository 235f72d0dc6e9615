// tsr_optimizer_save / tsr_optimizer_load: the optimizer state in a file of
// the I/O layer (lib/io.hpp; HDF5 where the build has it, else TSRBIN01).
// The layout (docs/OPTIMIZERS.md, "State files"):
//
//   group_sizes  int64   [L]             elements of every group
//   hyper        float64 [L, P]          every parameter of every group, the
//                                        columns named by attr hyper_columns
//   m, v         float32 [n]             LAMB moments (LARS: momentum only)
//   momentum     float32 [n]             LARS momentum
//   master       float32 [n]             bfloat16 parameters: master weights
//                                        (only once a step has set them)
//   attrs: optimizer (lamb|lars), optimizer_format (1), param_type
//          (float32|bfloat16), preset, step, skipped, master (0|1),
//          last_clipped (0|1), hyper_columns, written_dist, written_ranks
//
// Every rank writes one balanced contiguous slice of the flat arrays (its
// own state when sharded), so a file does not depend on the distribution it
// was written with and loads at any rank count.
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "context.hpp"
#include "core.hpp"
#include "io.hpp"
#include "optimizer_impl.hpp"
#include "state_io.hpp"
#include "tessera/tsr_config.h"
#if TSR_HAVE_CUDA
#include "opt_device.hpp"
#endif

namespace tsr {
namespace opt {
namespace {

using io::Attrs;

const char* kind_tag(tsr_opt_kind k) { return k == TSR_OPT_LAMB ? "lamb" : "lars"; }
const char* type_tag(tsr_dtype t) { return t == TSR_BFLOAT16 ? "bfloat16" : "float32"; }
const char* dist_tag(tsr_opt_dist d) {
  return d == TSR_OPT_SHARDED ? "sharded" : d == TSR_OPT_DATA_PARALLEL ? "data_parallel" : "replicated";
}

std::string columns() {
  std::string s;
  for (int p = 0; p < kParams; ++p) s += std::string(p ? "," : "") + param_info(p)->name;
  return s;
}

// The state arrays of an optimizer, with their dataset names.
struct Array {
  const char* name;
  Buffer<float>* buf;
};
std::vector<Array> arrays(tsr_optimizer_s& o, bool with_master) {
  std::vector<Array> a;
  if (o.kind == TSR_OPT_LAMB) {
    a.push_back({"m", &o.m});
    a.push_back({"v", &o.v});
  } else {
    a.push_back({"momentum", &o.m});
  }
  if (with_master) a.push_back({"master", &o.master});
  return a;
}

io::Block block1(const std::string& name, tsr_dtype type, uint64_t global, uint64_t offset, uint64_t extent,
                 void* data) {
  io::Block b;
  b.name = name;
  b.type = type;
  b.ndims = 1;
  b.global[0] = global;
  b.offset[0] = offset;
  b.extent[0] = extent;
  b.data = data;
  return b;
}

io::Block hyper_block(size_t groups, size_t cols, bool all, double* data) {
  io::Block b;
  b.name = "hyper";
  b.type = TSR_FLOAT64;
  b.ndims = 2;
  b.global[0] = groups;
  b.global[1] = cols;
  b.extent[0] = all ? groups : 0;
  b.extent[1] = cols;
  b.data = data;
  return b;
}

bool parse_i64(const Attrs& a, const char* key, int64_t* out) {
  auto it = a.find(key);
  if (it == a.end() || it->second.kind != TSR_ATTR_STRING || it->second.text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 0) return false;
  *out = v;
  return true;
}

std::string attr(const Attrs& a, const char* key) {
  auto it = a.find(key);
  return it == a.end() || it->second.kind != TSR_ATTR_STRING ? std::string() : it->second.text;
}

}  // namespace

tsr_status state_blocks(tsr_optimizer opt, const std::string& prefix, StateParts* keep, std::vector<io::Block>* blocks,
                        Attrs* attrs) {
  TSR_TRY(check_optimizer(opt));
  tsr_optimizer_s& o = *opt;
#if TSR_HAVE_CUDA
  TSR_TRY(cuda::sync_host(o));  // the state of device steps (issue 17)
#endif
  const size_t L = o.ngroups();
  const bool root = o.rank == 0;
  std::vector<int64_t>& sizes = keep->sizes;
  std::vector<double>& hyper = keep->hyper;
  sizes.assign(L, 0);
  for (size_t g = 0; g < L; ++g) sizes[g] = static_cast<int64_t>(o.offset[g + 1] - o.offset[g]);
  hyper.assign(L * kParams, 0.0);
  for (size_t g = 0; g < L; ++g)
    for (int p = 0; p < kParams; ++p) hyper[g * kParams + static_cast<size_t>(p)] = o.hyper[g][static_cast<size_t>(p)];

  blocks->push_back(block1(prefix + "group_sizes", TSR_INT64, L, 0, root ? L : 0, sizes.data()));
  blocks->push_back(hyper_block(L, kParams, root, hyper.data()));
  blocks->back().name = prefix + "hyper";
  // This rank's balanced slice [d, d + c) of every state array; the state
  // holds [lo, hi), which contains it.
  const size_t d = o.displs[static_cast<size_t>(o.rank)], c = o.counts[static_cast<size_t>(o.rank)];
  const bool with_master = o.type == TSR_BFLOAT16 && o.master_ready;
  for (const Array& a : arrays(o, with_master))
    blocks->push_back(block1(prefix + a.name, TSR_FLOAT32, o.n, d, c, c ? a.buf->data() + (d - o.lo) : nullptr));

  Attrs& at = *attrs;
  at[prefix + "optimizer"] = kind_tag(o.kind);
  at[prefix + "optimizer_format"] = "1";
  at[prefix + "param_type"] = type_tag(o.type);
  at[prefix + "preset"] = tsr_optimizer_preset_name(o.preset);
  at[prefix + "step"] = std::to_string(o.step);
  at[prefix + "skipped"] = std::to_string(o.skipped);
  at[prefix + "master"] = with_master ? "1" : "0";
  at[prefix + "last_clipped"] = o.last_clipped ? "1" : "0";
  at[prefix + "hyper_columns"] = columns();
  at[prefix + "written_dist"] = dist_tag(o.dist);
  at[prefix + "written_ranks"] = std::to_string(o.nranks);
  return TSR_SUCCESS;
}

namespace {

tsr_status save(tsr_optimizer opt, const char* path) {
  TSR_TRY(check_optimizer(opt));
  const Comm& world = *opt->ctx->world;
  TSR_TRY(agree(world, path == nullptr ? fail(TSR_ERR_INVALID_ARG, "argument 'path' is NULL") : TSR_SUCCESS));
  StateParts keep;
  std::vector<io::Block> blocks;
  Attrs attrs;
  TSR_TRY(state_blocks(opt, "", &keep, &blocks, &attrs));
  return io::write(world, path, blocks, attrs);
}

// Checks of a file's description against the optimizer. The description is
// the same on every rank, and so is the outcome. P: the name prefix; w: where
// the state is, for messages.
tsr_status check_file(const tsr_optimizer_s& o, const char* w, const std::string& P,
                      const std::vector<io::DatasetInfo>& sets, const Attrs& a, std::vector<std::string>* cols,
                      int64_t* step, int64_t* skipped, bool* master) {
  auto A = [&](const char* key) { return attr(a, (P + key).c_str()); };
  const std::string kind = A("optimizer"), type = A("param_type");
  if (kind != "lamb" && kind != "lars")
    return fail(TSR_ERR_IO, "%s is not a tessera optimizer state (no attribute %soptimizer = lamb|lars)", w, P.c_str());
  if (A("optimizer_format") != "1")
    return fail(TSR_ERR_IO, "%s: optimizer state format '%s' is not known to this tessera (expected 1)", w,
                A("optimizer_format").c_str());
  if (kind != kind_tag(o.kind))
    return fail(TSR_ERR_INVALID_ARG, "%s holds a %s state; this optimizer is %s", w, kind.c_str(), kind_tag(o.kind));
  if (type != type_tag(o.type))
    return fail(TSR_ERR_INVALID_ARG, "%s holds %s parameters' state; this optimizer has %s parameters", w, type.c_str(),
                type_tag(o.type));
  if (!parse_i64(a, (P + "step").c_str(), step) || !parse_i64(a, (P + "skipped").c_str(), skipped))
    return fail(TSR_ERR_IO, "%s: attributes %sstep / %sskipped are not counts", w, P.c_str(), P.c_str());
  *master = A("master") == "1";
  cols->clear();
  const std::string names = A("hyper_columns");
  for (size_t at = 0; at <= names.size();) {
    const size_t comma = std::min(names.find(',', at), names.size());
    cols->push_back(names.substr(at, comma - at));
    at = comma + 1;
  }
  const io::DatasetInfo* gs = nullptr;
  const io::DatasetInfo* hy = nullptr;
  for (const io::DatasetInfo& s : sets) {
    if (s.name == P + "group_sizes") gs = &s;
    if (s.name == P + "hyper") hy = &s;
  }
  if (!gs || gs->type != TSR_INT64 || gs->ndims != 1)
    return fail(TSR_ERR_IO, "%s: no int64 dataset %sgroup_sizes", w, P.c_str());
  if (gs->global[0] != o.ngroups())
    return fail(TSR_ERR_SHAPE, "%s holds %" PRIu64 " groups; this optimizer has %zu", w, gs->global[0], o.ngroups());
  if (!hy || hy->type != TSR_FLOAT64 || hy->ndims != 2 || hy->global[0] != o.ngroups() || hy->global[1] != cols->size())
    return fail(TSR_ERR_IO, "%s: dataset %shyper is not float64 [%zu x %zu]", w, P.c_str(), o.ngroups(), cols->size());
  return TSR_SUCCESS;
}

}  // namespace

tsr_status state_restore(tsr_optimizer opt, const std::string& path, const std::string& P,
                         const std::vector<io::DatasetInfo>& sets, const Attrs& a, const std::string& where) {
  TSR_TRY(check_optimizer(opt));
  tsr_optimizer_s& o = *opt;
  const Comm& world = *o.ctx->world;
  const char* w = where.c_str();
  std::vector<std::string> cols;
  int64_t step = 0, skipped = 0;
  bool master = false;
  TSR_TRY(check_file(o, w, P, sets, a, &cols, &step, &skipped, &master));

  // Group sizes and parameters: every rank reads all of them.
  const size_t L = o.ngroups();
  std::vector<int64_t> sizes(L);
  std::vector<double> hyper(L * cols.size());
  std::vector<io::Block> small;
  small.push_back(block1(P + "group_sizes", TSR_INT64, L, 0, L, sizes.data()));
  small.push_back(hyper_block(L, cols.size(), true, hyper.data()));
  small.back().name = P + "hyper";
  TSR_TRY(io::read(world, path, small, nullptr));
  for (size_t g = 0; g < L; ++g)
    if (sizes[g] < 0 || static_cast<size_t>(sizes[g]) != o.offset[g + 1] - o.offset[g])
      return fail(TSR_ERR_SHAPE, "%s: group %zu has %" PRId64 " elements; in this optimizer it has %zu", w, g, sizes[g],
                  o.offset[g + 1] - o.offset[g]);
  std::vector<Values> values = o.hyper;
  for (size_t c = 0; c < cols.size(); ++c) {
    int p = 0;
    while (p < kParams && cols[c] != param_info(p)->name) ++p;
    if (p == kParams) continue;  // a parameter this version does not know
    for (size_t g = 0; g < L; ++g) {
      const double x = hyper[g * cols.size() + c];
      const ParamInfo* pi = param_info(p);
      const bool in = !std::isnan(x) && (pi->lower_open ? x > pi->lower : x >= pi->lower) &&
                      (pi->upper_open ? x < pi->upper : x <= pi->upper) && (!pi->integer || x == std::floor(x));
      if (!in) return fail(TSR_ERR_IO, "%s: group %zu has %s = %g, out of bounds (damaged file?)", w, g, pi->name, x);
      values[g][static_cast<size_t>(p)] = x;
    }
  }

  // The state: this rank's part (sharded) or everything.
  std::vector<io::Block> big;
  const bool with_master = o.type == TSR_BFLOAT16 && master;
  for (const Array& ar : arrays(o, with_master))
    big.push_back(block1(P + ar.name, TSR_FLOAT32, o.n, o.lo, o.local(), ar.buf->data()));
  TSR_TRY(io::read(world, path, big, nullptr));

#if TSR_HAVE_CUDA
  o.dev.reset();  // the loaded state goes to the device at the next device step
  o.host_stale = false;
#endif
  o.hyper = values;
  o.hyper_dirty = true;
  o.step = step;
  o.skipped = skipped;
  o.master_ready = with_master;
  o.last_clipped = attr(a, (P + "last_clipped").c_str()) == "1";
  o.last_skipped = false;
  return TSR_SUCCESS;
}

namespace {

tsr_status load(tsr_optimizer opt, const char* path) {
  TSR_TRY(check_optimizer(opt));
  const Comm& world = *opt->ctx->world;
  TSR_TRY(agree(world, path == nullptr ? fail(TSR_ERR_INVALID_ARG, "argument 'path' is NULL") : TSR_SUCCESS));
  std::vector<io::DatasetInfo> sets;
  Attrs a;
  TSR_TRY(io::inspect(world, path, &sets, nullptr, &a));
  return state_restore(opt, path, "", sets, a, std::string("file '") + path + "'");
}

}  // namespace
}  // namespace opt
}  // namespace tsr

extern "C" {

tsr_status tsr_optimizer_save(tsr_optimizer opt, const char* path) {
  const tsr_context ctx = opt != nullptr && opt->magic == tsr_optimizer_s::kMagic ? opt->ctx : nullptr;
  return tsr::finish(ctx, "tsr_optimizer_save", tsr::opt::save(opt, path));
}

tsr_status tsr_optimizer_load(tsr_optimizer opt, const char* path) {
  const tsr_context ctx = opt != nullptr && opt->magic == tsr_optimizer_s::kMagic ? opt->ctx : nullptr;
  return tsr::finish(ctx, "tsr_optimizer_load", tsr::opt::load(opt, path));
}

}  // extern "C"

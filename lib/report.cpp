// Regions, counters and reports (public C API over the Ledger).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "context.hpp"
#include "core.hpp"

struct tsr_report_s {
  static constexpr unsigned kMagic = 0x4e904e90u;
  unsigned magic = kMagic;
  tsr_context ctx = nullptr;  // its live_reports counts this report
  int rank = 0, size = 1, root = 0;
  std::vector<std::string> paths;          // sorted; "total" first
  std::vector<tsr_counters> mine;          // per region, this rank
  std::vector<tsr_counters> min, max, sum; // per region, over ranks
  std::vector<tsr_counters> all;           // root only: [rank * nregions + region]
};

namespace tsr {
namespace {

constexpr size_t kWords = sizeof(tsr_counters) / sizeof(uint64_t);
static_assert(sizeof(tsr_counters) % sizeof(uint64_t) == 0, "tsr_counters must be a uint64_t array");

tsr_status check_report(tsr_report r) {
  if (r == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument 'report' is NULL");
  if (r->magic != tsr_report_s::kMagic) return fail(TSR_ERR_INVALID_ARG, "argument 'report' is not a live report");
  return TSR_SUCCESS;
}

tsr_status check_region(tsr_report r, int region) {
  if (region < 0 || region >= static_cast<int>(r->paths.size()))
    return fail(TSR_ERR_INVALID_ARG, "argument 'region' = %d; expected 0 <= region < %zu", region, r->paths.size());
  return TSR_SUCCESS;
}


tsr_status create_report(tsr_context ctx, int root, tsr_report* out) {
  TSR_TRY(check_context(ctx));
  // Snapshot first, before any agreement, so that the report's own traffic is not in it.
  std::vector<std::string> names;
  std::vector<tsr_counters> snap;
  for (const auto& kv : ctx->ledger.snapshot()) {
    names.push_back(kv.first);
    snap.push_back(kv.second);
  }

  tsr_status local = TSR_SUCCESS;
  if (out == nullptr) local = fail(TSR_ERR_INVALID_ARG, "argument 'report' is NULL");
  else if (root < 0 || root >= ctx->size)
    local = fail(TSR_ERR_INVALID_ARG, "argument 'root' = %d; expected 0 <= root < %d", root, ctx->size);
  const Comm& w = *ctx->world;
  TSR_TRY(agree(w, local, std::vector<Same>{{"root", root}}));
  *out = nullptr;

  // Union of region paths: gather to root, root merges, broadcast back.
  std::string packed = join(names);
  int64_t len = static_cast<int64_t>(packed.size());
  std::vector<int64_t> lens(static_cast<size_t>(ctx->size));
  TSR_TRY(gather(w, &len, 1, lens.data(), TSR_INT64, root, nullptr, Traffic::control));
  std::string merged;
  if (ctx->rank == root) {
    std::set<std::string> u;
    for (int r = 0; r < ctx->size; ++r) {
      std::string buf;
      if (r == root) {
        buf = packed;
      } else {
        buf.resize(static_cast<size_t>(lens[static_cast<size_t>(r)]));
        TSR_TRY(recv(w, &buf[0], buf.size(), TSR_BYTE, r, 7101, nullptr, Traffic::control));
      }
      for (std::string& s : split(buf.data(), buf.size())) u.insert(std::move(s));
    }
    std::vector<std::string> v(u.begin(), u.end());
    v.erase(std::remove(v.begin(), v.end(), std::string("total")), v.end());
    v.insert(v.begin(), "total");
    merged = join(v);
  } else {
    TSR_TRY(send(w, packed.data(), packed.size(), TSR_BYTE, root, 7101, nullptr, Traffic::control));
  }
  int64_t mlen = static_cast<int64_t>(merged.size());
  TSR_TRY(bcast(w, &mlen, 1, TSR_INT64, root, nullptr, Traffic::control));
  merged.resize(static_cast<size_t>(mlen));
  TSR_TRY(bcast(w, &merged[0], merged.size(), TSR_BYTE, root, nullptr, Traffic::control));

  std::unique_ptr<tsr_report_s> r(new (std::nothrow) tsr_report_s());
  if (!r) return fail(TSR_ERR_NO_MEMORY, "allocating a report");
  r->rank = ctx->rank;
  r->size = ctx->size;
  r->root = root;
  r->paths = split(merged.data(), merged.size());
  const size_t nreg = r->paths.size();
  tsr_counters zero;
  std::memset(&zero, 0, sizeof zero);
  r->mine.assign(nreg, zero);
  for (size_t i = 0; i < names.size(); ++i) {
    const size_t at = static_cast<size_t>(std::find(r->paths.begin(), r->paths.end(), names[i]) - r->paths.begin());
    r->mine[at] = snap[i];
  }
  r->min.assign(nreg, zero);
  r->max.assign(nreg, zero);
  r->sum.assign(nreg, zero);
  const size_t words = nreg * kWords;
  const void* src = r->mine.data();
  TSR_TRY(allreduce(w, src, r->min.data(), words, TSR_INT64, TSR_MIN, nullptr, Traffic::control));
  TSR_TRY(allreduce(w, src, r->max.data(), words, TSR_INT64, TSR_MAX, nullptr, Traffic::control));
  TSR_TRY(allreduce(w, src, r->sum.data(), words, TSR_INT64, TSR_SUM, nullptr, Traffic::control));
  if (ctx->rank == root) r->all.assign(nreg * static_cast<size_t>(ctx->size), zero);
  TSR_TRY(gather(w, src, words, r->all.data(), TSR_INT64, root, nullptr, Traffic::control));
  r->ctx = ctx;
  ctx->live_reports += 1;
  *out = r.release();
  return TSR_SUCCESS;
}

void appendf(std::string& s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& s, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  s += buf;
}

std::string format(const tsr_report_s& r) {
  static const char* cls[3] = {"self", "node", "remote"};
  std::string s;
  appendf(s, "tessera accounting report: %d rank(s); bytes unless noted; min / max / sum over ranks\n", r.size);
  for (size_t g = 0; g < r.paths.size(); ++g) {
    const tsr_counters &mn = r.min[g], &mx = r.max[g], &sm = r.sum[g];
    appendf(s, "\nregion %s\n", r.paths[g].c_str());
    appendf(s, "  %-34s %16s %16s %18s\n", "counter", "min", "max", "sum");
    auto row = [&](const char* name, uint64_t a, uint64_t b, uint64_t c) {
      appendf(s, "  %-34s %16" PRIu64 " %16" PRIu64 " %18" PRIu64 "\n", name, a, b, c);
    };
    char name[64];
    for (int k = 0; k < 3; ++k) {
      std::snprintf(name, sizeof name, "p2p sent %s (msgs)", cls[k]);
      if (sm.p2p_sent[k].messages) row(name, mn.p2p_sent[k].messages, mx.p2p_sent[k].messages, sm.p2p_sent[k].messages);
      std::snprintf(name, sizeof name, "p2p sent %s", cls[k]);
      if (sm.p2p_sent[k].messages) row(name, mn.p2p_sent[k].bytes, mx.p2p_sent[k].bytes, sm.p2p_sent[k].bytes);
      std::snprintf(name, sizeof name, "p2p recv %s", cls[k]);
      if (sm.p2p_recv[k].messages) row(name, mn.p2p_recv[k].bytes, mx.p2p_recv[k].bytes, sm.p2p_recv[k].bytes);
    }
    uint64_t calls_mn = 0, calls_mx = 0, calls_sm = 0;
    for (int k = 0; k < TSR_COLL_KINDS; ++k) {
      calls_mn += mn.coll_calls[k];
      calls_mx += mx.coll_calls[k];
      calls_sm += sm.coll_calls[k];
    }
    if (calls_sm) {
      row("collective calls", calls_mn, calls_mx, calls_sm);
      row("collective payload sent", mn.coll_payload_sent, mx.coll_payload_sent, sm.coll_payload_sent);
      row("collective payload recv", mn.coll_payload_recv, mx.coll_payload_recv, sm.coll_payload_recv);
      for (int k = 0; k < 3; ++k) {
        std::snprintf(name, sizeof name, "collective wire sent %s (model)", cls[k]);
        if (sm.coll_wire_sent[k].messages)
          row(name, mn.coll_wire_sent[k].bytes, mx.coll_wire_sent[k].bytes, sm.coll_wire_sent[k].bytes);
        std::snprintf(name, sizeof name, "collective wire recv %s (model)", cls[k]);
        if (sm.coll_wire_recv[k].messages)
          row(name, mn.coll_wire_recv[k].bytes, mx.coll_wire_recv[k].bytes, sm.coll_wire_recv[k].bytes);
      }
    }
    if (sm.host_to_device_bytes) row("host to device", mn.host_to_device_bytes, mx.host_to_device_bytes, sm.host_to_device_bytes);
    if (sm.device_to_host_bytes) row("device to host", mn.device_to_host_bytes, mx.device_to_host_bytes, sm.device_to_host_bytes);
    if (sm.device_to_device_bytes)
      row("device to device", mn.device_to_device_bytes, mx.device_to_device_bytes, sm.device_to_device_bytes);
    if (sm.disk_write_bytes) row("disk write", mn.disk_write_bytes, mx.disk_write_bytes, sm.disk_write_bytes);
    if (sm.disk_read_bytes) row("disk read", mn.disk_read_bytes, mx.disk_read_bytes, sm.disk_read_bytes);
    if (sm.control.messages) row("control (library-internal)", mn.control.bytes, mx.control.bytes, sm.control.bytes);
  }
  return s;
}

}  // namespace
}  // namespace tsr

using tsr::fail;
using tsr::finish;

namespace {
tsr_context live(tsr_context ctx) { return ctx != nullptr && ctx->magic == tsr_context_s::kMagic ? ctx : nullptr; }
}  // namespace

extern "C" {

tsr_status tsr_region_begin(tsr_context ctx, const char* name) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS) st = ctx->ledger.begin(name);
  return finish(live(ctx), "tsr_region_begin", st);
}

tsr_status tsr_region_end(tsr_context ctx, const char* name) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS) st = ctx->ledger.end(name);
  return finish(live(ctx), "tsr_region_end", st);
}

tsr_status tsr_counters_get(tsr_context ctx, const char* path, tsr_counters* out) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS && path == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'path' is NULL");
  if (st == TSR_SUCCESS && out == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL");
  if (st == TSR_SUCCESS) {
    if (!ctx->ledger.get(path, out))
      st = fail(TSR_ERR_INVALID_ARG, "argument 'path' = \"%s\" names no region of this rank", path);
  }
  return finish(live(ctx), "tsr_counters_get", st);
}

tsr_status tsr_counters_reset(tsr_context ctx) {
  tsr_status st = tsr::check_context(ctx);
  if (st == TSR_SUCCESS) st = ctx->ledger.reset();
  return finish(live(ctx), "tsr_counters_reset", st);
}

tsr_status tsr_report_create(tsr_context ctx, int root, tsr_report* report) {
  return finish(live(ctx), "tsr_report_create", tsr::create_report(ctx, root, report));
}

tsr_status tsr_report_destroy(tsr_report* report) {
  tsr_status st = TSR_SUCCESS;
  if (report == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'report' is NULL");
  else if (*report != nullptr) st = tsr::check_report(*report);
  if (st == TSR_SUCCESS && *report != nullptr) {
    (*report)->magic = 0;
    (*report)->ctx->live_reports -= 1;
    delete *report;
    *report = nullptr;
  }
  return finish(nullptr, "tsr_report_destroy", st);
}

tsr_status tsr_report_region_count(tsr_report report, int* count) {
  tsr_status st = tsr::check_report(report);
  if (st == TSR_SUCCESS && count == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'count' is NULL");
  if (st == TSR_SUCCESS) *count = static_cast<int>(report->paths.size());
  return finish(nullptr, "tsr_report_region_count", st);
}

tsr_status tsr_report_region_path(tsr_report report, int region, const char** path) {
  tsr_status st = tsr::check_report(report);
  if (st == TSR_SUCCESS) st = tsr::check_region(report, region);
  if (st == TSR_SUCCESS && path == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'path' is NULL");
  if (st == TSR_SUCCESS) *path = report->paths[static_cast<size_t>(region)].c_str();
  return finish(nullptr, "tsr_report_region_path", st);
}

tsr_status tsr_report_rank_counters(tsr_report report, int region, int rank, tsr_counters* out) {
  tsr_status st = tsr::check_report(report);
  if (st == TSR_SUCCESS) st = tsr::check_region(report, region);
  if (st == TSR_SUCCESS && out == nullptr) st = fail(TSR_ERR_INVALID_ARG, "argument 'out' is NULL");
  if (st == TSR_SUCCESS && (rank < 0 || rank >= report->size))
    st = fail(TSR_ERR_INVALID_ARG, "argument 'rank' = %d; expected 0 <= rank < %d", rank, report->size);
  if (st == TSR_SUCCESS && rank != report->rank && report->rank != report->root)
    st = fail(TSR_ERR_INVALID_ARG, "argument 'rank' = %d: only the report's root (%d) holds other ranks' counters",
              rank, report->root);
  if (st == TSR_SUCCESS) {
    *out = rank == report->rank ? report->mine[static_cast<size_t>(region)]
                                : report->all[static_cast<size_t>(rank) * report->paths.size() + static_cast<size_t>(region)];
  }
  return finish(nullptr, "tsr_report_rank_counters", st);
}

tsr_status tsr_report_stats(tsr_report report, int region, tsr_counters* min, tsr_counters* max, tsr_counters* sum) {
  tsr_status st = tsr::check_report(report);
  if (st == TSR_SUCCESS) st = tsr::check_region(report, region);
  if (st == TSR_SUCCESS) {
    const size_t g = static_cast<size_t>(region);
    if (min) *min = report->min[g];
    if (max) *max = report->max[g];
    if (sum) *sum = report->sum[g];
  }
  return finish(nullptr, "tsr_report_stats", st);
}

tsr_status tsr_report_format(tsr_report report, char* buf, size_t len, size_t* needed) {
  tsr_status st = tsr::check_report(report);
  if (st == TSR_SUCCESS && buf == nullptr && len > 0)
    st = fail(TSR_ERR_INVALID_ARG, "argument 'buf' is NULL with len = %zu", len);
  if (st == TSR_SUCCESS) {
    const std::string s = tsr::format(*report);
    if (needed) *needed = s.size();
    if (len > 0) {
      const size_t n = std::min(len - 1, s.size());
      std::memcpy(buf, s.data(), n);
      buf[n] = '\0';
    }
  }
  return finish(nullptr, "tsr_report_format", st);
}

}  // extern "C"

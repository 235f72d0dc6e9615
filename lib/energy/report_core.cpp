// Energy reports: estimates, statistics and the four output formats.
#include "energy/report_core.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core.hpp"

namespace tsr {
namespace energy {

namespace {

const char* const kStatNames[4] = {"min", "mean", "max", "sum"};
const char* const kDomainKeys[TSR_DOMAINS] = {"package", "dram", "gpu"};
constexpr int kLinkLevels = 3;  // self, intra-node, inter-node carry messages

void appendf(std::string& s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& s, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n >= static_cast<int>(sizeof buf)) {
    std::vector<char> big(static_cast<size_t>(n) + 1);
    va_start(ap, fmt);
    std::vsnprintf(big.data(), big.size(), fmt, ap);
    va_end(ap);
    s += big.data();
  } else if (n > 0) {
    s += buf;
  }
}

// Joules with three significant digits, as text ("1.23e-05").
std::string jfmt(double j) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", j);
  return b;
}

uint64_t sum_calls(const tsr_counters& c) {
  uint64_t n = 0;
  for (uint64_t k : c.coll_calls) n += k;
  return n;
}

uint64_t p2p_bytes(const tsr_traffic (&t)[TSR_PEER_CLASSES]) { return t[0].bytes + t[1].bytes + t[2].bytes; }
uint64_t p2p_msgs(const tsr_traffic (&t)[TSR_PEER_CLASSES]) { return t[0].messages + t[1].messages + t[2].messages; }

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"') o += '"';
    o += ch;
  }
  return o + "\"";
}

}  // namespace

// ----------------------------------------------------------- the estimate
void moved(const tsr_counters& c, uint64_t bytes[TSR_LEVELS], uint64_t messages[TSR_LEVELS]) {
  for (int l = 0; l < TSR_LEVELS; ++l) bytes[l] = messages[l] = 0;
  for (int k = 0; k < kLinkLevels; ++k) {  // peer class k is link level k
    bytes[k] = c.p2p_sent[k].bytes + c.coll_wire_sent[k].bytes;
    messages[k] = c.p2p_sent[k].messages + c.coll_wire_sent[k].messages;
  }
  bytes[TSR_LEVEL_HOST_DEVICE] = c.host_to_device_bytes + c.device_to_host_bytes;
  bytes[TSR_LEVEL_DEVICE_DEVICE] = c.device_to_device_bytes;
  bytes[TSR_LEVEL_DISK_READ] = c.disk_read_bytes;
  bytes[TSR_LEVEL_DISK_WRITE] = c.disk_write_bytes;
}

tsr_energy_estimate estimate(const Profile& p, const tsr_counters& c, const tsr_region_extra& x) {
  tsr_energy_estimate e;
  std::memset(&e, 0, sizeof e);
  moved(c, e.moved_bytes, e.moved_messages);
  const double k = 1e-12 * p.pue;  // pJ -> J, times the facility overhead
  for (int l = 0; l < TSR_LEVELS; ++l) {
    const double b = static_cast<double>(e.moved_bytes[l]);
    e.joules[l] = b * p.level[l].value * k;
    e.joules_low[l] = b * p.level[l].low * k;
    e.joules_high[l] = b * p.level[l].high * k;
    e.total_joules += e.joules[l];
    e.total_joules_low += e.joules_low[l];
    e.total_joules_high += e.joules_high[l];
  }
  e.flops = x.flops;
  if (p.has_flop) {
    const double f = static_cast<double>(x.flops);
    e.flop_joules = f * p.flop.value * k;
    e.flop_joules_low = f * p.flop.low * k;
    e.flop_joules_high = f * p.flop.high * k;
    e.total_joules += e.flop_joules;
    e.total_joules_low += e.flop_joules_low;
    e.total_joules_high += e.flop_joules_high;
  }
  e.seconds = static_cast<double>(x.nanoseconds) * 1e-9;
  e.measured_mask = static_cast<int>(x.measured_mask & ((1u << TSR_DOMAINS) - 1));
  for (int d = 0; d < TSR_DOMAINS; ++d)
    if (e.measured_mask & (1 << d)) e.measured_joules[d] = static_cast<double>(x.measured_uj[d]) * 1e-6;
  e.measured_ranks = e.measured_mask != 0 ? 1 : 0;
  return e;
}

tsr_energy_estimate statistic(const std::vector<tsr_energy_estimate>& v, tsr_stat s) {
  tsr_energy_estimate o;
  std::memset(&o, 0, sizeof o);
  if (v.empty()) return o;
  const double n = static_cast<double>(v.size());
  auto u64 = [&](auto get) {
    uint64_t mn = UINT64_MAX, mx = 0, sum = 0;
    for (const auto& e : v) {
      const uint64_t x = get(e);
      mn = std::min(mn, x);
      mx = std::max(mx, x);
      sum += x;
    }
    switch (s) {
      case TSR_STAT_MIN: return mn;
      case TSR_STAT_MAX: return mx;
      case TSR_STAT_SUM: return sum;
      case TSR_STAT_MEAN: return static_cast<uint64_t>(std::llround(static_cast<double>(sum) / n));
    }
    return sum;
  };
  auto dbl = [&](auto get) {
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    for (const auto& e : v) {
      const double x = get(e);
      mn = std::min(mn, x);
      mx = std::max(mx, x);
      sum += x;
    }
    switch (s) {
      case TSR_STAT_MIN: return mn;
      case TSR_STAT_MAX: return mx;
      case TSR_STAT_SUM: return sum;
      case TSR_STAT_MEAN: return sum / n;
    }
    return sum;
  };
  for (int l = 0; l < TSR_LEVELS; ++l) {
    o.moved_bytes[l] = u64([l](const tsr_energy_estimate& e) { return e.moved_bytes[l]; });
    o.moved_messages[l] = u64([l](const tsr_energy_estimate& e) { return e.moved_messages[l]; });
    o.joules[l] = dbl([l](const tsr_energy_estimate& e) { return e.joules[l]; });
    o.joules_low[l] = dbl([l](const tsr_energy_estimate& e) { return e.joules_low[l]; });
    o.joules_high[l] = dbl([l](const tsr_energy_estimate& e) { return e.joules_high[l]; });
  }
  o.flops = u64([](const tsr_energy_estimate& e) { return e.flops; });
  o.seconds = dbl([](const tsr_energy_estimate& e) { return e.seconds; });
  o.flop_joules = dbl([](const tsr_energy_estimate& e) { return e.flop_joules; });
  o.flop_joules_low = dbl([](const tsr_energy_estimate& e) { return e.flop_joules_low; });
  o.flop_joules_high = dbl([](const tsr_energy_estimate& e) { return e.flop_joules_high; });
  o.total_joules = dbl([](const tsr_energy_estimate& e) { return e.total_joules; });
  o.total_joules_low = dbl([](const tsr_energy_estimate& e) { return e.total_joules_low; });
  o.total_joules_high = dbl([](const tsr_energy_estimate& e) { return e.total_joules_high; });
  // Measured: over the ranks (node readers) that measured each domain.
  for (int d = 0; d < TSR_DOMAINS; ++d) {
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    int holders = 0;
    for (const auto& e : v)
      if (e.measured_mask & (1 << d)) {
        mn = std::min(mn, e.measured_joules[d]);
        mx = std::max(mx, e.measured_joules[d]);
        sum += e.measured_joules[d];
        ++holders;
      }
    if (holders == 0) continue;
    o.measured_mask |= 1 << d;
    o.measured_joules[d] = s == TSR_STAT_MIN ? mn : s == TSR_STAT_MAX ? mx : s == TSR_STAT_SUM ? sum : sum / holders;
  }
  for (const auto& e : v) o.measured_ranks += e.measured_mask != 0 ? 1 : 0;
  return o;
}

// ------------------------------------------------------------ ReportData
std::string ReportData::source_line() const {
  if (measured) {
    std::string which;
    for (int d = 0; d < TSR_DOMAINS; ++d) {
      int nodes = 0;
      if (!stats.empty() && (stats[0].est[TSR_STAT_SUM].measured_mask & (1 << d)))
        nodes = stats[0].est[TSR_STAT_SUM].measured_ranks;
      if (nodes > 0) which += std::string(which.empty() ? "" : ", ") + kDomainKeys[d];
    }
    return "measured and modelled: measured " + (which.empty() ? std::string("(see regions)") : which) +
           " energy per region on the nodes whose meters could be read; modelled energy from the profile";
  }
  if (meter_status.empty()) return "model only: no energy meter was started (tsr_energy_start)";
  std::string why;
  for (const std::string& s : meter_status) why += (why.empty() ? "" : "; ") + s;
  return "model only: no energy counter could be read (" + why + ")";
}

tsr_energy_estimate ReportData::rank_estimate(int region, int rank) const {
  const size_t g = static_cast<size_t>(region);
  const size_t r = all_ranks ? static_cast<size_t>(rank) : 0;
  return estimate(profile, counters[r][g], extras[r][g].x);
}

void ReportData::compute_stats() {
  constexpr size_t kWords = sizeof(tsr_counters) / sizeof(uint64_t);
  stats.assign(paths.size(), RegionStats{});
  for (size_t g = 0; g < paths.size(); ++g) {
    std::vector<tsr_energy_estimate> v;
    for (int r = 0; r < nranks; ++r) v.push_back(rank_estimate(static_cast<int>(g), r));
    RegionStats& st = stats[g];
    for (int s = 0; s < 4; ++s) st.est[s] = statistic(v, static_cast<tsr_stat>(s));
    uint64_t* mn = reinterpret_cast<uint64_t*>(&st.cmin);
    uint64_t* mx = reinterpret_cast<uint64_t*>(&st.cmax);
    uint64_t* sm = reinterpret_cast<uint64_t*>(&st.csum);
    for (size_t w = 0; w < kWords; ++w) {
      mn[w] = UINT64_MAX;
      mx[w] = sm[w] = 0;
    }
    for (int r = 0; r < nranks; ++r) {
      const uint64_t* c = reinterpret_cast<const uint64_t*>(&counters[static_cast<size_t>(r)][g]);
      for (size_t w = 0; w < kWords; ++w) {
        mn[w] = std::min(mn[w], c[w]);
        mx[w] = std::max(mx[w], c[w]);
        sm[w] += c[w];
      }
    }
  }
}

std::vector<std::pair<std::string, std::string>> transport_models() {
  return {
      {"point-to-point", "exact: payload bytes handed to the transport, by peer class"},
      {"bcast", "binomial tree from the root"},
      {"reduce", "binomial tree to the root"},
      {"allreduce", "ring: reduce-scatter then all-gather, 2(p-1) steps"},
      {"allgather", "ring, p-1 steps"},
      {"reduce_scatter", "ring, p-1 steps"},
      {"alltoall", "direct: one message to every other rank"},
      {"gather", "direct to the root"},
      {"scatter", "direct from the root"},
      {"barrier", "dissemination, ceil(log2 p) rounds of empty messages"},
      {"disk", "exact: bytes the I/O layer wrote to or read from files"},
  };
}

// ------------------------------------------------------------------- table
namespace {

void header_lines(const ReportData& r, std::string& s) {
  appendf(s, "tessera energy report: %d rank(s) on %d node(s)%s; %s%s%s\n", r.nranks, r.nnodes,
          r.simulated_nodes ? " (simulated nodes)" : "", r.producer.c_str(), r.mpi.empty() ? "" : "; ",
          r.mpi.c_str());
  appendf(s, "profile: %s (%s), PUE %.2f; modelled J = moved bytes x pJ/B of the level x PUE, [low .. high] "
          "from the profile's ranges\n",
          r.profile.name.c_str(), r.profile.file.empty() ? "built-in" : r.profile.file.c_str(), r.profile.pue);
  appendf(s, "energy source: %s\n", r.source_line().c_str());
  appendf(s, "moved bytes: link levels count what each rank sent (point-to-point payload, exact, plus the modelled "
          "wire traffic of collectives), so each byte counts once\n");
  std::string m;
  for (const auto& kv : r.models)
    if (kv.first != "point-to-point" && kv.first != "disk") m += (m.empty() ? "" : "; ") + kv.first + ": " + kv.second;
  if (!m.empty()) appendf(s, "collective models: %s\n", m.c_str());
  for (const std::string& n : r.notes) appendf(s, "note: %s\n", n.c_str());
}

std::string measured_text(const tsr_energy_estimate& sum, const tsr_energy_estimate& mn,
                          const tsr_energy_estimate& mx) {
  if (sum.measured_mask == 0) return "not measured";
  std::string t;
  for (int d = 0; d < TSR_DOMAINS; ++d) {
    if (!(sum.measured_mask & (1 << d))) continue;
    if (!t.empty()) t += ", ";
    t += std::string(kDomainKeys[d]) + " " + jfmt(sum.measured_joules[d]) + " J";
    if (sum.measured_ranks > 1) t += " (per node " + jfmt(mn.measured_joules[d]) + " .. " + jfmt(mx.measured_joules[d]) + ")";
  }
  return t + " [measured]";
}

double measured_total(const tsr_energy_estimate& e) {
  double j = 0;
  for (int d = 0; d < TSR_DOMAINS; ++d)
    if (e.measured_mask & (1 << d)) j += e.measured_joules[d];
  return j;
}

}  // namespace

std::string format_table(const ReportData& r) {
  std::string s;
  header_lines(r, s);
  // Summary: one line per region, for comparing phases (or algorithms) side by side.
  appendf(s, "\nsummary (sum over ranks)\n");
  appendf(s, "  %-28s %10s %16s %16s %12s %25s %14s\n", "region", "time(s)max", "intra-node B", "inter-node B",
          "other B", "modelled J [low .. high]", "measured J");
  for (size_t g = 0; g < r.paths.size(); ++g) {
    const tsr_energy_estimate& sm = r.stats[g].est[TSR_STAT_SUM];
    uint64_t other = 0;
    for (int l = 0; l < TSR_LEVELS; ++l)
      if (l != TSR_LEVEL_INTRA_NODE && l != TSR_LEVEL_INTER_NODE) other += sm.moved_bytes[l];
    const std::string mod = jfmt(sm.total_joules) + " [" + jfmt(sm.total_joules_low) + " .. " +
                            jfmt(sm.total_joules_high) + "]";
    appendf(s, "  %-28s %10.4f %16" PRIu64 " %16" PRIu64 " %12" PRIu64 " %25s %14s\n", r.paths[g].c_str(),
            r.stats[g].est[TSR_STAT_MAX].seconds, sm.moved_bytes[TSR_LEVEL_INTRA_NODE],
            sm.moved_bytes[TSR_LEVEL_INTER_NODE], other, mod.c_str(),
            sm.measured_mask ? jfmt(measured_total(sm)).c_str() : "-");
  }
  for (size_t g = 0; g < r.paths.size(); ++g) {
    const RegionStats& st = r.stats[g];
    const tsr_energy_estimate &mn = st.est[TSR_STAT_MIN], &me = st.est[TSR_STAT_MEAN], &mx = st.est[TSR_STAT_MAX],
                              &sm = st.est[TSR_STAT_SUM];
    appendf(s, "\nregion %s: time %.4f .. %.4f s over ranks\n", r.paths[g].c_str(), mn.seconds, mx.seconds);
    appendf(s, "  %-16s %14s %14s %14s %16s %12s %25s\n", "moved bytes", "min", "mean", "max", "sum", "messages",
            "modelled J sum [low .. high]");
    for (int l = 0; l < TSR_LEVELS; ++l) {
      const std::string j = jfmt(sm.joules[l]) + " [" + jfmt(sm.joules_low[l]) + " .. " + jfmt(sm.joules_high[l]) + "]";
      const std::string msgs = l < kLinkLevels ? std::to_string(sm.moved_messages[l]) : "-";
      appendf(s, "  %-16s %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %16" PRIu64 " %12s %25s\n",
              level_label(static_cast<tsr_level>(l)), mn.moved_bytes[l], me.moved_bytes[l], mx.moved_bytes[l],
              sm.moved_bytes[l], msgs.c_str(), j.c_str());
    }
    if (r.profile.has_flop || sm.flops > 0) {
      const std::string j = r.profile.has_flop ? jfmt(sm.flop_joules) + " [" + jfmt(sm.flop_joules_low) + " .. " +
                                                     jfmt(sm.flop_joules_high) + "]"
                                               : "(no flop figure)";
      appendf(s, "  %-16s %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %16" PRIu64 " %12s %25s\n", "flops", mn.flops,
              me.flops, mx.flops, sm.flops, "-", j.c_str());
    }
    appendf(s, "  %-16s %75s %s [%s .. %s]\n", "modelled total", "", jfmt(sm.total_joules).c_str(),
            jfmt(sm.total_joules_low).c_str(), jfmt(sm.total_joules_high).c_str());
    appendf(s, "  %-16s %s\n", "measured", measured_text(sm, mn, mx).c_str());
    const tsr_counters &cs = st.csum, &cn = st.cmin, &cx = st.cmax;
    appendf(s, "  application payload (exact), min / max / sum over ranks:\n");
    appendf(s, "    %-30s %14" PRIu64 " %14" PRIu64 " %16" PRIu64 "  (%" PRIu64 " messages)\n", "point-to-point sent",
            p2p_bytes(cn.p2p_sent), p2p_bytes(cx.p2p_sent), p2p_bytes(cs.p2p_sent), p2p_msgs(cs.p2p_sent));
    appendf(s, "    %-30s %14" PRIu64 " %14" PRIu64 " %16" PRIu64 "  (%" PRIu64 " messages)\n", "point-to-point received",
            p2p_bytes(cn.p2p_recv), p2p_bytes(cx.p2p_recv), p2p_bytes(cs.p2p_recv), p2p_msgs(cs.p2p_recv));
    appendf(s, "    %-30s %14" PRIu64 " %14" PRIu64 " %16" PRIu64 "\n", "collective calls", sum_calls(cn),
            sum_calls(cx), sum_calls(cs));
    appendf(s, "    %-30s %14" PRIu64 " %14" PRIu64 " %16" PRIu64 "\n", "collective payload sent",
            cn.coll_payload_sent, cx.coll_payload_sent, cs.coll_payload_sent);
    appendf(s, "    %-30s %14" PRIu64 " %14" PRIu64 " %16" PRIu64 "\n", "collective payload received",
            cn.coll_payload_recv, cx.coll_payload_recv, cs.coll_payload_recv);
    if (r.has_control && cs.control.bytes > 0)
      appendf(s, "  control traffic (library-internal agreement, not in the levels): %" PRIu64 " bytes in %" PRIu64
              " messages over all ranks\n", cs.control.bytes, cs.control.messages);
    // PMPI tool: calls per MPI function.
    if (!r.functions.empty() && r.all_ranks) {
      std::vector<CallStat> tot(r.functions.size());
      for (int k = 0; k < r.nranks; ++k)
        for (size_t f = 0; f < r.functions.size(); ++f) {
          tot[f].calls += r.calls[static_cast<size_t>(k)][g][f].calls;
          tot[f].bytes += r.calls[static_cast<size_t>(k)][g][f].bytes;
        }
      appendf(s, "  %-30s %14s %18s\n", "MPI function (all ranks)", "calls", "payload bytes");
      for (size_t f = 0; f < r.functions.size(); ++f)
        if (tot[f].calls > 0)
          appendf(s, "    %-28s %14" PRIu64 " %18" PRIu64 "\n", r.functions[f].c_str(), tot[f].calls, tot[f].bytes);
    }
    if (r.all_ranks) {
      appendf(s, "  %-5s %-5s %10s %14s %14s %14s %12s %12s %12s %12s %22s\n", "rank", "node", "time(s)", "self B",
              "intra-node B", "inter-node B", "host-dev B", "dev-dev B", "disk read B", "disk write B",
              "modelled J / measured J");
      for (int k = 0; k < r.nranks; ++k) {
        const tsr_energy_estimate e = r.rank_estimate(static_cast<int>(g), k);
        const std::string j = jfmt(e.total_joules) + " / " + (e.measured_mask ? jfmt(measured_total(e)) : "-");
        appendf(s, "  %-5d %-5d %10.4f %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %12" PRIu64 " %12" PRIu64
                " %12" PRIu64 " %12" PRIu64 " %22s\n",
                k, r.node_of.empty() ? 0 : r.node_of[static_cast<size_t>(k)], e.seconds, e.moved_bytes[0],
                e.moved_bytes[1], e.moved_bytes[2], e.moved_bytes[3], e.moved_bytes[4], e.moved_bytes[5],
                e.moved_bytes[6], j.c_str());
      }
    }
  }
  return s;
}

// -------------------------------------------------------------------- JSON
namespace {
using ojson = nlohmann::ordered_json;

ojson coeff_json(const Coeff& c, const char* unit) {
  ojson o;
  o[unit] = c.value;
  o["low"] = c.low;
  o["high"] = c.high;
  o["source"] = c.source;
  if (!c.composition.empty()) o["composition"] = c.composition;
  if (!c.uncertainty.empty()) o["uncertainty"] = c.uncertainty;
  o["origin"] = c.origin;
  return o;
}

ojson estimate_json(const tsr_energy_estimate& e, bool with_measured_count) {
  ojson o;
  o["seconds"] = e.seconds;
  ojson mb, mm, j;
  for (int l = 0; l < TSR_LEVELS; ++l) {
    const char* k = level_key(static_cast<tsr_level>(l));
    mb[k] = e.moved_bytes[l];
    if (l < kLinkLevels) mm[k] = e.moved_messages[l];
    j[k] = ojson::array({e.joules_low[l], e.joules[l], e.joules_high[l]});
  }
  o["moved_bytes"] = mb;
  o["moved_messages"] = mm;
  o["flops"] = e.flops;
  j["flops"] = ojson::array({e.flop_joules_low, e.flop_joules, e.flop_joules_high});
  j["total"] = ojson::array({e.total_joules_low, e.total_joules, e.total_joules_high});
  o["modelled_joules"] = j;  // [low, typical, high]
  if (e.measured_mask == 0) {
    o["measured_joules"] = nullptr;
  } else {
    ojson m;
    for (int d = 0; d < TSR_DOMAINS; ++d)
      if (e.measured_mask & (1 << d)) m[kDomainKeys[d]] = e.measured_joules[d];
    o["measured_joules"] = m;
  }
  if (with_measured_count) o["measured_ranks"] = e.measured_ranks;
  return o;
}

ojson traffic_json(const tsr_traffic (&t)[TSR_PEER_CLASSES]) {
  static const char* cls[3] = {"self", "node", "remote"};
  ojson o;
  for (int k = 0; k < 3; ++k) o[cls[k]] = {{"messages", t[k].messages}, {"bytes", t[k].bytes}};
  return o;
}

ojson app_json(const tsr_counters& c, bool control) {
  ojson o;
  o["p2p_sent"] = traffic_json(c.p2p_sent);
  o["p2p_recv"] = traffic_json(c.p2p_recv);
  o["collective_calls"] = sum_calls(c);
  o["collective_payload_sent"] = c.coll_payload_sent;
  o["collective_payload_recv"] = c.coll_payload_recv;
  o["collective_wire_sent_model"] = traffic_json(c.coll_wire_sent);
  o["collective_wire_recv_model"] = traffic_json(c.coll_wire_recv);
  o["host_to_device"] = c.host_to_device_bytes;
  o["device_to_host"] = c.device_to_host_bytes;
  o["device_to_device"] = c.device_to_device_bytes;
  o["disk_read"] = c.disk_read_bytes;
  o["disk_write"] = c.disk_write_bytes;
  if (control) o["control"] = {{"messages", c.control.messages}, {"bytes", c.control.bytes}};
  return o;
}

}  // namespace

std::string format_json(const ReportData& r) {
  ojson doc;
  doc["format"] = "tessera-energy-report/1";
  doc["producer"] = r.producer;
  doc["mpi"] = r.mpi;
  doc["ranks"] = r.nranks;
  doc["nodes"] = r.nnodes;
  doc["simulated_nodes"] = r.simulated_nodes;
  doc["node_of_rank"] = r.node_of;
  doc["energy_source"] = r.measured ? "measured and modelled" : "model only";
  doc["energy_source_detail"] = r.source_line();
  doc["meters"] = r.meter_status;
  doc["notes"] = r.notes;
  ojson prof;
  prof["name"] = r.profile.name;
  prof["file"] = r.profile.file;
  prof["pue"] = r.profile.pue;
  prof["pue_source"] = r.profile.pue_source;
  ojson lv;
  for (int l = 0; l < TSR_LEVELS; ++l) lv[level_key(static_cast<tsr_level>(l))] = coeff_json(r.profile.level[l], "pj_per_byte");
  prof["levels"] = lv;
  prof["flop"] = r.profile.has_flop ? coeff_json(r.profile.flop, "pj_per_flop") : ojson(nullptr);
  doc["profile"] = prof;
  ojson models;
  for (const auto& kv : r.models) models[kv.first] = kv.second;
  doc["models"] = models;
  doc["units"] = {{"bytes", "bytes"}, {"joules", "J as [low, typical, high] for modelled figures"},
                  {"seconds", "wall-clock seconds"}};
  ojson regions = ojson::array();
  for (size_t g = 0; g < r.paths.size(); ++g) {
    ojson reg;
    reg["path"] = r.paths[g];
    ojson agg;
    for (int k = 0; k < 4; ++k) agg[kStatNames[k]] = estimate_json(r.stats[g].est[k], true);
    reg["statistics"] = agg;
    reg["application"] = {{"min", app_json(r.stats[g].cmin, r.has_control)},
                          {"max", app_json(r.stats[g].cmax, r.has_control)},
                          {"sum", app_json(r.stats[g].csum, r.has_control)}};
    if (r.all_ranks) {
      ojson ranks = ojson::array();
      for (int k = 0; k < r.nranks; ++k) {
        ojson e = estimate_json(r.rank_estimate(static_cast<int>(g), k), false);
        ojson o;
        o["rank"] = k;
        o["node"] = r.node_of.empty() ? 0 : r.node_of[static_cast<size_t>(k)];
        for (auto it = e.begin(); it != e.end(); ++it) o[it.key()] = it.value();
        o["application"] = app_json(r.counters[static_cast<size_t>(k)][g], r.has_control);
        if (!r.functions.empty()) {
          ojson calls;
          for (size_t f = 0; f < r.functions.size(); ++f) {
            const CallStat& c = r.calls[static_cast<size_t>(k)][g][f];
            if (c.calls > 0) calls[r.functions[f]] = {{"calls", c.calls}, {"bytes", c.bytes}};
          }
          o["calls"] = calls;
        }
        ranks.push_back(o);
      }
      reg["ranks"] = ranks;
      if (r.matrix) {
        ojson mb = ojson::array(), mm = ojson::array();
        for (int k = 0; k < r.nranks; ++k) {
          const std::vector<uint64_t>& row = r.extras[static_cast<size_t>(k)][g].row;
          ojson b = ojson::array(), m = ojson::array();
          for (int q = 0; q < r.nranks; ++q) {
            const size_t i = 2 * static_cast<size_t>(q);
            m.push_back(i + 1 < row.size() ? row[i] : 0);
            b.push_back(i + 1 < row.size() ? row[i + 1] : 0);
          }
          mb.push_back(b);
          mm.push_back(m);
        }
        reg["matrix"] = {{"bytes", mb}, {"messages", mm}};
      }
    }
    regions.push_back(reg);
  }
  doc["regions"] = regions;
  return doc.dump(1) + "\n";
}

// --------------------------------------------------------------------- CSV
std::string format_csv(const ReportData& r) {
  std::string s = "region,rank,node,energy_source,seconds,flops";
  for (int l = 0; l < TSR_LEVELS; ++l) s += std::string(",moved_bytes_") + level_key(static_cast<tsr_level>(l));
  for (int l = 0; l < kLinkLevels; ++l) s += std::string(",moved_messages_") + level_key(static_cast<tsr_level>(l));
  for (int l = 0; l < TSR_LEVELS; ++l) s += std::string(",joules_") + level_key(static_cast<tsr_level>(l));
  s += ",joules_flops,joules_total_low,joules_total,joules_total_high";
  for (const char* d : kDomainKeys) s += std::string(",measured_joules_") + d;
  s += ",p2p_sent_bytes,p2p_recv_bytes,collective_calls,collective_payload_sent,collective_payload_recv";
  if (r.has_control) s += ",control_bytes";
  s += "\n";
  const std::string source = r.measured ? "measured and modelled" : "model only";
  auto row = [&](const std::string& path, const std::string& rank, const std::string& node,
                 const tsr_energy_estimate& e, const tsr_counters& c) {
    appendf(s, "%s,%s,%s,%s,%.9g,%" PRIu64, csv_escape(path).c_str(), rank.c_str(), node.c_str(), source.c_str(),
            e.seconds, e.flops);
    for (int l = 0; l < TSR_LEVELS; ++l) appendf(s, ",%" PRIu64, e.moved_bytes[l]);
    for (int l = 0; l < kLinkLevels; ++l) appendf(s, ",%" PRIu64, e.moved_messages[l]);
    for (int l = 0; l < TSR_LEVELS; ++l) appendf(s, ",%.9g", e.joules[l]);
    appendf(s, ",%.9g,%.9g,%.9g,%.9g", e.flop_joules, e.total_joules_low, e.total_joules, e.total_joules_high);
    for (int d = 0; d < TSR_DOMAINS; ++d) {
      if (e.measured_mask & (1 << d)) appendf(s, ",%.9g", e.measured_joules[d]);
      else s += ",";  // empty: not measured (never a zero)
    }
    appendf(s, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, p2p_bytes(c.p2p_sent), p2p_bytes(c.p2p_recv),
            sum_calls(c), c.coll_payload_sent, c.coll_payload_recv);
    if (r.has_control) appendf(s, ",%" PRIu64, c.control.bytes);
    s += "\n";
  };
  for (size_t g = 0; g < r.paths.size(); ++g) {
    if (r.all_ranks)
      for (int k = 0; k < r.nranks; ++k)
        row(r.paths[g], std::to_string(k), std::to_string(r.node_of.empty() ? 0 : r.node_of[static_cast<size_t>(k)]),
            r.rank_estimate(static_cast<int>(g), k), r.counters[static_cast<size_t>(k)][g]);
    const RegionStats& st = r.stats[g];
    // The mean row's counter columns: the sum over ranks divided by the rank
    // count, rounded to the nearest integer.
    tsr_counters mean = st.csum;
    uint64_t* w = reinterpret_cast<uint64_t*>(&mean);
    for (size_t i = 0; i < sizeof mean / sizeof(uint64_t); ++i)
      w[i] = static_cast<uint64_t>(std::llround(static_cast<double>(w[i]) / r.nranks));
    const tsr_counters* cs[4] = {&st.cmin, &mean, &st.cmax, &st.csum};
    for (int k = 0; k < 4; ++k) row(r.paths[g], kStatNames[k], "", st.est[k], *cs[k]);
  }
  return s;
}

std::string format_matrix_csv(const ReportData& r) {
  std::string s = "region,quantity,from";
  for (int q = 0; q < r.nranks; ++q) appendf(s, ",to_%d", q);
  s += "\n";
  for (size_t g = 0; g < r.paths.size(); ++g)
    for (int what = 1; what >= 0; --what)  // bytes, then messages
      for (int k = 0; k < r.nranks; ++k) {
        const std::vector<uint64_t>& row = r.extras[static_cast<size_t>(k)][g].row;
        appendf(s, "%s,%s,%d", csv_escape(r.paths[g]).c_str(), what ? "bytes" : "messages", k);
        for (int q = 0; q < r.nranks; ++q) {
          const size_t i = 2 * static_cast<size_t>(q) + static_cast<size_t>(what);
          appendf(s, ",%" PRIu64, i < row.size() ? row[i] : 0);
        }
        s += "\n";
      }
  return s;
}

// ------------------------------------------------------------------- files
tsr_status write_file(const std::string& path, const std::string& text) {
  if (path.empty()) return fail(TSR_ERR_INVALID_ARG, "argument 'path' is empty");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail(TSR_ERR_IO, "cannot create '%s': %s", tmp.c_str(), std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return fail(TSR_ERR_IO, "cannot write '%s': %s", tmp.c_str(), std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return fail(TSR_ERR_IO, "cannot write '%s': %s", tmp.c_str(), std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return fail(TSR_ERR_IO, "cannot rename '%s' to '%s': %s", tmp.c_str(), path.c_str(), std::strerror(err));
  }
  return TSR_SUCCESS;
}

}  // namespace energy
}  // namespace tsr

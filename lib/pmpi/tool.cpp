// libtessera-pmpi: state, communicator and request tables, regions, meters,
// and the report at MPI_Finalize. Every MPI call made here is a PMPI_ call,
// so the tool never counts itself.
#include "tool.hpp"
#include "coll.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "core.hpp"
#include "energy/meters.hpp"
#include "energy/profile.hpp"
#include "energy/report_core.hpp"
#include "ledger.hpp"
#include "tessera/tsr_version.h"

namespace tsr {
namespace pmpi {

__thread int t_depth __attribute__((tls_model("initial-exec"))) = 0;
__thread P2pCall t_call __attribute__((tls_model("initial-exec")));

namespace {

const char* const kFnNames[] = {
#define TSR_PMPI_NAME(name) "MPI_" #name,
    TSR_PMPI_FUNCTIONS(TSR_PMPI_NAME)
#undef TSR_PMPI_NAME
};
static_assert(sizeof kFnNames / sizeof kFnNames[0] == kFunctions, "one name per function");

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

int win_delete(MPI_Win, int, void* attr, void*) {
  delete static_cast<CommInfo*>(attr);
  return MPI_SUCCESS;
}

int comm_delete(MPI_Comm comm, int, void* attr, void*) {
  if (g_last.comm_key == key_of(comm)) g_last = Last();
  if (g_hot.comm_key == key_of(comm)) g_hot = Hot();
  if (g_allreduce.ci == attr) g_allreduce = AllreduceMemo();
  if (g_pending.ci == attr) {
    if (g_ready) flush_recv();
    g_pending = PendingRecv();
  }
  if (g != nullptr) {
    Lock lk;
    State::Slot& s = g->cache[slot_of(key_of(comm))];
    if (s.key == key_of(comm)) s = State::Slot();
  }
  delete static_cast<CommInfo*>(attr);
  return MPI_SUCCESS;
}

// The peers of a group (consumed) as world ranks and classes.
CommInfo* build_group(CommInfo* ci, MPI_Group grp) {
  MPI_Group wgrp = MPI_GROUP_NULL;
  int n = 0;
  PMPI_Group_size(grp, &n);
  PMPI_Comm_group(MPI_COMM_WORLD, &wgrp);
  std::vector<int> mine(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) mine[static_cast<size_t>(i)] = i;
  ci->world.assign(static_cast<size_t>(n), MPI_UNDEFINED);
  PMPI_Group_translate_ranks(grp, n, mine.data(), wgrp, ci->world.data());
  PMPI_Group_free(&grp);
  PMPI_Group_free(&wgrp);
  ci->cls.resize(static_cast<size_t>(n));
  ci->npeers = n;
  const int me = g->world_rank;
  for (int i = 0; i < n; ++i) {
    const int w = ci->world[static_cast<size_t>(i)];
    // A peer outside MPI_COMM_WORLD (spawned, connected) counts as remote.
    ci->cls[static_cast<size_t>(i)] = static_cast<unsigned char>(
        w == me ? TSR_PEER_SELF
        : w != MPI_UNDEFINED && g->node_of[static_cast<size_t>(w)] == g->node_of[static_cast<size_t>(me)]
            ? TSR_PEER_NODE
            : TSR_PEER_REMOTE);
  }
  return ci;
}

CommInfo* build(MPI_Comm c) {
  CommInfo* ci = new CommInfo();
  int inter = 0;
  PMPI_Comm_test_inter(c, &inter);
  ci->inter = inter != 0;
  PMPI_Comm_rank(c, &ci->rank);
  PMPI_Comm_size(c, &ci->size);
  MPI_Group grp = MPI_GROUP_NULL;
  if (ci->inter) PMPI_Comm_remote_group(c, &grp);
  else PMPI_Comm_group(c, &grp);
  return build_group(ci, grp);
}

void charge_matrix(const CommInfo* ci, int peer, uint64_t msgs, uint64_t bytes) {
  if (!g->ledger.matrix_on()) return;
  const int w = ci->world[static_cast<size_t>(peer)];
  if (w >= 0 && w < g->world_size) g->ledger.peer_sent(w, msgs, bytes);
}

void note_pcontrol_error() {
  ++g->pcontrol_errors;
  if (g->first_pcontrol_error.empty()) g->first_pcontrol_error = pending_message();
}

}  // namespace

bool regions_enabled() { return g_ready && g->regions; }

const CommInfo* comm_info_slow(MPI_Comm c) {
  if (!g_ready || c == MPI_COMM_NULL) return nullptr;
  const uintptr_t k = key_of(c);
  State::Slot& s = g->cache[slot_of(k)];
  Lock lk;
  if (s.key == k && s.info != nullptr) return s.info;
  void* attr = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(c, g->comm_keyval, &attr, &flag);
  CommInfo* ci = flag ? static_cast<CommInfo*>(attr) : nullptr;
  if (ci == nullptr) {
    ci = build(c);
    PMPI_Comm_set_attr(c, g->comm_keyval, ci);
  }
  s.key = k;
  s.info = ci;
  return ci;
}

const CommInfo* win_info(MPI_Win w) {
  if (!g_ready || w == MPI_WIN_NULL) return nullptr;
  Lock lk;
  void* attr = nullptr;
  int flag = 0;
  PMPI_Win_get_attr(w, g->win_keyval, &attr, &flag);
  if (flag) return static_cast<CommInfo*>(attr);
  CommInfo* ci = new CommInfo();
  MPI_Group grp = MPI_GROUP_NULL;
  PMPI_Win_get_group(w, &grp);
  PMPI_Group_rank(grp, &ci->rank);
  PMPI_Group_size(grp, &ci->size);
  build_group(ci, grp);
  PMPI_Win_set_attr(w, g->win_keyval, ci);
  return ci;
}

TypeSlot g_types[64];
State* g = nullptr;
bool g_ready = false;
bool g_mt = false;
bool g_matrix = false;
Last g_last;
Hot g_hot;

Lock::Lock() {
  if (g->mt) lk = std::unique_lock<std::mutex>(g->mu);
}

uint64_t type_size_slow(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return 0;
  const uintptr_t k = key_of(t);
  TypeSlot& s = g_types[slot_of(k)];
  MPI_Count n = 0;
  if (PMPI_Type_size_x(t, &n) != MPI_SUCCESS || n < 0) return 0;
  int ni = 0, na = 0, nd = 0, combiner = MPI_UNDEFINED;
  if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) == MPI_SUCCESS && combiner == MPI_COMBINER_NAMED) {
    s.key.store(0, std::memory_order_relaxed);
    s.size.store(static_cast<uint64_t>(n), std::memory_order_relaxed);
    s.key.store(k, std::memory_order_release);
  }
  return static_cast<uint64_t>(n);
}


// A call whose peer is MPI_PROC_NULL counts as a call that moved nothing.
void on_send_slow(Fn f, const CommInfo* ci, int peer, uint64_t bytes, bool call) {
  if (ci == nullptr) return;
  if (peer == MPI_PROC_NULL || peer < 0 || peer >= static_cast<int>(ci->cls.size())) {
    Lock lk;
    g->fns.add(f, 0, call);
    return;
  }
  Lock lk;
  g->ledger.p2p_sent(static_cast<tsr_peer_class>(ci->cls[static_cast<size_t>(peer)]), bytes, Traffic::data);
  charge_matrix(ci, peer, 1, bytes);
  g->fns.add(f, bytes, call);
}

void on_recv_bytes_slow(Fn f, const CommInfo* ci, int peer, uint64_t bytes, bool call) {
  if (ci == nullptr) return;
  if (peer == MPI_PROC_NULL || peer < 0 || peer >= static_cast<int>(ci->cls.size())) {
    Lock lk;
    g->fns.add(f, 0, call);
    return;
  }
  Lock lk;
  g->ledger.p2p_recv(static_cast<tsr_peer_class>(ci->cls[static_cast<size_t>(peer)]), bytes, Traffic::data);
  g->fns.add(f, bytes, call);
}

void on_coll(Fn f, const CommInfo* ci, int kind, uint64_t sent, uint64_t recv, const WireModel& m) {
  if (ci == nullptr) return;
  Lock lk;
  Ledger& l = g->ledger;
  l.coll_call(static_cast<tsr_coll_kind>(kind), sent, recv, Traffic::data);
  g->fns.add(f, sent + recv);
  if (ci->inter) {  // payload only: no wire model for intercommunicator collectives
    ++g->inter_colls;
    return;
  }
  for (const WireEdge& e : m.sent) {
    l.coll_wire_sent(static_cast<tsr_peer_class>(ci->cls[static_cast<size_t>(e.peer)]), e.messages, e.bytes,
                     Traffic::data);
    charge_matrix(ci, e.peer, e.messages, e.bytes);
  }
  for (const WireEdge& e : m.recv)
    l.coll_wire_recv(static_cast<tsr_peer_class>(ci->cls[static_cast<size_t>(e.peer)]), e.messages, e.bytes,
                     Traffic::data);
}

void on_disk(Fn f, bool write, uint64_t bytes) {
  if (!g_ready) return;
  Lock lk;
  if (write) g->ledger.disk_write(bytes);
  else g->ledger.disk_read(bytes);
  g->fns.add(f, bytes);
}

// ----------------------------------------------------------------- requests
void req_add(MPI_Request r, Deferred d) {
  if (!g_ready || r == MPI_REQUEST_NULL) return;
  Lock lk;
  g->reqs[key_of(r)] = std::move(d);
}

bool req_pending() { return g_ready && !g->reqs.empty(); }

void req_started(MPI_Request r) {
  if (!g_ready) return;
  Deferred d;
  {
    Lock lk;
    auto it = g->reqs.find(key_of(r));
    if (it == g->reqs.end()) return;
    d = it->second;
  }
  if (d.kind == Deferred::send) on_send(d.f, d.ci, d.peer, d.bytes);
  else if (d.kind == Deferred::coll) on_coll(d.f, d.ci, d.coll_kind, d.sent, d.got, d.model);
}

void req_done(MPI_Request r, const MPI_Status* st) {
  if (!g_ready) return;
  Deferred d;
  {
    Lock lk;
    auto it = g->reqs.find(key_of(r));
    if (it == g->reqs.end()) return;
    d = it->second;
    if (!d.persistent) g->reqs.erase(it);
  }
  if (st == nullptr) return;
  if (d.kind == Deferred::disk_read || d.kind == Deferred::disk_write) {
    on_disk(d.f, d.kind == Deferred::disk_write, status_bytes(st));
    return;
  }
  if (d.kind != Deferred::recv) return;
  if (d.posted && d.peer != MPI_ANY_SOURCE) {
    // MPICH 4.0 completes MPI_Isendrecv with an empty status (source 0, tag
    // 0, count 0): its receive half is counted at the posted size.
    on_recv_bytes(d.f, d.ci, d.peer, d.bytes, d.call);
    return;
  }
  int cancelled = 0;
  PMPI_Test_cancelled(st, &cancelled);
  if (!cancelled) on_recv(d.f, d.ci, st, d.call);
}

bool req_persistent(MPI_Request r) {
  if (!g_ready) return false;
  Lock lk;
  auto it = g->reqs.find(key_of(r));
  return it != g->reqs.end() && it->second.persistent;
}

void req_forget(MPI_Request r) {
  if (!g_ready || r == MPI_REQUEST_NULL) return;
  Lock lk;
  g->reqs.erase(key_of(r));
}

void req_freed(MPI_Request r) {
  if (!g_ready) return;
  Lock lk;
  auto it = g->reqs.find(key_of(r));
  if (it == g->reqs.end()) return;
  // An active receive freed before completion: its bytes are never seen.
  if (!it->second.persistent && it->second.kind == Deferred::recv) ++g->freed_unfinished;
  g->reqs.erase(it);
}

void msg_add(MPI_Message m, const CommInfo* ci) {
  if (!g_ready || m == MPI_MESSAGE_NULL || m == MPI_MESSAGE_NO_PROC) return;
  Lock lk;
  g->msgs[key_of(m)] = ci;
}

const CommInfo* msg_take(MPI_Message m) {
  if (!g_ready) return nullptr;
  Lock lk;
  auto it = g->msgs.find(key_of(m));
  if (it == g->msgs.end()) return nullptr;
  const CommInfo* ci = it->second;
  g->msgs.erase(it);
  return ci;
}

bool fortran_in_place(const void* p) {
  if (!g_ready || p == nullptr) return false;
  for (const void* q : g->fortran_in_place)
    if (p == q) return true;
  return false;
}

// -------------------------------------------------------------------- models
void model_scan_into(WireModel& m, int rank, int size, uint64_t bytes) {
  for (int mask = 1; mask < size; mask <<= 1) {
    const int partner = rank ^ mask;
    if (partner < size) {
      m.sent.push_back({partner, 1, bytes});
      m.recv.push_back({partner, 1, bytes});
    }
  }
}

void model_direct_into(WireModel& m, int rank, const std::vector<uint64_t>& to, const std::vector<uint64_t>& from) {
  for (size_t q = 0; q < to.size(); ++q)
    if (static_cast<int>(q) != rank && to[q] > 0) m.sent.push_back({static_cast<int>(q), 1, to[q]});
  for (size_t q = 0; q < from.size(); ++q)
    if (static_cast<int>(q) != rank && from[q] > 0) m.recv.push_back({static_cast<int>(q), 1, from[q]});
}

// ------------------------------------------------------------------- regions
void pcontrol(int level, const char* name) {
  if (!g_ready || !g->regions || name == nullptr || (level != 1 && level != -1)) return;
  flush_recv();
  Lock lk;
  if (level == 1) {
    if (g->ledger.begin(name) == TSR_SUCCESS) g->fns.push(g->ledger.current_path());
    else note_pcontrol_error();
  } else {
    if (g->ledger.end(name) == TSR_SUCCESS) g->fns.pop();
    else note_pcontrol_error();
  }
}

// --------------------------------------------------------------------- setup
void setup(int provided) {
  if (g != nullptr) return;
  int inited = 0;
  PMPI_Initialized(&inited);
  if (!inited) return;
  g = new State();
  g->mt = provided == MPI_THREAD_MULTIPLE;
  g_mt = g->mt;
  PMPI_Comm_rank(MPI_COMM_WORLD, &g->world_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g->world_size);
  PMPI_Comm_dup(MPI_COMM_WORLD, &g->comm);
  const size_t n = static_cast<size_t>(g->world_size);

  // Nodes: real ones from MPI_Comm_split_type, or TSR_PMPI_RANKS_PER_NODE.
  MPI_Comm node = MPI_COMM_NULL;
  PMPI_Comm_split_type(g->comm, MPI_COMM_TYPE_SHARED, g->world_rank, MPI_INFO_NULL, &node);
  int node_rank = 0, low = g->world_rank;
  PMPI_Comm_rank(node, &node_rank);
  PMPI_Allreduce(&g->world_rank, &low, 1, MPI_INT, MPI_MIN, node);
  PMPI_Comm_free(&node);
  g->leader = node_rank == 0;
  std::vector<int> leader(n);
  const int rpn = std::atoi(env("TSR_PMPI_RANKS_PER_NODE").c_str());
  if (rpn > 0) {
    g->simulated = true;
    for (size_t r = 0; r < n; ++r) leader[r] = static_cast<int>(r) / rpn * rpn;
  } else {
    PMPI_Allgather(&low, 1, MPI_INT, leader.data(), 1, MPI_INT, g->comm);
  }
  std::vector<int> ids(leader);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  g->node_of.resize(n);
  for (size_t r = 0; r < n; ++r)
    g->node_of[r] = static_cast<int>(std::lower_bound(ids.begin(), ids.end(), leader[r]) - ids.begin());
  g->nnodes = static_cast<int>(ids.size());

  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete, &g->comm_keyval, nullptr);
  PMPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_delete, &g->win_keyval, nullptr);
  g->regions = env("TSR_PMPI_PCONTROL") == "1";
  const std::string matrix = env("TSR_PMPI_MATRIX");
  if (!matrix.empty() && matrix != "0") g->ledger.set_matrix(g->world_size);
  g_matrix = g->ledger.matrix_on();

  // Profile: TSR_ENERGY_PROFILE or the default; a bad file is reported and
  // the default used, so that the run still gets its report.
  if (energy::load_profile(std::string(), &g->profile) != TSR_SUCCESS) {
    g->profile_error = pending_message();
    g->profile = energy::default_profile();
    if (g->world_rank == 0)
      std::fprintf(stderr, "libtessera-pmpi: %s; the built-in default profile is used\n", g->profile_error.c_str());
  }

  // Meters on the lowest rank of each real node.
  const std::string m = env("TSR_PMPI_METERS");
  const int mask = m == "0" || m == "none" ? TSR_METERS_NONE : TSR_METERS_AUTO;
  if (g->leader && mask != TSR_METERS_NONE) {
    const std::string root = env("TSR_POWERCAP_ROOT"), lib = env("TSR_NVML_LIBRARY");
    g->meters.open(mask, root.empty() ? "/sys/class/powercap" : root, lib.empty() ? "libnvidia-ml.so.1" : lib);
    g->meter_status = "rank " + std::to_string(g->world_rank) + ": " + g->meters.status();
    if (g->meters.domains() != 0) {
      energy::Meters* meters = &g->meters;
      g->ledger.set_meter([meters](uint64_t* uj) {
        meters->read(uj);
        return meters->domains();
      });
    }
  } else if (g->leader) {
    g->meter_status = "rank " + std::to_string(g->world_rank) + ": meters disabled (TSR_PMPI_METERS=" + m + ")";
  }

  // Fortran's MPI_IN_PLACE (Open MPI exports it under these names).
  for (const char* s : {"mpi_fortran_in_place_", "mpi_fortran_in_place", "mpi_fortran_in_place__",
                        "MPI_FORTRAN_IN_PLACE"}) {
    if (void* p = ::dlsym(RTLD_DEFAULT, s)) g->fortran_in_place.push_back(p);
  }
  g_ready = true;
}

// ------------------------------------------------------------------ finalize
namespace {

std::string join0(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) {
    s += x;
    s.push_back('\0');
  }
  return s;
}

std::vector<std::string> split0(const std::string& s) {
  std::vector<std::string> v;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\0') {
      v.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return v;
}

// Gathers one string per rank to rank 0.
std::vector<std::string> gather_strings(MPI_Comm c, const std::string& mine) {
  int size = 1, rank = 0;
  PMPI_Comm_size(c, &size);
  PMPI_Comm_rank(c, &rank);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  PMPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, c);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::string all(rank == 0 ? static_cast<size_t>(total) : 0, '\0');
  PMPI_Gatherv(mine.data(), len, MPI_CHAR, &all[0], lens.data(), displs.data(), MPI_CHAR, 0, c);
  std::vector<std::string> v;
  if (rank == 0)
    for (int r = 0; r < size; ++r)
      v.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                             static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return v;
}

void emit(const energy::ReportData& d) {
  const std::string table_mode = env("TSR_PMPI_TABLE");
  const std::string table = energy::format_table(d);
  if (table_mode != "0") {
    std::FILE* out = table_mode == "stderr" ? stderr : stdout;
    std::fprintf(out, "\n%s", table.c_str());
    std::fflush(out);
  }
  const std::string prefix = env("TSR_PMPI_PREFIX");
  if (prefix.empty()) return;
  struct Out {
    const char* ext;
    std::string text;
  };
  std::vector<Out> outs = {{".txt", table}, {".json", energy::format_json(d)}, {".csv", energy::format_csv(d)}};
  if (d.matrix) outs.push_back({".matrix.csv", energy::format_matrix_csv(d)});
  for (const Out& o : outs) {
    const std::string path = prefix + o.ext;
    if (energy::write_file(path, o.text) != TSR_SUCCESS)
      std::fprintf(stderr, "libtessera-pmpi: %s\n", pending_message().c_str());
  }
}

}  // namespace

void finalize() {
  if (!g_ready) return;
  flush_recv();
  g_ready = false;  // from here on every wrapper passes through
  g_last = Last();
  g_hot = Hot();
  g_allreduce = AllreduceMemo();
  State& s = *g;
  constexpr size_t kWords = sizeof(tsr_counters) / sizeof(uint64_t);
  constexpr size_t kXWords = sizeof(tsr_region_extra) / sizeof(uint64_t);
  // Regions still open are closed here.
  uint64_t left_open = 0;
  while (s.ledger.open_regions() > 0) {
    const std::string path = s.ledger.current_path();
    const size_t slash = path.rfind('/');
    s.ledger.end(path.substr(slash == std::string::npos ? 0 : slash + 1).c_str());
    s.fns.pop();
    ++left_open;
  }
  std::vector<std::string> names;
  const std::map<std::string, tsr_counters> snap = s.ledger.snapshot();
  const std::map<std::string, RegionExtra> snapx = s.ledger.snapshot_extra();
  for (const auto& kv : snap) names.push_back(kv.first);

  // Union of the region paths, on every rank.
  std::vector<std::string> all = gather_strings(s.comm, join0(names));
  std::string merged;
  if (s.world_rank == 0) {
    std::set<std::string> u;
    for (const std::string& x : all)
      for (std::string& p : split0(x)) u.insert(std::move(p));
    std::vector<std::string> v(u.begin(), u.end());
    v.erase(std::remove(v.begin(), v.end(), std::string("total")), v.end());
    v.insert(v.begin(), "total");
    merged = join0(v);
  }
  int mlen = static_cast<int>(merged.size());
  PMPI_Bcast(&mlen, 1, MPI_INT, 0, s.comm);
  merged.resize(static_cast<size_t>(mlen));
  PMPI_Bcast(&merged[0], mlen, MPI_CHAR, 0, s.comm);
  const std::vector<std::string> paths = split0(merged);
  const size_t nreg = paths.size();
  const bool matrix = s.ledger.matrix_on();
  const size_t rowwords = matrix ? 2 * static_cast<size_t>(s.world_size) : 0;
  const size_t fnwords = 2 * static_cast<size_t>(kFunctions);
  const size_t per = kWords + kXWords + rowwords + fnwords;
  std::vector<uint64_t> mine(nreg * per, 0);
  for (size_t gi = 0; gi < nreg; ++gi) {
    uint64_t* at = mine.data() + gi * per;
    auto c = snap.find(paths[gi]);
    if (c != snap.end()) std::memcpy(at, &c->second, sizeof(tsr_counters));
    auto x = snapx.find(paths[gi]);
    if (x != snapx.end()) {
      std::memcpy(at + kWords, &x->second.x, sizeof(tsr_region_extra));
      for (size_t i = 0; i < rowwords && i < x->second.row.size(); ++i) at[kWords + kXWords + i] = x->second.row[i];
    }
    if (c != snap.end()) {
      const std::vector<energy::CallStat> f = s.fns.get(paths[gi]);
      for (size_t k = 0; k < static_cast<size_t>(kFunctions); ++k) {
        at[kWords + kXWords + rowwords + 2 * k] = f[k].calls;
        at[kWords + kXWords + rowwords + 2 * k + 1] = f[k].bytes;
      }
    }
  }
  std::vector<uint64_t> every(s.world_rank == 0 ? mine.size() * static_cast<size_t>(s.world_size) : 0);
  PMPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, every.data(), static_cast<int>(mine.size()),
              MPI_UINT64_T, 0, s.comm);
  std::string status = s.meter_status;
  const std::string warn = s.meters.warnings();
  if (!warn.empty()) status += '\0' + warn;
  const std::vector<std::string> statuses = gather_strings(s.comm, status);
  // Coverage notes, summed over ranks.
  uint64_t notes_in[4] = {s.freed_unfinished, s.inter_colls, s.pcontrol_errors, left_open};
  uint64_t notes_sum[4] = {0, 0, 0, 0};
  PMPI_Reduce(notes_in, notes_sum, 4, MPI_UINT64_T, MPI_SUM, 0, s.comm);

  if (s.world_rank == 0) {
    energy::ReportData d;
    d.producer = std::string("libtessera-pmpi ") + TSR_VERSION_STRING + " (PMPI interception)";
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int vl = 0;
    if (PMPI_Get_library_version(v, &vl) == MPI_SUCCESS) {
      std::string t(v, static_cast<size_t>(vl));
      d.mpi = t.substr(0, t.find_first_of("\n,"));
    }
    d.nranks = s.world_size;
    d.nnodes = s.nnodes;
    d.simulated_nodes = s.simulated;
    d.node_of = s.node_of;
    d.profile = s.profile;
    d.paths = paths;
    d.all_ranks = true;
    d.matrix = matrix;
    d.has_control = false;
    d.counters.assign(static_cast<size_t>(s.world_size), std::vector<tsr_counters>(nreg));
    d.extras.assign(static_cast<size_t>(s.world_size), std::vector<RegionExtra>(nreg));
    d.calls.assign(static_cast<size_t>(s.world_size),
                   std::vector<std::vector<energy::CallStat>>(nreg, std::vector<energy::CallStat>(kFunctions)));
    for (int f = 0; f < kFunctions; ++f) d.functions.push_back(kFnNames[f]);
    for (size_t r = 0; r < static_cast<size_t>(s.world_size); ++r)
      for (size_t gi = 0; gi < nreg; ++gi) {
        const uint64_t* at = every.data() + (r * nreg + gi) * per;
        std::memcpy(&d.counters[r][gi], at, sizeof(tsr_counters));
        std::memcpy(&d.extras[r][gi].x, at + kWords, sizeof(tsr_region_extra));
        d.extras[r][gi].row.assign(at + kWords + kXWords, at + kWords + kXWords + rowwords);
        for (size_t k = 0; k < static_cast<size_t>(kFunctions); ++k) {
          d.calls[r][gi][k].calls = at[kWords + kXWords + rowwords + 2 * k];
          d.calls[r][gi][k].bytes = at[kWords + kXWords + rowwords + 2 * k + 1];
        }
      }
    for (const std::string& st : statuses) {
      if (st.empty()) continue;
      const std::vector<std::string> parts = split0(st + '\0');
      d.meter_status.push_back(parts[0]);
      for (size_t i = 1; i < parts.size(); ++i) d.notes.push_back(parts[i]);
    }
    d.compute_stats();
    for (size_t gi = 0; gi < nreg && !d.measured; ++gi) d.measured = d.stats[gi].est[TSR_STAT_SUM].measured_ranks > 0;
    d.models = {
        {"point-to-point", "exact: count x type size at the call (sends) or from the status at completion "
                           "(receives), by peer class"},
        {"bcast", "binomial tree from the root"},
        {"reduce", "binomial tree to the root"},
        {"allreduce", "ring: reduce-scatter then all-gather, 2(p-1) steps"},
        {"allgather(v)", "ring, p-1 steps"},
        {"reduce_scatter(_block)", "ring, p-1 steps"},
        {"alltoall(v,w)", "direct: one message to every other rank with its block"},
        {"gather(v)", "direct to the root"},
        {"scatter(v)", "direct from the root"},
        {"barrier", "dissemination, ceil(log2 p) rounds of empty messages"},
        {"scan, exscan", "recursive doubling: partner rank XOR 2^k, n bytes each way per round"},
        {"neighbourhood collectives", "exact: one message per topology neighbour"},
        {"one-sided", "exact: put and accumulate as sent, get as received"},
        {"MPI-IO", "exact: bytes from the status (blocking) or requested (nonblocking, split)"},
        {"intercommunicator collectives", "payload only, no wire model"},
    };
    if (!s.profile_error.empty()) d.notes.push_back("TSR_ENERGY_PROFILE: " + s.profile_error + "; default used");
    if (notes_sum[0] > 0)
      d.notes.push_back(std::to_string(notes_sum[0]) + " receive request(s) freed before completion: not counted");
    if (notes_sum[1] > 0)
      d.notes.push_back(std::to_string(notes_sum[1]) + " intercommunicator collective call(s): payload counted, no "
                        "wire model");
    if (notes_sum[2] > 0)
      d.notes.push_back(std::to_string(notes_sum[2]) + " MPI_Pcontrol region call(s) ignored (first: " +
                        s.first_pcontrol_error + ")");
    if (notes_sum[3] > 0)
      d.notes.push_back(std::to_string(notes_sum[3]) + " region(s) still open at MPI_Finalize, closed there");
    emit(d);
  }
  PMPI_Comm_free(&s.comm);
  s.ledger.set_meter(nullptr);
  s.meters.close();
}

}  // namespace pmpi
}  // namespace tsr

// The public accounted collectives (tsr_bcast ... tsr_shift) on every axis of
// 1D, 2D, 2.5D and 3D grids: the values they deliver for every element type,
// and the exact change of every counter per call, both computed here from the
// documented definitions and the assumed algorithms (binomial-tree bcast,
// ring allreduce / allgather / reduce-scatter, direct alltoall, point-to-point
// shift), with peer classes from simulated nodes of 2 ranks and the axis
// membership found with plain MPI. Then the error paths, which must fail on
// every rank of the axis without hanging, and the C++ wrappers.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

using Dims = std::array<int, 3>;
using Bytes = std::vector<unsigned char>;

constexpr int kRpn = 2;  // simulated ranks per node

const tsr_grid_axis kAxes[] = {TSR_AXIS_ROW, TSR_AXIS_COL, TSR_AXIS_DEPTH, TSR_AXIS_LAYER, TSR_AXIS_ALL};
const char* const kAxisNames[] = {"ROW", "COL", "DEPTH", "LAYER", "ALL"};
const tsr_dtype kTypes[] = {TSR_FLOAT64, TSR_FLOAT32, TSR_INT32, TSR_INT64, TSR_BFLOAT16};

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }
int mod(long long a, int p) { return static_cast<int>(((a % p) + p) % p); }

// ------------------------------------------------------------ element types
size_t esize(tsr_dtype t) {
  switch (t) {
    case TSR_BYTE: return 1;
    case TSR_INT32: return 4;
    case TSR_INT64: return 8;
    case TSR_FLOAT32: return 4;
    case TSR_FLOAT64: return 8;
    case TSR_BFLOAT16: return 2;
  }
  return 0;
}
const char* tname(tsr_dtype t) {
  switch (t) {
    case TSR_BYTE: return "byte";
    case TSR_INT32: return "int32";
    case TSR_INT64: return "int64";
    case TSR_FLOAT32: return "float32";
    case TSR_FLOAT64: return "float64";
    case TSR_BFLOAT16: return "bfloat16";
  }
  return "?";
}

// bfloat16 is the upper half of a float: exact for small integers.
uint16_t to_bf16(double v) {
  const float f = static_cast<float>(v);
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}
double from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

Bytes encode(tsr_dtype t, const std::vector<double>& v) {
  Bytes b(v.size() * esize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    unsigned char* p = b.data() + i * esize(t);
    switch (t) {
      case TSR_INT32: { const int32_t x = static_cast<int32_t>(v[i]); std::memcpy(p, &x, 4); break; }
      case TSR_INT64: { const int64_t x = static_cast<int64_t>(v[i]); std::memcpy(p, &x, 8); break; }
      case TSR_FLOAT32: { const float x = static_cast<float>(v[i]); std::memcpy(p, &x, 4); break; }
      case TSR_FLOAT64: { const double x = v[i]; std::memcpy(p, &x, 8); break; }
      case TSR_BFLOAT16: { const uint16_t x = to_bf16(v[i]); std::memcpy(p, &x, 2); break; }
      case TSR_BYTE: p[0] = static_cast<unsigned char>(v[i]); break;
    }
  }
  return b;
}

std::vector<double> decode(tsr_dtype t, const Bytes& b) {
  std::vector<double> v(b.size() / esize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    const unsigned char* p = b.data() + i * esize(t);
    switch (t) {
      case TSR_INT32: { int32_t x; std::memcpy(&x, p, 4); v[i] = x; break; }
      case TSR_INT64: { int64_t x; std::memcpy(&x, p, 8); v[i] = static_cast<double>(x); break; }
      case TSR_FLOAT32: { float x; std::memcpy(&x, p, 4); v[i] = x; break; }
      case TSR_FLOAT64: { double x; std::memcpy(&x, p, 8); v[i] = x; break; }
      case TSR_BFLOAT16: { uint16_t x; std::memcpy(&x, p, 2); v[i] = from_bf16(x); break; }
      case TSR_BYTE: v[i] = p[0]; break;
    }
  }
  return v;
}

// Small integers (exact in every type, sums of up to 8 of them too); for
// products only 1, 2 and -1 so that products of 8 stay exact in bfloat16.
double value(int seed, int t, tsr_op op = TSR_SUM) {
  if (op == TSR_PROD) {
    const int x = mod(seed + 2 * t, 3);
    return x == 0 ? 1 : x == 1 ? 2 : -1;
  }
  return mod(seed * 7 + t * 3 + 1, 11) - 5;
}
std::vector<double> values(int seed, int n, tsr_op op = TSR_SUM, int offset = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) v[static_cast<size_t>(t)] = value(seed, offset + t, op);
  return v;
}
double combine(tsr_op op, double a, double b) {
  switch (op) {
    case TSR_SUM: return a + b;
    case TSR_PROD: return a * b;
    case TSR_MIN: return std::min(a, b);
    case TSR_MAX: return std::max(a, b);
  }
  return 0;
}

// ------------------------------------------------------------------- grids
Dims coords_of(const Dims& d, int g) { return {(g / d[1]) % d[0], g % d[1], g / (d[0] * d[1])}; }
int rank_of(const Dims& d, const Dims& c) { return (c[2] * d[0] + c[0]) * d[1] + c[1]; }
Dims axis_member(const Dims& d, int a, const Dims& me, int q) {
  switch (a) {
    case TSR_AXIS_ROW: return {me[0], q, me[2]};
    case TSR_AXIS_COL: return {q, me[1], me[2]};
    case TSR_AXIS_DEPTH: return {me[0], me[1], q};
    case TSR_AXIS_LAYER: return {q / d[1], q % d[1], me[2]};
    default: return coords_of(d, q);
  }
}

// One axis seen from the calling member: its size and my position, the grid
// rank of every member (from the coordinate formula, used as data seeds) and
// the peer class of every member (world ranks gathered with plain MPI on the
// axis communicator; node = world rank / kRpn).
struct Axis {
  tsr_grid_axis axis = TSR_AXIS_ALL;
  int p = 0, pos = -1;
  std::vector<int> seed;
  std::vector<tsr_peer_class> cls;
};

Axis axis_view(tsr_grid g, tsr_grid_axis a) {
  Axis x;
  x.axis = a;
  int d[3], c[3];
  EXPECT_EQ(tsr_grid_get_dims(g, d), TSR_SUCCESS);
  EXPECT_EQ(tsr_grid_my_coords(g, c), TSR_SUCCESS);
  MPI_Comm comm = MPI_COMM_NULL;
  EXPECT_EQ(tsr_grid_comm(g, a, &comm), TSR_SUCCESS);
  if (comm == MPI_COMM_NULL) return x;
  MPI_Comm_size(comm, &x.p);
  MPI_Comm_rank(comm, &x.pos);
  const Dims dims{d[0], d[1], d[2]}, me{c[0], c[1], c[2]};
  for (int q = 0; q < x.p; ++q) x.seed.push_back(rank_of(dims, axis_member(dims, a, me, q)));
  const int w = world_rank();
  std::vector<int> worlds(static_cast<size_t>(x.p));
  MPI_Allgather(&w, 1, MPI_INT, worlds.data(), 1, MPI_INT, comm);
  for (int q = 0; q < x.p; ++q) {
    const int o = worlds[static_cast<size_t>(q)];
    x.cls.push_back(q == x.pos ? TSR_PEER_SELF : o / kRpn == w / kRpn ? TSR_PEER_NODE : TSR_PEER_REMOTE);
  }
  return x;
}

std::string dstr(const Dims& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

// ---------------------------------------------------------------- counters
using Fields = std::vector<std::pair<std::string, uint64_t>>;

Fields fields(const tsr_counters& c) {
  Fields f;
  const char* cls[3] = {"self", "node", "remote"};
  for (int k = 0; k < 3; ++k) {
    f.push_back({std::string("p2p_sent[") + cls[k] + "].messages", c.p2p_sent[k].messages});
    f.push_back({std::string("p2p_sent[") + cls[k] + "].bytes", c.p2p_sent[k].bytes});
    f.push_back({std::string("p2p_recv[") + cls[k] + "].messages", c.p2p_recv[k].messages});
    f.push_back({std::string("p2p_recv[") + cls[k] + "].bytes", c.p2p_recv[k].bytes});
  }
  for (int k = 0; k < TSR_COLL_KINDS; ++k) f.push_back({"coll_calls[" + std::to_string(k) + "]", c.coll_calls[k]});
  f.push_back({"coll_payload_sent", c.coll_payload_sent});
  f.push_back({"coll_payload_recv", c.coll_payload_recv});
  for (int k = 0; k < 3; ++k) {
    f.push_back({std::string("coll_wire_sent[") + cls[k] + "].messages", c.coll_wire_sent[k].messages});
    f.push_back({std::string("coll_wire_sent[") + cls[k] + "].bytes", c.coll_wire_sent[k].bytes});
    f.push_back({std::string("coll_wire_recv[") + cls[k] + "].messages", c.coll_wire_recv[k].messages});
    f.push_back({std::string("coll_wire_recv[") + cls[k] + "].bytes", c.coll_wire_recv[k].bytes});
  }
  f.push_back({"host_to_device_bytes", c.host_to_device_bytes});
  f.push_back({"device_to_host_bytes", c.device_to_host_bytes});
  f.push_back({"device_to_device_bytes", c.device_to_device_bytes});
  f.push_back({"disk_read_bytes", c.disk_read_bytes});
  f.push_back({"disk_write_bytes", c.disk_write_bytes});
  f.push_back({"control.messages", c.control.messages});
  f.push_back({"control.bytes", c.control.bytes});
  return f;
}

tsr_counters zero() {
  tsr_counters c;
  std::memset(&c, 0, sizeof c);
  return c;
}

// Snapshots of "total" and of the open region "api".
struct Snap {
  Fields total, region;
};
Snap snap(tsr_context ctx) {
  tsr_counters t = zero(), r = zero();
  EXPECT_EQ(tsr_counters_get(ctx, "total", &t), TSR_SUCCESS) << tsr_last_error(ctx);
  EXPECT_EQ(tsr_counters_get(ctx, "api", &r), TSR_SUCCESS) << tsr_last_error(ctx);
  return {fields(t), fields(r)};
}

// after - before == want, field by field, in "total" and in the region.
void expect_delta(const Snap& before, const Snap& after, const tsr_counters& want, const std::string& what) {
  const Fields w = fields(want);
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(after.total[i].second - before.total[i].second, w[i].second) << what << ": total " << w[i].first;
    EXPECT_EQ(after.region[i].second - before.region[i].second, w[i].second) << what << ": region " << w[i].first;
  }
}

// The agreement every call makes on its axis: a 3-element int64 ring
// all-reduce (control traffic, what this rank sends plus what it receives),
// and, if a rank failed, a 516-byte binomial-tree broadcast from that rank.
// m: elements of the all-reduce (3 for the agreement; where named arguments
// differ, one more of 2 per argument finds the first that differs).
void add_ring_allreduce_control(tsr_counters& w, const Axis& x, uint64_t m = 3) {
  const int p = x.p, r = x.pos;
  if (p <= 1) return;
  const uint64_t P = static_cast<uint64_t>(p);
  auto ch = [&](int i) -> uint64_t { return m / P + (static_cast<uint64_t>(i) < m % P ? 1 : 0); };
  const uint64_t sent = (m - ch(mod(r + 1, p))) + (m - ch(mod(r + 2, p)));
  const uint64_t recv = (m - ch(r)) + (m - ch(mod(r + 1, p)));
  w.control.messages += 4 * static_cast<uint64_t>(p - 1);
  w.control.bytes += 8 * (sent + recv);
}

// Binomial tree rooted at root over p ranks: (parent or -1, children), in axis positions.
std::pair<int, std::vector<int>> binomial(int p, int r, int root) {
  const int v = mod(r - root, p);
  int low = 1;
  if (v == 0) {
    while (low < p) low <<= 1;
  } else {
    low = v & -v;
  }
  std::vector<int> children;
  for (int m = 1; m < low; m <<= 1)
    if (v + m < p) children.push_back(mod(v + m + root, p));
  return {v == 0 ? -1 : mod(v - low + root, p), children};
}

void add_failure_bcast_control(tsr_counters& w, const Axis& x, int failed) {
  if (x.p <= 1) return;
  const auto tree = binomial(x.p, x.pos, failed);
  const uint64_t msgs = tree.second.size() + (tree.first >= 0 ? 1 : 0);
  w.control.messages += msgs;
  w.control.bytes += 516 * msgs;
}

void wire_sent(tsr_counters& w, const Axis& x, int q, uint64_t msgs, uint64_t bytes) {
  w.coll_wire_sent[x.cls[static_cast<size_t>(q)]].messages += msgs;
  w.coll_wire_sent[x.cls[static_cast<size_t>(q)]].bytes += bytes;
}
void wire_recv(tsr_counters& w, const Axis& x, int q, uint64_t msgs, uint64_t bytes) {
  w.coll_wire_recv[x.cls[static_cast<size_t>(q)]].messages += msgs;
  w.coll_wire_recv[x.cls[static_cast<size_t>(q)]].bytes += bytes;
}

// Expected counters of one successful call, per the documented definitions.
tsr_counters want_bcast(const Axis& x, uint64_t n, int root) {
  tsr_counters w = zero();
  add_ring_allreduce_control(w, x);
  w.coll_calls[TSR_COLL_BCAST] = 1;
  (x.pos == root ? w.coll_payload_sent : w.coll_payload_recv) = n;
  if (x.p > 1) {
    const auto tree = binomial(x.p, x.pos, root);
    if (tree.first >= 0) wire_recv(w, x, tree.first, 1, n);
    for (int c : tree.second) wire_sent(w, x, c, 1, n);
  }
  return w;
}

tsr_counters want_allreduce(const Axis& x, uint64_t count, uint64_t e) {
  tsr_counters w = zero();
  add_ring_allreduce_control(w, x);
  w.coll_calls[TSR_COLL_ALLREDUCE] = 1;
  w.coll_payload_sent = w.coll_payload_recv = count * e;
  const int p = x.p, r = x.pos;
  if (p > 1) {
    auto chunk = [&](int i) -> uint64_t {
      return count / static_cast<uint64_t>(p) + (static_cast<uint64_t>(i) < count % static_cast<uint64_t>(p) ? 1 : 0);
    };
    const uint64_t sent = (count - chunk(mod(r + 1, p))) + (count - chunk(mod(r + 2, p)));
    const uint64_t recv = (count - chunk(r)) + (count - chunk(mod(r + 1, p)));
    wire_sent(w, x, mod(r + 1, p), 2 * static_cast<uint64_t>(p - 1), sent * e);
    wire_recv(w, x, mod(r - 1, p), 2 * static_cast<uint64_t>(p - 1), recv * e);
  }
  return w;
}

tsr_counters want_allgather(const Axis& x, uint64_t count, uint64_t e) {
  tsr_counters w = zero();
  add_ring_allreduce_control(w, x);
  w.coll_calls[TSR_COLL_ALLGATHER] = 1;
  const uint64_t p = static_cast<uint64_t>(x.p);
  w.coll_payload_sent = count * e;
  w.coll_payload_recv = p * count * e;
  if (x.p > 1) {
    wire_sent(w, x, mod(x.pos + 1, x.p), p - 1, (p - 1) * count * e);
    wire_recv(w, x, mod(x.pos - 1, x.p), p - 1, (p - 1) * count * e);
  }
  return w;
}

tsr_counters want_reduce_scatter(const Axis& x, uint64_t count, uint64_t e) {
  tsr_counters w = zero();
  add_ring_allreduce_control(w, x);
  w.coll_calls[TSR_COLL_REDUCE_SCATTER] = 1;
  const uint64_t p = static_cast<uint64_t>(x.p);
  w.coll_payload_sent = p * count * e;
  w.coll_payload_recv = count * e;
  if (x.p > 1) {
    wire_sent(w, x, mod(x.pos + 1, x.p), p - 1, (p - 1) * count * e);
    wire_recv(w, x, mod(x.pos - 1, x.p), p - 1, (p - 1) * count * e);
  }
  return w;
}

tsr_counters want_alltoall(const Axis& x, uint64_t count, uint64_t e) {
  tsr_counters w = zero();
  add_ring_allreduce_control(w, x);
  w.coll_calls[TSR_COLL_ALLTOALL] = 1;
  const uint64_t p = static_cast<uint64_t>(x.p);
  w.coll_payload_sent = w.coll_payload_recv = p * count * e;
  for (int q = 0; q < x.p; ++q) {
    if (q == x.pos) continue;
    wire_sent(w, x, q, 1, count * e);
    wire_recv(w, x, q, 1, count * e);
  }
  return w;
}

tsr_counters want_shift(const Axis& x, uint64_t count, uint64_t e, int shift) {
  tsr_counters w = zero();
  add_ring_allreduce_control(w, x);
  const int dest = mod(static_cast<long long>(x.pos) + shift, x.p);
  const int src = mod(static_cast<long long>(x.pos) - shift, x.p);
  w.p2p_sent[x.cls[static_cast<size_t>(dest)]].messages += 1;
  w.p2p_sent[x.cls[static_cast<size_t>(dest)]].bytes += count * e;
  w.p2p_recv[x.cls[static_cast<size_t>(src)]].messages += 1;
  w.p2p_recv[x.cls[static_cast<size_t>(src)]].bytes += count * e;
  return w;
}

// A context with simulated nodes and the region "api" open.
// --------------------------------------------- shared context and grids
// Creating contexts and grids costs several collectives (a grid: five
// communicator splits), so the tests share one context with simulated nodes
// and its grids, created on first use (in the same order on every rank) and
// destroyed after the last test. The region "api" stays open throughout.
struct Shared {
  tsr_context ctx = nullptr;
  std::vector<std::pair<std::pair<int, Dims>, tsr_grid>> grids;
  std::unique_ptr<tessera::context> cpp_ctx;
  std::unique_ptr<tessera::grid> cpp_grid;
};
Shared& shared() {
  static Shared s;
  return s;
}
tsr_context context() {
  Shared& s = shared();
  if (s.ctx == nullptr) {
    tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
    cfg.ranks_per_node = kRpn;
    EXPECT_EQ(tsr_context_create_ex(MPI_COMM_WORLD, &cfg, &s.ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
    EXPECT_EQ(tsr_region_begin(s.ctx, "api"), TSR_SUCCESS);
  }
  return s.ctx;
}
tsr_grid grid(tsr_grid_kind kind, const Dims& d) {
  Shared& s = shared();
  for (auto& e : s.grids)
    if (e.first.first == kind && e.first.second == d) return e.second;
  tsr_grid g = nullptr;
  EXPECT_EQ(tsr_grid_create(context(), kind, d.data(), &g), TSR_SUCCESS) << tsr_last_error(context());
  s.grids.push_back({{kind, d}, g});
  return g;
}
Dims dims_for(tsr_grid_kind kind) {
  int d[3] = {0, 0, 0}, used = 0;
  EXPECT_EQ(tsr_grid_dims_create(kind, world_size(), 1, d, &used), TSR_SUCCESS);
  return {d[0], d[1], d[2]};
}
tsr_grid grid2d() { return grid(TSR_GRID_2D, dims_for(TSR_GRID_2D)); }

class SharedTeardown : public ::testing::Environment {
 public:
  void TearDown() override {
    Shared& s = shared();
    s.cpp_grid.reset();
    s.cpp_ctx.reset();
    for (auto& e : s.grids) EXPECT_EQ(tsr_grid_destroy(&e.second), TSR_SUCCESS);
    s.grids.clear();
    if (s.ctx != nullptr) {
      EXPECT_EQ(tsr_region_end(s.ctx, "api"), TSR_SUCCESS);
      EXPECT_EQ(tsr_context_destroy(&s.ctx), TSR_SUCCESS) << tsr_last_error(s.ctx);
    }
  }
};
::testing::Environment* const kSharedTeardown = ::testing::AddGlobalTestEnvironment(new SharedTeardown);

// --------------------------------------------------- values and counters
// One call of each collective on axis x, with its values and its counter
// deltas (in "total" and in the open region) checked.
struct OneCall {
  tsr_context ctx;
  tsr_grid g;
  const Axis& x;
  tsr_dtype type;
  int count;
  std::string where;

  size_t e() const { return esize(type); }
  int mine() const { return x.seed[static_cast<size_t>(x.pos)]; }
  std::string at(const std::string& what) const {
    return where + " " + tname(type) + " count " + std::to_string(count) + " " + what;
  }
  static void* ptr(Bytes& b) { return b.empty() ? nullptr : b.data(); }

  void bcast(int root) const {
    const int r = x.pos;
    Bytes buf = r == root ? encode(type, values(mine(), count)) : encode(type, std::vector<double>(count, -3));
    const Snap b = snap(ctx);
    EXPECT_EQ(tsr_bcast(g, x.axis, ptr(buf), static_cast<size_t>(count), type, root), TSR_SUCCESS)
        << tsr_last_error(ctx);
    const std::string what = at("bcast root " + std::to_string(root));
    expect_delta(b, snap(ctx), want_bcast(x, static_cast<uint64_t>(count) * e(), root), what);
    EXPECT_EQ(decode(type, buf), values(x.seed[static_cast<size_t>(root)], count)) << what;
  }

  void allreduce(bool in_place) const {
    std::vector<double> sum(static_cast<size_t>(count), 0);
    for (int q = 0; q < x.p; ++q)
      for (int t = 0; t < count; ++t) sum[static_cast<size_t>(t)] += value(x.seed[static_cast<size_t>(q)], t);
    Bytes s = encode(type, values(mine(), count));
    Bytes out = encode(type, std::vector<double>(count, 99));
    Bytes& rb = in_place ? s : out;
    const Snap b = snap(ctx);
    EXPECT_EQ(tsr_allreduce(g, x.axis, ptr(s), ptr(rb), static_cast<size_t>(count), type, TSR_SUM), TSR_SUCCESS)
        << tsr_last_error(ctx);
    const std::string what = at(in_place ? "allreduce in place" : "allreduce");
    expect_delta(b, snap(ctx), want_allreduce(x, static_cast<uint64_t>(count), e()), what);
    EXPECT_EQ(decode(type, rb), sum) << what;
    if (!in_place) {
      EXPECT_EQ(decode(type, s), values(mine(), count)) << what << " changed sbuf";
    }
  }

  void allgather() const {
    Bytes s = encode(type, values(mine(), count));
    Bytes rb = encode(type, std::vector<double>(static_cast<size_t>(x.p * count), 77));
    std::vector<double> want;
    for (int q = 0; q < x.p; ++q) {
      const std::vector<double> v = values(x.seed[static_cast<size_t>(q)], count);
      want.insert(want.end(), v.begin(), v.end());
    }
    const Snap b = snap(ctx);
    EXPECT_EQ(tsr_allgather(g, x.axis, ptr(s), static_cast<size_t>(count), ptr(rb), type), TSR_SUCCESS)
        << tsr_last_error(ctx);
    expect_delta(b, snap(ctx), want_allgather(x, static_cast<uint64_t>(count), e()), at("allgather"));
    EXPECT_EQ(decode(type, rb), want) << at("allgather");
  }

  // Member q gets the sum over members of their block q.
  void reduce_scatter() const {
    Bytes s = encode(type, values(mine(), x.p * count));
    Bytes rb = encode(type, std::vector<double>(static_cast<size_t>(count), 55));
    std::vector<double> want(static_cast<size_t>(count), 0);
    for (int q = 0; q < x.p; ++q)
      for (int t = 0; t < count; ++t)
        want[static_cast<size_t>(t)] += value(x.seed[static_cast<size_t>(q)], x.pos * count + t);
    const Snap b = snap(ctx);
    EXPECT_EQ(tsr_reduce_scatter(g, x.axis, ptr(s), ptr(rb), static_cast<size_t>(count), type, TSR_SUM),
              TSR_SUCCESS)
        << tsr_last_error(ctx);
    expect_delta(b, snap(ctx), want_reduce_scatter(x, static_cast<uint64_t>(count), e()), at("reduce_scatter"));
    EXPECT_EQ(decode(type, rb), want) << at("reduce_scatter");
  }

  // Block dst of member m holds value(16*m + dst, t).
  void alltoall() const {
    std::vector<double> sv, want;
    for (int q = 0; q < x.p; ++q)
      for (int t = 0; t < count; ++t) {
        sv.push_back(value(mine() * 16 + q, t));
        want.push_back(value(x.seed[static_cast<size_t>(q)] * 16 + x.pos, t));
      }
    Bytes s = encode(type, sv);
    Bytes rb = encode(type, std::vector<double>(static_cast<size_t>(x.p * count), 44));
    const Snap b = snap(ctx);
    EXPECT_EQ(tsr_alltoall(g, x.axis, ptr(s), ptr(rb), static_cast<size_t>(count), type), TSR_SUCCESS)
        << tsr_last_error(ctx);
    expect_delta(b, snap(ctx), want_alltoall(x, static_cast<uint64_t>(count), e()), at("alltoall"));
    EXPECT_EQ(decode(type, rb), want) << at("alltoall");
  }

  // Receives from the member `shift` positions behind.
  void shift(int by) const {
    Bytes s = encode(type, values(mine(), count));
    Bytes rb = encode(type, std::vector<double>(static_cast<size_t>(count), 33));
    const Snap b = snap(ctx);
    EXPECT_EQ(tsr_shift(g, x.axis, ptr(s), ptr(rb), static_cast<size_t>(count), type, by), TSR_SUCCESS)
        << tsr_last_error(ctx);
    const std::string what = at("shift " + std::to_string(by));
    expect_delta(b, snap(ctx), want_shift(x, static_cast<uint64_t>(count), e(), by), what);
    const int from = mod(static_cast<long long>(x.pos) - by, x.p);
    EXPECT_EQ(decode(type, rb), values(x.seed[static_cast<size_t>(from)], count)) << what;
  }
};

// Every collective on every axis of the 1D grid, the 2D grid, and the 2.5D
// and 3D grids that fit (with idle ranks where the rank count does not fit).
// Types and counts rotate with the (grid, axis) pair and the collective, so
// that every collective meets every type with every count (5, 13: uneven
// ring chunks, 1: fewer elements than ranks, 0: NULL buffers).
TEST(Collectives, ValuesAndCountersOnEveryAxisOfEveryGrid) {
  const int n = world_size();
  tsr_context ctx = context();
  const std::pair<tsr_grid_kind, Dims> kinds[] = {{TSR_GRID_1D, {n, 1, 1}},
                                                  {TSR_GRID_2D, dims_for(TSR_GRID_2D)},
                                                  {TSR_GRID_2P5D, dims_for(TSR_GRID_2P5D)},
                                                  {TSR_GRID_3D, dims_for(TSR_GRID_3D)}};
  const int kCounts[] = {5, 13, 1, 0};
  // 4 grids x 5 axes = 20 consecutive values of k: every (type, count) pair
  // for every collective.
  int k = 0;
  for (const auto& kd : kinds) {
      const tsr_grid g = grid(kd.first, kd.second);
      int member = 0;
      EXPECT_EQ(tsr_grid_is_member(g, &member), TSR_SUCCESS);
      for (int a = 0; a < 5; ++a, ++k) {
        if (!member) continue;
        const Axis x = axis_view(g, kAxes[a]);
        int pos = -1, size = -1;
        EXPECT_EQ(tsr_grid_axis_info(g, kAxes[a], &pos, &size), TSR_SUCCESS);
        EXPECT_EQ(pos, x.pos);
        EXPECT_EQ(size, x.p);
        const std::string where =
            "grid " + std::to_string(kd.first) + " " + dstr(kd.second) + " axis " + kAxisNames[a];
        auto run = [&](int c) {
          return OneCall{ctx, g, x, kTypes[(k + c) % 5], kCounts[(k + 3 * c) % 4], where};
        };
        run(0).bcast(mod(k, x.p));
        run(1).allreduce(k % 2 == 1);
        run(2).allgather();
        run(3).reduce_scatter();
        run(4).alltoall();
        run(5).shift(k % 3 == 0 ? 1 : k % 3 == 1 ? -1 : x.p + 2);
      }
  }
}

// On the 2D grid: bcast from every kind of root, allreduce in place, and
// shifts by 0, negative, larger than the axis, INT_MIN and INT_MAX.
TEST(Collectives, VariantsOnTheTwoDimensionalGrid) {
  tsr_context ctx = context();
  const tsr_grid g = grid2d();
  int k = 0;
  for (int a : {TSR_AXIS_ROW, TSR_AXIS_ALL}) {
    const Axis x = axis_view(g, kAxes[a]);
    const std::string where = std::string("2D axis ") + kAxisNames[a];
    auto run = [&](int count) { return OneCall{ctx, g, x, kTypes[k++ % 5], count, where}; };
    for (int root : std::set<int>{0, x.p / 2, x.p - 1}) run(7).bcast(root);
    run(9).allreduce(true);
    for (int by : {0, -1, x.p, -(2 * x.p + 1), INT_MIN, INT_MAX}) run(3).shift(by);
  }
}

// PROD, MIN and MAX: allreduce with every type, reduce_scatter with one
// type each (on the axis of all members).
TEST(Collectives, ReductionOperations) {
  tsr_context ctx = context();
  const tsr_grid g = grid2d();
  const int count = 7;
  const Axis x = axis_view(g, TSR_AXIS_ALL);
  const int mine = x.seed[static_cast<size_t>(x.pos)];
  int k = 0;
  for (tsr_op op : {TSR_PROD, TSR_MIN, TSR_MAX}) {
    for (tsr_dtype type : kTypes) {
      const std::string at = std::string(tname(type)) + " op " + std::to_string(op);
      std::vector<double> want = values(x.seed[0], count, op);
      for (int q = 1; q < x.p; ++q)
        for (int t = 0; t < count; ++t)
          want[static_cast<size_t>(t)] =
              combine(op, want[static_cast<size_t>(t)], value(x.seed[static_cast<size_t>(q)], t, op));
      Bytes s = encode(type, values(mine, count, op)), rb(s.size());
      const Snap b = snap(ctx);
      EXPECT_EQ(tsr_allreduce(g, TSR_AXIS_ALL, s.data(), rb.data(), count, type, op), TSR_SUCCESS)
          << tsr_last_error(ctx);
      expect_delta(b, snap(ctx), want_allreduce(x, count, esize(type)), at);
      EXPECT_EQ(decode(type, rb), want) << at << " allreduce";
    }
    const tsr_dtype type = kTypes[(2 * k++ + 1) % 5];
    const std::string at = std::string(tname(type)) + " op " + std::to_string(op);
    std::vector<double> rs(static_cast<size_t>(count));
    for (int t = 0; t < count; ++t) {
      double acc = value(x.seed[0], x.pos * count + t, op);
      for (int q = 1; q < x.p; ++q)
        acc = combine(op, acc, value(x.seed[static_cast<size_t>(q)], x.pos * count + t, op));
      rs[static_cast<size_t>(t)] = acc;
    }
    Bytes s2 = encode(type, values(mine, x.p * count, op)), rb2(static_cast<size_t>(count) * esize(type));
    const Snap b = snap(ctx);
    EXPECT_EQ(tsr_reduce_scatter(g, TSR_AXIS_ALL, s2.data(), rb2.data(), count, type, op), TSR_SUCCESS)
        << tsr_last_error(ctx);
    expect_delta(b, snap(ctx), want_reduce_scatter(x, count, esize(type)), at);
    EXPECT_EQ(decode(type, rb2), rs) << at << " reduce_scatter";
  }
}

// The agreement is control traffic only: a call that fails in the agreement
// (arguments differ across ranks) moves no data and charges no data counter,
// only the agreement's all-reduce; successful calls add one agreement each.
TEST(Collectives, AgreementIsControlTrafficOnly) {
  const int n = world_size();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  tsr_context ctx = context();
  const tsr_grid g = grid(TSR_GRID_1D, {n, 1, 1});
  const Axis x = axis_view(g, TSR_AXIS_ALL);
  std::vector<double> buf(64, 1.0), out(64 * static_cast<size_t>(n), 0.0);
  tsr_counters w = zero();
  add_ring_allreduce_control(w, x);
  add_ring_allreduce_control(w, x, 2 * 4);  // the named arguments: the call, count, type, memory space
  const size_t count = x.pos == n - 1 ? 5 : 4;
  const Snap b = snap(ctx);
  EXPECT_EQ(tsr_allgather(g, TSR_AXIS_ALL, buf.data(), count, out.data(), TSR_FLOAT64), TSR_ERR_INVALID_ARG);
  expect_delta(b, snap(ctx), w, "allgather with differing counts");
  EXPECT_TRUE(contains(tsr_last_error(ctx), "argument 'count' differs")) << tsr_last_error(ctx);
  const Snap b2 = snap(ctx);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tsr_bcast(g, TSR_AXIS_ALL, buf.data(), 4, TSR_FLOAT64, 0), TSR_SUCCESS);
  const Fields one = fields(want_bcast(x, 32, 0));
  const Snap after = snap(ctx);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(after.total[i].second - b2.total[i].second, 3 * one[i].second) << "three bcasts: " << one[i].first;
  }
  EXPECT_GT(fields(w).back().second, 0u) << "the agreement moves bytes";
}

// ----------------------------------------------------------------- errors
// A call on an axis: index 0..5 = bcast, allreduce, allgather, reduce_scatter, alltoall, shift.
const char* const kNames[] = {"tsr_bcast", "tsr_allreduce", "tsr_allgather", "tsr_reduce_scatter", "tsr_alltoall",
                              "tsr_shift"};

struct Args {
  tsr_grid_axis axis = TSR_AXIS_ALL;
  const void* sbuf = nullptr;
  void* rbuf = nullptr;
  size_t count = 0;
  tsr_dtype type = TSR_FLOAT64;
  tsr_op op = TSR_SUM;
  int root = 0;
  int shift = 1;
};

tsr_status call(int which, tsr_grid g, const Args& a) {
  switch (which) {
    case 0: return tsr_bcast(g, a.axis, a.rbuf, a.count, a.type, a.root);
    case 1: return tsr_allreduce(g, a.axis, a.sbuf, a.rbuf, a.count, a.type, a.op);
    case 2: return tsr_allgather(g, a.axis, a.sbuf, a.count, a.rbuf, a.type);
    case 3: return tsr_reduce_scatter(g, a.axis, a.sbuf, a.rbuf, a.count, a.type, a.op);
    case 4: return tsr_alltoall(g, a.axis, a.sbuf, a.rbuf, a.count, a.type);
    default: return tsr_shift(g, a.axis, a.sbuf, a.rbuf, a.count, a.type, a.shift);
  }
}

// Buffers big enough for any of the calls below (8 ranks, 8-byte elements).
struct Buffers {
  std::vector<double> s = std::vector<double>(1024, 1.0), r = std::vector<double>(1024, 0.0);
  Args args(tsr_grid_axis axis) {
    Args a;
    a.axis = axis;
    a.sbuf = s.data();
    a.rbuf = r.data();
    a.count = 4;
    return a;
  }
};

// The error tests run on the shared 2D grid.
struct CollectiveErrors : ::testing::Test {
  tsr_context ctx = context();
  tsr_grid g = grid2d();
  Buffers buf;
  // Every rank makes the call; every rank must see `status`, a message naming
  // the function and containing needle, and only the control traffic `want`.
  void expect_fail(int which, const Args& a, tsr_status status, const std::string& needle, const tsr_counters& want,
                   const std::string& what) {
    const Snap b = snap(ctx);
    const tsr_status st = call(which, g, a);
    const std::string msg = tsr_last_error(ctx);
    EXPECT_EQ(st, status) << kNames[which] << " " << what << ": " << tsr_status_name(st) << " " << msg;
    EXPECT_TRUE(contains(msg, kNames[which])) << msg;
    EXPECT_TRUE(contains(msg, needle)) << what << ": \"" << needle << "\" not in \"" << msg << "\"";
    EXPECT_EQ(std::string(tsr_last_error(nullptr)), msg);
    expect_delta(b, snap(ctx), want, std::string(kNames[which]) + " " + what);
  }
  // Control traffic of a failed agreement on axis x: ring all-reduce plus the
  // broadcast of the failing rank's message.
  static tsr_counters failed(const Axis& x, int failing) {
    tsr_counters w = zero();
    add_ring_allreduce_control(w, x);
    add_failure_bcast_control(w, x, failing);
    return w;
  }
};

TEST_F(CollectiveErrors, InvalidAxisAndNullGrid) {
  for (int which = 0; which < 6; ++which)
    for (int axis : {-1, 5, 42}) {
      Args a = buf.args(static_cast<tsr_grid_axis>(axis));
      expect_fail(which, a, TSR_ERR_INVALID_ARG, "'axis' = " + std::to_string(axis), zero(),
                  "axis " + std::to_string(axis));
    }
  Args a = buf.args(TSR_AXIS_ALL);
  for (int which = 0; which < 6; ++which) {
    EXPECT_EQ(call(which, nullptr, a), TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(tsr_last_error(nullptr), "'grid'")) << tsr_last_error(nullptr);
    EXPECT_TRUE(contains(tsr_last_error(nullptr), kNames[which])) << tsr_last_error(nullptr);
  }
}

TEST_F(CollectiveErrors, NullBuffersWithCount) {
  const Axis x = axis_view(g, TSR_AXIS_ALL);
  const tsr_counters w = failed(x, 0);  // every rank fails: rank 0 reports
  for (int which = 0; which < 6; ++which) {
    Args a = buf.args(TSR_AXIS_ALL);
    if (which == 0) {
      a.rbuf = nullptr;
      expect_fail(which, a, TSR_ERR_INVALID_ARG, "'buf'", w, "NULL buf");
      continue;
    }
    a.sbuf = nullptr;
    expect_fail(which, a, TSR_ERR_INVALID_ARG, "'sbuf'", w, "NULL sbuf");
    a = buf.args(TSR_AXIS_ALL);
    a.rbuf = nullptr;
    expect_fail(which, a, TSR_ERR_INVALID_ARG, "'rbuf'", w, "NULL rbuf");
  }
}

TEST_F(CollectiveErrors, NullBuffersWithCountZeroAreFine) {
  for (tsr_grid_axis axis : {TSR_AXIS_ALL})
    for (int which = 0; which < 6; ++which) {
      Args a;
      a.axis = axis;
      EXPECT_EQ(call(which, g, a), TSR_SUCCESS) << kNames[which] << ": " << tsr_last_error(ctx);
    }
}

TEST_F(CollectiveErrors, InvalidTypeOpRootAndSameBuffer) {
  const Axis x = axis_view(g, TSR_AXIS_ALL);
  const tsr_counters w = failed(x, 0);
  const int bad_types[] = {-1, 6, 99};
  for (int which = 0; which < 6; ++which) {
    Args a = buf.args(TSR_AXIS_ALL);
    const int t = bad_types[which % 3];
    a.type = static_cast<tsr_dtype>(t);
    expect_fail(which, a, TSR_ERR_INVALID_ARG, "'type' = " + std::to_string(t), w, "type");
  }
  for (int which : {1, 3}) {
    const int op = which == 1 ? -1 : 4;
    Args a = buf.args(TSR_AXIS_ALL);
    a.op = static_cast<tsr_op>(op);
    expect_fail(which, a, TSR_ERR_INVALID_ARG, "'op' = " + std::to_string(op), w, "op");
  }
  for (int root : {-1, x.p}) {
    Args a = buf.args(TSR_AXIS_ALL);
    a.root = root;
    expect_fail(0, a, TSR_ERR_INVALID_ARG, "'root' = " + std::to_string(root), w, "root");
  }
  for (int which : {3, 4, 5}) {
    Args a = buf.args(TSR_AXIS_ALL);
    a.rbuf = buf.s.data();
    expect_fail(which, a, TSR_ERR_INVALID_ARG, "'sbuf' and 'rbuf'", w, "same buffer");
  }
}

// One member of the axis passes an argument that differs from the others':
// every member fails with TSR_ERR_INVALID_ARG, nobody hangs, no data moves.
TEST_F(CollectiveErrors, ArgumentsDifferOnOneRank) {
  for (tsr_grid_axis axis : {TSR_AXIS_ALL, TSR_AXIS_ROW}) {
    const Axis x = axis_view(g, axis);
    if (x.p < 2) continue;  // nothing can differ on a one-member axis
    // The agreement, then the all-reduce that names the differing argument:
    // 2 int64 per named argument (the call, count, type, root, op or shift
    // where the collective has one, and the memory space of the buffers).
    auto w = [&](int which) {
      tsr_counters c = zero();
      add_ring_allreduce_control(c, x);
      add_ring_allreduce_control(c, x, which == 2 || which == 4 ? 8 : 10);
      return c;
    };
    const bool odd = x.pos == x.p - 1;
    for (int which = 0; which < 6; ++which) {
      Args a = buf.args(axis);
      if (odd) a.count = 5;
      expect_fail(which, a, TSR_ERR_INVALID_ARG, "argument 'count' differs", w(which), "count");
      if (axis != TSR_AXIS_ALL) continue;
      a = buf.args(axis);
      if (odd) a.type = TSR_INT64;
      expect_fail(which, a, TSR_ERR_INVALID_ARG, "argument 'type' differs", w(which), "type");
    }
    if (axis != TSR_AXIS_ALL) continue;
    for (int which : {1, 3}) {
      Args a = buf.args(axis);
      if (odd) a.op = TSR_MAX;
      expect_fail(which, a, TSR_ERR_INVALID_ARG, "argument 'op' differs", w(which), "op");
    }
    Args a = buf.args(axis);
    if (odd) a.root = 1;
    expect_fail(0, a, TSR_ERR_INVALID_ARG, "argument 'root' differs", w(0), "root");
    a = buf.args(axis);
    if (odd) a.shift = 2;
    expect_fail(5, a, TSR_ERR_INVALID_ARG, "argument 'shift' differs", w(5), "shift");
  }
}

// One member of the axis (the last) passes a bad argument: every member gets
// its status, the others' message says which member failed and why. On the
// column axis every column has its own failing member.
TEST_F(CollectiveErrors, BadArgumentOnOneRank) {
  for (tsr_grid_axis axis : {TSR_AXIS_ALL, TSR_AXIS_COL}) {
    const Axis x = axis_view(g, axis);
    const int bad = x.p - 1;
    const bool mine = x.pos == bad;
    const tsr_counters w = failed(x, bad);
    auto check = [&](int which, const Args& a, const std::string& needle, const std::string& what) {
      expect_fail(which, a, TSR_ERR_INVALID_ARG, needle, w, what);
      if (!mine) {
        const std::string msg = tsr_last_error(ctx);
        EXPECT_TRUE(contains(msg, "rank " + std::to_string(bad) + " failed")) << what << ": " << msg;
      }
    };
    for (int which = 0; which < (axis == TSR_AXIS_ALL ? 6 : 2); ++which) {
      Args a = buf.args(axis);
      if (mine) a.rbuf = nullptr;
      check(which, a, which == 0 ? "'buf'" : "'rbuf'", "NULL buffer on one rank");
      if (axis != TSR_AXIS_ALL) continue;
      a = buf.args(axis);
      if (mine) a.type = static_cast<tsr_dtype>(17);
      check(which, a, "'type'", "invalid type on one rank");
    }
    if (axis != TSR_AXIS_ALL) continue;
    Args a = buf.args(axis);
    if (mine) a.root = x.p;
    check(0, a, "'root'", "root out of range on one rank");
    for (int which : {1, 3}) {
      a = buf.args(axis);
      if (mine) a.op = static_cast<tsr_op>(-3);
      check(which, a, "'op'", "invalid op on one rank");
    }
    for (int which : {3, 4, 5}) {
      a = buf.args(axis);
      if (mine) a.rbuf = buf.s.data();
      check(which, a, "'sbuf' and 'rbuf'", "same buffer on one rank");
    }
  }
  // The grid still works after all those failures.
  double v = 1, s = 0;
  EXPECT_EQ(tsr_allreduce(g, TSR_AXIS_ALL, &v, &s, 1, TSR_FLOAT64, TSR_SUM), TSR_SUCCESS) << tsr_last_error(ctx);
  EXPECT_EQ(s, world_size());
}

// Counts no buffer can have (more than PTRDIFF_MAX bytes, also once
// multiplied by the axis size) must fail on every rank, with no data
// moved or charged: each rank's local check fails them before the agreement
// (issue 15), so the agreement and its failure broadcast from axis position
// 0 are the only (control) traffic. In lib/transport.cpp
// allgather and alltoall check `count * size` in size_t, which wraps: with
// count = 2^63 on an axis of 2 (or 2^62 on 4) the check passes, MPI gets a
// count of 0 and the call "succeeds", charging a call with payload 0.
TEST_F(CollectiveErrors, HugeCountsAreRejectedOnEveryRank) {
  const Axis x = axis_view(g, TSR_AXIS_ALL);
  tsr_counters w = zero();
  add_ring_allreduce_control(w, x);
  add_failure_bcast_control(w, x, 0);
  // (Counts beyond INT_MAX that a buffer can hold are moved, split into
  // chunks: the Split tests of test_transport and SplitCollectives below.)
  const size_t counts[] = {static_cast<size_t>(PTRDIFF_MAX) / sizeof(double) + 1, static_cast<size_t>(1) << 63,
                           static_cast<size_t>(1) << 62};
  for (size_t count : counts)
    for (int which = 0; which < 6; ++which) {
      Args a = buf.args(TSR_AXIS_ALL);
      a.count = count;
      expect_fail(which, a, TSR_ERR_UNSUPPORTED, "PTRDIFF_MAX", w, "count " + std::to_string(count));
    }
}

// Ranks that are not in the grid must not call: TSR_ERR_STATE, locally,
// with no traffic; the members alone complete their collectives.
TEST(CollectiveIdle, IdleRankCalls) {
  const int n = world_size();
  if (n < 2) GTEST_SKIP() << "needs an idle rank";
  tsr_context ctx = context();
  const tsr_grid g = grid(TSR_GRID_1D, {n - 1, 1, 1});
  int member = 0;
  ASSERT_EQ(tsr_grid_is_member(g, &member), TSR_SUCCESS);
  Buffers buf;
  if (!member) {
    for (int which = 0; which < 6; ++which)
      for (tsr_grid_axis axis : kAxes) {
        const Snap b = snap(ctx);
        EXPECT_EQ(call(which, g, buf.args(axis)), TSR_ERR_STATE) << kNames[which];
        EXPECT_TRUE(contains(tsr_last_error(ctx), "idle")) << tsr_last_error(ctx);
        EXPECT_TRUE(contains(tsr_last_error(ctx), kNames[which])) << tsr_last_error(ctx);
        expect_delta(b, snap(ctx), zero(), std::string(kNames[which]) + " on an idle rank");
      }
  } else {
    const Axis x = axis_view(g, TSR_AXIS_ALL);
    EXPECT_EQ(x.p, n - 1);
    double v = x.seed[static_cast<size_t>(x.pos)] + 1.0, s = 0;
    EXPECT_EQ(tsr_allreduce(g, TSR_AXIS_ALL, &v, &s, 1, TSR_FLOAT64, TSR_SUM), TSR_SUCCESS) << tsr_last_error(ctx);
    EXPECT_EQ(s, (n - 1) * n / 2.0);
  }
}

// ------------------------------------------------------------------- C++
tessera::grid& cpp_grid() {
  Shared& s = shared();
  if (!s.cpp_grid) {
    s.cpp_ctx.reset(new tessera::context(MPI_COMM_WORLD, kRpn));
    s.cpp_grid.reset(new tessera::grid(*s.cpp_ctx, TSR_GRID_2D, tessera::grid::dims_for(TSR_GRID_2D, world_size())));
  }
  return *s.cpp_grid;
}

template <class T>
std::vector<T> typed(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// The wrappers against the independent expectation and against the C call
// on the same data (full: every collective; otherwise allreduce and allgather).
template <class T>
void cpp_values(tessera::grid& g, const Axis& x, tsr_dtype type, bool full) {
  const tsr_grid h = g.get();
  const int count = 6, p = x.p, r = x.pos;
  const int mine = x.seed[static_cast<size_t>(r)];
  const std::string at = std::string(tname(type)) + " axis " + std::to_string(x.axis);
  auto same_as_c = [&](const std::vector<T>& cpp, const std::vector<T>& c, const char* what) {
    EXPECT_EQ(cpp, c) << at << " " << what << ": the wrapper and the C call differ";
  };
  {
    const std::vector<T> s = typed<T>(values(mine, count));
    std::vector<T> out(count), ref(count);
    g.allreduce<T>(x.axis, s, out);
    std::vector<double> want(count, 0);
    for (int q = 0; q < p; ++q)
      for (int t = 0; t < count; ++t) want[static_cast<size_t>(t)] += value(x.seed[static_cast<size_t>(q)], t);
    EXPECT_EQ(out, typed<T>(want)) << at << " allreduce";
    if (full) {
      ASSERT_EQ(tsr_allreduce(h, x.axis, s.data(), ref.data(), count, type, TSR_SUM), TSR_SUCCESS);
      same_as_c(out, ref, "allreduce");
      std::vector<T> mx(count);
      g.allreduce<T>(x.axis, s, mx, TSR_MAX);
      for (int t = 0; t < count; ++t) {
        double m = -1e9;
        for (int q = 0; q < p; ++q) m = std::max(m, value(x.seed[static_cast<size_t>(q)], t));
        EXPECT_EQ(static_cast<double>(mx[static_cast<size_t>(t)]), m) << at << " allreduce MAX";
      }
    }
  }
  {
    const std::vector<T> s = typed<T>(values(mine, count));
    std::vector<T> out(static_cast<size_t>(p * count)), ref(out.size());
    g.allgather<T>(x.axis, s, out);
    std::vector<double> want;
    for (int q = 0; q < p; ++q) {
      const auto v = values(x.seed[static_cast<size_t>(q)], count);
      want.insert(want.end(), v.begin(), v.end());
    }
    EXPECT_EQ(out, typed<T>(want)) << at << " allgather";
    if (full) {
      ASSERT_EQ(tsr_allgather(h, x.axis, s.data(), count, ref.data(), type), TSR_SUCCESS);
      same_as_c(out, ref, "allgather");
    }
  }
  if (!full) return;
  {
    const std::vector<T> s = typed<T>(values(mine, p * count));
    std::vector<T> out(count), ref(count);
    g.reduce_scatter<T>(x.axis, s, out);
    ASSERT_EQ(tsr_reduce_scatter(h, x.axis, s.data(), ref.data(), count, type, TSR_SUM), TSR_SUCCESS);
    std::vector<double> want(count, 0);
    for (int q = 0; q < p; ++q)
      for (int t = 0; t < count; ++t)
        want[static_cast<size_t>(t)] += value(x.seed[static_cast<size_t>(q)], r * count + t);
    EXPECT_EQ(out, typed<T>(want)) << at << " reduce_scatter";
    same_as_c(out, ref, "reduce_scatter");
  }
  {
    std::vector<double> sv, want;
    for (int q = 0; q < p; ++q)
      for (int t = 0; t < count; ++t) {
        sv.push_back(value(mine * 16 + q, t));
        want.push_back(value(x.seed[static_cast<size_t>(q)] * 16 + r, t));
      }
    const std::vector<T> s = typed<T>(sv);
    std::vector<T> out(s.size()), ref(s.size());
    g.alltoall<T>(x.axis, s, out);
    ASSERT_EQ(tsr_alltoall(h, x.axis, s.data(), ref.data(), count, type), TSR_SUCCESS);
    EXPECT_EQ(out, typed<T>(want)) << at << " alltoall";
    same_as_c(out, ref, "alltoall");
  }
  {
    const int shift = -(p + 1);
    const std::vector<T> s = typed<T>(values(mine, count));
    std::vector<T> out(count), ref(count);
    g.shift<T>(x.axis, s, out, shift);
    ASSERT_EQ(tsr_shift(h, x.axis, s.data(), ref.data(), count, type, shift), TSR_SUCCESS);
    EXPECT_EQ(out, typed<T>(values(x.seed[static_cast<size_t>(mod(r - shift, p))], count))) << at << " shift";
    same_as_c(out, ref, "shift");
  }
  {
    std::vector<T> b = r == p - 1 ? typed<T>(values(mine, count)) : std::vector<T>(count, T(0));
    g.bcast<T>(x.axis, b, p - 1);
    EXPECT_EQ(b, typed<T>(values(x.seed[static_cast<size_t>(p - 1)], count))) << at << " bcast";
  }
}

TEST(CollectivesCpp, WrappersGiveTheSameValues) {
  tessera::grid& g = cpp_grid();
  for (tsr_grid_axis a : {TSR_AXIS_ROW, TSR_AXIS_COL, TSR_AXIS_ALL}) {
    const Axis x = axis_view(g.get(), a);
    EXPECT_EQ(g.axis(a).first, x.pos);
    EXPECT_EQ(g.axis(a).second, x.p);
    cpp_values<double>(g, x, TSR_FLOAT64, a == TSR_AXIS_ALL);
  }
  const Axis x = axis_view(g.get(), TSR_AXIS_ALL);
  cpp_values<float>(g, x, TSR_FLOAT32, false);
  cpp_values<int32_t>(g, x, TSR_INT32, false);
  cpp_values<int64_t>(g, x, TSR_INT64, false);
}

// Runs f; returns the status it threw (TSR_SUCCESS if none) and the message.
std::pair<tsr_status, std::string> status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tessera::error& e) {
    return {e.status(), e.what()};
  }
  return {TSR_SUCCESS, ""};
}

// A receive span of the wrong size on one rank: that rank throws
// TSR_ERR_SHAPE, the other members throw too (instead of hanging).
TEST(CollectivesCpp, WrongReceiveSpanOnOneRankThrowsEverywhere) {
  tessera::grid& g = cpp_grid();
  const int p = g.axis(TSR_AXIS_ALL).second, r = g.axis(TSR_AXIS_ALL).first;
  const bool bad = r == p - 1;
  const size_t c = 3, P = static_cast<size_t>(p);
  std::vector<double> s(P * c, 1.0);
  using Call = std::function<void()>;
  const std::pair<const char*, Call> calls[] = {
      {"allreduce",
       [&] {
         std::vector<double> out(bad ? c + 1 : c);
         g.allreduce<double>(TSR_AXIS_ALL, tessera::span<const double>(s.data(), c), out);
       }},
      {"allgather",
       [&] {
         std::vector<double> out(bad ? P * c - 1 : P * c);
         g.allgather<double>(TSR_AXIS_ALL, tessera::span<const double>(s.data(), c), out);
       }},
      {"reduce_scatter",
       [&] {
         std::vector<double> out(bad ? c + 2 : c);
         g.reduce_scatter<double>(TSR_AXIS_ALL, s, out);
       }},
      {"alltoall",
       [&] {
         std::vector<double> out(bad ? P * c + 1 : P * c);
         g.alltoall<double>(TSR_AXIS_ALL, s, out);
       }},
      {"shift",
       [&] {
         std::vector<double> out(bad ? c - 1 : c);
         g.shift<double>(TSR_AXIS_ALL, tessera::span<const double>(s.data(), c), out, 1);
       }},
  };
  for (const auto& nc : calls) {
    const auto res = status_of(nc.second);
    if (bad) {
      EXPECT_EQ(res.first, TSR_ERR_SHAPE) << nc.first << ": " << res.second;
      EXPECT_TRUE(contains(res.second, "receive span")) << res.second;
    } else {
      EXPECT_NE(res.first, TSR_SUCCESS) << nc.first << ": the other ranks must fail too";
      EXPECT_TRUE(contains(res.second, "rank " + std::to_string(p - 1) + " failed")) << res.second;
    }
  }
  // And the grid still works.
  std::vector<double> one{1.0}, sum(1);
  g.allreduce<double>(TSR_AXIS_ALL, one, sum);
  EXPECT_EQ(sum[0], p);
}

// A receive span of the wrong size must throw TSR_ERR_SHAPE whatever the
// sizes: with an empty send span (count 0) tessera.hpp passes a NULL receive
// buffer, which a call with count 0 accepts, so nothing is thrown; with an
// empty receive span the status is the C call's TSR_ERR_INVALID_ARG.
TEST(CollectivesCpp, WrongReceiveSpanEdgeCasesThrowShapeError) {
  tessera::grid& g = cpp_grid();
  std::vector<double> none, two(2);
  const auto e = status_of([&] { g.shift<double>(TSR_AXIS_ALL, two, none, 1); });
  EXPECT_EQ(e.first, TSR_ERR_SHAPE) << "shift into an empty span: " << e.second;
  EXPECT_EQ(status_of([&] { g.allreduce<double>(TSR_AXIS_ALL, none, two); }).first, TSR_ERR_SHAPE) << "allreduce";
  EXPECT_EQ(status_of([&] { g.allgather<double>(TSR_AXIS_ALL, none, two); }).first, TSR_ERR_SHAPE) << "allgather";
  EXPECT_EQ(status_of([&] { g.shift<double>(TSR_AXIS_ALL, none, two, 1); }).first, TSR_ERR_SHAPE) << "shift";
  EXPECT_EQ(status_of([&] { g.alltoall<double>(TSR_AXIS_ALL, none, two); }).first, TSR_ERR_SHAPE) << "alltoall";
}

// A send span that is not a whole number of blocks (reduce_scatter,
// alltoall) is a size error: TSR_ERR_SHAPE on every rank. tessera.hpp passes
// a NULL receive buffer, so the status is the C call's TSR_ERR_INVALID_ARG
// ("'rbuf' is NULL") or, with fewer elements than members (count 0), success.
TEST(CollectivesCpp, SendSpanNotAMultipleOfTheAxisIsAShapeError) {
  tessera::grid& g = cpp_grid();
  const size_t P = static_cast<size_t>(g.axis(TSR_AXIS_ALL).second);
  if (P < 2) GTEST_SKIP() << "every length is a multiple of 1";
  std::vector<double> s(2 * P + 1, 1.0), r2(2), s1(1, 1.0), r0, a(2 * P + 1), a1(1);
  auto rs = status_of([&] { g.reduce_scatter<double>(TSR_AXIS_ALL, s, r2); });
  EXPECT_EQ(rs.first, TSR_ERR_SHAPE) << "reduce_scatter, send 2p+1: " << rs.second;
  auto rs0 = status_of([&] { g.reduce_scatter<double>(TSR_AXIS_ALL, s1, r0); });
  EXPECT_EQ(rs0.first, TSR_ERR_SHAPE) << "reduce_scatter, send 1 < p: " << rs0.second;
  auto aa = status_of([&] { g.alltoall<double>(TSR_AXIS_ALL, s, a); });
  EXPECT_EQ(aa.first, TSR_ERR_SHAPE) << "alltoall, send 2p+1: " << aa.second;
  auto aa0 = status_of([&] { g.alltoall<double>(TSR_AXIS_ALL, s1, a1); });
  EXPECT_EQ(aa0.first, TSR_ERR_SHAPE) << "alltoall, send 1 < p: " << aa0.second;
}

}  // namespace

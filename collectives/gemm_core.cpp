// Pure arithmetic of the distributed GEMM (see gemm_core.hpp).
#include "gemm_core.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "transport.hpp"

namespace tsr {
namespace gemm {

// ---------------------------------------------------------------- splits
std::vector<Piece> pieces(const Split& s, int64_t n, const Dims& c) {
  std::vector<Piece> out;
  if (s.block > 0 && s.levels == 1) {
    const int64_t nb = s.block, p = s.parts[0];
    const int64_t me = (c[static_cast<size_t>(s.dim[0])] - s.src % p + p) % p;  // my block offset from the source
    int64_t loc = 0;
    for (int64_t bi = me; bi * nb < n; bi += p) {
      const int64_t len = std::min(nb, n - bi * nb);
      out.push_back({bi * nb, len, loc});
      loc += len;
    }
    return out;
  }
  const Range r = share(s, n, c);
  if (r.len > 0) out.push_back({r.off, r.len, 0});
  return out;
}

Range share(const Split& s, int64_t n, const Dims& c, int skip) {
  Range r{0, n};
  for (int l = 0; l < s.levels; ++l) {
    if (s.dim[l] == skip) continue;
    const Range b = balanced(r.len, s.parts[l], c[static_cast<size_t>(s.dim[l])]);
    r = {r.off + b.off, b.len};
  }
  return r;
}

int64_t local_len(const Split& s, int64_t n, const Dims& c) {
  if (s.block > 0 && s.levels == 1) {
    int64_t len = 0;
    for (const Piece& p : pieces(s, n, c)) len += p.len;
    return len;
  }
  return share(s, n, c).len;
}

std::string layout_problem(const tsr_layout& l, const Dims& dims) {
  (void)dims;
  const int d[3] = {l.row_dim, l.col_dim, l.sub_dim};
  const char* names[3] = {"row_dim", "col_dim", "sub_dim"};
  for (int a = 0; a < 3; ++a)
    if (d[a] < -1 || d[a] > 2)
      return std::string(names[a]) + " = " + std::to_string(d[a]) + " is not TSR_DIM_NONE, TSR_DIM_I, TSR_DIM_J or TSR_DIM_K";
  for (int a = 0; a < 3; ++a)
    for (int b = a + 1; b < 3; ++b)
      if (d[a] >= 0 && d[a] == d[b])
        return std::string(names[a]) + " and " + names[b] + " name the same grid dimension " + std::to_string(d[a]);
  if (l.row_block < 0 || l.col_block < 0) return "row_block and col_block must be >= 0";
  if (l.sub_dim >= 0 && (l.row_block > 0 || l.col_block > 0))
    return "sub_dim cannot be combined with block-cyclic row_block/col_block";
  return std::string();
}

Layout normalise(const tsr_layout& l, const Dims& dims) {
  Layout out;
  auto add = [&](Split& s, int d) {
    if (d < 0 || dims[static_cast<size_t>(d)] <= 1) return;
    s.dim[s.levels] = d;
    s.parts[s.levels] = dims[static_cast<size_t>(d)];
    s.levels += 1;
  };
  add(out.rows, l.row_dim);
  add(out.cols, l.col_dim);
  add(out.cols, l.sub_dim);
  if (out.rows.levels == 1) out.rows.block = l.row_block;
  if (out.cols.levels == 1 && l.sub_dim < 0) out.cols.block = l.col_block;
  return out;
}

// ------------------------------------------------------------------ roles
namespace {

std::vector<int> list(const Split& s) {
  std::vector<int> v;
  for (int l = 0; l < s.levels; ++l) v.push_back(s.dim[l]);
  return v;
}

// L in {[], [role], [role, g], [g]} (absent role or g: -1 removes the option).
bool loose(const std::vector<int>& L, int role, int g) {
  if (L.empty()) return true;
  if (L.size() == 1) return (role >= 0 && L[0] == role) || (g >= 0 && L[0] == g);
  return role >= 0 && g >= 0 && L[0] == role && L[1] == g;
}
// L in {[role], [role, g]}; with no role: {[], [g]}.
bool exact(const std::vector<int>& L, int role, int g) {
  std::vector<int> want;
  if (role >= 0) want.push_back(role);
  if (L == want) return true;
  if (g >= 0) want.push_back(g);
  return L == want;
}
int count_of(const std::vector<int>& a, const std::vector<int>& b, int d) {
  if (d < 0) return 0;
  return static_cast<int>(std::count(a.begin(), a.end(), d) + std::count(b.begin(), b.end(), d));
}

bool fits(Engine e, const Roles& r, const Shape& s, const Layout& a, const Layout& b, const Layout& c,
          std::string* which) {
  const std::vector<int> am = list(lrows(a, s.ta)), ak = list(lcols(a, s.ta));
  const std::vector<int> bk = list(lrows(b, s.tb)), bn = list(lcols(b, s.tb));
  const std::vector<int> cm = list(c.rows), cn = list(c.cols);
  if (e == Engine::three_phase) {
    if (!(loose(am, r.m, r.n) && loose(ak, r.k, r.n) && count_of(am, ak, r.n) <= 1)) return *which = "A", false;
    if (!(loose(bk, r.k, r.m) && loose(bn, r.n, r.m) && count_of(bk, bn, r.m) <= 1)) return *which = "B", false;
    const bool cm_ok = r.m >= 0 ? (!cm.empty() && cm[0] == r.m && loose(cm, r.m, r.k)) : loose(cm, -1, r.k);
    const bool cn_ok = r.n >= 0 ? (!cn.empty() && cn[0] == r.n && loose(cn, r.n, r.k)) : loose(cn, -1, r.k);
    if (!(cm_ok && cn_ok && count_of(cm, cn, r.k) <= 1)) return *which = "C", false;
    return true;
  }
  // SUMMA: roles m, n and the depth r.k.
  if (!(exact(am, r.m, r.k) && exact(ak, r.n, r.k) && count_of(am, ak, r.k) <= 1)) return *which = "A", false;
  if (!(exact(bk, r.m, r.k) && exact(bn, r.n, r.k) && count_of(bk, bn, r.k) <= 1)) return *which = "B", false;
  if (!(exact(cm, r.m, r.k) && exact(cn, r.n, r.k) && count_of(cm, cn, r.k) <= 1)) return *which = "C", false;
  return true;
}

std::vector<Roles> assignments(const Dims& dims, tsr_gemm_algo algo) {
  std::vector<int> nd;
  for (int d = 0; d < 3; ++d)
    if (dims[static_cast<size_t>(d)] > 1) nd.push_back(d);
  std::vector<Roles> out;
  const int opts[4] = {-1, 0, 1, 2};
  for (int m : opts)
    for (int n : opts)
      for (int k : opts) {
        const int v[3] = {m, n, k};
        bool ok = true;
        for (int x = 0; x < 3; ++x) {
          if (v[x] >= 0 && dims[static_cast<size_t>(v[x])] <= 1) ok = false;
          for (int y = x + 1; y < 3; ++y)
            if (v[x] >= 0 && v[x] == v[y]) ok = false;
        }
        for (int d : nd)
          if (m != d && n != d && k != d) ok = false;
        if (!ok) continue;
        if (algo == TSR_GEMM_1D && nd.size() > 1) continue;
        if (algo == TSR_GEMM_2D && k >= 0) continue;
        out.push_back({m, n, k});
      }
  return out;
}

const char* dim_name(int d) { return d == 0 ? "I" : d == 1 ? "J" : d == 2 ? "K" : "NONE"; }

std::string layout_text(const tsr_layout& l) {
  return std::string("{row ") + dim_name(l.row_dim) + ", col " + dim_name(l.col_dim) + ", sub " + dim_name(l.sub_dim) +
         "}";
}

}  // namespace

void canonical(tsr_gemm_algo algo, bool ta, bool tb, const Roles& r, tsr_layout out[3]) {
  auto mk = [](int row, int col, int sub) {
    tsr_layout l{row, col, sub, 0, 0};
    if (l.col_dim < 0) std::swap(l.col_dim, l.sub_dim);
    return l;
  };
  if (engine_of(algo) == Engine::three_phase) {
    out[0] = ta ? mk(r.k, r.m, r.n) : mk(r.m, r.k, r.n);
    out[1] = tb ? mk(r.n, r.k, r.m) : mk(r.k, r.n, r.m);
    out[2] = mk(r.m, r.n, r.k);
  } else {
    out[0] = ta ? mk(r.n, r.m, r.k) : mk(r.m, r.n, r.k);
    out[1] = tb ? mk(r.n, r.m, r.k) : mk(r.m, r.n, r.k);
    out[2] = mk(r.m, r.n, r.k);
  }
}

bool match(tsr_gemm_algo algo, const Dims& dims, const Shape& s, const Layout& a, const Layout& b, const Layout& c,
           Roles* roles, std::string* why) {
  const Engine e = engine_of(algo);
  std::vector<Roles> ok;
  std::string which;
  for (const Roles& r : assignments(dims, algo))
    if (fits(e, r, s, a, b, c, &which)) ok.push_back(r);
  if (ok.empty()) {
    // Explain with the roles C suggests: m by C's row split, n by its first
    // column split, the remaining grid dimension of extent > 1 for k/depth.
    Roles r;
    r.m = c.rows.levels ? c.rows.dim[0] : -1;
    r.n = c.cols.levels ? c.cols.dim[0] : -1;
    for (int d = 0; d < 3; ++d)
      if (dims[static_cast<size_t>(d)] > 1 && d != r.m && d != r.n) r.k = d;
    std::string text = std::string("the layouts of A, B and C do not fit the ") + tsr_gemm_algo_name(algo) +
                       " algorithm on a " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + "x" +
                       std::to_string(dims[2]) + " grid";
    if (algo == TSR_GEMM_1D && (dims[0] > 1) + (dims[1] > 1) + (dims[2] > 1) > 1)
      text += " (1D needs a grid with one dimension of extent > 1)";
    else if (algo == TSR_GEMM_2D && dims[0] > 1 && dims[1] > 1 && dims[2] > 1)
      text += " (2D needs a grid of depth 1)";
    tsr_layout want[3];
    canonical(algo, s.ta, s.tb, r, want);
    text += std::string("; with m split by ") + dim_name(r.m) + ", n by " + dim_name(r.n) + " and " +
            (e == Engine::summa ? "the depth " : "k ") + "by " + dim_name(r.k) + " it takes A " + layout_text(want[0]) +
            ", B " + layout_text(want[1]) + ", C " + layout_text(want[2]) + " (tsr_gemm_layouts)";
    *why = text;
    return false;
  }
  if (ok.size() == 1) {
    *roles = ok[0];
    return true;
  }
  // Several role assignments fit (e.g. replicated operands): take the one
  // that moves least (the same choice on every rank: global figures only).
  double best = std::numeric_limits<double>::infinity();
  for (const Roles& r : ok) {
    double worst = 0;
    for (int x = 0; x < 8; ++x) {
      Dims co{(x & 1) ? dims[0] - 1 : 0, (x & 2) ? dims[1] - 1 : 0, (x & 4) ? dims[2] - 1 : 0};
      const Cost cst = rank_cost(algo, dims, r, s, a, b, c, 0, co);
      worst = std::max(worst, static_cast<double>(cst.wire_recv) + static_cast<double>(cst.wire_sent));
    }
    if (worst < best) {
      best = worst;
      *roles = r;
    }
  }
  return true;
}

// --------------------------------------------------------------- panels
namespace {
int owner(int64_t n, int64_t parts, int64_t g) {
  const int64_t q = n / parts, r = n % parts;
  if (g < r * (q + 1)) return static_cast<int>(g / (q + 1));
  return static_cast<int>(r + (g - r * (q + 1)) / q);
}
}  // namespace

std::vector<Panel> panels(int64_t k, int pm, int pn, int64_t width) {
  std::vector<int64_t> cuts;
  for (int j = 0; j <= pn; ++j) cuts.push_back(j < pn ? balanced(k, pn, j).off : k);
  for (int i = 0; i <= pm; ++i) cuts.push_back(i < pm ? balanced(k, pm, i).off : k);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<Panel> out;
  for (size_t x = 0; x + 1 < cuts.size(); ++x) {
    const int64_t s0 = cuts[x], s1 = cuts[x + 1];
    if (s1 <= s0) continue;
    const int ar = owner(k, pn, s0), br = owner(k, pm, s0);
    for (int64_t p = s0; p < s1;) {
      const int64_t w = width > 0 ? std::min(width, s1 - p) : s1 - p;
      out.push_back({p, w, ar, br});
      p += w;
    }
  }
  return out;
}

// ----------------------------------------------------------- the schedule
namespace {

int64_t elems(const Layout& l, int64_t rows, int64_t cols, const Dims& c) {
  return local_len(l.rows, rows, c) * local_len(l.cols, cols, c);
}
// A v-collective along grid dimension d over the members' local blocks of a
// (balanced) layout: the total (the block with d's split undone) and the
// blocks of this rank and its ring neighbours, in O(1).
Op along(OpKind kind, const Layout& l, int64_t rows, int64_t cols, const Dims& c, int d, int parts, int64_t w) {
  Op op{kind, d};
  const Range gr = share(l.rows, rows, c, d), gc = share(l.cols, cols, c, d);
  op.total = static_cast<uint64_t>(gr.len * gc.len * w);
  Dims x = c;
  auto block = [&](int g) {
    x[static_cast<size_t>(d)] = ((g % parts) + parts) % parts;
    return static_cast<uint64_t>(elems(l, rows, cols, x) * w);
  };
  const int me = c[static_cast<size_t>(d)];
  op.mine = block(me);
  op.next = block(me + 1);
  op.prev = block(me - 1);
  return op;
}
Range role_range(int64_t n, const Dims& dims, int role, const Dims& c) {
  return role >= 0 ? balanced(n, dims[static_cast<size_t>(role)], c[static_cast<size_t>(role)]) : Range{0, n};
}

}  // namespace

namespace {
// Buffers reused across the ranks of one candidate (energy() and evaluate()
// cost every rank, or the corners, of the same grid): the k-panels, which
// depend only on k, the grid and the width, and the vectors of one rank's
// schedule and wire model, which keep their capacity.
struct Scratch {
  std::vector<Panel> panels;
  int64_t k = -1, width = -1;
  int pm = -1, pn = -1;
  std::vector<Op> ops;
  WireModel wm;
  const std::vector<Panel>& panels_of(int64_t kk, int m, int n, int64_t w) {
    if (kk != k || m != pm || n != pn || w != width) {
      panels = tsr::gemm::panels(kk, m, n, w);
      k = kk;
      pm = m;
      pn = n;
      width = w;
    }
    return panels;
  }
};

// The schedule of a rank into ops (cleared first), with every op kept.
void raw_schedule(std::vector<Op>& ops, tsr_gemm_algo algo, const Dims& dims, const Roles& r, const Shape& s,
                  const Layout& a, const Layout& b, const Layout& c, int64_t panel, const Dims& co, Scratch& sc) {
  ops.clear();
  const int64_t ar = s.ta ? s.k : s.m, ac = s.ta ? s.m : s.k;  // stored A
  const int64_t br = s.tb ? s.n : s.k, bc = s.tb ? s.k : s.n;  // stored B
  const Range mr = role_range(s.m, dims, r.m, co), nr = role_range(s.n, dims, r.n, co);
  if (engine_of(algo) == Engine::three_phase) {
    if (r.n >= 0 && a.uses(r.n))
      ops.push_back(along(OpKind::allgatherv, a, ar, ac, co, r.n, dims[static_cast<size_t>(r.n)], s.w));
    if (r.m >= 0 && b.uses(r.m))
      ops.push_back(along(OpKind::allgatherv, b, br, bc, co, r.m, dims[static_cast<size_t>(r.m)], s.w));
    if (r.k >= 0) {
      if (c.uses(r.k))
        ops.push_back(along(OpKind::reduce_scatterv, c, s.m, s.n, co, r.k, dims[static_cast<size_t>(r.k)], s.w));
      else
        ops.push_back(Op{OpKind::allreduce, r.k, static_cast<uint64_t>(mr.len * nr.len * s.w)});
    }
    return;
  }
  const int d = r.k;
  if (d >= 0 && a.uses(d))
    ops.push_back(along(OpKind::allgatherv, a, ar, ac, co, d, dims[static_cast<size_t>(d)], s.w));
  if (d >= 0 && b.uses(d))
    ops.push_back(along(OpKind::allgatherv, b, br, bc, co, d, dims[static_cast<size_t>(d)], s.w));
  const int pm = r.m >= 0 ? dims[static_cast<size_t>(r.m)] : 1, pn = r.n >= 0 ? dims[static_cast<size_t>(r.n)] : 1;
  const int pd = d >= 0 ? dims[static_cast<size_t>(d)] : 1, l = d >= 0 ? co[static_cast<size_t>(d)] : 0;
  const std::vector<Panel>& all = sc.panels_of(s.k, pm, pn, panel);
  const Range mine = layer_panels(all.size(), pd, l);
  for (int64_t t = mine.off; t < mine.end(); ++t) {
    const Panel& p = all[static_cast<size_t>(t)];
    if (r.n >= 0) {
      Op op{OpKind::bcast, r.n, static_cast<uint64_t>(mr.len * p.w * s.w)};
      op.root = p.a_root;
      ops.push_back(op);
    }
    if (r.m >= 0) {
      Op op{OpKind::bcast, r.m, static_cast<uint64_t>(p.w * nr.len * s.w)};
      op.root = p.b_root;
      ops.push_back(op);
    }
  }
  if (d >= 0) {
    if (c.uses(d))
      ops.push_back(along(OpKind::reduce_scatterv, c, s.m, s.n, co, d, pd, s.w));
    else
      ops.push_back(Op{OpKind::allreduce, d, static_cast<uint64_t>(mr.len * nr.len * s.w)});
  }
}
}  // namespace

std::vector<Op> schedule(tsr_gemm_algo algo, const Dims& dims, const Roles& r, const Shape& s, const Layout& a,
                         const Layout& b, const Layout& c, int64_t panel, const Dims& co) {
  // Collectives that move nothing on every member are skipped.
  Scratch sc;
  raw_schedule(sc.ops, algo, dims, r, s, a, b, c, panel, co, sc);
  std::vector<Op> out;
  for (Op& op : sc.ops)
    if (op.total > 0) out.push_back(op);
  return out;
}

namespace {
// rank_cost into out (reset first; its edge vector keeps its capacity), with
// sc's buffers: no allocation once they have grown.
void rank_cost_into(Cost& out, tsr_gemm_algo algo, const Dims& dims, const Roles& r, const Shape& s, const Layout& a,
                    const Layout& b, const Layout& c, int64_t panel, const Dims& co, Scratch& sc) {
  std::vector<Cost::Edge> edges = std::move(out.recv_edges);
  edges.clear();
  out = Cost();
  out.recv_edges = std::move(edges);
  raw_schedule(sc.ops, algo, dims, r, s, a, b, c, panel, co, sc);
  for (const Op& op : sc.ops) {
    if (op.total == 0) continue;  // as schedule(): moves nothing on every member
    const int p = dims[static_cast<size_t>(op.dim)], me = co[static_cast<size_t>(op.dim)];
    const uint64_t ring = static_cast<uint64_t>(p - 1);
    switch (op.kind) {
      case OpKind::allgatherv:  // ring (docs/ACCOUNTING.md)
        out.payload_sent += op.mine;
        out.payload_recv += op.total;
        out.wire_sent += op.total - op.next;
        out.wire_recv += op.total - op.mine;
        out.recv_edges.push_back({op.dim, (me + p - 1) % p, static_cast<double>(op.total - op.mine)});
        out.msgs_sent += ring;
        out.msgs_recv += ring;
        out.path_msgs += p - 1;
        break;
      case OpKind::reduce_scatterv:
        out.payload_sent += op.total;
        out.payload_recv += op.mine;
        out.wire_sent += op.total - op.mine;
        out.wire_recv += op.total - op.prev;
        out.recv_edges.push_back({op.dim, (me + p - 1) % p, static_cast<double>(op.total - op.prev)});
        out.msgs_sent += ring;
        out.msgs_recv += ring;
        out.path_msgs += p - 1;
        break;
      case OpKind::allreduce: {
        out.payload_sent += op.total;
        out.payload_recv += op.total;
        WireModel& wm = sc.wm;
        model_allreduce_into(wm, me, p, op.total / static_cast<uint64_t>(s.w), static_cast<uint64_t>(s.w));
        for (const WireEdge& e : wm.sent) {
          out.wire_sent += e.bytes;
          out.msgs_sent += e.messages;
        }
        for (const WireEdge& e : wm.recv) {
          out.wire_recv += e.bytes;
          out.recv_edges.push_back({op.dim, e.peer, static_cast<double>(e.bytes)});
          out.msgs_recv += e.messages;
        }
        out.path_msgs += 2.0 * (p - 1);
        break;
      }
      case OpKind::bcast: {
        (me == op.root ? out.payload_sent : out.payload_recv) += op.total;
        WireModel& wm = sc.wm;
        model_bcast_into(wm, me, p, op.root, op.total);
        for (const WireEdge& e : wm.sent) {
          out.wire_sent += e.bytes;
          out.msgs_sent += e.messages;
        }
        for (const WireEdge& e : wm.recv) {
          out.wire_recv += e.bytes;
          out.recv_edges.push_back({op.dim, e.peer, static_cast<double>(e.bytes)});
          out.msgs_recv += e.messages;
        }
        out.path_msgs += std::ceil(std::log2(static_cast<double>(p)));
        break;
      }
    }
    out.calls[static_cast<int>(op.kind)] += 1;
  }
  // Flops, operands and workspace (elements).
  const int64_t ar = s.ta ? s.k : s.m, ac = s.ta ? s.m : s.k;
  const int64_t br = s.tb ? s.n : s.k, bc = s.tb ? s.k : s.n;
  const Range mr = role_range(s.m, dims, r.m, co), nr = role_range(s.n, dims, r.n, co);
  out.operands = static_cast<double>(elems(a, ar, ac, co) + elems(b, br, bc, co) + elems(c, s.m, s.n, co));
  const double wc = static_cast<double>(mr.len) * static_cast<double>(nr.len);
  if (engine_of(algo) == Engine::three_phase) {
    const Range kr = role_range(s.k, dims, r.k, co);
    out.flops = 2.0 * wc * static_cast<double>(kr.len);
    if (r.n >= 0 && a.uses(r.n)) out.workspace += static_cast<double>(mr.len) * static_cast<double>(kr.len);
    if (r.m >= 0 && b.uses(r.m)) out.workspace += static_cast<double>(kr.len) * static_cast<double>(nr.len);
    if (r.k >= 0) {
      out.workspace += wc + static_cast<double>(elems(c, s.m, s.n, co));
      out.reduced = wc * static_cast<double>(s.w);
    }
    return;
  }
  const int d = r.k;
  const int pm = r.m >= 0 ? dims[static_cast<size_t>(r.m)] : 1, pn = r.n >= 0 ? dims[static_cast<size_t>(r.n)] : 1;
  const int pd = d >= 0 ? dims[static_cast<size_t>(d)] : 1, l = d >= 0 ? co[static_cast<size_t>(d)] : 0;
  const std::vector<Panel>& all = sc.panels_of(s.k, pm, pn, panel);
  const Range mine = layer_panels(all.size(), pd, l);
  int64_t kw = 0, wmax = 0;
  for (int64_t t = mine.off; t < mine.end(); ++t) {
    kw += all[static_cast<size_t>(t)].w;
    wmax = std::max(wmax, all[static_cast<size_t>(t)].w);
  }
  out.flops = 2.0 * wc * static_cast<double>(kw);
  if (d >= 0 && a.uses(d)) {
    Dims x = co;
    double g = 0;
    for (int z = 0; z < pd; ++z) {
      x[static_cast<size_t>(d)] = z;
      g += static_cast<double>(elems(a, ar, ac, x));
    }
    out.workspace += g;
  }
  if (d >= 0 && b.uses(d)) {
    Dims x = co;
    double g = 0;
    for (int z = 0; z < pd; ++z) {
      x[static_cast<size_t>(d)] = z;
      g += static_cast<double>(elems(b, br, bc, x));
    }
    out.workspace += g;
  }
  out.workspace += 2.0 * static_cast<double>(wmax) * static_cast<double>(mr.len + nr.len);
  if (d >= 0) {
    out.workspace += wc + static_cast<double>(elems(c, s.m, s.n, co));
    out.reduced = wc * static_cast<double>(s.w);
  }
}
}  // namespace

Cost rank_cost(tsr_gemm_algo algo, const Dims& dims, const Roles& r, const Shape& s, const Layout& a, const Layout& b,
               const Layout& c, int64_t panel, const Dims& co) {
  Scratch sc;
  Cost out;
  rank_cost_into(out, algo, dims, r, s, a, b, c, panel, co, sc);
  return out;
}

// ------------------------------------------------------------ lower bound
double lower_bound_words(int64_t m, int64_t n, int64_t k, int p) {
  double d[3] = {static_cast<double>(m), static_cast<double>(n), static_cast<double>(k)};
  std::sort(d, d + 3, [](double x, double y) { return x > y; });
  const double d1 = d[0], d2 = d[1], d3 = d[2], P = static_cast<double>(p);
  if (d3 <= 0 || p <= 1) return 0;
  const double own = (static_cast<double>(m) * n + static_cast<double>(m) * k + static_cast<double>(n) * k) / P;
  double w;
  if (P <= d1 / d2)
    w = d2 * d3 * (1.0 - 1.0 / P);
  else if (P <= d1 * d2 / (d3 * d3))
    w = 2.0 * std::sqrt(d1 * d2 * d3 * d3 / P) + d1 * d2 / P - own;
  else
    w = 3.0 * std::pow(d1 * d2 * d3 / P, 2.0 / 3.0) - own;
  return std::max(0.0, w);
}

// --------------------------------------------------------------- planning
void evaluate(Candidate* cd, const Shape& s, const Machine& mc) {
  tsr_layout pub[3];
  canonical(cd->algo, s.ta, s.tb, cd->roles, pub);
  const Layout a = normalise(pub[0], cd->dims), b = normalise(pub[1], cd->dims), c = normalise(pub[2], cd->dims);
  cd->flops = cd->bytes = cd->msgs = cd->memory = cd->reduced = 0;
  Scratch sc;
  Cost cst;
  for (int x = 0; x < 8; ++x) {
    const Dims co{(x & 1) ? cd->dims[0] - 1 : 0, (x & 2) ? cd->dims[1] - 1 : 0, (x & 4) ? cd->dims[2] - 1 : 0};
    rank_cost_into(cst, cd->algo, cd->dims, cd->roles, s, a, b, c, cd->panel, co, sc);
    cd->flops = std::max(cd->flops, cst.flops);
    cd->bytes = std::max(cd->bytes, static_cast<double>(cst.wire_recv));
    cd->msgs = std::max(cd->msgs, cst.path_msgs);
    cd->memory = std::max(cd->memory, (cst.operands + cst.workspace) * static_cast<double>(s.w));
    cd->reduced = std::max(cd->reduced, cst.reduced);
  }
  // Summing partial products is one more pass over them: charged like bytes
  // moved (a local memory stream costs about what a shared-memory copy does).
  cd->time = mc.gamma * cd->flops + mc.beta * (cd->bytes + cd->reduced) + mc.alpha * cd->msgs;
}

namespace {

void add_three_phase(std::vector<Candidate>& out, tsr_grid_kind kind, const Dims& dims) {
  // Every injective assignment of roles to the grid dimensions of extent > 1.
  for (const Roles& r : assignments(dims, TSR_GEMM_3D)) {
    Candidate c;
    c.algo = TSR_GEMM_3D;
    c.kind = kind;
    c.dims = dims;
    c.roles = r;
    out.push_back(c);
  }
}

}  // namespace

constexpr int kMaxSummaSteps = 2048;

std::vector<Candidate> candidates(const Shape& s, int p, bool allow_idle, tsr_gemm_algo only) {
  (void)s;
  std::vector<Candidate> out;
  // Idle ranks are for awkward counts (primes, few factors): counts down to
  // p/2 for p <= 64, else the 64 counts below p.
  int lo = p;
  if (allow_idle) lo = p <= 64 ? (p + 1) / 2 : p - 64;
  for (int q = p; q >= std::max(1, lo); --q) {
    // 1D: one dimension of q ranks splitting m, n or k.
    if (only == TSR_GEMM_AUTO || only == TSR_GEMM_1D) {
      const Dims d{q, 1, 1};
      for (const Roles& r : assignments(d, TSR_GEMM_1D)) {
        Candidate c;
        c.algo = TSR_GEMM_1D;
        c.kind = TSR_GRID_1D;
        c.dims = d;
        c.roles = r;
        out.push_back(c);
      }
    }
    for (int pr = 1; pr <= q; ++pr) {
      if (q % pr) continue;
      const Dims d{pr, q / pr, 1};
      // SUMMA runs about pr + pc broadcast steps: beyond a few thousand the
      // latency alone rules a grid out (and evaluating it costs O(steps)).
      if ((only == TSR_GEMM_AUTO || only == TSR_GEMM_2D) && pr + q / pr <= kMaxSummaSteps) {
        Candidate c;
        c.algo = TSR_GEMM_2D;
        c.kind = TSR_GRID_2D;
        c.dims = d;
        c.roles = {pr > 1 ? 0 : -1, q / pr > 1 ? 1 : -1, -1};
        out.push_back(c);
      }
      if ((only == TSR_GEMM_AUTO || only == TSR_GEMM_3D) && pr > 1 && q / pr > 1) add_three_phase(out, TSR_GRID_2D, d);
    }
    if (only == TSR_GEMM_3D) add_three_phase(out, TSR_GRID_1D, Dims{q, 1, 1});
    // 2.5D: c >= 2 (c = 1 is 2D), unless 2.5D alone was asked for.
    if (only == TSR_GEMM_AUTO || only == TSR_GEMM_2P5D)
      for (int c = only == TSR_GEMM_2P5D ? 1 : 2; c * c * c <= q; ++c) {
        if (q % c) continue;
        const int qq = static_cast<int>(std::lround(std::sqrt(static_cast<double>(q / c))));
        if (qq * qq != q / c || c > qq || 2 * qq > kMaxSummaSteps) continue;
        Candidate x;
        x.algo = TSR_GEMM_2P5D;
        x.kind = TSR_GRID_2P5D;  // q x q x c, c <= q, including the cube
        x.dims = {qq, qq, c};
        x.roles = {qq > 1 ? 0 : -1, qq > 1 ? 1 : -1, c > 1 ? 2 : -1};
        out.push_back(x);
      }
    // 3D on every a x b x c = q with all three > 1 (shape-driven): the cube
    // on a 3D grid, the others on a 3D_ANY grid, roles m, n, k = i, j, k
    // (the ordered shapes cover every assignment).
    if (only == TSR_GEMM_AUTO || only == TSR_GEMM_3D)
      for (int a = 2; a * 4 <= q; ++a) {
        if (q % a) continue;
        for (int b = 2; a * b * 2 <= q; ++b) {
          if ((q / a) % b) continue;
          const int c = q / a / b;
          Candidate x;
          x.algo = TSR_GEMM_3D;
          x.kind = a == b && b == c ? TSR_GRID_3D : TSR_GRID_3D_ANY;
          x.dims = {a, b, c};
          x.roles = {0, 1, 2};
          out.push_back(x);
        }
      }
  }
  return out;
}

void energy(Candidate* cd, const Shape& s, const EnergyModel& em) {
  tsr_layout pub[3];
  canonical(cd->algo, s.ta, s.tb, cd->roles, pub);
  const Layout a = normalise(pub[0], cd->dims), b = normalise(pub[1], cd->dims), c = normalise(pub[2], cd->dims);
  const Dims& d = cd->dims;
  const int p = d[0] * d[1] * d[2];
  const int rpn = em.ranks_per_node > 0 ? em.ranks_per_node : p;
  // Grid rank of coordinates (as tsr_grid_create numbers them: j fastest).
  auto grank = [&](const Dims& co) { return (co[2] * d[0] + co[0]) * d[1] + co[1]; };
  cd->intra_bytes = cd->inter_bytes = cd->self_bytes = cd->total_flops = 0;
  // One rank after the other with reused buffers (the panels computed once):
  // the same figures, added in the same order, as rank_cost() for each.
  Scratch sc;
  Cost cst;
  auto add = [&](const Dims& co, double weight) {
    rank_cost_into(cst, cd->algo, d, cd->roles, s, a, b, c, cd->panel, co, sc);
    const int node = grank(co) / rpn;
    for (const Cost::Edge& e : cst.recv_edges) {
      Dims from = co;
      from[static_cast<size_t>(e.dim)] = e.peer;
      (grank(from) / rpn == node ? cd->intra_bytes : cd->inter_bytes) += weight * e.bytes;
    }
    cd->self_bytes += weight * cst.reduced;
    cd->total_flops += weight * cst.flops;
  };
  if (p <= 4096) {
    for (int k = 0; k < d[2]; ++k)
      for (int i = 0; i < d[0]; ++i)
        for (int j = 0; j < d[1]; ++j) add(Dims{i, j, k}, 1.0);
  } else {
    for (int x = 0; x < 8; ++x)
      add(Dims{(x & 1) ? d[0] - 1 : 0, (x & 2) ? d[1] - 1 : 0, (x & 4) ? d[2] - 1 : 0}, p / 8.0);
  }
  auto joules = [&](const EnergyFigures& f) {
    return cd->self_bytes * f.self + cd->intra_bytes * f.intra + cd->inter_bytes * f.inter + cd->total_flops * f.flop +
           f.static_watts * p * cd->time;
  };
  cd->joules = joules(em.typical);
  cd->joules_low = joules(em.low);
  cd->joules_high = joules(em.high);
}

double objective_value(const Candidate& c, int objective) {
  return objective == 1 ? c.joules : objective == 2 ? c.joules * c.time : c.time;
}

bool choose(const Shape& s, int p, bool allow_idle, tsr_gemm_algo only, double memory, const Machine& mc,
            int objective, const EnergyModel* em, Candidate* best, std::vector<Candidate>* all_out) {
  std::vector<Candidate> all = candidates(s, p, allow_idle, only);
  bool found = false;
  Candidate least;
  least.memory = std::numeric_limits<double>::infinity();
  // x better than y? The objective, then time, then more ranks, then fewer
  // bytes; remaining ties keep the first considered (the order is fixed, so
  // every rank chooses the same plan).
  auto better = [&](const Candidate& x, const Candidate& y) {
    const double ox = objective_value(x, objective), oy = objective_value(y, objective);
    if (ox != oy) return ox < oy;
    if (x.time != y.time) return x.time < y.time;
    const int ux = x.dims[0] * x.dims[1] * x.dims[2], uy = y.dims[0] * y.dims[1] * y.dims[2];
    if (ux != uy) return ux > uy;
    return x.bytes < y.bytes;
  };
  // The joules of every candidate only when they decide (an energy or EDP
  // objective) or the caller lists them; by time, only the chosen plan's
  // (energy() enumerates every rank of the grid: doing it for each of the
  // hundreds of candidates made planning O(p^2)-ish per call).
  const bool every = em != nullptr && (objective != 0 || all_out != nullptr);
  for (Candidate& c : all) {
    evaluate(&c, s, mc);
    if (memory > 0 && c.memory > memory && engine_of(c.algo) == Engine::summa) {
      // Narrower panels need less workspace: halve until it fits.
      int64_t width = std::max<int64_t>(1, (s.k + 1) / 2);
      while (c.memory > memory && width >= 1) {
        c.panel = width;
        evaluate(&c, s, mc);
        if (width == 1) break;
        width /= 2;
      }
    }
    if (every) energy(&c, s, *em);
    if (c.memory < least.memory) least = c;
    if (memory > 0 && c.memory > memory) continue;
    if (!found || better(c, *best)) {
      *best = c;
      found = true;
    }
  }
  if (!found) *best = least;
  if (em != nullptr && !every) energy(best, s, *em);
  if (all_out) *all_out = std::move(all);
  return found;
}

}  // namespace gemm
}  // namespace tsr

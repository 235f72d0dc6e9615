#include "grid_shape.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "core.hpp"

namespace tsr {

const char* grid_kind_name(tsr_grid_kind kind) {
  switch (kind) {
    case TSR_GRID_1D: return "1D";
    case TSR_GRID_2D: return "2D";
    case TSR_GRID_2P5D: return "2.5D";
    case TSR_GRID_3D: return "3D";
    case TSR_GRID_3D_ANY: return "3D-any";
  }
  return "unknown";
}

bool grid_kind_valid(tsr_grid_kind kind) { return kind >= TSR_GRID_1D && kind <= TSR_GRID_3D_ANY; }

std::string shape_problem(tsr_grid_kind kind, const Dims& d) {
  char buf[256];
  for (int x : d)
    if (x < 1) {
      std::snprintf(buf, sizeof buf, "every dimension must be >= 1, got {%d,%d,%d}", d[0], d[1], d[2]);
      return buf;
    }
  switch (kind) {
    case TSR_GRID_1D:
      if (d[1] != 1 || d[2] != 1) return "a 1D grid has dims {p,1,1}";
      return "";
    case TSR_GRID_2D:
      if (d[2] != 1) return "a 2D grid has dims {pr,pc,1}";
      return "";
    case TSR_GRID_2P5D:
      if (d[0] != d[1]) return "a 2.5D grid has dims {q,q,c}: dims[0] must equal dims[1]";
      if (d[2] > d[0]) return "a 2.5D grid {q,q,c} needs 1 <= c <= q (c <= p^(1/3), Solomonik-Demmel)";
      return "";
    case TSR_GRID_3D:
      if (d[0] != d[1] || d[1] != d[2]) return "a 3D grid has dims {q,q,q}";
      return "";
    case TSR_GRID_3D_ANY:
      return "";
  }
  return "unknown grid kind";
}

namespace {

bool honours(const Dims& d, const Dims& fixed) {
  for (int a = 0; a < 3; ++a)
    if (fixed[a] > 0 && fixed[a] != d[a]) return false;
  return true;
}

using i64 = long long;
constexpr i64 kNone = -1;

i64 isqrt(i64 n) {  // largest r with r*r <= n (n >= 0)
  i64 r = static_cast<i64>(std::sqrt(static_cast<double>(n)));
  while (r * r > n) --r;
  while ((r + 1) * (r + 1) <= n) ++r;
  return r;
}

i64 icbrt(i64 n) {  // largest r with r*r*r <= n (n >= 0)
  i64 r = static_cast<i64>(std::cbrt(static_cast<double>(n)));
  while (r > 0 && r * r * r > n) --r;
  while ((r + 1) * (r + 1) * (r + 1) <= n) ++r;
  return r;
}

// The shape parameters a constraint leaves: for 2.5D and 3D, q (dims[0] and
// dims[1], and dims[2] for 3D) and c; kNone if the constraint is contradictory.
bool same_q(const Dims& f, int n_axes, i64* q) {
  *q = 0;
  for (int a = 0; a < n_axes; ++a) {
    if (f[a] == 0) continue;
    if (*q != 0 && *q != f[a]) return false;
    *q = f[a];
  }
  return true;
}

// Best count of kind honouring fixed: the largest <= n (below = true) or the
// smallest > n (below = false). kNone if there is none (or it exceeds INT_MAX).
i64 best_count(tsr_grid_kind kind, i64 n, const Dims& f, bool below) {
  i64 best = kNone;
  auto offer = [&](i64 m) {
    if (m < 1 || m > INT_MAX) return;
    if (below ? m <= n && (best == kNone || m > best) : m > n && (best == kNone || m < best)) best = m;
  };
  switch (kind) {
    case TSR_GRID_1D:
      if ((f[1] > 1) || (f[2] > 1)) return kNone;
      if (f[0] > 0) offer(f[0]);
      else offer(below ? n : n + 1);
      break;
    case TSR_GRID_2D:
      if (f[2] > 1) return kNone;
      if (f[0] > 0 && f[1] > 0) {
        offer(static_cast<i64>(f[0]) * f[1]);
      } else if (f[0] > 0 || f[1] > 0) {
        const i64 a = f[0] > 0 ? f[0] : f[1];
        offer(below ? a * (n / a) : a * (n / a + 1));
      } else {
        offer(below ? n : n + 1);
      }
      break;
    case TSR_GRID_2P5D: {
      i64 q = 0;
      if (!same_q(f, 2, &q)) return kNone;
      const i64 c = f[2];
      if (q > 0 && c > 0) {
        if (c <= q) offer(q * q * c);
      } else if (q > 0) {  // c free in [1, q]
        const i64 cfit = below ? std::min(q, n / (q * q)) : n / (q * q) + 1;  // smallest c with q*q*c > n
        if (cfit >= 1 && cfit <= q) offer(q * q * cfit);
      } else {  // q free: for each c, the q >= c that is best
        // c <= q means c^3 <= count: c up to cbrt(n) (+1 above n) covers every candidate.
        const i64 last = c > 0 ? c : icbrt(std::max<i64>(n, 0)) + (below ? 0 : 1);
        for (i64 cc = c > 0 ? c : 1; cc <= last; ++cc) {
          const i64 qq = below ? isqrt(n / cc) : std::max(cc, isqrt(n / cc) + 1);
          if (qq >= cc) offer(qq * qq * cc);
        }
      }
      break;
    }
    case TSR_GRID_3D: {
      i64 q = 0;
      if (!same_q(f, 3, &q)) return kNone;
      if (q > 0) offer(q * q * q);
      else offer(below ? icbrt(n) * icbrt(n) * icbrt(n) : (icbrt(n) + 1) * (icbrt(n) + 1) * (icbrt(n) + 1));
      break;
    }
    case TSR_GRID_3D_ANY: {
      // Any count that is a multiple of the fixed dimensions' product.
      i64 a = 1;
      int nfixed = 0;
      for (int x = 0; x < 3; ++x)
        if (f[x] > 0) {
          a *= f[x];
          ++nfixed;
        }
      if (nfixed == 3) offer(a);
      else offer(below ? a * (n / a) : a * (n / a + 1));
      break;
    }
  }
  return best;
}

}  // namespace

std::vector<Dims> shapes_for(tsr_grid_kind kind, int n, const Dims& fixed) {
  std::vector<Dims> out;
  if (n < 1) return out;
  switch (kind) {
    case TSR_GRID_1D:
      out.push_back({n, 1, 1});
      break;
    case TSR_GRID_2D: {
      // Most square first: pr <= pc, then the transposed shapes.
      std::vector<Dims> low;
      for (int pr = 1; static_cast<i64>(pr) * pr <= n; ++pr)
        if (n % pr == 0) low.push_back({pr, n / pr, 1});
      out.assign(low.rbegin(), low.rend());
      for (auto d = low.rbegin(); d != low.rend(); ++d)
        if ((*d)[0] != (*d)[1]) out.push_back({(*d)[1], (*d)[0], 1});
      break;
    }
    case TSR_GRID_2P5D:
      // Largest c first (the most communication-avoiding); c <= q means c^3 <= n.
      for (i64 c = icbrt(n); c >= 1; --c) {
        if (n % c) continue;
        const i64 q = isqrt(n / c);
        if (q * q * c == n && c <= q) out.push_back({static_cast<int>(q), static_cast<int>(q), static_cast<int>(c)});
      }
      break;
    case TSR_GRID_3D: {
      const i64 q = icbrt(n);
      if (q * q * q == n) out.push_back({static_cast<int>(q), static_cast<int>(q), static_cast<int>(q)});
      break;
    }
    case TSR_GRID_3D_ANY: {
      // Every ordered a x b x c = n, the most cubic first (smallest
      // largest/smallest extent), then sorted a <= b <= c before the others.
      std::vector<i64> div;  // the divisors of n, by trial division up to sqrt(n)
      for (i64 a = 1; a * a <= n; ++a)
        if (n % a == 0) {
          div.push_back(a);
          if (a * a != n) div.push_back(n / a);
        }
      std::sort(div.begin(), div.end());
      for (i64 a : div)
        for (i64 b : div)
          if ((n / a) % b == 0) out.push_back({static_cast<int>(a), static_cast<int>(b), static_cast<int>(n / a / b)});
      auto key = [](const Dims& d) {
        const int lo = std::min({d[0], d[1], d[2]}), hi = std::max({d[0], d[1], d[2]});
        const bool sorted = d[0] <= d[1] && d[1] <= d[2];
        return std::make_tuple(static_cast<double>(hi) / lo, sorted ? 0 : 1, d[0], d[1]);
      };
      std::stable_sort(out.begin(), out.end(), [&](const Dims& x, const Dims& y) { return key(x) < key(y); });
      break;
    }
  }
  std::vector<Dims> kept;
  for (const Dims& d : out)
    if (honours(d, fixed)) kept.push_back(d);
  return kept;
}

std::string nearest_shapes(tsr_grid_kind kind, int n, const Dims& fixed) {
  std::string s;
  char buf[96];
  for (bool below : {true, false}) {
    const i64 m = best_count(kind, below ? static_cast<i64>(n) - 1 : n, fixed, below);
    if (m == kNone) continue;
    const std::vector<Dims> v = shapes_for(kind, static_cast<int>(m), fixed);
    if (v.empty()) continue;
    std::snprintf(buf, sizeof buf, "%lld (%dx%dx%d)", m, v[0][0], v[0][1], v[0][2]);
    s += s.empty() ? buf : std::string(", ") + buf;
  }
  return s.empty() ? "none" : s;
}

std::string largest_fit(tsr_grid_kind kind, int n, const Dims& fixed) {
  const i64 m = best_count(kind, n, fixed, true);
  if (m == kNone) return "none";
  const std::vector<Dims> v = shapes_for(kind, static_cast<int>(m), fixed);
  if (v.empty()) return "none";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%lld (%dx%dx%d)", m, v[0][0], v[0][1], v[0][2]);
  return buf;
}

tsr_status choose_dims(tsr_grid_kind kind, int nranks, bool allow_idle, Dims* dims, int* nused) {
  if (!grid_kind_valid(kind))
    return fail(TSR_ERR_INVALID_ARG, "argument 'kind' = %d is not a tsr_grid_kind", static_cast<int>(kind));
  if (nranks < 1) return fail(TSR_ERR_INVALID_ARG, "argument 'nranks' = %d; expected >= 1", nranks);
  const Dims fixed = *dims;
  for (int a = 0; a < 3; ++a)
    if (fixed[a] < 0)
      return fail(TSR_ERR_INVALID_ARG, "argument 'dims[%d]' = %d; expected 0 (choose) or > 0 (keep)", a, fixed[a]);
  std::vector<Dims> v = shapes_for(kind, nranks, fixed);
  int m = nranks;
  if (v.empty() && allow_idle) {
    const i64 best = best_count(kind, nranks, fixed, true);
    if (best != kNone) {
      m = static_cast<int>(best);
      v = shapes_for(kind, m, fixed);
    }
  }
  if (v.empty())
    return fail(TSR_ERR_SHAPE,
                "%d ranks have no %s shape with dims {%d,%d,%d} (0 = free); nearest rank counts that fit: %s%s",
                nranks, grid_kind_name(kind), fixed[0], fixed[1], fixed[2], nearest_shapes(kind, nranks, fixed).c_str(),
                allow_idle ? "" : "; or allow idle ranks");
  *dims = v[0];
  if (nused) *nused = m;
  return TSR_SUCCESS;
}

std::vector<int> place(const std::vector<int>& node_of, int ngrid, int run) {
  int nnodes = 0;
  for (int n : node_of) nnodes = std::max(nnodes, n + 1);
  std::vector<std::vector<int>> members(static_cast<size_t>(nnodes));
  for (size_t r = 0; r < node_of.size(); ++r) members[static_cast<size_t>(node_of[r])].push_back(static_cast<int>(r));
  if (run < 1) run = 1;
  std::vector<int> whole, rest;  // whole runs inside a node first, then the leftovers
  for (const std::vector<int>& m : members) {
    const size_t full = m.size() / static_cast<size_t>(run) * static_cast<size_t>(run);
    whole.insert(whole.end(), m.begin(), m.begin() + static_cast<long>(full));
    rest.insert(rest.end(), m.begin() + static_cast<long>(full), m.end());
  }
  whole.insert(whole.end(), rest.begin(), rest.end());
  whole.resize(static_cast<size_t>(ngrid));
  return whole;
}

}  // namespace tsr

#include "grid_shape.hpp"

#include <algorithm>
#include <cstdio>

#include "core.hpp"

namespace tsr {

const char* grid_kind_name(tsr_grid_kind kind) {
  switch (kind) {
    case TSR_GRID_1D: return "1D";
    case TSR_GRID_2D: return "2D";
    case TSR_GRID_2P5D: return "2.5D";
    case TSR_GRID_3D: return "3D";
  }
  return "unknown";
}

bool grid_kind_valid(tsr_grid_kind kind) { return kind >= TSR_GRID_1D && kind <= TSR_GRID_3D; }

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
  }
  return "unknown grid kind";
}

namespace {
bool honours(const Dims& d, const Dims& fixed) {
  for (int a = 0; a < 3; ++a)
    if (fixed[a] > 0 && fixed[a] != d[a]) return false;
  return true;
}
}  // namespace

std::vector<Dims> shapes_for(tsr_grid_kind kind, int n, const Dims& fixed) {
  std::vector<Dims> out;
  if (n < 1) return out;
  switch (kind) {
    case TSR_GRID_1D:
      out.push_back({n, 1, 1});
      break;
    case TSR_GRID_2D:
      // Most square first: pr <= pc, then the transposed shapes.
      for (int pr = 1; pr * pr <= n; ++pr)
        if (n % pr == 0) out.push_back({pr, n / pr, 1});
      std::reverse(out.begin(), out.end());
      for (size_t i = 0, m = out.size(); i < m; ++i)
        if (out[i][0] != out[i][1]) out.push_back({out[i][1], out[i][0], 1});
      break;
    case TSR_GRID_2P5D:
      // Largest c first (the most communication-avoiding).
      for (int c = n; c >= 1; --c) {
        if (n % c) continue;
        const int qq = n / c;
        int q = 1;
        while ((q + 1) * (q + 1) <= qq) ++q;
        if (q * q == qq && c <= q) out.push_back({q, q, c});
      }
      break;
    case TSR_GRID_3D: {
      int q = 1;
      while ((q + 1) * (q + 1) * (q + 1) <= n) ++q;
      if (q * q * q == n) out.push_back({q, q, q});
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
  for (int m = n - 1; m >= 1; --m) {
    std::vector<Dims> v = shapes_for(kind, m, fixed);
    if (!v.empty()) {
      std::snprintf(buf, sizeof buf, "%d (%dx%dx%d)", m, v[0][0], v[0][1], v[0][2]);
      s = buf;
      break;
    }
  }
  const int limit = n < (1 << 20) ? 2 * n + 64 : n;  // a valid count above n exists well within 2n+64
  for (int m = n + 1; m <= limit; ++m) {
    std::vector<Dims> v = shapes_for(kind, m, fixed);
    if (!v.empty()) {
      std::snprintf(buf, sizeof buf, "%d (%dx%dx%d)", m, v[0][0], v[0][1], v[0][2]);
      s += s.empty() ? buf : std::string(", ") + buf;
      break;
    }
  }
  return s.empty() ? "none" : s;
}

tsr_status choose_dims(tsr_grid_kind kind, int nranks, bool allow_idle, Dims* dims, int* nused) {
  if (!grid_kind_valid(kind))
    return fail(TSR_ERR_INVALID_ARG, "argument 'kind' = %d is not a tsr_grid_kind", static_cast<int>(kind));
  if (nranks < 1) return fail(TSR_ERR_INVALID_ARG, "argument 'nranks' = %d; expected >= 1", nranks);
  const Dims fixed = *dims;
  for (int a = 0; a < 3; ++a)
    if (fixed[a] < 0)
      return fail(TSR_ERR_INVALID_ARG, "argument 'dims[%d]' = %d; expected 0 (choose) or > 0 (keep)", a, fixed[a]);
  for (int m = nranks; m >= 1; --m) {
    std::vector<Dims> v = shapes_for(kind, m, fixed);
    if (v.empty()) {
      if (!allow_idle) {
        return fail(TSR_ERR_SHAPE,
                    "%d ranks have no %s shape with dims {%d,%d,%d} (0 = free); nearest rank counts that fit: %s; "
                    "or allow idle ranks",
                    nranks, grid_kind_name(kind), fixed[0], fixed[1], fixed[2],
                    nearest_shapes(kind, nranks, fixed).c_str());
      }
      continue;
    }
    *dims = v[0];
    if (nused) *nused = m;
    return TSR_SUCCESS;
  }
  return fail(TSR_ERR_SHAPE, "no %s shape honours dims {%d,%d,%d} with at most %d ranks", grid_kind_name(kind),
              fixed[0], fixed[1], fixed[2], nranks);
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

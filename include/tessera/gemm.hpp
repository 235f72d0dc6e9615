// tessera C++ API for distributed matrix multiplication (gemm.h): a RAII
// matrix descriptor, typed gemm calls over spans, plans, redistribution.
// Included by tessera.hpp.
//
//   tessera::grid g(ctx, TSR_GRID_3D, {2, 2, 2});
//   tsr_layout lay[3];
//   tessera::gemm_layouts(TSR_GEMM_3D, TSR_NOTRANS, TSR_NOTRANS, {0, 1, 2}, lay);
//   tessera::matrix X(g, M, K, TSR_FLOAT64, lay[0]), W(g, K, N, TSR_FLOAT64, lay[1]),
//                   Y(g, M, N, TSR_FLOAT64, lay[2]);
//   std::vector<double> x(X.local_elements()), w(W.local_elements()), y(Y.local_elements());
//   tessera::gemm<double>(TSR_GEMM_3D, TSR_NOTRANS, TSR_NOTRANS, 1.0, X, x, W, w, 0.0, Y, y);
#ifndef TESSERA_GEMM_HPP
#define TESSERA_GEMM_HPP

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "tessera/tessera.hpp"

namespace tessera {

// Owns a tsr_matrix descriptor (move-only). Construction is collective over
// the grid's context; destruction is local. Destroy before the grid.
class matrix {
 public:
  matrix(const grid& g, std::int64_t m, std::int64_t n, tsr_dtype type, const tsr_layout& layout,
         std::int64_t ld = 0) {
    check(tsr_matrix_create(g.get(), m, n, type, &layout, ld, &h_));
  }
  // A ScaLAPACK matrix (tsr_matrix_create_scalapack; collective over ctx).
  matrix(const context& ctx, const int desc[9], tsr_dtype type) {
    check(tsr_matrix_create_scalapack(ctx.get(), desc, type, &h_), ctx.get());
  }
  ~matrix() { tsr_matrix_destroy(&h_); }
  matrix(matrix&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  matrix& operator=(matrix&& o) noexcept {
    if (this != &o) {
      tsr_matrix_destroy(&h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  matrix(const matrix&) = delete;
  matrix& operator=(const matrix&) = delete;

  [[nodiscard]] tsr_matrix get() const noexcept { return h_; }
  [[nodiscard]] std::int64_t rows() const { return info().m; }
  [[nodiscard]] std::int64_t cols() const { return info().n; }
  [[nodiscard]] std::int64_t local_rows() const { return local().rows; }
  [[nodiscard]] std::int64_t local_cols() const { return local().cols; }
  [[nodiscard]] std::int64_t ld() const { return local().ld; }
  // Elements a local buffer must hold: ld*(local_cols-1) + local_rows (0 if empty).
  [[nodiscard]] std::size_t local_elements() const {
    const local_shape s = local();
    return s.rows > 0 && s.cols > 0 ? static_cast<std::size_t>(s.ld * (s.cols - 1) + s.rows) : 0;
  }
  // Global (row, column) of a local element.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> global_index(std::int64_t lr, std::int64_t lc) const {
    std::int64_t r = 0, c = 0;
    check(tsr_matrix_global_index(h_, lr, lc, &r, &c));
    return {r, c};
  }

  // Collective: the global column-major matrix on context rank root (read or
  // written there only) <-> every rank's local buffer.
  template <class T>
  void scatter(int root, span<const T> global, std::int64_t ldg, span<T> local) const {
    call_sized(local.size(), [&](bool ok) {
      return tsr_matrix_scatter(h_, root, global.data(), ldg, ok ? local.data() : nullptr);
    });
  }
  template <class T>
  void gather(int root, span<const T> local, span<T> global, std::int64_t ldg) const {
    call_sized(local.size(), [&](bool ok) {
      return tsr_matrix_gather(h_, root, ok ? local.data() : nullptr, global.data(), ldg);
    });
  }

 private:
  struct local_shape {
    std::int64_t rows, cols, ld;
  };
  struct global_info {
    std::int64_t m, n;
  };
  local_shape local() const {
    local_shape s{};
    check(tsr_matrix_local_size(h_, &s.rows, &s.cols, &s.ld));
    return s;
  }
  global_info info() const {
    global_info g{};
    check(tsr_matrix_info(h_, &g.m, &g.n, nullptr, nullptr, nullptr));
    return g;
  }
  bool fits(std::size_t n) const { return n >= local_elements(); }
  // A span too small on one rank: pass NULL so that every rank fails
  // (INVALID_ARG, the others' message names this rank), then throw SHAPE here.
  template <class F>
  void call_sized(std::size_t n, F f) const {
    const bool ok = fits(n);
    const tsr_status st = f(ok);
    if (!ok)
      throw error(TSR_ERR_SHAPE, "tessera::matrix: local span has " + std::to_string(n) + " elements; the local block needs " +
                                     std::to_string(local_elements()));
    check(st);
  }
  tsr_matrix h_ = nullptr;
};

namespace detail {
inline std::size_t need(const matrix& m) { return m.local_elements(); }
}  // namespace detail

// C = alpha op(A) op(B) + beta C (tsr_gemm_ex; options may be null). Spans
// hold each rank's local block; one too small fails the call on every rank.
template <class T>
void gemm(const tsr_gemm_options* options, tsr_trans ta, tsr_trans tb, T alpha, const matrix& A, span<const T> a,
          const matrix& B, span<const T> b, T beta, const matrix& C, span<T> c) {
  const bool oka = a.size() >= detail::need(A), okb = b.size() >= detail::need(B), okc = c.size() >= detail::need(C);
  // NULL for a short span: every rank fails with INVALID_ARG before anything moves.
  const tsr_status st = tsr_gemm_ex(options, ta, tb, static_cast<double>(alpha), A.get(), oka ? a.data() : nullptr,
                                    B.get(), okb ? b.data() : nullptr, static_cast<double>(beta), C.get(),
                                    okc ? c.data() : nullptr);
  if (!oka || !okb || !okc)
    throw error(TSR_ERR_SHAPE, std::string("tessera::gemm: the local span of ") + (!oka ? "A" : !okb ? "B" : "C") +
                                   " is smaller than its local block");
  check(st);
}
template <class T>
void gemm(tsr_gemm_algo algo, tsr_trans ta, tsr_trans tb, T alpha, const matrix& A, span<const T> a, const matrix& B,
          span<const T> b, T beta, const matrix& C, span<T> c) {
  tsr_gemm_options o = TSR_GEMM_OPTIONS_INIT;
  o.algo = algo;
  gemm<T>(&o, ta, tb, alpha, A, a, B, b, beta, C, c);
}

// The layouts of A, B and C for an algorithm and roles (tsr_gemm_layouts).
inline void gemm_layouts(tsr_gemm_algo algo, tsr_trans ta, tsr_trans tb, const std::array<int, 3>& roles,
                         tsr_layout out[3]) {
  check(tsr_gemm_layouts(algo, ta, tb, roles.data(), out));
}

// Collective: copy src's data into dst's layout.
template <class T>
void redistribute(const matrix& src, span<const T> s, const matrix& dst, span<T> d) {
  const bool oks = s.size() >= src.local_elements(), okd = d.size() >= dst.local_elements();
  const tsr_status st = tsr_matrix_redistribute(src.get(), oks ? s.data() : nullptr, dst.get(), okd ? d.data() : nullptr);
  if (!oks || !okd) throw error(TSR_ERR_SHAPE, "tessera::redistribute: a local span is smaller than its local block");
  check(st);
}

// A plan (tsr_gemm_plan_create; local). Throws TSR_ERR_NO_MEMORY when
// nothing fits the budget (the message says how much is missing).
inline tsr_gemm_plan plan_gemm(const tsr_gemm_problem& problem) {
  tsr_gemm_plan p{};
  check(tsr_gemm_plan_create(&problem, &p));
  return p;
}
inline std::string to_string(const tsr_gemm_plan& p) {
  std::size_t n = 0;
  check(tsr_gemm_plan_format(&p, nullptr, 0, &n));
  std::string s(n + 1, '\0');
  check(tsr_gemm_plan_format(&p, &s[0], s.size(), &n));
  s.resize(n);
  return s;
}
template <class T>
void execute(const tsr_gemm_plan& plan, T alpha, const matrix& A, span<const T> a, const matrix& B, span<const T> b,
             T beta, const matrix& C, span<T> c) {
  const bool oka = a.size() >= detail::need(A), okb = b.size() >= detail::need(B), okc = c.size() >= detail::need(C);
  const tsr_status st = tsr_gemm_execute(&plan, static_cast<double>(alpha), A.get(), oka ? a.data() : nullptr, B.get(),
                                         okb ? b.data() : nullptr, static_cast<double>(beta), C.get(),
                                         okc ? c.data() : nullptr);
  if (!oka || !okb || !okc) throw error(TSR_ERR_SHAPE, "tessera::execute: a local span is smaller than its local block");
  check(st);
}

}  // namespace tessera

#endif  // TESSERA_GEMM_HPP

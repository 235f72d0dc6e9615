// The local GEMM's CBLAS calls never truncate a size to int (issue 15):
// blas_gemm splits m, n, k into blocks of at most blas_limit() and takes a
// dimension whose leading dimension exceeds the limit one column at a time.
// With the limit lowered to 1..5 every path runs at small sizes, against a
// plain triple loop, column- and row-major, every transposition, with beta.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "blas_int.hpp"

namespace {

double v(int seed, int64_t i) { return std::sin(0.37 * static_cast<double>(i) + seed) + 0.25 * seed; }

// Column-major reference.
void ref(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const std::vector<double>& a, int64_t lda,
         const std::vector<double>& b, int64_t ldb, double beta, std::vector<double>& c, int64_t ldc) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (ta ? a[p + i * lda] : a[i + p * lda]) * (tb ? b[j + p * ldb] : b[p + j * ldb]);
      c[i + j * ldc] = alpha * s + beta * c[i + j * ldc];
    }
}

struct Limit {
  explicit Limit(int64_t l) { tsr::blas_limit() = l; }
  ~Limit() { tsr::blas_limit() = INT_MAX; }
};

TEST(BlasInt, BlockedEqualsReferenceAtSmallLimits) {
  const int64_t m = 7, n = 5, k = 6;
  for (int64_t limit : {1, 2, 3, 5, 8, 100})
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      // Leading dimensions: tight (below small limits or not) and wide (above them).
      for (int64_t extra : {0, 9}) {
        const int64_t lda = (ta ? k : m) + extra, ldb = (tb ? n : k) + extra, ldc = m + extra;
        std::vector<double> a(static_cast<size_t>(lda * (ta ? m : k))), b(static_cast<size_t>(ldb * (tb ? k : n)));
        std::vector<double> c(static_cast<size_t>(ldc * n)), want;
        for (size_t i = 0; i < a.size(); ++i) a[i] = v(1, static_cast<int64_t>(i));
        for (size_t i = 0; i < b.size(); ++i) b[i] = v(2, static_cast<int64_t>(i));
        for (size_t i = 0; i < c.size(); ++i) c[i] = v(3, static_cast<int64_t>(i));
        want = c;
        ref(ta, tb, m, n, k, 1.5, a, lda, b, ldb, 0.5, want, ldc);
        {
          Limit l(limit);
          tsr::blas_gemm(ta, tb, m, n, k, 1.5, a.data(), lda, b.data(), ldb, 0.5, c.data(), ldc);
        }
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], want[i], 1e-12) << "limit " << limit << " ta " << ta << " tb " << tb << " extra " << extra
                                            << " at " << i;
      }
    }
}

TEST(BlasInt, RowMajorAndZeroInnerSize) {
  // Row-major C (2 x 3) = A (2 x 4) B (4 x 3), limit 1, against the column-major reference of the transposes.
  const int64_t m = 2, n = 3, k = 4;
  std::vector<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n), 1.0);
  for (size_t i = 0; i < a.size(); ++i) a[i] = v(4, static_cast<int64_t>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = v(5, static_cast<int64_t>(i));
  std::vector<double> want(c.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[static_cast<size_t>(i * k + p)] * b[static_cast<size_t>(p * n + j)];
      want[static_cast<size_t>(i * n + j)] = s + 2.0 * c[static_cast<size_t>(i * n + j)];
    }
  {
    Limit l(1);
    tsr::blas_gemm_rowmajor(false, false, m, n, k, 1.0, a.data(), k, b.data(), n, 2.0, c.data(), n);
  }
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], want[i], 1e-12);
  // k = 0: C = beta C, as CBLAS.
  std::vector<double> z(6, 4.0);
  tsr::blas_gemm(false, false, 2, 3, 0, 1.0, a.data(), 2, b.data(), 1, 0.5, z.data(), 2);
  for (double x : z) EXPECT_EQ(x, 2.0);
}

}  // namespace

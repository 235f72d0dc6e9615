// The local GEMM through CBLAS without truncating any size to int: CBLAS
// takes int dimensions and leading dimensions, tessera's blocks are int64 or
// size_t. blas_gemm splits m, n and k into blocks of at most blas_limit()
// (INT_MAX unless a test lowers it) and, where a leading dimension itself is
// above the limit, takes the strided dimension one column at a time (a
// single column's leading dimension is never read). Not installed.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace tsr {

// The largest dimension or leading dimension handed to CBLAS in one call.
// A test hook: lowering it exercises the blocking at small sizes.
inline int64_t& blas_limit() {
  static int64_t limit = INT_MAX;
  return limit;
}

namespace detail {
inline void blas_call(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                      int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}
inline void blas_call(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                      int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}
}  // namespace detail

// Column-major C (m x n, ldc) = alpha op(A) op(B) + beta C, A stored m x k
// (ta: k x m) with lda, B stored k x n (tb: n x k) with ldb. k = 0 scales C
// by beta (as CBLAS does).
template <class T>
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  const int64_t L = std::max<int64_t>(1, blas_limit());
  // The strided dimension of each stored operand: A's columns are k (ta: m),
  // B's are n (tb: k), C's are n.
  int64_t mb = L, nb = L, kb = L;
  if (lda > L) (ta ? mb : kb) = 1;
  if (ldb > L) (tb ? kb : nb) = 1;
  if (ldc > L) nb = 1;
  for (int64_t j0 = 0; j0 < n; j0 += nb) {
    const int64_t jn = std::min(nb, n - j0);
    for (int64_t i0 = 0; i0 < m; i0 += mb) {
      const int64_t in = std::min(mb, m - i0);
      for (int64_t p0 = 0; p0 == 0 || p0 < k; p0 += kb) {
        const int64_t pn = std::min(kb, k - p0);
        const T* ab = ta ? a + p0 + i0 * lda : a + i0 + p0 * lda;
        const T* bb = tb ? b + j0 + p0 * ldb : b + p0 + j0 * ldb;
        T* cb = c + i0 + j0 * ldc;
        // Rows of each stored block: what a leading dimension must cover.
        const int64_t ar = ta ? pn : in, br = tb ? jn : pn;
        const int la = static_cast<int>(lda > L ? std::max<int64_t>(1, ar) : lda);
        const int lb = static_cast<int>(ldb > L ? std::max<int64_t>(1, br) : ldb);
        const int lc = static_cast<int>(ldc > L ? std::max<int64_t>(1, in) : ldc);
        detail::blas_call(ta, tb, static_cast<int>(in), static_cast<int>(jn), static_cast<int>(pn), alpha, ab, la, bb,
                          lb, p0 == 0 ? beta : T(1), cb, lc);
      }
    }
  }
}

// The same in row-major storage (C = alpha op(A) op(B) + beta C, rows of
// length ld): the column-major product of the transposes.
template <class T>
void blas_gemm_rowmajor(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                        const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  blas_gemm(tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}

}  // namespace tsr

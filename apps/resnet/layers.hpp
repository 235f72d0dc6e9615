// The layer kit of the sample ResNet: pure functions over raw arrays with
// explicit sizes (no MPI, no allocation except where stated, no state), each
// a forward/backward pair, templated on float (training) and double (the
// finite-difference gradient tests). Backward functions ACCUMULATE (+=) into
// parameter gradients, and overwrite input gradients unless stated.
//
// Activations are stored channel-major, CNHW: tensor[c][n][y][x]. Then a
// convolution over the whole batch is ONE GEMM, W[K][C*R*R] x col[C*R*R][N*Ho*Wo],
// whose result is already in CNHW, and the batch-norm statistics of a channel
// are over one contiguous run of N*H*W numbers.
#ifndef TSR_APPS_RESNET_LAYERS_HPP
#define TSR_APPS_RESNET_LAYERS_HPP

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "conv_direct.hpp"

namespace resnet {

// ---- GEMM: C = alpha * op(A) op(B) + beta * C, row major -------------------
inline void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
                 const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---- Convolution (no bias: a batch norm follows every convolution) --------
struct ConvShape {
  int C, N, H, W;      // input channels, batch, height, width
  int K, R, stride, pad;  // output channels, kernel R x R
  int Ho() const { return (H + 2 * pad - R) / stride + 1; }
  int Wo() const { return (W + 2 * pad - R) / stride + 1; }
  // 1x1, stride 1, no padding: the input is its own im2col matrix.
  bool pointwise() const { return R == 1 && stride == 1 && pad == 0; }
  std::size_t col_elems() const {
    return static_cast<std::size_t>(C) * R * R * N * Ho() * Wo();
  }
  std::size_t out_elems() const { return static_cast<std::size_t>(K) * N * Ho() * Wo(); }
  double flops() const { return 2.0 * K * C * R * R * double(N) * Ho() * Wo(); }
};

// The convolutions run over chunks of images so that the im2col matrix of a
// chunk stays in cache (conv_chunk_floats() floats; the batch's full
// matrix is 58 MB at batch 128 in the first stage). Settable for tests.
inline std::size_t& conv_chunk_floats() {
  // 512 KiB: measured best of 128 KiB..8 MiB (ResNet-20, batch 128, per CPU-second:
  // 128 KiB 209, 256 KiB 215, 512 KiB 218, 2 MiB 204, 8 MiB 145 img/s).
  static std::size_t floats = std::size_t(1) << 17;
  return floats;
}
inline int conv_chunk_images(const ConvShape& s) {
  std::size_t per = static_cast<std::size_t>(s.C) * s.R * s.R * s.Ho() * s.Wo();
  std::size_t k = std::max<std::size_t>(1, conv_chunk_floats() / std::max<std::size_t>(per, 1));
  return static_cast<int>(std::min<std::size_t>(k, static_cast<std::size_t>(s.N)));
}

// Images [n0, n0 + nc) of x (CNHW, batch s.N) into
// col[(c*R + ky)*R + kx][n - n0][oy][ox] = x[c][n][oy*s - p + ky][ox*s - p + kx] (0 outside).
template <class T>
void im2col(const ConvShape& s, const T* x, T* col, int n0, int nc) {
  const int Ho = s.Ho(), Wo = s.Wo();
  const std::size_t plane = static_cast<std::size_t>(s.H) * s.W;
  T* out = col;
  // "Same" convolutions (stride 1, Ho = H, Wo = W): tap (ky, kx) of an image
  // is the image shifted by (ky - p) rows and (kx - p) columns, i.e. one
  // contiguous copy of the valid rows, then the columns that wrapped around
  // set to 0.
  const bool same = s.stride == 1 && Ho == s.H && Wo == s.W;
  for (int c = 0; c < s.C; ++c)
    for (int ky = 0; ky < s.R; ++ky)
      for (int kx = 0; kx < s.R; ++kx)
        for (int n = n0; n < n0 + nc; ++n) {
          const T* img = x + (static_cast<std::size_t>(c) * s.N + n) * plane;
          if (same) {
            const int dy = ky - s.pad, dx = kx - s.pad;
            const int y0 = std::max(0, -dy), y1 = std::min(Ho, s.H - dy);
            std::fill(out, out + static_cast<std::size_t>(y0) * Wo, T(0));
            if (y1 > y0) {
              // out[y0*W .. y1*W) = img[(y0+dy)*W + dx ...], clamped to the image.
              long long src0 = static_cast<long long>(y0 + dy) * s.W + dx;
              long long len = static_cast<long long>(y1 - y0) * Wo;
              long long lo = std::max(0LL, -src0), hi = std::min(len, static_cast<long long>(plane) - src0);
              T* o = out + static_cast<std::size_t>(y0) * Wo;
              for (long long i = 0; i < lo; ++i) o[i] = T(0);
              std::memcpy(o + lo, img + src0 + lo, sizeof(T) * static_cast<std::size_t>(hi - lo));
              for (long long i = hi; i < len; ++i) o[i] = T(0);
              if (dx != 0) {
                // Columns whose source lies left or right of the image.
                for (int oy = y0; oy < y1; ++oy) {
                  T* r = out + static_cast<std::size_t>(oy) * Wo;
                  for (int ox = 0; ox < -dx; ++ox) r[ox] = T(0);
                  for (int ox = Wo - dx; ox < Wo; ++ox) r[ox] = T(0);
                }
              }
            }
            std::fill(out + static_cast<std::size_t>(std::max(y1, y0)) * Wo, out + static_cast<std::size_t>(Ho) * Wo, T(0));
            out += static_cast<std::size_t>(Ho) * Wo;
            continue;
          }
          for (int oy = 0; oy < Ho; ++oy) {
            int iy = oy * s.stride - s.pad + ky;
            if (iy < 0 || iy >= s.H) {
              std::fill(out, out + Wo, T(0));
              out += Wo;
              continue;
            }
            const T* row = img + static_cast<std::size_t>(iy) * s.W;
            int ix = -s.pad + kx;
            for (int ox = 0; ox < Wo; ++ox, ix += s.stride) out[ox] = (ix >= 0 && ix < s.W) ? row[ix] : T(0);
            out += Wo;
          }
        }
}
template <class T>
void im2col(const ConvShape& s, const T* x, T* col) {
  im2col(s, x, col, 0, s.N);
}

// The adjoint of im2col for images [n0, n0 + nc): dx[...] += col[...]
// (dx must be set by the caller).
template <class T>
void col2im_add(const ConvShape& s, const T* col, T* dx, int n0, int nc) {
  const int Ho = s.Ho(), Wo = s.Wo();
  const std::size_t plane = static_cast<std::size_t>(s.H) * s.W;
  const T* in = col;
  for (int c = 0; c < s.C; ++c)
    for (int ky = 0; ky < s.R; ++ky)
      for (int kx = 0; kx < s.R; ++kx)
        for (int n = n0; n < n0 + nc; ++n) {
          T* img = dx + (static_cast<std::size_t>(c) * s.N + n) * plane;
          for (int oy = 0; oy < Ho; ++oy, in += Wo) {
            int iy = oy * s.stride - s.pad + ky;
            if (iy < 0 || iy >= s.H) continue;
            T* row = img + static_cast<std::size_t>(iy) * s.W;
            int ix = -s.pad + kx;
            if (s.stride == 1) {
              int lo = std::max(0, -ix), hi = std::min(Wo, s.W - ix);
              T* r = row + ix;
              for (int ox = lo; ox < hi; ++ox) r[ox] += in[ox];
            } else {
              for (int ox = 0; ox < Wo; ++ox, ix += s.stride)
                if (ix >= 0 && ix < s.W) row[ix] += in[ox];
            }
          }
        }
}
template <class T>
void col2im_add(const ConvShape& s, const T* col, T* dx) {
  col2im_add(s, col, dx, 0, s.N);
}

// Scratch the convolution needs: im2col of one chunk of images.
inline std::size_t conv_scratch_elems(const ConvShape& s) {
  if (s.pointwise()) return 0;
  return static_cast<std::size_t>(s.C) * s.R * s.R * conv_chunk_images(s) * s.Ho() * s.Wo();
}

// y[K][N*Ho*Wo] = w[K][C*R*R] * im2col(x), chunk by chunk of images.
// col: scratch of conv_scratch_elems(s) (unused for pointwise convolutions).
template <class T>
void conv_forward(const ConvShape& s, const T* x, const T* w, T* y, T* col) {
  const int HWo = s.Ho() * s.Wo(), P = s.N * HWo, KK = s.C * s.R * s.R;
  if (s.pointwise()) {
    gemm(false, false, s.K, P, KK, T(1), w, KK, x, P, T(0), y, P);
    return;
  }
  // float: the direct kernels (conv_direct.hpp) where the CPU has them.
  if constexpr (std::is_same<T, float>::value) {
    if (conv_direct_forward(s.C, s.N, s.H, s.W, s.K, s.R, s.stride, s.pad, x, w, y)) return;
  }
  const int chunk = conv_chunk_images(s);
  for (int n0 = 0; n0 < s.N; n0 += chunk) {
    const int nc = std::min(chunk, s.N - n0), pc = nc * HWo;
    im2col(s, x, col, n0, nc);
    gemm(false, false, s.K, pc, KK, T(1), w, KK, col, pc, T(0), y + static_cast<std::size_t>(n0) * HWo, P);
  }
}

// dw += dy * im2col(x)^T; dx = w^T * dy folded back (if dx non-null).
// col: scratch of conv_scratch_elems(s).
template <class T>
void conv_backward(const ConvShape& s, const T* x, const T* w, const T* dy, T* dw, T* dx, T* col) {
  const int HWo = s.Ho() * s.Wo(), P = s.N * HWo, KK = s.C * s.R * s.R;
  if (s.pointwise()) {
    gemm(false, true, s.K, KK, P, T(1), dy, P, x, P, T(1), dw, KK);
    if (dx) gemm(true, false, KK, P, s.K, T(1), w, KK, dy, P, T(0), dx, P);
    return;
  }
  // float: the direct kernels where they apply: dw as a reduction over the
  // positions; dx (stride 1) as dy convolved with the flipped filter.
  bool direct_dx = false, direct_dw = false;
  if constexpr (std::is_same<T, float>::value) {
    direct_dw = conv_direct_backward_weights(s.C, s.N, s.H, s.W, s.K, s.R, s.stride, s.pad, x, dy, dw);
    if (dx) direct_dx = conv_direct_backward_data(s.C, s.N, s.H, s.W, s.K, s.R, s.stride, s.pad, dy, w, dx);
  }
  if (direct_dw && (direct_dx || !dx)) return;
  const int chunk = conv_chunk_images(s);
  const std::size_t plane = static_cast<std::size_t>(s.H) * s.W;
  for (int n0 = 0; n0 < s.N; n0 += chunk) {
    const int nc = std::min(chunk, s.N - n0), pc = nc * HWo;
    const T* dyc = dy + static_cast<std::size_t>(n0) * HWo;
    if (!direct_dw) {
      im2col(s, x, col, n0, nc);
      gemm(false, true, s.K, KK, pc, T(1), dyc, P, col, pc, T(1), dw, KK);
    }
    if (dx && !direct_dx) {
      gemm(true, false, KK, pc, s.K, T(1), w, KK, dyc, P, T(0), col, pc);
      for (int c = 0; c < s.C; ++c) {
        T* p = dx + (static_cast<std::size_t>(c) * s.N + n0) * plane;
        std::fill(p, p + nc * plane, T(0));
      }
      col2im_add(s, col, dx, n0, nc);
    }
  }
}

// ---- Batch normalisation over CNHW: C channels of m = N*H*W values ---------
// Training uses the statistics of the batch; they may be summed over
// replicas between the two halves (synchronised batch norm), so each half is
// its own function:
//   bn_sums(x)            -> sums[0..C) = sum x, sums[C..2C) = sum x^2 (double)
//   [all-reduce sums over the replicas, total count M]
//   bn_forward_apply(...) -> y = gamma * (x - mean) * rstd + beta, mean and rstd kept
// Backward likewise:
//   bn_backward_sums(dy, x, mean, rstd) -> sums[0..C) = sum dy, [C..2C) = sum dy*xhat
//   [all-reduce]
//   bn_backward_apply(...) -> dx, and dgamma += local sum dy*xhat, dbeta += local sum dy
// The biased variance normalises (as in training mode everywhere).
// Sums in blocks: 8 float lanes over at most 1024 values (vectorisable),
// the blocks added in double.
template <class T>
inline void block_sums(const T* p, std::size_t m, T shift, double& s_out, double& q_out) {
  double s = 0, q = 0;
  for (std::size_t b = 0; b < m; b += 1024) {
    const std::size_t e = std::min(m, b + 1024);
    T ls[8] = {0, 0, 0, 0, 0, 0, 0, 0}, lq[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::size_t i = b;
    for (; i + 8 <= e; i += 8)
      for (int j = 0; j < 8; ++j) {
        T v = p[i + j] - shift;
        ls[j] += v;
        lq[j] += v * v;
      }
    for (; i < e; ++i) {
      T v = p[i] - shift;
      ls[0] += v;
      lq[0] += v * v;
    }
    for (int j = 0; j < 8; ++j) {
      s += ls[j];
      q += lq[j];
    }
  }
  s_out = s;
  q_out = q;
}

template <class T>
void bn_sums(int C, std::size_t m, const T* x, double* sums) {
  for (int c = 0; c < C; ++c) block_sums(x + static_cast<std::size_t>(c) * m, m, T(0), sums[c], sums[C + c]);
}

template <class T>
void bn_forward_apply(int C, std::size_t m, double M, const double* sums, double eps, const T* x,
                      const T* gamma, const T* beta, T* y, T* mean, T* rstd) {
  for (int c = 0; c < C; ++c) {
    double mu = sums[c] / M;
    double var = std::max(0.0, sums[C + c] / M - mu * mu);
    double r = 1.0 / std::sqrt(var + eps);
    mean[c] = static_cast<T>(mu);
    rstd[c] = static_cast<T>(r);
    const T a = static_cast<T>(gamma[c] * r), b = static_cast<T>(beta[c] - gamma[c] * r * mu);
    const T* p = x + static_cast<std::size_t>(c) * m;
    T* q = y + static_cast<std::size_t>(c) * m;
    for (std::size_t i = 0; i < m; ++i) q[i] = a * p[i] + b;
  }
}

// Evaluation: the running statistics.
template <class T>
void bn_forward_eval(int C, std::size_t m, double eps, const T* x, const T* gamma, const T* beta,
                     const T* run_mean, const T* run_var, T* y) {
  for (int c = 0; c < C; ++c) {
    double r = 1.0 / std::sqrt(double(run_var[c]) + eps);
    const T a = static_cast<T>(gamma[c] * r), b = static_cast<T>(beta[c] - gamma[c] * r * run_mean[c]);
    const T* p = x + static_cast<std::size_t>(c) * m;
    T* q = y + static_cast<std::size_t>(c) * m;
    for (std::size_t i = 0; i < m; ++i) q[i] = a * p[i] + b;
  }
}

// Running statistics as PyTorch keeps them: r = (1 - momentum) r + momentum b,
// with the unbiased variance of the batch (M values).
template <class T>
void bn_update_running(int C, double M, const double* sums, double momentum, T* run_mean, T* run_var) {
  for (int c = 0; c < C; ++c) {
    double mu = sums[c] / M;
    double var = std::max(0.0, sums[C + c] / M - mu * mu) * (M > 1 ? M / (M - 1) : 1.0);
    run_mean[c] = static_cast<T>((1 - momentum) * run_mean[c] + momentum * mu);
    run_var[c] = static_cast<T>((1 - momentum) * run_var[c] + momentum * var);
  }
}

template <class T>
void bn_backward_sums(int C, std::size_t m, const T* dy, const T* x, const T* mean, const T* rstd,
                      double* sums) {
  for (int c = 0; c < C; ++c) {
    const T* g = dy + static_cast<std::size_t>(c) * m;
    const T* p = x + static_cast<std::size_t>(c) * m;
    const T mu = mean[c];
    double s = 0, q = 0;
    for (std::size_t b = 0; b < m; b += 1024) {
      const std::size_t e = std::min(m, b + 1024);
      T ls[8] = {0, 0, 0, 0, 0, 0, 0, 0}, lq[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      std::size_t i = b;
      for (; i + 8 <= e; i += 8)
        for (int j = 0; j < 8; ++j) {
          ls[j] += g[i + j];
          lq[j] += g[i + j] * (p[i + j] - mu);
        }
      for (; i < e; ++i) {
        ls[0] += g[i];
        lq[0] += g[i] * (p[i] - mu);
      }
      for (int j = 0; j < 8; ++j) {
        s += ls[j];
        q += lq[j];
      }
    }
    sums[c] = s;
    sums[C + c] = q * rstd[c];
  }
}

// local: the sums over this replica's values only (for dgamma, dbeta; equal
// to sums when not synchronised). M: the count the statistics were taken over.
template <class T>
void bn_backward_apply(int C, std::size_t m, double M, const double* sums, const double* local,
                       const T* dy, const T* x, const T* mean, const T* rstd, const T* gamma, T* dx,
                       T* dgamma, T* dbeta) {
  for (int c = 0; c < C; ++c) {
    const double r = rstd[c], mu = mean[c];
    const double mdy = sums[c] / M, mdyx = sums[C + c] / M;
    const T a = static_cast<T>(gamma[c] * r);
    const T* g = dy + static_cast<std::size_t>(c) * m;
    const T* p = x + static_cast<std::size_t>(c) * m;
    T* q = dx + static_cast<std::size_t>(c) * m;
    // dx = gamma*rstd*(dy - mean(dy) - xhat*mean(dy*xhat)), xhat = (x - mu)*rstd
    const T k1 = static_cast<T>(mdy), k2 = static_cast<T>(mdyx * r), k0 = static_cast<T>(mu);
    for (std::size_t i = 0; i < m; ++i) q[i] = a * (g[i] - k1 - (p[i] - k0) * k2);
    dgamma[c] += static_cast<T>(local[C + c]);
    dbeta[c] += static_cast<T>(local[c]);
  }
}

// ---- ReLU (in place on the forward; the backward masks by the output) -----
template <class T>
void relu_forward(std::size_t n, T* x) {
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] > T(0) ? x[i] : T(0);
}
// dx = dy where y > 0, else 0 (dx may alias dy).
template <class T>
void relu_backward(std::size_t n, const T* y, const T* dy, T* dx) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

// ---- Residual add: y = a + b (y may alias a); backward is a copy/add ------
template <class T>
void add_forward(std::size_t n, const T* a, const T* b, T* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

// ---- Global average pooling: CNHW [C][N][HW] -> [C][N] ---------------------
template <class T>
void gap_forward(int C, int N, int HW, const T* x, T* y) {
  for (std::size_t cn = 0; cn < static_cast<std::size_t>(C) * N; ++cn) {
    const T* p = x + cn * HW;
    T s = 0;
    for (int i = 0; i < HW; ++i) s += p[i];
    y[cn] = s / T(HW);
  }
}
template <class T>
void gap_backward(int C, int N, int HW, const T* dy, T* dx) {
  for (std::size_t cn = 0; cn < static_cast<std::size_t>(C) * N; ++cn) {
    T v = dy[cn] / T(HW);
    T* q = dx + cn * HW;
    for (int i = 0; i < HW; ++i) q[i] = v;
  }
}

// ---- Linear: x [C][N] (channel-major features) -> y [N][K] -----------------
// y[n][k] = sum_c w[k][c] x[c][n] + b[k]
template <class T>
void linear_forward(int C, int N, int K, const T* x, const T* w, const T* b, T* y) {
  gemm(true, true, N, K, C, T(1), x, N, w, C, T(0), y, K);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) y[static_cast<std::size_t>(n) * K + k] += b[k];
}
// dw += dy^T x^T, db += column sums of dy, dx = w^T dy^T ([C][N]).
template <class T>
void linear_backward(int C, int N, int K, const T* x, const T* w, const T* dy, T* dw, T* db, T* dx) {
  // dw[k][c] += sum_n dy[n][k] x[c][n]
  gemm(true, true, K, C, N, T(1), dy, K, x, N, T(1), dw, C);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) db[k] += dy[static_cast<std::size_t>(n) * K + k];
  // dx[c][n] = sum_k w[k][c] dy[n][k]
  if (dx) gemm(true, true, C, N, K, T(1), w, C, dy, K, T(0), dx, N);
}

// ---- Softmax cross-entropy over logits [N][K] -------------------------------
// Returns the summed loss over the N rows (double) and sets dlogits to
// (softmax - onehot) * scale (scale = 1/global batch for a mean loss);
// *correct += rows whose arg max is the label.
template <class T>
double softmax_xent(int N, int K, const T* logits, const int* labels, double scale, T* dlogits,
                    int* correct) {
  double total = 0;
  for (int n = 0; n < N; ++n) {
    const T* z = logits + static_cast<std::size_t>(n) * K;
    int arg = 0;
    for (int k = 1; k < K; ++k)
      if (z[k] > z[arg]) arg = k;
    if (correct && arg == labels[n]) ++*correct;
    double mx = z[arg], s = 0;
    for (int k = 0; k < K; ++k) s += std::exp(double(z[k]) - mx);
    double lse = mx + std::log(s);
    total += lse - z[labels[n]];
    if (dlogits) {
      T* g = dlogits + static_cast<std::size_t>(n) * K;
      for (int k = 0; k < K; ++k) {
        double p = std::exp(double(z[k]) - lse);
        g[k] = static_cast<T>((p - (k == labels[n] ? 1.0 : 0.0)) * scale);
      }
    }
  }
  return total;
}

}  // namespace resnet

#endif

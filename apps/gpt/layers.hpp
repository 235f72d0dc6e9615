// The GPT's layer kit: pure functions over arrays with explicit sizes, a
// forward and a backward for every layer, templated on the element type
// (float for training, double for the finite-difference tests). No MPI
// inside: attention calls tessera's ring attention on the ring it is given,
// which on a ring of one rank is the local kernel.
//
// Conventions: a token-major activation is (N, C) row-major with N = batch *
// local tokens. Linear weights are stored (in, out): y = x W + b. Every
// backward ACCUMULATES (+=) into its input gradient and parameter gradients
// (the caller zeroes them once per step), except the cross-entropy, which
// writes dlogits.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/attention.h"

namespace gpt {

// ---------------------------------------------------------------- GEMM ---
// Row-major C = alpha op(A) op(B) + beta C, op(A) M x K, op(B) K x N.
inline void gemm(bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const float* A,
                 size_t lda, const float* B, size_t ldb, float beta, float* C, size_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M,
              (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}
inline void gemm(bool ta, bool tb, size_t M, size_t N, size_t K, double alpha, const double* A,
                 size_t lda, const double* B, size_t ldb, double beta, double* C, size_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M,
              (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

// ------------------------------------------------ vectorisable exp/tanh ---
// exp and tanh in float without library calls or branches, so that the
// compiler vectorises the GELU and softmax loops (libm's tanhf was a quarter
// of a step). exp: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, the
// minimax polynomial of Cephes' expf for e^r (about 2 ulp), 2^n built in the
// exponent bits; inputs clamped to [-87, 88] (no inf, no denormals).
// tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7. Double (the
// gradient tests) uses the library functions.
inline float exp_fast(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // round to nearest: adding 1.5 * 2^23 leaves the integer part in the mantissa
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  int32_t ni = static_cast<int32_t>(n);
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t bits = (ni + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}
inline float vexp(float x) { return exp_fast(x); }
inline double vexp(double x) { return std::exp(x); }
inline float vtanh(float u) { return 1.0f - 2.0f / (exp_fast(2.0f * u) + 1.0f); }
inline double vtanh(double u) { return std::tanh(u); }

template <class T>
constexpr tsr_dtype dtype_of();
template <>
constexpr tsr_dtype dtype_of<float>() { return TSR_FLOAT32; }
template <>
constexpr tsr_dtype dtype_of<double>() { return TSR_FLOAT64; }

// ----------------------------------------------------------- embedding ---
// out[n, :] = wte[tok[n], :] + wpe[pos[n % Tl], :], n = b*Tl + t.
template <class T>
void embedding_forward(T* out, const int32_t* tok, const int64_t* pos, size_t B, size_t Tl,
                       const T* wte, const T* wpe, size_t C) {
  for (size_t b = 0; b < B; ++b)
    for (size_t t = 0; t < Tl; ++t) {
      size_t n = b * Tl + t;
      const T* e = wte + static_cast<size_t>(tok[n]) * C;
      const T* p = wpe + static_cast<size_t>(pos[t]) * C;
      T* o = out + n * C;
      for (size_t c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
}
template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tok, const int64_t* pos,
                        size_t B, size_t Tl, size_t C) {
  for (size_t b = 0; b < B; ++b)
    for (size_t t = 0; t < Tl; ++t) {
      size_t n = b * Tl + t;
      T* e = dwte + static_cast<size_t>(tok[n]) * C;
      T* p = dwpe + static_cast<size_t>(pos[t]) * C;
      const T* d = dout + n * C;
      for (size_t c = 0; c < C; ++c) {
        e[c] += d[c];
        p[c] += d[c];
      }
    }
}

// ----------------------------------------------------------- LayerNorm ---
constexpr double kLnEps = 1e-5;
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* g, const T* b, size_t N,
                       size_t C) {
  for (size_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    T m = 0;
    for (size_t c = 0; c < C; ++c) m += xr[c];
    m /= static_cast<T>(C);
    T v = 0;
    for (size_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
    v /= static_cast<T>(C);
    T r = static_cast<T>(1) / std::sqrt(v + static_cast<T>(kLnEps));
    T* o = out + n * C;
    for (size_t c = 0; c < C; ++c) o[c] = (xr[c] - m) * r * g[c] + b[c];
    mean[n] = m;
    rstd[n] = r;
  }
}
template <class T>
void layernorm_backward(T* dx, T* dg, T* db, const T* dout, const T* x, const T* mean,
                        const T* rstd, const T* g, size_t N, size_t C) {
  for (size_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    const T* d = dout + n * C;
    T m = mean[n], r = rstd[n];
    T s1 = 0, s2 = 0;  // mean(dnorm), mean(dnorm * norm)
    for (size_t c = 0; c < C; ++c) {
      T norm = (xr[c] - m) * r;
      T dn = d[c] * g[c];
      s1 += dn;
      s2 += dn * norm;
      dg[c] += d[c] * norm;
      db[c] += d[c];
    }
    s1 /= static_cast<T>(C);
    s2 /= static_cast<T>(C);
    T* dxr = dx + n * C;
    for (size_t c = 0; c < C; ++c) {
      T norm = (xr[c] - m) * r;
      dxr[c] += r * (d[c] * g[c] - s1 - norm * s2);
    }
  }
}

// -------------------------------------------------------------- linear ---
// out (N, O) = x (N, I) W (I, O) + b (b may be null).
template <class T>
void linear_forward(T* out, const T* x, const T* W, const T* b, size_t N, size_t I, size_t O) {
  gemm(false, false, N, O, I, T(1), x, I, W, O, T(0), out, O);
  if (b)
    for (size_t n = 0; n < N; ++n) {
      T* o = out + n * O;
      for (size_t j = 0; j < O; ++j) o[j] += b[j];
    }
}
// dx (may be null) += dout W^T (dx_overwrite: dx = dout W^T); dW += x^T dout;
// db (may be null) += colsum(dout).
template <class T>
void linear_backward(T* dx, T* dW, T* db, const T* dout, const T* x, const T* W, size_t N, size_t I,
                     size_t O, bool dx_overwrite = false) {
  if (dx) gemm(false, true, N, I, O, T(1), dout, O, W, O, dx_overwrite ? T(0) : T(1), dx, I);
  gemm(true, false, I, O, N, T(1), x, I, dout, O, T(1), dW, O);
  if (db)
    for (size_t n = 0; n < N; ++n) {
      const T* d = dout + n * O;
      for (size_t j = 0; j < O; ++j) db[j] += d[j];
    }
}

// ---------------------------------------------------------------- GELU ---
// The tanh approximation (GPT-2; PyTorch GELU(approximate="tanh")).
template <class T>
void gelu_forward(T* out, const T* x, size_t n) {
  const T k = static_cast<T>(0.7978845608028654), a = static_cast<T>(0.044715);
  for (size_t i = 0; i < n; ++i) {
    T v = x[i];
    out[i] = static_cast<T>(0.5) * v * (static_cast<T>(1) + vtanh(k * (v + a * v * v * v)));
  }
}
template <class T>
void gelu_backward(T* dx, const T* dout, const T* x, size_t n) {
  const T k = static_cast<T>(0.7978845608028654), a = static_cast<T>(0.044715);
  for (size_t i = 0; i < n; ++i) {
    T v = x[i];
    T th = vtanh(k * (v + a * v * v * v));
    T dth = (static_cast<T>(1) - th * th) * k * (static_cast<T>(1) + 3 * a * v * v);
    dx[i] += dout[i] * (static_cast<T>(0.5) * (static_cast<T>(1) + th) + static_cast<T>(0.5) * v * dth);
  }
}

// ------------------------------------------------------------ residual ---
template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
template <class T>
void residual_backward(T* da, T* db, const T* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

// ----------------------------------------------------------- attention ---
// Causal multi-head self-attention core on this rank's tokens. qkv is
// (B, Tl, 3C): the queries, keys and values of head h in columns h*D..,
// C + h*D.., 2C + h*D.. (D = C/H). y is (B, Tl, C), heads side by side.
// Work buffers q, k, v, o (B, H, Tl, D each) and lse (B, H, Tl) are kept
// for the backward. ring and cfg: tessera's ring attention (cfg.seq_len the
// global sequence, cfg.layout how it is split over the ring).
struct AttnError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class T>
void attn_split_heads(T* q, T* k, T* v, const T* qkv, size_t B, size_t Tl, size_t C, size_t H) {
  size_t D = C / H;
  for (size_t b = 0; b < B; ++b)
    for (size_t t = 0; t < Tl; ++t) {
      const T* row = qkv + (b * Tl + t) * 3 * C;
      for (size_t h = 0; h < H; ++h) {
        size_t o = ((b * H + h) * Tl + t) * D;
        std::copy(row + h * D, row + h * D + D, q + o);
        std::copy(row + C + h * D, row + C + h * D + D, k + o);
        std::copy(row + 2 * C + h * D, row + 2 * C + h * D + D, v + o);
      }
    }
}

template <class T>
void attention_forward(tsr_ring ring, const tsr_attn_config& cfg, T* y, T* q, T* k, T* v, T* o,
                       T* lse, const T* qkv, size_t B, size_t Tl, size_t C, size_t H) {
  size_t D = C / H;
  attn_split_heads(q, k, v, qkv, B, Tl, C, H);
  tsr_attn_tensor tq{q, B, H, Tl, D}, tk{k, B, H, Tl, D}, tv{v, B, H, Tl, D}, to{o, B, H, Tl, D},
      tl{lse, B, H, Tl, 1};
  tsr_status st = tsr_attn_forward(ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl);
  if (st != TSR_SUCCESS)
    throw AttnError(std::string("tsr_attn_forward: ") + tsr_status_name(st) + ": " +
                    tsr_last_error(nullptr));
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h)
      for (size_t t = 0; t < Tl; ++t)
        std::copy(o + ((b * H + h) * Tl + t) * D, o + ((b * H + h) * Tl + t) * D + D,
                  y + (b * Tl + t) * C + h * D);
}

// dqkv += gradient through the attention core given dy (B, Tl, C).
// Work buffers dq, dk, dv, dO (B, H, Tl, D each).
template <class T>
void attention_backward(tsr_ring ring, const tsr_attn_config& cfg, T* dqkv, const T* dy, const T* q,
                        const T* k, const T* v, const T* o, const T* lse, T* dq, T* dk, T* dv, T* dO,
                        size_t B, size_t Tl, size_t C, size_t H) {
  size_t D = C / H;
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h)
      for (size_t t = 0; t < Tl; ++t)
        std::copy(dy + (b * Tl + t) * C + h * D, dy + (b * Tl + t) * C + h * D + D,
                  dO + ((b * H + h) * Tl + t) * D);
  auto c = [](const T* p) { return const_cast<T*>(p); };
  tsr_attn_tensor tq{c(q), B, H, Tl, D}, tk{c(k), B, H, Tl, D}, tv{c(v), B, H, Tl, D},
      to{c(o), B, H, Tl, D}, tl{c(lse), B, H, Tl, 1}, tdo{dO, B, H, Tl, D}, tdq{dq, B, H, Tl, D},
      tdk{dk, B, H, Tl, D}, tdv{dv, B, H, Tl, D};
  tsr_status st = tsr_attn_backward(ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl, &tdo, &tdq, &tdk, &tdv);
  if (st != TSR_SUCCESS)
    throw AttnError(std::string("tsr_attn_backward: ") + tsr_status_name(st) + ": " +
                    tsr_last_error(nullptr));
  for (size_t b = 0; b < B; ++b)
    for (size_t t = 0; t < Tl; ++t) {
      T* row = dqkv + (b * Tl + t) * 3 * C;
      for (size_t h = 0; h < H; ++h) {
        size_t off = ((b * H + h) * Tl + t) * D;
        for (size_t e = 0; e < D; ++e) {
          row[h * D + e] += dq[off + e];
          row[C + h * D + e] += dk[off + e];
          row[2 * C + h * D + e] += dv[off + e];
        }
      }
    }
}

// ------------------------------------------------ softmax cross-entropy ---
// probs (N, V) = softmax(logits); returns the SUM of -log p[target] over the
// N rows (the caller divides).
template <class T>
double crossentropy_forward(T* probs, const T* logits, const int32_t* targets, size_t N, size_t V) {
  double total = 0;
  for (size_t n = 0; n < N; ++n) {
    const T* l = logits + n * V;
    T* p = probs + n * V;
    T m = l[0];
    for (size_t j = 1; j < V; ++j) m = std::max(m, l[j]);
    T s = 0;
    for (size_t j = 0; j < V; ++j) p[j] = vexp(l[j] - m);
    for (size_t j = 0; j < V; ++j) s += p[j];
    T inv = static_cast<T>(1) / s;
    for (size_t j = 0; j < V; ++j) p[j] *= inv;
    total += static_cast<double>(std::log(s) + m - l[targets[n]]);
  }
  return total;
}
// dlogits = scale * (probs - onehot(target)) (written, not accumulated).
template <class T>
void crossentropy_backward(T* dlogits, const T* probs, const int32_t* targets, size_t N, size_t V,
                           T scale) {
  for (size_t n = 0; n < N; ++n) {
    const T* p = probs + n * V;
    T* d = dlogits + n * V;
    for (size_t j = 0; j < V; ++j) d[j] = scale * p[j];
    d[targets[n]] -= scale;
  }
}

}  // namespace gpt

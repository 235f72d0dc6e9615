// The ring attention block on a CUDA device (issue 17): flash-style online
// softmax forward (running o, m, l; then O and the log-sum-exp) and the
// FlashAttention-2 backward from O, dO and the global LSE (dQ, dK, dV), with
// the semantics of the CPU block (attention_impl.hpp: fwd_block, fwd_finish,
// bwd_delta, bwd_block) for float32: the same layouts, the same causal test
// (key visible when its position <= the query's), the same key mask, the same
// treatment of rows with nothing visible (o = 0, lse = -inf, no gradient).
// The order of the additions differs from the CPU tiles (results agree to
// rounding). Built only with TSR_HAVE_CUDA. Not installed.
//
// Every array is device memory of `device` (checked: INVALID_ARG naming the
// argument). Calls are asynchronous on `stream`. Head dimension 1..256.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tessera/tessera.h"

namespace tsr {
namespace attn {
namespace cuda {

constexpr size_t kMaxDim = 256;

struct Shape {
  size_t B = 1, H = 1, G = 1, d = 1;  // batch, query heads, kv heads (H % G == 0), head dim
  float scale = 1;
  bool causal = false;
};

// Where the block runs.
struct On {
  int device = 0;
  cudaStream_t stream = nullptr;
};

// o = 0, m = -inf, l = 0 for (B,H,nq) rows.
tsr_status fwd_init(const On& on, const Shape& s, size_t nq, float* o, float* m, float* l);
// Folds one key block into the running state. q: (B,H,nq,d); k, v: (B,G,nk,d);
// qpos (nq), kpos (nk): positions (needed when causal, else may be null);
// kmask: (B,nk), nonzero = visible, or null. o (B,H,nq,d), m, l (B,H,nq).
tsr_status fwd_block(const On& on, const Shape& s, const float* q, size_t nq, const int64_t* qpos, const float* k,
                     const float* v, size_t nk, const int64_t* kpos, const uint8_t* kmask, float* o, float* m,
                     float* l);
// o /= l and lse = m + log(l); rows with nothing visible: o = 0, lse = -inf.
tsr_status fwd_finish(const On& on, const Shape& s, size_t nq, float* o, const float* m, const float* l, float* lse);
// delta = rowsum(dout * out), (B,H,nq).
tsr_status bwd_delta(const On& on, const Shape& s, size_t nq, const float* out, const float* dout, float* delta);
// dq (B,H,nq,d) += and dk, dv (B,G,nk,d) += this key block's contributions.
tsr_status bwd_block(const On& on, const Shape& s, const float* q, size_t nq, const int64_t* qpos, const float* k,
                     const float* v, size_t nk, const int64_t* kpos, const uint8_t* kmask, const float* dout,
                     const float* lse, const float* delta, float* dq, float* dk, float* dv);

// Position ids of a shard of len tokens: out[i] = s0 + i*stride for i < c0,
// s1 + (i - c0)*stride after (contiguous: c0 = len, stride 1; zigzag: its
// two chunks; striped: s0 = rank, stride = p). out: device memory.
tsr_status positions(const On& on, size_t len, size_t c0, int64_t s0, int64_t s1, int64_t stride, int64_t* out);

// The two-pass baseline (ring self-attention) on full score rows, with the
// semantics of the CPU kernels rsa_* (attention_impl.hpp): s is
// (B,H,nq,ntot), a key block's columns at [off, off+nk). Plain kernels (one
// thread per output element): the baseline, correct rather than fast.
tsr_status rsa_scores(const On& on, const Shape& s, const float* q, size_t nq, const int64_t* qpos, const float* k,
                      size_t nk, const int64_t* kpos, const uint8_t* kmask, float* sc, size_t ntot, size_t off);
tsr_status rsa_softmax(const On& on, const Shape& s, size_t nq, float* sc, size_t ntot, float* lse);
tsr_status rsa_probs(const On& on, const Shape& s, size_t nq, float* sc, size_t ntot, const float* lse);
tsr_status rsa_av(const On& on, const Shape& s, size_t nq, const float* a, size_t ntot, size_t off, const float* v,
                  size_t nk, float* o);
tsr_status rsa_dav(const On& on, const Shape& s, size_t nq, const float* a, float* da, size_t ntot, size_t off,
                   const float* v, size_t nk, const float* dout, float* dv);
tsr_status rsa_ds(const On& on, const Shape& s, size_t nq, const float* a, float* da, size_t ntot, const float* delta);
tsr_status rsa_dqk(const On& on, const Shape& s, size_t nq, const float* ds, size_t ntot, size_t off, const float* q,
                   const float* k, size_t nk, float* dq, float* dk);

// Floating-point operations of a forward block / backward block without
// masking (4 B H nq nk d and 10 B H nq nk d; the benchmark's TFLOP/s).
inline double fwd_flops(const Shape& s, size_t nq, size_t nk) {
  return 4.0 * static_cast<double>(s.B * s.H) * static_cast<double>(nq) * static_cast<double>(nk) *
         static_cast<double>(s.d);
}
inline double bwd_flops(const Shape& s, size_t nq, size_t nk) { return 2.5 * fwd_flops(s, nq, nk); }

}  // namespace cuda
}  // namespace attn
}  // namespace tsr

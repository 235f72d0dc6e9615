// Internals of ring attention: sequence layouts, the blockwise kernels
// (local, CBLAS for every matrix product) and the workspace plan. Not
// installed. docs/ATTENTION.md describes the algorithms and formulas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>

#include "tessera/attention.h"

namespace tsr {
namespace attn {

// ------------------------------------------------------------------ layouts
// Chunk c of `parts` balanced chunks of n items: the first n % parts chunks
// are one longer.
inline size_t part_size(size_t n, size_t parts, size_t c) { return n / parts + (c < n % parts ? 1 : 0); }
inline size_t part_start(size_t n, size_t parts, size_t c) {
  return c * (n / parts) + (c < n % parts ? c : n % parts);
}

size_t shard_len(tsr_attn_layout layout, size_t n, int p, int r);
// tsr_attn_workspace without the error bookkeeping (attention.cpp).
tsr_status workspace(const tsr_attn_config* cfg, int nranks, int rank, size_t batch, size_t heads, size_t kv_heads,
                     size_t dim, int has_key_mask, int backward, size_t* bytes);
// Global position of local token i of rank r.
int64_t position(tsr_attn_layout layout, size_t n, int p, int r, size_t i);
void positions(tsr_attn_layout layout, size_t n, int p, int r, int64_t* out);
// Index of the rank's first token in layout order (sum of the shards before it).
size_t shard_offset(tsr_attn_layout layout, size_t n, int p, int r);

// Local rows [begin, end) whose positions increase with the index; kernels
// never let a tile cross a segment boundary, so a tile's positions are the
// range [pos[begin'], pos[end'-1]].
struct Seg {
  size_t begin, end;
};
// The rank's segments (ZIGZAG: its two chunks; otherwise one), offset by
// `base`, appended to out (empty ones dropped). Returns the number appended.
int segments(tsr_attn_layout layout, size_t n, int p, int r, size_t base, Seg* out);

// ------------------------------------------------------------------ kernels
// Tile sizes: a query tile of kBq rows against a key tile of kBk keys; the
// only score memory is one kBq x kBk tile (two in the backward).
constexpr size_t kBq = 64;
constexpr size_t kBk = 128;

// One side of a block: n rows with positions, cut into segments.
struct Rows {
  size_t n = 0;
  const int64_t* pos = nullptr;
  const Seg* segs = nullptr;
  int nsegs = 0;
};

template <class T>
struct Geo {
  size_t B = 1, H = 1, G = 1, d = 1;  // batch, query heads, kv heads, head dim
  T scale = 1;
  bool causal = false;
};

// Called between tiles so that the ring's transfers progress.
using Poke = std::function<void()>;

// Forward over one key block. q: (B,H,nq,d); k, v: (B,G,nk,d); kmask: (B,nk)
// or null. Running state for (B,H,nq): o (unnormalised sum of exp(s-m) v),
// m (running max, -inf when nothing visible yet), l (sum of exp(s-m)).
// tile: kBq*kBk elements.
template <class T>
void fwd_block(const Geo<T>& g, const T* q, const Rows& qr, const T* k, const T* v, const Rows& kr,
               const uint8_t* kmask, T* o, T* m, T* l, T* tile, const Poke& poke);
// Initial state: o = 0, m = -inf, l = 0.
template <class T>
void fwd_init(const Geo<T>& g, size_t nq, T* o, T* m, T* l);
// o /= l, lse = m + log(l); rows with nothing visible: o = 0, lse = -inf.
// m may alias lse.
template <class T>
void fwd_finish(const Geo<T>& g, size_t nq, T* o, const T* m, const T* l, T* lse);

// D = rowsum(dout * out), (B,H,nq).
template <class T>
void bwd_delta(const Geo<T>& g, size_t nq, const T* out, const T* dout, T* delta);
// Backward over one key block: dq += ..., dk += ..., dv += ... (dk, dv:
// (B,G,nk,d), contributions for this key block). tiles: 2*kBq*kBk.
template <class T>
void bwd_block(const Geo<T>& g, const T* q, const Rows& qr, const T* k, const T* v, const Rows& kr,
               const uint8_t* kmask, const T* dout, const T* lse, const T* delta, T* dq, T* dk, T* dv, T* tiles,
               const Poke& poke);

// The two-pass baseline (ring self-attention) works on full score rows:
// a buffer (B,H,nq,ntot) whose columns are the tokens in layout order.
// Scores of one key block at columns [off, off+nk): scale*q k^T, masked
// entries -inf.
template <class T>
void rsa_scores(const Geo<T>& g, const T* q, const Rows& qr, const T* k, const Rows& kr, const uint8_t* kmask,
                T* s, size_t ntot, size_t off);
// Row softmax in place (s -> probabilities) and lse; rows with nothing
// visible: probabilities 0, lse -inf.
template <class T>
void rsa_softmax(const Geo<T>& g, size_t nq, T* s, size_t ntot, T* lse);
// P = exp(s - lse) in place (masked entries are -inf in s: 0).
template <class T>
void rsa_probs(const Geo<T>& g, size_t nq, T* s, size_t ntot, const T* lse);
// o (+)= A[:, off:off+nk] v   (beta: 0 or 1)
template <class T>
void rsa_av(const Geo<T>& g, size_t nq, const T* a, size_t ntot, size_t off, const T* v, size_t nk, T* o);
// dA[:, off:off+nk] = dout v^T; dv_full block += A[:, off..]^T dout (summed over the query heads of a group).
template <class T>
void rsa_dav(const Geo<T>& g, size_t nq, const T* a, T* da, size_t ntot, size_t off, const T* v, size_t nk,
             const T* dout, T* dv);
// da <- A * (da - delta) (dS, in place).
template <class T>
void rsa_ds(const Geo<T>& g, size_t nq, const T* a, T* da, size_t ntot, const T* delta);
// dq += scale dS[:, off..] k; dk block += scale dS^T q.
template <class T>
void rsa_dqk(const Geo<T>& g, size_t nq, const T* ds, size_t ntot, size_t off, const T* q, const T* k, size_t nk,
             T* dq, T* dk);

// Stable merge of (o_a, lse_a) with (o_b, lse_b), rows x dim, into a.
template <class T>
void merge(size_t rows, size_t dim, T* oa, T* la, const T* ob, const T* lb);

// The float exp of the kernels' row loops (for tests): within 2 ulp of
// std::exp for x >= -87.33654; 0 below (and for -inf).
float fast_exp(float x);

template <class T>
constexpr T neg_inf() {
  return -std::numeric_limits<T>::infinity();
}

}  // namespace attn
}  // namespace tsr

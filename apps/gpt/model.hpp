// The GPT: one flat parameter array cut into named tensors (one optimizer
// group each), deterministic initialisation from the seed, and the forward
// and backward of this rank's tokens written out layer by layer over the
// layer kit. Templated on the element type: float for training, double for
// the whole-model gradient test.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "layers.hpp"
#include "rng.hpp"

namespace gpt {

struct Shape {
  size_t vocab = 256;  // byte-level
  size_t layers = 4;
  size_t width = 256;  // C
  size_t heads = 4;    // H
  size_t seq = 128;    // T, the global sequence length (also the position table)
};

enum InitKind { INIT_NORMAL, INIT_NORMAL_RESID, INIT_ZERO, INIT_ONE };

struct ParamTensor {
  std::string name;
  size_t offset, size;
  InitKind init;
  bool matrix;  // weight decay and layer adaptation apply (not biases, LayerNorm)
};

// Tensors in order: wte (V, C), wpe (T, C); per layer ln1.g, ln1.b, qkv.w (C, 3C),
// qkv.b, proj.w (C, C), proj.b, ln2.g, ln2.b, fc.w (C, 4C), fc.b, fcproj.w (4C, C),
// fcproj.b; lnf.g, lnf.b, head.w (C, V).
inline std::vector<ParamTensor> param_layout(const Shape& s) {
  std::vector<ParamTensor> t;
  size_t off = 0;
  auto add = [&](std::string n, size_t sz, InitKind k, bool m) {
    t.push_back({std::move(n), off, sz, k, m});
    off += sz;
  };
  const size_t C = s.width, V = s.vocab;
  add("wte", V * C, INIT_NORMAL, true);
  add("wpe", s.seq * C, INIT_NORMAL, true);
  for (size_t l = 0; l < s.layers; ++l) {
    std::string p = "h" + std::to_string(l) + ".";
    add(p + "ln1.g", C, INIT_ONE, false);
    add(p + "ln1.b", C, INIT_ZERO, false);
    add(p + "attn.qkv.w", C * 3 * C, INIT_NORMAL, true);
    add(p + "attn.qkv.b", 3 * C, INIT_ZERO, false);
    add(p + "attn.proj.w", C * C, INIT_NORMAL_RESID, true);
    add(p + "attn.proj.b", C, INIT_ZERO, false);
    add(p + "ln2.g", C, INIT_ONE, false);
    add(p + "ln2.b", C, INIT_ZERO, false);
    add(p + "mlp.fc.w", C * 4 * C, INIT_NORMAL, true);
    add(p + "mlp.fc.b", 4 * C, INIT_ZERO, false);
    add(p + "mlp.proj.w", 4 * C * C, INIT_NORMAL_RESID, true);
    add(p + "mlp.proj.b", C, INIT_ZERO, false);
  }
  add("lnf.g", C, INIT_ONE, false);
  add("lnf.b", C, INIT_ZERO, false);
  add("head.w", C * V, INIT_NORMAL, true);
  return t;
}

inline size_t param_count(const std::vector<ParamTensor>& t) {
  return t.empty() ? 0 : t.back().offset + t.back().size;
}

// GPT-2's initialisation: N(0, 0.02), the residual projections scaled by
// 1/sqrt(2 layers), biases 0, LayerNorm gains 1. Element i of tensor k is a
// function of (seed, k, i) only.
template <class T>
void init_params(T* p, const std::vector<ParamTensor>& layout, const Shape& s, uint64_t seed) {
  const double sd = 0.02, sdr = 0.02 / std::sqrt(2.0 * static_cast<double>(s.layers));
  for (size_t k = 0; k < layout.size(); ++k) {
    const ParamTensor& t = layout[k];
    for (size_t i = 0; i < t.size; ++i) {
      double v = 0;
      switch (t.init) {
        case INIT_NORMAL: v = sd * normal(seed, STREAM_INIT + k, i); break;
        case INIT_NORMAL_RESID: v = sdr * normal(seed, STREAM_INIT + k, i); break;
        case INIT_ZERO: v = 0; break;
        case INIT_ONE: v = 1; break;
      }
      p[t.offset + i] = static_cast<T>(v);
    }
  }
}

// A rank's part of the parameters under tensor parallelism: the linear
// layers' weights (and, in 1D, the split biases) as this rank's blocks only,
// every other tensor whole (replicated over the tensor-parallel ranks). The
// tensors keep their canonical index (param_layout's order, which the models
// use) with local offsets and sizes; the whole (replicated) tensors come
// first in memory, [0, replicated), then the blocks, so that the replicated
// gradients are one contiguous all-reduce. gidx[t]: local element -> element
// of the whole tensor t (empty: the whole tensor, in order).
struct LocalParams {
  std::vector<ParamTensor> t;
  std::vector<std::vector<uint32_t>> gidx;
  std::vector<size_t> whole;  // elements of the whole tensor t
  size_t n = 0, replicated = 0;
  std::vector<size_t> order;  // tensor indices by local offset (the optimizer's groups)
  bool sharded(size_t k) const { return !gidx[k].empty(); }
};

// blocks[k]: the global element indices of tensor k this rank holds (empty:
// the whole tensor).
inline LocalParams make_local(const Shape& s, std::vector<std::vector<uint32_t>> blocks) {
  LocalParams lp;
  lp.t = param_layout(s);
  blocks.resize(lp.t.size());
  lp.gidx = std::move(blocks);
  size_t off = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t k = 0; k < lp.t.size(); ++k) {
      if (lp.sharded(k) != (pass == 1)) continue;
      lp.whole.resize(lp.t.size());
      lp.whole[k] = lp.t[k].size;
      lp.t[k].offset = off;
      if (pass == 1) lp.t[k].size = lp.gidx[k].size();
      off += lp.t[k].size;
      lp.order.push_back(k);
      if (pass == 0) lp.replicated = off;
    }
  lp.n = off;
  return lp;
}

// Megatron's 1D blocks of rank r of P: the columns of qkv.w, qkv.b (heads
// [r H/P, ..) of q, k and v), the rows of attn.proj.w, the columns of
// mlp.fc.w, mlp.fc.b and the rows of mlp.proj.w; vocabulary-parallel, the
// rows [v0, v1) of wte and the columns [v0, v1) of head.w (v0 = V r / P).
// Local shapes (row-major): wte (Vl, C), qkv.w (C, 3 Cl) with local column
// part*Cl + c, proj.w (Cl, C), fc.w (C, Fl), mlp.proj.w (Fl, C), head.w
// (C, Vl).
inline std::vector<std::vector<uint32_t>> megatron_blocks(const Shape& s, size_t P, size_t r) {
  std::vector<std::vector<uint32_t>> b(param_layout(s).size());
  if (P <= 1) return b;
  const size_t C = s.width, Cl = C / P, Fl = 4 * C / P, V = s.vocab;
  const size_t v0 = V * r / P, v1 = V * (r + 1) / P;  // the vocabulary block (balanced)
  for (size_t v = v0; v < v1; ++v)
    for (size_t c = 0; c < C; ++c) b[0].push_back(static_cast<uint32_t>(v * C + c));
  const size_t head = 2 + 12 * s.layers + 2;
  for (size_t i = 0; i < C; ++i)
    for (size_t v = v0; v < v1; ++v) b[head].push_back(static_cast<uint32_t>(i * V + v));
  for (size_t l = 0; l < s.layers; ++l) {
    const size_t t = 2 + 12 * l;
    for (size_t i = 0; i < C; ++i)
      for (size_t part = 0; part < 3; ++part)
        for (size_t c = 0; c < Cl; ++c) b[t + 2].push_back(static_cast<uint32_t>(i * 3 * C + part * C + r * Cl + c));
    for (size_t part = 0; part < 3; ++part)
      for (size_t c = 0; c < Cl; ++c) b[t + 3].push_back(static_cast<uint32_t>(part * C + r * Cl + c));
    for (size_t i = r * Cl; i < (r + 1) * Cl; ++i)
      for (size_t c = 0; c < C; ++c) b[t + 4].push_back(static_cast<uint32_t>(i * C + c));
    for (size_t i = 0; i < C; ++i)
      for (size_t c = 0; c < Fl; ++c) b[t + 8].push_back(static_cast<uint32_t>(i * 4 * C + r * Fl + c));
    for (size_t c = 0; c < Fl; ++c) b[t + 9].push_back(static_cast<uint32_t>(r * Fl + c));
    for (size_t i = r * Fl; i < (r + 1) * Fl; ++i)
      for (size_t c = 0; c < C; ++c) b[t + 10].push_back(static_cast<uint32_t>(i * C + c));
  }
  return b;
}

// init_params for this rank's part: element i of the whole tensor k is the
// same function of (seed, k, i), so every layout starts from the same model.
template <class T>
void init_local(T* p, const LocalParams& lp, const Shape& s, uint64_t seed) {
  const double sd = 0.02, sdr = 0.02 / std::sqrt(2.0 * static_cast<double>(s.layers));
  for (size_t k = 0; k < lp.t.size(); ++k) {
    const ParamTensor& t = lp.t[k];
    for (size_t i = 0; i < t.size; ++i) {
      const size_t gi = lp.sharded(k) ? lp.gidx[k][i] : i;
      double v = 0;
      switch (t.init) {
        case INIT_NORMAL: v = sd * normal(seed, STREAM_INIT + k, gi); break;
        case INIT_NORMAL_RESID: v = sdr * normal(seed, STREAM_INIT + k, gi); break;
        case INIT_ZERO: v = 0; break;
        case INIT_ONE: v = 1; break;
      }
      p[t.offset + i] = static_cast<T>(v);
    }
  }
}

// Tensor parallelism inside a replica (Megatron's 1D scheme): rank `rank`
// of `size` owns heads [rank*H/size, ..) of the attention (the columns of
// qkv.w and qkv.b, the rows of attn.proj.w) and a slice of the MLP's hidden
// units (the columns of mlp.fc.w/b, the rows of mlp.proj.w). The
// column-parallel layers need no communication forward and an all-reduce of
// the input gradient backward; the row-parallel layers an all-reduce of the
// output forward and none backward: two all-reduces each way per layer.
// The token embedding and the LM head are vocabulary-parallel (Megatron):
// rank r holds rows [v0, v1) of wte and columns [v0, v1) of head.w; the
// embedding is an all-reduce of the rows' lookups, the softmax and
// cross-entropy reduce the row maxima and the sums of exp over the ranks,
// the head's input gradient is all-reduced. LayerNorms, the position
// embedding and the row-parallel biases are replicated. The rank holds only
// its blocks (megatron_blocks, the layout of make_local) and writes the
// gradient of its blocks; the replicated tensors' gradients are the same on
// every tensor-parallel rank (their inputs are all-reduced), so the
// optimizer averages them over the replicas only. allreduce_sum: sums a buffer over the tensor-parallel ranks (the app
// passes tessera's accounted all-reduce).
template <class T>
struct TensorParallel {
  int size = 1, rank = 0;
  std::function<void(T*, size_t)> allreduce_sum;
  std::function<void(T*, size_t)> allreduce_max;  // the same with MAX (the vocabulary-parallel softmax)
};

// Forward and backward of B sequences' local tokens (Tl per sequence, at
// global positions pos[0..Tl)) on one rank of a sequence ring.
template <class T>
class Model {
 public:
  Model(const Shape& s, tsr_ring ring, tsr_attn_layout layout, TensorParallel<T> tp = {})
      : s_(s), ring_(ring), tp_(std::move(tp)) {
    const size_t P = static_cast<size_t>(tp_.size);
    local_ = make_local(s, megatron_blocks(s, P, static_cast<size_t>(tp_.rank)));
    layout_ = local_.t;
    cfg_ = TSR_ATTN_CONFIG_INIT;
    cfg_.variant = TSR_ATTN_RING;
    cfg_.layout = layout;
    cfg_.causal = 1;
    cfg_.type = dtype_of<T>();
    acts_.resize(s.layers);
    Cl_ = s.width / P;
    Hl_ = s.heads / P;
    Fl_ = 4 * s.width / P;
    v0_ = s.vocab * static_cast<size_t>(tp_.rank) / P;
    Vl_ = s.vocab * static_cast<size_t>(tp_.rank + 1) / P - v0_;
  }
  // The tensors at their local offsets (canonical order; with tensor
  // parallelism, this rank's blocks: local()).
  const std::vector<ParamTensor>& layout() const { return layout_; }
  const LocalParams& local() const { return local_; }
  const Shape& shape() const { return s_; }

  // Sizes for the next calls: B sequences, Tl local tokens at global
  // positions pos, of a sequence of seq_len tokens (<= shape.seq).
  void resize(size_t B, const std::vector<int64_t>& pos, size_t seq_len) {
    B_ = B;
    pos_ = pos;
    Tl_ = pos.size();
    cfg_.seq_len = seq_len;
    const size_t N = B_ * Tl_, C = s_.width, V = s_.vocab, Cl = Cl_, Fl = Fl_;
    auto sz = [](std::vector<T>& v, size_t n) {
      if (v.size() < n) v.assign(n, T(0));
    };
    sz(x0_, N * C);
    for (Acts& a : acts_) {
      sz(a.ln1, N * C), sz(a.ln1m, N), sz(a.ln1r, N), sz(a.qkv, N * 3 * Cl);
      sz(a.q, N * Cl), sz(a.k, N * Cl), sz(a.v, N * Cl), sz(a.o, N * Cl), sz(a.lse, N * Hl_);
      sz(a.atty, N * Cl), sz(a.proj, N * C), sz(a.x1, N * C), sz(a.ln2, N * C), sz(a.ln2m, N);
      sz(a.ln2r, N), sz(a.fc, N * Fl), sz(a.gel, N * Fl), sz(a.fp, N * C), sz(a.x2, N * C);
    }
    sz(lnf_, N * C), sz(lnfm_, N), sz(lnfr_, N), sz(logits_, N * V), sz(probs_, N * V);
    sz(dres_, N * C), sz(dln_, N * C), sz(dqkv_, N * 3 * Cl), sz(datty_, N * Cl);
    sz(dfc_, N * Fl), sz(dgel_, N * Fl), sz(dlogits_, N * V);
    sz(dq_, N * Cl), sz(dk_, N * Cl), sz(dv_, N * Cl), sz(dO_, N * Cl);
  }
  size_t tokens() const { return B_ * Tl_; }

  // Returns the SUM of the token losses of this rank (targets may be null:
  // then only the logits are computed).
  double forward(const T* P, const int32_t* tok, const int32_t* targets) {
    const size_t N = B_ * Tl_, C = s_.width, V = s_.vocab, Cl = Cl_, Fl = Fl_;
    auto p = [&](size_t t) { return P + layout_[t].offset; };
    if (tp_.size > 1) {
      // vocabulary-parallel embedding: this rank's rows of wte (zeros for
      // the other tokens), summed over the tensor-parallel ranks, then the
      // positions (the same float operations as on one rank)
      for (size_t n = 0; n < N; ++n) {
        const size_t v = static_cast<size_t>(tok[n]);
        T* o = x0_.data() + n * C;
        if (v >= v0_ && v < v0_ + Vl_) std::copy(p(0) + (v - v0_) * C, p(0) + (v - v0_ + 1) * C, o);
        else std::fill(o, o + C, T(0));
      }
      tp_.allreduce_sum(x0_.data(), N * C);
      for (size_t n = 0; n < N; ++n) {
        const T* ps = p(1) + static_cast<size_t>(pos_[n % Tl_]) * C;
        T* o = x0_.data() + n * C;
        for (size_t c = 0; c < C; ++c) o[c] += ps[c];
      }
    } else {
      embedding_forward(x0_.data(), tok, pos_.data(), B_, Tl_, p(0), p(1), C);
    }
    const T* in = x0_.data();
    for (size_t l = 0; l < s_.layers; ++l) {
      Acts& a = acts_[l];
      size_t b = 2 + 12 * l;
      layernorm_forward(a.ln1.data(), a.ln1m.data(), a.ln1r.data(), in, p(b), p(b + 1), N, C);
      // column-parallel qkv: this rank's q, k, v columns -> (N, 3 Cl)
      for (size_t part = 0; part < 3; ++part) {
        size_t col = part * Cl;  // local column of qkv.w (C, 3 Cl)
        gemm(false, false, N, Cl, C, T(1), a.ln1.data(), C, p(b + 2) + col, 3 * Cl, T(0), a.qkv.data() + part * Cl, 3 * Cl);
        add_bias(a.qkv.data() + part * Cl, 3 * Cl, p(b + 3) + col, N, Cl);
      }
      attention_forward(ring_, cfg_, a.atty.data(), a.q.data(), a.k.data(), a.v.data(), a.o.data(),
                        a.lse.data(), a.qkv.data(), B_, Tl_, Cl, Hl_);
      // row-parallel projection: partial sums, all-reduced, then the bias
      gemm(false, false, N, C, Cl, T(1), a.atty.data(), Cl, p(b + 4), C, T(0), a.proj.data(), C);
      if (tp_.size > 1) tp_.allreduce_sum(a.proj.data(), N * C);
      add_bias(a.proj.data(), C, p(b + 5), N, C);
      residual_forward(a.x1.data(), in, a.proj.data(), N * C);
      layernorm_forward(a.ln2.data(), a.ln2m.data(), a.ln2r.data(), a.x1.data(), p(b + 6), p(b + 7), N, C);
      gemm(false, false, N, Fl, C, T(1), a.ln2.data(), C, p(b + 8), Fl, T(0), a.fc.data(), Fl);
      add_bias(a.fc.data(), Fl, p(b + 9), N, Fl);
      gelu_forward(a.gel.data(), a.fc.data(), N * Fl);
      gemm(false, false, N, C, Fl, T(1), a.gel.data(), Fl, p(b + 10), C, T(0), a.fp.data(), C);
      if (tp_.size > 1) tp_.allreduce_sum(a.fp.data(), N * C);
      add_bias(a.fp.data(), C, p(b + 11), N, C);
      residual_forward(a.x2.data(), a.x1.data(), a.fp.data(), N * C);
      in = a.x2.data();
    }
    size_t f = 2 + 12 * s_.layers;
    layernorm_forward(lnf_.data(), lnfm_.data(), lnfr_.data(), in, p(f), p(f + 1), N, C);
    if (tp_.size <= 1) {
      linear_forward(logits_.data(), lnf_.data(), p(f + 2), static_cast<const T*>(nullptr), N, C, V);
      if (!targets) return 0;
      return crossentropy_forward(probs_.data(), logits_.data(), targets, N, V);
    }
    // vocabulary-parallel LM head and cross-entropy: this rank's logits
    // (N, Vl); the row maxima (MAX) and the sums of exp with the target
    // logits (SUM) over the tensor-parallel ranks
    const size_t Vl = Vl_;
    linear_forward(logits_.data(), lnf_.data(), p(f + 2), static_cast<const T*>(nullptr), N, C, Vl);
    if (!targets) return 0;
    std::vector<T> mx(N), st(2 * N);
    for (size_t n = 0; n < N; ++n) {
      const T* l = logits_.data() + n * Vl;
      T m = -std::numeric_limits<T>::max();
      for (size_t j = 0; j < Vl; ++j) m = std::max(m, l[j]);
      mx[n] = m;
    }
    tp_.allreduce_max(mx.data(), N);
    for (size_t n = 0; n < N; ++n) {
      const T* l = logits_.data() + n * Vl;
      T* pr = probs_.data() + n * Vl;
      T sum = 0;
      for (size_t j = 0; j < Vl; ++j) pr[j] = vexp(l[j] - mx[n]);
      for (size_t j = 0; j < Vl; ++j) sum += pr[j];
      const size_t tg = static_cast<size_t>(targets[n]);
      st[2 * n] = sum;
      st[2 * n + 1] = tg >= v0_ && tg < v0_ + Vl ? l[tg - v0_] : T(0);
    }
    tp_.allreduce_sum(st.data(), 2 * N);
    double total = 0;
    for (size_t n = 0; n < N; ++n) {
      const T inv = T(1) / st[2 * n];
      T* pr = probs_.data() + n * Vl;
      for (size_t j = 0; j < Vl; ++j) pr[j] *= inv;
      total += static_cast<double>(std::log(st[2 * n]) + mx[n] - st[2 * n + 1]);
    }
    return total;
  }

  // G = d(scale * sum of token losses)/dP, overwriting G (this rank's
  // local() elements), after a forward with targets.
  void backward(const T* P, T* G, const int32_t* tok, const int32_t* targets, T scale) {
    const size_t N = B_ * Tl_, C = s_.width, V = s_.vocab, Cl = Cl_, Fl = Fl_;
    auto p = [&](size_t t) { return P + layout_[t].offset; };
    auto g = [&](size_t t) { return G + layout_[t].offset; };
    auto zero = [](std::vector<T>& v, size_t n) { std::fill(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), T(0)); };
    std::fill(G, G + local_.n, T(0));
    const size_t Vh = tp_.size > 1 ? Vl_ : V;  // the logits this rank holds
    if (tp_.size > 1) {
      for (size_t n = 0; n < N; ++n) {
        const T* pr = probs_.data() + n * Vh;
        T* d = dlogits_.data() + n * Vh;
        for (size_t j = 0; j < Vh; ++j) d[j] = scale * pr[j];
        const size_t tg = static_cast<size_t>(targets[n]);
        if (tg >= v0_ && tg < v0_ + Vh) d[tg - v0_] -= scale;
      }
    } else {
      crossentropy_backward(dlogits_.data(), probs_.data(), targets, N, V, scale);
    }
    size_t f = 2 + 12 * s_.layers;
    const T* last = s_.layers ? acts_.back().x2.data() : x0_.data();
    zero(dres_, N * C);
    linear_backward(dln_.data(), g(f + 2), static_cast<T*>(nullptr), dlogits_.data(), lnf_.data(), p(f + 2), N, C, Vh, true);
    if (tp_.size > 1) tp_.allreduce_sum(dln_.data(), N * C);  // the head's input gradient, summed over the vocabulary blocks
    layernorm_backward(dres_.data(), g(f), g(f + 1), dln_.data(), last, lnfm_.data(), lnfr_.data(), p(f), N, C);
    for (size_t l = s_.layers; l-- > 0;) {
      Acts& a = acts_[l];
      size_t b = 2 + 12 * l;
      const T* in = l ? acts_[l - 1].x2.data() : x0_.data();
      // x2 = x1 + fp: the residual gradient dres flows to both unchanged.
      // row-parallel mlp.proj: dgel = dres W^T (local), dW slice, full bias
      gemm(false, true, N, Fl, C, T(1), dres_.data(), C, p(b + 10), C, T(0), dgel_.data(), Fl);
      gemm(true, false, Fl, C, N, T(1), a.gel.data(), Fl, dres_.data(), C, T(1), g(b + 10), C);
      col_sum(g(b + 11), dres_.data(), C, N, C, T(1));
      zero(dfc_, N * Fl);
      gelu_backward(dfc_.data(), dgel_.data(), a.fc.data(), N * Fl);
      // column-parallel mlp.fc: the input gradient is all-reduced
      gemm(false, true, N, C, Fl, T(1), dfc_.data(), Fl, p(b + 8), Fl, T(0), dln_.data(), C);
      if (tp_.size > 1) tp_.allreduce_sum(dln_.data(), N * C);
      gemm(true, false, C, Fl, N, T(1), a.ln2.data(), C, dfc_.data(), Fl, T(1), g(b + 8), Fl);
      col_sum(g(b + 9), dfc_.data(), Fl, N, Fl, T(1));
      layernorm_backward(dres_.data(), g(b + 6), g(b + 7), dln_.data(), a.x1.data(), a.ln2m.data(), a.ln2r.data(), p(b + 6), N, C);
      // x1 = in + proj; row-parallel attn.proj
      gemm(false, true, N, Cl, C, T(1), dres_.data(), C, p(b + 4), C, T(0), datty_.data(), Cl);
      gemm(true, false, Cl, C, N, T(1), a.atty.data(), Cl, dres_.data(), C, T(1), g(b + 4), C);
      col_sum(g(b + 5), dres_.data(), C, N, C, T(1));
      zero(dqkv_, N * 3 * Cl);
      attention_backward(ring_, cfg_, dqkv_.data(), datty_.data(), a.q.data(), a.k.data(), a.v.data(),
                         a.o.data(), a.lse.data(), dq_.data(), dk_.data(), dv_.data(), dO_.data(), B_, Tl_, Cl, Hl_);
      // column-parallel qkv
      for (size_t part = 0; part < 3; ++part) {
        size_t col = part * Cl;
        gemm(false, true, N, C, Cl, T(1), dqkv_.data() + part * Cl, 3 * Cl, p(b + 2) + col, 3 * Cl, part ? T(1) : T(0), dln_.data(), C);
        gemm(true, false, C, Cl, N, T(1), a.ln1.data(), C, dqkv_.data() + part * Cl, 3 * Cl, T(1), g(b + 2) + col, 3 * Cl);
        col_sum(g(b + 3) + col, dqkv_.data() + part * Cl, 3 * Cl, N, Cl, T(1));
      }
      if (tp_.size > 1) tp_.allreduce_sum(dln_.data(), N * C);
      layernorm_backward(dres_.data(), g(b), g(b + 1), dln_.data(), in, a.ln1m.data(), a.ln1r.data(), p(b), N, C);
    }
    if (tp_.size > 1) {  // this rank's rows of wte; wpe whole
      for (size_t n = 0; n < N; ++n) {
        const size_t v = static_cast<size_t>(tok[n]);
        const T* d = dres_.data() + n * C;
        T* ps = g(1) + static_cast<size_t>(pos_[n % Tl_]) * C;
        for (size_t c = 0; c < C; ++c) ps[c] += d[c];
        if (v >= v0_ && v < v0_ + Vl_) {
          T* e = g(0) + (v - v0_) * C;
          for (size_t c = 0; c < C; ++c) e[c] += d[c];
        }
      }
    } else {
      embedding_backward(g(0), g(1), dres_.data(), tok, pos_.data(), B_, Tl_, C);
    }
  }

  // Logits of the last forward, (B*Tl, V).
  const T* logits() const { return logits_.data(); }

 private:
  static void add_bias(T* out, size_t ldo, const T* bias, size_t N, size_t O) {
    for (size_t n = 0; n < N; ++n) {
      T* o = out + n * ldo;
      for (size_t j = 0; j < O; ++j) o[j] += bias[j];
    }
  }
  // db[j] += factor * sum_n d[n*ld + j]
  static void col_sum(T* db, const T* d, size_t ld, size_t N, size_t O, T factor) {
    for (size_t n = 0; n < N; ++n) {
      const T* dr = d + n * ld;
      for (size_t j = 0; j < O; ++j) db[j] += factor * dr[j];
    }
  }
  struct Acts {
    std::vector<T> ln1, ln1m, ln1r, qkv, q, k, v, o, lse, atty, proj, x1, ln2, ln2m, ln2r, fc, gel, fp, x2;
  };
  Shape s_;
  tsr_ring ring_;
  TensorParallel<T> tp_;
  LocalParams local_;
  size_t Cl_ = 0, Hl_ = 0, Fl_ = 0, v0_ = 0, Vl_ = 0;
  tsr_attn_config cfg_;
  std::vector<ParamTensor> layout_;
  size_t B_ = 0, Tl_ = 0;
  std::vector<int64_t> pos_;
  std::vector<T> x0_;
  std::vector<Acts> acts_;
  std::vector<T> lnf_, lnfm_, lnfr_, logits_, probs_;
  std::vector<T> dres_, dln_, dqkv_, datty_, dfc_, dgel_, dlogits_, dq_, dk_, dv_, dO_;
};

}  // namespace gpt

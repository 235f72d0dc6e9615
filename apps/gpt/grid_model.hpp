// Tensor parallelism on a tessera grid inside each replica: 2D (SUMMA on
// q x q), 2.5D (Solomonik-Demmel on q x q x c) and 3D (three-phase on
// q x q x q), the linear layers computed with tsr_gemm on the grid, the
// activations kept in the layouts the GEMMs chain (apps/gpt/README.md,
// "Layouts"). Float only (the training type).
//
// Every activation is described to tessera as its TRANSPOSE, features x
// tokens: a rank's column-major local block is then the layer kit's
// token-major (tokens_l, features_l) array. A linear layer Y = X W (W stored
// row-major (K, O) in the parameter array = W^T column-major) is
//   forward   Y^T  = W^T X^T        (A = W^T, B = X^T, C = Y^T)
//   input     dX^T = W dY^T         (A = W^T stored, op T)
//   weight    dW^T = dY^T X         (B = X^T stored, op T; 2D: dW = X^T dY by
//                                    the three-phase engine; 2.5D: after a
//                                    redistribution, see make_lin)
// The tokens of every activation are split by grid dimension i (whole
// sequences per rank); the features by j (SUMMA) or alternately by k and j
// (3D: the residual stream by k, the attention and MLP interiors by j, as
// Colossal-AI's 3D swaps its input and output groups). The attention heads
// follow the features of the QKV output: rank j holds heads [jH/q, (j+1)H/q)
// of its sequences, so attention needs no communication (QKV's output
// columns are ordered head block by head block: a permutation of the
// parameter array's columns, applied when the weights are read).
//
// Each rank holds only its block of every weight: the block of W^T the
// forward GEMM takes (Wf's layout; the blocks of the T ranks tile the
// tensor). The input gradient's GEMM takes W^T in another layout on 2D and
// 2.5D (Wb): the blocks are redistributed there each backward (a transpose
// over the grid, the weights' bytes once); the weight gradient comes out in
// dW's layout and is redistributed into Wf's (2D: dW is computed as K x O,
// so into the transposed layout of Wf, which has the same owners). 3D takes
// the same block everywhere: nothing moves. Biases, LayerNorm parameters and
// the embeddings are whole on every rank (local() puts them first); their
// gradients are partial sums (this rank's tokens and features), summed over
// the grid in one all-reduce at the end of the backward. The app's
// optimizer sees the local array (LocalParams) and completes LAMB's norms
// over the grid (tsr_optimizer_set_norm_reduction).
#pragma once

#include <array>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model.hpp"
#include "tessera/tessera.h"

namespace gpt {

enum class TpMode { ONE_D, TWO_D, TWO_P5_D, THREE_D };

struct GridError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class GridModel {
  using T = float;

 public:
  // grid: the replica's tensor-parallel grid ({q, q, 1}, {q, q, c} or
  // {q, q, q}); B sequences of the replica, pos: this rank's token positions
  // in each (sequence parallelism), seq_len the global sequence.
  GridModel(const Shape& s, tsr_ring ring, tsr_attn_layout alayout, tsr_grid grid, TpMode mode, size_t B,
            const std::vector<int64_t>& pos)
      : s_(s), ring_(ring), grid_(grid), mode_(mode), B_(B), pos_(pos), Tl_(pos.size()) {
    cfg_ = TSR_ATTN_CONFIG_INIT;
    cfg_.variant = TSR_ATTN_RING;
    cfg_.layout = alayout;
    cfg_.causal = 1;
    cfg_.type = TSR_FLOAT32;
    cfg_.seq_len = s.seq;
    int dims[3];
    ok(tsr_grid_get_dims(grid, dims), "tsr_grid_get_dims");
    q_ = dims[0];
    tp_ = dims[0] * dims[1] * dims[2];
    algo_ = mode == TpMode::THREE_D ? TSR_GEMM_3D : mode == TpMode::TWO_P5_D ? TSR_GEMM_2P5D : TSR_GEMM_2D;
    const size_t C = s.width, N = B * Tl_;
    // The residual stream's features: j (SUMMA) or k (3D); the interiors' j.
    ln_axis_ = mode == TpMode::THREE_D ? TSR_AXIS_DEPTH : TSR_AXIS_ROW;
    ce_axis_ = TSR_AXIS_ROW;
    int r = 0;
    ok(tsr_grid_axis_info(grid, ln_axis_, &r, &ln_size_), "tsr_grid_axis_info");
    ok(tsr_grid_axis_info(grid, ce_axis_, &r, &ce_size_), "tsr_grid_axis_info");
    qkv_ = make_lin(C, 3 * C, 1, N, true);
    proj_ = make_lin(C, C, 2, N, false);
    fc_ = make_lin(C, 4 * C, 1, N, false);
    fcp_ = make_lin(4 * C, C, 2, N, false);
    head_ = make_lin(C, s.vocab, 1, N, false);
    // chaining: type-1 outputs are type-2 inputs and back
    if (!same(qkv_.Y, proj_.X) || !same(proj_.Y, qkv_.X) || !same(fc_.Y, fcp_.X) || !same(fcp_.Y, fc_.X) ||
        !same(qkv_.X, fc_.X) || !same(head_.X, qkv_.X))
      throw GridError("internal: the GEMM layouts do not chain between layers");
    // the residual stream (X of qkv) and the interiors (Y of qkv)
    res_ = qkv_.xl;
    mid_ = qkv_.yl;
    if (res_.n % Tl_ || res_.t0 % Tl_ || mid_.n % Tl_ || mid_.t0 % Tl_)
      throw GridError("the tensor-parallel grid splits a sequence: the replica's batch must be a multiple of the "
                      "grid's token split");
    const size_t H = s.heads, Hl = H / static_cast<size_t>(dims[1]);
    if (H % static_cast<size_t>(dims[1]) || mid_.f != 3 * C / static_cast<size_t>(dims[1]))
      throw GridError("the tensor-parallel grid does not split the heads evenly");
    Hl_ = Hl;
    Cl_ = C / static_cast<size_t>(dims[1]);
    Bm_ = mid_.n / Tl_;
    // activations
    const size_t Nr = res_.n, Nm = mid_.n, fr = res_.f, fl = fc_.yl.f, vl = head_.yl.f;
    x0_.resize(Nr * fr);
    acts_.resize(s.layers);
    for (Acts& a : acts_) {
      a.ln1.resize(Nr * fr), a.ln1m.resize(Nr), a.ln1r.resize(Nr), a.qkv.resize(Nm * 3 * Cl_);
      a.q.resize(Nm * Cl_), a.k.resize(Nm * Cl_), a.v.resize(Nm * Cl_), a.o.resize(Nm * Cl_), a.lse.resize(Nm * Hl);
      a.atty.resize(Nm * Cl_), a.proj.resize(Nr * fr), a.x1.resize(Nr * fr), a.ln2.resize(Nr * fr), a.ln2m.resize(Nr);
      a.ln2r.resize(Nr), a.fc.resize(Nm * fl), a.gel.resize(Nm * fl), a.fp.resize(Nr * fr), a.x2.resize(Nr * fr);
    }
    lnf_.resize(Nr * fr), lnfm_.resize(Nr), lnfr_.resize(Nr), logits_.resize(Nm * vl), probs_.resize(Nm * vl);
    dres_.resize(Nr * fr), dln_.resize(Nr * fr), dqkv_.resize(Nm * 3 * Cl_), datty_.resize(Nm * Cl_);
    dfc_.resize(Nm * fl), dgel_.resize(Nm * fl), dlogits_.resize(Nm * vl);
    dq_.resize(Nm * Cl_), dk_.resize(Nm * Cl_), dv_.resize(Nm * Cl_), dO_.resize(Nm * Cl_);
    size_t wmax = 0, rmax = 0;
    for (Lin* L : {&qkv_, &proj_, &fc_, &fcp_, &head_}) {
      wmax = std::max({wmax, L->wf_idx.size(), L->wb_idx.size(), L->dw_idx.size()});
      rmax = std::max(rmax, L->redist_size);
    }
    wb_.resize(wmax), dw_.resize(wmax), ws_.resize(wmax), redist_.resize(rmax);
    // this rank's parameters: the Wf blocks of the weights, the rest whole
    std::vector<std::vector<uint32_t>> blocks(param_layout(s).size());
    for (size_t l = 0; l < s.layers; ++l) {
      const size_t b = 2 + 12 * l;
      blocks[b + 2] = qkv_.wf_idx, blocks[b + 4] = proj_.wf_idx, blocks[b + 8] = fc_.wf_idx, blocks[b + 10] = fcp_.wf_idx;
    }
    blocks[2 + 12 * s.layers + 2] = head_.wf_idx;
    local_ = make_local(s, std::move(blocks));
    layout_ = local_.t;
  }
  ~GridModel() {
    for (Lin* L : {&qkv_, &proj_, &fc_, &fcp_, &head_})
      for (tsr_matrix* m : {&L->Wf, &L->Wb, &L->X, &L->Y, &L->R, &L->dW, &L->Ws}) tsr_matrix_destroy(m);
  }
  GridModel(const GridModel&) = delete;
  GridModel& operator=(const GridModel&) = delete;
  const std::vector<ParamTensor>& layout() const { return layout_; }
  const LocalParams& local() const { return local_; }

  // Returns this rank's share of the summed token loss of the replica, times
  // T (so that the sum over all ranks / (replicas x T) is the mean loss, as
  // with 1D; tokens held by ce_size ranks count 1/ce_size each).
  double forward(const T* P, const int32_t* tok, const int32_t* targets) {
    const size_t C = s_.width, Nr = res_.n, Nm = mid_.n, fr = res_.f;
    auto p = [&](size_t t) { return P + layout_[t].offset; };
    // embedding of the residual layout's tokens and features
    for (size_t nl = 0; nl < Nr; ++nl) {
      size_t n = res_.t0 + nl;
      const T* e = p(0) + static_cast<size_t>(tok[n]) * C + res_.f0;
      const T* ps = p(1) + static_cast<size_t>(pos_[n % Tl_]) * C + res_.f0;
      T* o = x0_.data() + nl * fr;
      for (size_t f = 0; f < fr; ++f) o[f] = e[f] + ps[f];
    }
    const T* in = x0_.data();
    for (size_t l = 0; l < s_.layers; ++l) {
      Acts& a = acts_[l];
      size_t b = 2 + 12 * l;
      ln_forward(a.ln1.data(), a.ln1m.data(), a.ln1r.data(), in, p(b) + res_.f0, p(b + 1) + res_.f0, Nr, fr);
      lin_forward(qkv_, P, b + 2, b + 3, a.ln1.data(), a.qkv.data());
      attention_forward(ring_, cfg_, a.atty.data(), a.q.data(), a.k.data(), a.v.data(), a.o.data(), a.lse.data(),
                        a.qkv.data(), Bm_, Tl_, Cl_, Hl_);
      lin_forward(proj_, P, b + 4, b + 5, a.atty.data(), a.proj.data());
      residual_forward(a.x1.data(), in, a.proj.data(), Nr * fr);
      ln_forward(a.ln2.data(), a.ln2m.data(), a.ln2r.data(), a.x1.data(), p(b + 6) + res_.f0, p(b + 7) + res_.f0, Nr, fr);
      lin_forward(fc_, P, b + 8, b + 9, a.ln2.data(), a.fc.data());
      gelu_forward(a.gel.data(), a.fc.data(), Nm * fc_.yl.f);
      lin_forward(fcp_, P, b + 10, b + 11, a.gel.data(), a.fp.data());
      residual_forward(a.x2.data(), a.x1.data(), a.fp.data(), Nr * fr);
      in = a.x2.data();
    }
    size_t f = 2 + 12 * s_.layers;
    ln_forward(lnf_.data(), lnfm_.data(), lnfr_.data(), in, p(f) + res_.f0, p(f + 1) + res_.f0, Nr, fr);
    lin_forward(head_, P, f + 2, SIZE_MAX, lnf_.data(), logits_.data());
    if (!targets) return 0;
    // softmax cross-entropy over the vocabulary split on the ce axis:
    // the row maxima (MAX), then the sums of exp and the target logits (SUM)
    const size_t vl = head_.yl.f, v0 = head_.yl.f0;
    std::vector<T> mx(Nm), st(2 * Nm);
    for (size_t n = 0; n < Nm; ++n) {
      const T* lg = logits_.data() + n * vl;
      T m = -3.0e38f;
      for (size_t j = 0; j < vl; ++j) m = std::max(m, lg[j]);
      mx[n] = m;
    }
    if (ce_size_ > 1) ok(tsr_allreduce(grid_, ce_axis_, mx.data(), mx.data(), Nm, TSR_FLOAT32, TSR_MAX), "tsr_allreduce");
    for (size_t n = 0; n < Nm; ++n) {
      const T* lg = logits_.data() + n * vl;
      T* pr = probs_.data() + n * vl;
      T sum = 0;
      for (size_t j = 0; j < vl; ++j) pr[j] = vexp(lg[j] - mx[n]);
      for (size_t j = 0; j < vl; ++j) sum += pr[j];
      size_t tg = static_cast<size_t>(targets[mid_.t0 + n]);
      st[2 * n] = sum;
      st[2 * n + 1] = tg >= v0 && tg < v0 + vl ? lg[tg - v0] : T(0);
    }
    if (ce_size_ > 1) ok(tsr_allreduce(grid_, ce_axis_, st.data(), st.data(), 2 * Nm, TSR_FLOAT32, TSR_SUM), "tsr_allreduce");
    double total = 0;
    for (size_t n = 0; n < Nm; ++n) {
      T inv = T(1) / st[2 * n];
      T* pr = probs_.data() + n * vl;
      for (size_t j = 0; j < vl; ++j) pr[j] *= inv;
      total += static_cast<double>(std::log(st[2 * n]) + mx[n] - st[2 * n + 1]);
    }
    return total * static_cast<double>(tp_) / static_cast<double>(ce_size_);
  }

  // G = d(scale * sum of the replica's token losses)/dP on this rank's
  // local() elements (the whole tensors: the sum over the grid, the same on
  // every rank of it), after a forward with targets.
  void backward(const T* P, T* G, const int32_t* tok, const int32_t* targets, T scale) {
    const size_t C = s_.width, Nr = res_.n, Nm = mid_.n, fr = res_.f, vl = head_.yl.f, v0 = head_.yl.f0;
    auto p = [&](size_t t) { return P + layout_[t].offset; };
    auto g = [&](size_t t) { return G + layout_[t].offset; };
    std::fill(G, G + local_.n, T(0));
    for (size_t n = 0; n < Nm; ++n) {
      const T* pr = probs_.data() + n * vl;
      T* d = dlogits_.data() + n * vl;
      for (size_t j = 0; j < vl; ++j) d[j] = scale * pr[j];
      size_t tg = static_cast<size_t>(targets[mid_.t0 + n]);
      if (tg >= v0 && tg < v0 + vl) d[tg - v0] -= scale;
    }
    size_t f = 2 + 12 * s_.layers;
    const T* last = s_.layers ? acts_.back().x2.data() : x0_.data();
    std::fill(dres_.begin(), dres_.end(), T(0));
    lin_backward(head_, P, G, f + 2, SIZE_MAX, dlogits_.data(), lnf_.data(), dln_.data());
    ln_backward(dres_.data(), g(f) + res_.f0, g(f + 1) + res_.f0, dln_.data(), last, lnfm_.data(), lnfr_.data(),
                p(f) + res_.f0, Nr, fr);
    for (size_t l = s_.layers; l-- > 0;) {
      Acts& a = acts_[l];
      size_t b = 2 + 12 * l;
      const T* in = l ? acts_[l - 1].x2.data() : x0_.data();
      lin_backward(fcp_, P, G, b + 10, b + 11, dres_.data(), a.gel.data(), dgel_.data());
      std::fill(dfc_.begin(), dfc_.end(), T(0));
      gelu_backward(dfc_.data(), dgel_.data(), a.fc.data(), Nm * fc_.yl.f);
      lin_backward(fc_, P, G, b + 8, b + 9, dfc_.data(), a.ln2.data(), dln_.data());
      ln_backward(dres_.data(), g(b + 6) + res_.f0, g(b + 7) + res_.f0, dln_.data(), a.x1.data(), a.ln2m.data(),
                  a.ln2r.data(), p(b + 6) + res_.f0, Nr, fr);
      lin_backward(proj_, P, G, b + 4, b + 5, dres_.data(), a.atty.data(), datty_.data());
      std::fill(dqkv_.begin(), dqkv_.end(), T(0));
      attention_backward(ring_, cfg_, dqkv_.data(), datty_.data(), a.q.data(), a.k.data(), a.v.data(), a.o.data(),
                         a.lse.data(), dq_.data(), dk_.data(), dv_.data(), dO_.data(), Bm_, Tl_, Cl_, Hl_);
      lin_backward(qkv_, P, G, b + 2, b + 3, dqkv_.data(), a.ln1.data(), dln_.data());
      ln_backward(dres_.data(), g(b) + res_.f0, g(b + 1) + res_.f0, dln_.data(), in, a.ln1m.data(), a.ln1r.data(),
                  p(b) + res_.f0, Nr, fr);
    }
    for (size_t nl = 0; nl < Nr; ++nl) {
      size_t n = res_.t0 + nl;
      T* e = g(0) + static_cast<size_t>(tok[n]) * C + res_.f0;
      T* ps = g(1) + static_cast<size_t>(pos_[n % Tl_]) * C + res_.f0;
      const T* d = dres_.data() + nl * fr;
      for (size_t j = 0; j < fr; ++j) {
        e[j] += d[j];
        ps[j] += d[j];
      }
    }
    // the whole tensors' partial sums over the grid (one all-reduce)
    if (tp_ > 1 && local_.replicated)
      ok(tsr_allreduce(grid_, TSR_AXIS_ALL, G, G, local_.replicated, TSR_FLOAT32, TSR_SUM), "tsr_allreduce");
  }

  // What the README's layout section states, for the run's header line.
  std::string describe() const {
    return std::string(tsr_gemm_algo_name(algo_)) + " grid GEMM; tokens " + std::to_string(res_.n) + " of " +
           std::to_string(B_ * Tl_) + " per rank, residual features " + std::to_string(res_.f) + " of " +
           std::to_string(s_.width) + ", heads " + std::to_string(Hl_) + " of " + std::to_string(s_.heads);
  }

 private:
  // A local block of a features x tokens activation: features [f0, f0+f)
  // (contiguous), tokens [t0, t0+n).
  struct ActLayout {
    size_t f0 = 0, f = 0, t0 = 0, n = 0;
  };
  struct Lin {
    size_t K = 0, O = 0;
    bool perm = false;  // QKV: output features in head-block order
    tsr_matrix Wf = nullptr, Wb = nullptr, X = nullptr, Y = nullptr, R = nullptr, dW = nullptr;
    tsr_matrix Ws = nullptr;  // 2D: the K x O matrix with Wf's owners (dW's redistribution target)
    bool wb_moves = false;     // Wb's layout differs from Wf's: redistribute each backward
    int dw_moves = 0;          // 0: dW is in Wf's layout; 1: redistribute into Wf; 2: into Ws
    std::vector<uint32_t> dw_pos;  // element e of the (redistributed) dW -> local position in Wf's block
    int redist = 0;  // 0 none (3D), 1: X^T redistributed for dW, 2: dY^T, 3: 2D, dW by three-phase
    size_t redist_size = 0;
    ActLayout xl, yl;
    std::vector<uint32_t> wf_idx, wb_idx, dw_idx;  // local element -> index in the (K, O) tensor
    std::vector<uint32_t> ycanon;                  // local output feature -> bias index
  };
  static void ok(tsr_status st, const char* what) {
    if (st != TSR_SUCCESS)
      throw GridError(std::string(what) + ": " + tsr_status_name(st) + ": " + tsr_last_error(nullptr));
  }
  static int norm_dim(int d, const int dims[3]) { return d >= 0 && d < 3 && dims[d] > 1 ? d : TSR_DIM_NONE; }
  bool same(tsr_matrix a, tsr_matrix b) const {
    tsr_layout la, lb;
    int64_t ma, na, mb, nb;
    ok(tsr_matrix_info(a, &ma, &na, nullptr, &la, nullptr), "tsr_matrix_info");
    ok(tsr_matrix_info(b, &mb, &nb, nullptr, &lb, nullptr), "tsr_matrix_info");
    return na == nb && canon(la) == canon(lb);
  }
  std::array<int, 3> canon(tsr_layout l) const {
    int dims[3];
    tsr_grid_get_dims(grid_, dims);
    int r = norm_dim(l.row_dim, dims), c = norm_dim(l.col_dim, dims), sd = norm_dim(l.sub_dim, dims);
    if (c == TSR_DIM_NONE) c = sd, sd = TSR_DIM_NONE;
    return {r, c, sd};
  }
  std::array<tsr_layout, 3> layouts(tsr_trans ta, tsr_trans tb, int m, int n, int k) const {
    std::array<tsr_layout, 3> l;
    int roles[3] = {m, n, k};
    ok(tsr_gemm_layouts(algo_, ta, tb, roles, l.data()), "tsr_gemm_layouts");
    return l;
  }
  tsr_matrix mat(int64_t m, int64_t n, const tsr_layout& l) const {
    tsr_matrix x = nullptr;
    ok(tsr_matrix_create(grid_, m, n, TSR_FLOAT32, &l, 0, &x), "tsr_matrix_create");
    return x;
  }
  // QKV's output feature g (head-block order) -> the parameter column
  // (q | k | v, heads in order).
  size_t qkv_canon(size_t g) const {
    const size_t C = s_.width, qj = static_cast<size_t>(q_), blk = 3 * C / qj, cb = C / qj;
    size_t hb = g / blk, r = g % blk, part = r / cb, r2 = r % cb;
    return part * C + hb * cb + r2;
  }
  // Local block of a K x O weight matrix described as W^T (O x K): the index
  // of each local element (column-major) in the row-major (K, O) tensor.
  std::vector<uint32_t> weight_index(tsr_matrix W, const Lin& L, bool kxo = false) const {
    int64_t r = 0, c = 0, ld = 0;
    ok(tsr_matrix_local_size(W, &r, &c, &ld), "tsr_matrix_local_size");
    std::vector<uint32_t> idx(static_cast<size_t>(r * c));
    std::vector<int64_t> gr(static_cast<size_t>(r)), gc(static_cast<size_t>(c));
    int64_t t = 0;
    for (int64_t i = 0; i < r; ++i) ok(tsr_matrix_global_index(W, i, 0, &gr[static_cast<size_t>(i)], &t), "global_index");
    for (int64_t j = 0; j < c; ++j) ok(tsr_matrix_global_index(W, 0, j, &t, &gc[static_cast<size_t>(j)]), "global_index");
    for (int64_t j = 0; j < c; ++j)
      for (int64_t i = 0; i < r; ++i) {
        size_t o = static_cast<size_t>(kxo ? gc[static_cast<size_t>(j)] : gr[static_cast<size_t>(i)]);
        size_t kk = static_cast<size_t>(kxo ? gr[static_cast<size_t>(i)] : gc[static_cast<size_t>(j)]);
        if (L.perm) o = qkv_canon(o);
        idx[static_cast<size_t>(i + j * r)] = static_cast<uint32_t>(kk * L.O + o);
      }
    return idx;
  }
  ActLayout act_layout(tsr_matrix A) const {
    int64_t r = 0, c = 0, ld = 0, gr = 0, gc = 0, gr2 = 0, gc2 = 0;
    ok(tsr_matrix_local_size(A, &r, &c, &ld), "tsr_matrix_local_size");
    ActLayout a;
    if (r < 1 || c < 1 || ld != r) throw GridError("a rank of the tensor-parallel grid holds no tokens or no features");
    ok(tsr_matrix_global_index(A, 0, 0, &gr, &gc), "global_index");
    ok(tsr_matrix_global_index(A, r - 1, c - 1, &gr2, &gc2), "global_index");
    if (gr2 - gr != r - 1 || gc2 - gc != c - 1) throw GridError("internal: an activation block is not contiguous");
    a.f0 = static_cast<size_t>(gr), a.f = static_cast<size_t>(r), a.t0 = static_cast<size_t>(gc), a.n = static_cast<size_t>(c);
    return a;
  }
  // The descriptors of one kind of linear layer; type 1 (QKV, MLP fc, head)
  // or type 2 (attention and MLP projections): 3D swaps the roles of j and k.
  Lin make_lin(size_t K, size_t O, int type, size_t N, bool perm) {
    Lin L;
    L.K = K, L.O = O, L.perm = perm;
    const int64_t k = static_cast<int64_t>(K), o = static_cast<int64_t>(O), n = static_cast<int64_t>(N);
    if (mode_ == TpMode::THREE_D) {
      int a = type == 1 ? TSR_DIM_J : TSR_DIM_K, c = type == 1 ? TSR_DIM_K : TSR_DIM_J;
      auto fw = layouts(TSR_NOTRANS, TSR_NOTRANS, a, TSR_DIM_I, c);
      auto dx = layouts(TSR_TRANS, TSR_NOTRANS, c, TSR_DIM_I, a);
      auto dw = layouts(TSR_NOTRANS, TSR_TRANS, a, c, TSR_DIM_I);
      L.Wf = mat(o, k, fw[0]), L.X = mat(k, n, fw[1]), L.Y = mat(o, n, fw[2]);
      L.Wb = mat(o, k, dx[0]);
      tsr_matrix dY = mat(o, n, dx[1]), dX = mat(k, n, dx[2]), dY2 = mat(o, n, dw[0]), X2 = mat(k, n, dw[1]);
      bool chain = same(dY, L.Y) && same(dX, L.X) && same(dY2, L.Y) && same(X2, L.X);
      for (tsr_matrix* m : {&dY, &dX, &dY2, &X2}) tsr_matrix_destroy(m);
      if (!chain) throw GridError("internal: the 3D backward layouts differ from the forward ones");
      L.dW = mat(o, k, dw[2]);
    } else if (mode_ == TpMode::TWO_D) {
      // SUMMA forward and input gradient; the weight gradient dW = X^T dY
      // (K x O) by the three-phase engine on the same q x q grid, with the
      // operands as they are: all-gather of dY^T along j, local GEMM,
      // reduce-scatter of dW along i (the tokens): Optimus's volume, no
      // redistribution.
      const int J = TSR_DIM_J, I = TSR_DIM_I, D = TSR_DIM_K;
      auto fw = layouts(TSR_NOTRANS, TSR_NOTRANS, J, I, D);
      auto dx = layouts(TSR_TRANS, TSR_NOTRANS, J, I, D);
      L.Wf = mat(o, k, fw[0]), L.X = mat(k, n, fw[1]), L.Y = mat(o, n, fw[2]);
      L.Wb = mat(o, k, dx[0]);
      tsr_matrix dY = mat(o, n, dx[1]), dX = mat(k, n, dx[2]);
      bool chain = same(dY, L.Y) && same(dX, L.X);
      for (tsr_matrix* m : {&dY, &dX}) tsr_matrix_destroy(m);
      if (!chain) throw GridError("internal: the SUMMA backward layouts differ from the forward ones");
      L.redist = 3;
      tsr_layout dwl = TSR_LAYOUT(TSR_DIM_J, TSR_DIM_I, TSR_DIM_NONE);
      L.dW = mat(k, o, dwl);
    } else {
      const int J = TSR_DIM_J, I = TSR_DIM_I, D = TSR_DIM_K;
      auto fw = layouts(TSR_NOTRANS, TSR_NOTRANS, J, I, D);
      auto dx = layouts(TSR_TRANS, TSR_NOTRANS, J, I, D);
      L.Wf = mat(o, k, fw[0]), L.X = mat(k, n, fw[1]), L.Y = mat(o, n, fw[2]);
      L.Wb = mat(o, k, dx[0]);
      // 2.5D. dW^T = dY^T X: SUMMA takes A's rows and B's op-T columns on
      // the same grid dimension, which the tokens of dY^T and X^T are not,
      // and the three-phase engine takes no k split over two dimensions (i
      // and k here): redistribute the smaller of the two to the transposed
      // grid layout.
      L.redist = K <= O ? 1 : 2;
      auto dw = L.redist == 1 ? layouts(TSR_NOTRANS, TSR_TRANS, J, I, D) : layouts(TSR_NOTRANS, TSR_TRANS, I, J, D);
      L.R = L.redist == 1 ? mat(k, n, dw[1]) : mat(o, n, dw[0]);
      L.dW = mat(o, k, dw[2]);
      tsr_matrix dY = mat(o, n, dx[1]), dX = mat(k, n, dx[2]);
      tsr_matrix other = L.redist == 1 ? mat(o, n, dw[0]) : mat(k, n, dw[1]);
      bool chain = same(dY, L.Y) && same(dX, L.X) && same(other, L.redist == 1 ? L.Y : L.X);
      for (tsr_matrix* m : {&dY, &dX, &other}) tsr_matrix_destroy(m);
      if (!chain) throw GridError("internal: the SUMMA backward layouts differ from the forward ones");
      int64_t r = 0, c = 0, ld = 0;
      ok(tsr_matrix_local_size(L.R, &r, &c, &ld), "tsr_matrix_local_size");
      L.redist_size = static_cast<size_t>(ld * std::max<int64_t>(c, 1));
    }
    L.wf_idx = weight_index(L.Wf, L);
    L.wb_idx = weight_index(L.Wb, L);
    L.dw_idx = weight_index(L.dW, L, L.redist == 3);
    L.wb_moves = !same(L.Wf, L.Wb);
    std::vector<uint32_t> after = L.dw_idx;
    if (L.redist == 3) {
      std::array<int, 3> cf = canon(layouts(TSR_NOTRANS, TSR_NOTRANS, TSR_DIM_J, TSR_DIM_I, TSR_DIM_K)[0]);
      if (cf[2] != TSR_DIM_NONE) throw GridError("internal: the 2D weight layout has a sub-dimension");
      tsr_layout tl = TSR_LAYOUT(cf[1], cf[0], TSR_DIM_NONE);
      L.Ws = mat(k, o, tl);
      L.dw_moves = 2;
      after = weight_index(L.Ws, L, true);
    } else if (!same(L.dW, L.Wf)) {
      L.dw_moves = 1;
      after = L.wf_idx;
    }
    {  // positions in the Wf block; the owners must be the same
      std::vector<int64_t> at(K * O, -1);
      for (size_t e = 0; e < L.wf_idx.size(); ++e) at[L.wf_idx[e]] = static_cast<int64_t>(e);
      if (after.size() != L.wf_idx.size()) throw GridError("internal: the weight gradient's block is not the weight's");
      L.dw_pos.resize(after.size());
      for (size_t e = 0; e < after.size(); ++e) {
        if (at[after[e]] < 0) throw GridError("internal: the weight gradient's block is not the weight's");
        L.dw_pos[e] = static_cast<uint32_t>(at[after[e]]);
        at[after[e]] = -1;
      }
    }
    L.xl = act_layout(L.X);
    L.yl = act_layout(L.Y);
    L.ycanon.resize(L.yl.f);
    for (size_t i = 0; i < L.yl.f; ++i) L.ycanon[i] = static_cast<uint32_t>(perm ? qkv_canon(L.yl.f0 + i) : L.yl.f0 + i);
    return L;
  }
  void lin_forward(const Lin& L, const T* P, size_t w, size_t bias, const T* x, T* y) {
    ok(tsr_gemm(algo_, TSR_NOTRANS, TSR_NOTRANS, 1.0, L.Wf, P + layout_[w].offset, L.X, x, 0.0, L.Y, y),
       "tsr_gemm (forward)");
    if (bias == SIZE_MAX) return;
    const T* bb = P + layout_[bias].offset;
    for (size_t n = 0; n < L.yl.n; ++n) {
      T* yr = y + n * L.yl.f;
      for (size_t j = 0; j < L.yl.f; ++j) yr[j] += bb[L.ycanon[j]];
    }
  }
  // dx = dy W^T (overwritten); G's block of W += the gradient, the bias
  // (whole) += this rank's partial sum.
  void lin_backward(const Lin& L, const T* P, T* G, size_t w, size_t bias, const T* dy, const T* x, T* dx) {
    const T* wb = P + layout_[w].offset;
    if (L.wb_moves) {
      ok(tsr_matrix_redistribute(L.Wf, wb, L.Wb, wb_.data()), "tsr_matrix_redistribute (weights)");
      wb = wb_.data();
    }
    ok(tsr_gemm(algo_, TSR_TRANS, TSR_NOTRANS, 1.0, L.Wb, wb, L.Y, dy, 0.0, L.X, dx), "tsr_gemm (input gradient)");
    if (L.redist == 1) {
      ok(tsr_matrix_redistribute(L.X, x, L.R, redist_.data()), "tsr_matrix_redistribute");
      ok(tsr_gemm(algo_, TSR_NOTRANS, TSR_TRANS, 1.0, L.Y, dy, L.R, redist_.data(), 0.0, L.dW, dw_.data()), "tsr_gemm (weight gradient)");
    } else if (L.redist == 2) {
      ok(tsr_matrix_redistribute(L.Y, dy, L.R, redist_.data()), "tsr_matrix_redistribute");
      ok(tsr_gemm(algo_, TSR_NOTRANS, TSR_TRANS, 1.0, L.R, redist_.data(), L.X, x, 0.0, L.dW, dw_.data()), "tsr_gemm (weight gradient)");
    } else if (L.redist == 3) {
      ok(tsr_gemm(TSR_GEMM_3D, TSR_NOTRANS, TSR_TRANS, 1.0, L.X, x, L.Y, dy, 0.0, L.dW, dw_.data()), "tsr_gemm (weight gradient)");
    } else {
      ok(tsr_gemm(algo_, TSR_NOTRANS, TSR_TRANS, 1.0, L.Y, dy, L.X, x, 0.0, L.dW, dw_.data()), "tsr_gemm (weight gradient)");
    }
    const T* d = dw_.data();
    if (L.dw_moves) {
      ok(tsr_matrix_redistribute(L.dW, dw_.data(), L.dw_moves == 2 ? L.Ws : L.Wf, ws_.data()),
         "tsr_matrix_redistribute (weight gradient)");
      d = ws_.data();
    }
    T* gw = G + layout_[w].offset;
    for (size_t e = 0; e < L.dw_pos.size(); ++e) gw[L.dw_pos[e]] += d[e];
    if (bias == SIZE_MAX) return;
    T* gb = G + layout_[bias].offset;
    for (size_t n = 0; n < L.yl.n; ++n) {
      const T* d = dy + n * L.yl.f;
      for (size_t j = 0; j < L.yl.f; ++j) gb[L.ycanon[j]] += d[j];
    }
  }
  // LayerNorm over features split on ln_axis_: the sums of x and x^2 per
  // token (double) all-reduced on the axis; g, b: this rank's feature slice.
  void ln_forward(T* out, T* mean, T* rstd, const T* x, const T* g, const T* b, size_t N, size_t fl) {
    std::vector<double> s(2 * N);
    for (size_t n = 0; n < N; ++n) {
      const T* xr = x + n * fl;
      double a = 0, a2 = 0;
      for (size_t c = 0; c < fl; ++c) a += xr[c], a2 += static_cast<double>(xr[c]) * xr[c];
      s[2 * n] = a, s[2 * n + 1] = a2;
    }
    if (ln_size_ > 1) ok(tsr_allreduce(grid_, ln_axis_, s.data(), s.data(), 2 * N, TSR_FLOAT64, TSR_SUM), "tsr_allreduce");
    const double C = static_cast<double>(s_.width);
    for (size_t n = 0; n < N; ++n) {
      double m = s[2 * n] / C, v = std::max(0.0, s[2 * n + 1] / C - m * m);
      T mf = static_cast<T>(m), r = static_cast<T>(1.0 / std::sqrt(v + kLnEps));
      const T* xr = x + n * fl;
      T* o = out + n * fl;
      for (size_t c = 0; c < fl; ++c) o[c] = (xr[c] - mf) * r * g[c] + b[c];
      mean[n] = mf, rstd[n] = r;
    }
  }
  // dx += LayerNorm backward; dg, db (this rank's slices of G) += T x partial.
  void ln_backward(T* dx, T* dg, T* db, const T* dout, const T* x, const T* mean, const T* rstd, const T* g, size_t N,
                   size_t fl) {
    std::vector<double> s(2 * N);
    for (size_t n = 0; n < N; ++n) {
      const T* xr = x + n * fl;
      const T* d = dout + n * fl;
      T m = mean[n], r = rstd[n];
      double s1 = 0, s2 = 0;
      for (size_t c = 0; c < fl; ++c) {
        T norm = (xr[c] - m) * r;
        T dn = d[c] * g[c];
        s1 += dn, s2 += dn * norm;
        dg[c] += d[c] * norm;
        db[c] += d[c];
      }
      s[2 * n] = s1, s[2 * n + 1] = s2;
    }
    if (ln_size_ > 1) ok(tsr_allreduce(grid_, ln_axis_, s.data(), s.data(), 2 * N, TSR_FLOAT64, TSR_SUM), "tsr_allreduce");
    const double C = static_cast<double>(s_.width);
    for (size_t n = 0; n < N; ++n) {
      const T* xr = x + n * fl;
      const T* d = dout + n * fl;
      T m = mean[n], r = rstd[n], s1 = static_cast<T>(s[2 * n] / C), s2 = static_cast<T>(s[2 * n + 1] / C);
      T* dxr = dx + n * fl;
      for (size_t c = 0; c < fl; ++c) {
        T norm = (xr[c] - m) * r;
        dxr[c] += r * (d[c] * g[c] - s1 - norm * s2);
      }
    }
  }

  struct Acts {
    std::vector<T> ln1, ln1m, ln1r, qkv, q, k, v, o, lse, atty, proj, x1, ln2, ln2m, ln2r, fc, gel, fp, x2;
  };
  Shape s_;
  tsr_ring ring_;
  tsr_grid grid_;
  TpMode mode_;
  size_t B_;
  std::vector<int64_t> pos_;
  size_t Tl_;
  tsr_attn_config cfg_;
  std::vector<ParamTensor> layout_;
  LocalParams local_;
  int q_ = 1, tp_ = 1;
  tsr_gemm_algo algo_ = TSR_GEMM_2D;
  tsr_grid_axis ln_axis_ = TSR_AXIS_ROW, ce_axis_ = TSR_AXIS_ROW;
  int ln_size_ = 1, ce_size_ = 1;
  Lin qkv_, proj_, fc_, fcp_, head_;
  ActLayout res_, mid_;
  size_t Hl_ = 0, Cl_ = 0, Bm_ = 0;
  std::vector<T> x0_;
  std::vector<Acts> acts_;
  std::vector<T> lnf_, lnfm_, lnfr_, logits_, probs_;
  std::vector<T> dres_, dln_, dqkv_, datty_, dfc_, dgel_, dlogits_, dq_, dk_, dv_, dO_;
  std::vector<T> wb_, dw_, ws_, redist_;
};

}  // namespace gpt

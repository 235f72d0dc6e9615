// Ring exchange and ring attention on p ranks (run at p = 1..8): every
// variant (ring, two-pass ring self-attention, all-to-all), every layout
// (contiguous, zigzag, striped), causal and not, uneven sequence lengths
// (N not divisible by p or 2p, N < p), GQA/MQA, key padding masks with
// fully masked rows and blocks, extreme logits; forward (out, lse) and
// backward (dq, dk, dv) against the float64 full-attention reference of
// tests/common/attn_reference.hpp; finite differences; the exact bytes and
// messages of every variant; the workspace high-water mark against the
// documented formula; every error path on every rank without a hang.
//
// Tolerances (elementwise |x - ref| <= atol + rtol*|ref|):
//   float64 inputs: atol = rtol = 1e-10 (extreme logits, |s| ~ 1e3: 1e-9);
//   float32 inputs (fp32 accumulation): atol = rtol = 2e-4 for out, dq, dk,
//   dv (2e-5 relative for lse). The reference is fed the float32-rounded
//   inputs, so only the algorithm's rounding is measured.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_impl.hpp"
#include "attn_reference.hpp"
#include "ring.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"
#include "transport.hpp"
#include "tsr_test.hpp"

namespace {

using tsr_test::AttnFull;
using tsr_test::AttnRef;
using tsr_test::AttnShape;
using tsr_test::world_rank;
using tsr_test::world_size;

const tsr_attn_layout kLayouts[] = {TSR_ATTN_LAYOUT_CONTIGUOUS, TSR_ATTN_LAYOUT_ZIGZAG, TSR_ATTN_LAYOUT_STRIPED};
const char* lname(tsr_attn_layout l) {
  return l == TSR_ATTN_LAYOUT_CONTIGUOUS ? "contiguous" : l == TSR_ATTN_LAYOUT_ZIGZAG ? "zigzag" : "striped";
}
const char* vname(tsr_attn_variant v) {
  return v == TSR_ATTN_RING ? "ring" : v == TSR_ATTN_RING_TWO_PASS ? "two-pass" : "all-to-all";
}

// A context with simulated nodes of 2 ranks and a ring over all of it.
struct RingEnv {
  tsr_test::Ctx ctx{2};
  tsr_ring ring = nullptr;
  RingEnv() { EXPECT_EQ(tsr_ring_create_comm(ctx, MPI_COMM_WORLD, &ring), TSR_SUCCESS) << tsr_last_error(ctx); }
  ~RingEnv() { EXPECT_EQ(tsr_ring_destroy(&ring), TSR_SUCCESS); }
};

// ------------------------------------------------------------------ cases
enum MaskKind { kNoMask = 0, kRandomMask, kBatchMasked, kRankMasked };

struct Case {
  tsr_attn_variant variant = TSR_ATTN_RING;
  tsr_attn_layout layout = TSR_ATTN_LAYOUT_CONTIGUOUS;
  bool causal = false;
  size_t N = 7, B = 2, H = 4, G = 2, d = 5;
  MaskKind mask = kNoMask;
  tsr_dtype type = TSR_FLOAT64;
  double scale = 0;     // 0: 1/sqrt(d)
  double boost = 1;     // multiplies q: logits up to ~boost
  uint64_t seed = 1;
  std::string str() const {
    return std::string(vname(variant)) + "/" + lname(layout) + (causal ? "/causal" : "") + " N=" + std::to_string(N) +
           " B=" + std::to_string(B) + " H=" + std::to_string(H) + " G=" + std::to_string(G) +
           " d=" + std::to_string(d) + " mask=" + std::to_string(mask) + (type == TSR_FLOAT32 ? " fp32" : " fp64") +
           (boost != 1 ? " boost=" + std::to_string(boost) : "");
  }
};

AttnShape shape_of(const Case& c) {
  AttnShape s;
  s.B = c.B, s.H = c.H, s.G = c.G, s.N = c.N, s.d = c.d, s.causal = c.causal;
  s.scale = c.scale == 0 ? 1.0 / std::sqrt(static_cast<double>(c.d)) : c.scale;
  return s;
}

// Values exactly representable in the case's type.
double round_to(tsr_dtype t, double x) { return t == TSR_FLOAT32 ? static_cast<double>(static_cast<float>(x)) : x; }

AttnFull make_full(const Case& c) {
  AttnFull f;
  const size_t nq = c.B * c.H * c.N * c.d, nk = c.B * c.G * c.N * c.d;
  f.q.resize(nq), f.dout.resize(nq), f.k.resize(nk), f.v.resize(nk);
  for (size_t i = 0; i < nq; ++i) {
    f.q[i] = round_to(c.type, c.boost * tsr_test::uniform(c.seed, i));
    f.dout[i] = round_to(c.type, tsr_test::uniform(c.seed + 3, i));
  }
  for (size_t i = 0; i < nk; ++i) {
    f.k[i] = round_to(c.type, tsr_test::uniform(c.seed + 1, i));
    f.v[i] = round_to(c.type, tsr_test::uniform(c.seed + 2, i));
  }
  if (c.mask != kNoMask) {
    f.mask.assign(c.B * c.N, 1);
    const int p = world_size();
    for (size_t b = 0; b < c.B; ++b)
      for (size_t t = 0; t < c.N; ++t) {
        uint8_t keep = 1;
        if (c.mask == kRandomMask) keep = tsr_test::uniform(c.seed + 4, b * c.N + t) > -0.5 ? 1 : 0;
        if (c.mask == kBatchMasked) keep = b == 1 ? 0 : (t % 3 != 1);  // batch 1: every row fully masked
        if (c.mask == kRankMasked) {  // the keys held by ring rank 0 are all padding
          std::vector<int64_t> pos(c.N);
          size_t n0 = 0;
          tsr_attn_shard_len(c.layout, c.N, p, 0, &n0);
          tsr_attn_positions(c.layout, c.N, p, 0, pos.data());
          keep = 1;
          for (size_t i = 0; i < n0; ++i)
            if (static_cast<size_t>(pos[i]) == t) keep = 0;
        }
        f.mask[b * c.N + t] = keep;
      }
  }
  return f;
}

// The rank's shard of a full double tensor (outer, N, row), converted to T.
template <class T>
std::vector<T> shard(const Case& c, const std::vector<double>& full, size_t outer, size_t row) {
  const int p = world_size(), r = world_rank();
  size_t n = 0;
  EXPECT_EQ(tsr_attn_shard_len(c.layout, c.N, p, r, &n), TSR_SUCCESS);
  std::vector<double> loc(outer * n * row);
  EXPECT_EQ(tsr_attn_shard_extract(c.layout, c.N, p, r, full.data(), loc.data(), outer, row * sizeof(double)),
            TSR_SUCCESS);
  return std::vector<T>(loc.begin(), loc.end());
}
std::vector<uint8_t> shard_mask(const Case& c, const std::vector<uint8_t>& full) {
  const int p = world_size(), r = world_rank();
  size_t n = 0;
  EXPECT_EQ(tsr_attn_shard_len(c.layout, c.N, p, r, &n), TSR_SUCCESS);
  std::vector<uint8_t> loc(c.B * n);
  if (!full.empty()) {
    EXPECT_EQ(tsr_attn_shard_extract(c.layout, c.N, p, r, full.data(), loc.data(), c.B, 1), TSR_SUCCESS);
  }
  return loc;
}

struct Tol {
  double atol, rtol, lse_rtol;
};
Tol tol_of(const Case& c) {
  if (c.type == TSR_FLOAT32) return {2e-4, 2e-4, 2e-5};
  return c.boost > 10 ? Tol{1e-9, 1e-9, 1e-12} : Tol{1e-10, 1e-10, 1e-12};
}

// Every element within tolerance, no NaN; -inf exactly where the reference has it.
template <class T>
::testing::AssertionResult close(const char* what, const std::vector<T>& got, const std::vector<double>& want,
                                 double atol, double rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << want.size();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = want[i];
    if (std::isnan(g)) return ::testing::AssertionFailure() << what << "[" << i << "] is NaN";
    if (std::isinf(w) || std::isinf(g)) {
      if (g != w) return ::testing::AssertionFailure() << what << "[" << i << "] = " << g << ", want " << w;
      continue;
    }
    const double excess = std::fabs(g - w) - (atol + rtol * std::fabs(w));
    if (excess > worst) worst = excess, at = i;
  }
  if (worst > 0)
    return ::testing::AssertionFailure() << what << "[" << at << "] = " << static_cast<double>(got[at]) << ", want "
                                         << want[at] << " (tolerance exceeded by " << worst << ")";
  return ::testing::AssertionSuccess();
}

template <class T>
tsr_dtype type_of() {
  return sizeof(T) == 8 ? TSR_FLOAT64 : TSR_FLOAT32;
}

// Local tensors of one rank for a case.
template <class T>
struct Local {
  size_t n = 0;
  std::vector<T> q, k, v, dout, o, lse, dq, dk, dv;
  std::vector<uint8_t> mask;
  tsr_attn_tensor tq{}, tk{}, tv{}, tdo{}, to{}, tl{}, tdq{}, tdk{}, tdv{}, tm{};
  tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;

  Local(const Case& c, const AttnFull& f) {
    const int p = world_size(), r = world_rank();
    tsr_attn_shard_len(c.layout, c.N, p, r, &n);
    q = shard<T>(c, f.q, c.B * c.H, c.d);
    k = shard<T>(c, f.k, c.B * c.G, c.d);
    v = shard<T>(c, f.v, c.B * c.G, c.d);
    dout = shard<T>(c, f.dout, c.B * c.H, c.d);
    mask = shard_mask(c, f.mask);
    o.assign(c.B * c.H * n * c.d, T(7));  // garbage that must be overwritten
    lse.assign(c.B * c.H * n, T(7));
    dq.assign(q.size(), T(7));
    dk.assign(k.size(), T(7));
    dv.assign(v.size(), T(7));
    tq = {q.data(), c.B, c.H, n, c.d};
    tk = {k.data(), c.B, c.G, n, c.d};
    tv = {v.data(), c.B, c.G, n, c.d};
    tdo = {dout.data(), c.B, c.H, n, c.d};
    to = {o.data(), c.B, c.H, n, c.d};
    tl = {lse.data(), c.B, c.H, n, 1};
    tdq = {dq.data(), c.B, c.H, n, c.d};
    tdk = {dk.data(), c.B, c.G, n, c.d};
    tdv = {dv.data(), c.B, c.G, n, c.d};
    tm = {mask.data(), c.B, 1, n, 1};
    cfg.variant = c.variant;
    cfg.layout = c.layout;
    cfg.causal = c.causal;
    cfg.seq_len = c.N;
    cfg.scale = c.scale;
    cfg.type = type_of<T>();
  }
  const tsr_attn_tensor* m(const Case& c) const { return c.mask == kNoMask ? nullptr : &tm; }
  tsr_status forward(tsr_ring ring, const Case& c) { return tsr_attn_forward(ring, &cfg, &tq, &tk, &tv, m(c), &to, &tl); }
  tsr_status backward(tsr_ring ring, const Case& c) {
    return tsr_attn_backward(ring, &cfg, &tq, &tk, &tv, m(c), &to, &tl, &tdo, &tdq, &tdk, &tdv);
  }
};

// Runs forward and backward of a case and compares with the reference.
template <class T>
void check_case(tsr_ring ring, const Case& c, const AttnFull& f, const AttnRef& ref) {
  SCOPED_TRACE(c.str());
  Local<T> L(c, f);
  ASSERT_EQ(L.forward(ring, c), TSR_SUCCESS) << tsr_last_error(nullptr);
  const Tol t = tol_of(c);
  EXPECT_TRUE(close("out", L.o, shard<double>(c, ref.o, c.B * c.H, c.d), t.atol, t.rtol));
  EXPECT_TRUE(close("lse", L.lse, shard<double>(c, ref.lse, c.B * c.H, 1), t.atol, t.lse_rtol));
  ASSERT_EQ(L.backward(ring, c), TSR_SUCCESS) << tsr_last_error(nullptr);
  EXPECT_TRUE(close("dq", L.dq, shard<double>(c, ref.dq, c.B * c.H, c.d), t.atol, t.rtol));
  EXPECT_TRUE(close("dk", L.dk, shard<double>(c, ref.dk, c.B * c.G, c.d), t.atol, t.rtol));
  EXPECT_TRUE(close("dv", L.dv, shard<double>(c, ref.dv, c.B * c.G, c.d), t.atol, t.rtol));
}

void run_case(tsr_ring ring, const Case& c) {
  AttnFull f = make_full(c);
  const AttnRef ref = tsr_test::attention_reference(shape_of(c), f);
  if (c.type == TSR_FLOAT32)
    check_case<float>(ring, c, f, ref);
  else
    check_case<double>(ring, c, f, ref);
}

// Sequence lengths for p ranks: uneven for p and 2p, fewer than p, and one
// long enough for several 64 x 128 tiles per rank and step.
std::vector<size_t> lengths(int p) {
  const size_t P = static_cast<size_t>(p);
  return {4 * P + 3, P > 1 ? P - 1 : 1};
}

// ------------------------------------------------------------- vs reference
TEST(RingAttention, EveryVariantLayoutAndMaskAgainstReference) {
  RingEnv env;
  const int p = world_size();
  const size_t P = static_cast<size_t>(p);
  int i = 0;
  for (tsr_attn_variant var : {TSR_ATTN_RING, TSR_ATTN_RING_TWO_PASS, TSR_ATTN_ALLTOALL})
    for (tsr_attn_layout lay : kLayouts)
      for (bool causal : {false, true})
        for (size_t N : lengths(p)) {
          Case c;
          c.variant = var, c.layout = lay, c.causal = causal, c.N = N;
          c.seed = static_cast<uint64_t>(++i);
          c.mask = i % 3 == 0 ? kRandomMask : kNoMask;
          if (var == TSR_ATTN_ALLTOALL) {  // heads scattered: p divides H and G
            c.H = 2 * P;
            c.G = P;
          }
          run_case(env.ring, c);
        }
}

TEST(RingAttention, HeadLayouts) {  // MHA, GQA, MQA, odd head counts
  RingEnv env;
  const int p = world_size();
  struct {
    size_t H, G;
  } heads[] = {{3, 3}, {6, 2}, {5, 1}};
  int i = 100;
  for (auto hg : heads)
    for (tsr_attn_variant var : {TSR_ATTN_RING, TSR_ATTN_RING_TWO_PASS}) {
      Case c;
      c.variant = var, c.layout = TSR_ATTN_LAYOUT_ZIGZAG, c.causal = true, c.N = 2 * static_cast<size_t>(p) + 1;
      c.H = hg.H, c.G = hg.G, c.B = 1, c.seed = static_cast<uint64_t>(++i);
      run_case(env.ring, c);
    }
}

TEST(RingAttention, Float32) {
  RingEnv env;
  const int p = world_size();
  int i = 200;
  for (tsr_attn_layout lay : kLayouts)
    for (bool causal : {false, true}) {
      Case c;
      c.type = TSR_FLOAT32, c.layout = lay, c.causal = causal, c.N = 3 * static_cast<size_t>(p) + 2;
      c.mask = causal ? kRandomMask : kNoMask, c.seed = static_cast<uint64_t>(++i);
      run_case(env.ring, c);
    }
}

// Several tiles per rank and step: the tiling, the causal tile skipping
// inside zigzag segments and the partial tiles on the diagonal.
TEST(RingAttention, ManyTiles) {
  RingEnv env;
  const size_t P = static_cast<size_t>(world_size());
  int i = 300;
  for (tsr_attn_layout lay : kLayouts) {
    Case c;
    c.layout = lay, c.causal = true, c.N = 150 * P + 7, c.B = 1, c.H = 2, c.G = 1, c.d = 4;
    c.mask = lay == TSR_ATTN_LAYOUT_STRIPED ? kRandomMask : kNoMask, c.seed = static_cast<uint64_t>(++i);
    run_case(env.ring, c);
  }
}

// Logits of magnitude ~1e3 (LSE gaps between blocks far beyond 88), fully
// masked rows (a batch with every key masked), a rank whose keys are all
// masked (fully masked blocks on every step), a zero-length sequence.
TEST(RingAttention, ExtremeLogitsAndFullyMasked) {
  RingEnv env;
  const int p = world_size();
  const size_t P = static_cast<size_t>(p);
  int i = 400;
  for (tsr_attn_variant var : {TSR_ATTN_RING, TSR_ATTN_RING_TWO_PASS, TSR_ATTN_ALLTOALL}) {
    for (tsr_dtype type : {TSR_FLOAT64, TSR_FLOAT32}) {
      Case c;
      c.variant = var, c.type = type, c.layout = TSR_ATTN_LAYOUT_ZIGZAG, c.causal = true, c.N = 3 * P + 1;
      c.boost = 700, c.seed = static_cast<uint64_t>(++i);
      if (var == TSR_ATTN_ALLTOALL) c.H = P, c.G = P;
      if (type == TSR_FLOAT32) c.boost = 150;  // |s| ~ 1e2..1e3 in fp32
      run_case(env.ring, c);
    }
    for (MaskKind mk : {kBatchMasked, kRankMasked}) {
      const bool causal = mk == kRankMasked;
      {
        Case c;
        c.variant = var, c.mask = mk, c.causal = causal, c.layout = TSR_ATTN_LAYOUT_STRIPED, c.N = 2 * P + 3;
        c.seed = static_cast<uint64_t>(++i);
        if (var == TSR_ATTN_ALLTOALL) c.H = P, c.G = P;
        run_case(env.ring, c);
      }
    }
    Case z;
    z.variant = var, z.N = 0, z.causal = true;
    if (var == TSR_ATTN_ALLTOALL) z.H = P, z.G = P;
    run_case(env.ring, z);
  }
}

// The tolerance above is tight enough to see a 0.1% error of the scale.
TEST(RingAttention, ToleranceCatchesSmallErrors) {
  RingEnv env;
  Case c;
  c.causal = true, c.layout = TSR_ATTN_LAYOUT_ZIGZAG, c.N = 3 * static_cast<size_t>(world_size()) + 2;
  AttnFull f = make_full(c);
  AttnShape wrong = shape_of(c);
  wrong.scale *= 1.001;
  const AttnRef bad = tsr_test::attention_reference(wrong, f);
  Local<double> L(c, f);
  ASSERT_EQ(L.forward(env.ring, c), TSR_SUCCESS);
  const Tol t = tol_of(c);
  // Every rank holds queries when N >= p; their outputs must disagree.
  EXPECT_FALSE(close("out", L.o, shard<double>(c, bad.o, c.B * c.H, c.d), t.atol, t.rtol));
}

// The three variants agree with each other directly (not only with the
// reference), and a call is bitwise repeatable at fixed p.
TEST(RingAttention, VariantsAgreeAndRepeatBitwise) {
  RingEnv env;
  const size_t P = static_cast<size_t>(world_size());
  Case c;
  c.layout = TSR_ATTN_LAYOUT_ZIGZAG, c.causal = true, c.N = 5 * P + 1, c.H = 2 * P, c.G = P, c.mask = kRandomMask;
  AttnFull f = make_full(c);
  std::vector<std::vector<double>> outs, grads;
  for (tsr_attn_variant var : {TSR_ATTN_RING, TSR_ATTN_RING_TWO_PASS, TSR_ATTN_ALLTOALL}) {
    c.variant = var;
    Local<double> L(c, f);
    ASSERT_EQ(L.forward(env.ring, c), TSR_SUCCESS);
    ASSERT_EQ(L.backward(env.ring, c), TSR_SUCCESS);
    outs.push_back(L.o);
    grads.push_back(L.dk);
    Local<double> again(c, f);
    ASSERT_EQ(again.forward(env.ring, c), TSR_SUCCESS);
    ASSERT_EQ(again.backward(env.ring, c), TSR_SUCCESS);
    EXPECT_EQ(0, std::memcmp(L.o.data(), again.o.data(), L.o.size() * sizeof(double))) << vname(var);
    EXPECT_EQ(0, std::memcmp(L.dq.data(), again.dq.data(), L.dq.size() * sizeof(double))) << vname(var);
  }
  for (size_t v = 1; v < outs.size(); ++v) {
    EXPECT_TRUE(close("out vs ring", outs[v], outs[0], 1e-12, 1e-12)) << v;
    EXPECT_TRUE(close("dk vs ring", grads[v], grads[0], 1e-12, 1e-12)) << v;
  }
}

// Central differences of L = sum(w * out) over all ranks (float64), w = dout.
// Directional derivatives at every p: (L(x + eps u) - L(x - eps u)) / (2 eps)
// against <grad, u>, for random directions u over q, k and v together and
// over each alone (a wrong gradient element shows in almost every random
// direction); element by element as well at p <= 2.
TEST(RingAttention, FiniteDifferences) {
  RingEnv env;
  const int p = world_size(), r = world_rank();
  Case c;
  c.layout = TSR_ATTN_LAYOUT_ZIGZAG, c.causal = true, c.N = 5, c.B = 1, c.H = 2, c.G = 1, c.d = 3;
  c.mask = kRandomMask, c.seed = 77;
  AttnFull f = make_full(c);
  Local<double> L(c, f);
  ASSERT_EQ(L.forward(env.ring, c), TSR_SUCCESS);
  ASSERT_EQ(L.backward(env.ring, c), TSR_SUCCESS);
  const double eps = 1e-5;
  auto loss = [&]() {
    Local<double> X = L;
    X.tq.data = X.q.data(), X.tk.data = X.k.data(), X.tv.data = X.v.data(), X.to.data = X.o.data();
    X.tl.data = X.lse.data(), X.tm.data = X.mask.data();
    EXPECT_EQ(X.forward(env.ring, c), TSR_SUCCESS);
    double mine = 0, all = 0;
    for (size_t i = 0; i < X.o.size(); ++i) mine += X.o[i] * X.dout[i];
    MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return all;
  };
  auto sum_all = [](double x) {
    double y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return y;
  };
  struct Which {
    std::vector<double>* x;
    std::vector<double>* g;
    const char* name;
  } which[] = {{&L.q, &L.dq, "q"}, {&L.k, &L.dk, "k"}, {&L.v, &L.dv, "v"}};
  const std::vector<double> q0 = L.q, k0 = L.k, v0 = L.v;
  // Directions: 0..2 one tensor at a time, 3..4 all three.
  for (int dir = 0; dir < 5; ++dir) {
    double dot = 0;
    std::vector<std::vector<double>> u(3);
    for (int t = 0; t < 3; ++t) {
      u[static_cast<size_t>(t)].assign(which[t].x->size(), 0.0);
      if (dir < 3 && dir != t) continue;
      for (size_t i = 0; i < u[static_cast<size_t>(t)].size(); ++i)
        u[static_cast<size_t>(t)][i] = tsr_test::uniform(1000 + 10 * static_cast<uint64_t>(dir) + static_cast<uint64_t>(t),
                                                        static_cast<uint64_t>(r) * 1000 + i);
    }
    for (int t = 0; t < 3; ++t)
      for (size_t i = 0; i < u[static_cast<size_t>(t)].size(); ++i) dot += u[static_cast<size_t>(t)][i] * (*which[t].g)[i];
    const double an = sum_all(dot);
    auto shift = [&](double sgn) {
      for (int t = 0; t < 3; ++t)
        for (size_t i = 0; i < u[static_cast<size_t>(t)].size(); ++i) (*which[t].x)[i] += sgn * eps * u[static_cast<size_t>(t)][i];
    };
    shift(+1);
    const double up = loss();
    shift(-2);
    const double down = loss();
    L.q = q0, L.k = k0, L.v = v0;
    const double fd = (up - down) / (2 * eps);
    EXPECT_NEAR(an, fd, 1e-7 + 1e-6 * std::fabs(fd)) << "direction " << dir;
    EXPECT_GT(std::fabs(an), 1e-3) << "direction " << dir;  // a direction that sees the gradient
  }
  if (p > 2) return;
  // Element by element, ranks taking turns.
  for (int owner = 0; owner < p; ++owner)
    for (auto& w : which) {
      unsigned long long len = w.x->size();
      MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, owner, MPI_COMM_WORLD);
      for (size_t i = 0; i < len; ++i) {
        const double x0 = r == owner ? (*w.x)[i] : 0;
        if (r == owner) (*w.x)[i] = x0 + eps;
        const double up = loss();
        if (r == owner) (*w.x)[i] = x0 - eps;
        const double down = loss();
        if (r == owner) {
          (*w.x)[i] = x0;
          const double fd = (up - down) / (2 * eps), an = (*w.g)[i];
          EXPECT_NEAR(an, fd, 1e-7 + 1e-6 * std::fabs(fd)) << w.name << "[" << i << "] on rank " << r;
        }
      }
    }
  EXPECT_EQ(L.q, q0);
  EXPECT_EQ(L.k, k0);
  EXPECT_EQ(L.v, v0);
}

// --------------------------------------------------------------- accounting
// The counters a call must change, from the formulas of docs/ATTENTION.md:
// ring steps to rank+1 / from rank-1, collectives by their wire models,
// one agreement (24-byte all-reduce) as control.
tsr_peer_class peer_class(int r, int q) {
  return q == r ? TSR_PEER_SELF : q / 2 == r / 2 ? TSR_PEER_NODE : TSR_PEER_REMOTE;  // nodes of 2 ranks
}
void add_model(tsr_counters& e, const tsr::WireModel& m, int r) {
  for (const tsr::WireEdge& x : m.sent) {
    e.coll_wire_sent[peer_class(r, x.peer)].messages += x.messages;
    e.coll_wire_sent[peer_class(r, x.peer)].bytes += x.bytes;
  }
  for (const tsr::WireEdge& x : m.recv) {
    e.coll_wire_recv[peer_class(r, x.peer)].messages += x.messages;
    e.coll_wire_recv[peer_class(r, x.peer)].bytes += x.bytes;
  }
}
void add_control(tsr_counters& e, const tsr::WireModel& m) {
  for (const tsr::WireEdge& x : m.sent) e.control.messages += x.messages, e.control.bytes += x.bytes;
  for (const tsr::WireEdge& x : m.recv) e.control.messages += x.messages, e.control.bytes += x.bytes;
}

tsr_counters expected_counters(const Case& c, bool backward) {
  const int p = world_size(), r = world_rank();
  const size_t es = c.type == TSR_FLOAT32 ? 4 : 8;
  std::vector<uint64_t> len(static_cast<size_t>(p));
  size_t nmax = 0;
  for (int j = 0; j < p; ++j) {
    size_t n = 0;
    tsr_attn_shard_len(c.layout, c.N, p, j, &n);
    len[static_cast<size_t>(j)] = n;
    nmax = std::max(nmax, n);
  }
  auto at = [&](int j) { return len[static_cast<size_t>(((j % p) + p) % p)]; };
  const uint64_t kv = c.B * c.G * c.d * es;  // bytes of K (or V) per token
  const uint64_t mk = c.B;                  // bytes of the key mask per token
  const int nx = (r + 1) % p, pv = (r + p - 1) % p;
  tsr_counters e = tsr_test::zero();
  // One CIRCULATE buffer: p-1 hops; one ACCUMULATE buffer: p-1 hops.
  auto circ = [&](uint64_t per_token) {
    for (int s = 0; s + 1 < p; ++s) {
      e.p2p_sent[peer_class(r, nx)].messages += 1;
      e.p2p_sent[peer_class(r, nx)].bytes += per_token * at(r - s);
      e.p2p_recv[peer_class(r, pv)].messages += 1;
      e.p2p_recv[peer_class(r, pv)].bytes += per_token * at(r - s - 1);
    }
  };
  auto acc = [&](uint64_t per_token) {
    for (int s = 1; s < p; ++s) {
      e.p2p_sent[peer_class(r, nx)].messages += 1;
      e.p2p_sent[peer_class(r, nx)].bytes += per_token * at(r - s);
      e.p2p_recv[peer_class(r, pv)].messages += 1;
      e.p2p_recv[peer_class(r, pv)].bytes += per_token * at(r - s - 1);
    }
  };
  const bool m = c.mask != kNoMask;
  if (c.variant == TSR_ATTN_RING) {
    circ(kv), circ(kv);
    if (m) circ(mk);
    if (backward) acc(kv), acc(kv);
  } else if (c.variant == TSR_ATTN_RING_TWO_PASS) {
    circ(kv);
    if (m) circ(mk);
    circ(kv);
    if (backward) {
      circ(kv);
      std::vector<uint64_t> blocks(static_cast<size_t>(p));
      uint64_t total = 0;
      for (int j = 0; j < p; ++j) total += blocks[static_cast<size_t>(j)] = kv * at(j);
      for (int t = 0; t < 2; ++t) {
        e.coll_calls[TSR_COLL_REDUCE_SCATTER] += 1;
        e.coll_payload_sent += total;
        e.coll_payload_recv += blocks[static_cast<size_t>(r)];
        add_model(e, tsr::model_reduce_scatterv(r, p, blocks), r);
      }
    }
  } else {
    const size_t P = static_cast<size_t>(p), Hp = c.H / P, Gp = c.G / P;
    const uint64_t in = backward ? c.B * nmax * ((2 * Hp + 2 * Gp) * c.d + 2 * Hp) : c.B * (Hp + 2 * Gp) * nmax * c.d;
    const uint64_t out = backward ? c.B * nmax * (Hp + 2 * Gp) * c.d : c.B * Hp * nmax * (c.d + 1);
    for (uint64_t cnt : {in, out}) {
      e.coll_calls[TSR_COLL_ALLTOALL] += 1;
      e.coll_payload_sent += cnt * es * P;
      e.coll_payload_recv += cnt * es * P;
      add_model(e, tsr::model_alltoall(r, p, cnt * es), r);
    }
    if (m) {
      e.coll_calls[TSR_COLL_ALLGATHER] += 1;
      e.coll_payload_sent += c.B * nmax;
      e.coll_payload_recv += c.B * nmax * P;
      add_model(e, tsr::model_allgatherv(r, p, std::vector<uint64_t>(P, c.B * nmax)), r);
    }
  }
  add_control(e, tsr::model_allreduce(r, p, 3, 8));  // the agreement
  return e;
}

TEST(RingAttention, ExactBytesAndMessages) {
  RingEnv env;
  const size_t P = static_cast<size_t>(world_size());
  for (tsr_attn_variant var : {TSR_ATTN_RING, TSR_ATTN_RING_TWO_PASS, TSR_ATTN_ALLTOALL})
    for (tsr_dtype type : {TSR_FLOAT64, TSR_FLOAT32})
      for (MaskKind mk : {kNoMask, kRandomMask}) {
        Case c;
        c.variant = var, c.type = type, c.mask = mk, c.layout = TSR_ATTN_LAYOUT_ZIGZAG, c.causal = true;
        c.N = 4 * P + 3, c.H = 2 * P, c.G = P, c.B = 2, c.d = 3;
        SCOPED_TRACE(c.str());
        AttnFull f = make_full(c);
        auto body = [&](auto tag) {
          using T = decltype(tag);
          Local<T> L(c, f);
          const tsr_counters a = tsr_test::counters(env.ctx);
          ASSERT_EQ(L.forward(env.ring, c), TSR_SUCCESS);
          const tsr_counters b = tsr_test::counters(env.ctx);
          ASSERT_EQ(L.backward(env.ring, c), TSR_SUCCESS);
          const tsr_counters d = tsr_test::counters(env.ctx);
          EXPECT_TRUE(tsr_test::same(expected_counters(c, false), tsr_test::diff(a, b))) << "forward";
          EXPECT_TRUE(tsr_test::same(expected_counters(c, true), tsr_test::diff(b, d))) << "backward";
        };
        if (type == TSR_FLOAT32)
          body(float());
        else
          body(double());
      }
}

// ---------------------------------------------------------------- workspace
// The high-water mark of the library's allocations for one call, against the
// formulas of docs/ATTENTION.md (computed here independently) and against
// tsr_attn_workspace.
uint64_t workspace_formula(const Case& c, bool bwd) {
  const int p = world_size(), r = world_rank();
  const uint64_t P = static_cast<uint64_t>(p), e = c.type == TSR_FLOAT32 ? 4 : 8;
  const uint64_t B = c.B, H = c.H, G = c.G, d = c.d, N = c.N, tile = tsr::attn::kBq * tsr::attn::kBk;
  uint64_t n = 0, nmax = 0;
  for (int j = 0; j < p; ++j) {
    size_t len = 0;
    tsr_attn_shard_len(c.layout, c.N, p, j, &len);
    if (j == r) n = len;
    nmax = std::max<uint64_t>(nmax, len);
  }
  const uint64_t m = c.mask != kNoMask ? 1 : 0;
  const uint64_t cs = std::min<uint64_t>(2, P - 1), as = p >= 3 ? 3 : p == 2 ? 2 : 0;  // ring slots
  const uint64_t kvmax = B * G * nmax * d * e, mmax = B * nmax;
  switch (c.variant) {
    case TSR_ATTN_RING:
      return bwd ? 8 * n + 8 * nmax + e * (B * H * n + 2 * tile) + cs * (2 * kvmax + m * mmax) + as * 2 * kvmax
                 : 8 * n + 8 * nmax + e * (B * H * n + tile) + cs * (2 * kvmax + m * mmax);
    case TSR_ATTN_RING_TWO_PASS:
      return bwd ? 8 * n + 8 * nmax + e * (2 * B * H * n * N + B * H * n + 2 * B * G * N * d) +
                       cs * (3 * kvmax + m * mmax)
                 : 8 * n + 8 * nmax + e * B * H * n * N + cs * (2 * kvmax + m * mmax);
    case TSR_ATTN_ALLTOALL: {
      const uint64_t Hp = H / P, Gp = G / P, np = P * nmax;
      const uint64_t in = bwd ? B * nmax * ((2 * Hp + 2 * Gp) * d + 2 * Hp) : B * (Hp + 2 * Gp) * nmax * d;
      const uint64_t out = bwd ? B * nmax * (Hp + 2 * Gp) * d : B * Hp * nmax * (d + 1);
      const uint64_t x = 2 * P * std::max(in, out);
      const uint64_t masks = m * (B * nmax + P * B * nmax + B * np);
      if (!bwd) return 8 * np + e * (x + 2 * B * Hp * np * d + 2 * B * Gp * np * d + 2 * B * Hp * np + tile) + masks;
      return 8 * np +
             e * (x + 3 * B * Hp * np * d + 4 * B * Gp * np * d + 2 * B * Hp * np + B * H * n + 2 * tile) + masks;
    }
  }
  return 0;
}

TEST(RingAttention, WorkspaceHighWaterMark) {
  RingEnv env;
  const int p = world_size(), r = world_rank();
  const size_t P = static_cast<size_t>(p);
  for (tsr_attn_variant var : {TSR_ATTN_RING, TSR_ATTN_RING_TWO_PASS, TSR_ATTN_ALLTOALL})
    for (MaskKind mk : {kNoMask, kRandomMask}) {
      const tsr_attn_layout lay = mk == kNoMask ? TSR_ATTN_LAYOUT_CONTIGUOUS : TSR_ATTN_LAYOUT_STRIPED;
      {
        Case c;
        c.variant = var, c.mask = mk, c.layout = lay, c.N = 5 * P + 2, c.H = 2 * P, c.G = P, c.B = 2, c.d = 3;
        c.type = mk == kNoMask ? TSR_FLOAT64 : TSR_FLOAT32;
        SCOPED_TRACE(c.str());
        AttnFull f = make_full(c);
        auto body = [&](auto tag) {
          using T = decltype(tag);
          Local<T> L(c, f);
          size_t peak = 0, query = 0;
          ASSERT_EQ(tsr_ring_workspace_peak(env.ring, &peak, 1), TSR_SUCCESS);
          ASSERT_EQ(L.forward(env.ring, c), TSR_SUCCESS);
          ASSERT_EQ(tsr_ring_workspace_peak(env.ring, &peak, 1), TSR_SUCCESS);
          ASSERT_EQ(tsr_attn_workspace(&L.cfg, p, r, c.B, c.H, c.G, c.d, mk != kNoMask, 0, &query), TSR_SUCCESS);
          EXPECT_EQ(peak, workspace_formula(c, false)) << "forward";
          EXPECT_EQ(query, peak) << "forward";
          ASSERT_EQ(L.backward(env.ring, c), TSR_SUCCESS);
          ASSERT_EQ(tsr_ring_workspace_peak(env.ring, &peak, 1), TSR_SUCCESS);
          ASSERT_EQ(tsr_attn_workspace(&L.cfg, p, r, c.B, c.H, c.G, c.d, mk != kNoMask, 1, &query), TSR_SUCCESS);
          EXPECT_EQ(peak, workspace_formula(c, true)) << "backward";
          EXPECT_EQ(query, peak) << "backward";
          // The ring keeps the larger call's workspace (64-byte rounded
          // buffers); a repeated call reuses it; release frees it.
          size_t held = 0, again = 0;
          ASSERT_EQ(tsr_ring_workspace_held(env.ring, &held), TSR_SUCCESS);
          EXPECT_GE(held, std::max(workspace_formula(c, false), workspace_formula(c, true)));
          EXPECT_LE(held, std::max(workspace_formula(c, false), workspace_formula(c, true)) + 64 * 24);
          ASSERT_EQ(L.backward(env.ring, c), TSR_SUCCESS);
          ASSERT_EQ(tsr_ring_workspace_held(env.ring, &again), TSR_SUCCESS);
          EXPECT_EQ(again, held);
          ASSERT_EQ(tsr_ring_workspace_release(env.ring), TSR_SUCCESS);
          ASSERT_EQ(tsr_ring_workspace_held(env.ring, &again), TSR_SUCCESS);
          EXPECT_EQ(again, 0u);
        };
        if (c.type == TSR_FLOAT32)
          body(float());
        else
          body(double());
      }
    }
}

// ------------------------------------------------------------------- errors
// Runs a call whose arguments are broken on rank `bad` (-1: every rank) and
// checks that every rank gets `want`, the failing rank with a message
// containing `text`, the others naming that rank.
template <class F>
void expect_everywhere(tsr_status want, int bad, const std::string& text, F&& call) {
  const int r = world_rank();
  const bool mine = bad < 0 || bad == r;
  const tsr_status st = call(mine);
  EXPECT_EQ(st, want) << tsr_status_name(st) << ": " << tsr_last_error(nullptr);
  const std::string msg = tsr_last_error(nullptr);
  if (mine) {
    EXPECT_TRUE(tsr_test::contains(msg.c_str(), text)) << msg;
  } else {
    EXPECT_TRUE(tsr_test::contains(msg.c_str(), "rank " + std::to_string(bad < 0 ? 0 : bad) + " failed")) << msg;
  }
}

TEST(RingAttention, BadInputFailsOnEveryRank) {
  RingEnv env;
  const int p = world_size();
  const size_t P = static_cast<size_t>(p);
  const int last = p - 1;
  Case c;
  c.N = 3 * P + 1, c.mask = kRandomMask;
  AttnFull f = make_full(c);
  Local<double> L(c, f);
  auto fwd = [&](Local<double>& x) { return tsr_attn_forward(env.ring, &x.cfg, &x.tq, &x.tk, &x.tv, &x.tm, &x.to, &x.tl); };
  // head_dim of k differs from q's (a shape error on the rank that has it).
  expect_everywhere(TSR_ERR_SHAPE, last, "k.dim = 4 differs from q.dim = 5", [&](bool mine) {
    Local<double> x = L;
    x.tq.data = x.q.data(), x.tk.data = x.k.data(), x.tv.data = x.v.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data();
    x.tm.data = x.mask.data();
    if (mine) x.tk.dim = 4;
    return fwd(x);
  });
  // kv heads that do not divide the heads.
  expect_everywhere(TSR_ERR_SHAPE, -1, "k.heads = 3 (kv heads) must divide q.heads = 4", [&](bool) {
    Local<double> x = L;
    x.tq.data = x.q.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data(), x.tm.data = x.mask.data();
    std::vector<double> k3(c.B * 3 * x.n * c.d), v3(k3.size());
    x.tk = {k3.data(), c.B, 3, x.n, c.d};
    x.tv = {v3.data(), c.B, 3, x.n, c.d};
    return fwd(x);
  });
  // head counts (or head_dim) that differ across ranks: arguments differ.
  if (p > 1) {
    const int r = world_rank();
    Case c2 = c;
    c2.H = r == 0 ? 2 : 4;
    c2.G = r == 0 ? 1 : 2;
    AttnFull f2 = make_full(c2);
    Local<double> x(c2, f2);
    const tsr_status st = tsr_attn_forward(env.ring, &x.cfg, &x.tq, &x.tk, &x.tv, &x.tm, &x.to, &x.tl);
    EXPECT_EQ(st, TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(tsr_test::contains(tsr_last_error(nullptr), "argument 'heads' differs across")) << tsr_last_error(nullptr);
    Case c3 = c;
    c3.d = r == 0 ? 4 : 5;
    AttnFull f3 = make_full(c3);
    Local<double> y(c3, f3);
    EXPECT_EQ(y.forward(env.ring, c3), TSR_ERR_INVALID_ARG);
  }
  // A shard of the wrong size on one rank (inconsistent with the layout).
  expect_everywhere(TSR_ERR_SHAPE, last, "inconsistent shard", [&](bool mine) {
    Local<double> x = L;
    std::vector<double> q(c.B * c.H * (x.n + 1) * c.d), o(q.size()), l(c.B * c.H * (x.n + 1));
    std::vector<double> k(c.B * c.G * (x.n + 1) * c.d), v(k.size());
    std::vector<uint8_t> m(c.B * (x.n + 1), 1);
    x.tq.data = x.q.data(), x.tk.data = x.k.data(), x.tv.data = x.v.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data();
    x.tm.data = x.mask.data();
    if (mine) {
      const size_t n1 = x.n + 1;
      x.tq = {q.data(), c.B, c.H, n1, c.d}, x.to = {o.data(), c.B, c.H, n1, c.d}, x.tl = {l.data(), c.B, c.H, n1, 1};
      x.tk = {k.data(), c.B, c.G, n1, c.d}, x.tv = {v.data(), c.B, c.G, n1, c.d}, x.tm = {m.data(), c.B, 1, n1, 1};
    }
    return fwd(x);
  });
  // A key mask that does not match the layout's shard.
  expect_everywhere(TSR_ERR_SHAPE, 0, "the mask does not match the layout", [&](bool mine) {
    Local<double> x = L;
    x.tq.data = x.q.data(), x.tk.data = x.k.data(), x.tv.data = x.v.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data();
    std::vector<uint8_t> m(c.B * (x.n + 2), 1);
    x.tm = mine ? tsr_attn_tensor{m.data(), c.B, 1, x.n + 2, 1} : tsr_attn_tensor{x.mask.data(), c.B, 1, x.n, 1};
    return fwd(x);
  });
  // The layout or the causal flag differs across ranks; a shard length that
  // is right for one layout but not another is a shape error first.
  if (p > 1) {
    Local<double> x = L;
    x.tq.data = x.q.data(), x.tk.data = x.k.data(), x.tv.data = x.v.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data();
    x.tm.data = x.mask.data();
    x.cfg.causal = world_rank() == last;
    EXPECT_EQ(fwd(x), TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(tsr_test::contains(tsr_last_error(nullptr), "argument 'cfg->causal' differs across"));
    // N = 2p: contiguous and striped give every rank 2 tokens, zigzag too.
    Case z = c;
    z.N = 2 * P;
    AttnFull fz = make_full(z);
    Local<double> y(z, fz);
    y.cfg.layout = world_rank() == 0 ? TSR_ATTN_LAYOUT_STRIPED : TSR_ATTN_LAYOUT_ZIGZAG;
    EXPECT_EQ(y.forward(env.ring, z), TSR_ERR_INVALID_ARG);
  }
  // All-to-all with heads the ring size does not divide.
  if (p > 1) {
    Case a = c;
    a.variant = TSR_ATTN_ALLTOALL, a.H = P + 1, a.G = 1;
    AttnFull fa = make_full(a);
    Local<double> x(a, fa);
    expect_everywhere(TSR_ERR_SHAPE, -1, "must divide heads", [&](bool) { return x.forward(env.ring, a); });
  }
  // Config problems on one rank: NULL, not initialised, bfloat16, bad enums.
  expect_everywhere(TSR_ERR_INVALID_ARG, 0, "'cfg' is NULL", [&](bool mine) {
    Local<double> x = L;
    x.tq.data = x.q.data(), x.tk.data = x.k.data(), x.tv.data = x.v.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data();
    x.tm.data = x.mask.data();
    return tsr_attn_forward(env.ring, mine ? nullptr : &x.cfg, &x.tq, &x.tk, &x.tv, &x.tm, &x.to, &x.tl);
  });
  auto with_cfg = [&](auto edit) {
    return [&, edit](bool mine) {
      Local<double> x = L;
      x.tq.data = x.q.data(), x.tk.data = x.k.data(), x.tv.data = x.v.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data();
      x.tm.data = x.mask.data();
      if (mine) edit(x.cfg);
      return fwd(x);
    };
  };
  expect_everywhere(TSR_ERR_INVALID_ARG, last, "TSR_ATTN_CONFIG_INIT", with_cfg([](tsr_attn_config& k) { k.magic = 0; }));
  expect_everywhere(TSR_ERR_UNSUPPORTED, last, "TSR_BFLOAT16", with_cfg([](tsr_attn_config& k) { k.type = TSR_BFLOAT16; }));
  expect_everywhere(TSR_ERR_INVALID_ARG, last, "not a tsr_attn_variant",
                    with_cfg([](tsr_attn_config& k) { k.variant = static_cast<tsr_attn_variant>(9); }));
  expect_everywhere(TSR_ERR_INVALID_ARG, last, "not a tsr_attn_layout",
                    with_cfg([](tsr_attn_config& k) { k.layout = static_cast<tsr_attn_layout>(9); }));
  expect_everywhere(TSR_ERR_INVALID_ARG, last, "scale is not finite",
                    with_cfg([](tsr_attn_config& k) { k.scale = std::numeric_limits<double>::infinity(); }));
  // In place is refused; NULL tensors and data.
  expect_everywhere(TSR_ERR_INVALID_ARG, 0, "out overlaps q", [&](bool mine) {
    Local<double> x = L;
    x.tq.data = x.q.data(), x.tk.data = x.k.data(), x.tv.data = x.v.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data();
    x.tm.data = x.mask.data();
    if (mine) x.to.data = x.q.data();
    return fwd(x);
  });
  expect_everywhere(TSR_ERR_INVALID_ARG, last, "argument 'v' is NULL", [&](bool mine) {
    Local<double> x = L;
    x.tq.data = x.q.data(), x.tk.data = x.k.data(), x.tv.data = x.v.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data();
    x.tm.data = x.mask.data();
    return tsr_attn_forward(env.ring, &x.cfg, &x.tq, &x.tk, mine ? nullptr : &x.tv, &x.tm, &x.to, &x.tl);
  });
  // Backward: dk shaped like q (GQA) on one rank.
  expect_everywhere(TSR_ERR_SHAPE, last, "dk.heads = 4; expected 2", [&](bool mine) {
    Local<double> x = L;
    x.tq.data = x.q.data(), x.tk.data = x.k.data(), x.tv.data = x.v.data(), x.to.data = x.o.data(), x.tl.data = x.lse.data();
    x.tm.data = x.mask.data(), x.tdo.data = x.dout.data(), x.tdq.data = x.dq.data(), x.tdv.data = x.dv.data();
    std::vector<double> big(x.q.size());
    x.tdk = mine ? tsr_attn_tensor{big.data(), c.B, c.H, x.n, c.d} : tsr_attn_tensor{x.dk.data(), c.B, c.G, x.n, c.d};
    return tsr_attn_backward(env.ring, &x.cfg, &x.tq, &x.tk, &x.tv, &x.tm, &x.to, &x.tl, &x.tdo, &x.tdq, &x.tdk, &x.tdv);
  });
  // Local calls.
  size_t n = 0;
  EXPECT_EQ(tsr_attn_shard_len(TSR_ATTN_LAYOUT_ZIGZAG, 10, 0, 0, &n), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_attn_merge(TSR_INT32, 1, 1, &n, &n, &n, &n), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_attn_workspace(nullptr, 1, 0, 1, 1, 1, 1, 0, 0, &n), TSR_ERR_INVALID_ARG);
  // Nothing above left a message or a request behind: a good call still works.
  Local<double> ok = L;
  ok.tq.data = ok.q.data(), ok.tk.data = ok.k.data(), ok.tv.data = ok.v.data(), ok.to.data = ok.o.data();
  ok.tl.data = ok.lse.data(), ok.tm.data = ok.mask.data();
  EXPECT_EQ(fwd(ok), TSR_SUCCESS);
}

// ------------------------------------------------------------ ring exchange
// Per-rank counts: 0 on rank 1 (an empty block), uneven elsewhere.
size_t count_a(int q) { return q == 1 ? 0 : static_cast<size_t>(q) + 2; }
size_t count_b(int q) { return static_cast<size_t>(2 * q) + 1; }
size_t count_s(int q) { return static_cast<size_t>(q % 3) + 1; }
int32_t val_a(int q, size_t i) { return static_cast<int32_t>(1000 * q + static_cast<int>(i)); }
double val_b(int q, size_t i) { return 0.5 * q - static_cast<double>(i); }
double contrib(int rank, int src, size_t i) { return 100.0 * rank + 10.0 * src + static_cast<double>(i); }

struct Seen {
  int calls = 0;
  bool ok = true;
  int fail_at = -1;  // return an error at this step
};

tsr_status exchange_step(const tsr_ring_step* st, void* user) {
  Seen* seen = static_cast<Seen*>(user);
  const int p = st->size, r = st->rank;
  seen->ok = seen->ok && st->step == seen->calls && st->source == ((r - st->step) % p + p) % p && st->nbuffers == 3;
  seen->calls += 1;
  const int src = st->source;
  seen->ok = seen->ok && st->counts[0] == count_a(src) && st->counts[1] == count_b(src) && st->counts[2] == count_s(src);
  const int32_t* a = static_cast<const int32_t*>(st->blocks[0]);
  const double* b = static_cast<const double*>(st->blocks[1]);
  double* s = static_cast<double*>(st->blocks[2]);
  for (size_t i = 0; i < st->counts[0]; ++i) seen->ok = seen->ok && a[i] == val_a(src, i);
  for (size_t i = 0; i < st->counts[1]; ++i) seen->ok = seen->ok && b[i] == val_b(src, i);
  for (size_t i = 0; i < st->counts[2]; ++i) {
    seen->ok = seen->ok && s[i] == 0.0;  // a zeroed contribution buffer
    s[i] = contrib(r, src, i);
  }
  if (st->step == seen->fail_at) return TSR_ERR_NUMERIC;
  EXPECT_EQ(tsr_ring_progress(nullptr), TSR_ERR_INVALID_ARG);
  return TSR_SUCCESS;
}

TEST(RingExchange, CirculateAndAccumulateWithExactCounters) {
  RingEnv env;
  const int p = world_size(), r = world_rank();
  std::vector<int32_t> a(count_a(r));
  std::vector<double> b(count_b(r)), s(count_s(r), 99.0);
  for (size_t i = 0; i < a.size(); ++i) a[i] = val_a(r, i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = val_b(r, i);
  const std::vector<int32_t> a0 = a;
  const std::vector<double> b0 = b;
  tsr_ring_buffer bufs[3] = {{a.data(), a.size(), TSR_INT32, TSR_RING_CIRCULATE},
                             {b.data(), b.size(), TSR_FLOAT64, TSR_RING_CIRCULATE},
                             {s.data(), s.size(), TSR_FLOAT64, TSR_RING_ACCUMULATE}};
  Seen seen;
  const tsr_counters before = tsr_test::counters(env.ctx);
  ASSERT_EQ(tsr_ring_exchange(env.ring, bufs, 3, exchange_step, &seen), TSR_SUCCESS) << tsr_last_error(nullptr);
  const tsr_counters after = tsr_test::counters(env.ctx);
  EXPECT_EQ(seen.calls, p);
  EXPECT_TRUE(seen.ok);
  EXPECT_EQ(a, a0);  // circulated buffers are never written
  EXPECT_EQ(b, b0);
  for (size_t i = 0; i < s.size(); ++i) {
    double want = 0;
    for (int q = 0; q < p; ++q) want += contrib(q, r, i);
    EXPECT_EQ(s[i], want) << i;
  }
  // Data: p-1 hops of each buffer; control: two agreements, the counts
  // all-gather ((nbuffers+1) int64 per rank) and the closing agreement.
  tsr_counters e = tsr_test::zero();
  const int nx = (r + 1) % p, pv = (r + p - 1) % p;
  auto m = [&](int j) { return ((j % p) + p) % p; };
  for (int st = 0; st + 1 < p; ++st) {
    e.p2p_sent[peer_class(r, nx)].messages += 2;
    e.p2p_sent[peer_class(r, nx)].bytes += 4 * count_a(m(r - st)) + 8 * count_b(m(r - st));
    e.p2p_recv[peer_class(r, pv)].messages += 2;
    e.p2p_recv[peer_class(r, pv)].bytes += 4 * count_a(m(r - st - 1)) + 8 * count_b(m(r - st - 1));
  }
  for (int st = 1; st < p; ++st) {
    e.p2p_sent[peer_class(r, nx)].messages += 1;
    e.p2p_sent[peer_class(r, nx)].bytes += 8 * count_s(m(r - st));
    e.p2p_recv[peer_class(r, pv)].messages += 1;
    e.p2p_recv[peer_class(r, pv)].bytes += 8 * count_s(m(r - st - 1));
  }
  for (int k = 0; k < 3; ++k) add_control(e, tsr::model_allreduce(r, p, 3, 8));
  add_control(e, tsr::model_allgatherv(r, p, std::vector<uint64_t>(static_cast<size_t>(p), 4 * 8)));
  EXPECT_TRUE(tsr_test::same(e, tsr_test::diff(before, after)));
  // The exchange allocated min(2, p-1) slots per circulated and 3 (2 at
  // p = 2, none at p = 1) per accumulated buffer, of the largest block.
  size_t peak = 0;
  ASSERT_EQ(tsr_ring_workspace_peak(env.ring, &peak, 1), TSR_SUCCESS);
  size_t ma = 0, mb = 0, ms = 0;
  for (int q = 0; q < p; ++q) ma = std::max(ma, count_a(q)), mb = std::max(mb, count_b(q)), ms = std::max(ms, count_s(q));
  const size_t cs = std::min(2, p - 1), as = p >= 3 ? 3 : p == 2 ? 2 : 0;
  EXPECT_EQ(peak, cs * (4 * ma + 8 * mb) + as * 8 * ms);
}

TEST(RingExchange, FailingCallbackStopsEveryRankWithoutHang) {
  RingEnv env;
  const int p = world_size(), r = world_rank();
  std::vector<int32_t> a(count_a(r));
  std::vector<double> b(count_b(r)), s(count_s(r));
  for (size_t i = 0; i < a.size(); ++i) a[i] = val_a(r, i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = val_b(r, i);
  tsr_ring_buffer bufs[3] = {{a.data(), a.size(), TSR_INT32, TSR_RING_CIRCULATE},
                             {b.data(), b.size(), TSR_FLOAT64, TSR_RING_CIRCULATE},
                             {s.data(), s.size(), TSR_FLOAT64, TSR_RING_ACCUMULATE}};
  Seen seen;
  const int bad = p - 1;
  if (r == bad) seen.fail_at = 0;
  EXPECT_EQ(tsr_ring_exchange(env.ring, bufs, 3, exchange_step, &seen), TSR_ERR_NUMERIC);
  EXPECT_EQ(seen.calls, r == bad ? 1 : p);  // no callback after the failure
  EXPECT_TRUE(seen.ok);
  const std::string msg = tsr_last_error(nullptr);
  EXPECT_TRUE(tsr_test::contains(msg.c_str(), "step callback returned TSR_ERR_NUMERIC")) << msg;
  if (r != bad) {
    EXPECT_TRUE(tsr_test::contains(msg.c_str(), "rank " + std::to_string(bad) + " failed")) << msg;
  }
  // Bad buffers: an integer accumulation, a NULL function, nbuffers differing.
  tsr_ring_buffer ib = {a.data(), a.size(), TSR_INT32, TSR_RING_ACCUMULATE};
  expect_everywhere(TSR_ERR_INVALID_ARG, 0, "TSR_RING_ACCUMULATE needs TSR_FLOAT32 or TSR_FLOAT64", [&](bool mine) {
    return tsr_ring_exchange(env.ring, mine ? &ib : bufs, 1, exchange_step, &seen);
  });
  expect_everywhere(TSR_ERR_INVALID_ARG, bad, "'fn' is NULL", [&](bool mine) {
    Seen s2;
    return tsr_ring_exchange(env.ring, bufs, 3, mine ? nullptr : exchange_step, &s2);
  });
  if (p > 1) {
    Seen s3;
    EXPECT_EQ(tsr_ring_exchange(env.ring, bufs, r == 0 ? 2 : 3, exchange_step, &s3), TSR_ERR_INVALID_ARG);
    EXPECT_EQ(s3.calls, 0);
  }
  EXPECT_EQ(tsr_ring_progress(env.ring), TSR_SUCCESS);  // outside an exchange: a no-op
}

// A ring on a grid axis runs in the axis order; rings keep the context alive.
TEST(RingExchange, GridAxisRingAndLifetime) {
  const int p = world_size();
  tsr_context ctx = nullptr;
  ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS);
  int dims[3] = {0, 0, 0};
  ASSERT_EQ(tsr_grid_dims_create(TSR_GRID_2D, p, 0, dims, nullptr), TSR_SUCCESS);
  tsr_grid grid = nullptr;
  ASSERT_EQ(tsr_grid_create(ctx, TSR_GRID_2D, dims, &grid), TSR_SUCCESS);
  for (tsr_grid_axis axis : {TSR_AXIS_ROW, TSR_AXIS_COL}) {
    tsr_ring ring = nullptr;
    ASSERT_EQ(tsr_ring_create(grid, axis, &ring), TSR_SUCCESS) << tsr_last_error(ctx);
    int rr = -1, rs = 0, ar = -1, as = 0;
    ASSERT_EQ(tsr_ring_info(ring, &rr, &rs), TSR_SUCCESS);
    ASSERT_EQ(tsr_grid_axis_info(grid, axis, &ar, &as), TSR_SUCCESS);
    EXPECT_EQ(rr, ar);
    EXPECT_EQ(rs, as);
    int64_t mine = 1000 + ar;
    std::vector<int64_t> seen;
    struct U {
      std::vector<int64_t>* seen;
    } u{&seen};
    tsr_ring_buffer buf = {&mine, 1, TSR_INT64, TSR_RING_CIRCULATE};
    ASSERT_EQ(tsr_ring_exchange(
                  ring, &buf, 1,
                  [](const tsr_ring_step* st, void* user) {
                    static_cast<U*>(user)->seen->push_back(*static_cast<const int64_t*>(st->blocks[0]));
                    return TSR_SUCCESS;
                  },
                  &u),
              TSR_SUCCESS);
    ASSERT_EQ(seen.size(), static_cast<size_t>(as));
    for (int st = 0; st < as; ++st) EXPECT_EQ(seen[static_cast<size_t>(st)], 1000 + ((ar - st) % as + as) % as);
    if (axis == TSR_AXIS_COL) {
      EXPECT_EQ(tsr_grid_destroy(&grid), TSR_SUCCESS);  // the ring owns its communicator
      EXPECT_EQ(tsr_context_destroy(&ctx), TSR_ERR_STATE);
      EXPECT_TRUE(tsr_test::contains(tsr_last_error(ctx), "ring(s) of this context are still alive"));
      ASSERT_EQ(tsr_ring_exchange(ring, &buf, 1, [](const tsr_ring_step*, void*) { return TSR_SUCCESS; }, nullptr),
                TSR_SUCCESS);
    }
    EXPECT_EQ(tsr_ring_destroy(&ring), TSR_SUCCESS);
    EXPECT_EQ(ring, nullptr);
  }
  EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
  tsr_ring none = nullptr;
  EXPECT_EQ(tsr_ring_destroy(&none), TSR_SUCCESS);
  EXPECT_EQ(tsr_ring_create_comm(nullptr, MPI_COMM_WORLD, &none), TSR_ERR_INVALID_ARG);
}

// ---------------------------------------------------------------- C++ API
TEST(RingCpp, LambdaExchangeAndExceptions) {
  tessera::context ctx(MPI_COMM_WORLD);
  tessera::ring ring(ctx, MPI_COMM_WORLD);
  const int p = ring.size(), r = ring.rank();
  std::vector<float> mine(3, static_cast<float>(r)), sum(2);
  std::vector<int> sources;
  ring.exchange({tessera::circulate(tessera::span<const float>(mine)), tessera::accumulate(tessera::span<float>(sum))},
                [&](const tessera::ring_step& s) {
                  sources.push_back(s.source());
                  EXPECT_EQ(s.block<float>(0).size(), 3u);
                  EXPECT_EQ(s.block<float>(0)[2], static_cast<float>(s.source()));
                  s.contribution<float>(1)[0] = 1.0f;
                  s.contribution<float>(1)[1] = static_cast<float>(r);
                  ring.progress();
                });
  ASSERT_EQ(sources.size(), static_cast<size_t>(p));
  EXPECT_EQ(sum[0], static_cast<float>(p));
  EXPECT_EQ(sum[1], static_cast<float>(p * (p - 1) / 2));
  // A throwing lambda: that rank gets its exception back, the others a
  // tessera::error; the ring works afterwards.
  bool mine_thrown = false, other_thrown = false;
  try {
    ring.exchange({tessera::circulate(tessera::span<const float>(mine))}, [&](const tessera::ring_step& s) {
      if (r == 0 && s.step() == 0) throw std::runtime_error("boom");
    });
  } catch (const tessera::error& e) {
    other_thrown = r != 0 && e.status() == TSR_ERR_INVALID_ARG;
  } catch (const std::runtime_error& e) {
    mine_thrown = r == 0 && std::string(e.what()) == "boom";
  }
  EXPECT_TRUE(r == 0 ? mine_thrown : other_thrown);
  ring.exchange({tessera::circulate(tessera::span<const float>(mine))}, [](const tessera::ring_step&) {});
  const size_t cs = std::min(2, p - 1), as = p >= 3 ? 3 : p == 2 ? 2 : 0;
  EXPECT_EQ(ring.workspace_peak(), cs * 3 * 4 + as * 2 * 4);  // the first exchange's slots
}

TEST(RingCpp, AttentionWrappersMatchTheCApi) {
  tessera::context ctx(MPI_COMM_WORLD);
  tessera::ring ring(ctx, MPI_COMM_WORLD);
  const int p = ring.size(), r = ring.rank();
  Case c;
  c.layout = TSR_ATTN_LAYOUT_STRIPED, c.causal = true, c.N = 3 * static_cast<size_t>(p) + 1, c.mask = kRandomMask;
  AttnFull f = make_full(c);
  Local<double> L(c, f);
  ASSERT_EQ(L.forward(ring.get(), c), TSR_SUCCESS);
  ASSERT_EQ(L.backward(ring.get(), c), TSR_SUCCESS);
  const size_t n = tessera::shard_len(c.layout, c.N, p, r);
  ASSERT_EQ(n, L.n);
  EXPECT_EQ(tessera::positions(c.layout, c.N, p, r).size(), n);
  using tessera::attn_tensor;
  using tessera::span;
  std::vector<double> o(L.o.size()), lse(L.lse.size()), dq(L.dq.size()), dk(L.dk.size()), dv(L.dv.size());
  tessera::attn_config cfg;
  cfg.layout = c.layout, cfg.causal = 1, cfg.seq_len = c.N;
  const attn_tensor<const double> q(span<const double>(L.q), c.B, c.H, n, c.d), k(span<const double>(L.k), c.B, c.G, n, c.d),
      v(span<const double>(L.v), c.B, c.G, n, c.d), dout(span<const double>(L.dout), c.B, c.H, n, c.d);
  const attn_tensor<const uint8_t> mask(span<const uint8_t>(L.mask), c.B, 1, n, 1);
  tessera::attention_forward<double>(ring, cfg, q, k, v, attn_tensor<double>(span<double>(o), c.B, c.H, n, c.d),
                                     attn_tensor<double>(span<double>(lse), c.B, c.H, n, 1), &mask);
  EXPECT_EQ(o, L.o);
  EXPECT_EQ(0, std::memcmp(lse.data(), L.lse.data(), lse.size() * sizeof(double)));
  tessera::attention_backward<double>(
      ring, cfg, q, k, v, attn_tensor<const double>(span<const double>(o), c.B, c.H, n, c.d),
      attn_tensor<const double>(span<const double>(lse), c.B, c.H, n, 1), dout,
      attn_tensor<double>(span<double>(dq), c.B, c.H, n, c.d), attn_tensor<double>(span<double>(dk), c.B, c.G, n, c.d),
      attn_tensor<double>(span<double>(dv), c.B, c.G, n, c.d), &mask);
  EXPECT_EQ(dq, L.dq);
  EXPECT_EQ(dk, L.dk);
  EXPECT_EQ(dv, L.dv);
  // A span too short on the last rank: every rank throws TSR_ERR_SHAPE.
  std::vector<double> short_o(o.size() + (r == p - 1 ? 1 : 0));
  try {
    tessera::attention_forward<double>(ring, cfg, q, k, v,
                                       attn_tensor<double>(span<double>(short_o), c.B, c.H, n, c.d),
                                       attn_tensor<double>(span<double>(lse), c.B, c.H, n, 1), &mask);
    ADD_FAILURE() << "no exception";
  } catch (const tessera::error& e) {
    EXPECT_EQ(e.status(), TSR_ERR_SHAPE);
    if (r == p - 1) {
      EXPECT_TRUE(tsr_test::contains(e.what(), "out span has")) << e.what();
    }
  }
  // Layout helpers round trip.
  std::vector<double> full(2 * c.N * 3);
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<double>(i);
  std::vector<double> loc = tessera::shard_extract<double>(c.layout, c.N, p, r, span<const double>(full), 2, 3);
  std::vector<double> back(full.size(), -1.0);
  tessera::shard_insert<double>(c.layout, c.N, p, r, span<const double>(loc), span<double>(back), 2, 3);
  for (size_t o2 = 0; o2 < 2; ++o2)
    for (int64_t t : tessera::positions(c.layout, c.N, p, r))
      for (size_t e = 0; e < 3; ++e) {
        const size_t i = (o2 * c.N + static_cast<size_t>(t)) * 3 + e;
        EXPECT_EQ(back[i], full[i]);
      }
}

}  // namespace

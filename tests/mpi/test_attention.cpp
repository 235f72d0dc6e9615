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
#include <string>
#include <vector>

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
          int64_t first = 0;
          std::vector<int64_t> pos(c.N);
          size_t n0 = 0;
          tsr_attn_shard_len(c.layout, c.N, p, 0, &n0);
          tsr_attn_positions(c.layout, c.N, p, 0, pos.data());
          keep = 1;
          for (size_t i = 0; i < n0; ++i)
            if (static_cast<size_t>(pos[i]) == t) keep = 0;
          (void)first;
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
    for (MaskKind mk : {kBatchMasked, kRankMasked})
      for (bool causal : {false, true}) {
        Case c;
        c.variant = var, c.mask = mk, c.causal = causal, c.layout = TSR_ATTN_LAYOUT_STRIPED, c.N = 2 * P + 3;
        c.seed = static_cast<uint64_t>(++i);
        if (var == TSR_ATTN_ALLTOALL) c.H = P, c.G = P;
        run_case(env.ring, c);
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

// Central differences of L = sum(w * out) over all ranks (float64): the
// gradients of q, k and v on their owners.
TEST(RingAttention, FiniteDifferences) {
  RingEnv env;
  const int p = world_size(), r = world_rank();
  Case c;
  c.layout = TSR_ATTN_LAYOUT_ZIGZAG, c.causal = true, c.N = 5, c.B = 1, c.H = 2, c.G = 1, c.d = 3;
  c.mask = kRandomMask, c.seed = 77;
  AttnFull f = make_full(c);
  Local<double> L(c, f);  // dout plays w
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
  // Perturb every element of every rank's q, k, v in turn (ranks take turns).
  struct Which {
    std::vector<double>* x;
    std::vector<double>* g;
    const char* name;
  } which[] = {{&L.q, &L.dq, "q"}, {&L.k, &L.dk, "k"}, {&L.v, &L.dv, "v"}};
  const std::vector<double> q0 = L.q, k0 = L.k, v0 = L.v;
  double worst = 0;
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
          worst = std::max(worst, std::fabs(an - fd));
        }
      }
    }
  EXPECT_EQ(L.q, q0);
  EXPECT_EQ(L.k, k0);
  EXPECT_EQ(L.v, v0);
}

}  // namespace

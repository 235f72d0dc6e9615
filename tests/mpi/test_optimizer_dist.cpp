// The distributed optimizers: TSR_OPT_SHARDED (reduce-scatter, local slice,
// one fused norm all-reduce, all-gather) equals TSR_OPT_DATA_PARALLEL
// (bucketed nonblocking all-reduces) to 1e-6 relative, and the data-parallel
// step equals a replicated optimizer given the averaged gradient, bit for
// bit; the exact messages and bytes of every step through the accounting;
// non-finite gradients on one rank skip the step everywhere; state files
// round-trip bit-identically and load at another rank count; tensor-parallel
// blocks with the norms completed over the ranks (set_norm_reduction) step
// as the whole tensors do.
//
// Gradients are multiples of 2^-10 (bfloat16: 2^-6) small enough that their
// sums over up to 8 ranks are exact in any order, so that the reduction
// order of the MPI library does not blur the comparison.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "tessera/tessera.hpp"
#include "tessera/tsr_config.h"
#include "tsr_test.hpp"

namespace {

using tsr_test::world_rank;
using tsr_test::world_size;

constexpr int kRpn = 2;  // simulated ranks per node, for the peer classes
std::string g_dir;

// Groups of different sizes that straddle every slice boundary, an empty
// group and a bias group (no decay, no adaptation).
const std::vector<size_t> kSizes = {700, 1, 257, 0, 1500, 64, 33};
constexpr int kBias = 5;

double rnd(uint64_t seed, uint64_t i) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + i + 1;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) / 4503599627370496.0 - 1.0;
}
size_t total(const std::vector<size_t>& s) {
  size_t n = 0;
  for (size_t x : s) n += x;
  return n;
}
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> weights(size_t n) {
  std::vector<float> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = from_bf16(to_bf16(static_cast<float>(0.5 * rnd(3, i))));
  return w;
}
// Rank r's gradient at a step: dyadic, exact when summed over <= 8 ranks
// (float32: k/1024, |k| <= 512; bfloat16: k/64, |k| <= 31).
std::vector<float> grads(size_t n, int step, int rank, bool bf16) {
  std::vector<float> g(n);
  const double q = bf16 ? 31 : 512, d = bf16 ? 64 : 1024;
  for (size_t i = 0; i < n; ++i)
    g[i] = static_cast<float>(std::round(q * rnd(100 + 17 * static_cast<uint64_t>(step) + static_cast<uint64_t>(rank), i)) / d);
  return g;
}
std::vector<float> summed(size_t n, int step, int p, bool bf16) {
  std::vector<float> s(n, 0.0f);
  for (int r = 0; r < p; ++r) {
    const std::vector<float> g = grads(n, step, r, bf16);
    for (size_t i = 0; i < n; ++i) s[i] += g[i];
  }
  return s;
}

// Parameters in the optimizer's type.
struct Params {
  bool bf16;
  std::vector<float> f;
  std::vector<uint16_t> b;
  Params(const std::vector<float>& w, bool half) : bf16(half), f(w), b(w.size()) {
    for (size_t i = 0; i < w.size(); ++i) b[i] = to_bf16(w[i]);
  }
  std::vector<float> values() const {
    if (!bf16) return f;
    std::vector<float> v(b.size());
    for (size_t i = 0; i < b.size(); ++i) v[i] = from_bf16(b[i]);
    return v;
  }
};
bool step(tessera::optimizer& opt, Params& p, const std::vector<float>& g) {
  if (!p.bf16) {
    std::vector<float> copy(g);
    return opt.step(p.f, copy);
  }
  std::vector<uint16_t> gb(g.size());
  for (size_t i = 0; i < g.size(); ++i) gb[i] = to_bf16(g[i]);
  return opt.step(p.b, gb);
}

// The whole of a state array from every rank's part (sharded) or this rank's (otherwise).
std::vector<float> gathered(const tessera::optimizer& opt, tsr_opt_state which, MPI_Comm comm) {
  const std::vector<float> mine = opt.state(which);
  if (opt.query(TSR_OPTQ_DIST) != TSR_OPT_SHARDED) return mine;
  int p = 1;
  MPI_Comm_size(comm, &p);
  const int c = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(p)), displs(static_cast<size_t>(p), 0);
  MPI_Allgather(&c, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  for (int r = 1; r < p; ++r) displs[static_cast<size_t>(r)] = displs[static_cast<size_t>(r - 1)] + counts[static_cast<size_t>(r - 1)];
  std::vector<float> all(static_cast<size_t>(displs.back() + counts.back()));
  MPI_Allgatherv(mine.data(), c, MPI_FLOAT, all.data(), counts.data(), displs.data(), MPI_FLOAT, comm);
  return all;
}

// |a - b| <= rel * max(|b|, floor) element-wise; floor = 1e-3 * max |b|.
::testing::AssertionResult close(const std::vector<float>& a, const std::vector<float>& b, double rel) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " and " << b.size();
  double mx = 0;
  for (float x : b) mx = std::max(mx, static_cast<double>(std::fabs(x)));
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = rel * std::max(static_cast<double>(std::fabs(b[i])), 1e-3 * mx);
    if (!(std::fabs(static_cast<double>(a[i]) - b[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i] << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

void configure(tessera::optimizer& o) {
  o.set(kBias, TSR_OPT_DECAY, 0).set(kBias, TSR_OPT_ADAPT, 0);
  o.set(TSR_OPT_BUCKET_BYTES, 4096);
}

// --------------------------------------------------- sharded == unsharded
struct DistCase {
  tsr_opt_preset preset;
  tsr_dtype type;
  bool clip;
  int steps;
};

void sharded_equals_unsharded(const DistCase& c, const std::vector<size_t>& sizes) {
  const int p = world_size();
  const bool bf16 = c.type == TSR_BFLOAT16;
  const size_t n = total(sizes);
  tessera::context ctx(MPI_COMM_WORLD);
  tessera::context self(MPI_COMM_SELF);
  tessera::optimizer dp(ctx, c.preset, sizes, TSR_OPT_DATA_PARALLEL, c.type);
  tessera::optimizer sh(ctx, c.preset, sizes, TSR_OPT_SHARDED, c.type);
  tessera::optimizer rep(self, c.preset, sizes, TSR_OPT_REPLICATED, c.type);
  for (tessera::optimizer* o : {&dp, &sh, &rep}) {
    if (sizes.size() > kBias) configure(*o);
    o->set(TSR_OPT_BUCKET_BYTES, 4096);
    o->set(TSR_OPT_LR, static_cast<int>(c.preset) > 100 ? 5.0 : 0.05);
    if (c.clip) o->set(TSR_OPT_MAX_GRAD_NORM, 0.5);
  }
  rep.set(TSR_OPT_LOSS_SCALE, p);  // rep gets the sum of the gradients: average it the same way
  const std::vector<float> w0 = weights(n);
  Params pd(w0, bf16), ps(w0, bf16), pr(w0, bf16);
  for (int s = 1; s <= c.steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    ASSERT_TRUE(step(dp, pd, grads(n, s, world_rank(), bf16)));
    ASSERT_TRUE(step(sh, ps, grads(n, s, world_rank(), bf16)));
    ASSERT_TRUE(step(rep, pr, summed(n, s, p, bf16)));
    // Data parallel = replicated with the exact average: the same bits.
    EXPECT_EQ(pd.values(), pr.values());
    // Sharded = unsharded, to the rounding of the norms' summation order.
    EXPECT_TRUE(close(ps.values(), pd.values(), 1e-6));
    EXPECT_NEAR(sh.query(TSR_OPTQ_GRAD_NORM), dp.query(TSR_OPTQ_GRAD_NORM), 1e-12 * dp.query(TSR_OPTQ_GRAD_NORM));
    EXPECT_NEAR(sh.query(TSR_OPTQ_CLIP_FACTOR), dp.query(TSR_OPTQ_CLIP_FACTOR), 1e-12);
    for (int g = 0; g < static_cast<int>(sizes.size()); ++g) {
      EXPECT_NEAR(sh.query(TSR_OPTQ_TRUST_RATIO, g), dp.query(TSR_OPTQ_TRUST_RATIO, g),
                  1e-9 * dp.query(TSR_OPTQ_TRUST_RATIO, g)) << "group " << g;
    }
    // LAMB and the "popular" LARS momentum need the update norm at the
    // clipped scale: a second norm all-reduce where clipping scales.
    const bool unorm = static_cast<int>(c.preset) < 100 || c.preset == TSR_PRESET_LARS_SIMCLR_POPULAR;
    const bool lamb_clipped = c.clip && unorm && dp.query(TSR_OPTQ_CLIP_FACTOR) < 1;
    EXPECT_EQ(sh.query(TSR_OPTQ_NORM_ALLREDUCES), lamb_clipped ? 2 : 1);
    EXPECT_EQ(dp.query(TSR_OPTQ_NORM_ALLREDUCES), 0);
    if (c.clip) { EXPECT_LT(dp.query(TSR_OPTQ_CLIP_FACTOR), 1) << "clipping should be active"; }
  }
  // The states: every slice of the sharded one equals the replicated ones.
  const std::vector<tsr_opt_state> states =
      static_cast<int>(c.preset) > 100 ? std::vector<tsr_opt_state>{TSR_OPT_STATE_M}
                                       : std::vector<tsr_opt_state>{TSR_OPT_STATE_M, TSR_OPT_STATE_V};
  for (tsr_opt_state st : states) {
    EXPECT_EQ(dp.state(st), rep.state(st));
    EXPECT_TRUE(close(gathered(sh, st, MPI_COMM_WORLD), dp.state(st), 1e-6)) << "state " << st;
  }
  if (bf16) {
    EXPECT_EQ(dp.state(TSR_OPT_STATE_MASTER), rep.state(TSR_OPT_STATE_MASTER));
    EXPECT_TRUE(close(gathered(sh, TSR_OPT_STATE_MASTER, MPI_COMM_WORLD), dp.state(TSR_OPT_STATE_MASTER), 1e-6));
  }
  // The slice map: balanced contiguous slices.
  const size_t r = static_cast<size_t>(world_rank()), q = static_cast<size_t>(p);
  EXPECT_EQ(sh.query(TSR_OPTQ_SHARD_SIZE), static_cast<double>(n / q + (r < n % q ? 1 : 0)));
  EXPECT_EQ(sh.query(TSR_OPTQ_SHARD_OFFSET), static_cast<double>(r * (n / q) + std::min(r, n % q)));
  EXPECT_EQ(dp.query(TSR_OPTQ_SHARD_SIZE), static_cast<double>(n));
}

TEST(Sharded, LambClippedEqualsUnsharded) { sharded_equals_unsharded({TSR_PRESET_LAMB_APEX, TSR_FLOAT32, true, 4}, kSizes); }
TEST(Sharded, LambEqualsUnsharded) { sharded_equals_unsharded({TSR_PRESET_LAMB_PAPER, TSR_FLOAT32, false, 3}, kSizes); }
TEST(Sharded, LarsClippedEqualsUnsharded) { sharded_equals_unsharded({TSR_PRESET_LARS_PAPER, TSR_FLOAT32, true, 3}, kSizes); }
TEST(Sharded, Bfloat16LambEqualsUnsharded) { sharded_equals_unsharded({TSR_PRESET_LAMB_NVLAMB, TSR_BFLOAT16, true, 3}, kSizes); }
TEST(Sharded, Bfloat16LarsEqualsUnsharded) { sharded_equals_unsharded({TSR_PRESET_LARS_OPTAX, TSR_BFLOAT16, false, 3}, kSizes); }
// Fewer elements than ranks: some slices are empty.
// Issue 15: SimCLR's "popular" LARS momentum (ratio from the momentum
// update's norm) and optax's LAMB eps_root, sharded and data parallel.
TEST(Sharded, LarsPopularMomentumClippedEqualsUnsharded) {
  sharded_equals_unsharded({TSR_PRESET_LARS_SIMCLR_POPULAR, TSR_FLOAT32, true, 4}, kSizes);
}
TEST(Sharded, Bfloat16LarsPopularMomentumEqualsUnsharded) {
  sharded_equals_unsharded({TSR_PRESET_LARS_SIMCLR_POPULAR, TSR_BFLOAT16, false, 3}, kSizes);
}
TEST(Sharded, TinyProblem) { sharded_equals_unsharded({TSR_PRESET_LAMB_PAPER, TSR_FLOAT32, false, 2}, {2, 1}); }
// Several data-parallel buckets (16384 elements each at BUCKET_BYTES = 4096).
TEST(Sharded, ManyBuckets) { sharded_equals_unsharded({TSR_PRESET_LARS_MLPERF, TSR_FLOAT32, false, 2}, {30000, 64, 9936}); }

// ------------------------------------- tensor parallelism: norm reduction
// Every rank holds a contiguous block of each group (the blocks tile the
// group; some are empty) and the whole of the bias group (weight 1 on rank
// 0, 0 elsewhere): one optimizer per rank on its own context with the norms
// completed over the world (tsr_optimizer_set_norm_reduction) must step its
// blocks as one optimizer on the whole tensors does: the same trust ratios,
// gradient norm and clip factor, and the same weights (the sums of squares
// are summed in another order: 1e-6). Then the state moved into a fresh
// optimizer with tsr_optimizer_set_state / _set_step steps bit-identically.
void norm_reduction_case(tsr_opt_preset preset, tsr_opt_dist dist) {
  const int p = world_size(), r = world_rank();
  const size_t n = total(kSizes);
  tessera::context world(MPI_COMM_WORLD);
  tessera::context self(MPI_COMM_SELF);
  std::vector<size_t> mine(kSizes.size()), lo(kSizes.size()), off(kSizes.size());
  std::vector<double> w(kSizes.size(), 1.0);
  size_t nl = 0, o = 0;
  for (size_t g = 0; g < kSizes.size(); ++g) {
    off[g] = o;
    o += kSizes[g];
    if (static_cast<int>(g) == kBias) {
      lo[g] = 0, mine[g] = kSizes[g];
      w[g] = r == 0 ? 1.0 : 0.0;
    } else {
      lo[g] = kSizes[g] * static_cast<size_t>(r) / static_cast<size_t>(p);
      mine[g] = kSizes[g] * static_cast<size_t>(r + 1) / static_cast<size_t>(p) - lo[g];
    }
    nl += mine[g];
  }
  auto local_of = [&](const std::vector<float>& whole) {
    std::vector<float> v;
    for (size_t g = 0; g < kSizes.size(); ++g)
      v.insert(v.end(), whole.begin() + static_cast<long>(off[g] + lo[g]), whole.begin() + static_cast<long>(off[g] + lo[g] + mine[g]));
    return v;
  };
  tessera::optimizer ref(self, preset, kSizes, TSR_OPT_REPLICATED);
  tessera::optimizer loc(self, preset, mine, dist);
  tessera::optimizer moved(self, preset, mine, dist);
  for (tessera::optimizer* x : {&ref, &loc, &moved}) {
    configure(*x);
    x->set(TSR_OPT_LR, static_cast<int>(preset) > 100 ? 5.0 : 0.05).set(TSR_OPT_MAX_GRAD_NORM, 0.5);
  }
  ASSERT_EQ(tsr_optimizer_set_norm_reduction(loc.get(), world.get(), mine.size(), w.data()), TSR_SUCCESS);
  ASSERT_EQ(tsr_optimizer_set_norm_reduction(moved.get(), world.get(), mine.size(), w.data()), TSR_SUCCESS);
  std::vector<float> wr = weights(n), wl = local_of(wr), wm;
  for (int s = 1; s <= 3; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const std::vector<float> g = grads(n, s, 0, false);  // the same whole gradient on every rank
    std::vector<float> gr = g, gl = local_of(g);
    ASSERT_TRUE(ref.step(wr, gr));
    ASSERT_TRUE(loc.step(wl, gl));
    EXPECT_TRUE(close(wl, local_of(wr), 1e-6));
    EXPECT_NEAR(loc.query(TSR_OPTQ_GRAD_NORM), ref.query(TSR_OPTQ_GRAD_NORM), 1e-12 * ref.query(TSR_OPTQ_GRAD_NORM));
    EXPECT_NEAR(loc.query(TSR_OPTQ_CLIP_FACTOR), ref.query(TSR_OPTQ_CLIP_FACTOR), 1e-12);
    EXPECT_LT(ref.query(TSR_OPTQ_CLIP_FACTOR), 1) << "clipping should be active";
    for (int k = 0; k < static_cast<int>(kSizes.size()); ++k)
      EXPECT_NEAR(loc.query(TSR_OPTQ_TRUST_RATIO, k), ref.query(TSR_OPTQ_TRUST_RATIO, k),
                  1e-9 * ref.query(TSR_OPTQ_TRUST_RATIO, k)) << "group " << k;
    EXPECT_GE(loc.query(TSR_OPTQ_NORM_ALLREDUCES), 1);
  }
  // The state into a fresh optimizer: the next step is bit-identical.
  for (tsr_opt_state st : static_cast<int>(preset) > 100 ? std::vector<tsr_opt_state>{TSR_OPT_STATE_M}
                                                         : std::vector<tsr_opt_state>{TSR_OPT_STATE_M, TSR_OPT_STATE_V}) {
    const std::vector<float> v = loc.state(st);
    ASSERT_EQ(tsr_optimizer_set_state(moved.get(), st, v.data(), v.size()), TSR_SUCCESS);
  }
  ASSERT_EQ(tsr_optimizer_set_step(moved.get(), 3), TSR_SUCCESS);
  EXPECT_EQ(moved.query(TSR_OPTQ_STEP), 3);
  wm = wl;
  const std::vector<float> g4 = local_of(grads(n, 4, 0, false));
  std::vector<float> ga = g4, gb = g4;
  ASSERT_TRUE(loc.step(wl, ga));
  ASSERT_TRUE(moved.step(wm, gb));
  EXPECT_EQ(wm, wl);
  // Removed: the step reduces over its own context only.
  if (p > 1) {
    ASSERT_EQ(tsr_optimizer_set_norm_reduction(loc.get(), nullptr, 0, nullptr), TSR_SUCCESS);
    std::vector<float> gc = g4, wc = wl;
    ASSERT_TRUE(loc.step(wc, gc));
    EXPECT_EQ(loc.query(TSR_OPTQ_NORM_ALLREDUCES), dist == TSR_OPT_SHARDED ? 1 : 0);  // its own context's only
  }
}
TEST(NormReduction, LambBlocksStepAsWholeTensors) { norm_reduction_case(TSR_PRESET_LAMB_APEX, TSR_OPT_REPLICATED); }
TEST(NormReduction, LambDataParallelOnOneRank) { norm_reduction_case(TSR_PRESET_LAMB_PAPER, TSR_OPT_DATA_PARALLEL); }
TEST(NormReduction, LarsBlocksStepAsWholeTensors) { norm_reduction_case(TSR_PRESET_LARS_PAPER, TSR_OPT_SHARDED); }
// Replicated mode checks its norms before the agreement on its own context:
// a bad argument on one rank must fail the step on every rank of norm_ctx
// (agreed there first), not leave the others waiting in the norm reduction.
TEST(NormReduction, BadArgumentOnOneRankFailsEverywhere) {
  const int p = world_size(), r = world_rank();
  tessera::context world(MPI_COMM_WORLD);
  tessera::context self(MPI_COMM_SELF);
  tessera::optimizer opt(self, TSR_PRESET_LAMB_APEX, kSizes, TSR_OPT_REPLICATED);
  configure(opt);
  ASSERT_EQ(tsr_optimizer_set_norm_reduction(opt.get(), world.get(), kSizes.size(), nullptr), TSR_SUCCESS);
  const size_t n = total(kSizes);
  std::vector<float> w = weights(n), g = grads(n, 1, 0, false);
  const std::vector<float> w0 = w;
  const size_t count = r == p - 1 ? n - 1 : n;  // the last rank passes a wrong count
  const tsr_status st = tsr_optimizer_step(opt.get(), w.data(), g.data(), count);
  EXPECT_NE(st, TSR_SUCCESS);
  if (r == p - 1) {
    EXPECT_EQ(st, TSR_ERR_SHAPE);
  }
  EXPECT_EQ(w, w0) << "a failed step changes nothing";
  EXPECT_EQ(opt.query(TSR_OPTQ_STEP), 0);
  // and the next good step works on every rank
  std::vector<float> g1 = grads(n, 1, 0, false);
  EXPECT_TRUE(opt.step(w, g1));
}

// ------------------------------------------------------- exact accounting
struct Peers {
  int p, r;
  tsr_peer_class cls(int q) const {
    q = ((q % p) + p) % p;
    return q == r ? TSR_PEER_SELF : q / kRpn == r / kRpn ? TSR_PEER_NODE : TSR_PEER_REMOTE;
  }
};
uint64_t part(uint64_t count, int p, int i) {
  return count / static_cast<uint64_t>(p) + (static_cast<uint64_t>(((i % p) + p) % p) < count % static_cast<uint64_t>(p));
}
void wire(tsr_counters& w, const Peers& x, int right_msgs, uint64_t to_right, uint64_t from_left) {
  if (x.p <= 1) return;
  w.coll_wire_sent[x.cls(x.r + 1)].messages += static_cast<uint64_t>(right_msgs);
  w.coll_wire_sent[x.cls(x.r + 1)].bytes += to_right;
  w.coll_wire_recv[x.cls(x.r - 1)].messages += static_cast<uint64_t>(right_msgs);
  w.coll_wire_recv[x.cls(x.r - 1)].bytes += from_left;
}
// The agreement every step starts with: a 3 x int64 ring all-reduce, control.
void agreement(tsr_counters& w, const Peers& x) {
  if (x.p <= 1) return;
  const uint64_t s = (3 - part(3, x.p, x.r + 1)) + (3 - part(3, x.p, x.r + 2));
  const uint64_t v = (3 - part(3, x.p, x.r)) + (3 - part(3, x.p, x.r + 1));
  w.control.messages += 4 * static_cast<uint64_t>(x.p - 1);
  w.control.bytes += 8 * (s + v);
}
void allreduce(tsr_counters& w, const Peers& x, uint64_t count, uint64_t e) {
  w.coll_calls[TSR_COLL_ALLREDUCE] += 1;
  w.coll_payload_sent += count * e;
  w.coll_payload_recv += count * e;
  const int p = x.p, r = x.r;
  wire(w, x, 2 * (p - 1), e * ((count - part(count, p, r + 1)) + (count - part(count, p, r + 2))),
       e * ((count - part(count, p, r)) + (count - part(count, p, r + 1))));
}
void reduce_scatter(tsr_counters& w, const Peers& x, uint64_t n, uint64_t e) {
  w.coll_calls[TSR_COLL_REDUCE_SCATTER] += 1;
  w.coll_payload_sent += n * e;
  w.coll_payload_recv += part(n, x.p, x.r) * e;
  wire(w, x, x.p - 1, e * (n - part(n, x.p, x.r)), e * (n - part(n, x.p, x.r - 1)));
}
void allgather(tsr_counters& w, const Peers& x, uint64_t n, uint64_t e) {
  w.coll_calls[TSR_COLL_ALLGATHER] += 1;
  w.coll_payload_sent += part(n, x.p, x.r) * e;
  w.coll_payload_recv += n * e;
  wire(w, x, x.p - 1, e * (n - part(n, x.p, x.r + 1)), e * (n - part(n, x.p, x.r)));
}

TEST(Accounting, ExactMessagesAndBytesPerStep) {
  const Peers x{world_size(), world_rank()};
  tessera::context ctx(MPI_COMM_WORLD, kRpn);
  const std::vector<size_t> sizes = {30000, 64, 9936, 77};  // 40077 elements: 3 buckets of 16384
  const uint64_t n = total(sizes), L = sizes.size();
  const std::vector<float> w0 = weights(n);
  struct Mode {
    tsr_opt_dist dist;
    tsr_opt_preset preset;
    tsr_dtype type;
    double clip;  // max grad norm
    bool skip;
    bool after_clipped;  // measure the second of two clipped steps (LAMB: gradient norm first)
  };
  const Mode modes[] = {
      {TSR_OPT_REPLICATED, TSR_PRESET_LAMB_PAPER, TSR_FLOAT32, 0, false, false},
      {TSR_OPT_DATA_PARALLEL, TSR_PRESET_LAMB_PAPER, TSR_FLOAT32, 0, false, false},
      {TSR_OPT_DATA_PARALLEL, TSR_PRESET_LARS_PAPER, TSR_BFLOAT16, 0, true, false},
      {TSR_OPT_DATA_PARALLEL, TSR_PRESET_LAMB_PAPER, TSR_BFLOAT16, 1e-3, false, true},
      {TSR_OPT_SHARDED, TSR_PRESET_LAMB_PAPER, TSR_FLOAT32, 0, false, false},       // one norm all-reduce
      {TSR_OPT_SHARDED, TSR_PRESET_LAMB_PAPER, TSR_FLOAT32, 1e-3, false, false},    // clipping: two (3L, L)
      {TSR_OPT_SHARDED, TSR_PRESET_LAMB_PAPER, TSR_FLOAT32, 1e-3, false, true},     // clipped again: two (L, 3L)
      {TSR_OPT_SHARDED, TSR_PRESET_LARS_PAPER, TSR_BFLOAT16, 1e-3, false, true},    // LARS clipped: one
      {TSR_OPT_SHARDED, TSR_PRESET_LAMB_PAPER, TSR_BFLOAT16, 0, true, false},       // skipped: no all-gather
  };
  for (const Mode& m : modes) {
    SCOPED_TRACE("dist " + std::to_string(m.dist) + ", preset " + tsr_optimizer_preset_name(m.preset) +
                 (m.skip ? ", skipped step" : "") + (m.after_clipped ? ", after a clipped step" : ""));
    const bool bf16 = m.type == TSR_BFLOAT16;
    const bool lamb = m.preset == TSR_PRESET_LAMB_PAPER, clipped = m.clip > 0;
    const uint64_t e = bf16 ? 2 : 4;
    tessera::optimizer opt(ctx, m.preset, sizes, m.dist, m.type);
    opt.set(TSR_OPT_BUCKET_BYTES, 4096).set(TSR_OPT_MAX_GRAD_NORM, m.clip);
    Params p(w0, bf16);
    if (m.after_clipped) {
      ASSERT_TRUE(step(opt, p, grads(n, 7, x.r, bf16)));
      ASSERT_LT(opt.query(TSR_OPTQ_CLIP_FACTOR), 1);
    }
    std::vector<float> g = grads(n, 1, x.r, bf16);
    if (m.skip && x.r == x.p - 1) g[5] = std::numeric_limits<float>::quiet_NaN();
    const tsr_counters before = tsr_test::counters(ctx.get());
    EXPECT_EQ(step(opt, p, g), !m.skip);
    const tsr_counters got = tsr_test::diff(before, tsr_test::counters(ctx.get()));

    tsr_counters want = tsr_test::zero();
    agreement(want, x);
    if (m.dist == TSR_OPT_DATA_PARALLEL) {
      for (uint64_t b0 = 0; b0 < n; b0 += 16384) allreduce(want, x, std::min<uint64_t>(16384, n - b0), e);
    } else if (m.dist == TSR_OPT_SHARDED) {
      reduce_scatter(want, x, n, e);
      if (lamb && clipped && m.after_clipped) allreduce(want, x, L, 8);   // per group G^2 first
      allreduce(want, x, 3 * L, 8);                                      // per group: three sums
      if (lamb && clipped && !m.after_clipped) allreduce(want, x, L, 8);  // u norms again
      if (!m.skip) allgather(want, x, n, e);
    }
    EXPECT_TRUE(tsr_test::same(want, got));
    EXPECT_EQ(opt.query(TSR_OPTQ_NORM_ALLREDUCES), m.dist != TSR_OPT_SHARDED ? 0 : (lamb && clipped ? 2 : 1));
    if (clipped && !m.skip) { EXPECT_LT(opt.query(TSR_OPTQ_CLIP_FACTOR), 1); }
    // Memory traffic of the kernels (docs/OPTIMIZERS.md, section 6), on the
    // elements this rank updates: LAMB pass A 16 (bf16 14) + pass B 28, plus
    // pass A' 16 (14) on a clipped step or pass G 4 (2) after a clipped step;
    // LARS pass A 8 (6) + pass B 20.
    if (!m.skip) {
      const double local = opt.query(TSR_OPTQ_SHARD_SIZE);
      const double a = bf16 ? 14 : 16, extra = !(lamb && clipped) ? 0 : m.after_clipped ? e : a;
      const double per = lamb ? a + 28 + extra : (bf16 ? 6 + 20 : 8 + 20);
      EXPECT_EQ(opt.query(TSR_OPTQ_STEP_BYTES), per * local);
      EXPECT_EQ(opt.query(TSR_OPTQ_PASSES), lamb && clipped ? 3 : 2);
    }
  }
}

// ------------------------------------------------------- non-finite steps
TEST(NonFinite, OneRanksInfSkipsEverywhere) {
  tessera::context ctx(MPI_COMM_WORLD);
  const size_t n = total(kSizes);
  for (tsr_opt_dist d : {TSR_OPT_SHARDED, TSR_OPT_DATA_PARALLEL}) {
    for (tsr_opt_preset pr : {TSR_PRESET_LAMB_APEX, TSR_PRESET_LARS_MLPERF}) {
      tessera::optimizer opt(ctx, pr, kSizes, d);
      configure(opt);
      Params p(weights(n), false);
      ASSERT_TRUE(step(opt, p, grads(n, 1, world_rank(), false)));
      const std::vector<float> w1 = p.f, m1 = opt.state(TSR_OPT_STATE_M);
      std::vector<float> g = grads(n, 2, world_rank(), false);
      if (world_rank() == world_size() - 1) g[0] = std::numeric_limits<float>::infinity();  // in rank 0's slice
      EXPECT_FALSE(step(opt, p, g));
      EXPECT_EQ(p.f, w1);
      EXPECT_EQ(opt.state(TSR_OPT_STATE_M), m1);
      EXPECT_EQ(opt.steps(), 1);
      EXPECT_EQ(opt.skipped(), 1);
      EXPECT_EQ(opt.query(TSR_OPTQ_LAST_SKIPPED), 1);
      EXPECT_TRUE(step(opt, p, grads(n, 2, world_rank(), false)));
      EXPECT_EQ(opt.steps(), 2);
      EXPECT_EQ(opt.query(TSR_OPTQ_LAST_SKIPPED), 0);
    }
  }
}

// ------------------------------------------------------------ state files
std::string path_of(const std::string& name) { return g_dir + "/" + name; }

void expect_same_params(const tessera::optimizer& a, const tessera::optimizer& b) {
  for (int g = 0; g < static_cast<int>(a.query(TSR_OPTQ_GROUPS)); ++g)
    for (int p = 0; p < TSR_OPT_PARAM_COUNT; ++p) {
      EXPECT_EQ(a.get(static_cast<tsr_opt_param>(p), g), b.get(static_cast<tsr_opt_param>(p), g))
          << tsr_optimizer_param_name(static_cast<tsr_opt_param>(p)) << ", group " << g;
    }
}

TEST(StateFiles, RoundTripIsBitIdentical) {
  tessera::context ctx(MPI_COMM_WORLD);
  const size_t n = total(kSizes);
  for (tsr_opt_dist d : {TSR_OPT_SHARDED, TSR_OPT_DATA_PARALLEL}) {
    tessera::optimizer a(ctx, TSR_PRESET_LAMB_APEX, kSizes, d, TSR_BFLOAT16);
    configure(a);
    a.set(2, TSR_OPT_LR, 0.03).set(TSR_OPT_LOSS_SCALE, 8);
    Params pa(weights(n), true);
    for (int s = 1; s <= 2; ++s) ASSERT_TRUE(step(a, pa, grads(n, s, world_rank(), true)));
    std::vector<float> bad = grads(n, 3, world_rank(), true);
    bad[1] = std::numeric_limits<float>::quiet_NaN();
    ASSERT_FALSE(step(a, pa, bad));  // a skip, so that the counter is not 0
    const std::string file = path_of(d == TSR_OPT_SHARDED ? "lamb_sharded.state" : "lamb_dp.state");
    a.save(file);

    tessera::optimizer b(ctx, TSR_PRESET_LAMB_OPTAX, kSizes, d, TSR_BFLOAT16);  // other values everywhere
    b.load(file);
    expect_same_params(a, b);
    EXPECT_EQ(b.steps(), 2);
    EXPECT_EQ(b.skipped(), 1);
    for (tsr_opt_state st : {TSR_OPT_STATE_M, TSR_OPT_STATE_V, TSR_OPT_STATE_MASTER}) EXPECT_EQ(a.state(st), b.state(st));
    // The next step is the same on both, bit for bit.
    Params pb = pa;
    ASSERT_TRUE(step(a, pa, grads(n, 4, world_rank(), true)));
    ASSERT_TRUE(step(b, pb, grads(n, 4, world_rank(), true)));
    EXPECT_EQ(pa.b, pb.b);
    for (tsr_opt_state st : {TSR_OPT_STATE_M, TSR_OPT_STATE_V, TSR_OPT_STATE_MASTER}) EXPECT_EQ(a.state(st), b.state(st));
  }
}

TEST(StateFiles, LoadAtAnotherRankCount) {
  const int p = world_size(), r = world_rank();
  const size_t n = total(kSizes);
  tessera::context ctx(MPI_COMM_WORLD);
  tessera::optimizer a(ctx, TSR_PRESET_LARS_PAPER, kSizes, TSR_OPT_SHARDED);
  configure(a);
  Params pa(weights(n), false);
  for (int s = 1; s <= 2; ++s) ASSERT_TRUE(step(a, pa, grads(n, s, r, false)));
  const std::string file = path_of("lars_sharded.state");
  const tsr_counters c0 = tsr_test::counters(ctx.get());
  a.save(file);
  const tsr_counters c1 = tsr_test::counters(ctx.get());
  // Disk bytes: every rank writes its slice of the momentum; rank 0 also the
  // group sizes and the parameter table (HDF5: exactly that; TSRBIN01: plus
  // the header and table, docs/FILES.md).
  const uint64_t slice = 4 * static_cast<uint64_t>(a.query(TSR_OPTQ_SHARD_SIZE));
  const uint64_t small = 8 * kSizes.size() * (1 + TSR_OPT_PARAM_COUNT);
  const uint64_t wrote = c1.disk_write_bytes - c0.disk_write_bytes;
  if (r != 0 || TSR_HAVE_HDF5) { EXPECT_EQ(wrote, slice + (r == 0 ? small : 0)); }
  else { EXPECT_GT(wrote, slice + small); }
  const std::vector<float> all = gathered(a, TSR_OPT_STATE_M, MPI_COMM_WORLD);

  // One rank: a replicated optimizer on MPI_COMM_SELF (every rank reads all).
  {
    tessera::context self(MPI_COMM_SELF);
    tessera::optimizer one(self, TSR_PRESET_LARS_PAPER, kSizes, TSR_OPT_REPLICATED);
    one.load(file);
    EXPECT_EQ(one.state(TSR_OPT_STATE_M), all);
    expect_same_params(a, one);
    EXPECT_EQ(one.steps(), 2);
  }
  // p - 1 ranks (or 1): sharded again, other slices.
  MPI_Comm sub = MPI_COMM_NULL;
  const int in = p == 1 || r < p - 1;
  MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, r, &sub);
  if (in) {
    tessera::context subctx(sub);
    tessera::optimizer fewer(subctx, TSR_PRESET_LARS_PAPER, kSizes, TSR_OPT_SHARDED);
    fewer.load(file);
    const size_t off = static_cast<size_t>(fewer.query(TSR_OPTQ_SHARD_OFFSET));
    const std::vector<float> mine = fewer.state(TSR_OPT_STATE_M);
    EXPECT_EQ(mine, std::vector<float>(all.begin() + static_cast<long>(off), all.begin() + static_cast<long>(off + mine.size())));
    EXPECT_EQ(gathered(fewer, TSR_OPT_STATE_M, sub), all);
  }
  if (sub != MPI_COMM_NULL) MPI_Comm_free(&sub);
  // All ranks, data parallel (every rank holds everything), and on to a step
  // that equals the sharded optimizer's.
  tessera::optimizer dp(ctx, TSR_PRESET_LARS_PAPER, kSizes, TSR_OPT_DATA_PARALLEL);
  dp.load(file);
  EXPECT_EQ(dp.state(TSR_OPT_STATE_M), all);
  Params pd = pa;
  ASSERT_TRUE(step(a, pa, grads(n, 3, r, false)));
  ASSERT_TRUE(step(dp, pd, grads(n, 3, r, false)));
  EXPECT_TRUE(close(pa.f, pd.f, 1e-6));
}

TEST(StateFiles, ErrorsFailOnEveryRank) {
  tessera::context ctx(MPI_COMM_WORLD);
  const size_t n = total(kSizes);
  tessera::optimizer a(ctx, TSR_PRESET_LAMB_PAPER, kSizes, TSR_OPT_SHARDED);
  Params pa(weights(n), false);
  ASSERT_TRUE(step(a, pa, grads(n, 1, world_rank(), false)));
  const std::string file = path_of("errors.state");
  a.save(file);
  auto expect = [&](tessera::optimizer& o, const std::string& path, tsr_status want, const std::string& says) {
    try {
      o.load(path);
      ADD_FAILURE() << "no error: " << says;
    } catch (const tessera::error& e) {
      EXPECT_EQ(e.status(), want) << e.what();
      EXPECT_TRUE(tsr_test::contains(e.what(), says)) << e.what();
      EXPECT_TRUE(tsr_test::contains(e.what(), "tsr_optimizer_load")) << e.what();
    }
    EXPECT_EQ(o.steps(), 0);
  };
  std::vector<size_t> other = kSizes;
  other[2] += 1;
  tessera::optimizer wrong_sizes(ctx, TSR_PRESET_LAMB_PAPER, other, TSR_OPT_SHARDED);
  expect(wrong_sizes, file, TSR_ERR_SHAPE, "group 2 has 257 elements; in this optimizer it has 258");
  std::vector<size_t> fewer(kSizes.begin(), kSizes.end() - 1);
  tessera::optimizer wrong_groups(ctx, TSR_PRESET_LAMB_PAPER, fewer, TSR_OPT_SHARDED);
  expect(wrong_groups, file, TSR_ERR_SHAPE, "holds 7 groups; this optimizer has 6");
  tessera::optimizer lars(ctx, TSR_PRESET_LARS_PAPER, kSizes, TSR_OPT_SHARDED);
  expect(lars, file, TSR_ERR_INVALID_ARG, "holds a lamb state; this optimizer is lars");
  tessera::optimizer half(ctx, TSR_PRESET_LAMB_PAPER, kSizes, TSR_OPT_SHARDED, TSR_BFLOAT16);
  expect(half, file, TSR_ERR_INVALID_ARG, "holds float32 parameters' state; this optimizer has bfloat16 parameters");
  expect(half, path_of("missing.state"), TSR_ERR_IO, "missing.state");
  EXPECT_EQ(tsr_optimizer_load(half.get(), nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_optimizer_save(half.get(), nullptr), TSR_ERR_INVALID_ARG);
  EXPECT_EQ(tsr_optimizer_save(nullptr, file.c_str()), TSR_ERR_INVALID_ARG);
  // A tessera file that is not an optimizer state.
  if (world_rank() == 0) {
    std::FILE* f = std::fopen(path_of("not_a_state").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("plain text", f);
    std::fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect(half, path_of("not_a_state"), TSR_ERR_IO, "not_a_state");
}

class DirEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    char name[64] = "/tmp/tsr-opt-XXXXXX";
    if (world_rank() == 0 && mkdtemp(name) == nullptr) name[0] = '\0';
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    g_dir = name;
    ASSERT_FALSE(g_dir.empty()) << "mkdtemp failed";
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) {
      std::error_code ec;
      std::filesystem::remove_all(g_dir, ec);
    }
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new DirEnvironment);

}  // namespace

// Ring attention on CUDA device tensors (issue 17, docs/GPU.md "Ring
// attention"): tsr_attn_forward / tsr_attn_backward (every variant: ring,
// two-pass, all-to-all) with every tensor in
// device memory of the context's device, against the same calls on host
// tensors (the host ring attention, same ring) and against the float64
// reference of the CPU tests (tests/common/attn_reference.hpp, fed the
// float32-rounded inputs). Every layout, causal and not, with and without a
// key mask (including a batch row whose keys are all padding: out = 0,
// lse = -inf), GQA (kv_heads 4, 2, 1 for 4 query heads), head_dim 32 and 80,
// uneven shards.
//
// Tolerances (float32 on both paths, different summation orders), as the
// largest |x - want| over a tensor divided by max(1, max |want|):
//   against the host ring attention: 2e-5 for out and lse, 1e-4 for dq, dk,
//   dv (sums over many keys or queries, cancelling);
//   against the float64 reference: the same.
// -inf in lse exactly where the reference has it. Every case prints its
// measured figures (so a run on a GPU tells how far off a failure is).
//
// Bytes: the ledger of the device call equals that of the host call: the
// same control bytes, and the host's point-to-point payload (self/intra-node)
// charged as device_to_device_bytes (other nodes: the same p2p entries); no
// host<->device bytes (nothing staged). Workspace: tsr_ring_workspace_peak
// of a device call = tsr_attn_workspace less the host kernels' score tiles
// (all-to-all without a key mask: plus the padding mask, B x p*nmax bytes).
//
// Ranks: at 1 rank everything runs. At 2 and 4 ranks the ring must move
// device memory (NCCL between distinct GPUs, or CUDA-aware MPI): where it
// cannot (e.g. two ranks sharing one GPU without a CUDA-aware MPI) the
// library refuses with TSR_ERR_UNSUPPORTED and its message, which this test
// prints before exiting 77 (skipped). Exits 77 on every rank when some rank
// sees no CUDA device.
//
// The generic tsr_ring_exchange on device buffers: a circulated buffer
// gathered by a callback that queues copies on the context's stream, and a
// travelling sum (exact small-integer values).
//
// Bad input on every rank: device tensors with a context bound to no device
// (STATE), host and device tensors mixed in one call (INVALID_ARG), float64
// and head_dim > 256 on the device (UNSUPPORTED).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attn_reference.hpp"
#include "device.hpp"
#include "tessera/attention.h"
#include "tessera/device.h"
#include "tessera/tessera.h"

namespace {

using tsr_test::AttnFull;
using tsr_test::AttnRef;
using tsr_test::AttnShape;
using tsr_test::uniform;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int p = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

// A context bound to this rank's device (rank mod devices) and a stream of
// its own; a ring over MPI_COMM_WORLD created after binding.
struct Bound {
  tsr_context ctx = nullptr;
  tsr_ring ring = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  Bound() {
    int n = 0;
    EXPECT_EQ(tsr_device_count(&n), TSR_SUCCESS);
    device = world_rank() % std::max(n, 1);
    EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS) << tsr_last_error(nullptr);
    EXPECT_EQ(tsr_context_set_device(ctx, device, stream), TSR_SUCCESS) << tsr_last_error(ctx);
    EXPECT_EQ(tsr_ring_create_comm(ctx, MPI_COMM_WORLD, &ring), TSR_SUCCESS) << tsr_last_error(ctx);
  }
  ~Bound() {
    EXPECT_EQ(tsr_ring_destroy(&ring), TSR_SUCCESS);
    EXPECT_EQ(tsr_context_set_device(ctx, -1, nullptr), TSR_SUCCESS) << tsr_last_error(ctx);
    EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS) << tsr_last_error(ctx);
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  }
};

// Device copy of a host vector (at least one element, so that empty shards
// still have a device pointer).
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(const std::vector<T>& h) : n(h.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
    if (n > 0) {
      EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaGetLastError());
    if (n > 0) {
      EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return h;
  }
};

struct Case {
  tsr_attn_variant variant = TSR_ATTN_RING;
  tsr_attn_layout layout = TSR_ATTN_LAYOUT_CONTIGUOUS;
  bool causal = false;
  int mask = 0;  // 0: none; 1: some padding; 2: padding and batch 1 fully masked
  size_t B = 2, H = 4, G = 4, d = 32, N = 0;
  std::string str() const {
    static const char* names[] = {"contiguous", "zigzag", "striped"};
    char buf[180];
    std::snprintf(buf, sizeof buf, "%s %s causal=%d mask=%d B=%zu H=%zu G=%zu d=%zu N=%zu p=%d",
                  variant == TSR_ATTN_RING ? "ring" : variant == TSR_ATTN_ALLTOALL ? "all-to-all" : "two-pass",
                  names[layout], causal ? 1 : 0, mask, B, H, G, d, N, world_size());
    return buf;
  }
};

AttnFull make_full(const Case& c) {
  AttnFull f;
  auto fill = [](std::vector<double>& v, size_t n, uint64_t seed, double amp) {
    v.resize(n);
    // float32-rounded, so that the reference sees the kernels' inputs
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(amp * uniform(seed, i));
  };
  fill(f.q, c.B * c.H * c.N * c.d, 11, 1.5);
  fill(f.k, c.B * c.G * c.N * c.d, 12, 1.5);
  fill(f.v, c.B * c.G * c.N * c.d, 13, 1.0);
  fill(f.dout, c.B * c.H * c.N * c.d, 14, 1.0);
  if (c.mask > 0) {
    f.mask.assign(c.B * c.N, 1);
    for (size_t b = 0; b < c.B; ++b)
      for (size_t t = 0; t < c.N; ++t)
        if ((t * 7 + b * 3) % 5 == 0 || t + 4 >= c.N) f.mask[b * c.N + t] = 0;  // scattered and trailing padding
    if (c.mask == 2)
      for (size_t t = 0; t < c.N; ++t) f.mask[1 * c.N + t] = 0;
  }
  return f;
}

// This rank's shard of a natural-order tensor (outer, N, row) as T.
template <class T, class S>
std::vector<T> shard(const Case& c, const std::vector<S>& full, size_t outer, size_t row) {
  const int p = world_size(), r = world_rank();
  size_t n = 0;
  EXPECT_EQ(tsr_attn_shard_len(c.layout, c.N, p, r, &n), TSR_SUCCESS);
  std::vector<S> loc(outer * n * row);
  EXPECT_EQ(tsr_attn_shard_extract(c.layout, c.N, p, r, full.data(), loc.data(), outer, row * sizeof(S)),
            TSR_SUCCESS);
  return std::vector<T>(loc.begin(), loc.end());
}

// The largest |got - want| / max(1, max |want|); -inf must match exactly
// (counted in *inf_mismatch); NaN counts as infinite error.
double norm_err(const std::vector<float>& got, const std::vector<double>& want, size_t* inf_mismatch) {
  double scale = 1, worst = 0;
  for (double w : want)
    if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isinf(w) || std::isinf(g)) {
      if (!(std::isinf(w) && std::isinf(g) && (w < 0) == (g < 0))) ++*inf_mismatch;
      continue;
    }
    if (std::isnan(g)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::fabs(g - w) / scale);
  }
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  return worst;
}
std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

tsr_counters counters(tsr_context ctx) {
  tsr_counters c{};
  EXPECT_EQ(tsr_counters_get(ctx, "total", &c), TSR_SUCCESS) << tsr_last_error(ctx);
  return c;
}
// Data bytes this rank sent: point-to-point payload and modelled collective
// wire bytes, every peer class.
uint64_t p2p_bytes(const tsr_counters& c) {
  uint64_t b = 0;
  for (int k = 0; k < TSR_PEER_CLASSES; ++k) b += c.p2p_sent[k].bytes + c.coll_wire_sent[k].bytes;
  return b;
}

// One side's tensors of a call (host vectors, or device copies of them).
struct Side {
  std::vector<float> q, k, v, dout, o, lse, dq, dk, dv;
  std::vector<uint8_t> mask;
};

struct Result {
  std::vector<float> o, lse, dq, dk, dv;
  tsr_counters fwd{}, bwd{};
  size_t peak_fwd = 0, peak_bwd = 0;
};

// Runs forward then backward (with the forward's own out and lse) on host
// (device = false) or device copies of `in`.
Result run(Bound& b, const Case& c, const tsr_attn_config& cfg, const Side& in, bool device, tsr_status* st) {
  const int p = world_size(), r = world_rank();
  size_t n = 0;
  tsr_attn_shard_len(c.layout, c.N, p, r, &n);
  Result res;
  std::vector<float> o(c.B * c.H * n * c.d, 7.0f), lse(c.B * c.H * n, 7.0f), dq(o.size(), 7.0f),
      dk(c.B * c.G * n * c.d, 7.0f), dv(dk.size(), 7.0f);
  std::vector<uint8_t> mask = in.mask;
  Dev<float> Dq(in.q), Dk(in.k), Dv(in.v), Ddo(in.dout), Do(o), Dl(lse), Ddq(dq), Ddk(dk), Ddv(dv);
  Dev<uint8_t> Dm(mask);
  // A rank holding no token passes non-null pointers all the same: with
  // only NULL pointers it would follow the context's binding (device).
  static float host_dummy[1];
  static uint8_t host_dummy8[1];
  auto P = [&](Dev<float>& dv_, std::vector<float>& hv) -> void* {
    return device ? static_cast<void*>(dv_.p) : hv.empty() ? static_cast<void*>(host_dummy) : hv.data();
  };
  std::vector<float> q = in.q, k = in.k, v = in.v, dout = in.dout;
  tsr_attn_tensor tq{P(Dq, q), c.B, c.H, n, c.d}, tk{P(Dk, k), c.B, c.G, n, c.d}, tv{P(Dv, v), c.B, c.G, n, c.d};
  tsr_attn_tensor tdo{P(Ddo, dout), c.B, c.H, n, c.d}, to{P(Do, o), c.B, c.H, n, c.d}, tl{P(Dl, lse), c.B, c.H, n, 1};
  tsr_attn_tensor tdq{P(Ddq, dq), c.B, c.H, n, c.d}, tdk{P(Ddk, dk), c.B, c.G, n, c.d}, tdv{P(Ddv, dv), c.B, c.G, n, c.d};
  tsr_attn_tensor tm{device ? static_cast<void*>(Dm.p) : mask.empty() ? static_cast<void*>(host_dummy8) : mask.data(),
                     c.B, 1, n, 1};
  const tsr_attn_tensor* m = c.mask ? &tm : nullptr;
  size_t dummy = 0;
  EXPECT_EQ(tsr_ring_workspace_peak(b.ring, &dummy, 1), TSR_SUCCESS);
  EXPECT_EQ(tsr_counters_reset(b.ctx), TSR_SUCCESS);
  *st = tsr_attn_forward(b.ring, &cfg, &tq, &tk, &tv, m, &to, &tl);
  if (*st != TSR_SUCCESS) return res;
  if (device) {
    EXPECT_EQ(cudaStreamSynchronize(b.stream), cudaSuccess);
  }
  res.fwd = counters(b.ctx);
  EXPECT_EQ(tsr_ring_workspace_peak(b.ring, &res.peak_fwd, 1), TSR_SUCCESS);
  EXPECT_EQ(tsr_counters_reset(b.ctx), TSR_SUCCESS);
  *st = tsr_attn_backward(b.ring, &cfg, &tq, &tk, &tv, m, &to, &tl, &tdo, &tdq, &tdk, &tdv);
  if (*st != TSR_SUCCESS) return res;
  if (device) {
    EXPECT_EQ(cudaStreamSynchronize(b.stream), cudaSuccess);
  }
  res.bwd = counters(b.ctx);
  EXPECT_EQ(tsr_ring_workspace_peak(b.ring, &res.peak_bwd, 1), TSR_SUCCESS);
  if (device) {
    res.o = Do.get(), res.lse = Dl.get(), res.dq = Ddq.get(), res.dk = Ddk.get(), res.dv = Ddv.get();
  } else {
    res.o = o, res.lse = lse, res.dq = dq, res.dk = dk, res.dv = dv;
  }
  return res;
}

void expect_same_bytes(const char* what, const tsr_counters& h, const tsr_counters& d) {
  EXPECT_EQ(d.control.bytes, h.control.bytes) << what << ": control bytes";
  EXPECT_EQ(d.control.messages, h.control.messages) << what << ": control messages";
  // The host's self/intra-node payload is device to device on the device;
  // inter-node payload stays in the p2p entries.
  EXPECT_EQ(p2p_bytes(d) + d.device_to_device_bytes, p2p_bytes(h)) << what << ": data bytes";
  EXPECT_EQ(d.p2p_sent[TSR_PEER_REMOTE].bytes, h.p2p_sent[TSR_PEER_REMOTE].bytes) << what << ": inter-node bytes";
  EXPECT_EQ(d.coll_wire_sent[TSR_PEER_REMOTE].bytes, h.coll_wire_sent[TSR_PEER_REMOTE].bytes) << what;
  EXPECT_EQ(d.coll_payload_sent, h.coll_payload_sent) << what << ": collective payload";
  EXPECT_EQ(d.coll_payload_recv, h.coll_payload_recv) << what << ": collective payload";
  for (int k = 0; k < TSR_COLL_KINDS; ++k) EXPECT_EQ(d.coll_calls[k], h.coll_calls[k]) << what << ": collective " << k;
  EXPECT_EQ(d.host_to_device_bytes, 0u) << what << ": nothing is staged through host memory";
  EXPECT_EQ(d.device_to_host_bytes, 0u) << what << ": nothing is staged through host memory";
  EXPECT_EQ(h.device_to_device_bytes, 0u) << what;
}

void check_case(Bound& b, const Case& c) {
  SCOPED_TRACE(c.str());
  const AttnFull f = make_full(c);
  AttnShape as;
  as.B = c.B, as.H = c.H, as.G = c.G, as.N = c.N, as.d = c.d, as.causal = c.causal;
  as.scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  const AttnRef ref = tsr_test::attention_reference(as, f);
  tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
  cfg.variant = c.variant;
  cfg.layout = c.layout;
  cfg.causal = c.causal;
  cfg.seq_len = c.N;
  Side in;
  in.q = shard<float>(c, f.q, c.B * c.H, c.d);
  in.k = shard<float>(c, f.k, c.B * c.G, c.d);
  in.v = shard<float>(c, f.v, c.B * c.G, c.d);
  in.dout = shard<float>(c, f.dout, c.B * c.H, c.d);
  if (c.mask) in.mask = shard<uint8_t>(c, f.mask, c.B, 1);
  tsr_status hs = TSR_SUCCESS, ds = TSR_SUCCESS;
  const Result h = run(b, c, cfg, in, false, &hs);
  ASSERT_EQ(hs, TSR_SUCCESS) << "host: " << tsr_last_error(b.ctx);
  const Result d = run(b, c, cfg, in, true, &ds);
  ASSERT_EQ(ds, TSR_SUCCESS) << "device: " << tsr_last_error(b.ctx);
  struct T {
    const char* name;
    const std::vector<float>& dev;
    const std::vector<float>& host;
    std::vector<double> ref;
    double tol;
  };
  const T ts[] = {{"out", d.o, h.o, shard<double>(c, ref.o, c.B * c.H, c.d), 2e-5},
                  {"lse", d.lse, h.lse, shard<double>(c, ref.lse, c.B * c.H, 1), 2e-5},
                  {"dq", d.dq, h.dq, shard<double>(c, ref.dq, c.B * c.H, c.d), 1e-4},
                  {"dk", d.dk, h.dk, shard<double>(c, ref.dk, c.B * c.G, c.d), 1e-4},
                  {"dv", d.dv, h.dv, shard<double>(c, ref.dv, c.B * c.G, c.d), 1e-4}};
  std::string line = "[rank " + std::to_string(world_rank()) + "] " + c.str() + ":";
  for (const T& t : ts) {
    size_t inf_h = 0, inf_r = 0;
    const double eh = norm_err(t.dev, widen(t.host), &inf_h);
    const double er = norm_err(t.dev, t.ref, &inf_r);
    char buf[128];
    std::snprintf(buf, sizeof buf, " %s %.1e/%.1e", t.name, eh, er);
    line += buf;
    EXPECT_LE(eh, t.tol) << t.name << ": device vs host ring attention";
    EXPECT_LE(er, t.tol) << t.name << ": device vs float64 reference";
    EXPECT_EQ(inf_h, 0u) << t.name << ": -inf (or inf) where the host result has none, or the reverse";
    EXPECT_EQ(inf_r, 0u) << t.name << ": -inf (or inf) where the reference has none, or the reverse";
  }
  std::printf("%s (normalised max error vs host / vs float64)\n", line.c_str());
  expect_same_bytes("forward", h.fwd, d.fwd);
  expect_same_bytes("backward", h.bwd, d.bwd);
  // Workspace: the formula less the host kernels' score tiles (64 x 128
  // floats, two in the backward).
  const int p = world_size(), r = world_rank();
  size_t wf = 0, wb = 0;
  ASSERT_EQ(tsr_attn_workspace(&cfg, p, r, c.B, c.H, c.G, c.d, c.mask ? 1 : 0, 0, &wf), TSR_SUCCESS);
  ASSERT_EQ(tsr_attn_workspace(&cfg, p, r, c.B, c.H, c.G, c.d, c.mask ? 1 : 0, 1, &wb), TSR_SUCCESS);
  EXPECT_EQ(h.peak_fwd, wf);
  EXPECT_EQ(h.peak_bwd, wb);
  // All-to-all on the device: plus a full-sequence key mask (B x p*nmax
  // bytes) for the padding when the call has none.
  size_t pad = 0;
  const size_t tiles = c.variant == TSR_ATTN_RING_TWO_PASS ? 0 : 64 * 128 * sizeof(float);  // none in two-pass
  if (c.variant == TSR_ATTN_ALLTOALL && !c.mask) {
    size_t nmax = 0;
    for (int j = 0; j < p; ++j) {
      size_t nj = 0;
      ASSERT_EQ(tsr_attn_shard_len(c.layout, c.N, p, j, &nj), TSR_SUCCESS);
      nmax = std::max(nmax, nj);
    }
    pad = c.B * static_cast<size_t>(p) * nmax;
  }
  EXPECT_EQ(d.peak_fwd, wf - tiles + pad);
  EXPECT_EQ(d.peak_bwd, wb - 2 * tiles + pad);
}

size_t seq_for(int p) { return 61 * static_cast<size_t>(p) + 5; }  // uneven shards at every p

TEST(CudaAttention, EveryLayoutCausalMaskGqa) {
  Bound b;
  const tsr_attn_layout layouts[] = {TSR_ATTN_LAYOUT_CONTIGUOUS, TSR_ATTN_LAYOUT_ZIGZAG, TSR_ATTN_LAYOUT_STRIPED};
  for (tsr_attn_layout l : layouts)
    for (int causal = 0; causal < 2; ++causal)
      for (int mask = 0; mask < 3; mask += 2)
        for (size_t G : {size_t(4), size_t(2)}) {
          Case c;
          c.layout = l, c.causal = causal != 0, c.mask = mask, c.G = G, c.N = seq_for(world_size());
          check_case(b, c);
        }
}

// All-to-all (heads scattered, the block over the whole padded sequence).
TEST(CudaAttention, AllToAllEveryLayoutCausalMask) {
  Bound b;
  const int p = world_size();
  const tsr_attn_layout layouts[] = {TSR_ATTN_LAYOUT_CONTIGUOUS, TSR_ATTN_LAYOUT_ZIGZAG, TSR_ATTN_LAYOUT_STRIPED};
  for (tsr_attn_layout l : layouts)
    for (int causal = 0; causal < 2; ++causal)
      for (int mask = 0; mask < 3; mask += 2)
        for (size_t G : {size_t(4), size_t(2)}) {
          if (G % static_cast<size_t>(p) != 0) continue;  // p must divide the kv heads
          Case c;
          c.variant = TSR_ATTN_ALLTOALL;
          c.layout = l, c.causal = causal != 0, c.mask = mask, c.G = G, c.N = seq_for(p);
          check_case(b, c);
        }
}

// The two-pass baseline (full score rows, plain kernels).
TEST(CudaAttention, TwoPassEveryLayoutCausalMask) {
  Bound b;
  const tsr_attn_layout layouts[] = {TSR_ATTN_LAYOUT_CONTIGUOUS, TSR_ATTN_LAYOUT_ZIGZAG, TSR_ATTN_LAYOUT_STRIPED};
  for (tsr_attn_layout l : layouts)
    for (int causal = 0; causal < 2; ++causal)
      for (int mask = 0; mask < 3; mask += 2) {
        Case c;
        c.variant = TSR_ATTN_RING_TWO_PASS;
        c.layout = l, c.causal = causal != 0, c.mask = mask, c.G = causal ? 2 : 4, c.N = seq_for(world_size());
        check_case(b, c);
      }
}

TEST(CudaAttention, HeadDimsAndMqa) {
  Bound b;
  Case c;
  c.N = seq_for(world_size()) + 40;
  c.d = 80, c.G = 1, c.causal = true, c.mask = 1, c.layout = TSR_ATTN_LAYOUT_ZIGZAG;
  check_case(b, c);
  c.d = 128, c.G = 2, c.B = 1, c.causal = false, c.mask = 0, c.layout = TSR_ATTN_LAYOUT_CONTIGUOUS;
  check_case(b, c);
  c.d = 256, c.H = 2, c.G = 2, c.causal = true, c.layout = TSR_ATTN_LAYOUT_STRIPED, c.N = 3;  // tokens < ranks at p=4
  check_case(b, c);
}

// The generic ring exchange on device buffers: a CIRCULATE buffer (counts
// differ per rank) gathered by the callback with cudaMemcpyAsync on the
// context's stream, and an ACCUMULATE buffer whose travelling sums the
// engine zeroes and adds on the device; exact values (small integers).
struct Gather {
  cudaStream_t stream;
  float* all;                  // device: every rank's block at its offset
  const float* contrib;        // device: this rank's contribution per source (p x maxc)
  std::vector<size_t> offs;
  size_t maxc;
};
tsr_status gather_step(const tsr_ring_step* st, void* user) {
  Gather* g = static_cast<Gather*>(user);
  const size_t n = st->counts[0];
  if (n > 0 && cudaMemcpyAsync(g->all + g->offs[static_cast<size_t>(st->source)], st->blocks[0], n * sizeof(float),
                               cudaMemcpyDeviceToDevice, g->stream) != cudaSuccess)
    return TSR_ERR_INTERNAL;
  const size_t m = st->counts[1];
  if (m > 0 && cudaMemcpyAsync(st->blocks[1], g->contrib + static_cast<size_t>(st->source) * g->maxc, m * sizeof(float),
                               cudaMemcpyDeviceToDevice, g->stream) != cudaSuccess)
    return TSR_ERR_INTERNAL;
  return TSR_SUCCESS;
}

TEST(CudaAttention, RingExchangeOnDeviceBuffers) {
  Bound b;
  const int p = world_size(), r = world_rank();
  auto count = [](int j) { return static_cast<size_t>(5 + 3 * j); };
  std::vector<size_t> offs(static_cast<size_t>(p) + 1, 0);
  for (int j = 0; j < p; ++j) offs[static_cast<size_t>(j) + 1] = offs[static_cast<size_t>(j)] + count(j);
  const size_t maxc = count(p - 1), n = count(r);
  std::vector<float> mine(n), contrib(static_cast<size_t>(p) * maxc, 0.0f);
  for (size_t i = 0; i < n; ++i) mine[i] = static_cast<float>(100 * r + static_cast<int>(i));
  for (int src = 0; src < p; ++src)
    for (size_t i = 0; i < count(src); ++i)
      contrib[static_cast<size_t>(src) * maxc + i] = static_cast<float>((r + 1) * 1000 + src * 10 + static_cast<int>(i % 7));
  Dev<float> dmine(mine), dcontrib(contrib), dall(std::vector<float>(offs.back(), -1.0f)), dsum(std::vector<float>(n, 7.0f));
  Gather g{b.stream, dall.p, dcontrib.p, offs, maxc};
  tsr_ring_buffer bufs[2] = {{dmine.p, n, TSR_FLOAT32, TSR_RING_CIRCULATE}, {dsum.p, n, TSR_FLOAT32, TSR_RING_ACCUMULATE}};
  ASSERT_EQ(tsr_ring_exchange(b.ring, bufs, 2, gather_step, &g), TSR_SUCCESS) << tsr_last_error(b.ctx);
  const std::vector<float> all = dall.get(), sum = dsum.get();
  for (int j = 0; j < p; ++j)
    for (size_t i = 0; i < count(j); ++i)
      EXPECT_EQ(all[offs[static_cast<size_t>(j)] + i], static_cast<float>(100 * j + static_cast<int>(i))) << j << " " << i;
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(sum[i], static_cast<float>(1000 * p * (p + 1) / 2 + p * (r * 10 + static_cast<int>(i % 7)))) << i;
  // Host and device buffers mixed: refused on every rank.
  std::vector<float> h(n + 1, 1.0f);
  tsr_ring_buffer mixed[2] = {{dmine.p, n, TSR_FLOAT32, TSR_RING_CIRCULATE}, {h.data(), n, TSR_FLOAT32, TSR_RING_ACCUMULATE}};
  EXPECT_EQ(tsr_ring_exchange(b.ring, mixed, 2, gather_step, &g), TSR_ERR_INVALID_ARG);
  EXPECT_NE(std::string(tsr_last_error(b.ctx)).find("buffers[1].data is host memory but buffers[0].data is CUDA device"),
            std::string::npos) << tsr_last_error(b.ctx);
}

// The status every rank gets, and the message of this rank.
void expect_status(tsr_status got, tsr_status want, tsr_context ctx, const char* needle) {
  EXPECT_EQ(got, want) << tsr_last_error(ctx);
  const std::string msg = tsr_last_error(ctx);
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  int mine = got == want ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(all, 1) << "some rank got another status";
}

TEST(CudaAttention, BadInputOnEveryRank) {
  const int p = world_size(), r = world_rank();
  const size_t N = 8 * static_cast<size_t>(p), n = 8, d = 16;
  std::vector<float> h(n * d, 0.25f), hl(n, 0.0f);
  Dev<float> dq(h), dk(h), dv(h), dout(h), dl(hl);
  tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
  cfg.seq_len = N;
  {  // device tensors, context bound to no device
    tsr_context ctx = nullptr;
    ASSERT_EQ(tsr_context_create(MPI_COMM_WORLD, &ctx), TSR_SUCCESS);
    tsr_ring ring = nullptr;
    ASSERT_EQ(tsr_ring_create_comm(ctx, MPI_COMM_WORLD, &ring), TSR_SUCCESS) << tsr_last_error(ctx);
    tsr_attn_tensor tq{dq.p, 1, 1, n, d}, tk{dk.p, 1, 1, n, d}, tv{dv.p, 1, 1, n, d}, to{dout.p, 1, 1, n, d},
        tl{dl.p, 1, 1, n, 1};
    expect_status(tsr_attn_forward(ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl), TSR_ERR_STATE, ctx,
                  "bound to no device");
    EXPECT_EQ(tsr_ring_destroy(&ring), TSR_SUCCESS);
    EXPECT_EQ(tsr_context_destroy(&ctx), TSR_SUCCESS);
  }
  Bound b;
  std::vector<float> ho(n * d), hlse(n);
  Dev<float> dout2(h), dl2(hl);
  tsr_attn_tensor tq{dq.p, 1, 1, n, d}, tk{dk.p, 1, 1, n, d}, tv{dv.p, 1, 1, n, d}, to{dout2.p, 1, 1, n, d},
      tl{dl2.p, 1, 1, n, 1};
  // Host and device tensors mixed (on rank 0 only: every rank fails).
  {
    std::vector<float> kh = h;
    tsr_attn_tensor tkh{kh.data(), 1, 1, n, d};
    const tsr_status st = tsr_attn_forward(b.ring, &cfg, &tq, r == 0 ? &tkh : &tk, &tv, nullptr, &to, &tl);
    EXPECT_EQ(st, TSR_ERR_INVALID_ARG) << tsr_last_error(b.ctx);
    int mine = st == TSR_ERR_INVALID_ARG ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    EXPECT_EQ(all, 1) << "some rank did not fail";
    if (r == 0) {
      EXPECT_NE(std::string(tsr_last_error(b.ctx)).find("k.data is host memory but q.data is CUDA device memory"),
                std::string::npos) << tsr_last_error(b.ctx);
    }
  }
  {  // one rank's tensors all on the host, the others' on the device
    std::vector<float> a = h, bb = h, c2 = h, o2(n * d), l2(n);
    tsr_attn_tensor hq{a.data(), 1, 1, n, d}, hk2{bb.data(), 1, 1, n, d}, hv{c2.data(), 1, 1, n, d},
        ho2{o2.data(), 1, 1, n, d}, hl2{l2.data(), 1, 1, n, 1};
    const bool host = p > 1 && r == p - 1;
    const tsr_status st = host ? tsr_attn_forward(b.ring, &cfg, &hq, &hk2, &hv, nullptr, &ho2, &hl2)
                               : tsr_attn_forward(b.ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl);
    if (p > 1) expect_status(st, TSR_ERR_INVALID_ARG, b.ctx, "memory (0: host, 1: CUDA device)");
    else EXPECT_EQ(st, TSR_SUCCESS) << tsr_last_error(b.ctx);
  }
  {  // float64 on the device
    tsr_attn_config c64 = cfg;
    c64.type = TSR_FLOAT64;
    Dev<double> q64(std::vector<double>(n * d, 0.5)), k64(std::vector<double>(n * d, 0.5)),
        v64(std::vector<double>(n * d, 0.5)), o64(std::vector<double>(n * d)), l64{std::vector<double>(n)};
    tsr_attn_tensor a{q64.p, 1, 1, n, d}, bk{k64.p, 1, 1, n, d}, cv{v64.p, 1, 1, n, d}, od{o64.p, 1, 1, n, d},
        ld{l64.p, 1, 1, n, 1};
    expect_status(tsr_attn_forward(b.ring, &c64, &a, &bk, &cv, nullptr, &od, &ld), TSR_ERR_UNSUPPORTED, b.ctx,
                  "TSR_FLOAT32");
  }
  {  // head_dim beyond the CUDA kernels' 256
    const size_t dd = 264;
    Dev<float> a(std::vector<float>(n * dd, 0.1f)), bk(std::vector<float>(n * dd, 0.1f)),
        cv(std::vector<float>(n * dd, 0.1f)), od(std::vector<float>(n * dd)), ld{std::vector<float>(n)};
    tsr_attn_tensor ta{a.p, 1, 1, n, dd}, tb{bk.p, 1, 1, n, dd}, tc{cv.p, 1, 1, n, dd}, tod{od.p, 1, 1, n, dd},
        tld{ld.p, 1, 1, n, 1};
    expect_status(tsr_attn_forward(b.ring, &cfg, &ta, &tb, &tc, nullptr, &tod, &tld), TSR_ERR_UNSUPPORTED, b.ctx,
                  "head_dim 1 .. 256");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 2;
  const int mine = tsr::device::available() ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (world_rank() == 0)
      std::printf("SKIP: test_cuda_attention needs a CUDA device on every rank; some rank sees none\n");
    MPI_Finalize();
    return 77;
  }
  // Several ranks: can the ring move device memory here? A small forward
  // tells (the library's own message when it cannot).
  if (world_size() > 1) {
    tsr_status st = TSR_SUCCESS;
    std::string why;
    {
      Bound b;
      const size_t n = 4, d = 8;
      std::vector<float> h(n * d, 0.5f), hl(n);
      Dev<float> q(h), k(h), v(h), o(h), l(hl);
      tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
      cfg.seq_len = n * static_cast<size_t>(world_size());
      tsr_attn_tensor tq{q.p, 1, 1, n, d}, tk{k.p, 1, 1, n, d}, tv{v.p, 1, 1, n, d}, to{o.p, 1, 1, n, d},
          tl{l.p, 1, 1, n, 1};
      st = tsr_attn_forward(b.ring, &cfg, &tq, &tk, &tv, nullptr, &to, &tl);
      why = tsr_last_error(b.ctx);
      cudaDeviceSynchronize();
    }
    if (st == TSR_ERR_UNSUPPORTED) {
      if (world_rank() == 0)
        std::printf("SKIP: test_cuda_attention at %d ranks: the ring cannot move device memory here: %s\n",
                    world_size(), why.c_str());
      MPI_Finalize();
      return 77;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int local = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}

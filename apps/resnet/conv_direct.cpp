// Direct convolution kernels (conv_direct.hpp).
//
// The computation, for one image: the input x[C][H][W] is copied into a
// zero-padded plane xp[C][Hp][Wp] (Hp = H + 2 pad, Wp = W + 2 pad). Output
// position (oy, ox) is numbered q = oy * Wp + ox, and reads
// xp[c][q + ky*Wp + kx] for tap (ky, kx): an address linear in q. Stride 2
// is made stride 1 the same way after splitting the padded plane into its 4
// phases (even/odd rows x even/odd columns, each ceil(Hp/2) x ceil(Wp/2)):
// tap (ky, kx) then reads phase (ky%2, kx%2) at q + (ky/2)*Wp2 + kx/2 with
// q = oy * Wp2 + ox. The kernel computes a block of NP consecutive q
// (NP a compile-time constant, so the NP input addresses are constant offsets
// of one pointer) for KV vectors of output channels (the channels in the
// lanes: the packed weights are wp[c][ky][kx][k], k contiguous), in NP x KV
// vector registers: per input channel and tap, KV vector loads of weights
// and NP broadcasts of inputs feed NP x KV fused multiply-adds. The q with
// ox >= Wo (the 2 padding columns of a row) are computed and dropped: 7 %
// of the work at 28x28, 14 % at 14x14, 29 % at 7x7. No im2col matrix, no GEMM
// packing, and the output goes straight to its CNHW place.
//
// The backward data pass (stride 1) is the same kernel: dx is the
// convolution of dy, padded by R-1-pad, with w'[k][c][ky][kx] = w[k][c][R-1-ky][R-1-kx]
// (input channels k, output channels c).
//
// The kernels are written with GCC/Clang vector types and compiled for each
// instruction set through function target attributes (no -m flags on this
// file, so nothing else in it, and nothing from the headers, uses
// instructions the CPU may lack); cpuid picks one at run time. The file is
// compiled with -ffp-contract=fast so that acc += w * x becomes one FMA.
#include "conv_direct.hpp"

#include <cstdlib>
#include <cstring>
#include <vector>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define TSR_RN_X86 1
#else
#define TSR_RN_X86 0
#endif

namespace resnet {
namespace {

struct Geo {
  int Cin, H, W;       // input channels and plane
  int Kout, R, S, pad;  // output channels, kernel, stride, padding
  int Ho, Wo;           // output plane
  int Hp, Wp;           // padded input plane
  int Wq;               // row pitch of q: Wp (stride 1) or the phase width ceil(Wp/2) (stride 2)
  int Hq;               // phase height ceil(Hp/2) (stride 2)
  int Kp;               // Kout rounded up to the vector width
  std::size_t plane;    // floats per channel: Hp * Wp, or 4 phases of Hq * Wq
  int Q;                // Ho * Wq positions computed per image
  int tapoff[49];       // offset of tap t = ky*R + kx from the address of q
};

int detect_width() {
#if TSR_RN_X86
  const char* env = std::getenv("TSR_RESNET_DIRECT");
  if (env && std::strcmp(env, "0") == 0) return 0;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
#endif
  return 0;
}
int best_width() {
  static const int w = detect_width();
  return w;
}
int& width_now() {
  static int w = best_width();
  return w;
}

#if TSR_RN_X86
#define TSR_RN_INLINE inline __attribute__((always_inline))

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

// One block: NP positions (q0 .. q0+NP-1, x already offset by S*q0) times
// KV vectors of L output channels (w already offset to the first channel).
// tile[j][KV*L] receives the sums.
template <class Vt, int L, int KV, int NP>
TSR_RN_INLINE void block(const float* x, std::size_t plane, int Cin, int T, const int* tapoff, const float* w,
                         int Kp, float* tile) {
  Vt acc[KV][NP];
#pragma GCC unroll 8
  for (int kv = 0; kv < KV; ++kv)
#pragma GCC unroll 32
    for (int j = 0; j < NP; ++j) acc[kv][j] = Vt{};
  const std::size_t wstep = static_cast<std::size_t>(T) * Kp;
  for (int c = 0; c < Cin; ++c, x += plane, w += wstep) {
    for (int t = 0; t < T; ++t) {
        const float* xt = x + tapoff[t];
        const float* wt = w + t * Kp;
        Vt wv[KV];
#pragma GCC unroll 8
        for (int kv = 0; kv < KV; ++kv) std::memcpy(&wv[kv], wt + kv * L, sizeof(Vt));
#pragma GCC unroll 32
        for (int j = 0; j < NP; ++j) {
          const float s = xt[j];
#pragma GCC unroll 8
          for (int kv = 0; kv < KV; ++kv) acc[kv][j] += wv[kv] * s;
        }
    }
  }
#pragma GCC unroll 8
  for (int kv = 0; kv < KV; ++kv)
#pragma GCC unroll 32
    for (int j = 0; j < NP; ++j) std::memcpy(tile + (j * KV + kv) * L, &acc[kv][j], sizeof(Vt));
}

// All positions of one image for output-channel vectors [kv0, kv0 + KV).
template <class Vt, int L, int KV, int NP>
TSR_RN_INLINE void image_rows(const Geo& g, const float* xp, const float* wp, int kv0, float* y, std::size_t ystride,
                              float* tile) {
  const float* w = wp + static_cast<std::size_t>(kv0) * L;
  const int k0 = kv0 * L, k1 = g.Kout < k0 + KV * L ? g.Kout : k0 + KV * L;
  for (int q0 = 0; q0 < g.Q; q0 += NP) {
    block<Vt, L, KV, NP>(xp + q0, g.plane, g.Cin, g.R * g.R, g.tapoff, w, g.Kp, tile);
    // Scatter the valid positions to y[k][oy*Wo + ox].
    int pos[NP], src[NP], nv = 0;
    for (int j = 0, q = q0, oy = q0 / g.Wq, ox = q0 - oy * g.Wq; j < NP && q < g.Q; ++j, ++q) {
      if (ox < g.Wo) {
        pos[nv] = oy * g.Wo + ox;
        src[nv++] = j * KV * L;
      }
      if (++ox == g.Wq) {
        ox = 0;
        ++oy;
      }
    }
    for (int k = k0; k < k1; ++k) {
      float* yk = y + static_cast<std::size_t>(k) * ystride;
      const float* t = tile + (k - k0);
      for (int i = 0; i < nv; ++i) yk[pos[i]] = t[src[i]];
    }
  }
}

template <class Vt, int L>
TSR_RN_INLINE void image_all(const Geo& g, const float* xp, const float* wp, float* y, std::size_t ystride,
                             float* tile) {
  // Register budget: NP x KV accumulators + KV weight vectors + 1 broadcast
  // within the 32 (AVX-512) or 16 (AVX2) vector registers.
  constexpr int P = L == 16 ? 24 : 12;
  const int nvec = g.Kp / L;
  int kv0 = 0;
  for (; nvec - kv0 >= 4 && L == 16; kv0 += 4) image_rows<Vt, L, 4, P / 4>(g, xp, wp, kv0, y, ystride, tile);
  for (; nvec - kv0 >= 3; kv0 += 3) image_rows<Vt, L, 3, P / 3>(g, xp, wp, kv0, y, ystride, tile);
  for (; nvec - kv0 >= 2; kv0 += 2) image_rows<Vt, L, 2, P / 2>(g, xp, wp, kv0, y, ystride, tile);
  for (; nvec - kv0 >= 1; kv0 += 1) image_rows<Vt, L, 1, P>(g, xp, wp, kv0, y, ystride, tile);
}

// Image n of x[Cin][N][H][W] into its padded plane(s): channel c at
// xp + c * cpitch (the padding, zeroed by the caller, is never written).
TSR_RN_INLINE void pad_image(const Geo& g, int N, const float* x, int n, float* xp, std::size_t cpitch) {
  const std::size_t in_plane = static_cast<std::size_t>(g.H) * g.W;
  for (int c = 0; c < g.Cin; ++c) {
    const float* src = x + (static_cast<std::size_t>(c) * N + n) * in_plane;
    float* xc = xp + static_cast<std::size_t>(c) * cpitch;
    if (g.S == 1) {
      // Rows of 7..28 floats: a loop, not a libc memcpy call per row.
      float* dst = xc + static_cast<std::size_t>(g.pad) * g.Wp + g.pad;
      for (int iy = 0; iy < g.H; ++iy) {
        float* d = dst + static_cast<std::size_t>(iy) * g.Wp;
        const float* r = src + static_cast<std::size_t>(iy) * g.W;
        for (int ix = 0; ix < g.W; ++ix) d[ix] = r[ix];
      }
    } else {
      // Padded pixel (py, px) goes to phase (py%2, px%2) at (py/2, px/2).
      const std::size_t ph = static_cast<std::size_t>(g.Hq) * g.Wq;
      for (int iy = 0; iy < g.H; ++iy) {
        const int py = iy + g.pad;
        for (int ix = 0; ix < g.W; ++ix) {
          const int px = ix + g.pad;
          xc[((py & 1) * 2 + (px & 1)) * ph + static_cast<std::size_t>(py >> 1) * g.Wq + (px >> 1)] =
              src[static_cast<std::size_t>(iy) * g.W + ix];
        }
      }
    }
  }
}

// The whole batch: pad-copy each image, then all its positions and channels.
template <class Vt, int L>
TSR_RN_INLINE void run(const Geo& g, int N, const float* x, const float* wp, float* y, float* xp, float* tile) {
  const std::size_t out_plane = static_cast<std::size_t>(g.Ho) * g.Wo;
  const std::size_t ystride = static_cast<std::size_t>(N) * out_plane;
  for (int n = 0; n < N; ++n) {
    pad_image(g, N, x, n, xp, g.plane);
    image_all<Vt, L>(g, xp, wp, y + static_cast<std::size_t>(n) * out_plane, ystride, tile);
  }
}

// ---- Weight gradient: dw[k][c][t] += sum over images and positions q of
// dyq[k][q] * xp[c][q + tapoff[t]], vectorised over q (dyq: dy on the q grid,
// zero at the dropped columns and beyond Q). A block holds KB output
// channels x T taps of one input channel in registers; per vector of q:
// KB loads of dy, T (unaligned) loads of x, KB x T FMAs. The lane sums stay
// vectors in part[k][c][t][L] until the end of the batch.
template <class Vt, int L, int T, int KB>
TSR_RN_INLINE void dw_block(const float* dy, std::size_t dy_k, std::size_t dy_n, const float* xc, std::size_t x_n,
                            int nc, int Qp, const int* tapoff, float* part, std::size_t part_k) {
  Vt acc[KB][T];
#pragma GCC unroll 8
  for (int b = 0; b < KB; ++b)
#pragma GCC unroll 32
    for (int t = 0; t < T; ++t) std::memcpy(&acc[b][t], part + b * part_k + t * L, sizeof(Vt));
  for (int n = 0; n < nc; ++n) {
    const float* dn = dy + n * dy_n;
    const float* xn = xc + n * x_n;
    for (int q = 0; q < Qp; q += L) {
      Vt d[KB];
#pragma GCC unroll 8
      for (int b = 0; b < KB; ++b) std::memcpy(&d[b], dn + b * dy_k + q, sizeof(Vt));
#pragma GCC unroll 32
      for (int t = 0; t < T; ++t) {
        Vt xv;
        std::memcpy(&xv, xn + q + tapoff[t], sizeof(Vt));
        // Keep xv in a register: otherwise GCC folds the (mostly cache-line
        // splitting) load into each of the KB FMAs, and the loop is
        // load-bound at half the FMA rate.
        // (GCC only: Clang checks the constraint against the template's own,
        // baseline, target and refuses a 64-byte operand.)
#if defined(__GNUC__) && !defined(__clang__)
        __asm__("" : "+v"(xv));
#endif
#pragma GCC unroll 8
        for (int b = 0; b < KB; ++b) acc[b][t] += d[b] * xv;
      }
    }
  }
#pragma GCC unroll 8
  for (int b = 0; b < KB; ++b)
#pragma GCC unroll 32
    for (int t = 0; t < T; ++t) std::memcpy(part + b * part_k + t * L, &acc[b][t], sizeof(Vt));
}

template <class Vt, int L, int T, int KB>
TSR_RN_INLINE void dw_kblock(const Geo& g, int k0, const float* dyq, std::size_t dy_k, std::size_t dy_n,
                             const float* xp, std::size_t x_c, std::size_t x_n, int nc, int Qp, float* part) {
  const std::size_t part_k = static_cast<std::size_t>(g.Cin) * T * L;
  for (int c = 0; c < g.Cin; ++c)
    dw_block<Vt, L, T, KB>(dyq + k0 * dy_k, dy_k, dy_n, xp + c * x_c, x_n, nc, Qp, g.tapoff,
                           part + k0 * part_k + static_cast<std::size_t>(c) * T * L, part_k);
}

template <class Vt, int L, int T>
TSR_RN_INLINE void dw_chunk(const Geo& g, const float* dyq, std::size_t dy_k, std::size_t dy_n, const float* xp,
                            std::size_t x_c, std::size_t x_n, int nc, int Qp, float* part) {
  // Registers: KB x T accumulators + KB dy vectors + 1 x vector.
  constexpr int KB = T == 1 ? (L == 16 ? 8 : 4) : (L == 16 ? 3 : 1);
  int k = 0;
  for (; g.Kout - k >= KB; k += KB) dw_kblock<Vt, L, T, KB>(g, k, dyq, dy_k, dy_n, xp, x_c, x_n, nc, Qp, part);
  for (; k < g.Kout; ++k) dw_kblock<Vt, L, T, 1>(g, k, dyq, dy_k, dy_n, xp, x_c, x_n, nc, Qp, part);
}

// x[Cin][N][H][W], dy[Kout][N][Ho][Wo]; part: Kout*Cin*T*L floats, zeroed.
// xp, dyq: zeroed scratch for nc images (Cin * nc * plane + slack, Kout * nc * Qp).
template <class Vt, int L>
TSR_RN_INLINE void run_dw(const Geo& g, int N, const float* x, const float* dy, int nc_max, float* xp, float* dyq,
                          float* part) {
  const int Qp = (g.Q + L - 1) / L * L;
  const std::size_t x_n = g.plane, x_c = static_cast<std::size_t>(nc_max) * g.plane;
  const std::size_t dy_n = static_cast<std::size_t>(Qp), dy_k = static_cast<std::size_t>(nc_max) * Qp;
  const std::size_t out_plane = static_cast<std::size_t>(g.Ho) * g.Wo;
  for (int n0 = 0; n0 < N; n0 += nc_max) {
    const int nc = N - n0 < nc_max ? N - n0 : nc_max;
    for (int n = 0; n < nc; ++n) {
      pad_image(g, N, x, n0 + n, xp + n * x_n, x_c);
      for (int k = 0; k < g.Kout; ++k) {
        const float* src = dy + (static_cast<std::size_t>(k) * N + n0 + n) * out_plane;
        float* dst = dyq + k * dy_k + n * dy_n;
        for (int oy = 0; oy < g.Ho; ++oy) {
          float* d = dst + static_cast<std::size_t>(oy) * g.Wq;
          const float* r = src + static_cast<std::size_t>(oy) * g.Wo;
          for (int ox = 0; ox < g.Wo; ++ox) d[ox] = r[ox];
        }
      }
    }
    if (g.R == 3)
      dw_chunk<Vt, L, 9>(g, dyq, dy_k, dy_n, xp, x_c, x_n, nc, Qp, part);
    else
      dw_chunk<Vt, L, 1>(g, dyq, dy_k, dy_n, xp, x_c, x_n, nc, Qp, part);
  }
}

__attribute__((target("avx512f,fma"))) void run_avx512(const Geo& g, int N, const float* x, const float* wp,
                                                       float* y, float* xp, float* tile) {
  run<v16f, 16>(g, N, x, wp, y, xp, tile);
}
__attribute__((target("avx512f,fma"))) void run_dw_avx512(const Geo& g, int N, const float* x, const float* dy,
                                                          int nc, float* xp, float* dyq, float* part) {
  run_dw<v16f, 16>(g, N, x, dy, nc, xp, dyq, part);
}
__attribute__((target("avx2,fma"))) void run_dw_avx2(const Geo& g, int N, const float* x, const float* dy, int nc,
                                                     float* xp, float* dyq, float* part) {
  run_dw<v8f, 8>(g, N, x, dy, nc, xp, dyq, part);
}
__attribute__((target("avx2,fma"))) void run_avx2(const Geo& g, int N, const float* x, const float* wp, float* y,
                                                  float* xp, float* tile) {
  run<v8f, 8>(g, N, x, wp, y, xp, tile);
}
#endif  // TSR_RN_X86

struct Scratch {
  std::vector<float> xp, wp, tile, dyq, part;
};
Scratch& scratch() {
  static thread_local Scratch s;
  return s;
}

// Geometry of a convolution of x[Cin][N][H][W] into Kout channels; false
// when the direct kernels do not take it.
bool make_geo(int Cin, int H, int W, int Kout, int R, int S, int pad, int L, Geo& g) {
  if (L == 0 || Cin < 1 || H < 1 || W < 1 || Kout < 1 || R < 1 || R > 7 || (S != 1 && S != 2) || pad < 0 ||
      pad > 8)
    return false;
  g.Cin = Cin;
  g.H = H;
  g.W = W;
  g.Kout = Kout;
  g.R = R;
  g.S = S;
  g.pad = pad;
  if (H + 2 * pad < R || W + 2 * pad < R) return false;
  g.Ho = (H + 2 * pad - R) / S + 1;
  g.Wo = (W + 2 * pad - R) / S + 1;
  g.Hp = H + 2 * pad;
  g.Wp = W + 2 * pad;
  g.Kp = (Kout + L - 1) / L * L;
  if (S == 1) {
    g.Wq = g.Wp;
    g.Hq = g.Hp;
    g.plane = static_cast<std::size_t>(g.Hp) * g.Wp;
    for (int ky = 0; ky < R; ++ky)
      for (int kx = 0; kx < R; ++kx) g.tapoff[ky * R + kx] = ky * g.Wp + kx;
  } else {
    g.Wq = (g.Wp + 1) / 2;
    g.Hq = (g.Hp + 1) / 2;
    const int ph = g.Hq * g.Wq;
    g.plane = static_cast<std::size_t>(4) * ph;
    for (int ky = 0; ky < R; ++ky)
      for (int kx = 0; kx < R; ++kx)
        g.tapoff[ky * R + kx] = ((ky & 1) * 2 + (kx & 1)) * ph + (ky >> 1) * g.Wq + (kx >> 1);
  }
  g.Q = g.Ho * g.Wq;
  return true;
}

// Pads and runs; wp: packed weights [Cin][R*R][Kp].
void launch(const Geo& g, int N, const float* x, const float* wp, float* y, int L) {
  Scratch& s = scratch();
  // The last blocks of an image read past its Ho rows (the dropped q):
  // slack after the last channel's plane, zeroed like the padding.
  const std::size_t slack = static_cast<std::size_t>(g.R) * (g.Wp + 1) + 64;
  s.xp.assign(static_cast<std::size_t>(g.Cin) * g.plane + slack, 0.0f);
  s.tile.resize(static_cast<std::size_t>(24) * 4 * 16);
#if TSR_RN_X86
  if (L == 16)
    run_avx512(g, N, x, wp, y, s.xp.data(), s.tile.data());
  else
    run_avx2(g, N, x, wp, y, s.xp.data(), s.tile.data());
#else
  (void)N;
  (void)x;
  (void)wp;
  (void)y;
#endif
}

}  // namespace

int conv_direct_width() { return width_now(); }

int set_conv_direct_width(int width) {
  const int best = best_width();
  int w = 0;
  if (width >= 16 && best >= 16)
    w = 16;
  else if (width >= 8 && best >= 8)
    w = 8;
  width_now() = w;
  return w;
}

bool conv_direct_forward(int C, int N, int H, int W, int K, int R, int stride, int pad, const float* x,
                         const float* w, float* y) {
  const int L = width_now();
  Geo g;
  if (N < 1 || !make_geo(C, H, W, K, R, stride, pad, L, g)) return false;
  // wp[c][tap][k] = w[k][c][tap], zero for k >= K.
  std::vector<float>& wp = scratch().wp;
  const int T = R * R;
  wp.assign(static_cast<std::size_t>(C) * T * g.Kp, 0.0f);
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < C; ++c)
      for (int t = 0; t < T; ++t)
        wp[(static_cast<std::size_t>(c) * T + t) * g.Kp + k] = w[(static_cast<std::size_t>(k) * C + c) * T + t];
  launch(g, N, x, wp.data(), y, L);
  return true;
}

bool conv_direct_backward_data(int C, int N, int H, int W, int K, int R, int stride, int pad, const float* dy,
                               const float* w, float* dx) {
  const int L = width_now();
  if (stride != 1 || pad > R - 1 || N < 1) return false;
  const int Ho = H + 2 * pad - R + 1, Wo = W + 2 * pad - R + 1;
  if (Ho < 1 || Wo < 1) return false;
  Geo g;
  if (!make_geo(K, Ho, Wo, C, R, 1, R - 1 - pad, L, g)) return false;
  if (g.Ho != H || g.Wo != W) return false;
  // wp[k][tap'][c] = w[k][c][T-1-tap'] (the flipped filter, C and K swapped).
  std::vector<float>& wp = scratch().wp;
  const int T = R * R;
  wp.assign(static_cast<std::size_t>(K) * T * g.Kp, 0.0f);
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < C; ++c)
      for (int t = 0; t < T; ++t)
        wp[(static_cast<std::size_t>(k) * T + (T - 1 - t)) * g.Kp + c] =
            w[(static_cast<std::size_t>(k) * C + c) * T + t];
  launch(g, N, dy, wp.data(), dx, L);
  return true;
}

bool conv_direct_backward_weights(int C, int N, int H, int W, int K, int R, int stride, int pad, const float* x,
                                  const float* dy, float* dw) {
  const int L = width_now();
  Geo g;
  if (N < 1 || (R != 3 && R != 1) || !make_geo(C, H, W, K, R, stride, pad, L, g)) return false;
  const int T = R * R;
  const std::size_t Qp = static_cast<std::size_t>(g.Q + L - 1) / L * L;
  // Images per chunk: x and dy of a chunk in about 512 KiB.
  const std::size_t per = static_cast<std::size_t>(C) * g.plane + static_cast<std::size_t>(K) * Qp;
  std::size_t nc = (std::size_t(1) << 17) / per;
  nc = nc < 1 ? 1 : (nc > static_cast<std::size_t>(N) ? static_cast<std::size_t>(N) : nc);
  Scratch& s = scratch();
  const std::size_t slack = static_cast<std::size_t>(g.R) * (g.Wp + 1) + 64;
  s.xp.assign(static_cast<std::size_t>(C) * nc * g.plane + slack, 0.0f);
  s.dyq.assign(static_cast<std::size_t>(K) * nc * Qp, 0.0f);
  s.part.assign(static_cast<std::size_t>(K) * C * T * L, 0.0f);
#if TSR_RN_X86
  if (L == 16)
    run_dw_avx512(g, N, x, dy, static_cast<int>(nc), s.xp.data(), s.dyq.data(), s.part.data());
  else
    run_dw_avx2(g, N, x, dy, static_cast<int>(nc), s.xp.data(), s.dyq.data(), s.part.data());
#else
  (void)x;
  (void)dy;
#endif
  const float* p = s.part.data();
  for (std::size_t i = 0, e = static_cast<std::size_t>(K) * C * T; i < e; ++i, p += L) {
    float sum = 0;
    for (int l = 0; l < L; ++l) sum += p[l];
    dw[i] += sum;
  }
  return true;
}

}  // namespace resnet

// The fused LAMB and LARS kernels: one contiguous range of one group per
// call, no MPI, no allocation. Not installed.
//
// Every kernel reads each of its streams once, computes in float32 (the
// gradient scale, decay and bias corrections folded into a few scalars) and
// accumulates norms in float64 in kLanes independent lanes assigned by the
// element's index within the range (lane = index mod kLanes), summed in lane
// order at the end. The result therefore depends only on the range, never on
// the vector width, the alignment of the buffers or the thread that runs it;
// built without floating-point contraction, it is the same on every x86-64
// (docs/OPTIMIZERS.md, "Determinism").
//
// bfloat16 values are the upper 16 bits of a float32; conversion to float is
// exact, conversion from float rounds to nearest even (NaN stays NaN).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tsr {
namespace opt {

constexpr int kLanes = 16;

// Three float64 sums; which ones depends on the kernel.
struct Sums {
  double a = 0, b = 0, c = 0;
};

// LAMB, per element (all float32):
//   g  = gs*G + l2*w
//   m' = b1*m + a1*g            v' = b2*v + a2*g*g
//   u  = (m'*bc1) / (sqrt(v'*bc2 + ei) + eo) + wd*w
//   pass B: w' = w - k*u
struct LambCoef {
  float gs, l2, b1, a1, b2, a2, bc1, bc2, ei, eo, wd;
};

// LARS, per element (all float32), with d = gs*G + wd*w:
//   v' = mu*v + a*d      upd = nesterov ? mu*v' + a*d : v'      w' = w - b*upd
// Without momentum (has_v false): v is neither read nor written, upd = a*d.
struct LarsCoef {
  float gs, wd, mu, a, b;
  bool nesterov, has_v;
};

// sum of G^2 (the raw gradients).
double sumsq_f32(const float* g, size_t n);
double sumsq_bf16(const uint16_t* g, size_t n);

// LAMB pass A: {sum G^2, sum w^2, sum u^2}; reads g, w, m, v, writes nothing.
Sums lamb_norms_f32(const float* g, const float* w, const float* m, const float* v, size_t n, const LambCoef& c);
Sums lamb_norms_bf16(const uint16_t* g, const float* w, const float* m, const float* v, size_t n, const LambCoef& c);
// LAMB pass A for a second gradient scale: {0, 0, sum u^2}.
Sums lamb_unorm_f32(const float* g, const float* w, const float* m, const float* v, size_t n, const LambCoef& c);
Sums lamb_unorm_bf16(const uint16_t* g, const float* w, const float* m, const float* v, size_t n, const LambCoef& c);
// LAMB pass B: updates m, v and w in place; p (bf16 output, may be null)
// receives w' rounded to bfloat16.
void lamb_update_f32(const float* g, float* w, float* m, float* v, size_t n, const LambCoef& c, float k);
void lamb_update_bf16(const uint16_t* g, float* w, float* m, float* v, uint16_t* p, size_t n, const LambCoef& c,
                      float k);

// LARS pass A: {sum G^2, sum w^2, sum G*w}.
Sums lars_norms_f32(const float* g, const float* w, size_t n);
Sums lars_norms_bf16(const uint16_t* g, const float* w, size_t n);
// LARS pass A of the "popular" momentum (TSR_OPT_MOMENTUM_MODE 2, SimCLR
// classic_momentum=False), with c.a = 1: {sum G^2, sum w^2, sum upd^2},
// upd as pass B will compute it (float32) from g, w and v; writes nothing.
Sums lars_unorm_f32(const float* g, const float* w, const float* v, size_t n, const LarsCoef& c);
Sums lars_unorm_bf16(const uint16_t* g, const float* w, const float* v, size_t n, const LarsCoef& c);
// LARS pass B: updates v (if c.has_v) and w; p as for LAMB.
void lars_update_f32(const float* g, float* w, float* v, size_t n, const LarsCoef& c);
void lars_update_bf16(const uint16_t* g, float* w, float* v, uint16_t* p, size_t n, const LarsCoef& c);

// bfloat16 <-> float32 for whole arrays (master weights).
void bf16_to_f32(const uint16_t* in, float* out, size_t n);
void f32_to_bf16(const float* in, uint16_t* out, size_t n);

// Which instruction set the kernels run with on this machine ("x86-64-v4",
// "x86-64-v3", "baseline"), for benchmark reports.
const char* kernel_isa();

}  // namespace opt
}  // namespace tsr

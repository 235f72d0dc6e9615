// Direct convolution kernels of the sample ResNet (float only; conv_direct.cpp).
//
// No im2col: each image is copied once into a zero-padded plane, and a
// register-blocked kernel accumulates a block of output positions times a
// block of output channels (the channels in the vector lanes) over the input
// channels and the R x R taps. Built for AVX-512 and for AVX2 + FMA with
// function target attributes, chosen at run time (cpuid), so the build stays
// portable; elsewhere (or with TSR_RESNET_DIRECT=0 in the environment) the
// calls return false and the caller takes the im2col + GEMM path.
//
// Layout CNHW as in layers.hpp. Weights w[K][C][R][R].
#ifndef TSR_APPS_RESNET_CONV_DIRECT_HPP
#define TSR_APPS_RESNET_CONV_DIRECT_HPP

#include <cstddef>

namespace resnet {

// The vector width in floats the direct kernels use: 16 (AVX-512), 8 (AVX2 +
// FMA) or 0 (off: not an x86-64 GCC/Clang build, no AVX2 on this CPU, or
// TSR_RESNET_DIRECT=0).
int conv_direct_width();
// Tests and benchmarks: ask for width 16, 8 or 0; the CPU's best is the
// limit. Returns the width now in force.
int set_conv_direct_width(int width);

// y[K][N][Ho][Wo] = conv(x[C][N][H][W], w), stride 1 or 2, any padding < R.
// Returns false (nothing written) when the direct kernels are off or the
// shape is not one they take; the caller then runs im2col + GEMM.
bool conv_direct_forward(int C, int N, int H, int W, int K, int R, int stride, int pad, const float* x,
                         const float* w, float* y);

// Stride 1 only: dx[C][N][H][W] = (the adjoint of the convolution)(dy[K][N][Ho][Wo]),
// i.e. the convolution of dy, padded by R-1-pad, with the flipped and
// transposed filter (no col2im, no zero fill). Overwrites dx. False as above.
bool conv_direct_backward_data(int C, int N, int H, int W, int K, int R, int stride, int pad, const float* dy,
                               const float* w, float* dx);

// dw[K][C][R][R] += the weight gradient of the convolution for dy (ACCUMULATES),
// R = 3 or 1, stride 1 or 2: a direct reduction over the positions, no
// im2col. False as above.
bool conv_direct_backward_weights(int C, int N, int H, int W, int K, int R, int stride, int pad, const float* x,
                                  const float* dy, float* dw);

}  // namespace resnet

#endif

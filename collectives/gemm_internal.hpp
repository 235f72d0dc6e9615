// The objects behind tsr_matrix, and the internal entry points shared by the
// GEMM sources (matrix descriptors and redistribution, the engines, the
// ScaLAPACK drop-in). Not installed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "context.hpp"
#include "gemm_core.hpp"
#include "grid.hpp"
#include "tessera/tessera.h"

namespace tsr {
namespace gemm {

// Where a matrix lives: a grid of dims (a tessera grid, a BLACS grid or a
// single root rank), the context rank of every grid position (grid rank
// (k*dims[0] + i)*dims[1] + j), this rank's position, and the layout.
struct Dist {
  tsr_context ctx = nullptr;
  Dims dims{1, 1, 1};
  std::vector<int> rank_of;  // grid rank -> context rank
  bool member = false;
  Dims coords{0, 0, 0};
  int64_t m = 0, n = 0;
  tsr_dtype type = TSR_FLOAT64;
  Layout lay;
  int64_t ld = 1;
  int64_t rows = 0, cols = 0;  // this rank's local block (0 x 0 off the grid)

  int grid_rank(const Dims& c) const { return (c[2] * dims[0] + c[0]) * dims[1] + c[1]; }
  Dims coords_of(int g) const { return {(g / dims[1]) % dims[0], g % dims[1], g / (dims[0] * dims[1])}; }
  int size() const { return dims[0] * dims[1] * dims[2]; }
  // Fills rows and cols from the layout (and ld = max(1, rows) if ld == 0).
  void finish(int64_t want_ld);
};

}  // namespace gemm
}  // namespace tsr

struct tsr_matrix_s {
  static constexpr unsigned kMagic = 0x6d617472u;
  unsigned magic = kMagic;
  tsr_grid grid = nullptr;  // null for ScaLAPACK descriptors
  tsr_layout pub{};         // as given (normalised form in dist.lay)
  tsr::gemm::Dist dist;
};

namespace tsr {
namespace gemm {

tsr_status check_matrix(tsr_matrix m, const char* argname);

// Copies the m x n window at (sr0, sc0) of src into the window at (dr0, dc0)
// of dst (same context and type): point-to-point through the transport on
// the context's communicator, local copies for what a rank keeps.
// Collective over the context; arguments already agreed.
tsr_status redistribute(const Dist& src, const void* sbuf, int64_t sr0, int64_t sc0, const Dist& dst, void* dbuf,
                        int64_t dr0, int64_t dc0, int64_t m, int64_t n);

// The distribution of an m x n matrix over a tessera grid (layout checked).
Dist grid_dist(tsr_grid grid, int64_t m, int64_t n, tsr_dtype type, const tsr_layout& layout, int64_t ld);

// A distribution of the whole matrix on one context rank (for scatter and
// gather), with leading dimension ld.
Dist root_dist(tsr_context ctx, int root, int64_t m, int64_t n, tsr_dtype type, int64_t ld);

// Runs an algorithm whose arguments have been checked and agreed (members
// only). alpha and beta in double, converted to the type.
struct Call {
  tsr_grid grid = nullptr;
  tsr_gemm_algo algo = TSR_GEMM_3D;
  Roles roles;
  Shape shape;
  const Dist *a = nullptr, *b = nullptr, *c = nullptr;
  const void* abuf = nullptr;
  const void* bbuf = nullptr;
  void* cbuf = nullptr;
  double alpha = 1, beta = 0;
  int64_t panel = 0;
  bool overlap = true;
};
tsr_status execute(const Call& call);

// Local checks of a GEMM call and its agreement over the context; on
// success *call is ready for execute() (on members).
// With a plan, also checks that the operands are the plan's.
tsr_status prepare(const tsr_gemm_options* opt, tsr_trans ta, tsr_trans tb, double alpha, tsr_matrix A,
                   const void* a, tsr_matrix B, const void* b, double beta, tsr_matrix C, void* c, Call* call,
                   const tsr_gemm_plan* plan);

}  // namespace gemm
}  // namespace tsr

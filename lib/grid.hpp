// The grid object behind tsr_grid. Not installed.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "context.hpp"
#include "grid_shape.hpp"

struct tsr_grid_s {
  static constexpr unsigned kMagic = 0x6e1d6e1du;
  unsigned magic = kMagic;
  tsr_context ctx = nullptr;
  std::atomic<int> live_matrices{0};  // tsr_matrix descriptors on this grid (local destroy, any thread)
  tsr_grid_kind kind = TSR_GRID_1D;
  tsr::Dims dims{1, 1, 1};
  int size = 1;                         // dims[0]*dims[1]*dims[2]
  int grid_rank = -1;                   // -1 on idle ranks
  tsr::Dims coords{-1, -1, -1};
  std::vector<int> context_rank_of;     // grid rank -> context rank
  std::vector<int> grid_rank_of;        // context rank -> grid rank or -1
  std::unique_ptr<tsr::Comm> comms[5];  // by tsr_grid_axis; null on idle ranks
  int rows_within = 0, rows_total = 0;

  tsr::Dims coords_of(int g) const {
    const int j = g % dims[1], rest = g / dims[1];
    return {rest % dims[0], j, rest / dims[0]};
  }
  int rank_of(const tsr::Dims& c) const { return (c[2] * dims[0] + c[0]) * dims[1] + c[1]; }
};

namespace tsr {
tsr_status check_grid(tsr_grid grid, const char* argname = "grid");
}  // namespace tsr

// Pure grid arithmetic: which shapes are valid for a scheme, choosing
// dimensions, nearest valid shapes, and node-aware placement. No MPI.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tsr {

using Dims = std::array<int, 3>;

const char* grid_kind_name(tsr_grid_kind kind);
bool grid_kind_valid(tsr_grid_kind kind);
// Empty string if dims are a valid shape for kind, else why not.
std::string shape_problem(tsr_grid_kind kind, const Dims& dims);
// Every valid shape of kind with exactly n ranks that honours the non-zero
// entries of fixed (0 = free), in the order of preference of dims_create.
std::vector<Dims> shapes_for(tsr_grid_kind kind, int n, const Dims& fixed);
// "8 (2x2x2), 16 (4x4x1)": the nearest counts below and above n (n itself
// excluded) that have a shape honouring fixed.
std::string nearest_shapes(tsr_grid_kind kind, int n, const Dims& fixed);
// "8 (2x2x2)": the largest count <= n that has a shape honouring fixed, or
// "none".
std::string largest_fit(tsr_grid_kind kind, int n, const Dims& fixed);
// dims_create: see tsr_grid_dims_create.
tsr_status choose_dims(tsr_grid_kind kind, int nranks, bool allow_idle, Dims* dims, int* nused);

// Placement: order[g] = context rank that takes grid rank g, for the first
// ngrid grid ranks, given the node of every context rank. Grid ranks come in
// runs of `run` consecutive ranks (the fastest-varying axis of extent > 1).
// Each node contributes as many whole runs as it holds (nodes in order,
// ranks ascending); the leftover ranks follow, and idle ranks are taken from
// those leftovers first. So the fastest axis stays inside a node wherever the
// node sizes allow, and the number of such runs is the largest possible.
std::vector<int> place(const std::vector<int>& node_of, int ngrid, int run);

}  // namespace tsr

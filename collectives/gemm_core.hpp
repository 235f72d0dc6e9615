// Pure arithmetic of the distributed GEMM: partitions of an index range over
// grid dimensions, the layouts each algorithm takes (and which grid dimension
// plays which role), the k-panels of SUMMA, the exact traffic of one rank,
// the plan's cost model and the lower bound. No MPI here: the unit tests
// check it alone, and the executor (gemm_exec.cpp) and the planner share it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tsr {
namespace gemm {

using Dims = std::array<int, 3>;

// [off, off + len)
struct Range {
  int64_t off = 0, len = 0;
  int64_t end() const { return off + len; }
};

// Part p of n over `parts` balanced parts: n/parts + (p < n%parts) entries.
inline Range balanced(int64_t n, int64_t parts, int64_t p) {
  const int64_t q = n / parts, r = n % parts;
  return {p * q + (p < r ? p : r), q + (p < r ? 1 : 0)};
}

// How one index dimension (the rows or the columns) of a stored matrix is
// split over grid dimensions: nested balanced blocks over up to two grid
// dimensions (outer first), or block-cyclic blocks of `block` over one.
// Grid dimensions of extent 1 are dropped when the split is built.
struct Split {
  int dim[2] = {-1, -1};
  int parts[2] = {1, 1};
  int levels = 0;
  int64_t block = 0;  // > 0: block-cyclic over dim[0] (one level)
  int src = 0;        // block-cyclic: coordinate that holds the first block
  bool has(int d) const { return d >= 0 && ((levels > 0 && dim[0] == d) || (levels > 1 && dim[1] == d)); }
};

// One interval of a rank's share of an index dimension: global [g, g + len)
// at local offset loc.
struct Piece {
  int64_t g, len, loc;
};

// The share of coordinates c along a dimension of length n: balanced splits
// give one piece, block-cyclic ones a piece per block. `skip` removes one
// grid dimension from a balanced split (the share before a gather along it).
std::vector<Piece> pieces(const Split& s, int64_t n, const Dims& c);
Range share(const Split& s, int64_t n, const Dims& c, int skip = -1);  // balanced only
int64_t local_len(const Split& s, int64_t n, const Dims& c);

// A stored matrix's layout over a grid, normalised: the row and column splits.
struct Layout {
  Split rows, cols;
  bool cyclic() const { return rows.block > 0 || cols.block > 0; }
  // The grid dimensions the layout does not use (copies live along them).
  bool uses(int d) const { return rows.has(d) || cols.has(d); }
};

// Validates a public tsr_layout against grid dims; empty string if valid.
std::string layout_problem(const tsr_layout& l, const Dims& dims);
// Normalises a valid public layout for grid dims.
Layout normalise(const tsr_layout& l, const Dims& dims);

// The logical splits of op(X) for a stored matrix layout: rows then columns
// of op(X) (swapped when trans).
inline const Split& lrows(const Layout& l, bool trans) { return trans ? l.cols : l.rows; }
inline const Split& lcols(const Layout& l, bool trans) { return trans ? l.rows : l.cols; }

// ------------------------------------------------------------------ roles
enum class Engine { three_phase, summa };
inline Engine engine_of(tsr_gemm_algo a) {
  return a == TSR_GEMM_1D || a == TSR_GEMM_3D ? Engine::three_phase : Engine::summa;
}

// Roles of the grid dimensions: which splits m, n and k (three-phase) or m,
// n and the depth (SUMMA); -1 for none. Every grid dimension of extent > 1
// has exactly one role.
struct Roles {
  int m = -1, n = -1, k = -1;
};

// The problem as the engines see it.
// The largest element size a plan or bound takes (bytes): larger ones would
// overflow the byte counts (int64) of the models.
constexpr size_t kMaxElemSize = 1024;

struct Shape {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t w = 8;  // bytes per element
};

// The roles under which algo can run on these layouts, or an explanation
// (which operand does not fit, and the layouts it expects).
bool match(tsr_gemm_algo algo, const Dims& dims, const Shape& s, const Layout& a, const Layout& b,
           const Layout& c, Roles* roles, std::string* why);

// The canonical layouts of stored A, B, C for an algorithm and roles (see
// tsr_gemm_layouts), as public structs.
void canonical(tsr_gemm_algo algo, bool ta, bool tb, const Roles& r, tsr_layout out[3]);

// --------------------------------------------------------------- SUMMA panels
struct Panel {
  int64_t k0, w;  // k-range [k0, k0 + w)
  int a_root;     // coordinate along roles.n that holds op(A)'s columns
  int b_root;     // coordinate along roles.m that holds op(B)'s rows
};
// Every panel of k for a pm x pn grid, in order: the common refinement of
// the balanced splits of k over pn (op(A) columns) and over pm (op(B) rows),
// cut into pieces of at most `width` (0: no limit).
std::vector<Panel> panels(int64_t k, int pm, int pn, int64_t width);
// The panels layer l of pd runs: a balanced part of the list.
inline Range layer_panels(size_t count, int pd, int l) { return balanced(static_cast<int64_t>(count), pd, l); }

// ------------------------------------------------------ one rank's traffic
// The data collectives a rank takes part in, in order, as the transport will
// charge them (docs/GEMM.md): exact payload and the modelled wire traffic.
enum class OpKind { allgatherv, reduce_scatterv, allreduce, bcast };
struct Op {
  OpKind kind;
  int dim;             // grid dimension of the axis
  uint64_t total = 0;  // v-ops: bytes of all members' blocks; allreduce, bcast: the bytes
  uint64_t mine = 0, next = 0, prev = 0;  // v-ops: the blocks of this rank, of r+1 and of r-1
  int root = -1;       // bcast
};
std::vector<Op> schedule(tsr_gemm_algo algo, const Dims& dims, const Roles& r, const Shape& s, const Layout& a,
                         const Layout& b, const Layout& c, int64_t panel, const Dims& coords);

// Totals for one rank, from its schedule.
struct Cost {
  uint64_t payload_sent = 0, payload_recv = 0;
  uint64_t wire_sent = 0, wire_recv = 0;  // bytes
  uint64_t msgs_sent = 0, msgs_recv = 0;
  double path_msgs = 0;                   // messages on the critical path (latency terms)
  double flops = 0;
  double workspace = 0;                   // elements of workspace the executor allocates
  double reduced = 0;                     // bytes of partial products summed over k (or the depth)
  // wire_recv by sender: along grid dimension dim, from the member at that
  // coordinate (the wire model's edges; for the energy of each level).
  struct Edge {
    int dim, peer;
    double bytes;
  };
  std::vector<Edge> recv_edges;
  double operands = 0;                    // elements of A, B, C stored on the rank
  uint64_t calls[4] = {0, 0, 0, 0};       // by OpKind
};
Cost rank_cost(tsr_gemm_algo algo, const Dims& dims, const Roles& r, const Shape& s, const Layout& a,
               const Layout& b, const Layout& c, int64_t panel, const Dims& coords);

// --------------------------------------------------------------- the plan
// Al Daas et al.'s memory-independent bound on elements received by the
// busiest of p ranks.
double lower_bound_words(int64_t m, int64_t n, int64_t k, int p);

struct Machine {
  double alpha = 2e-6, beta = 1e-10, gamma = 2e-11;
};

// The energy model of a plan (docs/ENERGY.md, "Planning by energy"): joules
// per byte received at each link level and per flop, with the profile's PUE
// folded in, and the static power of a rank. One set of figures: typical,
// low or high.
struct EnergyFigures {
  double self = 0, intra = 0, inter = 0;  // J per byte
  double flop = 0;                        // J per flop
  double static_watts = 0;                // W per rank the plan uses
};
struct EnergyModel {
  EnergyFigures typical, low, high;
  int ranks_per_node = 0;  // 0: every rank on one node
};
// The model of a profile (NULL: the built-in default-2025; the caller has
// checked that it is live), PUE folded in (gemm_api.cpp; also used by the
// attention and optimizer planners).
EnergyModel make_energy_model(tsr_energy_profile profile, int ranks_per_node);
// The machine with tsr_gemm_machine's defaults for zero fields.
Machine make_machine(const tsr_gemm_machine& m);

struct Candidate {
  tsr_gemm_algo algo = TSR_GEMM_3D;
  tsr_grid_kind kind = TSR_GRID_1D;
  Dims dims{1, 1, 1};
  Roles roles;
  int64_t panel = 0;
  // modelled, busiest rank:
  double flops = 0, bytes = 0, msgs = 0, time = 0, memory = 0;  // memory in bytes
  double reduced = 0;  // bytes of partial products summed (one more local pass over them)
  // energy, summed over the ranks the plan uses (energy()):
  double intra_bytes = 0, inter_bytes = 0, self_bytes = 0, total_flops = 0;
  double joules = 0, joules_low = 0, joules_high = 0;
};
// Fills the candidate's energy fields (after evaluate()): the bytes every
// rank receives by level and the flops, summed over the ranks (exactly, by
// enumerating the grid up to 4096 positions; beyond, the mean of the 8 corner
// ranks times the rank count), then joules = bytes x J/B per level + flops x
// J/flop + static W x ranks x modelled time. Ranks fill nodes in grid rank
// order (ranks_per_node at a time, as tsr_grid_create places them when every
// node has ranks_per_node ranks); bytes are inter-node when their sender
// (the wire model's peer) lies on another node.
void energy(Candidate* c, const Shape& s, const EnergyModel& em);
// The objective of a plan: 0 time, 1 energy, 2 energy-delay product.
double objective_value(const Candidate& c, int objective);
// The busiest-rank figures of a candidate (maximum over the corner ranks of
// the grid, which is exact whenever the blocks divide evenly).
void evaluate(Candidate* c, const Shape& s, const Machine& mc);
// Every candidate the planner considers for p ranks (and fewer if idle).
std::vector<Candidate> candidates(const Shape& s, int p, bool allow_idle, tsr_gemm_algo only);
// The best candidate within memory (bytes per rank, 0 = no limit) by the
// objective (energy needs em); false if none fits (then *best is the one
// needing least memory). all (may be null): every candidate considered,
// evaluated, in the order considered. With em, energy() runs on every
// candidate when the objective is energy or EDP or all is asked for, else
// on the chosen one only (the same plan and figures, without enumerating
// every candidate's grid).
bool choose(const Shape& s, int p, bool allow_idle, tsr_gemm_algo only, double memory, const Machine& mc,
            int objective, const EnergyModel* em, Candidate* best, std::vector<Candidate>* all);

}  // namespace gemm
}  // namespace tsr

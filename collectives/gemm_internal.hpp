// The objects behind tsr_matrix, and the internal entry points shared by the
// GEMM sources (matrix descriptors and redistribution, the engines, the
// ScaLAPACK drop-in). Not installed.
#pragma once

#include <cstdint>
#include <memory>
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

// The element type of float and double.
template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr tsr_dtype value = TSR_FLOAT32;
};
template <>
struct dtype_of<double> {
  static constexpr tsr_dtype value = TSR_FLOAT64;
};

tsr_status check_matrix(tsr_matrix m, const char* argname);

// The distribution of an m x n matrix over a tessera grid (layout checked).
Dist grid_dist(tsr_grid grid, int64_t m, int64_t n, tsr_dtype type, const tsr_layout& layout, int64_t ld);

// A distribution of the whole matrix on one context rank (for scatter and
// gather), with leading dimension ld.
Dist root_dist(tsr_context ctx, int root, int64_t m, int64_t n, tsr_dtype type, int64_t ld);

// ------------------------------------------------------------- workspace
// The context's reusable workspace (tsr_context_s::gemm_pool): one block
// that grows to the largest request, so that the first-touch page faults of
// large buffers are paid once, not per call (on the project machine they
// cost more than the communication). One context is used by one thread at a
// time, so one pool per context is enough.
struct Pool {
  unsigned char* mem = nullptr;
  size_t cap = 0;
  uint64_t overflows = 0;  // arenas that needed more than was reserved (tests check 0)
  std::shared_ptr<void> cublas;  // the device path's cuBLAS handle (collectives/cuda/gemm_cuda.hpp)
  std::shared_ptr<void> dwork;   // the device path's workspace block (gemm_exec.cpp, DevWork)
  ~Pool();
};
constexpr size_t kAlign = 64;
inline size_t padded(size_t bytes) { return (bytes + kAlign - 1) & ~(kAlign - 1); }
// Makes the context's pool hold at least `bytes` (contents are not kept);
// TSR_ERR_NO_MEMORY naming the size if it cannot. Local.
tsr_status reserve(tsr_context ctx, size_t bytes);
// Consecutive aligned pieces of the reserved pool. A request beyond the
// reservation (a sizing bug) is served from the heap and remembered.
class Arena {
 public:
  explicit Arena(tsr_context ctx);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  template <class T>
  T* take(size_t n) {
    return static_cast<T*>(bytes(n * sizeof(T)));
  }
  void* bytes(size_t n);
  bool overflowed() const { return overflowed_; }
  // Everything taken after mark() is given back by release(mark).
  size_t mark() const { return used_; }
  void release(size_t mark) { used_ = mark; }

 private:
  Pool* pool_ = nullptr;
  unsigned char* base_ = nullptr;
  size_t cap_ = 0, used_ = 0;
  bool overflowed_ = false;
  std::vector<std::unique_ptr<unsigned char[]>> extra_;
};

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
  // Device buffers (a context bound to a CUDA device): the engines run on
  // the device (gemm_exec.cpp, DevOps). prepare() sets these: the context's
  // cuBLAS handle (a tsr::cuda::Blas) and the call's stream-ordered
  // workspace; run() gives the workspace back with device_release().
  bool device = false;
  void* dev_blas = nullptr;
  void* dev_work = nullptr;
  size_t dev_cap = 0;
};
tsr_status execute(const Call& call, Arena& arena);
// The device path's handle and workspace for *call (members: work_bytes
// plus a stand-in for empty buffers, from the context's device block, grown
// with cudaMalloc when too small); UNSUPPORTED in a build without CUDA. Local.
tsr_status device_prepare(tsr_context ctx, Call* call);
// Ends the call's use of the workspace (the block stays with the context).
tsr_status device_release(tsr_context ctx, Call* call);
// Bytes of pool the engine takes for this call on this rank (0 off the grid).
size_t work_bytes(const Call& call);
// TSR_ERR_UNSUPPORTED if a message of this call would exceed INT_MAX
// elements on this rank (gathered blocks, partial products, panels).
tsr_status count_limits(const Call& call);

// A redistribution, computed before anything moves (pure): the messages this
// rank sends and receives and what it copies locally.
struct Isect {
  int64_t len, sloc, dloc;
};
struct Message {
  int peer = -1;
  std::vector<Isect> ri, ci;  // rows and columns, in the same order on both sides
  size_t count = 0;           // elements
};
struct Redist {
  const Dist* src = nullptr;
  const Dist* dst = nullptr;
  std::vector<Message> sends, recvs;
  bool self = false;
  Message local;
  size_t bytes() const;  // pool bytes for the packed messages
};
Redist plan_redistribution(const Dist& src, int64_t sr0, int64_t sc0, const Dist& dst, int64_t dr0, int64_t dc0,
                           int64_t m, int64_t n);
tsr_status run_redistribution(const Redist& r, const void* sbuf, void* dbuf, Arena& arena);

// Local checks of a GEMM call and its agreement over the context; on
// success *call is ready for execute() (on members).
// With a plan, also checks that the operands are the plan's.
tsr_status prepare(const tsr_gemm_options* opt, tsr_trans ta, tsr_trans tb, double alpha, tsr_matrix A,
                   const void* a, tsr_matrix B, const void* b, double beta, tsr_matrix C, void* c, Call* call,
                   const tsr_gemm_plan* plan);

}  // namespace gemm
}  // namespace tsr

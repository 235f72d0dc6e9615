// tessera C++ API: RAII owners over the C handles, exceptions carrying the
// status and message, spans for buffers. Header-only over the C ABI, C++17.
//
//   MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
//   {
//     tessera::context ctx(MPI_COMM_WORLD);
//     tessera::grid g(ctx, TSR_GRID_2D, tessera::grid::dims_for(TSR_GRID_2D, ctx.size()));
//     std::vector<double> x(n), y(n);
//     g.allreduce(TSR_AXIS_ROW, tessera::span<const double>(x), tessera::span<double>(y));
//     std::string table = tessera::report(ctx).str();
//   }  // grid, then context, freed here (collective)
//   MPI_Finalize();
//
// Destructors are collective like the C destroy calls, never throw, and must
// run in the same order on every rank; a grid must not outlive its context.
#ifndef TESSERA_HPP
#define TESSERA_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/tessera.h"

namespace tessera {

// The exception thrown by every failing call: the status and the message.
class error : public std::runtime_error {
 public:
  error(tsr_status status, const std::string& message)
      : std::runtime_error(std::string(tsr_status_name(status)) + ": " + message), status_(status) {}
  tsr_status status() const noexcept { return status_; }

 private:
  tsr_status status_;
};

// Throws tessera::error if status is not TSR_SUCCESS (message from ctx, or
// the thread's last message when ctx is null).
inline void check(tsr_status status, tsr_context ctx = nullptr) {
  if (status != TSR_SUCCESS) throw error(status, tsr_last_error(ctx));
}

// A view of contiguous elements (std::span's essentials, for C++17).
template <class T>
class span {
 public:
  constexpr span() noexcept = default;
  constexpr span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <class C, class = decltype(std::declval<C&>().data())>
  span(C& c) noexcept : data_(c.data()), size_(c.size()) {}  // NOLINT: implicit like std::span
  template <class U, class = std::enable_if_t<std::is_same<const U, T>::value>>
  constexpr span(span<U> s) noexcept : data_(s.data()), size_(s.size()) {}  // NOLINT
  constexpr T* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// The tsr_dtype of a C++ element type.
template <class T>
struct dtype_of;
template <> struct dtype_of<std::uint8_t> { static constexpr tsr_dtype value = TSR_BYTE; };
template <> struct dtype_of<std::int32_t> { static constexpr tsr_dtype value = TSR_INT32; };
template <> struct dtype_of<std::int64_t> { static constexpr tsr_dtype value = TSR_INT64; };
template <> struct dtype_of<float> { static constexpr tsr_dtype value = TSR_FLOAT32; };
template <> struct dtype_of<double> { static constexpr tsr_dtype value = TSR_FLOAT64; };

struct version_info {
  int major, minor, patch, code;
};
inline version_info version() {
  version_info v{};
  check(tsr_get_version(&v.major, &v.minor, &v.patch, &v.code));
  return v;
}

// Owns a tsr_context (move-only). Construction and destruction are collective.
class context {
 public:
  explicit context(MPI_Comm comm) { check(tsr_context_create(comm, &h_)); }
  // ranks_per_node > 0 simulates nodes of that many consecutive ranks.
  context(MPI_Comm comm, int ranks_per_node) {
    tsr_context_config cfg = TSR_CONTEXT_CONFIG_INIT;
    cfg.ranks_per_node = ranks_per_node;
    check(tsr_context_create_ex(comm, &cfg, &h_));
  }
  ~context() { tsr_context_destroy(&h_); }
  context(context&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  context& operator=(context&& o) noexcept {
    if (this != &o) {
      tsr_context_destroy(&h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  [[nodiscard]] tsr_context get() const noexcept { return h_; }
  [[nodiscard]] int rank() const { int r = 0; check(tsr_context_rank(h_, &r), h_); return r; }
  // The default objective of the planners given this context (collective set).
  void set_objective(tsr_objective o) { check(tsr_context_set_objective(h_, o), h_); }
  [[nodiscard]] tsr_objective objective() const {
    tsr_objective o = TSR_OBJECTIVE_TIME;
    check(tsr_context_get_objective(h_, &o), h_);
    return o;
  }
  [[nodiscard]] int size() const { int s = 0; check(tsr_context_size(h_, &s), h_); return s; }
  [[nodiscard]] std::pair<int, int> node() const {
    int n = 0, nn = 0;
    check(tsr_context_node(h_, &n, &nn), h_);
    return {n, nn};
  }
  [[nodiscard]] tsr_counters counters(const char* path = "total") const {
    tsr_counters c{};
    check(tsr_counters_get(h_, path, &c), h_);
    return c;
  }
  void reset_counters() { check(tsr_counters_reset(h_), h_); }

 private:
  tsr_context h_ = nullptr;
};

// A named region for the lifetime of the object (begin in the constructor,
// end in the destructor). Local.
class region {
 public:
  region(const context& ctx, const char* name) : ctx_(ctx.get()), name_(name) {
    check(tsr_region_begin(ctx_, name), ctx_);
  }
  ~region() { tsr_region_end(ctx_, name_.c_str()); }
  region(const region&) = delete;
  region& operator=(const region&) = delete;

 private:
  tsr_context ctx_;
  std::string name_;
};

using dims3 = std::array<int, 3>;

// Owns a tsr_grid (move-only). Construction and destruction are collective.
class grid {
 public:
  grid(const context& ctx, tsr_grid_kind kind, const dims3& dims) : ctx_(ctx.get()) {
    check(tsr_grid_create(ctx_, kind, dims.data(), &h_), ctx_);
  }
  ~grid() { tsr_grid_destroy(&h_); }
  grid(grid&& o) noexcept : h_(std::exchange(o.h_, nullptr)), ctx_(o.ctx_) {}
  grid& operator=(grid&& o) noexcept {
    if (this != &o) {
      tsr_grid_destroy(&h_);
      h_ = std::exchange(o.h_, nullptr);
      ctx_ = o.ctx_;
    }
    return *this;
  }
  grid(const grid&) = delete;
  grid& operator=(const grid&) = delete;

  // tsr_grid_dims_create with every dimension free (or constrained by `fixed`).
  static dims3 dims_for(tsr_grid_kind kind, int nranks, dims3 fixed = {0, 0, 0}) {
    check(tsr_grid_dims_create(kind, nranks, 0, fixed.data(), nullptr));
    return fixed;
  }

  [[nodiscard]] tsr_grid get() const noexcept { return h_; }
  [[nodiscard]] dims3 dims() const { dims3 d{}; check(tsr_grid_get_dims(h_, d.data()), ctx_); return d; }
  [[nodiscard]] bool is_member() const { int m = 0; check(tsr_grid_is_member(h_, &m), ctx_); return m != 0; }
  [[nodiscard]] int rank() const { int r = 0; check(tsr_grid_my_rank(h_, &r), ctx_); return r; }
  [[nodiscard]] dims3 coords() const { dims3 c{}; check(tsr_grid_my_coords(h_, c.data()), ctx_); return c; }
  [[nodiscard]] dims3 coords(int grid_rank) const {
    dims3 c{};
    check(tsr_grid_coords(h_, grid_rank, c.data()), ctx_);
    return c;
  }
  [[nodiscard]] MPI_Comm comm(tsr_grid_axis axis) const {
    MPI_Comm c = MPI_COMM_NULL;
    check(tsr_grid_comm(h_, axis, &c), ctx_);
    return c;
  }
  // (position, size) of the calling rank on an axis.
  [[nodiscard]] std::pair<int, int> axis(tsr_grid_axis a) const {
    int r = 0, s = 0;
    check(tsr_grid_axis_info(h_, a, &r, &s), ctx_);
    return {r, s};
  }

  template <class T>
  void bcast(tsr_grid_axis a, span<T> buf, int root) {
    check(tsr_bcast(h_, a, buf.data(), buf.size(), dtype_of<T>::value, root), ctx_);
  }
  template <class T>
  void allreduce(tsr_grid_axis a, span<const T> send, span<T> recv, tsr_op op = TSR_SUM) {
    const std::size_t n = sized(recv.size(), send.size(), "allreduce", "receive");
    call(tsr_allreduce(h_, a, send.data(), recv.data(), n, dtype_of<T>::value, op));
  }
  // recv holds axis_size blocks of send.size() elements.
  template <class T>
  void allgather(tsr_grid_axis a, span<const T> send, span<T> recv) {
    const std::size_t p = static_cast<std::size_t>(axis(a).second);
    const std::size_t n = sized(recv.size(), send.size() * p, "allgather", "receive", send.size());
    call(tsr_allgather(h_, a, send.data(), n, recv.data(), dtype_of<T>::value));
  }
  // send holds axis_size blocks of recv.size() elements.
  template <class T>
  void reduce_scatter(tsr_grid_axis a, span<const T> send, span<T> recv, tsr_op op = TSR_SUM) {
    const std::size_t p = static_cast<std::size_t>(axis(a).second);
    std::size_t n = sized(recv.size(), p ? send.size() / p : 0, "reduce_scatter", "receive");
    not_blocks(send.size(), p, "reduce_scatter", &n);
    call(tsr_reduce_scatter(h_, a, send.data(), recv.data(), n, dtype_of<T>::value, op));
  }
  // send and recv hold axis_size blocks of equal size.
  template <class T>
  void alltoall(tsr_grid_axis a, span<const T> send, span<T> recv) {
    const std::size_t p = static_cast<std::size_t>(axis(a).second);
    std::size_t n = sized(recv.size(), send.size(), "alltoall", "receive", p ? send.size() / p : 0);
    not_blocks(send.size(), p, "alltoall", &n);
    call(tsr_alltoall(h_, a, send.data(), recv.data(), n, dtype_of<T>::value));
  }
  template <class T>
  void shift(tsr_grid_axis a, span<const T> send, span<T> recv, int by) {
    const std::size_t n = sized(recv.size(), send.size(), "shift", "receive");
    call(tsr_shift(h_, a, send.data(), recv.data(), n, dtype_of<T>::value, by));
  }

 private:
  // A span of the wrong size must fail on every rank of the axis, not throw on
  // this rank alone while the others wait in the collective. The wrapper then
  // passes TSR_COUNT_INVALID: the C call fails on every rank before any data
  // moves (the others' message names this rank), and this rank throws
  // TSR_ERR_SHAPE with the real reason.
  static constexpr std::size_t kPoison = TSR_COUNT_INVALID;
  void not_blocks(std::size_t send, std::size_t p, const char* what, std::size_t* n) {
    if (*n == kPoison || p == 0 || send % p == 0) return;
    bad_ = std::string("tessera::grid::") + what + ": send span has " + std::to_string(send) +
           " elements, not a multiple of the axis size " + std::to_string(p);
    *n = kPoison;
  }
  // count: what to pass when got == want (default: want).
  std::size_t sized(std::size_t got, std::size_t want, const char* what, const char* which,
                    std::size_t count = ~std::size_t(0)) {
    if (got == want) {
      bad_.clear();
      return count == ~std::size_t(0) ? want : count;
    }
    bad_ = std::string("tessera::grid::") + what + ": " + which + " span has " + std::to_string(got) +
           " elements; expected " + std::to_string(want);
    return kPoison;
  }
  void call(tsr_status st) {
    if (!bad_.empty()) throw error(TSR_ERR_SHAPE, bad_);
    check(st, ctx_);
  }
  std::string bad_;
  tsr_grid h_ = nullptr;
  tsr_context ctx_ = nullptr;
};

// A snapshot of all ranks' counters (collective to take, local to read).
class report {
 public:
  explicit report(const context& ctx, int root = 0) { check(tsr_report_create(ctx.get(), root, &h_), ctx.get()); }
  ~report() { tsr_report_destroy(&h_); }
  report(report&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  report& operator=(report&& o) noexcept {
    if (this != &o) {
      tsr_report_destroy(&h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  report(const report&) = delete;
  report& operator=(const report&) = delete;

  [[nodiscard]] tsr_report get() const noexcept { return h_; }
  [[nodiscard]] std::vector<std::string> regions() const {
    int n = 0;
    check(tsr_report_region_count(h_, &n));
    std::vector<std::string> v;
    for (int i = 0; i < n; ++i) {
      const char* p = nullptr;
      check(tsr_report_region_path(h_, i, &p));
      v.emplace_back(p);
    }
    return v;
  }
  struct stats {
    tsr_counters min, max, sum;
  };
  [[nodiscard]] stats region_stats(int region) const {
    stats s{};
    check(tsr_report_stats(h_, region, &s.min, &s.max, &s.sum));
    return s;
  }
  [[nodiscard]] tsr_counters rank_counters(int region, int rank) const {
    tsr_counters c{};
    check(tsr_report_rank_counters(h_, region, rank, &c));
    return c;
  }
  [[nodiscard]] std::string str() const {
    std::size_t n = 0;
    check(tsr_report_format(h_, nullptr, 0, &n));
    std::string s(n + 1, '\0');
    check(tsr_report_format(h_, &s[0], s.size(), &n));
    s.resize(n);
    return s;
  }

 private:
  tsr_report h_ = nullptr;
};

}  // namespace tessera

#include "tessera/optimizer.hpp"  // tessera::optimizer (LAMB, LARS)
#include "tessera/attention.hpp"  // rings, ring exchange, ring attention
#include "tessera/gemm.hpp"  // distributed matrix multiplication
#include "tessera/energy.hpp"  // energy accounting: profiles, meters, energy reports
#include "tessera/io.hpp"  // checkpoints
#include "tessera/device.hpp"  // CUDA devices and streams

#endif  // TESSERA_HPP

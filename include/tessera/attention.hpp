// tessera C++ API for rings and ring attention (included by tessera.hpp).
//
//   tessera::ring ring(grid, TSR_AXIS_ROW);           // or ring(ctx, comm)
//   ring.exchange({tessera::circulate(span<const float>(k))},
//                 [&](const tessera::ring_step& s) { use(s.block<float>(0), s.source()); });
//
//   tessera::attn_config cfg;                          // TSR_ATTN_RING, contiguous
//   cfg.seq_len = N; cfg.causal = 1; cfg.layout = TSR_ATTN_LAYOUT_ZIGZAG;
//   tessera::attention_forward(ring, cfg, q, k, v, out, lse);   // attn_tensor views
//
// Collective calls throw tessera::error after the C call returned on every
// rank, so an error never leaves other ranks waiting.
#ifndef TESSERA_ATTENTION_HPP
#define TESSERA_ATTENTION_HPP

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "tessera/tessera.hpp"

namespace tessera {

// A CIRCULATE or ACCUMULATE buffer of an exchange.
template <class T>
tsr_ring_buffer circulate(span<const T> s) {
  return tsr_ring_buffer{const_cast<T*>(s.data()), s.size(), dtype_of<T>::value, TSR_RING_CIRCULATE};
}
template <class T>
tsr_ring_buffer accumulate(span<T> s) {
  return tsr_ring_buffer{s.data(), s.size(), dtype_of<T>::value, TSR_RING_ACCUMULATE};
}

// What the exchange's function sees at one step (see tsr_ring_step).
class ring_step {
 public:
  explicit ring_step(const tsr_ring_step& s) noexcept : s_(s) {}
  int step() const noexcept { return s_.step; }
  int source() const noexcept { return s_.source; }
  int rank() const noexcept { return s_.rank; }
  int size() const noexcept { return s_.size; }
  // Buffer i's block from source() (CIRCULATE), read-only.
  template <class T>
  span<const T> block(int i) const noexcept {
    return span<const T>(static_cast<const T*>(s_.blocks[i]), s_.counts[i]);
  }
  // The zeroed contribution to source()'s block of buffer i (ACCUMULATE).
  template <class T>
  span<T> contribution(int i) const noexcept {
    return span<T>(static_cast<T*>(s_.blocks[i]), s_.counts[i]);
  }
  const tsr_ring_step& get() const noexcept { return s_; }

 private:
  const tsr_ring_step& s_;
};

// Owns a tsr_ring (move-only). Construction and destruction are collective.
class ring {
 public:
  // Over one axis of a grid (collective over the axis).
  ring(const grid& g, tsr_grid_axis axis) { check(tsr_ring_create(g.get(), axis, &h_)); }
  // Over a communicator whose ranks belong to ctx (collective over comm).
  ring(const context& ctx, MPI_Comm comm) { check(tsr_ring_create_comm(ctx.get(), comm, &h_), ctx.get()); }
  ~ring() { tsr_ring_destroy(&h_); }
  ring(ring&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  ring& operator=(ring&& o) noexcept {
    if (this != &o) {
      tsr_ring_destroy(&h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ring(const ring&) = delete;
  ring& operator=(const ring&) = delete;

  [[nodiscard]] tsr_ring get() const noexcept { return h_; }
  [[nodiscard]] int rank() const { int r = 0, s = 0; check(tsr_ring_info(h_, &r, &s)); return r; }
  [[nodiscard]] int size() const { int r = 0, s = 0; check(tsr_ring_info(h_, &r, &s)); return s; }
  // High-water mark of the workspace bytes of calls on this ring (local).
  std::size_t workspace_peak(bool reset = false) {
    std::size_t b = 0;
    check(tsr_ring_workspace_peak(h_, &b, reset ? 1 : 0));
    return b;
  }
  // From inside an exchange step: let the transfers in flight progress.
  void progress() { check(tsr_ring_progress(h_)); }

  // Runs f(const ring_step&) at each of the p steps (collective). If f
  // throws on a rank, the exchange stops calling f there, still moves the
  // blocks, and fails on every rank: that rank rethrows its exception, the
  // others throw tessera::error (status: the tessera::error's own,
  // TSR_ERR_NO_MEMORY for std::bad_alloc, else TSR_ERR_INVALID_ARG).
  template <class F>
  void exchange(const std::vector<tsr_ring_buffer>& buffers, F&& f) {
    struct Tramp {
      F* f;
      std::exception_ptr err;
      static tsr_status call(const tsr_ring_step* s, void* user) {
        Tramp* t = static_cast<Tramp*>(user);
        try {
          (*t->f)(ring_step(*s));
          return TSR_SUCCESS;
        } catch (const error& e) {
          t->err = std::current_exception();
          return e.status();
        } catch (const std::bad_alloc&) {
          t->err = std::current_exception();
          return TSR_ERR_NO_MEMORY;
        } catch (...) {
          t->err = std::current_exception();
          return TSR_ERR_INVALID_ARG;
        }
      }
    } t{&f, nullptr};
    const tsr_status st = tsr_ring_exchange(h_, buffers.data(), static_cast<int>(buffers.size()), &Tramp::call, &t);
    if (t.err) std::rethrow_exception(t.err);
    check(st);
  }
  template <class F>
  void exchange(std::initializer_list<tsr_ring_buffer> buffers, F&& f) {
    exchange(std::vector<tsr_ring_buffer>(buffers), std::forward<F>(f));
  }

 private:
  tsr_ring h_ = nullptr;
};

// A (batch, heads, seq, dim) row-major view over a span; a span whose size
// is not batch*heads*seq*dim makes the call fail on every rank (this rank
// throws TSR_ERR_SHAPE with the reason).
template <class T>
class attn_tensor {
 public:
  attn_tensor() = default;
  attn_tensor(span<T> s, std::size_t batch, std::size_t heads, std::size_t seq, std::size_t dim)
      : t_{const_cast<void*>(static_cast<const void*>(s.data())), batch, heads, seq, dim}, span_size_(s.size()) {}
  [[nodiscard]] bool fits() const noexcept {
    return span_size_ == t_.batch * t_.heads * t_.seq * t_.dim;
  }
  [[nodiscard]] std::string why(const char* name) const {
    return std::string("tessera::attn: ") + name + " span has " + std::to_string(span_size_) +
           " elements; its shape (" + std::to_string(t_.batch) + ", " + std::to_string(t_.heads) + ", " +
           std::to_string(t_.seq) + ", " + std::to_string(t_.dim) + ") needs " +
           std::to_string(t_.batch * t_.heads * t_.seq * t_.dim);
  }
  // The C view; a misfit one has an impossible seq, so the C call fails.
  [[nodiscard]] tsr_attn_tensor c() const noexcept {
    tsr_attn_tensor x = t_;
    if (!fits()) x.seq = TSR_COUNT_INVALID;
    return x;
  }

 private:
  tsr_attn_tensor t_{nullptr, 0, 0, 0, 0};
  std::size_t span_size_ = 0;
};

// tsr_attn_config with its defaults (the type is set from the element type
// by the calls).
struct attn_config : tsr_attn_config {
  attn_config() : tsr_attn_config(TSR_ATTN_CONFIG_INIT) {}
};

namespace detail {
inline void attn_call(tsr_status st, std::initializer_list<std::pair<const char*, std::string>> misfits) {
  for (const auto& m : misfits)
    if (!m.second.empty()) throw error(TSR_ERR_SHAPE, m.second);
  check(st);
}
template <class T>
std::string misfit(const attn_tensor<T>& t, const char* name) {
  return t.fits() ? std::string() : t.why(name);
}
}  // namespace detail

// Forward (collective over the ring): see tsr_attn_forward. key_mask may be
// null; its shape is (batch, 1, seq, 1).
template <class T>
void attention_forward(ring& r, attn_config cfg, const attn_tensor<const T>& q, const attn_tensor<const T>& k,
                       const attn_tensor<const T>& v, const attn_tensor<T>& out, const attn_tensor<T>& lse,
                       const attn_tensor<const std::uint8_t>* key_mask = nullptr) {
  cfg.type = dtype_of<T>::value;
  const tsr_attn_tensor cq = q.c(), ck = k.c(), cv = v.c(), co = out.c(), cl = lse.c();
  tsr_attn_tensor cm{};
  if (key_mask) cm = key_mask->c();
  const tsr_status st = tsr_attn_forward(r.get(), &cfg, &cq, &ck, &cv, key_mask ? &cm : nullptr, &co, &cl);
  detail::attn_call(st, {{"q", detail::misfit(q, "q")},
                         {"k", detail::misfit(k, "k")},
                         {"v", detail::misfit(v, "v")},
                         {"out", detail::misfit(out, "out")},
                         {"lse", detail::misfit(lse, "lse")},
                         {"key_mask", key_mask ? detail::misfit(*key_mask, "key_mask") : std::string()}});
}

// Backward (collective over the ring): see tsr_attn_backward.
template <class T>
void attention_backward(ring& r, attn_config cfg, const attn_tensor<const T>& q, const attn_tensor<const T>& k,
                        const attn_tensor<const T>& v, const attn_tensor<const T>& out,
                        const attn_tensor<const T>& lse, const attn_tensor<const T>& dout, const attn_tensor<T>& dq,
                        const attn_tensor<T>& dk, const attn_tensor<T>& dv,
                        const attn_tensor<const std::uint8_t>* key_mask = nullptr) {
  cfg.type = dtype_of<T>::value;
  const tsr_attn_tensor cq = q.c(), ck = k.c(), cv = v.c(), co = out.c(), cl = lse.c(), cd = dout.c();
  const tsr_attn_tensor gq = dq.c(), gk = dk.c(), gv = dv.c();
  tsr_attn_tensor cm{};
  if (key_mask) cm = key_mask->c();
  const tsr_status st =
      tsr_attn_backward(r.get(), &cfg, &cq, &ck, &cv, key_mask ? &cm : nullptr, &co, &cl, &cd, &gq, &gk, &gv);
  detail::attn_call(st, {{"q", detail::misfit(q, "q")},
                         {"k", detail::misfit(k, "k")},
                         {"v", detail::misfit(v, "v")},
                         {"out", detail::misfit(out, "out")},
                         {"lse", detail::misfit(lse, "lse")},
                         {"dout", detail::misfit(dout, "dout")},
                         {"dq", detail::misfit(dq, "dq")},
                         {"dk", detail::misfit(dk, "dk")},
                         {"dv", detail::misfit(dv, "dv")},
                         {"key_mask", key_mask ? detail::misfit(*key_mask, "key_mask") : std::string()}});
}

// Layout helpers (local).
inline std::size_t shard_len(tsr_attn_layout layout, std::size_t seq_len, int nranks, int rank) {
  std::size_t n = 0;
  check(tsr_attn_shard_len(layout, seq_len, nranks, rank, &n));
  return n;
}
inline std::vector<std::int64_t> positions(tsr_attn_layout layout, std::size_t seq_len, int nranks, int rank) {
  std::vector<std::int64_t> p(shard_len(layout, seq_len, nranks, rank));
  check(tsr_attn_positions(layout, seq_len, nranks, rank, p.data()));
  return p;
}
// The rank's shard of a full (outer, seq_len, row) tensor.
template <class T>
std::vector<T> shard_extract(tsr_attn_layout layout, std::size_t seq_len, int nranks, int rank, span<const T> full,
                             std::size_t outer, std::size_t row) {
  if (full.size() != outer * seq_len * row)
    throw error(TSR_ERR_SHAPE, "tessera::shard_extract: full span has " + std::to_string(full.size()) +
                                   " elements; expected outer*seq_len*row = " + std::to_string(outer * seq_len * row));
  std::vector<T> local(outer * shard_len(layout, seq_len, nranks, rank) * row);
  check(tsr_attn_shard_extract(layout, seq_len, nranks, rank, full.data(), local.data(), outer, row * sizeof(T)));
  return local;
}
// Writes the rank's shard into a full (outer, seq_len, row) tensor.
template <class T>
void shard_insert(tsr_attn_layout layout, std::size_t seq_len, int nranks, int rank, span<const T> local, span<T> full,
                  std::size_t outer, std::size_t row) {
  if (full.size() != outer * seq_len * row ||
      local.size() != outer * shard_len(layout, seq_len, nranks, rank) * row)
    throw error(TSR_ERR_SHAPE, "tessera::shard_insert: span sizes do not match outer, seq_len and row");
  check(tsr_attn_shard_insert(layout, seq_len, nranks, rank, local.data(), full.data(), outer, row * sizeof(T)));
}

// The attention plan (tsr_attn_plan_create; local): the variant and layout
// of least modelled time, energy or energy x time. Throws TSR_ERR_NO_MEMORY
// when nothing fits the memory budget.
inline tsr_attn_plan plan_attention(const tsr_attn_problem& problem) {
  tsr_attn_plan p{};
  check(tsr_attn_plan_create(&problem, &p));
  return p;
}
// Every candidate the attention planner considers, with its time and joules.
inline std::vector<tsr_attn_candidate> attention_candidates(const tsr_attn_problem& problem) {
  std::size_t n = 0;
  check(tsr_attn_plan_candidates(&problem, nullptr, 0, &n));
  std::vector<tsr_attn_candidate> out(n);
  check(tsr_attn_plan_candidates(&problem, out.data(), out.size(), &n));
  return out;
}

}  // namespace tessera

#endif  // TESSERA_ATTENTION_HPP

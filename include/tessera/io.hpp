// tessera C++ API for checkpoints: an RAII owner over tsr_checkpoint,
// included by tessera/tessera.hpp. See tessera/io.h for the model and
// docs/FILES.md for the file layout.
//
//   {  // write: nothing reaches the disk before commit()
//     auto ck = tessera::checkpoint::create(ctx, "run.ckpt");
//     ck.put("W1", W1, w1.data());                  // a tessera::matrix and its local block
//     ck.put_shard("flat", params.data(), count, offset, global_count);
//     ck.put("opt", opt);                           // the optimizer's whole state
//     ck.set("step", step).set("config", text);
//     ck.commit();                                  // atomic: the old file or the new one
//   }
//   auto ck = tessera::checkpoint::open(ctx, "run.ckpt");   // any rank count, any grid
//   ck.get("W1", W1_other_layout, buf.data());
//   std::int64_t step = ck.get_int("step");
#ifndef TESSERA_IO_HPP
#define TESSERA_IO_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/io.h"
#include "tessera/tessera.hpp"

namespace tessera {

class matrix;
class optimizer;

// Owns a tsr_checkpoint (move-only). create/open and every put, set, commit
// and get are collective over the context; destruction is local (an
// uncommitted checkpoint is abandoned).
class checkpoint {
 public:
  // One array of a checkpoint as listed by arrays().
  struct array_info {
    std::string name;
    tsr_dtype type;
    int ndims;
    std::uint64_t shape[3];
  };

  [[nodiscard]] static checkpoint create(const context& ctx, const std::string& path,
                                         tsr_ckpt_format format = TSR_CKPT_AUTO, int flags = 0) {
    return create(ctx.get(), path, format, flags);
  }
  [[nodiscard]] static checkpoint create(tsr_context ctx, const std::string& path,
                                         tsr_ckpt_format format = TSR_CKPT_AUTO, int flags = 0) {
    checkpoint c(ctx);
    check(tsr_checkpoint_create(ctx, path.c_str(), format, flags, &c.h_), ctx);
    return c;
  }
  [[nodiscard]] static checkpoint open(const context& ctx, const std::string& path) { return open(ctx.get(), path); }
  [[nodiscard]] static checkpoint open(tsr_context ctx, const std::string& path) {
    checkpoint c(ctx);
    check(tsr_checkpoint_open(ctx, path.c_str(), &c.h_), ctx);
    return c;
  }

  ~checkpoint() { tsr_checkpoint_close(&h_); }
  checkpoint(checkpoint&& o) noexcept : h_(std::exchange(o.h_, nullptr)), ctx_(o.ctx_) {}
  checkpoint& operator=(checkpoint&& o) noexcept {
    if (this != &o) {
      tsr_checkpoint_close(&h_);
      h_ = std::exchange(o.h_, nullptr);
      ctx_ = o.ctx_;
    }
    return *this;
  }
  checkpoint(const checkpoint&) = delete;
  checkpoint& operator=(const checkpoint&) = delete;

  [[nodiscard]] tsr_checkpoint get() const noexcept { return h_; }

  // ---- writing (buffers are read at commit: keep them valid until then)
  checkpoint& put(const std::string& name, tsr_matrix mat, const void* local) {
    check(tsr_checkpoint_put_matrix(h_, name.c_str(), mat, local), ctx_);
    return *this;
  }
  // Elements [offset, offset + count) of a 1D array of global_count elements.
  template <class T>
  checkpoint& put_shard(const std::string& name, const T* local, std::uint64_t count, std::uint64_t offset,
                        std::uint64_t global_count) {
    check(tsr_checkpoint_put_shard(h_, name.c_str(), dtype_of<T>::value, global_count, offset, count, local), ctx_);
    return *this;
  }
  // The same data on every rank, of the given shape (1 to 3 dimensions).
  template <class T>
  checkpoint& put_replicated(const std::string& name, const T* data, const std::vector<std::uint64_t>& shape) {
    check(tsr_checkpoint_put_replicated(h_, name.c_str(), dtype_of<T>::value, static_cast<int>(shape.size()),
                                        shape.data(), data),
          ctx_);
    return *this;
  }
  template <class T>
  checkpoint& put_replicated(const std::string& name, const std::vector<T>& data) {
    return put_replicated(name, data.data(), {static_cast<std::uint64_t>(data.size())});
  }
  checkpoint& put(const std::string& prefix, tsr_optimizer opt) {
    check(tsr_checkpoint_put_optimizer(h_, prefix.c_str(), opt), ctx_);
    return *this;
  }
  checkpoint& set(const std::string& key, std::int64_t v) {
    check(tsr_checkpoint_set_int(h_, key.c_str(), v), ctx_);
    return *this;
  }
  checkpoint& set(const std::string& key, int v) { return set(key, static_cast<std::int64_t>(v)); }
  checkpoint& set(const std::string& key, double v) {
    check(tsr_checkpoint_set_double(h_, key.c_str(), v), ctx_);
    return *this;
  }
  checkpoint& set(const std::string& key, const std::string& v) {
    check(tsr_checkpoint_set_string(h_, key.c_str(), v.c_str()), ctx_);
    return *this;
  }
  checkpoint& set(const std::string& key, const char* v) { return set(key, std::string(v)); }
  void commit() { check(tsr_checkpoint_commit(h_), ctx_); }

  // ---- reading
  [[nodiscard]] std::vector<array_info> arrays() const {
    int n = 0;
    check(tsr_checkpoint_array_count(h_, &n), ctx_);
    std::vector<array_info> v(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      const char* name = nullptr;
      array_info& a = v[static_cast<std::size_t>(i)];
      check(tsr_checkpoint_array_info(h_, i, &name, &a.type, &a.ndims, a.shape), ctx_);
      a.name = name;
    }
    return v;
  }
  [[nodiscard]] bool has_array(const std::string& name) const {
    int i = -1;
    check(tsr_checkpoint_find_array(h_, name.c_str(), &i), ctx_);
    return i >= 0;
  }
  void get(const std::string& name, tsr_matrix mat, void* local) {
    check(tsr_checkpoint_get_matrix(h_, name.c_str(), mat, local), ctx_);
  }
  template <class T>
  void get_shard(const std::string& name, T* local, std::uint64_t count, std::uint64_t offset,
                 std::uint64_t global_count) {
    check(tsr_checkpoint_get_shard(h_, name.c_str(), dtype_of<T>::value, global_count, offset, count, local), ctx_);
  }
  template <class T>
  void get_replicated(const std::string& name, T* data, const std::vector<std::uint64_t>& shape) {
    check(tsr_checkpoint_get_replicated(h_, name.c_str(), dtype_of<T>::value, static_cast<int>(shape.size()),
                                        shape.data(), data),
          ctx_);
  }
  template <class T>
  void get_replicated(const std::string& name, std::vector<T>& data) {
    get_replicated(name, data.data(), {static_cast<std::uint64_t>(data.size())});
  }
  void get(const std::string& prefix, tsr_optimizer opt) {
    check(tsr_checkpoint_get_optimizer(h_, prefix.c_str(), opt), ctx_);
  }
  [[nodiscard]] std::vector<std::string> attributes() const {
    int n = 0;
    check(tsr_checkpoint_attr_count(h_, &n), ctx_);
    std::vector<std::string> v;
    for (int i = 0; i < n; ++i) {
      const char* key = nullptr;
      check(tsr_checkpoint_attr_info(h_, i, &key, nullptr), ctx_);
      v.emplace_back(key);
    }
    return v;
  }
  [[nodiscard]] std::int64_t get_int(const std::string& key) const {
    std::int64_t v = 0;
    check(tsr_checkpoint_get_int(h_, key.c_str(), &v), ctx_);
    return v;
  }
  [[nodiscard]] double get_double(const std::string& key) const {
    double v = 0;
    check(tsr_checkpoint_get_double(h_, key.c_str(), &v), ctx_);
    return v;
  }
  [[nodiscard]] std::string get_string(const std::string& key) const {
    std::size_t n = 0;
    check(tsr_checkpoint_get_string(h_, key.c_str(), nullptr, 0, &n), ctx_);
    std::string s(n + 1, '\0');
    check(tsr_checkpoint_get_string(h_, key.c_str(), &s[0], s.size(), &n), ctx_);
    s.resize(n);
    return s;
  }
  [[nodiscard]] tsr_ckpt_format format() const {
    tsr_ckpt_format f = TSR_CKPT_AUTO;
    check(tsr_checkpoint_format(h_, &f), ctx_);
    return f;
  }

 private:
  explicit checkpoint(tsr_context ctx) : ctx_(ctx) {}
  tsr_checkpoint h_ = nullptr;
  tsr_context ctx_ = nullptr;
};

}  // namespace tessera

#endif  // TESSERA_IO_HPP

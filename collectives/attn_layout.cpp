// Sequence layouts (contiguous, zigzag, striped): shard lengths, position
// ids, segments, and the local permutation helpers of the C API.
#include <cstring>

#include "attention_impl.hpp"
#include "core.hpp"

namespace tsr {
namespace attn {

size_t shard_len(tsr_attn_layout layout, size_t n, int p, int r) {
  const size_t P = static_cast<size_t>(p), R = static_cast<size_t>(r);
  switch (layout) {
    case TSR_ATTN_LAYOUT_CONTIGUOUS: return part_size(n, P, R);
    case TSR_ATTN_LAYOUT_ZIGZAG: return part_size(n, 2 * P, R) + part_size(n, 2 * P, 2 * P - 1 - R);
    case TSR_ATTN_LAYOUT_STRIPED: return n / P + (R < n % P ? 1 : 0);
  }
  return 0;
}

int64_t position(tsr_attn_layout layout, size_t n, int p, int r, size_t i) {
  const size_t P = static_cast<size_t>(p), R = static_cast<size_t>(r);
  switch (layout) {
    case TSR_ATTN_LAYOUT_CONTIGUOUS: return static_cast<int64_t>(part_start(n, P, R) + i);
    case TSR_ATTN_LAYOUT_ZIGZAG: {
      const size_t c0 = part_size(n, 2 * P, R);
      return static_cast<int64_t>(i < c0 ? part_start(n, 2 * P, R) + i : part_start(n, 2 * P, 2 * P - 1 - R) + (i - c0));
    }
    case TSR_ATTN_LAYOUT_STRIPED: return static_cast<int64_t>(i * P + R);
  }
  return 0;
}

void positions(tsr_attn_layout layout, size_t n, int p, int r, int64_t* out) {
  const size_t len = shard_len(layout, n, p, r);
  for (size_t i = 0; i < len; ++i) out[i] = position(layout, n, p, r, i);
}

size_t shard_offset(tsr_attn_layout layout, size_t n, int p, int r) {
  size_t off = 0;
  for (int j = 0; j < r; ++j) off += shard_len(layout, n, p, j);
  return off;
}

int segments(tsr_attn_layout layout, size_t n, int p, int r, size_t base, Seg* out) {
  const size_t len = shard_len(layout, n, p, r);
  int k = 0;
  if (layout == TSR_ATTN_LAYOUT_ZIGZAG) {
    const size_t c0 = part_size(n, 2 * static_cast<size_t>(p), static_cast<size_t>(r));
    if (c0 > 0) out[k++] = {base, base + c0};
    if (len > c0) out[k++] = {base + c0, base + len};
    return k;
  }
  if (len > 0) out[k++] = {base, base + len};
  return k;
}

}  // namespace attn

namespace {

tsr_status check_layout_args(tsr_attn_layout layout, size_t seq_len, int nranks, int rank, bool need_rank) {
  if (layout != TSR_ATTN_LAYOUT_CONTIGUOUS && layout != TSR_ATTN_LAYOUT_ZIGZAG && layout != TSR_ATTN_LAYOUT_STRIPED)
    return fail(TSR_ERR_INVALID_ARG, "argument 'layout' = %d is not a tsr_attn_layout", static_cast<int>(layout));
  if (nranks < 1) return fail(TSR_ERR_INVALID_ARG, "argument 'nranks' = %d; expected >= 1", nranks);
  if (need_rank && (rank < 0 || rank >= nranks))
    return fail(TSR_ERR_INVALID_ARG, "argument 'rank' = %d; expected 0 <= rank < nranks = %d", rank, nranks);
  if (seq_len > static_cast<size_t>(INT64_MAX) / 2)
    return fail(TSR_ERR_INVALID_ARG, "argument 'seq_len' = %zu is too large", seq_len);
  return TSR_SUCCESS;
}

// The full tensor (outer, seq_len, row_bytes) must be addressable: every
// offset below is then below its size and cannot wrap.
tsr_status check_tensor_bytes(size_t outer, size_t seq_len, size_t row_bytes) {
  size_t bytes = 0;
  if (!checked_mul(&bytes, {outer, seq_len, row_bytes}))
    return fail(TSR_ERR_INVALID_ARG, "arguments 'outer' = %zu, 'seq_len' = %zu and 'row_bytes' = %zu: the tensor's "
                "size in bytes overflows size_t", outer, seq_len, row_bytes);
  return TSR_SUCCESS;
}

// Copies rows of row_bytes between a full (outer, seq_len) and a local
// (outer, len) tensor; to_local chooses the direction.
tsr_status move_shard(tsr_attn_layout layout, size_t seq_len, int nranks, int rank, const void* src, void* dst,
                      size_t outer, size_t row_bytes, bool to_local) {
  TSR_TRY(check_layout_args(layout, seq_len, nranks, rank, true));
  TSR_TRY(check_tensor_bytes(outer, seq_len, row_bytes));
  const size_t len = attn::shard_len(layout, seq_len, nranks, rank);
  if (outer > 0 && len > 0 && row_bytes > 0) {
    if (src == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", to_local ? "full" : "local");
    if (dst == nullptr) return fail(TSR_ERR_INVALID_ARG, "argument '%s' is NULL", to_local ? "local" : "full");
  }
  const unsigned char* s = static_cast<const unsigned char*>(src);
  unsigned char* d = static_cast<unsigned char*>(dst);
  for (size_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < len; ++i) {
      const size_t g = static_cast<size_t>(attn::position(layout, seq_len, nranks, rank, i));
      const size_t full = (o * seq_len + g) * row_bytes, local = (o * len + i) * row_bytes;
      if (to_local)
        std::memcpy(d + local, s + full, row_bytes);
      else
        std::memcpy(d + full, s + local, row_bytes);
    }
  return TSR_SUCCESS;
}

}  // namespace
}  // namespace tsr

using tsr::finish;

extern "C" {

tsr_status tsr_attn_shard_len(tsr_attn_layout layout, size_t seq_len, int nranks, int rank, size_t* local_len) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_layout_args(layout, seq_len, nranks, rank, true));
    TSR_CHECK_NOT_NULL(local_len);
    *local_len = tsr::attn::shard_len(layout, seq_len, nranks, rank);
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_attn_shard_len", st);
}

tsr_status tsr_attn_positions(tsr_attn_layout layout, size_t seq_len, int nranks, int rank, int64_t* positions) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_layout_args(layout, seq_len, nranks, rank, true));
    if (tsr::attn::shard_len(layout, seq_len, nranks, rank) > 0) TSR_CHECK_NOT_NULL(positions);
    tsr::attn::positions(layout, seq_len, nranks, rank, positions);
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_attn_positions", st);
}

tsr_status tsr_attn_shard_extract(tsr_attn_layout layout, size_t seq_len, int nranks, int rank, const void* full,
                                  void* local, size_t outer, size_t row_bytes) {
  return finish(nullptr, "tsr_attn_shard_extract",
                tsr::move_shard(layout, seq_len, nranks, rank, full, local, outer, row_bytes, true));
}

tsr_status tsr_attn_shard_insert(tsr_attn_layout layout, size_t seq_len, int nranks, int rank, const void* local,
                                 void* full, size_t outer, size_t row_bytes) {
  return finish(nullptr, "tsr_attn_shard_insert",
                tsr::move_shard(layout, seq_len, nranks, rank, local, full, outer, row_bytes, false));
}

tsr_status tsr_attn_permute(tsr_attn_layout layout, size_t seq_len, int nranks, int inverse, const void* in,
                            void* out, size_t outer, size_t row_bytes) {
  tsr_status st = [&]() -> tsr_status {
    TSR_TRY(tsr::check_layout_args(layout, seq_len, nranks, 0, false));
    TSR_TRY(tsr::check_tensor_bytes(outer, seq_len, row_bytes));
    const size_t bytes = outer * seq_len * row_bytes;  // checked above
    if (bytes == 0) return TSR_SUCCESS;
    TSR_CHECK_NOT_NULL(in);
    TSR_CHECK_NOT_NULL(out);
    const unsigned char* a = static_cast<const unsigned char*>(in);
    unsigned char* b = static_cast<unsigned char*>(out);
    if (a < b + bytes && b < a + bytes)
      return tsr::fail(TSR_ERR_INVALID_ARG, "arguments 'in' and 'out' overlap; tsr_attn_permute is not in place");
    size_t idx = 0;  // layout-order index
    for (int r = 0; r < nranks; ++r) {
      const size_t len = tsr::attn::shard_len(layout, seq_len, nranks, r);
      for (size_t i = 0; i < len; ++i, ++idx) {
        const size_t g = static_cast<size_t>(tsr::attn::position(layout, seq_len, nranks, r, i));
        const size_t from = inverse ? idx : g, to = inverse ? g : idx;
        for (size_t o = 0; o < outer; ++o)
          std::memcpy(b + (o * seq_len + to) * row_bytes, a + (o * seq_len + from) * row_bytes, row_bytes);
      }
    }
    return TSR_SUCCESS;
  }();
  return finish(nullptr, "tsr_attn_permute", st);
}

}  // extern "C"

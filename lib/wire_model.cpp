// The wire models of collectives (wire_model.hpp): pure arithmetic.
#include "wire_model.hpp"

#include <cstddef>
#include <utility>

namespace tsr {

// ------------------------------------------------------------------ models
WireModel model_bcast(int rank, int size, int root, uint64_t bytes) {
  WireModel m;
  if (size <= 1) return m;
  const int v = (rank - root + size) % size;
  int mask = 1;
  while (mask < size) {
    if (v & mask) {
      m.recv.push_back({(v - mask + root) % size, 1, bytes});
      break;
    }
    mask <<= 1;
  }
  mask >>= 1;
  while (mask > 0) {
    if (v + mask < size) m.sent.push_back({(v + mask + root) % size, 1, bytes});
    mask >>= 1;
  }
  return m;
}

WireModel model_reduce(int rank, int size, int root, uint64_t bytes) {
  WireModel m = model_bcast(rank, size, root, bytes);
  std::swap(m.sent, m.recv);
  return m;
}

namespace {
uint64_t chunk(uint64_t count, int size, int i) {
  const uint64_t p = static_cast<uint64_t>(size);
  return count / p + (static_cast<uint64_t>(i) < count % p ? 1 : 0);
}
int mod(int a, int p) { return ((a % p) + p) % p; }
}  // namespace

WireModel model_allreduce(int rank, int size, uint64_t count, uint64_t elem_size) {
  WireModel m;
  if (size <= 1) return m;
  const int p = size;
  const uint64_t steps = 2 * static_cast<uint64_t>(p - 1);
  const uint64_t sent = (count - chunk(count, p, mod(rank + 1, p))) + (count - chunk(count, p, mod(rank + 2, p)));
  const uint64_t recv = (count - chunk(count, p, rank)) + (count - chunk(count, p, mod(rank + 1, p)));
  m.sent.push_back({mod(rank + 1, p), steps, sent * elem_size});
  m.recv.push_back({mod(rank - 1, p), steps, recv * elem_size});
  return m;
}

WireModel model_allgatherv(int rank, int size, const std::vector<uint64_t>& b) {
  WireModel m;
  if (size <= 1) return m;
  uint64_t total = 0;
  for (uint64_t x : b) total += x;
  const uint64_t steps = static_cast<uint64_t>(size - 1);
  m.sent.push_back({mod(rank + 1, size), steps, total - b[static_cast<size_t>(mod(rank + 1, size))]});
  m.recv.push_back({mod(rank - 1, size), steps, total - b[static_cast<size_t>(rank)]});
  return m;
}

WireModel model_reduce_scatterv(int rank, int size, const std::vector<uint64_t>& b) {
  WireModel m;
  if (size <= 1) return m;
  uint64_t total = 0;
  for (uint64_t x : b) total += x;
  const uint64_t steps = static_cast<uint64_t>(size - 1);
  m.sent.push_back({mod(rank + 1, size), steps, total - b[static_cast<size_t>(rank)]});
  m.recv.push_back({mod(rank - 1, size), steps, total - b[static_cast<size_t>(mod(rank - 1, size))]});
  return m;
}

WireModel model_alltoall(int rank, int size, uint64_t bytes_per_peer) {
  WireModel m;
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    m.sent.push_back({q, 1, bytes_per_peer});
    m.recv.push_back({q, 1, bytes_per_peer});
  }
  return m;
}

WireModel model_gather(int rank, int size, int root, uint64_t bytes_per_rank) {
  WireModel m;
  if (rank != root) {
    m.sent.push_back({root, 1, bytes_per_rank});
  } else {
    for (int q = 0; q < size; ++q)
      if (q != root) m.recv.push_back({q, 1, bytes_per_rank});
  }
  return m;
}

WireModel model_scatter(int rank, int size, int root, uint64_t bytes_per_rank) {
  WireModel m = model_gather(rank, size, root, bytes_per_rank);
  std::swap(m.sent, m.recv);
  return m;
}

WireModel model_barrier(int rank, int size) {
  WireModel m;
  for (int dist = 1; dist < size; dist <<= 1) {
    m.sent.push_back({mod(rank + dist, size), 1, 0});
    m.recv.push_back({mod(rank - dist, size), 1, 0});
  }
  return m;
}

}  // namespace tsr

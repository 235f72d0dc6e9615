// The wire models of collectives (wire_model.hpp): pure arithmetic.
#include "wire_model.hpp"

#include <cstddef>
#include <utility>

namespace tsr {

// ------------------------------------------------------------------ models
void model_bcast_into(WireModel& m, int rank, int size, int root, uint64_t bytes) {
  m.sent.clear();
  m.recv.clear();
  if (size <= 1) return;
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
}

void model_reduce_into(WireModel& m, int rank, int size, int root, uint64_t bytes) {
  model_bcast_into(m, rank, size, root, bytes);
  std::swap(m.sent, m.recv);
}

namespace {
int mod(int a, int p) { return ((a % p) + p) % p; }
}  // namespace

void model_allreduce_into(WireModel& m, int rank, int size, uint64_t count, uint64_t elem_size) {
  m.sent.clear();
  m.recv.clear();
  if (size <= 1) return;
  // One division (this runs on every all-reduce): chunk i has q elements,
  // plus one for the first count mod p chunks.
  const int p = size;
  const uint64_t q = count / static_cast<uint64_t>(p), rem = count - q * static_cast<uint64_t>(p);
  auto chunk_of = [&](int i) { return q + (static_cast<uint64_t>(i) < rem ? 1 : 0); };
  const int r1 = rank + 1 < p ? rank + 1 : rank + 1 - p;
  const int r2 = r1 + 1 < p ? r1 + 1 : r1 + 1 - p;
  const int l1 = rank > 0 ? rank - 1 : p - 1;
  const uint64_t steps = 2 * static_cast<uint64_t>(p - 1);
  const uint64_t sent = (count - chunk_of(r1)) + (count - chunk_of(r2));
  const uint64_t recv = (count - chunk_of(rank)) + (count - chunk_of(r1));
  m.sent.push_back({r1, steps, sent * elem_size});
  m.recv.push_back({l1, steps, recv * elem_size});
}

void model_allgatherv_into(WireModel& m, int rank, int size, const std::vector<uint64_t>& b) {
  m.sent.clear();
  m.recv.clear();
  if (size <= 1) return;
  uint64_t total = 0;
  for (uint64_t x : b) total += x;
  const uint64_t steps = static_cast<uint64_t>(size - 1);
  m.sent.push_back({mod(rank + 1, size), steps, total - b[static_cast<size_t>(mod(rank + 1, size))]});
  m.recv.push_back({mod(rank - 1, size), steps, total - b[static_cast<size_t>(rank)]});
}

void model_reduce_scatterv_into(WireModel& m, int rank, int size, const std::vector<uint64_t>& b) {
  m.sent.clear();
  m.recv.clear();
  if (size <= 1) return;
  uint64_t total = 0;
  for (uint64_t x : b) total += x;
  const uint64_t steps = static_cast<uint64_t>(size - 1);
  m.sent.push_back({mod(rank + 1, size), steps, total - b[static_cast<size_t>(rank)]});
  m.recv.push_back({mod(rank - 1, size), steps, total - b[static_cast<size_t>(mod(rank - 1, size))]});
}

void model_alltoall_into(WireModel& m, int rank, int size, uint64_t bytes_per_peer) {
  m.sent.clear();
  m.recv.clear();
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    m.sent.push_back({q, 1, bytes_per_peer});
    m.recv.push_back({q, 1, bytes_per_peer});
  }
}

void model_gather_into(WireModel& m, int rank, int size, int root, uint64_t bytes_per_rank) {
  m.sent.clear();
  m.recv.clear();
  if (rank != root) {
    m.sent.push_back({root, 1, bytes_per_rank});
  } else {
    for (int q = 0; q < size; ++q)
      if (q != root) m.recv.push_back({q, 1, bytes_per_rank});
  }
}

void model_scatter_into(WireModel& m, int rank, int size, int root, uint64_t bytes_per_rank) {
  model_gather_into(m, rank, size, root, bytes_per_rank);
  std::swap(m.sent, m.recv);
}

void model_barrier_into(WireModel& m, int rank, int size) {
  m.sent.clear();
  m.recv.clear();
  for (int dist = 1; dist < size; dist <<= 1) {
    m.sent.push_back({mod(rank + dist, size), 1, 0});
    m.recv.push_back({mod(rank - dist, size), 1, 0});
  }
}


// Equal blocks of `block` bytes (allgather, reduce-scatter with one count):
// the same as the v-forms, without building the block list.
void model_allgather_equal_into(WireModel& m, int rank, int size, uint64_t block) {
  m.sent.clear();
  m.recv.clear();
  if (size <= 1) return;
  const uint64_t steps = static_cast<uint64_t>(size - 1);
  m.sent.push_back({mod(rank + 1, size), steps, steps * block});
  m.recv.push_back({mod(rank - 1, size), steps, steps * block});
}

void model_reduce_scatter_equal_into(WireModel& m, int rank, int size, uint64_t block) {
  model_allgather_equal_into(m, rank, size, block);
}

// The same models, returned by value.
WireModel model_bcast(int rank, int size, int root, uint64_t bytes) {
  WireModel m;
  model_bcast_into(m, rank, size, root, bytes);
  return m;
}

WireModel model_reduce(int rank, int size, int root, uint64_t bytes) {
  WireModel m;
  model_reduce_into(m, rank, size, root, bytes);
  return m;
}

WireModel model_allreduce(int rank, int size, uint64_t count, uint64_t elem_size) {
  WireModel m;
  model_allreduce_into(m, rank, size, count, elem_size);
  return m;
}

WireModel model_allgatherv(int rank, int size, const std::vector<uint64_t>& b) {
  WireModel m;
  model_allgatherv_into(m, rank, size, b);
  return m;
}

WireModel model_reduce_scatterv(int rank, int size, const std::vector<uint64_t>& b) {
  WireModel m;
  model_reduce_scatterv_into(m, rank, size, b);
  return m;
}

WireModel model_alltoall(int rank, int size, uint64_t bytes_per_peer) {
  WireModel m;
  model_alltoall_into(m, rank, size, bytes_per_peer);
  return m;
}

WireModel model_gather(int rank, int size, int root, uint64_t bytes_per_rank) {
  WireModel m;
  model_gather_into(m, rank, size, root, bytes_per_rank);
  return m;
}

WireModel model_scatter(int rank, int size, int root, uint64_t bytes_per_rank) {
  WireModel m;
  model_scatter_into(m, rank, size, root, bytes_per_rank);
  return m;
}

WireModel model_barrier(int rank, int size) {
  WireModel m;
  model_barrier_into(m, rank, size);
  return m;
}

}  // namespace tsr

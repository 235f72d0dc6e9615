// The device transport (issue 17, docs/GPU.md), on a GPU: every accounted
// collective of tessera.h with device buffers against the same call with
// host buffers (exact: integer-valued data), the counters of both runs
// against each other (device_to_device_bytes = the host run's self and
// same-node bytes; payloads, calls, inter-node and control equal), stream
// semantics, and the refusals: mixed host/device buffers, a device buffer on
// a grid made before binding, a device buffer on an unbound context.
//
// Skips (exit 77, device_main.cpp) where no GPU is visible. Where the ranks
// share one GPU, NCCL cannot serve them (it refuses two ranks on one GPU in
// a communicator) and the cases need a CUDA-aware MPI: without one they
// GTEST_SKIP with the library's message.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define TSR_OK(call) ASSERT_EQ((call), TSR_SUCCESS) << #call << ": " << tsr_last_error(nullptr)

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
bool contains(const char* s, const char* part) { return s != nullptr && std::strstr(s, part) != nullptr; }

// One host context and one device-bound context, a 1D grid over all ranks on
// each (the device grid made after binding).
struct Pair {
  tsr_context host = nullptr, dev = nullptr;
  tsr_grid hgrid = nullptr, dgrid = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  void init() {
    int n = 0;
    TSR_OK(tsr_device_count(&n));
    device = world_rank() % n;
    CUDA_OK(cudaSetDevice(device));
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TSR_OK(tsr_context_create(MPI_COMM_WORLD, &host));
    TSR_OK(tsr_context_create(MPI_COMM_WORLD, &dev));
    TSR_OK(tsr_context_set_device(dev, device, stream));
    const int dims[3] = {world_size(), 1, 1};
    TSR_OK(tsr_grid_create(host, TSR_GRID_1D, dims, &hgrid));
    TSR_OK(tsr_grid_create(dev, TSR_GRID_1D, dims, &dgrid));
  }
  ~Pair() {
    tsr_grid_destroy(&dgrid);
    tsr_grid_destroy(&hgrid);
    tsr_context_destroy(&dev);
    tsr_context_destroy(&host);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

// A device copy of host data, freed with the object.
template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), (count > 0 ? count : 1) * sizeof(T)) != cudaSuccess) p = nullptr;
  }
  ~DevBuf() {
    if (p != nullptr) cudaFree(p);
  }
  void put(const std::vector<T>& v) { EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

// Integer-valued inputs: every reduction order gives the same floats.
std::vector<float> input(size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((static_cast<int>(i) * 7 + world_rank() * 13 + salt) % 97 - 48);
  return v;
}

// The device run's counters against the host run's (docs/ACCOUNTING.md,
// "Device memory").
void expect_device_counters(const tsr_counters& h, const tsr_counters& d, const std::string& what) {
  EXPECT_EQ(d.coll_payload_sent, h.coll_payload_sent) << what;
  EXPECT_EQ(d.coll_payload_recv, h.coll_payload_recv) << what;
  for (int k = 0; k < TSR_COLL_KINDS; ++k) EXPECT_EQ(d.coll_calls[k], h.coll_calls[k]) << what << " kind " << k;
  const uint64_t local = h.coll_wire_sent[TSR_PEER_SELF].bytes + h.coll_wire_sent[TSR_PEER_NODE].bytes +
                         h.p2p_sent[TSR_PEER_SELF].bytes + h.p2p_sent[TSR_PEER_NODE].bytes;
  EXPECT_EQ(d.device_to_device_bytes, local) << what;
  EXPECT_EQ(d.coll_wire_sent[TSR_PEER_REMOTE].bytes, h.coll_wire_sent[TSR_PEER_REMOTE].bytes) << what;
  EXPECT_EQ(d.p2p_sent[TSR_PEER_REMOTE].bytes, h.p2p_sent[TSR_PEER_REMOTE].bytes) << what;
  EXPECT_EQ(d.coll_wire_sent[TSR_PEER_NODE].bytes, 0u) << what;
  EXPECT_EQ(d.control.bytes, h.control.bytes) << what;
  EXPECT_EQ(h.device_to_device_bytes, 0u) << what;
}

// Runs f(grid, sbuf, rbuf) on host buffers and on device buffers, compares
// the results exactly and the counters as above. Returns false (and skips)
// where this configuration cannot move device memory.
template <class F>
void compare(Pair& e, const char* what, size_t scount, size_t rcount, F f) {
  const std::vector<float> in = input(scount, 3);
  std::vector<float> hout(rcount, -1.0f);
  TSR_OK(tsr_counters_reset(e.host));
  TSR_OK(tsr_counters_reset(e.dev));
  TSR_OK(f(e.hgrid, in.data(), hout.data()));
  DevBuf<float> din(scount), dout(rcount);
  ASSERT_NE(din.p, nullptr);
  ASSERT_NE(dout.p, nullptr);
  din.put(in);
  dout.put(std::vector<float>(rcount, -1.0f));
  const tsr_status st = f(e.dgrid, din.p, dout.p);
  if (st == TSR_ERR_UNSUPPORTED) GTEST_SKIP() << what << ": " << tsr_last_error(e.dev);
  ASSERT_EQ(st, TSR_SUCCESS) << what << ": " << tsr_last_error(e.dev);
  CUDA_OK(cudaStreamSynchronize(e.stream));  // stream semantics: ordered on the context's stream
  const std::vector<float> dres = dout.get();
  for (size_t i = 0; i < rcount; ++i) ASSERT_EQ(dres[i], hout[i]) << what << " element " << i;
  tsr_counters h, d;
  TSR_OK(tsr_counters_get(e.host, "total", &h));
  TSR_OK(tsr_counters_get(e.dev, "total", &d));
  expect_device_counters(h, d, what);
}

class DeviceTransport : public ::testing::Test {
 protected:
  void SetUp() override { e.init(); }
  Pair e;
};

TEST_F(DeviceTransport, BindingIsVisible) {
  int dev = -1;
  void* s = nullptr;
  TSR_OK(tsr_context_get_device(e.dev, &dev, &s));
  EXPECT_EQ(dev, e.device);
  EXPECT_EQ(s, static_cast<void*>(e.stream));
  DevBuf<float> b(4);
  int space = -1;
  TSR_OK(tsr_pointer_space(b.p, &space));
  EXPECT_EQ(space, TSR_MEMORY_DEVICE);
  float x = 0;
  TSR_OK(tsr_pointer_space(&x, &space));
  EXPECT_EQ(space, TSR_MEMORY_HOST);
  // The caller's current device is left as it was.
  int cur = -1;
  CUDA_OK(cudaGetDevice(&cur));
  EXPECT_EQ(cur, e.device);
}

TEST_F(DeviceTransport, AllreduceMatchesHost) {
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1} << 18})
    compare(e, "allreduce", n, n, [&](tsr_grid g, const float* s, float* r) {
      return tsr_allreduce(g, TSR_AXIS_ALL, s, r, n, TSR_FLOAT32, TSR_SUM);
    });
}

// Copies n floats s -> r on the host or on the context's stream.
void copy_in(const Pair& e, float* r, const float* s, size_t n) {
  int sp = 0;
  tsr_pointer_space(r, &sp);
  if (sp == TSR_MEMORY_DEVICE)
    (void)cudaMemcpyAsync(r, s, n * sizeof(float), cudaMemcpyDeviceToDevice, e.stream);
  else
    std::memcpy(r, s, n * sizeof(float));
}

TEST_F(DeviceTransport, AllreduceInPlaceMax) {
  const size_t n = 4096;
  compare(e, "allreduce in place", n, n, [&](tsr_grid g, const float* s, float* r) {
    copy_in(e, r, s, n);
    return tsr_allreduce(g, TSR_AXIS_ALL, r, r, n, TSR_FLOAT32, TSR_MAX);
  });
}

TEST_F(DeviceTransport, BcastAllgatherReduceScatterAlltoallShift) {
  const size_t n = 3000;
  const size_t p = static_cast<size_t>(world_size());
  compare(e, "bcast", n, n, [&](tsr_grid g, const float* s, float* r) {
    copy_in(e, r, s, n);  // bcast is in place: the input first
    return tsr_bcast(g, TSR_AXIS_ALL, r, n, TSR_FLOAT32, static_cast<int>(p - 1));
  });
  compare(e, "allgather", n, n * p, [&](tsr_grid g, const float* s, float* r) {
    return tsr_allgather(g, TSR_AXIS_ALL, s, n, r, TSR_FLOAT32);
  });
  compare(e, "reduce_scatter", n * p, n, [&](tsr_grid g, const float* s, float* r) {
    return tsr_reduce_scatter(g, TSR_AXIS_ALL, s, r, n, TSR_FLOAT32, TSR_SUM);
  });
  compare(e, "alltoall", n * p, n * p, [&](tsr_grid g, const float* s, float* r) {
    return tsr_alltoall(g, TSR_AXIS_ALL, s, r, n, TSR_FLOAT32);
  });
  compare(e, "shift", n, n, [&](tsr_grid g, const float* s, float* r) {
    return tsr_shift(g, TSR_AXIS_ALL, s, r, n, TSR_FLOAT32, 1);
  });
}

TEST_F(DeviceTransport, Refusals) {
  const size_t n = 16;
  DevBuf<float> d(n);
  std::vector<float> h(n, 1.0f);
  // Host and device buffers in one call: every rank, naming the arguments.
  EXPECT_EQ(tsr_allreduce(e.dgrid, TSR_AXIS_ALL, d.p, h.data(), n, TSR_FLOAT32, TSR_SUM), TSR_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(tsr_last_error(e.dev), "'sbuf'")) << tsr_last_error(e.dev);
  // A device buffer on a context bound to no device.
  EXPECT_EQ(tsr_allreduce(e.hgrid, TSR_AXIS_ALL, d.p, d.p, n, TSR_FLOAT32, TSR_SUM), TSR_ERR_STATE);
  EXPECT_TRUE(contains(tsr_last_error(e.host), "tsr_context_set_device")) << tsr_last_error(e.host);
  // Device memory on one rank only: the agreement refuses it on every rank.
  if (world_size() > 1) {
    const bool mine = world_rank() == 0;
    EXPECT_EQ(tsr_allreduce(e.dgrid, TSR_AXIS_ALL, mine ? static_cast<void*>(d.p) : h.data(),
                            mine ? static_cast<void*>(d.p) : h.data(), n, TSR_FLOAT32, TSR_SUM),
              TSR_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(tsr_last_error(e.dev), "memory space")) << tsr_last_error(e.dev);
  }
  // A grid made before binding keeps the host path.
  tsr_context c = nullptr;
  tsr_grid g = nullptr;
  TSR_OK(tsr_context_create(MPI_COMM_WORLD, &c));
  const int dims[3] = {world_size(), 1, 1};
  TSR_OK(tsr_grid_create(c, TSR_GRID_1D, dims, &g));
  EXPECT_EQ(tsr_context_set_device(c, e.device, nullptr), TSR_ERR_STATE);  // live grid: no device change
  TSR_OK(tsr_grid_destroy(&g));
  TSR_OK(tsr_context_set_device(c, e.device, nullptr));
  TSR_OK(tsr_grid_create(c, TSR_GRID_1D, dims, &g));
  EXPECT_EQ(tsr_context_set_device(c, -1, nullptr), TSR_ERR_STATE);
  TSR_OK(tsr_grid_destroy(&g));
  TSR_OK(tsr_context_set_device(c, -1, nullptr));
  TSR_OK(tsr_context_destroy(&c));
}

}  // namespace

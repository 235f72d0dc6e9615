// The fused LAMB / LARS passes on the device (opt_cuda.hpp). Compiled with
// --fmad=false (optimizers/cuda/CMakeLists.txt): the expressions below are
// those of kernels.cpp, operation for operation.
#include "opt_cuda.hpp"

#include <cstring>

namespace tsr {
namespace opt {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
__device__ __forceinline__ uint16_t to_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

struct LambOut {
  float m, v, u;
};
__device__ __forceinline__ LambOut lamb(float gr, float x, float mi, float vi, const LambCoef& c) {
  const float g = c.gs * gr + c.l2 * x;
  const float m = c.b1 * mi + c.a1 * g;
  const float v = c.b2 * vi + c.a2 * (g * g);
  const float u = (m * c.bc1) / (sqrtf(v * c.bc2 + c.ei) + c.eo) + c.wd * x;
  return {m, v, u};
}

__device__ __forceinline__ float lars_upd(float d, float vi, const LarsCoef& c, float* vout) {
  if (c.has_v) {
    const float vn = c.mu * vi + c.a * d;
    *vout = vn;
    return c.nesterov ? c.mu * vn + c.a * d : vn;
  }
  return c.a * d;
}

// A fixed-shape tree over the block: the same order on every run.
__device__ void block_sum3(double a, double b, double c, Sums* out) {
  __shared__ double sa[kThreads], sb[kThreads], sc[kThreads];
  const int t = threadIdx.x;
  sa[t] = a;
  sb[t] = b;
  sc[t] = c;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) {
      sa[t] += sa[t + s];
      sb[t] += sb[t + s];
      sc[t] += sc[t + s];
    }
    __syncthreads();
  }
  if (t == 0) {
    out->a = sa[0];
    out->b = sb[0];
    out->c = sc[0];
  }
}

template <class G>
__global__ void __launch_bounds__(kThreads) pass_a_kernel(const Task* tasks, const G* g, const float* w,
                                                          const float* m, const float* v, const LambCoef* lamb_c,
                                                          const LarsCoef* lars_c, Sums* out) {
  const Task tk = tasks[blockIdx.x];
  double sa = 0, sb = 0, sc = 0;
  const G* gp = g + tk.g_off;
  const float* wp = w + tk.w_off;
  switch (tk.op) {
    case kSumsq:
      for (uint32_t i = threadIdx.x; i < tk.n; i += kThreads) {
        const float x = ld(gp[i]);
        sa += static_cast<double>(x) * x;
      }
      break;
    case kLambNorms:
    case kLambUnorm: {
      const LambCoef c = lamb_c[tk.group];
      const float* mp = m + tk.s_off;
      const float* vp = v + tk.s_off;
      const bool all = tk.op == kLambNorms;
      for (uint32_t i = threadIdx.x; i < tk.n; i += kThreads) {
        const float gr = ld(gp[i]), x = wp[i];
        const float u = lamb(gr, x, mp[i], vp[i], c).u;
        if (all) {
          sa += static_cast<double>(gr) * gr;
          sb += static_cast<double>(x) * x;
        }
        sc += static_cast<double>(u) * u;
      }
      break;
    }
    case kLarsUnorm: {
      const LarsCoef c = lars_c[tk.group];
      const float* vp = m + tk.s_off;  // the momentum lives in m
      for (uint32_t i = threadIdx.x; i < tk.n; i += kThreads) {
        const float gr = ld(gp[i]), x = wp[i];
        const float d = c.gs * gr + c.wd * x;
        float unused;
        const float upd = lars_upd(d, c.has_v ? vp[i] : 0.0f, c, &unused);
        sa += static_cast<double>(gr) * gr;
        sb += static_cast<double>(x) * x;
        sc += static_cast<double>(upd) * upd;
      }
      break;
    }
    case kLarsNorms:
      for (uint32_t i = threadIdx.x; i < tk.n; i += kThreads) {
        const double gr = ld(gp[i]), x = wp[i];
        sa += gr * gr;
        sb += x * x;
        sc += gr * x;
      }
      break;
    default:
      break;
  }
  block_sum3(sa, sb, sc, out + blockIdx.x);
}

template <class G>
__global__ void __launch_bounds__(kThreads) pass_b_kernel(const Task* tasks, const G* g, float* w, float* m, float* v,
                                                          uint16_t* p, const LambCoef* lamb_c, const float* kf,
                                                          const LarsCoef* lars_c) {
  const Task tk = tasks[blockIdx.x];
  const G* gp = g + tk.g_off;
  float* wp = w + tk.w_off;
  float* mp = m + tk.s_off;
  uint16_t* pp = p ? p + tk.p_off : nullptr;
  if (tk.op == kLambUpdate) {
    const LambCoef c = lamb_c[tk.group];
    const float k = kf[tk.group];
    float* vp = v + tk.s_off;
    for (uint32_t i = threadIdx.x; i < tk.n; i += kThreads) {
      const float x = wp[i];
      const LambOut r = lamb(ld(gp[i]), x, mp[i], vp[i], c);
      mp[i] = r.m;
      vp[i] = r.v;
      const float y = x - k * r.u;
      wp[i] = y;
      if (pp) pp[i] = to_bf16(y);
    }
  } else {
    const LarsCoef c = lars_c[tk.group];
    for (uint32_t i = threadIdx.x; i < tk.n; i += kThreads) {
      const float x = wp[i];
      const float d = c.gs * ld(gp[i]) + c.wd * x;
      float vn = 0.0f;
      const float upd = lars_upd(d, c.has_v ? mp[i] : 0.0f, c, &vn);
      if (c.has_v) mp[i] = vn;
      const float y = x - c.b * upd;
      wp[i] = y;
      if (pp) pp[i] = to_bf16(y);
    }
  }
}

__global__ void bf16_to_f32_kernel(const uint16_t* in, float* out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = ld(in[i]);
}
__global__ void f32_to_bf16_kernel(const float* in, uint16_t* out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = to_bf16(in[i]);
}

unsigned grid_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

size_t round8(size_t x) { return (x + 7) & ~size_t(7); }

}  // namespace

tsr_status Runner::init(int device, cudaStream_t stream) {
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device));
  device_ = device;
  stream_ = stream;
  return TSR_SUCCESS;
}

// One host-to-device copy of the table and the coefficients (packed, 8-byte
// aligned): tasks, lamb, lars, k.
tsr_status Runner::upload(const std::vector<Task>& tasks, const void* lamb, size_t lamb_bytes, const void* lars,
                          size_t lars_bytes, const float* k, size_t k_bytes) {
  const size_t tb = tasks.size() * sizeof(Task);
  const size_t total = round8(tb) + round8(lamb_bytes) + round8(lars_bytes) + round8(k_bytes);
  TSR_TRY(tasks_.reserve(total, "allocating the optimizer's task table on the device"));
  staging_.resize(total);
  unsigned char* s = staging_.data();
  if (tb) std::memcpy(s, tasks.data(), tb);
  s += round8(tb);
  if (lamb_bytes) std::memcpy(s, lamb, lamb_bytes);
  s += round8(lamb_bytes);
  if (lars_bytes) std::memcpy(s, lars, lars_bytes);
  s += round8(lars_bytes);
  if (k_bytes) std::memcpy(s, k, k_bytes);
  // The staging buffer is pageable: cudaMemcpyAsync returns once it has been
  // read, so the host may reuse it for the next launch.
  TSR_CUDA_CHECK(cudaMemcpyAsync(tasks_.get(), staging_.data(), total, cudaMemcpyHostToDevice, stream_),
               "copying the optimizer's task table to the device");
  return TSR_SUCCESS;
}

tsr_status Runner::pass_a(const std::vector<Task>& tasks, const void* g, bool bf16, const float* w, const float* m,
                          const float* v, const LambCoef* lamb, const LarsCoef* lars, size_t ngroups, Sums* out) {
  if (device_ < 0) return fail(TSR_ERR_STATE, "the device optimizer runner is not initialised");
  if (tasks.empty()) return TSR_SUCCESS;
  if (tasks.size() > 0x7fffffffu) return fail(TSR_ERR_UNSUPPORTED, "more than 2^31-1 work items in one launch");
  bool uses_w = false, uses_mv = false, uses_m = false;
  for (const Task& t : tasks) {
    if (t.op == kLambNorms || t.op == kLambUnorm) uses_w = uses_mv = true;
    if (t.op == kLarsUnorm || t.op == kLarsNorms) uses_w = true;
    if (t.op == kLarsUnorm) uses_m = true;
  }
  if (uses_mv && lamb == nullptr) return fail(TSR_ERR_INTERNAL, "LAMB tasks without LAMB coefficients");
  if (uses_m && lars == nullptr) return fail(TSR_ERR_INTERNAL, "LARS tasks without LARS coefficients");
  TSR_TRY(tsr::cuda::check_device_ptr(g, "grads", device_));
  if (uses_w) TSR_TRY(tsr::cuda::check_device_ptr(w, "params", device_));
  if (uses_mv) TSR_TRY(tsr::cuda::check_device_ptr(v, "v", device_));
  if (uses_mv || uses_m) TSR_TRY(tsr::cuda::check_device_ptr(m, "m", device_));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device_));
  const size_t lb = lamb ? ngroups * sizeof(LambCoef) : 0, pb = lars ? ngroups * sizeof(LarsCoef) : 0;
  TSR_TRY(upload(tasks, lamb, lb, lars, pb, nullptr, 0));
  TSR_TRY(sums_.reserve(tasks.size() * sizeof(Sums), "allocating the per-item sums on the device"));
  unsigned char* base = static_cast<unsigned char*>(tasks_.get());
  const Task* dt = reinterpret_cast<const Task*>(base);
  const LambCoef* dl = reinterpret_cast<const LambCoef*>(base + round8(tasks.size() * sizeof(Task)));
  const LarsCoef* dp = reinterpret_cast<const LarsCoef*>(base + round8(tasks.size() * sizeof(Task)) + round8(lb));
  Sums* ds = static_cast<Sums*>(sums_.get());
  const unsigned blocks = static_cast<unsigned>(tasks.size());
  if (bf16)
    pass_a_kernel<uint16_t><<<blocks, kThreads, 0, stream_>>>(dt, static_cast<const uint16_t*>(g), w, m, v, dl, dp, ds);
  else
    pass_a_kernel<float><<<blocks, kThreads, 0, stream_>>>(dt, static_cast<const float*>(g), w, m, v, dl, dp, ds);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the optimizer's pass A");
  TSR_CUDA_CHECK(cudaMemcpyAsync(out, ds, tasks.size() * sizeof(Sums), cudaMemcpyDeviceToHost, stream_),
               "copying the per-item sums to the host");
  TSR_CUDA_CHECK(cudaStreamSynchronize(stream_), "waiting for the optimizer's pass A");
  return TSR_SUCCESS;
}

tsr_status Runner::pass_b(const std::vector<Task>& tasks, const void* g, bool bf16, float* w, float* m, float* v,
                          uint16_t* p, const LambCoef* lamb, const float* k, const LarsCoef* lars, size_t ngroups) {
  if (device_ < 0) return fail(TSR_ERR_STATE, "the device optimizer runner is not initialised");
  if (tasks.empty()) return TSR_SUCCESS;
  if (tasks.size() > 0x7fffffffu) return fail(TSR_ERR_UNSUPPORTED, "more than 2^31-1 work items in one launch");
  bool any_lamb = false, any_lars_v = false;
  for (const Task& t : tasks) {
    if (t.op == kLambUpdate) any_lamb = true;
    else if (lars && lars[t.group].has_v) any_lars_v = true;
    if (t.op == kLarsUpdate && lars == nullptr) return fail(TSR_ERR_INTERNAL, "LARS tasks without LARS coefficients");
  }
  if (any_lamb && (lamb == nullptr || k == nullptr)) return fail(TSR_ERR_INTERNAL, "LAMB tasks without coefficients");
  TSR_TRY(tsr::cuda::check_device_ptr(g, "grads", device_));
  TSR_TRY(tsr::cuda::check_device_ptr(w, "params", device_));
  if (any_lamb || any_lars_v) TSR_TRY(tsr::cuda::check_device_ptr(m, "m", device_));
  if (any_lamb) TSR_TRY(tsr::cuda::check_device_ptr(v, "v", device_));
  TSR_TRY(tsr::cuda::check_device_ptr(p, "p", device_, true));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device_));
  const size_t lb = lamb ? ngroups * sizeof(LambCoef) : 0, pb = lars ? ngroups * sizeof(LarsCoef) : 0;
  const size_t kb = k ? ngroups * sizeof(float) : 0;
  TSR_TRY(upload(tasks, lamb, lb, lars, pb, k, kb));
  unsigned char* base = static_cast<unsigned char*>(tasks_.get());
  const size_t t8 = round8(tasks.size() * sizeof(Task));
  const Task* dt = reinterpret_cast<const Task*>(base);
  const LambCoef* dl = reinterpret_cast<const LambCoef*>(base + t8);
  const LarsCoef* dp = reinterpret_cast<const LarsCoef*>(base + t8 + round8(lb));
  const float* dk = reinterpret_cast<const float*>(base + t8 + round8(lb) + round8(pb));
  const unsigned blocks = static_cast<unsigned>(tasks.size());
  if (bf16)
    pass_b_kernel<uint16_t><<<blocks, kThreads, 0, stream_>>>(dt, static_cast<const uint16_t*>(g), w, m, v, p, dl, dk, dp);
  else
    pass_b_kernel<float><<<blocks, kThreads, 0, stream_>>>(dt, static_cast<const float*>(g), w, m, v, p, dl, dk, dp);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the optimizer's pass B");
  return TSR_SUCCESS;
}

tsr_status Runner::bf16_to_f32(const uint16_t* in, float* out, size_t n) {
  if (n == 0) return TSR_SUCCESS;
  TSR_TRY(tsr::cuda::check_device_ptr(in, "params", device_));
  TSR_TRY(tsr::cuda::check_device_ptr(out, "master", device_));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device_));
  bf16_to_f32_kernel<<<grid_for(n), kThreads, 0, stream_>>>(in, out, n);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the bfloat16 to float32 conversion");
  return TSR_SUCCESS;
}

tsr_status Runner::f32_to_bf16(const float* in, uint16_t* out, size_t n) {
  if (n == 0) return TSR_SUCCESS;
  TSR_TRY(tsr::cuda::check_device_ptr(in, "master", device_));
  TSR_TRY(tsr::cuda::check_device_ptr(out, "params", device_));
  tsr::cuda::DeviceGuard guard;
  TSR_TRY(guard.enter(device_));
  f32_to_bf16_kernel<<<grid_for(n), kThreads, 0, stream_>>>(in, out, n);
  TSR_CUDA_CHECK(cudaGetLastError(), "launching the float32 to bfloat16 conversion");
  return TSR_SUCCESS;
}

}  // namespace cuda
}  // namespace opt
}  // namespace tsr

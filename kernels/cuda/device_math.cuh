// Device helpers shared by kiln's .cu files: float/half loads and stores, the launch geometry of
// grid-stride loops, and the activations (the formulas of kernels/post_ops.cpp, in float).
#pragma once

#include <cuda_fp16.h>

#include "kernels/cuda/device_kernels.cuh"

namespace kiln::cuda {

__device__ inline float load_float(const float* p, int64_t i) { return p[i]; }
__device__ inline float load_float(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ inline void store_float(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store_float(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

inline constexpr int kBlock = 256;

// Enough blocks to cover n with kBlock threads, capped (grid-stride loops do the rest).
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

__device__ inline int64_t global_thread() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ inline float activation_apply(const ActivationParams& p, float x) {
  switch (p.kind) {
    case DeviceActivation::none: return x;
    case DeviceActivation::relu: return x < 0.0f ? 0.0f : x;
    case DeviceActivation::clip: return fminf(fmaxf(x, p.alpha), p.beta);
    case DeviceActivation::leaky_relu: return x < 0.0f ? p.alpha * x : x;
    case DeviceActivation::sigmoid: return 1.0f / (1.0f + expf(-x));
    case DeviceActivation::silu: return x / (1.0f + expf(-x));
    case DeviceActivation::hard_swish: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case DeviceActivation::hard_sigmoid: return fmaxf(0.0f, fminf(1.0f, p.alpha * x + p.beta));
    case DeviceActivation::gelu_erf: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case DeviceActivation::tanh: return tanhf(x);
    case DeviceActivation::elu: return x < 0.0f ? p.alpha * (expf(x) - 1.0f) : x;
  }
  return x;
}

}  // namespace kiln::cuda

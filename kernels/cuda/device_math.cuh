// Device helpers shared by kiln's .cu files: float/half loads and stores and the launch geometry
// of grid-stride loops (the activations are in activation_math.h).
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

// Element counts below this are walked with int32_t indices (grid-stride steps included: the
// grid holds fewer than 2^28 threads), cheaper to divide on a GPU than int64_t.
inline constexpr int64_t kIndex32Limit = int64_t{1} << 30;

__device__ inline int64_t global_thread() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace kiln::cuda

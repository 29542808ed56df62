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

// Enough blocks of `block` threads to cover n, capped at a few waves of a large GPU (grid-stride
// loops do the rest), so each thread's set-up is paid for over many elements.
inline unsigned grid_for(int64_t n, int block = kBlock) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 8192 ? 8192 : blocks));
}

// Kernel parameters that a kernel indexes with run-time values (dims of a view, strides of a
// broadcast, a chain's program) are declared `const KILN_GRID_CONSTANT`: read in place from the
// constant bank instead of being copied to each thread's local memory first (which made a
// 5.8M-element channel-shuffle Transpose take 95 us on an H100, 12x its memory time).
#define KILN_GRID_CONSTANT __grid_constant__

// Element counts below this are walked with int32_t indices (grid-stride steps included: the
// grid holds fewer than 2^28 threads), cheaper to divide on a GPU than int64_t.
inline constexpr int64_t kIndex32Limit = int64_t{1} << 30;

__device__ inline int64_t global_thread() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace kiln::cuda

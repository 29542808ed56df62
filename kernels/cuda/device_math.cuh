// Device helpers shared by kiln's .cu files: float/half/bfloat16 loads and stores, the dispatch
// from FloatType to the storage type, the launch geometry of
// grid-stride loops and of a warp per row, the index width, and block/warp reductions (the
// activations are in activation_math.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/device_kernels.cuh"

namespace kiln::cuda {

__device__ inline float load_float(const float* p, int64_t i) { return p[i]; }
__device__ inline float load_float(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ inline void store_float(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store_float(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ inline float load_float(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ inline void store_float(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// Calls body(StorageTag<T>{}) with T the storage type of `type` (float, __half, __nv_bfloat16):
// each launcher is written once for all three.
template <typename T>
struct StorageTag {
  using type = T;
};
template <typename Body>
void with_storage_type(FloatType type, Body body) {
  switch (type) {
    case FloatType::f32: body(StorageTag<float>{}); return;
    case FloatType::f16: body(StorageTag<__half>{}); return;
    case FloatType::bf16: body(StorageTag<__nv_bfloat16>{}); return;
  }
}

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

// Calls launch(count) with `n` as int32_t when every index the kernel forms fits (`fits_int32`:
// n and the extents it reads below kIndex32Limit), else as int64_t.
template <typename Launch>
void launch_indexed(int64_t n, bool fits_int32, Launch launch) {
  if (fits_int32) launch(static_cast<int32_t>(n));
  else launch(n);
}

__device__ inline int64_t global_thread() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// A warp per row for short rows (a 256-thread block per 49-element row left most of it idle):
// launch warp_row_blocks(rows) blocks of kBlock threads; each thread's row is warp_row().
inline constexpr int kWarpsPerBlock = kBlock / 32;
inline unsigned warp_row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }
__device__ inline int64_t warp_row() { return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; }

// Sum (or max) of one value per lane over a warp; every lane gets the result.
template <bool kMax>
__device__ inline float warp_reduce(float v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  return v;
}

// Tree reduction of one value per thread over the block (`scratch`: blockDim.x floats of shared
// memory); every thread gets the result.
template <bool kMax>
__device__ inline float block_reduce(float v, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half)
      scratch[threadIdx.x] = kMax ? fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + half]) : scratch[threadIdx.x] + scratch[threadIdx.x + half];
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

}  // namespace kiln::cuda

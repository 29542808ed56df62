// Pooling CUDA kernels: 2-D max/average windows (one thread per output element, the window walk
// of pool_window.h) and global average/max pooling (one block per N*C row, a shared-memory tree
// reduction).
#include <cfloat>

#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

template <typename T>
__global__ void pool2d_kernel(Pool2d p, const T* x, T* y, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    store_float(y, i, pool2d_element(p, i, [x](int64_t at) { return load_float(x, at); }));
}

template <typename T>
__global__ void global_pool_kernel(bool max, const T* x, T* y, int64_t plane) {
  __shared__ float partial[kBlock];
  const T* row = x + static_cast<int64_t>(blockIdx.x) * plane;
  float acc = max ? -FLT_MAX : 0.0f;
  for (int64_t i = threadIdx.x; i < plane; i += blockDim.x) acc = max ? fmaxf(acc, load_float(row, i)) : acc + load_float(row, i);
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half)
      partial[threadIdx.x] = max ? fmaxf(partial[threadIdx.x], partial[threadIdx.x + half]) : partial[threadIdx.x] + partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) store_float(y, blockIdx.x, max ? partial[0] : partial[0] / static_cast<float>(plane));
}

}  // namespace

cudaError_t launch_pool2d(FloatType type, const Pool2d& p, const void* x, void* y, cudaStream_t stream) {
  const int64_t n = p.batch_channels * p.out_h * p.out_w;
  if (n == 0) return cudaSuccess;
  if (type == FloatType::f32)
    pool2d_kernel<<<grid_for(n), kBlock, 0, stream>>>(p, static_cast<const float*>(x), static_cast<float*>(y), n);
  else
    pool2d_kernel<<<grid_for(n), kBlock, 0, stream>>>(p, static_cast<const __half*>(x), static_cast<__half*>(y), n);
  return cudaGetLastError();
}

cudaError_t launch_global_pool(FloatType type, bool max, const void* x, void* y, int64_t rows, int64_t plane,
                               cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(rows);
  if (type == FloatType::f32)
    global_pool_kernel<<<grid, kBlock, 0, stream>>>(max, static_cast<const float*>(x), static_cast<float*>(y), plane);
  else
    global_pool_kernel<<<grid, kBlock, 0, stream>>>(max, static_cast<const __half*>(x), static_cast<__half*>(y), plane);
  return cudaGetLastError();
}

}  // namespace kiln::cuda

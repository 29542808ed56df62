// Pooling CUDA kernels: 2-D max/average windows (one thread per output element, the window walk
// of pool_window.h) and global average/max pooling (a warp per N*C row up to 1024 elements, else
// one block per row with a shared-memory tree reduction).
#include <cfloat>

#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

template <typename T, typename Index>
__global__ void pool2d_kernel(const KILN_GRID_CONSTANT Pool2d p, const T* x, T* y, Index n) {
  for (Index i = static_cast<Index>(global_thread()); i < n; i += static_cast<Index>(grid_threads()))
    store_float(y, i, pool2d_element(p, i, [x](Index at) { return load_float(x, at); }));
}

template <typename T>
void pool2d(const Pool2d& p, const void* x, void* y, int64_t n, cudaStream_t stream) {
  const T* in = static_cast<const T*>(x);
  launch_indexed(n, n < kIndex32Limit && p.batch_channels * p.in_h * p.in_w < kIndex32Limit, [&](auto count) {
    pool2d_kernel<<<grid_for(n), kBlock, 0, stream>>>(p, in, static_cast<T*>(y), count);
  });
}

// Rows up to 1024 elements (a 7x7 plane): a warp each.
template <typename T>
__global__ void global_pool_warp_kernel(bool max, const T* x, T* y, int64_t rows, int64_t plane) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* in = x + row * plane;
  float acc = max ? -FLT_MAX : 0.0f;
  for (int64_t i = lane; i < plane; i += 32) acc = max ? fmaxf(acc, load_float(in, i)) : acc + load_float(in, i);
  acc = max ? warp_reduce<true>(acc) : warp_reduce<false>(acc);
  if (lane == 0) store_float(y, row, max ? acc : acc / static_cast<float>(plane));
}

template <typename T>
__global__ void global_pool_kernel(bool max, const T* x, T* y, int64_t plane) {
  __shared__ float partial[kBlock];
  const T* row = x + static_cast<int64_t>(blockIdx.x) * plane;
  float acc = max ? -FLT_MAX : 0.0f;
  for (int64_t i = threadIdx.x; i < plane; i += blockDim.x) acc = max ? fmaxf(acc, load_float(row, i)) : acc + load_float(row, i);
  acc = max ? block_reduce<true>(acc, partial) : block_reduce<false>(acc, partial);
  if (threadIdx.x == 0) store_float(y, blockIdx.x, max ? acc : acc / static_cast<float>(plane));
}

}  // namespace

cudaError_t launch_pool2d(FloatType type, const Pool2d& p, const void* x, void* y, cudaStream_t stream) {
  const int64_t n = p.batch_channels * p.out_h * p.out_w;
  if (n == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) { pool2d<typename decltype(tag)::type>(p, x, y, n, stream); });
  return cudaGetLastError();
}

cudaError_t launch_global_pool(FloatType type, bool max, const void* x, void* y, int64_t rows, int64_t plane,
                               cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (plane <= 1024)
      global_pool_warp_kernel<<<warp_row_blocks(rows), kBlock, 0, stream>>>(max, static_cast<const T*>(x), static_cast<T*>(y), rows, plane);
    else
      global_pool_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(max, static_cast<const T*>(x), static_cast<T*>(y), plane);
  });
  return cudaGetLastError();
}

}  // namespace kiln::cuda

// Pooling CUDA kernels: 2-D max/average windows (one thread per output element) and global
// average/max pooling (one block per N*C row, a shared-memory tree reduction).
#include <cfloat>

#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

template <typename T>
__global__ void pool2d_kernel(Pool2d p, const T* x, T* y, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t ow = i % p.out_w, oh = (i / p.out_w) % p.out_h, plane = i / (p.out_w * p.out_h);
    const T* src = x + plane * p.in_h * p.in_w;
    const int64_t h0 = oh * p.stride_h - p.pad_top, w0 = ow * p.stride_w - p.pad_left;
    float acc = p.max ? -FLT_MAX : 0.0f;
    int64_t inside = 0, padded = 0;
    for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
      const int64_t h = h0 + kh * p.dilation_h;
      for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
        const int64_t w = w0 + kw * p.dilation_w;
        if (h >= -p.pad_top && h < p.in_h + p.pad_bottom && w >= -p.pad_left && w < p.in_w + p.pad_right) ++padded;
        if (h < 0 || h >= p.in_h || w < 0 || w >= p.in_w) continue;
        const float v = load_float(src, h * p.in_w + w);
        acc = p.max ? fmaxf(acc, v) : acc + v;
        ++inside;
      }
    }
    if (!p.max) {
      const int64_t divisor = p.count_include_pad ? padded : inside;
      acc = divisor > 0 ? acc / static_cast<float>(divisor) : 0.0f;
    }
    store_float(y, i, acc);
  }
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

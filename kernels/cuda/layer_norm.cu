// LayerNormalization over the last axis of [rows, cols]: mean, then variance around it, in float
// (two passes over the row, which stays in L1/L2), then y = (x - mean) / sqrt(var + eps) * scale
// + bias with float32 scale and bias. Rows up to 1024 (ConvNeXt's 96..768 channels) take one warp
// each, reduced with shuffles; longer rows one block each, reduced in shared memory.
#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

template <typename T>
__global__ void layer_norm_kernel(const T* x, const float* scale, const float* bias, T* y, int64_t cols, float epsilon) {
  __shared__ float scratch[kBlock];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += load_float(x, base + c);
  const float mean = block_reduce<false>(sum, scratch) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = load_float(x, base + c) - mean;
    squares += d * d;
  }
  const float inv_std = rsqrtf(block_reduce<false>(squares, scratch) / static_cast<float>(cols) + epsilon);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = (load_float(x, base + c) - mean) * inv_std * scale[c];
    store_float(y, base + c, bias ? v + bias[c] : v);
  }
}

template <typename T>
__global__ void layer_norm_warp_kernel(const T* x, const float* scale, const float* bias, T* y, int64_t rows, int64_t cols,
                                       float epsilon) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t base = row * cols;
  float sum = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) sum += load_float(x, base + c);
  const float mean = warp_reduce<false>(sum) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    const float d = load_float(x, base + c) - mean;
    squares += d * d;
  }
  const float inv_std = rsqrtf(warp_reduce<false>(squares) / static_cast<float>(cols) + epsilon);
  for (int64_t c = lane; c < cols; c += 32) {
    const float v = (load_float(x, base + c) - mean) * inv_std * scale[c];
    store_float(y, base + c, bias ? v + bias[c] : v);
  }
}

}  // namespace

cudaError_t launch_layer_norm(FloatType type, const void* x, const float* scale, const float* bias, void* y, int64_t rows,
                              int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (cols <= 1024)
      layer_norm_warp_kernel<<<warp_row_blocks(rows), kBlock, 0, stream>>>(static_cast<const T*>(x), scale, bias, static_cast<T*>(y),
                                                                           rows, cols, epsilon);
    else
      layer_norm_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(static_cast<const T*>(x), scale, bias,
                                                                              static_cast<T*>(y), cols, epsilon);
  });
  return cudaGetLastError();
}

}  // namespace kiln::cuda

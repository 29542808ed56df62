// LayerNormalization over the last axis of [rows, cols]: mean, then variance around it, in float
// (two passes over the row, which stays in L1/L2), then y = (x - mean) / sqrt(var + eps) * scale
// + bias with float32 scale and bias. Rows up to 1024 (ConvNeXt's 96..768 channels) take one warp
// each, reduced with shuffles; longer rows one block each, reduced in shared memory.
#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

__device__ float block_sum(float v, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

template <typename T>
__global__ void layer_norm_kernel(const T* x, const float* scale, const float* bias, T* y, int64_t cols, float epsilon) {
  __shared__ float scratch[kBlock];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += load_float(x, base + c);
  const float mean = block_sum(sum, scratch) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = load_float(x, base + c) - mean;
    squares += d * d;
  }
  const float inv_std = rsqrtf(block_sum(squares, scratch) / static_cast<float>(cols) + epsilon);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = (load_float(x, base + c) - mean) * inv_std * scale[c];
    store_float(y, base + c, bias ? v + bias[c] : v);
  }
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__global__ void layer_norm_warp_kernel(const T* x, const float* scale, const float* bias, T* y, int64_t rows, int64_t cols,
                                       float epsilon) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t base = row * cols;
  float sum = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) sum += load_float(x, base + c);
  const float mean = warp_sum(sum) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    const float d = load_float(x, base + c) - mean;
    squares += d * d;
  }
  const float inv_std = rsqrtf(warp_sum(squares) / static_cast<float>(cols) + epsilon);
  for (int64_t c = lane; c < cols; c += 32) {
    const float v = (load_float(x, base + c) - mean) * inv_std * scale[c];
    store_float(y, base + c, bias ? v + bias[c] : v);
  }
}

}  // namespace

cudaError_t launch_layer_norm(FloatType type, const void* x, const float* scale, const float* bias, void* y, int64_t rows,
                              int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (cols <= 1024) {
    const int64_t warps = kBlock / 32;
    const unsigned blocks = static_cast<unsigned>((rows + warps - 1) / warps);
    if (type == FloatType::f32)
      layer_norm_warp_kernel<<<blocks, kBlock, 0, stream>>>(static_cast<const float*>(x), scale, bias, static_cast<float*>(y), rows,
                                                            cols, epsilon);
    else
      layer_norm_warp_kernel<<<blocks, kBlock, 0, stream>>>(static_cast<const __half*>(x), scale, bias, static_cast<__half*>(y),
                                                            rows, cols, epsilon);
    return cudaGetLastError();
  }
  if (type == FloatType::f32)
    layer_norm_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(static_cast<const float*>(x), scale, bias,
                                                                            static_cast<float*>(y), cols, epsilon);
  else
    layer_norm_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(static_cast<const __half*>(x), scale, bias,
                                                                            static_cast<__half*>(y), cols, epsilon);
  return cudaGetLastError();
}

}  // namespace kiln::cuda

// LayerNormalization over the last axis of [rows, cols]: one block per row, mean and variance
// reduced in shared memory in float (two passes over the row, which stays in L1/L2), then
// y = (x - mean) / sqrt(var + eps) * scale + bias with float32 scale and bias.
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

}  // namespace

cudaError_t launch_layer_norm(FloatType type, const void* x, const float* scale, const float* bias, void* y, int64_t rows,
                              int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (type == FloatType::f32)
    layer_norm_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(static_cast<const float*>(x), scale, bias,
                                                                            static_cast<float*>(y), cols, epsilon);
  else
    layer_norm_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(static_cast<const __half*>(x), scale, bias,
                                                                            static_cast<__half*>(y), cols, epsilon);
  return cudaGetLastError();
}

}  // namespace kiln::cuda

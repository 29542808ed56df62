// Elementwise CUDA kernels: activations, broadcasting binaries, the per-channel affine that runs
// BatchNormalization, and float32 <-> float16 conversion. Grid-stride loops, float arithmetic.
#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

template <typename T>
__global__ void activation_kernel(ActivationParams act, const T* x, T* y, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) store_float(y, i, activation_value(act, load_float(x, i)));
}

__device__ inline float binary_apply(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::max: return fmaxf(a, b);
    case BinaryOp::min: return fminf(a, b);
  }
  return a;
}

template <typename T>
__global__ void binary_kernel(BinaryOp op, const T* a, const T* b, T* y, BroadcastShape shape, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t rest = i, at_a = 0, at_b = 0;
    for (int d = shape.rank - 1; d >= 0; --d) {
      const int64_t coord = rest % shape.dims[d];
      rest /= shape.dims[d];
      at_a += coord * shape.a_strides[d];
      at_b += coord * shape.b_strides[d];
    }
    store_float(y, i, binary_apply(op, load_float(a, at_a), load_float(b, at_b)));
  }
}

template <typename T>
__global__ void channel_affine_kernel(const T* x, const float* scale, const float* shift, T* y, int64_t channels,
                                      int64_t inner, int64_t n, ActivationParams act) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t c = (i / inner) % channels;
    store_float(y, i, activation_value(act, load_float(x, i) * scale[c] + shift[c]));
  }
}

__global__ void f32_to_f16_kernel(const float* src, __half* dst, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = __float2half_rn(src[i]);
}

__global__ void f16_to_f32_kernel(const __half* src, float* dst, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = __half2float(src[i]);
}

int64_t shape_elements(const BroadcastShape& s) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; ++d) n *= s.dims[d];
  return n;
}

}  // namespace

cudaError_t launch_activation(FloatType type, const ActivationParams& act, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (type == FloatType::f32)
    activation_kernel<<<grid_for(n), kBlock, 0, stream>>>(act, static_cast<const float*>(x), static_cast<float*>(y), n);
  else
    activation_kernel<<<grid_for(n), kBlock, 0, stream>>>(act, static_cast<const __half*>(x), static_cast<__half*>(y), n);
  return cudaGetLastError();
}

cudaError_t launch_binary(FloatType type, BinaryOp op, const void* a, const void* b, void* y, const BroadcastShape& shape,
                          cudaStream_t stream) {
  const int64_t n = shape_elements(shape);
  if (n == 0) return cudaSuccess;
  if (type == FloatType::f32)
    binary_kernel<<<grid_for(n), kBlock, 0, stream>>>(op, static_cast<const float*>(a), static_cast<const float*>(b),
                                                      static_cast<float*>(y), shape, n);
  else
    binary_kernel<<<grid_for(n), kBlock, 0, stream>>>(op, static_cast<const __half*>(a), static_cast<const __half*>(b),
                                                      static_cast<__half*>(y), shape, n);
  return cudaGetLastError();
}

cudaError_t launch_channel_affine(FloatType type, const void* x, const float* scale, const float* shift, void* y,
                                  int64_t outer, int64_t channels, int64_t inner, const ActivationParams& act,
                                  cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return cudaSuccess;
  if (type == FloatType::f32)
    channel_affine_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const float*>(x), scale, shift,
                                                              static_cast<float*>(y), channels, inner, n, act);
  else
    channel_affine_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const __half*>(x), scale, shift,
                                                              static_cast<__half*>(y), channels, inner, n, act);
  return cudaGetLastError();
}

cudaError_t launch_f32_to_f16(const float* src, void* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  f32_to_f16_kernel<<<grid_for(n), kBlock, 0, stream>>>(src, static_cast<__half*>(dst), n);
  return cudaGetLastError();
}

cudaError_t launch_f16_to_f32(const void* src, float* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  f16_to_f32_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const __half*>(src), dst, n);
  return cudaGetLastError();
}

}  // namespace kiln::cuda

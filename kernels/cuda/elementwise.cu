// Elementwise CUDA kernels: activations, broadcasting binaries, the per-channel affine that runs
// BatchNormalization, and float32 <-> float16/bfloat16 conversion. Grid-stride loops, float arithmetic.
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

template <typename T, typename Index>
__global__ void binary_kernel(BinaryOp op, const T* a, const T* b, T* y, const KILN_GRID_CONSTANT BroadcastShape shape, Index n) {
  for (Index i = static_cast<Index>(global_thread()); i < n; i += static_cast<Index>(grid_threads())) {
    Index at_a, at_b;
    broadcast_offsets(shape, i, at_a, at_b);
    store_float(y, i, binary_apply(op, load_float(a, at_a), load_float(b, at_b)));
  }
}

template <typename T, typename Index>
__global__ void channel_affine_kernel(const T* x, const float* scale, const float* shift, T* y, Index channels,
                                      Index inner, Index n, ActivationParams act) {
  for (Index i = static_cast<Index>(global_thread()); i < n; i += static_cast<Index>(grid_threads())) {
    const Index c = (i / inner) % channels;
    store_float(y, i, activation_value(act, load_float(x, i) * scale[c] + shift[c]));
  }
}

template <typename T, typename Index>
__global__ void bias_activation_kernel(T* y, const T* bias, Index channels, Index inner, Index n, ActivationParams act) {
  for (Index i = static_cast<Index>(global_thread()); i < n; i += static_cast<Index>(grid_threads()))
    store_float(y, i, activation_value(act, load_float(y, i) + load_float(bias, (i / inner) % channels)));
}

template <typename T>
__global__ void from_f32_kernel(const float* src, T* dst, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) store_float(dst, i, src[i]);
}

template <typename T>
__global__ void to_f32_kernel(const T* src, float* dst, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = load_float(src, i);
}

int64_t shape_elements(const BroadcastShape& s) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; ++d) n *= s.dims[d];
  return n;
}

}  // namespace

cudaError_t launch_activation(FloatType type, const ActivationParams& act, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    activation_kernel<<<grid_for(n), kBlock, 0, stream>>>(act, static_cast<const T*>(x), static_cast<T*>(y), n);
  });
  return cudaGetLastError();
}

template <typename T>
void binary(BinaryOp op, const void* a, const void* b, void* y, const BroadcastShape& shape, int64_t n, cudaStream_t stream) {
  launch_indexed(n, n < kIndex32Limit, [&](auto count) {
    binary_kernel<<<grid_for(n), kBlock, 0, stream>>>(op, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y),
                                                      shape, count);
  });
}

template <typename T>
void channel_affine(const void* x, const float* scale, const float* shift, void* y, int64_t channels, int64_t inner, int64_t n,
                    const ActivationParams& act, cudaStream_t stream) {
  launch_indexed(n, n < kIndex32Limit, [&](auto count) {
    using Index = decltype(count);
    channel_affine_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const T*>(x), scale, shift, static_cast<T*>(y),
                                                              static_cast<Index>(channels), static_cast<Index>(inner), count, act);
  });
}

cudaError_t launch_binary(FloatType type, BinaryOp op, const void* a, const void* b, void* y, const BroadcastShape& shape,
                          cudaStream_t stream) {
  const int64_t n = shape_elements(shape);
  if (n == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) { binary<typename decltype(tag)::type>(op, a, b, y, shape, n, stream); });
  return cudaGetLastError();
}

cudaError_t launch_channel_affine(FloatType type, const void* x, const float* scale, const float* shift, void* y,
                                  int64_t outer, int64_t channels, int64_t inner, const ActivationParams& act,
                                  cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) {
    channel_affine<typename decltype(tag)::type>(x, scale, shift, y, channels, inner, n, act, stream);
  });
  return cudaGetLastError();
}

template <typename T>
void bias_activation(void* y, const void* bias, int64_t channels, int64_t inner, int64_t n, const ActivationParams& act,
                     cudaStream_t stream) {
  launch_indexed(n, n < kIndex32Limit, [&](auto count) {
    using Index = decltype(count);
    bias_activation_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(bias),
                                                               static_cast<Index>(channels), static_cast<Index>(inner), count, act);
  });
}

cudaError_t launch_bias_activation(FloatType type, void* y, const void* bias, int64_t outer, int64_t channels, int64_t inner,
                                   const ActivationParams& act, cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) { bias_activation<typename decltype(tag)::type>(y, bias, channels, inner, n, act, stream); });
  return cudaGetLastError();
}

cudaError_t launch_from_f32(FloatType type, const float* src, void* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    from_f32_kernel<<<grid_for(n), kBlock, 0, stream>>>(src, static_cast<T*>(dst), n);
  });
  return cudaGetLastError();
}

cudaError_t launch_to_f32(FloatType type, const void* src, float* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    to_f32_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const T*>(src), dst, n);
  });
  return cudaGetLastError();
}

}  // namespace kiln::cuda

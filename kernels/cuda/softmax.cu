// Softmax / LogSoftmax along one axis of [outer, axis, inner]: one block per (outer, inner) row,
// max and sum of exponentials reduced in shared memory, in float whatever the storage type.
#include <cfloat>

#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

template <typename T>
__global__ void softmax_kernel(bool log, const T* x, T* y, int64_t axis, int64_t inner) {
  __shared__ float scratch[kBlock];
  const int64_t row = blockIdx.x, o = row / inner, in = row % inner;
  const int64_t base = o * axis * inner + in;
  float m = -FLT_MAX;
  for (int64_t k = threadIdx.x; k < axis; k += blockDim.x) m = fmaxf(m, load_float(x, base + k * inner));
  m = block_reduce<true>(m, scratch);
  float sum = 0.0f;
  for (int64_t k = threadIdx.x; k < axis; k += blockDim.x) sum += expf(load_float(x, base + k * inner) - m);
  sum = block_reduce<false>(sum, scratch);
  const float log_sum = logf(sum);
  for (int64_t k = threadIdx.x; k < axis; k += blockDim.x) {
    const float shifted = load_float(x, base + k * inner) - m;
    store_float(y, base + k * inner, log ? shifted - log_sum : expf(shifted) / sum);
  }
}

}  // namespace

cudaError_t launch_softmax(FloatType type, bool log, const void* x, void* y, int64_t outer, int64_t axis, int64_t inner,
                           cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || axis == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(log, static_cast<const T*>(x), static_cast<T*>(y), axis, inner);
  });
  return cudaGetLastError();
}

}  // namespace kiln::cuda

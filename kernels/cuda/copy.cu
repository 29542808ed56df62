// The strided copy behind Transpose and Slice (strided_view.h): one thread per output element,
// moved as 2, 4 or 8 raw bytes whatever the dtype.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/strided_view.h"

namespace kiln::cuda {
namespace {

template <typename Word>
__global__ void strided_copy_kernel(const Word* x, Word* y, StridedView view, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = x[strided_source(view, i)];
}

}  // namespace

cudaError_t launch_strided_copy(int element_bytes, const void* x, void* y, const StridedView& view, cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < view.rank; ++d) n *= view.dims[d];
  if (n == 0) return cudaSuccess;
  switch (element_bytes) {
    case 1: strided_copy_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), view, n); break;
    case 2: strided_copy_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), view, n); break;
    case 4: strided_copy_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y), view, n); break;
    case 8: strided_copy_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y), view, n); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace kiln::cuda

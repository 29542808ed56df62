// The strided copy behind Transpose and Slice (strided_view.h), moved as 1, 2, 4 or 8 raw bytes
// whatever the dtype. A transposed plane (NCHW <-> NHWC, is_plane_transpose) goes through a 32x32
// tile in shared memory so that both the reads and the writes are coalesced; any other view is
// one thread per output element, with 32-bit index arithmetic when the tensors allow it.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/strided_view.h"

namespace kiln::cuda {
namespace {

template <typename Word, typename Index>
__global__ void strided_copy_kernel(const Word* x, Word* y, const KILN_GRID_CONSTANT StridedView view, Index n) {
  for (Index i = static_cast<Index>(global_thread()); i < n; i += static_cast<Index>(grid_threads()))
    y[i] = x[strided_source(view, i)];
}

constexpr int kTile = 32;
constexpr int kTileRows = 8;  // threads per tile column; each moves kTile / kTileRows elements

// Output [batch, rows, cols] (contiguous) from input offset + b * batch_stride + r + c * col_stride.
// Block (kTile, kTileRows) copies one kTile x kTile tile: reads along r, writes along c.
template <typename Word>
__global__ void plane_transpose_kernel(const Word* x, Word* y, int64_t offset, int64_t batch_stride, int64_t col_stride,
                                       int64_t rows, int64_t cols) {
  __shared__ Word tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
  const int64_t b = blockIdx.z;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile, c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const Word* in = x + offset + b * batch_stride;
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t r = r0 + threadIdx.x, c = c0 + k;
    if (r < rows && c < cols) tile[k][threadIdx.x] = in[r + c * col_stride];
  }
  __syncthreads();
  Word* out = y + b * rows * cols;
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols) out[r * cols + c] = tile[threadIdx.x][k];
  }
}

template <typename Word>
cudaError_t launch(const void* x, void* y, const StridedView& view, int64_t n, int64_t source_extent, cudaStream_t stream) {
  const Word* in = static_cast<const Word*>(x);
  Word* out = static_cast<Word*>(y);
  if (is_plane_transpose(view)) {
    const int64_t batch = view.rank == 3 ? view.dims[0] : 1, rows = view.dims[view.rank - 2], cols = view.dims[view.rank - 1];
    const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
    if (batch <= 65535 && row_tiles <= 65535 && col_tiles <= 2147483647) {
      const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_tiles), static_cast<unsigned>(batch));
      plane_transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(in, out, view.offset, view.rank == 3 ? view.in_strides[0] : 0,
                                                                          view.in_strides[view.rank - 1], rows, cols);
      return cudaGetLastError();
    }
  }
  launch_indexed(n, n < kIndex32Limit && source_extent < kIndex32Limit,
                 [&](auto count) { strided_copy_kernel<<<grid_for(n), kBlock, 0, stream>>>(in, out, view, count); });
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_strided_copy(int element_bytes, const void* x, void* y, const StridedView& view, cudaStream_t stream) {
  int64_t n = 1, extent = view.offset < 0 ? -view.offset : view.offset;
  for (int d = 0; d < view.rank; ++d) {
    n *= view.dims[d];
    extent += (view.dims[d] - 1) * (view.in_strides[d] < 0 ? -view.in_strides[d] : view.in_strides[d]);
  }
  if (n == 0) return cudaSuccess;
  switch (element_bytes) {
    case 1: return launch<uint8_t>(x, y, view, n, extent, stream);
    case 2: return launch<uint16_t>(x, y, view, n, extent, stream);
    case 4: return launch<uint32_t>(x, y, view, n, extent, stream);
    case 8: return launch<uint64_t>(x, y, view, n, extent, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace kiln::cuda

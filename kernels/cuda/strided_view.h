// Transpose and Slice as one strided read: output element i, split into output coordinates,
// reads input element offset + sum(coord[d] * in_strides[d]). Written once for the copy kernel
// (copy.cu) and the CPU tests, which check the views against the reference Transpose and Slice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/broadcast_shape.h"  // collapse_dims
#include "kernels/cuda/host_device.h"

namespace kiln::cuda {

inline constexpr int kMaxViewRank = 6;

struct StridedView {
  int rank = 0;
  int64_t dims[kMaxViewRank] = {};        // the output's
  int64_t in_strides[kMaxViewRank] = {};  // input elements per step of each output dim (may be negative)
  int64_t offset = 0;                     // input element of output element 0
};

// Index is int32_t when input and output have fewer than 2^31 elements (cheaper division on a GPU).
template <typename Index>
KILN_HOST_DEVICE inline Index strided_source(const StridedView& v, Index i) {
  Index at = static_cast<Index>(v.offset);
  for (int d = v.rank - 1; d > 0; --d) {
    const Index dim = static_cast<Index>(v.dims[d]);
    at += (i % dim) * static_cast<Index>(v.in_strides[d]);
    i /= dim;
  }
  if (v.rank > 0) at += i * static_cast<Index>(v.in_strides[0]);
  return at;
}

// Drops dims of size 1 and merges output dims d and d + 1 that the input walks as one
// (in_strides[d] == in_strides[d + 1] * dims[d + 1]): NCHW -> NHWC becomes [N, H*W, C].
inline StridedView collapse_view(StridedView v) {
  int64_t* const strides[] = {v.in_strides};
  const int rank = v.rank;
  collapse_dims(v.rank, v.dims, strides, 1);
  for (int d = v.rank; d < rank; ++d) v.dims[d] = v.in_strides[d] = 0;
  return v;
}

// A view whose last two output dims are a transposed plane: output [batch, rows, cols] reads
// input element offset + b * in_strides[0] + r + c * in_strides[rank - 1] (the rows are the
// input's contiguous axis). Such a copy reads and writes coalesced through a tile in shared memory.
inline bool is_plane_transpose(const StridedView& v) {
  return (v.rank == 2 || v.rank == 3) && v.in_strides[v.rank - 2] == 1 && v.in_strides[v.rank - 1] != 1;
}

inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Output dim d is input dim perm[d]; perm is a permutation of 0..rank-1, rank <= kMaxViewRank.
inline StridedView transpose_view(const std::vector<int64_t>& in, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> strides = row_major_strides(in);
  StridedView v;
  v.rank = static_cast<int>(in.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    v.dims[d] = in[static_cast<size_t>(perm[d])];
    v.in_strides[d] = strides[static_cast<size_t>(perm[d])];
  }
  return collapse_view(v);
}

// One sliced axis: `len` elements from `start` in steps of `step` (ref::slice_axes's answer).
struct SlicedAxis {
  size_t axis = 0;
  int64_t start = 0, step = 1, len = 0;
};

inline StridedView slice_view(const std::vector<int64_t>& in, const std::vector<SlicedAxis>& axes) {
  const std::vector<int64_t> strides = row_major_strides(in);
  StridedView v;
  v.rank = static_cast<int>(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    v.dims[d] = in[d];
    v.in_strides[d] = strides[d];
  }
  for (const SlicedAxis& a : axes) {
    v.dims[a.axis] = a.len;
    v.in_strides[a.axis] = strides[a.axis] * a.step;
    v.offset += a.start * strides[a.axis];
  }
  return collapse_view(v);
}

}  // namespace kiln::cuda

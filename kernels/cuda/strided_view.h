// Transpose and Slice as one strided read: output element i, split into output coordinates,
// reads input element offset + sum(coord[d] * in_strides[d]). Written once for the copy kernel
// (copy.cu) and the CPU tests, which check the views against the reference Transpose and Slice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/host_device.h"

namespace kiln::cuda {

inline constexpr int kMaxViewRank = 6;

struct StridedView {
  int rank = 0;
  int64_t dims[kMaxViewRank] = {};        // the output's
  int64_t in_strides[kMaxViewRank] = {};  // input elements per step of each output dim (may be negative)
  int64_t offset = 0;                     // input element of output element 0
};

KILN_HOST_DEVICE inline int64_t strided_source(const StridedView& v, int64_t i) {
  int64_t at = v.offset;
  for (int d = v.rank - 1; d >= 0; --d) {
    at += (i % v.dims[d]) * v.in_strides[d];
    i /= v.dims[d];
  }
  return at;
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
  return v;
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
  return v;
}

}  // namespace kiln::cuda

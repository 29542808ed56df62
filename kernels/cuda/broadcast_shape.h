// Numpy broadcasting resolved for the binary kernel of elementwise.cu: per input, the element
// stride of each output dim (0 where the input is broadcast along it), with the dims collapsed as
// far as every input allows (a bias over [N, H, W, C] walks [N*H*W, C]; equal shapes walk one dim),
// so the kernel splits each index into few coordinates. Plain C++ (read by nvcc too, no CUDA
// header), so the CPU tests check it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/host_device.h"

namespace kiln::cuda {

// Numpy broadcasting, already resolved: rank <= kMaxBroadcastRank dims of the output and, per
// input, the element stride of each output dim (0 where that input is broadcast).
inline constexpr int kMaxBroadcastRank = 6;
struct BroadcastShape {
  int rank = 0;
  int64_t dims[kMaxBroadcastRank] = {};
  int64_t a_strides[kMaxBroadcastRank] = {};
  int64_t b_strides[kMaxBroadcastRank] = {};
};

// `in` is right-aligned against `out` (numpy's rule); out.size() <= kMaxBroadcastRank.
inline void broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out, int64_t* strides) {
  const size_t offset = out.size() - in.size();
  int64_t stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    if (d < offset) {
      strides[d] = 0;
      continue;
    }
    const int64_t dim = in[d - offset];
    strides[d] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
}

// Drops dims of size 1 and merges dim d into d + 1 wherever each of the `lists` stride lists walks
// the two as one (strides[d] == strides[d + 1] * dims[d + 1], zero and negative strides included).
// The element each flat index reaches is unchanged; a scalar result keeps rank 0. Shared by the
// broadcasts here, ElementwiseChain's operands and the strided views of Transpose and Slice.
inline void collapse_dims(int& rank, int64_t* dims, int64_t* const* strides, int lists) {
  int kept = 0;
  for (int d = 0; d < rank; ++d) {
    if (dims[d] == 1) continue;
    bool merge = kept > 0;
    for (int l = 0; l < lists; ++l) merge = merge && strides[l][kept - 1] == strides[l][d] * dims[d];
    if (merge) {
      dims[kept - 1] *= dims[d];
      for (int l = 0; l < lists; ++l) strides[l][kept - 1] = strides[l][d];
    } else {
      dims[kept] = dims[d];
      for (int l = 0; l < lists; ++l) strides[l][kept] = strides[l][d];
      ++kept;
    }
  }
  rank = kept;
}

inline BroadcastShape broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                      const std::vector<int64_t>& out) {
  BroadcastShape shape;
  shape.rank = static_cast<int>(out.size());
  for (size_t d = 0; d < out.size(); ++d) shape.dims[d] = out[d];
  broadcast_strides(a, out, shape.a_strides);
  broadcast_strides(b, out, shape.b_strides);
  int64_t* const strides[] = {shape.a_strides, shape.b_strides};
  collapse_dims(shape.rank, shape.dims, strides, 2);
  return shape;
}

// The element of A and of B that output element `i` reads. Index is int32_t when the output has
// fewer than 2^31 elements (the inputs then too): 32-bit division is several times cheaper on a GPU.
template <typename Index>
KILN_HOST_DEVICE inline void broadcast_offsets(const BroadcastShape& s, Index i, Index& at_a, Index& at_b) {
  at_a = 0;
  at_b = 0;
  for (int d = s.rank - 1; d > 0; --d) {
    const Index dim = static_cast<Index>(s.dims[d]);
    const Index coord = i % dim;
    i /= dim;
    at_a += coord * static_cast<Index>(s.a_strides[d]);
    at_b += coord * static_cast<Index>(s.b_strides[d]);
  }
  if (s.rank > 0) {
    at_a += i * static_cast<Index>(s.a_strides[0]);
    at_b += i * static_cast<Index>(s.b_strides[0]);
  }
}

}  // namespace kiln::cuda

// Numpy broadcasting resolved for the binary kernel of elementwise.cu: per input, the element
// stride of each output dim (0 where the input is broadcast along it). Plain C++ (read by nvcc
// too, no CUDA header), so the CPU tests check it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

inline BroadcastShape broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                      const std::vector<int64_t>& out) {
  BroadcastShape shape;
  shape.rank = static_cast<int>(out.size());
  for (size_t d = 0; d < out.size(); ++d) shape.dims[d] = out[d];
  broadcast_strides(a, out, shape.a_strides);
  broadcast_strides(b, out, shape.b_strides);
  return shape;
}

}  // namespace kiln::cuda

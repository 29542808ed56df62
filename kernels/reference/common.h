// Helpers shared by the reference ops: attribute unwrapping, axis normalization, numpy
// broadcasting for symbolic and concrete shapes, reading small int tensors, and formatting ints
// for error messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op_def.h"

namespace kiln::ref {

// Maps a possibly negative axis into [0, rank); an error names the axis and rank.
Result<int64_t> normalize_axis(int64_t axis, int64_t rank);

// Numpy-style multidirectional broadcasting of symbolic shapes.
Result<SymShape> broadcast_shapes(const SymShape& a, const SymShape& b);
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// For an output of shape `out`, the element strides to use for an input of shape `in` that
// broadcasts to it (0 along broadcast dimensions). `in` is right-aligned against `out`.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

// Calls fn(out_index, offsets...) for every element of `out_shape`, where offsets[k] is the
// element offset into input k computed from the strides in `strides[k]`.
template <size_t N, typename Fn>
void for_each_broadcast(const Shape& out_shape, const std::vector<int64_t> (&strides)[N], Fn&& fn) {
  const int64_t rank = static_cast<int64_t>(out_shape.size());
  const int64_t total = shape_numel(out_shape);
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  int64_t offsets[N] = {};
  for (int64_t i = 0; i < total; ++i) {
    fn(i, offsets);
    for (int64_t d = rank - 1; d >= 0; --d) {
      const size_t ud = static_cast<size_t>(d);
      ++index[ud];
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][ud];
      if (index[ud] < out_shape[ud]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][ud] * index[ud];
      index[ud] = 0;
    }
  }
}

// Opset < 7 broadcasting (binary ops with broadcast=1 and `axis`, per-channel PRelu): input 1's
// dims align with input 0's from `axis` on. The importer records that as attribute
// `legacy_axis`; these rewrite input 1 to numpy semantics (trailing 1s appended), using
// `storage` for the rewritten type or view. No-ops without the attribute.
Status apply_legacy_axis(InferContext& ctx, ValueType& storage);
Status apply_legacy_axis(RunContext& ctx, Tensor& storage);

// Reads an int32/int64 tensor as int64 values.
std::vector<int64_t> tensor_to_ints(const Tensor& t);
std::vector<float> tensor_to_floats(const Tensor& t);

// Common infer functions.
Status infer_same_as_input0(InferContext& ctx);  // one output, same dtype and shape as input 0

// Requires input i to have dtype in `allowed`; error names the input index and dtype.
Status require_dtype(const InferContext& ctx, size_t i, std::initializer_list<DType> allowed);

// "[1,2,3]", for error messages.
std::string ints_to_string(const std::vector<int64_t>& v);

}  // namespace kiln::ref

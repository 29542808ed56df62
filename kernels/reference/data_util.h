// Helpers shared by the data-movement ops (Reshape, Slice, Pad, Expand, ...): reading the small
// int tensors that drive them (shape, axes, pads, ...), bounds for shapes computed from tensor
// values, and a dtype-generic strided copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/core/limits.h"
#include "kernels/reference/common.h"

namespace kiln::ref::data {

// Shapes computed from tensor values (Reshape, Expand, Tile, ConstantOfShape, Range, Resize, Pad)
// are rejected when a dim or the element count exceeds this, so no size arithmetic overflows.
inline constexpr int64_t kMaxElements = limits::kMaxTensorElements;

// An optional int tensor input such as shape, axes, pads or repeats.
struct IntInput {
  bool present = false;         // the input is given (and not an empty optional slot)
  bool known = false;           // its value is known (then `values` holds it)
  int64_t length = -1;          // element count when known from the value or the shape, else -1
  std::vector<int64_t> values;
};

// Inputs [0, count) must be present (a model may leave a required input name empty).
Status require_inputs(const InferContext& ctx, size_t count);

// Reads optional input i as an int64 (or int32) tensor of rank 0 or 1; `name` names it in errors.
// An absent input gives present = false.
Result<IntInput> read_int_input(const InferContext& ctx, size_t i, const char* name);

// a * b for a, b >= 0, or a limit_exceeded error naming `what` when above kMaxElements.
Result<int64_t> checked_mul(int64_t a, int64_t b, const char* what);

// Every known dim of `shape` must be in [0, kMaxElements] and their product at most kMaxElements.
Status check_output_shape(const SymShape& shape, const char* what);

// Maps possibly negative `axes` into [0, rank); errors on out-of-range or repeated axes.
Result<std::vector<int64_t>> normalize_axes(const std::vector<int64_t>& axes, int64_t rank, const char* name);

// Copies a strided view of `src` into the contiguous `dst`: element `index` of dst (row-major
// over `shape`) is src[sum_d index[d] * strides[d]], strides in elements (0 and negative allowed).
void strided_copy(DType dt, const void* src, void* dst, const Shape& shape, const std::vector<int64_t>& strides);

// Product of dims [begin, end) of a concrete shape.
int64_t dims_product(const Shape& shape, size_t begin, size_t end);

}  // namespace kiln::ref::data

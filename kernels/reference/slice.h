// Slice's semantics for concrete data and known starts/ends/axes/steps, shared by the reference
// kernel and the fast ones (kernels/onednn/slice.cpp), so both take the same elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/reference/common.h"

namespace kiln::ref {

// One sliced axis keeps `len` elements: start, start + step, ... Axes not listed keep every element.
struct SliceAxis {
  size_t axis = 0;
  int64_t start = 0;
  int64_t step = 1;
  int64_t len = 0;
};

// `params`: the values of Slice's inputs 1-4 (starts, ends, axes, steps), nullptr where the
// optional axes or steps are absent. Errors are those shape inference reports for the same values.
Result<std::vector<SliceAxis>> slice_axes(const Shape& data, const std::vector<const Tensor*>& params);

}  // namespace kiln::ref

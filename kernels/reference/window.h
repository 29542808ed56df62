// Sliding-window geometry shared by Conv, ConvTranspose, MaxPool and AveragePool: reading and
// validating kernel_shape/strides/dilations/pads/auto_pad, the ONNX formulas for each spatial
// dimension's output size and effective pads, and the X/W checks Conv and ConvTranspose share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/core/limits.h"
#include "kernels/reference/common.h"

namespace kiln::ref {

enum class AutoPad { notset, same_upper, same_lower, valid };

// Attribute values (kernel, stride, dilation, pad) above this are rejected as nonsense; it keeps
// all the window arithmetic far from int64 overflow.
inline constexpr int64_t kMaxWindowValue = int64_t{1} << 24;
// Spatial sizes above this are rejected before any window arithmetic.
inline constexpr int64_t kMaxSpatialSize = limits::kMaxTensorElements;

// The validated window attributes over `rank` spatial dimensions.
struct WindowAttrs {
  size_t rank = 0;
  std::vector<int64_t> kernel;     // kernel_shape; empty when absent (Conv takes it from W)
  std::vector<int64_t> strides;    // default 1
  std::vector<int64_t> dilations;  // default 1
  std::vector<int64_t> pads;       // 2*rank: every dim's begin pad, then every end pad; default 0
  AutoPad auto_pad = AutoPad::notset;
  bool ceil_mode = false;          // pooling only

  int64_t effective_kernel(size_t d, int64_t k) const { return (k - 1) * dilations[d] + 1; }
};

// Reads the common window attributes for `rank` spatial dims. `kernel_required`: an error when
// kernel_shape is absent (pooling). `ceil_mode` is read only when `with_ceil_mode`.
Result<WindowAttrs> read_window_attrs(const Attrs& attrs, size_t rank, bool kernel_required, bool with_ceil_mode);

// Reads an ints attribute of exactly `count` entries in [min_value, kMaxWindowValue]; `fallback`
// fills it when absent. Errors name the attribute and the spatial rank.
Result<std::vector<int64_t>> read_window_ints(const Attrs& attrs, const char* name, size_t count,
                                              int64_t fallback, int64_t min_value);

// One spatial dimension of a window op: output size and the pads actually applied.
struct WindowDim {
  int64_t out = 0;
  int64_t pad_begin = 0;
  int64_t pad_end = 0;
};

// Conv / pooling (ONNX): explicit pads with floor or ceil rounding (ceil mode drops a last window
// that would start in the end padding, as PyTorch and ONNX do), VALID (no pads), SAME_UPPER /
// SAME_LOWER (out = ceil(in / stride), the odd pad at the end / at the beginning).
Result<WindowDim> window_dim(const WindowAttrs& w, size_t d, int64_t in, int64_t kernel);

// ConvTranspose (ONNX): out = stride*(in-1) + output_padding + effective kernel - pads, unless
// output_shape (`target` >= 0) or SAME_* auto_pad (target = in*stride) fixes the size, in which
// case the total padding is split with the odd one at the beginning (at the end for SAME_UPPER).
Result<WindowDim> transpose_window_dim(const WindowAttrs& w, size_t d, int64_t in, int64_t kernel,
                                       int64_t output_padding, int64_t target);

// The kernel taps of a Conv / ConvTranspose plane, precomputed once per node. Spatial indices of
// the "small" side u (Conv: output, ConvTranspose: input) map to the "big" side
// b = u * stride + k * dilation - pad_begin for kernel position k; each tap stores, per spatial dim,
// the range [lo, hi) of u whose b lies inside the big plane, and that offset.
inline constexpr size_t kMaxSpatialRank = 8;

class KernelTaps {
 public:
  KernelTaps(const Shape& small, const Shape& big, const Shape& kernel, const WindowAttrs& w,
             const std::vector<int64_t>& pad_begin);
  int64_t count() const { return count_; }
  // Conv, for `count` output planes at once: plane p (dst + p * dst_stride) [u] += weights[p *
  // weight_stride] * src (big plane) [b], each row of src read once for all of them.
  void gather(int64_t tap, const float* weights, int64_t weight_stride, int64_t count, const float* src, float* dst,
                     int64_t dst_stride) const;
  // ConvTranspose: dst (big plane) [b] += weight * src (small plane) [u].
  void scatter(int64_t tap, float weight, const float* src, float* dst) const;

 private:
  template <bool kScatter>
  void apply(int64_t tap, const float* weights, int64_t weight_stride, int64_t count, const float* src, float* dst,
             int64_t dst_stride) const;

  size_t rank_;
  int64_t count_;
  std::vector<int64_t> strides_, small_strides_, big_strides_;
  std::vector<int64_t> lo_, hi_, off_;  // [tap * rank + d]
};

// ---- Shared by Conv and ConvTranspose: X [N, C, D...], W [.., .., k...] ----

// The spatial rank from X and W (rank - 2 of either, checked to agree); -1 when neither is ranked.
// `w_dims` lists W's dims in the error for a W of rank < 3, e.g. "M, C/group, kernel...".
Result<int64_t> conv_spatial_rank(const ValueType& x, const ValueType& w, const char* w_dims);

// The group attribute (default 1), in [1, kMaxWindowValue].
Result<int64_t> read_group(const Attrs& attrs);

// The kernel size of spatial dim d: kernel_shape when given (it must then agree with W), else W's
// dim (-1 when unknown). W's known kernel dims must be in [1, kMaxWindowValue].
Result<int64_t> conv_kernel_dim(const WindowAttrs& wa, const ValueType& w, size_t d);

// At run time: the spatial dims of X, of W (the kernel) and of Y, and the begin pads, with each
// dim's geometry from `dim_of` (window_dim or transpose_window_dim) checked against Y's shape.
struct ConvGeometry {
  Shape in_spatial, kernel, out_spatial;
  std::vector<int64_t> pad_begin;
};
using WindowDimFn = std::function<Result<WindowDim>(size_t d, int64_t in, int64_t kernel)>;
Result<ConvGeometry> conv_geometry(const Tensor& x, const Tensor& w, const Tensor& y, const WindowDimFn& dim_of);

// Floor division for a positive divisor.
inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// The taps [first, last) of a pooling window along one dim, starting at `start` (output position *
// stride - pad_begin), whose positions start + k * dilation lie inside [0, in); first >= last when
// none does.
struct WindowTaps {
  int64_t first = 0, last = 0;
};
inline WindowTaps window_taps(int64_t start, int64_t dilation, int64_t kernel, int64_t in) {
  return {std::max<int64_t>(0, ceil_div(-start, dilation)), std::min<int64_t>(kernel, floor_div(in - 1 - start, dilation) + 1)};
}
// Whether each of the `out` windows along one dim has a tap inside the input (a window of padding
// only has no max to give).
bool every_window_sees_input(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin, int64_t out);

}  // namespace kiln::ref

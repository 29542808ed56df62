#include "kernels/reference/window.h"

#include <algorithm>

namespace kiln::ref {

Result<std::vector<int64_t>> read_window_ints(const Attrs& attrs, const char* name, size_t count,
                                              int64_t fallback, int64_t min_value) {
  KILN_ASSIGN(values, attrs.get_ints(name));
  if (values.empty()) return std::vector<int64_t>(count, fallback);  // absent (or given as [])
  KILN_REQUIRE(values.size() == count, invalid_argument, name, " ", ints_to_string(values), " has ", values.size(),
               " entries but ", count, " are expected (input spatial rank ", count / (name == std::string("pads") ? 2 : 1),
               ")");
  for (int64_t v : values)
    KILN_REQUIRE(v >= min_value && v <= kMaxWindowValue, invalid_argument, name, " ", ints_to_string(values),
                 ": every entry must be in [", min_value, ", ", kMaxWindowValue, "]");
  return values;
}

Result<WindowAttrs> read_window_attrs(const Attrs& attrs, size_t rank, bool kernel_required, bool with_ceil_mode) {
  WindowAttrs w;
  w.rank = rank;
  KILN_ASSIGN(kernel, attrs.get_ints("kernel_shape"));
  KILN_REQUIRE(!kernel_required || !kernel.empty(), invalid_argument, "the kernel_shape attribute is required");
  if (!kernel.empty()) {
    KILN_REQUIRE(kernel.size() == rank, invalid_argument, "kernel_shape ", ints_to_string(kernel), " has rank ",
                 kernel.size(), " but input spatial rank is ", rank);
    KILN_ASSIGN(k, read_window_ints(attrs, "kernel_shape", rank, 1, 1));
    w.kernel = std::move(k);
  }
  KILN_ASSIGN(strides, read_window_ints(attrs, "strides", rank, 1, 1));
  KILN_ASSIGN(dilations, read_window_ints(attrs, "dilations", rank, 1, 1));
  KILN_ASSIGN(pads, read_window_ints(attrs, "pads", 2 * rank, 0, 0));
  w.strides = std::move(strides);
  w.dilations = std::move(dilations);
  w.pads = std::move(pads);

  KILN_ASSIGN(auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  if (auto_pad == "NOTSET") w.auto_pad = AutoPad::notset;
  else if (auto_pad == "SAME_UPPER") w.auto_pad = AutoPad::same_upper;
  else if (auto_pad == "SAME_LOWER") w.auto_pad = AutoPad::same_lower;
  else if (auto_pad == "VALID") w.auto_pad = AutoPad::valid;
  else
    return make_error(ErrorCode::invalid_argument, "auto_pad '", auto_pad,
                      "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");

  if (with_ceil_mode) {
    KILN_ASSIGN(ceil_mode, attrs.get_int("ceil_mode", 0));
    KILN_REQUIRE(ceil_mode == 0 || ceil_mode == 1, invalid_argument, "ceil_mode must be 0 or 1, got ", ceil_mode);
    w.ceil_mode = ceil_mode == 1;
  }
  return w;
}

Result<WindowDim> window_dim(const WindowAttrs& w, size_t d, int64_t in, int64_t kernel) {
  KILN_REQUIRE(in >= 0 && in <= kMaxSpatialSize, limit_exceeded, "spatial dim ", d, " has size ", in,
               ", more than the supported ", kMaxSpatialSize);
  const int64_t stride = w.strides[d];
  const int64_t ek = w.effective_kernel(d, kernel);
  WindowDim r;
  if (w.auto_pad == AutoPad::same_upper || w.auto_pad == AutoPad::same_lower) {
    r.out = ceil_div(in, stride);
    const int64_t total = std::max<int64_t>(0, (r.out - 1) * stride + ek - in);
    const int64_t small = total / 2;
    r.pad_begin = w.auto_pad == AutoPad::same_upper ? small : total - small;
    r.pad_end = total - r.pad_begin;
    return r;
  }
  if (w.auto_pad == AutoPad::notset) {
    r.pad_begin = w.pads[d];
    r.pad_end = w.pads[d + w.rank];
  }
  const int64_t padded = in + r.pad_begin + r.pad_end;
  KILN_REQUIRE(padded >= ek, shape_mismatch, "spatial dim ", d, ": input size ", in, " with pads ", r.pad_begin, "+",
               r.pad_end, " is smaller than the effective kernel size ", ek);
  if (w.ceil_mode && w.auto_pad == AutoPad::notset) {
    r.out = ceil_div(padded - ek, stride) + 1;
    // The last window must start inside the input or the begin padding.
    if ((r.out - 1) * stride >= in + r.pad_begin) --r.out;
  } else {
    r.out = (padded - ek) / stride + 1;
  }
  return r;
}

Result<WindowDim> transpose_window_dim(const WindowAttrs& w, size_t d, int64_t in, int64_t kernel,
                                       int64_t output_padding, int64_t target) {
  KILN_REQUIRE(in >= 0 && in <= kMaxSpatialSize, limit_exceeded, "spatial dim ", d, " has size ", in,
               ", more than the supported ", kMaxSpatialSize);
  KILN_REQUIRE(target <= kMaxSpatialSize, limit_exceeded, "output_shape entry ", target, " for spatial dim ", d,
               " is more than the supported ", kMaxSpatialSize);
  const int64_t stride = w.strides[d];
  const int64_t natural = stride * (in - 1) + output_padding + w.effective_kernel(d, kernel);
  WindowDim r;
  const bool same = w.auto_pad == AutoPad::same_upper || w.auto_pad == AutoPad::same_lower;
  if (target >= 0 || same) {
    r.out = target >= 0 ? target : in * stride;
    const int64_t total = std::max<int64_t>(0, natural - r.out);
    r.pad_begin = w.auto_pad == AutoPad::same_upper ? total / 2 : total - total / 2;
    r.pad_end = total - r.pad_begin;
    return r;
  }
  if (w.auto_pad == AutoPad::notset) {
    r.pad_begin = w.pads[d];
    r.pad_end = w.pads[d + w.rank];
  }
  r.out = natural - r.pad_begin - r.pad_end;
  KILN_REQUIRE(r.out >= 0, shape_mismatch, "spatial dim ", d, ": pads ", r.pad_begin, "+", r.pad_end,
               " exceed the full transposed output size ", natural);
  return r;
}

}  // namespace kiln::ref

namespace kiln::ref {

KernelTaps::KernelTaps(const Shape& small, const Shape& big, const Shape& kernel, const WindowAttrs& w,
                       const std::vector<int64_t>& pad_begin)
    : rank_(small.size()),
      count_(shape_numel(kernel)),
      strides_(w.strides),
      small_strides_(shape_strides(small)),
      big_strides_(shape_strides(big)) {
  lo_.resize(static_cast<size_t>(count_) * rank_);
  hi_.resize(lo_.size());
  off_.resize(lo_.size());
  for (int64_t tap = 0; tap < count_; ++tap) {
    int64_t rest = tap;
    for (size_t d = rank_; d-- > 0;) {
      const int64_t k = rest % kernel[d];
      rest /= kernel[d];
      const size_t i = static_cast<size_t>(tap) * rank_ + d;
      const int64_t s = w.strides[d];
      off_[i] = k * w.dilations[d] - pad_begin[d];
      lo_[i] = std::max<int64_t>(0, ceil_div(-off_[i], s));
      hi_[i] = std::min<int64_t>(small[d], floor_div(big[d] - 1 - off_[i], s) + 1);
    }
  }
}

template <bool kScatter>
void KernelTaps::apply(int64_t tap, const float* weights, int64_t weight_stride, int64_t count, const float* src,
                       float* dst, int64_t dst_stride) const {
  const size_t base = static_cast<size_t>(tap) * rank_;
  const int64_t* lo = &lo_[base];
  const int64_t* hi = &hi_[base];
  const int64_t* off = &off_[base];
  for (size_t d = 0; d < rank_; ++d)
    if (lo[d] >= hi[d]) return;
  const size_t last = rank_ - 1;
  const int64_t step = strides_[last];
  const int64_t n = hi[last] - lo[last];
  int64_t u[kMaxSpatialRank];
  for (size_t d = 0; d < last; ++d) u[d] = lo[d];
  for (;;) {
    int64_t small_at = lo[last];
    int64_t big_at = lo[last] * step + off[last];
    for (size_t d = 0; d < last; ++d) {
      small_at += u[d] * small_strides_[d];
      big_at += (u[d] * strides_[d] + off[d]) * big_strides_[d];
    }
    for (int64_t p = 0; p < count; ++p) {
      const float weight = weights[p * weight_stride];
      if constexpr (kScatter) {
        const float* in = src + small_at;
        float* out = dst + p * dst_stride + big_at;
        if (step == 1)
          for (int64_t j = 0; j < n; ++j) out[j] += weight * in[j];
        else
          for (int64_t j = 0; j < n; ++j) out[j * step] += weight * in[j];
      } else {
        const float* in = src + big_at;
        float* out = dst + p * dst_stride + small_at;
        if (step == 1)
          for (int64_t j = 0; j < n; ++j) out[j] += weight * in[j];
        else
          for (int64_t j = 0; j < n; ++j) out[j] += weight * in[j * step];
      }
    }
    // Next row: odometer over the outer spatial dims.
    size_t d = last;
    while (d > 0) {
      --d;
      if (++u[d] < hi[d]) break;
      u[d] = lo[d];
      if (d == 0) return;
    }
    if (last == 0) return;
  }
}

void KernelTaps::gather(int64_t tap, const float* weights, int64_t weight_stride, int64_t count, const float* src,
                               float* dst, int64_t dst_stride) const {
  apply<false>(tap, weights, weight_stride, count, src, dst, dst_stride);
}

void KernelTaps::scatter(int64_t tap, float weight, const float* src, float* dst) const {
  apply<true>(tap, &weight, 0, 1, src, dst, 0);
}

Result<int64_t> conv_spatial_rank(const ValueType& x, const ValueType& w, const char* w_dims) {
  int64_t rank = -1;
  if (x.rank_known) {
    KILN_REQUIRE(x.rank() >= 3, shape_mismatch, "X must have rank >= 3 (N, C, spatial...), got shape ",
                 sym_shape_to_string(x.shape));
    rank = x.rank() - 2;
  }
  if (w.rank_known) {
    KILN_REQUIRE(w.rank() >= 3, shape_mismatch, "W must have rank >= 3 (", w_dims, "), got shape ",
                 sym_shape_to_string(w.shape));
    KILN_REQUIRE(rank < 0 || w.rank() - 2 == rank, shape_mismatch, "W has shape ", sym_shape_to_string(w.shape),
                 " (rank ", w.rank(), ") but X has shape ", sym_shape_to_string(x.shape), " (rank ", x.rank(), ")");
    rank = w.rank() - 2;
  }
  KILN_REQUIRE(rank <= static_cast<int64_t>(kMaxSpatialRank), unsupported, "spatial rank ", rank,
               " is more than the supported ", kMaxSpatialRank);
  return rank;
}

Result<int64_t> read_group(const Attrs& attrs) {
  KILN_ASSIGN(group, attrs.get_int("group", 1));
  KILN_REQUIRE(group >= 1 && group <= kMaxWindowValue, invalid_argument, "group must be in [1, ", kMaxWindowValue,
               "], got ", group);
  return group;
}

Result<int64_t> conv_kernel_dim(const WindowAttrs& wa, const ValueType& w, size_t d) {
  const Dim wd = w.rank_known ? w.shape[d + 2] : Dim::unknown();
  if (wd.known())
    KILN_REQUIRE(wd.value >= 1 && wd.value <= kMaxWindowValue, shape_mismatch, "W has shape ",
                 sym_shape_to_string(w.shape), ": kernel dims must be in [1, ", kMaxWindowValue, "]");
  if (wa.kernel.empty()) return wd.known() ? wd.value : int64_t{-1};
  KILN_REQUIRE(!wd.known() || wd.value == wa.kernel[d], shape_mismatch, "kernel_shape ", ints_to_string(wa.kernel),
               " does not match W's shape ", sym_shape_to_string(w.shape));
  return wa.kernel[d];
}

Result<ConvGeometry> conv_geometry(const Tensor& x, const Tensor& w, const Tensor& y, const WindowDimFn& dim_of) {
  ConvGeometry g;
  g.in_spatial.assign(x.shape().begin() + 2, x.shape().end());
  g.kernel.assign(w.shape().begin() + 2, w.shape().end());
  g.out_spatial.assign(y.shape().begin() + 2, y.shape().end());
  g.pad_begin.resize(g.in_spatial.size());
  for (size_t d = 0; d < g.in_spatial.size(); ++d) {
    KILN_ASSIGN(dim, dim_of(d, g.in_spatial[d], g.kernel[d]));
    KILN_REQUIRE(dim.out == g.out_spatial[d], internal, "output dim ", d, " is ", g.out_spatial[d], ", expected ",
                 dim.out);
    g.pad_begin[d] = dim.pad_begin;
  }
  return g;
}

bool every_window_sees_input(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin, int64_t out) {
  for (int64_t o = 0; o < out; ++o) {
    const WindowTaps taps = window_taps(o * stride - pad_begin, dilation, kernel, in);
    if (taps.first >= taps.last) return false;
  }
  return true;
}

}  // namespace kiln::ref

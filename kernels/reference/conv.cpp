// Conv, float32, any number of spatial dims: X [N, C, D...], W [M, C/group, k...], optional
// bias B [M] -> Y [N, M, O...]. Attributes: group, kernel_shape (else W's spatial dims), strides,
// dilations, pads, auto_pad (NOTSET / SAME_UPPER / SAME_LOWER / VALID).
//
// The kernel accumulates, for each (n, output channel), every (input channel, kernel tap) into the
// output plane one output row at a time, the innermost loop running along the output's last dim.
#include <algorithm>

#include "kernels/reference/window.h"

namespace kiln {
namespace {

using ref::WindowAttrs;

// Spatial rank from X (rank - 2) and W (rank - 2) when either is ranked; -1 when neither is.
Result<int64_t> conv_spatial_rank(const ValueType& x, const ValueType& w) {
  int64_t rank = -1;
  if (x.rank_known) {
    KILN_REQUIRE(x.rank() >= 3, shape_mismatch, "X must have rank >= 3 (N, C, spatial...), got shape ",
                 sym_shape_to_string(x.shape));
    rank = x.rank() - 2;
  }
  if (w.rank_known) {
    KILN_REQUIRE(w.rank() >= 3, shape_mismatch, "W must have rank >= 3 (M, C/group, kernel...), got shape ",
                 sym_shape_to_string(w.shape));
    KILN_REQUIRE(rank < 0 || w.rank() - 2 == rank, shape_mismatch, "W has shape ", sym_shape_to_string(w.shape),
                 " (rank ", w.rank(), ") but X has shape ", sym_shape_to_string(x.shape), " (rank ", x.rank(), ")");
    rank = w.rank() - 2;
  }
  KILN_REQUIRE(rank <= static_cast<int64_t>(ref::kMaxSpatialRank), unsupported, "spatial rank ", rank,
               " is more than the supported ", ref::kMaxSpatialRank);
  return rank;
}

Result<int64_t> read_group(const Attrs& attrs) {
  KILN_ASSIGN(group, attrs.get_int("group", 1));
  KILN_REQUIRE(group >= 1 && group <= ref::kMaxWindowValue, invalid_argument, "group must be in [1, ",
               ref::kMaxWindowValue, "], got ", group);
  return group;
}

// The kernel size of spatial dim d: kernel_shape when given (it must then agree with W), else W's
// dim (-1 when unknown).
Result<int64_t> kernel_dim(const WindowAttrs& wa, const ValueType& w, size_t d) {
  const Dim wd = w.rank_known ? w.shape[d + 2] : Dim::unknown();
  if (wd.known())
    KILN_REQUIRE(wd.value >= 1 && wd.value <= ref::kMaxWindowValue, shape_mismatch, "W has shape ",
                 sym_shape_to_string(w.shape), ": kernel dims must be in [1, ", ref::kMaxWindowValue, "]");
  if (wa.kernel.empty()) return wd.known() ? wd.value : int64_t{-1};
  KILN_REQUIRE(!wd.known() || wd.value == wa.kernel[d], shape_mismatch, "kernel_shape ",
               ref::ints_to_string(wa.kernel), " does not match W's shape ", sym_shape_to_string(w.shape));
  return wa.kernel[d];
}

// Checks an optional bias input (index 2) against M; returns M (taken from the bias if W does not
// give it).
Result<Dim> check_bias(const InferContext& ctx, Dim m) {
  if (!ctx.has_input(2)) return m;
  KILN_TRY(ref::require_dtype(ctx, 2, {DType::f32}));
  const ValueType& b = ctx.input(2);
  if (!b.rank_known) return m;
  KILN_REQUIRE(b.rank() == 1, shape_mismatch, "bias must be 1-D, got shape ", sym_shape_to_string(b.shape));
  if (!b.shape[0].known()) return m;
  if (!m.known()) return b.shape[0];
  KILN_REQUIRE(b.shape[0].value == m.value, shape_mismatch, "bias has ", b.shape[0].value, " elements but there are ",
               m.value, " output channels");
  return m;
}

Status infer_conv(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_TRY(ref::require_dtype(ctx, 1, {DType::f32}));
  const ValueType& x = ctx.input(0);
  const ValueType& w = ctx.input(1);
  KILN_ASSIGN(group, read_group(*ctx.attrs));
  KILN_ASSIGN(rank, conv_spatial_rank(x, w));

  const Dim c = x.rank_known ? x.shape[1] : Dim::unknown();
  Dim m = w.rank_known ? w.shape[0] : Dim::unknown();
  const Dim cg = w.rank_known ? w.shape[1] : Dim::unknown();
  if (m.known())
    KILN_REQUIRE(m.value % group == 0, shape_mismatch, "W has ", m.value, " output channels, which group ", group,
                 " does not divide");
  if (c.known() && cg.known())
    KILN_REQUIRE(c.value == cg.value * group, shape_mismatch, "input has ", c.value, " channels but weight expects ",
                 cg.value, " x group ", group);
  else if (c.known())
    KILN_REQUIRE(c.value % group == 0, shape_mismatch, "input has ", c.value, " channels, which group ", group,
                 " does not divide");
  KILN_ASSIGN(m_checked, check_bias(ctx, m));
  m = m_checked;

  if (rank < 0) {
    ctx.outputs.assign(1, ValueType::unranked(DType::f32));
    return Status::ok();
  }
  const size_t r = static_cast<size_t>(rank);
  KILN_ASSIGN(wa, ref::read_window_attrs(*ctx.attrs, r, false, false));
  SymShape out{x.rank_known ? x.shape[0] : Dim::unknown(), m};
  for (size_t d = 0; d < r; ++d) {
    KILN_ASSIGN(k, kernel_dim(wa, w, d));
    const Dim in = x.rank_known ? x.shape[d + 2] : Dim::unknown();
    const bool same = wa.auto_pad == ref::AutoPad::same_upper || wa.auto_pad == ref::AutoPad::same_lower;
    if (!in.known() || (k < 0 && !same)) {
      out.push_back(Dim::unknown());
      continue;
    }
    KILN_ASSIGN(dim, ref::window_dim(wa, d, in.value, std::max<int64_t>(k, 1)));
    out.push_back(dim.out);
  }
  ctx.outputs.assign(1, ValueType::of(DType::f32, std::move(out)));
  return Status::ok();
}

Status run_conv(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  Tensor& y = ctx.output(0);
  KILN_ASSIGN(group, read_group(*ctx.attrs));
  const size_t r = static_cast<size_t>(x.rank() - 2);
  KILN_ASSIGN(wa, ref::read_window_attrs(*ctx.attrs, r, false, false));

  const Shape in_spatial(x.shape().begin() + 2, x.shape().end());
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  const Shape out_spatial(y.shape().begin() + 2, y.shape().end());
  std::vector<int64_t> pad_begin(r);
  for (size_t d = 0; d < r; ++d) {
    KILN_ASSIGN(dim, ref::window_dim(wa, d, in_spatial[d], kernel[d]));
    KILN_REQUIRE(dim.out == out_spatial[d], internal, "output dim ", d, " is ", out_spatial[d], ", expected ", dim.out);
    pad_begin[d] = dim.pad_begin;
  }
  const ref::KernelTaps taps(out_spatial, in_spatial, kernel, wa, pad_begin);

  const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0);
  const int64_t cg = c / group, mg = m / group;
  const int64_t in_size = shape_numel(in_spatial), out_size = shape_numel(out_spatial);
  const int64_t kvol = taps.count();
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  const float* bias = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  float* yd = y.data<float>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oc = 0; oc < m; ++oc) {
      const int64_t g = oc / mg;
      float* out = yd + (b * m + oc) * out_size;
      if (bias) std::fill(out, out + out_size, bias[oc]);
      for (int64_t icl = 0; icl < cg; ++icl) {
        const float* in = xd + (b * c + g * cg + icl) * in_size;
        const float* wk = wd + (oc * cg + icl) * kvol;
        for (int64_t t = 0; t < kvol; ++t) taps.gather(t, wk[t], in, out);
      }
    }
  }
  return Status::ok();
}

}  // namespace

// Inputs: X, W, optional B.
const OpDef& op_def_Conv() {
  static const OpDef def{2, 3, 1, 1, infer_conv, run_conv};
  return def;
}

}  // namespace kiln

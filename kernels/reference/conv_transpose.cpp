// ConvTranspose, float32, any number of spatial dims: X [N, C, D...], W [C, M/group, k...],
// optional bias B [M] -> Y [N, M, O...]. Attributes: group, kernel_shape (else W's spatial dims),
// strides, dilations, pads, output_padding, output_shape (spatial dims, or all dims of Y), auto_pad.
// Output size and pads follow the ONNX spec:
//   O = stride * (D - 1) + output_padding + (k - 1) * dilation + 1 - pad_begin - pad_end
// unless output_shape (or SAME_*, giving O = D * stride) fixes O; the total padding is then split
// with the odd one at the beginning, or at the end for SAME_UPPER.
//
// The kernel scatters each (input channel, kernel tap) of an input plane into the output plane,
// one input row at a time, the innermost loop running along the input's last dim.
#include <algorithm>

#include "kernels/reference/window.h"

namespace kiln {
namespace {

using ref::WindowAttrs;

struct TransposeAttrs {
  WindowAttrs window;
  int64_t group = 1;
  std::vector<int64_t> output_padding;  // per spatial dim
  std::vector<int64_t> output_shape;    // per spatial dim; empty when not given
};

Result<TransposeAttrs> read_transpose_attrs(const Attrs& attrs, size_t rank) {
  TransposeAttrs t;
  KILN_ASSIGN(window, ref::read_window_attrs(attrs, rank, false, false));
  t.window = std::move(window);
  KILN_ASSIGN(group, ref::read_group(attrs));
  t.group = group;
  KILN_ASSIGN(output_padding, ref::read_window_ints(attrs, "output_padding", rank, 0, 0));
  t.output_padding = std::move(output_padding);
  KILN_ASSIGN(output_shape, attrs.get_ints("output_shape"));
  if (!output_shape.empty()) {
    // Either the spatial dims or the full output shape (some exporters write N and M too).
    KILN_REQUIRE(output_shape.size() == rank || output_shape.size() == rank + 2, invalid_argument, "output_shape ",
                 ref::ints_to_string(output_shape), " has ", output_shape.size(), " entries but input spatial rank is ",
                 rank);
    if (output_shape.size() == rank + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    for (int64_t v : output_shape)
      KILN_REQUIRE(v >= 0, invalid_argument, "output_shape ", ref::ints_to_string(output_shape),
                   " has a negative entry");
    t.output_shape = std::move(output_shape);
  }
  return t;
}

Result<ref::WindowDim> transpose_dim(const TransposeAttrs& t, size_t d, int64_t in, int64_t kernel) {
  return ref::transpose_window_dim(t.window, d, in, kernel, t.output_padding[d],
                                   t.output_shape.empty() ? int64_t{-1} : t.output_shape[d]);
}

Status infer_conv_transpose(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_TRY(ref::require_dtype(ctx, 1, {DType::f32}));
  const ValueType& x = ctx.input(0);
  const ValueType& w = ctx.input(1);
  KILN_ASSIGN(rank, ref::conv_spatial_rank(x, w, "C, M/group, kernel..."));
  if (rank < 0) {
    ctx.outputs.assign(1, ValueType::unranked(DType::f32));
    return Status::ok();
  }
  const size_t r = static_cast<size_t>(rank);
  KILN_ASSIGN(t, read_transpose_attrs(*ctx.attrs, r));

  const Dim c = x.rank_known ? x.shape[1] : Dim::unknown();
  const Dim wc = w.rank_known ? w.shape[0] : Dim::unknown();
  const Dim mg = w.rank_known ? w.shape[1] : Dim::unknown();
  if (c.known())
    KILN_REQUIRE(c.value % t.group == 0, shape_mismatch, "input has ", c.value, " channels, which group ", t.group,
                 " does not divide");
  if (c.known() && wc.known())
    KILN_REQUIRE(c.value == wc.value, shape_mismatch, "input has ", c.value, " channels but weight expects ", wc.value,
                 " (W is [C, M/group, kernel...])");
  Dim m = mg.known() ? Dim(mg.value * t.group) : Dim::unknown();
  if (ctx.has_input(2)) {
    KILN_TRY(ref::require_dtype(ctx, 2, {DType::f32}));
    const ValueType& b = ctx.input(2);
    if (b.rank_known) {
      KILN_REQUIRE(b.rank() == 1, shape_mismatch, "bias must be 1-D, got shape ", sym_shape_to_string(b.shape));
      if (b.shape[0].known() && m.known())
        KILN_REQUIRE(b.shape[0].value == m.value, shape_mismatch, "bias has ", b.shape[0].value,
                     " elements but there are ", m.value, " output channels (", mg.value, " x group ", t.group, ")");
      if (!m.known()) m = b.shape[0];
    }
  }

  SymShape out{x.rank_known ? x.shape[0] : Dim::unknown(), m};
  for (size_t d = 0; d < r; ++d) {
    KILN_ASSIGN(k, ref::conv_kernel_dim(t.window, w, d));
    if (!t.output_shape.empty()) {
      out.push_back(t.output_shape[d]);
      continue;
    }
    const Dim in = x.rank_known ? x.shape[d + 2] : Dim::unknown();
    if (!in.known() || k < 0) {
      out.push_back(Dim::unknown());
      continue;
    }
    KILN_ASSIGN(dim, transpose_dim(t, d, in.value, k));
    out.push_back(dim.out);
  }
  ctx.outputs.assign(1, ValueType::of(DType::f32, std::move(out)));
  return Status::ok();
}

Status run_conv_transpose(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  Tensor& y = ctx.output(0);
  const size_t r = static_cast<size_t>(x.rank() - 2);
  KILN_ASSIGN(t, read_transpose_attrs(*ctx.attrs, r));

  KILN_ASSIGN(geo, ref::conv_geometry(x, w, y, [&](size_t d, int64_t in, int64_t k) {
    return transpose_dim(t, d, in, k);
  }));
  const ref::KernelTaps taps(geo.in_spatial, geo.out_spatial, geo.kernel, t.window, geo.pad_begin);

  const int64_t n = x.dim(0), c = x.dim(1), mg = w.dim(1);
  const int64_t cg = c / t.group, m = mg * t.group;
  const int64_t in_size = shape_numel(geo.in_spatial), out_size = shape_numel(geo.out_spatial);
  const int64_t kvol = taps.count();
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  const float* bias = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  float* yd = y.data<float>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oc = 0; oc < m; ++oc) {
      const int64_t g = oc / mg, ocl = oc % mg;
      float* out = yd + (b * m + oc) * out_size;
      if (bias) std::fill(out, out + out_size, bias[oc]);
      for (int64_t icl = 0; icl < cg; ++icl) {
        const int64_t ic = g * cg + icl;
        const float* in = xd + (b * c + ic) * in_size;
        const float* wk = wd + (ic * mg + ocl) * kvol;
        for (int64_t k = 0; k < kvol; ++k) taps.scatter(k, wk[k], in, out);
      }
    }
  }
  return Status::ok();
}

}  // namespace

// Inputs: X, W, optional B.
const OpDef& op_def_ConvTranspose() {
  static const OpDef def{2, 3, 1, 1, infer_conv_transpose, run_conv_transpose};
  return def;
}

}  // namespace kiln

// Conv, float32, any number of spatial dims: X [N, C, D...], W [M, C/group, k...], optional
// bias B [M] -> Y [N, M, O...]. Attributes: group, kernel_shape (else W's spatial dims), strides,
// dilations, pads, auto_pad (NOTSET / SAME_UPPER / SAME_LOWER / VALID).
//
// The kernel accumulates, for each (n, output channel), every (input channel, kernel tap) into the
// output plane one output row at a time, the innermost loop running along the output's last dim.
#include <algorithm>

#include "kernels/reference/epilogue.h"
#include "kernels/reference/window.h"

namespace kiln {
namespace {

// Below this many multiply-adds a convolution runs on the calling thread (starting a team costs more).
constexpr int64_t kParallelMacs = 1 << 18;
// Output channels computed together while their input rows are in cache.
constexpr int64_t kChannelBlock = 8;

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
  KILN_ASSIGN(group, ref::read_group(*ctx.attrs));
  KILN_ASSIGN(rank, ref::conv_spatial_rank(x, w, "M, C/group, kernel..."));

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
    return ref::infer_epilogue(ctx, 3, ctx.outputs[0]);
  }
  const size_t r = static_cast<size_t>(rank);
  KILN_ASSIGN(wa, ref::read_window_attrs(*ctx.attrs, r, false, false));
  SymShape out{x.rank_known ? x.shape[0] : Dim::unknown(), m};
  for (size_t d = 0; d < r; ++d) {
    KILN_ASSIGN(k, ref::conv_kernel_dim(wa, w, d));
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
  return ref::infer_epilogue(ctx, 3, ctx.outputs[0]);
}

Status run_conv(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  Tensor& y = ctx.output(0);
  KILN_ASSIGN(group, ref::read_group(*ctx.attrs));
  const size_t r = static_cast<size_t>(x.rank() - 2);
  KILN_ASSIGN(wa, ref::read_window_attrs(*ctx.attrs, r, false, false));

  KILN_ASSIGN(geo, ref::conv_geometry(x, w, y, [&](size_t d, int64_t in, int64_t k) {
    return ref::window_dim(wa, d, in, k);
  }));
  const ref::KernelTaps taps(geo.out_spatial, geo.in_spatial, geo.kernel, wa, geo.pad_begin);

  const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0);
  const int64_t cg = c / group, mg = m / group;
  const int64_t in_size = shape_numel(geo.in_spatial), out_size = shape_numel(geo.out_spatial);
  const int64_t kvol = taps.count();
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  const float* bias = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  float* yd = y.data<float>();
  // Work comes in blocks of up to kChannelBlock output channels of one image and group: each input
  // row is then read once per block instead of once per channel (the kernel is bound by reading
  // the input). Every output element still sums (input channel, tap) in the same order, so the
  // result is the same bits for any block and thread count.
  const int64_t blocks_per_group = (mg + kChannelBlock - 1) / kChannelBlock;
  const int64_t blocks = n * group * blocks_per_group;
  const bool parallel = ctx.threads > 1 && blocks > 1 && n * m * out_size * cg * kvol >= kParallelMacs;
#pragma omp parallel for num_threads(ctx.threads) schedule(dynamic) if (parallel)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t b = block / (group * blocks_per_group);
    const int64_t g = block / blocks_per_group % group;
    const int64_t oc_begin = g * mg + block % blocks_per_group * kChannelBlock;
    const int64_t oc_end = std::min(oc_begin + kChannelBlock, (g + 1) * mg);
    for (int64_t oc = oc_begin; oc < oc_end; ++oc)
      if (bias) std::fill(yd + (b * m + oc) * out_size, yd + (b * m + oc + 1) * out_size, bias[oc]);
    for (int64_t icl = 0; icl < cg; ++icl) {
      const float* in = xd + (b * c + g * cg + icl) * in_size;
      for (int64_t t = 0; t < kvol; ++t)
        taps.gather(t, wd + (oc_begin * cg + icl) * kvol + t, cg * kvol, oc_end - oc_begin, in,
                     yd + (b * m + oc_begin) * out_size, out_size);
    }
  }
  return ref::run_epilogue(ctx, 3, y);
}

}  // namespace

// Inputs: X, W, optional B, optional residual (kernels/post_ops.h).
const OpDef& op_def_Conv() {
  static const OpDef def{2, 4, 1, 1, infer_conv, run_conv};
  return def;
}

}  // namespace kiln

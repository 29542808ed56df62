// DepthFirstConv, float32 (made by the fuse_depth_first pass, never imported): a chain of an
// optional pointwise (1x1) expansion, an optional depthwise convolution, an optional per-channel
// scale and an optional pointwise (1x1) projection, so a fast kernel can compute it tile by tile
// with the intermediates in cache (BrainSlug's depth-first execution).
//   inputs: 0 X [N,Cx,H,W]; 7 EW [C,Cx,1,1] and 8 EB [C] (optional: the expansion; without it
//           C = Cx); 1 DW [C,1,kh,kw] and 2 DB [C] (optional: the depthwise stage);
//           3 S [N,C,1,1] (optional: the per-channel scale, squeeze-excite's multiply);
//           4 W [M,C,1,1] (optional: the projection; without it Y is the depthwise stage's result
//           and B, R and the activation must be absent); 5 B [M]; 6 R [N,M,H',W'] (residual)
//   attributes: ex_activation* (the expansion's, kernels/post_ops.h with prefix "ex_"),
//           dw_strides [sh,sw] (1,1), dw_pads [t,l,b,r] (0s), dw_activation* (prefix "dw_"),
//           activation* (the projection's epilogue)
//   Y = act(W * scale(dw_act(DW (*) ex_act(EW * X + EB) + DB)) + B + R), H' = (H + t + b - kh) / sh + 1.
#include "kernels/post_ops.h"
#include "kernels/reference/common.h"
#include "kernels/reference/epilogue.h"

namespace kiln {
namespace {

constexpr size_t kDw = 1, kDwBias = 2, kScale = 3, kWeight = 4, kBias = 5, kResidual = 6, kExpand = 7,
                 kExpandBias = 8;

struct DwGeometry {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
};

Result<DwGeometry> read_geometry(const Attrs& attrs, const Shape* dw) {
  DwGeometry g;
  if (dw) {
    g.kh = (*dw)[2];
    g.kw = (*dw)[3];
  }
  KILN_ASSIGN(strides, attrs.get_ints("dw_strides", {1, 1}));
  KILN_ASSIGN(pads, attrs.get_ints("dw_pads", {0, 0, 0, 0}));
  KILN_REQUIRE(strides.size() == 2 && strides[0] > 0 && strides[1] > 0, invalid_argument,
               "dw_strides must be two positive values, got ", ref::ints_to_string(strides));
  KILN_REQUIRE(pads.size() == 4 && pads[0] >= 0 && pads[1] >= 0 && pads[2] >= 0 && pads[3] >= 0, invalid_argument,
               "dw_pads must be four non-negative values, got ", ref::ints_to_string(pads));
  g.sh = strides[0];
  g.sw = strides[1];
  g.pt = pads[0];
  g.pl = pads[1];
  g.pb = pads[2];
  g.pr = pads[3];
  return g;
}

// Checks that input i is float32 with exactly `want` (known dims only).
Status require_shape(const InferContext& ctx, size_t i, const char* name, const SymShape& want) {
  const ValueType& t = ctx.input(i);
  KILN_REQUIRE(t.dtype == DType::f32, invalid_argument, name, " must be float32, got ", dtype_name(t.dtype));
  if (!t.rank_known) return Status::ok();
  bool same = t.shape.size() == want.size();
  for (size_t d = 0; same && d < want.size(); ++d)
    same = !want[d].known() || !t.shape[d].known() || want[d].value == t.shape[d].value;
  KILN_REQUIRE(same, shape_mismatch, name, " has shape ", sym_shape_to_string(t.shape), ", expected ",
               sym_shape_to_string(want));
  return Status::ok();
}

Status infer_depth_first_conv(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_TRY(post_ops_from_attrs(*ctx.attrs, "dw_").status());
  KILN_TRY(post_ops_from_attrs(*ctx.attrs, "ex_").status());
  const ValueType& x = ctx.input(0);
  KILN_REQUIRE(x.rank_known && x.rank() == 4, shape_mismatch, "X must have rank 4 (N, C, H, W)");
  Dim c = x.shape[1];
  if (ctx.has_input(kExpand)) {
    const ValueType& e = ctx.input(kExpand);
    KILN_REQUIRE(e.rank_known && e.rank() == 4 && e.shape[2] == Dim(1) && e.shape[3] == Dim(1) && e.shape[0].known(),
                 shape_mismatch, "EW must be [C, Cx, 1, 1], got ", sym_shape_to_string(e.shape));
    KILN_TRY(require_shape(ctx, kExpand, "EW", {e.shape[0], c, 1, 1}));
    c = e.shape[0];
    if (ctx.has_input(kExpandBias)) KILN_TRY(require_shape(ctx, kExpandBias, "EB", {c}));
  } else {
    KILN_REQUIRE(!ctx.has_input(kExpandBias), invalid_argument, "EB given without EW");
  }
  const bool project = ctx.has_input(kWeight);
  if (!project) {
    KILN_ASSIGN(act, post_ops_from_attrs(*ctx.attrs));
    KILN_REQUIRE(!ctx.has_input(kBias) && !ctx.has_input(kResidual) && act.empty() && ctx.has_input(kDw),
                 invalid_argument, "without W (no projection) there must be DW and no B, R or activation");
  }
  const ValueType no_projection = ValueType::of(DType::f32, SymShape{c, c, 1, 1});
  const ValueType& w = project ? ctx.input(kWeight) : no_projection;
  KILN_REQUIRE(w.rank_known && w.rank() == 4 && w.shape[2] == Dim(1) && w.shape[3] == Dim(1) && w.shape[0].known(),
               shape_mismatch, "W must be [M, C, 1, 1], got ", sym_shape_to_string(w.shape));
  if (project) KILN_TRY(require_shape(ctx, kWeight, "W", {w.shape[0], c, 1, 1}));
  SymShape out = {x.shape[0], w.shape[0], x.shape[2], x.shape[3]};
  const bool dw = ctx.has_input(kDw);
  if (dw) {
    const ValueType& k = ctx.input(kDw);
    KILN_REQUIRE(k.rank_known && k.rank() == 4 && k.shape[2].known() && k.shape[3].known(), shape_mismatch,
                 "DW must be [C, 1, kh, kw], got ", sym_shape_to_string(k.shape));
    KILN_TRY(require_shape(ctx, kDw, "DW", {c, 1, k.shape[2], k.shape[3]}));
    if (ctx.has_input(kDwBias)) KILN_TRY(require_shape(ctx, kDwBias, "DB", {c}));
    const Shape kshape = {0, 1, k.shape[2].value, k.shape[3].value};
    KILN_ASSIGN(g, read_geometry(*ctx.attrs, &kshape));
    for (int d = 0; d < 2; ++d) {
      const Dim in = x.shape[2 + static_cast<size_t>(d)];
      if (!in.known()) {
        out[2 + static_cast<size_t>(d)] = Dim::unknown();
        continue;
      }
      const int64_t span = in.value + (d == 0 ? g.pt + g.pb : g.pl + g.pr) - (d == 0 ? g.kh : g.kw);
      KILN_REQUIRE(span >= 0, shape_mismatch, "the depthwise kernel is larger than the padded input");
      out[2 + static_cast<size_t>(d)] = Dim(span / (d == 0 ? g.sh : g.sw) + 1);
    }
  } else {
    KILN_REQUIRE(!ctx.has_input(kDwBias), invalid_argument, "DB given without DW");
  }
  if (ctx.has_input(kScale)) KILN_TRY(require_shape(ctx, kScale, "S", {x.shape[0], c, 1, 1}));
  if (ctx.has_input(kBias)) KILN_TRY(require_shape(ctx, kBias, "B", {w.shape[0]}));
  ctx.outputs.assign(1, ValueType::of(DType::f32, std::move(out)));
  if (!project) return Status::ok();
  return ref::infer_epilogue(ctx, kResidual, ctx.outputs[0]);
}

// ex_act(EW * X + EB): [N, C, H, W] from X [N, Cx, H, W].
Result<Tensor> expand(const RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dim(0), cx = x.dim(1), plane = x.dim(2) * x.dim(3);
  const Tensor& ew = ctx.input(kExpand);
  const int64_t c = ew.dim(0);
  const float* wp = ew.data<float>();
  const float* bp = ctx.has_input(kExpandBias) ? ctx.input(kExpandBias).data<float>() : nullptr;
  KILN_ASSIGN(act, post_ops_from_attrs(*ctx.attrs, "ex_"));
  Tensor e = Tensor::zeros(DType::f32, {n, c, x.dim(2), x.dim(3)});
  const float* in = x.data<float>();
  float* out = e.data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < c; ++o)
      for (int64_t p = 0; p < plane; ++p) {
        double acc = bp ? bp[o] : 0.0;
        for (int64_t k = 0; k < cx; ++k) acc += static_cast<double>(wp[o * cx + k]) * in[(b * cx + k) * plane + p];
        out[(b * c + o) * plane + p] = activation_apply(act, static_cast<float>(acc));
      }
  return e;
}

Status run_depth_first_conv(RunContext& ctx) {
  Tensor expanded;
  if (ctx.has_input(kExpand)) {
    KILN_ASSIGN(e, expand(ctx));
    expanded = std::move(e);
  }
  const Tensor& x = ctx.has_input(kExpand) ? expanded : ctx.input(0);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  Tensor& y = ctx.output(0);
  const int64_t m = y.dim(1), oh = y.dim(2), ow = y.dim(3);
  // Stage 1: the depthwise convolution (or X itself), then the scale: t [N, C, oh, ow].
  Tensor t = Tensor::zeros(DType::f32, {n, c, oh, ow});
  const float* in = x.data<float>();
  float* tp = t.data<float>();
  if (ctx.has_input(kDw)) {
    const Shape& ks = ctx.input(kDw).shape();
    KILN_ASSIGN(g, read_geometry(*ctx.attrs, &ks));
    KILN_ASSIGN(act, post_ops_from_attrs(*ctx.attrs, "dw_"));
    const float* k = ctx.input(kDw).data<float>();
    const float* kb = ctx.has_input(kDwBias) ? ctx.input(kDwBias).data<float>() : nullptr;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            double acc = kb ? kb[ch] : 0.0;
            for (int64_t u = 0; u < g.kh; ++u)
              for (int64_t v = 0; v < g.kw; ++v) {
                const int64_t ii = i * g.sh - g.pt + u, jj = j * g.sw - g.pl + v;
                if (ii < 0 || ii >= h || jj < 0 || jj >= w) continue;
                acc += static_cast<double>(in[((b * c + ch) * h + ii) * w + jj]) * k[(ch * g.kh + u) * g.kw + v];
              }
            tp[((b * c + ch) * oh + i) * ow + j] = activation_apply(act, static_cast<float>(acc));
          }
  } else {
    std::copy(in, in + x.numel(), tp);
  }
  if (ctx.has_input(kScale)) {
    const float* s = ctx.input(kScale).data<float>();
    for (int64_t p = 0; p < n * c; ++p)
      for (int64_t i = 0; i < oh * ow; ++i) tp[p * oh * ow + i] *= s[p];
  }
  if (!ctx.has_input(kWeight)) {  // no projection: Y is the depthwise stage's result
    std::copy(tp, tp + t.numel(), y.data<float>());
    return Status::ok();
  }
  // Stage 2: the pointwise convolution, then the epilogue.
  const float* wp = ctx.input(kWeight).data<float>();
  const float* bp = ctx.has_input(kBias) ? ctx.input(kBias).data<float>() : nullptr;
  float* out = y.data<float>();
  const int64_t plane = oh * ow;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t p = 0; p < plane; ++p) {
        double acc = bp ? bp[o] : 0.0;
        for (int64_t ch = 0; ch < c; ++ch) acc += static_cast<double>(wp[o * c + ch]) * tp[(b * c + ch) * plane + p];
        out[(b * m + o) * plane + p] = static_cast<float>(acc);
      }
  return ref::run_epilogue(ctx, kResidual, y);
}

}  // namespace

// Inputs 1 to 8 are optional, so only X is required by arity; infer checks the combinations.
const OpDef& op_def_DepthFirstConv() {
  static const OpDef def{1, 9, 1, 1, infer_depth_first_conv, run_depth_first_conv};
  return def;
}

}  // namespace kiln

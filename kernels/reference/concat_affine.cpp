// ConcatAffine, float32 (made by the fuse_concat_affine pass, never imported): the channels of
// several tensors joined along axis 1 and scaled and shifted per channel in the same pass, with
// an optional fused activation. It is an inference BatchNormalization of a Concat (DenseNet's
// pre-activation "cat -> norm -> relu"), so the concatenated tensor is never written unscaled.
//   inputs: 0 scale [C], 1 shift [C], 2.. X_i [N, C_i, ...] (at least one; equal dims but axis 1)
//   attributes: activation* (kernels/post_ops.h)
//   Y = act(Concat(X_i, axis=1) * scale[c] + shift[c]), C = sum of C_i.
#include "kernels/post_ops.h"
#include "kernels/reference/common.h"

namespace kiln {
namespace {

constexpr size_t kScale = 0, kShift = 1, kFirstX = 2;

Attrs concat_attrs() {
  Attrs attrs;
  attrs.set("axis", int64_t{1});
  return attrs;
}

Status infer_concat_affine(InferContext& ctx) {
  KILN_REQUIRE(ctx.num_inputs() > kFirstX, invalid_argument, "ConcatAffine needs scale, shift and at least one X");
  KILN_TRY(post_ops_from_attrs(*ctx.attrs).status());
  // The joined shape is Concat's, on axis 1.
  const Attrs attrs = concat_attrs();
  InferContext joined;
  joined.attrs = &attrs;
  for (size_t i = kFirstX; i < ctx.num_inputs(); ++i) {
    KILN_REQUIRE(ctx.has_input(i), invalid_argument, "X input ", i - kFirstX, " is missing");
    KILN_TRY(ref::require_dtype(ctx, i, {DType::f32}));
    KILN_REQUIRE(!ctx.input(i).rank_known || ctx.input(i).rank() >= 2, shape_mismatch, "X input ", i - kFirstX,
                 " must have rank >= 2 (N, C, ...), got shape ", sym_shape_to_string(ctx.input(i).shape));
    joined.inputs.push_back(ctx.inputs[i]);
    joined.values.push_back(nullptr);
  }
  KILN_TRY(op_def(OpKind::Concat).infer(joined));
  const ValueType& y = joined.outputs[0];
  const Dim channels = y.rank_known ? y.shape[1] : Dim::unknown();
  for (size_t i : {kScale, kShift}) {
    const char* name = i == kScale ? "scale" : "shift";
    KILN_REQUIRE(ctx.has_input(i), invalid_argument, name, " is missing");
    KILN_TRY(ref::require_dtype(ctx, i, {DType::f32}));
    const ValueType& t = ctx.input(i);
    if (!t.rank_known) continue;
    KILN_REQUIRE(t.rank() == 1, shape_mismatch, name, " must be 1-D, got shape ", sym_shape_to_string(t.shape));
    KILN_REQUIRE(!t.shape[0].known() || !channels.known() || t.shape[0].value == channels.value, shape_mismatch,
                 name, " has ", t.shape[0].value, " elements but the joined inputs have ", channels.value, " channels");
  }
  ctx.outputs = {y};
  return Status::ok();
}

Status run_concat_affine(RunContext& ctx) {
  KILN_ASSIGN(post, post_ops_from_attrs(*ctx.attrs));
  const Attrs attrs = concat_attrs();
  RunContext joined;
  joined.attrs = &attrs;
  joined.inputs.assign(ctx.inputs.begin() + kFirstX, ctx.inputs.end());
  joined.outputs = {&ctx.output(0)};
  KILN_TRY(op_def(OpKind::Concat).run(joined));
  Tensor& y = ctx.output(0);
  const int64_t n = y.dim(0), c = y.dim(1), spatial = y.numel() / std::max<int64_t>(1, n * c);
  const float* scale = ctx.input(kScale).data<float>();
  const float* shift = ctx.input(kShift).data<float>();
  float* out = y.data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      float* row = out + (b * c + ch) * spatial;
      for (int64_t i = 0; i < spatial; ++i) row[i] = activation_apply(post, row[i] * scale[ch] + shift[ch]);
    }
  return Status::ok();
}

}  // namespace

const OpDef& op_def_ConcatAffine() {
  static const OpDef def{3, -1, 1, 1, infer_concat_affine, run_concat_affine};
  return def;
}

}  // namespace kiln

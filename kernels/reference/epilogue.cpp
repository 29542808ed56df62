#include "kernels/reference/epilogue.h"

#include "kernels/post_ops.h"
#include "kernels/precision.h"

namespace kiln::ref {

Status infer_epilogue(const InferContext& ctx, size_t residual_index, const ValueType& output) {
  KILN_TRY(post_ops_from_attrs(*ctx.attrs).status());
  KILN_TRY(precision_from_attrs(*ctx.attrs).status());  // the fast kernels' precision (ignored here)
  if (!ctx.has_input(residual_index)) return Status::ok();
  const ValueType& r = ctx.input(residual_index);
  KILN_REQUIRE(r.dtype == output.dtype, invalid_argument, "residual input has dtype ", dtype_name(r.dtype),
               " but the output is ", dtype_name(output.dtype));
  if (!r.rank_known || !output.rank_known) return Status::ok();
  bool same = r.rank() == output.rank();
  for (size_t d = 0; same && d < r.shape.size(); ++d)
    same = !r.shape[d].known() || !output.shape[d].known() || r.shape[d].value == output.shape[d].value;
  KILN_REQUIRE(same, shape_mismatch, "residual input has shape ", sym_shape_to_string(r.shape), " but the output has ",
               sym_shape_to_string(output.shape));
  return Status::ok();
}

Status run_epilogue(const RunContext& ctx, size_t residual_index, Tensor& y) {
  KILN_ASSIGN(post, post_ops_from_attrs(*ctx.attrs));
  const bool residual = ctx.has_input(residual_index);
  if (post.empty() && !residual) return Status::ok();
  KILN_REQUIRE(y.dtype() == DType::f32, unsupported, "fused epilogues are float32 only");
  float* out = y.data<float>();
  const float* add = residual ? ctx.input(residual_index).data<float>() : nullptr;
  if (residual)
    KILN_REQUIRE(ctx.input(residual_index).shape() == y.shape(), shape_mismatch, "residual input has shape ",
                 shape_to_string(ctx.input(residual_index).shape()), " but the output has ", shape_to_string(y.shape()));
  for (int64_t i = 0; i < y.numel(); ++i) {
    const float v = add ? out[i] + add[i] : out[i];
    out[i] = activation_apply(post, v);
  }
  return Status::ok();
}

}  // namespace kiln::ref

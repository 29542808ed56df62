// Expand (numpy broadcast of the input to `shape`) and Tile (the input repeated `repeats[d]`
// times along every dim d). Both are strided copies with zero strides.
#include <algorithm>

#include "kernels/reference/data_util.h"

namespace kiln {
namespace {

using ref::ints_to_string;

// ---- Expand: inputs input, shape (int64) ----

Status infer_expand(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 2));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(shape, ref::data::read_int_input(ctx, 1, "shape"));
  KILN_REQUIRE(shape.present, invalid_argument, "Expand needs the shape input");
  ctx.outputs.clear();
  if (!shape.known) {
    // The output rank is max(input rank, shape length); when both are known, only dims are unknown.
    if (x.rank_known && shape.length >= 0)
      ctx.outputs.push_back(ValueType::of(x.dtype, SymShape(static_cast<size_t>(std::max(x.rank(), shape.length)))));
    else
      ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  for (int64_t v : shape.values)
    KILN_REQUIRE(v >= 0, invalid_argument, "shape ", ints_to_string(shape.values), " has a negative dim");
  SymShape target;
  for (int64_t v : shape.values) target.push_back(Dim(v));
  KILN_TRY(ref::data::check_output_shape(target, "the Expand shape"));
  if (!x.rank_known) {
    ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  auto out = ref::broadcast_shapes(x.shape, target);
  if (!out)
    return make_error(ErrorCode::shape_mismatch, "cannot expand ", sym_shape_to_string(x.shape), " to ",
                      ints_to_string(shape.values));
  KILN_TRY(ref::data::check_output_shape(*out, "the Expand output"));
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(*out)));
  return Status::ok();
}

Status run_expand(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  ref::data::strided_copy(x.dtype(), x.raw(), y.raw(), y.shape(), ref::broadcast_strides(x.shape(), y.shape()));
  return Status::ok();
}

// ---- Tile: inputs input, repeats (int64, one per dim) ----

Status infer_tile(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 2));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(repeats, ref::data::read_int_input(ctx, 1, "repeats"));
  KILN_REQUIRE(repeats.present, invalid_argument, "Tile needs the repeats input");
  ctx.outputs.clear();
  KILN_REQUIRE(!x.rank_known || repeats.length < 0 || repeats.length == x.rank(), invalid_argument, "repeats has ",
               repeats.length, " entries but the input ", sym_shape_to_string(x.shape), " has rank ", x.rank());
  if (!x.rank_known) {
    if (repeats.length >= 0) ctx.outputs.push_back(ValueType::of(x.dtype, SymShape(static_cast<size_t>(repeats.length))));
    else ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  if (!repeats.known) {
    ctx.outputs.push_back(ValueType::of(x.dtype, SymShape(x.shape.size())));
    return Status::ok();
  }
  SymShape out = x.shape;
  for (size_t d = 0; d < out.size(); ++d) {
    const int64_t r = repeats.values[d];
    KILN_REQUIRE(r >= 0, invalid_argument, "repeats ", ints_to_string(repeats.values), " has a negative entry");
    if (r == 0) {
      out[d] = Dim(0);
    } else if (out[d].known()) {
      KILN_ASSIGN(n, ref::data::checked_mul(out[d].value, r, "the Tile output"));
      out[d] = Dim(n);
    } else if (r != 1) {
      out[d] = Dim::unknown();
    }
  }
  KILN_TRY(ref::data::check_output_shape(out, "the Tile output"));
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  return Status::ok();
}

Status run_tile(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  // Output dim d (size r*n) read as [r, n] row-major: the repeat index has stride 0.
  const std::vector<int64_t> in_strides = shape_strides(x.shape());
  Shape view;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < x.shape().size(); ++d) {
    const int64_t n = x.shape()[d];
    view.push_back(n == 0 ? 0 : y.shape()[d] / n);
    view.push_back(n);
    strides.push_back(0);
    strides.push_back(in_strides[d]);
  }
  ref::data::strided_copy(x.dtype(), x.raw(), y.raw(), view, strides);
  return Status::ok();
}

}  // namespace

const OpDef& op_def_Expand() {
  static const OpDef def{2, 2, 1, 1, infer_expand, run_expand};
  return def;
}

const OpDef& op_def_Tile() {
  static const OpDef def{2, 2, 1, 1, infer_tile, run_tile};
  return def;
}

}  // namespace kiln

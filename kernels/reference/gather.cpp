// Gather: out = data indexed along `axis` by `indices` (int32/int64 of any rank, negative
// indices count from the end). Output shape: data[:axis] + indices.shape + data[axis+1:].
#include <cstring>

#include "kernels/reference/data_util.h"

namespace kiln {
namespace {

Status infer_gather(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 2));
  const ValueType& data = ctx.input(0);
  const ValueType& indices = ctx.input(1);
  KILN_REQUIRE(indices.dtype == DType::i64 || indices.dtype == DType::i32, invalid_argument,
               "indices must be int32 or int64, got ", dtype_name(indices.dtype));
  KILN_ASSIGN(axis_attr, ctx.attrs->get_int("axis", 0));
  ctx.outputs.clear();
  if (!data.rank_known || !indices.rank_known) {
    ctx.outputs.push_back(ValueType::unranked(data.dtype));
    return Status::ok();
  }
  const int64_t rank = data.rank();
  KILN_REQUIRE(rank >= 1, invalid_argument, "cannot gather from a scalar");
  KILN_REQUIRE(axis_attr >= -rank && axis_attr < rank, invalid_argument, "axis ", axis_attr,
               " is out of range for data shape ", sym_shape_to_string(data.shape));
  const size_t axis = static_cast<size_t>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  const Dim& dim = data.shape[axis];
  if (const Tensor* idx = ctx.value(1); idx != nullptr && dim.known()) {
    for (int64_t i = 0; i < idx->numel(); ++i) {
      const int64_t v = idx->value_as_int(i);
      KILN_REQUIRE(v >= -dim.value && v < dim.value, invalid_argument, "index ", v, " is out of range for axis ",
                   axis, " of size ", dim.value);
    }
  }
  SymShape out(data.shape.begin(), data.shape.begin() + static_cast<std::ptrdiff_t>(axis));
  out.insert(out.end(), indices.shape.begin(), indices.shape.end());
  out.insert(out.end(), data.shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.shape.end());
  ctx.outputs.push_back(ValueType::of(data.dtype, std::move(out)));
  return Status::ok();
}

Status run_gather(RunContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  Tensor& y = ctx.output(0);
  KILN_ASSIGN(axis_attr, ctx.attrs->get_int("axis", 0));
  const size_t axis = static_cast<size_t>(axis_attr < 0 ? axis_attr + data.rank() : axis_attr);
  const int64_t dim = data.shape()[axis];
  const int64_t outer = ref::data::dims_product(data.shape(), 0, axis);
  const int64_t inner = ref::data::dims_product(data.shape(), axis + 1, data.shape().size());
  const int64_t count = indices.numel();
  const size_t block = static_cast<size_t>(inner) * dtype_size(data.dtype());
  const auto* src = static_cast<const unsigned char*>(data.raw());
  auto* dst = static_cast<unsigned char*>(y.raw());
  for (int64_t k = 0; k < count; ++k) {
    int64_t v = indices.value_as_int(k);
    KILN_REQUIRE(v >= -dim && v < dim, invalid_argument, "index ", v, " is out of range for axis ", axis,
                 " of size ", dim);
    if (v < 0) v += dim;
    if (block == 0) continue;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + static_cast<size_t>(o * count + k) * block, src + static_cast<size_t>(o * dim + v) * block,
                  block);
  }
  return Status::ok();
}

}  // namespace

// Inputs: data, indices. Attribute axis (default 0).
const OpDef& op_def_Gather() {
  static const OpDef def{2, 2, 1, 1, infer_gather, run_gather};
  return def;
}

}  // namespace kiln

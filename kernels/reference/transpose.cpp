// Transpose: output dim i is input dim perm[i]; perm defaults to the reversed dims.
#include "kernels/reference/data_util.h"

namespace kiln {
namespace {

// The permutation for a rank-`rank` input: the attribute, validated, or the reversal.
Result<std::vector<int64_t>> read_perm(const Attrs& attrs, int64_t rank) {
  if (!attrs.has("perm")) {
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
    return perm;
  }
  KILN_ASSIGN(perm, attrs.get_ints("perm"));
  KILN_REQUIRE(static_cast<int64_t>(perm.size()) == rank, invalid_argument, "perm ",
               ref::ints_to_string(perm), " has ", perm.size(), " entries but the input has rank ", rank);
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    KILN_REQUIRE(p >= 0 && p < rank && !seen[static_cast<size_t>(p)], invalid_argument, "perm ",
                 ref::ints_to_string(perm), " is not a permutation of 0..", rank - 1);
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

Status infer_transpose(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 1));
  const ValueType& x = ctx.input(0);
  ctx.outputs.clear();
  if (!x.rank_known) {
    if (ctx.attrs->has("perm")) {
      KILN_ASSIGN(perm, ctx.attrs->get_ints("perm"));
      KILN_ASSIGN(checked, read_perm(*ctx.attrs, static_cast<int64_t>(perm.size())));
      ctx.outputs.push_back(ValueType::of(x.dtype, SymShape(checked.size())));
    } else {
      ctx.outputs.push_back(ValueType::unranked(x.dtype));
    }
    return Status::ok();
  }
  KILN_ASSIGN(perm, read_perm(*ctx.attrs, x.rank()));
  SymShape out;
  for (int64_t p : perm) out.push_back(x.shape[static_cast<size_t>(p)]);
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  return Status::ok();
}

Status run_transpose(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  KILN_ASSIGN(perm, read_perm(*ctx.attrs, x.rank()));
  const std::vector<int64_t> in_strides = shape_strides(x.shape());
  std::vector<int64_t> strides;
  for (int64_t p : perm) strides.push_back(in_strides[static_cast<size_t>(p)]);
  ref::data::strided_copy(x.dtype(), x.raw(), y.raw(), y.shape(), strides);
  return Status::ok();
}

}  // namespace

const OpDef& op_def_Transpose() {
  static const OpDef def{1, 1, 1, 1, infer_transpose, run_transpose};
  return def;
}

}  // namespace kiln

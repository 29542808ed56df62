// Identity and Dropout (inference): output = input. Dropout's optional mask output is all true.
#include <cstring>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

Status run_identity(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.nbytes() != 0) std::memcpy(ctx.output(0).raw(), x.raw(), x.nbytes());
  return Status::ok();
}

Status infer_dropout(InferContext& ctx) {
  if (const Tensor* training = ctx.value(2); training && training->numel() == 1)
    KILN_REQUIRE(training->value_as_int(0) == 0, unsupported,
                 "Dropout with training_mode=true is not supported: kiln runs inference");
  ctx.outputs.assign(1, ctx.input(0));
  ctx.outputs.push_back(ValueType::of(DType::boolean, ctx.input(0).shape));
  ctx.outputs.back().rank_known = ctx.input(0).rank_known;
  return Status::ok();
}

Status run_dropout(RunContext& ctx) {
  KILN_TRY(run_identity(ctx));
  if (ctx.outputs.size() > 1) {
    Tensor& mask = ctx.output(1);
    for (int64_t i = 0; i < mask.numel(); ++i) mask.data<bool>()[i] = true;
  }
  return Status::ok();
}

}  // namespace

const OpDef& op_def_Identity() {
  static const OpDef def{1, 1, 1, 1, ref::infer_same_as_input0, run_identity};
  return def;
}

// Inputs: data, optional ratio, optional training_mode (must be false: kiln does inference).
const OpDef& op_def_Dropout() {
  static const OpDef def{1, 3, 1, 2, infer_dropout, run_dropout};
  return def;
}

}  // namespace kiln

// Reshape, Flatten, Squeeze, Unsqueeze, Identity and inference Dropout on a plain value: the
// output holds the input's bytes unchanged (cpu::ByteViewKernel: in place where the input dies
// here, else one memcpy).
#include "kernels/cpu/byte_view.h"
#include "kernels/cpu/cpu_kernels.h"

namespace kiln {
namespace {

bool is_view_op(OpKind op) {
  return op == OpKind::Reshape || op == OpKind::Flatten || op == OpKind::Squeeze || op == OpKind::Unsqueeze ||
         op == OpKind::Identity || op == OpKind::Dropout;
}

std::optional<std::string> view_supports(const KernelBuild& b) {
  if (!is_view_op(b.op)) return "handles Reshape, Flatten, Squeeze, Unsqueeze, Identity and Dropout only";
  if (b.inputs.empty() || !b.inputs[0].present) return "needs a data input";
  if (!b.inputs[0].layout.plain()) return "the data must be plain (has " + b.inputs[0].layout.describe() + ")";
  // Dropout's optional mask output is not a view of the data.
  if (b.outputs.size() != 1 || !b.outputs[0].present) return "needs exactly one output";
  if (b.outputs[0].dtype != b.inputs[0].dtype || b.outputs[0].bytes() != b.inputs[0].bytes())
    return "the output does not hold the input's bytes";
  if (b.op == OpKind::Dropout && b.inputs.size() > 2 && b.inputs[2].present) {
    const Tensor* training = b.inputs[2].constant;
    if (!training || training->numel() != 1 || training->value_as_int(0) != 0)
      return "Dropout whose training_mode is not a constant false";
  }
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> view_create(const KernelBuild& b) {
  if (auto why = view_supports(b)) return make_error(ErrorCode::unsupported, *why);
  return std::unique_ptr<Kernel>(std::make_unique<cpu::ByteViewKernel>(b.inputs[0].bytes(), Layout{}));
}

}  // namespace

const KernelImpl kCpuView{"cpu.view", view_supports, view_create};

}  // namespace kiln

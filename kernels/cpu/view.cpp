// Reshape, Flatten, Squeeze, Unsqueeze, Identity and inference Dropout on a plain value: the
// output holds the input's bytes unchanged. The kernel offers to run in place, so the engine
// gives the output the input's buffer wherever the input dies here and the step costs nothing;
// otherwise (the input is read later, or is a graph input or a weight) it is one memcpy.
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"

namespace kiln {
namespace {

bool is_view_op(OpKind op) {
  return op == OpKind::Reshape || op == OpKind::Flatten || op == OpKind::Squeeze || op == OpKind::Unsqueeze ||
         op == OpKind::Identity || op == OpKind::Dropout;
}

class ViewKernel final : public Kernel {
 public:
  explicit ViewKernel(size_t bytes) : bytes_(bytes) {}
  std::vector<Layout> output_layouts() const override { return {Layout{}}; }
  int in_place_input() const override { return 0; }
  Status run(const KernelArgs& args) override {
    if (bytes_ && args.outputs[0] != args.inputs[0]) std::memcpy(args.outputs[0], args.inputs[0], bytes_);
    return Status::ok();
  }

 private:
  size_t bytes_;
};

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
  return std::unique_ptr<Kernel>(std::make_unique<ViewKernel>(b.inputs[0].bytes()));
}

}  // namespace

const KernelImpl kCpuView{"cpu.view", view_supports, view_create};

}  // namespace kiln

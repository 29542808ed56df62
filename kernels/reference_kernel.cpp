// The reference kernels behind the fast-path Kernel interface: every op runs somewhere.
#include <algorithm>
#include <cstring>

#include "kernels/registry.h"

namespace kiln {
namespace {

class ReferenceKernel final : public Kernel {
 public:
  explicit ReferenceKernel(const KernelBuild& build) : op_(build.op), attrs_(*build.attrs), threads_(std::max(1, build.threads)) {
    for (const ValueDesc& in : build.inputs) inputs_.push_back(in);
    for (const ValueDesc& out : build.outputs) outputs_.push_back(out);
  }

  std::vector<Layout> output_layouts() const override { return std::vector<Layout>(outputs_.size()); }

  Status run(const KernelArgs& args) override {
    std::vector<Tensor> in(inputs_.size()), out(outputs_.size());
    RunContext ctx;
    ctx.attrs = &attrs_;
    ctx.threads = threads_;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (!inputs_[i].present || args.inputs[i] == nullptr) {
        ctx.inputs.push_back(nullptr);
        continue;
      }
      in[i] = Tensor::borrow(inputs_[i].dtype, inputs_[i].shape, args.inputs[i], nullptr);
      ctx.inputs.push_back(&in[i]);
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      // Reference kernels may accumulate into their outputs: give them zeros, as the executor does.
      std::memset(args.outputs[i], 0, outputs_[i].bytes());
      out[i] = Tensor::borrow(outputs_[i].dtype, outputs_[i].shape, args.outputs[i], nullptr);
      ctx.outputs.push_back(&out[i]);
    }
    return op_def(op_).run(ctx);
  }

 private:
  OpKind op_;
  Attrs attrs_;
  int threads_;
  std::vector<ValueDesc> inputs_;
  std::vector<ValueDesc> outputs_;
};

std::optional<std::string> reference_supports(const KernelBuild& build) {
  for (const ValueDesc& in : build.inputs)
    if (in.present && !in.layout.plain()) return "needs plain layouts";
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> reference_create(const KernelBuild& build) {
  return std::unique_ptr<Kernel>(std::make_unique<ReferenceKernel>(build));
}

}  // namespace

const KernelImpl kReferenceKernel{"reference", reference_supports, reference_create};

}  // namespace kiln

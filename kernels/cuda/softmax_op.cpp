// Softmax / LogSoftmax along one axis (opset 13 semantics: a single axis) on softmax.cu.
#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"

namespace kiln::cuda {
namespace {

Result<int64_t> softmax_axis(const KernelBuild& b) {
  const auto rank = static_cast<int64_t>(b.inputs[0].shape.size());
  KILN_ASSIGN(axis, b.attrs->get_int("axis", -1));
  KILN_REQUIRE(axis >= -rank && axis < rank, invalid_argument, "axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Softmax, OpKind::LogSoftmax}, "Softmax, LogSoftmax")) return no;
  if (auto why = require_one_float_type(b)) return why;
  if (b.inputs[0].shape.empty()) return std::string("needs an input of rank >= 1");
  auto axis = softmax_axis(b);
  if (!axis) return axis.error().message;
  return std::nullopt;
}

class SoftmaxKernel final : public CudaKernel {
 public:
  SoftmaxKernel(const CudaContext& context, FloatType type, bool log, int64_t outer, int64_t axis, int64_t inner)
      : context_(context), type_(type), log_(log), outer_(outer), axis_(axis), inner_(inner) {}
  Status run(const CudaArgs& args) override {
    return cuda_status(launch_softmax(type_, log_, args.inputs[0], args.outputs[0], outer_, axis_, inner_, context_.stream),
                       "launch_softmax");
  }

 private:
  const CudaContext& context_;
  FloatType type_;
  bool log_;
  int64_t outer_, axis_, inner_;
};

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  KILN_ASSIGN(axis, softmax_axis(b));
  const Shape& x = b.inputs[0].shape;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) inner *= x[d];
  return std::unique_ptr<CudaKernel>(std::make_unique<SoftmaxKernel>(context, *float_type_of(b.outputs[0].dtype),
                                                                     b.op == OpKind::LogSoftmax, outer,
                                                                     x[static_cast<size_t>(axis)], inner));
}

}  // namespace

const CudaKernelImpl kCudaSoftmax = {"cuda.softmax", supports, create};

}  // namespace kiln::cuda

// Two-input arithmetic with numpy broadcasting (rank <= 6), resolved at load into per-input
// strides for the binary kernel of elementwise.cu.
#include "kernels/cuda/broadcast_shape.h"
#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"

namespace kiln::cuda {
namespace {

BinaryOp binary_op_of(OpKind op) {
  switch (op) {
    case OpKind::Sub: return BinaryOp::sub;
    case OpKind::Mul: return BinaryOp::mul;
    case OpKind::Div: return BinaryOp::div;
    case OpKind::Max: return BinaryOp::max;
    case OpKind::Min: return BinaryOp::min;
    default: return BinaryOp::add;  // Add and Sum
  }
}

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min, OpKind::Sum},
                        "Add, Sub, Mul, Div, Max, Min, Sum"))
    return no;
  if (b.inputs.size() != 2) return std::string("needs exactly two inputs");
  if (auto why = require_one_float_type(b)) return why;
  if (b.outputs[0].shape.size() > static_cast<size_t>(kMaxBroadcastRank)) return std::string("needs rank <= 6");
  return std::nullopt;
}

class BinaryKernel final : public CudaKernel {
 public:
  BinaryKernel(const CudaContext& context, FloatType type, BinaryOp op, BroadcastShape shape, bool a_same_shape)
      : context_(context), type_(type), op_(op), shape_(shape), a_same_shape_(a_same_shape) {}
  // Output 0 may take A's buffer when A has the output's shape (each element is read before it is written).
  int in_place_input() const override { return a_same_shape_ ? 0 : -1; }
  Status run(const CudaArgs& args) override {
    return cuda_status(launch_binary(type_, op_, args.inputs[0], args.inputs[1], args.outputs[0], shape_, context_.stream),
                       "launch_binary");
  }

 private:
  const CudaContext& context_;
  FloatType type_;
  BinaryOp op_;
  BroadcastShape shape_;
  bool a_same_shape_;
};

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  const Shape& out = b.outputs[0].shape;
  const BroadcastShape shape = broadcast_shape(b.inputs[0].shape, b.inputs[1].shape, out);
  return std::unique_ptr<CudaKernel>(std::make_unique<BinaryKernel>(context, *float_type_of(b.outputs[0].dtype), binary_op_of(b.op),
                                                                    shape, b.inputs[0].shape == out));
}

}  // namespace

const CudaKernelImpl kCudaBinary = {"cuda.binary", supports, create};

}  // namespace kiln::cuda

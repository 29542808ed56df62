// Standalone activation nodes (those post_ops.h can express) on the activation kernel of
// elementwise.cu. Parameters are read once at load: attributes, and Clip's constant bounds.
#include <cmath>

#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"

namespace kiln::cuda {
namespace {

Result<ActivationParams> activation_of(const KernelBuild& b) {
  ActivationParams p;
  switch (b.op) {
    case OpKind::Relu: p.kind = DeviceActivation::relu; return p;
    case OpKind::Sigmoid: p.kind = DeviceActivation::sigmoid; return p;
    case OpKind::Tanh: p.kind = DeviceActivation::tanh; return p;
    case OpKind::HardSwish: p.kind = DeviceActivation::hard_swish; return p;
    case OpKind::Erf: p.kind = DeviceActivation::erf; return p;
    case OpKind::LeakyRelu: {
      KILN_ASSIGN(alpha, b.attrs->get_float("alpha", 0.01f));
      return ActivationParams{DeviceActivation::leaky_relu, alpha, 0.0f};
    }
    case OpKind::Elu: {
      KILN_ASSIGN(alpha, b.attrs->get_float("alpha", 1.0f));
      return ActivationParams{DeviceActivation::elu, alpha, 0.0f};
    }
    case OpKind::HardSigmoid: {
      KILN_ASSIGN(alpha, b.attrs->get_float("alpha", 0.2f));
      KILN_ASSIGN(beta, b.attrs->get_float("beta", 0.5f));
      return ActivationParams{DeviceActivation::hard_sigmoid, alpha, beta};
    }
    case OpKind::Clip: {
      p = {DeviceActivation::clip, -INFINITY, INFINITY};
      for (size_t i = 1; i < 3 && i < b.inputs.size(); ++i) {
        if (!b.inputs[i].present) continue;
        const Tensor* bound = b.inputs[i].constant;
        KILN_REQUIRE(bound && bound->numel() == 1, unsupported, "needs constant scalar Clip bounds");
        (i == 1 ? p.alpha : p.beta) = static_cast<float>(bound->value_as_double(0));
      }
      return p;
    }
    default: return make_error(ErrorCode::unsupported, "not an activation");
  }
}

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Relu, OpKind::Sigmoid, OpKind::Tanh, OpKind::HardSwish, OpKind::LeakyRelu, OpKind::Elu,
                            OpKind::HardSigmoid, OpKind::Clip, OpKind::Erf},
                        "Relu, Sigmoid, Tanh, HardSwish, LeakyRelu, Elu, HardSigmoid, Clip, Erf"))
    return no;
  if (auto why = require_one_float_type(b)) return why;
  auto act = activation_of(b);
  if (!act) return act.error().message;
  return std::nullopt;
}

class ActivationKernel final : public CudaKernel {
 public:
  ActivationKernel(const CudaContext& context, FloatType type, ActivationParams act, int64_t n)
      : context_(context), type_(type), act_(act), n_(n) {}
  int in_place_input() const override { return 0; }
  Status run(const CudaArgs& args) override {
    return cuda_status(launch_activation(type_, act_, args.inputs[0], args.outputs[0], n_, context_.stream), "launch_activation");
  }

 private:
  const CudaContext& context_;
  FloatType type_;
  ActivationParams act_;
  int64_t n_;
};

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  KILN_ASSIGN(act, activation_of(b));
  return std::unique_ptr<CudaKernel>(
      std::make_unique<ActivationKernel>(context, *float_type_of(b.outputs[0].dtype), act, shape_numel(b.outputs[0].shape)));
}

}  // namespace

const CudaKernelImpl kCudaActivation = {"cuda.activation", supports, create};

}  // namespace kiln::cuda

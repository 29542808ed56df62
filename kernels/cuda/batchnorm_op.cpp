// Inference BatchNormalization (when fold_batchnorm could not fold it): the constants become
// y = x * a[c] + b[c] with a = scale / sqrt(var + eps), b = B - mean * a, computed on the host in
// float at load and kept on the device in float whatever the activation type; a fused activation
// is applied in the same pass.
#include <cmath>
#include <vector>

#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_buffer.h"

namespace kiln::cuda {
namespace {

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::BatchNormalization}, "BatchNormalization")) return no;
  if (auto why = require_one_float_type(b)) return why;
  if (b.inputs.size() != 5) return std::string("needs X, scale, B, mean and var");
  for (size_t i = 1; i < 5; ++i)
    if (!b.inputs[i].constant) return std::string("needs constant scale, B, mean and var");
  if (b.inputs[0].shape.size() < 2) return std::string("needs an input of rank >= 2");
  if (b.outputs.size() > 1) return std::string("runs inference only (one output)");
  auto post = post_ops_from_attrs(*b.attrs);
  if (!post) return post.error().message;
  return std::nullopt;
}

class ChannelAffineKernel final : public CudaKernel {
 public:
  int in_place_input() const override { return 0; }
  Status run(const CudaArgs& args) override {
    return cuda_status(launch_channel_affine(type, args.inputs[0], static_cast<const float*>(scale.data()),
                                             static_cast<const float*>(shift.data()), args.outputs[0], outer, channels, inner,
                                             act, context->stream),
                       "launch_channel_affine");
  }

  const CudaContext* context = nullptr;
  FloatType type = FloatType::f32;
  DeviceBuffer scale, shift;
  int64_t outer = 0, channels = 0, inner = 0;
  ActivationParams act;
};

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  KILN_ASSIGN(eps, b.attrs->get_float("epsilon", 1e-5f));
  KILN_ASSIGN(post, post_ops_from_attrs(*b.attrs));
  const Shape& x = b.inputs[0].shape;
  auto kernel = std::make_unique<ChannelAffineKernel>();
  kernel->context = &context;
  kernel->type = *float_type_of(b.outputs[0].dtype);
  kernel->outer = x[0];
  kernel->channels = x[1];
  kernel->inner = shape_numel(x) / std::max<int64_t>(1, x[0] * x[1]);
  kernel->act = device_activation(post);
  const auto c = static_cast<size_t>(x[1]);
  std::vector<float> a(c), shift(c);
  for (size_t i = 0; i < c; ++i) {
    const auto at = static_cast<int64_t>(i);
    const double scale = b.inputs[1].constant->value_as_double(at), bias = b.inputs[2].constant->value_as_double(at);
    const double mean = b.inputs[3].constant->value_as_double(at), var = b.inputs[4].constant->value_as_double(at);
    a[i] = static_cast<float>(scale / std::sqrt(var + eps));
    shift[i] = static_cast<float>(bias - mean * a[i]);
  }
  KILN_ASSIGN(scale_buffer, DeviceBuffer::allocate(c * sizeof(float), "the scales of node '" + b.node_name + "'"));
  KILN_ASSIGN(shift_buffer, DeviceBuffer::allocate(c * sizeof(float), "the shifts of node '" + b.node_name + "'"));
  KILN_CUDA_TRY(cudaMemcpy(scale_buffer.data(), a.data(), c * sizeof(float), cudaMemcpyHostToDevice));
  KILN_CUDA_TRY(cudaMemcpy(shift_buffer.data(), shift.data(), c * sizeof(float), cudaMemcpyHostToDevice));
  kernel->scale = std::move(scale_buffer);
  kernel->shift = std::move(shift_buffer);
  return std::unique_ptr<CudaKernel>(std::move(kernel));
}

}  // namespace

const CudaKernelImpl kCudaBatchNorm = {"cuda.batchnorm", supports, create};

}  // namespace kiln::cuda

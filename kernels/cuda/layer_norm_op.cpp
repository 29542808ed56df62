// LayerNormalization over the last axis (what fuse_layer_norm makes of a decomposed LayerNorm and
// what exporters write) on layer_norm.cu. Scale and B are constants of shape [C], C the last
// dimension, copied to the device as float32 at load whatever the plan's precision.
// Not here: other axes, broadcast Scale/B, the optional Mean/InvStdDev outputs.
#include <cmath>
#include <vector>

#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_buffer.h"

namespace kiln::cuda {
namespace {

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::LayerNormalization}, "LayerNormalization")) return no;
  if (auto why = require_one_float_type(b)) return why;
  if (b.inputs.size() < 2 || !b.inputs[1].present) return std::string("needs X and Scale");
  const Shape& x = b.inputs[0].shape;
  if (x.empty() || x.back() < 1) return std::string("needs an input of rank >= 1 with a non-empty last axis");
  auto axis = b.attrs->get_int("axis", -1);
  if (!axis) return axis.error().message;
  if (*axis != -1 && *axis != static_cast<int64_t>(x.size()) - 1) return std::string("normalizes the last axis only");
  const char* names[] = {"X", "Scale", "B"};
  for (size_t i = 1; i < b.inputs.size() && i < 3; ++i) {
    if (!b.inputs[i].present) continue;
    if (!b.inputs[i].constant) return std::string("needs a constant ") + names[i];
    if (b.inputs[i].shape != Shape{x.back()}) return std::string(names[i]) + " is not [C] of the last axis";
  }
  auto eps = b.attrs->get_float("epsilon", 1e-5f);
  if (!eps) return eps.error().message;
  if (!std::isfinite(*eps) || *eps < 0) return std::string("needs a finite, non-negative epsilon");
  if (b.outputs.size() != 1) return std::string("computes Y only (no Mean/InvStdDev outputs)");
  return std::nullopt;
}

class LayerNormKernel final : public CudaKernel {
 public:
  Status run(const CudaArgs& args) override {
    return cuda_status(launch_layer_norm(type, args.inputs[0], static_cast<const float*>(scale.data()),
                                         bias.data() ? static_cast<const float*>(bias.data()) : nullptr, args.outputs[0], rows,
                                         cols, epsilon, context->stream),
                       "launch_layer_norm");
  }

  const CudaContext* context = nullptr;
  FloatType type = FloatType::f32;
  DeviceBuffer scale, bias;
  int64_t rows = 0, cols = 0;
  float epsilon = 1e-5f;
};

Result<DeviceBuffer> upload_floats(const Tensor& t, const std::string& what) {
  std::vector<float> values(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(t.value_as_double(static_cast<int64_t>(i)));
  KILN_ASSIGN(buffer, DeviceBuffer::allocate(values.size() * sizeof(float), what));
  KILN_CUDA_TRY(cudaMemcpy(buffer.data(), values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice));
  return buffer;
}

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  KILN_ASSIGN(eps, b.attrs->get_float("epsilon", 1e-5f));
  const Shape& x = b.inputs[0].shape;
  auto kernel = std::make_unique<LayerNormKernel>();
  kernel->context = &context;
  kernel->type = *float_type_of(b.outputs[0].dtype);
  kernel->cols = x.back();
  kernel->rows = shape_numel(x) / kernel->cols;
  kernel->epsilon = eps;
  KILN_ASSIGN(scale, upload_floats(*b.inputs[1].constant, "the scale of node '" + b.node_name + "'"));
  kernel->scale = std::move(scale);
  if (b.inputs.size() > 2 && b.inputs[2].present) {
    KILN_ASSIGN(bias, upload_floats(*b.inputs[2].constant, "the bias of node '" + b.node_name + "'"));
    kernel->bias = std::move(bias);
  }
  return std::unique_ptr<CudaKernel>(std::move(kernel));
}

}  // namespace

const CudaKernelImpl kCudaLayerNorm = {"cuda.layer_norm", supports, create};

}  // namespace kiln::cuda

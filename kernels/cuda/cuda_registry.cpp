#include "kernels/cuda/cuda_registry.h"

#include <array>

#include "kernels/device/mixed_precision.h"

namespace kiln::cuda {
namespace {

// First match wins.
const std::array kKernels = {
    &kCudaDepthwiseConv, &kCudaPointwiseConv, &kCudaConv,       &kCudaGemm,   &kCudaPool,      &kCudaGlobalPool, &kCudaSoftmax,
    &kCudaActivation, &kCudaBinary, &kCudaBatchNorm, &kCudaConcat,     &kCudaView,
    &kCudaStridedCopy, &kCudaReduce,     &kCudaLayerNorm,  &kCudaElementwiseChain,
};

}  // namespace

std::span<const CudaKernelImpl* const> cuda_kernel_registry() { return kKernels; }

static Error no_kernel_error(const KernelBuild& build, const std::vector<std::string>& rejections) {
  // Only the implementations for this op explain anything; the rest say "handles <ops>".
  std::string why;
  for (const std::string& r : rejections)
    if (r.find(": handles ") == std::string::npos) why += (why.empty() ? "" : "; ") + r;
  // kiln's fused ops come from CPU-only passes: the plan was compiled for the CPU.
  const char* advice = op_is_fused(build.op) ? "; compile the model with --device cuda (kiln's fused ops are CPU-only)"
                                             : "; run it with --device cpu";
  return make_error(ErrorCode::unsupported, "no CUDA kernel for node '", build.node_name, "' (", cuda_op_name(build.op),
                    ")", why.empty() ? std::string(": no CUDA implementation of this op yet") : ": " + why, advice);
}

Result<const CudaKernelImpl*> cuda_kernel_find(const KernelBuild& build) {
  std::vector<std::string> rejections;
  for (const CudaKernelImpl* impl : cuda_kernel_registry()) {
    if (auto why_not = impl->supports(build)) rejections.push_back(std::string(impl->name) + ": " + *why_not);
    else return impl;
  }
  return no_kernel_error(build, rejections);
}

Status cuda_plan_check(const Plan& plan, const DeviceEngineOptions& options) {
  KILN_ASSIGN(mixed, mixed_precision(plan, options));
  std::vector<const Tensor*> constant_of(plan.slot_types.size(), nullptr);
  for (const auto& [slot, tensor] : plan.constants)
    if (slot >= 0 && static_cast<size_t>(slot) < constant_of.size()) constant_of[static_cast<size_t>(slot)] = &tensor;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    KILN_ASSIGN(build, cuda_kernel_build(plan, step, constant_of, mixed.kept_step[i] ? DevicePrecision::fp32 : options.precision));
    KILN_TRY(cuda_kernel_find(build).status());
  }
  return Status::ok();
}

Result<CudaKernelChoice> cuda_kernel_select(const KernelBuild& build, const CudaContext& context) {
  CudaKernelChoice choice;
  for (const CudaKernelImpl* impl : cuda_kernel_registry()) {
    if (auto why_not = impl->supports(build)) {
      choice.rejections.push_back(std::string(impl->name) + ": " + *why_not);
      continue;
    }
    auto kernel = impl->create(build, context);
    if (!kernel) {
      choice.rejections.push_back(std::string(impl->name) + ": " + kernel.error().message);
      continue;
    }
    choice.impl = impl;
    choice.kernel = std::move(*kernel);
    return choice;
  }
  return no_kernel_error(build, choice.rejections);
}

}  // namespace kiln::cuda

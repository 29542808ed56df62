#include "kernels/cuda/cuda_registry.h"

#include <array>

namespace kiln::cuda {
namespace {

// First match wins.
const std::array kKernels = {
    &kCudaConv,       &kCudaGemm,   &kCudaPool,      &kCudaGlobalPool, &kCudaSoftmax,
    &kCudaActivation, &kCudaBinary, &kCudaBatchNorm, &kCudaConcat,     &kCudaView,
};

}  // namespace

std::span<const CudaKernelImpl* const> cuda_kernel_registry() { return kKernels; }

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
  // Only the implementations for this op explain anything; the rest say "not <op>".
  std::string why;
  for (const std::string& r : choice.rejections)
    if (r.find(": handles ") == std::string::npos) why += (why.empty() ? "" : "; ") + r;
  return make_error(ErrorCode::unsupported, "no CUDA kernel for node '", build.node_name, "' (", cuda_op_name(build.op),
                    ")", why.empty() ? std::string(": no CUDA implementation of this op yet") : ": " + why,
                    "; compile it for --device cpu, or leave this op out");
}

}  // namespace kiln::cuda

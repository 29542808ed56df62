#include "kernels/registry.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string_view>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/onednn/onednn_kernels.h"

namespace kiln {
namespace {

// First match wins: fast kernels first, the reference kernel last.
const std::array kKernels = {
    &kCpuSparseGemmAvx512, &kCpuSparseGemmPortable,  // only nodes prune_magnitude marked sparse_kernel="csr"
    &kOneDnnConv,    &kOneDnnGemm,      &kOneDnnMatMul,
    &kCpuMaxPoolCodes,  // before oneDNN pooling: its bf16 pool converts every element, its u8/s8 runs at f32 speed, f32 1.6x slower
    &kOneDnnPool,      &kOneDnnEltwise,
    &kCpuChannelScale,  // before oneDNN binary: its [N>1, C, 1, 1] broadcast on NHWC is a reference loop
    &kOneDnnBinary,
    &kOneDnnSoftmax, &kOneDnnBatchNorm,
    &kCpuLayerNormCodes,  // before oneDNN's: a LayerNorm with int8_output writes codes (oneDNN 2.6 writes X's type)
    &kOneDnnLayerNorm,
    &kCpuConcatChannels,  // before oneDNN concat: per-image copies, where oneDNN 2.6 ran ~3 GB/s at batch 1
    &kOneDnnConcat, &kOneDnnLrn,
    &kCpuTransposeView,  // before oneDNN's transpose: NHWC <-> NCHW costs nothing where the reader takes NHWC
    &kOneDnnTranspose,
    &kOneDnnSlice,   &kOneDnnReduce,
    &kCpuView,       &kCpuErf, &kCpuDepthFirstConvAvx512, &kCpuDepthFirstConvAvx2, &kCpuDepthFirstConvPortable,
    &kCpuConcatAffineAvx512, &kCpuConcatAffinePortable, &kCpuChannelShuffle,
    &kCpuElementwiseChainAvx512, &kCpuElementwiseChainAvx2, &kCpuElementwiseChainPortable,
    &kReferenceKernel,
};

// KILN_SKIP_KERNELS: comma-separated implementation names selection passes over (to time a kernel
// against the one after it on the same build, e.g. KILN_SKIP_KERNELS=cpu.max_pool_codes against onednn.pool).
bool skipped_by_env(std::string_view name) {
  const char* env = std::getenv("KILN_SKIP_KERNELS");
  if (env == nullptr) return false;
  const std::string_view list = env;
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    if (list.substr(at, end - at) == name) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

std::span<const KernelImpl* const> kernel_registry() { return kKernels; }

Result<KernelChoice> kernel_select(const KernelBuild& build) {
  KernelChoice choice;
  for (const KernelImpl* impl : kernel_registry()) {
    if (impl != &kReferenceKernel && skipped_by_env(impl->name)) {
      choice.rejections.push_back(std::string(impl->name) + ": skipped (KILN_SKIP_KERNELS)");
      continue;
    }
    if (auto why_not = impl->supports(build)) {
      choice.rejections.push_back(std::string(impl->name) + ": " + *why_not);
      continue;
    }
    auto kernel = impl->create(build);
    if (!kernel) {
      choice.rejections.push_back(std::string(impl->name) + ": " + kernel.error().message);
      continue;
    }
    choice.impl = impl;
    choice.kernel = std::move(*kernel);
    return choice;
  }
  std::string why;
  for (const std::string& r : choice.rejections) why += (why.empty() ? "" : "; ") + r;
  return make_error(ErrorCode::unsupported, "no kernel for node '", build.node_name, "' (", op_name(build.op), "): ", why);
}

}  // namespace kiln

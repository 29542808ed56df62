// The ordered list of kernel implementations and the selection over it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace kiln {

std::span<const KernelImpl* const> kernel_registry();

struct KernelChoice {
  const KernelImpl* impl = nullptr;
  std::unique_ptr<Kernel> kernel;
  std::vector<std::string> rejections;  // "onednn.conv: needs float32" for each impl tried before
};

// The first implementation that supports `build` and creates successfully. Fails only when
// none does (the reference kernel supports every op on plain layouts).
Result<KernelChoice> kernel_select(const KernelBuild& build);

// The reference kernel as a fast-path Kernel (plain layouts only): the fallback and oracle.
extern const KernelImpl kReferenceKernel;

}  // namespace kiln

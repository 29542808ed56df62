// Small helpers the CUDA kernel implementations share for their supports() answers.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>

#include "kernels/cuda/cuda_kernel.h"

namespace kiln::cuda {

// nullopt when build.op is one of `ops`; else "handles <names>" (cuda_kernel_select leaves these
// out of its error, which lists only the reasons of implementations for the node's op).
inline std::optional<std::string> handles(const KernelBuild& build, std::initializer_list<OpKind> ops, const char* names) {
  for (OpKind op : ops)
    if (build.op == op) return std::nullopt;
  return std::string("handles ") + names;
}

// Nodes the CPU passes marked bf16 or int8 (kernels/precision.h) are refused rather than run at
// the engine's precision: the device has one precision per plan (DeviceEngineOptions).
inline std::optional<std::string> require_plain_node_precision(const KernelBuild& build) {
  auto precision = build.attrs->get_string("precision", "fp32");
  if (!precision) return precision.error().message;
  if (*precision != "fp32") return "runs the plan's --cuda-precision, not the node precision " + *precision + " (a CPU pass set it)";
  return std::nullopt;
}

inline size_t device_bytes(const ValueDesc& v) { return static_cast<size_t>(shape_numel(v.shape)) * dtype_size(v.dtype); }

}  // namespace kiln::cuda

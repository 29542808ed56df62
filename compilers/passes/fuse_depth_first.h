// fuse_depth_first: BrainSlug's depth-first fusion for the memory-bound layers around a depthwise
// convolution. A 1x1 Conv (stride 1, no pads, group 1) whose input is computed only for it by
//   - a depthwise Conv (group = channels, one filter per channel; MobileNetV2's dw -> project),
//     itself maybe reading a 1x1 Conv computed only for it (the expansion), or
//   - a Mul by a per-channel [N, C, 1, 1] scale (EfficientNet's squeeze-excite -> project),
//     itself maybe reading such a depthwise Conv,
// becomes one DepthFirstConv node (kernels/reference/depth_first_conv.cpp); a depthwise Conv whose
// result has other readers (EfficientNet's squeeze-excite pools it) takes in its expansion alone.
// The CPU kernel runs the node tile by tile so the intermediates never leave the cache. Only
// where that was measured to pay (fusion_pays, expansion_pays): <= 32 channels beside the
// intermediate, >= 256 KB per image and >= 8 MB over the batch, and only for CPUs with AVX-512
// (PassContext::cpu_isa): the kernel's AVX2 path was measured slower than oneDNN everywhere.
// Requires: topological order, inferred types; runs after fuse_activation and fuse_residual_add
// (the nodes keep their fused activations and the pointwise residual).
// Left alone: values that are graph outputs or have other readers, auto_pad other than NOTSET,
// dilations, non-constant weights, a depthwise Conv or expansion with a residual, broadcasts
// other than [N, C, 1, 1] against [N, C, H, W].
// Guarantees: topological order; results unchanged up to float rounding.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_fuse_depth_first(Graph& graph, const PassContext& ctx);

}  // namespace kiln

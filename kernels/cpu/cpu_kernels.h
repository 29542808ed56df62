// kiln's own CPU kernels, listed in registry.cpp (the depth-first kernel reads oneDNN's NHWC
// layout descriptors, nothing else of it).
#pragma once

#include <string_view>

#include "kernels/kernel.h"

namespace kiln {

extern const KernelImpl kCpuView;  // Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: in place or a copy
extern const KernelImpl kCpuTransposeView;  // Transpose NHWC <-> NCHW as a view: the layout carries the order
extern const KernelImpl kCpuConcatChannels;  // channel Concat of plain or channel-blocked values: per-image copies
extern const KernelImpl kCpuChannelScale;  // Mul by a per-image [N>1, C, 1, 1] scale, NHWC or plain
extern const KernelImpl kCpuMaxPoolCodes;  // MaxPool on f32/bf16/u8/s8 codes in oneDNN NHWC or 8/16-channel blocks
extern const KernelImpl kCpuErf;   // Erf, float32 plain (vector erf on AVX-512)
// DepthFirstConv tile by tile (depthwise rows or scaled rows, then the pointwise GEMM), per ISA
extern const KernelImpl kCpuDepthFirstConvAvx512;
extern const KernelImpl kCpuDepthFirstConvAvx2;
extern const KernelImpl kCpuDepthFirstConvPortable;
extern const KernelImpl kCpuConcatAffineAvx512;  // ConcatAffine, NHWC or plain NCHW float32
extern const KernelImpl kCpuConcatAffinePortable;
// LayerNormalization with int8_output: rows normalized straight into u8/s8 codes for int8 MatMuls
extern const KernelImpl kCpuLayerNormCodes;
// ChannelShuffle: each output channel copied once, NHWC (float32, bfloat16, codes) or plain NCHW
extern const KernelImpl kCpuChannelShuffle;
// ElementwiseChain chunk by chunk (each input read once, the output written once), per ISA
extern const KernelImpl kCpuElementwiseChainAvx512;
extern const KernelImpl kCpuElementwiseChainAvx2;
extern const KernelImpl kCpuElementwiseChainPortable;

// Gemm, MatMul and 1x1 Conv with a pruned constant weight in CSR, only on nodes marked
// sparse_kernel="csr" (prune_magnitude marks those where it measured this faster), per ISA
inline constexpr std::string_view kSparseKernelAttr = "sparse_kernel";
extern const KernelImpl kCpuSparseGemmAvx512;
extern const KernelImpl kCpuSparseGemmPortable;

}  // namespace kiln

// The ordered list of CUDA kernel implementations and the selection over it. There is no
// reference kernel on the device: an op no implementation supports is an error naming the node,
// the op and each implementation's reason (the CPU reference executor stays the oracle that
// verification compares against).
#pragma once

#include <span>

#include "kernels/cuda/cuda_kernel.h"

namespace kiln::cuda {

std::span<const CudaKernelImpl* const> cuda_kernel_registry();

struct CudaKernelChoice {
  const CudaKernelImpl* impl = nullptr;
  std::unique_ptr<CudaKernel> kernel;
  std::vector<std::string> rejections;
};

Result<CudaKernelChoice> cuda_kernel_select(const KernelBuild& build, const CudaContext& context);

// The capability query alone (no device needed): the first implementation whose supports()
// accepts `build`, or the error cuda_kernel_select would give.
Result<const CudaKernelImpl*> cuda_kernel_find(const KernelBuild& build);

// Every step of `plan` has a CUDA kernel at `options.precision` (steps kept in fp32, keep_fp32, at
// fp32); else the first that has none, by name and op, or keep_fp32's error (mixed_precision.h).
Status cuda_plan_check(const Plan& plan, const DeviceEngineOptions& options);

extern const CudaKernelImpl kCudaDepthwiseConv;   // depthwise Conv 2-D (kiln's kernel; + bias, residual, activation fused)
extern const CudaKernelImpl kCudaPointwiseConv;   // 1x1 Conv 2-D (cuBLASLt batched GEMM; + residual, then bias/activation)
extern const CudaKernelImpl kCudaConv;            // Conv 2-D (cuDNN; + bias, residual, ReLU fused; other activations after)
extern const CudaKernelImpl kCudaGemm;            // Gemm and 2-D MatMul (cuBLASLt; bias/ReLU epilogue, residual as C)
extern const CudaKernelImpl kCudaPool;            // MaxPool, AveragePool (2-D)
extern const CudaKernelImpl kCudaGlobalPool;      // GlobalAveragePool, GlobalMaxPool
extern const CudaKernelImpl kCudaSoftmax;         // Softmax, LogSoftmax
extern const CudaKernelImpl kCudaLayerNorm;       // LayerNormalization over the last axis
extern const CudaKernelImpl kCudaElementwiseChain;  // ElementwiseChain (fuse_elementwise_chain's programs)
extern const CudaKernelImpl kCudaActivation;      // Relu, LeakyRelu, Sigmoid, Tanh, Clip, HardSigmoid, HardSwish, Elu, Erf
extern const CudaKernelImpl kCudaBinary;          // Add, Sub, Mul, Div, Max, Min (broadcasting, rank <= 6)
extern const CudaKernelImpl kCudaBatchNorm;       // BatchNormalization (inference; + fused activation)
extern const CudaKernelImpl kCudaConcat;          // Concat (one strided copy per input)
extern const CudaKernelImpl kCudaView;            // Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout
extern const CudaKernelImpl kCudaStridedCopy;     // Transpose, Slice (rank <= 6, any 1-8 byte dtype)
extern const CudaKernelImpl kCudaReduce;          // ReduceMean, ReduceMax over trailing axes

}  // namespace kiln::cuda

// The CUDA kernel contract: the device twin of kernels/kernel.h. A CudaKernelImpl is one
// implementation of some ops on the GPU; cuda_registry.cpp lists them in order and the first
// whose supports() says yes is created, once, when a plan is loaded (descriptors, algorithm
// choice, host-side constants read then). run() only enqueues work on the engine's stream: it
// neither allocates nor synchronizes, so a whole run can be captured as one CUDA Graph.
//
// The KernelBuild is the CPU one with device dtypes: in fp16 (bf16) mode every float32 value is
// float16 (bfloat16) on the device (ValueDesc::dtype says f16 or bf16) while ValueDesc::constant
// still points at the host float32 tensor. Layouts are always plain (NCHW, row-major).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "kernels/cuda/activation_map.h"
#include "kernels/cuda/device_kernels.cuh"
#include "kernels/device/device_backend.h"
#include "kernels/kernel.h"
#include "kernels/post_ops.h"

namespace kiln::cuda {

// What every kernel of one engine shares; lives as long as the engine.
struct CudaContext {
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  DevicePrecision precision = DevicePrecision::fp32;
};

struct CudaArgs {
  std::vector<const void*> inputs;  // device pointers; nullptr for absent inputs
  std::vector<void*> outputs;
  void* workspace = nullptr;        // workspace_bytes() of device memory, shared by all steps
};

class CudaKernel {
 public:
  virtual ~CudaKernel() = default;
  virtual size_t workspace_bytes() const { return 0; }
  // As Kernel::in_place_input: an input whose buffer output 0 may take; run() stays correct
  // whether or not the engine grants it.
  virtual int in_place_input() const { return -1; }
  virtual Status run(const CudaArgs& args) = 0;
};

struct CudaKernelImpl {
  std::string_view name;  // "cuda.conv"
  std::optional<std::string> (*supports)(const KernelBuild& build);
  Result<std::unique_ptr<CudaKernel>> (*create)(const KernelBuild& build, const CudaContext& context);
};

// The KernelBuild of one plan step on the device: plan types with float32 as float16 (bfloat16)
// in fp16 (bf16) mode; `constant_of` maps slots to host constants. Slots must be in range with concrete types.
Result<KernelBuild> cuda_kernel_build(const Plan& plan, const PlanStep& step, const std::vector<const Tensor*>& constant_of,
                                      DevicePrecision precision);

// The dtype a value of `host` dtype has on the device.
DType cuda_device_dtype(DType host, DevicePrecision precision);

// The op's name from ops.def (the plugin carries no op table: that would pull every reference kernel in).
std::string_view cuda_op_name(OpKind op);

// float32, float16 or bfloat16 storage on the device; nullopt for other dtypes.
std::optional<FloatType> float_type_of(DType dtype);

// Checks every present value is a float of one storage type; the reason when not.
std::optional<std::string> require_one_float_type(const KernelBuild& build);

}  // namespace kiln::cuda

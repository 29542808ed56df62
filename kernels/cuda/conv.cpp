// Conv 2-D on cuDNN (NCHW, float32, float16 or bfloat16). The fused residual is written into y first
// (unless the engine already gave y the residual's buffer), then:
//  - with ReLU: cudnnConvolutionBiasActivationForward, y = relu(conv(x) + y + bias), one call
//    (a Conv without bias gets a zero bias here, at load);
//  - otherwise: cudnnConvolutionForward accumulating into y (beta 1 with a residual), then one
//    pass of kiln's bias + activation kernel in place (cudnnAddTensor and a separate activation
//    pass read and wrote y twice). cuDNN fuses the identity activation only with the
//    implicit-precomp-GEMM algorithm; these calls take any algorithm.
// The algorithm is cuDNN's first heuristic choice within the workspace limit. (cuDNN's find, which
// times each algorithm alone, was measured slower end to end on an H100: ResNet-50 fp16 0.82 ->
// 1.55 ms at batch 1 and 7.05 -> 7.95 ms at batch 64, since the fused bias+ReLU call is not what
// it times.)
// Precision: fp32 forbids tensor-op math (FMA only) so results match the CPU within 1e-4; tf32
// allows TF32 tensor cores; fp16 (bf16) stores half (bfloat16) and accumulates in float (cuDNN's
// PSEUDO_HALF / PSEUDO_BFLOAT16 configs). Where cuDNN refuses the fused call for a configuration
// (a not-supported or bad-parameter status on the first run, before anything is enqueued), the
// kernel takes the second path from then on. (Which path bf16 took on the H100, cuDNN 9.19, was
// not recorded: the GPU tests passed with bf16 convolutions + ReLU either way.)
#include <cstring>
#include <vector>

#include "kernels/core/half.h"
#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/owned_handle.h"
#include "kernels/reference/window.h"

namespace kiln::cuda {
namespace {

constexpr size_t kMaxConvWorkspace = size_t{256} << 20;

cudnnDataType_t cudnn_type(DType dtype) {
  if (dtype == DType::f16) return CUDNN_DATA_HALF;
  if (dtype == DType::bf16) return CUDNN_DATA_BFLOAT16;
  return CUDNN_DATA_FLOAT;
}

struct ConvShape {
  int64_t group = 1;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
};

Result<ConvShape> conv_shape(const KernelBuild& b) {
  const Shape& x = b.inputs[0].shape;
  const Shape& w = b.inputs[1].shape;
  const Shape& y = b.outputs[0].shape;
  ConvShape c;
  KILN_ASSIGN(group, b.attrs->get_int("group", 1));
  c.group = group;
  KILN_ASSIGN(wa, ref::read_window_attrs(*b.attrs, 2, false, false));
  int pads[2] = {0, 0};
  for (size_t d = 0; d < 2; ++d) {
    KILN_ASSIGN(dim, ref::window_dim(wa, d, x[d + 2], w[d + 2]));
    KILN_REQUIRE(dim.out == y[d + 2], internal, "output dim ", d, " is ", y[d + 2], ", expected ", dim.out);
    KILN_REQUIRE(dim.pad_begin == dim.pad_end, unsupported, "needs equal begin and end pads (cuDNN), got ", dim.pad_begin,
                 " and ", dim.pad_end, " in spatial dim ", d);
    // cuDNN's size rule (floor) must give the same output as ONNX's rounding did.
    const int64_t ek = wa.effective_kernel(d, w[d + 2]);
    KILN_REQUIRE((x[d + 2] + 2 * dim.pad_begin - ek) / wa.strides[d] + 1 == dim.out, unsupported,
                 "pads do not give the output size by cuDNN's rule");
    pads[d] = static_cast<int>(dim.pad_begin);
  }
  c.pad_h = pads[0];
  c.pad_w = pads[1];
  c.stride_h = static_cast<int>(wa.strides[0]);
  c.stride_w = static_cast<int>(wa.strides[1]);
  c.dilation_h = static_cast<int>(wa.dilations[0]);
  c.dilation_w = static_cast<int>(wa.dilations[1]);
  return c;
}

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Conv}, "Conv")) return no;
  if (b.inputs[0].shape.size() != 4) return std::string("needs a 2-D convolution (NCHW input)");
  if (auto why = require_one_float_type(b)) return why;
  if (auto why = require_plain_node_precision(b)) return why;
  if (!b.inputs[1].constant) return std::string("needs constant weights");
  if (b.inputs.size() > 2 && b.inputs[2].present && !b.inputs[2].constant) return std::string("needs a constant bias");
  auto post = post_ops_from_attrs(*b.attrs);
  if (!post) return post.error().message;
  auto shape = conv_shape(b);
  if (!shape) return shape.error().message;
  return std::nullopt;
}

class CudnnConv final : public CudaKernel {
 public:
  Status init(const KernelBuild& b, const CudaContext& context) {
    context_ = &context;
    const ValueDesc& x = b.inputs[0];
    const ValueDesc& w = b.inputs[1];
    const ValueDesc& y = b.outputs[0];
    const cudnnDataType_t type = cudnn_type(y.dtype);
    KILN_ASSIGN(shape, conv_shape(b));
    KILN_ASSIGN(post, post_ops_from_attrs(*b.attrs));
    fused_relu_ = post.activation == Activation::relu;
    after_ = fused_relu_ ? ActivationParams{} : device_activation(post);
    type_ = *float_type_of(y.dtype);
    residual_ = b.inputs.size() > 3 && b.inputs[3].present;
    has_bias_ = b.inputs.size() > 2 && b.inputs[2].present;
    y_elements_ = shape_numel(y.shape);
    y_batch_ = y.shape[0];
    y_channels_ = y.shape[1];
    y_plane_ = y.shape[2] * y.shape[3];
    y_bytes_ = device_bytes(y);

    auto i = [](int64_t v) { return static_cast<int>(v); };
    KILN_CUDNN_TRY(cudnnCreateTensorDescriptor(&x_desc_.handle));
    KILN_CUDNN_TRY(cudnnSetTensor4dDescriptor(x_desc_.handle, CUDNN_TENSOR_NCHW, type, i(x.shape[0]), i(x.shape[1]), i(x.shape[2]), i(x.shape[3])));
    KILN_CUDNN_TRY(cudnnCreateTensorDescriptor(&y_desc_.handle));
    KILN_CUDNN_TRY(cudnnSetTensor4dDescriptor(y_desc_.handle, CUDNN_TENSOR_NCHW, type, i(y.shape[0]), i(y.shape[1]), i(y.shape[2]), i(y.shape[3])));
    KILN_CUDNN_TRY(cudnnCreateTensorDescriptor(&bias_desc_.handle));
    KILN_CUDNN_TRY(cudnnSetTensor4dDescriptor(bias_desc_.handle, CUDNN_TENSOR_NCHW, type, 1, i(y.shape[1]), 1, 1));
    KILN_CUDNN_TRY(cudnnCreateFilterDescriptor(&w_desc_.handle));
    KILN_CUDNN_TRY(cudnnSetFilter4dDescriptor(w_desc_.handle, type, CUDNN_TENSOR_NCHW, i(w.shape[0]), i(w.shape[1]), i(w.shape[2]), i(w.shape[3])));
    KILN_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&conv_desc_.handle));
    KILN_CUDNN_TRY(cudnnSetConvolution2dDescriptor(conv_desc_.handle, shape.pad_h, shape.pad_w, shape.stride_h, shape.stride_w,
                                                   shape.dilation_h, shape.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    KILN_CUDNN_TRY(cudnnSetConvolutionGroupCount(conv_desc_.handle, i(shape.group)));
    const cudnnMathType_t math = context.precision == DevicePrecision::fp32   ? CUDNN_FMA_MATH
                                 : context.precision == DevicePrecision::tf32 ? CUDNN_DEFAULT_MATH
                                                                              : CUDNN_TENSOR_OP_MATH;
    KILN_CUDNN_TRY(cudnnSetConvolutionMathType(conv_desc_.handle, math));
    KILN_CUDNN_TRY(cudnnCreateActivationDescriptor(&act_desc_.handle));
    KILN_CUDNN_TRY(cudnnSetActivationDescriptor(act_desc_.handle, fused_relu_ ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                                CUDNN_NOT_PROPAGATE_NAN, 0.0));
    KILN_TRY(choose_algorithm(context));
    if (!has_bias_ && fused_relu_) {
      // Zero bias of y's type: cuDNN's fused call always adds one.
      KILN_ASSIGN(zeros, DeviceBuffer::allocate(static_cast<size_t>(y.shape[1]) * dtype_size(y.dtype), "the zero bias of node '" + b.node_name + "'"));
      zero_bias_ = std::move(zeros);
      KILN_CUDA_TRY(cudaMemsetAsync(zero_bias_.data(), 0, zero_bias_.bytes(), context.stream));
    }
    return Status::ok();
  }

  size_t workspace_bytes() const override { return workspace_; }
  int in_place_input() const override { return residual_ ? 3 : -1; }

  Status run(const CudaArgs& args) override {
    void* y = args.outputs[0];
    const void* bias = has_bias_ ? args.inputs[2] : zero_bias_.data();
    if (residual_ && args.inputs[3] != y)
      KILN_CUDA_TRY(cudaMemcpyAsync(y, args.inputs[3], y_bytes_, cudaMemcpyDeviceToDevice, context_->stream));
    const float one = 1.0f, residual_scale = residual_ ? 1.0f : 0.0f;
    if (fused_relu_) {
      const cudnnStatus_t fused = cudnnConvolutionBiasActivationForward(
          context_->cudnn, &one, x_desc_.handle, args.inputs[0], w_desc_.handle, args.inputs[1], conv_desc_.handle, algorithm_,
          args.workspace, workspace_, &residual_scale, y_desc_.handle, y, bias_desc_.handle, bias, act_desc_.handle,
          y_desc_.handle, y);
      // cuDNN 9 reports refusals in ranges: 2000s bad parameters, 3000s not supported.
      const bool refused = fused >= CUDNN_STATUS_BAD_PARAM && fused < CUDNN_STATUS_NOT_SUPPORTED + 1000;
      if (!refused) {
        KILN_CUDNN_TRY(fused);
        return Status::ok();
      }
      // Refused before anything was enqueued: convolution, then bias + ReLU in kiln's pass (a
      // parameter the plain call dislikes too fails there, with its own message).
      fused_relu_ = false;
      after_ = ActivationParams{DeviceActivation::relu};
    }
    KILN_CUDNN_TRY(cudnnConvolutionForward(context_->cudnn, &one, x_desc_.handle, args.inputs[0], w_desc_.handle, args.inputs[1],
                                           conv_desc_.handle, algorithm_, args.workspace, workspace_, &residual_scale,
                                           y_desc_.handle, y));
    if (has_bias_)
      KILN_CUDA_TRY(launch_bias_activation(type_, y, bias, y_batch_, y_channels_, y_plane_, after_, context_->stream));
    else if (after_.kind != DeviceActivation::none)
      KILN_CUDA_TRY(launch_activation(type_, after_, y, y, y_elements_, context_->stream));
    return Status::ok();
  }

 private:
  // cuDNN's heuristic order; each result's math type is set with it (the documented pairing),
  // except that fp32 never takes a tensor-op result (TF32 would miss the 1e-4 bound).
  Status choose_algorithm(const CudaContext& context) {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
    int found = 0;
    KILN_CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(context.cudnn, x_desc_.handle, w_desc_.handle, conv_desc_.handle,
                                                          y_desc_.handle, static_cast<int>(perf.size()), &found, perf.data()));
    bool chosen = false;
    for (int k = 0; k < found && !chosen; ++k) {
      const cudnnConvolutionFwdAlgoPerf_t& p = perf[static_cast<size_t>(k)];
      const bool tensor_op = p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxConvWorkspace) continue;
      if (tensor_op && context.precision == DevicePrecision::fp32) continue;
      algorithm_ = p.algo;
      KILN_CUDNN_TRY(cudnnSetConvolutionMathType(conv_desc_.handle, p.mathType));
      chosen = true;
    }
    KILN_REQUIRE(chosen, unsupported, "cuDNN has no forward algorithm for this convolution within ", kMaxConvWorkspace >> 20,
                 " MiB of workspace");
    KILN_CUDNN_TRY(cudnnGetConvolutionForwardWorkspaceSize(context.cudnn, x_desc_.handle, w_desc_.handle, conv_desc_.handle,
                                                           y_desc_.handle, algorithm_, &workspace_));
    return Status::ok();
  }

  const CudaContext* context_ = nullptr;
  OwnedHandle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor> x_desc_, y_desc_, bias_desc_;
  OwnedHandle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor> w_desc_;
  OwnedHandle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor> conv_desc_;
  OwnedHandle<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor> act_desc_;
  cudnnConvolutionFwdAlgo_t algorithm_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t workspace_ = 0;
  bool fused_relu_ = false, residual_ = false, has_bias_ = false;
  ActivationParams after_;
  FloatType type_ = FloatType::f32;
  int64_t y_elements_ = 0, y_batch_ = 0, y_channels_ = 0, y_plane_ = 0;
  size_t y_bytes_ = 0;
  DeviceBuffer zero_bias_;
};

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  auto kernel = std::make_unique<CudnnConv>();
  KILN_TRY(kernel->init(b, context));
  return std::unique_ptr<CudaKernel>(std::move(kernel));
}

}  // namespace

const CudaKernelImpl kCudaConv = {"cuda.conv", supports, create};

}  // namespace kiln::cuda

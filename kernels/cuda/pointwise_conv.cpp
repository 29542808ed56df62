// 1x1 Conv 2-D (stride 1, no padding, one group) over NCHW as cuBLASLt batched GEMMs, ahead of
// cuDNN in the registry: per image, Y[n] (Cout x HW) = W (Cout x Cin) X[n] (Cin x HW). Column-major,
// that is D (HW x Cout) = X[n] (HW x Cin, ld HW) times W^T (Cin x Cout, ld Cin), batched over
// the images with the weights' batch stride 0 (one call per image where cuBLASLt refuses that):
// no layout change and no copy. The residual is cuBLASLt's C (beta 1); bias and activation follow
// in one pass (cuBLASLt's bias epilogue is per row of D, that is per pixel here, not per channel).
// Why: cuDNN's NCHW half-precision 1x1 convolutions were measured far from memory speed on an
// H100 at batch 64 (EfficientNet-B0's 16 -> 96 expansion on 112x112: 0.45-0.71 ms for 180 MB).
// Precision as gemm.cpp: fp32 without TF32, tf32 with it, fp16/bf16 accumulate in float.
// KILN_CUDA_POINTWISE=0 in the environment leaves these convolutions to cuDNN (to compare the two).
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/owned_handle.h"
#include "kernels/reference/window.h"

namespace kiln::cuda {
namespace {

constexpr size_t kMaxWorkspace = size_t{32} << 20;

struct PointwiseShape {
  int64_t batch = 0, in_channels = 0, out_channels = 0, pixels = 0;
};

Result<PointwiseShape> pointwise_shape(const KernelBuild& b) {
  const Shape& x = b.inputs[0].shape;
  const Shape& w = b.inputs[1].shape;
  const Shape& y = b.outputs[0].shape;
  KILN_REQUIRE(x.size() == 4 && w.size() == 4 && y.size() == 4, unsupported, "needs a 2-D convolution (NCHW input)");
  KILN_REQUIRE(w[2] == 1 && w[3] == 1, unsupported, "needs a 1x1 window");
  KILN_ASSIGN(group, b.attrs->get_int("group", 1));
  KILN_REQUIRE(group == 1, unsupported, "needs one group");
  KILN_ASSIGN(wa, ref::read_window_attrs(*b.attrs, 2, false, false));
  for (size_t d = 0; d < 2; ++d) {
    KILN_ASSIGN(dim, ref::window_dim(wa, d, x[d + 2], 1));
    KILN_REQUIRE(wa.strides[d] == 1 && dim.pad_begin == 0 && dim.pad_end == 0 && dim.out == x[d + 2], unsupported,
                 "needs stride 1 and no padding");
  }
  KILN_REQUIRE(y[0] == x[0] && y[1] == w[0] && y[2] == x[2] && y[3] == x[3] && w[1] == x[1], internal, "output ",
               shape_to_string(y), " does not match the convolution");
  PointwiseShape s{x[0], x[1], w[0], x[2] * x[3]};
  KILN_REQUIRE(s.batch > 0 && s.pixels > 0 && s.batch <= INT32_MAX, unsupported, "needs a non-empty batch below 2^31");
  return s;
}

bool disabled_by_environment() {
  const char* value = std::getenv("KILN_CUDA_POINTWISE");
  return value != nullptr && std::strcmp(value, "0") == 0;
}

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Conv}, "Conv")) return no;
  if (disabled_by_environment()) return std::string("turned off by KILN_CUDA_POINTWISE=0");
  if (auto why = require_one_float_type(b)) return why;
  if (auto why = require_plain_node_precision(b)) return why;
  if (!b.inputs[1].constant) return std::string("needs constant weights");
  auto post = post_ops_from_attrs(*b.attrs);
  if (!post) return post.error().message;
  auto shape = pointwise_shape(b);
  if (!shape) return shape.error().message;
  return std::nullopt;
}

class PointwiseConv final : public CudaKernel {
 public:
  Status init(const KernelBuild& b, const CudaContext& context) {
    context_ = &context;
    KILN_ASSIGN(s, pointwise_shape(b));
    s_ = s;
    KILN_ASSIGN(post, post_ops_from_attrs(*b.attrs));
    act_ = device_activation(post);
    type_ = *float_type_of(b.outputs[0].dtype);
    has_bias_ = b.inputs.size() > 2 && b.inputs[2].present;
    residual_ = b.inputs.size() > 3 && b.inputs[3].present;
    y_bytes_ = device_bytes(b.outputs[0]);
    beta_ = residual_ ? 1.0f : 0.0f;

    const cudaDataType_t data = type_ == FloatType::f16 ? CUDA_R_16F : type_ == FloatType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute = context.precision == DevicePrecision::tf32 && type_ == FloatType::f32
                                            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                            : CUBLAS_COMPUTE_32F;
    KILN_CUBLAS_TRY(cublasLtMatmulDescCreate(&op_.handle, compute, CUDA_R_32F));
    // One batched call; where cuBLASLt refuses the weights' batch stride 0, one call per image.
    if (!choose_algorithm(context, data, s.batch).ok()) {
      KILN_TRY(choose_algorithm(context, data, 1));
      calls_ = s.batch;
    }
    return Status::ok();
  }

  size_t workspace_bytes() const override { return workspace_; }
  int in_place_input() const override { return residual_ ? 3 : -1; }

  Status run(const CudaArgs& args) override {
    void* y = args.outputs[0];
    if (residual_ && args.inputs[3] != y)
      KILN_CUDA_TRY(cudaMemcpyAsync(y, args.inputs[3], y_bytes_, cudaMemcpyDeviceToDevice, context_->stream));
    const float alpha = 1.0f;
    const size_t element = type_ == FloatType::f32 ? 4 : 2;
    const size_t x_image = static_cast<size_t>(s_.in_channels * s_.pixels) * element;
    const size_t y_image = static_cast<size_t>(s_.out_channels * s_.pixels) * element;
    for (int64_t n = 0; n < calls_; ++n) {
      const auto* x = static_cast<const char*>(args.inputs[0]) + static_cast<size_t>(n) * x_image;
      char* out = static_cast<char*>(y) + static_cast<size_t>(n) * y_image;
      KILN_CUBLAS_TRY(cublasLtMatmul(context_->cublaslt, op_.handle, &alpha, x, x_.handle, args.inputs[1], w_.handle, &beta_, out,
                                     y_.handle, out, y_.handle, &algorithm_, args.workspace, workspace_, context_->stream));
    }
    if (has_bias_)
      KILN_CUDA_TRY(launch_bias_activation(type_, y, args.inputs[2], s_.batch, s_.out_channels, s_.pixels, act_, context_->stream));
    else if (act_.kind != DeviceActivation::none)
      KILN_CUDA_TRY(launch_activation(type_, act_, y, y, s_.batch * s_.out_channels * s_.pixels, context_->stream));
    return Status::ok();
  }

 private:
  Status choose_algorithm(const CudaContext& context, cudaDataType_t data, int64_t batch_count) {
    const int32_t batch = static_cast<int32_t>(batch_count);
    auto layout = [&](OwnedHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>& h, int64_t rows, int64_t cols, int64_t ld,
                      int64_t batch_stride) -> Status {
      if (h.handle != nullptr) cublasLtMatrixLayoutDestroy(h.handle);  // from a refused batched try
      h.handle = nullptr;
      KILN_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&h.handle, data, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
      if (batch == 1) return Status::ok();
      KILN_CUBLAS_TRY(cublasLtMatrixLayoutSetAttribute(h.handle, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
      KILN_CUBLAS_TRY(cublasLtMatrixLayoutSetAttribute(h.handle, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                                       sizeof batch_stride));
      return Status::ok();
    };
    KILN_TRY(layout(x_, s_.pixels, s_.in_channels, s_.pixels, s_.in_channels * s_.pixels));
    KILN_TRY(layout(w_, s_.in_channels, s_.out_channels, s_.in_channels, 0));
    KILN_TRY(layout(y_, s_.pixels, s_.out_channels, s_.pixels, s_.out_channels * s_.pixels));
    OwnedHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> preference;
    KILN_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&preference.handle));
    KILN_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(preference.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &kMaxWorkspace, sizeof kMaxWorkspace));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    KILN_CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(context.cublaslt, op_.handle, x_.handle, w_.handle, y_.handle, y_.handle,
                                                   preference.handle, 1, &result, &found));
    KILN_REQUIRE(found > 0, unsupported, "cuBLASLt has no algorithm for ", batch, " x (", s_.pixels, "x", s_.in_channels,
                 " times ", s_.in_channels, "x", s_.out_channels, ")");
    algorithm_ = result.algo;
    workspace_ = result.workspaceSize;
    return Status::ok();
  }

  const CudaContext* context_ = nullptr;
  PointwiseShape s_;
  OwnedHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> op_;
  OwnedHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> x_, w_, y_;
  cublasLtMatmulAlgo_t algorithm_{};
  size_t workspace_ = 0;
  int64_t calls_ = 1;  // cuBLASLt calls a run: 1 batched, or one per image
  float beta_ = 0.0f;
  bool has_bias_ = false, residual_ = false;
  ActivationParams act_;
  FloatType type_ = FloatType::f32;
  size_t y_bytes_ = 0;
};

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  auto kernel = std::make_unique<PointwiseConv>();
  KILN_TRY(kernel->init(b, context));
  return std::unique_ptr<CudaKernel>(std::move(kernel));
}

}  // namespace

const CudaKernelImpl kCudaPointwiseConv = {"cuda.pointwise_conv", supports, create};

}  // namespace kiln::cuda

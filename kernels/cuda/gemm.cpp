// Gemm and MatMul on cuBLASLt. kiln's tensors are row-major, cuBLASLt's column-major, so the
// product is computed transposed: Y^T (N x M) = op(B) op(A), with every operand reinterpreted in
// place (no copies). Gemm's C is a bias when it is a vector of N (the BIAS epilogue, ReLU fused in
// RELU_BIAS) or cuBLASLt's C matrix when it is [M, N] (times beta); a fused residual is the C
// matrix with beta 1. Activations other than ReLU run after, in place. MatMul takes A of any rank
// >= 2 (leading dims folded into M) times a 2-D B, plus kiln's bias (input 2, a vector of N) as Gemm's.
// Precision: fp32 computes with CUBLAS_COMPUTE_32F (no TF32), tf32 with _FAST_TF32, fp16 (bf16)
// stores half (bfloat16) and accumulates in float.
#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_layout.h"
#include "kernels/cuda/owned_handle.h"

namespace kiln::cuda {
namespace {

constexpr size_t kMaxGemmWorkspace = size_t{32} << 20;

struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  int c_input = -1;         // Gemm's C
  bool c_is_bias = false;   // a vector of N
  int residual_input = -1;  // the fused residual
};

Result<GemmShape> gemm_shape(const KernelBuild& b) {
  GemmShape g;
  const Shape& a = b.inputs[0].shape;
  const Shape& w = b.inputs[1].shape;
  auto present = [&](size_t i) { return b.inputs.size() > i && b.inputs[i].present; };
  if (b.op == OpKind::Gemm) {
    KILN_ASSIGN(ta, b.attrs->get_int("transA", 0));
    KILN_ASSIGN(tb, b.attrs->get_int("transB", 0));
    KILN_ASSIGN(alpha, b.attrs->get_float("alpha", 1.0f));
    KILN_ASSIGN(beta, b.attrs->get_float("beta", 1.0f));
    KILN_REQUIRE(a.size() == 2 && w.size() == 2, unsupported, "needs 2-D A and B");
    g.trans_a = ta != 0;
    g.trans_b = tb != 0;
    g.alpha = alpha;
    g.beta = beta;
    g.m = g.trans_a ? a[1] : a[0];
    g.k = g.trans_a ? a[0] : a[1];
    g.n = g.trans_b ? w[0] : w[1];
    if (present(2)) {
      g.c_input = 2;
      const Shape& c = b.inputs[2].shape;
      const int64_t c_elements = shape_numel(c);
      g.c_is_bias = c_elements == g.n && (c.size() == 1 || (c.size() == 2 && c[0] == 1));
      KILN_REQUIRE(g.c_is_bias || (c.size() == 2 && c[0] == g.m && c[1] == g.n), unsupported,
                   "needs C as a vector of N or an [M, N] matrix, got ", shape_to_string(c));
      KILN_REQUIRE(!g.c_is_bias || beta == 1.0f, unsupported, "needs beta 1 with a bias vector C, got ", beta);
    }
    if (present(3)) g.residual_input = 3;
    KILN_REQUIRE(!(g.residual_input >= 0 && g.c_input >= 0 && !g.c_is_bias), unsupported,
                 "cannot take both an [M, N] C and a fused residual");
  } else {
    KILN_REQUIRE(a.size() >= 2 && w.size() == 2, unsupported, "needs A of rank >= 2 and a 2-D B (batched B is not done)");
    g.k = a.back();
    g.m = shape_numel(a) / std::max<int64_t>(g.k, 1);
    g.n = w[1];
    if (present(2)) {  // kiln's bias: a vector of N (fuse_matmul_bias)
      KILN_REQUIRE(shape_numel(b.inputs[2].shape) == g.n, unsupported, "needs the bias as a vector of N = ", g.n,
                   ", got ", shape_to_string(b.inputs[2].shape));
      g.c_input = 2;
      g.c_is_bias = true;
    }
    if (present(3)) g.residual_input = 3;
  }
  KILN_REQUIRE(g.m > 0 && g.n > 0 && g.k > 0, unsupported, "needs non-empty matrices");
  return g;
}

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Gemm, OpKind::MatMul}, "Gemm, MatMul")) return no;
  if (auto why = require_one_float_type(b)) return why;
  if (auto why = require_plain_node_precision(b)) return why;
  auto post = post_ops_from_attrs(*b.attrs);
  if (!post) return post.error().message;
  auto shape = gemm_shape(b);
  if (!shape) return shape.error().message;
  return std::nullopt;
}

class LtGemm final : public CudaKernel {
 public:
  Status init(const KernelBuild& b, const CudaContext& context) {
    context_ = &context;
    KILN_ASSIGN(g, gemm_shape(b));
    g_ = g;
    KILN_ASSIGN(post, post_ops_from_attrs(*b.attrs));
    const bool relu = post.activation == Activation::relu;
    after_ = relu ? ActivationParams{} : device_activation(post);
    type_ = *float_type_of(b.outputs[0].dtype);
    y_elements_ = g.m * g.n;
    y_bytes_ = device_bytes(b.outputs[0]);
    // The C matrix (if any) is read in place of D: the residual, or Gemm's [M, N] C, copied into D first.
    c_matrix_input_ = g.residual_input >= 0 ? g.residual_input : (g.c_input >= 0 && !g.c_is_bias ? g.c_input : -1);
    beta_ = g.residual_input >= 0 ? 1.0f : (c_matrix_input_ >= 0 ? g.beta : 0.0f);

    const cudaDataType_t data = type_ == FloatType::f16 ? CUDA_R_16F : type_ == FloatType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute = context.precision == DevicePrecision::tf32 && type_ == FloatType::f32
                                            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                            : CUBLAS_COMPUTE_32F;
    KILN_CUBLAS_TRY(cublasLtMatmulDescCreate(&op_.handle, compute, CUDA_R_32F));
    // Column-major view (gemm_layout.h): first operand = B (N x K after op), second = A (K x M).
    const GemmLayout layout = gemm_layout(g.m, g.k, g.n, g.trans_a, g.trans_b);
    const cublasOperation_t op_first = layout.first.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = layout.second.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
    KILN_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(op_.handle, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
    KILN_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(op_.handle, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
    has_bias_ = g.c_input >= 0 && g.c_is_bias;
    const cublasLtEpilogue_t epilogue = has_bias_ ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                                  : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    KILN_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(op_.handle, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    auto create = [&](cublasLtMatrixLayout_t* handle, const LtOperand& o) {
      return cublasLtMatrixLayoutCreate(handle, data, static_cast<uint64_t>(o.rows), static_cast<uint64_t>(o.cols), o.ld);
    };
    KILN_CUBLAS_TRY(create(&first_.handle, layout.first));
    KILN_CUBLAS_TRY(create(&second_.handle, layout.second));
    KILN_CUBLAS_TRY(create(&out_.handle, layout.out));

    OwnedHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> preference;
    KILN_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&preference.handle));
    KILN_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(preference.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &kMaxGemmWorkspace, sizeof kMaxGemmWorkspace));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    KILN_CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(context.cublaslt, op_.handle, first_.handle, second_.handle, out_.handle,
                                                   out_.handle, preference.handle, 1, &result, &found));
    KILN_REQUIRE(found > 0, unsupported, "cuBLASLt has no algorithm for ", g.m, "x", g.k, " times ", g.k, "x", g.n);
    algorithm_ = result.algo;
    workspace_ = result.workspaceSize;
    return Status::ok();
  }

  size_t workspace_bytes() const override { return workspace_; }
  int in_place_input() const override { return g_.residual_input; }

  Status run(const CudaArgs& args) override {
    void* y = args.outputs[0];
    if (c_matrix_input_ >= 0 && args.inputs[static_cast<size_t>(c_matrix_input_)] != y)
      KILN_CUDA_TRY(cudaMemcpyAsync(y, args.inputs[static_cast<size_t>(c_matrix_input_)], y_bytes_, cudaMemcpyDeviceToDevice,
                                    context_->stream));
    if (has_bias_) {
      const void* bias = args.inputs[static_cast<size_t>(g_.c_input)];
      KILN_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(op_.handle, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    const float alpha = g_.alpha;
    KILN_CUBLAS_TRY(cublasLtMatmul(context_->cublaslt, op_.handle, &alpha, args.inputs[1], first_.handle, args.inputs[0],
                                   second_.handle, &beta_, y, out_.handle, y, out_.handle, &algorithm_, args.workspace,
                                   workspace_, context_->stream));
    if (after_.kind != DeviceActivation::none)
      KILN_CUDA_TRY(launch_activation(type_, after_, y, y, y_elements_, context_->stream));
    return Status::ok();
  }

 private:
  const CudaContext* context_ = nullptr;
  GemmShape g_;
  OwnedHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> op_;
  OwnedHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> first_, second_, out_;
  cublasLtMatmulAlgo_t algorithm_{};
  size_t workspace_ = 0;
  int c_matrix_input_ = -1;
  float beta_ = 0.0f;
  bool has_bias_ = false;
  ActivationParams after_;
  FloatType type_ = FloatType::f32;
  int64_t y_elements_ = 0;
  size_t y_bytes_ = 0;
};

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  auto kernel = std::make_unique<LtGemm>();
  KILN_TRY(kernel->init(b, context));
  return std::unique_ptr<CudaKernel>(std::move(kernel));
}

}  // namespace

const CudaKernelImpl kCudaGemm = {"cuda.gemm", supports, create};

}  // namespace kiln::cuda

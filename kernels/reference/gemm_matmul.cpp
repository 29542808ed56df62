// Gemm (float32): Y = alpha * A' * B' + beta * C, where A' and B' are A and B transposed when
// transA / transB are set and C (optional) broadcasts unidirectionally to [M, N].
// MatMul (float32, int32, int64): numpy matmul. A 1-D first operand gets a 1 prepended to its
// shape and a 1-D second operand a 1 appended, both removed from the result; the leading
// (batch) dimensions broadcast. kiln's optional input 2 (float32 only) is a bias of N values added
// to every row after the product, in float32 as the Add it replaces (fuse_matmul_bias).
#include <type_traits>
#include <vector>

#include "kernels/reference/common.h"
#include "kernels/reference/epilogue.h"

namespace kiln {
namespace {

// Below this many multiply-adds a product runs on the calling thread (starting a team costs more).
constexpr int64_t kParallelMacs = 1 << 18;

// Y[M,N] (+)= A[M,K] * B[K,N], where A(i,k) = a[i*a_row + k*a_col] and likewise for B;
// accumulates in double for floats and in wrapping int64 for integers. Rows are shared among
// `threads`, each summed in the serial order.
template <typename T>
void matmul_2d(const T* a, int64_t a_row, int64_t a_col, const T* b, int64_t b_row, int64_t b_col, T* y,
               int64_t m, int64_t k, int64_t n, double alpha, int threads) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
  const bool parallel = threads > 1 && m > 1 && m * k * n >= kParallelMacs;
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel)
  for (int64_t i = 0; i < m; ++i) {
    thread_local std::vector<Acc> acc;
    acc.assign(static_cast<size_t>(n), Acc{0});
    for (int64_t p = 0; p < k; ++p) {
      const Acc av = static_cast<Acc>(a[i * a_row + p * a_col]);
      const T* brow = b + p * b_row;
      for (int64_t j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += av * static_cast<Acc>(brow[j * b_col]);
    }
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (std::is_floating_point_v<T>)
        y[i * n + j] = static_cast<T>(alpha * acc[static_cast<size_t>(j)]);
      else
        y[i * n + j] = static_cast<T>(static_cast<int64_t>(acc[static_cast<size_t>(j)]));
    }
  }
}

// ---- Gemm ----

struct GemmAttrs {
  float alpha = 1.0f;
  float beta = 1.0f;
  bool trans_a = false;
  bool trans_b = false;
};

Result<GemmAttrs> read_gemm_attrs(const Attrs& attrs) {
  KILN_ASSIGN(alpha, attrs.get_float("alpha", 1.0f));
  KILN_ASSIGN(beta, attrs.get_float("beta", 1.0f));
  KILN_ASSIGN(trans_a, attrs.get_int("transA", 0));
  KILN_ASSIGN(trans_b, attrs.get_int("transB", 0));
  KILN_REQUIRE(trans_a == 0 || trans_a == 1, invalid_argument, "transA must be 0 or 1, got ", trans_a);
  KILN_REQUIRE(trans_b == 0 || trans_b == 1, invalid_argument, "transB must be 0 or 1, got ", trans_b);
  return GemmAttrs{alpha, beta, trans_a == 1, trans_b == 1};
}

Status infer_gemm(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_TRY(ref::require_dtype(ctx, 1, {DType::f32}));
  const bool has_c = ctx.has_input(2);
  if (has_c) KILN_TRY(ref::require_dtype(ctx, 2, {DType::f32}));
  KILN_ASSIGN(attrs, read_gemm_attrs(*ctx.attrs));
  const ValueType& a = ctx.input(0);
  const ValueType& b = ctx.input(1);
  KILN_REQUIRE(!a.rank_known || a.rank() == 2, shape_mismatch, "A must be 2-D, got shape ",
               sym_shape_to_string(a.shape));
  KILN_REQUIRE(!b.rank_known || b.rank() == 2, shape_mismatch, "B must be 2-D, got shape ",
               sym_shape_to_string(b.shape));
  const Dim m = a.rank_known ? a.shape[attrs.trans_a ? 1 : 0] : Dim::unknown();
  const Dim ka = a.rank_known ? a.shape[attrs.trans_a ? 0 : 1] : Dim::unknown();
  const Dim kb = b.rank_known ? b.shape[attrs.trans_b ? 1 : 0] : Dim::unknown();
  const Dim n = b.rank_known ? b.shape[attrs.trans_b ? 0 : 1] : Dim::unknown();
  KILN_REQUIRE(!ka.known() || !kb.known() || ka.value == kb.value, shape_mismatch, "inner dimensions differ: A",
               attrs.trans_a ? "^T" : "", " has K=", ka.value, " but B", attrs.trans_b ? "^T" : "", " has K=",
               kb.value);
  if (has_c && ctx.input(2).rank_known) {
    const SymShape& c = ctx.input(2).shape;
    KILN_REQUIRE(c.size() <= 2, shape_mismatch, "C must have rank <= 2, got shape ", sym_shape_to_string(c));
    const Dim out[2] = {m, n};
    for (size_t i = 0; i < c.size(); ++i) {
      const Dim& want = out[2 - c.size() + i];
      KILN_REQUIRE(!c[i].known() || c[i].value == 1 || !want.known() || c[i].value == want.value, shape_mismatch,
                   "C of shape ", sym_shape_to_string(c), " does not broadcast to the output shape ",
                   sym_shape_to_string({m, n}));
    }
  }
  ctx.outputs.assign(1, ValueType::of(DType::f32, {m, n}));
  return ref::infer_epilogue(ctx, 3, ctx.outputs[0]);
}

Status run_gemm(RunContext& ctx) {
  KILN_ASSIGN(attrs, read_gemm_attrs(*ctx.attrs));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output(0);
  const int64_t m = y.dim(0), n = y.dim(1);
  const int64_t k = attrs.trans_a ? a.dim(0) : a.dim(1);
  // A is stored [M,K] (or [K,M] when transposed), B [K,N] (or [N,K]).
  const int64_t a_row = attrs.trans_a ? 1 : k, a_col = attrs.trans_a ? m : 1;
  const int64_t b_row = attrs.trans_b ? 1 : n, b_col = attrs.trans_b ? k : 1;
  matmul_2d<float>(a.data<float>(), a_row, a_col, b.data<float>(), b_row, b_col, y.data<float>(), m, k, n,
                   attrs.alpha, ctx.threads);
  if (ctx.has_input(2) && attrs.beta != 0.0f) {
    const Tensor& c = ctx.input(2);
    const std::vector<int64_t> strides[1] = {ref::broadcast_strides(c.shape(), y.shape())};
    const float* cd = c.data<float>();
    float* yd = y.data<float>();
    ref::for_each_broadcast(y.shape(), strides, [&](int64_t i, const int64_t* off) {
      yd[i] = static_cast<float>(static_cast<double>(yd[i]) + static_cast<double>(attrs.beta) * cd[off[0]]);
    });
  }
  return ref::run_epilogue(ctx, 3, y);
}

// ---- MatMul ----

Status infer_matmul(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32, DType::i32, DType::i64}));
  const ValueType& a = ctx.input(0);
  const ValueType& b = ctx.input(1);
  KILN_REQUIRE(a.dtype == b.dtype, invalid_argument, "A has dtype ", dtype_name(a.dtype), " but B has dtype ",
               dtype_name(b.dtype));
  KILN_REQUIRE(!a.rank_known || a.rank() >= 1, shape_mismatch, "A must have rank >= 1, got a scalar");
  KILN_REQUIRE(!b.rank_known || b.rank() >= 1, shape_mismatch, "B must have rank >= 1, got a scalar");
  if (!a.rank_known || !b.rank_known) {
    ctx.outputs.assign(1, ValueType::unranked(a.dtype));
    return ref::infer_epilogue(ctx, 2, ctx.outputs[0]);
  }
  // Promote 1-D operands to matrices.
  SymShape sa = a.shape, sb = b.shape;
  if (sa.size() == 1) sa.insert(sa.begin(), Dim(1));
  if (sb.size() == 1) sb.push_back(Dim(1));
  const Dim& ka = sa[sa.size() - 1];
  const Dim& kb = sb[sb.size() - 2];
  KILN_REQUIRE(!ka.known() || !kb.known() || ka.value == kb.value, shape_mismatch, "cannot multiply A of shape ",
               sym_shape_to_string(a.shape), " by B of shape ", sym_shape_to_string(b.shape),
               ": inner dimensions ", ka.value, " and ", kb.value, " differ");
  const SymShape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  auto batch = ref::broadcast_shapes(batch_a, batch_b);
  if (!batch)
    return make_error(ErrorCode::shape_mismatch, "cannot multiply A of shape ", sym_shape_to_string(a.shape),
                      " by B of shape ", sym_shape_to_string(b.shape), ": batch dimensions do not broadcast");
  SymShape out = batch.value();
  if (a.rank() > 1) out.push_back(sa[sa.size() - 2]);
  if (b.rank() > 1) out.push_back(sb[sb.size() - 1]);
  if (ctx.has_input(2)) {
    KILN_REQUIRE(a.dtype == DType::f32, invalid_argument, "a MatMul bias needs float32 operands, got ",
                 dtype_name(a.dtype));
    KILN_TRY(ref::require_dtype(ctx, 2, {DType::f32}));
    const ValueType& bias = ctx.input(2);
    const Dim& n = sb[sb.size() - 1];
    KILN_REQUIRE(!bias.rank_known || (bias.rank() == 1 && (!bias.shape[0].known() || !n.known() || bias.shape[0].value == n.value)),
                 shape_mismatch, "the bias must be a vector of N = ", n.value, " values, got shape ",
                 sym_shape_to_string(bias.shape));
  }
  ctx.outputs.assign(1, ValueType::of(a.dtype, std::move(out)));
  return ref::infer_epilogue(ctx, 3, ctx.outputs[0]);
}

template <typename T>
void run_matmul_typed(const Tensor& a, const Tensor& b, Tensor& y, int threads) {
  Shape sa = a.shape(), sb = b.shape();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa[sa.size() - 1], n = sb[sb.size() - 1];
  const Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  const Shape batch = ref::broadcast_shapes(batch_a, batch_b).value();
  // Strides in matrices, 0 along broadcast batch dimensions.
  const std::vector<int64_t> strides[2] = {ref::broadcast_strides(batch_a, batch),
                                           ref::broadcast_strides(batch_b, batch)};
  const T* ad = a.data<T>();
  const T* bd = b.data<T>();
  T* yd = y.data<T>();
  ref::for_each_broadcast(batch, strides, [&](int64_t i, const int64_t* off) {
    matmul_2d<T>(ad + off[0] * m * k, k, 1, bd + off[1] * k * n, n, 1, yd + i * m * n, m, k, n, 1.0, threads);
  });
}

Status run_matmul(RunContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output(0);
  switch (a.dtype()) {
    case DType::f32: run_matmul_typed<float>(a, b, y, ctx.threads); break;
    case DType::i32: run_matmul_typed<int32_t>(a, b, y, ctx.threads); break;
    case DType::i64: run_matmul_typed<int64_t>(a, b, y, ctx.threads); break;
    default: return make_error(ErrorCode::unsupported, "MatMul does not support ", dtype_name(a.dtype()));
  }
  if (ctx.has_input(2)) {
    const float* bias = ctx.input(2).data<float>();
    const int64_t n = ctx.input(2).numel();
    float* yd = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) yd[i] += bias[i % n];
  }
  return ref::run_epilogue(ctx, 3, y);
}

}  // namespace

// Inputs: A, B, optional C, optional residual (kernels/post_ops.h).
const OpDef& op_def_Gemm() {
  static const OpDef def{2, 4, 1, 1, infer_gemm, run_gemm};
  return def;
}

// Inputs: A, B, optional bias (kiln's), optional residual (kernels/post_ops.h).
const OpDef& op_def_MatMul() {
  static const OpDef def{2, 4, 1, 1, infer_matmul, run_matmul};
  return def;
}

}  // namespace kiln

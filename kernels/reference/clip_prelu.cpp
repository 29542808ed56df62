// Clip and PRelu: activations with tensor-valued parameters.
//   Clip(X, min?, max?): y = min(max(x, lo), hi) (so hi wins when lo > hi, as numpy.clip); an
//     absent min or max is no bound. min/max hold one value of X's dtype. Numeric dtypes;
//     NaN stays NaN.
//   PRelu(X, slope): y = x < 0 ? slope * x : x, with slope broadcasting unidirectionally to X.
//     float32/float16/bfloat16/int32/int64.
#include <type_traits>
#include <vector>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Values compare and multiply as float for the 16-bit float types, as themselves otherwise.
template <typename T>
auto widen(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return v;
}

// ---- Clip ----

Status infer_clip(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64}));
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const char* what = i == 1 ? "min" : "max";
    const ValueType& t = ctx.input(i);
    KILN_REQUIRE(t.dtype == ctx.input(0).dtype, invalid_argument, what, " has dtype ", dtype_name(t.dtype),
                 " but the input has dtype ", dtype_name(ctx.input(0).dtype));
    if (t.rank_known && sym_shape_is_concrete(t.shape))
      KILN_REQUIRE(shape_numel(sym_shape_concrete(t.shape)) == 1, shape_mismatch, what,
                   " must be a scalar, got shape ", sym_shape_to_string(t.shape));
  }
  return ref::infer_same_as_input0(ctx);
}

Status run_clip(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t n = x.numel();
  return visit_dtype(x.dtype(), [&]<typename T>() -> Status {
    if constexpr (std::is_same_v<T, bool>) {
      return make_error(ErrorCode::internal, "bool input reached the Clip kernel");
    } else {
      const bool has_lo = ctx.has_input(1), has_hi = ctx.has_input(2);
      const auto lo = has_lo ? widen(ctx.input(1).data<T>()[0]) : decltype(widen(T{})){};
      const auto hi = has_hi ? widen(ctx.input(2).data<T>()[0]) : decltype(widen(T{})){};
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        auto v = widen(src[i]);
        if (has_lo && v < lo) v = lo;
        if (has_hi && v > hi) v = hi;
        dst[i] = T(v);
      }
      return Status::ok();
    }
  });
}

// ---- PRelu ----

Status infer_prelu(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64}));
  KILN_REQUIRE(ctx.has_input(1), invalid_argument, "PRelu needs a slope input");
  ValueType aligned_slope;
  KILN_TRY(ref::apply_legacy_axis(ctx, aligned_slope));
  const ValueType& x = ctx.input(0);
  const ValueType& slope = ctx.input(1);
  KILN_REQUIRE(slope.dtype == x.dtype, invalid_argument, "slope has dtype ", dtype_name(slope.dtype),
               " but the input has dtype ", dtype_name(x.dtype));
  if (x.rank_known && slope.rank_known) {
    const std::string why = "slope shape " + sym_shape_to_string(slope.shape) +
                            " does not broadcast to input shape " + sym_shape_to_string(x.shape);
    KILN_REQUIRE(slope.rank() <= x.rank(), shape_mismatch, why);
    const size_t offset = x.shape.size() - slope.shape.size();
    for (size_t d = 0; d < slope.shape.size(); ++d) {
      const Dim& s = slope.shape[d];
      const Dim& xd = x.shape[offset + d];
      KILN_REQUIRE(!s.known() || s.value == 1 || !xd.known() || s.value == xd.value, shape_mismatch, why);
    }
  }
  return ref::infer_same_as_input0(ctx);
}

Status run_prelu(RunContext& ctx) {
  Tensor aligned_slope;
  KILN_TRY(ref::apply_legacy_axis(ctx, aligned_slope));
  const Tensor& x = ctx.input(0);
  const Tensor& slope = ctx.input(1);
  Tensor& y = ctx.output(0);
  const std::vector<int64_t> strides[2] = {ref::broadcast_strides(x.shape(), y.shape()),
                                           ref::broadcast_strides(slope.shape(), y.shape())};
  return visit_dtype(x.dtype(), [&]<typename T>() -> Status {
    if constexpr (std::is_same_v<T, bool>) {
      return make_error(ErrorCode::internal, "bool input reached the PRelu kernel");
    } else {
      const T* xs = x.data<T>();
      const T* ss = slope.data<T>();
      T* dst = y.data<T>();
      ref::for_each_broadcast(y.shape(), strides, [&](int64_t i, const int64_t* off) {
        const auto v = widen(xs[off[0]]);
        if constexpr (std::is_integral_v<T>) {
          // Multiply in uint64 so that overflow wraps instead of being undefined.
          dst[i] = v < 0 ? static_cast<T>(static_cast<uint64_t>(v) * static_cast<uint64_t>(ss[off[1]])) : xs[off[0]];
        } else {
          dst[i] = v < 0 ? T(widen(ss[off[1]]) * v) : xs[off[0]];
        }
      });
      return Status::ok();
    }
  });
}

}  // namespace

// Inputs: X, optional min, optional max.
const OpDef& op_def_Clip() {
  static const OpDef def{1, 3, 1, 1, infer_clip, run_clip};
  return def;
}

// Inputs: X, slope.
const OpDef& op_def_PRelu() {
  static const OpDef def{2, 2, 1, 1, infer_prelu, run_prelu};
  return def;
}

}  // namespace kiln

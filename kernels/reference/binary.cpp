// Elementwise binary and variadic ops with numpy multidirectional broadcasting.
//   Add Sub Mul Div (2 inputs) and Max Min Sum Mean (1..n inputs): every numeric dtype, all
//     inputs of one dtype. Floats compute in float (float16/bfloat16 widen), integers in int64
//     and wrap to the output type like C++/numpy; integer Div truncates toward zero, x / 0 is 0
//     (as numpy) and MIN / -1 wraps. Max/Min propagate NaN. Integer Mean truncates.
//   Pow: base float32/float16/bfloat16/int32/int64, exponent any numeric dtype; the output has
//     the base's dtype. Computed in double; an integer base with a non-negative integer exponent
//     is exact (wrapping); float results stored to an integer type truncate and saturate.
//   Equal: two inputs of one dtype (any, bool included), bool output.
//   Where: condition (bool), X and Y (one dtype, any); three-way broadcast.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
float to_float(T v) {
  return static_cast<float>(v);
}

constexpr std::initializer_list<DType> kNumeric = {DType::f32, DType::f16, DType::bf16, DType::i8,
                                                   DType::u8,  DType::i32, DType::i64};

// The output type of broadcasting the inputs from `first` on together; unranked when any of
// them has an unknown rank (the ranked ones are still checked against each other).
Result<ValueType> broadcast_type(const InferContext& ctx, size_t first, DType out_dtype) {
  SymShape shape;
  bool all_ranked = true;
  for (size_t i = first; i < ctx.num_inputs(); ++i) {
    KILN_REQUIRE(ctx.has_input(i), invalid_argument, "input ", i, " is missing");
    const ValueType& t = ctx.input(i);
    if (!t.rank_known) {
      all_ranked = false;
      continue;
    }
    KILN_ASSIGN(s, ref::broadcast_shapes(shape, t.shape));
    shape = std::move(s);
  }
  return all_ranked ? ValueType::of(out_dtype, std::move(shape)) : ValueType::unranked(out_dtype);
}

// Inputs [first, n) must all have input `first`'s dtype.
Status require_same_dtype(const InferContext& ctx, size_t first) {
  for (size_t i = first; i < ctx.num_inputs(); ++i) {
    KILN_REQUIRE(ctx.has_input(i), invalid_argument, "input ", i, " is missing");
    KILN_REQUIRE(ctx.input(i).dtype == ctx.input(first).dtype, invalid_argument, "input ", i, " has dtype ",
                 dtype_name(ctx.input(i).dtype), " but input ", first, " has dtype ",
                 dtype_name(ctx.input(first).dtype));
  }
  return Status::ok();
}

// ---- Add Sub Mul Div Max Min Sum Mean: a left fold over the inputs ----

enum class Fold { add, sub, mul, div, max, min, mean };

// Accumulator type: int64 for integers, float otherwise.
template <typename T>
using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, float>;

template <typename T>
Acc<T> to_acc(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return static_cast<Acc<T>>(v);
}

template <typename T>
T from_acc(Acc<T> v) {
  if constexpr (is_half_v<T>) return T(v);
  else return static_cast<T>(v);  // integers wrap (modular since C++20)
}

template <Fold F>
int64_t combine_int(int64_t a, int64_t b) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  if constexpr (F == Fold::add || F == Fold::mean) return static_cast<int64_t>(ua + ub);
  else if constexpr (F == Fold::sub) return static_cast<int64_t>(ua - ub);
  else if constexpr (F == Fold::mul) return static_cast<int64_t>(ua * ub);
  else if constexpr (F == Fold::div) return b == 0 ? 0 : b == -1 ? static_cast<int64_t>(0 - ua) : a / b;
  else if constexpr (F == Fold::max) return a < b ? b : a;
  else return b < a ? b : a;
}

template <Fold F>
float combine_float(float a, float b) {
  if constexpr (F == Fold::add || F == Fold::mean) return a + b;
  else if constexpr (F == Fold::sub) return a - b;
  else if constexpr (F == Fold::mul) return a * b;
  else if constexpr (F == Fold::div) return a / b;
  else if constexpr (F == Fold::max) return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : (a < b ? b : a);
  else return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : (b < a ? b : a);
}

Status infer_fold(InferContext& ctx) {
  KILN_REQUIRE(ctx.has_input(0), invalid_argument, "input 0 is missing");
  ValueType aligned_b;
  KILN_TRY(ref::apply_legacy_axis(ctx, aligned_b));
  KILN_TRY(ref::require_dtype(ctx, 0, kNumeric));
  KILN_TRY(require_same_dtype(ctx, 0));
  KILN_ASSIGN(out, broadcast_type(ctx, 0, ctx.input(0).dtype));
  ctx.outputs.assign(1, std::move(out));
  return Status::ok();
}

template <Fold F>
Status run_fold(RunContext& ctx) {
  Tensor aligned_b;
  KILN_TRY(ref::apply_legacy_axis(ctx, aligned_b));
  Tensor& out = ctx.output(0);
  const size_t n = ctx.inputs.size();
  return visit_dtype(out.dtype(), [&]<typename T>() -> Status {
    if constexpr (std::is_same_v<T, bool>) {
      return make_error(ErrorCode::internal, "bool inputs reached the arithmetic kernel");
    } else {
      using A = Acc<T>;
      std::vector<A> acc(static_cast<size_t>(out.numel()));
      for (size_t k = 0; k < n; ++k) {
        const Tensor& in = ctx.input(k);
        const T* src = in.data<T>();
        const std::vector<int64_t> strides[1] = {ref::broadcast_strides(in.shape(), out.shape())};
        ref::for_each_broadcast(out.shape(), strides, [&](int64_t i, const int64_t* off) {
          A& a = acc[static_cast<size_t>(i)];
          const A v = to_acc(src[off[0]]);
          if (k == 0) a = v;
          else if constexpr (std::is_integral_v<A>) a = combine_int<F>(a, v);
          else a = combine_float<F>(a, v);
        });
      }
      T* dst = out.data<T>();
      for (size_t i = 0; i < acc.size(); ++i) {
        A a = acc[i];
        if constexpr (F == Fold::mean) a = a / static_cast<A>(n);
        dst[i] = from_acc<T>(a);
      }
      return Status::ok();
    }
  });
}

// ---- Pow ----

template <typename T>
T saturate_from_double(double d) {
  if constexpr (is_half_v<T>) {
    return T(static_cast<float>(d));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(d);
  } else {
    if (std::isnan(d)) return 0;
    if (d <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (d >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(d);
  }
}

// base^exp for exp >= 0 by repeated squaring, wrapping like integer multiplication.
int64_t int_pow(int64_t base, int64_t exp) {
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (uint64_t e = static_cast<uint64_t>(exp); e != 0; e >>= 1) {
    if (e & 1u) result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

template <typename T, typename E>
T pow_value(T x, E y) {
  if constexpr (std::is_integral_v<T> && std::is_integral_v<E>) {
    if (y >= 0) return static_cast<T>(int_pow(static_cast<int64_t>(x), static_cast<int64_t>(y)));
  }
  double xd, yd;
  if constexpr (is_half_v<T>) xd = static_cast<double>(static_cast<float>(x));
  else xd = static_cast<double>(x);
  if constexpr (is_half_v<E>) yd = static_cast<double>(static_cast<float>(y));
  else yd = static_cast<double>(y);
  return saturate_from_double<T>(std::pow(xd, yd));
}

Status infer_pow(InferContext& ctx) {
  KILN_REQUIRE(ctx.has_input(0) && ctx.has_input(1), invalid_argument, "Pow needs two inputs");
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64}));
  KILN_TRY(ref::require_dtype(ctx, 1, kNumeric));
  KILN_ASSIGN(out, broadcast_type(ctx, 0, ctx.input(0).dtype));
  ctx.outputs.assign(1, std::move(out));
  return Status::ok();
}

Status run_pow(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  Tensor& out = ctx.output(0);
  const std::vector<int64_t> strides[2] = {ref::broadcast_strides(x.shape(), out.shape()),
                                           ref::broadcast_strides(y.shape(), out.shape())};
  return visit_dtype(x.dtype(), [&]<typename T>() -> Status {
    return visit_dtype(y.dtype(), [&]<typename E>() -> Status {
      if constexpr (std::is_same_v<T, bool> || std::is_same_v<E, bool>) {
        return make_error(ErrorCode::internal, "bool inputs reached the Pow kernel");
      } else {
        const T* xs = x.data<T>();
        const E* ys = y.data<E>();
        T* dst = out.data<T>();
        ref::for_each_broadcast(out.shape(), strides,
                                [&](int64_t i, const int64_t* off) { dst[i] = pow_value(xs[off[0]], ys[off[1]]); });
        return Status::ok();
      }
    });
  });
}

// ---- Equal ----

Status infer_equal(InferContext& ctx) {
  KILN_TRY(require_same_dtype(ctx, 0));
  KILN_ASSIGN(out, broadcast_type(ctx, 0, DType::boolean));
  ctx.outputs.assign(1, std::move(out));
  return Status::ok();
}

Status run_equal(RunContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  const std::vector<int64_t> strides[2] = {ref::broadcast_strides(a.shape(), out.shape()),
                                           ref::broadcast_strides(b.shape(), out.shape())};
  bool* dst = out.data<bool>();
  visit_dtype(a.dtype(), [&]<typename T>() {
    const T* as = a.data<T>();
    const T* bs = b.data<T>();
    ref::for_each_broadcast(out.shape(), strides, [&](int64_t i, const int64_t* off) {
      if constexpr (is_half_v<T>) dst[i] = to_float(as[off[0]]) == to_float(bs[off[1]]);
      else dst[i] = as[off[0]] == bs[off[1]];
    });
  });
  return Status::ok();
}

// ---- Where ----

Status infer_where(InferContext& ctx) {
  KILN_REQUIRE(ctx.has_input(0), invalid_argument, "input 0 is missing");
  KILN_REQUIRE(ctx.input(0).dtype == DType::boolean, invalid_argument, "condition must be bool, got ",
               dtype_name(ctx.input(0).dtype));
  KILN_TRY(require_same_dtype(ctx, 1));
  KILN_ASSIGN(out, broadcast_type(ctx, 0, ctx.input(1).dtype));
  ctx.outputs.assign(1, std::move(out));
  return Status::ok();
}

Status run_where(RunContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  Tensor& out = ctx.output(0);
  const std::vector<int64_t> strides[3] = {ref::broadcast_strides(c.shape(), out.shape()),
                                           ref::broadcast_strides(x.shape(), out.shape()),
                                           ref::broadcast_strides(y.shape(), out.shape())};
  const bool* cs = c.data<bool>();
  visit_dtype(x.dtype(), [&]<typename T>() {
    const T* xs = x.data<T>();
    const T* ys = y.data<T>();
    T* dst = out.data<T>();
    ref::for_each_broadcast(out.shape(), strides,
                            [&](int64_t i, const int64_t* off) { dst[i] = cs[off[0]] ? xs[off[1]] : ys[off[2]]; });
  });
  return Status::ok();
}

}  // namespace

#define KILN_FOLD_OP(Name, fold, max_inputs)                                             \
  const OpDef& op_def_##Name() {                                                         \
    static const OpDef def{max_inputs < 0 ? 1 : 2, max_inputs, 1, 1, infer_fold, run_fold<fold>}; \
    return def;                                                                          \
  }
KILN_FOLD_OP(Add, Fold::add, 2)
KILN_FOLD_OP(Sub, Fold::sub, 2)
KILN_FOLD_OP(Mul, Fold::mul, 2)
KILN_FOLD_OP(Div, Fold::div, 2)
KILN_FOLD_OP(Max, Fold::max, -1)
KILN_FOLD_OP(Min, Fold::min, -1)
KILN_FOLD_OP(Sum, Fold::add, -1)
KILN_FOLD_OP(Mean, Fold::mean, -1)
#undef KILN_FOLD_OP

const OpDef& op_def_Pow() {
  static const OpDef def{2, 2, 1, 1, infer_pow, run_pow};
  return def;
}

const OpDef& op_def_Equal() {
  static const OpDef def{2, 2, 1, 1, infer_equal, run_equal};
  return def;
}

// Inputs: condition, X, Y.
const OpDef& op_def_Where() {
  static const OpDef def{3, 3, 1, 1, infer_where, run_where};
  return def;
}

}  // namespace kiln

// Elementwise unary ops and activations, driven by one table: adding an op is one line at the
// bottom of this file. Every op accepts float32/float16/bfloat16 (computed in float); ops that
// also give an integer function (Relu, Neg, Abs) accept int8/uint8/int32/int64 too, computed in
// int64 and wrapped back (so Neg/Abs of the most negative value wrap like two's complement).
// Up to two float attributes per op, each with its ONNX default.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

struct FloatAttr {
  const char* name = nullptr;  // nullptr: unused
  float fallback = 0.0f;
};

struct UnaryOp {
  float (*f)(float x, float a, float b);
  int64_t (*i)(int64_t x);  // nullptr: the op is float-only
  FloatAttr a, b;
};

constexpr bool has_int(const UnaryOp& op) { return op.i != nullptr; }

// NaN-preserving clamp to [0, 1].
float clamp01(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }

int64_t neg_wrap(int64_t x) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); }

struct Params {
  float a, b;
};

Result<Params> read_params(const UnaryOp& op, const Attrs& attrs) {
  Params p{op.a.fallback, op.b.fallback};
  if (op.a.name) {
    KILN_ASSIGN(v, attrs.get_float(op.a.name, op.a.fallback));
    p.a = v;
  }
  if (op.b.name) {
    KILN_ASSIGN(v, attrs.get_float(op.b.name, op.b.fallback));
    p.b = v;
  }
  return p;
}

template <const UnaryOp& Op>
Status infer_unary(InferContext& ctx) {
  if constexpr (has_int(Op)) {
    KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64}));
  } else {
    KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32, DType::f16, DType::bf16}));
  }
  KILN_TRY(read_params(Op, *ctx.attrs).status());
  return ref::infer_same_as_input0(ctx);
}

template <const UnaryOp& Op>
Status run_unary(RunContext& ctx) {
  KILN_ASSIGN(p, read_params(Op, *ctx.attrs));
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t n = x.numel();
  return visit_dtype(x.dtype(), [&]<typename T>() -> Status {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    if constexpr (std::is_same_v<T, bool>) {
      return make_error(ErrorCode::internal, "bool input reached a unary kernel");
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (has_int(Op)) {
        for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<T>(Op.i(static_cast<int64_t>(src[k])));
      } else {
        return make_error(ErrorCode::internal, "integer input reached a float-only unary kernel");
      }
    } else {
      for (int64_t k = 0; k < n; ++k) dst[k] = T(Op.f(static_cast<float>(src[k]), p.a, p.b));
    }
    return Status::ok();
  });
}

// ---- the table ----

constexpr float kSeluAlpha = 1.67326319217681884765625f;
constexpr float kSeluGamma = 1.05070102214813232421875f;

}  // namespace

#define KILN_UNARY_OP(Name, ...)                                                   \
  namespace {                                                                      \
  constexpr UnaryOp k##Name{__VA_ARGS__};                                          \
  }                                                                                \
  const OpDef& op_def_##Name() {                                                   \
    static const OpDef def{1, 1, 1, 1, infer_unary<k##Name>, run_unary<k##Name>}; \
    return def;                                                                    \
  }

// clang-format off
KILN_UNARY_OP(Relu,        [](float x, float, float) { return x < 0.0f ? 0.0f : x; },
                           [](int64_t x) { return x < 0 ? int64_t{0} : x; }, {}, {})
KILN_UNARY_OP(LeakyRelu,   [](float x, float alpha, float) { return x < 0.0f ? alpha * x : x; },
                           nullptr, {"alpha", 0.01f}, {})
KILN_UNARY_OP(Elu,         [](float x, float alpha, float) { return x < 0.0f ? alpha * std::expm1(x) : x; },
                           nullptr, {"alpha", 1.0f}, {})
KILN_UNARY_OP(Selu,        [](float x, float alpha, float gamma) { return x > 0.0f ? gamma * x : gamma * alpha * std::expm1(x); },
                           nullptr, {"alpha", kSeluAlpha}, {"gamma", kSeluGamma})
KILN_UNARY_OP(Sigmoid,     [](float x, float, float) { return x >= 0.0f ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x)); },
                           nullptr, {}, {})
KILN_UNARY_OP(HardSigmoid, [](float x, float alpha, float beta) { return clamp01(alpha * x + beta); },
                           nullptr, {"alpha", 0.2f}, {"beta", 0.5f})
KILN_UNARY_OP(HardSwish,   [](float x, float, float) { return x * clamp01(x / 6.0f + 0.5f); }, nullptr, {}, {})
KILN_UNARY_OP(Tanh,        [](float x, float, float) { return std::tanh(x); }, nullptr, {}, {})
KILN_UNARY_OP(Softplus,    [](float x, float, float) { return x > 0.0f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); },
                           nullptr, {}, {})
KILN_UNARY_OP(Erf,         [](float x, float, float) { return std::erf(x); }, nullptr, {}, {})
KILN_UNARY_OP(Exp,         [](float x, float, float) { return std::exp(x); }, nullptr, {}, {})
KILN_UNARY_OP(Log,         [](float x, float, float) { return std::log(x); }, nullptr, {}, {})
KILN_UNARY_OP(Sqrt,        [](float x, float, float) { return std::sqrt(x); }, nullptr, {}, {})
KILN_UNARY_OP(Reciprocal,  [](float x, float, float) { return 1.0f / x; }, nullptr, {}, {})
KILN_UNARY_OP(Neg,         [](float x, float, float) { return -x; }, neg_wrap, {}, {})
KILN_UNARY_OP(Abs,         [](float x, float, float) { return std::fabs(x); },
                           [](int64_t x) { return x < 0 ? neg_wrap(x) : x; }, {}, {})
// clang-format on
#undef KILN_UNARY_OP

}  // namespace kiln

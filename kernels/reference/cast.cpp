// Cast: converts between any two of kiln's dtypes. `to` is the ONNX TensorProto data type number
// (1 float, 2 uint8, 3 int8, 6 int32, 7 int64, 9 bool, 10 float16, 16 bfloat16).
//   float -> integer truncates toward zero and saturates at the integer type's range (NaN -> 0);
//   integer -> narrower integer wraps (two's complement, as numpy); anything -> bool is x != 0;
//   bool -> anything is 0 or 1; float16/bfloat16 go through float (round to nearest even).
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

std::optional<DType> dtype_from_onnx(int64_t to) {
  switch (to) {
    case 1: return DType::f32;
    case 2: return DType::u8;
    case 3: return DType::i8;
    case 6: return DType::i32;
    case 7: return DType::i64;
    case 9: return DType::boolean;
    case 10: return DType::f16;
    case 16: return DType::bf16;
    default: return std::nullopt;
  }
}

std::string onnx_type_name(int64_t to) {
  switch (to) {
    case 0: return "undefined";
    case 4: return "uint16";
    case 5: return "int16";
    case 8: return "string";
    case 11: return "double";
    case 12: return "uint32";
    case 13: return "uint64";
    case 14: return "complex64";
    case 15: return "complex128";
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    default: return "unknown type";
  }
}

Result<DType> read_to(const Attrs& attrs) {
  KILN_REQUIRE(attrs.has("to"), invalid_argument, "missing attribute 'to'");
  KILN_ASSIGN(to, attrs.get_int("to", 0));
  const std::optional<DType> dt = dtype_from_onnx(to);
  KILN_REQUIRE(dt.has_value(), unsupported, "Cast to ", onnx_type_name(to), " (ONNX type ", to, ") is not supported");
  return *dt;
}

// Converts one value. Floating sources go through float, the rest through int64.
template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_half_v<From>) return static_cast<float>(v) != 0.0f;
    else return v != From{};
  } else if constexpr (is_half_v<From> || std::is_floating_point_v<From>) {
    const float f = static_cast<float>(v);
    if constexpr (is_half_v<To> || std::is_floating_point_v<To>) {
      return To(f);
    } else {
      if (std::isnan(f)) return 0;
      if (f <= static_cast<float>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
      // float(max) of int32/int64 rounds up to 2^31/2^63, itself out of range: >= saturates.
      if (f >= static_cast<float>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
      return static_cast<To>(f);
    }
  } else {  // integer or bool source
    const int64_t i = static_cast<int64_t>(v);
    if constexpr (is_half_v<To>) return To(static_cast<float>(i));
    else return static_cast<To>(i);  // integers wrap (modular since C++20)
  }
}

Status infer_cast(InferContext& ctx) {
  KILN_ASSIGN(to, read_to(*ctx.attrs));
  ValueType out = ctx.input(0);
  out.dtype = to;
  ctx.outputs.assign(1, std::move(out));
  return Status::ok();
}

Status run_cast(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t n = x.numel();
  if (x.dtype() == y.dtype()) {
    if (x.nbytes() != 0) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return Status::ok();
  }
  visit_dtype(x.dtype(), [&]<typename From>() {
    visit_dtype(y.dtype(), [&]<typename To>() {
      const From* src = x.data<From>();
      To* dst = y.data<To>();
      for (int64_t i = 0; i < n; ++i) dst[i] = convert<To>(src[i]);
    });
  });
  return Status::ok();
}

}  // namespace

const OpDef& op_def_Cast() {
  static const OpDef def{1, 1, 1, 1, infer_cast, run_cast};
  return def;
}

}  // namespace kiln

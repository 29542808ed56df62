// QuantizeLinear and DequantizeLinear (ONNX latest-opset semantics, without block quantization):
//   QuantizeLinear(x, scale, zero_point?):   y = saturate(round_half_even(x / scale) + zero_point)
//   DequantizeLinear(x, scale, zero_point?): y = (x - zero_point) * scale
// scale is float32; zero_point (same shape as scale) gives the quantized dtype, uint8 or int8
// (uint8 when absent); DequantizeLinear also reads int32 (no zero point, or 0). Per tensor when
// scale has one element, per axis when it is 1-D with one value along attribute `axis`
// (default 1, negative counts from the end). x / scale is computed in float32, as the ONNX
// reference does; NaN quantizes to the zero point.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

// Where the quantization parameters of element i live: index (i / inner) % channels.
struct AxisLayout {
  int64_t channels = 1;  // 1: per tensor
  int64_t inner = 1;
};

// Validates scale (input 1) and zero point (input 2) against x (input 0); per-axis parameters
// need x's rank and, when known, the dim along axis to match their length.
Status infer_params(const InferContext& ctx, const char* op) {
  KILN_REQUIRE(ctx.has_input(1), invalid_argument, op, " needs a scale input");
  KILN_REQUIRE(ctx.input(1).dtype == DType::f32, unsupported, op, ": scale must be float32, got ",
               dtype_name(ctx.input(1).dtype));
  KILN_ASSIGN(block, ctx.attrs->get_int("block_size", 0));
  KILN_REQUIRE(block == 0, unsupported, op, ": blocked quantization (block_size ", block, ") is not supported");
  KILN_ASSIGN(axis, ctx.attrs->get_int("axis", 1));
  const ValueType& x = ctx.input(0);
  const ValueType& scale = ctx.input(1);
  if (ctx.has_input(2) && scale.rank_known && ctx.input(2).rank_known)
    KILN_REQUIRE(scale.shape == ctx.input(2).shape, shape_mismatch, op, ": zero_point shape ",
                 sym_shape_to_string(ctx.input(2).shape), " differs from scale shape ", sym_shape_to_string(scale.shape));
  if (!scale.rank_known) return Status::ok();
  KILN_REQUIRE(scale.rank() <= 1, unsupported, op, ": scale must be a scalar or 1-D (per axis), got shape ",
               sym_shape_to_string(scale.shape));
  if (scale.rank() == 0 || !x.rank_known) return Status::ok();
  const Dim& n = scale.shape[0];
  if (n.known() && n.value == 1) return Status::ok();  // one value: per tensor
  KILN_ASSIGN(a, ref::normalize_axis(axis, x.rank()));
  const Dim& d = x.shape[static_cast<size_t>(a)];
  KILN_REQUIRE(!n.known() || !d.known() || n.value == d.value, shape_mismatch, op, ": scale has ", n.value,
               " values but axis ", axis, " of input shape ", sym_shape_to_string(x.shape), " has ", d.value);
  return Status::ok();
}

Result<AxisLayout> axis_layout(const RunContext& ctx) {
  AxisLayout layout;
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  if (scale.numel() == 1) return layout;
  KILN_ASSIGN(axis_attr, ctx.attrs->get_int("axis", 1));
  KILN_ASSIGN(axis, ref::normalize_axis(axis_attr, x.rank()));
  layout.channels = x.dim(axis);
  KILN_REQUIRE(scale.numel() == layout.channels, shape_mismatch, "scale has ", scale.numel(),
               " values but axis ", axis_attr, " of input ", x.describe(), " has ", layout.channels);
  for (int64_t d = axis + 1; d < x.rank(); ++d) layout.inner *= x.dim(d);
  return layout;
}

// ---- QuantizeLinear ----

Status infer_quantize(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_TRY(infer_params(ctx, "QuantizeLinear"));
  DType out = DType::u8;
  if (ctx.has_input(2)) {
    out = ctx.input(2).dtype;
    KILN_REQUIRE(out == DType::u8 || out == DType::i8, unsupported, "QuantizeLinear: zero_point must be uint8 or int8, got ",
                 dtype_name(out));
  }
  ValueType y = ctx.input(0);
  y.dtype = out;
  ctx.outputs.assign(1, std::move(y));
  return Status::ok();
}

Status run_quantize(RunContext& ctx) {
  KILN_ASSIGN(layout, axis_layout(ctx));
  const Tensor& x = ctx.input(0);
  const float* scale = ctx.input(1).data<float>();
  Tensor& y = ctx.output(0);
  const int64_t n = x.numel();
  const float* src = x.data<float>();
  return visit_dtype(y.dtype(), [&]<typename Q>() -> Status {
    if constexpr (std::is_same_v<Q, uint8_t> || std::is_same_v<Q, int8_t>) {
      const Q* zp = ctx.has_input(2) ? ctx.input(2).data<Q>() : nullptr;
      Q* dst = y.data<Q>();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = (i / layout.inner) % layout.channels;
        const float q = std::nearbyint(src[i] / scale[c]);  // the default rounding mode: half to even
        const float z = zp ? static_cast<float>(zp[c]) : 0.0f;
        const float v = std::isnan(q) ? z : std::clamp(q + z, static_cast<float>(std::numeric_limits<Q>::min()),
                                                       static_cast<float>(std::numeric_limits<Q>::max()));
        dst[i] = static_cast<Q>(v);
      }
      return Status::ok();
    } else {
      return make_error(ErrorCode::internal, "QuantizeLinear output ", y.describe(), " reached the kernel");
    }
  });
}

// ---- DequantizeLinear ----

Status infer_dequantize(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::u8, DType::i8, DType::i32}));
  KILN_TRY(infer_params(ctx, "DequantizeLinear"));
  if (ctx.has_input(2))
    KILN_REQUIRE(ctx.input(2).dtype == ctx.input(0).dtype, invalid_argument, "DequantizeLinear: zero_point has dtype ",
                 dtype_name(ctx.input(2).dtype), " but the input has dtype ", dtype_name(ctx.input(0).dtype));
  ValueType y = ctx.input(0);
  y.dtype = DType::f32;
  ctx.outputs.assign(1, std::move(y));
  return Status::ok();
}

Status run_dequantize(RunContext& ctx) {
  KILN_ASSIGN(layout, axis_layout(ctx));
  const Tensor& x = ctx.input(0);
  const float* scale = ctx.input(1).data<float>();
  float* dst = ctx.output(0).data<float>();
  const int64_t n = x.numel();
  return visit_dtype(x.dtype(), [&]<typename Q>() -> Status {
    if constexpr (std::is_same_v<Q, uint8_t> || std::is_same_v<Q, int8_t> || std::is_same_v<Q, int32_t>) {
      const Q* src = x.data<Q>();
      const Q* zp = ctx.has_input(2) ? ctx.input(2).data<Q>() : nullptr;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = (i / layout.inner) % layout.channels;
        // int64 difference: int32 x minus an int32 zero point may leave int32's range.
        const int64_t d = static_cast<int64_t>(src[i]) - (zp ? static_cast<int64_t>(zp[c]) : 0);
        dst[i] = static_cast<float>(d) * scale[c];
      }
      return Status::ok();
    } else {
      return make_error(ErrorCode::internal, "DequantizeLinear input ", x.describe(), " reached the kernel");
    }
  });
}

}  // namespace

// Inputs: x (float32), y_scale, optional y_zero_point. Attribute axis (default 1).
const OpDef& op_def_QuantizeLinear() {
  static const OpDef def{2, 3, 1, 1, infer_quantize, run_quantize};
  return def;
}

// Inputs: x (uint8/int8/int32), x_scale, optional x_zero_point. Attribute axis (default 1).
const OpDef& op_def_DequantizeLinear() {
  static const OpDef def{2, 3, 1, 1, infer_dequantize, run_dequantize};
  return def;
}

}  // namespace kiln

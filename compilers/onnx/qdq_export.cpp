#include "compilers/onnx/qdq_export.h"

#include <bit>

namespace kiln::onnx_detail {
namespace {

// The scalar zero point of type `t`: its dtype tells QuantizeLinear which integer type to write.
std::string zero_point(ExportContext& ctx, QuantType t) {
  auto it = ctx.zero_points.find(t);
  if (it != ctx.zero_points.end()) return it->second;
  const Tensor zero = t == QuantType::u8 ? Tensor::scalar<uint8_t>(0) : Tensor::scalar<int8_t>(0);
  const std::string name = ctx.constant(t == QuantType::u8 ? "kiln_zero_point_u8" : "kiln_zero_point_s8", zero);
  ctx.zero_points.emplace(t, name);
  return name;
}

void set_axis(onnx::NodeProto& n, int64_t axis) {
  auto* a = n.add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
}

Result<int64_t> weight_axis(const Node& node, int64_t rank) {
  switch (node.op) {
    case OpKind::Conv: return int64_t{0};
    case OpKind::Gemm: {
      KILN_ASSIGN(trans_b, node.attrs.get_int("transB", 0));
      return trans_b != 0 ? int64_t{0} : int64_t{1};
    }
    default: return rank - 1;  // MatMul: B is [..., K, N]
  }
}

// w quantized per channel along `axis`: the channels gathered to rows [C, rest] so that the
// scales and codes come from int8_weight_scales/int8_quantize_weights, then put back in place.
std::pair<Tensor, Tensor> quantize_per_channel(const Tensor& w, int64_t axis) {
  const Shape& shape = w.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t channels = shape[static_cast<size_t>(axis)], rest = outer * inner;
  const float* src = w.data<float>();
  std::vector<float> rows(static_cast<size_t>(channels * rest));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i)
        rows[static_cast<size_t>(c * rest + o * inner + i)] = src[(o * channels + c) * inner + i];
  const std::vector<float> scales = int8_weight_scales(rows.data(), channels, rest);
  const std::vector<int8_t> q = int8_quantize_weights(rows.data(), channels, rest, scales);
  Tensor codes = Tensor::zeros(DType::i8, shape);
  int8_t* dst = codes.data<int8_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i)
        dst[(o * channels + c) * inner + i] = q[static_cast<size_t>(c * rest + o * inner + i)];
  return {codes, Tensor::from_values<float>({channels}, std::span<const float>(scales))};
}

}  // namespace

Result<std::string> qdq_activation_input(ExportContext& ctx, const Node& node, const QuantParams& q) {
  const ValueId x = node.inputs[0];
  if (ctx.quantized_outputs.count(x)) return ctx.ref(x);
  KILN_REQUIRE(ctx.graph.value(x).type.dtype == DType::f32, unsupported, "int8 input '", ctx.graph.value(x).name,
               "' is ", dtype_name(ctx.graph.value(x).type.dtype), ", not float32");
  const auto key = std::make_tuple(x, std::bit_cast<uint32_t>(q.scale), q.type);
  if (auto it = ctx.quantized_inputs.find(key); it != ctx.quantized_inputs.end()) return it->second;
  const std::string name = ctx.ref(x), scale = ctx.scalar(q.scale), zp = zero_point(ctx, q.type);
  const std::string quantized = ctx.fresh_value(name + "_QuantizeLinear_Output");
  const std::string dequantized = ctx.fresh_value(name + "_DequantizeLinear_Output");
  ctx.add_node("QuantizeLinear", name + "_QuantizeLinear", {name, scale, zp}, {quantized});
  ctx.add_node("DequantizeLinear", name + "_DequantizeLinear", {quantized, scale, zp}, {dequantized});
  ctx.quantized_inputs.emplace(key, dequantized);
  return dequantized;
}

Result<std::string> qdq_weight(ExportContext& ctx, const Node& node) {
  KILN_REQUIRE(node.inputs.size() > 1 && node.inputs[1] != kNoValue, invalid_argument, "int8 needs a weight input");
  const ValueId w = node.inputs[1];
  const std::string& name = ctx.graph.value(w).name;
  auto it = ctx.graph.initializers.find(w);
  KILN_REQUIRE(it != ctx.graph.initializers.end(), unsupported, "int8 weights '", name,
               "' are computed, not a constant initializer; QDQ export quantizes constant weights only");
  const Tensor& weights = it->second;
  KILN_REQUIRE(weights.dtype() == DType::f32, unsupported, "int8 weights '", name, "' are ",
               dtype_name(weights.dtype()), ", not float32");
  KILN_REQUIRE(weights.rank() >= (node.op == OpKind::Conv ? 1 : 2), unsupported, "int8 weights '", name,
               "' have shape ", shape_to_string(weights.shape()), ", with no output-channel axis");
  KILN_ASSIGN(axis, weight_axis(node, weights.rank()));
  if (auto cached = ctx.quantized_weights.find({w, axis}); cached != ctx.quantized_weights.end()) return cached->second;
  const auto [codes, scales] = quantize_per_channel(weights, axis);
  const std::string q = ctx.constant(name + "_quantized", codes);
  const std::string s = ctx.constant(name + "_scale", scales);
  const std::string zp = ctx.constant(name + "_zero_point", Tensor::zeros(DType::i8, scales.shape()));
  const std::string dequantized = ctx.fresh_value(name + "_DequantizeLinear_Output");
  set_axis(ctx.add_node("DequantizeLinear", name + "_DequantizeLinear", {q, s, zp}, {dequantized}), axis);
  ctx.quantized_weights.emplace(std::make_pair(w, axis), dequantized);
  return dequantized;
}

void qdq_output(ExportContext& ctx, const Node& node, const QuantParams& q, const std::string& src,
                const std::string& dst) {
  const std::string scale = ctx.scalar(q.scale), zp = zero_point(ctx, q.type);
  const std::string quantized = ctx.fresh_value(dst + "_QuantizeLinear_Output");
  ctx.add_node("QuantizeLinear", node.name + "/output_QuantizeLinear", {src, scale, zp}, {quantized});
  ctx.add_node("DequantizeLinear", node.name + "/output_DequantizeLinear", {quantized, scale, zp}, {dst});
}

}  // namespace kiln::onnx_detail

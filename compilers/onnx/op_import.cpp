#include "compilers/onnx/op_import.h"

#include <array>
#include <string_view>

namespace kiln::onnx_detail {
namespace {

using Rule = Status (*)(NodeImportContext& ctx, Node& node);

// Moves attribute `attr` (ints or float) into input slot `index` as a constant tensor.
void attr_to_input(NodeImportContext& ctx, Node& node, const std::string& attr, size_t index, bool as_float = false) {
  if (!node.attrs.has(attr)) return;
  Tensor value;
  if (as_float) {
    const float f = node.attrs.get_float(attr, 0.0f).value();
    value = Tensor::scalar<float>(f);
  } else {
    const std::vector<int64_t> v = node.attrs.get_ints(attr).value();
    value = Tensor::from_values<int64_t>({static_cast<int64_t>(v.size())}, v);
  }
  node.attrs.erase(attr);
  if (node.inputs.size() <= index) node.inputs.resize(index + 1, kNoValue);
  node.inputs[index] = ctx.add_constant(attr, std::move(value));
}

Status require_attr_kind(const Node& node, const std::string& attr, bool want_ints) {
  if (!node.attrs.has(attr)) return Status::ok();
  if (want_ints) return node.attrs.get_ints(attr).status();
  return node.attrs.get_float(attr, 0.0f).status();
}

Status rule_clip(NodeImportContext& ctx, Node& node) {
  if (ctx.opset < 11) {
    KILN_TRY(require_attr_kind(node, "min", false));
    KILN_TRY(require_attr_kind(node, "max", false));
    attr_to_input(ctx, node, "min", 1, true);
    attr_to_input(ctx, node, "max", 2, true);
  }
  return Status::ok();
}

Status rule_slice(NodeImportContext& ctx, Node& node) {
  if (ctx.opset < 10) {
    for (const char* a : {"starts", "ends", "axes"}) KILN_TRY(require_attr_kind(node, a, true));
    attr_to_input(ctx, node, "starts", 1);
    attr_to_input(ctx, node, "ends", 2);
    attr_to_input(ctx, node, "axes", 3);
  }
  return Status::ok();
}

Status rule_axes_input_before_13(NodeImportContext& ctx, Node& node) {
  if (ctx.opset < 13) {
    KILN_TRY(require_attr_kind(node, "axes", true));
    attr_to_input(ctx, node, "axes", 1);
  }
  return Status::ok();
}

Status rule_reduce_before_18(NodeImportContext& ctx, Node& node) {
  // ReduceSum took axes as an input from opset 13, the other reductions from opset 18.
  const int64_t since = node.op == OpKind::ReduceSum ? 13 : 18;
  if (ctx.opset < since) {
    KILN_TRY(require_attr_kind(node, "axes", true));
    attr_to_input(ctx, node, "axes", 1);
  }
  return Status::ok();
}

Status rule_split(NodeImportContext& ctx, Node& node) {
  if (ctx.opset < 13) {
    KILN_TRY(require_attr_kind(node, "split", true));
    attr_to_input(ctx, node, "split", 1);
  }
  node.attrs.set("num_outputs", static_cast<int64_t>(node.outputs.size()));
  return Status::ok();
}

Status rule_pad(NodeImportContext& ctx, Node& node) {
  if (ctx.opset < 11) {
    KILN_TRY(require_attr_kind(node, "pads", true));
    KILN_TRY(require_attr_kind(node, "value", false));
    attr_to_input(ctx, node, "pads", 1);
    attr_to_input(ctx, node, "value", 2, true);
  }
  return Status::ok();
}

Status rule_softmax(NodeImportContext& ctx, Node& node) {
  if (ctx.opset < 13) {
    auto axis = node.attrs.get_int("axis", 1);
    if (!axis) return axis.status();
    node.attrs.set("axis", *axis);
    node.attrs.set("legacy_2d", int64_t{1});
  }
  return Status::ok();
}

Status rule_batchnorm(NodeImportContext& ctx, Node& node) {
  (void)ctx;
  auto training = node.attrs.get_int("training_mode", 0);
  if (!training) return training.status();
  KILN_REQUIRE(*training == 0 && node.outputs.size() == 1, unsupported, "BatchNormalization in training mode (",
               node.outputs.size(), " outputs) is not supported: kiln imports inference graphs");
  node.attrs.erase("spatial");  // opset < 9: spatial=1 is the only meaningful inference mode
  node.attrs.erase("is_test");
  node.attrs.erase("consumed_inputs");
  return Status::ok();
}

// Opset < 7: `broadcast` was opt-in; with `axis`, B aligns with A from that axis (kept as
// legacy_axis for the kernel), without it B aligns with A's trailing dims, as numpy does.
Status rule_legacy_broadcast(NodeImportContext& ctx, Node& node) {
  if (ctx.opset >= 7) return Status::ok();
  KILN_ASSIGN(broadcast, node.attrs.get_int("broadcast", 0));
  KILN_ASSIGN(axis, node.attrs.get_int("axis", -1));
  node.attrs.erase("broadcast");
  node.attrs.erase("axis");
  node.attrs.erase("consumed_inputs");
  if (broadcast != 0 && axis >= 0 && node.op != OpKind::Gemm) node.attrs.set("legacy_axis", axis);
  return Status::ok();
}

// Opset < 7 PRelu: a 1-D slope is per channel (axis 1); later opsets broadcast numpy-style.
Status rule_prelu(NodeImportContext& ctx, Node& node) {
  if (ctx.opset < 7) node.attrs.set("legacy_axis", int64_t{1});
  return Status::ok();
}

Status rule_dropout(NodeImportContext& ctx, Node& node) {
  if (ctx.opset < 12) {
    node.attrs.erase("ratio");
    node.attrs.erase("is_test");
  }
  return Status::ok();
}

// Upsample (opset 7-9) and Resize opset 10 become Resize with (X, roi, scales).
Status rule_resize_legacy(NodeImportContext& ctx, Node& node) {
  node.op = OpKind::Resize;
  if (ctx.proto.op_type() == "Upsample" && ctx.opset < 9) {
    auto scales = node.attrs.get_floats("scales");
    if (!scales) return scales.status();
    node.attrs.erase("scales");
    std::vector<float> s = *scales;
    node.inputs.resize(1);
    node.inputs.push_back(kNoValue);
    node.inputs.push_back(ctx.add_constant("scales", Tensor::from_values<float>({static_cast<int64_t>(s.size())}, s)));
  } else {
    KILN_REQUIRE(node.inputs.size() == 2, invalid_argument, "expects 2 inputs (X, scales), got ", node.inputs.size());
    node.inputs = {node.inputs[0], kNoValue, node.inputs[1]};
  }
  auto mode = node.attrs.get_string("mode", "nearest");
  if (!mode) return mode.status();
  node.attrs.set("mode", *mode == "bilinear" ? std::string("linear") : *mode);
  node.attrs.set("coordinate_transformation_mode", std::string("asymmetric"));
  node.attrs.set("nearest_mode", std::string("floor"));
  return Status::ok();
}

Status rule_resize(NodeImportContext& ctx, Node& node) {
  if (ctx.opset < 11) return rule_resize_legacy(ctx, node);
  return Status::ok();
}

// Constant's value_* attributes all become the single `value` tensor attribute.
Status rule_constant(NodeImportContext& ctx, Node& node) {
  (void)ctx;
  if (node.attrs.has("value")) return node.attrs.get_tensor("value").status();
  Tensor value;
  if (node.attrs.has("value_float")) {
    auto f = node.attrs.get_float("value_float", 0);
    if (!f) return f.status();
    value = Tensor::scalar<float>(*f);
  } else if (node.attrs.has("value_int")) {
    auto i = node.attrs.get_int("value_int", 0);
    if (!i) return i.status();
    value = Tensor::scalar<int64_t>(*i);
  } else if (node.attrs.has("value_floats")) {
    auto fs = node.attrs.get_floats("value_floats");
    if (!fs) return fs.status();
    value = Tensor::from_values<float>({static_cast<int64_t>(fs->size())}, *fs);
  } else if (node.attrs.has("value_ints")) {
    auto is = node.attrs.get_ints("value_ints");
    if (!is) return is.status();
    value = Tensor::from_values<int64_t>({static_cast<int64_t>(is->size())}, *is);
  } else {
    return make_error(ErrorCode::unsupported, "Constant without a numeric value (string and sparse constants are not supported)");
  }
  for (const char* a : {"value_float", "value_int", "value_floats", "value_ints"}) node.attrs.erase(a);
  node.attrs.set("value", value);
  return Status::ok();
}

// Conv, Gemm and MatMul take kiln's fused inputs (bias of MatMul, residuals) past their ONNX ones.
Status require_onnx_inputs(const Node& node, size_t most) {
  KILN_REQUIRE(node.inputs.size() <= most, invalid_argument, "takes at most ", most, " inputs in ONNX, got ",
               node.inputs.size());
  return Status::ok();
}

Status rule_conv(NodeImportContext&, Node& node) { return require_onnx_inputs(node, 3); }
Status rule_matmul(NodeImportContext&, Node& node) { return require_onnx_inputs(node, 2); }
Status rule_gemm(NodeImportContext& ctx, Node& node) {
  KILN_TRY(require_onnx_inputs(node, 3));
  return rule_legacy_broadcast(ctx, node);
}

struct ImportRule {
  std::string_view onnx_op;
  Rule rule;
};

// Ops whose import needs more than a name lookup. One line each.
constexpr std::array<ImportRule, 25> kRules = {{
    {"Clip", rule_clip},                       // min/max attributes -> inputs (opset < 11)
    {"Slice", rule_slice},                     // starts/ends/axes attributes -> inputs (opset < 10)
    {"Squeeze", rule_axes_input_before_13},    // axes attribute -> input (opset < 13)
    {"Unsqueeze", rule_axes_input_before_13},  // axes attribute -> input (opset < 13)
    {"ReduceSum", rule_reduce_before_18},      // axes attribute -> input (opset < 13)
    {"ReduceMean", rule_reduce_before_18},     // axes attribute -> input (opset < 18)
    {"ReduceMax", rule_reduce_before_18},      // axes attribute -> input (opset < 18)
    {"ReduceMin", rule_reduce_before_18},      // axes attribute -> input (opset < 18)
    {"Split", rule_split},                     // split attribute -> input; num_outputs recorded
    {"Pad", rule_pad},                         // pads/value attributes -> inputs (opset < 11)
    {"Softmax", rule_softmax},                 // opset < 13: coerce-to-2D semantics
    {"LogSoftmax", rule_softmax},              // opset < 13: coerce-to-2D semantics
    {"BatchNormalization", rule_batchnorm},    // inference mode only; legacy attributes dropped
    {"Dropout", rule_dropout},                 // legacy ratio/is_test attributes dropped
    {"Upsample", rule_resize_legacy},          // Upsample -> Resize (asymmetric, floor)
    {"Resize", rule_resize},                   // opset 10 -> opset 13 input layout
    {"Constant", rule_constant},               // value_* attributes -> value tensor
    {"Add", rule_legacy_broadcast},            // opset < 7: broadcast/axis attributes
    {"Sub", rule_legacy_broadcast},            // opset < 7: broadcast/axis attributes
    {"Mul", rule_legacy_broadcast},            // opset < 7: broadcast/axis attributes
    {"Div", rule_legacy_broadcast},            // opset < 7: broadcast/axis attributes
    {"Gemm", rule_gemm},                       // opset < 7: broadcast attribute; ONNX's 3 inputs
    {"Conv", rule_conv},                       // ONNX's 3 inputs (a 4th is kiln's fused residual)
    {"MatMul", rule_matmul},                   // ONNX's 2 inputs (kiln's bias and residual follow)
    {"PRelu", rule_prelu},                     // opset < 7: per-channel slope
}};

}  // namespace

Status import_node(NodeImportContext& ctx, Node& node) {
  const std::string& type = ctx.proto.op_type();
  const std::string& domain = ctx.proto.domain();
  KILN_REQUIRE(domain.empty() || domain == "ai.onnx", unsupported, "unsupported op '", type, "' from domain '",
               domain, "' at node '", node.name, "'");
  auto op = op_from_name(type);
  if (op && op_is_fused(*op)) op.reset();  // kiln's own fused ops are not ONNX ops
  const ImportRule* rule = nullptr;
  for (const auto& r : kRules)
    if (r.onnx_op == type) rule = &r;
  KILN_REQUIRE(op || rule, unsupported, "unsupported op '", type, "' at node '", node.name, "' (opset ", ctx.opset, ")");
  if (op) node.op = *op;
  if (rule) {
    Status status = rule->rule(ctx, node);
    if (!status) return status.with_context("node '" + node.name + "' (" + type + "): ");
  }
  return Status::ok();
}

}  // namespace kiln::onnx_detail

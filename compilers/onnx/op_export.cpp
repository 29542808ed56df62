#include "compilers/onnx/op_export.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <optional>
#include <string_view>

#include "compilers/ir/rewrite.h"
#include "compilers/onnx/export.h"
#include "compilers/onnx/qdq_export.h"
#include "compilers/onnx/tensor_proto.h"
#include "compilers/passes/pipeline.h"
#include "compilers/passes/prune_2_4.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/post_ops.h"
#include "kernels/precision.h"

namespace kiln::onnx_detail {

// ---- ExportContext ----

ExportContext::ExportContext(const Graph& g, onnx::GraphProto& proto) : graph(g), proto_(proto) {
  for (const Value& v : graph.values) value_names_.insert(v.name);
  for (const Node& n : graph.nodes) node_names_.insert(n.name);
}

std::string ExportContext::ref(ValueId id) {
  if (id == kNoValue) return {};
  if (graph.is_initializer(id) && used_initializers_.insert(id).second) initializer_order_.push_back(id);
  return graph.value(id).name;
}

std::string ExportContext::fresh_value(const std::string& base) {
  std::string name = base;
  for (int i = 1; !value_names_.insert(name).second; ++i) name = base + "_" + std::to_string(i);
  return name;
}

std::string ExportContext::constant(const std::string& base, const Tensor& t) {
  const std::string name = fresh_value(base);
  tensor_to_proto(t, name, *proto_.add_initializer());
  return name;
}

std::string ExportContext::scalar(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  auto it = scalars_.find(bits);
  if (it != scalars_.end()) return it->second;
  // Named after small values (kiln_scalar_0.500000); huge ones (Clip's FLT_MAX) just numbered.
  const std::string base = std::fabs(v) < 1e6f ? "kiln_scalar_" + std::to_string(v) : "kiln_scalar";
  const std::string name = constant(base, Tensor::scalar<float>(v));
  scalars_.emplace(bits, name);
  return name;
}

onnx::NodeProto& ExportContext::add_node(const std::string& op, const std::string& name,
                                         const std::vector<std::string>& inputs,
                                         const std::vector<std::string>& outputs) {
  std::string unique = name.empty() ? op : name;
  for (int i = 1; !node_names_.insert(unique).second; ++i) unique = (name.empty() ? op : name) + "_" + std::to_string(i);
  onnx::NodeProto& n = *proto_.add_node();
  n.set_op_type(op);
  n.set_name(unique);
  for (const auto& in : inputs) n.add_input(in);
  for (const auto& out : outputs) n.add_output(out);
  return n;
}

void ExportContext::write_initializers() {
  for (ValueId id : initializer_order_) tensor_to_proto(graph.initializers.at(id), graph.value(id).name, *proto_.add_initializer());
}

namespace {

// ---- attributes ----

// Attributes kiln's passes and importer add for its kernels; ONNX has no such attributes.
bool is_kiln_attr(std::string_view name) {
  return name == "activation" || name.starts_with("activation_") || name == kPrecisionAttr || name == kBf16OutputAttr ||
         name.starts_with("int8_") || name == kSparseKernelAttr || name == kSparsityPatternAttr || name == "legacy_2d" || name == "legacy_axis";
}

void write_attr(onnx::NodeProto& n, const std::string& name, const AttrValue& value) {
  auto* a = n.add_attribute();
  a->set_name(name);
  std::visit(
      [&]<typename T>(const T& v) {
        if constexpr (std::is_same_v<T, int64_t>) {
          a->set_type(onnx::AttributeProto::INT);
          a->set_i(v);
        } else if constexpr (std::is_same_v<T, float>) {
          a->set_type(onnx::AttributeProto::FLOAT);
          a->set_f(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          a->set_type(onnx::AttributeProto::STRING);
          a->set_s(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          a->set_type(onnx::AttributeProto::INTS);
          for (int64_t x : v) a->add_ints(x);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          a->set_type(onnx::AttributeProto::FLOATS);
          for (float x : v) a->add_floats(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          a->set_type(onnx::AttributeProto::STRINGS);
          for (const auto& x : v) a->add_strings(x);
        } else {
          a->set_type(onnx::AttributeProto::TENSOR);
          tensor_to_proto(v, "", *a->mutable_t());
        }
      },
      value);
}

// Copies node's ONNX attributes, leaving out kiln's own and those in `skip`.
void write_attrs(onnx::NodeProto& n, const Node& node, std::initializer_list<std::string_view> skip = {}) {
  for (const auto& [name, value] : node.attrs.all()) {
    if (is_kiln_attr(name)) continue;
    bool skipped = false;
    for (std::string_view s : skip) skipped = skipped || s == name;
    if (!skipped) write_attr(n, name, value);
  }
}

// ONNX writes an absent optional input as ""; trailing ones are dropped.
std::vector<std::string> trimmed(std::vector<std::string> names) {
  while (!names.empty() && names.back().empty()) names.pop_back();
  return names;
}

std::vector<std::string> refs(ExportContext& ctx, const std::vector<ValueId>& ids, size_t count) {
  std::vector<std::string> names;
  for (size_t i = 0; i < count && i < ids.size(); ++i) names.push_back(ctx.ref(ids[i]));
  return names;
}

// ---- fused epilogues (kernels/post_ops.h): y = act(op(x) + residual) ----

// Writes the ONNX ops computing activation `p` from x into y.
void export_activation(ExportContext& ctx, const std::string& base, const PostOps& p, const std::string& x,
                       const std::string& y) {
  const std::string name = base + "/" + std::string(activation_name(p.activation));
  auto float_attr = [](onnx::NodeProto& n, const char* attr, float v) {
    auto* a = n.add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  };
  switch (p.activation) {
    case Activation::none: ctx.add_node("Identity", name, {x}, {y}); break;
    case Activation::relu: ctx.add_node("Relu", name, {x}, {y}); break;
    case Activation::clip: ctx.add_node("Clip", name, {x, ctx.scalar(p.alpha), ctx.scalar(p.beta)}, {y}); break;
    case Activation::leaky_relu: float_attr(ctx.add_node("LeakyRelu", name, {x}, {y}), "alpha", p.alpha); break;
    case Activation::sigmoid: ctx.add_node("Sigmoid", name, {x}, {y}); break;
    case Activation::silu: {  // x * Sigmoid(x)
      const std::string s = ctx.fresh_value(y + "/sigmoid");
      ctx.add_node("Sigmoid", name + "_sigmoid", {x}, {s});
      ctx.add_node("Mul", name + "_mul", {x, s}, {y});
      break;
    }
    case Activation::hard_swish: ctx.add_node("HardSwish", name, {x}, {y}); break;
    case Activation::hard_sigmoid: {
      onnx::NodeProto& n = ctx.add_node("HardSigmoid", name, {x}, {y});
      float_attr(n, "alpha", p.alpha);
      float_attr(n, "beta", p.beta);
      break;
    }
    case Activation::gelu_erf: {  // 0.5 * x * (1 + erf(x / sqrt 2)), as PyTorch writes GELU before opset 20
      const std::string a = ctx.fresh_value(y + "/div"), b = ctx.fresh_value(y + "/erf"),
                        c = ctx.fresh_value(y + "/add"), d = ctx.fresh_value(y + "/mul");
      ctx.add_node("Div", name + "_div", {x, ctx.scalar(static_cast<float>(std::sqrt(2.0)))}, {a});
      ctx.add_node("Erf", name + "_erf", {a}, {b});
      ctx.add_node("Add", name + "_add", {b, ctx.scalar(1.0f)}, {c});
      ctx.add_node("Mul", name + "_mul", {x, c}, {d});
      ctx.add_node("Mul", name + "_half", {d, ctx.scalar(0.5f)}, {y});
      break;
    }
    case Activation::tanh: ctx.add_node("Tanh", name, {x}, {y}); break;
    case Activation::elu: float_attr(ctx.add_node("Elu", name, {x}, {y}), "alpha", p.alpha); break;
  }
}

// Any op, with what kiln fused into it written back out: op -> Add(bias: MatMul's) -> Add(residual) -> activation, and
// for precision="int8" the QDQ around it. precision="bf16" is written as the fp32 op: bf16 is how
// kiln's fast kernels compute it, not part of the model.
Status export_with_epilogue(ExportContext& ctx, const Node& node, std::initializer_list<std::string_view> skip = {}) {
  KILN_ASSIGN(post, post_ops_from_attrs(node.attrs));
  KILN_ASSIGN(precision, precision_from_attrs(node.attrs));
  const int r = fused_residual_input(node.op);
  const bool has_residual = r >= 0 && static_cast<size_t>(r) < node.inputs.size() && node.inputs[static_cast<size_t>(r)] != kNoValue;
  // MatMul's bias (input 2) is kiln's: ONNX's MatMul takes A and B, then an Add.
  const bool has_bias = node.op == OpKind::MatMul && node.inputs.size() > 2 && node.inputs[2] != kNoValue;
  const bool int8 = precision == Precision::int8;
  const size_t onnx_inputs = node.op == OpKind::MatMul ? 2 : r >= 0 ? static_cast<size_t>(r) : node.inputs.size();
  const size_t count = std::min(onnx_inputs, node.inputs.size());
  std::vector<std::string> inputs;
  // An int8 node reads X and W through QDQ (below), not the float values themselves.
  for (size_t i = 0; i < count; ++i) inputs.push_back(int8 && i < 2 ? std::string() : ctx.ref(node.inputs[i]));
  std::optional<QuantParams> out_q;
  if (int8) {
    KILN_REQUIRE(node.op == OpKind::Conv || node.op == OpKind::Gemm || node.op == OpKind::MatMul, unsupported,
                 "precision int8 on a ", op_name(node.op), " (only Conv, Gemm and MatMul run in int8)");
    KILN_ASSIGN(in_q, quant_params_from_attrs(node.attrs, "input"));
    KILN_REQUIRE(in_q.has_value(), invalid_argument, "precision int8 without attribute int8_input_scale");
    KILN_ASSIGN(x, qdq_activation_input(ctx, node, *in_q));
    KILN_ASSIGN(w, qdq_weight(ctx, node));
    inputs[0] = x;
    inputs[1] = w;
    KILN_ASSIGN(o_q, quant_params_from_attrs(node.attrs, "output"));
    out_q = o_q;
  }
  std::vector<std::string> outputs = refs(ctx, node.outputs, node.outputs.size());
  while (!outputs.empty() && outputs.back().empty()) outputs.pop_back();
  const bool has_epilogue = has_bias || has_residual || !post.empty() || out_q.has_value();
  KILN_REQUIRE(!has_epilogue || outputs.size() == 1, invalid_argument, "a fused epilogue on an op with ",
               outputs.size(), " outputs");
  const std::string final_name = outputs.empty() ? std::string() : outputs[0];
  // Each stage writes a fresh value, the last one the node's own output.
  int stages = (has_bias ? 1 : 0) + (has_residual ? 1 : 0) + (post.empty() ? 0 : 1) + (out_q ? 1 : 0);
  auto next = [&](const std::string& what) {
    return --stages == 0 ? final_name : ctx.fresh_value(final_name + "/" + what);
  };
  ++stages;  // the op itself
  std::string cur = next(std::string(op_name(node.op)));
  if (!outputs.empty()) outputs[0] = cur;
  onnx::NodeProto& n = ctx.add_node(std::string(op_name(node.op)), node.name, trimmed(std::move(inputs)), outputs);
  write_attrs(n, node, skip);
  if (has_bias) {
    const std::string y = next("bias_add");
    ctx.add_node("Add", node.name + "/bias_add", {cur, ctx.ref(node.inputs[2])}, {y});
    cur = y;
  }
  if (has_residual) {
    const std::string y = next("residual_add");
    ctx.add_node("Add", node.name + "/residual_add", {cur, ctx.ref(node.inputs[static_cast<size_t>(r)])}, {y});
    cur = y;
  }
  if (!post.empty()) {
    const std::string y = next(std::string(activation_name(post.activation)));
    export_activation(ctx, node.name, post, cur, y);
    cur = y;
  }
  if (out_q) {
    qdq_output(ctx, node, *out_q, cur, final_name);
    ctx.quantized_outputs[node.outputs[0]] = *out_q;
  }
  return Status::ok();
}

Status export_plain(ExportContext& ctx, const Node& node) { return export_with_epilogue(ctx, node); }

// ReduceMean/Max/Min take axes as an input from opset 18 (kiln's form); opset 17 has the attribute.
Status export_reduce(ExportContext& ctx, const Node& node) {
  std::vector<std::string> inputs = {ctx.ref(node.inputs[0])};
  onnx::NodeProto& n = ctx.add_node(std::string(op_name(node.op)), node.name, inputs, refs(ctx, node.outputs, 1));
  write_attrs(n, node, {"noop_with_empty_axes"});
  const bool has_axes = node.inputs.size() > 1 && node.inputs[1] != kNoValue;
  if (has_axes) {
    const std::optional<Tensor> axes = graph_constant_value(ctx.graph, node.inputs[1]);
    KILN_REQUIRE(axes.has_value(), unsupported, "axes computed at run time cannot be written for opset ",
                 kOnnxExportOpset, " (where they are an attribute)");
    std::vector<int64_t> v;
    for (int64_t i = 0; i < axes->numel(); ++i) v.push_back(axes->value_as_int(i));
    if (!v.empty()) write_attr(n, "axes", v);
  } else {
    KILN_ASSIGN(noop, node.attrs.get_int("noop_with_empty_axes", 0));
    KILN_REQUIRE(noop == 0, unsupported, "noop_with_empty_axes=1 has no opset ", kOnnxExportOpset, " form");
  }
  return Status::ok();
}

// num_outputs is opset 18's (kiln records it on import); opset 17 counts the outputs.
Status export_split(ExportContext& ctx, const Node& node) { return export_with_epilogue(ctx, node, {"num_outputs"}); }

// Opset < 13 Softmax (legacy_2d): flatten from axis, softmax the rows, restore the shape.
Status export_softmax(ExportContext& ctx, const Node& node) {
  KILN_ASSIGN(legacy, node.attrs.get_int("legacy_2d", 0));
  if (legacy == 0) return export_plain(ctx, node);
  KILN_ASSIGN(axis, node.attrs.get_int("axis", 1));
  const ValueType& t = ctx.graph.value(node.inputs[0]).type;
  KILN_REQUIRE(t.rank_known, unsupported, "an opset < 13 ", op_name(node.op), " needs its input's rank");
  if (axis < 0) axis += t.rank();
  if (axis == t.rank() - 1) return export_plain(ctx, node);  // the same as opset 13's
  const std::string x = ctx.ref(node.inputs[0]), y = ctx.ref(node.outputs[0]);
  const std::string flat = ctx.fresh_value(y + "/flat"), soft = ctx.fresh_value(y + "/rows"),
                    shape = ctx.fresh_value(y + "/shape");
  write_attr(ctx.add_node("Flatten", node.name + "/flatten", {x}, {flat}), "axis", axis);
  write_attr(ctx.add_node(std::string(op_name(node.op)), node.name, {flat}, {soft}), "axis", int64_t{1});
  ctx.add_node("Shape", node.name + "/shape", {x}, {shape});
  ctx.add_node("Reshape", node.name + "/reshape", {soft, shape}, {y});
  return Status::ok();
}

// Opset < 7 broadcasting (legacy_axis): input 1 aligns with input 0 from the axis on, which is
// numpy broadcasting once input 1 gets trailing 1-dims (Unsqueeze).
Status export_legacy_broadcast(ExportContext& ctx, const Node& node) {
  if (!node.attrs.has("legacy_axis")) return export_plain(ctx, node);
  KILN_ASSIGN(axis, node.attrs.get_int("legacy_axis", 0));
  const ValueType& a = ctx.graph.value(node.inputs[0]).type;
  const ValueType& b = ctx.graph.value(node.inputs[1]).type;
  KILN_REQUIRE(a.rank_known && b.rank_known, unsupported, "opset < 7 broadcasting needs both inputs' ranks");
  const int64_t trailing = a.rank() - axis - b.rank();
  KILN_REQUIRE(trailing >= 0, invalid_argument, "legacy_axis ", axis, " does not fit input 1 into input 0");
  if (trailing == 0) return export_plain(ctx, node);
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < trailing; ++i) axes.push_back(b.rank() + i);
  const std::string b_name = ctx.ref(node.inputs[1]);
  const std::string axes_name =
      ctx.constant(node.name + "/axes", Tensor::from_values<int64_t>({trailing}, std::span<const int64_t>(axes)));
  const std::string aligned = ctx.fresh_value(b_name + "/aligned");
  ctx.add_node("Unsqueeze", node.name + "/align", {b_name, axes_name}, {aligned});
  std::vector<std::string> inputs = refs(ctx, node.inputs, node.inputs.size());
  inputs[1] = aligned;
  onnx::NodeProto& n = ctx.add_node(std::string(op_name(node.op)), node.name, inputs, refs(ctx, node.outputs, 1));
  write_attrs(n, node);
  return Status::ok();
}

// ChannelShuffle (fuse_channel_shuffle) in the standard ops it was fused from: Concat (axis 1) ->
// Reshape [N, g, C/g, -1] -> Transpose (0, 2, 1, 3) -> Reshape to the joined shape -> Split on axis 1
// (one output: the last Reshape writes it). Exported rather than left unfused so that an int8 model's
// shuffles keep the one scale quantize_int8 gives each chain of them: calibrated part by part, the QDQ
// model would compute other numbers than kiln's plan (ShuffleNetV2, batch 8: top-1 agreement 75%).
Status export_channel_shuffle(ExportContext& ctx, const Node& node) {
  KILN_ASSIGN(groups, node.attrs.get_int("groups", 1));
  KILN_ASSIGN(splits, node.attrs.get_ints("splits"));
  int64_t channels = 0;
  for (ValueId in : node.inputs) {
    const Value& v = ctx.graph.value(in);
    KILN_REQUIRE(v.type.rank_known && v.type.rank() >= 2 && v.type.shape[1].known(), unsupported, "input '", v.name,
                 "' needs a known channel count");
    channels += v.type.shape[1].value;
  }
  KILN_REQUIRE(groups >= 1 && channels % groups == 0, invalid_argument, groups, " groups do not divide ", channels,
               " channels");
  const std::vector<std::string> outputs = refs(ctx, node.outputs, node.outputs.size());
  const std::string base = node.name, joined = ctx.fresh_value(base + "/joined"),
                    grouped = ctx.fresh_value(base + "/grouped"), swapped = ctx.fresh_value(base + "/swapped"),
                    shape = ctx.fresh_value(base + "/shape");
  const std::string shuffled = outputs.size() == 1 ? outputs[0] : ctx.fresh_value(base + "/shuffled");
  write_attr(ctx.add_node("Concat", base + "/concat", refs(ctx, node.inputs, node.inputs.size()), {joined}), "axis",
             int64_t{1});
  const std::vector<int64_t> group_shape = {0, groups, channels / groups, -1};
  ctx.add_node("Reshape", base + "/group",
               {joined, ctx.constant(base + "/group_shape", Tensor::from_values<int64_t>({4}, std::span<const int64_t>(group_shape)))},
               {grouped});
  write_attr(ctx.add_node("Transpose", base + "/transpose", {grouped}, {swapped}), "perm",
             std::vector<int64_t>{0, 2, 1, 3});
  ctx.add_node("Shape", base + "/shape", {joined}, {shape});
  ctx.add_node("Reshape", base + "/ungroup", {swapped, shape}, {shuffled});
  if (outputs.size() > 1) {
    KILN_REQUIRE(splits.size() == outputs.size(), invalid_argument, outputs.size(), " outputs but splits ",
                 splits.size(), " long");
    const std::string sizes =
        ctx.constant(base + "/splits", Tensor::from_values<int64_t>({static_cast<int64_t>(splits.size())}, std::span<const int64_t>(splits)));
    write_attr(ctx.add_node("Split", base + "/split", {shuffled, sizes}, outputs), "axis", int64_t{1});
  }
  return Status::ok();
}

using Rule = Status (*)(ExportContext& ctx, const Node& node);

struct ExportRule {
  OpKind op;
  Rule rule;
};

// Ops whose export needs more than their name, inputs and attributes. One line each; every
// other op goes through export_plain (which also writes any fused activation back out).
constexpr std::array<ExportRule, 12> kRules = {{
    {OpKind::ReduceMean, export_reduce},          // axes input -> attribute (opset 17)
    {OpKind::ReduceMax, export_reduce},           // axes input -> attribute (opset 17)
    {OpKind::ReduceMin, export_reduce},           // axes input -> attribute (opset 17)
    {OpKind::Split, export_split},                // num_outputs dropped (opset 17)
    {OpKind::Softmax, export_softmax},            // legacy_2d -> Flatten, Softmax, Reshape
    {OpKind::LogSoftmax, export_softmax},         // legacy_2d -> Flatten, LogSoftmax, Reshape
    {OpKind::Add, export_legacy_broadcast},       // legacy_axis -> Unsqueeze of input 1
    {OpKind::Sub, export_legacy_broadcast},       // legacy_axis -> Unsqueeze of input 1
    {OpKind::Mul, export_legacy_broadcast},       // legacy_axis -> Unsqueeze of input 1
    {OpKind::Div, export_legacy_broadcast},       // legacy_axis -> Unsqueeze of input 1
    {OpKind::PRelu, export_legacy_broadcast},     // legacy_axis -> Unsqueeze of the slope
    {OpKind::ChannelShuffle, export_channel_shuffle},  // Concat, Reshape, Transpose, Reshape, Split
}};

}  // namespace

Status export_check_node(const Node& node) {
  if (!op_is_fused(node.op)) return Status::ok();
  // The table of fused ops export cannot write back (pipeline.h), which also names the pass making each.
  const auto unwritable = passes_making_kiln_ops();
  const auto it = std::find_if(unwritable.begin(), unwritable.end(),
                               [&](const KilnOpPass& p) { return p.op == op_name(node.op); });
  if (it == unwritable.end()) return Status::ok();  // ChannelShuffle: written unfused (export_channel_shuffle)
  return make_error(ErrorCode::unsupported, "node '", node.name, "' (", op_name(node.op), "): ", op_name(node.op),
                    " is kiln's own fused op (made by the pass ", it->pass, ") and has no ONNX form: export with a ",
                    "pipeline without ", it->pass, " (kiln export's default pipeline leaves it out)");
}

Status export_node(ExportContext& ctx, const Node& node) {
  KILN_TRY(export_check_node(node));
  Rule rule = export_plain;
  for (const auto& r : kRules)
    if (r.op == node.op) rule = r.rule;
  Status status = rule(ctx, node);
  if (!status) return status.with_context("node '" + node.name + "' (" + std::string(op_name(node.op)) + "): ");
  return Status::ok();
}

}  // namespace kiln::onnx_detail

#include "compilers/ir/shape_inference.h"

#include <deque>

#include "compilers/ir/verify.h"

namespace kiln {
namespace {

SymShape bind_dims(const SymShape& shape, const DimBindings& bindings) {
  SymShape out = shape;
  for (Dim& d : out) {
    if (d.known() || d.symbol.empty()) continue;
    auto it = bindings.find(d.symbol);
    if (it != bindings.end()) d = Dim(it->second);
  }
  return out;
}

// Keeps what inference found and fills unknown dims from the declared type.
Result<ValueType> merge_declared(const ValueType& inferred, const ValueType& declared, const std::string& name) {
  if (!declared.rank_known) return inferred;
  if (!inferred.rank_known) return ValueType::of(inferred.dtype, declared.shape);
  KILN_REQUIRE(inferred.dtype == declared.dtype, shape_mismatch, "output '", name, "' is declared ",
               dtype_name(declared.dtype), " but computes ", dtype_name(inferred.dtype));
  KILN_REQUIRE(inferred.rank() == declared.rank(), shape_mismatch, "output '", name, "' is declared ",
               sym_shape_to_string(declared.shape), " but computes ", sym_shape_to_string(inferred.shape));
  ValueType out = inferred;
  for (size_t d = 0; d < out.shape.size(); ++d) {
    const Dim& decl = declared.shape[d];
    if (!out.shape[d].known()) {
      if (decl.known() || !decl.symbol.empty()) out.shape[d] = decl;
    } else {
      KILN_REQUIRE(!decl.known() || decl.value == out.shape[d].value, shape_mismatch, "output '", name,
                   "' is declared ", sym_shape_to_string(declared.shape), " but computes ",
                   sym_shape_to_string(inferred.shape));
    }
  }
  return out;
}

// Evaluates a node whose inputs are all known, to learn its output values.
Status fold_node(const Node& node, const InferContext& inferred, std::vector<Tensor>& outputs) {
  RunContext run;
  run.attrs = &node.attrs;
  run.inputs = inferred.values;
  outputs.resize(node.outputs.size());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    outputs[i] = Tensor::zeros(inferred.outputs[i].dtype, sym_shape_concrete(inferred.outputs[i].shape));
    run.outputs.push_back(&outputs[i]);
  }
  return op_def(node.op).run(run);
}

}  // namespace

Result<ShapeInferenceResult> graph_infer_shapes(Graph& graph, const ShapeInferenceOptions& options) {
  auto order = graph_topo_order(graph);
  if (!order) return order.status();

  ShapeInferenceResult result;
  for (const auto& [id, tensor] : graph.initializers) {
    graph.value(id).type = ValueType::of(tensor.dtype(), sym_shape_from(tensor.shape()));
    result.known_values[id] = tensor;
  }
  for (ValueId id : graph.inputs) {
    Value& v = graph.value(id);
    if (v.type.rank_known) v.type.shape = bind_dims(v.type.shape, options.bindings);
  }
  std::unordered_map<ValueId, ValueType> declared_outputs;
  for (ValueId id : graph.outputs)
    if (graph.value(id).producer >= 0) declared_outputs[id] = graph.value(id).type;

  // A placeholder for Shape's input when only its shape is known: Shape never reads the data.
  std::deque<Tensor> shape_only;  // deque: stable addresses while ctx points into it
  for (int index : *order) {
    Node& node = graph.nodes[static_cast<size_t>(index)];
    const std::string context = "node '" + node.name + "' (" + std::string(op_name(node.op)) + "): ";
    InferContext ctx;
    ctx.attrs = &node.attrs;
    bool all_known = true;
    for (ValueId in : node.inputs) {
      if (in == kNoValue) {
        ctx.inputs.push_back(nullptr);
        ctx.values.push_back(nullptr);
        continue;
      }
      ctx.inputs.push_back(&graph.value(in).type);
      auto it = result.known_values.find(in);
      const Tensor* known = it == result.known_values.end() ? nullptr : &it->second;
      const ValueType& t = graph.value(in).type;
      if (!known && node.op == OpKind::Shape && t.rank_known && sym_shape_is_concrete(t.shape)) {
        shape_only.push_back(Tensor::borrow(t.dtype, sym_shape_concrete(t.shape), nullptr, nullptr));
        known = &shape_only.back();
      }
      ctx.values.push_back(known);
      all_known = all_known && known != nullptr;
    }
    const OpDef& def = op_def(node.op);
    const int n_in = static_cast<int>(node.inputs.size());
    const int n_out = static_cast<int>(node.outputs.size());
    KILN_REQUIRE(n_in >= def.min_inputs && (def.max_inputs < 0 || n_in <= def.max_inputs), invalid_graph, context,
                 "has ", n_in, " inputs, which this op does not accept");
    KILN_REQUIRE(n_out >= def.min_outputs && n_out <= def.max_outputs, invalid_graph, context, "has ", n_out,
                 " outputs, which this op does not accept");
    for (int i = 0; i < def.min_inputs; ++i)
      KILN_REQUIRE(node.inputs[static_cast<size_t>(i)] != kNoValue, invalid_graph, context, "required input ", i,
                   " is missing");
    Status status = def.infer(ctx);
    if (!status) return status.with_context(context);
    KILN_REQUIRE(ctx.outputs.size() >= node.outputs.size(), internal, context, "inference gave ", ctx.outputs.size(),
                 " outputs for ", node.outputs.size());

    bool foldable = all_known;
    for (size_t i = 0; i < node.outputs.size() && foldable; ++i) {
      const ValueType& t = ctx.outputs[i];
      foldable = t.rank_known && sym_shape_is_concrete(t.shape) &&
                 shape_numel(sym_shape_concrete(t.shape)) <= options.max_fold_elements;
    }
    std::vector<Tensor> folded;
    if (foldable) {
      status = fold_node(node, ctx, folded);
      if (!status) return status.with_context(context);
    }
    shape_only.clear();

    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const ValueId out = node.outputs[i];
      if (out == kNoValue) continue;
      ValueType type = ctx.outputs[i];
      auto declared = declared_outputs.find(out);
      if (declared != declared_outputs.end()) {
        ValueType decl = declared->second;
        if (decl.rank_known) decl.shape = bind_dims(decl.shape, options.bindings);
        auto merged = merge_declared(type, decl, graph.value(out).name);
        if (!merged) return merged.status();
        type = *merged;
      }
      graph.value(out).type = type;
      if (foldable) result.known_values[out] = folded[i];
    }
  }
  return result;
}

}  // namespace kiln

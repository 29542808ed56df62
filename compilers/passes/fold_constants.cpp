#include "compilers/passes/fold_constants.h"

#include <deque>
#include <optional>
#include <unordered_set>

#include "compilers/ir/rewrite.h"
#include "compilers/ir/verify.h"

namespace kiln {
namespace {

SymShape bind_dims(SymShape shape, const DimBindings& bindings) {
  for (Dim& d : shape) {
    if (d.known() || d.symbol.empty()) continue;
    auto it = bindings.find(d.symbol);
    if (it != bindings.end()) d = Dim(it->second);
  }
  return shape;
}

// The node's outputs when every input is constant (Shape: when its input's shape is concrete)
// and every output fits under the cap; nothing otherwise.
std::optional<std::vector<Tensor>> evaluate(const Graph& graph, const Node& node, const DimBindings& bindings) {
  InferContext infer;
  infer.attrs = &node.attrs;
  std::deque<ValueType> types;  // input types, at stable addresses
  std::deque<Tensor> shape_only;
  for (ValueId in : node.inputs) {
    if (in == kNoValue) {
      infer.inputs.push_back(nullptr);
      infer.values.push_back(nullptr);
      continue;
    }
    auto it = graph.initializers.find(in);
    if (it != graph.initializers.end()) {
      types.push_back(ValueType::of(it->second.dtype(), sym_shape_from(it->second.shape())));
      infer.inputs.push_back(&types.back());
      infer.values.push_back(&it->second);
      continue;
    }
    if (node.op != OpKind::Shape) return std::nullopt;
    const ValueType& t = graph.value(in).type;
    if (!t.rank_known) return std::nullopt;
    types.push_back(ValueType::of(t.dtype, bind_dims(t.shape, bindings)));
    if (!sym_shape_is_concrete(types.back().shape)) return std::nullopt;
    // Shape never reads the data: a placeholder with the shape and no buffer stands in.
    shape_only.push_back(Tensor::borrow(t.dtype, sym_shape_concrete(types.back().shape), nullptr, nullptr));
    infer.inputs.push_back(&types.back());
    infer.values.push_back(&shape_only.back());
  }
  const OpDef& def = op_def(node.op);
  if (!def.infer(infer) || infer.outputs.size() < node.outputs.size()) return std::nullopt;

  RunContext run;
  run.attrs = &node.attrs;
  run.inputs = infer.values;
  std::vector<Tensor> outputs(node.outputs.size());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const ValueType& t = infer.outputs[i];
    if (!t.rank_known || !sym_shape_is_concrete(t.shape)) return std::nullopt;
    const Shape shape = sym_shape_concrete(t.shape);
    if (shape_numel(shape) > kFoldMaxElements) return std::nullopt;
    outputs[i] = Tensor::zeros(t.dtype, shape);
  }
  for (Tensor& t : outputs) run.outputs.push_back(&t);
  if (!def.run(run)) return std::nullopt;
  return outputs;
}

}  // namespace

Result<bool> pass_fold_constants(Graph& graph, const PassContext& ctx) {
  KILN_ASSIGN(order, graph_topo_order(graph));
  std::vector<bool> remove(graph.nodes.size(), false);
  std::unordered_set<ValueId> maybe_unused;  // initializers whose readers may all be folded away
  bool changed = false;
  // {all inputs constant, or Shape of a concrete shape} → the outputs become initializers.
  for (int index : order) {
    const Node& node = graph.nodes[static_cast<size_t>(index)];
    auto outputs = evaluate(graph, node, ctx.bindings);
    if (!outputs) continue;
    for (ValueId in : node.inputs)
      if (in != kNoValue && graph.is_initializer(in)) maybe_unused.insert(in);
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const ValueId out = node.outputs[i];
      if (out == kNoValue) continue;
      Tensor& t = (*outputs)[i];
      graph.value(out).type = ValueType::of(t.dtype(), sym_shape_from(t.shape()));
      graph.initializers[out] = std::move(t);
      maybe_unused.insert(out);
    }
    remove[static_cast<size_t>(index)] = true;
    changed = true;
  }
  if (!changed) return false;
  graph_remove_nodes(graph, remove);

  // Drop the constants nothing reads any more (weights of folded nodes, folded intermediates).
  graph_drop_unused_initializers(graph, &maybe_unused);
  return true;
}

}  // namespace kiln

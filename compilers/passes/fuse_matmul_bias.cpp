#include "compilers/passes/fuse_matmul_bias.h"

#include "compilers/ir/rewrite.h"
#include "kernels/post_ops.h"

namespace kiln {
namespace {

// The bias input when `c` is a float32 constant of N values along the last axis of `y`: `c`
// itself when it is [N], else a new [N] initializer; kNoValue when it is not such a constant.
ValueId bias_input(Graph& graph, ValueId c, const SymShape& y, const std::string& hint) {
  const auto t = graph_constant_value(graph, c);
  if (!t || t->dtype() != DType::f32 || y.empty() || !y.back().known()) return kNoValue;
  const Shape& s = t->shape();
  const int64_t n = y.back().value;
  if (s.empty() || s.size() > y.size() || s.back() != n) return kNoValue;
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i] != 1) return kNoValue;
  if (s.size() == 1) return c;
  return graph_add_initializer(graph, hint,
                               Tensor::from_values<float>({n}, std::vector<float>(t->data<float>(), t->data<float>() + n)));
}

bool fusable_matmul(const Graph& graph, const Node& n) {
  if (n.op != OpKind::MatMul || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  const auto post = post_ops_from_attrs(n.attrs);
  if (!post || !post->empty()) return false;
  const ValueType& b = graph.value(n.inputs[1]).type;
  const ValueType& y = graph.value(n.outputs[0]).type;
  return b.rank_known && b.rank() == 2 && y.dtype == DType::f32 && y.rank_known && y.rank() >= 1;
}

}  // namespace

Result<bool> pass_fuse_matmul_bias(Graph& graph, const PassContext&) {
  const auto consumers = graph_consumers(graph);
  std::vector<bool> remove(graph.nodes.size(), false);
  std::vector<ValueId> orphans;
  bool changed = false;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!fusable_matmul(graph, graph.nodes[i])) continue;
    const ValueId y = graph.nodes[i].outputs[0];
    const auto& readers = consumers[static_cast<size_t>(y)];
    if (readers.size() != 1 || graph_is_output(graph, y)) continue;
    const Node& add = graph.nodes[static_cast<size_t>(readers[0])];
    // legacy_axis (opset < 7) aligns the operand from an axis, not from the end.
    if (add.op != OpKind::Add || add.inputs.size() != 2 || add.outputs.size() != 1 || add.attrs.has("legacy_axis")) continue;
    const ValueId c = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
    if (c == y) continue;
    const ValueId out = add.outputs[0];
    const SymShape shape = graph.value(out).type.shape;
    if (!graph.value(out).type.rank_known || shape != graph.value(y).type.shape || graph.value(out).type.dtype != DType::f32)
      continue;
    const ValueId bias = bias_input(graph, c, shape, graph.nodes[i].name + ".bias");
    if (bias == kNoValue) continue;
    Node& mm = graph.nodes[i];
    mm.inputs.push_back(bias);
    mm.outputs[0] = out;
    graph.value(y).producer = -1;  // y is no longer computed
    graph.value(out).producer = static_cast<int>(i);
    remove[static_cast<size_t>(readers[0])] = true;
    orphans.push_back(c);
    changed = true;
  }
  if (!changed) return false;
  graph_remove_nodes(graph, remove);
  graph_drop_orphaned_constants(graph, orphans);
  return true;
}

}  // namespace kiln

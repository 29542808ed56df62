#include "compilers/passes/fuse_residual_add.h"

#include "compilers/ir/rewrite.h"
#include "kernels/post_ops.h"

namespace kiln {
namespace {

bool same_type(const ValueType& a, const ValueType& b) {
  return a.dtype == b.dtype && a.rank_known && b.rank_known && a.shape == b.shape;
}

// The node producing `a` when Add(a, b) (node `add`) can become its residual; -1 otherwise.
int fusable_producer(const Graph& graph, const std::vector<std::vector<int>>& consumers, int add, ValueId a,
                     ValueId b) {
  const int p = graph.value(a).producer;
  if (a == b || p < 0) return -1;
  const Node& n = graph.nodes[static_cast<size_t>(p)];
  const int r = fused_residual_input(n.op);
  if (r < 0 || n.outputs.size() != 1 || n.outputs[0] != a) return -1;
  if (static_cast<size_t>(r) < n.inputs.size() && n.inputs[static_cast<size_t>(r)] != kNoValue) return -1;
  const auto post = post_ops_from_attrs(n.attrs);
  if (!post || !post->empty()) return -1;
  if (graph_is_output(graph, a) || consumers[static_cast<size_t>(a)] != std::vector<int>{add}) return -1;
  const ValueType& ta = graph.value(a).type;
  const Node& sum = graph.nodes[static_cast<size_t>(add)];
  if (ta.dtype != DType::f32 || !same_type(ta, graph.value(b).type) || !same_type(ta, graph.value(sum.outputs[0]).type))
    return -1;
  return p;
}

}  // namespace

Result<bool> pass_fuse_residual_add(Graph& graph, const PassContext&) {
  const auto consumers = graph_consumers(graph);
  // place[i]: for a fused Add, the op that takes its place in the order; moved[i]: the op moved.
  std::vector<int> place(graph.nodes.size(), -1);
  std::vector<bool> moved(graph.nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& add = graph.nodes[i];
    if (add.op != OpKind::Add || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    const int add_index = static_cast<int>(i);
    const ValueId lhs = add.inputs[0], rhs = add.inputs[1];
    // Add(a, b) → Op(..., residual = b), preferring the op produced later (the other is then ready).
    const int pl = fusable_producer(graph, consumers, add_index, lhs, rhs);
    const int pr = fusable_producer(graph, consumers, add_index, rhs, lhs);
    if (pl < 0 && pr < 0) continue;
    const int p = pl > pr ? pl : pr;
    const ValueId a = p == pl ? lhs : rhs, b = p == pl ? rhs : lhs;
    Node& op = graph.nodes[static_cast<size_t>(p)];
    const size_t r = static_cast<size_t>(fused_residual_input(op.op));
    if (op.inputs.size() <= r) op.inputs.resize(r + 1, kNoValue);
    op.inputs[r] = b;
    op.outputs[0] = add.outputs[0];
    graph.value(a).producer = -1;  // a is no longer computed
    place[i] = p;
    moved[static_cast<size_t>(p)] = true;
    changed = true;
  }
  if (!changed) return false;
  // Each fused op moves to its Add's place: its inputs and b all precede the Add.
  std::vector<Node> nodes;
  nodes.reserve(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (moved[i]) continue;
    nodes.push_back(std::move(graph.nodes[static_cast<size_t>(place[i] >= 0 ? place[i] : static_cast<int>(i))]));
  }
  graph.nodes = std::move(nodes);
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (ValueId out : graph.nodes[i].outputs)
      if (out != kNoValue) graph.value(out).producer = static_cast<int>(i);
  return true;
}

}  // namespace kiln

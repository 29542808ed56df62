#include "compilers/passes/eliminate_identity.h"

#include "compilers/ir/rewrite.h"

#include <algorithm>

namespace kiln {
namespace {

// Pad whose constant pads are all zero (PyTorch emits one before some average pools).
bool is_zero_pad(const Graph& graph, const Node& node) {
  if (node.op != OpKind::Pad || node.inputs.size() < 2 || node.outputs.size() != 1) return false;
  const auto pads = graph_constant_value(graph, node.inputs[1]);
  if (!pads || pads->dtype() != DType::i64) return false;
  const int64_t* p = pads->data<int64_t>();
  return std::all_of(p, p + pads->numel(), [](int64_t x) { return x == 0; });
}

bool is_identity(const Graph& graph, const std::vector<std::vector<int>>& consumers, const Node& node) {
  if (node.op == OpKind::Identity || is_zero_pad(graph, node)) return true;
  if (node.op != OpKind::Dropout) return false;
  if (node.outputs.size() < 2 || node.outputs[1] == kNoValue) return true;
  const ValueId mask = node.outputs[1];
  return consumers[static_cast<size_t>(mask)].empty() && !graph_is_output(graph, mask);
}

}  // namespace

Result<bool> pass_eliminate_identity(Graph& graph, const PassContext&) {
  std::vector<bool> remove(graph.nodes.size(), false);
  bool changed = false;
  const auto initial_consumers = graph_consumers(graph);  // mask outputs: never rewired below
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node& node = graph.nodes[i];
    if (!is_identity(graph, initial_consumers, node) || node.inputs.empty() || node.inputs[0] == kNoValue) continue;
    const ValueId in = node.inputs[0];
    const ValueId out = node.outputs[0];
    if (!graph_is_output(graph, out)) {
      graph_replace_uses(graph, out, in);
    } else {
      // Keep the output's name: let the input's producer write it, if nothing else needs the input.
      const int producer = graph.value(in).producer;
      const auto consumers = graph_consumers(graph);
      if (producer < 0 || graph_is_output(graph, in) || consumers[static_cast<size_t>(in)].size() != 1) continue;
      for (ValueId& o : graph.nodes[static_cast<size_t>(producer)].outputs)
        if (o == in) o = out;
      graph.value(out).producer = producer;
    }
    remove[i] = true;
    changed = true;
  }
  if (changed) graph_remove_nodes(graph, remove);
  return changed;
}

}  // namespace kiln

#include "compilers/passes/eliminate_dead_nodes.h"

#include "compilers/ir/rewrite.h"

namespace kiln {

Result<bool> pass_eliminate_dead_nodes(Graph& graph, const PassContext&) {
  std::vector<bool> live_value(graph.values.size(), false);
  for (ValueId out : graph.outputs) live_value[static_cast<size_t>(out)] = true;
  std::vector<bool> remove(graph.nodes.size(), false);
  bool changed = false;
  // Reverse topological order: a node is live when any output is live; its inputs then are.
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const Node& node = graph.nodes[i];
    bool live = false;
    for (ValueId out : node.outputs) live = live || (out != kNoValue && live_value[static_cast<size_t>(out)]);
    if (!live) {
      remove[i] = true;
      changed = true;
      continue;
    }
    for (ValueId in : node.inputs)
      if (in != kNoValue) live_value[static_cast<size_t>(in)] = true;
  }
  if (changed) graph_remove_nodes(graph, remove);
  return graph_drop_unused_initializers(graph) > 0 || changed;
}

}  // namespace kiln

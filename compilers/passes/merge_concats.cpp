#include "compilers/passes/merge_concats.h"

#include <optional>

#include "compilers/ir/rewrite.h"

namespace kiln {

Result<bool> pass_merge_concats(Graph& graph, const PassContext&) {
  const auto consumers = graph_consumers(graph);
  std::vector<bool> remove(graph.nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const auto axis = graph_concat_axis(graph, graph.nodes[i]);
    if (!axis) continue;
    // Concat(..., Concat(b, c; axis), ...; axis) => Concat(..., b, c, ...; axis)
    std::vector<ValueId> flat;
    bool merged = false;
    for (ValueId in : graph.nodes[i].inputs) {
      const int p = in == kNoValue ? -1 : graph.value(in).producer;
      const bool sole_reader = in != kNoValue && consumers[static_cast<size_t>(in)].size() == 1 &&
                               !graph_is_output(graph, in);
      if (p >= 0 && sole_reader && !remove[static_cast<size_t>(p)] &&
          graph_concat_axis(graph, graph.nodes[static_cast<size_t>(p)]) == axis) {
        const Node& inner = graph.nodes[static_cast<size_t>(p)];
        flat.insert(flat.end(), inner.inputs.begin(), inner.inputs.end());
        remove[static_cast<size_t>(p)] = true;
        merged = true;
      } else {
        flat.push_back(in);
      }
    }
    if (!merged) continue;
    graph.nodes[i].inputs = std::move(flat);
    changed = true;
  }
  if (changed) graph_remove_nodes(graph, remove);
  return changed;
}

}  // namespace kiln

#include "compilers/lower/to_plan.h"

namespace kiln {

Plan graph_to_plan(const Graph& graph) {
  Plan plan;
  plan.num_slots = static_cast<int>(graph.values.size());
  for (const Value& v : graph.values) plan.slot_types.push_back(v.type);
  for (const auto& [id, tensor] : graph.initializers) plan.constants.emplace_back(id, tensor);
  for (ValueId id : graph.inputs) plan.inputs.push_back({id, graph.value(id).name, graph.value(id).type});
  for (ValueId id : graph.outputs) plan.outputs.emplace_back(id, graph.value(id).name);
  for (const Node& node : graph.nodes) plan.steps.push_back({node.op, node.attrs, node.inputs, node.outputs, node.name});
  return plan;
}

}  // namespace kiln

#include "compilers/ir/rewrite.h"

#include <algorithm>

namespace kiln {

std::vector<std::vector<int>> graph_consumers(const Graph& graph) {
  std::vector<std::vector<int>> consumers(graph.values.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (ValueId in : graph.nodes[i].inputs)
      if (in != kNoValue) consumers[static_cast<size_t>(in)].push_back(static_cast<int>(i));
  return consumers;
}

bool graph_is_output(const Graph& graph, ValueId id) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), id) != graph.outputs.end();
}

std::optional<int64_t> graph_concat_axis(const Graph& graph, const Node& n) {
  if (n.op != OpKind::Concat || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return std::nullopt;
  const ValueType& t = graph.value(n.outputs[0]).type;
  auto axis = n.attrs.get_int("axis", 0);
  if (!t.rank_known || !axis) return std::nullopt;
  const int64_t a = *axis < 0 ? *axis + t.rank() : *axis;
  if (a < 0 || a >= t.rank()) return std::nullopt;
  return a;
}

void graph_replace_uses(Graph& graph, ValueId from, ValueId to) {
  for (Node& node : graph.nodes)
    for (ValueId& in : node.inputs)
      if (in == from) in = to;
  for (ValueId& out : graph.outputs)
    if (out == from) out = to;
}

void graph_remove_nodes(Graph& graph, const std::vector<bool>& remove) {
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (i < remove.size() && remove[i]) {
      for (ValueId out : graph.nodes[i].outputs)
        if (out != kNoValue) graph.value(out).producer = -1;
      continue;
    }
    kept.push_back(std::move(graph.nodes[i]));
  }
  graph.nodes = std::move(kept);
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (ValueId out : graph.nodes[i].outputs)
      if (out != kNoValue) graph.value(out).producer = static_cast<int>(i);
}

ValueId graph_add_initializer(Graph& graph, const std::string& hint, Tensor value) {
  std::string name = hint;
  for (int k = 1; graph.find_value(name) != kNoValue; ++k) name = hint + "_" + std::to_string(k);
  const ValueId id = graph.add_value(name, ValueType::of(value.dtype(), sym_shape_from(value.shape())));
  graph.initializers[id] = std::move(value);
  return id;
}

int graph_drop_unused_initializers(Graph& graph, const std::unordered_set<ValueId>* candidates) {
  std::vector<bool> used(graph.values.size(), false);
  for (const Node& node : graph.nodes)
    for (ValueId in : node.inputs)
      if (in != kNoValue) used[static_cast<size_t>(in)] = true;
  for (ValueId out : graph.outputs) used[static_cast<size_t>(out)] = true;
  int dropped = 0;
  for (auto it = graph.initializers.begin(); it != graph.initializers.end();) {
    if (!used[static_cast<size_t>(it->first)] && (!candidates || candidates->contains(it->first))) {
      it = graph.initializers.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  return dropped;
}

void graph_drop_orphaned_constants(Graph& graph, const std::vector<ValueId>& candidates) {
  const auto consumers = graph_consumers(graph);
  std::vector<bool> remove(graph.nodes.size(), false);
  bool any = false;
  for (ValueId v : candidates) {
    if (v == kNoValue || !consumers[static_cast<size_t>(v)].empty() || graph_is_output(graph, v)) continue;
    if (std::find(graph.inputs.begin(), graph.inputs.end(), v) != graph.inputs.end()) continue;
    const int p = graph.value(v).producer;
    if (graph.initializers.count(v)) {
      graph.initializers.erase(v);
    } else if (p >= 0 && graph.nodes[static_cast<size_t>(p)].op == OpKind::Constant) {
      remove[static_cast<size_t>(p)] = true;
      any = true;
    }
  }
  if (any) graph_remove_nodes(graph, remove);
}

std::optional<Tensor> graph_constant_value(const Graph& graph, ValueId v) {
  if (v == kNoValue) return std::nullopt;
  if (auto it = graph.initializers.find(v); it != graph.initializers.end()) {
    if (std::find(graph.inputs.begin(), graph.inputs.end(), v) != graph.inputs.end()) return std::nullopt;
    return it->second;
  }
  const int p = graph.value(v).producer;
  if (p < 0 || graph.nodes[static_cast<size_t>(p)].op != OpKind::Constant) return std::nullopt;
  auto value = graph.nodes[static_cast<size_t>(p)].attrs.get_tensor("value");
  if (!value) return std::nullopt;
  return std::move(*value);
}

}  // namespace kiln

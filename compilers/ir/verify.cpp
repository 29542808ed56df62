#include "compilers/ir/verify.h"

#include <queue>
#include <string>
#include <unordered_set>

namespace kiln {
namespace {

std::string node_label(const Graph& g, int index) {
  const Node& n = g.nodes[static_cast<size_t>(index)];
  return "node '" + n.name + "' (" + std::string(op_name(n.op)) + ")";
}

}  // namespace

Status graph_verify(const Graph& graph) {
  const size_t num_values = graph.values.size();
  std::vector<int> producer(num_values, -1);
  std::vector<bool> is_source(num_values, false);
  for (ValueId id : graph.inputs) {
    KILN_REQUIRE(id >= 0 && static_cast<size_t>(id) < num_values, invalid_graph, "graph input id ", id, " is out of range");
    is_source[static_cast<size_t>(id)] = true;
  }
  for (const auto& [id, tensor] : graph.initializers) is_source[static_cast<size_t>(id)] = true;

  std::unordered_set<std::string> node_names;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    const int index = static_cast<int>(i);
    KILN_REQUIRE(!node.name.empty(), invalid_graph, "node #", i, " (", op_name(node.op), ") has no name");
    KILN_REQUIRE(node_names.insert(node.name).second, invalid_graph, "duplicate node name '", node.name, "'");
    for (ValueId out : node.outputs) {
      if (out == kNoValue) continue;
      KILN_REQUIRE(out >= 0 && static_cast<size_t>(out) < num_values, invalid_graph, node_label(graph, index),
                   " writes value id ", out, ", which does not exist");
      const size_t u = static_cast<size_t>(out);
      KILN_REQUIRE(!is_source[u], invalid_graph, node_label(graph, index), " writes '", graph.values[u].name,
                   "', which is a graph input or initializer");
      KILN_REQUIRE(producer[u] < 0, invalid_graph, "value '", graph.values[u].name, "' is produced by both ",
                   node_label(graph, producer[u]), " and ", node_label(graph, index));
      producer[u] = index;
    }
  }
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (ValueId in : graph.nodes[i].inputs) {
      if (in == kNoValue) continue;
      KILN_REQUIRE(in >= 0 && static_cast<size_t>(in) < num_values, invalid_graph, node_label(graph, static_cast<int>(i)),
                   " reads value id ", in, ", which does not exist");
      const size_t u = static_cast<size_t>(in);
      KILN_REQUIRE(is_source[u] || producer[u] >= 0, invalid_graph, node_label(graph, static_cast<int>(i)), " reads '",
                   graph.values[u].name, "', which no node produces and which is not a graph input or initializer");
    }
  }
  for (ValueId out : graph.outputs) {
    KILN_REQUIRE(out >= 0 && static_cast<size_t>(out) < num_values, invalid_graph, "graph output id ", out, " is out of range");
    const size_t u = static_cast<size_t>(out);
    KILN_REQUIRE(is_source[u] || producer[u] >= 0, invalid_graph, "graph output '", graph.values[u].name,
                 "' is not produced by any node");
  }
  return graph_topo_order(graph).status();
}

Result<std::vector<int>> graph_topo_order(const Graph& graph) {
  const size_t n = graph.nodes.size();
  std::vector<int> producer(graph.values.size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (ValueId out : graph.nodes[i].outputs)
      if (out != kNoValue) producer[static_cast<size_t>(out)] = static_cast<int>(i);

  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(n);
  for (size_t i = 0; i < n; ++i) {
    for (ValueId in : graph.nodes[i].inputs) {
      if (in == kNoValue) continue;
      const int p = producer[static_cast<size_t>(in)];
      if (p < 0) continue;
      ++pending[i];
      consumers[static_cast<size_t>(p)].push_back(static_cast<int>(i));
    }
  }
  // Kahn's algorithm with a min-heap on the original index keeps the given order when valid.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int c : consumers[static_cast<size_t>(i)])
      if (--pending[static_cast<size_t>(c)] == 0) ready.push(c);
  }
  if (order.size() != n) {
    // Walk upstream through unfinished producers until a node repeats: that node is on a cycle
    // (the first unfinished node may merely sit downstream of one).
    int at = 0;
    while (pending[static_cast<size_t>(at)] == 0) ++at;
    std::vector<bool> seen(n, false);
    while (!seen[static_cast<size_t>(at)]) {
      seen[static_cast<size_t>(at)] = true;
      for (ValueId in : graph.nodes[static_cast<size_t>(at)].inputs) {
        const int p = in == kNoValue ? -1 : producer[static_cast<size_t>(in)];
        if (p >= 0 && pending[static_cast<size_t>(p)] > 0) {
          at = p;
          break;
        }
      }
    }
    return make_error(ErrorCode::invalid_graph, "the graph has a cycle through ", node_label(graph, at));
  }
  return order;
}

Status graph_sort(Graph& graph) {
  auto order = graph_topo_order(graph);
  if (!order) return order.status();
  std::vector<Node> sorted;
  sorted.reserve(graph.nodes.size());
  for (int i : *order) sorted.push_back(std::move(graph.nodes[static_cast<size_t>(i)]));
  graph.nodes = std::move(sorted);
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (ValueId out : graph.nodes[i].outputs)
      if (out != kNoValue) graph.value(out).producer = static_cast<int>(i);
  return Status::ok();
}

}  // namespace kiln

// Structural checks of a graph. Errors name the offending node or value.
#pragma once

#include <vector>

#include "compilers/ir/graph.h"

namespace kiln {

// Dangling edges, values produced twice, duplicate node names, missing graph outputs and
// cycles. Requires nothing; guarantees on success that graph_topo_order succeeds.
Status graph_verify(const Graph& graph);

// Node indices in an order where every node follows its producers (stable: keeps the given
// order where it is already valid). A cycle is an error naming a node on it.
Result<std::vector<int>> graph_topo_order(const Graph& graph);

// Reorders graph.nodes topologically (and fixes producers).
Status graph_sort(Graph& graph);

}  // namespace kiln

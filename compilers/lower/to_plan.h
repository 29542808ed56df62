// Lowers a verified, topologically sorted Graph into an executable Plan (one slot per value).
#pragma once

#include "compilers/ir/graph.h"
#include "kernels/plan.h"

namespace kiln {

// Requires: graph_verify passed and nodes are in topological order (graph_sort).
Plan graph_to_plan(const Graph& graph);

}  // namespace kiln

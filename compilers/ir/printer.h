// A readable text dump of a graph: one line per node, with attributes and inferred types.
#pragma once

#include <ostream>

#include "compilers/ir/graph.h"

namespace kiln {

void graph_print(const Graph& graph, std::ostream& os);

}  // namespace kiln

// eliminate_dead_nodes: removes nodes none of whose outputs is read or is a graph output, then
// initializers nothing reads. Requires: topological order. Guarantees: every remaining node
// contributes to a graph output.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_eliminate_dead_nodes(Graph& graph, const PassContext& ctx);

}  // namespace kiln

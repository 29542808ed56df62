// fold_constants: evaluates, with each op's reference kernel, every node whose inputs are all
// initializers (or absent optional inputs), and Shape nodes whose input has a concrete shape
// (after the runner's bindings); their outputs become initializers under the same value ids and
// names, and the nodes are removed. Folding runs in topological order, so whole chains
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape's shape input, Constant -> Cast, ...) fold
// in one sweep. Outputs over kFoldMaxElements elements are not folded (a tiny expression must not
// expand into gigabytes of weights), nor is a node whose kernel fails (left for run time to report).
// Initializers that only folded nodes read are dropped; non-constant nodes that only fed a folded
// Shape are left for eliminate_dead_nodes.
// Requires: fresh types (the runner's). Guarantees: no remaining node has only constant inputs
// unless an output would exceed the cap or its kernel failed; graph outputs that became constant
// stay graph outputs (now initializers).
#pragma once

#include <cstdint>

#include "compilers/passes/pass.h"

namespace kiln {

inline constexpr int64_t kFoldMaxElements = int64_t{64} << 20;  // per folded output

Result<bool> pass_fold_constants(Graph& graph, const PassContext& ctx);

}  // namespace kiln

// Shape and type inference over a whole graph, using each op's `infer` (kernels/op_def.h).
#pragma once

#include <unordered_map>

#include "compilers/ir/graph.h"

namespace kiln {

struct ShapeInferenceOptions {
  DimBindings bindings;  // symbolic dims to fix, e.g. {"batch": 1}; applied to graph inputs
  // Nodes whose inputs are all known and whose outputs hold at most this many elements are
  // evaluated, so shape arithmetic (Shape -> Gather -> Concat -> Reshape) resolves statically.
  int64_t max_fold_elements = 1 << 16;
};

struct ShapeInferenceResult {
  // Values computed while inferring (small constant subgraphs), by value id.
  std::unordered_map<ValueId, Tensor> known_values;
};

// Requires: graph_verify passed. Guarantees: every value reachable from the inputs has its
// type set; a conflict with a declared graph-output type is an error naming the output.
Result<ShapeInferenceResult> graph_infer_shapes(Graph& graph, const ShapeInferenceOptions& options = {});

}  // namespace kiln

// merge_concats: flattens a Concat whose input is another Concat on the same axis into one
// (BrainSlug's concat merging):
//   Concat(a, Concat(b, c), d; axis)  =>  Concat(a, b, c, d; axis)
// Nested chains flatten in one sweep (nodes are visited in topological order, so an inner Concat
// is already flat when its reader is visited). The inner Concat then has no reader and goes.
// Requires: topological order, inferred types. Left alone: an inner Concat whose output has
// another reader (or is read twice by the outer one) or is a graph output, and one on another
// axis or of unknown rank.
// Guarantees: topological order (the inner Concat's inputs precede it, hence the outer one);
// results unchanged bit for bit.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_merge_concats(Graph& graph, const PassContext& ctx);

}  // namespace kiln

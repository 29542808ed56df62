// eliminate_identity: removes Identity nodes and Dropout nodes whose mask output is unused
// (inference Dropout is the identity). Readers of the output read the input instead; when the
// output is a graph output, the input's producer is made to write it, keeping output names.
// Requires: nothing. Guarantees: no Identity/mask-free Dropout remains except one that copies a
// graph input or another graph output straight to a graph output.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_eliminate_identity(Graph& graph, const PassContext& ctx);

}  // namespace kiln

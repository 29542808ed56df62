// reorder_pool_activation: moves an elementwise activation that feeds a MaxPool behind it, so the
// activation runs on the pooled (smaller) tensor (BrainSlug's pool/activation reorder):
//   MaxPool(act(x))  =>  act(MaxPool(x))
// Exact for every monotonic non-decreasing act, since then max(act(a), act(b)) = act(max(a, b)):
// Relu, Clip, Sigmoid, Tanh, Softplus, and LeakyRelu/Elu/HardSigmoid/Selu with non-negative
// slopes. Not for AveragePool (act does not commute with a mean) nor HardSwish (not monotonic).
// The activation then writes the MaxPool's output (its name is kept); the pooled, not yet
// activated value is a new value named after it.
// Run it after fuse_activation: an activation fused into the producing Conv costs nothing, while
// one left standalone costs a pass over memory, which this pass makes smaller.
// Requires: topological order, inferred types. Left alone: an activation output with another
// reader or that is a graph output; a MaxPool with an Indices output, dilations other than 1,
// or a pad not smaller than its kernel (a window over padding alone would yield the lowest float,
// not act(lowest)); non-float tensors.
// Guarantees: topological order; results unchanged bit for bit.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_reorder_pool_activation(Graph& graph, const PassContext& ctx);

}  // namespace kiln

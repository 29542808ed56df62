// fuse_residual_add: folds Add(a, b), where a is the output of a Conv, Gemm or MatMul, into that
// op as its residual input (kernels/post_ops.h: y = act(op(x) + residual); Conv and Gemm take
// it as input 3, MatMul too (after its bias)). The op then writes the Add's output and moves to the Add's
// place in the node order, so b (computed before the Add) is ready; the Add disappears. When
// both operands qualify, the op produced later is fused, the other one becoming the residual.
// Run it before fuse_activation, so that Add → Relu ends as one op with residual and relu.
// Requires: topological order, inferred types. Left alone: an op that is not float32 or already
// has an activation or a residual; a that is a graph output or has any reader besides this one
// Add; Add(a, a); b whose dtype or shape is not exactly a's (no broadcasting) or is unknown.
// Guarantees: topological order (b never depends on a, whose only reader is the Add); results
// unchanged up to float rounding.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_fuse_residual_add(Graph& graph, const PassContext& ctx);

}  // namespace kiln

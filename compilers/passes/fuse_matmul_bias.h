// fuse_matmul_bias: folds Add(MatMul(A, B), c), where B is 2-D with N columns and c a float32
// constant of N values along the last axis ([N], [1, N], [1, 1, N], ...), into the MatMul as its
// bias (input 2, kiln's: oneDNN's and cuBLASLt's bias). A Linear layer applied to more than 2-D
// data is exported this way (ConvNeXt's MLPs on [N, H, W, C], transformers' on [N, seq, C]):
// the Add is one more pass over the output, and it stood between the MatMul and its GELU, so
// fuse_activation could not take the GELU into the MatMul's epilogue.
// Run it before fuse_residual_add and fuse_activation, so the Add of the residual and the
// activation after the bias fuse too.
// Requires: topological order, inferred types. Left alone: a MatMul that already has a bias,
// residual or activation, is not float32, has a B that is not 2-D; an output that is a graph output
// or is read by anything besides this one Add; a c that is not constant or has another shape.
// Guarantees: the MatMul writes the Add's output; results bit-identical (the bias is added in
// float32 after the product, as the Add did).
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_fuse_matmul_bias(Graph& graph, const PassContext& ctx);

}  // namespace kiln

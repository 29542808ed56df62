// fuse_activation: folds the activation that follows a Conv, Gemm, MatMul or BatchNormalization into its fused
// epilogue (kernels/post_ops.h): y = act(op(x) + residual). The activation's output value
// becomes the op's output; the activation's nodes, and the constants only they read, go.
// Recognized: Relu, Clip with constant (or absent) min/max, LeakyRelu, Sigmoid, HardSigmoid,
// HardSwish, Tanh, Elu, SiLU as Mul(x, Sigmoid(x)) and erf-GELU as PyTorch exports it,
// Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5), or as 0.5 * x * (1 + erf(x / √2)) in any grouping
// of the two Muls.
// Requires: topological order, inferred types. Left alone: ops that are not float32 or already
// have an activation, an op output that is a graph output or has readers outside the pattern,
// a pattern whose intermediate values are graph outputs or read elsewhere, non-constant or
// non-scalar parameters, and patterns whose output type is not exactly the op's output type.
// Guarantees: topological order; at most one activation per op; results unchanged up to float
// rounding.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_fuse_activation(Graph& graph, const PassContext& ctx);

}  // namespace kiln

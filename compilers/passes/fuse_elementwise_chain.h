// fuse_elementwise_chain: groups of two or more connected float32 elementwise nodes become one
// ElementwiseChain node (kernels/elementwise_program.h), which a kernel runs chunk by chunk in
// cache, reading each input once and writing the result once instead of one pass over memory per
// op: ConvNeXt's MatMul -> Add(bias) -> GELU written out (Div, Erf, Add, Mul, Mul), and its layer
// scale Mul -> residual Add.
// Taken: Add Sub Mul Div, Max and Min of two inputs, Pow, PRelu, LeakyRelu, Relu, Sigmoid, Tanh,
// Erf, Exp, Log, Sqrt, Neg, Abs, Reciprocal, Clip with constant (or one absent) bounds,
// HardSigmoid, HardSwish; constant one-element operands become the program's scalars.
// A group: every node's output has the group's output type (float32, known shape), every input
// from outside the group broadcasts to it without changing it, and only one value leaves the
// group (read outside it or a graph output): the last node's. Outside inputs with the output's
// exact shape: the first is X, the others operands like the broadcast ones.
// Requires: topological order, inferred types. Runs after fuse_activation, so an activation a
// Conv/Gemm/MatMul/BatchNormalization epilogue can take is gone by then.
// Left alone: single nodes, nodes that broadcast their result up (Add([N,1], [1,C])), an
// intermediate read outside the group or that is a graph output (the group ends there), opset<7
// broadcasts (legacy_axis), groups with no input of the output's shape.
// Guarantees: topological order; the chain computes what the nodes computed, with the same float
// operations in the same order.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_fuse_elementwise_chain(Graph& graph, const PassContext& ctx);

}  // namespace kiln

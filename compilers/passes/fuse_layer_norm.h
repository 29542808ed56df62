// fuse_layer_norm: the LayerNorm that exporters before opset 17 write as nine nodes
//   m = ReduceMean(x, axes=[last]); d = Sub(x, m); v = ReduceMean(Pow(d, 2) or Mul(d, d), [last]);
//   y = Div(d, Sqrt(Add(v, eps)))  [then Mul(y, gamma)]  [then Add(., beta)]
// becomes one LayerNormalization(x, gamma or ones, beta, axis=-1, epsilon=eps), which oneDNN runs
// in one pass per row (kernels/onednn/layernorm.cpp) instead of six passes over the tensor, two of
// them broadcasting binaries oneDNN has no fast path for (ConvNeXt: 70% of its time).
// Requires: inferred types; constants folded (eps, the exponent, gamma and beta are initializers).
// Left alone: other axes, keepdims=0, an eps, gamma or beta that is not a constant of the
// right shape ([C] or broadcastable to it as [1, .., C]), intermediates with other readers.
// Guarantees: topological order; results unchanged up to float rounding.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_fuse_layer_norm(Graph& graph, const PassContext& ctx);

}  // namespace kiln

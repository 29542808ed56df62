// fold_batchnorm: folds an inference BatchNormalization into the Conv, ConvTranspose or Gemm that
// produces its input. With s = scale / sqrt(var + epsilon) and t = beta - mean * s per channel:
//   Conv(X, W, B?) -> BN           =>  Conv(X, W[oc,...] * s[oc], B * s + t)
//   ConvTranspose(X, W, B?) -> BN  =>  ConvTranspose(X, W[ic, j,...] * s[oc], B * s + t)
//                                      where oc = (ic / (C / group)) * (M / group) + j
//   Gemm(A, B, C?) -> BN           =>  Gemm(A, B * s[n], s * (beta * C) + t), alpha kept, beta 1
// The producer then writes the BatchNormalization's output (its name is kept) and the node goes.
// Folded weights are new initializers; the old ones are dropped only when nothing reads them.
// Requires: the producer's output has no other reader and is not a graph output; W, B/C and the
// BN parameters are float32 initializers of matching sizes; the producer carries no fused
// epilogue or residual input. Any other BatchNormalization stays as it is.
// Guarantees: the model computes the same function up to float rounding.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_fold_batchnorm(Graph& graph, const PassContext& ctx);

}  // namespace kiln

// The reference implementation of fused epilogues (kernels/post_ops.h) for Conv, Gemm and MatMul.
#pragma once

#include "kernels/op_def.h"

namespace kiln::ref {

// Validates the fused activation and precision attributes and, when input `residual_index` is
// present, that it has the output's dtype and shape (a residual is added as is, never broadcast).
Status infer_epilogue(const InferContext& ctx, size_t residual_index, const ValueType& output);

// y = act(y + residual), in place on the op's computed output.
Status run_epilogue(const RunContext& ctx, size_t residual_index, Tensor& y);

}  // namespace kiln::ref

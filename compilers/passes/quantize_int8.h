// int8 post-training quantization: calibrates the graph on the user's data (compilers/quantize/)
// and marks every Conv, Gemm and MatMul with constant weights precision=int8 with the scales of
// its input, and of its output where every reader can take it quantized (another int8 op, as
// input or residual, or a pooling). Nodes named in PassContext::keep_fp32 stay float32.
// The reference kernels ignore the marks (they remain the fp32 oracle); kernels/quantization.h
// has the attribute contract.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_quantize_int8(Graph& graph, const PassContext& ctx);

}  // namespace kiln

// prune_2_4: 2:4 semi-structured sparsity, without fine-tuning, for GPU targets: in every run of
// four consecutive weights along a layer's reduction axis (a Conv's Ci*kh*kw per output channel,
// a Gemm's or MatMul's K per output column) the two smallest magnitudes are set to zero — the
// pattern NVIDIA's sparse tensor cores (Ampere and later, cuSPARSELt) run at up to twice the dense
// rate. Layers whose reduction length is not a multiple of 4, grouped convolutions and weights that
// are not float32 initializers are left dense. Each layer is marked sparsity_pattern="2:4" for the
// GPU backend; CPU kernels run the pruned weights dense (no CPU kernel gains from the pattern).
// Not in the default pipeline, not exact: its accuracy cost must be measured (kiln verify).
#pragma once

#include <string_view>

#include "compilers/passes/pass.h"

namespace kiln {

inline constexpr std::string_view kSparsityPatternAttr = "sparsity_pattern";

Result<bool> pass_prune_2_4(Graph& graph, const PassContext& ctx);

}  // namespace kiln

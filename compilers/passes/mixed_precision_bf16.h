// mixed_precision_bf16: every Conv, Gemm and MatMul computes in bfloat16 on the fast kernels
// (node attribute precision="bf16", kernels/precision.h): oneDNN then runs them on AMX or
// AVX512_BF16 with float32 accumulation, and the activations between consecutive bf16 ops stay
// bfloat16 in oneDNN layouts (half the bytes); ops without a bf16 kernel read float32 converted at
// the region's border. Weights are rounded to bfloat16 when the engine prepacks them; biases,
// normalizations and the final outputs stay float32.
// Not in the default pipeline: it trades accuracy (about 3 significant digits per value) for speed,
// which the verification stage must measure against the fp32 reference for each model.
// Nodes named in PassContext::keep_fp32 stay float32 (a user list or accuracy control).
// Guarantees: the graph's function is unchanged (the reference executor ignores the attribute).
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_mixed_precision_bf16(Graph& graph, const PassContext& ctx);

}  // namespace kiln

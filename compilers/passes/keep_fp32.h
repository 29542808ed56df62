// The layer-wise precision policy the precision passes (mixed_precision_bf16, quantize_int8)
// share: the nodes named in PassContext::keep_fp32 — a user's list or accuracy control's choice —
// stay float32.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

bool kept_in_fp32(const PassContext& ctx, const Node& node);

// Every name must be a node of `graph`: a misspelt layer would otherwise silently run reduced.
Status check_kept_layers(const Graph& graph, const PassContext& ctx);

}  // namespace kiln

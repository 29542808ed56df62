// The layer-wise precision policy the precision passes (mixed_precision_bf16, quantize_int8)
// share: the nodes named in PassContext::keep_fp32 — a user's list or accuracy control's choice —
// stay float32.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compilers/passes/pass.h"

namespace kiln {

bool kept_in_fp32(const PassContext& ctx, const Node& node);

// Every name must be a node of `graph`: a misspelt layer would otherwise silently run reduced.
// `role` completes the error: "layer 'x' <role> is not a node of the compiled graph".
Status check_layer_names(const Graph& graph, const std::vector<std::string>& names, std::string_view role);
Status check_kept_layers(const Graph& graph, const PassContext& ctx);  // ctx.keep_fp32

}  // namespace kiln

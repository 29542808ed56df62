// prune_channels: structured channel pruning by filter L1 norm, without fine-tuning. In every
// prunable channel group (compilers/analysis/channel_groups.h: the values whose channels must
// stay aligned, e.g. a residual stream with all its producers and readers) it removes
// round(ctx.prune.channel_ratio * C) channels, at least one kept. A channel's importance is the
// L1 norm of its filter in each producer, divided by that producer's mean filter norm (so that
// producers of different scales weigh alike), summed over the group's producers; the least
// important go. The weights really shrink: producers' weights and biases on axis 0 (Gemm/MatMul:
// the output-feature axis), BatchNormalization parameters, depthwise weights and their `group`,
// readers' weights on their input-channel axis, explicit Reshape shapes.
// Requires: shape inference ran (concrete channel counts; MACs in the report need bound dims).
// Guarantees: a valid graph whose shapes the runner re-infers; the model's function changes
// (exactly preserved only when every removed channel's activation is zero). It reports to
// ctx.log the groups pruned and kept (with why), channels and MACs before -> after, and that no
// fine-tuning was done; the accuracy cost is for `kiln verify` to measure.
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_prune_channels(Graph& graph, const PassContext& ctx);

}  // namespace kiln

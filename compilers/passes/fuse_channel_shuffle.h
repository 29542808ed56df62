// fuse_channel_shuffle: ShuffleNet's channel shuffle -- Concat(axis 1) -> Reshape [N, g, C/g, H, W]
// -> Transpose (0, 2, 1, 3, 4) -> Reshape [N, C, H, W] -- becomes one ChannelShuffle node
// (kernels/reference/channel_shuffle.cpp), together with the Slices (or the Split) on axis 1 that cut
// the shuffled tensor into contiguous parts when they are its only readers: each output channel is
// then copied once from the input holding it, where the unfused graph writes the joined tensor, its
// transpose and the parts (ShuffleNetV2 x1.0 int8, batch 8: 28% of the model's time).
// Requires: inferred types with known channel counts.
// Left alone: other permutations or reshapes, a Concat, Reshape or Transpose read by anything else
// or that is a graph output, Slices that overlap, leave channels out or step.
// Guarantees: topological order (the new node takes the last Reshape's place, after every input of
// the Concat and before every reader of the parts); results unchanged to the bit (a copy).
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_fuse_channel_shuffle(Graph& graph, const PassContext& ctx);

}  // namespace kiln

// Coupled channel dimensions: which values' channel axes (axis 1) must keep the same channels,
// because an op maps channel c of its input to channel c of its output or adds two of them.
// Union-find over values: a non-grouped Conv's, a Gemm's or a constant-B MatMul's output starts
// a group; channel-wise ops join their inputs and outputs to it (unary activations,
// BatchNormalization, Add/Sub/Mul/Div/Max/Min/Sum whose operands keep channel c at c (same shape,
// or ones on other axes: a squeeze-excite scale), pooling, depthwise Conv, Flatten and
// Reshape of [N, C, 1, ...] to [N, C]); Conv, Gemm and constant-B MatMul read it through a weight
// axis, Gemm and MatMul also through a Flatten of the whole map (H*W weight rows per channel). A group is prunable only when every op touching one of its values is one of those (with
// constant float32 weights of matching sizes and no fused epilogue) and none of its values is a
// graph input or output; anything else (Concat, Split, Slice, Transpose, Softmax, a Reshape of a
// spatial map...) keeps the whole group as it is.
// Requires: shape inference ran (channel counts must be concrete).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compilers/ir/graph.h"

namespace kiln {

// One weight-like input whose axis indexes the group's channels.
struct ChannelSlice {
  int node = -1;    // node index
  size_t input = 0;  // which input of the node
  int64_t axis = 0;  // which axis of that (constant) input
  int64_t block = 1;  // entries of the axis per channel (a Gemm reading a flattened [N, C, H, W]: H*W)
};

struct ChannelGroup {
  int64_t channels = 0;
  // The weights that make the channels (Conv W axis 0, Gemm B rows or columns, MatMul B columns):
  // their filters' L1 norms rank the channels.
  std::vector<ChannelSlice> producers;
  // Every constant indexed by the group's channels, producers included: biases, BatchNorm
  // parameters, depthwise weights, readers' weights on their input axis.
  std::vector<ChannelSlice> slices;
  std::vector<int> depthwise;   // depthwise Convs in the group: their `group` attribute is C
  std::vector<int> reshapes;    // Reshapes to [N, C] whose shape names C explicitly
  std::vector<ValueId> values;  // the values whose axis 1 is the group's channels
  bool prunable = false;
  std::string why_not;  // when not prunable: the first reason found, naming the node or value
};

// The groups that contain at least one producer, in the order of their first producer.
std::vector<ChannelGroup> channel_groups(const Graph& graph);

}  // namespace kiln

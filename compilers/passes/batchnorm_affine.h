// An inference BatchNormalization as the per-channel affine map it is: y = x * mul[c] + add[c]
// with mul = scale / sqrt(var + epsilon) and add = B - mean * mul, computed in double the way the
// reference kernel does. Shared by the passes that fold or fuse a BatchNormalization.
#pragma once

#include <optional>
#include <vector>

#include "compilers/ir/graph.h"

namespace kiln {

struct ChannelAffine {
  std::vector<double> mul, add;
  int64_t channels() const { return static_cast<int64_t>(mul.size()); }
};

// The float32 initializer `id`, or nullptr.
const Tensor* graph_f32_initializer(const Graph& graph, ValueId id);

// The affine map of `bn` when it is an inference BatchNormalization whose parameters are float32
// initializers of one length and whose epsilon is finite and >= 0. Its fused activation, if any,
// is the caller's to check.
std::optional<ChannelAffine> batchnorm_affine(const Graph& graph, const Node& bn);

}  // namespace kiln

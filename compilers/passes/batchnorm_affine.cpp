#include "compilers/passes/batchnorm_affine.h"

#include <cmath>

namespace kiln {

const Tensor* graph_f32_initializer(const Graph& graph, ValueId id) {
  if (id == kNoValue) return nullptr;
  auto it = graph.initializers.find(id);
  return it != graph.initializers.end() && it->second.dtype() == DType::f32 ? &it->second : nullptr;
}

std::optional<ChannelAffine> batchnorm_affine(const Graph& graph, const Node& bn) {
  if (bn.inputs.size() != 5 || bn.outputs.size() != 1 || bn.outputs[0] == kNoValue) return std::nullopt;
  auto eps = bn.attrs.get_float("epsilon", 1e-5f);
  auto training = bn.attrs.get_int("training_mode", 0);
  if (!eps || !std::isfinite(*eps) || *eps < 0.0f || !training || *training != 0) return std::nullopt;
  const Tensor* p[4];  // scale, B, mean, var
  for (size_t i = 0; i < 4; ++i) {
    p[i] = graph_f32_initializer(graph, bn.inputs[i + 1]);
    if (!p[i] || p[i]->rank() != 1 || p[i]->dim(0) != p[0]->dim(0)) return std::nullopt;
  }
  const int64_t c = p[0]->dim(0);
  const float *scale = p[0]->data<float>(), *beta = p[1]->data<float>(), *mean = p[2]->data<float>(),
              *var = p[3]->data<float>();
  ChannelAffine a;
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mul = scale[ch] / std::sqrt(static_cast<double>(var[ch]) + *eps);
    a.mul.push_back(mul);
    a.add.push_back(beta[ch] - mean[ch] * mul);
  }
  return a;
}

}  // namespace kiln

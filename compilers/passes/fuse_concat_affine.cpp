#include "compilers/passes/fuse_concat_affine.h"

#include "compilers/ir/rewrite.h"
#include "compilers/passes/batchnorm_affine.h"
#include "kernels/post_ops.h"

namespace kiln {
namespace {

Tensor to_f32(const std::vector<double>& values) {
  Tensor t = Tensor::zeros(DType::f32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = static_cast<float>(values[i]);
  return t;
}

// True when `concat` joins rank >= 2 values on axis 1.
bool joins_channels(const Graph& graph, const Node& concat) {
  return !concat.inputs.empty() && graph_concat_axis(graph, concat) == 1;
}

}  // namespace

Result<bool> pass_fuse_concat_affine(Graph& graph, const PassContext&) {
  const auto consumers = graph_consumers(graph);
  std::vector<bool> remove(graph.nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& bn = graph.nodes[i];
    if (bn.op != OpKind::BatchNormalization || bn.inputs.size() != 5) continue;
    const ValueId x = bn.inputs[0];
    const int p = graph.value(x).producer;
    if (p < 0 || remove[static_cast<size_t>(p)] || consumers[static_cast<size_t>(x)].size() != 1 ||
        graph_is_output(graph, x))
      continue;
    const Node& concat = graph.nodes[static_cast<size_t>(p)];
    const auto affine = batchnorm_affine(graph, bn);
    const auto post = post_ops_from_attrs(bn.attrs);
    if (!joins_channels(graph, concat) || !affine || !post) continue;
    const ValueType& xt = graph.value(x).type;
    if (xt.dtype != DType::f32 || !xt.shape[1].known() || xt.shape[1].value != affine->channels()) continue;

    Node fused{bn.name, OpKind::ConcatAffine, {}, {}, bn.outputs};
    fused.inputs.push_back(graph_add_initializer(graph, bn.name + ".scale", to_f32(affine->mul)));
    fused.inputs.push_back(graph_add_initializer(graph, bn.name + ".shift", to_f32(affine->add)));
    fused.inputs.insert(fused.inputs.end(), concat.inputs.begin(), concat.inputs.end());
    post_ops_to_attrs(*post, fused.attrs);
    graph.value(x).producer = -1;
    remove[static_cast<size_t>(p)] = true;
    graph.nodes[i] = std::move(fused);
    changed = true;
  }
  if (changed) {
    graph_remove_nodes(graph, remove);
    graph_drop_unused_initializers(graph);
  }
  return changed;
}

}  // namespace kiln

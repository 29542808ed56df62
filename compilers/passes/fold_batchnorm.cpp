#include "compilers/passes/fold_batchnorm.h"

#include <cmath>
#include <optional>
#include <unordered_set>

#include "compilers/ir/rewrite.h"
#include "compilers/passes/batchnorm_affine.h"
#include "compilers/ir/verify.h"
#include "kernels/post_ops.h"

namespace kiln {
namespace {

// The producer's new weight and bias (Gemm: B and C).
struct Folded {
  Tensor weight, bias;
};

// The optional input i: absent (a null tensor, ok) or a float32 initializer (ok); anything else fails.
bool optional_constant(const Graph& graph, const Node& node, size_t i, const Tensor*& out) {
  out = nullptr;
  if (i >= node.inputs.size() || node.inputs[i] == kNoValue) return true;
  out = graph_f32_initializer(graph, node.inputs[i]);
  return out != nullptr;
}

// No fused activation and no residual input: the producer's output is the plain op's result.
bool plain_compute(const Node& node) {
  auto post = post_ops_from_attrs(node.attrs);
  return node.inputs.size() <= 3 && post && post->empty();
}

// bias'[oc] = bias[oc] * mul[oc] + add[oc] (bias 0 when absent).
Tensor folded_bias(const Tensor* bias, const ChannelAffine& bn) {
  Tensor out = Tensor::zeros(DType::f32, {bn.channels()});
  for (int64_t oc = 0; oc < bn.channels(); ++oc) {
    const double b = bias ? bias->data<float>()[oc] : 0.0;
    out.data<float>()[oc] = static_cast<float>(b * bn.mul[static_cast<size_t>(oc)] + bn.add[static_cast<size_t>(oc)]);
  }
  return out;
}

// Conv: W [M, C/group, k...], output channel oc is W's row oc.
std::optional<Folded> fold_conv(const Graph& graph, const Node& conv, const ChannelAffine& bn) {
  const Tensor* w = graph_f32_initializer(graph, conv.inputs[1]);
  const Tensor* b = nullptr;
  if (!w || !optional_constant(graph, conv, 2, b)) return std::nullopt;
  if (w->rank() < 3 || w->dim(0) != bn.channels() || (b && (b->rank() != 1 || b->dim(0) != bn.channels())))
    return std::nullopt;
  const int64_t per_channel = w->numel() / bn.channels();
  Tensor weight = Tensor::zeros(DType::f32, w->shape());
  for (int64_t i = 0; i < w->numel(); ++i)
    weight.data<float>()[i] = static_cast<float>(w->data<float>()[i] * bn.mul[static_cast<size_t>(i / per_channel)]);
  return Folded{std::move(weight), folded_bias(b, bn)};
}

// ConvTranspose: W [C, M/group, k...]; W[ic, j, ...] feeds output channel (ic / (C/group)) * (M/group) + j.
std::optional<Folded> fold_conv_transpose(const Graph& graph, const Node& node, const ChannelAffine& bn) {
  const Tensor* w = graph_f32_initializer(graph, node.inputs[1]);
  const Tensor* b = nullptr;
  auto group = node.attrs.get_int("group", 1);
  if (!w || !optional_constant(graph, node, 2, b) || !group || *group < 1 || w->rank() < 3) return std::nullopt;
  const int64_t c = w->dim(0), mg = w->dim(1);
  if (c % *group != 0 || mg * *group != bn.channels() || (b && (b->rank() != 1 || b->dim(0) != bn.channels())))
    return std::nullopt;
  const int64_t cg = c / *group, kvol = mg == 0 || c == 0 ? 0 : w->numel() / (c * mg);
  Tensor weight = Tensor::zeros(DType::f32, w->shape());
  for (int64_t ic = 0; ic < c; ++ic)
    for (int64_t j = 0; j < mg; ++j) {
      const double mul = bn.mul[static_cast<size_t>((ic / cg) * mg + j)];
      const int64_t base = (ic * mg + j) * kvol;
      for (int64_t t = 0; t < kvol; ++t)
        weight.data<float>()[base + t] = static_cast<float>(w->data<float>()[base + t] * mul);
    }
  return Folded{std::move(weight), folded_bias(b, bn)};
}

// Gemm: Y [M, N] = alpha * A' B' + beta * C; channel n is B' column n.
std::optional<Folded> fold_gemm(const Graph& graph, const Node& gemm, const ChannelAffine& bn) {
  const Tensor* bt = graph_f32_initializer(graph, gemm.inputs[1]);
  const Tensor* ct = nullptr;
  auto trans_b = gemm.attrs.get_int("transB", 0);
  auto beta = gemm.attrs.get_float("beta", 1.0f);
  if (!bt || !optional_constant(graph, gemm, 2, ct) || !trans_b || !beta || bt->rank() != 2) return std::nullopt;
  const int64_t n = bt->dim(*trans_b ? 0 : 1), k = bt->dim(*trans_b ? 1 : 0);
  if (n != bn.channels() || (ct && ct->rank() > 2)) return std::nullopt;
  if (*beta == 0.0f) ct = nullptr;  // the kernel ignores C then

  Tensor weight = Tensor::zeros(DType::f32, bt->shape());
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = *trans_b ? j * k + p : p * n + j;
      weight.data<float>()[i] = static_cast<float>(bt->data<float>()[i] * bn.mul[static_cast<size_t>(j)]);
    }

  // C' = mul * (beta * C) + add, broadcast to [rows, N]; 1-D [N] when C has one row.
  int64_t rows = 1, c_rows = 1, c_cols = 1;
  if (ct && ct->rank() >= 1) c_cols = ct->dim(ct->rank() - 1);
  if (ct && ct->rank() == 2) rows = c_rows = ct->dim(0);
  if (c_cols != 1 && c_cols != n) return std::nullopt;
  Tensor bias = Tensor::zeros(DType::f32, rows == 1 ? Shape{n} : Shape{rows, n});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const double c = ct ? static_cast<double>(*beta) *
                                ct->data<float>()[(c_rows == 1 ? 0 : r) * c_cols + (c_cols == 1 ? 0 : j)]
                          : 0.0;
      bias.data<float>()[r * n + j] =
          static_cast<float>(c * bn.mul[static_cast<size_t>(j)] + bn.add[static_cast<size_t>(j)]);
    }
  return Folded{std::move(weight), std::move(bias)};
}

}  // namespace

Result<bool> pass_fold_batchnorm(Graph& graph, const PassContext&) {
  KILN_ASSIGN(order, graph_topo_order(graph));
  const auto consumers = graph_consumers(graph);
  std::vector<bool> remove(graph.nodes.size(), false);
  std::unordered_set<ValueId> maybe_unused;  // replaced weights and BN parameters
  bool changed = false;
  for (int index : order) {
    const Node& bn = graph.nodes[static_cast<size_t>(index)];
    if (bn.op != OpKind::BatchNormalization || bn.inputs.empty() || bn.inputs[0] == kNoValue) continue;
    const ValueId x = bn.inputs[0];
    const int p = graph.value(x).producer;
    if (p < 0 || consumers[static_cast<size_t>(x)].size() != 1 || graph_is_output(graph, x)) continue;
    Node& producer = graph.nodes[static_cast<size_t>(p)];
    if (producer.outputs.size() != 1 || producer.outputs[0] != x || producer.inputs.size() < 2 ||
        !plain_compute(producer))
      continue;
    auto affine = batchnorm_affine(graph, bn);
    const auto post = post_ops_from_attrs(bn.attrs);  // fuse_activation may have given it one: not affine
    if (!affine || !post || !post->empty()) continue;

    // Rules: {producer -> BN} => producer with folded weights (see the header for each formula).
    std::optional<Folded> folded;
    switch (producer.op) {
      case OpKind::Conv: folded = fold_conv(graph, producer, *affine); break;                     // W*s, B*s+t
      case OpKind::ConvTranspose: folded = fold_conv_transpose(graph, producer, *affine); break;  // per group
      case OpKind::Gemm: folded = fold_gemm(graph, producer, *affine); break;                     // B'*s, C*s+t
      default: break;
    }
    if (!folded) continue;

    for (size_t i = 1; i < producer.inputs.size(); ++i)
      if (producer.inputs[i] != kNoValue) maybe_unused.insert(producer.inputs[i]);
    for (size_t i = 1; i < bn.inputs.size(); ++i) maybe_unused.insert(bn.inputs[i]);
    const std::string w_name = graph.value(producer.inputs[1]).name;
    const std::string b_name = producer.inputs.size() > 2 && producer.inputs[2] != kNoValue
                                   ? graph.value(producer.inputs[2]).name
                                   : producer.name + "/bias";
    producer.inputs.resize(3, kNoValue);
    producer.inputs[1] = graph_add_initializer(graph, w_name + "_bn", std::move(folded->weight));
    producer.inputs[2] = graph_add_initializer(graph, b_name + "_bn", std::move(folded->bias));
    if (producer.op == OpKind::Gemm) producer.attrs.set("beta", 1.0f);
    // The producer writes the BN's output, so that value keeps its name (it may be a graph output).
    const ValueId y = bn.outputs[0];
    producer.outputs[0] = y;
    graph.value(y).producer = p;
    graph.value(x).producer = -1;  // x is now an orphan value
    remove[static_cast<size_t>(index)] = true;
    changed = true;
  }
  if (!changed) return false;
  graph_remove_nodes(graph, remove);
  graph_drop_unused_initializers(graph, &maybe_unused);
  return true;
}

}  // namespace kiln

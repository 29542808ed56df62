#include "compilers/analysis/model_stats.h"

#include <algorithm>
#include <unordered_set>

namespace kiln {
namespace {

bool concrete(const ValueType& t) { return t.rank_known && sym_shape_is_concrete(t.shape); }

int64_t value_bytes(const ValueType& t) {
  return shape_numel(sym_shape_concrete(t.shape)) * static_cast<int64_t>(dtype_size(t.dtype));
}

// Multiply-accumulates of the compute-heavy ops; elementwise work is not counted as MACs.
// node_macs' answer for a weight whose shape gives no MAC count (0 output channels, rank 0): the
// shapes are known, so "bind them" would be the wrong advice.
constexpr int64_t kMalformedWeight = -2;

int64_t node_macs(const Graph& g, const Node& node) {
  auto type = [&](size_t i) -> const ValueType* {
    if (i >= node.inputs.size() || node.inputs[i] == kNoValue) return nullptr;
    return &g.value(node.inputs[i]).type;
  };
  const ValueType* out = node.outputs.empty() || node.outputs[0] == kNoValue ? nullptr : &g.value(node.outputs[0]).type;
  switch (node.op) {
    case OpKind::Conv: {
      const ValueType* w = type(1);
      if (!out || !w || !concrete(*out) || !concrete(*w)) return -1;
      // output elements x (input channels per group x kernel volume) = numel(out) x numel(W) / M
      const Shape ws = sym_shape_concrete(w->shape);
      if (ws.empty() || ws[0] <= 0) return kMalformedWeight;  // no MAC count rather than a division by zero
      return shape_numel(sym_shape_concrete(out->shape)) * (shape_numel(ws) / ws[0]);
    }
    case OpKind::ConvTranspose: {
      const ValueType* x = type(0);
      const ValueType* w = type(1);
      if (!x || !w || !concrete(*x) || !concrete(*w)) return -1;
      // every input element is multiplied with (M/group x kernel volume) weights
      const Shape ws = sym_shape_concrete(w->shape);
      if (ws.empty() || ws[0] <= 0) return kMalformedWeight;
      return shape_numel(sym_shape_concrete(x->shape)) * (shape_numel(ws) / ws[0]);
    }
    case OpKind::Gemm:
    case OpKind::MatMul: {
      const ValueType* a = type(0);
      if (!out || !a || !concrete(*out) || !concrete(*a) || a->shape.empty()) return -1;
      const Shape as = sym_shape_concrete(a->shape);
      int64_t k = as.back();
      const auto trans_a = node.attrs.get_int("transA", 0);
      if (node.op == OpKind::Gemm && trans_a && *trans_a != 0) k = as.front();
      return shape_numel(sym_shape_concrete(out->shape)) * k;
    }
    default:
      return 0;
  }
}

}  // namespace

ModelStats model_stats(const Graph& graph) {
  ModelStats stats;
  std::unordered_set<ValueId> counted_params;
  std::vector<int> last_use(graph.values.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (ValueId in : graph.nodes[i].inputs)
      if (in != kNoValue) last_use[static_cast<size_t>(in)] = static_cast<int>(i);
  for (ValueId out : graph.outputs) last_use[static_cast<size_t>(out)] = static_cast<int>(graph.nodes.size());

  int64_t live = 0;
  std::vector<int64_t> live_bytes(graph.values.size(), 0);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    LayerStats layer;
    layer.name = node.name;
    layer.op = node.op;
    ++stats.op_counts[std::string(op_name(node.op))];
    for (ValueId in : node.inputs) {
      if (in == kNoValue || !graph.is_initializer(in) || !counted_params.insert(in).second) continue;
      const Tensor& w = graph.initializers.at(in);
      if (!dtype_is_float(w.dtype())) continue;  // int initializers are shape arguments, not weights
      layer.params += w.numel();
      stats.param_bytes += static_cast<int64_t>(w.nbytes());
    }
    stats.params += layer.params;
    layer.macs = node_macs(graph, node);
    if (layer.macs == kMalformedWeight) {
      layer.macs = -1;
      stats.malformed.push_back(node.name);
    } else if (layer.macs < 0) {
      stats.shapes_unknown = true;
    }
    if (layer.macs > 0) stats.macs += layer.macs;
    if (layer.macs < 0) stats.complete = false;

    int64_t out_bytes = 0;
    bool known = true;
    for (ValueId out : node.outputs) {
      if (out == kNoValue) continue;
      const ValueType& t = graph.value(out).type;
      if (layer.output_type.empty())
        layer.output_type = std::string(dtype_name(t.dtype)) + (t.rank_known ? sym_shape_to_string(t.shape) : "[?]");
      if (!concrete(t)) {
        known = false;
        continue;
      }
      live_bytes[static_cast<size_t>(out)] = value_bytes(t);
      out_bytes += live_bytes[static_cast<size_t>(out)];
    }
    layer.activation_bytes = known ? out_bytes : -1;
    stats.shapes_unknown = stats.shapes_unknown || !known;
    stats.complete = stats.complete && known;
    stats.activation_bytes_total += out_bytes;
    live += out_bytes;
    stats.activation_bytes_peak = std::max(stats.activation_bytes_peak, live);
    for (ValueId in : node.inputs)
      if (in != kNoValue && last_use[static_cast<size_t>(in)] == static_cast<int>(i)) {
        live -= live_bytes[static_cast<size_t>(in)];
        live_bytes[static_cast<size_t>(in)] = 0;
      }
    for (ValueId out : node.outputs)  // outputs nobody reads die at once
      if (out != kNoValue && last_use[static_cast<size_t>(out)] < 0) {
        live -= live_bytes[static_cast<size_t>(out)];
        live_bytes[static_cast<size_t>(out)] = 0;
      }
    stats.layers.push_back(std::move(layer));
  }
  return stats;
}

}  // namespace kiln

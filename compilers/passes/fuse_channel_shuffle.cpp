#include "compilers/passes/fuse_channel_shuffle.h"

#include <algorithm>
#include <optional>

#include "compilers/ir/rewrite.h"

namespace kiln {
namespace {

// The concrete shape of a value, or nothing.
std::optional<Shape> known_shape(const Graph& graph, ValueId v) {
  if (v == kNoValue) return std::nullopt;
  const ValueType& t = graph.value(v).type;
  if (!t.rank_known || !sym_shape_is_concrete(t.shape)) return std::nullopt;
  return sym_shape_concrete(t.shape);
}

// The node producing `v` when `v` has no other reader and is not a graph output.
const Node* sole_producer(const Graph& graph, const std::vector<std::vector<int>>& consumers, ValueId v, OpKind op) {
  if (v == kNoValue || consumers[static_cast<size_t>(v)].size() != 1 || graph_is_output(graph, v)) return nullptr;
  const int p = graph.value(v).producer;
  if (p < 0 || graph.nodes[static_cast<size_t>(p)].op != op) return nullptr;
  return &graph.nodes[static_cast<size_t>(p)];
}

std::vector<int64_t> constant_ints(const Graph& graph, const Node& n, size_t input) {
  if (input >= n.inputs.size() || n.inputs[input] == kNoValue) return {};
  const std::optional<Tensor> t = graph_constant_value(graph, n.inputs[input]);
  if (!t || (t->dtype() != DType::i64 && t->dtype() != DType::i32)) return {};
  std::vector<int64_t> v(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t->dtype() == DType::i64 ? t->data<int64_t>()[i] : t->data<int32_t>()[i];
  return v;
}

// A Slice of channels [begin, end) of a [N, C, H, W] value, step 1.
struct ChannelRange {
  int64_t begin = 0, end = 0;
  ValueId out = kNoValue;
  int node = -1;
};

std::optional<ChannelRange> slice_of_channels(const Graph& graph, int node, int64_t channels) {
  const Node& s = graph.nodes[static_cast<size_t>(node)];
  if (s.op != OpKind::Slice || s.outputs.size() != 1 || s.inputs.size() < 4) return std::nullopt;
  const auto starts = constant_ints(graph, s, 1), ends = constant_ints(graph, s, 2), axes = constant_ints(graph, s, 3);
  const auto steps = constant_ints(graph, s, 4);
  const bool unit_step = s.inputs.size() < 5 || s.inputs[4] == kNoValue || steps == std::vector<int64_t>{1};
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || (axes[0] != 1 && axes[0] != -3) || !unit_step)
    return std::nullopt;
  const auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + channels : v, int64_t{0}, channels); };
  ChannelRange r{clamp(starts[0]), clamp(ends[0]), s.outputs[0], node};
  if (r.begin >= r.end) return std::nullopt;
  return r;
}

// The parts the shuffled value `y` ([N, C, H, W]) is cut into by its readers, in channel order: the
// outputs of Slices that partition [0, C), or of a Split on axis 1; nothing when its readers do
// anything else (then the fused node writes `y` itself).
std::optional<std::vector<ChannelRange>> parts_of(const Graph& graph, const std::vector<std::vector<int>>& consumers,
                                                  ValueId y, int64_t channels) {
  const std::vector<int>& readers = consumers[static_cast<size_t>(y)];
  if (readers.empty() || graph_is_output(graph, y)) return std::nullopt;
  std::vector<ChannelRange> parts;
  if (readers.size() == 1 && graph.nodes[static_cast<size_t>(readers[0])].op == OpKind::Split) {
    const Node& split = graph.nodes[static_cast<size_t>(readers[0])];
    const auto axis = split.attrs.get_int("axis", 0);
    if (!axis || (*axis != 1 && *axis != -3)) return std::nullopt;
    int64_t at = 0;
    for (ValueId out : split.outputs) {
      const auto shape = known_shape(graph, out);
      if (!shape || shape->size() != 4 || (*shape)[1] < 1) return std::nullopt;
      parts.push_back({at, at + (*shape)[1], out, readers[0]});
      at += (*shape)[1];
    }
    if (at != channels) return std::nullopt;
    return parts;
  }
  for (int r : readers) {
    const auto range = slice_of_channels(graph, r, channels);
    if (!range) return std::nullopt;
    parts.push_back(*range);
  }
  std::sort(parts.begin(), parts.end(), [](const ChannelRange& a, const ChannelRange& b) { return a.begin < b.begin; });
  int64_t at = 0;
  for (const ChannelRange& p : parts) {
    if (p.begin != at) return std::nullopt;  // a gap or an overlap (also a Slice read twice by one node)
    at = p.end;
  }
  if (at != channels) return std::nullopt;
  return parts;
}


}  // namespace

Result<bool> pass_fuse_channel_shuffle(Graph& graph, const PassContext&) {
  const auto consumers = graph_consumers(graph);
  std::vector<bool> remove(graph.nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& unshape = graph.nodes[i];  // Reshape [N, C/g, g, H, W] -> [N, C, H, W]
    if (unshape.op != OpKind::Reshape || unshape.outputs.size() != 1 || unshape.inputs.empty()) continue;
    const Node* transpose = sole_producer(graph, consumers, unshape.inputs[0], OpKind::Transpose);
    if (!transpose || transpose->inputs.empty()) continue;
    const Node* reshape = sole_producer(graph, consumers, transpose->inputs[0], OpKind::Reshape);
    if (!reshape || reshape->inputs.empty()) continue;
    const Node* concat = sole_producer(graph, consumers, reshape->inputs[0], OpKind::Concat);
    if (!concat || concat->inputs.empty() || graph_concat_axis(graph, *concat) != 1) continue;
    const auto joined = known_shape(graph, concat->outputs[0]), grouped = known_shape(graph, reshape->outputs[0]);
    const auto y = known_shape(graph, unshape.outputs[0]);
    if (!joined || !grouped || !y || joined->size() != 4 || *y != *joined || grouped->size() != 5) continue;
    const int64_t n = (*joined)[0], c = (*joined)[1], g = (*grouped)[1];
    if (g < 1 || c % g != 0 || *grouped != Shape{n, g, c / g, (*joined)[2], (*joined)[3]}) continue;
    const auto perm = transpose->attrs.get_ints("perm");
    if (!perm || *perm != std::vector<int64_t>{0, 2, 1, 3, 4}) continue;
    const int concat_node = graph.value(reshape->inputs[0]).producer;
    if (remove[static_cast<size_t>(concat_node)]) continue;

    Node fused{unshape.name, OpKind::ChannelShuffle, {}, concat->inputs, {}};
    fused.attrs.set("groups", g);
    // The parts' producers go; the intermediates lose theirs.
    std::vector<ValueId> gone = {concat->outputs[0], reshape->outputs[0], transpose->outputs[0]};
    std::vector<int> gone_nodes = {concat_node, graph.value(reshape->outputs[0]).producer,
                                   graph.value(transpose->outputs[0]).producer};
    if (const auto parts = parts_of(graph, consumers, unshape.outputs[0], c)) {
      std::vector<int64_t> splits;
      for (const ChannelRange& p : *parts) {
        fused.outputs.push_back(p.out);
        splits.push_back(p.end - p.begin);
        gone_nodes.push_back(p.node);
      }
      fused.attrs.set("splits", splits);
      gone.push_back(unshape.outputs[0]);
    } else {
      fused.outputs = unshape.outputs;
    }
    for (ValueId v : gone) graph.value(v).producer = -1;
    for (int node : gone_nodes) remove[static_cast<size_t>(node)] = true;
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

#include "compilers/passes/prune_channels.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <numeric>
#include <sstream>
#include <unordered_set>

#include "compilers/analysis/channel_groups.h"
#include "compilers/analysis/model_stats.h"
#include "compilers/ir/rewrite.h"
#include "compilers/ir/shape_inference.h"

namespace kiln {
namespace {

// The L1 norm of each index along `axis` of t (the filters a producer makes).
std::vector<double> l1_along(const Tensor& t, int64_t axis) {
  const int64_t n = t.dim(axis);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int64_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  std::vector<double> norms(static_cast<size_t>(n), 0.0);
  const float* p = t.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t i = 0; i < inner; ++i) norms[static_cast<size_t>(c)] += std::fabs(p[(o * n + c) * inner + i]);
  return norms;
}

// t with only the `keep` indices (ascending) of `axis`.
Tensor slice_axis(const Tensor& t, int64_t axis, const std::vector<int64_t>& keep) {
  Shape shape = t.shape();
  const int64_t n = shape[static_cast<size_t>(axis)];
  shape[static_cast<size_t>(axis)] = static_cast<int64_t>(keep.size());
  Tensor out = Tensor::zeros(t.dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int64_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  const size_t row = static_cast<size_t>(inner) * dtype_size(t.dtype());
  const auto* src = static_cast<const char*>(t.raw());
  auto* dst = static_cast<char*>(out.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < keep.size(); ++k) {
      assert(keep[k] >= 0 && keep[k] < n);
      std::memcpy(dst + (static_cast<size_t>(o) * keep.size() + k) * row,
                  src + static_cast<size_t>(o * n + keep[k]) * row, row);
    }
  return out;
}

// Channel importance: each producer's filter norms over its mean, summed over the producers.
std::vector<double> importance(const Graph& graph, const ChannelGroup& group) {
  std::vector<double> score(static_cast<size_t>(group.channels), 0.0);
  for (const ChannelSlice& p : group.producers) {
    const Node& node = graph.nodes[static_cast<size_t>(p.node)];
    const std::vector<double> norms = l1_along(graph.initializers.at(node.inputs[p.input]), p.axis);
    const double mean = std::accumulate(norms.begin(), norms.end(), 0.0) / static_cast<double>(norms.size());
    if (mean <= 0.0) continue;  // an all-zero producer ranks nothing
    for (size_t c = 0; c < norms.size(); ++c) score[c] += norms[c] / mean;
  }
  return score;
}

// The channels kept: all but the `remove` least important (ties: the lower index goes first).
std::vector<int64_t> kept_channels(const std::vector<double>& score, int64_t remove) {
  std::vector<int64_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return score[static_cast<size_t>(a)] < score[static_cast<size_t>(b)]; });
  std::vector<int64_t> keep(order.begin() + remove, order.end());
  std::sort(keep.begin(), keep.end());
  return keep;
}

// Rewrites every constant the group indexes; the old constants are left for the caller to drop.
void prune_group(Graph& graph, const ChannelGroup& group, const std::vector<int64_t>& keep,
                 std::unordered_set<ValueId>& replaced) {
  for (const ChannelSlice& s : group.slices) {
    Node& node = graph.nodes[static_cast<size_t>(s.node)];
    const ValueId old = node.inputs[s.input];
    std::vector<int64_t> entries;  // channel c owns entries [c * block, (c + 1) * block)
    for (int64_t c : keep)
      for (int64_t j = 0; j < s.block; ++j) entries.push_back(c * s.block + j);
    Tensor sliced = slice_axis(graph.initializers.at(old), s.axis, entries);
    node.inputs[s.input] = graph_add_initializer(graph, graph.value(old).name + "_pruned", std::move(sliced));
    replaced.insert(old);
  }
  const auto kept = static_cast<int64_t>(keep.size());
  for (int index : group.depthwise) graph.nodes[static_cast<size_t>(index)].attrs.set("group", kept);
  for (int index : group.reshapes) {
    Node& node = graph.nodes[static_cast<size_t>(index)];
    const Tensor& old = graph.initializers.at(node.inputs[1]);
    const std::vector<int64_t> shape = {old.value_as_int(0), kept};
    replaced.insert(node.inputs[1]);
    node.inputs[1] = graph_add_initializer(graph, graph.value(node.inputs[1]).name + "_pruned",
                                           Tensor::from_values<int64_t>({2}, shape));
  }
}

// The first producer's node names the group in the report.
std::string group_name(const Graph& graph, const ChannelGroup& group) {
  std::string name = "'" + graph.nodes[static_cast<size_t>(group.producers.front().node)].name + "'";
  if (group.producers.size() > 1) name += " +" + std::to_string(group.producers.size() - 1) + " producers";
  return name;
}

}  // namespace

Result<bool> pass_prune_channels(Graph& graph, const PassContext& ctx) {
  const double ratio = ctx.prune.channel_ratio;
  KILN_REQUIRE(ratio >= 0.0 && ratio < 1.0, invalid_argument, "prune_channels: the channel ratio must be in [0, 1), got ",
               ratio);
  const std::vector<ChannelGroup> groups = channel_groups(graph);
  const ModelStats before = model_stats(graph);

  // Every group is ranked before any is rewritten: a Conv reads one group and makes another, so
  // its weights change twice, and each ranking must see the original filters.
  std::ostringstream detail;
  std::vector<std::vector<int64_t>> keeps(groups.size());
  int64_t channels_before = 0, channels_after = 0;
  int pruned = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const ChannelGroup& group = groups[g];
    if (!group.prunable) {
      detail << "  kept " << group_name(graph, group) << ": " << group.why_not << '\n';
      continue;
    }
    const int64_t remove =
        std::min(group.channels - 1, static_cast<int64_t>(std::llround(ratio * static_cast<double>(group.channels))));
    channels_before += group.channels;
    channels_after += group.channels - std::max<int64_t>(remove, 0);
    if (remove <= 0) continue;
    keeps[g] = kept_channels(importance(graph, group), remove);
    detail << "  pruned " << group_name(graph, group) << ": " << group.channels << " -> " << keeps[g].size()
           << " channels\n";
    ++pruned;
  }
  std::unordered_set<ValueId> replaced;
  for (size_t g = 0; g < groups.size(); ++g)
    if (!keeps[g].empty()) prune_group(graph, groups[g], keeps[g], replaced);
  graph_drop_unused_initializers(graph, &replaced);

  if (ctx.log) {
    *ctx.log << "prune_channels (no fine-tuning): " << pruned << " of " << groups.size()
             << " channel groups pruned by filter L1 norm at ratio " << ratio << ", channels " << channels_before
             << " -> " << channels_after;
    if (pruned > 0) {
      ShapeInferenceOptions options;
      options.bindings = ctx.bindings;
      KILN_TRY(graph_infer_shapes(graph, options).status());
    }
    const ModelStats after = pruned > 0 ? model_stats(graph) : before;
    if (before.complete && after.complete)
      *ctx.log << ", MACs " << before.macs << " -> " << after.macs << " (" << std::fixed
               << std::setprecision(1) << -100.0 * static_cast<double>(before.macs - after.macs) / std::max<double>(1.0, static_cast<double>(before.macs)) << std::defaultfloat << "%)";
    else
      *ctx.log << ", MACs unknown (bind the symbolic dims)";
    *ctx.log << ", parameters " << before.params << " -> " << after.params << '\n' << detail.str();
  }
  return pruned > 0;
}

}  // namespace kiln

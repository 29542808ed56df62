#include "compilers/passes/prune_2_4.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <ostream>
#include <string>

namespace kiln {
namespace {

struct ReductionView {
  int64_t outputs = 0;  // output channels / columns
  int64_t length = 0;   // reduction length per output
  int64_t output_stride = 0, step = 0;  // element offsets: next output, next reduction element
};

// Where the reduction axis of node n's weight runs, or nullopt when the layer stays dense.
std::optional<ReductionView> reduction_view(const Graph& g, const Node& n) {
  if (n.op != OpKind::Conv && n.op != OpKind::Gemm && n.op != OpKind::MatMul) return std::nullopt;
  if (n.inputs.size() < 2 || n.inputs[1] == kNoValue || !g.is_initializer(n.inputs[1])) return std::nullopt;
  const Tensor& w = g.initializers.at(n.inputs[1]);
  if (w.dtype() != DType::f32 || w.rank() < 2) return std::nullopt;
  ReductionView v;
  if (n.op == OpKind::Conv) {
    const auto group = n.attrs.get_int("group", 1);
    if (!group || *group != 1) return std::nullopt;
    v.outputs = w.dim(0);
    v.length = w.numel() / w.dim(0);
    v.output_stride = v.length;
    v.step = 1;
  } else {
    if (w.rank() != 2) return std::nullopt;
    const auto trans = n.op == OpKind::Gemm ? n.attrs.get_int("transB", 0) : Result<int64_t>(int64_t{0});
    if (!trans) return std::nullopt;
    const bool trans_b = *trans != 0;
    // B is [K, N] (reduction down the columns) or, transposed, [N, K] (along the rows).
    v.outputs = trans_b ? w.dim(0) : w.dim(1);
    v.length = trans_b ? w.dim(1) : w.dim(0);
    v.output_stride = trans_b ? w.dim(1) : 1;
    v.step = trans_b ? 1 : w.dim(1);
  }
  if (v.length % 4 != 0 || v.outputs == 0) return std::nullopt;
  return v;
}

// Zeroes the two smallest magnitudes of every group of four; returns how many changed value.
int64_t prune_groups(Tensor& w, const ReductionView& v) {
  float* data = w.data<float>();
  int64_t changed = 0;
  for (int64_t o = 0; o < v.outputs; ++o) {
    for (int64_t k = 0; k < v.length; k += 4) {
      std::array<float*, 4> group;
      for (int64_t i = 0; i < 4; ++i) group[static_cast<size_t>(i)] = data + o * v.output_stride + (k + i) * v.step;
      // Stable: of equal magnitudes the earlier one goes first, so the result is deterministic.
      std::stable_sort(group.begin(), group.end(), [](const float* a, const float* b) { return std::fabs(*a) < std::fabs(*b); });
      for (size_t i = 0; i < 2; ++i) {
        changed += *group[i] != 0.0f ? 1 : 0;
        *group[i] = 0.0f;
      }
    }
  }
  return changed;
}

}  // namespace

Result<bool> pass_prune_2_4(Graph& graph, const PassContext& ctx) {
  int layers = 0, dense = 0;
  bool marked = false;
  int64_t changed = 0, total = 0;
  std::vector<ValueId> done;  // a weight shared by several nodes is pruned once
  for (Node& n : graph.nodes) {
    const auto view = reduction_view(graph, n);
    if (!view) {
      dense += (n.op == OpKind::Conv || n.op == OpKind::Gemm || n.op == OpKind::MatMul) ? 1 : 0;
      continue;
    }
    if (std::find(done.begin(), done.end(), n.inputs[1]) == done.end()) {
      Tensor w = graph.initializers.at(n.inputs[1]).clone();  // initializers may borrow the file's bytes
      changed += prune_groups(w, *view);
      total += w.numel();
      graph.initializers[n.inputs[1]] = std::move(w);
      done.push_back(n.inputs[1]);
    }
    marked |= !n.attrs.has(std::string(kSparsityPatternAttr));
    n.attrs.set(std::string(kSparsityPatternAttr), std::string("2:4"));
    ++layers;
  }
  if (ctx.log)
    *ctx.log << "  prune_2_4 (no fine-tuning): " << layers << " layers 2:4 sparse (" << changed << " of " << total
             << " weights set to zero), " << dense
             << " left dense; for GPU sparse tensor cores, CPU kernels run them dense; the accuracy cost must be "
                "measured (kiln verify with labels)\n";
  return changed > 0 || marked;
}

}  // namespace kiln

#include "compilers/passes/fuse_layer_norm.h"

#include <cmath>
#include <optional>

#include "compilers/ir/rewrite.h"

namespace kiln {
namespace {

// Reads the graph around one candidate; each method returns the producing node of a value when
// it has the wanted op and no reader outside the pattern.
struct Matcher {
  Graph& graph;
  const std::vector<std::vector<int>>& consumers;

  const Node* producer(ValueId v, OpKind op, size_t readers = 1) const {
    if (v == kNoValue || graph_is_output(graph, v) || consumers[static_cast<size_t>(v)].size() != readers) return nullptr;
    const int p = graph.value(v).producer;
    if (p < 0 || graph.nodes[static_cast<size_t>(p)].op != op) return nullptr;
    return &graph.nodes[static_cast<size_t>(p)];
  }
  int index(const Node* n) const { return static_cast<int>(n - graph.nodes.data()); }
  int rank(ValueId v) const {
    const ValueType& t = graph.value(v).type;
    return t.rank_known ? static_cast<int>(t.rank()) : -1;
  }
  std::optional<Tensor> constant(ValueId v) const { return graph_constant_value(graph, v); }

  // A ReduceMean over the last axis only, keeping it.
  bool mean_over_last(const Node& n) const {
    if (n.inputs.empty() || rank(n.inputs[0]) < 1) return false;
    auto keep = n.attrs.get_int("keepdims", 1);
    if (!keep || *keep != 1) return false;
    // The importer turns the axes attribute of older opsets into this input.
    if (n.inputs.size() < 2 || n.inputs[1] == kNoValue) return false;
    auto t = constant(n.inputs[1]);
    if (!t || t->dtype() != DType::i64) return false;
    const std::vector<int64_t> axes(t->data<int64_t>(), t->data<int64_t>() + t->numel());
    const int r = rank(n.inputs[0]);
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == r - 1);
  }

  // A float scalar constant (any shape with one element).
  std::optional<float> scalar(ValueId v) const {
    auto t = constant(v);
    if (!t || t->dtype() != DType::f32 || t->numel() != 1) return std::nullopt;
    return t->data<float>()[0];
  }

  // The other input of a two-input node, given one of them.
  static ValueId other(const Node& n, ValueId one) {
    if (n.inputs.size() != 2) return kNoValue;
    return n.inputs[0] == one ? n.inputs[1] : n.inputs[1] == one ? n.inputs[0] : kNoValue;
  }

  // A constant [C] (or [1, .., 1, C]) of the last axis' size, reshaped to [C].
  std::optional<Tensor> per_channel(ValueId v, int64_t c) const {
    auto t = constant(v);
    if (!t || t->dtype() != DType::f32 || t->numel() != c || t->rank() < 1 || t->dim(t->rank() - 1) != c) return std::nullopt;
    Tensor out = Tensor::zeros(DType::f32, {c});
    std::copy(t->data<float>(), t->data<float>() + c, out.data<float>());
    return out;
  }
};

}  // namespace

Result<bool> pass_fuse_layer_norm(Graph& graph, const PassContext&) {
  const auto consumers = graph_consumers(graph);
  const Matcher m{graph, consumers};
  std::vector<bool> remove(graph.nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& div = graph.nodes[i];
    if (div.op != OpKind::Div || div.inputs.size() != 2 || remove[i]) continue;
    const ValueId d = div.inputs[0];
    // d = Sub(x, mean): read by the Div and by the square (Pow(d, 2) once, Mul(d, d) twice).
    const size_t d_readers = d == kNoValue ? 0 : consumers[static_cast<size_t>(d)].size();
    const Node* sub = d_readers == 2 || d_readers == 3 ? m.producer(d, OpKind::Sub, d_readers) : nullptr;
    if (!sub || sub->inputs.size() != 2) continue;
    const ValueId x = sub->inputs[0];
    const Node* mean = m.producer(sub->inputs[1], OpKind::ReduceMean);
    if (!mean || mean->inputs[0] != x || !m.mean_over_last(*mean)) continue;
    const ValueType& xt = graph.value(x).type;
    if (xt.dtype != DType::f32 || !xt.rank_known || xt.rank() < 1 || !xt.shape.back().known()) continue;
    const int64_t c = xt.shape.back().value;
    // Div by Sqrt(Add(ReduceMean(square(d)), eps)).
    const Node* sqrt = m.producer(div.inputs[1], OpKind::Sqrt);
    const Node* add_eps = sqrt ? m.producer(sqrt->inputs[0], OpKind::Add) : nullptr;
    if (!add_eps || add_eps->inputs.size() != 2) continue;
    const Node* var = m.producer(add_eps->inputs[0], OpKind::ReduceMean);
    ValueId eps_value = add_eps->inputs[1];
    if (!var) {
      var = m.producer(add_eps->inputs[1], OpKind::ReduceMean);
      eps_value = add_eps->inputs[0];
    }
    const auto eps = m.scalar(eps_value);
    if (!var || !eps || !(*eps >= 0.0f) || !std::isfinite(*eps) || !m.mean_over_last(*var)) continue;
    const Node* square = m.producer(var->inputs[0], OpKind::Pow);
    if (square) {
      const auto exponent = m.scalar(square->inputs[1]);
      if (square->inputs[0] != d || !exponent || *exponent != 2.0f || d_readers != 2) continue;
    } else {
      square = m.producer(var->inputs[0], OpKind::Mul);
      if (!square || square->inputs.size() != 2 || square->inputs[0] != d || square->inputs[1] != d || d_readers != 3)
        continue;
    }
    // Optional affine tail: Mul by gamma, then Add of beta, each the sole reader of its input.
    std::vector<int> taken = {m.index(mean), m.index(sub), m.index(square), m.index(var), m.index(add_eps),
                              m.index(sqrt)};
    ValueId out = div.outputs[0];
    size_t last = i;
    std::optional<Tensor> gamma, beta;
    // Takes the sole reader of `out` into the pattern when it is `op` with a per-channel constant.
    auto take_tail = [&](OpKind op, std::optional<Tensor>& param) {
      if (consumers[static_cast<size_t>(out)].size() != 1 || graph_is_output(graph, out)) return;
      const int r = consumers[static_cast<size_t>(out)][0];
      const Node& tail = graph.nodes[static_cast<size_t>(r)];
      if (tail.op != op || !(param = m.per_channel(Matcher::other(tail, out), c))) return;
      taken.push_back(static_cast<int>(last));
      last = static_cast<size_t>(r);
      out = tail.outputs[0];
    };
    take_tail(OpKind::Mul, gamma);
    take_tail(OpKind::Add, beta);
    bool free = true;
    for (int n : taken) free = free && !remove[static_cast<size_t>(n)];
    if (!free) continue;
    if (!gamma) {
      gamma = Tensor::zeros(DType::f32, {c});
      std::fill(gamma->data<float>(), gamma->data<float>() + c, 1.0f);
    }
    const std::string name = graph.nodes[last].name;
    Node fused{name, OpKind::LayerNormalization, {}, {x, graph_add_initializer(graph, name + ".scale", std::move(*gamma))},
               {out}};
    if (beta) fused.inputs.push_back(graph_add_initializer(graph, name + ".bias", std::move(*beta)));
    fused.attrs.set("axis", int64_t{-1});
    fused.attrs.set("epsilon", *eps);
    for (int n : taken) {
      remove[static_cast<size_t>(n)] = true;
      for (ValueId o : graph.nodes[static_cast<size_t>(n)].outputs) graph.value(o).producer = -1;
    }
    graph.nodes[last] = std::move(fused);
    changed = true;
  }
  if (changed) {
    graph_remove_nodes(graph, remove);
    graph_drop_unused_initializers(graph);
  }
  return changed;
}

}  // namespace kiln

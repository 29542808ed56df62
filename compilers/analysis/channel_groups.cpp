#include "compilers/analysis/channel_groups.h"

#include <cassert>
#include <map>
#include <numeric>
#include <variant>

#include "compilers/ir/rewrite.h"
#include "compilers/ir/verify.h"
#include "kernels/post_ops.h"

namespace kiln {
namespace {

// A float32 initializer that is not also a graph input (those can be overridden at run time).
const Tensor* f32_weight(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return nullptr;
  const ValueId id = n.inputs[i];
  auto it = g.initializers.find(id);
  if (it == g.initializers.end() || it->second.dtype() != DType::f32) return nullptr;
  for (ValueId in : g.inputs)
    if (in == id) return nullptr;
  return &it->second;
}

bool absent(const Node& n, size_t i) { return i >= n.inputs.size() || n.inputs[i] == kNoValue; }

// A constant with one element (a scalar operand, a Clip bound): channel-independent.
bool scalar_constant(const Graph& g, ValueId id) {
  auto c = graph_constant_value(g, id);
  return c && c->numel() == 1;
}

// No fused activation and no residual input: the op is the plain ONNX op.
bool plain_compute(const Node& n) {
  auto post = post_ops_from_attrs(n.attrs);
  return n.inputs.size() <= 3 && post && post->empty();
}

bool known_ones_after_channel(const ValueType& t) {
  if (!t.rank_known || t.rank() < 2) return false;
  for (size_t d = 2; d < t.shape.size(); ++d)
    if (t.shape[d].value != 1) return false;
  return true;
}

// `a` broadcasts to `out` keeping channel c at c: same rank and channel count, any other dim
// equal or 1 (a squeeze-excite scale [N, C, 1, 1] times the map [N, C, H, W]).
bool channel_aligned(const ValueType& a, const ValueType& out) {
  if (!a.rank_known || !out.rank_known || a.rank() != out.rank() || a.rank() < 2 || !out.shape[1].known() ||
      !(a.shape[1] == out.shape[1]))
    return false;
  for (size_t d = 0; d < a.shape.size(); ++d)
    if (d != 1 && !(a.shape[d] == out.shape[d]) && a.shape[d].value != 1) return false;
  return true;
}

class Analysis {
 public:
  explicit Analysis(const Graph& g)
      : g_(g), consumers_(graph_consumers(g)), parent_(g.values.size()), blocked_(g.values.size()) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }

  std::vector<ChannelGroup> run() {
    auto order = graph_topo_order(g_);
    assert(order && "channel_groups requires a verified graph");
    for (int i : *order) {
      const std::string why = visit(i);
      if (!why.empty()) block_node(i, why);
    }
    return groups(*order);
  }

 private:
  struct Pending {
    ValueId value;
    ChannelSlice slice;
    bool producer;
  };

  ValueId find(ValueId v) {
    while (parent_[static_cast<size_t>(v)] != v) {
      parent_[static_cast<size_t>(v)] = parent_[static_cast<size_t>(parent_[static_cast<size_t>(v)])];
      v = parent_[static_cast<size_t>(v)];
    }
    return v;
  }
  void unite(ValueId a, ValueId b) { parent_[static_cast<size_t>(find(a))] = find(b); }

  void block_node(int i, const std::string& why) {
    const Node& n = g_.nodes[static_cast<size_t>(i)];
    const std::string reason = "node '" + n.name + "' (" + std::string(op_name(n.op)) + ") " + why;
    for (ValueId v : n.inputs)
      if (v != kNoValue && !g_.is_initializer(v) && blocked_[static_cast<size_t>(v)].empty())
        blocked_[static_cast<size_t>(v)] = reason;
    for (ValueId v : n.outputs)
      if (v != kNoValue && blocked_[static_cast<size_t>(v)].empty()) blocked_[static_cast<size_t>(v)] = reason;
  }

  void slice(ValueId v, int node, size_t input, int64_t axis, bool producer = false, int64_t block = 1) {
    pending_.push_back({v, {node, input, axis, block}, producer});
  }

  // The axis of B that a Gemm or MatMul reading A's features indexes them on, or why not.
  std::variant<int64_t, std::string> reader_axis(const Node& n) {
    const Tensor* b = f32_weight(g_, n, 1);
    if (!b || b->rank() != 2) return std::string("has no constant 2-D float32 B");
    if (n.op == OpKind::MatMul) {
      const ValueType& a = g_.value(n.inputs[0]).type;
      if (!a.rank_known || a.rank() != 2) return std::string("multiplies an A that is not 2-D");
      return int64_t{0};
    }
    auto trans_a = n.attrs.get_int("transA", 0);
    auto trans_b = n.attrs.get_int("transB", 0);
    if (!trans_a || *trans_a != 0 || !trans_b) return std::string("transposes A");
    return int64_t{*trans_b ? 1 : 0};
  }

  // Records what node i does to channels; returns why not when it is not understood (then
  // nothing was recorded and the caller blocks every value it touches).
  std::string visit(int i) {
    const Node& n = g_.nodes[static_cast<size_t>(i)];
    const bool one_output = n.outputs.size() == 1 && n.outputs[0] != kNoValue;
    switch (n.op) {
      case OpKind::Conv: return one_output ? conv(i) : "has extra outputs";
      case OpKind::Gemm: return one_output ? gemm(i) : "has extra outputs";
      case OpKind::MatMul: return one_output ? matmul(i) : "has extra outputs";
      case OpKind::BatchNormalization: return one_output ? batchnorm(i) : "runs in training mode";
      // Channel c in, channel c out; any other input a scalar constant.
      case OpKind::Relu: case OpKind::LeakyRelu: case OpKind::PRelu: case OpKind::Elu: case OpKind::Selu:
      case OpKind::Clip: case OpKind::Sigmoid: case OpKind::HardSigmoid: case OpKind::HardSwish:
      case OpKind::Tanh: case OpKind::Softplus: case OpKind::Erf: case OpKind::Exp: case OpKind::Log:
      case OpKind::Sqrt: case OpKind::Neg: case OpKind::Abs: case OpKind::Reciprocal: case OpKind::Identity:
      case OpKind::Dropout:
        return unary(n);
      // Pooling keeps channels apart.
      case OpKind::MaxPool: case OpKind::AveragePool: case OpKind::GlobalAveragePool:
      case OpKind::GlobalMaxPool:
        return unary(n);
      case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max:
      case OpKind::Min: case OpKind::Sum:
        return elementwise(n);
      case OpKind::Flatten: return flatten(i);
      case OpKind::Reshape: return reshape(i);
      default: return "does not keep channels apart";
    }
  }

  std::string unary(const Node& n) {
    if (n.inputs.empty() || n.inputs[0] == kNoValue) return "has no data input";
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (n.outputs[k] != kNoValue) return "has extra outputs";
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (!absent(n, k) && !scalar_constant(g_, n.inputs[k])) return "has a non-scalar parameter";
    unite(n.inputs[0], n.outputs[0]);
    return "";
  }

  std::string elementwise(const Node& n) {
    const ValueType& out = g_.value(n.outputs[0]).type;
    std::vector<ValueId> joined;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      if (auto c = graph_constant_value(g_, in)) {
        if (c->numel() == 1) continue;
        return "has a constant operand '" + g_.value(in).name + "' that is not a scalar";
      }
      if (!channel_aligned(g_.value(in).type, out)) return "broadcasts operand '" + g_.value(in).name + "' across channels";
      joined.push_back(in);
    }
    for (ValueId in : joined) unite(in, n.outputs[0]);
    return "";
  }

  std::string flatten(int i) {
    const Node& n = g_.nodes[static_cast<size_t>(i)];
    auto axis = n.attrs.get_int("axis", 1);
    if (!axis || *axis != 1) return "flattens at another axis than 1";
    const ValueType& in = g_.value(n.inputs[0]).type;
    if (known_ones_after_channel(in)) {
      unite(n.inputs[0], n.outputs[0]);
      return "";
    }
    // [N, C, H, W] -> [N, C*H*W] read only as A of Gemm/MatMul: channel c is B's H*W entries from c*H*W.
    if (!in.rank_known || in.rank() < 3) return "flattens a map of unknown shape";
    int64_t block = 1;
    for (size_t d = 2; d < in.shape.size(); ++d) {
      if (!in.shape[d].known()) return "flattens a map of unknown shape";
      block *= in.shape[d].value;
    }
    const ValueId flat = n.outputs[0];
    if (graph_is_output(g_, flat)) return "flattens a spatial map into a graph output";
    std::vector<std::pair<int, int64_t>> readers;
    for (int r : consumers_[static_cast<size_t>(flat)]) {
      const Node& reader = g_.nodes[static_cast<size_t>(r)];
      if ((reader.op != OpKind::Gemm && reader.op != OpKind::MatMul) || reader.inputs[0] != flat ||
          (reader.inputs.size() > 1 && reader.inputs[1] == flat))
        return "flattens a spatial map for a reader other than Gemm or MatMul";
      auto k_axis = reader_axis(reader);
      if (auto* why = std::get_if<std::string>(&k_axis)) return "flattens a spatial map for a reader that " + *why;
      readers.emplace_back(r, std::get<int64_t>(k_axis));
    }
    for (const auto& [r, k_axis] : readers) slice(n.inputs[0], r, 1, k_axis, false, block);
    return "";
  }

  // [N, C, 1, ...] -> [N, C]; a shape naming C explicitly is rewritten with the kept count.
  std::string reshape(int i) {
    const Node& n = g_.nodes[static_cast<size_t>(i)];
    if (n.inputs.size() < 2 || absent(n, 1)) return "has no shape";
    const ValueType& in = g_.value(n.inputs[0]).type;
    const ValueType& out = g_.value(n.outputs[0]).type;
    auto shape = graph_constant_value(g_, n.inputs[1]);
    if (!known_ones_after_channel(in) || !out.rank_known || out.rank() != 2 || !shape || shape->numel() != 2 ||
        !in.shape[1].known())
      return "does not reshape [N, C, 1, ...] to [N, C]";
    const int64_t c = shape->value_as_int(1);
    if (c == 0 || c == -1) {
      unite(n.inputs[0], n.outputs[0]);
      return "";
    }
    if (c != in.shape[1].value || !g_.is_initializer(n.inputs[1])) return "does not reshape [N, C, 1, ...] to [N, C]";
    unite(n.inputs[0], n.outputs[0]);
    reshapes_.push_back({n.outputs[0], i});
    return "";
  }

  std::string conv(int i) {
    const Node& n = g_.nodes[static_cast<size_t>(i)];
    const Tensor* w = f32_weight(g_, n, 1);
    auto group = n.attrs.get_int("group", 1);
    if (!w || w->rank() < 3 || !group || *group < 1) return "has no constant float32 weights";
    if (!absent(n, 2) && !f32_weight(g_, n, 2)) return "has a bias that is not a constant";
    if (!plain_compute(n)) return "carries a fused epilogue or residual";
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const int64_t m = w->dim(0), c_in = w->dim(1) * *group;
    if (*group == 1) {
      slice(x, i, 1, 1);                // reads x's channels through W[:, c]
      slice(y, i, 1, 0, /*producer=*/true);  // makes y's channels: W[c]
      if (!absent(n, 2)) slice(y, i, 2, 0);
      return "";
    }
    if (w->dim(1) == 1 && m == c_in) {  // depthwise: channel c in, channel c out
      unite(x, y);
      slice(y, i, 1, 0);
      if (!absent(n, 2)) slice(y, i, 2, 0);
      depthwise_.push_back({y, i});
      return "";
    }
    return "is a grouped convolution that is not depthwise";
  }

  std::string gemm(int i) {
    const Node& n = g_.nodes[static_cast<size_t>(i)];
    auto k = reader_axis(n);
    if (auto* why = std::get_if<std::string>(&k)) return *why;
    if (!plain_compute(n)) return "carries a fused epilogue or residual";
    const Tensor* b = f32_weight(g_, n, 1);
    const ValueId a = n.inputs[0], y = n.outputs[0];
    const int64_t k_axis = std::get<int64_t>(k), n_axis = 1 - k_axis, features = b->dim(n_axis);
    if (!absent(n, 2)) {
      const Tensor* c = f32_weight(g_, n, 2);
      if (!c) return "has a C that is not a constant";
      // C broadcasts to [M, N]: sliced on its last axis when that axis is N.
      if (c->numel() != 1 && !(c->rank() == 2 && c->dim(1) == 1)) {
        if (c->rank() < 1 || c->rank() > 2 || c->dim(c->rank() - 1) != features) return "has a C of another shape";
        slice(y, i, 2, c->rank() - 1);
      }
    }
    slice(a, i, 1, k_axis);
    slice(y, i, 1, n_axis, /*producer=*/true);
    return "";
  }

  std::string matmul(int i) {
    const Node& n = g_.nodes[static_cast<size_t>(i)];
    auto k = reader_axis(n);
    if (auto* why = std::get_if<std::string>(&k)) return *why;
    if (!plain_compute(n)) return "carries a fused epilogue or residual";
    slice(n.inputs[0], i, 1, 0);
    slice(n.outputs[0], i, 1, 1, /*producer=*/true);
    return "";
  }

  std::string batchnorm(int i) {
    const Node& n = g_.nodes[static_cast<size_t>(i)];
    auto training = n.attrs.get_int("training_mode", 0);
    auto post = post_ops_from_attrs(n.attrs);
    if (n.inputs.size() != 5 || !training || *training != 0) return "runs in training mode";
    if (!post || !post->empty()) return "carries a fused activation";
    for (size_t k = 1; k < 5; ++k) {
      const Tensor* p = f32_weight(g_, n, k);
      if (!p || p->rank() != 1) return "has parameters that are not constant float32 vectors";
    }
    unite(n.inputs[0], n.outputs[0]);
    for (size_t k = 1; k < 5; ++k) slice(n.outputs[0], i, k, 0);
    return "";
  }

  std::vector<ChannelGroup> groups(const std::vector<int>& order) {
    std::map<ValueId, size_t> index;  // root -> position in out
    std::vector<ChannelGroup> out;
    std::vector<int> position(g_.nodes.size(), 0);
    for (size_t k = 0; k < order.size(); ++k) position[static_cast<size_t>(order[k])] = static_cast<int>(k);
    // Groups in the order of their first producer (pending is filled in topological order).
    for (const Pending& p : pending_) {
      if (!p.producer) continue;
      const ValueId root = find(p.value);
      if (index.emplace(root, out.size()).second) out.emplace_back();
    }
    for (const Pending& p : pending_) {
      auto it = index.find(find(p.value));
      if (it == index.end()) continue;
      ChannelGroup& group = out[it->second];
      group.slices.push_back(p.slice);
      if (p.producer) group.producers.push_back(p.slice);
    }
    for (const auto& [value, node] : depthwise_) {
      auto it = index.find(find(value));
      if (it != index.end()) out[it->second].depthwise.push_back(node);
    }
    for (const auto& [value, node] : reshapes_) {
      auto it = index.find(find(value));
      if (it != index.end()) out[it->second].reshapes.push_back(node);
    }
    for (ValueId v = 0; v < static_cast<ValueId>(g_.values.size()); ++v) {
      auto it = index.find(find(v));
      if (it != index.end()) out[it->second].values.push_back(v);
    }
    for (ChannelGroup& group : out) check(group);
    return out;
  }

  // Decides prunable: every value understood, none a graph input or output, one channel count.
  void check(ChannelGroup& group) {
    group.prunable = false;
    const auto fail = [&](std::string why) { group.why_not = std::move(why); };
    for (ValueId v : group.values) {
      const Value& value = g_.value(v);
      if (!blocked_[static_cast<size_t>(v)].empty()) return fail(blocked_[static_cast<size_t>(v)]);
      if (g_.is_initializer(v)) return fail("value '" + value.name + "' is a constant");
      if (graph_is_output(g_, v)) return fail("value '" + value.name + "' is a graph output");
      for (ValueId in : g_.inputs)
        if (in == v) return fail("value '" + value.name + "' is a graph input");
      if (!value.type.rank_known || value.type.rank() < 2 || !value.type.shape[1].known())
        return fail("value '" + value.name + "' has no known channel count");
      const int64_t c = value.type.shape[1].value;
      if (group.channels == 0) group.channels = c;
      if (c != group.channels)
        return fail("value '" + value.name + "' has " + std::to_string(c) + " channels, not " +
                    std::to_string(group.channels));
    }
    for (const ChannelSlice& s : group.slices) {
      const Node& n = g_.nodes[static_cast<size_t>(s.node)];
      const Tensor& t = g_.initializers.at(n.inputs[s.input]);
      if (t.dim(s.axis) != group.channels * s.block)
        return fail("node '" + n.name + "' input " + std::to_string(s.input) + " has " +
                    std::to_string(t.dim(s.axis)) + " entries on axis " + std::to_string(s.axis) + ", not " +
                    std::to_string(group.channels * s.block));
    }
    group.prunable = true;
  }

  const Graph& g_;
  std::vector<std::vector<int>> consumers_;
  std::vector<ValueId> parent_;
  std::vector<std::string> blocked_;  // per value: why an op touching it is not understood
  std::vector<Pending> pending_;
  std::vector<std::pair<ValueId, int>> depthwise_, reshapes_;
};

}  // namespace

std::vector<ChannelGroup> channel_groups(const Graph& graph) { return Analysis(graph).run(); }

}  // namespace kiln

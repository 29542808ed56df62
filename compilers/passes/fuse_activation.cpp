#include "compilers/passes/fuse_activation.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <optional>

#include "compilers/ir/rewrite.h"
#include "kernels/post_ops.h"

namespace kiln {
namespace {

// What the rules read of the graph: readers of each value and constant scalars.
struct GraphView {
  const Graph& graph;
  std::vector<std::vector<int>> consumers;

  explicit GraphView(const Graph& g) : graph(g), consumers(graph_consumers(g)) {}

  const Node& node(int index) const { return graph.nodes[static_cast<size_t>(index)]; }

  // The one node reading `v`, reading it once, when `v` is not a graph output; -1 otherwise.
  int sole_reader(ValueId v) const {
    const auto& readers = consumers[static_cast<size_t>(v)];
    return readers.size() == 1 && !graph_is_output(graph, v) ? readers[0] : -1;
  }

  // The value of a float32 one-element constant (initializer or Constant node), if `v` is one.
  std::optional<float> scalar(ValueId v) const {
    const auto t = graph_constant_value(graph, v);
    if (!t || t->dtype() != DType::f32 || t->numel() != 1) return std::nullopt;
    return t->data<float>()[0];
  }

  // True when `v` is a constant scalar within 1e-6 of `want`.
  bool scalar_is(ValueId v, double want) const {
    const auto s = scalar(v);
    return s && std::fabs(static_cast<double>(*s) - want) <= 1e-6;
  }
};

// A matched pattern: the epilogue it becomes, the value it computes (which the op then writes)
// and its nodes (removed).
struct Fusion {
  PostOps post;
  ValueId output = kNoValue;
  std::vector<int> nodes;
};

// For a two-input node reading `v` as one operand: the other operand (kNoValue otherwise).
ValueId other_operand(const Node& n, ValueId v) {
  if (n.inputs.size() != 2) return kNoValue;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return kNoValue;
}

// ---- one-node activations: op(x; attributes) → activation(alpha, beta) ----

struct Param {
  const char* attr = nullptr;  // nullptr: the parameter is unused (0)
  float fallback = 0.0f;       // the ONNX default
};

struct UnaryRule {
  OpKind op;
  Activation activation;
  Param alpha{};
  Param beta{};
};

constexpr UnaryRule kUnaryRules[] = {
    {OpKind::Relu, Activation::relu},                                                   // Relu(x) → relu
    {OpKind::LeakyRelu, Activation::leaky_relu, {"alpha", 0.01f}},                      // LeakyRelu(x) → leaky_relu(alpha)
    {OpKind::Sigmoid, Activation::sigmoid},                                             // Sigmoid(x) → sigmoid
    {OpKind::HardSigmoid, Activation::hard_sigmoid, {"alpha", 0.2f}, {"beta", 0.5f}},   // HardSigmoid(x) → hard_sigmoid(alpha, beta)
    {OpKind::HardSwish, Activation::hard_swish},                                        // HardSwish(x) → hard_swish
    {OpKind::Tanh, Activation::tanh},                                                   // Tanh(x) → tanh
    {OpKind::Elu, Activation::elu, {"alpha", 1.0f}},                                    // Elu(x) → elu(alpha)
};

std::optional<float> read_param(const Node& n, const Param& p) {
  if (!p.attr) return 0.0f;
  auto v = n.attrs.get_float(p.attr, p.fallback);
  if (!v) return std::nullopt;
  return *v;
}

std::optional<Fusion> match_unary(const GraphView& g, ValueId x) {
  const int r = g.sole_reader(x);
  if (r < 0) return std::nullopt;
  const Node& n = g.node(r);
  for (const UnaryRule& rule : kUnaryRules) {
    if (n.op != rule.op || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const auto alpha = read_param(n, rule.alpha), beta = read_param(n, rule.beta);
    if (!alpha || !beta) return std::nullopt;
    return Fusion{PostOps{rule.activation, *alpha, *beta}, n.outputs[0], {r}};
  }
  return std::nullopt;
}

// ---- patterns ----

// Clip(x, min?, max?) with constant bounds → clip(min or -FLT_MAX, max or FLT_MAX).
std::optional<Fusion> match_clip(const GraphView& g, ValueId x) {
  const int r = g.sole_reader(x);
  if (r < 0) return std::nullopt;
  const Node& n = g.node(r);
  if (n.op != OpKind::Clip || n.inputs.empty() || n.inputs[0] != x || n.outputs.size() != 1) return std::nullopt;
  float bound[2] = {-FLT_MAX, FLT_MAX};
  for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
    if (n.inputs[i] == kNoValue) continue;
    const auto s = g.scalar(n.inputs[i]);
    if (!s || std::isnan(*s)) return std::nullopt;
    bound[i - 1] = *s;
  }
  return Fusion{PostOps{Activation::clip, bound[0], bound[1]}, n.outputs[0], {r}};
}

// x's readers when it has exactly two distinct ones and is not a graph output.
std::optional<std::pair<int, int>> two_readers(const GraphView& g, ValueId x) {
  const auto& readers = g.consumers[static_cast<size_t>(x)];
  if (readers.size() != 2 || readers[0] == readers[1] || graph_is_output(g.graph, x)) return std::nullopt;
  return std::pair{readers[0], readers[1]};
}

// Mul(x, Sigmoid(x)) → silu.
std::optional<Fusion> match_silu(const GraphView& g, ValueId x) {
  const auto readers = two_readers(g, x);
  if (!readers) return std::nullopt;
  for (auto [s, m] : {*readers, std::pair{readers->second, readers->first}}) {
    const Node& sig = g.node(s);
    const Node& mul = g.node(m);
    if (sig.op != OpKind::Sigmoid || mul.op != OpKind::Mul || sig.outputs.size() != 1) continue;
    if (g.sole_reader(sig.outputs[0]) != m || other_operand(mul, x) != sig.outputs[0]) continue;
    return Fusion{PostOps{Activation::silu}, mul.outputs[0], {s, m}};
  }
  return std::nullopt;
}

// x · 0.5 · (1 + Erf(x / √2)) → gelu_erf: Div(x, √2) or Mul(x, 1/√2), then Erf, Add(·, 1), and two
// Muls multiplying x, 0.5 and that sum in any grouping (PyTorch: Mul(Mul(x, sum), 0.5)).
std::optional<Fusion> match_gelu(const GraphView& g, ValueId x) {
  const auto readers = two_readers(g, x);
  if (!readers) return std::nullopt;
  for (auto [d, mx] : {*readers, std::pair{readers->second, readers->first}}) {
    const Node& scale = g.node(d);
    const bool div = scale.op == OpKind::Div && scale.inputs.size() == 2 && scale.inputs[0] == x &&
                     g.scalar_is(scale.inputs[1], std::sqrt(2.0));
    const bool mul = scale.op == OpKind::Mul && g.scalar_is(other_operand(scale, x), std::sqrt(0.5));
    if (!(div || mul) || g.node(mx).op != OpKind::Mul) continue;
    const int e = g.sole_reader(scale.outputs[0]);
    if (e < 0 || g.node(e).op != OpKind::Erf) continue;
    const int a = g.sole_reader(g.node(e).outputs[0]);
    if (a < 0 || g.node(a).op != OpKind::Add || !g.scalar_is(other_operand(g.node(a), g.node(e).outputs[0]), 1.0))
      continue;
    const ValueId sum = g.node(a).outputs[0];
    const int mt = g.sole_reader(sum);
    if (mt < 0 || g.node(mt).op != OpKind::Mul) continue;
    // The inner Mul feeds the outer one only; mx reads x and mt reads the sum (maybe the same Mul).
    int inner = -1, outer = -1;
    if (mt == mx) inner = mx, outer = g.sole_reader(g.node(mx).outputs[0]);
    else if (g.sole_reader(g.node(mx).outputs[0]) == mt) inner = mx, outer = mt;
    else if (g.sole_reader(g.node(mt).outputs[0]) == mx) inner = mt, outer = mx;
    if (outer < 0 || g.node(outer).op != OpKind::Mul) continue;
    // The three factors: inner's two operands and outer's other one must be x, the sum and 0.5.
    const ValueId inner_out = g.node(inner).outputs[0];
    const ValueId third = other_operand(g.node(outer), inner_out);
    if (third == kNoValue || g.node(inner).inputs.size() != 2) continue;
    std::vector<ValueId> factors = {g.node(inner).inputs[0], g.node(inner).inputs[1], third};
    const auto x_at = std::find(factors.begin(), factors.end(), x);
    if (x_at == factors.end()) continue;
    factors.erase(x_at);
    const auto sum_at = std::find(factors.begin(), factors.end(), sum);
    if (sum_at == factors.end()) continue;
    factors.erase(sum_at);
    if (!g.scalar_is(factors[0], 0.5)) continue;
    return Fusion{PostOps{Activation::gelu_erf}, g.node(outer).outputs[0], {d, e, a, inner, outer}};
  }
  return std::nullopt;
}

using PatternRule = std::optional<Fusion> (*)(const GraphView& g, ValueId x);

// Tried in order on the output x of each fusable op; the first match wins.
constexpr PatternRule kRules[] = {
    match_unary,  // one-node activations, kUnaryRules
    match_clip,   // Clip(x, const min?, const max?) → clip
    match_silu,   // Mul(x, Sigmoid(x)) → silu
    match_gelu,   // Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5) and regroupings → gelu_erf
};

bool same_type(const ValueType& a, const ValueType& b) {
  return a.dtype == b.dtype && a.rank_known && b.rank_known && a.shape == b.shape;
}

// The output of a float32 Conv/Gemm/MatMul, or of a BatchNormalization that stayed (DenseNet's
// pre-activation BN -> ReLU), without an activation; kNoValue for any other node.
ValueId fusable_output(const Graph& graph, const Node& n) {
  if (n.op != OpKind::Conv && n.op != OpKind::Gemm && n.op != OpKind::MatMul && n.op != OpKind::BatchNormalization)
    return kNoValue;
  if (n.outputs.size() != 1 || n.outputs[0] == kNoValue) return kNoValue;
  if (graph.value(n.outputs[0]).type.dtype != DType::f32) return kNoValue;
  const auto post = post_ops_from_attrs(n.attrs);
  return post && post->empty() ? n.outputs[0] : kNoValue;
}

}  // namespace

Result<bool> pass_fuse_activation(Graph& graph, const PassContext&) {
  const GraphView view(graph);
  std::vector<bool> remove(graph.nodes.size(), false);
  std::vector<ValueId> freed;  // inputs of removed nodes: constants among them may now be unused
  bool changed = false;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ValueId x = fusable_output(graph, graph.nodes[i]);
    if (x == kNoValue || graph_is_output(graph, x)) continue;
    std::optional<Fusion> fusion;
    for (PatternRule rule : kRules)
      if ((fusion = rule(view, x))) break;
    if (!fusion || !same_type(graph.value(x).type, graph.value(fusion->output).type)) continue;
    if (std::any_of(fusion->nodes.begin(), fusion->nodes.end(), [&](int n) { return remove[static_cast<size_t>(n)]; }))
      continue;
    Node& op = graph.nodes[i];
    post_ops_to_attrs(fusion->post, op.attrs);
    op.outputs[0] = fusion->output;
    graph.value(x).producer = -1;  // x is no longer computed
    for (int n : fusion->nodes) {
      remove[static_cast<size_t>(n)] = true;
      for (ValueId in : graph.nodes[static_cast<size_t>(n)].inputs)
        if (in != kNoValue) freed.push_back(in);
    }
    changed = true;
  }
  if (!changed) return false;
  graph_remove_nodes(graph, remove);
  graph_drop_orphaned_constants(graph, freed);
  return true;
}

}  // namespace kiln

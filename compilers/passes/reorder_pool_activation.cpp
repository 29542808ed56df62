#include "compilers/passes/reorder_pool_activation.h"

#include <string>

#include "compilers/ir/rewrite.h"

namespace kiln {
namespace {

// An attribute that must be non-negative for the activation to be non-decreasing.
struct Slope {
  const char* attr = nullptr;  // nullptr: none
  float fallback = 0.0f;       // the ONNX default
};

struct MonotonicRule {
  OpKind op;
  Slope slope{};
  Slope slope2{};
};

// Activations with act(max(a, b)) = max(act(a), act(b)); each line: op, the slopes that must be ≥ 0.
constexpr MonotonicRule kRules[] = {
    {OpKind::Relu},                                      // max(x, 0)
    {OpKind::Clip},                                      // min(max(x, lo), hi), any scalar lo/hi
    {OpKind::Sigmoid},                                   // 1 / (1 + e^-x)
    {OpKind::Tanh},                                      // tanh x
    {OpKind::Softplus},                                  // log(1 + e^x)
    {OpKind::LeakyRelu, {"alpha", 0.01f}},               // x < 0: alpha x
    {OpKind::Elu, {"alpha", 1.0f}},                      // x < 0: alpha (e^x - 1)
    {OpKind::HardSigmoid, {"alpha", 0.2f}},              // clamp(alpha x + beta, 0, 1)
    {OpKind::Selu, {"alpha", 1.67326f}, {"gamma", 1.0507f}},  // gamma (x < 0: alpha (e^x - 1))
};

bool slope_ok(const Node& n, const Slope& s) {
  if (!s.attr) return true;
  auto v = n.attrs.get_float(s.attr, s.fallback);
  return v && *v >= 0.0f;
}

bool is_monotonic_activation(const Node& n) {
  if (n.inputs.empty() || n.inputs[0] == kNoValue || n.outputs.size() != 1) return false;
  for (const MonotonicRule& rule : kRules)
    if (n.op == rule.op) return slope_ok(n, rule.slope) && slope_ok(n, rule.slope2);
  return false;
}

// Every window of the MaxPool covers at least one input element: dilations 1 and each explicit
// pad smaller than its kernel (SAME padding always is).
bool windows_never_empty(const Node& pool) {
  if (pool.outputs.size() > 1 && pool.outputs[1] != kNoValue) return false;  // Indices wanted
  auto kernel = pool.attrs.get_ints("kernel_shape");
  auto pads = pool.attrs.get_ints("pads");
  auto dilations = pool.attrs.get_ints("dilations");
  if (!kernel || !pads || !dilations || kernel->empty()) return false;
  for (int64_t d : *dilations)
    if (d != 1) return false;
  if (!pads->empty() && pads->size() != 2 * kernel->size()) return false;
  for (size_t i = 0; i < pads->size(); ++i)
    if ((*pads)[i] < 0 || (*pads)[i] >= (*kernel)[i % kernel->size()]) return false;
  return true;
}

std::string fresh_name(const Graph& graph, const std::string& hint) {
  std::string name = hint;
  for (int k = 1; graph.find_value(name) != kNoValue; ++k) name = hint + "_" + std::to_string(k);
  return name;
}

}  // namespace

Result<bool> pass_reorder_pool_activation(Graph& graph, const PassContext&) {
  const auto consumers = graph_consumers(graph);
  bool changed = false;
  for (size_t p = 0; p < graph.nodes.size(); ++p) {
    if (graph.nodes[p].op != OpKind::MaxPool || graph.nodes[p].inputs.empty()) continue;
    const ValueId a = graph.nodes[p].inputs[0];
    const int ai = a == kNoValue ? -1 : graph.value(a).producer;
    if (ai < 0 || graph_is_output(graph, a) || consumers[static_cast<size_t>(a)].size() != 1) continue;
    const size_t act_index = static_cast<size_t>(ai);
    if (!is_monotonic_activation(graph.nodes[act_index]) || !windows_never_empty(graph.nodes[p])) continue;
    if (!dtype_is_float(graph.value(a).type.dtype)) continue;
    // {MaxPool(act(x)) -> y}  =>  {MaxPool(x) -> t; act(t) -> y}. The two nodes swap places: x is
    // ready where act was, and nothing between them read a (MaxPool was its only reader).
    Node act = std::move(graph.nodes[act_index]);
    Node pool = std::move(graph.nodes[p]);
    const ValueId y = pool.outputs[0];
    const ValueId t = graph.add_value(fresh_name(graph, graph.value(y).name + "/pooled"),
                                      ValueType::unranked(graph.value(a).type.dtype));
    pool.inputs[0] = act.inputs[0];
    pool.outputs[0] = t;
    act.inputs[0] = t;
    act.outputs[0] = y;
    graph.value(a).producer = -1;  // a is no longer computed
    graph.value(t).producer = static_cast<int>(act_index);
    graph.value(y).producer = static_cast<int>(p);
    graph.nodes[act_index] = std::move(pool);
    graph.nodes[p] = std::move(act);
    changed = true;
  }
  return changed;
}

}  // namespace kiln

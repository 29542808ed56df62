#include "compilers/passes/fuse_elementwise_chain.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "compilers/ir/rewrite.h"
#include "kernels/elementwise_program.h"

namespace kiln {
namespace {

// What one instruction of a node's expansion reads: one of the node's inputs, a constant, or an
// earlier instruction of the same expansion.
struct Src {
  enum Kind { input, constant, step, none } kind = none;
  size_t index = 0;    // input: the node's input index; step: the instruction's index in the expansion
  float value = 0.0f;  // constant
};

Src in(size_t i) { return {Src::input, i}; }
Src konst(float v) { return {Src::constant, 0, v}; }
Src step(size_t s) { return {Src::step, s}; }

struct Step {
  ChainOp op;
  Src a, b;  // b: none for a unary op
};
using Expansion = std::vector<Step>;

// A float32 one-element constant's value.
std::optional<float> scalar_constant(const Graph& g, ValueId v) {
  const auto t = graph_constant_value(g, v);
  if (!t || t->dtype() != DType::f32 || t->numel() != 1) return std::nullopt;
  return t->data<float>()[0];
}

// Clip(x, lo?, hi?) with constant bounds -> max(x, lo), min(., hi) (the same NaN and ±0 results
// as Clip's reference); no bound at all is not a chain op.
std::optional<Expansion> expand_clip(const Graph& g, const Node& n) {
  Expansion e;
  const ChainOp ops[2] = {ChainOp::max, ChainOp::min};
  for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
    if (n.inputs[i] == kNoValue) continue;
    const auto bound = scalar_constant(g, n.inputs[i]);
    if (!bound || std::isnan(*bound)) return std::nullopt;
    e.push_back({ops[i - 1], e.empty() ? in(0) : step(e.size() - 1), konst(*bound)});
  }
  if (e.empty() || n.inputs.size() > 3) return std::nullopt;
  return e;
}

// The instructions computing node n's output from its inputs, one rule a line; std::nullopt when
// this pass does not take n. Each rule does the float operations n's reference kernel does.
std::optional<Expansion> expand(const Graph& g, const Node& n) {
  const auto binary = [&](ChainOp op) -> std::optional<Expansion> {
    if (n.inputs.size() != 2) return std::nullopt;
    return Expansion{{op, in(0), in(1)}};
  };
  const auto unary = [&](ChainOp op) -> std::optional<Expansion> {
    if (n.inputs.size() != 1) return std::nullopt;
    return Expansion{{op, in(0), {}}};
  };
  const auto param = [&](const char* name, float fallback) { return n.attrs.get_float(name, fallback); };
  switch (n.op) {
    case OpKind::Add: return binary(ChainOp::add);      // x + y
    case OpKind::Sub: return binary(ChainOp::sub);      // x - y
    case OpKind::Mul: return binary(ChainOp::mul);      // x * y
    case OpKind::Div: return binary(ChainOp::div);      // x / y
    case OpKind::Max: return binary(ChainOp::max);      // max(x, y), two inputs only
    case OpKind::Min: return binary(ChainOp::min);      // min(x, y), two inputs only
    case OpKind::Pow: return binary(ChainOp::pow);      // x ^ y, in double
    case OpKind::PRelu: return binary(ChainOp::prelu);  // x < 0 ? slope * x : x
    case OpKind::Relu: return unary(ChainOp::relu);
    case OpKind::Sigmoid: return unary(ChainOp::sigmoid);
    case OpKind::Tanh: return unary(ChainOp::tanh);
    case OpKind::Erf: return unary(ChainOp::erf);
    case OpKind::Exp: return unary(ChainOp::exp);
    case OpKind::Log: return unary(ChainOp::log);
    case OpKind::Sqrt: return unary(ChainOp::sqrt);
    case OpKind::Neg: return unary(ChainOp::neg);
    case OpKind::Abs: return unary(ChainOp::abs);
    case OpKind::Reciprocal: return unary(ChainOp::reciprocal);
    case OpKind::Clip: return expand_clip(g, n);  // max(x, lo), min(., hi)
    case OpKind::LeakyRelu: {                     // prelu(x, alpha)
      const auto alpha = param("alpha", 0.01f);
      if (!alpha || n.inputs.size() != 1) return std::nullopt;
      return Expansion{{ChainOp::prelu, in(0), konst(*alpha)}};
    }
    case OpKind::HardSigmoid: {  // clamp01(alpha * x + beta): mul, add, max 0, min 1
      const auto alpha = param("alpha", 0.2f), beta = param("beta", 0.5f);
      if (!alpha || !beta || n.inputs.size() != 1) return std::nullopt;
      return Expansion{{ChainOp::mul, in(0), konst(*alpha)},
                       {ChainOp::add, step(0), konst(*beta)},
                       {ChainOp::max, step(1), konst(0.0f)},
                       {ChainOp::min, step(2), konst(1.0f)}};
    }
    case OpKind::HardSwish:  // x * clamp01(x / 6 + 0.5)
      if (n.inputs.size() != 1) return std::nullopt;
      return Expansion{{ChainOp::div, in(0), konst(6.0f)},
                       {ChainOp::add, step(0), konst(0.5f)},
                       {ChainOp::max, step(1), konst(0.0f)},
                       {ChainOp::min, step(2), konst(1.0f)},
                       {ChainOp::mul, in(0), step(3)}};
    default: return std::nullopt;
  }
}

bool same_type(const ValueType& a, const ValueType& b) {
  return a.dtype == b.dtype && a.rank_known && b.rank_known && a.shape == b.shape;
}

// `in` broadcasts to `out` without changing it: right-aligned, each dim equal or a known 1.
bool broadcasts_into(const SymShape& in, const SymShape& out) {
  if (in.size() > out.size()) return false;
  const size_t offset = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    if (!(in[d] == out[offset + d]) && in[d].value != 1) return false;
  return true;
}

// n's expansion when n can be part of a chain: one float32 output of known rank, and every input
// the expansion reads float32 and broadcasting into that output.
std::optional<Expansion> chain_step(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || n.outputs[0] == kNoValue || n.attrs.has("legacy_axis")) return std::nullopt;
  const ValueType& out = g.value(n.outputs[0]).type;
  if (out.dtype != DType::f32 || !out.rank_known) return std::nullopt;
  auto e = expand(g, n);
  if (!e) return std::nullopt;
  for (const Step& s : *e)
    for (const Src& src : {s.a, s.b}) {
      if (src.kind != Src::input) continue;
      const ValueId v = n.inputs[src.index];
      if (v == kNoValue) return std::nullopt;
      const ValueType& t = g.value(v).type;
      if (t.dtype != DType::f32 || !t.rank_known || !broadcasts_into(t.shape, out.shape)) return std::nullopt;
    }
  return e;
}

// Writes one group (node indices in order, the last one the group's result) as a program; nullopt
// when no outside input has the output's type (nothing can be X).
std::optional<Node> chain_node(const Graph& g, const std::vector<int>& members,
                               const std::vector<std::optional<Expansion>>& steps) {
  const Node& last = g.nodes[static_cast<size_t>(members.back())];
  const ValueType& type = g.value(last.outputs[0]).type;
  std::map<ValueId, int> result_of;  // member outputs -> their register, filled while emitting
  for (int m : members) result_of[g.nodes[static_cast<size_t>(m)].outputs[0]] = -1;
  // Outside inputs: X, the operands and the scalars, in order of first use.
  ValueId x = kNoValue;
  std::vector<ValueId> operands;
  std::vector<float> scalars;
  auto scalar_index = [&](float v) {
    for (size_t i = 0; i < scalars.size(); ++i)
      if (std::memcmp(&scalars[i], &v, sizeof v) == 0) return static_cast<int>(i);  // -0 and +0 stay apart
    scalars.push_back(v);
    return static_cast<int>(scalars.size()) - 1;
  };
  for (int m : members) {
    const Node& n = g.nodes[static_cast<size_t>(m)];
    for (const Step& s : *steps[static_cast<size_t>(m)])
      for (const Src& src : {s.a, s.b}) {
        if (src.kind == Src::constant) scalar_index(src.value);
        if (src.kind != Src::input) continue;
        const ValueId v = n.inputs[src.index];
        if (result_of.count(v)) continue;
        if (const auto c = scalar_constant(g, v)) {
          scalar_index(*c);
        } else if (x == kNoValue && same_type(g.value(v).type, type)) {
          x = v;
        } else if (v != x && std::find(operands.begin(), operands.end(), v) == operands.end()) {
          operands.push_back(v);
        }
      }
  }
  if (x == kNoValue) return std::nullopt;

  ElementwiseProgram p;
  p.operands = static_cast<int>(operands.size());
  p.scalars = scalars;
  for (int m : members) {
    const Node& n = g.nodes[static_cast<size_t>(m)];
    const int base = p.first_result() + static_cast<int>(p.code.size());
    auto reg = [&](const Src& src) -> int {
      switch (src.kind) {
        case Src::none: return -1;
        case Src::step: return base + static_cast<int>(src.index);
        case Src::constant: return p.first_scalar() + scalar_index(src.value);
        case Src::input: break;
      }
      const ValueId v = n.inputs[src.index];
      if (const auto it = result_of.find(v); it != result_of.end()) return it->second;
      if (v == x) return 0;
      if (const auto c = scalar_constant(g, v)) return p.first_scalar() + scalar_index(*c);
      return 1 + static_cast<int>(std::find(operands.begin(), operands.end(), v) - operands.begin());
    };
    for (const Step& s : *steps[static_cast<size_t>(m)]) p.code.push_back({s.op, reg(s.a), reg(s.b)});
    result_of[n.outputs[0]] = p.first_result() + static_cast<int>(p.code.size()) - 1;
  }
  Node fused{last.name, OpKind::ElementwiseChain, {}, {x}, {last.outputs[0]}};
  fused.inputs.insert(fused.inputs.end(), operands.begin(), operands.end());
  elementwise_program_to_attrs(p, fused.attrs);
  return fused;
}

}  // namespace

Result<bool> pass_fuse_elementwise_chain(Graph& graph, const PassContext&) {
  const auto consumers = graph_consumers(graph);
  const size_t count = graph.nodes.size();
  std::vector<std::optional<Expansion>> steps(count);
  for (size_t i = 0; i < count; ++i) steps[i] = chain_step(graph, graph.nodes[i]);
  // Groups, named by their last node, grown backwards: a node joins the group of its readers when
  // all of them are in one group and its output is that group's type and no graph output, so
  // every value but the last node's is read only inside its group.
  std::vector<int> group_of(count, -1);
  for (size_t i = count; i-- > 0;) {
    if (!steps[i]) continue;
    const ValueId out = graph.nodes[i].outputs[0];
    const auto& readers = consumers[static_cast<size_t>(out)];
    int join = readers.empty() || graph_is_output(graph, out) ? -1 : group_of[static_cast<size_t>(readers[0])];
    for (int r : readers)
      if (group_of[static_cast<size_t>(r)] != join) join = -1;
    if (join >= 0 && !same_type(graph.value(out).type, graph.value(graph.nodes[static_cast<size_t>(join)].outputs[0]).type))
      join = -1;
    group_of[i] = join >= 0 ? join : static_cast<int>(i);
  }
  std::map<int, std::vector<int>> members;  // last node -> the group's nodes in order
  for (size_t i = 0; i < count; ++i)
    if (group_of[i] >= 0) members[group_of[i]].push_back(static_cast<int>(i));

  std::vector<bool> remove(count, false);
  std::vector<ValueId> freed;  // inputs of replaced nodes: constants among them may now be unused
  bool changed = false;
  for (const auto& [last, group] : members) {
    if (group.size() < 2) continue;
    auto fused = chain_node(graph, group, steps);
    if (!fused) continue;
    for (int m : group) {
      for (ValueId v : graph.nodes[static_cast<size_t>(m)].inputs) freed.push_back(v);
      if (m != last) remove[static_cast<size_t>(m)] = true;
    }
    graph.nodes[static_cast<size_t>(last)] = std::move(*fused);
    changed = true;
  }
  if (!changed) return false;
  graph_remove_nodes(graph, remove);
  graph_drop_orphaned_constants(graph, freed);
  return true;
}

}  // namespace kiln

// Graphs for pass tests: a GraphBuilder of small IR graphs (inputs, random weights, scalar
// initializers and Constant nodes, nodes whose outputs are left unranked for shape inference to
// fill in) and run_checked, which runs passes with the numeric check on, so every pass is also
// compared with the unfused graph on the reference executor.
#pragma once

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "compilers/ir/graph.h"
#include "compilers/passes/pass_runner.h"

namespace kiln::testing {

struct GraphBuilder {
  Graph g;
  uint32_t seed = 1;

  static Tensor random(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    Tensor t = Tensor::zeros(DType::f32, std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    return t;
  }

  ValueId input(const std::string& name, Shape shape) {
    const ValueId id = g.add_value(name, ValueType::of(DType::f32, sym_shape_from(shape)));
    g.inputs.push_back(id);
    return id;
  }
  ValueId weight(const std::string& name, Shape shape, float lo = -1.0f, float hi = 1.0f) {
    const ValueId id = g.add_value(name, ValueType::of(DType::f32, sym_shape_from(shape)));
    g.initializers[id] = random(std::move(shape), seed++, lo, hi);
    return id;
  }
  ValueId scalar(const std::string& name, float v) {
    const ValueId id = g.add_value(name, ValueType::of(DType::f32, {}));
    g.initializers[id] = Tensor::scalar<float>(v);
    return id;
  }
  // A Constant node holding the scalar v.
  ValueId constant(const std::string& name, float v) {
    const ValueId id = g.add_value(name, ValueType::unranked(DType::f32));
    Attrs a;
    a.set("value", Tensor::scalar<float>(v));
    g.add_node(Node{name + "_node", OpKind::Constant, a, {}, {id}});
    return id;
  }
  ValueId node(OpKind op, const std::string& out, std::vector<ValueId> inputs, Attrs attrs = {}) {
    const ValueId id = g.add_value(out, ValueType::unranked(DType::f32));
    g.add_node(Node{out + "_node", op, std::move(attrs), std::move(inputs), {id}});
    return id;
  }
  void output(ValueId id) { g.outputs.push_back(id); }
};

// Runs `passes` on g with the numeric check (REQUIREs success) and returns the records.
inline std::vector<PassRecord> run_checked(Graph& g, const std::vector<std::string>& passes) {
  PassRunOptions options;
  options.check_numerics = true;
  auto records = run_passes(g, passes, options);
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  return std::move(*records);
}

inline std::vector<OpKind> graph_ops(const Graph& g) {
  std::vector<OpKind> out;
  for (const Node& n : g.nodes) out.push_back(n.op);
  return out;
}

}  // namespace kiln::testing

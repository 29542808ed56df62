// The BrainSlug rewrites: reorder_pool_activation (MaxPool(act(x)) → act(MaxPool(x))) and
// merge_concats (Concat of a Concat on the same axis → one Concat). Each runs through run_passes
// with check_numerics, so the rewritten graph is checked against the original on the reference
// executor; both rewrites are exact, so the error must be 0.
#include <catch2/catch.hpp>

#include <functional>

#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "kernels/post_ops.h"
#include "tests/support/op_harness.h"

using namespace kiln;

namespace {

struct Builder {
  Graph g;
  uint32_t seed = 1;

  ValueId input(const std::string& name, Shape shape) {
    const ValueId id = g.add_value(name, ValueType::of(DType::f32, sym_shape_from(shape)));
    g.inputs.push_back(id);
    return id;
  }
  ValueId weight(const std::string& name, Shape shape) {
    const ValueId id = g.add_value(name, ValueType::of(DType::f32, sym_shape_from(shape)));
    g.initializers[id] = test::uniform_f32(std::move(shape), seed++);
    return id;
  }
  ValueId scalar(const std::string& name, float v) {
    const ValueId id = g.add_value(name, ValueType::of(DType::f32, {}));
    g.initializers[id] = Tensor::scalar<float>(v);
    return id;
  }
  ValueId node(OpKind op, const std::string& out, std::vector<ValueId> inputs, Attrs attrs = {}) {
    const ValueId id = g.add_value(out, ValueType::unranked(DType::f32));
    g.add_node(Node{out + "_node", op, std::move(attrs), std::move(inputs), {id}});
    return id;
  }
  ValueId concat(const std::string& out, std::vector<ValueId> inputs, int64_t axis) {
    Attrs a;
    a.set("axis", axis);
    return node(OpKind::Concat, out, std::move(inputs), a);
  }
  void output(ValueId id) { g.outputs.push_back(id); }
};

// MaxPool 3x3, stride 2, pad 1 (ResNet's stem pool) unless told otherwise.
Attrs pool_attrs(std::vector<int64_t> pads = {1, 1, 1, 1}, int64_t ceil_mode = 0) {
  Attrs a;
  a.set("kernel_shape", std::vector<int64_t>{3, 3});
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("pads", std::move(pads));
  a.set("ceil_mode", ceil_mode);
  return a;
}

Attrs float_attrs(std::initializer_list<std::pair<const char*, float>> list) {
  Attrs a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

// Runs the passes with the numeric check; returns the records (REQUIREs success).
std::vector<PassRecord> run(Graph& g, const std::vector<std::string>& passes) {
  PassRunOptions options;
  options.check_numerics = true;
  auto records = run_passes(g, passes, options);
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  return *records;
}

std::vector<OpKind> ops(const Graph& g) {
  std::vector<OpKind> out;
  for (const Node& n : g.nodes) out.push_back(n.op);
  return out;
}

struct ActCase {
  const char* what;
  OpKind op;
  std::function<std::vector<ValueId>(Builder&, ValueId)> inputs;  // the activation's inputs given x
  Attrs attrs;
};

std::vector<ValueId> just_x(Builder&, ValueId x) { return {x}; }

std::vector<ActCase> monotonic_activations() {
  return {
      {"Relu", OpKind::Relu, just_x, {}},
      {"Relu6 as Clip(0, 6)", OpKind::Clip,
       [](Builder& b, ValueId x) { return std::vector<ValueId>{x, b.scalar("lo", 0.0f), b.scalar("hi", 0.5f)}; }, {}},
      {"Clip with only max", OpKind::Clip,
       [](Builder& b, ValueId x) { return std::vector<ValueId>{x, kNoValue, b.scalar("hi", 0.25f)}; }, {}},
      {"LeakyRelu", OpKind::LeakyRelu, just_x, float_attrs({{"alpha", 0.1f}})},
      {"Sigmoid", OpKind::Sigmoid, just_x, {}},
      {"Tanh", OpKind::Tanh, just_x, {}},
      {"Softplus", OpKind::Softplus, just_x, {}},
      {"HardSigmoid", OpKind::HardSigmoid, just_x, float_attrs({{"alpha", 0.9f}, {"beta", 0.5f}})},
      {"Elu", OpKind::Elu, just_x, float_attrs({{"alpha", 0.7f}})},
      {"Selu (defaults)", OpKind::Selu, just_x, {}},
  };
}

}  // namespace

// ---- reorder_pool_activation ----

TEST_CASE("reorder_pool_activation moves each monotonic activation behind MaxPool", "[passes]") {
  for (const ActCase& c : monotonic_activations()) {
    for (int64_t ceil_mode : {0, 1}) {
      INFO(c.what << " ceil_mode=" << ceil_mode);
      Builder b;
      const ValueId x = b.input("x", {1, 3, 9, 9});
      const ValueId a = b.node(c.op, "a", c.inputs(b, x), c.attrs);
      b.output(b.node(OpKind::MaxPool, "y", {a}, pool_attrs({1, 1, 1, 1}, ceil_mode)));
      const auto records = run(b.g, {"reorder_pool_activation"});
      REQUIRE(records[0].changed);
      REQUIRE(records[0].max_rel_error == 0.0);
      REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::MaxPool, c.op});
      // MaxPool reads x; the activation reads the pooled value and writes the graph output y.
      const Node& pool = b.g.nodes[0];
      const Node& act = b.g.nodes[1];
      REQUIRE(pool.inputs[0] == x);
      REQUIRE(act.inputs[0] == pool.outputs[0]);
      REQUIRE(act.outputs[0] == b.g.find_value("y"));
      REQUIRE(b.g.value(pool.outputs[0]).type.shape == SymShape{1, 3, 5, 5});
      REQUIRE(b.g.value(pool.outputs[0]).name == "y/pooled");
    }
  }
}

TEST_CASE("reorder_pool_activation moves an activation through consecutive pools", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 2, 12, 12});
  const ValueId a = b.node(OpKind::Relu, "a", {x});
  const ValueId p1 = b.node(OpKind::MaxPool, "p1", {a}, pool_attrs());
  b.output(b.node(OpKind::MaxPool, "y", {p1}, pool_attrs({0, 0, 0, 0})));
  const auto records = run(b.g, {"reorder_pool_activation"});
  REQUIRE(records[0].max_rel_error == 0.0);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::MaxPool, OpKind::MaxPool, OpKind::Relu});
  REQUIRE(b.g.nodes[2].outputs[0] == b.g.find_value("y"));
}

TEST_CASE("reorder_pool_activation leaves what does not commute with the pool", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 2, 8, 8});
  auto pool_of = [&](const std::string& name, OpKind act_op, Attrs act_attrs = {}, OpKind pool_op = OpKind::MaxPool,
                     Attrs pattrs = pool_attrs()) {
    const ValueId a = b.node(act_op, name + "_act", {x}, std::move(act_attrs));
    const ValueId y = b.node(pool_op, name, {a}, std::move(pattrs));
    b.output(y);
    return a;
  };
  pool_of("avg", OpKind::Relu, {}, OpKind::AveragePool);                      // a mean, not a max
  pool_of("hswish", OpKind::HardSwish);                                       // not monotonic
  pool_of("neg_leaky", OpKind::LeakyRelu, float_attrs({{"alpha", -0.5f}}));  // decreasing for x < 0
  pool_of("neg_hsig", OpKind::HardSigmoid, float_attrs({{"alpha", -0.2f}}));  // decreasing
  const ValueId two = pool_of("two_readers", OpKind::Relu);                   // the activation has another reader
  b.output(b.node(OpKind::Neg, "other", {two}));
  b.output(pool_of("graph_output", OpKind::Relu));                            // the activation is a graph output
  Attrs dilated = pool_attrs({0, 0, 0, 0});
  dilated.set("dilations", std::vector<int64_t>{2, 2});
  pool_of("dilated", OpKind::Relu, {}, OpKind::MaxPool, dilated);
  Attrs wide_pad = pool_attrs({3, 3, 3, 3});  // corner windows cover padding only: max = lowest float
  wide_pad.set("strides", std::vector<int64_t>{1, 1});
  pool_of("wide_pad", OpKind::Relu, {}, OpKind::MaxPool, wide_pad);
  const ValueId ia = b.node(OpKind::Relu, "indices_act", {x});
  const ValueId iy = b.g.add_value("indices_y", ValueType::unranked(DType::f32));
  const ValueId idx = b.g.add_value("indices", ValueType::unranked(DType::i64));
  b.g.add_node(Node{"indices_pool", OpKind::MaxPool, pool_attrs(), {ia}, {iy, idx}});  // Indices wanted
  b.output(iy);
  b.output(idx);
  const size_t nodes = b.g.nodes.size();
  const auto before = ops(b.g);
  const auto records = run(b.g, {"reorder_pool_activation"});
  REQUIRE_FALSE(records[0].changed);
  REQUIRE(b.g.nodes.size() == nodes);
  REQUIRE(ops(b.g) == before);
}

TEST_CASE("the default pipeline keeps a Conv's activation fused rather than reordering it", "[passes]") {
  // Conv -> Relu -> MaxPool (ResNet's stem): the Relu fuses into the Conv (free in the epilogue),
  // so nothing is left to reorder; a Relu after a non-fusable op is reordered.
  Builder b;
  const ValueId x = b.input("x", {1, 2, 8, 8});
  Attrs conv;
  conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  const ValueId c = b.node(OpKind::Conv, "c", {x, b.weight("w", {4, 2, 3, 3}), b.weight("bias", {4})}, conv);
  const ValueId p = b.node(OpKind::MaxPool, "p", {b.node(OpKind::Relu, "r", {c})}, pool_attrs());
  const ValueId n = b.node(OpKind::Neg, "n", {p});
  b.output(b.node(OpKind::MaxPool, "y", {b.node(OpKind::Relu, "r2", {n})}, pool_attrs()));
  const auto records = run(b.g, default_pipeline());
  for (const PassRecord& r : records) REQUIRE(r.max_rel_error <= 1e-5);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Conv, OpKind::MaxPool, OpKind::Neg, OpKind::MaxPool, OpKind::Relu});
  REQUIRE(post_ops_from_attrs(b.g.nodes[0].attrs)->activation == Activation::relu);
}

// ---- merge_concats ----

TEST_CASE("merge_concats flattens nested Concats on the same axis", "[passes]") {
  Builder b;
  const ValueId a = b.input("a", {1, 2, 3, 3});
  const ValueId c = b.input("c", {1, 1, 3, 3});
  const ValueId n = b.node(OpKind::Neg, "n", {a});
  const ValueId inner = b.concat("inner", {n, c}, 1);
  const ValueId innermost = b.concat("innermost", {c, a}, -3);  // the same axis, counted from the end
  const ValueId middle = b.concat("middle", {innermost, n}, 1);
  b.output(b.concat("y", {a, inner, middle, b.weight("w", {1, 4, 3, 3})}, 1));
  const auto records = run(b.g, {"merge_concats"});
  REQUIRE(records[0].changed);
  REQUIRE(records[0].max_rel_error == 0.0);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Neg, OpKind::Concat});
  const Node& y = b.g.nodes[1];
  REQUIRE(y.outputs[0] == b.g.find_value("y"));
  REQUIRE(y.inputs == std::vector<ValueId>{a, n, c, c, a, n, b.g.find_value("w")});
  REQUIRE(b.g.value(y.outputs[0]).type.shape == SymShape{1, 14, 3, 3});
}

TEST_CASE("merge_concats leaves Concats on other axes or with other readers", "[passes]") {
  Builder b;
  const ValueId a = b.input("a", {2, 2, 3});
  const ValueId other_axis = b.concat("other_axis", {a, a}, 2);
  b.output(b.concat("y1", {other_axis, other_axis}, 1));  // read twice: also not a sole reader
  const ValueId shared = b.concat("shared", {a, a}, 0);
  b.output(b.concat("y2", {shared, a}, 0));
  b.output(b.node(OpKind::Neg, "y3", {shared}));
  const ValueId out = b.concat("out", {a, a}, 1);
  b.output(out);
  b.output(b.concat("y4", {out, a}, 1));
  const ValueId axis2 = b.concat("axis2", {a, a}, 2);
  b.output(b.concat("y5", {axis2, b.input("wide", {2, 2, 6})}, 1));
  const size_t nodes = b.g.nodes.size();
  const auto records = run(b.g, {"merge_concats"});
  REQUIRE_FALSE(records[0].changed);
  REQUIRE(b.g.nodes.size() == nodes);
}

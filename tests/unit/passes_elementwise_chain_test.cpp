// fuse_elementwise_chain: which groups of elementwise nodes become one ElementwiseChain and which
// do not. Every run goes through run_passes with the numeric check, so the fused graph is compared
// with the unfused one on the reference executor; the chain does the same float operations in the
// same order, so the difference must be exactly 0.
#include <catch2/catch.hpp>

#include <algorithm>

#include "compilers/passes/pipeline.h"
#include "kernels/elementwise_program.h"
#include "kernels/post_ops.h"
#include "tests/support/graph_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<std::string> ops_of(const Node& chain) {
  auto names = chain.attrs.get_strings("ops");
  REQUIRE(names);
  return *names;
}

// fuse_elementwise_chain changed the graph and left its outputs exactly as they were (other
// passes are held to the runner's tolerance).
void require_exact(const std::vector<PassRecord>& records) {
  const auto it = std::find_if(records.begin(), records.end(), [](const PassRecord& r) { return r.name == "fuse_elementwise_chain"; });
  REQUIRE(it != records.end());
  REQUIRE(it->changed);
  REQUIRE(it->max_rel_error == 0.0);
}

// GELU as PyTorch exports it: Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5).
ValueId gelu(GraphBuilder& b, const std::string& n, ValueId x) {
  const ValueId e = b.node(OpKind::Erf, n + "_erf", {b.node(OpKind::Div, n + "_div", {x, b.scalar(n + "_sqrt2", 1.4142135f)})});
  const ValueId h = b.node(OpKind::Add, n + "_add1", {e, b.scalar(n + "_one", 1.0f)});
  return b.node(OpKind::Mul, n + "_half", {b.node(OpKind::Mul, n + "_mul", {x, h}), b.scalar(n + "_0.5", 0.5f)});
}

// The default pipeline, fuse_elementwise_chain run on its own after the passes before it, so that
// its error is measured against their result.
std::vector<PassRecord> run_default_pipeline(Graph& g) {
  std::vector<std::string> before = default_pipeline(), after;
  const auto at = std::find(before.begin(), before.end(), "fuse_elementwise_chain");
  REQUIRE(at != before.end());
  after.assign(at + 1, before.end());
  before.erase(at, before.end());
  run_checked(g, before);
  auto records = run_checked(g, {"fuse_elementwise_chain"});
  run_checked(g, after);
  return records;
}

const Node& only(const Graph& g, OpKind op) {
  const auto it = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; });
  REQUIRE(it != g.nodes.end());
  REQUIRE(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; }) == 1);
  return *it;
}

}  // namespace

// A constant bias goes into the MatMul (fuse_matmul_bias) and the GELU with it (fuse_activation);
// a bias the model takes as an input stays an Add, which the chain runs with the GELU.
TEST_CASE("MatMul, Add(a bias that is an input), GELU written out: one MatMul and one chain", "[passes][elementwise_chain]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 7, 7, 24});
  const ValueId mm = b.node(OpKind::MatMul, "mm", {x, b.weight("w", {24, 96})});
  const ValueId biased = b.node(OpKind::Add, "biased", {mm, b.input("bias", {96})});
  b.output(gelu(b, "gelu", biased));
  const auto records = run_default_pipeline(b.g);
  require_exact(records);
  REQUIRE(graph_ops(b.g) == std::vector<OpKind>{OpKind::MatMul, OpKind::ElementwiseChain});
  const Node& chain = b.g.nodes[1];
  REQUIRE(chain.inputs == std::vector<ValueId>{mm, b.g.find_value("bias")});
  REQUIRE(chain.outputs[0] == b.g.outputs[0]);
  REQUIRE(ops_of(chain) == std::vector<std::string>{"add", "div", "erf", "add", "mul", "mul"});
  REQUIRE(*chain.attrs.get_floats("scalars") == std::vector<float>{1.4142135f, 1.0f, 0.5f});
  // The scalars became attributes; their initializers are gone (the weight stays).
  REQUIRE(b.g.initializers.size() == 1);
}

TEST_CASE("MatMul, Add(constant bias), GELU written out: one MatMul, nothing left for a chain", "[passes][elementwise_chain]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 7, 7, 24});
  const ValueId mm = b.node(OpKind::MatMul, "mm", {x, b.weight("w", {24, 96})});
  b.output(gelu(b, "gelu", b.node(OpKind::Add, "biased", {mm, b.weight("bias", {96})})));
  run_checked(b.g, default_pipeline());
  REQUIRE(graph_ops(b.g) == std::vector<OpKind>{OpKind::MatMul});
  REQUIRE(b.g.nodes[0].inputs[2] == b.g.find_value("bias"));
  REQUIRE(b.g.nodes[0].attrs.get_string("activation", "none").value() == "gelu_erf");
}

TEST_CASE("ConvNeXt's layer scale and residual: Mul(gamma [C,1,1]) then Add(shortcut)", "[passes][elementwise_chain]") {
  GraphBuilder b;
  const ValueId shortcut = b.input("shortcut", {1, 16, 5, 5});
  const ValueId y = b.input("y", {1, 5, 5, 16});
  Attrs perm;
  perm.set("perm", std::vector<int64_t>{0, 3, 1, 2});
  const ValueId t = b.node(OpKind::Transpose, "t", {y}, perm);
  const ValueId scaled = b.node(OpKind::Mul, "scaled", {b.weight("gamma", {16, 1, 1}), t});
  b.output(b.node(OpKind::Add, "out", {shortcut, scaled}));
  const auto records = run_checked(b.g, {"fuse_elementwise_chain"});
  require_exact(records);
  REQUIRE(graph_ops(b.g) == std::vector<OpKind>{OpKind::Transpose, OpKind::ElementwiseChain});
  const Node& chain = b.g.nodes[1];
  // X is the first input of the output's shape met (the Transpose's), the others are operands.
  REQUIRE(chain.inputs == std::vector<ValueId>{t, b.g.find_value("gamma"), shortcut});
  REQUIRE(*chain.attrs.get_ints("args") == std::vector<int64_t>{1, 0, 2, 3});  // gamma * X, shortcut + that
}

TEST_CASE("every op the pass takes, operand orders kept", "[passes][elementwise_chain]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 4, 5});
  const ValueId slope = b.weight("slope", {3, 1, 1});
  const ValueId row = b.input("row", {5});
  ValueId v = b.node(OpKind::Sub, "s1", {b.scalar("c3", 3.0f), x});  // c - x
  v = b.node(OpKind::Div, "d1", {row, v});                            // row / v
  v = b.node(OpKind::Clip, "clip", {v, b.scalar("lo", -4.0f), b.scalar("hi", 4.0f)});
  v = b.node(OpKind::Clip, "clip_lo", {v, b.constant("lo2", -3.5f)});
  v = b.node(OpKind::LeakyRelu, "leaky", {v}, [] { Attrs a; a.set("alpha", 0.2f); return a; }());
  v = b.node(OpKind::PRelu, "prelu", {v, slope});
  v = b.node(OpKind::HardSigmoid, "hsig", {v});
  v = b.node(OpKind::HardSwish, "hswish", {b.node(OpKind::Add, "a1", {v, x})});
  v = b.node(OpKind::Pow, "sq", {v, b.scalar("two", 2.0f)});
  v = b.node(OpKind::Max, "max", {v, b.node(OpKind::Min, "min", {x, row})});
  v = b.node(OpKind::Sqrt, "sqrt", {b.node(OpKind::Abs, "abs", {v})});
  v = b.node(OpKind::Log, "log", {b.node(OpKind::Add, "a2", {v, b.scalar("one", 1.0f)})});
  v = b.node(OpKind::Exp, "exp", {b.node(OpKind::Neg, "neg", {v})});
  v = b.node(OpKind::Reciprocal, "rcp", {b.node(OpKind::Add, "a3", {v, b.scalar("one_b", 1.0f)})});
  v = b.node(OpKind::Tanh, "tanh", {b.node(OpKind::Sigmoid, "sig", {v})});
  v = b.node(OpKind::Relu, "relu", {b.node(OpKind::Sub, "s2", {v, row})});  // x - row
  b.output(b.node(OpKind::Erf, "erf", {v}));
  const auto records = run_checked(b.g, {"fuse_elementwise_chain"});
  require_exact(records);
  REQUIRE(graph_ops(b.g) == std::vector<OpKind>{OpKind::ElementwiseChain});
  REQUIRE(b.g.nodes[0].inputs == std::vector<ValueId>{x, row, slope});
}

TEST_CASE("fuse_elementwise_chain stops where a value is read outside or is a graph output", "[passes][elementwise_chain]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 8, 6});
  // t is read by the chain and by a Transpose outside it: the group starts after t, with X = t.
  const ValueId t = b.node(OpKind::Add, "t", {x, b.weight("b1", {6})});
  const ValueId u = b.node(OpKind::Mul, "u", {b.node(OpKind::Sigmoid, "sig", {t}), b.scalar("two", 2.0f)});
  b.output(u);
  b.output(b.node(OpKind::Transpose, "tt", {t}));
  // g is a graph output in the middle: Relu(Add) stays two nodes, g's own group is one node.
  const ValueId g = b.node(OpKind::Add, "g", {x, b.weight("b2", {6})});
  b.output(g);
  b.output(b.node(OpKind::Relu, "r", {g}));
  const auto records = run_checked(b.g, {"fuse_elementwise_chain"});
  require_exact(records);
  REQUIRE(graph_ops(b.g) == std::vector<OpKind>{OpKind::Add, OpKind::ElementwiseChain, OpKind::Transpose, OpKind::Add,
                                                  OpKind::Relu});
  const Node& chain = only(b.g, OpKind::ElementwiseChain);
  REQUIRE(chain.inputs == std::vector<ValueId>{t});
  REQUIRE(ops_of(chain) == std::vector<std::string>{"sigmoid", "mul"});
}

TEST_CASE("fuse_elementwise_chain leaves broadcasts that change the shape and single nodes", "[passes][elementwise_chain]") {
  GraphBuilder b;
  // Add([4,1], [1,5]) widens both inputs: nothing has the output's shape to be X.
  const ValueId col = b.input("col", {4, 1});
  const ValueId row = b.input("row", {1, 5});
  b.output(b.node(OpKind::Relu, "r1", {b.node(OpKind::Add, "outer", {col, row})}));
  // Relu([4,1]) then Add with [4,5]: the Relu's output is not the group's shape.
  b.output(b.node(OpKind::Add, "wide", {b.node(OpKind::Relu, "r2", {col}), b.input("full", {4, 5})}));
  // A lone Mul.
  b.output(b.node(OpKind::Mul, "lone", {col, b.scalar("three", 3.0f)}));
  // An int32 chain.
  const ValueId ints = b.g.add_value("ints", ValueType::of(DType::i32, {4}));
  b.g.inputs.push_back(ints);
  const ValueId n1 = b.g.add_value("n1", ValueType::unranked(DType::i32));
  b.g.add_node(Node{"n1_node", OpKind::Neg, {}, {ints}, {n1}});
  const ValueId n2 = b.g.add_value("n2", ValueType::unranked(DType::i32));
  b.g.add_node(Node{"n2_node", OpKind::Abs, {}, {n1}, {n2}});
  b.output(n2);
  const size_t nodes = b.g.nodes.size();
  const auto records = run_checked(b.g, {"fuse_elementwise_chain"});
  REQUIRE_FALSE(records[0].changed);
  REQUIRE(b.g.nodes.size() == nodes);
}

TEST_CASE("fuse_activation takes the epilogue first, the chain takes what follows", "[passes][elementwise_chain]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 6, 6});
  Attrs pads;
  pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  // Conv -> GELU: all of it is the Conv's epilogue, no chain.
  const ValueId c1 = b.node(OpKind::Conv, "c1", {x, b.weight("w1", {4, 3, 3, 3}), b.weight("b1", {4})}, pads);
  b.output(gelu(b, "g1", c1));
  // Conv -> Sigmoid -> Mul(2) -> Add(1): the Sigmoid goes to the Conv, the Mul and Add to a chain.
  const ValueId c2 = b.node(OpKind::Conv, "c2", {x, b.weight("w2", {4, 3, 3, 3}), b.weight("b2", {4})}, pads);
  const ValueId s = b.node(OpKind::Sigmoid, "s", {c2});
  b.output(b.node(OpKind::Add, "y2", {b.node(OpKind::Mul, "m2", {s, b.scalar("two", 2.0f)}), b.scalar("one", 1.0f)}));
  const auto records = run_default_pipeline(b.g);
  require_exact(records);
  REQUIRE(graph_ops(b.g) == std::vector<OpKind>{OpKind::Conv, OpKind::Conv, OpKind::ElementwiseChain});
  REQUIRE(post_ops_from_attrs(b.g.nodes[0].attrs)->activation == Activation::gelu_erf);
  REQUIRE(post_ops_from_attrs(b.g.nodes[1].attrs)->activation == Activation::sigmoid);
  REQUIRE(ops_of(b.g.nodes[2]) == std::vector<std::string>{"mul", "add"});
}

TEST_CASE("the default pipeline fuses chains after activations and before depth-first fusion", "[passes][elementwise_chain]") {
  const auto names = default_pipeline();
  const auto at = [&](const char* n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  REQUIRE(at("fuse_elementwise_chain") < static_cast<long>(names.size()));
  REQUIRE(at("fuse_activation") < at("fuse_elementwise_chain"));
  REQUIRE(at("merge_concats") < at("fuse_elementwise_chain"));
  REQUIRE(at("fuse_elementwise_chain") < at("fuse_depth_first"));
}

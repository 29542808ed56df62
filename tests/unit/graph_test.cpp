// Graph IR: verification, topological order and printing, on graphs built by hand.
#include <catch2/catch.hpp>

#include <sstream>

#include "compilers/analysis/model_stats.h"
#include "compilers/ir/printer.h"
#include "compilers/ir/shape_inference.h"
#include "compilers/ir/verify.h"

using namespace kiln;

namespace {

// x -> relu -> neg -> y, with the nodes stored in reverse order.
Graph reversed_chain() {
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {Dim::named("batch"), 3}));
  const ValueId a = g.add_value("a", ValueType::unranked(DType::f32));
  const ValueId y = g.add_value("y", ValueType::unranked(DType::f32));
  g.inputs = {x};
  g.outputs = {y};
  g.add_node(Node{"neg", OpKind::Neg, {}, {a}, {y}});
  g.add_node(Node{"relu", OpKind::Relu, {}, {x}, {a}});
  return g;
}

}  // namespace

TEST_CASE("topological order puts producers first and keeps valid order", "[graph]") {
  Graph g = reversed_chain();
  REQUIRE(graph_verify(g));
  auto order = graph_topo_order(g);
  REQUIRE(order);
  REQUIRE(*order == std::vector<int>{1, 0});
  REQUIRE(graph_sort(g));
  REQUIRE(g.nodes[0].name == "relu");
  REQUIRE(g.value(g.find_value("a")).producer == 0);
  auto again = graph_topo_order(g);
  REQUIRE(*again == std::vector<int>{0, 1});
}

TEST_CASE("a cycle is reported through a node on it, not one downstream", "[graph]") {
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {1}));
  const ValueId a = g.add_value("a", ValueType::unranked(DType::f32));
  const ValueId b = g.add_value("b", ValueType::unranked(DType::f32));
  const ValueId y = g.add_value("y", ValueType::unranked(DType::f32));
  g.inputs = {x};
  g.outputs = {y};
  g.add_node(Node{"after", OpKind::Relu, {}, {a}, {y}});  // downstream of the cycle
  g.add_node(Node{"p", OpKind::Add, {}, {x, b}, {a}});
  g.add_node(Node{"q", OpKind::Neg, {}, {a}, {b}});
  auto status = graph_verify(g);
  REQUIRE_FALSE(status);
  REQUIRE(status.code() == ErrorCode::invalid_graph);
  const std::string& m = status.message();
  REQUIRE(m.find("cycle") != std::string::npos);
  REQUIRE((m.find("'p'") != std::string::npos || m.find("'q'") != std::string::npos));
}

TEST_CASE("graph outputs must be produced", "[graph]") {
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {1}));
  const ValueId y = g.add_value("y", ValueType::unranked(DType::f32));
  g.inputs = {x};
  g.outputs = {y};
  auto status = graph_verify(g);
  REQUIRE_FALSE(status);
  REQUIRE(status.message() == "graph output 'y' is not produced by any node");
}

TEST_CASE("the printer shows nodes, attributes and inferred types", "[graph]") {
  Graph g = reversed_chain();
  REQUIRE(graph_sort(g));
  g.nodes[0].attrs.set("note", std::string("kept"));
  REQUIRE(graph_infer_shapes(g));
  std::ostringstream os;
  graph_print(g, os);
  const std::string text = os.str();
  REQUIRE(text.find("input  %x: float32[batch,3]") != std::string::npos);
  REQUIRE(text.find("%a = Relu(%x) {note=\"kept\"}  # relu float32[batch,3]") != std::string::npos);
  REQUIRE(text.find("output %y: float32[batch,3]") != std::string::npos);
}

// Found by fuzz_onnx_import: a Conv whose weight has zero output channels divided by zero counting MACs.
TEST_CASE("model stats of a conv with an empty or rank-0 weight: MACs unknown, no crash", "[graph][stats]") {
  for (const Shape& weight_shape : {Shape{0, 3, 3, 3}, Shape{}}) {
    Graph g;
    const ValueId x = g.add_value("x", ValueType::of(DType::f32, {1, 3, 8, 8}));
    const ValueId w = g.add_value("w", ValueType::of(DType::f32, sym_shape_from(weight_shape)));
    const ValueId y = g.add_value("y", ValueType::of(DType::f32, {1, 0, 6, 6}));
    g.inputs = {x, w};
    g.outputs = {y};
    g.add_node(Node{"conv", OpKind::Conv, {}, {x, w}, {y}});
    const ModelStats stats = model_stats(g);
    REQUIRE(stats.layers.size() == 1);
    CHECK(stats.layers[0].macs == -1);
    CHECK_FALSE(stats.complete);
    CHECK(stats.malformed == std::vector<std::string>{"conv"});  // named, not blamed on symbolic shapes
    CHECK_FALSE(stats.shapes_unknown);
  }
  // A symbolic batch is what shapes_unknown says.
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {Dim::named("batch"), 3}));
  const ValueId y = g.add_value("y", ValueType::of(DType::f32, {Dim::named("batch"), 3}));
  g.inputs = {x};
  g.outputs = {y};
  g.add_node(Node{"relu", OpKind::Relu, {}, {x}, {y}});
  const ModelStats symbolic = model_stats(g);
  CHECK(symbolic.shapes_unknown);
  CHECK_FALSE(symbolic.complete);
  CHECK(symbolic.malformed.empty());
}

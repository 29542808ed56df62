// ONNX import: valid models, opset normalization, and every malformed input giving a typed error.
#include <catch2/catch.hpp>

#include <random>

#include "compilers/ir/shape_inference.h"
#include "compilers/lower/to_plan.h"
#include "compilers/onnx/import.h"
#include "kernels/executor.h"
#include "tests/support/onnx_builder.h"

using namespace kiln;
using kiln::test::OnnxBuilder;

namespace {

Result<Graph> import_string(const std::string& bytes) {
  return onnx_import_bytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("a valid model imports, infers shapes and runs", "[onnx]") {
  auto graph = import_string(kiln::test::relu_add_model().bytes());
  REQUIRE(graph);
  REQUIRE(graph->nodes.size() == 2);
  REQUIRE(graph->inputs.size() == 1);
  REQUIRE(graph->value(graph->inputs[0]).type.shape[0].symbol == "batch");

  REQUIRE(graph_infer_shapes(*graph));
  const ValueType& y = graph->value(graph->outputs[0]).type;
  REQUIRE(y.rank_known);
  REQUIRE(y.shape[0].symbol == "batch");
  REQUIRE(y.shape[1].value == 4);

  const Plan plan = graph_to_plan(*graph);
  const std::vector<float> x = {1, 1, 1, 1, -3, 3, -3, 3};
  auto result = execute_reference(plan, {Tensor::from_values<float>({2, 4}, x)});
  REQUIRE(result);
  const Tensor& out = result->outputs[0];
  REQUIRE(out.shape() == Shape{2, 4});
  const std::vector<float> want = {2, 0, 1.5f, 0.5f, 0, 1, 0, 2.5f};
  for (int i = 0; i < 8; ++i) REQUIRE(out.data<float>()[i] == Approx(want[static_cast<size_t>(i)]));
}

TEST_CASE("symbolic dims can be bound during shape inference", "[onnx]") {
  auto graph = import_string(kiln::test::relu_add_model().bytes());
  REQUIRE(graph);
  ShapeInferenceOptions options;
  options.bindings["batch"] = 8;
  REQUIRE(graph_infer_shapes(*graph, options));
  REQUIRE(graph->value(graph->outputs[0]).type.shape[0].value == 8);
}

TEST_CASE("garbage, empty and truncated bytes are parse errors", "[onnx][bad-input]") {
  SECTION("empty") {
    auto g = import_string("");
    REQUIRE_FALSE(g);
    REQUIRE(g.error().code == ErrorCode::parse);
    REQUIRE(contains(g.error().message, "empty"));
  }
  SECTION("random bytes") {
    std::mt19937 rng(42);
    for (int trial = 0; trial < 50; ++trial) {
      std::string bytes(static_cast<size_t>(1 + rng() % 4096), '\0');
      for (char& c : bytes) c = static_cast<char>(rng());
      auto g = import_string(bytes);
      REQUIRE_FALSE(g);
      REQUIRE(g.error().code == ErrorCode::parse);
    }
  }
  SECTION("every truncation of a valid model fails cleanly or imports the intact prefix") {
    const std::string full = kiln::test::relu_add_model().bytes();
    for (size_t n = 1; n < full.size(); ++n) {
      auto g = import_string(full.substr(0, n));
      if (!g) REQUIRE_FALSE(g.error().message.empty());
    }
  }
}

TEST_CASE("an unsupported op names the op, node and opset", "[onnx][bad-input]") {
  OnnxBuilder b(11);
  b.input("boxes", {1, 4, 4}).input("scores", {1, 1, 4}).output("idx", {-1, 3}, onnx::TensorProto::INT64);
  b.node("NonMaxSuppression", {"boxes", "scores"}, {"idx"}, "nms_1");
  auto g = import_string(b.bytes());
  REQUIRE_FALSE(g);
  REQUIRE(g.error().code == ErrorCode::unsupported);
  REQUIRE(g.error().message == "unsupported op 'NonMaxSuppression' at node 'nms_1' (opset 11)");
}

// kiln's fused forms take inputs past ONNX's (MatMul's bias and residual, Conv's and Gemm's
// residual); a model with them is not a valid ONNX model and must not be read as fused.
TEST_CASE("Conv, Gemm and MatMul with more inputs than ONNX gives them are refused", "[onnx][bad-input]") {
  OnnxBuilder b;
  b.input("a", {2, 3}).input("w", {3, 4}).input("c", {4}).output("y", {2, 4});
  b.node("MatMul", {"a", "w", "c"}, {"y"}, "mm");
  auto g = import_string(b.bytes());
  REQUIRE_FALSE(g);
  REQUIRE(g.error().code == ErrorCode::invalid_argument);
  REQUIRE(contains(g.error().message, "node 'mm' (MatMul): takes at most 2 inputs in ONNX, got 3"));
  OnnxBuilder gemm;
  gemm.input("a", {2, 3}).input("w", {3, 4}).input("c", {4}).input("r", {2, 4}).output("y", {2, 4});
  gemm.node("Gemm", {"a", "w", "c", "r"}, {"y"}, "g");
  auto g2 = import_string(gemm.bytes());
  REQUIRE_FALSE(g2);
  REQUIRE(contains(g2.error().message, "node 'g' (Gemm): takes at most 3 inputs in ONNX, got 4"));
}

TEST_CASE("an unsupported opset is refused", "[onnx][bad-input]") {
  OnnxBuilder b(18);
  b.input("x", {1}).output("y", {1});
  b.node("Relu", {"x"}, {"y"}, "r");
  auto g = import_string(b.bytes());
  REQUIRE_FALSE(g);
  REQUIRE(g.error().code == ErrorCode::unsupported);
  REQUIRE(contains(g.error().message, "opset 18"));
}

TEST_CASE("structural defects are invalid_graph errors naming the node", "[onnx][bad-input]") {
  SECTION("cycle") {
    OnnxBuilder b;
    b.input("x", {1}).output("y", {1});
    b.node("Add", {"x", "b"}, {"a"}, "first");
    b.node("Relu", {"a"}, {"b"}, "second");
    b.node("Identity", {"a"}, {"y"}, "out");
    auto g = import_string(b.bytes());
    REQUIRE_FALSE(g);
    REQUIRE(g.error().code == ErrorCode::invalid_graph);
    REQUIRE(contains(g.error().message, "cycle"));
    REQUIRE((contains(g.error().message, "'first'") || contains(g.error().message, "'second'")));
  }
  SECTION("dangling input") {
    OnnxBuilder b;
    b.input("x", {1}).output("y", {1});
    b.node("Add", {"x", "nowhere"}, {"y"}, "adder");
    auto g = import_string(b.bytes());
    REQUIRE_FALSE(g);
    REQUIRE(contains(g.error().message, "node 'adder' (Add) reads 'nowhere'"));
  }
  SECTION("value produced twice") {
    OnnxBuilder b;
    b.input("x", {1}).output("y", {1});
    b.node("Relu", {"x"}, {"y"}, "one");
    b.node("Neg", {"x"}, {"y"}, "two");
    auto g = import_string(b.bytes());
    REQUIRE_FALSE(g);
    REQUIRE(contains(g.error().message, "'y'"));
    REQUIRE(contains(g.error().message, "'two'"));
  }
  SECTION("duplicate node names") {
    OnnxBuilder b;
    b.input("x", {1}).output("y", {1});
    b.node("Relu", {"x"}, {"a"}, "same");
    b.node("Relu", {"a"}, {"y"}, "same");
    auto g = import_string(b.bytes());
    REQUIRE_FALSE(g);
    REQUIRE(contains(g.error().message, "duplicate node name 'same'"));
  }
}

TEST_CASE("a shape mismatch is found by shape inference and names the node", "[onnx][bad-input]") {
  OnnxBuilder b;
  b.input("x", {1, 3}).output("y", {1, 3}).initializer("w", {4}, {1, 2, 3, 4});
  b.node("Add", {"x", "w"}, {"y"}, "bad_add");
  auto g = import_string(b.bytes());
  REQUIRE(g);
  auto inferred = graph_infer_shapes(*g);
  REQUIRE_FALSE(inferred);
  REQUIRE(inferred.error().code == ErrorCode::shape_mismatch);
  REQUIRE(contains(inferred.error().message, "node 'bad_add' (Add)"));
}

TEST_CASE("old-opset attributes become inputs", "[onnx]") {
  OnnxBuilder b(9);
  b.input("x", {2, 5}).output("y", {2, 2});
  auto& slice = b.node("Slice", {"x"}, {"y"}, "slice");
  OnnxBuilder::ints_attr(slice, "starts", {1});
  OnnxBuilder::ints_attr(slice, "ends", {3});
  OnnxBuilder::ints_attr(slice, "axes", {1});
  auto g = import_string(b.bytes());
  REQUIRE(g);
  const Node& n = g->nodes[0];
  REQUIRE(n.op == OpKind::Slice);
  REQUIRE(n.inputs.size() == 4);
  REQUIRE_FALSE(n.attrs.has("starts"));
  REQUIRE(g->is_initializer(n.inputs[1]));
  REQUIRE(g->initializers.at(n.inputs[1]).data<int64_t>()[0] == 1);
}

TEST_CASE("a missing file is an io error naming the path", "[onnx][bad-input]") {
  auto g = onnx_import_file("/nonexistent/model.onnx");
  REQUIRE_FALSE(g);
  REQUIRE(g.error().code == ErrorCode::io);
  REQUIRE(contains(g.error().message, "/nonexistent/model.onnx"));
}

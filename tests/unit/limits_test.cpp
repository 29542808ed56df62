// Hard size limits on untrusted models (kernels/core/limits.h): a model that claims or asks for a
// huge tensor, or describes a huge graph, is refused quickly with an error that states the limit,
// before anything of that size is allocated or parsed. Memory is watched with getrusage's peak
// RSS, which only grows: each refusal may raise it by far less than 200 MB.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <chrono>
#include <string>

#include "compilers/ir/shape_inference.h"
#include "compilers/lower/to_plan.h"
#include "compilers/onnx/import.h"
#include "kernels/core/limits.h"
#include "kernels/executor.h"
#include "tests/support/onnx_builder.h"

using namespace kiln;
using kiln::test::OnnxBuilder;

namespace {

constexpr int64_t k2p40 = int64_t{1} << 40;
constexpr long kMaxRssGrowthKb = 200 * 1024;

long peak_rss_kb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// Peak RSS and wall time around one refusal.
class Budget {
 public:
  Budget() : rss_(peak_rss_kb()), start_(std::chrono::steady_clock::now()) {}
  void check() const {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    CHECK(peak_rss_kb() - rss_ < kMaxRssGrowthKb);
    CHECK(seconds < 2.0);
  }

 private:
  long rss_;
  std::chrono::steady_clock::time_point start_;
};

Result<Graph> import_string(const std::string& bytes) {
  return onnx_import_bytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// Protobuf wire format, to write what OnnxBuilder cannot hold in memory: a varint, and a
// length-delimited field (wire type 2).
std::string varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}
std::string field(uint32_t number, const std::string& payload) {
  return varint((uint64_t{number} << 3) | 2) + varint(payload.size()) + payload;
}
// `count` copies of an empty length-delimited field: 2 bytes each for field numbers below 16.
std::string repeated_empty(uint32_t number, int64_t count) {
  std::string out;
  out.reserve(static_cast<size_t>(count) * 2);
  const std::string one = field(number, "");
  for (int64_t i = 0; i < count; ++i) out += one;
  return out;
}

// A valid one-node model (x -> Relu -> y) followed by `graph_payload` as a second occurrence of
// ModelProto.graph (field 7): protobuf merges repeated occurrences of a message field, so the
// result is one graph holding both.
std::string relu_model_plus(const std::string& graph_payload) {
  OnnxBuilder b;
  b.input("x", {1}).output("y", {1});
  b.node("Relu", {"x"}, {"y"}, "relu");
  return b.bytes() + field(7, graph_payload);
}

void int64_initializer(OnnxBuilder& b, const std::string& name, std::vector<int64_t> values) {
  auto* t = b.model().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

// Imports, infers shapes and runs `b` on `inputs`; returns the first error.
Status import_and_run(const OnnxBuilder& b, const std::vector<Tensor>& inputs) {
  KILN_ASSIGN(graph, import_string(b.bytes()));
  KILN_TRY(graph_infer_shapes(graph));
  const Plan plan = graph_to_plan(graph);
  return execute_reference(plan, inputs).status();
}

}  // namespace

TEST_CASE("an initializer that claims 2^40 elements is refused without allocating", "[limits]") {
  Budget budget;
  OnnxBuilder b;
  b.input("x", {1}).output("y", {1});
  auto* t = b.model().mutable_graph()->add_initializer();
  t->set_name("huge");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(k2p40);  // dims only, no data
  b.node("Identity", {"x"}, {"y"}, "id");
  auto g = import_string(b.bytes());
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::limit_exceeded);
  CHECK(contains(g.error().message, "tensor 'huge' [1099511627776]"));
  CHECK(contains(g.error().message, "limit of " + std::to_string(limits::kMaxTensorBytes) + " bytes"));
  budget.check();
}

TEST_CASE("an initializer with a dim above 2^40 is refused, naming the element limit", "[limits]") {
  Budget budget;
  OnnxBuilder b;
  b.input("x", {1}).output("y", {1});
  auto* t = b.model().mutable_graph()->add_initializer();
  t->set_name("huge");
  t->set_data_type(onnx::TensorProto::UINT8);
  t->add_dims(k2p40);
  t->add_dims(2);
  b.node("Identity", {"x"}, {"y"}, "id");
  auto g = import_string(b.bytes());
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::limit_exceeded);
  CHECK(contains(g.error().message, "more than the limit of " + std::to_string(limits::kMaxTensorElements) + " elements"));
  budget.check();
}

TEST_CASE("a graph input declaring a dim above 2^40 or a rank above the limit is refused", "[limits]") {
  OnnxBuilder big;
  big.input("x", {k2p40 + 1}).output("y", {k2p40 + 1});
  big.node("Relu", {"x"}, {"y"}, "relu");
  auto g = import_string(big.bytes());
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::limit_exceeded);
  CHECK(contains(g.error().message, "value 'x' has dimension 1099511627777, more than the limit of"));

  OnnxBuilder deep;
  deep.input("x", std::vector<int64_t>(limits::kMaxRank + 1, 1)).output("y", {1});
  deep.node("Relu", {"x"}, {"y"}, "relu");
  auto d = import_string(deep.bytes());
  REQUIRE_FALSE(d);
  CHECK(d.error().code == ErrorCode::limit_exceeded);
  CHECK(contains(d.error().message, "value 'x' has rank 65, more than the limit of 64"));
}

TEST_CASE("a 10-million-node graph is refused before parsing, quickly and in bounded memory", "[limits]") {
  // 10^7 empty NodeProtos (2 bytes each, 20 MB) merged into a valid model. Parsed, they would be
  // 10^7 protobuf messages (gigabytes); the importer counts them on the wire bytes first.
  const std::string bytes = relu_model_plus(repeated_empty(1, 10'000'000));
  Budget budget;
  auto g = import_string(bytes);
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::limit_exceeded);
  CHECK(contains(g.error().message, "more than " + std::to_string(limits::kMaxGraphNodes) + " nodes"));
  budget.check();
}

TEST_CASE("nodes are counted inside subgraph attributes too", "[limits]") {
  // One node whose attribute (AttributeProto.g = 6) is a graph of kMaxGraphNodes nodes.
  const std::string subgraph = field(6, repeated_empty(1, limits::kMaxGraphNodes));
  const std::string node = field(5, subgraph);  // NodeProto.attribute
  Budget budget;
  auto g = import_string(relu_model_plus(field(1, node)));
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::limit_exceeded);
  CHECK(contains(g.error().message, "nodes, the limit on one model"));
  budget.check();
}

TEST_CASE("a graph declaring more values than the limit is refused before parsing", "[limits]") {
  Budget budget;
  auto g = import_string(relu_model_plus(repeated_empty(5, limits::kMaxGraphValues + 1)));  // initializers
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::limit_exceeded);
  CHECK(contains(g.error().message, "more than " + std::to_string(limits::kMaxGraphValues) + " initializers"));
  budget.check();
}

TEST_CASE("names longer than the string limit are refused", "[limits]") {
  OnnxBuilder b;
  b.input("x", {1}).output("y", {1});
  b.node("Relu", {"x"}, {"y"}, std::string(limits::kMaxStringBytes + 1, 'n'));
  auto g = import_string(b.bytes());
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::limit_exceeded);
  CHECK(contains(g.error().message, "node name 'nnnn"));
  CHECK(contains(g.error().message, "more than the limit of " + std::to_string(limits::kMaxStringBytes)));
}

TEST_CASE("graphs nested deeper than the limit are refused", "[limits]") {
  // Node -> attribute -> graph -> node -> ... 40 times: 120 message levels, above the 64 allowed.
  std::string graph = field(1, "");
  for (int i = 0; i < 40; ++i) graph = field(1, field(5, field(6, graph)));
  auto g = import_string(relu_model_plus(graph));
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::parse);
}

TEST_CASE("an initializer under the size limit but without its data is refused without allocating", "[limits]") {
  // 2^33 float32 elements (32 GiB) are within the 64 GiB limit on one initializer, so only the
  // missing data tells that the tensor is bogus; that must be found before allocating it.
  for (const int elem : {onnx::TensorProto::FLOAT, onnx::TensorProto::INT64, onnx::TensorProto::UINT8}) {
    Budget budget;
    OnnxBuilder b;
    b.input("x", {1}).output("y", {1});
    auto* t = b.model().mutable_graph()->add_initializer();
    t->set_name("claims_32gib");
    t->set_data_type(elem);
    t->add_dims(int64_t{1} << 33);
    b.node("Identity", {"x"}, {"y"}, "id");
    auto g = import_string(b.bytes());
    REQUIRE_FALSE(g);
    CHECK(g.error().code == ErrorCode::parse);
    CHECK(contains(g.error().message, "tensor 'claims_32gib' has 0 values"));
    budget.check();
  }
}

TEST_CASE("ConstantOfShape asking for 2^40 elements is refused with limit_exceeded before allocating", "[limits]") {
  Budget budget;
  OnnxBuilder b;
  b.output("y", {k2p40});
  int64_initializer(b, "shape", {k2p40});
  b.node("ConstantOfShape", {"shape"}, {"y"}, "fill");
  const Status s = import_and_run(b, {});
  REQUIRE_FALSE(s);
  CHECK(s.code() == ErrorCode::limit_exceeded);
  CHECK(contains(s.message(), "node 'fill' (ConstantOfShape)"));
  budget.check();
}

TEST_CASE("Reshape of a 2^40-element value is refused with limit_exceeded before allocating", "[limits]") {
  Budget budget;
  OnnxBuilder b;
  b.output("y", {int64_t{1} << 20, int64_t{1} << 20});
  int64_initializer(b, "shape", {k2p40});
  int64_initializer(b, "square", {int64_t{1} << 20, int64_t{1} << 20});
  b.node("ConstantOfShape", {"shape"}, {"flat"}, "fill");
  b.node("Reshape", {"flat", "square"}, {"y"}, "reshape");
  const Status s = import_and_run(b, {});
  REQUIRE_FALSE(s);
  CHECK(s.code() == ErrorCode::limit_exceeded);
  budget.check();
}

TEST_CASE("Reshape cannot conjure 2^40 elements from a small input", "[limits]") {
  Budget budget;
  OnnxBuilder b;
  b.input("x", {4}).output("y", {int64_t{1} << 20, int64_t{1} << 20});
  int64_initializer(b, "square", {int64_t{1} << 20, int64_t{1} << 20});
  b.node("Reshape", {"x", "square"}, {"y"}, "reshape");
  auto g = import_string(b.bytes());
  REQUIRE(g);
  auto inferred = graph_infer_shapes(*g);
  REQUIRE_FALSE(inferred);
  CHECK(inferred.error().code == ErrorCode::shape_mismatch);
  CHECK(contains(inferred.error().message, "node 'reshape' (Reshape)"));
  budget.check();
}

TEST_CASE("Expand to 2^40 elements is refused with limit_exceeded before allocating", "[limits]") {
  Budget budget;
  OnnxBuilder b;
  b.input("x", {1}).output("y", {int64_t{1} << 20, int64_t{1} << 20});
  int64_initializer(b, "shape", {int64_t{1} << 20, int64_t{1} << 20});
  b.node("Expand", {"x", "shape"}, {"y"}, "expand");
  const Status s = import_and_run(b, {Tensor::from_values<float>({1}, std::vector<float>{1.0f})});
  REQUIRE_FALSE(s);
  CHECK(s.code() == ErrorCode::limit_exceeded);
  CHECK(contains(s.message(), "node 'expand' (Expand)"));
  budget.check();
}

TEST_CASE("a graph input declared [2^40] float is inferred without allocating and must be fed as declared",
          "[limits]") {
  Budget budget;
  OnnxBuilder b;
  b.input("x", {k2p40}).output("y", {int64_t{1} << 20, int64_t{1} << 20});
  int64_initializer(b, "square", {int64_t{1} << 20, int64_t{1} << 20});
  b.node("Reshape", {"x", "square"}, {"y"}, "reshape");
  auto g = import_string(b.bytes());
  REQUIRE(g);
  REQUIRE(graph_infer_shapes(*g));
  const Plan plan = graph_to_plan(*g);
  auto run = execute_reference(plan, {Tensor::from_values<float>({4}, std::vector<float>{1, 2, 3, 4})});
  REQUIRE_FALSE(run);
  CHECK(run.error().code == ErrorCode::shape_mismatch);
  CHECK(contains(run.error().message, "input 'x'"));
  budget.check();
}

TEST_CASE("the executor's per-value limit is configurable and checked before allocating", "[limits]") {
  Budget budget;
  OnnxBuilder b;
  b.output("y", {1000, 1000});
  int64_initializer(b, "shape", {1000, 1000});
  b.node("ConstantOfShape", {"shape"}, {"y"}, "fill");
  auto g = import_string(b.bytes());
  REQUIRE(g);
  REQUIRE(graph_infer_shapes(*g));
  const Plan plan = graph_to_plan(*g);
  ExecuteOptions options;
  options.max_value_bytes = 1000 * 1000 * 4 - 1;
  auto refused = execute_reference(plan, {}, options);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::limit_exceeded);
  CHECK(contains(refused.error().message, "float32[1000,1000]"));
  options.max_value_bytes = 1000 * 1000 * 4;
  auto fits = execute_reference(plan, {}, options);
  REQUIRE(fits);
  CHECK(fits->outputs[0].numel() == 1000 * 1000);
  budget.check();
}

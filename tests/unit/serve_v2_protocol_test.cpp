// The KServe v2 JSON protocol (service/runtime/serve/v2_protocol.h) and the model signature
// checks (model_signature.h): round trips for every datatype, nested data, and every error path
// with its code and message.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "service/runtime/serve/model_signature.h"
#include "service/runtime/serve/v2_protocol.h"

using namespace kiln;
using namespace kiln::serve;
using json = nlohmann::json;

namespace {

// A tensor of `dtype` whose values differ per element (and are exact in every dtype).
Tensor sample_tensor(DType dtype, Shape shape) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  visit_dtype(dtype, [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) p[i] = i % 3 == 0;
      else if constexpr (std::is_same_v<T, float>) p[i] = static_cast<float>(i) * 0.1f - 1.3f;
      else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) p[i] = T(static_cast<float>(i) * 0.25f - 1.0f);
      else if constexpr (std::is_same_v<T, uint8_t>) p[i] = static_cast<T>(200 + i);
      else if constexpr (std::is_same_v<T, int8_t>) p[i] = static_cast<T>(-100 + i);
      else p[i] = static_cast<T>(i * 1000003 - 7);
    }
  });
  return t;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::string one_input(const std::string& fields) { return R"({"inputs":[{)" + fields + "}]}"; }

void expect_error(const std::string& body, ErrorCode code, const std::string& needle) {
  INFO(body);
  auto r = v2_infer_request_parse(body);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == code);
  CHECK_THAT(r.error().message, Catch::Contains(needle));
}

}  // namespace

TEST_CASE("v2 datatype names cover every dtype and invert", "[serve]") {
  const DType all[] = {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64, DType::boolean};
  for (DType dt : all) {
    auto back = v2_datatype_from_name(v2_datatype_name(dt));
    REQUIRE(back);
    CHECK(*back == dt);
  }
  CHECK(v2_datatype_name(DType::f32) == "FP32");
  CHECK(v2_datatype_name(DType::boolean) == "BOOL");
  CHECK_FALSE(v2_datatype_from_name("fp32"));
  CHECK_FALSE(v2_datatype_from_name("BYTES"));
}

TEST_CASE("v2 requests round-trip every datatype exactly", "[serve]") {
  const DType dt = GENERATE(DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64, DType::boolean);
  const Shape shape = GENERATE(Shape{}, Shape{3}, Shape{2, 3, 5});
  const NamedTensors inputs{{"a", sample_tensor(dt, shape)}, {"b \"quoted\"", sample_tensor(dt, {4})}};
  const std::string body = v2_infer_request_write("req-7", inputs);
  auto parsed = v2_infer_request_parse(body);
  REQUIRE(parsed);
  CHECK(parsed->id == "req-7");
  REQUIRE(parsed->inputs.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(parsed->inputs[i].first == inputs[i].first);
    CHECK(same_tensor(parsed->inputs[i].second, inputs[i].second));
  }
  CHECK(parsed->outputs.empty());
}

TEST_CASE("v2 float32 values survive the text form bit for bit", "[serve]") {
  const std::vector<float> values{1e-38f, 3.4028235e38f, -0.0f, 0.1f, 1.0f / 3.0f, 16777217.0f, -2.5e-7f};
  const NamedTensors in{{"x", Tensor::from_values<float>({static_cast<int64_t>(values.size())}, values)}};
  auto parsed = v2_infer_request_parse(v2_infer_request_write("", in));
  REQUIRE(parsed);
  CHECK(same_tensor(parsed->inputs[0].second, in[0].second));
  CHECK(parsed->id.empty());
}

TEST_CASE("v2 data may be nested and outputs may be requested", "[serve]") {
  auto parsed = v2_infer_request_parse(
      R"({"id":"n","inputs":[{"name":"x","shape":[2,3],"datatype":"INT32","data":[[1,2,3],[4,5,6]]}],"outputs":[{"name":"y"},{"name":"z"}],"parameters":{}})");
  REQUIRE(parsed);
  const Tensor& t = parsed->inputs[0].second;
  REQUIRE(t.shape() == Shape{2, 3});
  for (int i = 0; i < 6; ++i) CHECK(t.data<int32_t>()[i] == i + 1);
  CHECK(parsed->outputs == std::vector<std::string>{"y", "z"});
}

TEST_CASE("v2 responses carry model, id and outputs, non-finite floats become null", "[serve]") {
  const std::vector<float> v{1.5f, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()};
  const std::vector<int64_t> idx{7, -9};
  const NamedTensors outs{{"y", Tensor::from_values<float>({1, 3}, v)}, {"k", Tensor::from_values<int64_t>({2}, idx)}};
  const json doc = json::parse(v2_infer_response_write("fm", "r1", outs));
  CHECK(doc["model_name"] == "fm");
  CHECK(doc["id"] == "r1");
  REQUIRE(doc["outputs"].size() == 2);
  CHECK(doc["outputs"][0]["name"] == "y");
  CHECK(doc["outputs"][0]["datatype"] == "FP32");
  CHECK(doc["outputs"][0]["shape"] == json::array({1, 3}));
  CHECK(doc["outputs"][0]["data"][0] == 1.5);
  CHECK(doc["outputs"][0]["data"][1].is_null());
  CHECK(doc["outputs"][0]["data"][2].is_null());
  CHECK(doc["outputs"][1]["data"] == json::array({7, -9}));
  CHECK_FALSE(json::parse(v2_infer_response_write("fm", "", outs)).contains("id"));
  CHECK(json::parse(v2_error_write("bad \"x\""))["error"] == "bad \"x\"");
}

TEST_CASE("v2 model metadata lists tensors with -1 batch dims", "[serve]") {
  const json doc = json::parse(v2_model_metadata_write("m", {{"in", DType::u8, {-1, 28, 28}}}, {{"out", DType::i64, {-1}}}));
  CHECK(doc["name"] == "m");
  CHECK(doc["platform"] == "kiln");
  CHECK(doc["versions"] == json::array({"1"}));
  CHECK(doc["inputs"][0]["datatype"] == "UINT8");
  CHECK(doc["inputs"][0]["shape"] == json::array({-1, 28, 28}));
  CHECK(doc["outputs"][0]["datatype"] == "INT64");
}

TEST_CASE("v2 request errors name the problem", "[serve]") {
  expect_error("{\"inputs\": [", ErrorCode::parse, "malformed JSON");
  expect_error("", ErrorCode::parse, "malformed JSON");
  expect_error("[1]", ErrorCode::invalid_argument, "must be a JSON object");
  expect_error("{}", ErrorCode::invalid_argument, "'inputs' is missing");
  expect_error(R"({"inputs":{}})", ErrorCode::invalid_argument, "'inputs' is missing or not an array");
  expect_error(R"({"id":3,"inputs":[]})", ErrorCode::invalid_argument, "'id' must be a string");
  expect_error(R"({"inputs":[7]})", ErrorCode::invalid_argument, "inputs[0]: expected an object");
  expect_error(one_input(R"("shape":[1],"datatype":"FP32","data":[1])"), ErrorCode::invalid_argument, "'name' is missing");
  expect_error(one_input(R"("name":"x","shape":[1],"data":[1])"), ErrorCode::invalid_argument, "input 'x': 'datatype' is missing");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"FLOAT","data":[1])"), ErrorCode::invalid_argument,
               "unknown datatype 'FLOAT'");
  expect_error(one_input(R"("name":"x","datatype":"FP32","data":[1])"), ErrorCode::invalid_argument, "'shape' is missing");
  expect_error(one_input(R"("name":"x","shape":[-1],"datatype":"FP32","data":[1])"), ErrorCode::invalid_argument,
               "non-negative integers");
  expect_error(one_input(R"("name":"x","shape":[1.5],"datatype":"FP32","data":[1])"), ErrorCode::invalid_argument,
               "non-negative integers");
  expect_error(one_input(R"("name":"x","shape":[1099511627776,2],"datatype":"FP32","data":[1])"), ErrorCode::limit_exceeded,
               "elements");
  std::string deep = "[1";
  for (int i = 1; i < 65; ++i) deep += ",1";
  deep += "]";
  expect_error(one_input(R"("name":"x","datatype":"FP32","data":[1],"shape":)" + deep), ErrorCode::limit_exceeded, "rank 65");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"FP32")"), ErrorCode::invalid_argument, "'data' is missing");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"FP32","data":1)"), ErrorCode::invalid_argument,
               "'data' must be an array");
  expect_error(one_input(R"("name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3])"), ErrorCode::shape_mismatch,
               "input 'x': 'data' has 3 elements but shape [2,2] needs 4");
  expect_error(one_input(R"("name":"x","shape":[2],"datatype":"FP32","data":[[[1]],[[2]]])"), ErrorCode::invalid_argument,
               "nested deeper");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"FP32","data":["1"])"), ErrorCode::invalid_argument,
               "datatype FP32 expects numbers");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"INT32","data":[1.5])"), ErrorCode::invalid_argument,
               "datatype INT32 expects integers");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"INT8","data":[128])"), ErrorCode::invalid_argument,
               "value 128 is out of range");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"UINT8","data":[-1])"), ErrorCode::invalid_argument,
               "value -1 is out of range");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"INT32","data":[4294967296])"), ErrorCode::invalid_argument,
               "out of range");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"BOOL","data":[1])"), ErrorCode::invalid_argument,
               "datatype BOOL expects true/false");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})",
               ErrorCode::invalid_argument, "input 'x' is given twice");
  expect_error(R"({"inputs":[],"outputs":[{"nam":"y"}]})", ErrorCode::invalid_argument, "'outputs' entries");
  expect_error(R"({"inputs":[],"outputs":"y"})", ErrorCode::invalid_argument, "'outputs' must be an array");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"FP32","data":[1e39])"), ErrorCode::invalid_argument,
               "value 1e+39 is out of range");
  // Hostile nesting is refused without recursing once per level (no stack overflow).
  const std::string nested = std::string(200000, '[') + std::string(200000, ']');
  expect_error(R"({"inputs":[],"outputs":[)" + nested + "]}", ErrorCode::invalid_argument, "got an array");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"FP32","data":[{"a":)" + nested + "}]"), ErrorCode::invalid_argument,
               "expects numbers, got an object");
  expect_error(one_input(R"("name":"x","shape":[1],"datatype":"FP32","data":)" + nested), ErrorCode::invalid_argument,
               "nested deeper");
}

// ----- model signature -----

namespace {

// A plan with inputs a: f32[4,3], b: i64[4] and outputs y: f32[4,2] (+ z of `z_shape`).
Plan signature_plan(SymShape z_shape) {
  Plan p;
  p.num_slots = 4;
  p.slot_types = {ValueType::of(DType::f32, {4, 3}), ValueType::of(DType::i64, {4}), ValueType::of(DType::f32, {4, 2}),
                  ValueType::of(DType::f32, std::move(z_shape))};
  p.inputs = {{0, "a", p.slot_types[0]}, {1, "b", p.slot_types[1]}};
  p.outputs = {{2, "y"}, {3, "z"}};
  return p;
}

NamedTensors request(int64_t a_rows, int64_t b_rows) {
  return {{"b", Tensor::zeros(DType::i64, {b_rows})}, {"a", Tensor::zeros(DType::f32, {a_rows, 3})}};
}

void expect_match_error(const ModelSignature& sig, NamedTensors in, ErrorCode code, const std::string& needle) {
  auto r = model_inputs_match(sig, std::move(in));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == code);
  CHECK_THAT(r.error().message, Catch::Contains(needle));
}

}  // namespace

TEST_CASE("a plan whose inputs and outputs lead with B batches any sample count", "[serve]") {
  auto sig = model_signature_of(signature_plan({4}));
  REQUIRE(sig);
  CHECK(sig->batch == 4);
  CHECK(model_shape_public(*sig, sig->inputs[0]) == std::vector<int64_t>{-1, 3});
  auto m = model_inputs_match(*sig, request(7, 7));
  REQUIRE(m);
  CHECK(m->samples == 7);
  REQUIRE(m->tensors.size() == 2);
  CHECK(m->tensors[0].dtype() == DType::f32);  // plan order, not request order
  CHECK(m->tensors[1].shape() == Shape{7});

  expect_match_error(*sig, request(2, 3), ErrorCode::shape_mismatch, "input 'b' has 3 samples but 'a' has 2");
  expect_match_error(*sig, request(0, 0), ErrorCode::shape_mismatch, "input 'a' has no samples");
  expect_match_error(*sig, {{"a", Tensor::zeros(DType::f32, {1, 4})}, {"b", Tensor::zeros(DType::i64, {1})}},
                     ErrorCode::shape_mismatch, "input 'a' has shape [1,4], the model expects [-1,3]");
  expect_match_error(*sig, {{"a", Tensor::zeros(DType::f32, {3})}, {"b", Tensor::zeros(DType::i64, {1})}},
                     ErrorCode::shape_mismatch, "the model expects [-1,3]");
  expect_match_error(*sig, {{"a", Tensor::zeros(DType::f16, {1, 3})}, {"b", Tensor::zeros(DType::i64, {1})}},
                     ErrorCode::invalid_argument, "input 'a' has datatype FP16, the model expects FP32");
  expect_match_error(*sig, {{"a", Tensor::zeros(DType::f32, {1, 3})}}, ErrorCode::invalid_argument,
                     "missing input 'b' (the model's inputs are 'a', 'b')");
  NamedTensors extra = request(1, 1);
  extra.emplace_back("c", Tensor::zeros(DType::f32, {1}));
  expect_match_error(*sig, extra, ErrorCode::invalid_argument, "unknown input 'c'");

  auto picked = model_outputs_select(*sig, {"z"});
  REQUIRE(picked);
  CHECK(*picked == std::vector<size_t>{1});
  CHECK(model_outputs_select(*sig, {})->size() == 2);
  auto bad = model_outputs_select(*sig, {"w"});
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("unknown output 'w' (the model's outputs are 'y', 'z')"));
}

TEST_CASE("a plan with an output not leading with B takes exact shapes only", "[serve]") {
  auto sig = model_signature_of(signature_plan({1}));
  REQUIRE(sig);
  CHECK(sig->batch == 0);
  CHECK(model_shape_public(*sig, sig->inputs[0]) == std::vector<int64_t>{4, 3});
  auto m = model_inputs_match(*sig, request(4, 4));
  REQUIRE(m);
  CHECK(m->samples == 1);
  expect_match_error(*sig, request(1, 1), ErrorCode::shape_mismatch, "the model expects [4,3]");
}

TEST_CASE("a plan with symbolic shapes cannot be served", "[serve]") {
  Plan p = signature_plan({4});
  p.inputs[0].type = ValueType::of(DType::f32, {Dim::named("batch"), 3});
  auto sig = model_signature_of(p);
  REQUIRE_FALSE(sig);
  CHECK_THAT(sig.error().message, Catch::Contains("input 'a' has shape [batch,3]"));
}

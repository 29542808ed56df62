// The v2 router (service/runtime/serve/v2_router.h) without sockets: every endpoint, status
// codes and error bodies, and inference through a real batcher on a fake engine.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <future>
#include <optional>
#include <string>

#include "service/runtime/serve/v2_protocol.h"
#include "service/runtime/serve/v2_router.h"

using namespace kiln;
using namespace kiln::serve;
using json = nlohmann::json;

namespace {

// Model "m": x f32[2,3] -> y = x + 1 (f32[2,3]), n = -x as int32 (i32[2,3]); batch 2.
struct RouterFixture {
  ModelSignature sig{{{"x", DType::f32, {2, 3}}}, {{"y", DType::f32, {2, 3}}, {"n", DType::i32, {2, 3}}}, 2};
  Batcher batcher{{2, 2, std::chrono::microseconds(1000), 16}, {DType::f32}, {{2, 3}},
                  [](const std::vector<Tensor>& in) -> Result<std::vector<Tensor>> {
                    Tensor y = in[0].clone();
                    Tensor n = Tensor::zeros(DType::i32, in[0].shape());
                    for (int64_t i = 0; i < y.numel(); ++i) {
                      y.data<float>()[i] += 1;
                      n.data<int32_t>()[i] = -static_cast<int32_t>(in[0].data<float>()[i]);
                    }
                    return std::vector<Tensor>{y, n};
                  }};
  V2Router router{ServedModel{"m", sig, &batcher}, "9.9", [](std::function<void()> task) { task(); }};

  HttpResponse call(const std::string& method, const std::string& target, const std::string& body = "") {
    std::promise<HttpResponse> p;
    auto f = p.get_future();
    router.handle({method, target, body}, [&p](HttpResponse r) { p.set_value(std::move(r)); });
    return f.get();
  }
};

std::string error_of(const HttpResponse& r) { return json::parse(r.body).value("error", ""); }

std::string header_of(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

}  // namespace

TEST_CASE("v2 router: health, metadata and readiness", "[serve]") {
  RouterFixture f;
  CHECK(f.call("GET", "/v2/health/live").status == 200);
  CHECK(f.call("GET", "/v2/health/ready").status == 200);
  CHECK(f.call("GET", "/v2/models/m/ready?x=1").status == 200);
  const json server = json::parse(f.call("GET", "/v2").body);
  CHECK(server["name"] == "kiln-runtime");
  CHECK(server["version"] == "9.9");
  const json meta = json::parse(f.call("GET", "/v2/models/m").body);
  CHECK(meta["platform"] == "kiln");
  CHECK(meta["inputs"][0]["shape"] == json::array({-1, 3}));
  CHECK(meta["outputs"][1]["datatype"] == "INT32");
  f.router.set_ready(false);
  CHECK(f.call("GET", "/v2/health/ready").status == 503);
  CHECK(f.call("GET", "/v2/models/m/ready").status == 503);
  CHECK(f.call("GET", "/v2/health/live").status == 200);
}

TEST_CASE("v2 router: unknown paths, models and methods", "[serve]") {
  RouterFixture f;
  for (const char* path : {"/", "/v1/models/m", "/v2/models", "/v2/models/m/infer/x", "/v2/models/m/explain", "/v2/health", "x"}) {
    INFO(path);
    const HttpResponse r = f.call("GET", path);
    CHECK(r.status == 404);
    CHECK_THAT(error_of(r), Catch::Contains("unknown path"));
  }
  const HttpResponse model = f.call("POST", "/v2/models/other/infer", "{}");
  CHECK(model.status == 404);
  CHECK(error_of(model) == "unknown model 'other' (this server serves 'm')");
  const HttpResponse get_infer = f.call("GET", "/v2/models/m/infer");
  CHECK(get_infer.status == 405);
  CHECK(header_of(get_infer, "Allow") == "POST");
  const HttpResponse version = f.call("GET", "/v2/models/m/versions/2/ready");
  CHECK(version.status == 404);
  CHECK(error_of(version) == "model 'm' has no version '2' (it has version '1')");
  CHECK(f.call("GET", "/v2/models/m/versions/1/ready").status == 200);
  CHECK(json::parse(f.call("GET", "/v2/models/m/versions/1").body)["name"] == "m");
  CHECK(f.call("GET", "/v2/models/m/versions/1/ready/x").status == 404);
  CHECK(f.call("GET", "/v2/models/m/versions").status == 404);
  CHECK(f.call("POST", "/v2/health/live").status == 405);
  CHECK(header_of(f.call("DELETE", "/v2/models/m"), "Allow") == "GET");
}

TEST_CASE("v2 router: inference, output subsets and statistics", "[serve]") {
  RouterFixture f;
  const NamedTensors in{{"x", Tensor::from_values<float>({3, 3}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9})}};
  const HttpResponse r = f.call("POST", "/v2/models/m/infer", v2_infer_request_write("q1", in));
  REQUIRE(r.status == 200);
  const json doc = json::parse(r.body);
  CHECK(doc["model_name"] == "m");
  CHECK(doc["id"] == "q1");
  REQUIRE(doc["outputs"].size() == 2);
  CHECK(doc["outputs"][0]["shape"] == json::array({3, 3}));
  CHECK(doc["outputs"][0]["data"] == json::array({2, 3, 4, 5, 6, 7, 8, 9, 10}));
  CHECK(doc["outputs"][1]["data"][8] == -9);

  const HttpResponse subset = f.call("POST", "/v2/models/m/infer",
                                     R"({"inputs":[{"name":"x","shape":[1,3],"datatype":"FP32","data":[[0,0,5]]}],"outputs":[{"name":"n"}]})");
  REQUIRE(subset.status == 200);
  const json sub = json::parse(subset.body);
  REQUIRE(sub["outputs"].size() == 1);
  CHECK(sub["outputs"][0]["name"] == "n");
  CHECK(sub["outputs"][0]["data"] == json::array({0, 0, -5}));

  const json stats = json::parse(f.call("GET", "/v2/models/m/stats").body)["model_stats"][0];
  CHECK(stats["name"] == "m");
  CHECK(stats["inference_count"] == 4);
  CHECK(stats["execution_count"] == 3);  // 3 samples in runs of 2, then 1
  CHECK(stats["inference_stats"]["success"]["count"] == 2);
}

TEST_CASE("v2 router: bad infer requests get 400 with the reason, and 503 once stopped", "[serve]") {
  RouterFixture f;
  const std::pair<std::string, std::string> cases[] = {
      {"not json", "malformed JSON"},
      {R"({"inputs":[{"name":"q","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]})", "unknown input 'q'"},
      {R"({"inputs":[]})", "missing input 'x'"},
      {R"({"inputs":[{"name":"x","shape":[1,3],"datatype":"INT64","data":[1,2,3]}]})", "has datatype INT64, the model expects FP32"},
      {R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]})", "has shape [1,4], the model expects [-1,3]"},
      {R"({"inputs":[{"name":"x","shape":[1,3],"datatype":"FP32","data":[1,2]}]})", "'data' has 2 elements but shape [1,3] needs 3"},
      {R"({"inputs":[{"name":"x","shape":[1,3],"datatype":"FP32","data":[1,2,3]}],"outputs":[{"name":"w"}]})", "unknown output 'w'"},
  };
  for (const auto& [body, needle] : cases) {
    INFO(body);
    const HttpResponse r = f.call("POST", "/v2/models/m/infer", body);
    CHECK(r.status == 400);
    CHECK_THAT(error_of(r), Catch::Contains(needle));
  }
  f.batcher.stop();
  const HttpResponse stopped =
      f.call("POST", "/v2/models/m/infer", R"({"inputs":[{"name":"x","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]})");
  CHECK(stopped.status == 503);
  CHECK(header_of(stopped, "Retry-After") == "1");
}

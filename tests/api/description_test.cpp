// Application descriptions and targets against the real schemas: typed fields, and each kind of
// violation answered with the field's JSON pointer, its line and what was expected.
#include <catch2/catch.hpp>

#include "api/description.h"

using namespace kiln::api;

namespace {

const char* kApp = R"(name: demo
model: {path: m.onnx}
inputs:
  x: {shape: [batch, 3, 224, 224], dtype: float32}
)";

const char* kTarget = R"(name: gpu-box
kind: hpc
scheduler: slurm
container_runtime: apptainer
node:
  cpu: {model: EPYC, cores: 64}
  memory_gb: 512
  gpus:
    - {model: H100, count: 4, memory_gb: 80}
)";

std::vector<Error> app_errors(const std::string& text) {
  Result<ApplicationDescription> r = application_parse(text, "app.yaml");
  REQUIRE_FALSE(r);
  return r.errors();
}

std::vector<Error> target_errors(const std::string& text) {
  Result<TargetInfrastructure> r = target_parse(text, "target.yaml");
  REQUIRE_FALSE(r);
  return r.errors();
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a minimal description fills the structs with defaults", "[api][description]") {
  Result<ApplicationDescription> r = application_parse(kApp, "app.yaml");
  INFO((r ? "" : r.message()));
  REQUIRE(r);
  const ApplicationDescription& a = r.value();
  CHECK(a.name == "demo");
  CHECK(a.model.path == "m.onnx");
  REQUIRE(a.inputs.size() == 1);
  CHECK(a.inputs[0].name == "x");
  REQUIRE(a.inputs[0].shape.size() == 4);
  CHECK(a.inputs[0].shape[0].symbol == "batch");
  CHECK(a.inputs[0].shape[3].value == 224);
  CHECK(a.objective == Objective::throughput);
  CHECK(a.optimizations.precisions.size() == 4);
  CHECK(a.optimizations.default_passes);
  CHECK_FALSE(a.calibration.has_value());
}

TEST_CASE("a target fills the structs", "[api][description]") {
  Result<TargetInfrastructure> r = target_parse(kTarget, "target.yaml");
  INFO((r ? "" : r.message()));
  REQUIRE(r);
  CHECK(r->kind == TargetKind::hpc);
  CHECK(r->scheduler == Scheduler::slurm);
  CHECK(r->container_runtime == ContainerRuntime::apptainer);
  CHECK(r->nodes == 1);
  CHECK(r->node.cpu.cores == 64);
  REQUIRE(r->node.gpus.size() == 1);
  CHECK(r->node.gpus[0].count == 4);
  CHECK(r->node.gpus[0].memory_gb == 80);
}

TEST_CASE("wrong type: pointer, line and expectation", "[api][description]") {
  const std::vector<Error> e = target_errors(replace(kTarget, "count: 4", "count: four"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].code == ErrorCode::invalid);
  CHECK(e[0].pointer == "/node/gpus/0/count");
  CHECK(e[0].line == 9);
  CHECK(e[0].to_string() == "target.yaml:9: /node/gpus/0/count: expected integer >= 1 and <= 64, got \"four\"");
}

TEST_CASE("an integer past int64's range is refused by the schema, not converted", "[api][description]") {
  // The JSON parser reads digits beyond int64 as a double; converting it was undefined behaviour
  // (found by fuzz_service_router through POST /v1/plan).
  const std::vector<Error> e = app_errors(replace(kApp, "224, 224]", "224, 2855555555555555555555555555555555555555555]"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].pointer == "/inputs/x/shape/3");
  CHECK_THAT(e[0].message, Catch::Contains("<= 1099511627776"));
  // A whole number written as a float is still an integer.
  Result<ApplicationDescription> ok = application_parse(replace(kApp, "224, 224]", "224, 2.24e2]"), "app.yaml");
  REQUIRE(ok);
  CHECK(ok->inputs[0].shape[3].value == 224);
}

TEST_CASE("unknown field: rejected, with the known ones and a guess", "[api][description]") {
  const std::vector<Error> e = app_errors(std::string(kApp) + "constraints: {max_latncy_ms: 5}\n");
  REQUIRE(e.size() == 1);
  CHECK(e[0].pointer == "/constraints/max_latncy_ms");
  CHECK_THAT(e[0].message, Catch::StartsWith("unknown field; did you mean 'max_latency_ms'? (known: max_latency_ms, "));
  const std::vector<Error> top = app_errors(std::string(kApp) + "colour: red\n");
  CHECK(top[0].pointer == "/colour");
  CHECK_THAT(top[0].message, Catch::Contains("unknown field") && Catch::Contains("known: name, task, model"));
}

TEST_CASE("enum miss names the allowed values", "[api][description]") {
  const std::vector<Error> e = app_errors(std::string(kApp) + "objective: fastest\n");
  REQUIRE(e.size() == 1);
  CHECK(e[0].to_string() == "app.yaml:5: /objective: expected one of \"latency\", \"throughput\", \"cost\", got \"fastest\"");
  const std::vector<Error> s = target_errors(replace(kTarget, "scheduler: slurm", "scheduler: slurmm"));
  CHECK_THAT(s[0].message, Catch::Contains("did you mean \"slurm\"?"));
}

TEST_CASE("missing required fields are each named", "[api][description]") {
  const std::vector<Error> e = target_errors(replace(kTarget, "  memory_gb: 512\n", ""));
  REQUIRE(e.size() == 1);
  CHECK(e[0].pointer == "/node/memory_gb");
  CHECK(e[0].message == "missing required field (expected number > 0 and <= 1048576)");
  CHECK(e[0].line == 5);  // the line of /node, the nearest field that exists
  const std::vector<Error> empty = app_errors("{}");
  CHECK(empty.size() == 3);
  CHECK(empty[0].pointer == "/name");
  CHECK(empty[1].pointer == "/model");
  CHECK_THAT(empty[1].message, Catch::Contains("{path: FILE} or {url: http(s)://...}"));
}

TEST_CASE("model is a path or an http(s) URL, not both", "[api][description]") {
  CHECK(application_parse(replace(kApp, "{path: m.onnx}", "{url: 'https://example.org/m.onnx'}"), "a"));
  const std::vector<Error> ftp = app_errors(replace(kApp, "{path: m.onnx}", "{url: 'ftp://example.org/m.onnx'}"));
  CHECK(ftp[0].pointer == "/model/url");
  CHECK_THAT(ftp[0].message, Catch::Contains("^https?://"));
  const std::vector<Error> both = app_errors(replace(kApp, "{path: m.onnx}", "{path: m.onnx, url: 'https://x/m'}"));
  CHECK(both[0].pointer == "/model");
}

TEST_CASE("rules across fields", "[api][description]") {
  const std::vector<Error> k8s =
      target_errors(std::string(replace(kTarget, "scheduler: slurm", "scheduler: kubernetes")) + "slurm: {partition: gpu}\n");
  REQUIRE(k8s.size() == 2);
  CHECK(k8s[0].pointer == "/slurm");
  CHECK_THAT(k8s[0].message, Catch::Contains("only allowed with scheduler: slurm"));
  CHECK(k8s[1].pointer == "/container_runtime");
  const std::vector<Error> local = target_errors(replace(kTarget, "kind: hpc", "kind: local"));
  CHECK(local[0].pointer == "/scheduler");
  const std::vector<Error> norm = app_errors(std::string(kApp) +
                                             "data:\n  validation: {images: i.gz, labels: l.gz, normalize: {scale: 1, "
                                             "mean: [0.5, 0.5], std: [0.2]}}\n");
  CHECK(norm[0].pointer == "/data/validation/normalize/std");
}

TEST_CASE("the same document as JSON gives the same result", "[api][description]") {
  Result<Document> yaml = document_parse(kTarget, "t.yaml");
  REQUIRE(yaml);
  Result<TargetInfrastructure> from_json = target_parse(yaml->root.dump(), "t.json", DocumentFormat::json);
  REQUIRE(from_json);
  CHECK(from_json->node.gpus[0].model == "H100");
  const std::vector<Error> e = target_errors(R"({"name": "x", "kind": "cloud", "scheduler": "none",
      "container_runtime": "docker", "node": {"cpu": {"model": "c", "cores": 0}, "memory_gb": 1}})");
  REQUIRE(e.size() == 1);
  CHECK(e[0].to_string() == "target.yaml: /node/cpu/cores: expected integer >= 1 and <= 4096, got 0");
}

TEST_CASE("documents are told apart by their fields", "[api][description]") {
  CHECK(description_kind_detect(document_parse(kApp, "a")->root) == DescriptionKind::application);
  CHECK(description_kind_detect(document_parse(kTarget, "t")->root) == DescriptionKind::target);
  CHECK_FALSE(description_kind_detect(document_parse("name: x\n", "x")->root).has_value());
  CHECK_FALSE(description_kind_detect(document_parse("[1]", "x")->root).has_value());
}

TEST_CASE("a document that is not a mapping", "[api][description]") {
  CHECK(app_errors("- a\n- b\n")[0].to_string() == "app.yaml:1: (document): expected object, got an array");
  CHECK(app_errors("")[0].message == "expected object, got null");
}

TEST_CASE("a latency bound is on the median unless latency_percentile says p99", "[api][description]") {
  Result<ApplicationDescription> p50 = application_parse(std::string(kApp) + "constraints: {max_latency_ms: 5}\n", "app.yaml");
  REQUIRE(p50);
  CHECK_FALSE(p50.value().constraints.latency_p99);
  Result<ApplicationDescription> p99 =
      application_parse(std::string(kApp) + "constraints: {max_latency_ms: 5, latency_percentile: p99}\n", "app.yaml");
  REQUIRE(p99);
  CHECK(p99.value().constraints.latency_p99);
  const std::vector<Error> e = app_errors(std::string(kApp) + "constraints: {max_latency_ms: 5, latency_percentile: p95}\n");
  REQUIRE(e.size() == 1);
  CHECK(e[0].pointer == "/constraints/latency_percentile");
  CHECK_THAT(e[0].message, Catch::Contains("\"p50\", \"p99\""));
}

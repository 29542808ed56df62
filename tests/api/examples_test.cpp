// Every example document in examples/ is valid against the compiled-in schemas, so the docs
// cannot drift from the contract; and the schema files in the tree are the ones compiled in.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/description.h"

namespace fs = std::filesystem;
using namespace kiln::api;

namespace {

const fs::path kRoot = KILN_SOURCE_DIR;

std::vector<fs::path> example_documents() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "examples")) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".yaml" && ext != ".yml" && ext != ".json")) continue;
    const std::string name = entry.path().filename().string();
    // Not descriptions: metrics from training, CI pipelines, Kubernetes manifests.
    // (Matched below examples/, so a checkout under a folder named ci/ still finds them.)
    const std::string inside = fs::relative(entry.path(), kRoot / "examples").generic_string();
    if (name == "metrics.json" || inside.starts_with("ci/") || inside.find("/ci/") != std::string::npos) continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("every example document is valid", "[api][examples]") {
  const std::vector<fs::path> files = example_documents();
  REQUIRE(files.size() >= 4);
  for (const fs::path& file : files) {
    INFO(file.string());
    Result<Document> doc = document_read(file.string());
    INFO((doc ? "" : doc.message()));
    REQUIRE(doc);
    const std::optional<DescriptionKind> kind = description_kind_detect(doc->root);
    REQUIRE(kind.has_value());
    const std::vector<Error> errors = description_validate(doc.value(), *kind);
    std::string all;
    for (const Error& e : errors) all += e.to_string() + "\n";
    INFO(all);
    CHECK(errors.empty());
  }
}

TEST_CASE("the Fashion-MNIST example matches the bundled model", "[api][examples]") {
  const fs::path file = kRoot / "examples/fashion-mnist/application.yaml";
  Result<ApplicationDescription> r = application_load(file.string());
  INFO((r ? "" : r.message()));
  REQUIRE(r);
  const ApplicationDescription& a = r.value();
  CHECK(fs::exists(file.parent_path() / a.model.path));
  REQUIRE(a.inputs.size() == 1);
  CHECK(a.inputs[0].name == "input");  // README: input `input`, float32 [batch,1,28,28]
  CHECK(a.inputs[0].dtype == "float32");
  REQUIRE(a.inputs[0].shape.size() == 4);
  CHECK(a.inputs[0].shape[0].symbol == "batch");
  CHECK(a.inputs[0].shape[1].value == 1);
  CHECK(a.inputs[0].shape[2].value == 28);
  CHECK(a.inputs[0].shape[3].value == 28);
  REQUIRE(a.calibration.has_value());
  CHECK(fs::exists(file.parent_path() / a.calibration->npz));
  REQUIRE(a.validation.has_value());
  CHECK(a.validation->format == Dataset::Format::idx);
  REQUIRE(a.validation->normalize.has_value());
  CHECK(a.validation->normalize->mean == std::vector<double>{0.2860});
}

TEST_CASE("the example targets load as typed structs", "[api][examples]") {
  Result<TargetInfrastructure> hpc = target_load((kRoot / "examples/targets/hpc-gpu-slurm.yaml").string());
  REQUIRE(hpc);
  CHECK(hpc->scheduler == Scheduler::slurm);
  CHECK(hpc->slurm.has_value());
  CHECK(hpc->node.gpus.at(0).count == 4);
  Result<TargetInfrastructure> k8s = target_load((kRoot / "examples/targets/cloud-k8s-cpu.yaml").string());
  REQUIRE(k8s);
  CHECK(k8s->kubernetes->node_selector.at("node.kubernetes.io/instance-type") == "c7i.4xlarge");
  CHECK(k8s->node.gpus.empty());
  Result<TargetInfrastructure> local = target_load((kRoot / "examples/targets/local-cpu.yaml").string());
  REQUIRE(local);
  CHECK(local->kind == TargetKind::local);
}

TEST_CASE("the schemas compiled in are the files in api/schemas", "[api][examples]") {
  CHECK(schema_text(DescriptionKind::application) == slurp(kRoot / "api/schemas/application.schema.json"));
  CHECK(schema_text(DescriptionKind::target) == slurp(kRoot / "api/schemas/target.schema.json"));
}

// api/openapi.yaml: OpenAPI 3.1, every endpoint of the service issue, every $ref resolvable
// (inside the document, or into api/schemas/).
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <set>

#include "api/document.h"

namespace fs = std::filesystem;
using namespace kiln::api;
using json = nlohmann::ordered_json;

namespace {

const fs::path kApiDir = fs::path(KILN_SOURCE_DIR) / "api";

json load(const fs::path& p) {
  Result<Document> doc = document_read(p.string());
  INFO((doc ? "" : doc.message()));
  REQUIRE(doc);
  return doc->root;
}

// Resolves "#/a/b" in `doc`.
bool pointer_resolves(const json& doc, const std::string& fragment) {
  if (fragment.empty()) return true;
  try {
    return !doc.at(json::json_pointer(fragment)).is_discarded();
  } catch (const json::exception&) {
    return false;
  }
}

void collect_refs(const json& v, std::vector<std::string>& refs) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() == "$ref" && it.value().is_string()) refs.push_back(it.value().get<std::string>());
      else collect_refs(it.value(), refs);
    }
  } else if (v.is_array()) {
    for (const json& item : v) collect_refs(item, refs);
  }
}

}  // namespace

TEST_CASE("openapi.yaml is OpenAPI 3.1 and covers every endpoint", "[api][openapi]") {
  const json api = load(kApiDir / "openapi.yaml");
  REQUIRE(api["openapi"].get<std::string>().starts_with("3.1."));
  const json& paths = api["paths"];
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"/v1/jobs", {"post", "get"}},
      {"/v1/jobs/{id}", {"get", "delete"}},
      {"/v1/jobs/{id}/events", {"get"}},
      {"/v1/jobs/{id}/report", {"get"}},
      {"/v1/jobs/{id}/artifacts", {"get"}},
      {"/v1/jobs/{id}/artifacts/{name}", {"get"}},
      {"/v1/plan", {"post"}},
      {"/v1/targets/{name}", {"get", "put", "delete"}},
      {"/v1/benchmarks", {"post"}},
      {"/healthz", {"get"}},
      {"/readyz", {"get"}},
      {"/metrics", {"get"}},
  };
  for (const auto& [path, methods] : expected)
    for (const std::string& method : methods) {
      INFO(method << " " << path);
      REQUIRE(paths.contains(path));
      CHECK(paths[path].contains(method));
      if (paths[path].contains(method)) CHECK(paths[path][method].contains("responses"));
    }
  // Idempotent submission.
  bool idempotency = false;
  for (const json& p : paths["/v1/jobs"]["post"]["parameters"])
    idempotency = idempotency || p["$ref"] == "#/components/parameters/IdempotencyKey";
  CHECK(idempotency);
  CHECK(api["components"]["parameters"]["IdempotencyKey"]["name"] == "Idempotency-Key");
}

TEST_CASE("every $ref in openapi.yaml resolves", "[api][openapi]") {
  const json api = load(kApiDir / "openapi.yaml");
  std::vector<std::string> refs;
  collect_refs(api, refs);
  REQUIRE(refs.size() > 20);
  for (const std::string& ref : refs) {
    INFO(ref);
    const size_t hash = ref.find('#');
    const std::string file = ref.substr(0, hash);
    const std::string fragment = hash == std::string::npos ? "" : ref.substr(hash + 1);
    if (file.empty()) {
      CHECK(pointer_resolves(api, fragment));
    } else {
      REQUIRE(fs::exists(kApiDir / file));
      CHECK(pointer_resolves(load(kApiDir / file), fragment));
    }
  }
}

TEST_CASE("every operation has a unique operationId and declared error responses", "[api][openapi]") {
  const json api = load(kApiDir / "openapi.yaml");
  std::set<std::string> ids;
  for (auto path = api["paths"].begin(); path != api["paths"].end(); ++path)
    for (auto op = path.value().begin(); op != path.value().end(); ++op) {
      if (op.key() == "parameters") continue;
      INFO(op.key() << " " << path.key());
      REQUIRE(op.value().contains("operationId"));
      CHECK(ids.insert(op.value()["operationId"].get<std::string>()).second);
      const bool open = op.value().contains("security") && op.value()["security"].empty();
      if (!open) CHECK(op.value()["responses"].contains("401"));
    }
}

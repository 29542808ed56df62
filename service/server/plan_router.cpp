#include "service/server/plan_router.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "api/description.h"
#include "containers/oci/digest.h"
#include "service/planning/plan_application.h"
#include "service/server/api_error.h"
#include "service/server/jobs_router.h"
#include "service/server/multipart.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using serve::HttpRequest;
using serve::HttpResponse;

HttpResponse field_error(int status, const std::string& code, const std::string& part, const std::string& pointer,
                         const std::string& message) {
  return api_error(status, code, "'" + part + "' " + pointer + ": " + message,
                   nlohmann::ordered_json::array({{{"part", part}, {"pointer", pointer}, {"message", message}}}));
}

// The request's documents and model bytes, from either body type.
struct PlanRequest {
  std::string description, target;  // texts (YAML or JSON)
  std::string_view model;            // empty: by description.model.sha256
};

bool is_hex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Writes the model once under its digest (a temporary file renamed into place).
Result<std::string> keep_model(const std::string& dir, std::string_view bytes, const std::string& digest) {
  const fs::path path = fs::path(dir) / (digest + ".onnx");
  std::error_code ec;
  if (fs::exists(path, ec)) return path.string();
  fs::create_directories(dir, ec);
  KILN_REQUIRE(!ec, io, "cannot create ", dir, ": ", ec.message());
  static std::atomic<uint64_t> counter{0};  // concurrent uploads of one model each write their own file
  const fs::path tmp = fs::path(dir) / (digest + ".onnx.tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    KILN_REQUIRE(out.good(), io, "cannot write ", tmp.string());
  }
  fs::rename(tmp, path, ec);
  KILN_REQUIRE(!ec, io, "cannot store the model: ", ec.message());
  return path.string();
}

// Where plan_application's errors belong: no profile is the server's state (409), the rest the
// request's (422), except what only a bug explains (500).
HttpResponse plan_error(const Error& e) {
  switch (e.code) {
    case ErrorCode::io: return api_error(409, "no_profile", e.message);
    case ErrorCode::invalid_argument:
    case ErrorCode::unsupported:
    case ErrorCode::parse:
    case ErrorCode::invalid_graph:
    case ErrorCode::shape_mismatch:
    case ErrorCode::limit_exceeded:
    case ErrorCode::constraint_not_met: return api_error(422, "unplannable", e.message);
    case ErrorCode::internal: break;
  }
  return api_error(500, "internal", e.message);
}

}  // namespace

PlanRouter::PlanRouter(jobs::JobStore& store, std::string data_dir, PlanRouterLimits limits)
    : store_(store), data_dir_(std::move(data_dir)), limits_(limits) {}

HttpResponse PlanRouter::handle(const HttpRequest& request) const {
  if (request.method != "POST") {
    HttpResponse r = api_error(405, "method_not_allowed", "/v1/plan takes POST");
    r.headers.emplace_back("Allow", "POST");
    return r;
  }
  PlanRequest req;
  const std::string type = request.header("content-type");
  if (type.rfind("multipart/form-data", 0) == 0) {
    auto boundary = multipart_boundary(type);
    if (!boundary) return api_error(400, "malformed", boundary.error().message);
    auto parts = multipart_parse(request.body, *boundary);
    if (!parts) return api_error(400, "malformed", parts.error().message);
    for (const MultipartPart& p : *parts) {
      const uint64_t limit = p.name == "model" ? limits_.max_model_bytes : limits_.max_document_bytes;
      if (p.body.size() > limit)
        return api_error(413, "limit_exceeded", "part '" + p.name + "' is " + std::to_string(p.body.size()) + " bytes, over the limit of " +
                                                    std::to_string(limit));
      if (p.name == "description") req.description = std::string(p.body);
      else if (p.name == "target") req.target = std::string(p.body);
      else if (p.name == "model") req.model = p.body;
      else return api_error(400, "unknown_part", "unknown part '" + p.name + "': /v1/plan takes description, target, model");
    }
  } else if (type.rfind("application/json", 0) == 0) {
    if (request.body.size() > 2 * limits_.max_document_bytes)
      return api_error(413, "limit_exceeded", "the JSON body is over the limit of " + std::to_string(2 * limits_.max_document_bytes) + " bytes");
    const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object())
      return api_error(400, "syntax", "the body is not a JSON object {\"description\": {...}, \"target\": {...}}");
    for (const auto& [key, value] : body.items())
      if (key != "description" && key != "target")
        return field_error(422, "invalid", "body", "/" + key, "unknown field (expected description, target)");
    if (!body.contains("description") || !body["description"].is_object())
      return field_error(422, "invalid", "body", "/description", "expected the application description as an object");
    req.description = body["description"].dump();
    if (body.contains("target")) {
      if (!body["target"].is_object()) return field_error(422, "invalid", "body", "/target", "expected a target document as an object");
      req.target = body["target"].dump();
    }
  } else {
    return api_error(415, "unsupported_media_type", "POST /v1/plan takes multipart/form-data or application/json, not '" + type + "'");
  }
  if (req.description.empty()) return api_error(400, "missing_part", "the description is required");

  auto app = api::application_parse(req.description, "description");
  if (!app) return api_document_errors("description", app.errors());
  std::optional<api::TargetInfrastructure> target;
  if (!req.target.empty()) {
    auto parsed = api::target_parse(req.target, "target");
    if (!parsed) return api_document_errors("target", parsed.errors());
    target = std::move(parsed).value();
  } else if (!app->target.empty() && app->target != "local") {
    auto record = store_.target_get(app->target);
    if (!record) return api_error(500, "internal", record.error().message);
    if (!*record)
      return field_error(422, "unknown_target", "description", "/target",
                         "no target named '" + app->target + "' is registered (GET /v1/targets lists them)");
    auto parsed = api::target_parse((*record)->document, "target " + app->target);
    if (!parsed) return api_error(500, "internal", "registered target '" + app->target + "' no longer validates: " + parsed.message());
    target = std::move(parsed).value();
  }

  // The model: the uploaded bytes (kept by digest), else the digest of one kept before.
  const std::string models = (fs::path(data_dir_) / "models").string();
  std::string digest = app->model.sha256, model_path;
  if (!req.model.empty()) {
    if (const std::string why = onnx_model_check(req.model); !why.empty())
      return api_error(415, "not_onnx", "part 'model' is not an ONNX model: " + why);
    const std::string actual(oci::digest_hex(oci::sha256_digest(req.model)));
    if (!digest.empty() && digest != actual)
      return field_error(422, "digest_mismatch", "description", "/model/sha256", "the model part's SHA-256 is " + actual);
    auto kept = keep_model(models, req.model, actual);
    if (!kept) return api_error(500, "internal", kept.error().message);
    model_path = *kept;
  } else {
    if (!is_hex64(digest))
      return field_error(422, "no_model", "description", "/model/sha256",
                         "send the model as the 'model' part, or name one sent before by its SHA-256");
    model_path = (fs::path(models) / (digest + ".onnx")).string();
    std::error_code ec;
    if (!fs::exists(model_path, ec))
      return field_error(422, "unknown_model", "description", "/model/sha256",
                         "no model with this SHA-256 was sent to this service: send it once as the 'model' part");
  }

  planning::PlanInputs in;
  in.app = &app.value();
  in.target = target ? &*target : nullptr;
  in.target_source = "target";
  in.model_path = model_path;
  in.db = (fs::path(data_dir_) / "benchmarks.sqlite").string();
  in.cache_root = (fs::path(data_dir_) / "cache").string();
  auto outcome = planning::plan_application(in);
  if (!outcome) return plan_error(outcome.error());
  return api_json(200, nlohmann::ordered_json::parse(planning::plan_json(in, *outcome).dump()));
}

}  // namespace kiln::server

#include "service/server/job_json_body.h"

#include <nlohmann/json.hpp>

#include "service/server/api_error.h"

namespace kiln::server {

std::variant<JsonSubmission, serve::HttpResponse> json_submission_parse(std::string_view body) {
  using json = nlohmann::ordered_json;
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) return api_error(400, "syntax", "the request body is not valid JSON");
  if (!doc.is_object()) return api_error(400, "bad_request", "the request body must be a JSON object {description, target?}");
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it.key() != "description" && it.key() != "target") {
      std::string pointer = "/";
      pointer += it.key().substr(0, 64);
      return api_error(400, "bad_request", "unknown field '" + it.key().substr(0, 64) + "' (expected description, target)",
                       json::array({{{"pointer", pointer}, {"message", "unknown field"}}}));
    }
  if (!doc.contains("description") || !doc["description"].is_object())
    return api_error(400, "bad_request", "field 'description' is required and must be an object",
                     json::array({{{"pointer", "/description"}, {"message", "required object"}}}));
  JsonSubmission s;
  s.description = doc["description"].dump();
  if (doc.contains("target")) {
    if (!doc["target"].is_object())
      return api_error(400, "bad_request", "field 'target' must be an object (or leave it out and name a registered target "
                                           "in the description's 'target')",
                       json::array({{{"pointer", "/target"}, {"message", "expected an object"}}}));
    s.target = doc["target"].dump();
  }
  const json& d = doc["description"];
  if (d.contains("model") && d["model"].is_object() && d["model"].contains("url") && d["model"]["url"].is_string())
    s.model_url = d["model"]["url"].get<std::string>();
  return s;
}

}  // namespace kiln::server

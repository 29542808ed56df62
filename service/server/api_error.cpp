#include "service/server/api_error.h"

namespace kiln::server {

using json = nlohmann::ordered_json;

// Invalid UTF-8 from the request is replaced, not thrown: an answer always goes out.
serve::HttpResponse api_json(int status, const json& body) {
  return {status, body.dump(-1, ' ', false, json::error_handler_t::replace), {}, nullptr};
}

serve::HttpResponse api_error(int status, const std::string& code, const std::string& message, json details) {
  json e = {{"code", code}, {"message", message}};
  if (!details.is_null()) e["details"] = std::move(details);
  return api_json(status, {{"error", e}});
}

serve::HttpResponse api_document_errors(const std::string& part, const std::vector<api::Error>& errors) {
  json details = json::array();
  int status = 422;
  std::string code = "invalid";
  for (const api::Error& e : errors) {
    json d = {{"part", part}, {"pointer", e.pointer}};
    if (e.line > 0) d["line"] = e.line;
    if (e.column > 0) d["column"] = e.column;
    d["message"] = e.message;
    details.push_back(std::move(d));
    if (e.code == api::ErrorCode::syntax && status == 422) status = 400, code = "syntax";
    if (e.code == api::ErrorCode::limit_exceeded) status = 413, code = "limit_exceeded";
  }
  const std::string first = errors.empty() ? "" : errors.front().to_string();
  const std::string what = status == 400 ? " is not valid YAML or JSON: " : status == 413 ? " exceeds a limit: " : " is invalid: ";
  return api_error(status, code, "'" + part + "'" + what + first, std::move(details));
}

}  // namespace kiln::server

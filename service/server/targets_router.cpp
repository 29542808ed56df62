#include "service/server/targets_router.h"

#include "api/description.h"
#include "service/server/api_error.h"

namespace kiln::server {
namespace {

using json = nlohmann::ordered_json;
using serve::HttpRequest;
using serve::HttpResponse;

HttpResponse not_allowed(const std::string& method, const char* allow) {
  HttpResponse r = api_error(405, "bad_request", method + " is not allowed here (allowed: " + std::string(allow) + ")");
  r.headers.emplace_back("Allow", allow);
  return r;
}

}  // namespace

bool target_name_valid(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  auto edge = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!edge(name.front()) || !edge(name.back())) return false;
  for (char c : name)
    if (!edge(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

TargetsRouter::TargetsRouter(jobs::JobStore& store, uint64_t max_document_bytes)
    : store_(store), max_document_bytes_(max_document_bytes) {}

HttpResponse TargetsRouter::handle(const HttpRequest& request, const std::string& path) const {
  const std::string& method = request.method;
  if (path == "/v1/targets") {
    if (method != "GET") return not_allowed(method, "GET");
    auto list = store_.target_list();
    if (!list) return api_error(500, "internal", list.error().message);
    json targets = json::array();
    for (const jobs::TargetRecord& t : *list) targets.push_back({{"name", t.name}, {"kind", t.kind}});
    return api_json(200, {{"targets", std::move(targets)}});
  }
  const std::string prefix = "/v1/targets/";
  if (path.rfind(prefix, 0) != 0) return api_error(404, "not_found", "no endpoint " + path.substr(0, 128));
  const std::string name = path.substr(prefix.size());
  if (!target_name_valid(name))
    return api_error(400, "bad_request",
                     "path parameter 'name': expected 1 to 63 of a-z 0-9 . _ - starting and ending with a letter or digit");
  if (method == "PUT") return target_put(request, name);
  if (method == "GET") {
    auto t = store_.target_get(name);
    if (!t) return api_error(500, "internal", t.error().message);
    if (!t->has_value()) return api_error(404, "not_found", "no target '" + name + "' (register it with PUT /v1/targets/" + name + ")");
    return {200, (*t)->document, {}, nullptr};
  }
  if (method == "DELETE") {
    auto removed = store_.target_delete(name);
    if (!removed) return api_error(500, "internal", removed.error().message);
    if (!*removed) return api_error(404, "not_found", "no target '" + name + "'");
    return {204, "", {}, nullptr};
  }
  return not_allowed(method, "GET, PUT, DELETE");
}

HttpResponse TargetsRouter::target_put(const HttpRequest& request, const std::string& name) const {
  if (request.body.size() > max_document_bytes_)
    return api_error(413, "limit_exceeded", "the target document has " + std::to_string(request.body.size()) +
                                                " bytes; the limit is " + std::to_string(max_document_bytes_));
  const std::string type = request.header("content-type");
  api::DocumentFormat format = api::DocumentFormat::automatic;
  if (type.rfind("application/json", 0) == 0) format = api::DocumentFormat::json;
  else if (type.rfind("application/yaml", 0) == 0 || type.rfind("application/x-yaml", 0) == 0 || type.rfind("text/yaml", 0) == 0)
    format = api::DocumentFormat::yaml;
  auto doc = api::document_parse(request.body, "target", format);
  if (!doc) return api_document_errors("target", doc.errors());
  auto target = api::target_from_document(doc.value());
  if (!target) return api_document_errors("target", target.errors());
  if (target->name != name)
    return api_error(422, "invalid", "the document's name '" + target->name + "' differs from the path's '" + name + "'",
                     json::array({{{"part", "target"}, {"pointer", "/name"}, {"message", "expected \"" + name + "\""}}}));
  const std::string document = doc->root.dump();
  auto created = store_.target_put({name, api::target_kind_name(target->kind), document, ""});
  if (!created) return api_error(500, "internal", created.error().message);
  return {*created ? 201 : 200, document, {{"Location", "/v1/targets/" + name}}, nullptr};
}

}  // namespace kiln::server

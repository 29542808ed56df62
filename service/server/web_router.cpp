#include "service/server/web_router.h"

#include <string>

#include <nlohmann/json.hpp>

#include "service/web/web_assets.h"

namespace kiln::server {
namespace {

serve::HttpResponse web_error(int status, const std::string& code, const std::string& message) {
  const nlohmann::ordered_json body = {{"error", {{"code", code}, {"message", message}}}};
  return {status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}};
}

// Whether an If-None-Match header value (a list of quoted tags, or *) names `etag`. A weak W/"..."
// matches too: the files have no other representation.
bool etag_listed(std::string_view if_none_match, std::string_view etag) {
  return if_none_match == "*" || if_none_match.find(etag) != std::string_view::npos;
}

}  // namespace

bool web_route_matches(std::string_view path) { return path == "/" || path.rfind("/static/", 0) == 0; }

void web_security_headers_add(serve::HttpResponse& response) {
  response.headers.emplace_back("Content-Security-Policy", std::string(kWebContentSecurityPolicy));
  response.headers.emplace_back("X-Content-Type-Options", "nosniff");
  response.headers.emplace_back("Referrer-Policy", "no-referrer");
}

serve::HttpResponse web_handle(const serve::HttpRequest& request) {
  const std::string path = request.target.substr(0, request.target.find('?'));
  if (request.method != "GET") {
    serve::HttpResponse r = web_error(405, "bad_request", request.method + " is not allowed on " + path + " (allowed: GET)");
    r.headers.emplace_back("Allow", "GET");
    return r;
  }
  for (const web::embedded::Asset& asset : web::embedded::kAssets) {
    if (asset.path != path) continue;
    const std::string etag(asset.etag);
    serve::HttpResponse r;
    if (etag_listed(request.header("if-none-match"), etag)) {
      r.status = 304;
    } else {
      r.body = std::string(asset.body);
    }
    r.headers = {{"Content-Type", std::string(asset.content_type)}, {"ETag", etag}, {"Cache-Control", "no-cache"}};
    web_security_headers_add(r);
    return r;
  }
  return web_error(404, "not_found", "no file " + path.substr(0, 256) + " (the web form is at /)");
}

}  // namespace kiln::server

// The web form's routes: types, caching, the security policy, and that the page and its modules
// fit together (every module imported is served, every element the script looks up exists).
#include <regex>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "service/server/web_router.h"

using namespace kiln;

namespace {

serve::HttpRequest get(const std::string& target, std::vector<std::pair<std::string, std::string>> headers = {}) {
  return {"GET", target, "", std::move(headers)};
}

std::string header_of(const serve::HttpResponse& r, const std::string& name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return "";
}

std::set<std::string> matches(const std::string& text, const std::string& pattern) {
  std::set<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) out.insert((*it)[1]);
  return out;
}

}  // namespace

TEST_CASE("web form: the page and its files have their type, an ETag and a strict CSP", "[service]") {
  const std::pair<const char*, const char*> files[] = {
      {"/", "text/html; charset=utf-8"},
      {"/static/style.css", "text/css; charset=utf-8"},
      {"/static/app.js", "text/javascript; charset=utf-8"},
      {"/static/api.js", "text/javascript; charset=utf-8"},
      {"/static/documents.js", "text/javascript; charset=utf-8"},
      {"/static/event_stream.js", "text/javascript; charset=utf-8"},
      {"/static/onnx_inputs.js", "text/javascript; charset=utf-8"},
  };
  for (const auto& [path, type] : files) {
    INFO(path);
    const serve::HttpResponse r = server::web_handle(get(path));
    REQUIRE(r.status == 200);
    CHECK(!r.body.empty());
    CHECK(header_of(r, "Content-Type") == type);
    CHECK(std::regex_match(header_of(r, "ETag"), std::regex("\"[0-9a-f]{32}\"")));
    CHECK(header_of(r, "Cache-Control") == "no-cache");
    CHECK(header_of(r, "X-Content-Type-Options") == "nosniff");
    const std::string csp = header_of(r, "Content-Security-Policy");
    CHECK_THAT(csp, Catch::Contains("default-src 'none'") && Catch::Contains("script-src 'self';") &&
                        Catch::Contains("style-src 'self';") && Catch::Contains("frame-ancestors 'none'"));
    CHECK_THAT(csp, !Catch::Contains("unsafe") && !Catch::Contains("*") && !Catch::Contains("http"));
  }
  // A query string does not change what is served.
  CHECK(server::web_handle(get("/?job=1")).body == server::web_handle(get("/")).body);
}

TEST_CASE("web form: a revalidation with the current ETag gets 304 without a body", "[service]") {
  const std::string etag = header_of(server::web_handle(get("/static/app.js")), "ETag");
  const serve::HttpResponse same = server::web_handle(get("/static/app.js", {{"if-none-match", etag}}));
  CHECK(same.status == 304);
  CHECK(same.body.empty());
  CHECK(header_of(same, "ETag") == etag);
  CHECK(server::web_handle(get("/static/app.js", {{"if-none-match", "W/" + etag + ", \"x\""}})).status == 304);
  CHECK(server::web_handle(get("/static/app.js", {{"if-none-match", "\"0123\""}})).status == 200);
  // Each file has its own tag.
  CHECK(header_of(server::web_handle(get("/")), "ETag") != etag);
}

TEST_CASE("web form: the page has no inline script or style, and what it loads is served", "[service]") {
  const std::string html = server::web_handle(get("/")).body;
  // Scripts only by src, no event-handler attributes, no style attributes or elements.
  const std::regex script("<script\\b[^>]*>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), script); it != std::sregex_iterator(); ++it)
    CHECK_THAT(it->str(), Catch::Contains("src=\"/static/"));
  CHECK(matches(html, "<script\\b[^>]*>([^<]+)</script>").empty());
  CHECK(matches(html, "\\s(on[a-z]+)\\s*=").empty());
  CHECK(matches(html, "\\s(style)\\s*=").empty());
  CHECK_THAT(html, !Catch::Contains("<style"));
  // Everything the page and its modules load is served, and nothing from elsewhere.
  std::set<std::string> loaded = matches(html, "(?:src|href)=\"(/static/[^\"]+)\"");
  for (const char* module : {"app.js", "api.js", "documents.js", "event_stream.js", "onnx_inputs.js"})
    for (const std::string& imported : matches(server::web_handle(get(std::string("/static/") + module)).body, "from '\\./([a-z_]+\\.js)'"))
      loaded.insert("/static/" + imported);
  CHECK(loaded.size() >= 6);
  for (const std::string& path : loaded) {
    INFO(path);
    CHECK(server::web_handle(get(path)).status == 200);
  }
  CHECK(matches(html, "(?:src|href)=\"(https?:[^\"]*)\"").empty());
}

TEST_CASE("web form: every element the script looks up is in the page", "[service]") {
  const std::string html = server::web_handle(get("/")).body;
  const std::string app = server::web_handle(get("/static/app.js")).body;
  const std::set<std::string> ids = matches(html, "\\bid=\"([a-z-]+)\"");
  std::set<std::string> wanted = matches(app, "\\$\\('([a-z-]+)'\\)");
  // Fields that API errors are shown at: each needs its element's "-error" companion.
  for (const std::string& field : matches(app, "\\['/[a-z_/0-9]*', '([a-z-]+)'\\]")) wanted.insert(field + "-error");
  for (const char* file_field : {"model-file", "calibration-file", "validation-file", "target-file", "target-doc",
                                        "description-doc", "api-token"})
    wanted.insert(std::string(file_field) + "-error");
  CHECK(wanted.size() > 40);
  for (const std::string& id : wanted) {
    INFO(id);
    CHECK(ids.count(id) == 1);
  }
}

TEST_CASE("web form: other paths and methods", "[service]") {
  CHECK(server::web_route_matches("/"));
  CHECK(server::web_route_matches("/static/app.js"));
  CHECK_FALSE(server::web_route_matches("/v1/jobs"));
  CHECK_FALSE(server::web_route_matches("/staticx"));
  CHECK(server::web_handle(get("/static/nope.js")).status == 404);
  CHECK(server::web_handle(get("/static/../jobs.db")).status == 404);
  const serve::HttpResponse post = server::web_handle({"POST", "/", "", {}});
  CHECK(post.status == 405);
  CHECK(header_of(post, "Allow") == "GET");
}

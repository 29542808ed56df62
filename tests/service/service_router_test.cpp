// The service front (auth, owners, targets, benchmarks, model URLs, metrics) as a function: no
// sockets. Tokens are made with token_new and stored as `kiln token create` stores them.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "api/document.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/profile_json.h"
#include "service/server/service_router.h"

namespace fs = std::filesystem;
using namespace kiln;
using json = nlohmann::json;

namespace {

std::string file_read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
std::string source_read(const std::string& rel) { return file_read(std::string(KILN_SOURCE_DIR) + "/" + rel); }

const std::string kBoundary = "kiln-test-boundary";

std::string multipart(const std::vector<std::pair<std::string, std::string>>& parts) {
  std::string body;
  for (const auto& [name, bytes] : parts)
    body += "--" + kBoundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"; filename=\"" + name +
            "\"\r\nContent-Type: application/octet-stream\r\n\r\n" + bytes + "\r\n";
  return body + "--" + kBoundary + "--\r\n";
}

json body_json(const serve::HttpResponse& r) { return json::parse(r.body); }

struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("kiln-service-router-" + jobs::job_id_new());
  std::unique_ptr<jobs::JobStore> store;
  std::unique_ptr<jobs::JobRunner> runner;  // never started: jobs stay queued
  std::unique_ptr<server::JobsRouter> jobs_router;
  std::unique_ptr<server::TargetsRouter> targets;
  std::unique_ptr<server::BenchmarksRouter> benchmarks;
  std::unique_ptr<server::ServiceRouter> router;
  std::string description = source_read("examples/fashion-mnist/application.yaml");
  std::string target = source_read("examples/targets/local-cpu.yaml");
  std::string model = source_read("examples/fashion-mnist/model.onnx");
  std::string admin, alice, bob, reader;

  explicit Fixture(server::AuthMode mode = server::AuthMode::tokens, const std::string& fetch_allow = "") {
    fs::create_directories(dir);
    auto opened = jobs::JobStore::open((dir / "jobs.db").string());
    REQUIRE(opened);
    store = std::move(*opened);
    runner = std::make_unique<jobs::JobRunner>(*store, jobs::JobRunnerOptions{dir.string()});
    jobs_router = std::make_unique<server::JobsRouter>(*store, *runner, dir.string());
    auto allow = server::cidr_list_parse(fetch_allow);
    REQUIRE(allow);
    jobs_router->set_fetch_allow(*allow);
    targets = std::make_unique<server::TargetsRouter>(*store, 1 << 20);
    auto bench = server::BenchmarksRouter::open((dir / "benchmarks.sqlite").string(), 1 << 20);
    REQUIRE(bench);
    benchmarks = std::move(*bench);
    router = std::make_unique<server::ServiceRouter>(*store, *jobs_router, *targets, benchmarks.get(), mode);
    admin = token("admin,read,submit");
    alice = token("submit,read");
    bob = token("submit,read");
    reader = token("read");
  }
  ~Fixture() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string token(const std::string& scopes) {
    auto t = server::token_new("test", scopes);
    REQUIRE(t);
    REQUIRE(store->token_add(t->record));
    return t->token;
  }
  serve::HttpResponse call(const std::string& token, std::string method, std::string target, std::string body = "",
                           std::string content_type = "") {
    serve::HttpRequest r{std::move(method), std::move(target), std::move(body), {}};
    if (!token.empty()) r.headers.emplace_back("authorization", "Bearer " + token);
    if (!content_type.empty()) r.headers.emplace_back("content-type", content_type);
    return router->handle(r);
  }
  serve::HttpResponse submit(const std::string& token, const std::string& key = "") {
    serve::HttpRequest r{"POST", "/v1/jobs", multipart({{"description", description}, {"target", target}, {"model", model}}),
                         {{"content-type", "multipart/form-data; boundary=" + kBoundary}, {"authorization", "Bearer " + token}}};
    if (!key.empty()) r.headers.emplace_back("idempotency-key", key);
    return router->handle(r);
  }
  // The example's description as JSON with model.url = url (and, when set, a registered target's name).
  json description_by_url(const std::string& url, const std::string& target_name = "") {
    auto doc = api::document_parse(description, "description");
    REQUIRE(doc);
    json d = json::parse(doc.value().root.dump());
    d["model"] = {{"url", url}};
    d.erase("data");  // the calibration/validation paths are the client's files
    if (!target_name.empty()) d["target"] = target_name;
    return d;
  }
};

std::string header_of(const serve::HttpResponse& r, const std::string& name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return "";
}

}  // namespace

TEST_CASE("service router: 401 for missing, malformed, unknown and revoked tokens, 403 names the scope", "[service][auth]") {
  Fixture f;
  CHECK(f.call("", "GET", "/healthz").status == 200);
  CHECK(f.call("", "GET", "/readyz").status != 401);
  for (const std::string& bad : {std::string(""), std::string("nope"), std::string("kiln_0123456789abcdef_") + std::string(64, '0')}) {
    const serve::HttpResponse r = f.call(bad, "GET", "/v1/jobs");
    INFO(bad);
    CHECK(r.status == 401);
    CHECK(header_of(r, "WWW-Authenticate").rfind("Bearer", 0) == 0);
    CHECK(body_json(r)["error"]["code"] == "unauthorized");
  }
  // The right id with a wrong secret is unknown too.
  std::string forged = f.alice;
  forged.back() = forged.back() == '0' ? '1' : '0';
  CHECK(f.call(forged, "GET", "/v1/jobs").status == 401);

  const std::string id = f.alice.substr(5, 16);
  auto revoked = f.store->token_revoke(id);
  REQUIRE(revoked);
  CHECK(*revoked);
  const serve::HttpResponse gone = f.call(f.alice, "GET", "/v1/jobs");
  CHECK(gone.status == 401);
  CHECK_THAT(body_json(gone)["error"]["message"].get<std::string>(), Catch::Contains("revoked"));

  const serve::HttpResponse no_submit = f.submit(f.reader);
  CHECK(no_submit.status == 403);
  CHECK_THAT(body_json(no_submit)["error"]["message"].get<std::string>(), Catch::Contains("'submit' scope"));
  CHECK(f.call(f.bob, "GET", "/metrics").status == 403);
  CHECK(f.call(f.bob, "PUT", "/v1/targets/local-cpu", f.target).status == 403);
  CHECK(f.call(f.bob, "POST", "/v1/benchmarks", "{}").status == 403);
  CHECK(f.call(f.admin, "GET", "/metrics").status == 200);
}

TEST_CASE("service router: --auth none serves the local user with every scope", "[service][auth]") {
  Fixture f(server::AuthMode::none);
  CHECK(f.call("", "GET", "/v1/jobs").status == 200);
  CHECK(f.call("", "GET", "/metrics").status == 200);
}

TEST_CASE("service router: another owner's job is a 404, admins see every job", "[service][auth]") {
  Fixture f;
  const serve::HttpResponse mine = f.submit(f.alice, "key-1");
  REQUIRE(mine.status == 202);
  const std::string id = body_json(mine)["id"];
  CHECK(f.call(f.alice, "GET", "/v1/jobs/" + id).status == 200);
  for (const std::string sub : {"", "/events", "/report", "/artifacts", "/artifacts/model.kiln"}) {
    INFO(sub);
    const serve::HttpResponse r = f.call(f.bob, "GET", "/v1/jobs/" + id + sub);
    CHECK(r.status == 404);
    CHECK(body_json(r)["error"]["message"] == "no job '" + id + "'");  // the same answer as for no job at all
  }
  CHECK(f.call(f.bob, "DELETE", "/v1/jobs/" + id).status == 404);
  CHECK(body_json(f.call(f.bob, "GET", "/v1/jobs"))["jobs"].empty());
  CHECK(body_json(f.call(f.alice, "GET", "/v1/jobs"))["jobs"].size() == 1);
  CHECK(body_json(f.call(f.admin, "GET", "/v1/jobs"))["jobs"].size() == 1);
  CHECK(f.call(f.admin, "GET", "/v1/jobs/" + id).status == 200);
  // Idempotency keys are per owner: bob's "key-1" is a job of his own.
  const serve::HttpResponse his = f.submit(f.bob, "key-1");
  CHECK(his.status == 202);
  CHECK(body_json(his)["id"] != id);
  CHECK(f.call(f.alice, "DELETE", "/v1/jobs/" + id).status == 200);
}

TEST_CASE("service router: the target registry validates, stores and serves targets", "[service][targets]") {
  Fixture f;
  CHECK(f.call(f.admin, "PUT", "/v1/targets/local-cpu", f.target, "application/yaml").status == 201);
  CHECK(f.call(f.admin, "PUT", "/v1/targets/local-cpu", f.target, "application/yaml").status == 200);
  const serve::HttpResponse got = f.call(f.reader, "GET", "/v1/targets/local-cpu");
  REQUIRE(got.status == 200);
  CHECK(body_json(got)["name"] == "local-cpu");
  const json list = body_json(f.call(f.reader, "GET", "/v1/targets"));
  REQUIRE(list["targets"].size() == 1);
  CHECK(list["targets"][0]["kind"] == "local");

  std::string invalid = f.target;
  invalid.replace(invalid.find("nodes: 1"), 8, "nodes: four");
  const serve::HttpResponse bad = f.call(f.admin, "PUT", "/v1/targets/local-cpu", invalid);
  CHECK(bad.status == 422);
  CHECK(body_json(bad)["error"]["details"][0]["pointer"] == "/nodes");
  const serve::HttpResponse renamed = f.call(f.admin, "PUT", "/v1/targets/other", f.target);
  CHECK(renamed.status == 422);
  CHECK(body_json(renamed)["error"]["details"][0]["pointer"] == "/name");
  CHECK(f.call(f.admin, "PUT", "/v1/targets/a..%2fb", f.target).status == 400);
  CHECK(f.call(f.admin, "GET", "/v1/targets/../jobs.db").status == 400);
  CHECK(f.call(f.admin, "GET", "/v1/targets/missing").status == 404);

  // A job naming the registered target instead of uploading one gets a copy of it.
  json d = f.description_by_url("https://models.example.com/m.onnx", "local-cpu");
  const serve::HttpResponse by_name =
      f.call(f.alice, "POST", "/v1/jobs", json{{"description", d}}.dump(), "application/json");
  REQUIRE(by_name.status == 202);
  const std::string id = body_json(by_name)["id"];
  CHECK(file_read(jobs::job_dir(f.dir.string(), id) + "/target.yaml").find("\"local-cpu\"") != std::string::npos);
  d["target"] = "unknown-target";
  const serve::HttpResponse unknown = f.call(f.alice, "POST", "/v1/jobs", json{{"description", d}}.dump(), "application/json");
  CHECK(unknown.status == 422);
  CHECK(body_json(unknown)["error"]["details"][0]["pointer"] == "/target");

  CHECK(f.call(f.admin, "DELETE", "/v1/targets/local-cpu").status == 204);
  CHECK(f.call(f.admin, "DELETE", "/v1/targets/local-cpu").status == 404);
}

TEST_CASE("service router: model URLs with other schemes or private addresses are refused, naming them", "[service][fetch]") {
  Fixture f;
  const json target = json::parse(api::document_parse(f.target, "t").value().root.dump());
  auto by_url = [&](const std::string& url) {
    return f.call(f.alice, "POST", "/v1/jobs", json{{"description", f.description_by_url(url)}, {"target", target}}.dump(),
                  "application/json");
  };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"ftp://example.com/m.onnx", "scheme 'ftp'"},
      {"file:///etc/passwd", "scheme 'file'"},
      {"http://10.0.0.1/m.onnx", "10.0.0.1 is private"},
      {"http://169.254.169.254/latest/meta-data", "169.254.169.254 is link-local"},
      {"http://[::1]:8080/m.onnx", "::1 is loopback"},
      {"http://[::ffff:127.0.0.1]/m.onnx", "::ffff:127.0.0.1 is loopback"},
      {"http://[fd00::1]/m.onnx", "unique-local"},
      {"http://224.0.0.1/m.onnx", "multicast"},
  };
  for (const auto& [url, why] : refused) {
    INFO(url);
    const serve::HttpResponse r = by_url(url);
    CHECK(r.status == 400);
    CHECK_THAT(body_json(r)["error"]["message"].get<std::string>(), Catch::Contains(why));
  }
  const serve::HttpResponse ok = by_url("https://models.example.com/m.onnx");
  REQUIRE(ok.status == 202);
  const json job = body_json(f.call(f.alice, "GET", "/v1/jobs/" + body_json(ok)["id"].get<std::string>()));
  CHECK(job["stages"][0]["name"] == "fetch");
  CHECK(job["stages"][1]["name"] == "validate");
}

TEST_CASE("service router: an allow-listed loopback address may be fetched from", "[service][fetch]") {
  Fixture f(server::AuthMode::tokens, "127.0.0.1/32");
  const json target = json::parse(api::document_parse(f.target, "t").value().root.dump());
  auto by_url = [&](const std::string& url) {
    return f.call(f.alice, "POST", "/v1/jobs", json{{"description", f.description_by_url(url)}, {"target", target}}.dump(),
                  "application/json");
  };
  CHECK(by_url("http://127.0.0.1:8000/m.onnx").status == 202);
  CHECK(by_url("http://[::ffff:127.0.0.1]:8000/m.onnx").status == 202);
  CHECK(by_url("http://127.0.0.2/m.onnx").status == 400);
}

TEST_CASE("service router: benchmark profiles import all or nothing, other versions are refused", "[service][benchmarks]") {
  Fixture f;
  const serve::HttpResponse garbage = f.call(f.admin, "POST", "/v1/benchmarks", "{not json", "application/json");
  CHECK(garbage.status == 422);
  const serve::HttpResponse future = f.call(f.admin, "POST", "/v1/benchmarks",
                                            R"({"format": "kiln-target-profile", "version": 99, "targets": []})", "application/json");
  CHECK(future.status == 422);
  CHECK_THAT(body_json(future)["error"]["message"].get<std::string>(), Catch::Contains("version 99"));
  CHECK(f.call(f.admin, "POST", "/v1/benchmarks", "{}", "text/plain").status == 415);

  // A real profile, exported from a store that knows this machine.
  const std::string exported = (f.dir / "profile.json").string();
  {
    auto source = perf::BenchmarkStore::open((f.dir / "source.sqlite").string());
    REQUIRE(source);
    REQUIRE((*source)->target_put(perf::fingerprint_local(), "measured"));
    REQUIRE(perf::profile_export(**source, exported));
  }
  const serve::HttpResponse imported = f.call(f.admin, "POST", "/v1/benchmarks", file_read(exported), "application/json");
  REQUIRE(imported.status == 201);
  CHECK(body_json(imported)["targets"] == 1);
}

TEST_CASE("service router: metrics count requests by route and status", "[service][metrics]") {
  Fixture f;
  (void)f.call(f.alice, "GET", "/v1/jobs/0000000000000000000000000000");
  (void)f.call("", "GET", "/v1/jobs");
  const serve::HttpResponse m = f.call(f.admin, "GET", "/metrics");
  REQUIRE(m.status == 200);
  CHECK_THAT(m.body, Catch::Contains(R"(kiln_http_requests_total{method="GET",route="/v1/jobs/{id}",status="404"} 1)"));
  CHECK_THAT(m.body, Catch::Contains(R"(kiln_http_requests_total{method="GET",route="/v1/jobs",status="401"} 1)"));
  CHECK_THAT(m.body, Catch::Contains("kiln_http_request_duration_seconds_bucket{route=\"/v1/jobs\",le=\"+Inf\"} 1"));
  CHECK_THAT(m.body, Catch::Contains("kiln_jobs{state=\"queued\"}"));
}

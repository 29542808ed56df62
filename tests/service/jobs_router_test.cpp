#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "service/server/jobs_router.h"
#include "service/server/multipart.h"

namespace fs = std::filesystem;
using namespace kiln;
using json = nlohmann::json;

namespace {

std::string file_read(const std::string& rel) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kBoundary = "kiln-test-boundary";

std::string multipart(const std::vector<std::pair<std::string, std::string>>& parts) {
  std::string body;
  for (const auto& [name, bytes] : parts)
    body += "--" + kBoundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"; filename=\"" + name +
            "\"\r\nContent-Type: application/octet-stream\r\n\r\n" + bytes + "\r\n";
  return body + "--" + kBoundary + "--\r\n";
}

serve::HttpRequest post(const std::string& body, const std::string& key = "") {
  serve::HttpRequest r{"POST", "/v1/jobs", body, {{"content-type", "multipart/form-data; boundary=" + kBoundary}}};
  if (!key.empty()) r.headers.emplace_back("idempotency-key", key);
  return r;
}

serve::HttpRequest get(const std::string& target) { return {"GET", target, "", {}}; }

struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("kiln-router-" + jobs::job_id_new());
  std::unique_ptr<jobs::JobStore> store;
  std::unique_ptr<jobs::JobRunner> runner;  // never started: jobs stay queued
  std::unique_ptr<server::JobsRouter> router;
  std::string description = file_read("examples/fashion-mnist/application.yaml");
  std::string target = file_read("examples/targets/local-cpu.yaml");
  std::string model = file_read("examples/fashion-mnist/model.onnx");

  explicit Fixture(server::JobsRouterLimits limits = {}) {
    fs::create_directories(dir);
    auto opened = jobs::JobStore::open((dir / "jobs.db").string());
    REQUIRE(opened);
    store = std::move(*opened);
    runner = std::make_unique<jobs::JobRunner>(*store, jobs::JobRunnerOptions{dir.string()});
    router = std::make_unique<server::JobsRouter>(*store, *runner, dir.string(), limits);
  }
  ~Fixture() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  serve::HttpResponse handle(const serve::HttpRequest& r) { return router->handle(r); }
  std::string good_body() { return multipart({{"description", description}, {"target", target}, {"model", model}}); }
};

json body_json(const serve::HttpResponse& r) { return json::parse(r.body); }

}  // namespace

TEST_CASE("jobs router: a good submission is queued, listed, fetched and cancelled", "[service]") {
  Fixture f;
  const serve::HttpResponse r = f.handle(post(f.good_body()));
  REQUIRE(r.status == 202);
  const json accepted = body_json(r);
  const std::string id = accepted["id"];
  CHECK(accepted["state"] == "queued");
  CHECK(accepted["links"]["self"] == "/v1/jobs/" + id);
  CHECK(fs::exists(fs::path(jobs::job_dir(f.dir.string(), id)) / "model.onnx"));

  const serve::HttpResponse one = f.handle(get("/v1/jobs/" + id));
  REQUIRE(one.status == 200);
  const json job = body_json(one);
  CHECK(job["name"] == "fashion-classifier");
  CHECK(job["stages"].size() == jobs::job_stage_names().size());
  CHECK(job["progress"] == 0);

  const json list = body_json(f.handle(get("/v1/jobs?state=queued&limit=10")));
  REQUIRE(list["jobs"].size() == 1);

  const serve::HttpResponse del = f.handle({"DELETE", "/v1/jobs/" + id, "", {}});
  REQUIRE(del.status == 200);
  CHECK(body_json(del)["state"] == "cancelled");
  CHECK(f.handle(get("/v1/jobs/" + id + "/report")).status == 409);
  CHECK(body_json(f.handle(get("/v1/jobs/" + id + "/artifacts")))["artifacts"].empty());
}

TEST_CASE("jobs router: an idempotent retry returns the same job, another body with the key is a conflict", "[service]") {
  Fixture f;
  const serve::HttpResponse first = f.handle(post(f.good_body(), "retry-1"));
  REQUIRE(first.status == 202);
  const serve::HttpResponse again = f.handle(post(f.good_body(), "retry-1"));
  REQUIRE(again.status == 200);
  CHECK(body_json(again)["id"] == body_json(first)["id"]);
  const std::string other = multipart({{"description", f.description}, {"target", f.target + "\n# changed\n"}, {"model", f.model}});
  const serve::HttpResponse conflict = f.handle(post(other, "retry-1"));
  CHECK(conflict.status == 409);
  CHECK(body_json(conflict)["error"]["code"] == "conflict");
  CHECK(body_json(f.handle(get("/v1/jobs")))["jobs"].size() == 1);
}

TEST_CASE("jobs router: bad documents name the part and the field", "[service]") {
  Fixture f;
  SECTION("malformed YAML") {
    const serve::HttpResponse r = f.handle(post(multipart({{"description", "name: [unclosed"}, {"target", f.target}, {"model", f.model}})));
    CHECK(r.status == 400);
    const json e = body_json(r)["error"];
    CHECK(e["code"] == "syntax");
    CHECK(e["details"][0]["part"] == "description");
  }
  SECTION("malformed JSON target") {
    const serve::HttpResponse r = f.handle(post(multipart({{"description", f.description}, {"target", "{\"name\": "}, {"model", f.model}})));
    CHECK(r.status == 400);
    CHECK(body_json(r)["error"]["details"][0]["part"] == "target");
  }
  SECTION("schema violation names the pointer") {
    std::string target = f.target;
    target.replace(target.find("nodes: 1"), 8, "nodes: four");
    const serve::HttpResponse r = f.handle(post(multipart({{"description", f.description}, {"target", target}, {"model", f.model}})));
    CHECK(r.status == 422);
    const json e = body_json(r)["error"];
    CHECK(e["code"] == "invalid");
    CHECK(e["details"][0]["pointer"] == "/nodes");
    CHECK(e["details"][0]["line"].get<int>() > 0);
  }
  SECTION("unknown field") {
    const serve::HttpResponse r =
        f.handle(post(multipart({{"description", f.description + "colour: blue\n"}, {"target", f.target}, {"model", f.model}})));
    CHECK(r.status == 422);
    CHECK(body_json(r)["error"]["details"][0]["pointer"] == "/colour");
  }
  CHECK(body_json(f.handle(get("/v1/jobs")))["jobs"].empty());
}

TEST_CASE("jobs router: bad uploads", "[service]") {
  server::JobsRouterLimits limits;
  limits.max_model_bytes = 1000;
  Fixture f(limits);
  SECTION("non-ONNX model") {
    const serve::HttpResponse r =
        f.handle(post(multipart({{"description", f.description}, {"target", f.target}, {"model", "this is not a model"}})));
    CHECK(r.status == 415);
    CHECK(body_json(r)["error"]["details"][0]["part"] == "model");
  }
  SECTION("oversize part names the limit") {
    const serve::HttpResponse r = f.handle(post(f.good_body()));
    CHECK(r.status == 413);
    CHECK(body_json(r)["error"]["message"].get<std::string>().find("the limit is 1000 bytes") != std::string::npos);
  }
  SECTION("missing and unknown parts") {
    CHECK(f.handle(post(multipart({{"description", f.description}, {"target", f.target}}))).status == 400);
    const serve::HttpResponse r = f.handle(post(multipart({{"description", f.description}, {"extra", "x"}})));
    CHECK(r.status == 400);
    CHECK(body_json(r)["error"]["details"][0]["part"] == "extra");
  }
  SECTION("not multipart") {
    const serve::HttpResponse no_description = f.handle({"POST", "/v1/jobs", "{}", {{"content-type", "application/json"}}});
    CHECK(no_description.status == 400);
    CHECK(body_json(no_description)["error"]["details"][0]["pointer"] == "/description");
    CHECK(f.handle({"POST", "/v1/jobs", "x", {{"content-type", "text/plain"}}}).status == 415);
    CHECK(f.handle({"POST", "/v1/jobs", "garbage", {{"content-type", "multipart/form-data; boundary=zz"}}}).status == 400);
  }
}

TEST_CASE("jobs router: unknown jobs, artifact names and endpoints", "[service]") {
  Fixture f;
  CHECK(f.handle(get("/v1/jobs/" + jobs::job_id_new())).status == 404);
  CHECK(f.handle(get("/v1/jobs/nope")).status == 404);
  CHECK(f.handle(get("/v1/jobs/..%2F..%2Fetc")).status == 400);
  CHECK(f.handle(get("/v1/jobs?limit=0")).status == 400);
  CHECK(f.handle(get("/v1/jobs?state=lost")).status == 400);
  CHECK(f.handle(get("/v1/nothing")).status == 404);
  CHECK(f.handle({"PUT", "/v1/jobs", "", {}}).status == 405);

  const std::string id = body_json(f.handle(post(f.good_body())))["id"];
  const std::string dir = jobs::job_dir(f.dir.string(), id);
  REQUIRE(f.store->artifact_add(id, {"model.kiln", "kiln_plan", "model.onnx", 3, std::string(64, '0')}));
  const serve::HttpResponse ok = f.handle(get("/v1/jobs/" + id + "/artifacts/model.kiln"));
  CHECK(ok.status == 200);
  CHECK(ok.body == f.model);  // served from the recorded path
  CHECK(f.handle(get("/v1/jobs/" + id + "/artifacts/description.yaml")).status == 404);  // a file, but not an artifact
  CHECK(f.handle(get("/v1/jobs/" + id + "/artifacts/..")).status == 400);
  CHECK(f.handle(get("/v1/jobs/" + id + "/artifacts/../../jobs.db")).status == 400);
  CHECK(f.handle(get("/v1/jobs/" + id + "/artifacts/.hidden")).status == 400);
  CHECK(f.handle(get("/v1/jobs/" + id + "/artifacts/%2e%2e")).status == 400);
}

TEST_CASE("jobs router: server-sent events follow the job and resume after Last-Event-ID", "[service]") {
  Fixture f;
  const std::string id = body_json(f.handle(post(f.good_body())))["id"];
  auto collect = [&](const std::string& last_event_id) {
    serve::HttpRequest r = get("/v1/jobs/" + id + "/events");
    if (!last_event_id.empty()) r.headers.emplace_back("last-event-id", last_event_id);
    serve::HttpResponse res = f.handle(r);
    REQUIRE(res.status == 200);
    REQUIRE(res.stream);
    return res;
  };
  serve::HttpResponse live = collect("");
  serve::StreamPoll p = live.stream();
  CHECK(p.data.empty());  // queued: nothing yet
  CHECK(!p.done);
  auto claimed = f.store->job_claim();
  REQUIRE(claimed);
  REQUIRE(f.store->stage_start(id, "validate"));
  p = live.stream();
  CHECK(p.data == "id: 1\nevent: stage\ndata: " +
                      nlohmann::ordered_json({{"type", "stage"}, {"job", id}, {"stage", "validate"}, {"state", "running"},
                            {"time", (*f.store->job_get(id))->stages[0].started_at}}).dump() + "\n\n");
  REQUIRE(f.store->stage_finish(id, "validate", "done", ""));
  REQUIRE(f.store->stage_start(id, "compile"));
  REQUIRE(f.store->stage_finish(id, "compile", "failed", "boom"));
  REQUIRE(f.store->job_finish(id, "failed", "stage compile: boom"));
  p = live.stream();
  CHECK(p.done);
  CHECK(p.data.find("id: 1\n") == std::string::npos);  // not sent twice
  CHECK(p.data.find("id: 2\nevent: stage") != std::string::npos);
  CHECK(p.data.find("id: 4\nevent: stage") != std::string::npos);
  CHECK(p.data.find("\"message\":\"boom\"") != std::string::npos);
  CHECK(p.data.find("id: 11\nevent: done") != std::string::npos);

  serve::StreamPoll resumed = collect("3").stream();
  CHECK(resumed.done);
  CHECK(resumed.data.rfind("id: 4\n", 0) == 0);
  CHECK(f.handle([&] {
           serve::HttpRequest r = get("/v1/jobs/" + id + "/events");
           r.headers.emplace_back("last-event-id", "x");
           return r;
         }()).status == 400);
}

// The running stage's log lines stream as `log` events (no id); its last partial line comes
// before the stage's "finished" event; a new connection gets the running stage's log from its start.
TEST_CASE("jobs router: the running stage's log streams as log events", "[service]") {
  Fixture f;
  const std::string id = body_json(f.handle(post(f.good_body())))["id"];
  const fs::path log = fs::path(jobs::job_dir(f.dir.string(), id)) / "validate.log";
  serve::HttpResponse live = f.handle(get("/v1/jobs/" + id + "/events"));
  REQUIRE(live.stream);
  REQUIRE(f.store->job_claim());
  REQUIRE(f.store->stage_start(id, "validate"));
  std::ofstream(log) << "[1/2] compiling\r\n\n";
  serve::StreamPoll p = live.stream();
  const std::string first = "event: log\ndata: " +
                            nlohmann::ordered_json({{"type", "log"}, {"job", id}, {"stage", "validate"}, {"message", "[1/2] compiling"}}).dump();
  CHECK(p.data.find("id: 1\nevent: stage") < p.data.find(first));  // after its stage's start
  std::ofstream(log, std::ios::app) << std::string(3000, 'x') << "\n[2/2] meas";
  p = live.stream();
  CHECK(p.data.find(std::string(1000, 'x') + "...\"") != std::string::npos);  // a long line is cut
  CHECK(p.data.find("meas") == std::string::npos);  // not a whole line yet
  CHECK(live.stream().data.empty());
  serve::StreamPoll again = f.handle(get("/v1/jobs/" + id + "/events")).stream();
  CHECK(again.data.find(first) != std::string::npos);
  REQUIRE(f.store->stage_finish(id, "validate", "done", ""));
  p = live.stream();
  const size_t partial = p.data.find("\"message\":\"[2/2] meas\"");
  REQUIRE(partial != std::string::npos);
  CHECK(partial < p.data.find("id: 2\nevent: stage"));
  CHECK(p.data.find("[1/2]") == std::string::npos);  // nothing sent twice on one connection
}

TEST_CASE("jobs router: health, readiness and metrics", "[service]") {
  Fixture f;
  CHECK(f.handle(get("/healthz")).body == "ok\n");
  CHECK(f.handle(get("/readyz")).status == 503);  // workers not started
  const serve::HttpResponse m = f.handle(get("/metrics"));
  CHECK(m.status == 200);
  CHECK(m.body.find("kiln_jobs{state=\"queued\"} 0") != std::string::npos);
}

TEST_CASE("multipart: parts, quoting and malformed bodies", "[service]") {
  auto boundary = server::multipart_boundary("multipart/form-data; boundary=\"abc\"");
  REQUIRE(boundary);
  CHECK(*boundary == "abc");
  CHECK(!server::multipart_boundary("multipart/form-data"));
  const std::string body = "--abc\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\ny\r\n--abc\r\n"
                           "Content-Disposition: form-data; name=b; filename=\"m.onnx\"\r\n\r\n\r\n--abc--\r\n";
  auto parts = server::multipart_parse(body, "abc");
  REQUIRE(parts);
  REQUIRE(parts->size() == 2);
  CHECK((*parts)[0].body == "x\r\ny");
  CHECK((*parts)[1].name == "b");
  CHECK((*parts)[1].filename == "m.onnx");
  CHECK((*parts)[1].body.empty());
  CHECK(!server::multipart_parse("--abc\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\ntruncated", "abc"));
  CHECK(!server::multipart_parse("--abc\r\n\r\nx\r\n--abc--", "abc"));
}

TEST_CASE("onnx check: the example model passes, other bytes do not", "[service]") {
  CHECK(server::onnx_model_check(file_read("examples/fashion-mnist/model.onnx")).empty());
  CHECK(!server::onnx_model_check("").empty());
  CHECK(!server::onnx_model_check("hello world").empty());
  CHECK(!server::onnx_model_check(std::string("\x08\x07", 2)).empty());  // ir_version only: no graph
}

// The HTML report: escaping of everything users control, the candidates chart, the fallback to
// the verification's timing, and GET /v1/jobs/{id}/report?format=html through the router.
#include <filesystem>
#include <fstream>
#include <regex>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "service/server/jobs_router.h"
#include "service/server/report_html.h"

namespace fs = std::filesystem;
using namespace kiln;
using json = nlohmann::json;

namespace {

const char* kHostile = "<script>alert(\"x\")</script>";

jobs::JobRecord job_hostile() {
  jobs::JobRecord job;
  job.id = "0123456789abcdef";
  job.name = kHostile;
  job.state = "failed";
  job.error = "stage compile: node '<img src=x onerror=alert(1)>' is unsupported";
  job.stages = {{"validate", "done", "2026-11-24T10:00:00Z", "2026-11-24T10:00:01Z", 1.25, ""},
                {"compile", "failed", "2026-11-24T10:00:01Z", "2026-11-24T10:00:02Z", 0.5, "'<b onmouseover=x>'"}};
  return job;
}

json candidate(const std::string& name, double predicted, double measured, bool chosen) {
  return {{"name", name}, {"precision", "int8"}, {"batch", 8},       {"threads", 2},          {"predicted_ms", predicted},
          {"measured_ms", measured}, {"throughput_per_s", 4700.0}, {"accuracy_drop", 0.001}, {"chosen", chosen}};
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("HTML report: names, messages and artifact names from users are escaped", "[service]") {
  const json report = {
      {"job", {{"id", "0123456789abcdef"}, {"name", kHostile}}},
      {"candidates", {candidate("\"><svg onload=alert(1)>", 1.5, 1.7, true)}},
      {"explanation", {"Plan: <b onclick=x>chosen</b>"}},
      {"verification", {{"data", {{"source", "<iframe>"}}}, {"outputs", {{{"name", "</td><script>"}, {"cosine", 1.0}}}}}},
      {"artifacts", {{{"name", "x\"><script>a.kiln"}, {"kind", "kiln_plan"}, {"bytes", 2048}, {"sha256", "<ab>"}}}}};
  const std::string html = server::report_html_render(job_hostile(), report.dump());
  // Only the page's own elements: no script, no handler attribute, no element a user named.
  CHECK_THAT(html, !Catch::Contains("<script") && !Catch::Contains("<img") && !Catch::Contains("<svg onload") &&
                       !Catch::Contains("<iframe") && !Catch::Contains("<b ") && !Catch::Contains("</td><script"));
  CHECK(!std::regex_search(html, std::regex("<[^>]*\\son[a-z]+=")));
  CHECK_THAT(html, Catch::Contains("<title>kiln report: &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</title>"));
  CHECK_THAT(html, Catch::Contains("node &#39;&lt;img src=x onerror=alert(1)&gt;&#39; is unsupported"));
  CHECK_THAT(html, Catch::Contains("&quot;&gt;&lt;svg onload=alert(1)&gt;"));
  CHECK_THAT(html, Catch::Contains("<li>Plan: &lt;b onclick=x&gt;chosen&lt;/b&gt;</li>"));  // kiln optimize's reasons
  // The link is built from the job id and the percent-encoded name, not taken from the report.
  CHECK_THAT(html, Catch::Contains("href=\"/v1/jobs/0123456789abcdef/artifacts/x%22%3E%3Cscript%3Ea.kiln\""));
  CHECK_THAT(html, Catch::Contains("2.00 KiB"));
  // The page has no script and no inline style, so the form's CSP holds for it.
  CHECK_THAT(html, !Catch::Contains("style=") && !Catch::Contains("<style"));
}

TEST_CASE("HTML report: the candidates chart draws predicted and measured bars and marks the chosen one", "[service]") {
  const json report = {{"candidates", {candidate("fp32-b1", 2.0, 2.4, false), candidate("int8-b8", 1.0, 1.2, true),
                                       {{"name", "bf16-b4"}, {"predicted_ms", 1.5}}}},
                       {"artifacts", json::array()}};
  jobs::JobRecord job = job_hostile();
  job.name = "fashion-classifier";
  const std::string html = server::report_html_render(job, report.dump());
  CHECK_THAT(html, Catch::Contains("<svg class=\"chart\"") && Catch::Contains("role=\"img\""));
  CHECK(count_of(html, "fill=\"#9bb7d4\"><title>predicted") == 3);
  CHECK(count_of(html, "fill=\"#1f5f99\"><title>measured") == 2);
  CHECK_THAT(html, Catch::Contains("measured: none"));  // bf16-b4 was not measured
  CHECK_THAT(html, Catch::Contains(">★ int8-b8</text>"));
  CHECK(count_of(html, "<tr class=\"chosen\">") == 1);
  CHECK_THAT(html, Catch::Contains("4700/s · drop 0.100 pt"));
  // The axis ends at a round number above the slowest bar (2.4 ms → 5 ms).
  CHECK_THAT(html, Catch::Contains(">5 ms</text>"));
  CHECK(count_of(html, "<td>–</td><td>") >= 3);  // no verified_on given
}

TEST_CASE("HTML report: a GPU candidate says it was verified by emulation", "[service]") {
  json gpu = candidate("fp16 b8 cuda x1", 0.2, 0.0, true);
  gpu.erase("measured_ms");
  gpu["device"] = "cuda";
  gpu["verified_on"] = "fp16 emulated on the CPU (the GPU plan on the CPU engine, every stored value rounded to fp16) (cpu, 2 threads)";
  json cpu = candidate("int8 b8 t2x1", 1.0, 1.2, false);
  cpu["verified_on"] = "cpu, 2 threads";
  const std::string html = server::report_html_render(job_hostile(), json{{"candidates", {cpu, gpu}}}.dump());
  CHECK_THAT(html, Catch::Contains("<th scope=\"col\">verified on</th>"));
  CHECK_THAT(html, Catch::Contains("<td>fp16 emulated on the CPU</td><td>★ chosen</td>"));
  CHECK_THAT(html, Catch::Contains("<td>cpu, 2 threads</td><td></td>"));
}

TEST_CASE("HTML report: without candidates the verification's timing is charted", "[service]") {
  const json verification = {{"data", {{"source", "16 random samples"}, {"random", true}, {"samples", 16}}},
                             {"reference", "reference executor"}, {"batch", 8}, {"batches", 2},
                             {"engine_threads", 2}, {"reference_seconds", 0.5}, {"compiled_seconds", 0.02},
                             {"outputs", {{{"name", "logits"}, {"cosine", 0.99999}, {"max_abs_error", 1e-5},
                                           {"classifier", true}, {"top1_agreement", 1.0}}}}};
  const std::string html =
      server::report_html_render(job_hostile(), json{{"candidates", json::array()}, {"verification", verification}}.dump());
  CHECK_THAT(html, Catch::Contains("compiled plan, batch 8"));
  CHECK_THAT(html, Catch::Contains(">10.0 ms</text>"));   // 0.02 s over 2 batches
  CHECK_THAT(html, !Catch::Contains(">250 ms</text>"));   // the reference is listed, not charted
  CHECK_THAT(html, Catch::Contains("reference 0.500 s"));
  CHECK_THAT(html, Catch::Contains("800/s · top-1 agree 100%"));
  CHECK_THAT(html, Catch::Contains("random inputs"));
  CHECK(count_of(html, "<title>predicted") == 0);
}

TEST_CASE("HTML report: an unreadable report.json still shows the job's stages", "[service]") {
  const std::string html = server::report_html_render(job_hostile(), "{not json");
  CHECK_THAT(html, Catch::Contains("report.json cannot be read"));
  CHECK_THAT(html, Catch::Contains("<td>validate</td>") && Catch::Contains("1.25 s"));
  CHECK_THAT(html, Catch::Contains("nothing to chart"));
  // Wrong types are read as absent, not thrown.
  const std::string odd = server::report_html_render(job_hostile(), R"({"candidates": [1, {"name": 2}], "artifacts": {}})");
  CHECK_THAT(odd, Catch::Contains("<svg"));
  const std::string huge = server::report_html_render(
      job_hostile(), R"({"artifacts": [{"name": "a", "bytes": 1e300}], "candidates": [{"name": "b", "measured_ms": 1e300}],
                         "verification": {"batches": 0, "compiled_seconds": 1, "outputs": "none", "data": "x"}})");
  CHECK_THAT(huge, Catch::Contains("<td>–</td>"));
}

TEST_CASE("HTML report: GET /v1/jobs/{id}/report?format=html through the router", "[service]") {
  const fs::path dir = fs::temp_directory_path() / ("kiln-report-html-" + jobs::job_id_new());
  fs::create_directories(dir);
  auto store = jobs::JobStore::open((dir / "jobs.db").string());
  REQUIRE(store);
  jobs::JobRunner runner(**store, jobs::JobRunnerOptions{dir.string()});
  server::JobsRouter router(**store, runner, dir.string());
  jobs::JobRecord job;
  job.id = jobs::job_id_new();
  job.name = "fashion-classifier";
  REQUIRE((*store)->job_create(job, jobs::job_stage_names(), "", ""));
  const std::string report_url = "/v1/jobs/" + job.id + "/report";
  CHECK(router.handle({"GET", report_url + "?format=html", "", {}}).status == 409);
  CHECK(router.handle({"GET", report_url + "?format=pdf", "", {}}).status == 400);

  REQUIRE((*store)->stage_start(job.id, "validate"));
  REQUIRE((*store)->stage_finish(job.id, "validate", "failed", "<script>alert(1)</script>"));
  fs::create_directories(jobs::job_dir(dir.string(), job.id));
  const std::string report = json{{"candidates", {candidate("<i>x</i>", 1, 2, true)}}}.dump();
  std::ofstream(fs::path(jobs::job_dir(dir.string(), job.id)) / "report.json") << report;
  REQUIRE((*store)->artifact_add(job.id, {"report.json", "report_json", "report.json", static_cast<int64_t>(report.size()),
                                          std::string(64, 'a')}));

  for (const serve::HttpRequest& request :
       {serve::HttpRequest{"GET", report_url + "?format=html", "", {}},
        serve::HttpRequest{"GET", report_url, "", {{"accept", "text/html,application/xhtml+xml"}}}}) {
    const serve::HttpResponse r = router.handle(request);
    REQUIRE(r.status == 200);
    std::string type, csp;
    for (const auto& [name, value] : r.headers) {
      if (name == "Content-Type") type = value;
      if (name == "Content-Security-Policy") csp = value;
    }
    CHECK(type == "text/html; charset=utf-8");
    CHECK_THAT(csp, Catch::Contains("script-src 'self'"));
    CHECK_THAT(r.body, Catch::Contains("&lt;script&gt;alert(1)&lt;/script&gt;") && Catch::Contains("&lt;i&gt;x&lt;/i&gt;"));
    CHECK_THAT(r.body, !Catch::Contains("<script"));
  }
  const serve::HttpResponse as_json = router.handle({"GET", report_url, "", {}});
  CHECK(as_json.status == 200);
  CHECK(json::parse(as_json.body)["candidates"][0]["name"] == "<i>x</i>");
  std::error_code ec;
  fs::remove_all(dir, ec);
}

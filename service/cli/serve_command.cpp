// kiln serve --data-dir D [--host H] [--port P] [--port-file F] [--workers N] [--job-time-limit S]
// [--max-model-mb M] [--max-data-mb M] [--auth none|tokens] [--fetch-allow CIDR,...]: the job
// service. --auth none (the default: one local user) is refused unless --host is a loopback address. Jobs live in D/jobs.db (SQLite) and D/jobs/<id>/; a restart requeues jobs
// that were running, which resume from their last finished stage. SIGTERM/SIGINT: stop
// accepting, finish the requests in flight, kill running stages (their jobs resume on the next
// start) and exit 0.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "service/cli/commands.h"
#include "service/jobs/job_runner.h"
#include "service/jobs/job_store.h"
#include "service/runtime/serve/http_server.h"
#include "service/server/jobs_router.h"
#include "service/server/web_router.h"
#include "service/server/service_router.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct ServeOptions {
  std::string data_dir;
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  std::string port_file;
  int workers = 2;
  int64_t job_time_limit_s = 3600;
  int64_t max_model_mb = 1024;
  int64_t max_data_mb = 256;
  std::string auth = "none";
  std::string fetch_allow;
  int64_t test_stage_pause_ms = 0;
};

Status port_file_write(const std::string& path, uint16_t port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << '\n';
    KILN_REQUIRE(out.good(), io, "cannot write --port-file '", tmp, "'");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);  // readers never see a partial number
  KILN_REQUIRE(!ec, io, "cannot write --port-file '", path, "': ", ec.message());
  return Status::ok();
}

// Whether --host names only this machine (127.0.0.0/8, ::1).
bool host_is_loopback(const std::string& host) {
  auto ip = server::ip_parse(host);
  if (!ip) return false;
  if (!ip->v6) return ip->bytes[0] == 127;
  return *ip == *server::ip_parse("::1");
}

int run_serve(const ServeOptions& opts) {
  const server::AuthMode auth = opts.auth == "tokens" ? server::AuthMode::tokens : server::AuthMode::none;
  if (auth == server::AuthMode::none && !host_is_loopback(opts.host))
    return report_error("--auth none serves every client as one user with every scope, so it listens only on a loopback "
                        "address; --host " + opts.host + " is not one (use --auth tokens, or --host 127.0.0.1)");
  auto fetch_allow = server::cidr_list_parse(opts.fetch_allow);
  if (!fetch_allow) return report_error("--fetch-allow: " + fetch_allow.error().message);
  std::error_code ec;
  fs::create_directories(fs::path(opts.data_dir) / "jobs", ec);
  if (ec) return report_error("cannot create --data-dir '" + opts.data_dir + "': " + ec.message());
  auto store = jobs::JobStore::open((fs::path(opts.data_dir) / "jobs.db").string());
  if (!store) return report_error(store.error().message);
  jobs::JobStore& st = **store;
  constexpr int kMaxAttempts = 3;
  auto requeued = st.jobs_recover(kMaxAttempts);
  if (!requeued) return report_error(requeued.error().message);

  jobs::JobRunnerOptions runner_options;
  runner_options.data_dir = opts.data_dir;
  runner_options.workers = opts.workers;
  runner_options.job_time_limit = std::chrono::seconds(opts.job_time_limit_s);
  runner_options.max_attempts = kMaxAttempts;
  runner_options.stage_pause = std::chrono::milliseconds(opts.test_stage_pause_ms);
  runner_options.max_model_bytes = static_cast<uint64_t>(opts.max_model_mb) << 20;
  runner_options.fetch_allow = opts.fetch_allow;
  jobs::JobRunner runner(st, runner_options);

  server::JobsRouterLimits limits;
  limits.max_model_bytes = static_cast<uint64_t>(opts.max_model_mb) << 20;
  limits.max_data_bytes = static_cast<uint64_t>(opts.max_data_mb) << 20;
  server::JobsRouter router(st, runner, opts.data_dir, limits);
  router.set_fetch_allow(*fetch_allow);
  server::TargetsRouter targets(st, limits.max_document_bytes);
  constexpr uint64_t kMaxProfileBytes = uint64_t{64} << 20;  // a profile is measurements as JSON: MBs, not GBs
  auto benchmarks = server::BenchmarksRouter::open((fs::path(opts.data_dir) / "benchmarks.sqlite").string(), kMaxProfileBytes);
  if (!benchmarks) return report_error(benchmarks.error().message);
  const server::PlanRouter plan(st, opts.data_dir, {limits.max_document_bytes, limits.max_model_bytes});
  server::ServiceRouter service(st, router, targets, benchmarks->get(), auth, &plan);

  serve::HttpServerOptions http;
  http.host = opts.host;
  http.port = opts.port;
  http.max_body_bytes = limits.max_body_bytes();
  http.body_limit_hint = "kiln serve --max-model-mb, --max-data-mb";
  auto server = serve::HttpServer::create(http, [&service](const serve::HttpRequest& req, serve::ReplyFn reply) {
    // The web form (/, /static/...) needs no token: it holds no data, the API calls it makes do.
    if (server::web_route_matches(req.target.substr(0, req.target.find('?')))) return reply(server::web_handle(req));
    reply(service.handle(req));
  });
  if (!server) return report_error(server.error().message);
  serve::HttpServer& srv = **server;
  if (!opts.port_file.empty()) {
    Status written = port_file_write(opts.port_file, srv.port());
    if (!written) return report_error(written.message());
  }
  srv.stop_on_signals([&router](int signal) {
    router.set_ready(false);
    std::printf("kiln serve: %s: finishing requests in flight, then exiting; running jobs resume on the next start\n",
                signal == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(stdout);
  });
  runner.start();
  std::printf("kiln serve: http://%s:%u/v1/jobs, data in %s, %d workers, auth %s, %lld jobs resumed\n", opts.host.c_str(),
              static_cast<unsigned>(srv.port()), opts.data_dir.c_str(), runner.workers(), opts.auth.c_str(),
              static_cast<long long>(*requeued));
  std::fflush(stdout);
  srv.run(2);
  runner.stop();
  std::printf("kiln serve: stopped\n");
  return kExitOk;
}

}  // namespace

void add_serve_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Run the job service (HTTP API in api/openapi.yaml)");
  cmd->add_option("--data-dir", opts->data_dir, "Folder for the job store (jobs.db) and the jobs' files")->required();
  cmd->add_option("--host", opts->host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", opts->port, "Port (default 8080; 0: any free port, see --port-file)");
  cmd->add_option("--port-file", opts->port_file, "Write the bound port to this file once listening");
  cmd->add_option("--workers", opts->workers, "Jobs run at once (default 2)")->check(CLI::Range(1, 64));
  cmd->add_option("--job-time-limit", opts->job_time_limit_s, "Seconds one run of a job may take (default 3600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-model-mb", opts->max_model_mb, "Largest model, uploaded or fetched, in MiB (default 1024)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--max-data-mb", opts->max_data_mb, "Largest calibration or validation upload in MiB (default 256)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--auth", opts->auth, "none (one local user; loopback --host only) or tokens (kiln token create)")
      ->check(CLI::IsMember({"none", "tokens"}));
  cmd->add_option("--fetch-allow", opts->fetch_allow, "CIDR,... a model URL may name besides public addresses (e.g. 10.1.0.0/16)");
  cmd->add_option("--test-stage-pause-ms", opts->test_stage_pause_ms, "Tests only: pause before each stage")
      ->group("")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([opts, &run] { run = [opts] { return run_serve(*opts); }; });
}

}  // namespace kiln::cli

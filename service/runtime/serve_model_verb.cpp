// kiln-runtime serve-model [--bundle DIR | --model F.kiln] [--port 8080] ...: serves the plan over
// HTTP with the KServe v2 / Triton JSON inference protocol, batching concurrent requests into
// runs of the plan's compiled batch. The pieces live in serve/: the protocol, the model's
// signature, the batcher, the router and the Beast server; this file wires them together.
// --device cuda runs the plan on an NVIDIA GPU (libkiln_cuda.so), as `kiln-runtime run` does.
#include <cctype>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "containers/bundle/selftest.h"
#include "kernels/device/plan_runner.h"
#include "kernels/plan_file.h"
#include "service/cli/device_options.h"
#include "service/runtime/serve/batcher.h"
#include "service/runtime/serve/http_server.h"
#include "service/runtime/serve/model_signature.h"
#include "service/runtime/serve/v2_router.h"
#include "service/runtime/verbs.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;
using namespace kiln::serve;

constexpr int kIoThreads = 2;  // parse JSON and write responses; the engine runs on the batcher's worker

struct ServeOptions {
  std::string bundle;
  std::string model;
  std::string name;
  std::string host = "0.0.0.0";
  int port = 8080;
  std::string port_file;
  int threads = 0;
  int64_t max_batch = 0;
  double max_batch_delay_ms = 2;
  int64_t max_body_mb = 64;
  cli::DeviceCli device;
};

bool name_ok(const std::string& name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return name != "." && name != "..";
}

// The bundle's metadata.json names the model; URL-unsafe characters become '_'.
std::string bundle_model_name(const fs::path& bundle) {
  std::ifstream in(bundle / kBundleMetadataFile);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("model") || !doc["model"].is_object()) return "";
  const nlohmann::json& name = doc["model"].value("name", nlohmann::json());
  if (!name.is_string()) return "";
  std::string s = name.get<std::string>();
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return name_ok(s) ? s : "";
}

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

int run_serve(const ServeOptions& opts) {
  const bool from_bundle = opts.model.empty();
  const fs::path model_path = from_bundle ? fs::path(opts.bundle) / kBundleModelFile : fs::path(opts.model);
  std::string name = opts.name;
  if (!name.empty() && !name_ok(name))
    return report_error("--name '" + name + "' must be 1-256 letters, digits, '-', '_' or '.'");
  if (name.empty() && from_bundle) name = bundle_model_name(opts.bundle);
  if (name.empty()) name = name_ok(model_path.stem().string()) ? model_path.stem().string() : "model";
  if (opts.max_batch_delay_ms < 0 || opts.max_batch_delay_ms > 60000)
    return report_error("--max-batch-delay-ms must be between 0 and 60000");
  if (opts.max_body_mb < 1 || opts.max_body_mb > 4096) return report_error("--max-body-mb must be between 1 and 4096");
  if (opts.port < 0 || opts.port > 65535) return report_error("--port must be between 0 and 65535");

  auto loaded = plan_read_file(model_path.string());
  if (!loaded) return report_error(loaded.error().message);
  const Plan& plan = loaded->plan;
  auto signature = model_signature_of(plan);
  if (!signature) return report_error(signature.error().message + " (" + model_path.string() + ")");
  const int64_t batch = signature->batch;
  if (opts.max_batch > 0 && batch == 0 && opts.max_batch > 1)
    return report_error("--max-batch: " + model_path.string() +
                        " cannot batch (its inputs and outputs do not share a leading batch dim); requests run one at a time");
  if (batch > 0 && opts.max_batch > batch)
    return report_error("--max-batch " + std::to_string(opts.max_batch) + " exceeds the plan's batch " + std::to_string(batch) +
                        " (compile with kiln compile --batch " + std::to_string(opts.max_batch) + ")");
  if (const std::string note = opts.device.recorded_keep_note(loaded->info); !note.empty()) std::printf("note: %s\n", note.c_str());
  auto engine = PlanRunner::create(plan, opts.device.runner_options(opts.threads, nullptr, &loaded->info));
  if (!engine) return report_error(engine.error().message);

  BatcherOptions batching;
  batching.batch = batch;
  batching.max_batch = opts.max_batch > 0 ? opts.max_batch : batch;
  batching.max_delay = std::chrono::microseconds(static_cast<int64_t>(opts.max_batch_delay_ms * 1000.0));
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  for (const TensorSpec& s : signature->inputs) {
    dtypes.push_back(s.dtype);
    shapes.push_back(s.shape);
  }
  PlanRunner& eng = **engine;  // used on the batcher's worker thread only
  Batcher batcher(batching, std::move(dtypes), std::move(shapes),
                  [&eng](const std::vector<Tensor>& inputs) { return eng.run(inputs); });

  HttpServerOptions http;
  http.host = opts.host;
  http.port = static_cast<uint16_t>(opts.port);
  http.max_body_bytes = static_cast<uint64_t>(opts.max_body_mb) << 20;
  std::unique_ptr<V2Router> router;
  auto server = HttpServer::create(http, [&router](const HttpRequest& req, ReplyFn reply) { router->handle(req, std::move(reply)); });
  if (!server) return report_error(server.error().message);
  HttpServer& srv = **server;
  router = std::make_unique<V2Router>(ServedModel{name, *signature, &batcher}, KILN_VERSION,
                                      [&srv](std::function<void()> task) { srv.post(std::move(task)); });
  if (!opts.port_file.empty()) {
    Status written = port_file_write(opts.port_file, srv.port());
    if (!written) return report_error(written.message());
  }
  srv.stop_on_signals([&router](int signal) {
    router->set_ready(false);
    std::printf("kiln-runtime serve-model: %s: finishing requests in flight, then exiting\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(stdout);
  });
  const BatcherOptions& used = batcher.options();
  std::printf("kiln-runtime serve-model: model '%s' on http://%s:%u/v2/models/%s (", name.c_str(), opts.host.c_str(),
              static_cast<unsigned>(srv.port()), name.c_str());
  if (batch > 0)
    std::printf("batch %lld, max batch %lld, max delay %g ms", static_cast<long long>(batch), static_cast<long long>(used.max_batch),
                opts.max_batch_delay_ms);
  else
    std::printf("no batching: the inputs and outputs do not share a leading batch dim");
  std::printf(", %d engine threads)\n", eng.threads());
  std::fflush(stdout);

  srv.run(kIoThreads);
  batcher.stop();
  const BatcherStats stats = batcher.stats();
  std::printf("kiln-runtime serve-model: stopped after %llu requests (%llu samples in %llu engine runs, %llu failed)\n",
              static_cast<unsigned long long>(stats.requests), static_cast<unsigned long long>(stats.inference_count),
              static_cast<unsigned long long>(stats.execution_count), static_cast<unsigned long long>(stats.failed));
  return kExitOk;
}

}  // namespace

void add_serve_model_verb(CLI::App& app, VerbRunner& run) {
  auto opts = std::make_shared<ServeOptions>();
  opts->bundle = env_bundle();
  opts->threads = env_threads();
  CLI::App* cmd = app.add_subcommand("serve-model", "Serve the plan over HTTP (KServe v2 / Triton JSON protocol) with dynamic batching");
  auto* bundle = cmd->add_option("--bundle", opts->bundle, "Bundle folder holding model/ and metadata.json (default: $KILN_BUNDLE or /kiln)");
  cmd->add_option("--model", opts->model, "A compiled plan (.kiln) instead of a bundle")->excludes(bundle);
  cmd->add_option("--name", opts->name, "Model name in the URLs (default: the bundle's model name, else the file name)");
  cmd->add_option("--host", opts->host, "Address to listen on (default 0.0.0.0)");
  cmd->add_option("--port", opts->port, "Port (default 8080; 0: any free port)");
  cmd->add_option("--port-file", opts->port_file, "Write the bound port to this file once listening");
  cmd->add_option("--threads", opts->threads, "Engine threads (default: $KILN_THREADS, else the CPU quota)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-batch", opts->max_batch, "Samples per engine run, at most the plan's batch (default: the plan's batch)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-batch-delay-ms", opts->max_batch_delay_ms,
                  "How long the first queued request waits for others to fill a batch (default 2)");
  cmd->add_option("--max-body-mb", opts->max_body_mb, "Largest request body in MiB; larger ones get 413 (default 64)");
  opts->device.add_to(*cmd, /*with_device_index=*/true, kDeviceEnv, kCudaPrecisionEnv);
  cmd->callback([opts, &run] { run = [opts] { return run_serve(*opts); }; });
}

}  // namespace kiln::runtime

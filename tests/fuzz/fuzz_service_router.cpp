// libFuzzer target: an HTTP request to `kiln serve` fed through its router without a socket
// (service_router.h: auth, jobs, targets, benchmarks, plan, metrics), as Beast hands it over:
// the input's first line is "METHOD TARGET", then "name: value" header lines up to an empty
// line, then the body. The service runs with --auth none on a temporary data directory, its job
// runner never started (accepted jobs stay queued). Every answer must be an HTTP status with a
// body; any crash, sanitizer report or uncaught exception is a bug.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "service/server/service_router.h"

namespace {

namespace fs = std::filesystem;
using namespace kiln;

struct Service {
  fs::path dir = fs::temp_directory_path() / ("kiln-fuzz-service-" + jobs::job_id_new());
  std::unique_ptr<jobs::JobStore> store;
  std::unique_ptr<jobs::JobRunner> runner;
  std::unique_ptr<server::JobsRouter> jobs_router;
  std::unique_ptr<server::TargetsRouter> targets;
  std::unique_ptr<server::BenchmarksRouter> benchmarks;
  std::unique_ptr<server::PlanRouter> plan;
  std::unique_ptr<server::ServiceRouter> router;

  Service() {
    fs::create_directories(dir);
    auto opened = jobs::JobStore::open((dir / "jobs.db").string());
    if (!opened) __builtin_trap();
    store = std::move(*opened);
    runner = std::make_unique<jobs::JobRunner>(*store, jobs::JobRunnerOptions{dir.string()});
    jobs_router = std::make_unique<server::JobsRouter>(*store, *runner, dir.string());
    targets = std::make_unique<server::TargetsRouter>(*store, 1 << 20);
    auto bench = server::BenchmarksRouter::open((dir / "benchmarks.sqlite").string(), 1 << 20);
    if (!bench) __builtin_trap();
    benchmarks = std::move(*bench);
    plan = std::make_unique<server::PlanRouter>(*store, dir.string(), server::PlanRouterLimits{1 << 20, 1 << 20});
    router = std::make_unique<server::ServiceRouter>(*store, *jobs_router, *targets, benchmarks.get(), server::AuthMode::none,
                                                     plan.get());
  }
  ~Service() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string_view next_line(std::string_view& rest) {
  const size_t eol = rest.find('\n');
  const std::string_view line = rest.substr(0, eol);
  rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
  return line.ends_with('\r') ? line.substr(0, line.size() - 1) : line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Service service;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  serve::HttpRequest request;
  const std::string_view start = next_line(rest);
  const size_t space = start.find(' ');
  request.method = std::string(start.substr(0, space));
  request.target = space == std::string_view::npos ? "/" : std::string(start.substr(space + 1));
  while (!rest.empty()) {
    const std::string_view line = next_line(rest);
    if (line.empty()) break;
    const size_t colon = line.find(':');
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    while (value.starts_with(' ')) value.remove_prefix(1);
    request.headers.emplace_back(std::move(name), std::string(value));
  }
  request.body = std::string(rest);
  const serve::HttpResponse response = service.router->handle(request);
  if (response.status < 100 || response.status > 599) __builtin_trap();
  return 0;
}

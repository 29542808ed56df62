#include "service/server/service_router.h"

#include <chrono>

#include "service/server/api_error.h"

namespace kiln::server {
namespace {

// Methods as a metrics label: the ones the API knows, the rest as "other" (bounded labels).
std::string method_label(const std::string& method) {
  for (const char* m : {"GET", "HEAD", "POST", "PUT", "DELETE"})
    if (method == m) return method;
  return "other";
}

}  // namespace

ServiceRouter::ServiceRouter(jobs::JobStore& store, JobsRouter& jobs, TargetsRouter& targets, BenchmarksRouter* benchmarks,
                             AuthMode mode, const PlanRouter* plan)
    : store_(store), jobs_(jobs), targets_(targets), benchmarks_(benchmarks), mode_(mode), plan_(plan) {}

serve::HttpResponse ServiceRouter::handle(const serve::HttpRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  const std::string path = request.target.substr(0, request.target.find('?'));
  serve::HttpResponse response = dispatch(request, path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.record(method_label(request.method), route_label(path), response.status, seconds);
  return response;
}

serve::HttpResponse ServiceRouter::dispatch(const serve::HttpRequest& request, const std::string& path) {
  auto who = auth_authenticate(store_, mode_, request);
  if (auto* denied = std::get_if<serve::HttpResponse>(&who)) return std::move(*denied);
  const Caller& caller = std::get<Caller>(who);
  if (path == "/v1/targets" || path.rfind("/v1/targets/", 0) == 0) return targets_.handle(request, path);
  if (path == "/v1/plan") {
    if (!plan_) return api_error(404, "not_found", "this server does not plan");
    return plan_->handle(request);
  }
  if (path == "/v1/benchmarks") {
    if (!benchmarks_) return api_error(404, "not_found", "this server has no benchmark store");
    return benchmarks_->handle(request);
  }
  serve::HttpResponse response = jobs_.handle(request, caller);
  if (path == "/metrics" && response.status == 200) {
    response.body += metrics_.text();
    if (auto durations = store_.stage_durations()) response.body += stage_duration_text(*durations);
  }
  return response;
}

}  // namespace kiln::server

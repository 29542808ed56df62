#include "service/server/request_metrics.h"

#include <sstream>

namespace kiln::server {
namespace {

// Bounds for stage durations: stages run from under a second (validate) to an hour (compile of a large model).
constexpr std::array<double, 9> kStageBounds = {0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800};

std::string bound_text(double b) {
  std::ostringstream s;
  s << b;
  return s.str();
}

}  // namespace

std::string route_label(const std::string& path) {
  if (path == "/healthz" || path == "/readyz" || path == "/metrics" || path == "/" || path == "/v1/jobs" ||
      path == "/v1/targets" || path == "/v1/benchmarks" || path == "/v1/plan")
    return path;
  if (path.rfind("/v1/targets/", 0) == 0) return "/v1/targets/{name}";
  const std::string jobs = "/v1/jobs/";
  if (path.rfind(jobs, 0) == 0) {
    const size_t slash = path.find('/', jobs.size());
    if (slash == std::string::npos) return "/v1/jobs/{id}";
    const std::string sub = path.substr(slash + 1);
    if (sub == "events" || sub == "report" || sub == "artifacts") return "/v1/jobs/{id}/" + sub;
    if (sub.rfind("artifacts/", 0) == 0) return "/v1/jobs/{id}/artifacts/{name}";
  }
  return "other";
}

void RequestMetrics::record(const std::string& method, const std::string& route, int status, double seconds) {
  std::lock_guard lock(mu_);
  ++requests_[{method, route, status}];
  Histogram& h = latency_[route];
  for (size_t i = 0; i < kLatencyBounds.size(); ++i)
    if (seconds <= kLatencyBounds[i]) {
      ++h.buckets[i];
      break;
    }
  ++h.count;
  h.sum += seconds;
}

std::string RequestMetrics::text() const {
  std::lock_guard lock(mu_);
  std::ostringstream out;
  out << "# HELP kiln_http_requests_total HTTP requests by method, route and status.\n"
         "# TYPE kiln_http_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out << "kiln_http_requests_total{method=\"" << std::get<0>(key) << "\",route=\"" << std::get<1>(key) << "\",status=\""
        << std::get<2>(key) << "\"} " << n << '\n';
  out << "# HELP kiln_http_request_duration_seconds Time to answer a request (to the first byte of a stream).\n"
         "# TYPE kiln_http_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kLatencyBounds.size(); ++i) {
      cumulative += h.buckets[i];
      out << "kiln_http_request_duration_seconds_bucket{route=\"" << route << "\",le=\"" << bound_text(kLatencyBounds[i])
          << "\"} " << cumulative << '\n';
    }
    out << "kiln_http_request_duration_seconds_bucket{route=\"" << route << "\",le=\"+Inf\"} " << h.count << '\n';
    out << "kiln_http_request_duration_seconds_sum{route=\"" << route << "\"} " << h.sum << '\n';
    out << "kiln_http_request_duration_seconds_count{route=\"" << route << "\"} " << h.count << '\n';
  }
  return out.str();
}

std::string stage_duration_text(const std::vector<std::pair<std::string, double>>& durations) {
  struct Histogram {
    std::array<uint64_t, kStageBounds.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };
  std::map<std::string, Histogram> by_stage;
  for (const auto& [stage, seconds] : durations) {
    Histogram& h = by_stage[stage];
    for (size_t i = 0; i < kStageBounds.size(); ++i)
      if (seconds <= kStageBounds[i]) ++h.buckets[i];  // cumulative already
    ++h.count;
    h.sum += seconds;
  }
  std::ostringstream out;
  out << "# HELP kiln_stage_duration_seconds Duration of the stages that finished done, by stage.\n"
         "# TYPE kiln_stage_duration_seconds histogram\n";
  for (const auto& [stage, h] : by_stage) {
    for (size_t i = 0; i < kStageBounds.size(); ++i)
      out << "kiln_stage_duration_seconds_bucket{stage=\"" << stage << "\",le=\"" << bound_text(kStageBounds[i]) << "\"} "
          << h.buckets[i] << '\n';
    out << "kiln_stage_duration_seconds_bucket{stage=\"" << stage << "\",le=\"+Inf\"} " << h.count << '\n';
    out << "kiln_stage_duration_seconds_sum{stage=\"" << stage << "\"} " << h.sum << '\n';
    out << "kiln_stage_duration_seconds_count{stage=\"" << stage << "\"} " << h.count << '\n';
  }
  return out.str();
}

}  // namespace kiln::server

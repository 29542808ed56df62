// The service's request metrics in Prometheus text format: requests by method, route and status
// (a counter), request latency by route (a histogram), and stage durations by stage (a histogram
// over the finished stages in the job store). Routes are the contract's path templates
// (/v1/jobs/{id}), so the label set stays bounded whatever clients send.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace kiln::server {

// The openapi path template a request path falls under ("other" when none).
std::string route_label(const std::string& path);

class RequestMetrics {
 public:
  void record(const std::string& method, const std::string& route, int status, double seconds);
  std::string text() const;

 private:
  static constexpr std::array<double, 10> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};
  struct Histogram {
    std::array<uint64_t, kLatencyBounds.size()> buckets{};  // cumulative when printed
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;  // method, route, status
  std::map<std::string, Histogram> latency_;                                 // by route
};

// Prometheus histogram of stage durations (seconds), by stage name.
std::string stage_duration_text(const std::vector<std::pair<std::string, double>>& durations);

}  // namespace kiln::server

#include "perfmodel/microbench/timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace kiln::perf {

double nearest_rank(const std::vector<double>& sorted, double p) {
  const size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

Timing time_repeated(const std::function<double()>& fn, const TimingOptions& options) {
  for (int i = 0; i < options.warmup; ++i)
    if (fn() < 0) return {};
  std::vector<double> ms;
  double spent = 0;
  while (static_cast<int>(ms.size()) < options.max_runs &&
         (static_cast<int>(ms.size()) < options.min_runs || spent < options.budget_ms)) {
    const auto start = std::chrono::steady_clock::now();
    const double t = fn();
    spent += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (t < 0) return {};
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return {nearest_rank(ms, 0.5), nearest_rank(ms, 0.1), nearest_rank(ms, 0.9), static_cast<int>(ms.size()), nearest_rank(ms, 0.99)};
}

Timing time_call(const std::function<void()>& fn, const TimingOptions& options) {
  return time_repeated(
      [&] {
        const auto start = std::chrono::steady_clock::now();
        fn();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      },
      options);
}

}  // namespace kiln::perf

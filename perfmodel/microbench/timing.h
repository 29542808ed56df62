// Timing one benchmark point on a shared, noisy machine: warm-up runs, then timed runs until
// both a minimum count and a time budget are reached (or a maximum count), summarised as the
// median with p10/p90 so the noise is visible next to the number.
#pragma once

#include <functional>
#include <vector>

namespace kiln::perf {

struct TimingOptions {
  int warmup = 2;
  int min_runs = 5;
  int max_runs = 200;
  double budget_ms = 200;  // stop once min_runs are done and this much time was spent timing
};

struct Timing {
  double median_ms = 0;
  double p10_ms = 0;
  double p90_ms = 0;
  int runs = 0;
  double p99_ms = 0;  // with few runs, the slowest of them
};

// Nearest-rank percentile (p in [0, 1]) of sorted, non-empty times.
double nearest_rank(const std::vector<double>& sorted, double p);

// Times `fn`, which returns its own duration in milliseconds (so a caller can time one step of
// a larger run); a negative return aborts with runs == 0.
Timing time_repeated(const std::function<double()>& fn, const TimingOptions& options);

// Times the whole call of `fn`.
Timing time_call(const std::function<void()>& fn, const TimingOptions& options);

}  // namespace kiln::perf

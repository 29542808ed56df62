// Timing a compiled plan the way a candidate configuration deploys it: `instances` engines side
// by side on the node, each on `threads` threads, each fed one batch of seeded random inputs.
// One engine alone measures a 2-instance candidate as if its neighbour did not exist (shared
// caches and memory bandwidth, or SMT siblings), so kiln optimize and the decision-quality bench
// both time candidates through here.
#pragma once

#include "kernels/core/status.h"
#include "kernels/plan.h"
#include "perfmodel/microbench/timing.h"

namespace kiln::perf {

// The latency of one batch over the runs of all instances. Every instance keeps running (untimed)
// until the last one has its runs, so no instance is timed alone. With one instance the engine
// runs on the calling thread, as `kiln bench` runs it: a multi-threaded engine driven from a second
// std::thread measured up to 0.25 ms more per run here (an OpenMP effect of the driving thread).
Result<Timing> time_deployed(const Plan& plan, int threads, int instances, const TimingOptions& options);

// How kiln optimize times a candidate: 3 warm-up runs, then at least `runs` timed runs and on
// until 500 ms are spent (at most 5 x `runs`), so sub-millisecond models get enough runs.
inline TimingOptions candidate_timing_options(int runs) {
  TimingOptions options;
  options.warmup = 3;
  options.min_runs = runs;
  options.max_runs = runs * 5;
  options.budget_ms = 500;
  return options;
}

// Samples per second over the node for `instances` instances each running batches of `batch`.
inline double deployed_throughput(const Timing& t, int64_t batch, int instances) {
  return t.median_ms > 0 ? static_cast<double>(batch) * instances * 1000.0 / t.median_ms : 0.0;
}

}  // namespace kiln::perf

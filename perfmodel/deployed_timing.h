// Timing a compiled plan the way a candidate configuration deploys it: `instances` engines side
// by side on the node, each on `threads` threads, each fed one batch of seeded random inputs.
// One engine alone measures a 2-instance candidate as if its neighbour did not exist (shared
// caches and memory bandwidth, or SMT siblings), so kiln optimize and the decision-quality bench
// both time candidates through here.
#pragma once

#include <functional>
#include <vector>

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

// One candidate as it deploys, for timing in rounds beside others.
struct DeployedRun {
  const Plan* plan = nullptr;
  int threads = 1;
  int instances = 1;
};

// Rounds kiln optimize times its candidates in. On the 2-vCPU VMs a slow spell lasts minutes and
// slows everything 1.2-3x: timed back to back, the candidate it falls on loses by it (kiln optimize
// on a Zen 3 VM, 2026-12-02: Fashion-MNIST b4 measured over b16, 11.5% regret). Timed in rounds, a
// spell falls on one round of several candidates alike, and the median of three rounds drops it.
inline constexpr int kCandidateRounds = 3;

// Times every run once per round, round after round (a, b, c, a, b, c, ...): round 1 with `first`,
// the later ones with `later` (fewer warm-up runs: the plan's weights are packed again, the caches
// are not cold to the same extent). Engines are created anew each round, so memory holds one
// candidate's engines at a time. `hooks.on_timed` (optional) sees each round's timing as it is taken.
// Returns each run's rounds combined (combine_rounds), in the order given.
// `before` (optional) runs just before each timing (kiln optimize waits there for the host to stop
// slowing threads down).
struct RoundHooks {
  std::function<void(int round, size_t index)> before;
  std::function<void(int round, size_t index, const Timing&)> on_timed;
};
Result<std::vector<Timing>> time_deployed_in_rounds(const std::vector<DeployedRun>& runs, int rounds, const TimingOptions& first,
                                                    const TimingOptions& later, const RoundHooks& hooks = {});

// One timing from several rounds of the same configuration: the median of the rounds' medians (the
// mean of the middle two for an even count), likewise p10 and p90; p99 the highest round's (the
// constraint's worst case); runs summed. Empty input: a Timing with runs == 0.
Timing combine_rounds(const std::vector<Timing>& rounds);

// kiln optimize's timing split over `rounds`: each round at least ceil(runs / rounds) runs and on
// until its share of the 500 ms is spent (at most 5x), round 1 with 3 warm-up runs, later ones 1.
struct RoundOptions {
  TimingOptions first, later;
};
RoundOptions candidate_round_options(int runs, int rounds);

// Samples per second over the node for `instances` instances each running batches of `batch`.
inline double deployed_throughput(const Timing& t, int64_t batch, int instances) {
  return t.median_ms > 0 ? static_cast<double>(batch) * instances * 1000.0 / t.median_ms : 0.0;
}

}  // namespace kiln::perf

// The machine's pace now against when it was profiled, from a few of the profile's own sweep points
// re-timed. A shared VM's speed moves by more than the +-10% a prediction is judged by, within
// hours: on the Zen 5 VM of 2026-12-07 the same profile's canaries read x0.97-1.07 at 17:00 and
// x0.92 (compute) / x0.73 (data movement) at 19:00, and whole-model times followed. Scaling a
// prediction by the compute canary (kiln predict --calibrate) prices the machine as it runs now;
// the canaries are sweep points, never a model being predicted.
#pragma once

#include <map>
#include <vector>

#include "perfmodel/microbench/bench_point.h"
#include "perfmodel/predictor.h"
#include "perfmodel/target_profile.h"

namespace kiln::perf {

// One thread count's canaries: per dtype, the grid's first conv the profile stored quiet at 0.5-5
// ms (long enough to time in a few runs, short enough to take a second in all); an Add and a
// Concat of 0.02-2 ms for data movement.
struct PaceCanaries {
  std::vector<BenchPoint> points;
  std::vector<double> stored_ms;
  std::vector<bool> memory;  // an Add/Concat point
};

// Time now over stored time, geometric mean per kind (1.00: as profiled; 0.9: 10% faster now);
// 0 where no canary of the kind was stored or none ran.
struct MachinePace {
  double compute = 0, memory = 0;
  int compute_points = 0, memory_points = 0;
};

// Canaries per thread count in `threads` that has any (a profile measured at other thread counts,
// or whose points there were all measured under load, has none there).
std::map<int, PaceCanaries> pace_canaries(const TargetProfile& profile, const std::vector<int>& threads);

// Runs each canary once, as the sweep times it (about a second for six points).
MachinePace pace_measure(PaceCanaries& canaries);

// `p` at the measured pace: every step times the compute reading. Scaling the data-movement steps
// by the memory canary instead did worse: rescoring the 2026-12-07 evaluation (162 cases, three
// passes) gave 103-120 within +-10% with both readings against 135-137 with the compute reading
// alone (119-131 uncalibrated); the short Add/Concat canaries swing x0.7-2.5 with the host's
// two-vCPU modes. Unchanged when the compute reading is 0.
PlanPrediction pace_calibrated(const PlanPrediction& p, const MachinePace& pace);

}  // namespace kiln::perf

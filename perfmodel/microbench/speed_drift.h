// Whether the machine's own speed moved while `kiln bench-target` ran: the f32 matmul peak is timed
// at each thread count before the first point and again after the last. A profile is one snapshot
// of the machine's speed, and on a shared VM that speed moves: two quiet sweeps 15 minutes apart on
// a 2-vCPU AVX2 EPYC differed by 15-25% in every kernel group (f32 peak 76 vs 86 GFLOP/s at one
// thread), which no fit can tell from the shapes' own costs. The run reports the change; it does
// not correct the points.
#pragma once

#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/bench_point.h"

namespace kiln::perf {

// A change above this share (either way) is reported as the machine having moved.
inline constexpr double kSpeedDriftWarn = 0.10;

struct SpeedReading {
  int threads = 0;
  double gflops = 0;
  bool loaded = false;  // other work took CPUs while it was timed (ForeignLoadMeter, kLoadSlack)
};

struct SpeedDrift {
  int threads = 0;
  double start_gflops = 0, end_gflops = 0;
  bool loaded = false;  // either reading was taken under load: the change may be the load's
  double change() const { return start_gflops > 0 ? end_gflops / start_gflops - 1 : 0; }
  bool moved() const { return change() > kSpeedDriftWarn || change() < -kSpeedDriftWarn; }
};

// Times the f32 matmul peak (peak_points' quick f32 points: 512^3) at each of plan.threads.
Result<std::vector<SpeedReading>> speed_probe(const TargetFingerprint& fp, const BenchPlanOptions& plan);

// Pairs the readings by thread count (readings missing at either end are left out).
std::vector<SpeedDrift> speed_drift(const std::vector<SpeedReading>& start, const std::vector<SpeedReading>& end);

// "f32 peak at 1 thread 76.1 -> 86.0 GFLOP/s (+13%)", with "(under load)" where it applies (the
// quick 512^3 peak: a little below the stored 1024^3 one).
std::string speed_drift_text(const SpeedDrift& d);

}  // namespace kiln::perf

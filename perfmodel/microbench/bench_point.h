// One point of a benchmark plan: its record with the identity and shape features filled in
// (known before measuring, so a stored point is skipped without running anything) and the
// function that measures it and fills in the rest.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "perfmodel/measurement.h"
#include "perfmodel/microbench/timing.h"

namespace kiln::perf {

struct BenchPoint {
  Measurement record;  // kind, key, op, dtype, threads and shape features set
  std::function<Status(Measurement&)> measure;
};

struct BenchPlanOptions {
  bool quick = false;          // a small grid for tests: seconds, not minutes
  std::vector<int> threads;    // thread counts to measure at
  TimingOptions timing;        // per point
};

}  // namespace kiln::perf

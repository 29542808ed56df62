// Peak throughput per dtype: a oneDNN matmul on a compute-bound square shape (f32, bf16 in
// bf16 x bf16 -> f32, int8 as u8 x s8 -> s32), at each thread count. Only dtypes the CPU has a
// native dot product for are measured; the others come back as skipped, with the reason.
#pragma once

#include <vector>

#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/bench_point.h"
#include "perfmodel/store.h"

namespace kiln::perf {

std::vector<BenchPoint> peak_points(const TargetFingerprint& fp, const BenchPlanOptions& options,
                                    std::vector<SkippedBenchmark>* skipped);

}  // namespace kiln::perf

// Memory bandwidth by working-set size: each thread streams through its share of one buffer,
// repeatedly, so small sets measure the cache that holds them and large ones DRAM. Sizes run from
// 16 KiB to 1 GiB, bounded by a quarter of the machine's memory.
#pragma once

#include <vector>

#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/bench_point.h"

namespace kiln::perf {

std::vector<int64_t> bandwidth_working_sets(const TargetFingerprint& fp, bool quick);

std::vector<BenchPoint> bandwidth_points(const TargetFingerprint& fp, const BenchPlanOptions& options);

}  // namespace kiln::perf

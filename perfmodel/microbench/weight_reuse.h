// How much a layer pays for weights that the rest of the model pushed out of the caches. The
// kernel sweep repeats one op, so its weights stay cached; in a model every other layer's weights
// pass through the caches between two reads of one layer's. These points time a weight-heavy
// conv (512->512 3x3 at 7x7, batch 1: 9.4 MB in float32, 49 MACs per weight) per copy among
// `copies` side by side, each with weights of its own, for stored weight sets from one copy to
// 256 MiB. Measured on a 480-MiB-L3 Xeon: 1.45 ms alone and with 19 MB of weights, 1.59 at 38 MB,
// 1.89 at 75 MB, 1.95 at 151 MB, while the streaming read table stays at L3 speed up to 64 MiB.
#pragma once

#include <vector>

#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/bench_point.h"
#include "perfmodel/microbench/sweep_grid.h"
#include "perfmodel/store.h"

namespace kiln::perf {

// The conv the points time (copies 1); `quick`: a small one for tests.
SweepShape weight_reuse_shape(bool quick);

// Stored bytes of a conv's weights and bias in `dtype` (f32 4, bf16 2, int8 1 byte a weight; the
// bias float32): of the points' shape, or of a weight_reuse record's shape fields (the predictor).
double weight_reuse_copy_bytes(const SweepShape& shape, const std::string& dtype);
double weight_reuse_copy_bytes(const Measurement& record);

// The copy counts for a dtype: 1, then the counts that make the stored weights 16, 32, 64, 128 and
// 256 MiB (quick: 1 and 4), none past an eighth of the machine's memory.
std::vector<int64_t> weight_reuse_copies(const TargetFingerprint& fp, const SweepShape& shape, const std::string& dtype,
                                         bool quick);

// Every (dtype, threads, copies) point for the dtypes this CPU runs natively (kind weight_reuse).
std::vector<BenchPoint> weight_reuse_points(const TargetFingerprint& fp, const BenchPlanOptions& options);

}  // namespace kiln::perf

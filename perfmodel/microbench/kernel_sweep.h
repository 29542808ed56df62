// The kernel sweep: each grid shape (sweep_grid.h) becomes a one-op graph built in-process
// (Conv + bias + ReLU, depthwise Conv + bias + ReLU, Gemm + bias, MaxPool, AveragePool,
// GlobalAveragePool, Add), compiled with kiln's own pipeline for the dtype (f32: the default
// pipeline; bf16: default+mixed_precision_bf16; int8: default+quantize_int8 calibrated on random
// data) and timed on the compiled Engine. The record's latency is the op's own step (what it
// costs inside a region of its precision); total_median_ms is the whole graph including the
// conversions at its borders.
#pragma once

#include <vector>

#include "compilers/ir/graph.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/bench_point.h"
#include "perfmodel/microbench/sweep_grid.h"
#include "perfmodel/store.h"

namespace kiln::perf {

// The one-op float32 graph of a shape, with deterministic random weights.
Graph sweep_graph(const SweepShape& shape);

// The pipeline a sweep dtype compiles with ("f32", "bf16", "int8").
std::vector<std::string> sweep_pipeline(const std::string& dtype);

// Every (shape, dtype, threads) point of the grid that this CPU runs natively; dtypes it lacks are
// reported as skipped.
std::vector<BenchPoint> sweep_points(const TargetFingerprint& fp, const BenchPlanOptions& options,
                                     std::vector<SkippedBenchmark>* skipped);

}  // namespace kiln::perf

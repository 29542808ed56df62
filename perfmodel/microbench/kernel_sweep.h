// The kernel sweep: each grid shape (sweep_grid.h) becomes a one-op graph built in-process
// (Conv + bias + ReLU, depthwise Conv + bias + ReLU, Gemm + bias, MaxPool, AveragePool,
// GlobalAveragePool, Add), compiled with kiln's own pipeline for the dtype (f32: the default
// pipeline; bf16: default+mixed_precision_bf16; int8: default+quantize_int8 calibrated on random
// data; all without fuse_depth_first) and timed on the compiled Engine. Convolutions and pooling
// read their input from a cheap depthwise "producer" conv in the same precision, so they see the
// layout a previous layer leaves. The record's latency is the op's own step (what it costs inside
// a region of its precision); total_median_ms is the whole graph: producer, op and the
// conversions to plain at its border.
#pragma once

#include <vector>

#include "compilers/ir/graph.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/bench_point.h"
#include "perfmodel/microbench/sweep_grid.h"
#include "perfmodel/store.h"

namespace kiln::perf {

// The float32 graph of a shape (producer + op), with deterministic random weights.
Graph sweep_graph(const SweepShape& shape);

// The pipeline a sweep dtype compiles with ("f32", "bf16", "int8"), without fuse_depth_first.
std::vector<std::string> sweep_pipeline(const std::string& dtype);

// Every (shape, dtype, threads) point of the grid that this CPU runs natively; dtypes it lacks are
// reported as skipped.
std::vector<BenchPoint> sweep_points(const TargetFingerprint& fp, const BenchPlanOptions& options,
                                     std::vector<SkippedBenchmark>* skipped);

}  // namespace kiln::perf

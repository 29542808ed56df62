// The kernel sweep: each grid shape (sweep_grid.h) becomes a one-op graph built in-process
// (Conv + bias + ReLU, depthwise Conv + bias + ReLU, Gemm + bias (bf16/int8: a MatMul + bias reading a
// producer MatMul's rows), MaxPool read by a depthwise conv, AveragePool,
// GlobalAveragePool, Add), compiled with kiln's own pipeline for the dtype (f32: the default
// pipeline; bf16: default+mixed_precision_bf16; int8: default+quantize_int8 calibrated on random
// data; all without fuse_depth_first) and timed on the compiled Engine. Convolutions and pooling
// read their input from a cheap depthwise "producer" conv in the same precision, so they see the
// layout a previous layer leaves. The record's latency is the op's own step (what it costs inside
// a region of its precision); total_median_ms is the whole graph: producer, op and the
// conversions to plain at its border.
#pragma once

#include <array>
#include <vector>

#include "compilers/ir/graph.h"
#include "kernels/engine.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/bench_point.h"
#include "perfmodel/microbench/sweep_grid.h"
#include "perfmodel/store.h"

namespace kiln::perf {

// The float32 graph of a shape (producer + op), with deterministic random weights.
Graph sweep_graph(const SweepShape& shape);

// The producers' node names start with this ("producer", "producer_b").
inline constexpr const char* kSweepProducerNode = "producer";
// The columns of a rows_input gemm's producer MatMul ([M, this] x [this, K]): a sixth or less of the op's
// MACs at the narrowest N the sweep times.
inline constexpr int64_t kRowsProducerWidth = 16;
// The node that reads a max pool's output (a depthwise conv) or a rows_input gemm's (a narrow MatMul), so
// that the op runs and writes as in a model.
inline constexpr const char* kSweepReaderNode = "reader";

// The steps a point's latency counts: the op's own, neither its producers, its reader nor the engine's
// conversions to plain.
bool sweep_is_op_step(const EngineStep& step);

// Uniform float32 values in [lo, hi) from a fixed-seed LCG: cheap for multi-million-element tensors.
Tensor sweep_random_tensor(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// Whether the shape's op reads its producer's output behind a ReLU: u8 in int8 (every conv and
// depthwise conv point but those reading float32 or signed_input). Their int8 records are keyed
// with kUnsignedInputKeyPrefix, so that points measured on s8 before are told apart.
bool sweep_reads_u8(const SweepShape& shape);

// A point's record before it is measured: kind kernel, op, key, dtype, threads, batch, the shape
// fields, MACs and bytes (activations and weights at `element_bytes` each).
Measurement sweep_record(const SweepShape& shape, const std::string& dtype, int threads, double element_bytes);

// The dtypes a CPU sweep times each shape at (where the CPU runs them natively), as its records name them.
inline constexpr std::array<const char*, 3> kSweepDtypes = {"f32", "bf16", "int8"};

// The pipeline a sweep dtype compiles with ("f32", "bf16", "int8"), without fuse_depth_first.
std::vector<std::string> sweep_pipeline(const std::string& dtype);

// One shape's point at a dtype and thread count, timed as the sweep times it.
BenchPoint sweep_point(const SweepShape& shape, const std::string& dtype, int threads, const TimingOptions& timing);
// The shape as the sweep runs it in `dtype`: bf16/int8 interior gemms read a producer's rows (rows_input),
// int8 convs write codes for a reader (codes_out).
SweepShape sweep_as_run(const SweepShape& shape, const std::string& dtype);

// Every (shape, dtype, threads) point of the grid that this CPU runs natively; dtypes it lacks are
// reported as skipped.
std::vector<BenchPoint> sweep_points(const TargetFingerprint& fp, const BenchPlanOptions& options,
                                     std::vector<SkippedBenchmark>* skipped);

}  // namespace kiln::perf

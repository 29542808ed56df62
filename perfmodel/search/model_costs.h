// What one model costs on one target at one precision, independent of batch size and threads:
// its kernels' features at batch 1 (plan_features.h) and its memory. The planner scales them to
// every candidate (steps_at, memory_at) instead of compiling each one: compiling and building the
// Engine takes seconds for ResNet-50, predicting a candidate microseconds. Because the features
// depend only on the model, the precision, the kernels this target's ISA selects and kiln's
// version, they are cached on disk under that key, so a second plan of the same model compiles
// nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compilers/ir/graph.h"
#include "kernels/core/status.h"
#include "perfmodel/plan_features.h"
#include "perfmodel/precision_compile.h"

namespace kiln::perf {

struct ModelCosts {
  std::string precision;   // "fp32", "bf16", "int8"; kCudaPlan for the GPU's plan
  std::vector<StepFeatures> steps;  // at batch 1, threads 1
  int64_t constant_bytes = 0;  // the plan's constants (weights as imported)
  int64_t packed_bytes = 0;    // the kernels' own copies of their weights (sum of steps' weight_bytes)
  int64_t arena_bytes = 0;     // intermediates at batch 1
  int64_t scratch_bytes = 0;
  int64_t io_bytes = 0;        // the graph's inputs and outputs at batch 1 (what a GPU run copies to and from the host)
  double compile_ms = 0;       // what computing them took (0 when read from the cache)
  bool from_cache = false;
};

// Where the cache lives: kiln_cache_dir()/model-costs.
std::string model_costs_cache_dir();

// The cache file for a model digest (any stable content hash of the model file), a precision and
// the target fingerprint whose kernels were selected.
std::string model_costs_cache_path(const std::string& cache_dir, const std::string& model_digest,
                                   const std::string& precision, const std::string& fingerprint_id);

// Compiles `graph` (shape-inferred, every dimension bound, batch 1) for `precision` through
// precision_compile (kCudaPlan: the plan the CUDA engine runs, whose costs the GPU space scales),
// builds the Engine (not run) and records its features and memory.
// `kept`: layers the precision pass leaves in their fallback (accuracy control's choice).
Result<ModelCosts> model_costs_compute(Graph graph, const std::string& precision, const KeptLayers& kept = {});

// The cached costs, or an error (missing, unreadable, another kiln version: callers recompute).
Result<ModelCosts> model_costs_read(const std::string& path);
// Written atomically (temporary file + rename), so concurrent planners never read half a file.
Status model_costs_write(const ModelCosts& costs, const std::string& path);

// The steps of a candidate: MACs, activation bytes and batch scaled from batch 1 to `batch`
// (weights stay), every step's thread count set. Kernel choices are assumed not to change with
// batch or threads (the Engine picks oneDNN's blocked layouts at every batch here).
std::vector<StepFeatures> model_costs_steps_at(const ModelCosts& costs, int64_t batch, int threads);

// Peak memory of one running instance at `batch`: constants + packed weights + intermediates
// and scratch (both taken to grow linearly with the batch: an upper bound).
int64_t model_costs_memory_at(const ModelCosts& costs, int64_t batch);

}  // namespace kiln::perf

// Compiling a model for one precision the way the performance model assumes it runs: the default
// pipeline (fp32), default+mixed_precision_bf16 (bf16) or default+quantize_int8 calibrated on one
// seeded random sample (int8; the scales only need to be plausible for timing), as the kernel sweep
// compiles its one-op graphs but with every default pass (fuse_depth_first included). `kiln predict`
// and bench/perfmodel_eval compile through here, so a prediction and its measurement see one plan.
#pragma once

#include <string>
#include <vector>

#include "compilers/ir/graph.h"
#include "kernels/plan.h"

namespace kiln::perf {

// "fp32", "bf16", "int8" -> the sweep's dtype names "f32", "bf16", "int8"; empty when unknown.
std::string precision_dtype(const std::string& precision);

// Layers accuracy control kept out of the reduced precision, and what they run in instead:
// "fp32", or "bf16" for int8 (the pipeline then runs mixed_precision_bf16 before quantize_int8).
struct KeptLayers {
  std::vector<std::string> layers;
  std::string fallback = "fp32";
  bool in_bf16() const { return fallback == "bf16"; }
};

// The pipeline for a precision; an unknown precision is an error naming the known ones, and a
// bf16 fallback is one for int8 only.
Result<std::vector<std::string>> precision_pipeline(const std::string& precision, const std::string& fallback = "fp32");

// Runs the precision's pipeline on a shape-inferred graph with concrete shapes and lowers it.
// kCudaPlan compiles the plan kiln's CUDA engine runs instead (gpu_plan_compile).
// `kept`: layers the precision pass leaves in their fallback (what accuracy control kept).
Result<Plan> precision_compile(Graph graph, const std::string& precision, const KeptLayers& kept = {});

// The plan `kiln compile --device cuda` makes: the CUDA pipeline (cuda_pipeline(): no CPU-only
// fused ops) in float32. A GPU precision changes the storage width, not the plan, so GPU costs
// are this plan's steps at that width (steps_on_gpu). Pricing it instead of the CPU plan: 10 vs 7
// of 36 H100 runs within 10% (docs/perfmodel-next.md).
inline constexpr const char* kCudaPlan = "cuda";
Result<Plan> gpu_plan_compile(Graph graph);

}  // namespace kiln::perf

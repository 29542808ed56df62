// The one signature every graph pass has. A pass rewrites the graph in place and says whether
// it changed anything; the runner re-verifies and re-infers shapes after each pass, so a pass
// may rely on fresh types on entry and need not restore them.
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "compilers/ir/graph.h"
#include "compilers/quantize/calibrate.h"
#include "kernels/cpu/isa.h"

namespace kiln {

// What quantize_int8 needs beyond the graph: the user's calibration data and policy.
struct Int8Options {
  const CalibrationSet* calibration = nullptr;  // required by quantize_int8
  CalibrationOptions calibration_options;
  // Layers quantize_int8 leaves at the precision they have: bf16 when mixed_precision_bf16 ran
  // first (accuracy control's bf16 fallback), else fp32.
  std::vector<std::string> keep;
  // Calibrated ranges by value name, shared by repeated compiles of one model (accuracy control
  // recompiles with other layers kept in fp32; the fp32 statistics do not change).
  std::shared_ptr<std::map<std::string, TensorRange>> range_cache;
  // Every int8 layer writes int8 codes, whoever reads them (kiln's own plans quantize an output
  // only where every reader takes int8). The QDQ form ONNX Runtime and TensorRT fuse into
  // QLinearConv/QLinearMatMul: `kiln export --qdq-every-output`. One more rounding per layer.
  bool quantize_every_output = false;
};

// What the pruning passes remove. Pruning here is done without fine-tuning: reports must say so
// and show the accuracy it cost.
struct PruneOptions {
  double channel_ratio = 0.3;  // prune_channels: fraction of each prunable channel group removed
  double sparsity = 0.5;       // prune_magnitude: fraction of the eligible weights set to zero
  bool per_layer = false;      // prune_magnitude: the same sparsity in every layer, not one global threshold
};

struct PassContext {
  DimBindings bindings;  // the bindings shapes were inferred with
  Int8Options int8;
  PruneOptions prune;
  // Node names the precision passes (bf16, int8) leave in float32: a user's list or accuracy
  // control's choice (compilers/passes/keep_fp32.h).
  std::vector<std::string> keep_fp32;
  std::ostream* log = nullptr;  // where passes that make choices say what they chose
  // The ISA kiln's own CPU kernels will run the plan with: passes that fuse onto them fuse only
  // where they were measured to pay on it (fuse_depth_first).
  CpuIsa cpu_isa = best_cpu_isa();
};

using PassFn = Result<bool> (*)(Graph& graph, const PassContext& ctx);

struct PassInfo {
  std::string_view name;     // as written in a pipeline list, e.g. "fold_batchnorm"
  std::string_view summary;  // one line for `--print-passes`
  PassFn run;
  bool in_default = true;  // false: only when a pipeline names it (measured not to pay everywhere)
  // false: the pass changes the precision the fast kernels compute in (bf16, int8), so a compiled
  // model is checked against the fp32 reference by accuracy metrics, not to float rounding.
  bool exact = true;
};

}  // namespace kiln

// Runs a pipeline: times each pass, re-verifies the graph and re-infers shapes after it, dumps
// the IR after the passes asked for, and (when asked, and always in debug builds) checks that
// each pass leaves the model's outputs unchanged against the reference executor (a pruning pass
// changes them on purpose: its change is measured, not limited, and later passes are compared
// with the pruned model).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "compilers/passes/pass.h"

namespace kiln {

struct PassRunOptions {
  DimBindings bindings;                    // symbolic dims for shape inference and numeric checks
  std::vector<std::string> dump_ir_after;  // pass names, or "all"
  std::ostream* dump = nullptr;            // where dumps go (required when dump_ir_after is set)
#ifdef NDEBUG
  bool check_numerics = false;
#else
  bool check_numerics = true;
#endif
  double tolerance = 1e-4;  // max|after - before| <= tolerance * max|before|
  uint32_t seed = 1;        // for the numeric check's inputs
  Int8Options int8;         // calibration data and policy for quantize_int8
  PruneOptions prune;       // how much prune_channels / prune_magnitude remove
  std::vector<std::string> keep_fp32;  // layers the precision passes leave in float32
  std::ostream* log = nullptr;  // passes' reports of their choices (PassContext::log)
  CpuIsa cpu_isa = best_cpu_isa();  // PassContext::cpu_isa
};

struct PassRecord {
  std::string name;
  double ms = 0;
  bool changed = false;
  size_t nodes_before = 0;
  size_t nodes_after = 0;
  double max_rel_error = -1;  // set when numerics were checked
};

Result<std::vector<PassRecord>> run_passes(Graph& graph, const std::vector<std::string>& pipeline,
                                           const PassRunOptions& options = {});

}  // namespace kiln

// Compiling and loading for the CLI verbs that execute compiled plans (compile, run, bench).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "compilers/passes/pass_runner.h"
#include "compilers/quantize/accuracy_control.h"
#include "kernels/device/plan_runner.h"
#include "kernels/plan.h"
#include "kernels/plan_file.h"
#include "service/cli/calibration_options.h"
#include "service/cli/model_loading.h"
#include "service/cli/prune_options.h"

namespace kiln::cli {

struct CompileRequest {
  std::string model;
  DimOptions dims;
  std::vector<std::string> passes;
  std::vector<std::string> dump_ir_after;
  bool check_numerics = false;
  bool keep_reference_plan = false;  // also lower the graph before the passes (for verification)
  const CalibrationCli* calibration = nullptr;  // int8 calibration data and policy (quantize_int8)
  std::ostream* log = nullptr;                  // where passes report their choices
  const PruneCli* prune = nullptr;              // how much prune_channels / prune_magnitude remove
  bool quantize_every_output = false;           // Int8Options::quantize_every_output (QDQ export for peers)
  // Prices accuracy control's savings (kiln optimize: the target's predictor). Unset: this
  // machine's profile in the default store when there is one, else the layers are timed.
  StepPricer step_prices;
};

// What accuracy control chose, when it ran (the layers it kept out of reduced precision).
struct AccuracyControlled {
  std::string precision;  // of the reduced layers: "int8" or "bf16"
  std::string fallback;   // of the kept ones: "fp32" or "bf16"
  int reduced_layers = 0;
  double reduced_macs_share = 0;  // of the reducible layers' MACs (0..1)
  std::vector<std::string> kept;  // in fallback order
  double accuracy = 0, fp32_accuracy = 0, cosine = 0;  // on the accuracy data
  int64_t samples = 0;
};

struct CompiledModel {
  Plan plan;
  std::vector<PassRecord> passes;
  std::string bindings_text;  // "batch=1"
  std::optional<Plan> reference_plan;  // the uncompiled plan, when asked for
  Graph graph;                         // the graph after the passes (what the plan was lowered from)
  std::optional<AccuracyControlled> accuracy_control;
};

// Imports, binds dims, runs the passes (IR dumps go to `dump`) and lowers to a Plan.
Result<CompiledModel> compile_model(const CompileRequest& request, std::ostream* dump);

// One line per pass on stdout: time, node counts, and the numeric check's error when it ran.
void print_pass_records(const std::vector<PassRecord>& records);

// The default pipeline for a device: on cuda without the passes that make kiln's own fused ops
// (ConcatAffine, ChannelShuffle, DepthFirstConv), which have CPU kernels only.
std::vector<std::string> default_pipeline_for(DeviceKind device);

// A .kiln file is loaded as is (its metadata into `recorded` when given); an ONNX model is
// compiled with the device's default pipeline (`recorded` left empty).
Result<Plan> load_or_compile(const std::string& path, const DimOptions& dims, std::string* how = nullptr,
                             DeviceKind device = DeviceKind::cpu, PlanFileInfo* recorded = nullptr);

bool is_plan_file(const std::string& path);

// The batch a compiled plan was bound to: its first input's leading dimension (1 when unknown).
int64_t plan_batch(const Plan& plan);

}  // namespace kiln::cli

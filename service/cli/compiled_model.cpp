#include "service/cli/compiled_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pipeline.h"
#include "compilers/quantize/accuracy_control.h"
#include "kernels/plan_file.h"
#include "perfmodel/step_prices.h"
#include "perfmodel/target_profile.h"

namespace kiln::cli {

bool is_plan_file(const std::string& path) { return std::filesystem::path(path).extension() == ".kiln"; }

int64_t plan_batch(const Plan& plan) {
  if (plan.inputs.empty()) return 1;
  const ValueType& t = plan.slot_types[static_cast<size_t>(plan.inputs[0].slot)];
  return t.rank_known && !t.shape.empty() && t.shape[0].known() ? t.shape[0].value : 1;
}

Result<CompiledModel> compile_model(const CompileRequest& request, std::ostream* dump) {
  KILN_ASSIGN(model, load_model(request.model, &request.dims));
  PassRunOptions options;
  options.bindings = model.bindings;
  options.dump_ir_after = request.dump_ir_after;
  options.dump = dump;
  options.check_numerics = request.check_numerics;
  options.log = request.log;
  // The graph before the passes, lowered once for whichever needs it (data loading, the reference).
  std::optional<Plan> imported;
  const auto imported_plan = [&]() -> const Plan& {
    if (!imported) imported = graph_to_plan(model.graph);
    return *imported;
  };
  if (request.prune != nullptr) {
    KILN_TRY(request.prune->check(request.passes));
    options.prune = request.prune->options;
  }
  std::optional<CalibrationSet> calibration_set;  // read by quantize_int8 during run_passes
  if (request.calibration != nullptr) {
    if (request.calibration->given()) {
      const bool quantizes =
          std::find(request.passes.begin(), request.passes.end(), "quantize_int8") != request.passes.end();
      KILN_REQUIRE(quantizes, invalid_argument,
                   "calibration data is for int8: add quantize_int8 to the pipeline (--passes default+quantize_int8)");
      KILN_ASSIGN(set, request.calibration->load(imported_plan()));
      // Checked before any pass runs: a wrong set fails fast, before minutes of work.
      if (Status ok = check_calibration_set(model.graph, set); !ok)
        return ok.with_context(request.model + ": calibration data (" + set.source + "): ");
      calibration_set = std::move(set);
    }
    KILN_REQUIRE(request.calibration->keep_bf16.empty() ||
                     std::find(request.passes.begin(), request.passes.end(), "mixed_precision_bf16") != request.passes.end(),
                 invalid_argument,
                 "--keep-bf16 leaves layers in bf16: the pipeline must run mixed_precision_bf16 before quantize_int8 "
                 "(--passes default+mixed_precision_bf16+quantize_int8)");
    KILN_ASSIGN(int8, request.calibration->options(calibration_set ? &*calibration_set : nullptr));
    options.int8 = std::move(int8);
    options.keep_fp32 = request.calibration->keep_fp32;
    options.int8.calibration_options.progress = request.log;
    options.int8.quantize_every_output = request.quantize_every_output;
  }
  CompiledModel compiled;
  if (request.keep_reference_plan) compiled.reference_plan = imported_plan();
  Result<std::vector<PassRecord>> records = std::vector<PassRecord>{};
  if (request.calibration != nullptr && request.calibration->accuracy_control()) {
    KILN_REQUIRE(request.calibration->max_rel_error < 0, invalid_argument,
                 "--max-rel-error bounds GPU accuracy control (kiln compile --device cuda --cuda-precision tf32|fp16|bf16); "
                 "on the CPU use --min-cosine or --max-accuracy-drop");
    KILN_ASSIGN(data, request.calibration->load_accuracy_data(imported_plan()));
    AccuracyControlOptions control;
    if (request.calibration->max_accuracy_drop >= 0) control.max_accuracy_drop = request.calibration->max_accuracy_drop;
    if (request.calibration->min_cosine >= -1) control.min_cosine = request.calibration->min_cosine;
    control.progress = request.log;
    control.step_prices = request.step_prices;
    std::optional<perf::LatencyPredictor> local;  // outlives the control that prices with it
    const std::string db = perf::benchmark_store_default_path();
    if (!control.step_prices) {
      local = perf::local_predictor(db);
      if (local) control.step_prices = perf::predicted_step_prices(*local);
    }
    auto controlled = reduce_precision_within_accuracy(model.graph, request.passes, options, data, control);
    if (!controlled) return controlled.status().with_context(request.model + ": ");
    if (request.log && !controlled->sensitivities.empty())  // layers were ordered by their savings
      *request.log << (request.step_prices ? "  accuracy control: layer savings priced by the target's profile"
                       : local ? "  accuracy control: layer savings priced by this machine's profile in " + db
                               : "  accuracy control: layer savings timed (no profile of this machine in " + db +
                                     ": kiln bench-target), so repeated compiles may keep different layers")
                   << '\n';
    const CalibrationCli& c = *request.calibration;
    std::ostringstream wanted;  // the constraints as asked
    wanted.precision(10);        // 0.9999999, not 1
    if (c.max_accuracy_drop >= 0) wanted << "an accuracy drop of at most " << c.max_accuracy_drop * 100 << " points";
    if (c.min_cosine >= -1) wanted << (c.max_accuracy_drop >= 0 ? " and " : "") << "a cosine of at least " << c.min_cosine;
    if (!controlled->met) {
      std::string sensitive;
      for (size_t i = 0; i < controlled->sensitivities.size() && i < 5; ++i)
        sensitive += (i ? ", " : "") + controlled->sensitivities[i].layer;
      if (const auto& bf16 = controlled->fallback_misses)
        return make_error(ErrorCode::constraint_not_met, request.model, ": accuracy constraint not met: with every layer in ",
                          controlled->fallback, " and none in ", controlled->precision, " the model already has an accuracy drop of ",
                          bf16->accuracy_drop * 100, " points and a cosine of ", bf16->cosine, " (fp32 ",
                          controlled->fp32_accuracy * 100, "% on ", controlled->samples, " samples), outside ", wanted.str(),
                          ": the ", controlled->fallback, " fallback cannot meet it; leave mixed_precision_bf16 out of the "
                          "passes for an fp32 fallback");
      std::ostringstream floor;  // the model's own sensitivity, when it explains the miss
      if (const auto& r = controlled->input_rounding;
          r && ((c.max_accuracy_drop >= 0 && r->accuracy_drop > c.max_accuracy_drop) || (c.min_cosine >= -1 && r->cosine < c.min_cosine)))
        floor << "; the fp32 model itself misses it on these inputs rounded to 8 bits (drop " << r->accuracy_drop * 100
              << " points, cosine " << r->cosine << "): the bound is below this model's own noise floor, which int8 "
              << "(rounding every layer's input) cannot beat";
      return make_error(ErrorCode::constraint_not_met, request.model, ": accuracy constraint not met: no ",
                        controlled->precision, " layer can be kept within ", wanted.str(), " (fp32 ",
                        controlled->fp32_accuracy * 100, "% on ", controlled->samples, " samples); most sensitive: ",
                        sensitive, floor.str());
    }
    if (request.log) {
      *request.log << "  accuracy control: " << controlled->reduced_layers << " layers " << controlled->precision << " ("
                   << std::lround(controlled->reduced_macs_share * 100) << "% of their MACs), "
                   << controlled->kept_fp32.size() << " kept in " << controlled->fallback;
      for (const std::string& l : controlled->kept_fp32) *request.log << ' ' << l;
      *request.log << "; accuracy " << controlled->accuracy * 100 << "% vs fp32 " << controlled->fp32_accuracy * 100
                   << "%, cosine " << controlled->cosine << " on " << controlled->samples << " samples (asked: "
                   << wanted.str() << ")\n";
    }
    compiled.accuracy_control = AccuracyControlled{controlled->precision, controlled->fallback, controlled->reduced_layers,
                                                   controlled->reduced_macs_share, controlled->kept_fp32,
                                                   controlled->accuracy, controlled->fp32_accuracy, controlled->cosine,
                                                   controlled->samples};
    model.graph = std::move(controlled->graph);
    records = std::move(controlled->passes);
  } else {
    records = run_passes(model.graph, request.passes, options);
  }
  if (!records) return records.status().with_context(request.model + ": ");
  compiled.plan = graph_to_plan(model.graph);
  compiled.graph = std::move(model.graph);
  compiled.passes = std::move(*records);
  for (const auto& [name, value] : model.bindings)
    compiled.bindings_text += (compiled.bindings_text.empty() ? "" : ",") + name + "=" + std::to_string(value);
  return compiled;
}

void print_pass_records(const std::vector<PassRecord>& records) {
  for (const PassRecord& r : records) {
    std::printf("  %-24s %7.2f ms  %4zu -> %4zu nodes%s", r.name.c_str(), r.ms, r.nodes_before, r.nodes_after,
                r.changed ? "" : "  (unchanged)");
    // Only changed passes are re-run on the reference executor (--check-numerics).
    if (r.max_rel_error >= 0) std::printf("  max diff %.2e x max|output|", r.max_rel_error);
    std::printf("\n");
  }
}

std::vector<std::string> default_pipeline_for(DeviceKind device) {
  return device == DeviceKind::cpu ? default_pipeline() : cuda_pipeline();
}

Result<Plan> load_or_compile(const std::string& path, const DimOptions& dims, std::string* how, DeviceKind device,
                             PlanFileInfo* recorded) {
  if (is_plan_file(path)) {
    KILN_ASSIGN(loaded, plan_read_file(path));
    if (how) *how = "loaded " + path + " (" + loaded.info.notes + ", passes: " + loaded.info.passes + ")";
    if (recorded) *recorded = loaded.info;
    return std::move(loaded.plan);
  }
  KILN_ASSIGN(compiled, compile_model({path, dims, default_pipeline_for(device), {}, false, false}, nullptr));
  if (how)
    *how = "compiled " + path + " with the default pipeline" + (device == DeviceKind::cpu ? "" : " for " + std::string(device_kind_name(device))) +
           " (" + compiled.bindings_text + ")";
  return std::move(compiled.plan);
}

}  // namespace kiln::cli

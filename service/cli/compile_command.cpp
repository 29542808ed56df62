// kiln compile MODEL.onnx -o model.kiln: import, bind the batch, run the pass pipeline, write
// the .kiln artifact. --print-passes lists the pipeline table. --device cuda compiles with the
// CUDA pipeline and fails, naming the node and op, when a step has no CUDA kernel. --target T.yaml
// compiles for that target's nodes: the CUDA pipeline when they have GPUs (unless --device says
// otherwise), as `kiln image --target` packages it. The .kiln records the device, and a
// --cuda-precision given for the GPU, which `kiln image` then defaults to. For the GPU at tf32,
// fp16 or bf16, --min-cosine / --max-rel-error / --max-accuracy-drop with accuracy data run GPU
// accuracy control: the fewest leading steps kept in float32 for the bound to hold, measured by
// emulating the precision on this CPU (kernels/verify/keep_fp32_search.h); --cuda-keep-fp32 gives
// the list by hand. Either list is recorded in the .kiln, and runs wherever the plan runs at its
// precision (kiln run/bench/verify --device cuda, kiln-runtime in images).
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "api/description.h"
#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "kernels/device/device_plugin.h"
#include "kernels/plan_file.h"
#include "kernels/verify/keep_fp32_search.h"
#include "service/cli/commands.h"
#include "service/cli/compiled_model.h"
#include "service/cli/device_options.h"
#include "service/cli/model_loading.h"

namespace kiln::cli {
namespace {

struct CompileOptions {
  std::string model;
  std::string output;
  DimOptions dims;
  std::string passes = "default";
  std::vector<std::string> dump_ir_after;
  bool print_passes = false;
  bool check_numerics = false;
  CalibrationCli calibration;
  PruneCli prune;
  DeviceCli device;
  bool device_given = false;  // --device on the command line (wins over --target)
  bool precision_given = false;  // --cuda-precision on the command line: recorded in the .kiln for kiln image
  std::string target;
};

int print_pass_table() {
  std::printf("%-24s %s\n", "pass", "what it does (pipeline order; [optional]: not in 'default', in 'all')");
  for (const PassInfo& p : pass_table())
    std::printf("%-24s %s%s\n", std::string(p.name).c_str(), p.in_default ? "" : "[optional] ", std::string(p.summary).c_str());
  return kExitOk;
}

// GPU accuracy control's bound from the accuracy-control options.
AccuracyBound gpu_bound(const CalibrationCli& c) {
  AccuracyBound bound;
  if (c.min_cosine >= -1) bound.min_cosine = c.min_cosine;
  if (c.max_rel_error >= 0) bound.max_rel_error = c.max_rel_error;
  if (c.max_accuracy_drop >= 0) bound.max_accuracy_drop = c.max_accuracy_drop;
  return bound;
}

std::string step_list(const std::vector<std::string>& names, size_t shown) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += ", ... (" + std::to_string(names.size() - shown) + " more)";
  return out;
}

// The fewest leading steps of `compiled` kept in float32 for `precision` to meet the bound, by
// emulation (no GPU); the list, or constraint_not_met.
Result<std::vector<std::string>> gpu_accuracy_control(const CompileOptions& opts, const CompiledModel& compiled, DevicePrecision precision) {
  const CalibrationCli& c = opts.calibration;
  KILN_ASSIGN(data, c.load_accuracy_data(*compiled.reference_plan));
  const AccuracyBound bound = gpu_bound(c);
  VerifyOptions options;
  options.reference_description = "the imported model before any pass, fp32 reference executor";
  std::printf("GPU accuracy control: %s emulated on this CPU over %s, until %s\n", std::string(device_precision_name(precision)).c_str(),
              data.source.c_str(), describe_bound(bound).c_str());
  std::fflush(stdout);
  KILN_ASSIGN(found, search_keep_fp32(compiled.plan, *compiled.reference_plan, data, precision, bound, options, &std::cout));
  std::string why;
  if (!found.met) {
    meets_bound(found.report, bound, &why);
    return make_error(ErrorCode::constraint_not_met, opts.model, ": accuracy constraint not met: even with every step in float32 the ",
                      device_precision_name(precision), " plan misses ", describe_bound(bound), " (", why,
                      "): the emulation's own float arithmetic differs from the reference by that much");
  }
  const OutputMetrics& first = found.report.outputs.front();
  std::printf("  GPU accuracy control: %s with %zu of %zu steps kept in fp32%s%s; cosine %.6f, max rel %.3g", std::string(device_precision_name(precision)).c_str(),
              found.kept_steps, found.total_steps, found.keep_fp32.empty() ? "" : ": ", step_list(found.keep_fp32, 8).c_str(),
              first.cosine, first.max_rel_error);
  if (first.classifier) std::printf(", top-1 agreement %.2f%%", first.top1_agreement * 100);
  std::printf(" on %lld samples (verified by emulation, not yet on a GPU)\n", static_cast<long long>(found.report.samples));
  if (!found.keep_fp32.empty()) {  // whole, comma-separated: what --cuda-keep-fp32 takes
    std::string all;
    for (const std::string& n : found.keep_fp32) all += (all.empty() ? "" : ",") + n;
    std::printf("  kept in fp32: %s\n", all.c_str());
  }
  return found.keep_fp32;
}

int run_compile(const CompileOptions& opts) {
  if (opts.print_passes) return print_pass_table();
  if (opts.model.empty() || opts.output.empty()) return report_error("compile needs MODEL and -o OUTPUT.kiln");
  DeviceCli device = opts.device;
  if (!opts.target.empty()) {
    auto target = api::target_load(opts.target);
    if (!target) return report_error("target '" + opts.target + "': " + target.message());
    const bool gpus = std::any_of(target.value().node.gpus.begin(), target.value().node.gpus.end(),
                                  [](const api::Gpu& g) { return g.count > 0; });
    if (!opts.device_given && gpus) device.device = "cuda";
  }
  const bool on_device = device.kind() != DeviceKind::cpu;
  const DevicePrecision precision = device_precision_from_name(device.cuda_precision).value_or(DevicePrecision::fp32);
  const bool keep_by_hand = device.keep_given();
  const bool gpu_control = on_device && opts.calibration.accuracy_control();
  if (keep_by_hand && !on_device) return report_error("--cuda-keep-fp32 is for plans compiled for the GPU: add --device cuda");
  if ((keep_by_hand || gpu_control) && (!opts.precision_given || precision == DevicePrecision::fp32))
    return report_error(std::string(keep_by_hand ? "--cuda-keep-fp32" : "GPU accuracy control") +
                        " keeps steps of a tf32, fp16 or bf16 plan in float32: give --cuda-precision tf32|fp16|bf16");
  if (keep_by_hand && gpu_control)
    return report_error("give --cuda-keep-fp32 or an accuracy bound (--min-cosine, --max-rel-error, --max-accuracy-drop), not both");
  if (!on_device && opts.calibration.max_rel_error >= 0)
    return report_error("--max-rel-error bounds GPU accuracy control: add --device cuda --cuda-precision tf32|fp16|bf16");
  if (gpu_control) {
    Status usable = opts.calibration.check_accuracy_control();
    if (!usable) return report_error(usable.message());
  }
  const std::vector<std::string> pipeline =
      on_device && opts.passes == "default" ? default_pipeline_for(device.kind()) : pipeline_parse(opts.passes);
  CompileRequest request{opts.model, opts.dims, pipeline, opts.dump_ir_after, opts.check_numerics};
  // GPU accuracy control runs after the passes, on the plan: the passes compile without it.
  const CalibrationCli calibration = gpu_control ? opts.calibration.without_accuracy_control() : opts.calibration;
  request.calibration = &calibration;
  request.keep_reference_plan = gpu_control;
  request.prune = &opts.prune;
  request.log = &std::cout;
  auto compiled = compile_model(request, &std::cout);
  if (!compiled) return report_error(compiled.error().message);
  print_pass_records(compiled->passes);
  std::vector<std::string> keep_fp32 = keep_by_hand ? device.keep_fp32_for(nullptr) : std::vector<std::string>{};
  if (on_device) {
    // Every step must have a kernel on the device: a capability query of the plugin, no GPU needed.
    // With --cuda-keep-fp32 the plugin also checks every name is a step of the plan.
    Status supported = cuda_plugin_check_plan(compiled->plan, device.runner_options(0, nullptr).device_options);
    if (!supported) return report_error(supported.message());
  }
  if (gpu_control) {
    auto kept = gpu_accuracy_control(opts, *compiled, precision);
    if (!kept) return report_error(kept.error().message);
    keep_fp32 = std::move(*kept);
  }
  PlanFileInfo info{"kiln 0.1.0", opts.model, on_device && opts.passes == "default" ? "default for " + device.device : opts.passes,
                    compiled->bindings_text, std::string(device_kind_name(device.kind())),
                    on_device && opts.precision_given ? device.cuda_precision : "", keep_fp32};
  Status written = plan_write_file(opts.output, compiled->plan, info);
  if (!written) return report_error(written.message());
  std::printf("wrote %s (%zu steps, %s", opts.output.c_str(), compiled->plan.steps.size(), compiled->bindings_text.c_str());
  if (!keep_fp32.empty()) std::printf("; %zu kept in fp32 at %s on the GPU", keep_fp32.size(), device.cuda_precision.c_str());
  std::printf(")\n");
  return kExitOk;
}

}  // namespace

void add_compile_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<CompileOptions>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile an ONNX model into a .kiln plan for a fixed batch size");
  cmd->add_option("model", opts->model, "ONNX model file");
  cmd->add_option("-o,--output", opts->output, "Where to write the .kiln file");
  opts->dims.add_to(*cmd);
  opts->device.add_to(*cmd, /*with_device_index=*/false);
  cmd->add_option("--target", opts->target,
                  "Target infrastructure (YAML/JSON): nodes with GPUs get the CUDA pipeline, as kiln image packages it "
                  "(--device overrides)");
  cmd->add_option("--passes", opts->passes, "Comma-separated pass list, 'default', 'default+OPTIONAL[+...]' (e.g. default+mixed_precision_bf16), 'all' or 'none'");
  cmd->add_flag("--print-passes", opts->print_passes, "List every pass in the pipeline table and exit");
  cmd->add_option("--dump-ir-after", opts->dump_ir_after, "Print the IR after these passes ('all' for every one)")
      ->delimiter(',');
  opts->calibration.add_to(*cmd, /*with_normalization=*/true);
  opts->calibration.add_accuracy_control_to(*cmd);
  cmd->add_option("--max-rel-error", opts->calibration.max_rel_error,
                  "GPU accuracy control (--device cuda --cuda-precision tf32|fp16|bf16, with --accuracy-data or --accuracy-random): "
                  "keep the fewest leading steps in float32 for every output's max |error| / max |fp32| to be at most this "
                  "(e.g. 1e-3), measured by emulation on this CPU; --min-cosine and --max-accuracy-drop bound it too")
      ->check(CLI::NonNegativeNumber);
  opts->prune.add_to(*cmd);
  cmd->add_flag("--check-numerics", opts->check_numerics,
                "Check every pass against the reference executor on seeded inputs");
  cmd->callback([opts, &run, cmd] {
    opts->device_given = cmd->count("--device") > 0;
    opts->precision_given = cmd->count("--cuda-precision") > 0;
    run = [opts] { return run_compile(*opts); };
  });
}

}  // namespace kiln::cli

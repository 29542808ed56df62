// kiln compile MODEL.onnx -o model.kiln: import, bind the batch, run the pass pipeline, write
// the .kiln artifact. --print-passes lists the pipeline table. --device cuda compiles with the
// CUDA pipeline and fails, naming the node and op, when a step has no CUDA kernel. --target T.yaml
// compiles for that target's nodes: the CUDA pipeline when they have GPUs (unless --device says
// otherwise), as `kiln image --target` packages it. The .kiln records the device, and a
// --cuda-precision given for the GPU, which `kiln image` then defaults to.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "api/description.h"
#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "kernels/device/device_plugin.h"
#include "kernels/plan_file.h"
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
  const std::vector<std::string> pipeline =
      on_device && opts.passes == "default" ? default_pipeline_for(device.kind()) : pipeline_parse(opts.passes);
  CompileRequest request{opts.model, opts.dims, pipeline, opts.dump_ir_after, opts.check_numerics};
  request.calibration = &opts.calibration;
  request.prune = &opts.prune;
  request.log = &std::cout;
  auto compiled = compile_model(request, &std::cout);
  if (!compiled) return report_error(compiled.error().message);
  print_pass_records(compiled->passes);
  if (on_device) {
    // Every step must have a kernel on the device: a capability query of the plugin, no GPU needed.
    Status supported = cuda_plugin_check_plan(compiled->plan, device.runner_options(0, nullptr).device_options);
    if (!supported) return report_error(supported.message());
  }
  PlanFileInfo info{"kiln 0.1.0", opts.model, on_device && opts.passes == "default" ? "default for " + device.device : opts.passes,
                    compiled->bindings_text, std::string(device_kind_name(device.kind())),
                    on_device && opts.precision_given ? device.cuda_precision : ""};
  Status written = plan_write_file(opts.output, compiled->plan, info);
  if (!written) return report_error(written.message());
  std::printf("wrote %s (%zu steps, %s)\n", opts.output.c_str(), compiled->plan.steps.size(), compiled->bindings_text.c_str());
  return kExitOk;
}

}  // namespace

void add_compile_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<CompileOptions>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile an ONNX model into a .kiln plan for a fixed batch size");
  cmd->add_option("model", opts->model, "ONNX model file");
  cmd->add_option("-o,--output", opts->output, "Where to write the .kiln file");
  opts->dims.add_to(*cmd);
  opts->device.add_to(*cmd, /*with_device_index=*/false, nullptr, nullptr, /*with_keep_fp32=*/false);
  cmd->add_option("--target", opts->target,
                  "Target infrastructure (YAML/JSON): nodes with GPUs get the CUDA pipeline, as kiln image packages it "
                  "(--device overrides)");
  cmd->add_option("--passes", opts->passes, "Comma-separated pass list, 'default', 'default+OPTIONAL[+...]' (e.g. default+mixed_precision_bf16), 'all' or 'none'");
  cmd->add_flag("--print-passes", opts->print_passes, "List every pass in the pipeline table and exit");
  cmd->add_option("--dump-ir-after", opts->dump_ir_after, "Print the IR after these passes ('all' for every one)")
      ->delimiter(',');
  opts->calibration.add_to(*cmd, /*with_normalization=*/true);
  opts->calibration.add_accuracy_control_to(*cmd);
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

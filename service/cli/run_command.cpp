// kiln run MODEL|model.kiln --input x.npy|inputs.npz --output y.npz: an ONNX model runs on the
// reference executor, a compiled .kiln plan on the compiled engine.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "compilers/lower/to_plan.h"
#include "kernels/engine.h"
#include "kernels/executor.h"
#include "kernels/plan_file.h"
#include "kernels/io/npz.h"
#include "service/cli/commands.h"
#include "service/cli/compiled_model.h"
#include "service/cli/device_options.h"
#include "service/cli/model_loading.h"
#include "kernels/io/plan_io.h"

namespace kiln::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string input;
  std::string output;
  int threads = 0;
  bool verbose = false;
  DeviceCli device;
};

Result<Plan> load_plan(const RunOptions& opts, PlanFileInfo& recorded) {
  // On a device an ONNX model is compiled first: devices run compiled plans only.
  if (opts.device.kind() != DeviceKind::cpu) return load_or_compile(opts.model, {}, nullptr, opts.device.kind(), &recorded);
  if (is_plan_file(opts.model)) {
    KILN_ASSIGN(loaded, plan_read_file(opts.model));
    return std::move(loaded.plan);
  }
  KILN_ASSIGN(model, load_model(opts.model, nullptr));
  return graph_to_plan(model.graph);
}

int run_model(const RunOptions& opts) {
  PlanFileInfo recorded;
  auto plan = load_plan(opts, recorded);
  if (!plan) return report_error(plan.error().message);
  if (const std::string note = opts.device.recorded_keep_note(recorded); !note.empty()) std::cout << "note: " << note << '\n';
  std::vector<std::string> ignored;
  auto inputs = plan_inputs_read(opts.input, *plan, ignored);
  if (!inputs) return report_error(inputs.error().message);
  for (const std::string& name : ignored) std::cout << "note: ignoring entry '" << name << "' of " << opts.input << " (not a model input)\n";

  const bool on_device = opts.device.kind() != DeviceKind::cpu;
  const bool compiled = is_plan_file(opts.model) || on_device;
  const auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> results;
  if (on_device) {
    auto runner = PlanRunner::create(*plan, opts.device.runner_options(opts.threads, opts.verbose ? &std::cerr : nullptr, &recorded));
    if (!runner) return report_error(runner.error().message);
    auto out = (*runner)->run(*inputs);
    if (!out) return report_error(out.error().message);
    results = std::move(*out);
  } else if (compiled) {
    auto out = plan_run_engine(*plan, *inputs, {opts.threads, opts.verbose ? &std::cerr : nullptr});
    if (!out) return report_error(out.error().message);
    results = std::move(*out);
  } else {
    auto out = execute_reference(*plan, *inputs);
    if (!out) return report_error(out.error().message);
    results = std::move(out->outputs);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const Plan& p = *plan;

  std::printf("ran %s with the %s in %.1f ms\n", opts.model.c_str(),
              on_device ? "CUDA engine" : compiled ? "compiled engine" : "reference executor", ms);
  std::fflush(stdout);
  plan_outputs_print(std::cout, p, results);
  Status written = plan_outputs_write(opts.output, p, results);
  if (!written) return report_error(written.message());
  std::cout << "wrote " << opts.output << '\n';
  return kExitOk;
}

}  // namespace

void add_run_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model on NumPy inputs with the reference executor");
  cmd->add_option("model", opts->model, "ONNX model (reference executor) or .kiln plan (compiled engine)")->required();
  cmd->add_option("--threads", opts->threads, "Threads for a .kiln plan (default: the CPU quota)")->check(CLI::NonNegativeNumber);
  opts->device.add_to(*cmd);
  cmd->add_flag("--verbose", opts->verbose, "Print which kernel runs each step and why others did not");
  cmd->add_option("--input,-i", opts->input, ".npy (single-input models) or .npz with one entry per input name")->required();
  cmd->add_option("--output,-o", opts->output, "Where to write the outputs (.npz)")->required();
  cmd->callback([opts, &run] { run = [opts] { return run_model(*opts); }; });
}

}  // namespace kiln::cli

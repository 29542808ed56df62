// kiln-runtime run MODEL.kiln --input x.npz --output y.npz [--threads N] [--device cpu|cuda]:
// batch inference over NumPy files (what HPC jobs call). --device cuda loads libkiln_cuda.so.
#include <chrono>
#include <cstdio>
#include <iostream>

#include "kernels/io/plan_io.h"
#include "kernels/plan_file.h"
#include "service/cli/device_options.h"
#include "service/runtime/verbs.h"

namespace kiln::runtime {
namespace {

struct RunOptions {
  std::string model;
  std::string input;
  std::string output;
  int threads = 0;
  cli::DeviceCli device;
};

int run_plan(const RunOptions& opts) {
  auto loaded = plan_read_file(opts.model);
  if (!loaded) return report_error(loaded.error().message);
  const Plan& plan = loaded->plan;
  std::vector<std::string> ignored;
  auto inputs = plan_inputs_read(opts.input, plan, ignored);
  if (!inputs) return report_error(inputs.error().message);
  for (const std::string& name : ignored) std::cout << "note: ignoring entry '" << name << "' of " << opts.input << " (not a model input)\n";
  const auto start = std::chrono::steady_clock::now();
  Result<std::vector<Tensor>> results = std::vector<Tensor>{};
  if (opts.device.kind() == DeviceKind::cpu) {
    results = plan_run_engine(plan, *inputs, {opts.threads, nullptr});
  } else {
    if (const std::string note = opts.device.recorded_keep_note(loaded->info); !note.empty()) std::cout << "note: " << note << '\n';
    auto runner = PlanRunner::create(plan, opts.device.runner_options(opts.threads, nullptr, &loaded->info));
    if (!runner) return report_error(runner.error().message);
    results = (*runner)->run(*inputs);
  }
  if (!results) return report_error(results.error().message);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "ran " << opts.model << " in " << ms << " ms\n";
  plan_outputs_print(std::cout, plan, *results);
  Status written = plan_outputs_write(opts.output, plan, *results);
  if (!written) return report_error(written.message());
  std::cout << "wrote " << opts.output << '\n';
  return kExitOk;
}

}  // namespace

void add_run_verb(CLI::App& app, VerbRunner& run) {
  auto opts = std::make_shared<RunOptions>();
  opts->threads = env_threads();
  CLI::App* cmd = app.add_subcommand("run", "Run a compiled .kiln plan on NumPy inputs");
  cmd->add_option("model", opts->model, "Compiled plan (.kiln)")->required();
  cmd->add_option("--input,-i", opts->input, ".npy (single-input models) or .npz with one entry per input name")->required();
  cmd->add_option("--output,-o", opts->output, "Where to write the outputs (.npz)")->required();
  cmd->add_option("--threads", opts->threads, "Threads (default: $KILN_THREADS, else the CPU quota)")->check(CLI::NonNegativeNumber);
  opts->device.add_to(*cmd, /*with_device_index=*/true, kDeviceEnv, kCudaPrecisionEnv);
  cmd->callback([opts, &run] { run = [opts] { return run_plan(*opts); }; });
}

}  // namespace kiln::runtime

// kiln run MODEL --input x.npy|inputs.npz --output y.npz: runs the reference executor.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "compilers/lower/to_plan.h"
#include "kernels/executor.h"
#include "kernels/io/npz.h"
#include "service/cli/commands.h"
#include "service/cli/model_loading.h"

namespace kiln::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string input;
  std::string output;
};

// For [N, classes] float outputs, the top-1 class of each row: the quickest sanity check.
void print_top1(const Tensor& t) {
  if (t.dtype() != DType::f32 || t.rank() != 2 || t.dim(1) < 2) return;
  const int64_t rows = std::min<int64_t>(t.dim(0), 16);
  std::cout << "  top-1 per row:";
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = t.data<float>() + r * t.dim(1);
    int64_t best = 0;
    for (int64_t c = 1; c < t.dim(1); ++c)
      if (row[c] > row[best]) best = c;
    std::cout << ' ' << best;
  }
  if (t.dim(0) > rows) std::cout << " ...";
  std::cout << '\n';
}

int run_model(const RunOptions& opts) {
  auto model = load_model(opts.model, nullptr);
  if (!model) return report_error(model.error().message);
  const Plan plan = graph_to_plan(model->graph);
  std::vector<std::string> ignored;
  auto inputs = read_inputs(opts.input, plan, ignored);
  if (!inputs) return report_error(inputs.error().message);
  for (const std::string& name : ignored) std::cout << "note: ignoring entry '" << name << "' of " << opts.input << " (not a model input)\n";

  const auto start = std::chrono::steady_clock::now();
  auto result = execute_reference(plan, *inputs);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!result) return report_error(result.error().message);

  NamedTensors outputs;
  std::printf("ran %s with the reference executor in %.1f ms\n", opts.model.c_str(), ms);
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const Tensor& t = result->outputs[i];
    std::cout << "output " << plan.outputs[i].second << ": " << t.describe() << '\n';
    print_top1(t);
    outputs.emplace_back(plan.outputs[i].second, t);
  }
  const auto parent = std::filesystem::path(opts.output).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  Status written = npz_write_file(opts.output, outputs);
  if (!written) return report_error(written.message());
  std::cout << "wrote " << opts.output << '\n';
  return kExitOk;
}

}  // namespace

void add_run_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model on NumPy inputs with the reference executor");
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  cmd->add_option("--input,-i", opts->input, ".npy (single-input models) or .npz with one entry per input name")->required();
  cmd->add_option("--output,-o", opts->output, "Where to write the outputs (.npz)")->required();
  cmd->callback([opts, &run] { run = [opts] { return run_model(*opts); }; });
}

}  // namespace kiln::cli

// kiln bench MODEL|model.kiln: times the compiled model in-process after warm-up and prints
// median/p90 latency and throughput, so every deployment candidate is measured the same way.
#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "kernels/device/plan_runner.h"
#include "service/cli/commands.h"
#include "service/cli/compiled_model.h"
#include "service/cli/device_options.h"

namespace kiln::cli {
namespace {

struct BenchOptions {
  std::string model;
  DimOptions dims;
  int threads = 0;
  DeviceCli device;
  int iters = 50;
  int warmup = 5;
  bool json = false;
  bool profile = false;
};

std::vector<Tensor> seeded_inputs(const Plan& plan) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<Tensor> inputs;
  for (const PlanInput& in : plan.inputs) {
    Tensor t = Tensor::zeros(in.type.dtype, sym_shape_concrete(plan.slot_types[static_cast<size_t>(in.slot)].shape));
    if (t.dtype() == DType::f32)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Median time of each step over `iters` extra runs.
Result<std::vector<double>> profile_steps(PlanRunner& engine, const std::vector<Tensor>& inputs, int iters) {
  std::vector<std::vector<double>> per_step;
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    KILN_TRY(engine.run(inputs, &ms).status());
    per_step.resize(ms.size());
    for (size_t s = 0; s < ms.size(); ++s) per_step[s].push_back(ms[s]);
  }
  std::vector<double> medians;
  for (auto& v : per_step) medians.push_back(percentile(v, 0.5));
  return medians;
}

void print_profile(const PlanRunner& engine, const std::vector<double>& step_ms) {
  const std::vector<EngineStep>& steps = engine.steps();
  std::map<std::string, std::pair<double, int>> by_kind;
  double total = 0;
  for (size_t i = 0; i < steps.size() && i < step_ms.size(); ++i) {
    auto& [ms, count] = by_kind[steps[i].op + " on " + steps[i].kernel];
    ms += step_ms[i];
    ++count;
    total += step_ms[i];
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_kind.begin(), by_kind.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("profile (median per step, summed: %.3f ms)\n", total);
  for (const auto& [kind, v] : rows)
    std::printf("  %8.3f ms %5.1f%%  %4d x %s\n", v.first, 100.0 * v.first / std::max(total, 1e-9), v.second, kind.c_str());
  std::vector<size_t> order(std::min(steps.size(), step_ms.size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return step_ms[a] > step_ms[b]; });
  std::printf("slowest steps\n");
  const size_t shown = std::getenv("KILN_PROFILE_ALL") ? order.size() : std::min<size_t>(order.size(), 10);
  for (size_t i = 0; i < shown; ++i)
    std::printf("  %8.3f ms  %s (%s on %s) [%s]\n", step_ms[order[i]], steps[order[i]].node.c_str(),
                steps[order[i]].op.c_str(), steps[order[i]].kernel.c_str(), steps[order[i]].output_layout.c_str());
}

int run_bench(const BenchOptions& opts) {
  std::string how;
  const auto load_start = std::chrono::steady_clock::now();
  PlanFileInfo recorded;
  auto plan = load_or_compile(opts.model, opts.dims, &how, opts.device.kind(), &recorded);
  if (!plan) return report_error(plan.error().message);
  if (const std::string note = opts.device.recorded_keep_note(recorded); !note.empty()) how += "; " + note;
  auto engine = PlanRunner::create(*plan, opts.device.runner_options(opts.threads, nullptr, &recorded));
  if (!engine) return report_error(engine.error().message);
  const double ready_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  const std::vector<Tensor> inputs = seeded_inputs(*plan);
  const int64_t batch = inputs.empty() || inputs[0].rank() == 0 ? 1 : inputs[0].dim(0);

  // The first run pays for lazy initialisation (page faults on the arena and mmapped weights):
  // reported on its own, as start-up cost.
  double first_run_ms = 0;
  for (int i = 0; i < std::max(opts.warmup, 1); ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto r = (*engine)->run(inputs);
    if (i == 0) first_run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!r) return report_error(r.error().message);
  }
  std::vector<double> ms;
  for (int i = 0; i < opts.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto r = (*engine)->run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (!r) return report_error(r.error().message);
  }
  // On a GPU, also the time on the device alone (inputs and outputs resident there), as GPU
  // frameworks report it: the host<->device copies above are part of a deployment, not of a kernel.
  std::vector<double> device_ms;
  if ((*engine)->device() != DeviceKind::cpu) {
    auto timed = (*engine)->time_on_device(opts.warmup, opts.iters);
    if (!timed) return report_error(timed.error().message);
    device_ms = std::move(*timed);
  }
  if (opts.profile) {
    auto profiled = profile_steps(**engine, inputs, opts.iters);
    if (!profiled) return report_error(profiled.error().message);
    print_profile(**engine, *profiled);
  }
  const double median = percentile(ms, 0.5), p90 = percentile(ms, 0.9), best = percentile(ms, 0.0);
  const double throughput = static_cast<double>(batch) * 1000.0 / median;
  const EngineMemory& mem = (*engine)->memory();
  if (opts.json) {
    nlohmann::json j = {{"model", opts.model}, {"batch", batch}, {"threads", (*engine)->threads()},
                        {"device", opts.device.device}, {"engine", (*engine)->describe()},
                        {"iters", opts.iters}, {"warmup", opts.warmup}, {"median_ms", median}, {"p90_ms", p90},
                        {"min_ms", best}, {"throughput_per_s", throughput}, {"ready_ms", ready_ms}, {"first_run_ms", first_run_ms},
                        {"arena_bytes", mem.arena_bytes}, {"arena_lower_bound_bytes", mem.lower_bound_bytes},
                        {"weight_bytes", mem.weight_bytes}, {"in_place_steps", mem.in_place_steps}};
    if (!device_ms.empty()) {
      j["device_median_ms"] = percentile(device_ms, 0.5);
      j["device_p90_ms"] = percentile(device_ms, 0.9);
      j["device_min_ms"] = percentile(device_ms, 0.0);
    }
    std::cout << j.dump(2) << '\n';
  } else {
    std::printf("%s\n", how.c_str());
    std::printf("batch %lld, %s, %d iterations after %d warm-up\n", static_cast<long long>(batch),
                (*engine)->describe().c_str(), opts.iters, opts.warmup);
    std::printf("latency: median %.3f ms, p90 %.3f ms, min %.3f ms\n", median, p90, best);
    std::printf("throughput: %.1f inferences/s\n", throughput);
    if (!device_ms.empty())
      std::printf("on the device alone (inputs and outputs resident): median %.3f ms, p90 %.3f ms, min %.3f ms\n",
                  percentile(device_ms, 0.5), percentile(device_ms, 0.9), percentile(device_ms, 0.0));
    std::printf("ready in %.1f ms, first run %.1f ms\n", ready_ms, first_run_ms);
    std::printf("arena %.2f MB (lower bound %.2f MB, %d steps in place), weights %.2f MB\n",
                static_cast<double>(mem.arena_bytes) / 1e6, static_cast<double>(mem.lower_bound_bytes) / 1e6,
                mem.in_place_steps, static_cast<double>(mem.weight_bytes) / 1e6);
  }
  return kExitOk;
}

}  // namespace

void add_bench_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Time a compiled model (a .kiln file, or an ONNX model compiled on the fly)");
  cmd->add_option("model", opts->model, ".kiln or ONNX file")->required();
  opts->dims.add_to(*cmd);
  cmd->add_option("--threads", opts->threads, "Threads (default: this container's CPU quota)")->check(CLI::NonNegativeNumber);
  opts->device.add_to(*cmd);
  cmd->add_option("--iters", opts->iters, "Timed iterations (default 50)")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", opts->warmup, "Warm-up iterations (default 5)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->add_flag("--profile", opts->profile, "Also time every step and print the time per op, kernel and step");
  cmd->callback([opts, &run] { run = [opts] { return run_bench(*opts); }; });
}

}  // namespace kiln::cli

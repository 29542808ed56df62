// kiln predict MODEL|model.kiln: compiles the model for one batch, thread count and precision,
// and predicts its latency, throughput and memory from this target's stored benchmarks (no run),
// so the prediction can be checked against `kiln bench` with the same arguments.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "kernels/engine.h"
#include "kernels/plan_file.h"
#include "perfmodel/dtype_coverage.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/host_link.h"
#include "perfmodel/machine_pace.h"
#include "perfmodel/plan_features.h"
#include "perfmodel/precision_compile.h"
#include "perfmodel/predictor.h"
#include "perfmodel/prior_predictor.h"
#include "perfmodel/priors.h"
#include "perfmodel/store.h"
#include "perfmodel/target_profile.h"
#include "service/cli/commands.h"
#include "service/cli/compiled_model.h"

namespace kiln::cli {
namespace {

struct PredictOptions {
  std::string model;
  DimOptions dims;
  int threads = 0;
  std::string precision = "fp32";
  std::string db;
  std::string target;
  std::string method = "auto";
  bool json = false;
  bool verbose = false;
  bool calibrate = false;
};

// --calibrate re-times the profile's own sweep points here, so it needs the profile to be this
// machine's and to hold canaries at the thread count.
Result<perf::MachinePace> measure_pace(const perf::TargetProfile& profile, int threads) {
  const perf::TargetFingerprint here = perf::fingerprint_local();
  const perf::TargetFingerprint& fp = profile.target.fingerprint;
  if (fp.id != here.id)
    return Error{ErrorCode::invalid_argument, "--calibrate re-times the profile's sweep points on this machine: target " + fp.id + " (" + fp.cpu_model +
                           ") is not this machine (" + here.id + ")"};
  std::map<int, perf::PaceCanaries> canaries = perf::pace_canaries(profile, {threads});
  // Only the convs set the pace (an Add/Concat canary alone does not).
  const auto it = canaries.find(threads);
  if (it == canaries.end() || std::find(it->second.memory.begin(), it->second.memory.end(), false) == it->second.memory.end())
    return Error{ErrorCode::invalid_argument, "--calibrate: the profile of " + fp.id + " has no sweep conv of 0.5-5 ms measured quiet at " +
                           std::to_string(threads) + " thread(s) to re-time (kiln bench-target --threads " + std::to_string(threads) +
                           ", or --remeasure-loaded)"};
  perf::MachinePace pace = perf::pace_measure(it->second);
  if (pace.compute_points == 0) return Error{ErrorCode::invalid_argument, "--calibrate: none of the profile's canary convs ran here"};
  return pace;
}

nlohmann::json pace_json(const perf::MachinePace& pace, double uncalibrated_ms) {
  return {{"compute", pace.compute}, {"compute_points", pace.compute_points}, {"memory", pace.memory},
          {"memory_points", pace.memory_points}, {"uncalibrated_median_ms", uncalibrated_ms}};
}

Result<Plan> plan_for(const PredictOptions& o, std::string* how) {
  if (is_plan_file(o.model)) {
    KILN_ASSIGN(loaded, plan_read_file(o.model));
    *how = "loaded " + o.model + " (passes: " + loaded.info.passes + "; --precision and --batch come from the file)";
    return std::move(loaded.plan);
  }
  KILN_ASSIGN(model, load_model(o.model, &o.dims));
  auto plan = perf::precision_compile(std::move(model.graph), o.precision);
  if (!plan) return plan.status().with_context(o.model + ": ");
  *how = "compiled " + o.model + (o.precision == perf::kCudaPlan ? " with the CUDA pipeline" : " for " + o.precision);
  return plan;
}

nlohmann::json fit_json(const perf::FitSummary& s) {
  return {{"method", s.method},
          {"points_used", s.points_used},
          {"points_loaded", s.points_loaded},
          {"loaded_points_kept", s.loaded_kept},
          {"groups_only_loaded", s.groups_only_loaded},
          {"points_superseded", s.points_superseded},
          {"points_repaired", s.points_repaired},
          {"bandwidth_points", s.bandwidth_points},
          {"weight_reuse_points", s.weight_reuse_points},
          {"step_overhead_ms", s.step_overhead_ms},
          {"heldout_median_error", s.heldout_median_chosen},
          {"heldout_within_10pct", s.heldout_within10_chosen},
          {"heldout_median_error_roofline", s.heldout_median_roofline},
          {"heldout_median_error_knn", s.heldout_median_knn}};
}

// --target names a built-in spec prior (kiln bench-target --list) with no measured data replacing
// it: a roofline from the datasheet (perfmodel/prior_predictor.h), marked as a prior.
int run_predict_prior(const PredictOptions& o, const perf::TargetPrior& prior, const std::string& db) {
  if (o.calibrate) return report_error("--calibrate re-times a measured CPU profile's sweep points here: " + prior.id + " is a spec prior");
  const bool gpu = prior.device == "gpu";
  if (!gpu && o.precision == "fp16") return report_error("fp16 is for GPU targets: kiln has no fp16 CPU kernels");
  const perf::PriorPredictor predictor(prior);
  if (gpu)
    if (auto why = perf::gpu_precision_refusal(o.precision, predictor)) return report_error("precision " + o.precision + " on " + prior.name + ": " + *why);
  std::string how;
  PredictOptions compile = o;
  if (gpu) compile.precision = perf::kCudaPlan;  // the plan the GPU runs, read at the precision's width
  auto plan = plan_for(compile, &how);
  if (!plan) return report_error(plan.error().message);
  auto engine = Engine::create(*plan, {gpu ? 1 : o.threads, nullptr});
  if (!engine) return report_error(engine.error().message);
  const int threads = gpu ? 1 : (*engine)->threads();
  std::vector<perf::StepFeatures> features = perf::plan_features(*plan, (*engine)->steps(), threads);
  if (gpu) features = perf::steps_on_gpu(features, perf::gpu_precision_dtype(o.precision));
  const double io_bytes = gpu ? static_cast<double>(perf::plan_io_bytes(*plan)) : 0.0;
  const double device_ms = predictor.run_ms(features, threads, 0);
  const double total_ms = predictor.run_ms(features, threads, io_bytes);
  const int64_t batch = plan_batch(*plan);
  const double throughput = total_ms > 0 ? static_cast<double>(batch) * 1000.0 / total_ms : 0.0;
  const EngineMemory& mem = (*engine)->memory();
  const double width = gpu && o.precision != "fp32" ? 0.5 : 1.0;
  const auto weights = static_cast<int64_t>(static_cast<double>(mem.weight_bytes) * width);
  const auto arena = static_cast<int64_t>(static_cast<double>(mem.arena_bytes) * width);
  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"batch", batch}, {"threads", threads}, {"precision", o.precision},
                        {"device", gpu ? "cuda" : "cpu"}, {"predicted_median_ms", total_ms},
                        {"predicted_device_ms", device_ms}, {"throughput_per_s", throughput},
                        {"weights_bytes", weights}, {"arena_bytes", arena}, {"peak_memory_bytes", weights + arena},
                        {"kernels", features.size()}, {"target", prior.id}, {"latency_source", "prior"},
                        {"prior", {{"name", prior.name}, {"source", prior.source}, {"assumptions", predictor.describe()}}},
                        {"db", db}};
    if (o.verbose) {
      nlohmann::json steps = nlohmann::json::array();
      for (const perf::StepFeatures& f : features)
        steps.push_back({{"node", f.node}, {"op", f.op}, {"dtype", f.m.dtype}, {"macs", f.m.macs}, {"bytes", f.m.bytes},
                         {"predicted_ms", predictor.step_ms(f, threads)}});
      j["steps"] = steps;
    }
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  std::printf("%s\n", how.c_str());
  std::printf("target %s: %s\n", prior.id.c_str(), predictor.describe().c_str());
  if (o.verbose)
    for (const perf::StepFeatures& f : features)
      std::printf("  %10.4f  %-16s %-6s %10.2f MMACs %12.1f KB  %s\n", predictor.step_ms(f, threads), f.op.c_str(),
                  f.m.dtype.c_str(), f.m.macs / 1e6, f.m.bytes / 1e3, f.node.c_str());
  std::printf("batch %lld, %s, %s, %zu kernels\n", static_cast<long long>(batch),
              gpu ? "one GPU" : (std::to_string(threads) + " threads").c_str(), o.precision.c_str(), features.size());
  std::printf("predicted latency (prior): median %.3f ms%s\n", total_ms,
              gpu ? (", of which " + std::to_string(device_ms).substr(0, 6) + " ms on the device").c_str() : "");
  std::printf("predicted throughput (prior): %.1f inferences/s\n", throughput);
  std::printf("memory: weights %.2f MB, arena %.2f MB\n", static_cast<double>(weights) / 1e6, static_cast<double>(arena) / 1e6);
  return kExitOk;
}

// The target is a GPU measured by `kiln bench-target --device cuda`: the CUDA pipeline's plan as
// the GPU runs it at the precision (as for a GPU prior), priced by a predictor fitted to the GPU's
// profile (device time), plus the host copies of inputs and outputs as the GPU model's prior
// prices them (the sweep does not time them).
int run_predict_gpu_profile(const PredictOptions& o, const perf::TargetProfile& profile, const std::string& db) {
  const perf::TargetFingerprint& fp = profile.target.fingerprint;
  if (o.calibrate) return report_error("--calibrate re-times a CPU profile's sweep points: " + fp.id + " is a GPU profile");
  if (auto why = perf::cuda_precision_refusal(o.precision)) return report_error("precision " + o.precision + " on " + fp.cpu_model + ": " + *why);
  perf::FitOptions fit_options;
  fit_options.method = o.method;
  auto predictor = perf::LatencyPredictor::fit(profile.measurements, fit_options);
  if (!predictor) return report_error(predictor.error().message);
  std::string how;
  PredictOptions compile = o;
  compile.precision = perf::kCudaPlan;
  auto plan = plan_for(compile, &how);
  if (!plan) return report_error(plan.error().message);
  auto engine = Engine::create(*plan, {1, nullptr});
  if (!engine) return report_error(engine.error().message);
  const std::vector<perf::StepFeatures> features =
      perf::steps_on_gpu(perf::plan_features(*plan, (*engine)->steps(), 1), perf::gpu_precision_dtype(o.precision));
  const perf::PlanPrediction p = predictor->predict(features);
  const perf::TargetPrior* link = perf::prior_replaced(profile.target);
  const std::optional<perf::HostLinkFit> measured_link = perf::host_link_fit(profile.measurements);
  const auto io_bytes = static_cast<double>(perf::plan_io_bytes(*plan));
  const double copies_ms = measured_link ? perf::host_link_ms(*measured_link, io_bytes)
                           : link        ? perf::PriorPredictor(*link).host_copy_ms(io_bytes)
                                         : 0.0;
  const double total_ms = p.total_ms + copies_ms;
  const int64_t batch = plan_batch(*plan);
  const double throughput = total_ms > 0 ? static_cast<double>(batch) * 1000.0 / total_ms : 0.0;
  const EngineMemory& mem = (*engine)->memory();
  const double width = o.precision == "fp32" ? 1.0 : 0.5;
  const auto weights = static_cast<int64_t>(static_cast<double>(mem.weight_bytes) * width);
  const auto arena = static_cast<int64_t>(static_cast<double>(mem.arena_bytes) * width);
  const std::string copies_how = measured_link ? perf::host_link_describe(*measured_link)
                                 : link        ? "as " + link->id + "'s prior prices them"
                                               : "not priced: no prior for this GPU model and no host_link points";
  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"batch", batch}, {"threads", 1}, {"precision", o.precision}, {"device", "cuda"},
                        {"predicted_median_ms", total_ms}, {"predicted_device_ms", p.total_ms}, {"throughput_per_s", throughput},
                        {"weights_bytes", weights}, {"arena_bytes", arena}, {"peak_memory_bytes", weights + arena},
                        {"kernels", features.size()}, {"target", fp.id}, {"cpu_model", fp.cpu_model},
                        {"latency_source", "predicted"}, {"host_copies", {{"ms", copies_ms}, {"how", copies_how}}},
                        {"db", db}, {"fit", fit_json(predictor->summary())}};
    if (o.verbose) {
      nlohmann::json steps = nlohmann::json::array();
      for (size_t i = 0; i < features.size(); ++i)
        steps.push_back({{"node", features[i].node}, {"op", features[i].op}, {"dtype", features[i].m.dtype},
                         {"macs", features[i].m.macs}, {"bytes", features[i].m.bytes}, {"predicted_ms", p.steps[i].ms},
                         {"model", p.steps[i].how}});
      j["steps"] = steps;
    }
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  std::printf("%s\n", how.c_str());
  std::printf("target %s (%s, measured GPU profile), fit: %s on %d sweep points, held-out median error %.1f%%\n", fp.id.c_str(),
              fp.cpu_model.c_str(), predictor->summary().method.c_str(), predictor->summary().points_used,
              100.0 * predictor->summary().heldout_median_chosen);
  if (o.verbose)
    for (size_t i = 0; i < features.size(); ++i)
      std::printf("  %10.4f  %-16s %-6s %10.2f MMACs %12.1f KB  %s (%s)\n", p.steps[i].ms, features[i].op.c_str(),
                  features[i].m.dtype.c_str(), features[i].m.macs / 1e6, features[i].m.bytes / 1e3, features[i].node.c_str(),
                  p.steps[i].how.c_str());
  std::printf("batch %lld, one GPU, %s, %zu kernels\n", static_cast<long long>(batch), o.precision.c_str(), features.size());
  std::printf("predicted latency: median %.3f ms, of which %.3f ms on the device (host copies %s)\n", total_ms, p.total_ms,
              copies_how.c_str());
  std::printf("predicted throughput: %.1f inferences/s\n", throughput);
  std::printf("memory: weights %.2f MB, arena %.2f MB\n", static_cast<double>(weights) / 1e6, static_cast<double>(arena) / 1e6);
  return kExitOk;
}

int run_predict(const PredictOptions& o) {
  const std::string db = o.db.empty() ? perf::benchmark_store_default_path() : o.db;
  if (const perf::TargetPrior* prior = perf::target_prior_find(o.target)) {
    // A prior gives way to measured data for the same device as soon as the store has any.
    std::string replaced;
    std::error_code ec;
    if (std::filesystem::exists(db, ec))  // a missing store is not created
      if (auto stored = perf::BenchmarkStore::open(db))
        if (auto targets = (*stored)->targets()) replaced = perf::prior_replaced_by(*prior, *targets);
    if (replaced.empty()) return run_predict_prior(o, *prior, db);
    PredictOptions measured = o;
    measured.target = replaced;
    return run_predict(measured);
  }
  const std::string fp16_on_cpu = "fp16 is for GPU targets: name one with --target (kiln bench-target --list)";
  if (o.precision == "fp16" && o.target.empty()) return report_error(fp16_on_cpu);
  if (o.precision != "fp16" && perf::precision_dtype(o.precision).empty())
    return report_error("unknown precision '" + o.precision + "': use fp32, bf16 or int8");
  // The profile first: without one there is nothing to predict with, and compiling takes seconds.
  auto profile = perf::target_profile_load(db, o.target);
  if (!profile) return report_error(profile.error().message);
  if (perf::fingerprint_is_cuda(profile->target.fingerprint)) return run_predict_gpu_profile(o, *profile, db);
  if (o.precision == "fp16") return report_error(fp16_on_cpu);
  perf::FitOptions fit_options;
  fit_options.method = o.method;
  auto predictor = perf::LatencyPredictor::fit(profile->measurements, fit_options);
  if (!predictor) return report_error(predictor.error().message);
  const perf::TargetFingerprint& fp = profile->target.fingerprint;
  // Before compiling (seconds): a precision the profile has no kernels of would be priced from
  // another dtype's (a .kiln file's own precision is checked below, from its steps).
  if (!is_plan_file(o.model))
    if (const std::string why = perf::dtype_unpriced_reason(*predictor, fp, perf::precision_dtype(o.precision)); !why.empty())
      return report_error("cannot predict " + o.precision + " on " + fp.cpu_model + ": " + why);

  std::string how;
  auto plan = plan_for(o, &how);
  if (!plan) return report_error(plan.error().message);
  // The Engine is built (kernels chosen, layouts and arena planned) but never run.
  auto engine = Engine::create(*plan, {o.threads, nullptr});
  if (!engine) return report_error(engine.error().message);
  const int threads = (*engine)->threads();
  const std::vector<perf::StepFeatures> features = perf::plan_features(*plan, (*engine)->steps(), threads);
  std::set<std::string> dtypes;  // what the plan's steps run in (int8 plans keep some layers in fp32)
  for (const perf::StepFeatures& f : features) dtypes.insert(f.m.dtype);
  std::vector<std::string> notes;
  for (const std::string& d : dtypes) {
    if (const std::string why = perf::dtype_unpriced_reason(*predictor, fp, d); !why.empty())
      return report_error("cannot predict " + o.model + " on " + fp.cpu_model + ": its " + d + " steps: " + why);
    if (std::string note = perf::fingerprint_dtype_note(fp, d); !note.empty()) notes.push_back(std::move(note));
  }
  perf::PlanPrediction p = predictor->predict(features);
  const double uncalibrated_ms = p.total_ms;
  std::optional<perf::MachinePace> pace;
  if (o.calibrate) {
    auto measured = measure_pace(*profile, threads);
    if (!measured) return report_error(measured.error().message);
    pace = *measured;
    p = perf::pace_calibrated(p, *pace);
  }
  const int64_t batch = plan_batch(*plan);
  const EngineMemory& mem = (*engine)->memory();
  const double throughput = p.total_ms > 0 ? static_cast<double>(batch) * 1000.0 / p.total_ms : 0.0;
  const int64_t peak = mem.arena_bytes + mem.weight_bytes;
  const perf::FitSummary& fit = predictor->summary();
  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"batch", batch}, {"threads", threads}, {"precision", o.precision},
                        {"predicted_median_ms", p.total_ms}, {"throughput_per_s", throughput},
                        {"weights_bytes", mem.weight_bytes}, {"arena_bytes", mem.arena_bytes},
                        {"peak_memory_bytes", peak}, {"kernels", features.size()},
                        {"target", profile->target.fingerprint.id}, {"cpu_model", profile->target.fingerprint.cpu_model},
                        {"db", db}, {"fit", fit_json(fit)}};
    if (!notes.empty()) j["notes"] = notes;
    if (pace) j["pace"] = pace_json(*pace, uncalibrated_ms);
    if (o.verbose) {
      nlohmann::json steps = nlohmann::json::array();
      for (size_t i = 0; i < features.size(); ++i)
        steps.push_back({{"node", features[i].node}, {"op", features[i].op}, {"kernel", features[i].kernel},
                         {"dtype", features[i].m.dtype}, {"macs", features[i].m.macs}, {"bytes", features[i].m.bytes},
                         {"predicted_ms", p.steps[i].ms}, {"model", p.steps[i].how}});
      j["steps"] = steps;
    }
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  std::printf("%s\n", how.c_str());
  std::printf("target %s (%s), fit: %s on %d sweep points%s, held-out median error %.1f%%\n",
              profile->target.fingerprint.id.c_str(), profile->target.fingerprint.cpu_model.c_str(), fit.method.c_str(),
              fit.points_used, fit.loaded_kept ? " (all measured under load: noisy)" : "",
              100.0 * fit.heldout_median_chosen);
  if (pace) {
    std::printf("machine pace now: the profile's canary convs take x%.2f of their stored time (%d points", pace->compute,
                pace->compute_points);
    if (pace->memory_points > 0) std::printf("; its Add/Concat canaries x%.2f, not used", pace->memory);
    std::printf("); every step is priced at that pace (uncalibrated median %.3f ms)\n", uncalibrated_ms);
  }
  if (fit.points_repaired > 0)
    std::printf("%d conv/gemm sweep points repriced: their one-thread and multi-thread readings contradicted each other (a slow spell)\n",
                fit.points_repaired);
  if (!fit.groups_only_loaded.empty()) {
    std::string groups;
    for (const std::string& g : fit.groups_only_loaded) groups += (groups.empty() ? "" : ", ") + g;
    std::printf("  every point of %s was measured under load: priced from another thread count "
                "(kiln bench-target --remeasure-loaded)\n", groups.c_str());
  }
  if (o.verbose) {
    std::printf("  %10s  %-16s %-6s %10s %12s  %s\n", "ms", "op", "dtype", "MMACs", "KB", "step (kernel; model)");
    for (size_t i = 0; i < features.size(); ++i) {
      const perf::StepFeatures& f = features[i];
      std::printf("  %10.4f  %-16s %-6s %10.2f %12.1f  %s (%s, %s; %s)\n", p.steps[i].ms, f.op.c_str(), f.m.dtype.c_str(),
                  f.m.macs / 1e6, f.m.bytes / 1e3, f.node.c_str(), f.kernel.c_str(), f.m.layout.c_str(), p.steps[i].how.c_str());
    }
  }
  std::printf("batch %lld, %d threads, %s, %zu kernels\n", static_cast<long long>(batch), threads, o.precision.c_str(), features.size());
  for (const std::string& note : notes) std::printf("note: %s\n", note.c_str());
  std::printf("predicted latency: median %.3f ms\n", p.total_ms);
  std::printf("predicted throughput: %.1f inferences/s\n", throughput);
  std::printf("memory: weights %.2f MB, arena %.2f MB, peak %.2f MB\n", static_cast<double>(mem.weight_bytes) / 1e6,
              static_cast<double>(mem.arena_bytes) / 1e6, static_cast<double>(peak) / 1e6);
  return kExitOk;
}

}  // namespace

void add_predict_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand("predict", "Predict a compiled model's latency, throughput and memory from this target's benchmarks");
  cmd->add_option("model", opts->model, ".kiln or ONNX file")->required();
  opts->dims.add_to(*cmd);
  cmd->add_option("--threads", opts->threads, "Threads (default: this container's CPU quota)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--precision", opts->precision, "fp32 (default), bf16 or int8 (random calibration); fp16 for a GPU prior")
      ->check(CLI::IsMember({"fp32", "bf16", "int8", "fp16"}));
  cmd->add_option("--db", opts->db, "Benchmark store (default $KILN_DATA_DIR/benchmarks.sqlite, else ~/.local/share/kiln/benchmarks.sqlite)");
  cmd->add_option("--target", opts->target,
                  "Stored target: fingerprint id, or part of its CPU model or its host (default: this machine); or a "
                  "built-in spec prior's id (kiln bench-target --list), used until measured data for it is stored");
  cmd->add_option("--method", opts->method, "auto (default: per op/dtype/threads, whichever predicts its held-out sweep points better), roofline, knn (roofline + nearest-neighbour correction)")
      ->check(CLI::IsMember({"roofline", "knn", "auto"}));
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->add_flag("--verbose,-v", opts->verbose, "Also print every kernel's features and predicted time");
  cmd->add_flag("--calibrate", opts->calibrate,
                "Re-time a few of the profile's own sweep convs here (about a second) and price every step at the pace they "
                "run now: a shared VM's speed drifts by more than 10% within hours (this machine's profile only)");
  cmd->callback([opts, &run] { run = [opts] { return run_predict(*opts); }; });
}

}  // namespace kiln::cli

// kiln optimize APP.yaml [--target TARGET.yaml]: plan (service/planning), then for the top
// candidates (and the best one of each other precision: fp32 is the fallback when a reduced
// precision loses too much accuracy): compile at the candidate's batch and precision (int8
// calibrated on the description's calibration data), verify against the fp32 reference on the
// description's validation data (once per precision: accuracy does not depend on batch or
// threads), and, when the target is this machine, measure. A reduced precision that misses
// max_accuracy_drop with every layer reduced gets accuracy control on the same data (the layers
// that cost most accuracy per millisecond saved stay fp32); its later candidates keep the same
// layers and are priced again. The choice uses measured numbers where there are any. GPU
// candidates (the best of each GPU precision) are compiled for the GPU, checked against the CUDA
// backend's kernels and verified by emulating their precision on this CPU
// (kernels/verify/precision_emulation.h); they are never measured here, so they compete on
// predictions. Writes plan.json, report.json and the chosen model.kiln; exit 3 when no candidate
// passes.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compilers/passes/pipeline.h"
#include "kernels/device/device_plugin.h"
#include "kernels/plan_file.h"
#include "kernels/verify/keep_fp32_search.h"
#include "kernels/verify/verify.h"
#include "perfmodel/deployed_timing.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/host_interference.h"
#include "perfmodel/microbench/timing.h"
#include "perfmodel/model_runs.h"
#include "perfmodel/precision_compile.h"
#include "perfmodel/step_prices.h"
#include "perfmodel/target_profile.h"
#include "service/cli/commands.h"
#include "service/cli/compiled_model.h"
#include "service/cli/description_data.h"
#include "service/cli/plan_request.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct OptimizeOptions {
  PlanCli plan;
  std::string output = "optimized";
  int top = 3;
  int runs = 20;
  int rounds = perf::kCandidateRounds;
  double settle_seconds = 60;  // waited at most, over the measurement, for the host to stop slowing threads down
  bool no_measure = false;
  bool json = false;
  std::string calibration_data, validation_data;  // .npz files instead of the description's data sets
};

// An .npz file in place of a description's data set: its entry names (input, labels) stay.
void dataset_replace(std::optional<api::Dataset>& set, const std::string& npz) {
  if (npz.empty()) return;
  api::Dataset d = set ? *set : api::Dataset{};
  if (d.format != api::Dataset::Format::npz) d = api::Dataset{};
  d.npz = std::filesystem::absolute(npz).string();
  set = d;
}

// One precision's verification, shared by its candidates.
struct Verification {
  bool ran = false;
  std::string error;        // compile or verify failed
  std::string data_source;
  std::string engine;       // where the compiled plan ran ("cpu, 2 threads", "fp16 emulated on the CPU (...)")
  bool labels = false;
  double accuracy_drop = NAN, top1_agreement = NAN, cosine = NAN;
  std::string accuracy_basis;  // what the accuracy check compared
  std::string failure;         // the accuracy constraint missed, with its numbers
  // Accuracy control ran because every layer reduced missed the limit (`every_layer_failure`):
  // `control->kept` stay fp32 in this precision's candidates.
  std::optional<AccuracyControlled> control;
  std::string every_layer_failure;
  std::optional<perf::ModelCosts> kept_costs;  // the precision's costs with control's layers kept (for pricing)
  // GPU accuracy control: the leading steps a GPU precision keeps in float32 (by emulation), because
  // every step at that precision missed the limit (`every_layer_failure`).
  std::optional<KeepFp32Search> gpu_kept;
};

struct Trial {
  perf::Candidate candidate;
  double every_layer_predicted_ms = NAN;  // the plan's price before accuracy control kept layers out
  size_t kept_layers = 0;                 // by accuracy control
  std::string error;
  std::optional<perf::Timing> measured;
  double measured_throughput = 0;
  std::vector<std::string> blocked_by;  // measured constraint misses and accuracy
  Plan plan;
  std::string passes;
  std::vector<std::string> cuda_keep_fp32;  // a GPU candidate's steps kept in float32 (recorded in its .kiln)
  bool ok() const { return error.empty() && blocked_by.empty(); }
  double latency() const { return measured ? measured->median_ms : candidate.latency_ms; }
  double throughput() const { return measured ? measured_throughput : candidate.throughput_per_s; }
};

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Verification data: the validation set, else the calibration set, else seeded random inputs.
const std::optional<api::Dataset>& verification_set(const api::ApplicationDescription& app) {
  return app.validation ? app.validation : app.calibration;
}
constexpr int64_t kRandomVerifySamples = 64;
constexpr uint32_t kRandomVerifySeed = 1;

// The first `n` names, then how many more (report.json lists them all).
std::string first_names(const std::vector<std::string>& names, size_t n) {
  if (names.size() <= n) return join(names, ", ");
  return join(std::vector<std::string>(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(n)), ", ") + " and " +
         std::to_string(names.size() - n) + " more";
}

// `v.control`: keep the layers an earlier accuracy control kept; `control`: run accuracy control
// against max_accuracy_drop on the verification data (progress on stderr), its savings priced by
// `prices` when set (the target's predictor: the same layers on every run, and the target's costs).
// `fallback`: what the layers accuracy control keeps run in ("fp32", or "bf16" for int8); a
// verification that kept layers already says.
Result<CompiledModel> compile_candidate(const std::string& model, const api::ApplicationDescription& app,
                                        const perf::Candidate& c, const Verification& v, bool control,
                                        const std::string& fallback, const StepPricer& prices, std::string* calibration_note) {
  CompileRequest request;
  request.model = model;
  request.dims.batch = c.batch;
  KILN_ASSIGN(passes, perf::precision_pipeline(c.precision, v.control ? v.control->fallback : control ? fallback : "fp32"));
  request.passes = passes;
  request.keep_reference_plan = true;
  CalibrationCli calibration;
  if (c.precision == "int8") {
    if (app.calibration) {
      KILN_ASSIGN(cal, description_calibration(*app.calibration, app.source));
      calibration = std::move(cal);
    } else {
      calibration.random = 16;
      *calibration_note = "int8 was calibrated on 16 seeded random samples (the description has no data.calibration): "
                          "its accuracy on real inputs may differ";
    }
  }
  if (v.control && v.control->fallback == "bf16") calibration.keep_bf16 = v.control->kept;
  else if (v.control) calibration.keep_fp32 = v.control->kept;
  if (control) {
    calibration.max_accuracy_drop = *app.constraints.max_accuracy_drop;
    if (const std::optional<api::Dataset>& set = verification_set(app)) {
      KILN_ASSIGN(data, description_dataset(*set, app.source));
      calibration.accuracy_dataset = std::move(data);
    } else {
      calibration.accuracy_random = kRandomVerifySamples;
      calibration.accuracy_seed = kRandomVerifySeed;
    }
    request.log = &std::cerr;
    request.step_prices = prices;
  }
  if (c.precision != "fp32") request.calibration = &calibration;  // keep_fp32 and accuracy control live there too
  return compile_model(request, nullptr);
}

Result<VerifyData> verification_data(const api::ApplicationDescription& app, const Plan& plan) {
  const std::optional<api::Dataset>& set = verification_set(app);
  if (!set) return verify_random_data(plan, kRandomVerifySamples, kRandomVerifySeed);
  KILN_ASSIGN(options, description_dataset(*set, app.source));
  return load_dataset(options, plan);
}

// A verification's figures, held to the application's accuracy limit.
void judge(const api::ApplicationDescription& app, const VerifyReport& report, Verification& v) {
  v.failure.clear();
  v.data_source = report.data_source;
  v.engine = report.engine;
  v.labels = report.labels;
  double cosine = 1;
  const OutputMetrics* classifier = nullptr;
  for (const OutputMetrics& m : report.outputs) {
    cosine = std::min(cosine, m.cosine);
    if (m.classifier && !classifier) classifier = &m;
  }
  v.cosine = cosine;
  if (classifier) {
    v.top1_agreement = classifier->top1_agreement;
    if (classifier->has_labels) v.accuracy_drop = classifier->accuracy_drop;
  }
  if (!app.constraints.max_accuracy_drop) return;
  const double limit = *app.constraints.max_accuracy_drop;
  if (!std::isnan(v.accuracy_drop)) {
    v.accuracy_basis = "accuracy drop on labelled data";
    if (v.accuracy_drop > limit) v.failure = "accuracy drop " + fmt("%.4f", v.accuracy_drop) + " > max_accuracy_drop " + fmt("%g", limit);
  } else if (!std::isnan(v.top1_agreement)) {
    // Without labels the drop is at most the share of samples whose top-1 class changed.
    v.accuracy_basis = "top-1 disagreement with fp32 (no labels: an upper bound of the drop)";
    if (1 - v.top1_agreement > limit)
      v.failure = "top-1 disagreement " + fmt("%.4f", 1 - v.top1_agreement) + " > max_accuracy_drop " + fmt("%g", limit);
  } else {
    v.accuracy_basis = "cosine similarity (no classifier output)";
    if (v.cosine < 0.99) v.failure = "cosine " + fmt("%.5f", v.cosine) + " < 0.99 (no classifier output to measure a drop)";
  }
}

// The bound judge() holds a verification to, as GPU accuracy control searches for it.
AccuracyBound accuracy_bound(const api::ApplicationDescription& app, const Verification& v) {
  AccuracyBound bound;
  if (!app.constraints.max_accuracy_drop) return bound;
  if (!std::isnan(v.top1_agreement)) bound.max_accuracy_drop = *app.constraints.max_accuracy_drop;
  else bound.min_cosine = 0.99;
  return bound;
}

// `emulate`: a GPU plan, verified by emulating that GPU precision on this CPU. `cache`: the
// reference outputs shared by every verification of one optimize run (same model, same data).
void verify(const api::ApplicationDescription& app, const CompiledModel& model, Verification& v, ReferenceCache* cache,
            std::optional<DevicePrecision> emulate = std::nullopt) {
  v.ran = true;
  auto data = verification_data(app, model.plan);
  if (!data) {
    v.error = "verification data: " + data.error().message;
    return;
  }
  VerifyOptions options;
  options.emulate = emulate;
  options.reference_cache = cache;
  auto report = verify_plans(model.plan, *model.reference_plan, *data, options);
  if (!report) {
    v.error = "verification: " + report.error().message;
    return;
  }
  judge(app, *report, v);
}

// A GPU precision that missed the accuracy limit with every step at it: the fewest leading steps
// kept in float32 for it to meet the limit, by emulation on the same data (the reference runs once,
// from `cache`). Sets v.gpu_kept and judges v again on the chosen list; leaves v as it was when not
// even every step in float32 meets it.
void gpu_accuracy_control(const api::ApplicationDescription& app, const CompiledModel& model, DevicePrecision precision,
                          Verification& v, ReferenceCache* cache) {
  auto data = verification_data(app, model.plan);
  if (!data) return;
  VerifyOptions options;
  options.reference_cache = cache;
  std::ostringstream log;
  auto found = search_keep_fp32(model.plan, *model.reference_plan, *data, precision, accuracy_bound(app, v), options, &log);
  std::fprintf(stderr, "\n%s", log.str().c_str());
  if (!found || !found->met) return;
  v.every_layer_failure = v.failure;
  judge(app, found->report, v);
  v.gpu_kept = std::move(*found);
}

// Accuracy control keeps layers out of a reduced precision that missed the limit with every layer
// reduced; it decides on a classifier's output (top-1 on labels, or fp32's top-1 without them).
bool accuracy_control_may_help(const api::ApplicationDescription& app, const perf::Candidate& c, const Verification& v) {
  return app.constraints.max_accuracy_drop && c.precision != "fp32" && v.error.empty() && !v.failure.empty() &&
         !std::isnan(v.top1_agreement);
}

// The costs of `precision` with the layers accuracy control kept, as the planner computes them.
Result<perf::ModelCosts> kept_layer_costs(const std::string& model, const std::string& precision, const perf::KeptLayers& kept) {
  KILN_ASSIGN(graph, planning::load_graph_at_batch_1(model));
  return perf::model_costs_compute(std::move(graph), precision, kept);
}

// The plan priced every layer reduced; a candidate whose layers accuracy control kept is priced
// again by the same predictor, scaled by the ratio of the two predictions (which keeps whatever
// the plan applied on top: stored runs, instances, the node count).
// The candidate's predictions scaled by after / before (its run priced again), memory as `kept` takes it.
void scale_prediction(double before, double after, const perf::ModelCosts& kept, Trial& t) {
  perf::Candidate& c = t.candidate;
  if (!(before > 0) || !(after > 0)) return;
  const double scale = after / before;
  t.every_layer_predicted_ms = c.latency_ms;
  c.latency_ms *= scale;
  c.latency_p99_ms *= scale;
  c.throughput_per_s /= scale;
  if (c.cost_per_million) *c.cost_per_million *= scale;
  c.memory_bytes = c.instances * perf::model_costs_memory_at(kept, c.batch);
}

void reprice(const planning::PlanOutcome& outcome, const perf::ModelCosts& kept, Trial& t) {
  const perf::Candidate& c = t.candidate;
  const auto every = outcome.costs.find(c.precision);
  if (!outcome.predictor || c.device != "cpu" || every == outcome.costs.end() || !(c.latency_ms > 0)) return;
  const double before = outcome.predictor->predict(perf::model_costs_steps_at(every->second, c.batch, c.threads)).total_ms;
  const double after = outcome.predictor->predict(perf::model_costs_steps_at(kept, c.batch, c.threads)).total_ms;
  scale_prediction(before, after, kept, t);
}

// A GPU candidate whose leading steps GPU accuracy control keeps in float32, priced again with
// those steps at f32 by the predictor that priced the GPUs.
void reprice_gpu(const planning::PlanOutcome& outcome, Trial& t) {
  const perf::Candidate& c = t.candidate;
  if (!outcome.gpu_plan_costs || !(c.latency_ms > 0)) return;
  const perf::ModelCosts every = planning::gpu_costs(*outcome.gpu_plan_costs, c.precision);
  const perf::ModelCosts kept = planning::gpu_costs(*outcome.gpu_plan_costs, c.precision, t.cuda_keep_fp32);
  const std::optional<double> before = planning::gpu_run_ms(outcome, every, c.batch), after = planning::gpu_run_ms(outcome, kept, c.batch);
  if (before && after) scale_prediction(*before, *after, kept, t);
}


// Unmeasured, a candidate is held to its predicted figures, as the plan held it (priced again when
// accuracy control kept layers). Accuracy is not predicted here: it was verified.
void check_predicted(const api::Constraints& k, const perf::PlanTarget& target, Trial& t) {
  api::Constraints predicted = k;
  predicted.max_accuracy_drop.reset();
  perf::Candidate c = t.candidate;
  c.blocked_by.clear();
  perf::candidate_check_constraints(predicted, target, perf::PlanSpace{}, c);
  for (const std::string& b : c.blocked_by) t.blocked_by.push_back("predicted " + b);
}

void check_measured(const api::Constraints& k, Trial& t) {
  if (!t.measured) return;
  const double latency = k.latency_p99 ? t.measured->p99_ms : t.measured->median_ms;
  if (k.max_latency_ms && latency > *k.max_latency_ms)
    t.blocked_by.push_back("measured " + std::string(k.latency_p99 ? "p99 " : "") + "latency " + fmt("%.2f", latency) +
                           " ms > max_latency_ms " + fmt("%g", *k.max_latency_ms));
  if (k.min_throughput_per_s && t.measured_throughput < *k.min_throughput_per_s)
    t.blocked_by.push_back("measured throughput " + fmt("%.1f", t.measured_throughput) + "/s < min_throughput_per_s " +
                           fmt("%g", *k.min_throughput_per_s));
}

// Every compiled candidate timed as it deploys (its instances side by side, each on its threads),
// all of them in rounds (perf::time_deployed_in_rounds), so a slow spell of the machine does not
// decide between them.
// Before each multi-thread timing it waits, up to o.settle_seconds over the whole measurement,
// while the host slows threads down (on the Zen 3 VM, 2026-12-03, ShuffleNetV2 int8 b1 on two
// threads measured 5.76 ms here and 3.96 in the exhaustive bench minutes apart, which made the
// one-thread pair look faster). Returns a sentence for the report when some timing ran slowed.
std::string measure_in_rounds(std::vector<Trial>& trials, const OptimizeOptions& o, int nodes, const api::Constraints& constraints) {
  std::vector<size_t> which;
  std::vector<perf::DeployedRun> runs;
  for (size_t i = 0; i < trials.size(); ++i) {
    const Trial& t = trials[i];
    if (!t.error.empty() || t.candidate.device != "cpu") continue;
    which.push_back(i);
    runs.push_back({&t.plan, t.candidate.threads, std::max(1, t.candidate.instances)});
  }
  if (runs.empty()) return "";
  std::fprintf(stderr, "measuring %zu candidates in %d round%s\n", runs.size(), o.rounds, o.rounds == 1 ? "" : "s");
  const perf::RoundOptions options = perf::candidate_round_options(o.runs, o.rounds);
  perf::HostInterference host(&std::cerr);
  double settle_left = o.settle_seconds;
  std::vector<std::string> slowed;  // timings taken while the host still slowed their threads
  perf::RoundHooks hooks;
  hooks.before = [&](int round, size_t k) {
    const perf::Candidate& c = trials[which[k]].candidate;
    if (perf::wait_for_full_speed(host, c.threads, settle_left, &std::cerr))
      slowed.push_back(c.name() + " (round " + std::to_string(round) + ")");
  };
  hooks.on_timed = [&](int round, size_t k, const perf::Timing& t) {
    std::fprintf(stderr, "  round %d/%d %s: %.3f ms\n", round, o.rounds, trials[which[k]].candidate.name().c_str(), t.median_ms);
  };
  auto timed = perf::time_deployed_in_rounds(runs, o.rounds, options.first, options.later, hooks);
  if (!timed) {
    for (size_t i : which) trials[i].error = "measure: " + timed.error().message;
    std::fprintf(stderr, "measuring failed: %s\n", timed.error().message.c_str());
    return "";
  }
  for (size_t k = 0; k < which.size(); ++k) {
    Trial& t = trials[which[k]];
    const perf::Candidate& c = t.candidate;
    const perf::Timing& timing = (*timed)[k];
    t.measured = timing;
    t.measured_throughput = perf::deployed_throughput(timing, c.batch, std::max(1, c.instances)) * static_cast<double>(nodes);
    check_measured(constraints, t);
    std::fprintf(stderr, "%s: %.3f ms, the median of %d rounds (predicted %.3f, %+.0f%%)\n", c.name().c_str(), timing.median_ms,
                 o.rounds, c.latency_ms, 100.0 * (c.latency_ms / timing.median_ms - 1.0));
  }
  if (slowed.empty()) return "";
  return "The host was slowing multi-thread work down (a thread pace probe: two threads no faster than one) and did not stop "
         "within the " + fmt("%g", o.settle_seconds) + " s kiln optimize waits (--settle): " + first_names(slowed, 5) +
         " were timed slowed, so multi-thread candidates may measure slower than they run on a quiet node.";
}

// Closing the loop (perfmodel/model_runs.h): each measured candidate becomes a `model` row of the target's profile.
Status store_runs(const std::string& db, const std::string& target_id, const std::string& digest, const std::string& app,
                  const std::vector<Trial>& trials) {
  std::vector<perf::MeasuredModelRun> runs;
  for (const Trial& t : trials) {
    if (!t.measured) continue;
    // A model with layers kept out of its precision is another model: its own name keeps later plans
    // (which look up `digest`) from taking it for the precision's runs.
    const std::string model = t.kept_layers ? digest + " kept-fp32:" + std::to_string(t.kept_layers) : digest;
    runs.push_back({model, t.candidate.precision, t.candidate.batch, t.candidate.threads, *t.measured});
  }
  return perf::store_model_runs(db, target_id, "kiln optimize " + app, runs);
}

// Whose verification a candidate shares: its precision's on the CPU, or that precision emulated
// for the GPU.
std::string verification_key(const perf::Candidate& c) { return c.device == "cuda" ? "cuda " + c.precision : c.precision; }

// A GPU candidate's check against the CUDA backend's kernels at its precision (the plugin answers
// without a GPU). `problem` is empty when every step has a kernel.
struct GpuCheck {
  perf::Candidate candidate;
  std::string problem;
  bool verified = false;
};

// The GPU candidates as far as this machine takes them: the best of each GPU precision, compiled
// at its batch with the CUDA pipeline (what `kiln image` puts in a GPU image), checked against the
// CUDA backend's kernels, and, where every step has one, verified by emulating the precision on
// this CPU. Each verified one becomes a trial, held to its predictions (never measured here).
std::vector<Trial> gpu_trials(const std::string& model, const api::ApplicationDescription& app, const planning::PlanOutcome& outcome,
                              std::map<std::string, Verification>& verified, ReferenceCache* cache, std::vector<GpuCheck>& checks) {
  const perf::PlanResult& plan = outcome.result;
  const perf::PlanTarget& target = outcome.target;
  std::vector<Trial> trials;
  // One plan per batch: the GPU precisions share it (the precision is the engine's, not the plan's).
  std::map<int64_t, Result<CompiledModel>> by_batch;
  for (const perf::Candidate& c : plan.candidates) {
    if (c.device != "cuda") continue;
    if (std::any_of(checks.begin(), checks.end(), [&](const GpuCheck& k) { return k.candidate.precision == c.precision; })) continue;
    GpuCheck check{c, {}};
    auto found = by_batch.find(c.batch);
    if (found == by_batch.end()) {
      std::fprintf(stderr, "[gpu] batch %lld: compiling for the GPU\n", static_cast<long long>(c.batch));
      CompileRequest request;
      request.model = model;
      request.dims.batch = c.batch;
      request.passes = cuda_pipeline();
      request.keep_reference_plan = true;
      found = by_batch.emplace(c.batch, compile_model(request, nullptr)).first;
    }
    const Result<CompiledModel>& compiled = found->second;
    DeviceEngineOptions options;
    options.precision = device_precision_from_name(c.precision).value_or(DevicePrecision::fp32);
    if (!compiled) check.problem = "compile: " + compiled.error().message;
    else if (Status runs = cuda_plugin_check_plan(compiled->plan, options); !runs) check.problem = runs.message();
    std::fprintf(stderr, "[gpu] %s: %s", c.name().c_str(), check.problem.empty() ? "every step has a CUDA kernel" : check.problem.c_str());
    if (check.problem.empty()) {
      std::fprintf(stderr, "; verifying %s emulated on this CPU", c.precision.c_str());
      Verification& v = verified[verification_key(c)];
      verify(app, *compiled, v, cache, options.precision);
      if (v.error.empty() && !v.failure.empty() && options.precision != DevicePrecision::fp32)
        gpu_accuracy_control(app, *compiled, options.precision, v, cache);
      check.verified = v.error.empty();
      Trial t;
      t.candidate = c;
      t.passes = join(cuda_pipeline(), ",");
      if (v.gpu_kept) {
        t.cuda_keep_fp32 = v.gpu_kept->keep_fp32;
        reprice_gpu(outcome, t);
      }
      if (!v.error.empty()) t.error = v.error;
      else if (!v.failure.empty()) t.blocked_by.push_back(v.failure);
      check_predicted(app.constraints, target, t);
      t.plan = compiled->plan;
      std::fprintf(stderr, ": %s", t.ok() ? "passed" : !t.error.empty() ? t.error.c_str() : join(t.blocked_by, "; ").c_str());
      trials.push_back(std::move(t));
    }
    std::fprintf(stderr, "\n");
    checks.push_back(std::move(check));
  }
  return trials;
}

bool better(api::Objective objective, const Trial& a, const Trial& b) {
  if (objective == api::Objective::latency) return a.latency() < b.latency();
  return a.throughput() > b.throughput();  // throughput, and cost at a fixed price per node-hour
}

nlohmann::json gpu_json(const std::vector<GpuCheck>& checks) {
  nlohmann::json out = nlohmann::json::array();
  for (const GpuCheck& k : checks) {
    nlohmann::json j = planning::candidate_json(k.candidate, false);
    j["runs_on_gpu"] = k.problem.empty();
    j["problem"] = k.problem;
    j["verified"] = k.verified ? "emulated" : nlohmann::json(false);
    j["measured"] = false;
    out.push_back(std::move(j));
  }
  return out;
}

int run_optimize(const OptimizeOptions& o) {
  auto request = plan_request_load(o.plan);
  if (!request) return report_error(request.error().message);
  dataset_replace((*request)->app.calibration, o.calibration_data);
  dataset_replace((*request)->app.validation, o.validation_data);
  const planning::PlanInputs& in = (*request)->inputs;
  const api::ApplicationDescription* app = &(*request)->app;
  const std::optional<api::TargetInfrastructure>& target = (*request)->target;
  const std::string* model_path = &in.model_path;
  auto outcome = planning::plan_application(in);
  if (!outcome) return report_error(outcome.error().message);
  const perf::PlanResult& plan = outcome->result;
  const bool here = outcome->target.profile_id == perf::fingerprint_local().id && (!target || target->kind == api::TargetKind::local);
  const bool measuring = here && !o.no_measure;
  // The plan's sentences describe predictions; what was verified and measured follows them.
  std::vector<std::string> explanation;
  for (const std::string& line : plan.explanation) explanation.push_back("Plan: " + line);
  if (!here) explanation.push_back("The target is not this machine: candidates are compiled and verified but not measured; the choice uses predictions.");

  std::vector<Trial> trials;
  std::map<std::string, Verification> verified;  // per precision
  const StepPricer target_prices = outcome->predictor ? perf::predicted_step_prices(*outcome->predictor) : StepPricer{};
  std::string calibration_note, bf16_fallback_note;
  const std::vector<perf::Candidate> picks = planning::candidates_to_try(plan, o.top, app->objective);
  const auto gpu = std::find_if(plan.candidates.begin(), plan.candidates.end(), [](const perf::Candidate& c) { return c.device == "cuda"; });
  std::vector<GpuCheck> gpu_checks;
  ReferenceCache reference_cache;  // every verification below compares with the same reference on the same data
  std::vector<Trial> on_gpu = gpu_trials(*model_path, *app, *outcome, verified, &reference_cache, gpu_checks);
  if (!gpu_checks.empty()) {
    std::vector<std::string> runnable, not_runnable;
    for (const GpuCheck& k : gpu_checks)
      if (k.problem.empty()) runnable.push_back(k.candidate.name());
      else not_runnable.push_back(k.candidate.name() + " (" + k.problem + ")");
    explanation.push_back("GPU candidates (best planned: " + gpu->name() + ") were compiled for the GPU and checked against the CUDA "
                          "backend's kernels" + (runnable.empty() ? "" : "; every step has a kernel in " + join(runnable, ", ")) +
                          (not_runnable.empty() ? "" : "; not runnable: " + join(not_runnable, "; ")) + "." +
                          (runnable.empty() ? "" : " Their accuracy was verified by emulating each precision on this CPU "
                                                   "(values rounded as the CUDA engine stores them; fp16 and bf16 came within "
                                                   "0.66-1.23x of an H100's own max error on the torchvision set), and they are not "
                                                   "measured here: they "
                                                   "compete on predicted latency (kiln verify/bench --device cuda on a GPU node "
                                                   "measures them)."));
  }
  for (size_t i = 0; i < picks.size(); ++i) {
    Trial t;
    t.candidate = picks[i];
    const perf::Candidate& c = t.candidate;
    std::fprintf(stderr, "[%zu/%zu] %s: compiling", i + 1, picks.size(), c.name().c_str());
    Verification& v = verified[c.precision];
    auto compiled = compile_candidate(*model_path, *app, c, v, /*control=*/false, "fp32", {}, &calibration_note);
    if (!compiled) {
      t.error = "compile: " + compiled.error().message;
      std::fprintf(stderr, " failed: %s\n", t.error.c_str());
      trials.push_back(std::move(t));
      continue;
    }
    if (!v.ran) {
      std::fprintf(stderr, ", verifying");
      verify(*app, *compiled, v, &reference_cache);
      if (accuracy_control_may_help(*app, c, v)) {
        std::fprintf(stderr, ": every layer %s: %s; accuracy control\n", c.precision.c_str(), v.failure.c_str());
        // int8's kept layers run in bf16 where the plan may use bf16 (the description allows it and the
        // target has it): faster than fp32 and, on these models, nearly as exact. Should bf16 not be
        // exact enough for the limit, the layers fall back to fp32 instead.
        const bool to_bf16 = c.precision == "int8" && outcome->costs.count("bf16") > 0;
        auto controlled = compile_candidate(*model_path, *app, c, v, /*control=*/true, to_bf16 ? "bf16" : "fp32",
                                            target_prices, &calibration_note);
        if (!controlled && to_bf16) {
          std::fprintf(stderr, "  accuracy control with a bf16 fallback: %s; again with fp32\n", controlled.error().message.c_str());
          bf16_fallback_note = "int8's layers could not fall back to bf16 (" + controlled.error().message + "): they fall back to fp32.";
          controlled = compile_candidate(*model_path, *app, c, v, /*control=*/true, "fp32", target_prices, &calibration_note);
        }
        if (!controlled) {
          v.failure += "; accuracy control: " + controlled.error().message;
        } else {
          Verification again;
          verify(*app, *controlled, again, &reference_cache);
          again.every_layer_failure = v.failure;
          again.control = controlled->accuracy_control;
          if (auto costs = kept_layer_costs(*model_path, c.precision, {again.control->kept, again.control->fallback}))
            again.kept_costs = std::move(*costs);
          else explanation.push_back("The " + c.precision + " candidates are priced with every layer reduced: pricing the kept layers failed: " +
                                     costs.error().message);
          v = std::move(again);
          compiled = std::move(controlled);
        }
        std::fprintf(stderr, "[%zu/%zu] %s", i + 1, picks.size(), c.name().c_str());
      }
    }
    if (v.control) t.kept_layers = v.control->kept.size();
    if (v.kept_costs) reprice(*outcome, *v.kept_costs, t);
    t.passes = join(perf::precision_pipeline(c.precision, v.control ? v.control->fallback : "fp32").value(), ",");
    if (v.control && !v.control->kept.empty()) t.passes += " (kept " + v.control->fallback + ": " + join(v.control->kept, ",") + ")";
    if (!v.error.empty()) t.error = v.error;
    else if (!v.failure.empty()) t.blocked_by.push_back(v.failure);
    if (!measuring) check_predicted(app->constraints, outcome->target, t);
    std::fprintf(stderr, "%s\n", t.error.empty() ? "" : (" failed: " + t.error).c_str());
    t.plan = std::move(compiled->plan);
    trials.push_back(std::move(t));
  }
  if (measuring)
    if (std::string slowed = measure_in_rounds(trials, o, outcome->target.nodes, app->constraints); !slowed.empty())
      explanation.push_back(slowed);
  for (Trial& t : on_gpu) trials.push_back(std::move(t));
  if (!calibration_note.empty()) explanation.push_back(calibration_note);
  if (!bf16_fallback_note.empty()) explanation.push_back(bf16_fallback_note);
  for (const auto& [key, v] : verified) {
    if (!v.gpu_kept) continue;
    const KeepFp32Search& k = *v.gpu_kept;
    explanation.push_back(key.substr(5) + " on the GPU with every step at it missed the accuracy limit (" + v.every_layer_failure +
                          "): GPU accuracy control keeps its first " + std::to_string(k.kept_steps) + " of " +
                          std::to_string(k.total_steps) + " steps in float32 (" + first_names(k.keep_fp32, 5) +
                          "), found by emulating the precision on this CPU over " + v.data_source +
                          " (not held out; not yet run on a GPU), and its candidate is priced again with them. The list is "
                          "recorded in model.kiln and applies wherever it runs at that precision.");
  }
  for (const auto& [precision, v] : verified) {
    if (!v.control) continue;
    const AccuracyControlled& k = *v.control;
    explanation.push_back(precision + " with every layer reduced missed the accuracy limit (" + v.every_layer_failure +
                          "): accuracy control kept " + std::to_string(k.kept.size()) + " layers in " + k.fallback +
                          (k.kept.empty() ? "" : " (" + first_names(k.kept, 5) + ")") + " and left " + std::to_string(k.reduced_layers) +
                          " in " + k.precision + " (" + fmt("%.0f", 100 * k.reduced_macs_share) + "% of their MACs). The layers were chosen on " +
                          v.data_source + ", the data verified on: its figures are not held out." +
                          (v.kept_costs && outcome->predictor ? " Its candidates were priced again with those layers."
                                                              : " Its candidates' predictions are for every layer reduced."));
  }

  if (measuring) {
    const std::string db = o.plan.db.empty() ? perf::benchmark_store_default_path() : o.plan.db;
    if (Status stored = store_runs(db, outcome->target.profile_id, outcome->model_digest, app->name, trials); !stored.ok())
      explanation.push_back("The measurements were not stored: " + stored.message());
    else
      explanation.push_back("The measurements were stored in " + db + ": later plans of this model on this target use them.");
  }

  std::vector<std::string> near_misses;
  for (const Trial& t : trials)
    if (!t.candidate.feasible()) near_misses.push_back(t.candidate.name() + " (" + join(t.candidate.blocked_by, ", ") + ")");
  if (!near_misses.empty())
    explanation.push_back("Tried though predicted to miss a constraint (a near miss, the best of its precision, or nothing "
                          "was predicted to meet it): " + join(near_misses, "; ") + ". What was verified and measured decides.");

  std::optional<size_t> chosen;
  for (size_t i = 0; i < trials.size(); ++i)
    if (trials[i].ok() && (!chosen || better(app->objective, trials[i], trials[*chosen]))) chosen = i;

  // report.json: every trial, predicted beside measured, and the choice.
  nlohmann::json candidates = nlohmann::json::array();
  for (size_t i = 0; i < trials.size(); ++i) {
    const Trial& t = trials[i];
    const Verification& v = verified[verification_key(t.candidate)];
    nlohmann::json j = planning::candidate_json(t.candidate, chosen && *chosen == i);
    j["measured_ms"] = t.measured ? nlohmann::json(t.measured->median_ms) : nlohmann::json(nullptr);
    j["measured_p90_ms"] = t.measured ? nlohmann::json(t.measured->p90_ms) : nlohmann::json(nullptr);
    j["measured_p99_ms"] = t.measured ? nlohmann::json(t.measured->p99_ms) : nlohmann::json(nullptr);
    j["measured_runs"] = t.measured ? nlohmann::json(t.measured->runs) : nlohmann::json(nullptr);
    j["prediction_error"] = t.measured ? nlohmann::json(t.candidate.latency_ms / t.measured->median_ms - 1.0) : nlohmann::json(nullptr);
    if (t.measured) j["throughput_per_s"] = t.measured_throughput;
    j["predicted_throughput_per_s"] = t.candidate.throughput_per_s;
    j["accuracy_drop"] = std::isnan(v.accuracy_drop) ? nlohmann::json(nullptr) : nlohmann::json(v.accuracy_drop);
    j["top1_agreement"] = std::isnan(v.top1_agreement) ? nlohmann::json(nullptr) : nlohmann::json(v.top1_agreement);
    j["cosine"] = std::isnan(v.cosine) ? nlohmann::json(nullptr) : nlohmann::json(v.cosine);
    j["verification_data"] = v.data_source;
    j["verified_on"] = v.engine;
    j["accuracy_basis"] = v.accuracy_basis;
    if (v.control)
      j["accuracy_control"] = {{"every_layer_reduced", v.every_layer_failure},
                               {"every_layer_predicted_ms", std::isnan(t.every_layer_predicted_ms) ? nlohmann::json(nullptr)
                                                                                                   : nlohmann::json(t.every_layer_predicted_ms)},
                               {"kept", v.control->kept},
                               {"fallback", v.control->fallback}, {"reduced_layers", v.control->reduced_layers},
                               {"reduced_macs_share", v.control->reduced_macs_share}};
    else if (v.gpu_kept)
      j["accuracy_control"] = {{"every_layer_reduced", v.every_layer_failure},
                               {"every_layer_predicted_ms", std::isnan(t.every_layer_predicted_ms) ? nlohmann::json(nullptr)
                                                                                                   : nlohmann::json(t.every_layer_predicted_ms)},
                               {"kept", v.gpu_kept->keep_fp32},
                               {"fallback", "fp32"}, {"kept_steps", v.gpu_kept->kept_steps}, {"steps", v.gpu_kept->total_steps},
                               {"found_by", "emulation on this CPU (leading steps, bisection)"}};
    else
      j["accuracy_control"] = nullptr;
    if (t.candidate.device == "cuda") j["cuda_keep_fp32"] = t.cuda_keep_fp32;
    j["error"] = t.error;
    j["predicted_blocked_by"] = t.candidate.blocked_by;  // why the plan did not count it feasible (a near miss)
    j["blocked_by"] = t.blocked_by;
    j["passed"] = t.ok();
    j["passes"] = t.passes;
    candidates.push_back(std::move(j));
  }
  if (chosen) {
    const Trial& t = trials[*chosen];
    explanation.push_back("Optimized choice: " + t.candidate.name() + (t.measured ? ", measured " + fmt("%.3f", t.measured->median_ms) +
                                                                                      " ms per batch, " + fmt("%.1f", t.measured_throughput) + " samples/s"
                                                                                : ", predicted " + fmt("%.3f", t.candidate.latency_ms) + " ms per batch") + "." +
                          (t.candidate.device == "cuda" ? " It runs on the GPU at " + t.candidate.precision + " (kiln image --device cuda "
                                                          "--cuda-precision " + t.candidate.precision + "); its accuracy was verified by "
                                                          "emulation, its latency is a prediction." : ""));
  } else {
    explanation.push_back("Infeasible: none of the " + std::to_string(trials.size()) + " candidates tried passed verification and the constraints.");
  }
  std::error_code ec;
  fs::create_directories(o.output, ec);
  const nlohmann::json plan_doc = planning::plan_json(in, *outcome);
  const nlohmann::json report = {{"format", "kiln-optimize-report"}, {"version", 1},
                                 {"status", chosen ? "ok" : "infeasible"}, {"application", app->name},
                                 {"model", *model_path}, {"model_sha256", outcome->model_digest},
                                 {"objective", api::objective_name(app->objective)}, {"target", plan_doc["target"]},
                                 {"measured", measuring}, {"measurement_rounds", measuring ? nlohmann::json(o.rounds) : nlohmann::json(nullptr)},
                                 {"chosen", chosen ? candidates[*chosen] : nlohmann::json(nullptr)},
                                 {"candidates", candidates}, {"gpu_candidates", gpu_json(gpu_checks)}, {"explanation", explanation}};
  for (const auto& [name, doc] : {std::pair{"plan.json", &plan_doc}, std::pair{"report.json", &report}}) {
    std::ofstream out(fs::path(o.output) / name, std::ios::trunc);
    out << doc->dump(2) << '\n';
    if (!out.good()) return report_error("cannot write " + (fs::path(o.output) / name).string());
  }
  if (chosen) {
    const Trial& t = trials[*chosen];
    const std::string path = (fs::path(o.output) / "model.kiln").string();
    const std::string runs_on = t.candidate.device == "cuda" ? ", for the GPU at " + t.candidate.precision : "";
    const bool gpu = t.candidate.device == "cuda";
    if (Status written = plan_write_file(path, t.plan, {std::string("kiln ") + KILN_VERSION, *model_path, t.passes,
                                                         "batch " + std::to_string(t.candidate.batch) + runs_on + ", chosen by kiln optimize",
                                                         gpu ? "cuda" : "cpu", gpu ? t.candidate.precision : "",
                                                         gpu ? t.cuda_keep_fp32 : std::vector<std::string>{}});
        !written.ok())
      return report_error(written.message());
  }

  if (o.json) {
    std::cout << report.dump(2) << '\n';
  } else {
    std::printf("%-18s %12s %12s %8s %12s %10s %10s  %s\n", "candidate", "predicted ms", "measured ms", "error", "samples/s",
                "acc. drop", "top-1 agr", "result");
    for (size_t i = 0; i < trials.size(); ++i) {
      const Trial& t = trials[i];
      const Verification& v = verified[verification_key(t.candidate)];
      std::string result = chosen && *chosen == i ? "chosen" : t.ok() ? "passed" : "";
      if (v.control) result += (result.empty() ? "" : ", ") + std::to_string(v.control->kept.size()) + " layers kept " + v.control->fallback;
      if (!t.error.empty()) result = t.error;
      for (const std::string& b : t.blocked_by) result += (result.empty() ? "" : "; ") + b;
      if (!t.candidate.feasible()) result += (result.empty() ? "" : "; ") + std::string("predicted to miss: ") + join(t.candidate.blocked_by, ", ");
      std::printf("%-18s %12.3f %12s %8s %12.1f %10s %10s  %s\n", t.candidate.name().c_str(), t.candidate.latency_ms,
                  t.measured ? fmt("%.3f", t.measured->median_ms).c_str() : "-",
                  t.measured ? fmt("%+.0f%%", 100.0 * (t.candidate.latency_ms / t.measured->median_ms - 1.0)).c_str() : "-",
                  t.throughput(), std::isnan(v.accuracy_drop) ? "-" : fmt("%.4f", v.accuracy_drop).c_str(),
                  std::isnan(v.top1_agreement) ? "-" : fmt("%.4f", v.top1_agreement).c_str(), result.c_str());
    }
    std::printf("\n");
    for (const std::string& line : explanation) std::printf("%s\n", line.c_str());
    std::printf("\nwrote %s/plan.json, report.json%s\n", o.output.c_str(), chosen ? ", model.kiln" : "");
  }
  if (!chosen) {  // the last line of a log that holds both streams (kiln serve's compile stage) says why
    std::fflush(stdout);
    std::fprintf(stderr, "kiln: infeasible: none of the %zu candidates tried passed verification and the constraints (%s/report.json)\n",
                 trials.size(), o.output.c_str());
  }
  return chosen ? kExitOk : kExitInfeasible;
}

}  // namespace

void add_optimize_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<OptimizeOptions>();
  CLI::App* cmd = app.add_subcommand("optimize", "Plan, then compile, verify and measure the best candidates and choose on measured numbers");
  opts->plan.add_to(*cmd);
  cmd->add_option("--output,-o", opts->output, "Folder for plan.json, report.json and model.kiln (default ./optimized)");
  cmd->add_option("--top", opts->top, "Candidates compiled, verified and measured (default 3, plus the best one of each other precision)")->check(CLI::PositiveNumber);
  cmd->add_option("--runs", opts->runs, "Timed runs per candidate, at least, over all rounds (default 20)")->check(CLI::PositiveNumber);
  cmd->add_option("--rounds", opts->rounds, "Rounds the candidates are timed in, each timing every candidate once; the median of the "
                  "rounds counts (default 3)")->check(CLI::PositiveNumber);
  cmd->add_option("--settle", opts->settle_seconds, "Seconds waited at most, over the measurement, for the host to stop slowing "
                  "multi-thread work down before timing multi-thread candidates (default 60; 0: no waiting)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-measure", opts->no_measure, "Compile and verify only; choose on predictions");
  cmd->add_flag("--json", opts->json, "Print report.json instead of the table");
  cmd->add_option("--calibration-data", opts->calibration_data, "An .npz file instead of the description's data.calibration");
  cmd->add_option("--validation-data", opts->validation_data, "An .npz file instead of the description's data.validation");
  cmd->callback([opts, &run] { run = [opts] { return run_optimize(*opts); }; });
}

}  // namespace kiln::cli

// The performance model's whole-model check: for each torchvision export in the model cache
// (`*_bn.onnx` skipped), batch, precision and thread count, predicts the latency from the target's
// stored benchmarks (kiln predict's path), then measures it on the Engine (median of timed runs
// after warm-up, as `kiln bench`) and prints predicted vs measured with the error. Ends with the
// share of cases within +-10%.
// The predictor is fitted only on the store's kernel-sweep and bandwidth rows (designed one-op
// shapes, perfmodel/microbench/sweep_grid.cpp); nothing measured here is written to the store.
// Usage: kiln_perfmodel_eval [--cache DIR] [--db FILE] [--target ID] [--models a,b] [--batches 1,8,32]
//                            [--precisions fp32,bf16,int8] [--threads 1,2] [--runs N] [--budget-ms MS] [--window-ms MS]
//                            [--method auto|roofline|knn] [--neighbours K]   (the fit's choices, to compare)
//                            [--steps]   (per case, predicted vs measured time per kind of step, where the error is,
//                                         and the five single steps that miss most; --top-steps N: the N that do)
//                            [--canary]  (before each case, re-time a few of the profile's own sweep points (convs;
//                                         an Add and a Concat) at the case's threads: time now over stored time says how
//                                         far the machine has drifted since it was profiled; reported beside the
//                                         error and used to split the summary; at two threads also the thread
//                                         pace: two threads' speed on a streaming Add over one thread's,
//                                         "pace x0.30" in a shared VM's slow mode)
//                            [--calibrate] (--canary, and the prediction scored is the one at the pace the
//                                         compute canary read just before the case, as `kiln predict --calibrate`
//                                         prices it (perfmodel/machine_pace.h); the uncalibrated prediction and
//                                         its scores are printed beside it)
//                            [--settle S] (before each multi-thread case, while the thread pace probe says the
//                                         host slows threads down, and with --canary also while the compute canary
//                                         runs over 1.25x its stored time, wait for that to end, at most S seconds per
//                                         case, as kiln bench-target --settle does before its multi-thread points; the
//                                         wait is printed beside the case, and so is a case measured still slowed)
//                            [--predict-only] (print each case's prediction, measure nothing)
//                            [--passes N] (measure the whole matrix N times, one pass after the other: the share of
//                                         cases whose measurements in two passes agree within +-10% is this machine's
//                                         ceiling for any predictor against one pass; the prediction is scored on each
//                                         pass, on the median of the passes and on the lowest of them (a shared VM's
//                                         contention only adds time, so the lowest of passes minutes apart is the
//                                         closest to the machine's own speed); --repeat is --passes 2)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "compilers/ir/shape_inference.h"
#include "compilers/onnx/import.h"
#include "kernels/engine.h"
#include "perfmodel/machine_pace.h"
#include "perfmodel/microbench/kernel_sweep.h"
#include "perfmodel/microbench/thread_pace.h"
#include "perfmodel/plan_features.h"
#include "perfmodel/precision_compile.h"
#include "perfmodel/predictor.h"
#include "perfmodel/store.h"
#include "perfmodel/target_profile.h"

#ifndef KILN_DEFAULT_MODEL_CACHE
#define KILN_DEFAULT_MODEL_CACHE "build/model-cache"
#endif

namespace fs = std::filesystem;
using namespace kiln;

namespace {

struct Options {
  std::string cache = KILN_DEFAULT_MODEL_CACHE;
  std::string db;
  std::string target;
  std::vector<std::string> models;
  std::vector<int64_t> batches = {1, 8, 32};
  std::vector<std::string> precisions = {"fp32", "bf16", "int8"};
  std::vector<int> threads = {1, 2};
  bool steps = false;        // print the per-kind breakdown of each case
  int top_steps = 5;         // --steps: this many single steps that miss most
  bool canary = false;       // time the profile's canary points before each case
  bool calibrate = false;    // and score the prediction at the machine's pace they read
  bool predict_only = false; // print the predictions, measure nothing (to score two profiles on one run's measurements)
  // Measure the whole matrix this many times: how often two measurements of the same case minutes
  // apart agree within +-10% is the most any predictor can score against one pass on this machine.
  int passes = 1;
  double settle_s = 0;       // wait at most this long per multi-thread case for the host's slow mode to end
  int runs = 30;             // at most, after warm-up (more while under window_ms)
  double budget_ms = 2000;   // timed runs stop after this (at least 3)
  // Runs continue until they span this much (up to 300 runs): a shared VM's bursts of foreign
  // load last tens of milliseconds, and thirty 1-ms runs would sit inside one.
  double window_ms = 400;
  perf::FitOptions fit;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) if (!item.empty()) out.push_back(item);
  return out;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps") {
      o.steps = true;
      continue;
    }
    if (a == "--canary") {
      o.canary = true;
      continue;
    }
    if (a == "--calibrate") {
      o.canary = o.calibrate = true;
      continue;
    }
    if (a == "--predict-only") {
      o.predict_only = true;
      continue;
    }
    if (a == "--repeat") {
      o.passes = std::max(o.passes, 2);
      continue;
    }
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (a == "--cache") o.cache = v;
    else if (a == "--db") o.db = v;
    else if (a == "--target") o.target = v;
    else if (a == "--models") o.models = split(v);
    else if (a == "--precisions") o.precisions = split(v);
    else if (a == "--settle") o.settle_s = std::max(0.0, std::atof(v.c_str()));
    else if (a == "--top-steps") o.steps = true, o.top_steps = std::max(1, std::atoi(v.c_str()));
    else if (a == "--passes") o.passes = std::max(1, std::atoi(v.c_str()));
    else if (a == "--runs") o.runs = std::max(3, std::atoi(v.c_str()));
    else if (a == "--budget-ms") o.budget_ms = std::atof(v.c_str());
    else if (a == "--window-ms") o.window_ms = std::atof(v.c_str());
    else if (a == "--method") o.fit.method = v;
    else if (a == "--neighbours") o.fit.neighbours = std::max(1, std::atoi(v.c_str()));
    else if (a == "--batches") {
      o.batches.clear();
      for (const std::string& b : split(v)) o.batches.push_back(std::atoll(b.c_str()));
    } else if (a == "--threads") {
      o.threads.clear();
      for (const std::string& t : split(v)) o.threads.push_back(std::atoi(t.c_str()));
    } else return false;
  }
  return true;
}

Result<Plan> compile(const fs::path& path, int64_t batch, const std::string& precision) {
  KILN_ASSIGN(graph, onnx_import_file(path.string()));
  ShapeInferenceOptions infer;
  for (ValueId id : graph.inputs) {  // the batch symbol on dim 0 of every input, as --batch does
    const ValueType& t = graph.value(id).type;
    if (t.rank_known && !t.shape.empty() && !t.shape[0].known() && !t.shape[0].symbol.empty())
      infer.bindings[t.shape[0].symbol] = batch;
  }
  KILN_TRY(graph_infer_shapes(graph, infer).status());
  return perf::precision_compile(std::move(graph), precision);
}

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

struct Measured {
  double median = 0, p10 = 0, p90 = 0;
};

// Median (and p10, p90) over timed runs after two warm-up runs (the first pays page faults and
// primitive set-up).
Result<Measured> measure(Engine& engine, const std::vector<Tensor>& inputs, const Options& o) {
  for (int i = 0; i < 2; ++i) KILN_TRY(engine.run(inputs).status());
  std::vector<double> ms;
  double spent = 0;
  while ((static_cast<int>(ms.size()) < o.runs || (spent < o.window_ms && ms.size() < 300)) &&
         (ms.size() < 3 || spent < o.budget_ms)) {
    const auto start = std::chrono::steady_clock::now();
    KILN_TRY(engine.run(inputs).status());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    spent += ms.back();
  }
  std::sort(ms.begin(), ms.end());
  return Measured{ms[ms.size() / 2], ms[ms.size() / 10], ms[ms.size() * 9 / 10]};
}

// Where a case's error is: per kind of step (the sweep op, or the plan op of steps the sweep has
// no counterpart for), the predicted time beside the in-model step time (median of 5 profiled runs).
void print_breakdown(Engine& engine, const std::vector<Tensor>& inputs, const std::vector<perf::StepFeatures>& features,
                     const perf::PlanPrediction& p, size_t top_steps) {
  std::vector<std::vector<double>> runs;
  for (int r = 0; r < 5; ++r) {
    std::vector<double> step_ms;
    if (!engine.run(inputs, &step_ms)) return;
    runs.push_back(std::move(step_ms));
  }
  struct Kind {
    int steps = 0;
    double predicted = 0, measured = 0;
  };
  std::map<std::string, Kind> kinds;
  struct Miss {
    double by = 0;  // measured - predicted
    size_t step = 0;
    double measured = 0;
  };
  std::vector<Miss> misses;
  double measured_sum = 0;
  for (size_t i = 0; i < features.size() && i < p.steps.size(); ++i) {
    std::vector<double> v;
    for (const auto& r : runs) if (i < r.size()) v.push_back(r[i]);
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    const perf::StepFeatures& f = features[i];
    Kind& k = kinds[(f.m.op.empty() ? "~" + f.op : f.m.op + "/" + f.m.dtype) + " " + f.kernel];
    ++k.steps;
    k.predicted += p.steps[i].ms;
    k.measured += v[v.size() / 2];
    measured_sum += v[v.size() / 2];
    misses.push_back({v[v.size() / 2] - p.steps[i].ms, i, v[v.size() / 2]});
  }
  for (const auto& [name, k] : kinds)
    std::printf("      %-56s %3d steps  pred %9.3f  meas %9.3f  %+6.1f%%\n", name.c_str(), k.steps, k.predicted, k.measured,
                k.measured > 0 ? 100 * (k.predicted / k.measured - 1) : 0.0);
  std::printf("      %-56s            pred %9.3f  meas %9.3f (sum of steps)\n", "all", p.total_ms, measured_sum);
  // The single steps that miss most, either way: what to sweep next.
  std::sort(misses.begin(), misses.end(), [](const Miss& a, const Miss& b) { return std::abs(a.by) > std::abs(b.by); });
  for (size_t j = 0; j < misses.size() && j < top_steps; ++j) {
    const perf::StepFeatures& f = features[misses[j].step];
    std::printf("        %+8.3f ms  pred %8.3f meas %8.3f  %s %s (%s; %s %lld->%lld %lldx%lld k%lld s%lld; %s)\n", -misses[j].by,
                p.steps[misses[j].step].ms, misses[j].measured, f.op.c_str(), f.node.c_str(), f.kernel.c_str(), f.m.dtype.c_str(),
                static_cast<long long>(f.m.in_c), static_cast<long long>(f.m.out_c), static_cast<long long>(f.m.out_h),
                static_cast<long long>(f.m.out_w), static_cast<long long>(f.m.kernel_h), static_cast<long long>(f.m.stride),
                p.steps[misses[j].step].how.c_str());
  }
}

// The upper edge of Drift::steady's band, and --settle's bound on the compute canary.
constexpr double kSettleComputeDrift = 1.25;

struct Drift {
  double compute = 0, memory = 0;  // 0: not timed
  // Multi-thread cases: the thread pace probe (perfmodel/microbench/thread_pace.h), which needs no
  // stored point (a profile whose multi-thread data points were all flagged has no memory canary).
  std::optional<perf::ThreadPace> pace;
  // Within a quarter of the profile's times: one canary shape's own noise is +-10-15% here, while
  // the two-vCPU slow mode moves data 3x slower. The pace by bench-target's own rule: a point
  // measured now would count as loaded.
  bool steady() const {
    const auto near = [](double r) { return r == 0 || (r >= 0.8 && r <= kSettleComputeDrift); };
    return near(compute) && near(memory) && (!pace || perf::thread_pace_lost_cpus(*pace) <= perf::kLoadSlack);
  }
};

// The machine's drift now, from the thread count's pace canaries (perfmodel/machine_pace.h).
Drift canary_drift(perf::PaceCanaries& c) {
  const perf::MachinePace pace = perf::pace_measure(c);
  return {pace.compute, pace.memory, std::nullopt};
}

std::string percent(double fraction) {
  if (fraction < 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * fraction);
  return buf;
}

double load_avg() {
  double l = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = 0;
    std::fclose(f);
  }
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: kiln_perfmodel_eval [--cache DIR] [--db FILE] [--target ID] [--models a,b] "
                         "[--batches 1,8,32] [--precisions fp32,bf16,int8] [--threads 1,2] [--runs N] [--budget-ms MS] [--window-ms MS] [--method auto|roofline|knn] [--neighbours K] [--steps] [--top-steps N] [--canary] [--calibrate] [--settle S] [--predict-only] [--passes N | --repeat]\n");
    return 2;
  }
  const std::string db = o.db.empty() ? perf::benchmark_store_default_path() : o.db;
  auto profile = perf::target_profile_load(db, o.target);
  if (!profile) {
    std::fprintf(stderr, "kiln_perfmodel_eval: %s\n", profile.error().message.c_str());
    return 1;
  }
  auto predictor = perf::LatencyPredictor::fit(profile->measurements, o.fit);
  if (!predictor) {
    std::fprintf(stderr, "kiln_perfmodel_eval: %s\n", predictor.error().message.c_str());
    return 1;
  }
  const perf::FitSummary& fit = predictor->summary();
  std::printf("target %s (%s), store %s\n", profile->target.fingerprint.id.c_str(), profile->target.fingerprint.cpu_model.c_str(), db.c_str());
  std::printf("fit on %d kernel-sweep points (%d measured under load%s) + %d bandwidth points + %d weight-reuse points; method %s\n",
              fit.points_used, fit.points_loaded, fit.loaded_kept ? ", kept: all were" : ", dropped", fit.bandwidth_points,
              fit.weight_reuse_points, fit.method.c_str());
  if (fit.points_repaired > 0)
    std::printf("%d conv/gemm points repriced: their one-thread and two-thread readings contradicted each other\n", fit.points_repaired);
  if (!fit.groups_only_loaded.empty()) {
    std::printf("groups with every point under load, priced from another thread count:");
    for (const std::string& g : fit.groups_only_loaded) std::printf(" %s", g.c_str());
    std::printf("\n");
  }
  std::printf("held-out sweep points (5-fold): median |error| roofline %.1f%%, roofline+knn %.1f%%, chosen per group %.1f%%; "
              "within 10%%: %.0f%% / %.0f%% / %.0f%%\n",
              100 * fit.heldout_median_roofline, 100 * fit.heldout_median_knn, 100 * fit.heldout_median_chosen,
              100 * fit.heldout_within10_roofline, 100 * fit.heldout_within10_knn, 100 * fit.heldout_within10_chosen);
  std::printf("%-16s %-5s %3s %6s %10s %10s %10s %9s %9s %s\n", "group", "dtype", "thr", "points", "overhead", "GMAC/s", "GB/s",
              "roof err", "knn err", "used");
  for (const perf::GroupSummary& g : fit.groups)
    std::printf("%-16s %-5s %3d %6d %8.4fms %10.1f %10.1f %9s %9s %s\n", g.op.c_str(), g.dtype.c_str(), g.threads, g.points,
                g.params.overhead_ms, g.params.macs_per_ms / 1e6, g.params.bytes_per_ms / 1e6, percent(g.heldout_roofline).c_str(),
                percent(g.heldout_knn).c_str(), g.use_knn ? "knn" : "roofline");
  std::map<int, perf::PaceCanaries> canaries;
  std::map<int, perf::ThreadPaceProbe> paces;
  if (o.canary || o.settle_s > 0)
    for (int threads : o.threads)
      if (threads > 1)
        if (auto probe = perf::ThreadPaceProbe::create(threads)) paces.emplace(threads, std::move(*probe));
  if (o.canary) {
    canaries = perf::pace_canaries(*profile, o.threads);
    for (auto& [threads, c] : canaries) {
      std::printf("canary t%d:", threads);
      for (const perf::BenchPoint& p : c.points) std::printf(" %s %s", p.record.key.c_str(), p.record.dtype.c_str());
      std::printf("\n");
    }
  }
  if (const std::string warning = perf::omp_passive_wait_warning(); !warning.empty()) std::printf("warning: %s\n", warning.c_str());
  std::printf("load average at start %.2f\n\n", load_avg());

  std::vector<fs::path> models;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o.cache, ec)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() != ".onnx" || stem.ends_with("_bn")) continue;
    if (!o.models.empty() && std::find(o.models.begin(), o.models.end(), stem) == o.models.end()) continue;
    models.push_back(e.path());
  }
  std::sort(models.begin(), models.end());
  if (models.empty()) {
    std::fprintf(stderr, "kiln_perfmodel_eval: no models in %s (build the model cache or pass --cache)\n", o.cache.c_str());
    return 1;
  }

  std::printf("%-20s %5s %5s %3s %12s %12s %8s %13s %6s\n", "model", "batch", "prec", "thr", "predicted_ms", "measured_ms", "error%",
              "p10..p90 %", "load");
  struct CaseResult {
    std::string model, precision;
    int64_t batch = 0;
    int threads = 0;
    double predicted = 0, measured = 0;
    double uncalibrated = 0;  // the prediction before --calibrate's pace (equal to `predicted` without it)
    Drift drift;  // the machine's drift while this case ran (--canary); zeros: not timed
    double waited_s = 0;   // --settle: time waited for the host's slow mode to end
    bool slowed = false;   // --settle: measured while still slowed (the wait ran out)
  };
  // The same case in another pass's results, or null.
  auto same_case = [](const std::vector<CaseResult>& results, const CaseResult& r) -> const CaseResult* {
    for (const CaseResult& f : results)
      if (f.model == r.model && f.batch == r.batch && f.precision == r.precision && f.threads == r.threads) return &f;
    return nullptr;
  };
  // One pass over the matrix; `first` (on the second pass) holds the first pass's results in order.
  auto run_pass = [&](const std::vector<CaseResult>* first) {
    std::vector<CaseResult> results;
    for (const fs::path& path : models)
      for (int64_t batch : o.batches)
        for (const std::string& precision : o.precisions) {
          auto plan = compile(path, batch, precision);
          if (!plan) {
            std::printf("%-20s %5lld %5s  compile failed: %s\n", path.stem().c_str(), static_cast<long long>(batch), precision.c_str(),
                        plan.error().message.c_str());
            continue;
          }
          const std::vector<Tensor> inputs = seeded_inputs(*plan);
          for (int threads : o.threads) {
            auto engine = Engine::create(*plan, {threads, nullptr});
            if (!engine) {
              std::printf("%-20s %5lld %5s %3d  engine failed: %s\n", path.stem().c_str(), static_cast<long long>(batch),
                          precision.c_str(), threads, engine.error().message.c_str());
              continue;
            }
            const std::vector<perf::StepFeatures> features = perf::plan_features(*plan, (*engine)->steps(), (*engine)->threads());
            const perf::PlanPrediction p = predictor->predict(features);
            if (o.predict_only) {
              std::printf("%-20s %5lld %5s %3d %12.3f\n", path.stem().c_str(), static_cast<long long>(batch), precision.c_str(), threads,
                          p.total_ms);
              continue;
            }
            // --settle: wait while the host slows threads down (bench-target's rule: any CPU lost), and
            // with --canary also while the compute canary runs over a quarter slower than profiled: a
            // slow mode can hit compute on one vCPU only, which the streaming Add does not feel
            // (2026-11-29: a two-thread conv 40-60% over its stored time, the pace probe x1.1-1.2).
            double waited_s = 0;
            bool slowed = false;
            Drift drift;
            const bool has_canary = canaries.count(threads) > 0;
            if (auto it = paces.find(threads); o.settle_s > 0 && it != paces.end())
              for (;;) {
                auto pace = it->second.measure();
                slowed = pace && perf::thread_pace_lost_cpus(*pace) > 0;
                if (!slowed && has_canary) {
                  drift = canary_drift(canaries.at(threads));
                  slowed = drift.compute > kSettleComputeDrift;
                }
                if (!slowed || waited_s >= o.settle_s) break;
                const double step = std::min(5.0, o.settle_s - waited_s);
                std::this_thread::sleep_for(std::chrono::duration<double>(step));
                waited_s += step;
              }
            if (drift.compute == 0 && has_canary) drift = canary_drift(canaries.at(threads));
            if (auto it = paces.find(threads); o.canary && it != paces.end())
              if (auto pace = it->second.measure()) drift.pace = *pace;
            auto measured = measure(**engine, inputs, o);
            if (!measured) {
              std::printf("%-20s run failed: %s\n", path.stem().c_str(), measured.error().message.c_str());
              continue;
            }
            const double predicted = o.calibrate ? perf::pace_calibrated(p, {drift.compute, drift.memory}).total_ms : p.total_ms;
            const double err = predicted / measured->median - 1.0;
            const CaseResult r{path.stem().string(), precision, batch, threads, predicted, measured->median, p.total_ms, drift, waited_s, slowed};
            // The measured spread beside the error: p10 and p90 of the runs relative to their median.
            std::printf("%-20s %5lld %5s %3d %12.3f %12.3f %+7.1f%% %+5.0f..%+4.0f%% %6.2f%s", path.stem().c_str(),
                        static_cast<long long>(batch), precision.c_str(), threads, predicted, measured->median, 100 * err,
                        100 * (measured->p10 / measured->median - 1), 100 * (measured->p90 / measured->median - 1), load_avg(),
                        std::abs(err) <= 0.10 ? "   " : "  *");
            // A memory canary needs a quiet stored Add/Concat at these threads; without one it is not timed.
            if (drift.compute > 0) {
              std::printf("  canary x%.2f", drift.compute);
              std::printf(drift.memory > 0 ? " mem x%.2f" : " mem n/a", drift.memory);
            }
            if (drift.pace) std::printf(" pace x%.2f", drift.pace->speedup());
            if (o.calibrate) std::printf("  uncalibrated %.3f (%+.1f%%)", p.total_ms, 100 * (p.total_ms / measured->median - 1));
            if (waited_s > 0) std::printf("  waited %.0f s%s", waited_s, slowed ? ", still slowed" : "");
            if (const CaseResult* f = first ? same_case(*first, r) : nullptr)
              std::printf("  first pass %12.3f (%+.1f%%)", f->measured, 100 * (r.measured / f->measured - 1));
            std::printf("\n");
            results.push_back(r);
            if (o.steps) print_breakdown(**engine, inputs, features, p, static_cast<size_t>(o.top_steps));
            std::fflush(stdout);
          }
        }
    return results;
  };
  auto summarize = [](const std::vector<CaseResult>& results, const char* what) {
    int within = 0;
    std::map<std::string, std::pair<int, int>> by_group;  // "prec t" -> within, cases
    std::vector<double> errors;
    for (const CaseResult& r : results) {
      const double err = r.predicted / r.measured - 1.0;
      const bool ok = std::abs(err) <= 0.10;
      within += ok;
      auto& g = by_group[r.precision + " t" + std::to_string(r.threads)];
      g.first += ok;
      ++g.second;
      errors.push_back(std::abs(err));
    }
    std::sort(errors.begin(), errors.end());
    const int cases = static_cast<int>(results.size());
    std::printf("\n%swithin +-10%%: %d of %d cases (%.0f%%); median |error| %.1f%%\n", what, within, cases,
                100.0 * within / cases, 100 * errors[errors.size() / 2]);
    int calibrated = 0, uncalibrated_within = 0;
    for (const CaseResult& r : results) {
      calibrated += r.uncalibrated != r.predicted;
      uncalibrated_within += std::abs(r.uncalibrated / r.measured - 1.0) <= 0.10;
    }
    if (calibrated > 0)
      std::printf("  (at the pace the compute canary read; the uncalibrated prediction: %d of %d within +-10%%)\n",
                  uncalibrated_within, cases);
    for (const auto& [g, v] : by_group) std::printf("  %-10s %d of %d\n", g.c_str(), v.first, v.second);
    // Split by the canary: cases measured while the machine ran as when profiled (Drift::steady)
    // against cases measured on a drifted machine. The score above stays the whole table's.
    int steady = 0, steady_within = 0, drifted = 0, drifted_within = 0;
    for (const CaseResult& r : results) {
      if (!(r.drift.compute > 0)) continue;
      const bool ok = std::abs(r.predicted / r.measured - 1.0) <= 0.10;
      if (r.drift.steady()) ++steady, steady_within += ok;
      else ++drifted, drifted_within += ok;
    }
    int waited = 0, slowed = 0, slowed_within = 0;
    double waited_s = 0;
    for (const CaseResult& r : results) {
      waited += r.waited_s > 0;
      waited_s += r.waited_s;
      if (r.slowed) ++slowed, slowed_within += std::abs(r.predicted / r.measured - 1.0) <= 0.10;
    }
    if (waited > 0)
      std::printf("  settle: %d cases waited for the host's slow mode to end (%.0f s in all); %d measured still slowed, %d of them within +-10%%\n",
                  waited, waited_s, slowed, slowed_within);
    if (steady + drifted > 0)
      std::printf("  by canary: machine as profiled (both canaries x0.8..x1.25, threads not slowed to a loaded point's pace) %d of %d within +-10%%; drifted %d of %d\n", steady_within,
                  steady, drifted_within, drifted);
  };

  std::vector<std::vector<CaseResult>> passes;
  passes.push_back(run_pass(nullptr));
  if (o.predict_only) return 0;
  if (passes.front().empty()) return 1;
  summarize(passes.front(), "");
  for (int pass = 2; pass <= o.passes; ++pass) {
    std::printf("\npass %d of %d (the same cases measured again)\n", pass, o.passes);
    passes.push_back(run_pass(&passes.front()));
    if (passes.back().empty()) return 1;
    summarize(passes.back(), ("pass " + std::to_string(pass) + ": ").c_str());
  }
  if (passes.size() < 2) return 0;
  // The machine against itself: each pair of passes, the share of cases measured within +-10% of each other.
  std::printf("\nrepeatability (no predictor can score above about this against one pass here):\n");
  for (size_t a = 0; a < passes.size(); ++a)
    for (size_t b = a + 1; b < passes.size(); ++b) {
      int agree = 0, paired = 0;
      for (const CaseResult& rb : passes[b])
        if (const CaseResult* ra = same_case(passes[a], rb)) {
          ++paired;
          agree += std::abs(rb.measured / ra->measured - 1.0) <= 0.10;
        }
      std::printf("  passes %zu and %zu agree within +-10%% in %d of %d cases (%.0f%%)\n", a + 1, b + 1, agree, paired,
                  paired ? 100.0 * agree / paired : 0.0);
    }
  // Every case measured in every pass, scored against the median and the lowest of its measurements.
  std::vector<CaseResult> median_of_passes, lowest_of_passes;
  std::printf("\n%-20s %5s %5s %3s %12s %12s %12s %8s %8s %8s\n", "model", "batch", "prec", "thr", "predicted_ms", "median_ms",
              "lowest_ms", "pred low", "err med", "err low");
  for (const CaseResult& r : passes.front()) {
    // Each pass's (measured, predicted): with --calibrate the prediction moves with each pass's canary,
    // so the lowest (median) measurement is scored against its own pass's prediction.
    std::vector<std::pair<double, double>> runs;
    for (const std::vector<CaseResult>& pass : passes)
      if (const CaseResult* c = same_case(pass, r)) runs.emplace_back(c->measured, c->predicted);
    if (runs.size() != passes.size()) continue;
    std::sort(runs.begin(), runs.end());
    const size_t mid = runs.size() / 2;
    const auto median = runs.size() % 2 ? runs[mid]
                                        : std::pair{0.5 * (runs[mid - 1].first + runs[mid].first), 0.5 * (runs[mid - 1].second + runs[mid].second)};
    CaseResult m = r, low = r;
    std::tie(m.measured, m.predicted) = median;
    std::tie(low.measured, low.predicted) = runs.front();
    m.drift = low.drift = Drift{};  // a combination of passes has no one canary reading
    m.waited_s = low.waited_s = 0;
    m.slowed = low.slowed = false;
    median_of_passes.push_back(m);
    lowest_of_passes.push_back(low);
    const double em = m.predicted / m.measured - 1.0, el = low.predicted / low.measured - 1.0;
    std::printf("%-20s %5lld %5s %3d %12.3f %12.3f %12.3f %8.3f %+7.1f%% %+7.1f%%%s\n", r.model.c_str(), static_cast<long long>(r.batch),
                r.precision.c_str(), r.threads, m.predicted, m.measured, low.measured, low.predicted, 100 * em, 100 * el,
                std::abs(el) <= 0.10 ? "" : "  *");
  }
  summarize(median_of_passes, "against the median of the passes: ");
  summarize(lowest_of_passes, "against the lowest of the passes: ");
  return 0;
}

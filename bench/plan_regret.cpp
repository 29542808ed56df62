// Decision quality of `kiln plan` (issue 5, must-show 2): for each model, the whole space
// precision × batch × threads per instance (instances filling the cores) is measured
// exhaustively on this machine; then for each case (objective + constraint) kiln's choice, made
// from predictions only (earlier whole-model measurements are not used), is compared with the best
// configuration the measurements show. Regret = how much worse kiln's choice measures than that
// best (latency: pick/best - 1; throughput: 1 - pick/best); a pick that breaks a constraint when
// measured counts as a miss. Ends with the share of cases within 5%.
// Constraints are set relative to the measured space (e.g. 2x the fastest latency) so that they
// bind; the planner never sees the measurements.
// Usage: kiln_plan_regret [--cache DIR] [--db FILE] [--models a,b] [--batches 1,4,16]
//                         [--precisions fp32,bf16,int8] [--runs N] [--rounds R] [--top K] [--cache-dir D]
// Two choices are scored per case: the plan's (predictions only) and kiln optimize's, which
// closes the loop as the product does on the target machine: the plan's top K CPU candidates
// (plus the best one of each other precision) are measured again as kiln optimize measures them
// (perf::candidate_round_options, all of them in rounds, independently of the exhaustive measurements), as deployed, and
// the choice is made on those measurements; both are scored on the exhaustive ones.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "compilers/ir/shape_inference.h"
#include "compilers/onnx/import.h"
#include "perfmodel/deployed_timing.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/host_interference.h"
#include "perfmodel/precision_compile.h"
#include "service/planning/plan_application.h"

#ifndef KILN_DEFAULT_MODEL_CACHE
#define KILN_DEFAULT_MODEL_CACHE "build/model-cache"
#endif
#ifndef KILN_EXAMPLES_DIR
#define KILN_EXAMPLES_DIR "examples"
#endif

namespace fs = std::filesystem;
using namespace kiln;

namespace {

struct Options {
  std::string cache = KILN_DEFAULT_MODEL_CACHE;
  std::string db;
  std::string cache_dir;
  std::vector<std::string> models = {"fashion-mnist", "squeezenet1_1", "resnet18", "mobilenet_v2", "shufflenet_v2_x1_0"};
  std::vector<int64_t> batches = {1, 4, 16};
  std::vector<std::string> precisions = {"fp32", "bf16", "int8"};
  int runs = 10;
  int top = 3;  // candidates kiln optimize measures (its --top default)
  int optimize_runs = 20;  // and its --runs default
  int rounds = perf::kCandidateRounds;  // the exhaustive measurement and kiln optimize's, each in rounds
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) if (!item.empty()) out.push_back(item);
  return out;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--cache") o.cache = v;
    else if (a == "--db") o.db = v;
    else if (a == "--cache-dir") o.cache_dir = v;
    else if (a == "--models") o.models = split(v);
    else if (a == "--precisions") o.precisions = split(v);
    else if (a == "--runs") o.runs = std::max(3, std::atoi(v.c_str()));
    else if (a == "--rounds") o.rounds = std::max(1, std::atoi(v.c_str()));
    else if (a == "--top") o.top = std::max(1, std::atoi(v.c_str()));
    else if (a == "--batches") {
      o.batches.clear();
      for (const std::string& b : split(v)) o.batches.push_back(std::atoll(b.c_str()));
    } else return false;
  }
  return argc % 2 == 1;
}

struct Measured {
  std::string precision;
  int64_t batch = 1;
  int threads = 1, instances = 1;
  double latency_ms = 0;      // median per batch, all instances running
  double throughput = 0;      // samples per second over the node
  std::string name() const {
    return precision + " b" + std::to_string(batch) + " t" + std::to_string(threads) + "x" + std::to_string(instances);
  }
};

Result<Graph> load_at(const std::string& path, int64_t batch) {
  KILN_ASSIGN(graph, onnx_import_file(path));
  ShapeInferenceOptions options;
  for (ValueId in : graph.inputs) {
    const ValueType& t = graph.value(in).type;
    if (t.rank_known && !t.shape.empty() && !t.shape[0].known() && !t.shape[0].symbol.empty()) options.bindings[t.shape[0].symbol] = batch;
  }
  KILN_TRY(graph_infer_shapes(graph, options).status());
  return graph;
}

// Each configuration's instances side by side, each on its threads, all of them timed in `rounds`
// (perf::time_deployed_in_rounds); fills latency_ms and throughput.
Status measure_in_rounds(const std::string& label, const std::map<std::pair<std::string, int64_t>, Plan>& plans,
                         std::vector<Measured>& configs, int rounds, const perf::TimingOptions& first, const perf::TimingOptions& later) {
  if (configs.empty()) return Status::ok();
  std::vector<perf::DeployedRun> runs;
  for (const Measured& m : configs) runs.push_back({&plans.at({m.precision, m.batch}), m.threads, m.instances});
  // As kiln optimize does: before a multi-thread timing, up to 60 s over this call for the host to stop slowing threads down.
  static perf::HostInterference host(&std::cerr);
  double settle_left = 60;
  int slowed = 0;
  perf::RoundHooks hooks;
  hooks.before = [&](int, size_t i) { slowed += perf::wait_for_full_speed(host, configs[i].threads, settle_left, &std::cerr); };
  KILN_ASSIGN(timed, perf::time_deployed_in_rounds(runs, rounds, first, later, hooks));
  if (slowed > 0) std::fprintf(stderr, "  %s: %d timings ran while the host still slowed threads down\n", label.c_str(), slowed);
  for (size_t i = 0; i < configs.size(); ++i) {
    Measured& m = configs[i];
    m.latency_ms = timed[i].median_ms;
    m.throughput = perf::deployed_throughput(timed[i], m.batch, m.instances);
    std::fprintf(stderr, "  %s %s: %.3f ms, %.1f/s (median of %d rounds)\n", label.c_str(), m.name().c_str(), m.latency_ms, m.throughput,
                 rounds);
  }
  return Status::ok();
}

struct Case {
  api::Objective objective = api::Objective::throughput;
  api::Constraints constraints;
  std::string label;
};

bool meets(const Measured& m, const api::Constraints& k) {
  return (!k.max_latency_ms || m.latency_ms <= *k.max_latency_ms) && (!k.min_throughput_per_s || m.throughput >= *k.min_throughput_per_s);
}

double value(const Measured& m, api::Objective o) { return o == api::Objective::latency ? m.latency_ms : m.throughput; }

// `a` serves the objective better than `b` (lower latency, or higher throughput).
bool better(const Measured& a, const Measured& b, api::Objective o) {
  return o == api::Objective::latency ? a.latency_ms < b.latency_ms : a.throughput > b.throughput;
}

// Regret of one way of choosing over the cases: how much worse its choice measures than the
// exhaustive best (latency: pick/best - 1; throughput: 1 - pick/best); a choice that breaks the
// constraint when measured, or none where a best exists, is a miss (infinite regret).
struct Score {
  std::vector<double> regrets;
  double add(const Measured* pick, const Measured* best, const Case& c) {
    double regret = 0;
    if (!best && !pick) regret = 0;  // both say infeasible
    else if (!pick || !best || !meets(*pick, c.constraints)) regret = INFINITY;
    else regret = c.objective == api::Objective::latency ? pick->latency_ms / best->latency_ms - 1 : 1 - pick->throughput / best->throughput;
    regrets.push_back(regret);
    return regret;
  }
  void print(const std::string& what) const {
    std::vector<double> sorted = regrets;
    std::sort(sorted.begin(), sorted.end());
    const auto within = std::count_if(sorted.begin(), sorted.end(), [](double r) { return r <= 0.05; });
    std::printf("%s: %zu cases, %ld within 5%% of the exhaustive best (%.0f%%); median regret %.1f%%\n", what.c_str(), sorted.size(),
                static_cast<long>(within), sorted.empty() ? 0.0 : 100.0 * static_cast<double>(within) / static_cast<double>(sorted.size()),
                sorted.empty() ? 0.0 : 100 * sorted[sorted.size() / 2]);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: kiln_plan_regret [--cache DIR] [--db FILE] [--models a,b] [--batches 1,4,16] "
                         "[--precisions fp32,bf16,int8] [--runs N] [--rounds R] [--top K] [--cache-dir D]\n");
    return 2;
  }
  const perf::TargetFingerprint here = perf::fingerprint_local();
  const int cores = std::max(1, here.usable_threads);
  std::vector<int> thread_counts = perf::plan_thread_counts(cores);
  std::printf("machine %s (%s), %d usable cores; space: precisions x batches {", here.id.c_str(), here.cpu_model.c_str(), cores);
  for (int64_t b : o.batches) std::printf(" %lld", static_cast<long long>(b));
  std::printf(" } x threads per instance {");
  for (int t : thread_counts) std::printf(" %d", t);
  std::printf(" } (instances fill the cores, measured running side by side)\n\n");

  Score planned, optimized;
  std::printf("%-20s %-40s %-16s %12s | %-16s %12s %8s  | %-16s %12s %8s\n", "model", "case", "best measured", "value",
              "plan's choice", "measured", "regret", "optimize's", "measured", "regret");
  for (const std::string& name : o.models) {
    const std::string path = name == "fashion-mnist" ? std::string(KILN_EXAMPLES_DIR) + "/fashion-mnist/model.onnx"
                                                     : o.cache + "/" + name + ".onnx";
    if (!fs::exists(path)) {
      std::fprintf(stderr, "skipping %s: %s not found\n", name.c_str(), path.c_str());
      continue;
    }
    // The space, measured.
    std::vector<Measured> space;
    std::map<std::pair<std::string, int64_t>, Plan> plans;  // (precision, batch)
    std::map<std::string, Measured> remeasured;             // kiln optimize's own measurements, by config name
    for (const std::string& precision : o.precisions)
      for (int64_t batch : o.batches) {
        auto graph = load_at(path, batch);
        if (!graph) { std::fprintf(stderr, "%s: %s\n", name.c_str(), graph.error().message.c_str()); return 1; }
        auto plan = perf::precision_compile(std::move(*graph), precision);
        if (!plan) { std::fprintf(stderr, "%s %s: %s\n", name.c_str(), precision.c_str(), plan.error().message.c_str()); return 1; }
        for (int threads : thread_counts) space.push_back(Measured{precision, batch, threads, std::max(1, cores / threads)});
        plans.emplace(std::make_pair(precision, batch), std::move(*plan));
      }
    // Every configuration timed once per round, round after round, as kiln optimize times its
    // candidates: a slow spell of the VM then costs every configuration alike.
    perf::TimingOptions first;  // `runs` timed batches per instance over all rounds
    first.warmup = 2;
    first.min_runs = first.max_runs = (o.runs + o.rounds - 1) / o.rounds;
    perf::TimingOptions later = first;
    later.warmup = 1;
    if (Status timed = measure_in_rounds(name, plans, space, o.rounds, first, later); !timed.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), timed.message().c_str());
      return 1;
    }
    double fastest = 1e300, most = 0;
    for (const Measured& m : space) fastest = std::min(fastest, m.latency_ms), most = std::max(most, m.throughput);
    std::vector<Case> model_cases(5);
    model_cases[0] = {api::Objective::latency, {}, "min latency"};
    model_cases[1] = {api::Objective::throughput, {}, "max throughput"};
    model_cases[2] = {api::Objective::throughput, {}, "max throughput, latency <= 2x fastest"};
    model_cases[2].constraints.max_latency_ms = 2 * fastest;
    model_cases[3] = {api::Objective::throughput, {}, "max throughput, latency <= 5x fastest"};
    model_cases[3].constraints.max_latency_ms = 5 * fastest;
    model_cases[4] = {api::Objective::latency, {}, "min latency, throughput >= 0.5x most"};
    model_cases[4].constraints.min_throughput_per_s = 0.5 * most;

    for (const Case& c : model_cases) {
      api::ApplicationDescription app;
      app.name = name;
      app.source = path;
      app.model.path = path;
      app.objective = c.objective;
      app.constraints = c.constraints;
      for (const std::string& p : o.precisions) app.optimizations.precisions.push_back(p == "fp32" ? api::Precision::fp32 : p == "bf16" ? api::Precision::bf16 : api::Precision::int8);
      app.optimizations.batch_sizes = o.batches;
      planning::PlanInputs in;
      in.app = &app;
      in.model_path = path;
      in.db = o.db;
      in.cache_root = o.cache_dir;
      in.use_model_runs = false;  // predictions only
      auto outcome = planning::plan_application(in);
      if (!outcome) { std::fprintf(stderr, "%s: %s\n", name.c_str(), outcome.error().message.c_str()); return 1; }
      const Measured* best = nullptr;
      for (const Measured& m : space)
        if (meets(m, c.constraints) && (!best || better(m, *best, c.objective)))
          best = &m;
      auto in_space = [&](const std::string& precision, int64_t batch, int threads) -> const Measured* {
        for (const Measured& m : space)
          if (m.precision == precision && m.batch == batch && m.threads == threads) return &m;
        return nullptr;
      };
      const Measured* pick = nullptr;
      if (outcome->result.chosen) {
        const perf::Candidate& k = outcome->result.candidates[*outcome->result.chosen];
        pick = in_space(k.precision, k.batch, k.threads);
      }
      // kiln optimize: measure the candidates to try again, choose on those measurements.
      const Measured* optimize_pick = nullptr;
      const Measured* optimize_measured = nullptr;
      const std::vector<perf::Candidate> tried = planning::candidates_to_try(outcome->result, o.top, app.objective);
      std::vector<Measured> fresh;  // those no earlier case measured again, timed together in rounds as kiln optimize does
      for (const perf::Candidate& k : tried)
        if (const Measured* config = in_space(k.precision, k.batch, k.threads); config && !remeasured.count(config->name()) &&
            std::none_of(fresh.begin(), fresh.end(), [&](const Measured& f) { return f.name() == config->name(); }))
          fresh.push_back(*config);
      const perf::RoundOptions again = perf::candidate_round_options(o.optimize_runs, o.rounds);
      if (Status timed = measure_in_rounds(name + " again (kiln optimize):", plans, fresh, o.rounds, again.first, again.later); !timed.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), timed.message().c_str());
        return 1;
      }
      for (const Measured& f : fresh) remeasured.emplace(f.name(), f);
      for (const perf::Candidate& k : tried) {
        const Measured* config = in_space(k.precision, k.batch, k.threads);
        if (!config) continue;
        const Measured& m = remeasured.at(config->name());
        if (!meets(m, c.constraints)) continue;
        if (!optimize_measured || better(m, *optimize_measured, c.objective)) optimize_measured = &m, optimize_pick = config;
      }
      const double plan_regret = planned.add(pick, best, c);
      const double optimize_regret = optimized.add(optimize_pick, best, c);
      auto shown = [&](const Measured* m, double regret) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%-16s %12.3f %7.1f%%%s", m ? m->name().c_str() : "infeasible", m ? value(*m, c.objective) : 0.0,
                      std::isinf(regret) ? 999.9 : 100 * regret, m && !meets(*m, c.constraints) ? "!" : " ");
        return std::string(buf);
      };
      std::printf("%-20s %-40s %-16s %12.3f | %s | %s\n", name.c_str(), c.label.c_str(), best ? best->name().c_str() : "none",
                  best ? value(*best, c.objective) : 0.0, shown(pick, plan_regret).c_str(), shown(optimize_pick, optimize_regret).c_str());
    }
  }
  std::printf("\n(! = the choice breaks the constraint when measured)\n");
  planned.print("the plan's choices (predictions only)");
  optimized.print("kiln optimize's choices (top " + std::to_string(o.top) + " + best of each precision, measured again)");
  return 0;
}

#include "perfmodel/search/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "perfmodel/precision_compile.h"

namespace kiln::perf {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string mib(int64_t bytes) { return fmt("%.1f MiB", static_cast<double>(bytes) / kMiB); }

std::string describe(const Candidate& c) {
  if (c.device == "cuda")
    return c.precision + " on the GPUs, batch " + std::to_string(c.batch) + ", " + std::to_string(c.instances) +
           (c.instances == 1 ? " instance" : " instances") + " (one per GPU)";
  return c.precision + ", batch " + std::to_string(c.batch) + ", " + std::to_string(c.instances) +
         (c.instances == 1 ? " instance" : " instances") + " x " + std::to_string(c.threads) +
         (c.threads == 1 ? " thread" : " threads");
}

// True when `a` is better than `b` for the objective (ties broken by the other figures).
bool better(api::Objective objective, const Candidate& a, const Candidate& b) {
  auto close = [](double x, double y) { return std::abs(x - y) <= 0.01 * std::max(std::abs(x), std::abs(y)); };
  switch (objective) {
    case api::Objective::latency:
      if (!close(a.latency_ms, b.latency_ms)) return a.latency_ms < b.latency_ms;
      if (!close(a.throughput_per_s, b.throughput_per_s)) return a.throughput_per_s > b.throughput_per_s;
      break;
    case api::Objective::throughput:
    case api::Objective::cost:  // per node-hour price fixed: cheapest = most samples per node-hour
      if (!close(a.throughput_per_s, b.throughput_per_s)) return a.throughput_per_s > b.throughput_per_s;
      if (!close(a.latency_ms, b.latency_ms)) return a.latency_ms < b.latency_ms;
      break;
  }
  if (a.memory_bytes != b.memory_bytes) return a.memory_bytes < b.memory_bytes;
  return a.name() < b.name();
}

bool dominates(const Candidate& a, const Candidate& b) {
  const bool no_worse = a.latency_ms <= b.latency_ms && a.throughput_per_s >= b.throughput_per_s && a.memory_bytes <= b.memory_bytes;
  const bool better_somewhere = a.latency_ms < b.latency_ms || a.throughput_per_s > b.throughput_per_s || a.memory_bytes < b.memory_bytes;
  return no_worse && better_somewhere;
}

std::string objective_sentence(api::Objective objective) {
  switch (objective) {
    case api::Objective::latency: return "the lowest latency per batch";
    case api::Objective::throughput: return "the highest throughput";
    case api::Objective::cost: return "the lowest cost per million inferences";
  }
  return "";
}

std::string figures(const Candidate& c, const std::string& currency) {
  std::string s = (c.latency_source == "prior" ? "predicted from priors " : "predicted ") + fmt("%.2f", c.latency_ms) + " ms per batch, " + fmt("%.1f", c.throughput_per_s) +
                  " samples/s, " + mib(c.memory_bytes) + " per node";
  if (c.cost_per_million) s += ", " + fmt("%.4f", *c.cost_per_million) + " " + currency + " per million";
  return s;
}

void explain(const api::ApplicationDescription& app, const PlanTarget& target, const std::vector<PlanSpace>& spaces,
             PlanResult& r) {
  std::string node;
  for (const PlanSpace& s : spaces) node += (node.empty() ? "" : "; ") + s.what;
  const std::string where = "'" + target.name + "' (" + std::to_string(target.nodes) + (target.nodes == 1 ? " node" : " nodes") +
                            " of " + node + ")";
  r.explanation.push_back("Objective: " + objective_sentence(app.objective) + " on " + where + ".");
  size_t feasible = 0, pareto = 0;
  for (const Candidate& c : r.candidates) feasible += c.feasible(), pareto += c.pareto;
  if (!r.chosen) {
    r.explanation.push_back("Infeasible: none of the " + std::to_string(r.candidates.size()) +
                            " candidates meets the constraints. The closest:");
    for (size_t i = 0; i < std::min<size_t>(3, r.candidates.size()); ++i) {
      const Candidate& c = r.candidates[i];
      std::string blocked;
      for (const std::string& b : c.blocked_by) blocked += (blocked.empty() ? "" : "; ") + b;
      r.explanation.push_back("  " + describe(c) + ": " + blocked + ".");
    }
  } else {
    const Candidate& c = r.candidates[*r.chosen];
    r.explanation.push_back("Chosen: " + describe(c) + ": " + figures(c, target.currency) + ".");
    const api::Constraints& k = app.constraints;
    std::string meets;
    auto add = [&meets](const std::string& s) { meets += (meets.empty() ? "" : ", ") + s; };
    if (k.max_latency_ms)
      add("max_latency_ms " + fmt("%g", *k.max_latency_ms) +
          (k.latency_p99 ? " at p99 (predicted " + fmt("%.2f", c.latency_p99_ms) + " ms)" : ""));
    if (k.min_throughput_per_s) add("min_throughput_per_s " + fmt("%g", *k.min_throughput_per_s));
    if (k.max_memory_mb) add("max_memory_mb " + fmt("%g", *k.max_memory_mb));
    if (k.max_cost_per_million) add("max_cost_per_million " + fmt("%g", *k.max_cost_per_million));
    if (!meets.empty()) r.explanation.push_back("It meets " + meets + ".");
    // Against the best fp32 candidate: what the reduced precision buys.
    if (c.precision != "fp32") {
      for (const Candidate& f : r.candidates)
        if (f.precision == "fp32" && f.feasible()) {
          const bool by_latency = app.objective == api::Objective::latency;
          const double gain = by_latency ? f.latency_ms / c.latency_ms : c.throughput_per_s / f.throughput_per_s;
          r.explanation.push_back(fmt("%.2f", gain) + "x the " + (by_latency ? "speed" : "throughput") +
                                  " of the best fp32 candidate (" + describe(f) + ": " + figures(f, target.currency) + ").");
          break;
        }
      std::string drop = app.constraints.max_accuracy_drop
                             ? " (max_accuracy_drop " + fmt("%g", *app.constraints.max_accuracy_drop) + ")"
                             : "";
      r.explanation.push_back("Its accuracy is not verified yet: `kiln optimize` checks it against fp32" + drop +
                              " on the description's data and falls back to the next candidate if it fails.");
    }
  }
  r.explanation.push_back("Considered " + std::to_string(r.candidates.size()) + " candidates: " + std::to_string(feasible) +
                          " meet the constraints, " + std::to_string(pareto) + " on the Pareto front (latency, throughput, memory).");
  for (const ExcludedChoice& e : r.excluded) r.explanation.push_back("Not considered: " + e.what + " (" + e.reason + ").");
  int measured = 0, corrected = 0;
  for (const Candidate& c : r.candidates) measured += c.latency_source == "measured", corrected += c.latency_source == "corrected";
  if (measured + corrected > 0)
    r.explanation.push_back("Earlier measurements of this model on this target: " + std::to_string(measured) +
                            " candidates use their measured time, " + std::to_string(corrected) +
                            " predictions are scaled by measured/predicted of the nearest measured batch.");
  bool extrapolated = false;
  for (const Candidate& c : r.candidates) extrapolated = extrapolated || c.threads_extrapolated;
  if (extrapolated) {
    std::string measured;
    for (const PlanSpace& s : spaces)
      if (s.device == "cpu")
        for (int t : s.measured_threads) measured += (measured.empty() ? "" : ", ") + std::to_string(t);
    r.explanation.push_back("The profile has kernel points for " + measured +
                            " thread(s) only: other thread counts are scaled from the nearest (less certain).");
  }
}

// The run of this precision and thread count nearest in batch (log scale), if any.
const ModelRun* nearest_run(const std::vector<ModelRun>& runs, const Candidate& c) {
  const ModelRun* best = nullptr;
  double best_distance = 0;
  for (const ModelRun& r : runs) {
    if (r.precision != c.precision || r.threads != c.threads || !(r.median_ms > 0)) continue;
    const double d = std::abs(std::log(static_cast<double>(r.batch) / static_cast<double>(c.batch)));
    if (!best || d < best_distance) best = &r, best_distance = d;
  }
  return best;
}

void apply_model_runs(const PlanSpace& space, const ModelCosts& model, Candidate& c) {
  const ModelRun* run = nearest_run(space.runs, c);
  if (!run) return;
  if (run->batch == c.batch) {
    c.latency_ms = run->median_ms;
    c.latency_source = "measured";
    return;
  }
  const double predicted_there = space.latency_ms(model, run->batch, run->threads);
  if (!(predicted_there > 0)) return;
  c.latency_ms *= run->median_ms / predicted_there;
  c.latency_source = "corrected";
}

}  // namespace

void candidate_check_constraints(const api::Constraints& k, const PlanTarget& target, const PlanSpace& space, Candidate& c) {
  auto miss = [&c](double value, double limit, bool above, const std::string& text) {
    c.blocked_by.push_back(text);
    c.violation += above ? (value - limit) / limit : (limit - value) / limit;
  };
  const double latency = k.latency_p99 ? c.latency_p99_ms : c.latency_ms;
  if (k.max_latency_ms && latency > *k.max_latency_ms)
    miss(latency, *k.max_latency_ms, true,
         std::string(k.latency_p99 ? "p99 latency " : "latency ") + fmt("%.2f", latency) + " ms > max_latency_ms " +
             fmt("%g", *k.max_latency_ms));
  if (k.min_throughput_per_s && c.throughput_per_s < *k.min_throughput_per_s)
    miss(c.throughput_per_s, *k.min_throughput_per_s, false,
         "throughput " + fmt("%.1f", c.throughput_per_s) + "/s < min_throughput_per_s " + fmt("%g", *k.min_throughput_per_s));
  const double memory_mib = static_cast<double>(c.memory_bytes) / kMiB;
  if (k.max_memory_mb && memory_mib > *k.max_memory_mb)
    miss(memory_mib, *k.max_memory_mb, true, "memory " + mib(c.memory_bytes) + " > max_memory_mb " + fmt("%g", *k.max_memory_mb));
  if (space.instance_memory_bytes > 0) {  // a GPU: each instance in its own device memory
    const int64_t per_instance = c.memory_bytes / std::max(c.instances, 1);
    if (per_instance > space.instance_memory_bytes)
      miss(static_cast<double>(per_instance), static_cast<double>(space.instance_memory_bytes), true,
           "memory " + mib(per_instance) + " per GPU > its " + mib(space.instance_memory_bytes));
  } else if (target.memory_bytes > 0 && c.memory_bytes > target.memory_bytes) {
    miss(static_cast<double>(c.memory_bytes), static_cast<double>(target.memory_bytes), true,
         "memory " + mib(c.memory_bytes) + " > the node's " + mib(target.memory_bytes));
  }
  if (k.max_cost_per_million && c.cost_per_million && *c.cost_per_million > *k.max_cost_per_million)
    miss(*c.cost_per_million, *k.max_cost_per_million, true,
         "cost " + fmt("%.4f", *c.cost_per_million) + " " + target.currency + " per million > max_cost_per_million " +
             fmt("%g", *k.max_cost_per_million));
  if (k.max_accuracy_drop && *k.max_accuracy_drop == 0 && c.precision != "fp32") {
    c.blocked_by.push_back("max_accuracy_drop 0 allows only fp32");
    c.violation += 1;
  }
}

std::string Candidate::name() const {
  if (device == "cuda") return precision + " b" + std::to_string(batch) + " cuda x" + std::to_string(instances);
  return precision + " b" + std::to_string(batch) + " t" + std::to_string(threads) + "x" + std::to_string(instances);
}

bool candidate_better(api::Objective objective, const Candidate& a, const Candidate& b) { return better(objective, a, b); }

std::vector<std::string> plan_precisions(const api::ApplicationDescription& app, const TargetFingerprint& target,
                                         std::vector<ExcludedChoice>* excluded) {
  std::vector<api::Precision> wanted = app.optimizations.precisions;
  if (wanted.empty()) wanted = {api::Precision::fp32, api::Precision::bf16, api::Precision::int8, api::Precision::fp16};
  std::vector<std::string> out;
  for (api::Precision p : wanted) {
    const std::string name = api::precision_name(p);
    if (p == api::Precision::fp16) {
      excluded->push_back({"precision fp16", "kiln has no fp16 CPU kernels; fp16 is for GPU targets"});
      continue;
    }
    const std::string dtype = precision_dtype(name);
    if (const std::string why = fingerprint_dtype_unsupported(target, dtype); !why.empty()) {
      excluded->push_back({"precision " + name, why});
      continue;
    }
    out.push_back(name);
  }
  return out;
}

std::vector<int64_t> plan_batch_sizes(const api::ApplicationDescription& app) {
  std::vector<int64_t> out = app.optimizations.batch_sizes;
  if (out.empty()) out = {1, 2, 4, 8, 16, 32, 64};
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> plan_thread_counts(int cores) {
  std::vector<int> out;
  for (int t = 1; t < cores; t *= 2) out.push_back(t);
  out.push_back(std::max(cores, 1));
  return out;
}

Result<PlanResult> plan_search(const api::ApplicationDescription& app, const PlanTarget& target,
                               const std::vector<PlanSpace>& spaces, std::vector<ExcludedChoice> excluded) {
  const bool needs_price = app.objective == api::Objective::cost || app.constraints.max_cost_per_million.has_value();
  KILN_REQUIRE(!needs_price || target.price_per_node_hour, invalid_argument, "target '", target.name,
               "' has no price_per_node_hour: the objective 'cost' and constraints.max_cost_per_million need one");
  const bool any_costs = std::any_of(spaces.begin(), spaces.end(), [](const PlanSpace& s) { return !s.costs.empty(); });
  KILN_REQUIRE(any_costs, invalid_argument, "no precision left to plan with on target '", target.name, "'");
  PlanResult r;
  r.excluded = std::move(excluded);
  const std::vector<int64_t> batches = plan_batch_sizes(app);
  for (const PlanSpace& space : spaces) {
    const std::vector<int> thread_counts = space.threads.empty() ? plan_thread_counts(space.slots) : space.threads;
    for (const auto& [precision, model] : space.costs)
      for (int threads : thread_counts)
        for (int64_t batch : batches) {
          Candidate c;
          c.device = space.device;
          c.precision = precision;
          c.batch = batch;
          c.threads = threads;
          c.instances = std::max(1, space.slots / threads);
          c.threads_extrapolated = !space.measured_threads.empty() &&
                                   std::find(space.measured_threads.begin(), space.measured_threads.end(), threads) ==
                                       space.measured_threads.end();
          c.latency_ms = space.latency_ms(model, batch, threads);
          c.latency_source = space.latency_source;
          apply_model_runs(space, model, c);
          c.latency_p99_ms = c.latency_ms * space.p99_ratio;
          const double per_node = c.latency_ms > 0 ? static_cast<double>(c.instances * batch) * 1000.0 / c.latency_ms : 0.0;
          c.throughput_per_s = per_node * static_cast<double>(target.nodes);
          c.memory_bytes = c.instances * model_costs_memory_at(model, batch);
          if (target.price_per_node_hour && per_node > 0) c.cost_per_million = *target.price_per_node_hour * 1e6 / (per_node * 3600.0);
          c.accuracy = precision == "fp32" ? "reference" : "unverified";
          candidate_check_constraints(app.constraints, target, space, c);
          r.candidates.push_back(std::move(c));
        }
  }
  r.evaluated = static_cast<int>(r.candidates.size());
  for (Candidate& c : r.candidates) {
    if (!c.feasible()) continue;
    c.pareto = std::none_of(r.candidates.begin(), r.candidates.end(),
                            [&c](const Candidate& o) { return o.feasible() && dominates(o, c); });
  }
  std::stable_sort(r.candidates.begin(), r.candidates.end(), [&app](const Candidate& a, const Candidate& b) {
    if (a.feasible() != b.feasible()) return a.feasible();
    if (!a.feasible()) return a.violation < b.violation;
    return better(app.objective, a, b);
  });
  const bool any = !r.candidates.empty() && r.candidates.front().feasible();
  r.status = any ? "ok" : "infeasible";
  if (any) r.chosen = 0;
  explain(app, target, spaces, r);
  if (app.constraints.latency_p99 && app.constraints.max_latency_ms)
    for (const PlanSpace& s : spaces)
      r.explanation.push_back("p99 latency on the " + std::string(s.device == "cuda" ? "GPUs" : "CPUs") + " is predicted as " +
                              fmt("%.3f", s.p99_ratio) + "x the median (" + s.p99_source + ").");
  return r;
}

double tail_ratio_from_profile(const std::vector<Measurement>& rows, std::string* source) {
  constexpr double kZ99 = 2.3263, kZ90 = 1.2816;  // standard normal quantiles
  for (const std::string& kind : {std::string(kKindModel), std::string(kKindKernel)}) {
    std::vector<double> ratios;
    for (const Measurement& m : rows)
      if (m.kind == kind && m.median_ms > 0 && m.p90_ms >= m.median_ms) ratios.push_back(m.p90_ms / m.median_ms);
    if (ratios.empty()) continue;
    std::nth_element(ratios.begin(), ratios.begin() + static_cast<std::ptrdiff_t>(ratios.size() / 2), ratios.end());
    const double p90 = ratios[ratios.size() / 2];
    if (source)
      *source = "from the profile's " + std::to_string(ratios.size()) + (kind == kKindModel ? " whole-model" : " kernel") +
                " timings: median p90/p50 " + fmt("%.3f", p90) + ", taken to p99 as a log-normal tail";
    return std::pow(p90, kZ99 / kZ90);
  }
  return 0;
}

PlanSpace plan_space_cpu(const PlanTarget& target, std::map<std::string, ModelCosts> costs,
                         const LatencyPredictor& predictor, std::vector<ModelRun> runs) {
  PlanSpace space;
  space.what = std::to_string(target.cores) + " cores, profile " + target.profile_id + " (" + target.profile_source + ")";
  space.costs = std::move(costs);
  space.latency_ms = [&predictor](const ModelCosts& model, int64_t batch, int threads) {
    return predictor.predict(model_costs_steps_at(model, batch, threads)).total_ms;
  };
  space.slots = target.cores;
  space.measured_threads = target.measured_threads;
  space.runs = std::move(runs);
  return space;
}

Result<PlanResult> plan_search(const api::ApplicationDescription& app, const PlanTarget& target,
                               const std::map<std::string, ModelCosts>& costs, const LatencyPredictor& predictor,
                               std::vector<ExcludedChoice> excluded, const std::vector<ModelRun>& runs) {
  return plan_search(app, target, {plan_space_cpu(target, costs, predictor, runs)}, std::move(excluded));
}

}  // namespace kiln::perf

// Configuration search: for a model's costs (model_costs.h) on one target, every candidate of the
// space precision × batch size × threads per instance (× instances per node, filling the node's
// cores; × the target's nodes for throughput and cost) is predicted, checked against the
// constraints, ranked by the objective, and the Pareto front (latency, throughput, memory) kept.
// The choice is explained in words and numbers; when no candidate meets the constraints the
// answer is "infeasible" with the closest candidates and what blocks each.
//
// Earlier measurements of the same model on the same target close the loop: a candidate measured
// exactly takes its measured time, the others of that precision and thread count are scaled by
// measured / predicted at the nearest measured batch.
//
// Accuracy cannot be predicted: fp32 is the reference (no drop); bf16 and int8 candidates stay
// in the ranking marked "unverified" until `kiln optimize` verifies them on the user's data.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/description.h"
#include "kernels/core/status.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/predictor.h"
#include "perfmodel/search/model_costs.h"

namespace kiln::perf {

// The node the plan is for, as the planner needs it.
struct PlanTarget {
  std::string name;         // the target description's name, or "local"
  std::string profile_id;   // the benchmark profile predictions come from
  std::string profile_source;  // "measured", "imported"
  int cores = 1;            // usable cores per node
  int64_t nodes = 1;
  int64_t memory_bytes = 0;  // per node; 0 unknown
  std::optional<double> price_per_node_hour;
  std::string currency = "USD";
  std::vector<int> measured_threads;  // thread counts the profile has kernel points for
};

struct Candidate {
  std::string device = "cpu";  // "cpu", or "cuda": one instance per GPU
  std::string precision;  // "fp32", "bf16", "int8", "fp16" (cuda)
  int64_t batch = 1;
  int threads = 1;         // per instance (1 on a GPU)
  int instances = 1;       // per node, each running batches independently on its own cores or GPU
  double latency_ms = 0;   // predicted median, one batch
  double latency_p99_ms = 0;  // predicted 99th percentile (PlanSpace::p99_ratio x the median)
  double throughput_per_s = 0;  // samples per second over all nodes
  int64_t memory_bytes = 0;     // per node: every instance's weights and intermediates
  std::optional<double> cost_per_million;
  std::string accuracy;    // "reference" (fp32) or "unverified"
  bool threads_extrapolated = false;  // the profile has no kernel points at this thread count
  // "predicted" (the target's measured profile), "prior" (spec-sheet priors only), "measured" (an
  // earlier run of exactly this), "corrected" (scaled by one)
  std::string latency_source = "predicted";
  std::vector<std::string> blocked_by;  // the constraints it misses, each with its numbers
  bool feasible() const { return blocked_by.empty(); }
  bool pareto = false;
  double violation = 0;    // sum of relative misses (0 when feasible): how far from feasible
  std::string name() const;  // "int8 b8 t2x1", "fp16 b64 cuda x4"
};

struct ExcludedChoice {
  std::string what;    // "precision fp16"
  std::string reason;
};

struct PlanResult {
  std::string status;  // "ok" or "infeasible"
  std::vector<Candidate> candidates;  // ranked: feasible by objective first, then the rest by violation
  std::optional<size_t> chosen;       // index into candidates (0 when status is ok)
  std::vector<ExcludedChoice> excluded;
  std::vector<std::string> explanation;  // plain sentences
  int evaluated = 0;
};

// The precisions the planner considers on this target, the rest excluded with a reason: fp16
// (no fp16 CPU kernels), bf16/int8 without native instructions.
std::vector<std::string> plan_precisions(const api::ApplicationDescription& app, const TargetFingerprint& target,
                                         std::vector<ExcludedChoice>* excluded);

// Batch sizes: the description's, else 1..64 in powers of two. Threads: 1, 2, 4, ... up to the
// node's cores, and the cores themselves.
std::vector<int64_t> plan_batch_sizes(const api::ApplicationDescription& app);
std::vector<int> plan_thread_counts(int cores);

// A whole-model measurement of this model on this target, from an earlier `kiln optimize`.
struct ModelRun {
  std::string precision;
  int64_t batch = 1;
  int threads = 1;
  double median_ms = 0;
};

// One kind of device on the node and how its candidates are priced: the CPU cores (a measured
// profile's predictor, or a spec prior) or the GPUs (a spec prior). A plan searches one or both.
struct PlanSpace {
  std::string device = "cpu";   // "cpu" or "cuda"
  std::string what;             // for the explanation: "2 cores, profile 1a2b (measured)"
  std::map<std::string, ModelCosts> costs;  // per precision
  // One batch on one instance of `threads` threads (1 on a GPU).
  std::function<double(const ModelCosts&, int64_t batch, int threads)> latency_ms;
  std::string latency_source = "predicted";  // "prior" when latency_ms comes from spec priors
  int slots = 1;                // cores, or GPUs, per node: instances = slots / threads
  std::vector<int> threads;     // per instance; empty: plan_thread_counts(slots)
  std::vector<int> measured_threads;  // thread counts with kernel points (others are marked extrapolated)
  int64_t instance_memory_bytes = 0;  // a GPU's memory: each instance must fit; 0: none
  // p99 / p50 of one batch's latency on this device (tail_ratio_from_profile, or an assumption).
  double p99_ratio = 1.1;
  std::string p99_source = "assumed";
  std::vector<ModelRun> runs;   // earlier whole-model measurements on this device
};

// True when `a` is better than `b` for the objective, as the plan ranks its feasible candidates.
bool candidate_better(api::Objective objective, const Candidate& a, const Candidate& b);

// Adds to `c.blocked_by` (and `c.violation`) each constraint its predicted figures miss.
void candidate_check_constraints(const api::Constraints& k, const PlanTarget& target, const PlanSpace& space, Candidate& c);

// Searches every space. Fails only when the objective needs something the target does not give
// (cost without a price) or no space has a precision left.
Result<PlanResult> plan_search(const api::ApplicationDescription& app, const PlanTarget& target,
                               const std::vector<PlanSpace>& spaces, std::vector<ExcludedChoice> excluded = {});

// p99 / p50 of a run from a profile's own spread: the median p90/p50 of its whole-model rows
// (kiln optimize's runs) or, without any, of its kernel rows, taken to p99 as a log-normal tail
// ((p90/p50)^(z99/z90)). `source` says which rows; 0 without rows.
double tail_ratio_from_profile(const std::vector<Measurement>& rows, std::string* source);

// The CPU space of a measured profile: `costs` priced by `predictor` (kept by reference).
PlanSpace plan_space_cpu(const PlanTarget& target, std::map<std::string, ModelCosts> costs,
                         const LatencyPredictor& predictor, std::vector<ModelRun> runs = {});

// One space (this CPU, its measured profile): what `kiln plan` searched before GPUs.
Result<PlanResult> plan_search(const api::ApplicationDescription& app, const PlanTarget& target,
                               const std::map<std::string, ModelCosts>& costs, const LatencyPredictor& predictor,
                               std::vector<ExcludedChoice> excluded = {}, const std::vector<ModelRun>& runs = {});

}  // namespace kiln::perf

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
  std::string precision;  // "fp32", "bf16", "int8"
  int64_t batch = 1;
  int threads = 1;         // per instance
  int instances = 1;       // per node, each running batches independently on its own cores
  double latency_ms = 0;   // predicted, one batch
  double throughput_per_s = 0;  // samples per second over all nodes
  int64_t memory_bytes = 0;     // per node: every instance's weights and intermediates
  std::optional<double> cost_per_million;
  std::string accuracy;    // "reference" (fp32) or "unverified"
  bool threads_extrapolated = false;  // the profile has no kernel points at this thread count
  std::string latency_source = "predicted";  // "measured" (an earlier run of exactly this), "corrected" (scaled by one)
  std::vector<std::string> blocked_by;  // the constraints it misses, each with its numbers
  bool feasible() const { return blocked_by.empty(); }
  bool pareto = false;
  double violation = 0;    // sum of relative misses (0 when feasible): how far from feasible
  std::string name() const;  // "int8 b8 t2x1"
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

// Searches the space over `costs` (one per precision considered). Fails only when the objective
// needs something the target does not give (cost without a price).
Result<PlanResult> plan_search(const api::ApplicationDescription& app, const PlanTarget& target,
                               const std::map<std::string, ModelCosts>& costs, const LatencyPredictor& predictor,
                               std::vector<ExcludedChoice> excluded = {}, const std::vector<ModelRun>& runs = {});

}  // namespace kiln::perf

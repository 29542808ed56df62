// `kiln plan` as a function, shared by the CLI verbs (plan, optimize) and the service
// (POST /v1/plan): resolve the target and its benchmark profile, fit (or read the cached fit of)
// the latency predictor, get the model's per-precision costs (cached by model digest), search,
// and render plan.json.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/description.h"
#include "kernels/core/status.h"
#include "perfmodel/predictor.h"
#include "perfmodel/priors.h"
#include "perfmodel/search/model_costs.h"
#include "perfmodel/search/planner.h"
#include "perfmodel/target_profile.h"

namespace kiln::planning {

struct PlanInputs {
  const api::ApplicationDescription* app = nullptr;
  const api::TargetInfrastructure* target = nullptr;  // null: this machine
  std::string target_source;  // names the target document in errors
  std::string model_path;     // the model file (the description's, resolved)
  std::string db;             // benchmark store; empty: the default
  std::string profile;        // stored profile to use (id or CPU model part); empty: the target's
  std::string cache_root;     // fits, model costs and digests; empty: kiln_cache_dir()
  bool no_cache = false;      // recompute the model's costs
  bool use_model_runs = true; // earlier measurements of this model correct its predictions (off: predictions only)
};

struct PlanTimings {
  double profile_ms = 0, fit_ms = 0, costs_ms = 0, search_ms = 0, total_ms = 0;
  bool fit_cached = false, costs_cached = false;
};

struct PlanOutcome {
  perf::PlanTarget target;
  perf::TargetProfile profile;
  std::optional<perf::LatencyPredictor> predictor;  // fitted to a measured CPU profile (none for a prior)
  const perf::TargetPrior* cpu_prior = nullptr;      // a remote CPU known only by its spec sheet
  const perf::TargetPrior* gpu_prior = nullptr;      // the node's GPUs (spec prior)
  // A stored profile of the node's GPU model (kiln bench-target --device cuda there, imported):
  // its fitted predictor prices the GPUs instead of the prior, which still gives the host link.
  std::optional<perf::TargetProfile> gpu_profile;
  std::optional<perf::LatencyPredictor> gpu_predictor;
  int gpus = 0;
  int64_t gpu_memory_bytes = 0;
  std::map<std::string, perf::ModelCosts> costs;  // the CPU's, per precision
  std::optional<perf::ModelCosts> gpu_plan_costs;  // the CUDA plan's (kCudaPlan, float32), when the GPUs were planned
  perf::PlanResult result;
  PlanTimings timings;
  std::string model_digest;  // SHA-256 hex of the model file
};

// The model file a description names, resolved against the description's folder; an error for a
// model given only by URL.
Result<std::string> plan_model_path(const api::ApplicationDescription& app);

Result<PlanOutcome> plan_application(const PlanInputs& inputs);

// The costs of the CUDA plan (PlanOutcome::gpu_plan_costs) as the GPU runs it at `precision`, the
// steps in `keep_fp32` (GPU mixed precision) in float32.
perf::ModelCosts gpu_costs(const perf::ModelCosts& cuda_plan, const std::string& precision,
                           const std::vector<std::string>& keep_fp32 = {});

// One run of `costs` at `batch` on the outcome's GPUs, priced as plan_application prices its GPU
// candidates (the GPU profile's predictor and host link, else the spec prior); nullopt when the
// target has no GPUs.
std::optional<double> gpu_run_ms(const PlanOutcome& outcome, const perf::ModelCosts& costs, int64_t batch);

// Whether the target can be priced (a stored profile, or a spec prior): plan_application's first
// step, without the model. The error says what is missing (e.g. `kiln bench-target` to run).
Status plan_target_check(const PlanInputs& inputs);

// The model imported with its batch bound to 1, shapes inferred: the planner scales every
// candidate from there. (Other symbolic dimensions are not bound: a model with them fails to
// compile, naming the input.)
Result<Graph> load_graph_at_batch_1(const std::string& path);

// plan.json: format kiln-plan v1 (status, chosen, candidates, excluded, explanation, fit, timings).
nlohmann::json plan_json(const PlanInputs& inputs, const PlanOutcome& outcome);

// The candidates kiln optimize compiles, verifies and (on this machine) measures: the top `top`
// CPU candidates in plan order, plus the best one of each precision not among them (fp32 is the
// fallback when a reduced precision loses too much accuracy), plus up to two near misses: predicted
// to break a constraint by at most kNearMissViolation (within the predictor's error) and to beat
// the plan's choice on `objective` if they meet it when measured. GPU candidates need the GPU.
inline constexpr double kNearMissViolation = 0.10;
std::vector<perf::Candidate> candidates_to_try(const perf::PlanResult& result, int top, api::Objective objective);

// One candidate as plan.json and report.json list it.
nlohmann::json candidate_json(const perf::Candidate& c, bool chosen);

// SHA-256 hex of a file, remembered per (path, size, mtime, inode) under `cache_root`/digests.
Result<std::string> file_digest_remembered(const std::string& path, const std::string& cache_root);

}  // namespace kiln::planning

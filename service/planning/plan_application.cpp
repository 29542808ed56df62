#include "service/planning/plan_application.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "compilers/ir/shape_inference.h"
#include "compilers/onnx/import.h"
#include "containers/oci/digest.h"
#include "perfmodel/cache_file.h"
#include "perfmodel/predictor_cache.h"

namespace kiln::planning {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The target's node and the benchmark profile its predictions come from.
Status resolve_target(const PlanInputs& in, const std::string& db, PlanOutcome& out, std::vector<std::string>& notes) {
  const api::TargetInfrastructure* target = in.target;
  const api::ApplicationDescription& app = *in.app;
  if (!target)
    KILN_REQUIRE(app.target.empty() || app.target == "local", invalid_argument, app.source, ": target '", app.target,
                 "' names a target registered with the service; give its document (or plan for this machine without one)");
  const bool local = !target || target->kind == api::TargetKind::local;
  // A remote node is predicted from a profile measured on the same CPU model (imported from it).
  std::string wanted = in.profile;
  if (!local && wanted.empty()) {
    KILN_REQUIRE(!target->node.cpu.model.empty(), invalid_argument, in.target_source,
                 ": /node/cpu/model is needed to find the target's benchmark profile (or name the profile)");
    wanted = target->node.cpu.model;
  }
  auto profile = perf::target_profile_load(db, wanted);
  if (!profile) {
    if (local) return profile.status();
    return profile.status().with_context("target '" + target->name + "' (" + target->node.cpu.model + "): ");
  }
  out.profile = std::move(*profile);
  perf::PlanTarget& t = out.target;
  const perf::TargetFingerprint& fp = out.profile.target.fingerprint;
  t.profile_id = fp.id;
  t.profile_source = out.profile.target.source;
  if (local) {
    t.name = target ? target->name : "local";
    t.cores = std::max(1, fp.usable_threads);
    t.memory_bytes = fp.memory_bytes;
  } else {
    t.name = target->name;
    t.cores = static_cast<int>(std::max<int64_t>(1, target->node.cpu.cores));
    t.memory_bytes = static_cast<int64_t>(target->node.memory_gb * 1024.0 * 1024.0 * 1024.0);
  }
  if (target) {
    t.nodes = target->nodes;
    t.price_per_node_hour = target->price_per_node_hour;
    t.currency = target->currency;
    if (!target->node.gpus.empty())
      notes.push_back("The node's GPUs are not planned for: kiln has no GPU backend yet; this plan uses its CPUs.");
  }
  for (const perf::Measurement& m : out.profile.measurements)
    if (m.kind == perf::kKindKernel && std::find(t.measured_threads.begin(), t.measured_threads.end(), m.threads) == t.measured_threads.end())
      t.measured_threads.push_back(m.threads);
  std::sort(t.measured_threads.begin(), t.measured_threads.end());
  return Status::ok();
}

// Batch 1: the planner scales every candidate from there. (Other symbolic dimensions are not
// bound: a model with them fails to compile, naming the input.)
Result<Graph> load_graph_at_batch_1(const std::string& path) {
  KILN_ASSIGN(graph, onnx_import_file(path));
  ShapeInferenceOptions options;
  for (ValueId in : graph.inputs) {
    const ValueType& t = graph.value(in).type;
    if (t.rank_known && !t.shape.empty() && !t.shape[0].known() && !t.shape[0].symbol.empty()) options.bindings[t.shape[0].symbol] = 1;
  }
  auto inferred = graph_infer_shapes(graph, options);
  if (!inferred) return inferred.status().with_context(path + ": ");
  return graph;
}

Result<std::string> file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_REQUIRE(in, io, "cannot open model ", path);
  oci::Sha256 sha;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    sha.update({reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(in.gcount())});
  }
  return sha.hex();
}

// Per precision: the cached costs, else compiled now (and cached).
Status model_costs(const PlanInputs& in, const std::string& root, const std::vector<std::string>& precisions,
                   PlanOutcome& out, std::vector<std::string>& notes) {
  KILN_ASSIGN(digest, file_digest_remembered(in.model_path, root));
  out.model_digest = digest;
  const std::string dir = root + "/model-costs";
  std::optional<Graph> graph;
  out.timings.costs_cached = true;
  for (const std::string& precision : precisions) {
    const std::string path = perf::model_costs_cache_path(dir, digest, precision, out.target.profile_id);
    if (!in.no_cache)
      if (auto cached = perf::model_costs_read(path)) {
        out.costs.emplace(precision, std::move(*cached));
        continue;
      }
    out.timings.costs_cached = false;
    if (!graph) {
      KILN_ASSIGN(g, load_graph_at_batch_1(in.model_path));
      graph = std::move(g);
    }
    auto costs = perf::model_costs_compute(*graph, precision);
    if (!costs) return costs.status().with_context(in.model_path + " (" + precision + "): ");
    if (Status written = perf::model_costs_write(*costs, path); !written.ok())
      notes.push_back("The model's costs were not cached: " + written.message());
    out.costs.emplace(precision, std::move(*costs));
  }
  return Status::ok();
}

}  // namespace

// Hashing a 100 MB model takes ~60 ms of the plan's budget: the digest is remembered per file
// (path, size, modification time, inode), as git's index does, and recomputed when any differs.
Result<std::string> file_digest_remembered(const std::string& path, const std::string& cache_root) {
  struct stat st {};
  KILN_REQUIRE(::stat(path.c_str(), &st) == 0, io, "cannot open model ", path);
  std::error_code ec;
  const std::string canonical = fs::weakly_canonical(path, ec).string();
  const nlohmann::json identity = {{"path", canonical}, {"size", static_cast<int64_t>(st.st_size)},
                                   {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec},
                                   {"inode", static_cast<uint64_t>(st.st_ino)}};
  const std::string memo = cache_root + "/digests/" + oci::sha256_digest(canonical).substr(7, 32) + ".json";
  if (auto text = perf::cache_file_read(memo)) {
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.value("identity", nlohmann::json()) == identity && j.value("sha256", "").size() == 64)
      return j["sha256"].get<std::string>();
  }
  KILN_ASSIGN(digest, file_digest(path));
  (void)perf::cache_file_write(memo, nlohmann::json{{"identity", identity}, {"sha256", digest}}.dump());
  return digest;
}

Result<std::string> plan_model_path(const api::ApplicationDescription& app) {
  KILN_REQUIRE(!app.model.path.empty(), invalid_argument, app.source,
               ": /model: planning needs a local model file (model.path); fetch the URL first");
  const fs::path p(app.model.path);
  return p.is_absolute() ? p.string() : (fs::path(app.source).parent_path() / p).string();
}

Result<PlanOutcome> plan_application(const PlanInputs& in) {
  const auto start = Clock::now();
  PlanOutcome out;
  std::vector<std::string> notes;
  const std::string db = in.db.empty() ? perf::benchmark_store_default_path() : in.db;
  const std::string root = in.cache_root.empty() ? perf::kiln_cache_dir() : in.cache_root;

  auto t0 = Clock::now();
  KILN_TRY(resolve_target(in, db, out, notes));
  out.timings.profile_ms = ms_since(t0);

  t0 = Clock::now();
  KILN_ASSIGN(predictor, perf::predictor_fit_cached(out.profile.measurements, {}, root + "/predictor", &out.timings.fit_cached));
  out.predictor = std::move(predictor);
  out.timings.fit_ms = ms_since(t0);

  std::vector<perf::ExcludedChoice> excluded;
  const std::vector<std::string> precisions = perf::plan_precisions(*in.app, out.profile.target.fingerprint, &excluded);
  t0 = Clock::now();
  if (!precisions.empty()) KILN_TRY(model_costs(in, root, precisions, out, notes));
  out.timings.costs_ms = ms_since(t0);

  t0 = Clock::now();
  std::vector<perf::ModelRun> runs;
  for (const perf::Measurement& m : out.profile.measurements)
    if (in.use_model_runs && m.kind == perf::kKindModel && m.kernel == out.model_digest)
      runs.push_back({m.dtype == "f32" ? "fp32" : m.dtype, m.batch, m.threads, m.median_ms});
  KILN_ASSIGN(result, perf::plan_search(*in.app, out.target, out.costs, *out.predictor, excluded, runs));
  out.result = std::move(result);
  out.timings.search_ms = ms_since(t0);
  for (const std::string& n : notes) out.result.explanation.push_back(n);
  out.timings.total_ms = ms_since(start);
  return out;
}

nlohmann::json candidate_json(const perf::Candidate& c, bool chosen) {
  nlohmann::json j = {{"name", c.name()}, {"precision", c.precision}, {"batch", c.batch}, {"threads", c.threads},
                      {"instances", c.instances}, {"predicted_ms", c.latency_ms}, {"throughput_per_s", c.throughput_per_s},
                      {"memory_bytes", c.memory_bytes}, {"accuracy", c.accuracy}, {"pareto", c.pareto},
                      {"feasible", c.feasible()}, {"blocked_by", c.blocked_by}, {"chosen", chosen},
                      {"threads_extrapolated", c.threads_extrapolated}, {"latency_source", c.latency_source}};
  j["cost_per_million"] = c.cost_per_million ? nlohmann::json(*c.cost_per_million) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json plan_json(const PlanInputs& in, const PlanOutcome& out) {
  const perf::PlanResult& r = out.result;
  nlohmann::json candidates = nlohmann::json::array();
  for (size_t i = 0; i < r.candidates.size(); ++i) candidates.push_back(candidate_json(r.candidates[i], r.chosen && *r.chosen == i));
  nlohmann::json excluded = nlohmann::json::array();
  for (const perf::ExcludedChoice& e : r.excluded) excluded.push_back({{"what", e.what}, {"reason", e.reason}});
  const perf::PlanTarget& t = out.target;
  const perf::FitSummary& fit = out.predictor->summary();
  const PlanTimings& time = out.timings;
  return {{"format", "kiln-plan"}, {"version", 1}, {"status", r.status},
          {"application", in.app->name}, {"description", in.app->source}, {"model", in.model_path},
          {"model_sha256", out.model_digest}, {"objective", api::objective_name(in.app->objective)},
          {"target", {{"name", t.name}, {"profile", t.profile_id}, {"profile_source", t.profile_source},
                      {"cpu_model", out.profile.target.fingerprint.cpu_model}, {"cores", t.cores}, {"nodes", t.nodes},
                      {"measured_threads", t.measured_threads}}},
          {"chosen", r.chosen ? candidates[*r.chosen] : nlohmann::json(nullptr)},
          {"candidates", candidates}, {"excluded", excluded}, {"explanation", r.explanation},
          {"fit", {{"method", fit.method}, {"points", fit.points_used}, {"heldout_median_error", fit.heldout_median_chosen}}},
          {"timings_ms", {{"profile", time.profile_ms}, {"fit", time.fit_ms}, {"model_costs", time.costs_ms},
                          {"search", time.search_ms}, {"total", time.total_ms}, {"model_costs_cached", time.costs_cached},
                          {"fit_cached", time.fit_cached}}}};
}

}  // namespace kiln::planning

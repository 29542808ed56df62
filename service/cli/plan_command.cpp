// kiln plan APP.yaml [--target TARGET.yaml]: prediction only. Loads the target's benchmark
// profile, fits the latency predictor, gets the model's per-precision costs (from the cache, or by
// compiling it once per precision), searches precision × batch × threads × instances against the
// description's objective and constraints, prints the ranked candidates with the explanation and
// writes plan.json. Exit code 3 when no candidate meets the constraints (the plan is still written).
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "api/description.h"
#include "containers/oci/digest.h"
#include "perfmodel/cache_file.h"
#include "perfmodel/precision_compile.h"
#include "perfmodel/predictor_cache.h"
#include "perfmodel/search/model_costs.h"
#include "perfmodel/search/planner.h"
#include "perfmodel/target_profile.h"
#include "service/cli/commands.h"
#include "service/cli/model_loading.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

constexpr int kExitInfeasible = 3;

struct PlanOptions {
  std::string description;
  std::string target;
  std::string db;
  std::string profile;
  std::string cache_dir;
  std::string output = ".";
  int top = 12;
  bool no_cache = false;
  bool json = false;
};

struct Timings {
  double profile = 0, fit = 0, costs = 0, search = 0;
};

// The target's node and the benchmark profile its predictions come from.
struct ResolvedTarget {
  perf::PlanTarget plan;
  perf::TargetProfile profile;
  std::vector<std::string> notes;
};

Result<ResolvedTarget> resolve_target(const PlanOptions& o, const api::ApplicationDescription& app, const std::string& db) {
  std::optional<api::TargetInfrastructure> target;
  if (!o.target.empty()) {
    auto loaded = api::target_load(o.target);
    KILN_REQUIRE(loaded, invalid_argument, "target '", o.target, "': ", loaded.message());
    target = std::move(loaded).value();
  } else {
    KILN_REQUIRE(app.target.empty() || app.target == "local", invalid_argument, app.source, ": target '", app.target,
                 "' names a target registered with the service; give its document with --target FILE (or plan for this "
                 "machine without one)");
  }
  const bool local = !target || target->kind == api::TargetKind::local;
  // A remote node is predicted from a profile measured on the same CPU model (imported from it).
  std::string wanted = o.profile;
  if (!local && wanted.empty()) {
    KILN_REQUIRE(!target->node.cpu.model.empty(), invalid_argument, o.target,
                 ": /node/cpu/model is needed to find the target's benchmark profile (or name it with --profile ID)");
    wanted = target->node.cpu.model;
  }
  auto profile = perf::target_profile_load(db, wanted);
  if (!profile) {
    if (local) return profile.status();
    return profile.status().with_context("target '" + target->name + "' (" + target->node.cpu.model + "): ");
  }
  ResolvedTarget r;
  r.profile = std::move(*profile);
  const perf::TargetFingerprint& fp = r.profile.target.fingerprint;
  r.plan.profile_id = fp.id;
  r.plan.profile_source = r.profile.target.source;
  if (local) {
    r.plan.name = target ? target->name : "local";
    r.plan.cores = std::max(1, fp.usable_threads);
    r.plan.memory_bytes = fp.memory_bytes;
  } else {
    r.plan.name = target->name;
    r.plan.cores = static_cast<int>(std::max<int64_t>(1, target->node.cpu.cores));
    r.plan.memory_bytes = static_cast<int64_t>(target->node.memory_gb * 1024.0 * 1024.0 * 1024.0);
  }
  if (target) {
    r.plan.nodes = target->nodes;
    r.plan.price_per_node_hour = target->price_per_node_hour;
    r.plan.currency = target->currency;
    if (!target->node.gpus.empty())
      r.notes.push_back("The node's GPUs are not planned for: kiln has no GPU backend yet; this plan uses its CPUs.");
  }
  for (const perf::Measurement& m : r.profile.measurements)
    if (m.kind == perf::kKindKernel &&
        std::find(r.plan.measured_threads.begin(), r.plan.measured_threads.end(), m.threads) == r.plan.measured_threads.end())
      r.plan.measured_threads.push_back(m.threads);
  std::sort(r.plan.measured_threads.begin(), r.plan.measured_threads.end());
  return r;
}

// Batch 1: the planner scales every candidate from there. (Other symbolic dimensions are not
// bound: a model with them fails to compile, naming the input.)
Result<Graph> load_graph_at_batch_1(const std::string& path) {
  DimOptions dims;
  dims.batch = 1;
  KILN_ASSIGN(model, load_model(path, &dims));
  return std::move(model.graph);
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

// Per precision: the cached costs, else compiled now (and cached).
Result<std::map<std::string, perf::ModelCosts>> model_costs(const PlanOptions& o, const std::string& model_path,
                                                           const std::vector<std::string>& precisions,
                                                           const std::string& fingerprint_id, std::vector<std::string>* notes) {
  const std::string root = o.cache_dir.empty() ? perf::kiln_cache_dir() : o.cache_dir;
  KILN_ASSIGN(digest, file_digest_remembered(model_path, root));
  const std::string dir = root + "/model-costs";
  std::map<std::string, perf::ModelCosts> out;
  std::optional<Graph> graph;
  for (const std::string& precision : precisions) {
    const std::string path = perf::model_costs_cache_path(dir, digest, precision, fingerprint_id);
    if (!o.no_cache)
      if (auto cached = perf::model_costs_read(path)) {
        out.emplace(precision, std::move(*cached));
        continue;
      }
    if (!graph) {
      KILN_ASSIGN(g, load_graph_at_batch_1(model_path));
      graph = std::move(g);
    }
    auto costs = perf::model_costs_compute(*graph, precision);
    if (!costs) return costs.status().with_context(model_path + " (" + precision + "): ");
    if (Status written = perf::model_costs_write(*costs, path); !written.ok())
      notes->push_back("The model's costs were not cached: " + written.message());
    out.emplace(precision, std::move(*costs));
  }
  return out;
}

nlohmann::json candidate_json(const perf::Candidate& c, bool chosen) {
  nlohmann::json j = {{"name", c.name()}, {"precision", c.precision}, {"batch", c.batch}, {"threads", c.threads},
                      {"instances", c.instances}, {"predicted_ms", c.latency_ms}, {"throughput_per_s", c.throughput_per_s},
                      {"memory_bytes", c.memory_bytes}, {"accuracy", c.accuracy}, {"pareto", c.pareto},
                      {"feasible", c.feasible()}, {"blocked_by", c.blocked_by}, {"chosen", chosen},
                      {"threads_extrapolated", c.threads_extrapolated}};
  j["cost_per_million"] = c.cost_per_million ? nlohmann::json(*c.cost_per_million) : nlohmann::json(nullptr);
  return j;
}

void print_table(const perf::PlanResult& r, const perf::PlanTarget& t, int top) {
  const bool cost = t.price_per_node_hour.has_value();
  std::printf("%4s  %-18s %10s %12s %10s %s %-10s %s\n", "rank", "candidate", "ms/batch", "samples/s", "MiB/node",
              cost ? ("   " + t.currency + "/1M").c_str() : "", "accuracy", "notes");
  for (size_t i = 0; i < r.candidates.size() && static_cast<int>(i) < top; ++i) {
    const perf::Candidate& c = r.candidates[i];
    std::string notes;
    if (r.chosen && *r.chosen == i) notes += "chosen ";
    if (c.pareto) notes += "pareto ";
    for (const std::string& b : c.blocked_by) notes += "[" + b + "] ";
    char cost_col[32] = "";
    if (cost && c.cost_per_million) std::snprintf(cost_col, sizeof cost_col, "%9.4f", *c.cost_per_million);
    std::printf("%4zu  %-18s %10.3f %12.1f %10.1f %s %-10s %s\n", i + 1, c.name().c_str(), c.latency_ms, c.throughput_per_s,
                static_cast<double>(c.memory_bytes) / (1024.0 * 1024.0), cost_col, c.accuracy.c_str(), notes.c_str());
  }
  if (static_cast<int>(r.candidates.size()) > top)
    std::printf("      ... %zu more in plan.json\n", r.candidates.size() - static_cast<size_t>(top));
}

int run_plan(const PlanOptions& o) {
  const auto start = Clock::now();
  Timings time;
  auto loaded = api::application_load(o.description);
  if (!loaded) return report_error(loaded.message());
  const api::ApplicationDescription* app = &loaded.value();
  if (app->model.path.empty())
    return report_error(o.description + ": /model: `kiln plan` needs a local model file (model.path); fetch the URL first");
  const std::string model_path = (fs::path(app->source).parent_path() / app->model.path).string();

  const std::string db = o.db.empty() ? perf::benchmark_store_default_path() : o.db;
  auto t0 = Clock::now();
  auto target = resolve_target(o, *app, db);
  if (!target) return report_error(target.error().message);
  time.profile = ms_since(t0);
  t0 = Clock::now();
  bool fit_cached = false;
  auto predictor = perf::predictor_fit_cached(target->profile.measurements, {},
                                              o.cache_dir.empty() ? "" : o.cache_dir + "/predictor", &fit_cached);
  if (!predictor) return report_error(predictor.error().message);
  time.fit = ms_since(t0);

  std::vector<perf::ExcludedChoice> excluded;
  const std::vector<std::string> precisions = perf::plan_precisions(*app, target->profile.target.fingerprint, &excluded);
  t0 = Clock::now();
  auto costs = model_costs(o, model_path, precisions, target->plan.profile_id, &target->notes);
  if (!costs) return report_error(costs.error().message);
  time.costs = ms_since(t0);
  t0 = Clock::now();
  auto result = perf::plan_search(*app, target->plan, *costs, *predictor, excluded);
  if (!result) return report_error(result.error().message);
  time.search = ms_since(t0);
  for (const std::string& n : target->notes) result->explanation.push_back(n);
  const double total = ms_since(start);

  bool cached = true;
  for (const auto& [p, c] : *costs) cached = cached && c.from_cache;
  nlohmann::json candidates = nlohmann::json::array();
  for (size_t i = 0; i < result->candidates.size(); ++i)
    candidates.push_back(candidate_json(result->candidates[i], result->chosen && *result->chosen == i));
  nlohmann::json excluded_json = nlohmann::json::array();
  for (const perf::ExcludedChoice& e : result->excluded) excluded_json.push_back({{"what", e.what}, {"reason", e.reason}});
  const perf::PlanTarget& t = target->plan;
  nlohmann::json plan = {
      {"format", "kiln-plan"}, {"version", 1}, {"status", result->status},
      {"application", app->name}, {"description", o.description}, {"model", model_path},
      {"objective", api::objective_name(app->objective)},
      {"target", {{"name", t.name}, {"profile", t.profile_id}, {"profile_source", t.profile_source},
                  {"cpu_model", target->profile.target.fingerprint.cpu_model}, {"cores", t.cores}, {"nodes", t.nodes},
                  {"measured_threads", t.measured_threads}}},
      {"chosen", result->chosen ? candidates[*result->chosen] : nlohmann::json(nullptr)},
      {"candidates", candidates}, {"excluded", excluded_json}, {"explanation", result->explanation},
      {"fit", {{"method", predictor->summary().method}, {"points", predictor->summary().points_used},
               {"heldout_median_error", predictor->summary().heldout_median_chosen}}},
      {"timings_ms", {{"profile", time.profile}, {"fit", time.fit}, {"model_costs", time.costs}, {"search", time.search},
                      {"total", total}, {"model_costs_cached", cached}, {"fit_cached", fit_cached}}}};

  std::error_code ec;
  fs::create_directories(o.output, ec);
  const std::string plan_path = (fs::path(o.output) / "plan.json").string();
  std::ofstream out(plan_path, std::ios::trunc);
  out << plan.dump(2) << '\n';
  if (!out.good()) return report_error("cannot write " + plan_path);
  out.close();

  if (o.json) {
    std::cout << plan.dump(2) << '\n';
  } else {
    print_table(*result, t, o.top);
    std::printf("\n");
    for (const std::string& line : result->explanation) std::printf("%s\n", line.c_str());
    std::printf("\nplanned in %.0f ms (profile %.0f, fit %.0f%s, model costs %.0f%s, search %.0f); wrote %s\n", total,
                time.profile, time.fit, fit_cached ? " from the cache" : "", time.costs, cached ? " from the cache" : ", compiled",
                time.search, plan_path.c_str());
  }
  return result->chosen ? kExitOk : kExitInfeasible;
}

}  // namespace

void add_plan_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Choose precision, batch size and threads for an application on a target (prediction only)");
  cmd->add_option("description", opts->description, "Application description (YAML or JSON)")->required();
  cmd->add_option("--target", opts->target, "Target infrastructure document (default: this machine)");
  cmd->add_option("--db", opts->db, "Benchmark store (default $KILN_DATA_DIR/benchmarks.sqlite, else ~/.local/share/kiln/benchmarks.sqlite)");
  cmd->add_option("--profile", opts->profile, "Stored profile to predict with: fingerprint id, or part of its CPU model (default: the target's CPU model, or this machine)");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache folder for fitted predictors and model costs (default $KILN_CACHE_DIR, else ~/.cache/kiln)");
  cmd->add_flag("--no-cache", opts->no_cache, "Compile the model again instead of reading its cached costs (the fit is always cached by its rows)");
  cmd->add_option("--output,-o", opts->output, "Folder for plan.json (default: the current folder)");
  cmd->add_option("--top", opts->top, "Candidates shown in the table (default 12; plan.json has all)")->check(CLI::PositiveNumber);
  cmd->add_flag("--json", opts->json, "Print plan.json instead of the table");
  cmd->callback([opts, &run] { run = [opts] { return run_plan(*opts); }; });
}

}  // namespace kiln::cli

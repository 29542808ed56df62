// kiln plan APP.yaml [--target TARGET.yaml]: prediction only (service/planning/plan_application):
// prints the ranked candidates with the explanation and writes plan.json. Exit code 3 when no
// candidate meets the constraints (the plan is still written).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "service/cli/commands.h"
#include "service/cli/plan_request.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct PlanOptions {
  PlanCli plan;
  std::string output = ".";
  int top = 12;
  bool no_cache = false;
  bool json = false;
};

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
  auto request = plan_request_load(o.plan);
  if (!request) return report_error(request.error().message);
  planning::PlanInputs& in = (*request)->inputs;
  in.no_cache = o.no_cache;
  auto outcome = planning::plan_application(in);
  if (!outcome) return report_error(outcome.error().message);
  const nlohmann::json plan = planning::plan_json(in, *outcome);

  std::error_code ec;
  fs::create_directories(o.output, ec);
  const std::string plan_path = (fs::path(o.output) / "plan.json").string();
  {
    std::ofstream out(plan_path, std::ios::trunc);
    out << plan.dump(2) << '\n';
    if (!out.good()) return report_error("cannot write " + plan_path);
  }
  const perf::PlanResult& r = outcome->result;
  if (o.json) {
    std::cout << plan.dump(2) << '\n';
  } else {
    print_table(r, outcome->target, o.top);
    std::printf("\n");
    for (const std::string& line : r.explanation) std::printf("%s\n", line.c_str());
    const planning::PlanTimings& t = outcome->timings;
    std::printf("\nplanned in %.0f ms (profile %.0f, fit %.0f%s, model costs %.0f%s, search %.0f); wrote %s\n", t.total_ms,
                t.profile_ms, t.fit_ms, t.fit_cached ? " from the cache" : "", t.costs_ms,
                t.costs_cached ? " from the cache" : ", compiled", t.search_ms, plan_path.c_str());
  }
  return r.chosen ? kExitOk : kExitInfeasible;
}

}  // namespace

void add_plan_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Choose precision, batch size and threads for an application on a target (prediction only)");
  opts->plan.add_to(*cmd);
  cmd->add_flag("--no-cache", opts->no_cache, "Compile the model again instead of reading its cached costs (the fit is always cached by its rows)");
  cmd->add_option("--output,-o", opts->output, "Folder for plan.json (default: the current folder)");
  cmd->add_option("--top", opts->top, "Candidates shown in the table (default 12; plan.json has all)")->check(CLI::PositiveNumber);
  cmd->add_flag("--json", opts->json, "Print plan.json instead of the table");
  cmd->callback([opts, &run] { run = [opts] { return run_plan(*opts); }; });
}

}  // namespace kiln::cli

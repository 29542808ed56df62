#include "service/cli/plan_request.h"

namespace kiln::cli {

void PlanCli::add_to(CLI::App& cmd) {
  cmd.add_option("description", description, "Application description (YAML or JSON)")->required();
  cmd.add_option("--target", target, "Target infrastructure document (default: this machine)");
  cmd.add_option("--db", db, "Benchmark store (default $KILN_DATA_DIR/benchmarks.sqlite, else ~/.local/share/kiln/benchmarks.sqlite)");
  cmd.add_option("--profile", profile, "Stored profile to predict with: fingerprint id, or part of its CPU model (default: the target's CPU model, or this machine)");
  cmd.add_option("--model", model, "The model file, instead of the description's model.path");
  cmd.add_option("--cache-dir", cache_dir, "Cache folder for fitted predictors and model costs (default $KILN_CACHE_DIR, else ~/.cache/kiln)");
}

Result<std::unique_ptr<PlanRequest>> plan_request_load(const PlanCli& cli) {
  auto request = std::make_unique<PlanRequest>();
  auto app = api::application_load(cli.description);
  KILN_REQUIRE(app, invalid_argument, app.message());
  request->app = std::move(app).value();
  if (!cli.target.empty()) {
    auto target = api::target_load(cli.target);
    KILN_REQUIRE(target, invalid_argument, "target '", cli.target, "': ", target.message());
    request->target = std::move(target).value();
  }
  std::string model_path = cli.model;
  if (model_path.empty()) {
    KILN_ASSIGN(described, planning::plan_model_path(request->app));
    model_path = described;
  }
  planning::PlanInputs& in = request->inputs;
  in.app = &request->app;
  in.target = request->target ? &*request->target : nullptr;
  in.target_source = cli.target;
  in.model_path = model_path;
  in.db = cli.db;
  in.profile = cli.profile;
  in.cache_root = cli.cache_dir;
  return request;
}

}  // namespace kiln::cli

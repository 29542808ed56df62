// What `kiln plan` and `kiln optimize` share: the options naming the description, target, store,
// profile and caches, and the loaded documents as planning::PlanInputs.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "api/description.h"
#include "kernels/core/status.h"
#include "service/planning/plan_application.h"

namespace kiln::cli {

struct PlanCli {
  std::string description;
  std::string target;
  std::string db;
  std::string profile;
  std::string cache_dir;
  std::string model;  // instead of the description's model.path (kiln serve: the job's upload)

  void add_to(CLI::App& cmd);
};

// The documents the inputs point into: kept together, never moved.
struct PlanRequest {
  api::ApplicationDescription app;
  std::optional<api::TargetInfrastructure> target;
  planning::PlanInputs inputs;
};

// Loads and validates the description and the target (errors name the file and field) and
// resolves the model file.
Result<std::unique_ptr<PlanRequest>> plan_request_load(const PlanCli& cli);

}  // namespace kiln::cli

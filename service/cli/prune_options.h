// The pruning options of the verbs that compile (compile, verify, export): how much the
// prune_channels and prune_magnitude passes remove.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "compilers/passes/pass.h"

namespace kiln::cli {

struct PruneCli {
  PruneOptions options;
  bool channels_given = false, sparsity_given = false;

  void add_to(CLI::App& cmd);
  // A ratio given for a pass the pipeline does not run is a mistake the user should hear about.
  Status check(const std::vector<std::string>& passes) const;
};

}  // namespace kiln::cli

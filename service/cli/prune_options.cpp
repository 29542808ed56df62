#include "service/cli/prune_options.h"

#include <algorithm>

namespace kiln::cli {

void PruneCli::add_to(CLI::App& cmd) {
  cmd.add_option_function<double>(
         "--prune-channels",
         [this](double r) {
           options.channel_ratio = r;
           channels_given = true;
         },
         "prune_channels: fraction of the channels removed from each prunable group, by filter L1 norm "
         "(default 0.3; no fine-tuning)")
      ->check(CLI::Range(0.0, 0.95));
  cmd.add_option_function<double>(
         "--prune-sparsity",
         [this](double s) {
           options.sparsity = s;
           sparsity_given = true;
         },
         "prune_magnitude: fraction of the weights set to zero, smallest magnitude first (default 0.5; no fine-tuning)")
      ->check(CLI::Range(0.0, 0.99));
  cmd.add_flag("--prune-per-layer", options.per_layer,
               "prune_magnitude: the same sparsity in every layer instead of one global magnitude threshold");
}

Status PruneCli::check(const std::vector<std::string>& passes) const {
  const auto runs = [&](const char* pass) { return std::find(passes.begin(), passes.end(), pass) != passes.end(); };
  KILN_REQUIRE(!channels_given || runs("prune_channels"), invalid_argument,
               "--prune-channels is for the prune_channels pass: add it to the pipeline (--passes default+prune_channels)");
  KILN_REQUIRE(!(sparsity_given || options.per_layer) || runs("prune_magnitude"), invalid_argument,
               "--prune-sparsity/--prune-per-layer are for the prune_magnitude pass: add it to the pipeline "
               "(--passes default+prune_magnitude)");
  return Status::ok();
}

}  // namespace kiln::cli

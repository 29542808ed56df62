// Finding a target's profile for prediction: the store at its default place (or --db), the
// target (this machine's fingerprint unless named) and its measurements, with errors that say how
// to get a profile when there is none.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "perfmodel/measurement.h"
#include "perfmodel/priors.h"
#include "perfmodel/store.h"

namespace kiln::perf {

// $KILN_DATA_DIR/benchmarks.sqlite, else ~/.local/share/kiln/benchmarks.sqlite.
std::string benchmark_store_default_path();

struct TargetProfile {
  StoredTarget target;
  std::vector<Measurement> measurements;
};

// `target`: a stored target's id, or a substring of its CPU model or host; empty: this machine.
// A missing store file is not created. No target, or one without kernel measurements, is an error
// telling the user to run `kiln bench-target` (or to import a profile).
Result<TargetProfile> target_profile_load(const std::string& db_path, const std::string& target);

// The stored profile that replaces a spec prior (prior_replaced_by: a target of the same model
// with measurements, e.g. a GPU measured by `kiln bench-target --device cuda` and imported), or
// nullopt when the store does not exist or holds none. An error when the matching target cannot
// be used (no kernel-sweep rows, an unreadable store).
Result<std::optional<TargetProfile>> target_profile_replacing(const std::string& db_path, const TargetPrior& prior);

}  // namespace kiln::perf

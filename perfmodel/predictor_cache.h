// Fitting the latency predictor takes 0.1–0.3 s (a grid search per op/dtype/threads, five times
// over for the held-out choice); `kiln plan` must answer in well under that. The fit depends only
// on the profile's rows and the fit options, so it is cached on disk under a digest of both and
// refitted whenever a measurement is added or replaced.
#pragma once

#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "perfmodel/measurement.h"
#include "perfmodel/predictor.h"

namespace kiln::perf {

// A digest of everything a fit reads: each row's identity, timing and load, and the options.
std::string predictor_fit_digest(const std::vector<Measurement>& rows, const FitOptions& options);

// The fit cached under `cache_dir` (kiln_cache_dir()/predictor by default) for these rows and options, else a fresh fit (then
// cached; a cache that cannot be written only costs the next call a refit).
Result<LatencyPredictor> predictor_fit_cached(const std::vector<Measurement>& rows, const FitOptions& options,
                                              const std::string& cache_dir, bool* from_cache = nullptr);

}  // namespace kiln::perf

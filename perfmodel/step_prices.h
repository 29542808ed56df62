// Accuracy control's savings priced by a target profile's latency predictor instead of timed:
// the same layers fall back on every run, so a controlled compile is reproducible.
#pragma once

#include <optional>
#include <string>

#include "compilers/quantize/accuracy_control.h"
#include "perfmodel/predictor.h"

namespace kiln::perf {

// Prices each step of a plan with `predictor` (kept by reference: it must outlive the pricer).
StepPricer predicted_step_prices(const LatencyPredictor& predictor);

// This machine's profile in `db` fitted (cached under kiln_cache_dir()), or nullopt when the
// store has none or it cannot be fitted (then accuracy control times the layers instead).
std::optional<LatencyPredictor> local_predictor(const std::string& db);

}  // namespace kiln::perf

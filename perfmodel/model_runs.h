// Closing the loop: whole models measured on a target (kiln optimize's candidates) stored as `model` rows of
// its profile, which later plans of the same model use in place of (or to correct) their predictions. The
// fit never reads these rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "perfmodel/microbench/timing.h"

namespace kiln::perf {

struct MeasuredModelRun {
  std::string model;      // the model's digest (and what sets this variant apart: layers kept out of its precision)
  std::string precision;  // fp32, bf16, int8
  int64_t batch = 1;
  int threads = 1;
  Timing timing;
};

// One store run named `label`, a row per measured model keyed "MODEL PRECISION bB tT", with the load average.
Status store_model_runs(const std::string& db, const std::string& target_id, const std::string& label,
                        const std::vector<MeasuredModelRun>& runs);

}  // namespace kiln::perf

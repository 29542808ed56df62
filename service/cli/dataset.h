// A data set from the user's files for the verbs that need real inputs (verify, and calibration
// in compile/verify): a .npy (single-input models), a .npz with one entry per input (and
// optionally labels), or IDX images (+ labels) normalized as (p/255 - mean) / std.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/plan.h"
#include "kernels/verify/verify.h"

namespace kiln::cli {

struct DatasetOptions {
  std::string input;  // .npy or .npz
  std::string labels_entry = "labels";
  std::string idx_images, idx_labels;
  float mean = 0.0f, std = 1.0f;
  int64_t limit = 0;  // first N samples (0: all)
};

// Samples for `plan`'s inputs; errors name the file and what does not match.
Result<VerifyData> load_dataset(const DatasetOptions& opts, const Plan& plan);

}  // namespace kiln::cli

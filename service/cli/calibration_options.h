// The int8 options of the verbs that compile (compile, verify): where calibration data comes
// from, the calibration method and the layers kept in float32.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "compilers/passes/pass.h"
#include "kernels/plan.h"
#include "service/cli/dataset.h"

namespace kiln::cli {

struct CalibrationCli {
  std::string file;    // .npy / .npz, or IDX images (any other name)
  int64_t random = 0;  // seeded random samples instead of a file
  uint32_t seed = 7;   // differs from verify's default seed: calibrate and verify on different data
  int64_t limit = 0;
  std::string method = "minmax";
  float percentile = kDefaultPercentile;
  std::vector<std::string> keep_fp32;
  std::vector<std::string> keep_bf16;  // left out of int8 after mixed_precision_bf16
  float mean = 0.0f, std = 1.0f;  // IDX normalization (verify shares its own --mean/--std)
  // Accuracy control (compile, export): data (labelled or not) and the constraints.
  std::string accuracy_data, accuracy_labels;
  int64_t accuracy_random = 0;     // seeded random samples instead of a file (no labels)
  std::optional<DatasetOptions> accuracy_dataset;  // instead of a file: a description's data set (kiln optimize)
  uint32_t accuracy_seed = 11;     // differs from calibration's and verify's defaults
  double max_accuracy_drop = -1;   // < 0: not asked for
  double min_cosine = -2;          // < -1: not asked for
  double max_rel_error = -1;       // < 0: not asked for (GPU accuracy control only: kiln compile --device cuda)

  // `with_normalization`: also --mean/--std (verify registers its own).
  void add_to(CLI::App& cmd, bool with_normalization);
  void add_accuracy_control_to(CLI::App& cmd);
  bool given() const { return !file.empty() || random > 0; }
  bool accuracy_control() const {
    return max_accuracy_drop >= 0 || min_cosine >= -1 || max_rel_error >= 0 || !accuracy_data.empty() || accuracy_random > 0 ||
           accuracy_dataset.has_value();
  }
  // The same options without accuracy control (the data and constraints cleared).
  CalibrationCli without_accuracy_control() const {
    CalibrationCli c = *this;
    c.accuracy_data.clear(), c.accuracy_labels.clear(), c.accuracy_random = 0, c.accuracy_dataset.reset();
    c.max_accuracy_drop = -1, c.min_cosine = -2, c.max_rel_error = -1;
    return c;
  }
  // A constraint and exactly one data source are given: checked before any work.
  Status check_accuracy_control() const;
  Result<VerifyData> load_accuracy_data(const Plan& plan) const;
  // The samples for `plan`'s inputs, and the policy, as the quantize_int8 pass takes them.
  Result<CalibrationSet> load(const Plan& plan) const;
  Result<Int8Options> options(const CalibrationSet* set) const;

 private:
  // .npy/.npz by extension, anything else IDX images (normalized by mean/std); `first` > 0 keeps
  // only the first samples.
  DatasetOptions dataset_from_file(const std::string& path, const std::string& idx_labels, int64_t first) const;
};

}  // namespace kiln::cli

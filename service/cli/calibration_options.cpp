#include "service/cli/calibration_options.h"

#include <filesystem>

namespace kiln::cli {

void CalibrationCli::add_to(CLI::App& cmd, bool with_normalization) {
  cmd.add_option("--calibration", file,
                 "int8 calibration data: .npy (single-input models), .npz (an entry per input) or IDX images "
                 "(raw or .gz, normalized by --mean/--std)");
  cmd.add_option("--calibration-random", random, "Calibrate int8 on this many seeded random samples instead")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--calibration-seed", seed, "Seed of --calibration-random (default 7)");
  cmd.add_option("--calibration-limit", limit, "Calibrate on the first N samples only")->check(CLI::PositiveNumber);
  cmd.add_option("--calibration-method", method, "minmax (default), percentile or entropy (KL)");
  cmd.add_option("--calibration-percentile", percentile, "Percentile of |x| kept by the percentile method (default 99.99)")
      ->check(CLI::Range(50.0f, 100.0f));
  cmd.add_option("--keep-fp32", keep_fp32, "Layers (node names, comma-separated) left in float32 by quantize_int8 and mixed_precision_bf16")
      ->delimiter(',');
  cmd.add_option("--keep-bf16", keep_bf16,
                 "Layers quantize_int8 leaves in bf16 (the pipeline runs mixed_precision_bf16 before it)")
      ->delimiter(',');
  if (with_normalization) {
    cmd.add_option("--mean", mean, "Mean subtracted from IDX pixels after /255 (default 0)");
    cmd.add_option("--std", std, "Divisor of IDX pixels after the mean (default 1)");
  }
}

DatasetOptions CalibrationCli::dataset_from_file(const std::string& path, const std::string& idx_labels,
                                                 int64_t first) const {
  DatasetOptions d;
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".npy" || ext == ".npz") {
    d.input = path;
  } else {
    d.idx_images = path;
    d.idx_labels = idx_labels;
  }
  d.mean = mean;
  d.std = std;
  d.limit = first;
  return d;
}

void CalibrationCli::add_accuracy_control_to(CLI::App& cmd) {
  cmd.add_option("--max-accuracy-drop", max_accuracy_drop,
                 "Accuracy control (int8 or bf16): keep layers in fp32 (most error per millisecond saved first) until the accuracy drop on "
                 "the accuracy data is at most this fraction (0.005 = half a point); fails when it cannot be met")
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--min-cosine", min_cosine,
                 "Accuracy control: keep layers in fp32 (most error per millisecond saved first) until the output's cosine similarity "
                 "with fp32 on the accuracy data is at least this (e.g. 0.99); int8 or bf16, or a GPU plan at tf32/fp16/bf16 "
                 "(kiln compile --device cuda: the fewest leading steps, by emulation)")
      ->check(CLI::Range(-1.0, 1.0));
  cmd.add_option("--accuracy-random", accuracy_random,
                 "Accuracy control on this many seeded random samples instead of --accuracy-data (no labels: the "
                 "drop is the top-1 agreement lost)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--accuracy-seed", accuracy_seed, "Seed of --accuracy-random (default 11)");
  cmd.add_option("--accuracy-data", accuracy_data,
                 "Data for --max-accuracy-drop: .npy/.npz (labels from a 'labels' entry) or IDX images (--accuracy-labels); "
                 "without labels the fp32 model's top-1 are the labels (the drop is the agreement lost)");
  cmd.add_option("--accuracy-labels", accuracy_labels, "IDX labels for IDX --accuracy-data");
}

Status CalibrationCli::check_accuracy_control() const {
  KILN_REQUIRE(max_accuracy_drop >= 0 || min_cosine >= -1 || max_rel_error >= 0, invalid_argument,
               "accuracy control needs a constraint: --max-accuracy-drop and/or --min-cosine (or, for kiln compile --device cuda, --max-rel-error)");
  const int sources = !accuracy_data.empty() + (accuracy_random > 0) + accuracy_dataset.has_value();
  KILN_REQUIRE(sources == 1, invalid_argument,
               "accuracy control needs data: give --accuracy-data FILE or --accuracy-random N (one of them)");
  return Status::ok();
}

Result<VerifyData> CalibrationCli::load_accuracy_data(const Plan& plan) const {
  KILN_TRY(check_accuracy_control());
  if (accuracy_random > 0) return verify_random_data(plan, accuracy_random, accuracy_seed);
  auto loaded = load_dataset(accuracy_dataset ? *accuracy_dataset : dataset_from_file(accuracy_data, accuracy_labels, 0), plan);
  if (!loaded) return loaded.status().with_context("accuracy data: ");
  return std::move(*loaded);
}

Result<CalibrationSet> CalibrationCli::load(const Plan& plan) const {
  KILN_REQUIRE(file.empty() || random == 0, invalid_argument, "give --calibration or --calibration-random, not both");
  KILN_REQUIRE(std != 0.0f, invalid_argument, "--std must not be zero");
  VerifyData data;
  if (random > 0) {
    data = verify_random_data(plan, random, seed);
  } else {
    auto loaded = load_dataset(dataset_from_file(file, "", limit), plan);
    if (!loaded) return loaded.status().with_context("calibration data: ");
    data = std::move(*loaded);
  }
  return CalibrationSet{std::move(data.inputs), data.source};
}

Result<Int8Options> CalibrationCli::options(const CalibrationSet* set) const {
  Int8Options o;
  o.calibration = set;
  KILN_ASSIGN(m, calibration_method_from_name(method));
  o.calibration_options.method = m;
  o.calibration_options.percentile = percentile;
  o.keep = keep_bf16;
  return o;
}

}  // namespace kiln::cli

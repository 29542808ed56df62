// Calibration statistics and the three ways of turning them into an int8 clipping range:
//   - minmax: the observed range, nothing clipped (ONNX Runtime's default);
//   - percentile: the |x| below which `percentile` % of the observed values lie (outliers clipped);
//   - entropy: TensorRT's KL-divergence search: the threshold whose quantized distribution loses
//     the least information against the observed histogram of |x|.
// Statistics are collected in two sweeps over the calibration set: min/max first (which fixes
// each tensor's histogram range and its sign, u8 or s8), then a histogram of |x|.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/core/status.h"

namespace kiln {

enum class CalibrationMethod { minmax, percentile, entropy };

std::string_view calibration_method_name(CalibrationMethod m);
Result<CalibrationMethod> calibration_method_from_name(std::string_view name);  // error lists the names

inline constexpr int kCalibrationBins = 2048;
inline constexpr float kDefaultPercentile = 99.99f;

struct TensorRange {
  float lo = 0.0f;
  float hi = 0.0f;
};

// One tensor's statistics over the calibration set.
class TensorStats {
 public:
  void add_range(const float* x, int64_t n);  // sweep 1; NaN/inf are counted and skipped
  // Sweep 2: after every add_range; bins |x| over [0, max|x|].
  void add_histogram(const float* x, int64_t n);
  float lo() const { return lo_; }
  float hi() const { return hi_; }
  int64_t count() const { return count_; }
  int64_t nonfinite() const { return nonfinite_; }
  float max_abs() const;
  const std::vector<double>& histogram() const { return histogram_; }

 private:
  float lo_ = 0.0f, hi_ = 0.0f;
  bool seen_ = false;
  int64_t count_ = 0, nonfinite_ = 0;
  std::vector<double> histogram_;
};

// The clipping range for `method`. The sign of the range (u8 when lo >= 0) always follows the
// observed minimum; percentile and entropy only shrink the magnitude.
TensorRange calibrated_range(const TensorStats& stats, CalibrationMethod method, float percentile = kDefaultPercentile);

// The entropy threshold (in bins, 1..histogram.size()) for quantizing into `levels` levels of
// |x| (128 for s8, 256 for u8): argmin over i of KL(P_i || Q_i).
int entropy_threshold_bins(const std::vector<double>& histogram, int levels);

}  // namespace kiln

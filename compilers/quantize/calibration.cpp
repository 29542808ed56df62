#include "compilers/quantize/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {

std::string_view calibration_method_name(CalibrationMethod m) {
  switch (m) {
    case CalibrationMethod::minmax: return "minmax";
    case CalibrationMethod::percentile: return "percentile";
    case CalibrationMethod::entropy: return "entropy";
  }
  return "minmax";
}

Result<CalibrationMethod> calibration_method_from_name(std::string_view name) {
  for (CalibrationMethod m : {CalibrationMethod::minmax, CalibrationMethod::percentile, CalibrationMethod::entropy})
    if (calibration_method_name(m) == name) return m;
  return make_error(ErrorCode::invalid_argument, "unknown calibration method '", std::string(name),
                    "' (known: minmax, percentile, entropy)");
}

void TensorStats::add_range(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!std::isfinite(v)) {
      ++nonfinite_;
      continue;
    }
    if (!seen_) {
      lo_ = hi_ = v;
      seen_ = true;
    }
    lo_ = std::min(lo_, v);
    hi_ = std::max(hi_, v);
    ++count_;
  }
}

float TensorStats::max_abs() const { return std::max(std::fabs(lo_), std::fabs(hi_)); }

void TensorStats::add_histogram(const float* x, int64_t n) {
  if (histogram_.empty()) histogram_.assign(kCalibrationBins, 0.0);
  const float top = max_abs();
  if (!(top > 0.0f)) {
    histogram_[0] += static_cast<double>(n);
    return;
  }
  const float per_bin = static_cast<float>(kCalibrationBins) / top;
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::fabs(x[i]);
    if (!std::isfinite(v)) continue;
    const int bin = std::min(static_cast<int>(v * per_bin), kCalibrationBins - 1);
    histogram_[static_cast<size_t>(bin)] += 1.0;
  }
}

namespace {

// KL(P || Q) over bins where P > 0; P and Q unnormalized (normalized here).
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double p_sum = 0, q_sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    p_sum += p[i];
    q_sum += q[i];
  }
  if (p_sum <= 0 || q_sum <= 0) return std::numeric_limits<double>::infinity();
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    const double pi = p[i] / p_sum;
    const double qi = q[i] / q_sum;
    if (qi <= 0) return std::numeric_limits<double>::infinity();  // P has mass Q cannot represent
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

}  // namespace

int entropy_threshold_bins(const std::vector<double>& histogram, int levels) {
  const int bins = static_cast<int>(histogram.size());
  if (bins <= levels) return bins;
  // Zero bins beyond the last non-empty one change nothing: start the search at most there.
  int last = bins;
  while (last > levels && histogram[static_cast<size_t>(last - 1)] == 0) --last;
  int best = last;
  double best_kl = std::numeric_limits<double>::infinity();
  std::vector<double> p, q;
  for (int i = levels; i <= last; ++i) {
    // P: the first i bins, with everything beyond folded into the last one (it gets clipped there).
    p.assign(histogram.begin(), histogram.begin() + i);
    for (int j = i; j < bins; ++j) p[static_cast<size_t>(i - 1)] += histogram[static_cast<size_t>(j)];
    // Q: the first i bins merged into `levels` groups, each group's mass spread evenly over its
    // non-empty bins (empty bins stay empty: quantization cannot put mass where there was none).
    q.assign(static_cast<size_t>(i), 0.0);
    const double per_level = static_cast<double>(i) / levels;
    for (int g = 0; g < levels; ++g) {
      const int start = static_cast<int>(std::floor(g * per_level));
      const int stop = g == levels - 1 ? i : static_cast<int>(std::floor((g + 1) * per_level));
      double mass = 0;
      int nonzero = 0;
      for (int j = start; j < stop; ++j) {
        mass += histogram[static_cast<size_t>(j)];
        nonzero += histogram[static_cast<size_t>(j)] != 0 ? 1 : 0;
      }
      if (nonzero == 0) continue;
      for (int j = start; j < stop; ++j)
        if (histogram[static_cast<size_t>(j)] != 0) q[static_cast<size_t>(j)] = mass / nonzero;
    }
    const double kl = kl_divergence(p, q);
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  return best;
}

TensorRange calibrated_range(const TensorStats& stats, CalibrationMethod method, float percentile) {
  TensorRange r{stats.lo(), stats.hi()};
  if (method == CalibrationMethod::minmax || stats.histogram().empty() || !(stats.max_abs() > 0.0f)) return r;
  const std::vector<double>& h = stats.histogram();
  const double bin_width = static_cast<double>(stats.max_abs()) / static_cast<double>(h.size());
  double threshold = stats.max_abs();
  if (method == CalibrationMethod::percentile) {
    double total = 0;
    for (double c : h) total += c;
    const double wanted = total * std::clamp(static_cast<double>(percentile), 0.0, 100.0) / 100.0;
    double seen = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      seen += h[i];
      if (seen >= wanted) {
        threshold = (static_cast<double>(i) + 1) * bin_width;
        break;
      }
    }
  } else {
    const int levels = stats.lo() >= 0.0f ? 256 : 128;
    // Exact zeros (a ReLU's negative half) stay exact at any threshold: left in, their spike
    // makes the search favour resolution near zero and clip the real range away.
    std::vector<double> nonzero = h;
    nonzero[0] = 0;
    threshold = (entropy_threshold_bins(nonzero, levels) + 0.5) * bin_width;
  }
  const float t = static_cast<float>(std::min<double>(threshold, stats.max_abs()));
  r.lo = std::max(r.lo, -t);
  r.hi = std::min(r.hi, t);
  return r;
}

}  // namespace kiln

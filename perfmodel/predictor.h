// The latency predictor: fitted to one target's stored measurements (the kernel sweep, the
// bandwidth table), it predicts each kernel of a compiled plan from its features (plan_features.h)
// and sums them.
//
// Per (op, dtype, threads) of the sweep, a roofline: time = overhead + max(MACs / compute,
// bytes / bandwidth), its three parameters fitted by least capped symmetric relative error (robust
// to points timed on shared cores), the bandwidth kept at or above the measured DRAM streaming
// bandwidth. Where it predicts the group's held-out points better (FitOptions::method), its
// residual on the training points (the efficiency a shape loses: thin channels, tails, small
// batches) is corrected by inverse-distance weighting over the k nearest sweep points in
// log-feature space (MACs, bytes, batch, channels, plane, window, stride). Both are scored by
// 5-fold held-out error on the sweep points (FitSummary).
// Steps with no sweep counterpart (conversions, concat, slices, elementwise) are priced like the
// sweep's Add, an Engine kernel streaming its bytes (its fitted overhead and bandwidth); without
// Add points, a per-step overhead plus bytes over the streaming-read table. A thread count not
// measured uses the nearest one measured, scaled linearly. A step with weights takes at least
// their bytes over the streaming bandwidth at the whole run's working set (predict()); a fused
// SiLU/sigmoid/GELU/tanh adds its element-ops at the sweep's eltwise rate. A conv reading a
// plain float32 input (StepFeatures::input_conversion "layout") adds the conversion, group "convert": fitted
// on the sweep's border points (kernel_sweep.h) as their time beyond the interior prediction; one
// reading float32 in its own format into bf16/int8 ("precision") adds group "convert_precision",
// fitted the same way on the sweep's float_input points. An int8 conv or depthwise conv reading s8
// (StepFeatures::signed_input) adds group "<op>_signed", fitted on the sweep's signed_input points
// as their time beyond the interior kernel's (which reads u8).
// The predictor never sees whole models: it is fitted only on peak/bandwidth/kernel rows.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/core/status.h"
#include "perfmodel/measurement.h"
#include "perfmodel/plan_features.h"

namespace kiln::perf {

struct FitOptions {
  bool keep_loaded = false;  // keep points whose load_avg exceeded their thread count (+ kLoadSlack)
  int neighbours = 4;
  // "auto" (default: per group, the roofline or roofline+knn, whichever has the lower held-out
  // error on the group's own sweep points), "roofline" or "knn" (everywhere).
  std::string method = "auto";
};

struct RooflineParams {
  double overhead_ms = 0;
  double macs_per_ms = 0;   // effective compute
  double bytes_per_ms = 0;  // effective bandwidth; 0: not memory-bound anywhere in the data
};

struct GroupSummary {
  std::string op, dtype;
  int threads = 0;
  int points = 0;
  RooflineParams params;
  double heldout_roofline = 0;  // median |relative error| over the group's held-out points; -1: under 10 points, not held out
  double heldout_knn = 0;
  bool use_knn = false;  // chosen by the held-out error
};

struct FitSummary {
  int points_used = 0;
  int points_loaded = 0;        // load_avg above threads
  bool loaded_kept = false;     // every point was loaded (or asked to keep them): kept, marked noisy
  std::string method;           // "roofline", "roofline+knn" or "per group" (each group its better one)
  // 5-fold held-out over all kernel points: median |relative error| and share within 10%, of the
  // roofline alone, of roofline+knn everywhere, and of each group's chosen method.
  double heldout_median_roofline = 0, heldout_median_knn = 0, heldout_median_chosen = 0;
  double heldout_within10_roofline = 0, heldout_within10_knn = 0, heldout_within10_chosen = 0;
  double step_overhead_ms = 0;  // per step without a sweep counterpart
  int bandwidth_points = 0;
  int weight_reuse_points = 0;  // kind weight_reuse rows in the tables (weight_refetch_ms_per_byte)
  std::vector<GroupSummary> groups;
  // Groups whose every point was measured under load and dropped ("add f32 t2 (8)"): priced from
  // the nearest thread count's (or f32's) group instead.
  std::vector<std::string> groups_only_loaded;
  // Points keyed without current_key_prefix (int8 conv points measured on s8, int8 gemm points timed
  // as the repacking matmul, before 2026-11-29; bf16/int8 max pools on oneDNN's pools, before 2026-12-06)
  // in a group that also has points keyed so: dropped.
  int points_superseded = 0;
  // Conv/gemm points whose one-thread and T-thread readings contradict each other (one taken in a
  // slow spell), repriced from the other reading (perfmodel/thread_pairs.h).
  int points_repaired = 0;
};

struct StepPrediction {
  double ms = 0;
  std::string how;  // "conv/bf16/t2 roofline+knn", "bandwidth", "view"
};

struct PlanPrediction {
  double total_ms = 0;
  std::vector<StepPrediction> steps;  // per StepFeatures
};

class LatencyPredictor {
 public:
  // Fits on the rows of one target (any kinds; kernel and bandwidth rows are used). Fails when
  // there are no kernel rows.
  static Result<LatencyPredictor> fit(const std::vector<Measurement>& rows, const FitOptions& options = {});

  // One kernel in the sweep's terms (m.op one of the sweep's ops).
  StepPrediction kernel_ms(const Measurement& m) const;
  // Streaming bandwidth (bytes/ms) at a working set, for `threads`.
  double bandwidth_bytes_per_ms(double working_set, int threads) const;
  // The streaming bandwidth at the largest working set measured (DRAM); 0 without bandwidth rows.
  double dram_bytes_per_ms(int threads) const;
  // What reading one byte of a layer's weights costs beyond the sweep's hot read when the run
  // touches `working_set` bytes between two reads of it (weight_reuse rows of the dtype, else
  // float32's; the nearest thread count at or above): 0 within the one-copy point's working set or
  // without such rows.
  double weight_refetch_ms_per_byte(const std::string& dtype, int threads, double working_set) const;
  StepPrediction step_ms(const StepFeatures& f) const;
  // A fused transcendental activation of `ops` element-ops (StepFeatures::epilogue_ops), at the
  // sweep's eltwise compute rate; 0 without eltwise points.
  double epilogue_ms(double ops, int threads) const;
  PlanPrediction predict(const std::vector<StepFeatures>& steps) const;
  bool has_group(const std::string& op, const std::string& dtype) const;
  // Whether any kernel group of `dtype` was fitted (a dtype without one is priced from f32 groups).
  bool has_dtype(const std::string& dtype) const;

  const FitSummary& summary() const { return summary_; }

  // The fitted state and back, so that a fit can be cached per profile (predictor_cache.h).
  nlohmann::json to_json() const;
  static Result<LatencyPredictor> from_json(const nlohmann::json& j);

  struct Group {
    std::string op, dtype;
    int threads = 0;
    RooflineParams params;
    bool use_knn = true;  // the residual correction predicted this group's held-out points better
    std::vector<std::vector<double>> features;  // standardized, per training point
    std::vector<double> residual;               // log(measured / roofline)
    std::vector<double> mean, scale;            // standardization
    // Derived from the features (set_group_extent, at fit and when a cached fit is read): the largest
    // point's MACs and the batches measured, for pricing layers beyond the sweep's work.
    double max_macs = 0;
    std::vector<int64_t> batches;  // ascending
  };

 private:
  std::map<std::string, Group> groups_;  // "op|dtype|threads"
  std::map<int, std::vector<std::pair<double, double>>> bandwidth_;  // threads -> (working set, bytes/ms), sorted
  // dtype -> threads -> (working set, ms per weight byte over the one-copy point), sorted
  std::map<std::string, std::map<int, std::vector<std::pair<double, double>>>> weight_refetch_;
  int neighbours_ = 4;
  FitSummary summary_;
};

// The record a conversion is predicted from (group "convert"): a plain float32 NCHW input of
// batch x channels x h x w converted inside a kernel's step to that kernel's layout and `dtype`.
// MACs are the elements converted, bytes what they read and write.
Measurement conversion_features(const std::string& dtype, int threads, int64_t batch, int64_t channels, int64_t h,
                                int64_t w, double median_ms = 0);

// The record a bf16/int8 gemm's float32 A converted in its own step is predicted from (group
// kRowConversionOp): rows x columns elements, as conversion_features counts them.
Measurement row_conversion_features(const std::string& dtype, int threads, int64_t rows, int64_t columns, double median_ms = 0);

// The record an activation fused into a kernel is predicted from (group "epilogue"): batch x
// channels x h x w output elements, `ops_per_element` element-ops each (SiLU 2, GELU 5).
Measurement epilogue_features(const std::string& dtype, int threads, int64_t batch, int64_t channels, int64_t h,
                              int64_t w, double ops_per_element, double median_ms = 0);

// The group an int8 conv reading s8 takes its extra time from: "conv_signed", "depthwise_conv_signed".
inline constexpr const char* kSignedInputGroupSuffix = "_signed";
// The record that extra is predicted from: the conv's own record (its MACs, bytes and shape) in
// the group op + kSignedInputGroupSuffix.
Measurement signed_input_features(const Measurement& interior, double median_ms = 0);

// The record a residual summed into a conv's output is predicted from (group "residual"): batch x
// channels x h x w output elements, each read once more in the kernel's dtype.
Measurement residual_features(const std::string& dtype, int threads, int64_t batch, int64_t channels, int64_t h, int64_t w,
                              double median_ms = 0);

// Exposed for the tests: the roofline fitted to (macs, bytes, ms) points, its bandwidth at least
// `min_bytes_per_ms` (the DRAM streaming bandwidth).
RooflineParams roofline_fit(const std::vector<Measurement>& points, double min_bytes_per_ms = 0);
double roofline_ms(const RooflineParams& p, double macs, double bytes);

}  // namespace kiln::perf

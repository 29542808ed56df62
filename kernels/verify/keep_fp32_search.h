// GPU accuracy control: the fewest leading steps of a CUDA plan to keep in float32
// (DeviceEngineOptions::keep_fp32, kernels/device/mixed_precision.h) for a tf32/fp16/bf16 plan to
// meet an accuracy bound against the fp32 reference, found by emulating the precision on this CPU
// (kernels/verify/precision_emulation.h), so no GPU is needed. Leading steps because on the
// conditioned torchvision models the error is made early and amplified: ResNet-50 bf16 reaches
// cosine 0.99913 with its first 8 of 56 steps kept, 0.99754 with its last 27 convolutions kept
// (docs/cuda-backend.md). The prefix grows by bisection (each trial one emulated verification; the
// reference runs once), so a plan of n steps costs about log2(n) + 2 emulated runs.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/device/device_backend.h"
#include "kernels/plan.h"
#include "kernels/verify/verify.h"

namespace kiln {

// What every output must meet (unset: not asked). The drop is the accuracy lost against the
// reference with labels, else the top-1 agreement lost (1 - agreement), for classifier outputs.
struct AccuracyBound {
  std::optional<double> min_cosine;
  std::optional<double> max_rel_error;
  std::optional<double> max_accuracy_drop;
  bool any() const { return min_cosine || max_rel_error || max_accuracy_drop; }
};

// Whether `report` meets `bound` on every output; when not, `why` says which output misses what.
bool meets_bound(const VerifyReport& report, const AccuracyBound& bound, std::string* why = nullptr);

// "a cosine of at least 0.999 and a max relative error of at most 0.001", for messages.
std::string describe_bound(const AccuracyBound& bound);

struct KeepFp32Trial {
  size_t kept_steps = 0;
  double cosine = 1, max_rel_error = 0, accuracy_drop = 0;  // the worst output's
  bool met = false;
};

struct KeepFp32Search {
  bool met = false;                    // false: not even every step in float32 meets the bound
  std::vector<std::string> keep_fp32;  // the kept steps' node names, in plan order (empty: none needed)
  size_t kept_steps = 0, total_steps = 0;
  VerifyReport report;                 // the emulated verification of the chosen list
  std::vector<KeepFp32Trial> trials;   // in the order run
};

// `compiled` is the CUDA pipeline's plan, `reference` the fp32 plan it is checked against, both
// over `data`; `options` as verify_plans takes them (its emulate and keep_fp32 are set here; give
// it a reference_cache to share the reference runs with the caller's other verifications).
// Errors: fp32 (nothing to keep), no bound, and verify_plans' own.
Result<KeepFp32Search> search_keep_fp32(const Plan& compiled, const Plan& reference, const VerifyData& data,
                                        DevicePrecision precision, const AccuracyBound& bound, VerifyOptions options,
                                        std::ostream* progress = nullptr);

}  // namespace kiln

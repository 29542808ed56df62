// Whether a measured CPU profile can price a precision: its fitted predictor needs kernel groups of
// the precision's dtype, or it would price that precision from another dtype's kernels (the
// predictor's f32 fallback, meant for ops swept in f32 only, such as pooling) and say nothing.
// `kiln predict` refuses such a precision and `kiln plan` excludes it, with this reason.
#pragma once

#include <string>

#include "perfmodel/fingerprint.h"
#include "perfmodel/predictor.h"

namespace kiln::perf {

// Empty when `predictor` (fitted to the profile of `fp`) has kernel groups of `dtype`; else why
// not: the CPU cannot run it natively (fingerprint_dtype_unsupported), or the profile was taken
// before kiln swept it on this CPU kind (int8 on AVX2 until 2026-11-29), or all its points were
// dropped.
std::string dtype_unpriced_reason(const LatencyPredictor& predictor, const TargetFingerprint& fp, const std::string& dtype);

}  // namespace kiln::perf

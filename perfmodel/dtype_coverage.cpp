#include "perfmodel/dtype_coverage.h"

namespace kiln::perf {

std::string dtype_unpriced_reason(const LatencyPredictor& predictor, const TargetFingerprint& fp, const std::string& dtype) {
  if (predictor.has_dtype(dtype)) return {};
  if (std::string why = fingerprint_dtype_unsupported(fp, dtype); !why.empty()) return why;
  return "the profile " + fp.id + " has no " + dtype +
         " kernel measurements (kiln bench-target on that machine measures only what is missing)";
}

}  // namespace kiln::perf

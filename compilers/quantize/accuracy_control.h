// Accuracy control for int8: given a largest allowed accuracy drop on labelled data, find the
// layers to keep in float32. Quantizes everything first; when the drop is too large, measures
// each int8 layer's sensitivity (the cosine distance of the model's output from fp32 with only
// that layer in int8) and keeps the most sensitive ones in fp32, doubling their number until the
// drop holds and then bisecting back to the fewest. A result that needs every layer in fp32 is
// "not met": the caller must refuse it, never ship a silently worse model. Without labels the fp32
// model's own top-1 decisions are the labels, so the drop is the top-1 agreement lost.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "compilers/passes/pass_runner.h"
#include "kernels/verify/verify.h"

namespace kiln {

struct AccuracyControlOptions {
  double max_accuracy_drop = 0.0;  // fraction: 0.005 is half a point
  int threads = 0;
  std::ostream* progress = nullptr;
};

struct LayerSensitivity {
  std::string layer;
  double cosine_distance = 0;  // 1 - cosine(output with only this layer int8, fp32 output)
};

struct AccuracyControlResult {
  bool met = false;
  double fp32_accuracy = 0;
  double int8_accuracy = 0;  // of the returned graph
  int64_t samples = 0;
  int int8_layers = 0;
  std::vector<std::string> kept_fp32;          // layers that fell back, most sensitive first
  std::vector<LayerSensitivity> sensitivities; // measured only when everything-int8 missed
  Graph graph;                                 // the compiled graph: best found (met or not)
  std::vector<PassRecord> passes;
};

// `imported` is the graph before any pass; `pipeline` contains quantize_int8; `options.int8` has
// the calibration data; the model's first output must be a classifier's ([N, C]); `data` may come
// without labels (see above).
Result<AccuracyControlResult> quantize_within_accuracy(const Graph& imported, const std::vector<std::string>& pipeline,
                                                       const PassRunOptions& options, const VerifyData& data,
                                                       const AccuracyControlOptions& control);

}  // namespace kiln

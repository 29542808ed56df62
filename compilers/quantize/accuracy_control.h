// Accuracy control for reduced precision (int8 with quantize_int8, bf16 with
// mixed_precision_bf16): given the largest allowed accuracy drop and/or the smallest allowed
// output cosine similarity against fp32, find the layers to keep in float32. Reduces every layer
// first; when a constraint misses, measures each layer's sensitivity (the cosine distance of the
// model's output from fp32 with only that layer reduced) and the time reducing it alone saves (its
// measured step time against the fallback's, conversions at its borders included), and keeps layers in
// fp32 in the order of error removed per millisecond given back (a layer that saves nothing goes
// first; expensive layers that reduce well stay reduced longest), doubling their number until the
// constraints hold and then bisecting back to the fewest. When that order meets nothing short of
// every layer, the search runs again in plain sensitivity order (most sensitive first).
// With both passes in the pipeline (int8 after bf16) the layers left out of int8 stay bf16
// instead of fp32 (and savings are measured against bf16): nearly bf16's accuracy at less cost.
// A result that needs every layer in fp32 is "not met": the caller must refuse it, never ship a
// silently worse model. Without labels the fp32 model's own top-1 decisions are the labels, so
// the drop is the top-1 agreement lost.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "compilers/passes/pass_runner.h"
#include "kernels/engine.h"
#include "kernels/verify/verify.h"

namespace kiln {

// Prices one run of a plan on its Engine's steps at `threads`: milliseconds per step name.
using StepPricer =
    std::function<std::map<std::string, double>(const Plan& plan, const std::vector<EngineStep>& steps, int threads)>;

struct AccuracyControlOptions {
  std::optional<double> max_accuracy_drop;  // fraction: 0.005 is half a point
  std::optional<double> min_cosine;         // of the first output against fp32, e.g. 0.99
  int threads = 0;
  std::ostream* progress = nullptr;
  // Set: the layers' savings are priced (e.g. by the target profile's latency predictor), so the
  // fallback order, and the model, are the same on every run. Unset: they are timed on the data.
  StepPricer step_prices;
};

struct LayerSensitivity {
  std::string layer;
  double cosine_distance = 0;  // 1 - cosine(output with only this layer reduced, fp32 output)
  // The layer's step time in the fallback precision (fp32, or bf16 under int8 after bf16) minus
  // its time reduced alone (with the conversions at its borders), over the accuracy data, timed
  // or priced (AccuracyControlOptions::step_prices); <= 0 when reducing it alone is no faster.
  // nullopt: not timed.
  std::optional<double> saving_ms;
};

struct AccuracyControlResult {
  bool met = false;
  std::string precision;  // "int8" or "bf16": what the reduced layers run in
  std::string fallback;   // "fp32", or "bf16" for int8 after mixed_precision_bf16
  double fp32_accuracy = 0;
  double accuracy = 0;  // of the returned graph
  double cosine = 0;    // of the returned graph's first output against fp32
  int64_t samples = 0;
  int reduced_layers = 0;
  double reduced_macs_share = 0;               // of the reducible layers' MACs, the share left reduced (0..1)
  std::vector<std::string> kept_fp32;          // layers that fell back (to `fallback`), in fallback order
  std::vector<LayerSensitivity> sensitivities; // measured only when everything reduced missed; most sensitive first
  bool savings_priced = false;                 // saving_ms came from step_prices, not timings
  // Not met with a bf16 fallback: the model with every layer in bf16 (no int8 at all) when that
  // alone already misses the constraints, so no choice of int8 layers could meet them.
  std::optional<OutputMetrics> fallback_misses;
  // int8 only: the fp32 model on the accuracy data's inputs rounded to 8 bits against the clean
  // ones. A bound tighter than this is below the model's own noise floor: int8 rounds every
  // layer's input at least this much, so the control can only keep layers in fp32 to meet it.
  std::optional<OutputMetrics> input_rounding;
  Graph graph;                                 // the compiled graph: best found (met or not)
  std::vector<PassRecord> passes;
};

// The order in which accuracy control keeps layers out of reduced precision: layers whose reduction
// saves no time first (most sensitive first), then the most error removed per millisecond given
// back. Plain sensitivity order when any layer was not timed (a ratio with a guess is worse than none).
std::vector<std::string> accuracy_fallback_order(const std::vector<LayerSensitivity>& by_sensitivity);

// `imported` is the graph before any pass; `pipeline` contains quantize_int8 and/or
// mixed_precision_bf16; `options.int8` has the calibration data for int8; the model's
// first output must be a classifier's ([N, C]); `data` may come without labels (see above).
Result<AccuracyControlResult> reduce_precision_within_accuracy(const Graph& imported,
                                                               const std::vector<std::string>& pipeline,
                                                               const PassRunOptions& options, const VerifyData& data,
                                                               const AccuracyControlOptions& control);

}  // namespace kiln

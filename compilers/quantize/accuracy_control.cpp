#include "compilers/quantize/accuracy_control.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "compilers/analysis/model_stats.h"
#include "compilers/lower/to_plan.h"
#include "kernels/engine.h"
#include "kernels/precision.h"

namespace kiln {
namespace {

// Milliseconds per plan step name, summed over the data set's batches.
using StepTimes = std::map<std::string, double>;

// The first output over the whole data set, [N, ...], run batch by batch on the Engine. With
// `times`, also the time of every step over all batches: priced once per batch by `pricer` when
// there is one, else timed (after one untimed warm-up run: weights are packed on first use).
Result<Tensor> run_over(const Graph& graph, const VerifyData& data, int threads, StepTimes* times = nullptr,
                        const StepPricer* pricer = nullptr) {
  const Plan plan = graph_to_plan(graph);
  KILN_ASSIGN(engine, Engine::create(plan, {threads, nullptr}));
  const int64_t n = data.inputs.at(0).dim(0);
  const int64_t batch = sym_shape_concrete(plan.inputs.at(0).type.shape).at(0);
  if (times && pricer && *pricer) {
    const double batches = static_cast<double>((n + batch - 1) / batch);
    for (const auto& [step, ms] : (*pricer)(plan, engine->steps(), engine->threads())) (*times)[step] += ms * batches;
    times = nullptr;
  }
  Tensor all;
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t rows = std::min(batch, n - first);
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < plan.inputs.size(); ++i)
      inputs.push_back(batch_slice(data.inputs[i], sym_shape_concrete(plan.inputs[i].type.shape), data.inputs[i].dtype(),
                                   first, rows));
    if (times && first == 0) KILN_TRY(engine->run(inputs).status());
    std::vector<double> step_ms;
    KILN_ASSIGN(outputs, engine->run(inputs, times ? &step_ms : nullptr));
    for (size_t i = 0; i < step_ms.size(); ++i) (*times)[engine->steps()[i].node] += step_ms[i];
    const Tensor& out = outputs.at(0);
    KILN_REQUIRE(out.dtype() == DType::f32 && out.rank() == 2 && out.dim(0) == batch, invalid_argument,
                 "accuracy control needs a classifier output (float [batch, classes]); the first output is ",
                 out.describe());
    if (!all.defined() || all.numel() == 0) all = Tensor::zeros(DType::f32, {n, out.dim(1)});
    std::memcpy(all.data<float>() + first * out.dim(1), out.data<float>(), static_cast<size_t>(rows * out.dim(1)) * sizeof(float));
  }
  return all;
}

Result<OutputMetrics> compare(const Tensor& fp32, const Tensor& got, const Tensor& labels) {
  OutputComparison c("output");
  KILN_TRY(c.add(fp32, got, fp32.dim(0), labels.data<int64_t>()));
  return c.finish();
}

// The fp32 model's own top-1 per row: with these as labels, the accuracy drop is the share of
// decisions int8 changes.
Tensor top1_labels(const Tensor& logits) {
  const int64_t rows = logits.dim(0), cols = logits.dim(1);
  Tensor labels = Tensor::zeros(DType::i64, {rows});
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data<float>() + r * cols;
    labels.data<int64_t>()[r] = std::max_element(row, row + cols) - row;
  }
  return labels;
}

std::vector<std::string> layers_in(const Graph& g, Precision precision) {
  std::vector<std::string> names;
  for (const Node& n : g.nodes)
    if (auto p = precision_from_attrs(n.attrs); p && *p == precision) names.push_back(n.name);
  return names;
}

// MACs of each named layer (-1 where a shape is unknown).
std::map<std::string, int64_t> layer_macs(const Graph& g) {
  std::map<std::string, int64_t> macs;
  for (const LayerStats& l : model_stats(g).layers) macs[l.name] = l.macs;
  return macs;
}

// What reducing `layer` alone saved: its step time in the fallback run (every layer fp32, or bf16)
// minus, in the run with only it reduced, its step and every step the fallback run does not have
// (conversions at its borders). nullopt when the fallback run has no step of that name.
std::optional<double> isolated_saving_ms(const std::string& layer, const StepTimes& fallback, const StepTimes& alone) {
  auto before = fallback.find(layer);
  auto after = alone.find(layer);
  if (before == fallback.end() || after == alone.end()) return std::nullopt;
  double cost = after->second;
  for (const auto& [step, ms] : alone)
    if (step != layer && !fallback.contains(step)) cost += ms;
  return before->second - cost;
}

// The share of `layers`' MACs outside `kept` (0 when none are known).
double reduced_share(const std::vector<std::string>& layers, const std::vector<std::string>& kept,
                     const std::map<std::string, int64_t>& macs) {
  double total = 0, reduced = 0;
  for (const std::string& l : layers) {
    auto it = macs.find(l);
    const double m = it != macs.end() && it->second > 0 ? static_cast<double>(it->second) : 0.0;
    total += m;
    if (std::find(kept.begin(), kept.end(), l) == kept.end()) reduced += m;
  }
  return total > 0 ? reduced / total : 0.0;
}

constexpr const char* kReducingPasses[] = {"quantize_int8", "mixed_precision_bf16"};  // removed for the fp32 run

bool reduces(const std::string& pass) {
  return std::find(std::begin(kReducingPasses), std::end(kReducingPasses), pass) != std::end(kReducingPasses);
}

}  // namespace

std::vector<std::string> accuracy_fallback_order(const std::vector<LayerSensitivity>& by_sensitivity) {
  std::vector<LayerSensitivity> order = by_sensitivity;
  const bool all_timed = std::all_of(order.begin(), order.end(), [](const LayerSensitivity& s) { return s.saving_ms.has_value(); });
  if (all_timed)
    std::stable_sort(order.begin(), order.end(), [](const LayerSensitivity& a, const LayerSensitivity& b) {
      // A layer that saves nothing goes first (it costs accuracy for no speed), the most sensitive of those first.
      const bool a_free = *a.saving_ms <= 0, b_free = *b.saving_ms <= 0;
      if (a_free != b_free) return a_free;
      if (a_free) return a.cosine_distance > b.cosine_distance;
      // a.distance / a.saving > b.distance / b.saving, without dividing.
      return a.cosine_distance * *b.saving_ms > b.cosine_distance * *a.saving_ms;
    });
  std::vector<std::string> names;
  for (const LayerSensitivity& s : order) names.push_back(s.layer);
  return names;
}

Result<AccuracyControlResult> reduce_precision_within_accuracy(const Graph& imported,
                                                               const std::vector<std::string>& pipeline,
                                                               const PassRunOptions& options, const VerifyData& data,
                                                               const AccuracyControlOptions& control) {
  KILN_REQUIRE(control.max_accuracy_drop || control.min_cosine, invalid_argument,
               "accuracy control needs a constraint: a largest accuracy drop or a smallest cosine");
  KILN_REQUIRE(!control.max_accuracy_drop || *control.max_accuracy_drop >= 0, invalid_argument,
               "max_accuracy_drop must be >= 0, got ", *control.max_accuracy_drop);
  KILN_REQUIRE(!control.min_cosine || (*control.min_cosine >= -1 && *control.min_cosine <= 1), invalid_argument,
               "min_cosine must be in [-1, 1], got ", *control.min_cosine);
  KILN_REQUIRE(!data.inputs.empty() && data.inputs[0].dim(0) > 0, invalid_argument, "accuracy data is empty");
  const auto runs = [&](const char* pass) { return std::find(pipeline.begin(), pipeline.end(), pass) != pipeline.end(); };
  KILN_REQUIRE(runs("quantize_int8") || runs("mixed_precision_bf16"), invalid_argument,
               "accuracy control chooses which layers run in reduced precision: the pipeline has neither "
               "quantize_int8 nor mixed_precision_bf16");
  // int8 after bf16: the layers int8 leaves stay bf16 (the fallback), else fp32.
  const Precision target = runs("quantize_int8") ? Precision::int8 : Precision::bf16;
  const bool bf16_fallback = target == Precision::int8 && runs("mixed_precision_bf16");
  auto say = [&](const auto&... parts) {
    if (control.progress) ((*control.progress << parts), ...) << '\n' << std::flush;
  };
  auto holds = [&](const OutputMetrics& m) {
    return (!control.max_accuracy_drop || m.accuracy_drop <= *control.max_accuracy_drop) &&
           (!control.min_cosine || m.cosine >= *control.min_cosine);
  };
  auto describe = [&](const OutputMetrics& m) {
    std::ostringstream text;
    text << "drop " << m.accuracy_drop * 100 << " points, cosine " << m.cosine;
    return text.str();
  };

  // fp32: the same pipeline without the precision pass.
  std::vector<std::string> fp32_pipeline;
  for (const std::string& p : pipeline)
    if (!reduces(p)) fp32_pipeline.push_back(p);
  Graph fp32 = imported;
  PassRunOptions fp32_options = options;
  fp32_options.log = nullptr;
  KILN_TRY(run_passes(fp32, fp32_pipeline, fp32_options).status());
  StepTimes fp32_times;
  KILN_ASSIGN(fp32_out, run_over(fp32, data, control.threads, &fp32_times, &control.step_prices));
  const Tensor labels = data.labels ? *data.labels : top1_labels(fp32_out);
  std::optional<OutputMetrics> input_rounding;
  if (target == Precision::int8) {
    KILN_ASSIGN(rounded_out, run_over(fp32, round_inputs_to_8_bits(data), control.threads));
    KILN_ASSIGN(m, compare(fp32_out, rounded_out, labels));
    input_rounding = m;
  }

  AccuracyControlResult result;
  result.precision = std::string(precision_name(target));
  result.fallback = bf16_fallback ? "bf16" : "fp32";
  result.samples = fp32_out.dim(0);
  result.input_rounding = input_rounding;
  if (input_rounding)
    say("  accuracy control: the fp32 model on its inputs rounded to 8 bits (its own noise floor): ", describe(*input_rounding));
  // The calibration ranges do not depend on which layers stay fp32: calibrate once.
  PassRunOptions quiet = options;
  quiet.log = nullptr;
  quiet.int8.calibration_options.progress = nullptr;
  if (quiet.int8.range_cache == nullptr) quiet.int8.range_cache = std::make_shared<std::map<std::string, TensorRange>>();
  auto attempt = [&](const std::vector<std::string>& keep, StepTimes* times = nullptr) -> Result<std::pair<Graph, OutputMetrics>> {
    Graph g = imported;
    PassRunOptions o = quiet;
    // The user's lists stay; accuracy control adds to them.
    std::vector<std::string>& fallback = bf16_fallback ? o.int8.keep : o.keep_fp32;
    fallback.insert(fallback.end(), keep.begin(), keep.end());
    KILN_TRY(run_passes(g, pipeline, o).status());
    KILN_ASSIGN(out, run_over(g, data, control.threads, times, &control.step_prices));
    KILN_ASSIGN(m, compare(fp32_out, out, labels));
    return std::make_pair(std::move(g), m);
  };

  Graph all = imported;
  PassRunOptions first = options;
  first.int8.range_cache = quiet.int8.range_cache;  // fills the cache the later attempts read
  KILN_ASSIGN(records, run_passes(all, pipeline, first));
  KILN_ASSIGN(all_out, run_over(all, data, control.threads));
  KILN_ASSIGN(all_m, compare(fp32_out, all_out, labels));
  result.fp32_accuracy = all_m.reference_accuracy;
  if (!data.labels) say("  accuracy control: no labels, the fp32 model's top-1 serve as labels (drop = lost agreement)");
  const std::vector<std::string> layers = layers_in(all, target);
  const std::map<std::string, int64_t> macs = layer_macs(all);
  say("  accuracy control: fp32 ", all_m.reference_accuracy * 100, "%; all ", layers.size(), " layers ",
      result.precision, ": ", all_m.compiled_accuracy * 100, "%, ", describe(all_m), " (allowed: drop ",
      control.max_accuracy_drop ? std::to_string(*control.max_accuracy_drop * 100) : std::string("any"),
      ", cosine ", control.min_cosine ? std::to_string(*control.min_cosine) : std::string("any"), ")");
  result.passes = std::move(records);
  if (holds(all_m)) {
    result.met = true;
    result.accuracy = all_m.compiled_accuracy;
    result.cosine = all_m.cosine;
    result.reduced_layers = static_cast<int>(layers.size());
    result.reduced_macs_share = reduced_share(layers, {}, macs);
    result.graph = std::move(all);
    return result;
  }

  // Savings are against the fallback: fp32's step times, or with a bf16 fallback those of the model
  // with every layer in bf16 (none int8).
  StepTimes bf16_times;
  if (bf16_fallback) KILN_TRY(attempt(layers, &bf16_times).status());
  const StepTimes& fallback_times = bf16_fallback ? bf16_times : fp32_times;
  // Sensitivity: each layer alone reduced.
  say("  accuracy control: measuring the sensitivity of ", layers.size(), " layers");
  for (const std::string& layer : layers) {
    std::vector<std::string> others;
    for (const std::string& l : layers)
      if (l != layer) others.push_back(l);
    StepTimes alone;
    KILN_ASSIGN(one, attempt(others, &alone));
    const LayerSensitivity& s =
        result.sensitivities.emplace_back(LayerSensitivity{layer, 1.0 - one.second.cosine, isolated_saving_ms(layer, fallback_times, alone)});
    // One line a layer: minutes of work on a big model, and what the fallback order is made of.
    say("  accuracy control: [", result.sensitivities.size(), "/", layers.size(), "] ", layer, ": cosine distance ",
        s.cosine_distance, ", saves ", s.saving_ms ? std::to_string(*s.saving_ms / static_cast<double>(result.samples)) : std::string("?"),
        " ms per sample");
  }
  std::stable_sort(result.sensitivities.begin(), result.sensitivities.end(),
                   [](const LayerSensitivity& a, const LayerSensitivity& b) { return a.cosine_distance > b.cosine_distance; });
  std::vector<std::string> by_sensitivity;
  for (const LayerSensitivity& l : result.sensitivities) by_sensitivity.push_back(l.layer);
  const std::vector<std::string> by_saving = accuracy_fallback_order(result.sensitivities);
  double saving = 0;
  for (const LayerSensitivity& l : result.sensitivities) saving += l.saving_ms.value_or(0.0);
  const bool timed = std::all_of(result.sensitivities.begin(), result.sensitivities.end(),
                                 [](const LayerSensitivity& l) { return l.saving_ms.has_value(); });
  result.savings_priced = static_cast<bool>(control.step_prices);
  if (timed)
    say("  accuracy control: reducing the layers one at a time saves ", saving / static_cast<double>(result.samples),
        " ms per sample in sum (", result.savings_priced ? "priced: the same order on every run" : "measured",
        "); falling back the most error per millisecond saved first");
  else
    say("  accuracy control: not every layer was timed; falling back the most sensitive first");
  auto prefix = [](const std::vector<std::string>& order, size_t k) {
    return std::vector<std::string>(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  };
  struct Found {
    size_t fallbacks;
    std::pair<Graph, OutputMetrics> run;
  };
  // Doubles the fallback count along `order` until the constraints hold, then bisects for the fewest.
  auto search = [&](const std::vector<std::string>& order) -> Result<std::optional<Found>> {
    size_t lo = 0, hi = 0;  // lo: known to miss; hi: known to hold (0: none found yet)
    std::optional<std::pair<Graph, OutputMetrics>> best;
    // k runs 1, 2, 4, ... up to every layer but one (all of them would be plain fp32 or bf16).
    for (size_t k = 1; k < layers.size(); k = std::min(k * 2, layers.size() - 1)) {
      KILN_ASSIGN(r, attempt(prefix(order, k)));
      say("  accuracy control: ", k, " layer(s) in ", result.fallback, ": ", describe(r.second));
      if (holds(r.second)) {
        hi = k;
        best = std::move(r);
        break;
      }
      lo = k;
      if (k == layers.size() - 1) break;
    }
    if (hi == 0) return std::optional<Found>();
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      KILN_ASSIGN(r, attempt(prefix(order, mid)));
      say("  accuracy control: ", mid, " layer(s) in ", result.fallback, ": ", describe(r.second));
      if (holds(r.second)) {
        hi = mid;
        best = std::move(r);
      } else {
        lo = mid;
      }
    }
    return std::optional<Found>(Found{hi, std::move(*best)});
  };

  const std::vector<std::string>* order = &by_saving;
  KILN_ASSIGN(found, search(by_saving));
  // The time order leaves the layers that save most for last, however sensitive: when even one of
  // them alone misses (GoogLeNet: 3 of 128 decisions), the least sensitive layer alone may not.
  if (!found && by_saving != by_sensitivity) {
    say("  accuracy control: no layer kept by time saved meets the constraints; again by sensitivity alone");
    order = &by_sensitivity;
    KILN_ASSIGN(again, search(by_sensitivity));
    found = std::move(again);
  }
  if (!found) {
    result.met = false;
    result.kept_fp32 = prefix(by_sensitivity, layers.size() - 1);
    if (bf16_fallback) {
      KILN_ASSIGN(r, attempt(layers));
      say("  accuracy control: every layer in bf16, none int8: ", describe(r.second));
      if (!holds(r.second)) result.fallback_misses = r.second;
    }
    return result;  // the caller reports "constraint not met"
  }
  result.met = true;
  result.kept_fp32 = prefix(*order, found->fallbacks);
  result.accuracy = found->run.second.compiled_accuracy;
  result.cosine = found->run.second.cosine;
  result.reduced_layers = static_cast<int>(layers.size() - found->fallbacks);
  result.reduced_macs_share = reduced_share(layers, result.kept_fp32, macs);
  result.graph = std::move(found->run.first);
  return result;
}

}  // namespace kiln

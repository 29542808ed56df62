// int8 calibration (compilers/quantize/) and the quantize_int8 pass: the clipping range of each
// calibration method on known distributions, the checks on the user's calibration data, and the
// attributes the pass writes (which layers, which scales, which outputs stay quantized).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "compilers/quantize/accuracy_control.h"
#include "compilers/lower/to_plan.h"
#include "compilers/quantize/calibrate.h"
#include "kernels/cpu/isa.h"
#include "kernels/engine.h"
#include "kernels/executor.h"
#include "kernels/precision.h"
#include "kernels/quantization.h"
#include "tests/support/graph_builder.h"
#include "tests/support/quantize_helpers.h"

namespace kiln {
namespace {

using testing::GraphBuilder;
using testing::node_named;
using testing::quantize;
using testing::random_set;

TensorStats stats_of(const std::vector<float>& x) {
  TensorStats s;
  s.add_range(x.data(), static_cast<int64_t>(x.size()));
  s.add_histogram(x.data(), static_cast<int64_t>(x.size()));
  return s;
}

std::vector<float> gaussian_with_outliers(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  x[0] = 40.0f;  // a few far outliers that minmax would spend the whole int8 range on
  x[1] = -38.0f;
  return x;
}

}  // namespace

TEST_CASE("minmax keeps the observed range, percentile and entropy clip outliers", "[quantize][calibration]") {
  const std::vector<float> x = gaussian_with_outliers(200000, 3);
  const TensorStats s = stats_of(x);
  const TensorRange mm = calibrated_range(s, CalibrationMethod::minmax);
  CHECK(mm.lo == -38.0f);
  CHECK(mm.hi == 40.0f);

  const TensorRange pct = calibrated_range(s, CalibrationMethod::percentile, 99.9f);
  // The empirical 99.9th percentile of |x| (about 3.3 for a standard normal), to a bin (40/2048).
  std::vector<float> mags(x.size());
  for (size_t i = 0; i < x.size(); ++i) mags[i] = std::fabs(x[i]);
  std::sort(mags.begin(), mags.end());
  const float p999 = mags[static_cast<size_t>(0.999 * static_cast<double>(mags.size()))];
  CHECK(p999 == Approx(3.3).margin(0.1));
  CHECK(pct.hi == Approx(p999).margin(40.0 / kCalibrationBins));
  CHECK(pct.lo == -pct.hi);

  const TensorRange ent = calibrated_range(s, CalibrationMethod::entropy);
  // KL calibration of a Gaussian into 128 levels lands a few sigma out, far inside the outliers.
  CHECK(ent.hi > 2.5f);
  CHECK(ent.hi < 8.0f);
}

TEST_CASE("a non-negative tensor keeps lo >= 0 (u8) and an all-zero one gets a usable scale", "[quantize][calibration]") {
  std::vector<float> relu(1000);
  for (size_t i = 0; i < relu.size(); ++i) relu[i] = static_cast<float>(i % 100) / 10.0f;
  for (CalibrationMethod m : {CalibrationMethod::minmax, CalibrationMethod::percentile, CalibrationMethod::entropy}) {
    const TensorRange r = calibrated_range(stats_of(relu), m);
    INFO(calibration_method_name(m));
    CHECK(r.lo == 0.0f);
    CHECK(r.hi > 9.0f);  // a uniform distribution has nothing to clip
    const QuantParams q = quant_params_for_range(r.lo, r.hi);
    CHECK(q.type == QuantType::u8);
    CHECK(q.scale == Approx(r.hi / 255.0f));
  }
  const QuantParams zero = quant_params_for_range(0.0f, 0.0f);
  CHECK(zero.scale > 0.0f);
  CHECK(quant_params_for_range(-2.0f, 1.0f).type == QuantType::s8);
  CHECK(quant_params_for_range(-2.0f, 1.0f).scale == Approx(2.0f / 127.0f));
}

TEST_CASE("entropy threshold: all mass below the level count needs no clipping", "[quantize][calibration]") {
  std::vector<double> h(kCalibrationBins, 0.0);
  for (int i = 0; i < 100; ++i) h[static_cast<size_t>(i)] = 10.0 + i;
  CHECK(entropy_threshold_bins(h, 128) == 128);
  REQUIRE(calibration_method_from_name("entropy").value() == CalibrationMethod::entropy);
  const auto bad = calibration_method_from_name("kl");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("minmax, percentile, entropy"));
}

namespace {

// x[2,3,8,8] -> Conv(relu) -> MaxPool -> Conv -> y ; the second Conv's output is the graph output.
Graph two_conv_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 8, 8});
  Attrs relu;
  relu.set("activation", std::string("relu"));
  relu.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  const ValueId c1 = b.node(OpKind::Conv, "c1", {x, b.weight("w1", {8, 3, 3, 3}), b.weight("b1", {8})}, relu);
  Attrs pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  pool.set("strides", std::vector<int64_t>{2, 2});
  const ValueId p = b.node(OpKind::MaxPool, "p", {c1}, pool);
  const ValueId c2 = b.node(OpKind::Conv, "c2", {p, b.weight("w2", {4, 8, 1, 1})});
  b.output(c2);
  return b.g;
}

}  // namespace

TEST_CASE("quantize_int8 marks convolutions with calibrated scales", "[quantize][passes]") {
  Graph g = two_conv_graph();
  const CalibrationSet set = random_set(5, {3, 8, 8}, 11);  // 5 samples in batches of 2: the last is padded
  Int8Options int8;
  int8.calibration = &set;
  std::ostringstream log;
  REQUIRE(quantize(g, int8, &log));
  CHECK_THAT(log.str(), Catch::Contains("2 layers in int8"));

  const Node& c1 = node_named(g, "c1_node");
  CHECK(precision_from_attrs(c1.attrs).value() == Precision::int8);
  const auto in = quant_params_from_attrs(c1.attrs, "input").value();
  REQUIRE(in);
  CHECK(in->type == QuantType::s8);
  // minmax: the input's scale is max|x| over the real samples / 127.
  float max_abs = 0;
  for (int64_t i = 0; i < set.inputs[0].numel(); ++i) max_abs = std::max(max_abs, std::fabs(set.inputs[0].data<float>()[i]));
  CHECK(in->scale == Approx(max_abs / 127.0f));
  // Read only by the MaxPool: written quantized, and after the ReLU it is u8.
  const auto out = quant_params_from_attrs(c1.attrs, "output").value();
  REQUIRE(out);
  CHECK(out->type == QuantType::u8);

  const Node& c2 = node_named(g, "c2_node");
  CHECK(precision_from_attrs(c2.attrs).value() == Precision::int8);
  CHECK(quant_params_from_attrs(c2.attrs, "input").value()->type == QuantType::u8);  // the pooled ReLU output
  CHECK_FALSE(quant_params_from_attrs(c2.attrs, "output").value());  // a graph output stays float32
}

TEST_CASE("quantize_int8 keeps the named layers in fp32 and refuses unknown ones", "[quantize][passes]") {
  const CalibrationSet set = random_set(2, {3, 8, 8}, 11);
  Int8Options int8;
  int8.calibration = &set;
  Graph g = two_conv_graph();
  REQUIRE(quantize(g, int8, nullptr, {"c2_node"}));
  CHECK(precision_from_attrs(node_named(g, "c1_node").attrs).value() == Precision::int8);
  CHECK(precision_from_attrs(node_named(g, "c2_node").attrs).value() == Precision::fp32);
  // c2 reads c1's pooled output in float32 now: c1 must not write it quantized.
  CHECK_FALSE(quant_params_from_attrs(node_named(g, "c1_node").attrs, "output").value());

  Graph g2 = two_conv_graph();
  const auto r = quantize(g2, int8, nullptr, {"no_such_layer"});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("no_such_layer"));
}

TEST_CASE("quantize_int8 gives clear errors on missing or mismatched calibration data", "[quantize][passes]") {
  Graph g = two_conv_graph();
  const auto none = quantize(g, {});
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().message, Catch::Contains("calibration data") && Catch::Contains("--calibration"));

  const CalibrationSet wrong_shape = random_set(4, {3, 7, 8}, 1);
  Int8Options int8;
  int8.calibration = &wrong_shape;
  auto r = quantize(g, int8);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("'x'") && Catch::Contains("[3,8,8]"));

  CalibrationSet wrong_type{{Tensor::zeros(DType::i64, {4, 3, 8, 8})}, "test"};
  int8.calibration = &wrong_type;
  r = quantize(g, int8);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("int64") && Catch::Contains("float32"));

  CalibrationSet empty{{Tensor::zeros(DType::f32, {0, 3, 8, 8})}, "test"};
  int8.calibration = &empty;
  r = quantize(g, int8);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("empty"));

  CalibrationSet two_inputs{{Tensor::zeros(DType::f32, {1, 3, 8, 8}), Tensor::zeros(DType::f32, {1, 3, 8, 8})}, "t"};
  int8.calibration = &two_inputs;
  r = quantize(g, int8);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("2 input tensors"));
}

TEST_CASE("quantize_int8 is an optional, inexact pass in the table", "[quantize][passes]") {
  const auto names = pipeline_parse("default+quantize_int8");
  CHECK(std::find(names.begin(), names.end(), "quantize_int8") != names.end());
  const auto defaults = default_pipeline();
  CHECK(std::find(defaults.begin(), defaults.end(), "quantize_int8") == defaults.end());
  for (const PassInfo& p : pass_table())
    if (p.name == "quantize_int8") CHECK_FALSE(p.exact);
}

}  // namespace kiln

namespace kiln {
namespace {

// x[8,16,1,1] -> Conv 1x1 (10 nearly identical filters: the logits nearly tie, so int8 weights
// flip some top-1 decisions) -> Flatten -> [8,10].
Graph near_tie_classifier() {
  GraphBuilder b;
  const ValueId x = b.input("x", {8, 16, 1, 1});
  Tensor w = GraphBuilder::random({10, 16, 1, 1}, 5, -0.001f, 0.001f);
  const Tensor base = GraphBuilder::random({16}, 6);
  for (int64_t c = 0; c < 10; ++c)
    for (int64_t i = 0; i < 16; ++i) w.data<float>()[c * 16 + i] += base.data<float>()[i];
  const ValueId wid = b.weight("w", {10, 16, 1, 1});
  b.g.initializers[wid] = w;
  const ValueId y = b.node(OpKind::Conv, "c", {x, wid});
  const ValueId f = b.node(OpKind::Flatten, "f", {y});
  b.output(f);
  return b.g;
}

// Labelled data whose labels are the fp32 model's own top-1 (fp32 accuracy 100%).
VerifyData self_labelled(const Graph& g, int64_t n) {
  VerifyData d;
  d.inputs.push_back(GraphBuilder::random({n, 16, 1, 1}, 21));
  Tensor labels = Tensor::zeros(DType::i64, {n});
  const Tensor& x = d.inputs[0];
  const Tensor& w = g.initializers.at(g.find_value("w"));
  for (int64_t s = 0; s < n; ++s) {
    int64_t best = 0;
    double best_v = -1e30;
    for (int64_t c = 0; c < 10; ++c) {
      double v = 0;
      for (int64_t i = 0; i < 16; ++i) v += double(w.data<float>()[c * 16 + i]) * x.data<float>()[s * 16 + i];
      if (v > best_v) best_v = v, best = c;
    }
    labels.data<int64_t>()[s] = best;
  }
  d.labels = labels;
  d.source = "test";
  return d;
}

}  // namespace

TEST_CASE("accuracy control: met when loose, 'not met' when only fp32 would do, labels or not", "[quantize][accuracy]") {
  const Graph g = near_tie_classifier();
  const VerifyData data = self_labelled(g, 256);
  const CalibrationSet set{{data.inputs[0]}, "test"};
  PassRunOptions options;
  options.int8.calibration = &set;
  const std::vector<std::string> pipeline{"fold_constants", "quantize_int8"};

  AccuracyControlOptions loose;
  loose.max_accuracy_drop = 1.0;
  auto met = reduce_precision_within_accuracy(g, pipeline, options, data, loose);
  REQUIRE(met);
  CHECK(met->met);
  CHECK(met->reduced_layers == 1);
  CHECK(met->reduced_macs_share == Approx(1.0));  // the one layer's MACs, all in int8
  CHECK(met->fp32_accuracy == Approx(1.0));
  // int8's noise floor: the fp32 model on its inputs rounded to 8 bits, measured beside.
  REQUIRE(met->input_rounding);
  CHECK(met->input_rounding->cosine > 0.99);
  CHECK(met->input_rounding->cosine < 1.0);  // the rounding really moved the outputs

  AccuracyControlOptions strict;
  strict.max_accuracy_drop = 0.0;
  auto missed = reduce_precision_within_accuracy(g, pipeline, options, data, strict);
  REQUIRE(missed);
  CHECK_FALSE(missed->met);  // int8 flips some of the near ties; the one layer cannot fall back alone
  REQUIRE(missed->sensitivities.size() == 1);
  CHECK(missed->sensitivities[0].cosine_distance > 0.0);
  REQUIRE(missed->sensitivities[0].saving_ms);  // timed: the one layer in fp32 and reduced alone

  // Without labels the fp32 top-1 are the labels: the same decisions, the same outcome.
  VerifyData unlabelled = data;
  unlabelled.labels.reset();
  auto pseudo = reduce_precision_within_accuracy(g, pipeline, options, unlabelled, strict);
  REQUIRE(pseudo);
  CHECK_FALSE(pseudo->met);
  CHECK(pseudo->fp32_accuracy == Approx(1.0));
  auto pseudo_loose = reduce_precision_within_accuracy(g, pipeline, options, unlabelled, loose);
  REQUIRE(pseudo_loose);
  CHECK(pseudo_loose->met);

  // Priced instead of timed (kiln's service layer prices with the target's latency predictor):
  // the savings are the prices over the data's batches, the same on every run.
  int priced_plans = 0;
  AccuracyControlOptions priced = strict;
  priced.step_prices = [&priced_plans](const Plan&, const std::vector<EngineStep>& steps, int) {
    ++priced_plans;
    std::map<std::string, double> ms;
    for (const EngineStep& step : steps) ms[step.node] = 1.0;  // one "ms" per step and batch
    return ms;
  };
  auto first = reduce_precision_within_accuracy(g, pipeline, options, data, priced);
  auto second = reduce_precision_within_accuracy(g, pipeline, options, data, priced);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->savings_priced);
  CHECK_FALSE(missed->savings_priced);
  CHECK(priced_plans >= 4);  // fp32 and the layer alone, twice
  REQUIRE(first->sensitivities.size() == 1);
  REQUIRE(first->sensitivities[0].saving_ms);
  // 32 batches of 8: the layer's own step costs the same reduced, so what remains is minus the
  // conversion steps at its borders, 32 "ms" each.
  const double saving = *first->sensitivities[0].saving_ms;
  CHECK(saving <= 0.0);
  CHECK(std::fmod(saving, 32.0) == 0.0);
  CHECK(*second->sensitivities[0].saving_ms == saving);

  AccuracyControlOptions negative;
  negative.max_accuracy_drop = -0.1;
  auto refused = reduce_precision_within_accuracy(g, pipeline, options, data, negative);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains(">= 0"));
}

}  // namespace kiln

namespace kiln {

TEST_CASE("accuracy control for bf16 by cosine, constraints and pipelines checked", "[quantize][accuracy]") {
  const Graph g = near_tie_classifier();
  VerifyData data = self_labelled(g, 64);
  data.labels.reset();
  PassRunOptions options;
  const std::vector<std::string> bf16{"fold_constants", "mixed_precision_bf16"};

  AccuracyControlOptions loose;
  loose.min_cosine = 0.99;
  auto met = reduce_precision_within_accuracy(g, bf16, options, data, loose);
  REQUIRE(met);
  CHECK(met->met);
  CHECK(met->precision == "bf16");
  CHECK(met->reduced_layers == 1);
  CHECK(met->cosine >= 0.99);
  CHECK(met->cosine < 1.0);  // bf16 really ran
  CHECK_FALSE(met->input_rounding);  // int8's floor: not measured for bf16

  AccuracyControlOptions exact;
  exact.min_cosine = 1.0;  // bf16 rounding moves the output: only fp32 would do
  auto missed = reduce_precision_within_accuracy(g, bf16, options, data, exact);
  REQUIRE(missed);
  CHECK_FALSE(missed->met);

  // The user's own list is honoured: with the one layer kept there is nothing to reduce.
  PassRunOptions kept = options;
  kept.keep_fp32 = {"c_node"};
  auto none = reduce_precision_within_accuracy(g, bf16, kept, data, loose);
  REQUIRE(none);
  CHECK(none->reduced_layers == 0);
  CHECK(none->reduced_macs_share == 0.0);
  CHECK(none->cosine == Approx(1.0));

  AccuracyControlOptions unconstrained;
  auto refused = reduce_precision_within_accuracy(g, bf16, options, data, unconstrained);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("needs a constraint"));

  AccuracyControlOptions wrong_cosine;
  wrong_cosine.min_cosine = 1.5;
  CHECK_FALSE(reduce_precision_within_accuracy(g, bf16, options, data, wrong_cosine));

  auto neither = reduce_precision_within_accuracy(g, {"fold_constants"}, options, data, loose);
  REQUIRE_FALSE(neither);
  CHECK_THAT(neither.error().message, Catch::Contains("neither"));
}

TEST_CASE("mixed_precision_bf16 leaves the named layers in fp32 and refuses unknown ones", "[quantize][passes]") {
  Graph g = near_tie_classifier();
  PassRunOptions options;
  options.keep_fp32 = {"c_node"};
  std::ostringstream log;
  options.log = &log;
  auto r = run_passes(g, {"mixed_precision_bf16"}, options);
  REQUIRE(r);
  CHECK(precision_from_attrs(node_named(g, "c_node").attrs).value() == Precision::fp32);

  Graph g2 = near_tie_classifier();
  options.keep_fp32 = {};
  REQUIRE(run_passes(g2, {"mixed_precision_bf16"}, options));
  CHECK(precision_from_attrs(node_named(g2, "c_node").attrs).value() == Precision::bf16);
  CHECK_THAT(log.str(), Catch::Contains("1 layers in bf16"));

  Graph g3 = near_tie_classifier();
  options.keep_fp32 = {"no_such_layer"};
  auto bad = run_passes(g3, {"mixed_precision_bf16"}, options);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("no_such_layer"));
}

}  // namespace kiln

namespace kiln {

// two_conv_graph's second conv pooled into a classifier's [N, 4] output.
Graph two_conv_classifier() {
  Graph g = two_conv_graph();
  GraphBuilder b;
  b.g = std::move(g);
  const ValueId y = b.g.outputs.at(0);
  b.g.outputs.clear();
  const ValueId pooled = b.node(OpKind::GlobalAveragePool, "gap", {y});
  b.output(b.node(OpKind::Flatten, "logits", {pooled}));
  return b.g;
}

TEST_CASE("int8 after bf16: accuracy control's fallback is bf16, not fp32", "[quantize][accuracy]") {
  const Graph g = two_conv_classifier();
  const CalibrationSet set = random_set(8, {3, 8, 8}, 11);
  VerifyData data;
  data.inputs.push_back(set.inputs[0]);
  data.source = "test";
  PassRunOptions options;
  options.int8.calibration = &set;
  const std::vector<std::string> pipeline{"fold_constants", "mixed_precision_bf16", "quantize_int8"};
  // Only bf16 everywhere can reach this: the search falls back layer by layer and ends "not met"
  // with one layer left int8 at most, every other one bf16.
  AccuracyControlOptions strict;
  strict.min_cosine = 1.0;
  auto r = reduce_precision_within_accuracy(g, pipeline, options, data, strict);
  REQUIRE(r);
  CHECK(r->precision == "int8");
  CHECK(r->fallback == "bf16");
  CHECK_FALSE(r->met);
  REQUIRE(r->sensitivities.size() == 2);

  // The pass itself: a layer left out of int8 keeps the bf16 mark.
  Graph q = two_conv_graph();
  options.int8.keep = {"c2_node"};
  REQUIRE(run_passes(q, pipeline, options));
  CHECK(precision_from_attrs(node_named(q, "c1_node").attrs).value() == Precision::int8);
  CHECK(precision_from_attrs(node_named(q, "c2_node").attrs).value() == Precision::bf16);
  options.int8.keep = {"nope"};
  Graph bad = two_conv_graph();
  REQUIRE_FALSE(run_passes(bad, pipeline, options));
}

}  // namespace kiln

namespace kiln {

TEST_CASE("accuracy control falls back the most error per millisecond saved first, plain sensitivity when untimed", "[quantize][accuracy]") {
  // "big" is the most sensitive but saves 100x the time of "dw"; "slow" is slower reduced than in fp32.
  std::vector<LayerSensitivity> by_sensitivity{{"big", 0.010, 1.0},
                                               {"dw", 0.004, 0.01},
                                               {"mid", 0.002, 0.1},
                                               {"slow", 0.001, -0.02},
                                               {"free", 0.0005, 0.0}};
  // Saving nothing first (most sensitive first), then error per ms: dw 0.4, mid 0.02, big 0.01.
  CHECK(accuracy_fallback_order(by_sensitivity) == std::vector<std::string>{"slow", "free", "dw", "mid", "big"});
  by_sensitivity[2].saving_ms.reset();  // one untimed: the order by sensitivity as measured
  CHECK(accuracy_fallback_order(by_sensitivity) == std::vector<std::string>{"big", "dw", "mid", "slow", "free"});
}

}  // namespace kiln

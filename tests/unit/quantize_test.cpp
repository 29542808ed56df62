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

namespace kiln {
namespace {

using testing::GraphBuilder;

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

CalibrationSet random_set(int64_t n, Shape sample, uint32_t seed) {
  Shape shape{n};
  shape.insert(shape.end(), sample.begin(), sample.end());
  return CalibrationSet{{GraphBuilder::random(shape, seed)}, "test"};
}

Result<std::vector<PassRecord>> quantize(Graph& g, const Int8Options& int8, std::ostream* log = nullptr,
                                         std::vector<std::string> keep_fp32 = {}) {
  PassRunOptions options;
  options.int8 = int8;
  options.keep_fp32 = std::move(keep_fp32);
  options.log = log;
  return run_passes(g, {"quantize_int8"}, options);
}

const Node& node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (n.name == name) return n;
  FAIL("no node " << name);
  return g.nodes.front();
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

namespace {

// An inception-like join: x -> Conv a (relu), Conv b (relu, 3x larger weights) -> channel Concat ->
// MaxPool -> Conv c -> y.
Graph concat_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 8, 8});
  Attrs relu;
  relu.set("activation", std::string("relu"));
  relu.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  const ValueId a = b.node(OpKind::Conv, "a", {x, b.weight("wa", {8, 3, 3, 3}), b.weight("ba", {8})}, relu);
  const ValueId c = b.node(OpKind::Conv, "b", {x, b.weight("wb", {4, 3, 3, 3}, -3.0f, 3.0f), b.weight("bb", {4})}, relu);
  Attrs axis;
  axis.set("axis", int64_t{1});
  const ValueId joined = b.node(OpKind::Concat, "joined", {a, c}, axis);
  Attrs pool;
  pool.set("kernel_shape", std::vector<int64_t>{3, 3});
  pool.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  const ValueId p = b.node(OpKind::MaxPool, "p", {joined}, pool);
  b.output(b.node(OpKind::Conv, "c", {p, b.weight("wc", {4, 12, 1, 1})}));
  return b.g;
}

}  // namespace

TEST_CASE("quantize_int8 gives a channel Concat's int8 parts the Concat's scale, so it joins codes", "[quantize][passes]") {
  const CalibrationSet set = random_set(4, {3, 8, 8}, 5);
  Int8Options int8;
  int8.calibration = &set;
  Graph g = concat_graph();
  REQUIRE(quantize(g, int8));
  const auto a = quant_params_from_attrs(node_named(g, "a_node").attrs, "output").value();
  const auto b = quant_params_from_attrs(node_named(g, "b_node").attrs, "output").value();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->type == QuantType::u8);
  CHECK(b->type == a->type);
  CHECK(b->scale == a->scale);
  // The Concat's range covers the larger part's: the scale is what Conv c reads through the pool.
  const auto c_in = quant_params_from_attrs(node_named(g, "c_node").attrs, "input").value();
  REQUIRE(c_in);
  CHECK(c_in->scale == Approx(a->scale).epsilon(1e-6));

  // With one part kept in fp32 the Concat joins floats, and the other part writes float32 too.
  Graph kept = concat_graph();
  REQUIRE(quantize(kept, int8, nullptr, {"b_node"}));
  CHECK_FALSE(quant_params_from_attrs(node_named(kept, "a_node").attrs, "output").value());
}

namespace {

// DenseNet's layer: two ReLU convs joined by a Concat, BatchNormalization + ReLU (fused into one
// ConcatAffine), then the 1x1 conv "c" whose output is the graph output.
Graph dense_layer_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 8, 8});
  Attrs relu;
  relu.set("activation", std::string("relu"));
  const ValueId a = b.node(OpKind::Conv, "a", {x, b.weight("wa", {8, 3, 1, 1}), b.weight("ba", {8})}, relu);
  const ValueId f = b.node(OpKind::Conv, "f", {x, b.weight("wf", {4, 3, 1, 1}), b.weight("bf", {4})}, relu);
  Attrs axis;
  axis.set("axis", int64_t{1});
  const ValueId joined = b.node(OpKind::Concat, "joined", {a, f}, axis);
  const ValueId var = b.weight("bn_v", {12});
  for (int64_t i = 0; i < 12; ++i) b.g.initializers[var].data<float>()[i] += 1.5f;
  const ValueId bn = b.node(OpKind::BatchNormalization, "bn",
                            {joined, b.weight("bn_s", {12}), b.weight("bn_b", {12}), b.weight("bn_m", {12}), var});
  b.output(b.node(OpKind::Conv, "c", {b.node(OpKind::Relu, "r", {bn}), b.weight("wc", {6, 12, 1, 1})}));
  return b.g;
}

// The cosine between the compiled plan's output and the fp32 reference of the `original` graph on one
// seeded input of dense_layer_graph's shape.
// The lowest over the outputs with `input_shape` for the input.
double cosine_to_reference(Engine& engine, const Graph& original, const Shape& input_shape = {2, 3, 8, 8}) {
  const std::vector<Tensor> inputs = {GraphBuilder::random(input_shape, 21)};
  auto got = engine.run(inputs);
  REQUIRE(got);
  auto want = execute_reference(graph_to_plan(original), inputs);
  REQUIRE(want);
  double lowest = 1.0;
  for (size_t o = 0; o < want->outputs.size(); ++o) {
    double dot = 0, gg = 0, ww = 0;
    for (int64_t i = 0; i < want->outputs[o].numel(); ++i) {
      const double x = got->at(o).data<float>()[i], y = want->outputs[o].data<float>()[i];
      dot += x * y, gg += x * x, ww += y * y;
    }
    lowest = std::min(lowest, dot / std::sqrt(gg * ww));
  }
  return lowest;
}

}  // namespace

// The ConcatAffine's only reader is int8 conv "c": it writes u8 codes at the scale c reads them with,
// and the compiled plan agrees with the float32 reference at int8 accuracy. With c kept in fp32 it
// writes float32. Either way it reads the u8 codes of int8 convs "a" and "f" (a Concat whose only
// reader is a ConcatAffine is fused into it, which reads each part's codes with their scale).
TEST_CASE("quantize_int8 lets a BatchNorm+ReLU read only by int8 convs write codes", "[quantize][passes]") {
  const CalibrationSet set = random_set(4, {3, 8, 8}, 9);
  PassRunOptions options;
  options.int8.calibration = &set;
  std::ostringstream log;
  options.log = &log;
  Graph g = dense_layer_graph();
  const Graph original = g;
  REQUIRE(run_passes(g, {"fuse_activation", "fuse_concat_affine", "quantize_int8"}, options));
  CHECK_THAT(log.str(), Catch::Contains("1 BatchNorm+ReLU writing int8 codes"));
  const auto affine = std::find_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op == OpKind::ConcatAffine; });
  REQUIRE(affine != g.nodes.end());
  const auto codes = quant_params_from_attrs(affine->attrs, "output").value();
  REQUIRE(codes);
  CHECK(codes->type == QuantType::u8);
  const auto c_in = quant_params_from_attrs(node_named(g, "c_node").attrs, "input").value();
  REQUIRE(c_in);
  CHECK(c_in->scale == codes->scale);
  CHECK(c_in->type == codes->type);

  for (const char* part : {"a_node", "f_node"}) {
    const auto part_codes = quant_params_from_attrs(node_named(g, part).attrs, "output").value();
    INFO(part);
    REQUIRE(part_codes);
    CHECK(part_codes->type == QuantType::u8);
  }

  auto engine = Engine::create(graph_to_plan(g), {2, nullptr});
  REQUIRE(engine);
  bool wrote_codes = false;
  int conversions = 0;
  for (const EngineStep& st : (*engine)->steps()) {
    if (st.op == "ConcatAffine") wrote_codes = st.output_layout.find(":u8*") != std::string::npos;
    conversions += st.op == "ToPlain";
  }
  // Where oneDNN's convs write NHWC (AVX-512; AVX2 picks channel blocks, read through plain floats).
  if (cpu_isa_available(CpuIsa::avx512)) {
    CHECK(wrote_codes);
    CHECK(conversions == 1);  // the graph output's only
  }
  CHECK(cosine_to_reference(**engine, original) >= 0.999);

  Graph kept = dense_layer_graph();
  PassRunOptions keep = options;
  keep.keep_fp32 = {"c_node"};
  REQUIRE(run_passes(kept, {"fuse_activation", "fuse_concat_affine", "quantize_int8"}, keep));
  for (const Node& n : kept.nodes) {
    INFO(n.name);
    CHECK(quant_params_from_attrs(n.attrs, "output").value().has_value() == (n.name == "a_node" || n.name == "f_node"));
  }
  auto kept_engine = Engine::create(graph_to_plan(kept), {2, nullptr});
  REQUIRE(kept_engine);
  CHECK(cosine_to_reference(**kept_engine, dense_layer_graph()) >= 0.999);
}

namespace {

ValueId int_values(GraphBuilder& b, const std::string& name, std::vector<int64_t> v) {
  const ValueId id = b.g.add_value(name, ValueType::of(DType::i64, sym_shape_from({static_cast<int64_t>(v.size())})));
  Tensor t = Tensor::zeros(DType::i64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  b.g.initializers[id] = std::move(t);
  return id;
}

// torchvision's channel_shuffle(Concat(parts), 2) of [2, 8, 8, 8] as ONNX writes it.
ValueId shuffled(GraphBuilder& b, const std::string& name, std::vector<ValueId> parts) {
  Attrs axis;
  axis.set("axis", int64_t{1});
  const ValueId joined = b.node(OpKind::Concat, name + "_cat", std::move(parts), axis);
  const ValueId grouped = b.node(OpKind::Reshape, name + "_g", {joined, int_values(b, name + "_gs", {2, 2, 4, 8, 8})});
  Attrs perm;
  perm.set("perm", std::vector<int64_t>{0, 2, 1, 3, 4});
  const ValueId swapped = b.node(OpKind::Transpose, name + "_t", {grouped}, perm);
  return b.node(OpKind::Reshape, name, {swapped, int_values(b, name + "_s", {2, 8, 8, 8})});
}

// A ShuffleNet stage: x -> Conv a, Conv b (relu; b's weights 3x larger) -> shuffle -> halves h1, h2;
// Conv c (relu) on h2; shuffle(h1, c) -> Conv d -> y. One class of values joined by shuffles:
// a, b, h1, h2, c and the second shuffle's output.
Graph shuffle_stage_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 8, 8});
  Attrs relu;
  relu.set("activation", std::string("relu"));
  const ValueId a = b.node(OpKind::Conv, "a", {x, b.weight("wa", {4, 3, 1, 1}), b.weight("ba", {4})}, relu);
  const ValueId f = b.node(OpKind::Conv, "b", {x, b.weight("wb", {4, 3, 1, 1}, -3.0f, 3.0f), b.weight("bb", {4})}, relu);
  const ValueId s1 = shuffled(b, "s1", {a, f});
  std::vector<ValueId> halves;
  for (int64_t begin : {0, 4})
    halves.push_back(b.node(OpKind::Slice, "h" + std::to_string(begin),
                            {s1, int_values(b, "hb" + std::to_string(begin), {begin}),
                             int_values(b, "he" + std::to_string(begin), {begin + 4}), int_values(b, "ha" + std::to_string(begin), {1})}));
  const ValueId c = b.node(OpKind::Conv, "c", {halves[1], b.weight("wc", {4, 4, 1, 1}), b.weight("bc", {4})}, relu);
  b.output(b.node(OpKind::Conv, "d", {shuffled(b, "s2", {halves[0], c}), b.weight("wd", {5, 8, 1, 1})}));
  return b.g;
}

}  // namespace

// The shuffle class holds u8 codes at one scale (the union of its values' ranges): convs a, b and c write
// them, the shuffles copy them, c and d read them. With d kept in fp32 the class joins floats again.
TEST_CASE("quantize_int8 keeps ShuffleNet's chain of channel shuffles on codes of one scale", "[quantize][passes]") {
  const CalibrationSet set = random_set(4, {3, 8, 8}, 13);
  PassRunOptions options;
  options.int8.calibration = &set;
  std::ostringstream log;
  options.log = &log;
  const std::vector<std::string> passes = {"fuse_activation", "fuse_channel_shuffle", "quantize_int8"};
  Graph g = shuffle_stage_graph();
  REQUIRE(run_passes(g, passes, options));
  CHECK_THAT(log.str(), Catch::Contains("1 chains of channel shuffles on int8 codes"));
  const auto a_out = quant_params_from_attrs(node_named(g, "a_node").attrs, "output").value();
  REQUIRE(a_out);
  CHECK(a_out->type == QuantType::u8);
  for (const char* writer : {"b_node", "c_node"}) {
    INFO(writer);
    const auto out = quant_params_from_attrs(node_named(g, writer).attrs, "output").value();
    REQUIRE(out);
    CHECK(out->type == QuantType::u8);
    CHECK(out->scale == a_out->scale);
  }
  for (const char* reader : {"c_node", "d_node"}) {
    INFO(reader);
    const auto in = quant_params_from_attrs(node_named(g, reader).attrs, "input").value();
    REQUIRE(in);
    CHECK(in->scale == a_out->scale);
  }
  // The union covers b's range, the widest (3x the weights of a): quantized alone, a's codes would be finer.
  Graph alone = shuffle_stage_graph();
  REQUIRE(run_passes(alone, {"fuse_activation", "quantize_int8"}, options));
  const auto c_alone = quant_params_from_attrs(node_named(alone, "c_node").attrs, "input").value();
  REQUIRE(c_alone);
  CHECK(a_out->scale >= c_alone->scale);

  auto engine = Engine::create(graph_to_plan(g), {2, nullptr});
  REQUIRE(engine);
  int shuffles_on_codes = 0;
  std::string steps;
  for (const EngineStep& st : (*engine)->steps()) {
    shuffles_on_codes += st.op == "ChannelShuffle" && st.output_layout.find(":u8*") != std::string::npos;
    steps += st.node + " -> " + st.kernel + " [" + st.output_layout + "]\n";
  }
  INFO(steps);
  if (cpu_isa_available(CpuIsa::avx512)) CHECK(shuffles_on_codes == 2);  // where the convs write NHWC
  CHECK(cosine_to_reference(**engine, shuffle_stage_graph()) >= 0.999);

  Graph kept = shuffle_stage_graph();
  PassRunOptions keep = options;
  keep.keep_fp32 = {"d_node"};
  REQUIRE(run_passes(kept, passes, keep));
  for (const char* writer : {"a_node", "b_node", "c_node"}) {
    INFO(writer);
    CHECK_FALSE(quant_params_from_attrs(node_named(kept, writer).attrs, "output").value().has_value());
  }
}

namespace {

// ConvNeXt's block start: x (rows of 16) -> LayerNormalization -> MatMul "fc" -> y.
Graph layer_norm_linear_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 4, 4, 16});
  Attrs eps;
  eps.set("epsilon", 1e-6f);
  const ValueId ln = b.node(OpKind::LayerNormalization, "ln", {x, b.weight("ln_s", {16}), b.weight("ln_b", {16})}, eps);
  b.output(b.node(OpKind::MatMul, "fc", {ln, b.weight("w_fc", {16, 24})}));
  return b.g;
}

}  // namespace

// The LayerNorm read only by int8 MatMul "fc" writes s8 codes at the scale fc reads them with; kept in fp32,
// fc leaves it writing float32.
TEST_CASE("quantize_int8 lets a LayerNorm read only by int8 MatMuls write codes", "[quantize][passes]") {
  const CalibrationSet set = random_set(4, {4, 4, 16}, 17);
  PassRunOptions options;
  options.int8.calibration = &set;
  std::ostringstream log;
  options.log = &log;
  Graph g = layer_norm_linear_graph();
  REQUIRE(run_passes(g, {"quantize_int8"}, options));
  CHECK_THAT(log.str(), Catch::Contains("1 LayerNorms writing int8 codes"));
  const auto codes = quant_params_from_attrs(node_named(g, "ln_node").attrs, "output").value();
  REQUIRE(codes);
  CHECK(codes->type == QuantType::s8);
  const auto fc_in = quant_params_from_attrs(node_named(g, "fc_node").attrs, "input").value();
  REQUIRE(fc_in);
  CHECK(fc_in->scale == codes->scale);
  CHECK(fc_in->type == codes->type);

  auto engine = Engine::create(graph_to_plan(g), {2, nullptr});
  REQUIRE(engine);
  std::string ln_layout;
  for (const EngineStep& st : (*engine)->steps())
    if (st.op == "LayerNormalization") ln_layout = st.kernel + " [" + st.output_layout + "]";
  INFO(ln_layout);
  CHECK(ln_layout.find("cpu.layer_norm_codes [") == 0);
  CHECK(ln_layout.find(":s8*") != std::string::npos);
  CHECK(cosine_to_reference(**engine, layer_norm_linear_graph(), {2, 4, 4, 16}) >= 0.999);

  Graph kept = layer_norm_linear_graph();
  PassRunOptions keep = options;
  keep.keep_fp32 = {"fc_node"};
  REQUIRE(run_passes(kept, {"quantize_int8"}, keep));
  CHECK_FALSE(quant_params_from_attrs(node_named(kept, "ln_node").attrs, "output").value().has_value());
}

// The same for bf16: the ConcatAffine read only by bf16 conv "c" writes bfloat16 (bf16_output), and
// the plan agrees with the reference at bf16 accuracy; with c kept in fp32 it writes float32.
TEST_CASE("mixed_precision_bf16 lets a BatchNorm+ReLU read only by bf16 convs write bfloat16", "[quantize][passes]") {
  PassRunOptions options;
  std::ostringstream log;
  options.log = &log;
  Graph g = dense_layer_graph();
  const Graph original = g;
  REQUIRE(run_passes(g, {"fuse_activation", "fuse_concat_affine", "mixed_precision_bf16"}, options));
  CHECK_THAT(log.str(), Catch::Contains("1 BatchNorm+ReLU writing bf16"));
  const auto affine = std::find_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op == OpKind::ConcatAffine; });
  REQUIRE(affine != g.nodes.end());
  CHECK(affine->attrs.get_int(std::string(kBf16OutputAttr), 0).value() == 1);
  CHECK(precision_from_attrs(affine->attrs).value() == Precision::fp32);  // its arithmetic stays float32

  auto engine = Engine::create(graph_to_plan(g), {2, nullptr});
  REQUIRE(engine);
  if (cpu_has_bf16_compute() && cpu_isa_available(CpuIsa::avx512)) {
    std::string layout;
    for (const EngineStep& st : (*engine)->steps())
      if (st.op == "ConcatAffine") layout = st.output_layout;
    CHECK(layout == "onednn:acdb:bf16");
  }
  CHECK(cosine_to_reference(**engine, original) >= 0.9999);

  Graph kept = dense_layer_graph();
  options.keep_fp32 = {"c_node"};
  REQUIRE(run_passes(kept, {"fuse_activation", "fuse_concat_affine", "mixed_precision_bf16"}, options));
  for (const Node& n : kept.nodes) CHECK(n.attrs.get_int(std::string(kBf16OutputAttr), 0).value() == 0);
}

// ConvNeXt's MLP: Linear+GELU read only by the next bf16 Linear writes bfloat16 rows that it reads
// as they are; the second (read by a Neg) and one with a residual write float32.
TEST_CASE("mixed_precision_bf16 lets a MatMul read only by bf16 MatMuls write bfloat16", "[quantize][passes]") {
  testing::GraphBuilder b;
  const ValueId x = b.input("x", {2, 5, 5, 24});
  Attrs gelu;
  gelu.set("activation", std::string("gelu_erf"));
  const ValueId h = b.node(OpKind::MatMul, "h", {x, b.weight("w1", {24, 64}, -0.3f, 0.3f), b.weight("b1", {64})}, gelu);
  const ValueId y = b.node(OpKind::MatMul, "y", {h, b.weight("w2", {64, 24}, -0.3f, 0.3f), b.weight("b2", {24})});
  b.output(b.node(OpKind::Neg, "n", {y}));
  const ValueId r = b.node(OpKind::MatMul, "r", {x, b.weight("w3", {24, 24}, -0.3f, 0.3f), kNoValue, x});
  b.output(b.node(OpKind::MatMul, "z", {r, b.weight("w4", {24, 8}, -0.3f, 0.3f)}));
  const Graph original = b.g;
  PassRunOptions options;
  std::ostringstream log;
  options.log = &log;
  REQUIRE(run_passes(b.g, {"mixed_precision_bf16"}, options));
  CHECK_THAT(log.str(), Catch::Contains("1 MatMuls writing bf16"));
  auto writes_bf16 = [&](const std::string& name) {
    return node_named(b.g, name + "_node").attrs.get_int(std::string(kBf16OutputAttr), 0).value() == 1;
  };
  CHECK(writes_bf16("h"));
  CHECK_FALSE(writes_bf16("y"));
  CHECK_FALSE(writes_bf16("r"));  // a residual sum stays float32

  auto engine = Engine::create(graph_to_plan(b.g), {2, nullptr});
  REQUIRE(engine);
  std::string steps;
  for (const EngineStep& st : (*engine)->steps()) steps += st.node + " -> " + st.kernel + " [" + st.output_layout + "]\n";
  INFO(steps);
  if (cpu_has_bf16_compute()) {
    CHECK((*engine)->steps().front().output_layout == "onednn:abcd:bf16");
    for (const EngineStep& st : (*engine)->steps()) CHECK(st.kernel.rfind("convert.", 0) == std::string::npos);
  }
  CHECK(cosine_to_reference(**engine, original, {2, 5, 5, 24}) >= 0.9999);

  // int8 after bf16 (accuracy control's bf16 fallback keeps h in bf16): y reads int8 now, so h
  // writes float32 again.
  Graph mixed = original;
  const CalibrationSet set = random_set(4, {5, 5, 24}, 13);
  PassRunOptions int8_options;
  int8_options.int8.calibration = &set;
  int8_options.int8.keep = {"h_node"};
  REQUIRE(run_passes(mixed, {"mixed_precision_bf16", "quantize_int8"}, int8_options));
  CHECK(precision_from_attrs(node_named(mixed, "h_node").attrs).value() == Precision::bf16);
  CHECK(precision_from_attrs(node_named(mixed, "y_node").attrs).value() == Precision::int8);
  CHECK_FALSE(node_named(mixed, "h_node").attrs.has(std::string(kBf16OutputAttr)));
}

// A LayerNorm read only by a bf16 MatMul (ConvNeXt's and transformers' norm before the first Linear) writes
// bfloat16 rows; one also read by another op, or read by an fp32 MatMul, writes float32.
TEST_CASE("mixed_precision_bf16 lets a LayerNorm read only by bf16 MatMuls write bfloat16", "[quantize][passes]") {
  testing::GraphBuilder b;
  const ValueId x = b.input("x", {2, 5, 5, 24});
  Attrs ln;
  ln.set("axis", int64_t{-1});
  const auto norm = [&](const std::string& name) {
    return b.node(OpKind::LayerNormalization, name, {x, b.weight(name + "_s", {24}), b.weight(name + "_b", {24})}, ln);
  };
  const ValueId only_matmul = norm("a"), shared = norm("s"), to_fp32 = norm("f");
  b.output(b.node(OpKind::MatMul, "m1", {only_matmul, b.weight("w1", {24, 8}, -0.3f, 0.3f)}));
  b.output(b.node(OpKind::MatMul, "m2", {shared, b.weight("w2", {24, 8}, -0.3f, 0.3f)}));
  b.output(b.node(OpKind::Neg, "n", {shared}));
  b.output(b.node(OpKind::MatMul, "m3", {to_fp32, b.weight("w3", {24, 8}, -0.3f, 0.3f)}));
  PassRunOptions options;
  options.keep_fp32 = {"m3_node"};
  std::ostringstream log;
  options.log = &log;
  REQUIRE(run_passes(b.g, {"mixed_precision_bf16"}, options));
  CHECK_THAT(log.str(), Catch::Contains("1 LayerNorms writing bf16"));
  auto writes_bf16 = [&](const std::string& name) {
    return node_named(b.g, name + "_node").attrs.get_int(std::string(kBf16OutputAttr), 0).value() == 1;
  };
  CHECK(writes_bf16("a"));
  CHECK_FALSE(writes_bf16("s"));
  CHECK_FALSE(writes_bf16("f"));
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

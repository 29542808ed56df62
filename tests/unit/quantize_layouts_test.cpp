// What the producers of a reduced-precision region write (quantize_int8, mixed_precision_bf16): the form
// their readers take, so nothing converts between them. A channel Concat of int8 parts joins codes; a
// BatchNorm+ReLU (ConcatAffine) or a LayerNorm read only by int8 ops writes their codes, and read only by
// bf16 ops writes bfloat16, as does a MatMul for bf16 MatMuls; ShuffleNet's shuffles carry codes of one
// scale. Each checks the attributes, the layouts the engine then runs and the plan against the reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "kernels/cpu/isa.h"
#include "kernels/engine.h"
#include "kernels/executor.h"
#include "kernels/precision.h"
#include "kernels/quantization.h"
#include "tests/support/graph_builder.h"
#include "tests/support/quantize_helpers.h"
#include "tests/support/shuffle_graph.h"

namespace kiln {
namespace {

using testing::GraphBuilder;
using testing::node_named;
using testing::quantize;
using testing::random_set;
using testing::shuffle_stage_graph;

}  // namespace

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

}  // namespace kiln

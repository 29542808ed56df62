// ONNX export: graphs after the export pipeline go out as standard ONNX, come back through kiln's
// importer and compute the same outputs on the reference executor; int8 nodes go out as QDQ that
// computes the fake-quantized numbers; kiln-only ops are refused naming their pass.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "compilers/ir/shape_inference.h"
#include "compilers/ir/verify.h"
#include "compilers/lower/to_plan.h"
#include "compilers/onnx/export.h"
#include "compilers/onnx/import.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "kernels/engine.h"
#include "kernels/executor.h"
#include "kernels/post_ops.h"
#include "kernels/precision.h"
#include "kernels/quantization.h"
#include "tests/support/graph_builder.h"
#include "tests/support/quantize_helpers.h"
#include "tests/support/shuffle_graph.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

std::vector<Tensor> execute(Graph g, const std::vector<Tensor>& inputs) {
  INFO("executing graph '" << g.name << "'");
  auto inferred = graph_infer_shapes(g);
  INFO((inferred ? std::string() : inferred.error().message));
  REQUIRE(inferred);
  auto result = execute_reference(graph_to_plan(g), inputs);
  INFO((result ? std::string() : result.error().message));
  REQUIRE(result);
  return std::move(result->outputs);
}

// Export, serialize and import again with kiln's importer (which runs onnx::checker too).
Graph round_trip(const Graph& g) {
  auto model = onnx_export_model(g);
  INFO((model ? std::string() : model.error().message));
  REQUIRE(model);
  std::string bytes;
  REQUIRE(model->SerializeToString(&bytes));
  auto back = onnx_import_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  INFO((back ? std::string() : back.error().message));
  REQUIRE(back);
  return std::move(*back);
}

std::map<OpKind, int> op_counts(const Graph& g) {
  std::map<OpKind, int> counts;
  for (const Node& n : g.nodes) ++counts[n.op];
  return counts;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.value_as_double(i) - b.value_as_double(i)));
  return m;
}

double max_abs(const Tensor& a) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.value_as_double(i)));
  return m;
}

double cosine(const Tensor& a, const Tensor& b) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.value_as_double(i), y = b.value_as_double(i);
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  return ab / std::sqrt(aa * bb);
}

Attrs conv_attrs() {
  Attrs a;
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  return a;
}

// ---- fp32 ----

TEST_CASE("export: the fashion-mnist model round-trips after the export pipeline", "[onnx][export]") {
  auto g = onnx_import_file(KILN_EXAMPLES_DIR "/fashion-mnist/model.onnx");
  INFO((g ? std::string() : g.error().message));
  REQUIRE(g);
  const Graph original = *g;
  PassRunOptions options;
  options.bindings = {{"batch", 2}};
  // Bind every symbolic input dim (the model's batch dim may be named otherwise).
  for (ValueId id : g->inputs)
    for (const Dim& d : g->value(id).type.shape)
      if (!d.known() && !d.symbol.empty()) options.bindings[d.symbol] = 2;
  auto pipeline = pipeline_parse_for_export("default");
  REQUIRE(pipeline);
  auto records = run_passes(*g, *pipeline, options);
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);

  const Graph back = round_trip(*g);
  std::vector<Tensor> inputs;
  uint32_t seed = 7;
  for (ValueId id : back.inputs) {
    Shape shape;
    for (const Dim& d : back.value(id).type.shape) shape.push_back(d.known() ? d.value : 2);
    inputs.push_back(GraphBuilder::random(shape, seed++, 0.0f, 1.0f));
  }
  Graph bound = original;
  ShapeInferenceOptions bind;
  bind.bindings = options.bindings;
  REQUIRE(graph_infer_shapes(bound, bind));
  const auto want = execute(bound, inputs);
  const auto got = execute(back, inputs);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(max_abs_diff(got[i], want[i]) <= 1e-5 * std::max(1.0, max_abs(want[i])));
}

TEST_CASE("export: fused residuals and activations become standard ops", "[onnx][export]") {
  const PostOps post = GENERATE(PostOps{Activation::none}, PostOps{Activation::relu}, PostOps{Activation::clip, 0.0f, 6.0f},
                                PostOps{Activation::leaky_relu, 0.1f}, PostOps{Activation::sigmoid},
                                PostOps{Activation::silu}, PostOps{Activation::hard_swish},
                                PostOps{Activation::hard_sigmoid, 0.2f, 0.5f}, PostOps{Activation::gelu_erf},
                                PostOps{Activation::tanh}, PostOps{Activation::elu, 0.7f});
  INFO("activation " << activation_name(post.activation));
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 6, 6});
  const ValueId r = b.input("r", {1, 4, 6, 6});
  Attrs attrs = conv_attrs();
  post_ops_to_attrs(post, attrs);
  const ValueId c = b.node(OpKind::Conv, "c", {x, b.weight("w", {4, 3, 3, 3}), b.weight("bias", {4}), r}, attrs);
  const ValueId f = b.node(OpKind::Flatten, "f", {c});
  Attrs gemm;
  gemm.set("transB", int64_t{1});
  post_ops_to_attrs(post, gemm);
  const ValueId gr = b.input("gr", {1, 5});
  const ValueId y = b.node(OpKind::Gemm, "y", {f, b.weight("fc", {5, 144}), b.weight("fc_b", {5}), gr}, gemm);
  Attrs mm;
  post_ops_to_attrs(post, mm);
  const ValueId zr = b.input("zr", {1, 3});
  const ValueId z = b.node(OpKind::MatMul, "z", {y, b.weight("m", {5, 3}), b.weight("m_b", {3}), zr}, mm);
  b.output(z);
  b.output(c);
  REQUIRE(graph_verify(b.g));

  const Graph back = round_trip(b.g);
  for (const Node& n : back.nodes) CHECK_FALSE(n.attrs.has("activation"));
  CHECK(op_counts(back)[OpKind::Add] >= 4);  // the residuals of Conv, Gemm and MatMul, the MatMul's bias
  for (const Node& n : back.nodes) CHECK(n.inputs.size() <= (n.op == OpKind::MatMul ? 2u : 3u));  // ONNX's inputs only
  const std::vector<Tensor> inputs = {GraphBuilder::random({1, 3, 6, 6}, 11), GraphBuilder::random({1, 4, 6, 6}, 12),
                                      GraphBuilder::random({1, 5}, 13), GraphBuilder::random({1, 3}, 14)};
  const auto want = execute(b.g, inputs);
  const auto got = execute(back, inputs);
  REQUIRE(got.size() == 2);
  for (size_t i = 0; i < 2; ++i) CHECK(max_abs_diff(got[i], want[i]) <= 1e-5 * std::max(1.0, max_abs(want[i])));
}

TEST_CASE("export: kiln's own fused ops are refused, naming the node and the pass", "[onnx][export]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 2, 4, 4});
  const ValueId y = b.node(OpKind::ConcatAffine, "cat", {x, x});
  b.output(y);
  auto model = onnx_export_model(b.g);
  REQUIRE_FALSE(model);
  CHECK(model.error().code == ErrorCode::unsupported);
  CHECK_THAT(model.error().message, Catch::Contains("cat_node") && Catch::Contains("ConcatAffine") &&
                                        Catch::Contains("fuse_concat_affine"));
}

TEST_CASE("export pipeline: the default leaves out the passes that make kiln's own ops", "[onnx][export]") {
  auto pipeline = pipeline_parse_for_export("default");
  REQUIRE(pipeline);
  for (const KilnOpPass& p : passes_making_kiln_ops())
    CHECK(std::find(pipeline->begin(), pipeline->end(), std::string(p.pass)) == pipeline->end());
  CHECK(std::find(pipeline->begin(), pipeline->end(), "fold_batchnorm") != pipeline->end());
  auto bf16 = pipeline_parse_for_export("default+mixed_precision_bf16");
  REQUIRE(bf16);
  CHECK(std::find(bf16->begin(), bf16->end(), "mixed_precision_bf16") != bf16->end());
  for (const char* text : {"fold_constants,fuse_concat_affine", "default+fuse_depth_first"}) {
    auto bad = pipeline_parse_for_export(text);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("ONNX cannot express"));
  }
}

// A bf16 MatMul writing bfloat16 for the next one (mixed_precision_bf16) is written as the fp32
// MatMul: neither its precision nor bf16_output is an ONNX attribute (ONNX Runtime refuses those).
TEST_CASE("export: bf16 MatMuls are written as plain MatMuls", "[onnx][export]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 8});
  const ValueId h = b.node(OpKind::MatMul, "h", {x, b.weight("w1", {8, 16})});
  b.output(b.node(OpKind::MatMul, "y", {h, b.weight("w2", {16, 4})}));
  REQUIRE(run_passes(b.g, {"mixed_precision_bf16"}, PassRunOptions{}));
  REQUIRE(b.g.nodes[0].attrs.has(std::string(kBf16OutputAttr)));
  auto model = onnx_export_model(b.g);
  REQUIRE(model);
  for (const auto& n : model->graph().node()) CHECK(n.attribute_size() == 0);
}

// ---- int8 QDQ ----

// Marks a Conv as the int8 pass does: input (and optionally output) scales from their ranges.
void make_int8(Node& n, QuantParams in, std::optional<QuantParams> out) {
  precision_to_attrs(Precision::int8, n.attrs);
  quant_params_to_attrs(in, "input", n.attrs);
  if (out) quant_params_to_attrs(*out, "output", n.attrs);
}

Node& node_named(Graph& g, const std::string& name) {
  for (Node& n : g.nodes)
    if (n.name == name) return n;
  FAIL("no node " << name);
  return g.nodes[0];
}

float fake_quant(float v, float scale, int lo, int hi) {
  return std::clamp(std::nearbyint(v / scale), static_cast<float>(lo), static_cast<float>(hi)) * scale;
}

TEST_CASE("export: an int8 Conv becomes QDQ computing the fake-quantized numbers", "[onnx][export][int8]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 2, 5, 5});
  Attrs attrs = conv_attrs();
  post_ops_to_attrs(PostOps{Activation::relu}, attrs);
  const ValueId y = b.node(OpKind::Conv, "y", {x, b.weight("w", {3, 2, 3, 3}), b.weight("bias", {3}, -0.2f, 0.2f)}, attrs);
  b.output(y);
  const Tensor input = GraphBuilder::random({1, 2, 5, 5}, 21);
  const QuantParams in_q = quant_params_for_range(-1.0f, 1.0f);  // s8
  const QuantParams out_q = quant_params_for_range(0.0f, 3.0f);  // u8: after ReLU
  REQUIRE(in_q.type == QuantType::s8);
  REQUIRE(out_q.type == QuantType::u8);
  make_int8(node_named(b.g, "y_node"), in_q, out_q);

  const Graph back = round_trip(b.g);
  // (a) X -> Q -> DQ, W as int8 + DQ (per channel, axis 0), output -> Q -> DQ; bias float32.
  auto counts = op_counts(back);
  CHECK(counts[OpKind::QuantizeLinear] == 2);
  CHECK(counts[OpKind::DequantizeLinear] == 3);
  CHECK(counts[OpKind::Relu] == 1);
  int int8_weights = 0;
  for (const auto& [id, t] : back.initializers)
    if (t.dtype() == DType::i8 && t.rank() == 4) {
      ++int8_weights;
      CHECK(t.shape() == Shape{3, 2, 3, 3});
    }
  CHECK(int8_weights == 1);
  for (const Node& n : back.nodes) {
    if (n.op == OpKind::DequantizeLinear && back.initializers.count(n.inputs[0]) &&
        back.initializers.at(n.inputs[0]).rank() == 4) {
      CHECK(n.attrs.get_int("axis", 1).value() == 0);
      CHECK(back.initializers.at(n.inputs[1]).shape() == Shape{3});
    }
    if (n.op == OpKind::Conv) {
      CHECK(back.value(n.inputs[2]).type.dtype == DType::f32);
      CHECK_FALSE(n.attrs.has("precision"));
    }
  }

  // (c) The same numbers by hand: fake-quantized input and weights, float conv, ReLU, fake-quantized output.
  const Tensor& w = b.g.initializers.at(b.g.find_value("w"));
  const Tensor& bias = b.g.initializers.at(b.g.find_value("bias"));
  const std::vector<float> w_scales = int8_weight_scales(w.data<float>(), 3, 18);
  const std::vector<int8_t> w_codes = int8_quantize_weights(w.data<float>(), 3, 18, w_scales);
  std::vector<float> xq(50);
  for (int i = 0; i < 50; ++i) xq[static_cast<size_t>(i)] = fake_quant(input.data<float>()[i], in_q.scale, -128, 127);
  std::vector<double> want(75);
  for (int m = 0; m < 3; ++m)
    for (int oy = 0; oy < 5; ++oy)
      for (int ox = 0; ox < 5; ++ox) {
        double acc = bias.data<float>()[m];
        for (int c = 0; c < 2; ++c)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int iy = oy + ky - 1, ix = ox + kx - 1;
              if (iy < 0 || iy >= 5 || ix < 0 || ix >= 5) continue;
              const int wi = ((m * 2 + c) * 3 + ky) * 3 + kx;
              acc += static_cast<double>(xq[static_cast<size_t>((c * 5 + iy) * 5 + ix)]) *
                     (static_cast<double>(w_codes[static_cast<size_t>(wi)]) * w_scales[static_cast<size_t>(m)]);
            }
        const float relu = std::max(0.0f, static_cast<float>(acc));
        want[static_cast<size_t>((m * 5 + oy) * 5 + ox)] = fake_quant(relu, out_q.scale, 0, 255);
      }
  const auto got = execute(back, {input});
  REQUIRE(got[0].numel() == 75);
  for (int64_t i = 0; i < 75; ++i) {
    INFO("element " << i);
    CHECK(got[0].data<float>()[i] == Approx(want[static_cast<size_t>(i)]).margin(1e-5));
  }
}

TEST_CASE("export: an int8 network differs from fp32 by about the quantization error", "[onnx][export][int8]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 8, 8});
  Attrs relu = conv_attrs();
  post_ops_to_attrs(PostOps{Activation::relu}, relu);
  const ValueId c1 = b.node(OpKind::Conv, "c1", {x, b.weight("w1", {8, 3, 3, 3}), b.weight("b1", {8}, -0.1f, 0.1f)}, relu);
  Attrs residual = conv_attrs();
  const ValueId c2 = b.node(OpKind::Conv, "c2", {c1, b.weight("w2", {8, 8, 3, 3}), b.weight("b2", {8}, -0.1f, 0.1f), c1}, residual);
  const ValueId f = b.node(OpKind::Flatten, "f", {c2});
  const ValueId y = b.node(OpKind::MatMul, "y", {f, b.weight("fc", {512, 10})});
  b.output(y);
  REQUIRE(graph_verify(b.g));
  const Tensor input = GraphBuilder::random({1, 3, 8, 8}, 31, 0.0f, 1.0f);

  // Calibrate on this input, as the quantization pass would: each int8 node's input range.
  Graph calib = b.g;
  calib.outputs = {c1, f};
  const auto observed = execute(calib, {input});
  auto range = [](const Tensor& t) {
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      lo = std::min(lo, t.data<float>()[i]);
      hi = std::max(hi, t.data<float>()[i]);
    }
    return quant_params_for_range(lo, hi);
  };
  const QuantParams q_x = range(input), q_c1 = range(observed[0]), q_f = range(observed[1]);
  REQUIRE(q_c1.type == QuantType::u8);
  make_int8(node_named(b.g, "c1_node"), q_x, q_c1);  // c1 writes quantized; c2 reads it as it is
  make_int8(node_named(b.g, "c2_node"), q_c1, std::nullopt);
  make_int8(node_named(b.g, "y_node"), q_f, std::nullopt);

  const Graph back = round_trip(b.g);
  auto counts = op_counts(back);
  // Q: x, c1's output, f (c2 reads c1's DequantizeLinear); DQ: those three plus three weights.
  CHECK(counts[OpKind::QuantizeLinear] == 3);
  CHECK(counts[OpKind::DequantizeLinear] == 6);
  for (const Node& n : back.nodes)
    if (n.op == OpKind::DequantizeLinear && back.initializers.count(n.inputs[0]) &&
        back.initializers.at(n.inputs[0]).shape() == Shape{512, 10})
      CHECK(n.attrs.get_int("axis", 1).value() == 1);  // MatMul B: per output column

  const auto fp32 = execute(b.g, {input});
  const auto int8 = execute(back, {input});
  const double cos = cosine(int8[0], fp32[0]);
  INFO("cosine " << cos << ", max diff " << max_abs_diff(int8[0], fp32[0]));
  CHECK(cos >= 0.99);
  CHECK(max_abs_diff(int8[0], fp32[0]) > 0.0);
}

// ShuffleNet's shuffles: quantize_int8 gives each chain of them one scale, which it finds through the
// ChannelShuffle nodes of fuse_channel_shuffle. The export pipeline keeps that pass and writes each
// ChannelShuffle back as Concat, Reshape, Transpose, Reshape and Split, so the QDQ model quantizes where
// and as kiln's compiled plan does (left unfused, each part was calibrated alone: ShuffleNetV2 b8, top-1
// agreement between the plan and its export 75%).
TEST_CASE("export: int8 channel shuffles keep their chain's scale, so the QDQ model computes the plan's numbers",
          "[onnx][export][int8]") {
  const CalibrationSet set = testing::random_set(4, {3, 8, 8}, 13);
  PassRunOptions options;
  options.int8.calibration = &set;
  auto export_passes = pipeline_parse_for_export("default+quantize_int8");
  REQUIRE(export_passes);
  CHECK(std::find(export_passes->begin(), export_passes->end(), "fuse_channel_shuffle") != export_passes->end());
  const Tensor input = GraphBuilder::random({2, 3, 8, 8}, 21);

  // float32: the written-out shuffles compute the original graph.
  auto fp32_passes = pipeline_parse_for_export("default");
  REQUIRE(fp32_passes);
  Graph fp32 = testing::shuffle_stage_graph();
  REQUIRE(run_passes(fp32, *fp32_passes, options));
  REQUIRE(op_counts(fp32)[OpKind::ChannelShuffle] == 2);
  const Graph fp32_back = round_trip(fp32);
  CHECK(op_counts(fp32_back)[OpKind::ChannelShuffle] == 0);
  CHECK(op_counts(fp32_back)[OpKind::Transpose] == 2);
  CHECK(op_counts(fp32_back)[OpKind::Split] == 1);  // the halves of the first; the second has one output
  const auto want = execute(testing::shuffle_stage_graph(), {input});
  CHECK(max_abs_diff(execute(fp32_back, {input})[0], want[0]) <= 1e-5 * max_abs(want[0]));

  // int8: the QDQ model against the compiled plan.
  Graph exported = testing::shuffle_stage_graph();
  REQUIRE(run_passes(exported, *export_passes, options));
  const Graph back = round_trip(exported);
  CHECK(op_counts(back)[OpKind::ChannelShuffle] == 0);
  Graph compiled = testing::shuffle_stage_graph();
  REQUIRE(run_passes(compiled, pipeline_parse("default+quantize_int8"), options));
  auto engine = Engine::create(graph_to_plan(compiled), {2, nullptr});
  REQUIRE(engine);
  auto plan_out = (*engine)->run({input});
  REQUIRE(plan_out);
  const auto qdq = execute(back, {input});
  const double diff = max_abs_diff(qdq[0], plan_out->at(0)), scale = max_abs(qdq[0]);
  INFO("max diff " << diff << " of max " << scale << "; cosine to fp32 " << cosine(qdq[0], want[0]));
  CHECK(diff <= 0.001 * scale);
}

TEST_CASE("export: file errors name the path", "[onnx][export]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {2});
  b.output(b.node(OpKind::Relu, "y", {x}));
  Status s = onnx_export_file(b.g, "/nonexistent-dir/out.onnx");
  REQUIRE_FALSE(s);
  CHECK(s.code() == ErrorCode::io);
  CHECK_THAT(s.message(), Catch::Contains("/nonexistent-dir/out.onnx"));
}

}  // namespace
}  // namespace kiln

// int8 execution (kernels/quantization.h) on the oneDNN kernels: a Conv/Gemm/MatMul marked
// precision="int8" quantizes its input, computes with s8 per-channel weights and writes float32 or
// a quantized layout that pooling reads and writes as is. The scales come from the fp32
// reference's ranges (what the calibration does). Each result is compared with the fp32
// reference executor at int8 accuracy: cosine >= 0.999 and max|error| <= 3% of max|reference|
// (a few quantization steps: one u8 step is 0.4%, one s8 step 0.8% of the range), and must NOT
// agree to fp32 accuracy (1e-4 of the range), which proves the codes were used. The layouts
// show where activations stay quantized ("onednn:acdb:u8*0.0123").
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/precision.h"
#include "kernels/quantization.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// The symmetric parameters for the value in `slot` under the fp32 reference.
QuantParams calibrate(const Builder& b, int slot) {
  Plan p = b.plan;
  p.outputs = {{slot, "calibrated"}};
  auto r = execute_reference(p, b.inputs);
  REQUIRE(r);
  const Tensor& t = r->outputs[0];
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < t.numel(); ++i) {
    lo = std::min(lo, t.data<float>()[i]);
    hi = std::max(hi, t.data<float>()[i]);
  }
  return quant_params_for_range(lo, hi);
}

// Marks the step writing `out` int8: input 0 quantized as calibrated, the output too when asked.
void make_int8(Builder& b, int out, bool quantized_output) {
  for (PlanStep& step : b.plan.steps) {
    if (step.outputs[0] != out) continue;
    const QuantParams in = calibrate(b, step.inputs[0]);
    const std::optional<QuantParams> q_out = quantized_output ? std::optional(calibrate(b, out)) : std::nullopt;
    precision_to_attrs(Precision::int8, step.attrs);
    quant_params_to_attrs(in, "input", step.attrs);
    if (q_out) quant_params_to_attrs(*q_out, "output", step.attrs);
    return;
  }
  FAIL("no step writes slot " << out);
}

Attrs conv_attrs(std::vector<int64_t> pads, std::string activation = "none", int64_t group = 1, int64_t stride = 1) {
  return attrs({{"pads", pads}, {"activation", activation}, {"group", group}, {"strides", std::vector<int64_t>{stride, stride}}});
}

std::unique_ptr<Engine> check_int8(Builder& b) {
  auto engine = Engine::create(b.plan, {2, nullptr});
  INFO((engine ? std::string() : engine.error().message));
  REQUIRE(engine);
  INFO(describe_steps(**engine));
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(want);
  for (int repeat = 0; repeat < 2; ++repeat) {  // the second run on a dirty arena
    auto got = (*engine)->run(b.inputs);
    INFO((got ? std::string() : got.error().message));
    REQUIRE(got);
    for (size_t o = 0; o < got->size(); ++o) {
      const Tensor& w = want->outputs[o];
      const Tensor& g = got->at(o);
      REQUIRE(g.shape() == w.shape());
      double diff = 0, dot = 0, gg = 0, ww = 0;
      for (int64_t i = 0; i < w.numel(); ++i) {
        const double x = g.data<float>()[i], y = w.data<float>()[i];
        diff = std::max(diff, std::isnan(x) ? INFINITY : std::fabs(x - y));
        dot += x * y;
        gg += x * x;
        ww += y * y;
      }
      const double range = max_abs(w), cosine = dot / std::sqrt(gg * ww);
      INFO("output " << o << ": max|diff| " << diff << " of max|ref| " << range << ", cosine " << cosine);
      CHECK(cosine >= 0.999);
      // Without an int8 dot product the weights have 7-bit codes (quantization.h): twice the error.
      CHECK(diff <= (cpu_has_int8_dot_product() ? 0.03 : 0.06) * range);
      CHECK(diff > 1e-4 * range);  // not fp32: the int8 path ran
    }
  }
  return std::move(*engine);
}

std::string layout_of_step(const Engine& e, const std::string& node_prefix) {
  for (const EngineStep& st : e.steps())
    if (st.node.rfind(node_prefix, 0) == 0) return st.output_layout;
  return "(no step " + node_prefix + ")";
}

// Conversions to plain of the value written by `node` (a graph output in a oneDNN layout has one).
int conversions_of(const Engine& e, const std::string& node) {
  int n = 0;
  for (const EngineStep& st : e.steps()) n += st.node == node + " to plain";
  return n;
}

bool quantized(const std::string& layout, const char* type) {
  return layout.find(std::string(":") + type + "*") != std::string::npos;
}

}  // namespace

TEST_CASE("int8 conv: s8 input, bias, float32 output", "[onednn][int8]") {
  Builder b;
  const int x = b.input({2, 16, 14, 14});
  const int c = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {x, b.weight({32, 16, 3, 3}, 0.3f), b.weight({32}, 2.0f)});
  b.output(c);
  make_int8(b, c, false);
  auto e = check_int8(b);
  REQUIRE(count_kernel(*e, "onednn.conv") == 1);
  REQUIRE(count_kernel(*e, "reference") == 0);
  CHECK(layout_of_step(*e, "Conv").find('*') == std::string::npos);  // float32 out
}

// DenseNet's pattern: a float32 producer writes NHWC (oneDNN's acdb), and the int8 conv reading it
// quantizes the floats in kiln's own loop (cpu/quantize_codes.h: only the element type changes), into
// u8 after a ReLU and into s8 without one.
TEST_CASE("int8 conv: a float32 input in oneDNN's layout quantized in place of a reorder", "[onednn][int8]") {
  for (const char* activation : {"relu", "none"}) {
    INFO(activation);
    Builder b;
    const int x = b.input({2, 24, 14, 14});
    const int f = b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}, activation), {x, b.weight({40, 24, 1, 1}, 0.3f), b.weight({40})});
    const int c = b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}), {f, b.weight({16, 40, 1, 1}, 0.3f), b.weight({16})});
    b.output(c);
    make_int8(b, c, false);
    auto e = check_int8(b);
    REQUIRE(count_kernel(*e, "onednn.conv") == 2);
    const std::string producer = layout_of_step(*e, "Conv0");
    INFO(producer);
    CHECK(producer.find("onednn:") == 0);
    CHECK(producer.find('*') == std::string::npos);  // float32 codes are made by the int8 conv's step
  }
}

TEST_CASE("int8 conv: ReLU into a u8 layout, stride and pads", "[onednn][int8]") {
  Builder b;
  const int x = b.input({1, 8, 17, 17}, 0.0f, 2.0f);  // non-negative: u8 input
  const int c = b.op(OpKind::Conv, conv_attrs({1, 0, 2, 1}, "relu", 1, 2), {x, b.weight({24, 8, 3, 3}, 0.4f), b.weight({24})});
  b.output(c);
  make_int8(b, c, true);
  auto e = check_int8(b);
  const std::string layout = layout_of_step(*e, "Conv");
  INFO(layout);
  CHECK(quantized(layout, "u8"));
  CHECK(count_kernel(*e, "convert.onednn") == 1);  // the graph output is dequantized once
}

TEST_CASE("int8 conv: grouped and depthwise", "[onednn][int8]") {
  Builder b;
  const int x = b.input({1, 16, 12, 12});
  const int g = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}, "relu", 4), {x, b.weight({32, 4, 3, 3}, 0.5f), b.weight({32})});
  const int d = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}, "none", 32, 2), {g, b.weight({32, 1, 3, 3}, 0.5f), b.weight({32})});
  b.output(d);
  make_int8(b, g, true);
  make_int8(b, d, false);
  auto e = check_int8(b);
  REQUIRE(count_kernel(*e, "onednn.conv") == 2);
  REQUIRE(conversions_of(*e, "Conv0") == 0);  // the depthwise conv reads the grouped one's u8
  CHECK(quantized(e->steps()[0].output_layout, "u8"));
}

TEST_CASE("int8 conv: activations that are not scale-invariant", "[onednn][int8]") {
  for (const char* act : {"sigmoid", "tanh", "silu"}) {
    DYNAMIC_SECTION(act) {
      Builder b;
      const int x = b.input({1, 8, 10, 10});
      const int c = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}, act), {x, b.weight({16, 8, 3, 3}, 0.5f), b.weight({16})});
      b.output(c);
      make_int8(b, c, true);
      check_int8(b);
    }
  }
}

TEST_CASE("int8 conv: float32 residual, float32 and quantized outputs", "[onednn][int8]") {
  for (bool q_out : {false, true}) {
    DYNAMIC_SECTION("quantized output " << q_out) {
      Builder b;
      const int x = b.input({1, 16, 10, 10});
      const int r = b.input({1, 16, 10, 10}, -2.0f, 2.0f);
      const int c = b.op_shaped(OpKind::Conv, conv_attrs({1, 1, 1, 1}, "relu"),
                                {x, b.weight({16, 16, 3, 3}, 0.3f), b.weight({16}), r}, {1, 16, 10, 10});
      b.output(c);
      make_int8(b, c, q_out);
      auto e = check_int8(b);
      REQUIRE(count_kernel(*e, "onednn.conv") == 1);
      CHECK(quantized(layout_of_step(*e, "Conv"), "u8") == q_out);
    }
  }
}

TEST_CASE("int8 conv: a negative s8 residual summed before the ReLU of a u8 output", "[onednn][int8]") {
  Builder b;
  const int x = b.input({1, 16, 10, 10});
  // r is s8 with large negative values; y = relu(conv(r) + r) must see them before the clip.
  const int r = b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}), {x, b.weight({16, 16, 1, 1}, 1.0f), b.weight({16}, 0.5f)});
  const int y = b.op_shaped(OpKind::Conv, conv_attrs({1, 1, 1, 1}, "relu"),
                            {r, b.weight({16, 16, 3, 3}, 0.1f), b.weight({16}, 0.1f), r}, {1, 16, 10, 10});
  b.output(y);
  make_int8(b, r, true);
  make_int8(b, y, true);
  auto e = check_int8(b);
  INFO(describe_steps(*e));
  CHECK(quantized(e->steps()[0].output_layout, "s8"));
  CHECK(quantized(e->steps()[1].output_layout, "u8"));
  REQUIRE(conversions_of(*e, "Conv0") == 0);  // the residual is read as s8
}

TEST_CASE("int8 conv: a u8 residual with another scale into an s8 output", "[onednn][int8]") {
  Builder b;
  const int x = b.input({1, 8, 9, 9});
  const int r = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}, "relu"), {x, b.weight({8, 8, 3, 3}, 0.5f)});
  const int y = b.op_shaped(OpKind::Conv, conv_attrs({0, 0, 0, 0}),
                            {x, b.weight({8, 8, 1, 1}, 0.5f), b.weight({8}, 0.2f), r}, {1, 8, 9, 9});
  b.output(y);
  make_int8(b, r, true);
  make_int8(b, y, true);
  auto e = check_int8(b);
  CHECK(quantized(e->steps()[0].output_layout, "u8"));
  CHECK(quantized(e->steps()[1].output_layout, "s8"));
}

TEST_CASE("int8 quantized layouts flow through pooling: conv(u8) -> maxpool -> conv(f32)", "[onednn][int8]") {
  Builder b;
  const int x = b.input({1, 8, 16, 16});
  const int c1 = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}, "relu"), {x, b.weight({16, 8, 3, 3}, 0.4f), b.weight({16})});
  const int p = b.op(OpKind::MaxPool, attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}}), {c1});
  const int c2 = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {p, b.weight({8, 16, 3, 3}, 0.3f), b.weight({8})});
  b.output(c2);
  make_int8(b, c1, true);
  make_int8(b, c2, false);
  auto e = check_int8(b);
  INFO(describe_steps(*e));
  // The pool on kiln's own kernel over codes where the conv wrote NHWC or channel blocks, else oneDNN's.
  REQUIRE(count_kernel(*e, "onednn.conv") == 2);
  REQUIRE(count_kernel(*e, "onednn.pool") + count_kernel(*e, "cpu.max_pool_codes") == 1);
  REQUIRE(conversions_of(*e, "Conv0") + conversions_of(*e, "MaxPool1") == 0);
  CHECK(quantized(layout_of_step(*e, "MaxPool"), "u8"));
  CHECK(layout_of_step(*e, "MaxPool") == layout_of_step(*e, "Conv0"));  // same type, same scale
}

TEST_CASE("int8 codes join in a channel Concat when its parts share a scale, and the pool after it stays int8", "[onednn][int8]") {
  // conv a (relu), conv b (relu) -> Concat -> MaxPool 3x3 s1 -> conv c: a and b write u8 at the
  // Concat output's scale (as quantize_int8 sets it), so no step converts.
  Builder b;
  const int x = b.input({2, 8, 12, 12});
  const int a = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}, "relu"), {x, b.weight({16, 8, 3, 3}, 0.4f), b.weight({16})});
  const int c = b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}, "relu"), {x, b.weight({32, 8, 1, 1}, 1.2f), b.weight({32})});
  const int joined = b.op(OpKind::Concat, attrs({{"axis", int64_t{1}}}), {a, c});
  const int p = b.op(OpKind::MaxPool, attrs({{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}), {joined});
  const int y = b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}), {p, b.weight({8, 48, 1, 1}, 0.3f), b.weight({8})});
  b.output(y);
  const QuantParams shared = calibrate(b, joined);
  for (int part : {a, c}) {
    make_int8(b, part, false);
    for (PlanStep& step : b.plan.steps)
      if (step.outputs[0] == part) quant_params_to_attrs(shared, "output", step.attrs);
  }
  make_int8(b, y, false);
  auto e = check_int8(b);
  INFO(describe_steps(*e));
  CHECK(conversions_of(*e, "Conv0") + conversions_of(*e, "Conv1") + conversions_of(*e, "Concat2") + conversions_of(*e, "MaxPool3") == 0);
  CHECK(count_kernel(*e, "onednn.concat") == 1);
  CHECK(quantized(layout_of_step(*e, "Concat"), "u8"));
  CHECK(layout_of_step(*e, "MaxPool") == layout_of_step(*e, "Concat"));  // same type, same scale

  // Parts at different scales are not joined as codes: the Concat reads them as float32.
  Builder m;
  const int mx = m.input({1, 8, 6, 6});
  const int ma = m.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}, "relu"), {mx, m.weight({16, 8, 1, 1}, 0.4f)});
  const int mc = m.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}, "relu"), {mx, m.weight({16, 8, 1, 1}, 1.2f)});
  m.output(m.op(OpKind::Concat, attrs({{"axis", int64_t{1}}}), {ma, mc}));
  make_int8(m, ma, true);
  make_int8(m, mc, true);
  auto mixed = check_int8(m);
  CHECK_FALSE(quantized(layout_of_step(*mixed, "Concat"), "u8"));
}

TEST_CASE("int8 average, global and reduce pooling on a quantized input", "[onednn][int8]") {
  Builder b;
  const int x = b.input({1, 8, 12, 12});
  const int c = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {x, b.weight({16, 8, 3, 3}, 0.4f)});
  const int a = b.op(OpKind::AveragePool, attrs({{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}), {c});
  const int g = b.op(OpKind::GlobalMaxPool, {}, {a});
  const std::vector<int64_t> axes_v{2, 3};
  const int axes = b.constant(Tensor::from_values<int64_t>({2}, axes_v));
  const int mx = b.op(OpKind::ReduceMax, attrs({{"keepdims", int64_t{0}}}), {a, axes});
  // A mean into a plain output reads the dequantized input (rounded codes would be too coarse).
  const int mean = b.op(OpKind::ReduceMean, attrs({{"keepdims", int64_t{0}}}), {a, axes});
  b.output(g);
  b.output(mx);
  b.output(mean);
  make_int8(b, c, true);
  auto e = check_int8(b);
  INFO(describe_steps(*e));
  CHECK(quantized(layout_of_step(*e, "Conv"), "s8"));
  CHECK(quantized(layout_of_step(*e, "AveragePool"), "s8"));
  CHECK(quantized(layout_of_step(*e, "GlobalMaxPool"), "s8"));
  CHECK(count_kernel(*e, "onednn.reduce") == 2);  // the max dequantizes into its plain output
  CHECK(conversions_of(*e, "AveragePool1") == 1);  // for the mean
  REQUIRE(count_kernel(*e, "reference") == 0);
}

TEST_CASE("a quantized layout read by a kernel that rejects it is dequantized first", "[onednn][int8]") {
  Builder b;
  const int x = b.input({1, 8, 10, 10});
  const int c = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {x, b.weight({16, 8, 3, 3}, 0.4f)});
  const int s = b.op(OpKind::Sigmoid, {}, {c});
  const int f = b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}), {c, b.weight({4, 16, 1, 1}, 0.4f)});  // fp32 conv
  b.output(s);
  b.output(f);
  make_int8(b, c, true);
  auto e = check_int8(b);
  INFO(describe_steps(*e));
  CHECK(quantized(layout_of_step(*e, "Conv0"), "s8"));
  REQUIRE(conversions_of(*e, "Conv0") == 1);  // one dequantized copy serves both readers
  CHECK(e->steps()[1].node == "Conv0 to plain");
}

TEST_CASE("int8 Gemm: transB, bias, float32 and quantized outputs", "[onednn][int8]") {
  for (bool q_out : {false, true}) {
    DYNAMIC_SECTION("quantized output " << q_out) {
      Builder b;
      const int x = b.input({6, 64});
      Attrs a = attrs({{"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}});
      const int y = b.op(OpKind::Gemm, a, {x, b.weight({40, 64}, 0.5f), b.weight({40})});
      b.output(y);
      make_int8(b, y, q_out);
      auto e = check_int8(b);
      REQUIRE(count_kernel(*e, "onednn.gemm") == 1);
      CHECK(quantized(layout_of_step(*e, "Gemm"), "s8") == q_out);
    }
  }
}

// An s8 input reaches oneDNN as u8 (q + 128) with 128 x each column's weight sum taken away in the
// bias (kernels/onednn/matmul.cpp). Inputs all below zero and weights all above make that sum, and
// so any error in the compensation, as large as it gets; a Gemm without C gets a bias of its own.
TEST_CASE("int8 Gemm and MatMul on a signed input: the u8 shift is compensated exactly", "[onednn][int8]") {
  SECTION("Gemm without C, one row") {
    Builder b;
    const int x = b.input({1, 300}, -1.0f, -0.2f);
    const int w = b.constant(rand_tensor({300, 70}, 41, 0.1f, 1.0f));
    const int y = b.op(OpKind::Gemm, Attrs{}, {x, w});
    b.output(y);
    make_int8(b, y, false);
    auto e = check_int8(b);
    REQUIRE(count_kernel(*e, "onednn.gemm") == 1);
  }
  SECTION("MatMul into an s8 output") {
    Builder b;
    const int x = b.input({4, 3, 96}, -1.0f, 0.5f);
    const int y = b.op_shaped(OpKind::MatMul, Attrs{}, {x, b.weight({96, 33}, 0.5f)}, {4, 3, 33});
    b.output(y);
    make_int8(b, y, true);
    auto e = check_int8(b);
    REQUIRE(count_kernel(*e, "onednn.matmul") == 1);
    CHECK(quantized(layout_of_step(*e, "MatMul"), "s8"));
  }
}

// Where oneDNN's int8 matmul is its gemm (AVX2 without VNNI), the product runs as a 1x1
// convolution over the rows (kernels/onednn/matmul.cpp): A's strides (transA), a residual and a
// many-row MatMul go through that view; a C with a row per output row keeps the matmul.
TEST_CASE("int8 Gemm and MatMul through the 1x1 convolution view of the rows", "[onednn][int8]") {
  INFO("int8 matmul packs its weights per call here: " << int8_matmul_packs_weights_per_call());
  SECTION("Gemm, transA, one row, a float32 residual and a ReLU") {
    Builder b;
    const int x = b.input({96, 1});
    const int r = b.input({1, 40}, -2.0f, 2.0f);
    Attrs a = attrs({{"transA", int64_t{1}}, {"activation", std::string("relu")}});
    const int y = b.op_shaped(OpKind::Gemm, a, {x, b.weight({96, 40}, 0.5f), b.weight({40}), r}, {1, 40});
    b.output(y);
    make_int8(b, y, false);
    auto e = check_int8(b);
    REQUIRE(count_kernel(*e, "onednn.gemm") == 1);
  }
  SECTION("Gemm with a C of one row per output row") {
    Builder b;
    const int x = b.input({6, 64}, -1.0f, 0.3f);
    const int y = b.op(OpKind::Gemm, Attrs{}, {x, b.weight({64, 40}, 0.5f), b.weight({6, 40})});
    b.output(y);
    make_int8(b, y, true);
    auto e = check_int8(b);
    REQUIRE(count_kernel(*e, "onednn.gemm") == 1);
  }
  SECTION("MatMul over 300 rows into an s8 output") {
    Builder b;
    const int x = b.input({3, 100, 48});
    const int y = b.op_shaped(OpKind::MatMul, Attrs{}, {x, b.weight({48, 24}, 0.5f)}, {3, 100, 24});
    b.output(y);
    make_int8(b, y, true);
    auto e = check_int8(b);
    REQUIRE(count_kernel(*e, "onednn.matmul") == 1);
    CHECK(quantized(layout_of_step(*e, "MatMul"), "s8"));
  }
}

TEST_CASE("int8 MatMul with a constant B and a ReLU", "[onednn][int8]") {
  Builder b;
  const int x = b.input({2, 5, 48});
  Attrs a = attrs({{"activation", std::string("relu")}});
  const int y = b.op_shaped(OpKind::MatMul, a, {x, b.weight({48, 24}, 0.5f)}, {2, 5, 24});
  b.output(y);
  make_int8(b, y, true);
  auto e = check_int8(b);
  REQUIRE(count_kernel(*e, "onednn.matmul") == 1);
  CHECK(quantized(layout_of_step(*e, "MatMul"), "u8"));
}

TEST_CASE("int8 MatMul with its bias (input 2), a GELU and a float32 output", "[onednn][int8]") {
  Builder b;
  const int x = b.input({2, 5, 48});
  Attrs a;
  post_ops_to_attrs({Activation::gelu_erf, 0, 0}, a);
  // a bias far above the products' scale: added in the wrong units it would show
  const int y = b.op_shaped(OpKind::MatMul, a, {x, b.weight({48, 24}, 0.5f), b.weight({24}, 4.0f)}, {2, 5, 24});
  b.output(y);
  make_int8(b, y, false);
  auto e = check_int8(b);
  REQUIRE(count_kernel(*e, "onednn.matmul") == 1);
}

// ConvNeXt's Linear+GELU -> Linear in int8: the first writes row-major codes for the second, which
// reads them as they are, with the codes' own scale (its int8_input_scale, set to twice that here, must
// not be used on codes), s8 shifted to u8 by kiln's loop; nothing converts them to float32 between.
TEST_CASE("int8 MatMul reads an int8 MatMul's row codes as they are, with their scale", "[onednn][int8]") {
  for (const char* activation : {"gelu_erf", "relu"}) {
    DYNAMIC_SECTION(activation) {
      Builder b;
      const int x = b.input({2, 50, 48});
      Attrs first;
      post_ops_to_attrs({*activation_from_name(activation), 0, 0}, first);
      const int h = b.op_shaped(OpKind::MatMul, first, {x, b.weight({48, 64}, 0.5f), b.weight({64}, 0.5f)}, {2, 50, 64});
      const int y = b.op_shaped(OpKind::MatMul, Attrs{}, {h, b.weight({64, 24}, 0.5f), b.weight({24}, 2.0f)}, {2, 50, 24});
      b.output(y);
      make_int8(b, h, true);
      make_int8(b, y, false);
      QuantParams doubled = *quant_params_from_attrs(b.plan.steps[1].attrs, "input").value();
      doubled.scale *= 2.0f;
      quant_params_to_attrs(doubled, "input", b.plan.steps[1].attrs);
      auto e = check_int8(b);
      REQUIRE(count_kernel(*e, "onednn.matmul") == 2);
      CHECK(quantized(layout_of_step(*e, "MatMul0"), std::string(activation) == "relu" ? "u8" : "s8"));
      CHECK(conversions_of(*e, "MatMul0") == 0);
      CHECK(e->steps().size() == 2);
    }
  }
}

TEST_CASE("an int8 node with a float32 input and no input scale says why", "[onednn][int8]") {
  Builder b;
  const int x = b.input({1, 4, 6, 6});
  Attrs a = conv_attrs({0, 0, 0, 0});
  precision_to_attrs(Precision::int8, a);
  b.output(b.op(OpKind::Conv, a, {x, b.weight({4, 4, 1, 1})}));
  std::ostringstream verbose;
  auto e = Engine::create(b.plan, {2, &verbose});
  REQUIRE(e);
  CHECK(count_kernel(**e, "onednn.conv") == 0);  // the reference computes it in fp32
  CHECK_THAT(verbose.str(), Catch::Contains("needs int8_input_scale"));
}

TEST_CASE("a quantized oneDNN layout carries its scale: describe, equals, check_value", "[onednn][int8]") {
  using namespace kiln::onednn;
  const md u8(dims{1, 16, 4, 4}, data_type::u8, dnnl::memory::format_tag::acdb);
  const OneDnnLayout a(u8, 2, 0.0123f), same(u8, 2, 0.0123f), other_scale(u8, 2, 0.5f);
  CHECK(a.describe() == "onednn:acdb:u8*0.0123");
  CHECK(OneDnnLayout(retyped(u8, data_type::s8), 2, 0.25f).describe() == "onednn:acdb:s8*0.25");
  CHECK(OneDnnLayout(retyped(u8, data_type::f32), 2).describe() == "onednn:acdb");
  CHECK(a.equals(same));
  CHECK_FALSE(a.equals(other_scale));
  CHECK(a.quant()->type == QuantType::u8);
  CHECK_FALSE(OneDnnLayout(retyped(u8, data_type::bf16), 2).quant());
  ValueDesc v;
  v.dtype = DType::f32;
  v.shape = {1, 16, 4, 4};
  v.layout.opaque = std::make_shared<OneDnnLayout>(u8, 2, 0.0123f);
  REQUIRE(check_value(v, "X"));  // rejected unless the kernel opts in
  CHECK_THAT(*check_value(v, "X"), Catch::Contains("is quantized (onednn:acdb:u8*0.0123)"));
  CHECK_FALSE(check_value(v, "X", Quantized::accept));
  CHECK(cpu::pixel_order(v) == cpu::PixelOrder::other);  // the own CPU kernels read float32 only
}

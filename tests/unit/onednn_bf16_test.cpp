// bf16 compute (kernels/precision.h) on the oneDNN kernels: a Conv/Gemm/MatMul whose node says
// precision="bf16" computes in bfloat16 and the activations between bf16 ops stay bfloat16 in
// oneDNN layouts, converted to float32 only where the region ends. Checked against the fp32
// reference executor at bf16 accuracy (cosine >= 0.9995 and max error <= 2e-2 x max|output|,
// about 8 mantissa bits over a few layers), and for the layouts: bf16 inside the region, one
// conversion at its end. An fp32 node after a bf16 one reads float32 again.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/isa.h"
#include "kernels/post_ops.h"
#include "kernels/precision.h"
#include "kernels/verify/verify.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

Attrs bf16_conv(std::vector<int64_t> pads, std::string activation = "none") {
  Attrs a = attrs({{"pads", pads}, {"activation", activation}});
  precision_to_attrs(Precision::bf16, a);
  return a;
}

Attrs bf16() {
  Attrs a;
  precision_to_attrs(Precision::bf16, a);
  return a;
}

// Runs the plan on the engine and the reference; bf16-close on every output.
std::unique_ptr<Engine> check_bf16(Builder& b) {
  auto engine = Engine::create(b.plan, {2, nullptr});
  INFO((engine ? std::string() : engine.error().message));
  REQUIRE(engine);
  INFO(describe_steps(**engine));
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(want);
  auto got = (*engine)->run(b.inputs);
  INFO((got ? std::string() : got.error().message));
  REQUIRE(got);
  for (size_t i = 0; i < got->size(); ++i) {
    OutputComparison cmp("y");
    const Tensor& w = want->outputs[i];
    REQUIRE(cmp.add(w, got->at(i), w.dim(0), nullptr));
    const OutputMetrics m = cmp.finish();
    INFO("output " << i << ": cosine " << m.cosine << ", max rel error " << m.max_rel_error);
    CHECK(m.cosine >= 0.9995);
    CHECK(m.max_rel_error <= 2e-2);
    // It did compute in bf16 (fp32 would agree to ~1e-6) -- where oneDNN has bf16 kernels: on AVX2
    // machines only its slow reference convolutions, and no bf16 matmul (the reference runs it).
    if (cpu_has_bf16_compute()) CHECK(m.max_rel_error > 0);
  }
  return std::move(*engine);
}

int steps_with_layout_suffix(const Engine& e, const std::string& suffix) {
  int n = 0;
  for (const EngineStep& st : e.steps())
    n += st.output_layout.size() >= suffix.size() &&
         st.output_layout.compare(st.output_layout.size() - suffix.size(), suffix.size(), suffix) == 0;
  return n;
}

}  // namespace

TEST_CASE("bf16 convolutions keep bfloat16 activations across the region", "[onednn][bf16]") {
  Builder b;
  const int x = b.input({2, 3, 20, 20});
  const int c1 = b.op(OpKind::Conv, bf16_conv({1, 1, 1, 1}, "relu"), {x, b.weight({16, 3, 3, 3}, 0.5f), b.weight({16})});
  const int p = b.op(OpKind::MaxPool, attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                                             {"strides", std::vector<int64_t>{2, 2}},
                                             {"pads", std::vector<int64_t>{1, 1, 1, 1}}}), {c1});
  const int c2 = b.op(OpKind::Conv, bf16_conv({1, 1, 1, 1}, "relu"), {p, b.weight({16, 16, 3, 3}, 0.3f), b.weight({16})});
  // Residual block: the sum post-op accumulates into the bf16 output.
  const int c3 = b.op(OpKind::Conv, bf16_conv({0, 0, 0, 0}, "relu"), {c2, b.weight({16, 16, 1, 1}, 0.3f), b.weight({16}), p});
  const int g = b.op(OpKind::GlobalAveragePool, {}, {c3});
  const int f = b.op(OpKind::Flatten, attrs({{"axis", int64_t{1}}}), {g});
  Attrs gemm = bf16();
  gemm.set("transB", int64_t{1});
  b.output(b.op(OpKind::Gemm, gemm, {f, b.weight({10, 16}, 0.5f), b.weight({10})}));
  auto e = check_bf16(b);
  // Conv, pool, conv, conv, global pool all write bf16; only the pooled vector is converted.
  REQUIRE(steps_with_layout_suffix(*e, ":bf16") == (cpu_has_bf16_compute() ? 5 : 0));
  if (cpu_has_bf16_compute()) {
    REQUIRE(count_kernel(*e, "convert.") == 1);
    REQUIRE(count_kernel(*e, "reference") == 0);
  }
}

TEST_CASE("bf16 MatMul reads float32 rows and writes float32", "[onednn][bf16]") {
  Builder b;
  const int x = b.input({1, 7, 9, 24});
  const int m = b.op(OpKind::MatMul, bf16(), {x, b.weight({24, 40}, 0.5f)});
  b.output(b.op(OpKind::Relu, {}, {m}));
  auto e = check_bf16(b);
  if (!cpu_has_bf16_compute()) return;  // oneDNN 2.6 has no bf16 matmul below AVX-512
  REQUIRE(count_kernel(*e, "onednn.matmul") == 1);
  REQUIRE(steps_with_layout_suffix(*e, ":bf16") == 0);
}

TEST_CASE("bf16 MatMul with its bias (input 2) and GELU as one primitive", "[onednn][bf16]") {
  Builder b;
  const int x = b.input({2, 5, 5, 24});
  Attrs at = bf16();
  post_ops_to_attrs({Activation::gelu_erf, 0, 0}, at);
  const int m = b.op(OpKind::MatMul, at, {x, b.weight({24, 40}, 0.5f), b.weight({40}, 2.0f)});
  b.output(m);
  auto e = check_bf16(b);
  if (!cpu_has_bf16_compute()) return;
  REQUIRE(count_kernel(*e, "onednn.matmul") == 1);
  REQUIRE(e->steps().size() == 1);
}

namespace {

// ConvNeXt's block start: a bf16 7x7 depthwise conv over [2, 32, 9, 9], then the Transpose to
// [N, H, W, C]; returns the Transpose's slot.
int dw_conv_to_channels_last(Builder& b) {
  const int x = b.input({2, 32, 9, 9});
  Attrs dw = bf16_conv({3, 3, 3, 3});
  dw.set("group", int64_t{32});
  const int c = b.op(OpKind::Conv, dw, {x, b.weight({32, 1, 7, 7}, 0.3f), b.weight({32})});
  Attrs perm;
  perm.set("perm", std::vector<int64_t>{0, 2, 3, 1});
  return b.op_shaped(OpKind::Transpose, perm, {c}, {2, 9, 9, 32});
}

}  // namespace

// ConvNeXt: a bf16 depthwise conv writes NHWC ("acdb"), and the Transpose to [N, H, W, C] reads it
// as it is (one converting copy in memory order), with no conversion to plain NCHW before it.
TEST_CASE("a Transpose reads a bf16 conv's NHWC output without converting it to plain first", "[onednn][bf16]") {
  Builder b;
  b.output(dw_conv_to_channels_last(b));
  auto e = check_bf16(b);
  const std::string conv_layout = e->steps().front().output_layout;
  INFO("conv layout " << conv_layout);
  if (conv_layout.find("acdb") != std::string::npos) {
    // NHWC: the Transpose is a view of the same bytes (bfloat16 rows for a bf16 NHWC value), and the
    // graph output's conversion to plain float32 is the only one.
    REQUIRE(count_kernel(*e, "cpu.transpose_view") == 1);
    REQUIRE(count_kernel(*e, "convert.") == (conv_layout.find(":bf16") != std::string::npos ? 1 : 0));
  } else {
    // Blocked layouts still go through plain (the permuted blocked reorder is not one of oneDNN's jit ones).
    REQUIRE(count_kernel(*e, "onednn.transpose") == 1);
    REQUIRE(count_kernel(*e, "convert.") == (conv_layout == "plain" ? 0 : 1));
  }
}

// ConvNeXt's block: bf16 depthwise conv (NHWC) -> Transpose to [N, H, W, C] -> LayerNorm -> bf16 Linear.
// The Transpose is a view giving bfloat16 rows; the LayerNorm with bf16_output (mixed_precision_bf16: its
// only reader is a bf16 MatMul) normalizes them in bfloat16 and writes bfloat16 rows the MatMul reads as they
// are: nothing converts. Without bf16_output the LayerNorm reads float32, converted from the rows.
TEST_CASE("a bf16 LayerNorm reads a bf16 conv's rows through the Transpose view and writes rows for a bf16 MatMul",
          "[onednn][bf16]") {
  for (bool bf16_output : {true, false}) {
    DYNAMIC_SECTION("bf16_output " << bf16_output) {
      Builder b;
      const int t = dw_conv_to_channels_last(b);
      Attrs ln;
      ln.set("axis", int64_t{-1});
      ln.set("epsilon", 1e-6f);
      if (bf16_output) ln.set(std::string(kBf16OutputAttr), int64_t{1});
      const int n = b.op_shaped(OpKind::LayerNormalization, ln, {t, b.weight({32}, 1.0f), b.weight({32}, 0.5f)}, {2, 9, 9, 32});
      b.output(b.op_shaped(OpKind::MatMul, bf16(), {n, b.weight({32, 48}, 0.3f), b.weight({48})}, {2, 9, 9, 48}));
      auto e = check_bf16(b);
      if (!cpu_has_bf16_compute() || !cpu_isa_available(CpuIsa::avx512)) continue;
      REQUIRE(count_kernel(*e, "onednn.layernorm") == 1);
      REQUIRE(count_kernel(*e, "cpu.transpose_view") == 1);
      std::string ln_layout;
      for (const EngineStep& st : e->steps())
        if (st.op == "LayerNormalization") ln_layout = st.output_layout;
      CHECK(ln_layout == (bf16_output ? "onednn:abcd:bf16" : "plain"));
      CHECK(count_kernel(*e, "convert.") == (bf16_output ? 0 : 1));
    }
  }
}

TEST_CASE("an fp32 conv after a bf16 one reads float32 again", "[onednn][bf16]") {
  Builder b;
  const int x = b.input({1, 8, 12, 12});
  const int c1 = b.op(OpKind::Conv, bf16_conv({1, 1, 1, 1}), {x, b.weight({16, 8, 3, 3}, 0.3f)});
  const int c2 = b.op(OpKind::Conv, attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}), {c1, b.weight({8, 16, 3, 3}, 0.3f)});
  b.output(c2);
  auto e = check_bf16(b);
  REQUIRE(steps_with_layout_suffix(*e, ":bf16") == (cpu_has_bf16_compute() ? 1 : 0));
  REQUIRE(e->steps().back().output_layout.find("bf16") == std::string::npos);
}

TEST_CASE("an unknown precision is refused with its name", "[onednn][bf16]") {
  Builder b;
  const int x = b.input({1, 4, 6, 6});
  Attrs a;
  a.set("precision", std::string("fp8"));
  b.output(b.op_shaped(OpKind::Conv, a, {x, b.weight({4, 4, 1, 1})}, {1, 4, 6, 6}));
  auto e = Engine::create(b.plan, {2, nullptr});
  REQUIRE_FALSE(e);
  REQUIRE_THAT(e.error().message, Catch::Contains("unknown precision 'fp8'"));
}

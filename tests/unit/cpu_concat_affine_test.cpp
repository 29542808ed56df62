// kiln's ConcatAffine kernel (kernels/cpu/concat_affine.cpp) against the reference ConcatAffine on
// every ISA path it has: inputs in oneDNN's NHWC layout (made by convolutions, as in DenseNet) and
// plain NCHW graph inputs, channel counts off the vector width (vector tails), batch 3, relu
// inline and other activations after the block; with an int8_output scale (what quantize_int8 gives
// one whose readers are int8 convs) its NHWC output is u8/s8 codes within half a step of the reference.
// The reference ConcatAffine itself is checked against the unfused Concat -> BatchNormalization graph
// in passes_fuse_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/isa.h"
#include "kernels/precision.h"
#include "kernels/quantization.h"
#include "tests/support/isa_cap.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct Case {
  const char* what;
  int64_t n, h, w;
  std::vector<int64_t> channels;  // per input
  const char* act;
};

const Case kCases[] = {
    {"DenseNet-like 64 + 32 + 32, relu", 1, 9, 7, {64, 32, 32}, "relu"},
    {"odd channels 13 + 5 + 37, no activation, batch 3", 3, 5, 6, {13, 5, 37}, "none"},
    {"one input, sigmoid", 2, 4, 4, {20}, "sigmoid"},
    {"1x1 pixels, 7 + 9, clip", 2, 1, 1, {7, 9}, "clip"},
};

void run_case(const Case& t, bool from_conv, CpuIsa isa) {
  Builder b;
  std::vector<int> in;
  int64_t c = 0;
  for (int64_t ci : t.channels) c += ci;
  in.push_back(b.weight({c}, 1.5f));
  in.push_back(b.weight({c}, 0.5f));
  for (int64_t ci : t.channels) {
    const int x = b.input({t.n, ci, t.h, t.w});
    in.push_back(from_conv ? b.op(OpKind::Conv, {}, {x, b.weight({ci, ci, 1, 1}, 0.3f), b.weight({ci})}) : x);
  }
  Attrs a;
  a.set("activation", std::string(t.act));
  a.set("activation_alpha", -0.2f);
  a.set("activation_beta", 0.4f);
  b.output(b.op(OpKind::ConcatAffine, a, in));
  const IsaCap cap(isa);
  auto engine = check(b);
  REQUIRE(count_kernel(*engine, "cpu.concat_affine." + std::string(cpu_isa_name(isa))) == 1);
  // Each input is read in its producer's layout: the only conversion is of the plan's output --
  // except where oneDNN's convolutions chose a channel-blocked layout the kernel cannot read
  // (AVX2 machines pick nChw8c where AVX-512 ones pick NHWC).
  for (const EngineStep& step : engine->steps()) {
    if (step.kernel.rfind("convert", 0) != 0 || step.node.rfind("ConcatAffine", 0) == 0) continue;
    const std::string producer = step.node.substr(0, step.node.find(" to plain"));
    INFO("conversion " << step.node);
    const auto p = std::find_if(engine->steps().begin(), engine->steps().end(),
                                [&](const EngineStep& s) { return s.node == producer; });
    REQUIRE(p != engine->steps().end());
    INFO("producer layout " << p->output_layout);
    REQUIRE(from_conv);
    REQUIRE_FALSE(cpu_isa_available(CpuIsa::avx512));
    REQUIRE((p->output_layout.find("8b") != std::string::npos || p->output_layout.find("16b") != std::string::npos));
  }
}

// The largest |got - want| over two float32 tensors of one shape.
double max_diff(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  double diff = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    diff = std::max(diff, std::fabs(static_cast<double>(got.data<float>()[i]) - want.data<float>()[i]));
  return diff;
}

}  // namespace

TEST_CASE("the ConcatAffine kernel matches the reference on every ISA path", "[cpu][concat_affine]") {
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) {
      WARN("this CPU has no " << cpu_isa_name(isa) << ": path not tested here");
      continue;
    }
    for (const Case& t : kCases)
      for (bool from_conv : {true, false}) {
        INFO(cpu_isa_name(isa) << ": " << t.what << (from_conv ? ", inputs from oneDNN convs" : ", plain inputs"));
        run_case(t, from_conv, isa);
      }
  }
}

// The codes are compared through the engine's conversion of the (graph output) codes to plain, which
// dequantizes them: every value within half a quantization step of the reference (the calibrated range
// holds all of them, so nothing saturates). ReLU and no activation are quantized in the affine loop
// itself on AVX-512; other activations and the portable path go through a float32 block in scratch.
TEST_CASE("ConcatAffine writes int8 codes where its output has an int8_output scale", "[cpu][concat_affine][int8]") {
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) continue;
    for (const char* act : {"relu", "none", "sigmoid"}) {
      INFO(cpu_isa_name(isa) << ", " << act);
      Builder b;
      std::vector<int> in = {b.weight({96}, 1.5f), b.weight({96}, 0.5f)};
      for (int64_t ci : {64, 32}) {  // DenseNet-like: the features so far and a new layer's 32
        const int x = b.input({2, ci, 7, 9});
        in.push_back(b.op(OpKind::Conv, {}, {x, b.weight({ci, ci, 1, 1}, 0.3f), b.weight({ci})}));
      }
      Attrs a;
      a.set("activation", std::string(act));
      const int y = b.op(OpKind::ConcatAffine, a, in);
      b.output(y);
      auto ref = execute_reference(b.plan, b.inputs);
      REQUIRE(ref);
      const Tensor& want = ref->outputs[0];
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < want.numel(); ++i) lo = std::min(lo, want.data<float>()[i]), hi = std::max(hi, want.data<float>()[i]);
      const QuantParams q = quant_params_for_range(lo, hi);
      CHECK((q.type == QuantType::u8) == (std::string(act) != "none"));
      for (PlanStep& step : b.plan.steps)
        if (step.op == OpKind::ConcatAffine) quant_params_to_attrs(q, "output", step.attrs);
      const IsaCap cap(isa);
      auto engine = Engine::create(b.plan, {2, nullptr});
      REQUIRE(engine);
      INFO(describe_steps(**engine));
      std::string layout;
      for (const EngineStep& st : (*engine)->steps())
        if (st.op == "ConcatAffine") layout = st.output_layout;
      CHECK(layout.find(std::string(":") + std::string(quant_type_name(q.type)) + "*") != std::string::npos);
      for (int repeat = 0; repeat < 2; ++repeat) {
        auto got = (*engine)->run(b.inputs);
        REQUIRE(got);
        const double diff = max_diff(got->at(0), want);
        INFO("max|diff| " << diff << ", scale " << q.scale);
        CHECK(diff <= 0.5 * q.scale * (1 + 1e-4));
        CHECK(diff > 0);  // codes, not floats
      }
    }
  }
}

// int8 convs write u8 (after a ReLU) or s8 NHWC codes for a ConcatAffine (quantize_int8: DenseNet's layer
// outputs, read by every later layer of the block): the kernel reads them as they are, each part's code
// scale folded into its channels' scale, beside a float32 part. The two code parts have scales far
// apart, so a scale applied to the wrong part, or not at all, is off by far more than the tolerance
// (the producers' int8 error: a few quantization steps, as in onednn_int8_test.cpp).
TEST_CASE("ConcatAffine reads u8 and s8 NHWC codes of int8 convs with their scales", "[cpu][concat_affine][int8]") {
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) continue;
    INFO(cpu_isa_name(isa));
    Builder b;
    std::vector<int> in = {b.weight({112}, 1.5f), b.weight({112}, 0.5f)};
    const int x = b.input({2, 16, 7, 9});
    Attrs relu;
    relu.set("activation", std::string("relu"));
    const int u8_part = b.op(OpKind::Conv, relu, {x, b.weight({64, 16, 1, 1}, 0.3f), b.weight({64})});
    const int s8_part = b.op(OpKind::Conv, {}, {x, b.weight({32, 16, 1, 1}, 3.0f), b.weight({32})});
    const int f32_part = b.op(OpKind::Conv, {}, {x, b.weight({16, 16, 1, 1}, 0.3f), b.weight({16})});
    in.insert(in.end(), {u8_part, s8_part, f32_part});
    Attrs a;
    a.set("activation", std::string("relu"));
    b.output(b.op(OpKind::ConcatAffine, a, in));
    const auto range_of = [&](int slot) {
      Plan p = b.plan;
      p.outputs = {{slot, "calibrated"}};
      auto r = execute_reference(p, b.inputs);
      REQUIRE(r);
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < r->outputs[0].numel(); ++i)
        lo = std::min(lo, r->outputs[0].data<float>()[i]), hi = std::max(hi, r->outputs[0].data<float>()[i]);
      return quant_params_for_range(lo, hi);
    };
    const QuantParams in_q = range_of(x), u8_q = range_of(u8_part), s8_q = range_of(s8_part);
    REQUIRE(u8_q.type == QuantType::u8);
    REQUIRE(s8_q.type == QuantType::s8);
    INFO("code scales " << u8_q.scale << " and " << s8_q.scale);
    REQUIRE(s8_q.scale > 4 * u8_q.scale);
    for (PlanStep& step : b.plan.steps) {
      if (step.op != OpKind::Conv) continue;
      precision_to_attrs(Precision::int8, step.attrs);
      quant_params_to_attrs(in_q, "input", step.attrs);
      if (step.outputs[0] == u8_part) quant_params_to_attrs(u8_q, "output", step.attrs);
      if (step.outputs[0] == s8_part) quant_params_to_attrs(s8_q, "output", step.attrs);
    }
    auto ref = execute_reference(b.plan, b.inputs);
    REQUIRE(ref);
    const IsaCap cap(isa);
    auto engine = Engine::create(b.plan, {2, nullptr});
    REQUIRE(engine);
    INFO(describe_steps(**engine));
    REQUIRE(count_kernel(**engine, "cpu.concat_affine." + std::string(cpu_isa_name(isa))) == 1);
    std::vector<std::string> layouts;
    int conversions = 0;
    for (const EngineStep& st : (*engine)->steps()) {
      if (st.op == "Conv") layouts.push_back(st.output_layout);
      conversions += st.op == "ToPlain" && st.node.rfind("ConcatAffine", 0) != 0;
    }
    CHECK(conversions == 0);  // the codes are read as they are
    REQUIRE(layouts.size() == 3);
    CHECK(layouts[0].find("acdb:u8*") != std::string::npos);
    CHECK(layouts[1].find("acdb:s8*") != std::string::npos);
    for (int repeat = 0; repeat < 2; ++repeat) {
      auto got = (*engine)->run(b.inputs);
      REQUIRE(got);
      const Tensor& want = ref->outputs[0];
      const double diff = max_diff(got->at(0), want);
      INFO("max|diff| " << diff << " of max|ref| " << max_abs(want));
      CHECK(diff <= (cpu_has_int8_dot_product() ? 0.03 : 0.06) * max_abs(want));
    }
  }
}

// bf16 convs (AMX/AVX512_BF16) write bfloat16 NHWC: the kernel reads it as it is (before, each input was
// converted to plain float32 and the kernel ran on NCHW), and with bf16_output (mixed_precision_bf16:
// its readers are bf16 convs) writes bfloat16 NHWC, rounded to nearest even from the float32 result.
// Compared through the engine's conversions to plain with the reference executor (float32 convs): the
// producers' bf16 error, a few bf16 steps at most.
TEST_CASE("ConcatAffine reads bfloat16 NHWC inputs and writes bfloat16 where asked", "[cpu][concat_affine][bf16]") {
  if (!cpu_has_bf16_compute()) {
    WARN("oneDNN has no bf16 convolutions on this CPU: nothing writes bfloat16 NHWC here");
    return;
  }
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) continue;
    for (const char* act : {"relu", "sigmoid"})
      for (bool bf16_output : {false, true}) {
        INFO(cpu_isa_name(isa) << ", " << act << (bf16_output ? ", bf16 output" : ", float32 output"));
        Builder b;
        std::vector<int> in = {b.weight({96}, 1.5f), b.weight({96}, 0.5f)};
        for (int64_t ci : {64, 32}) {
          const int x = b.input({2, ci, 7, 9});
          in.push_back(b.op(OpKind::Conv, {}, {x, b.weight({ci, ci, 1, 1}, 0.3f), b.weight({ci})}));
        }
        Attrs a;
        a.set("activation", std::string(act));
        if (bf16_output) a.set(std::string(kBf16OutputAttr), int64_t{1});
        b.output(b.op(OpKind::ConcatAffine, a, in));
        for (PlanStep& step : b.plan.steps)
          if (step.op == OpKind::Conv) precision_to_attrs(Precision::bf16, step.attrs);
        auto ref = execute_reference(b.plan, b.inputs);
        REQUIRE(ref);
        const IsaCap cap(isa);
        auto engine = Engine::create(b.plan, {2, nullptr});
        REQUIRE(engine);
        INFO(describe_steps(**engine));
        std::string layout;
        int conversions = 0;
        for (const EngineStep& st : (*engine)->steps()) {
          if (st.op == "ConcatAffine") layout = st.output_layout;
          conversions += st.op == "ToPlain" && st.node.rfind("ConcatAffine", 0) != 0;
        }
        CHECK(conversions == 0);  // the convs' bf16 outputs are read as they are
        CHECK(layout == (bf16_output ? "onednn:acdb:bf16" : "onednn:acdb"));
        auto got = (*engine)->run(b.inputs);
        REQUIRE(got);
        const Tensor& want = ref->outputs[0];
        const double diff = max_diff(got->at(0), want);
        INFO("max|diff| " << diff << " of max|ref| " << max_abs(want));
        CHECK(diff <= 0.02 * max_abs(want));
      }
  }
}

// Rounding to bfloat16 is the float32 result rounded to nearest even: with float32 producers, the
// bf16 output equals the reference's values rounded so (up to one step where fma and the reference's
// multiply-then-add round differently).
TEST_CASE("ConcatAffine's bfloat16 output is the float32 result rounded to nearest even", "[cpu][concat_affine][bf16]") {
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) continue;
    INFO(cpu_isa_name(isa));
    Builder b;
    std::vector<int> in = {b.weight({40}, 1.5f), b.weight({40}, 0.5f)};
    for (int64_t ci : {24, 16}) {
      const int x = b.input({1, ci, 5, 5});
      in.push_back(b.op(OpKind::Conv, {}, {x, b.weight({ci, ci, 1, 1}, 0.3f), b.weight({ci})}));
    }
    Attrs a;
    a.set("activation", std::string("relu"));
    a.set(std::string(kBf16OutputAttr), int64_t{1});
    b.output(b.op(OpKind::ConcatAffine, a, in));
    auto ref = execute_reference(b.plan, b.inputs);
    REQUIRE(ref);
    const IsaCap cap(isa);
    auto engine = Engine::create(b.plan, {2, nullptr});
    REQUIRE(engine);
    auto got = (*engine)->run(b.inputs);
    REQUIRE(got);
    const Tensor& want = ref->outputs[0];
    int64_t off_by_more = 0, exact = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float w = want.data<float>()[i], g = got->at(0).data<float>()[i];
      uint32_t bits;
      std::memcpy(&bits, &w, sizeof bits);
      const uint32_t rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;
      float r;
      std::memcpy(&r, &rounded, sizeof r);
      exact += g == r;
      off_by_more += std::fabs(g - r) > std::fabs(r) * (1.0f / 128.0f);
    }
    CHECK(off_by_more == 0);
    CHECK(exact >= want.numel() * 99 / 100);
  }
}

TEST_CASE("ConcatAffine refuses scale and shift that do not match the joined channels", "[cpu][concat_affine]") {
  Builder b;
  const int x0 = b.input({1, 4, 3, 3}), x1 = b.input({1, 6, 3, 3});
  b.output(b.op_shaped(OpKind::ConcatAffine, {}, {b.weight({9}), b.weight({10}), x0, x1}, {1, 10, 3, 3}));
  auto engine = Engine::create(b.plan, {});
  REQUIRE_FALSE(engine);
  REQUIRE_THAT(engine.error().message, Catch::Contains("scale has 9 elements but the joined inputs have 10 channels"));
}

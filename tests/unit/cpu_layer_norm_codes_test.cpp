// kiln's LayerNorm writing int8 codes (kernels/cpu/layer_norm_codes.cpp) against the reference
// LayerNormalization on both ISA paths: ConvNeXt-like rows of 96 channels and an odd 13 (vector tails),
// with and without B. The codes reach the plan's output through the engine's conversion to plain, which
// dequantizes them: every value within half a quantization step of the reference (plus float rounding of
// the statistics), and the step's layout carries the codes' type and scale.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/isa.h"
#include "kernels/quantization.h"
#include "tests/support/isa_cap.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("cpu.layer_norm_codes normalizes rows straight into codes within half a step", "[cpu][int8]") {
  struct Case {
    const char* what;
    Shape x;
    bool bias;
  };
  const Case cases[] = {{"ConvNeXt rows of 96, with B", {2, 5, 7, 96}, true}, {"rows of 13, no B", {3, 11, 13}, false}};
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) {
      WARN("this CPU has no " << cpu_isa_name(isa) << ": path not tested here");
      continue;
    }
    for (const Case& t : cases) {
      INFO(cpu_isa_name(isa) << ": " << t.what);
      Builder b;
      const int x = b.input(t.x, -3.0f, 5.0f);
      std::vector<int> in = {x, b.weight({t.x.back()}, 1.5f)};
      if (t.bias) in.push_back(b.weight({t.x.back()}, 0.5f));
      Attrs a;
      a.set("epsilon", 1e-5f);
      b.output(b.op(OpKind::LayerNormalization, a, in));
      auto ref = execute_reference(b.plan, b.inputs);
      REQUIRE(ref);
      const Tensor& want = ref->outputs[0];
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < want.numel(); ++i) lo = std::min(lo, want.data<float>()[i]), hi = std::max(hi, want.data<float>()[i]);
      const QuantParams q = quant_params_for_range(lo, hi);
      REQUIRE(q.type == QuantType::s8);
      quant_params_to_attrs(q, "output", b.plan.steps.back().attrs);
      const IsaCap cap(isa);
      auto engine = Engine::create(b.plan, {2, nullptr});
      REQUIRE(engine);
      INFO(describe_steps(**engine));
      REQUIRE(count_kernel(**engine, "cpu.layer_norm_codes") == 1);
      CHECK((*engine)->steps()[0].output_layout.find(":s8*") != std::string::npos);
      for (int repeat = 0; repeat < 2; ++repeat) {
        auto got = (*engine)->run(b.inputs);
        REQUIRE(got);
        double diff = 0;
        for (int64_t i = 0; i < want.numel(); ++i)
          diff = std::max(diff, std::fabs(static_cast<double>(got->at(0).data<float>()[i]) - want.data<float>()[i]));
        INFO("max|diff| " << diff << ", scale " << q.scale);
        CHECK(diff <= 0.5 * q.scale + 1e-4 * std::max(std::fabs(lo), hi));
        CHECK(diff > 0);  // codes, not floats
      }
    }
  }
}

TEST_CASE("cpu.layer_norm_codes leaves LayerNorms without int8_output to oneDNN", "[cpu][int8]") {
  Builder b;
  const int x = b.input({2, 4, 32});
  b.output(b.op(OpKind::LayerNormalization, {}, {x, b.weight({32}, 1.0f)}));
  auto engine = check(b);
  CHECK(count_kernel(*engine, "cpu.layer_norm_codes") == 0);
}

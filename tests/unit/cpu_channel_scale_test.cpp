// kiln's per-image channel scale (kernels/cpu/channel_scale.cpp) against the reference: a plain
// activation, an NHWC one (a depth-first depthwise stage writes NHWC on every CPU), the scale as
// either input, in place where the activation dies; batch 1 stays with oneDNN's binary.
#include <catch2/catch.hpp>

#include "kernels/cpu/isa.h"
#include "kernels/precision.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// A depthwise 3x3 stage alone (no projection): NHWC output of c channels, the image's size.
int nhwc_activation(Builder& b, int64_t n, int64_t c, int64_t h, int64_t w) {
  Attrs a;
  a.set("dw_strides", std::vector<int64_t>{1, 1});
  a.set("dw_pads", std::vector<int64_t>{1, 1, 1, 1});
  a.set("dw_activation", std::string("none"));
  a.set("activation", std::string("none"));
  return b.op(OpKind::DepthFirstConv, a, {b.input({n, c, h, w}), b.weight({c, 1, 3, 3}, 0.5f), b.weight({c})});
}

}  // namespace

TEST_CASE("cpu.channel_scale multiplies plain activations by an [N, C, 1, 1] scale", "[cpu]") {
  Builder b;
  const int x = b.input({3, 5, 7, 9});
  const int s = b.input({3, 5, 1, 1}, 0.0f, 1.0f);
  b.output(b.op(OpKind::Mul, {}, {x, s}));  // x is a graph input: not in place
  const int x2 = b.op(OpKind::Relu, {}, {b.input({2, 300, 1, 70})});
  b.output(b.op(OpKind::Mul, {}, {b.input({2, 300, 1, 1}), x2}));  // scale first; x2 dies here: in place
  auto engine = check(b);
  REQUIRE(count_kernel(*engine, "cpu.channel_scale") == 2);
  CHECK(engine->memory().in_place_steps >= 1);
}

TEST_CASE("cpu.channel_scale keeps an NHWC activation in NHWC", "[cpu]") {
  Builder b;
  const int x = nhwc_activation(b, 4, 32, 33, 17);  // 561 pixels: blocks of 256 and a tail
  b.output(b.op(OpKind::Mul, {}, {x, b.input({4, 32, 1, 1}, 0.0f, 1.0f)}));
  // The scale from a 1x1 convolution (squeeze-excite), in whatever layout oneDNN gives it: with
  // channel blocks dividing 32 its elements sit where plain's do.
  const int se = b.op(OpKind::Conv, {}, {b.input({4, 32, 1, 1}), b.weight({32, 32, 1, 1}, 0.3f), b.weight({32})});
  b.output(b.op(OpKind::Mul, {}, {nhwc_activation(b, 4, 32, 9, 9), se}));
  auto engine = check(b);
  REQUIRE(count_kernel(*engine, "cpu.channel_scale") == 2);
  for (const EngineStep& st : engine->steps())
    if (st.kernel == "cpu.channel_scale") CHECK(st.output_layout.find("acdb") != std::string::npos);
}

TEST_CASE("cpu.channel_scale leaves batch 1 and other broadcasts to oneDNN", "[cpu]") {
  Builder b;
  b.output(b.op(OpKind::Mul, {}, {b.input({1, 8, 5, 5}), b.input({1, 8, 1, 1})}));
  b.output(b.op(OpKind::Mul, {}, {b.input({2, 8, 5, 5}), b.input({1, 8, 1, 1})}));
  b.output(b.op(OpKind::Mul, {}, {b.input({2, 8, 5, 5}), b.input({2, 8, 5, 5})}));
  auto engine = check(b);
  CHECK(count_kernel(*engine, "cpu.channel_scale") == 0);
}

// A bf16 squeeze-excite conv writes its scale in bfloat16 (mixed precision, e.g. accuracy control keeping the
// activation's producer in fp32): a [N, C, 1, 1] value whose layout orders elements as plain does, but two
// bytes each. The kernel reads float32 scales only, so it leaves this Mul to oneDNN (which reads either).
TEST_CASE("cpu.channel_scale leaves a bfloat16 scale to oneDNN", "[cpu][bf16]") {
  if (!cpu_has_bf16_compute()) {
    WARN("no bf16 compute here: oneDNN's convs write float32");
    return;
  }
  Builder b;
  Attrs bf16;
  precision_to_attrs(Precision::bf16, bf16);
  const int se = b.op(OpKind::Conv, bf16, {b.input({2, 32, 1, 1}), b.weight({32, 32, 1, 1}, 0.3f), b.weight({32})});
  b.output(b.op(OpKind::Mul, {}, {b.input({2, 32, 6, 5}), se}));
  auto engine = Engine::create(b.plan, {2, nullptr});
  REQUIRE(engine);
  std::string se_layout;
  for (const EngineStep& st : (*engine)->steps())
    if (st.op == "Conv") se_layout = st.output_layout;
  INFO(describe_steps(**engine));
  REQUIRE(se_layout.find("bf16") != std::string::npos);
  CHECK(count_kernel(**engine, "cpu.channel_scale") == 0);
  // The result at bf16 accuracy (the scale rounded to bfloat16), not bfloat16 bits read as floats.
  auto got = (*engine)->run(b.inputs);
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(got);
  REQUIRE(want);
  double diff = 0;
  for (int64_t i = 0; i < want->outputs[0].numel(); ++i)
    diff = std::max(diff, std::fabs(static_cast<double>(got->at(0).data<float>()[i]) - want->outputs[0].data<float>()[i]));
  CHECK(diff <= 2e-2 * max_abs(want->outputs[0]));
}

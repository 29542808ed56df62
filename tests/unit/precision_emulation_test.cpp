// GPU precision emulation (kernels/verify/precision_emulation.h): the rounding of each precision,
// which steps and values each one rounds, and the verification stage running a plan emulated.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/engine.h"
#include "kernels/executor.h"
#include "kernels/verify/precision_emulation.h"
#include "kernels/verify/verify.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using kiln::testing::attrs;
using kiln::testing::Builder;
using Ints = std::vector<int64_t>;

namespace {

// 1 + k * 2^-e, exactly.
float one_plus(int k, int e) { return 1.0f + static_cast<float>(k) * std::ldexp(1.0f, -e); }

Tensor scalar_tensor(Shape shape, float v) {
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
  return t;
}

// One output's first value, emulated at `precision` on the reference kernels: tf32 on its
// emulator, the others as their rounding plan.
float run_one(const Plan& plan, const std::vector<Tensor>& inputs, DevicePrecision precision, size_t output = 0) {
  Result<std::vector<Tensor>> got = std::vector<Tensor>{};
  if (precision == DevicePrecision::tf32) {
    got = Tf32Emulator(plan).run(inputs);
  } else {
    auto rounding = storage_rounding_plan(plan, precision);
    REQUIRE(rounding);
    auto ran = execute_reference(*rounding, inputs);
    if (ran) got = std::move(ran->outputs);
    else got = ran.status();
  }
  INFO((got ? std::string() : got.error().message));
  REQUIRE(got);
  return (*got)[output].data<float>()[0];
}

}  // namespace

TEST_CASE("emulated rounding: each precision keeps its mantissa, to nearest even", "[emulation]") {
  const float inf = std::numeric_limits<float>::infinity();
  // fp16: 10 mantissa bits; ties go to the even neighbour; overflow is infinity; tiny values flush.
  CHECK(emulated_round(one_plus(1, 11), DevicePrecision::fp16) == 1.0f);
  CHECK(emulated_round(one_plus(3, 11), DevicePrecision::fp16) == one_plus(1, 9));
  CHECK(emulated_round(one_plus(1, 10), DevicePrecision::fp16) == one_plus(1, 10));
  CHECK(emulated_round(65504.0f, DevicePrecision::fp16) == 65504.0f);
  CHECK(emulated_round(65520.0f, DevicePrecision::fp16) == inf);
  CHECK(emulated_round(1e-8f, DevicePrecision::fp16) == 0.0f);
  // bf16: 7 mantissa bits, float's range.
  CHECK(emulated_round(one_plus(1, 8), DevicePrecision::bf16) == 1.0f);
  CHECK(emulated_round(one_plus(3, 8), DevicePrecision::bf16) == one_plus(1, 6));
  CHECK(emulated_round(1e30f, DevicePrecision::bf16) == Approx(1e30f).epsilon(1e-2));
  // tf32: 10 mantissa bits, float's range.
  CHECK(emulated_round(one_plus(1, 11), DevicePrecision::tf32) == 1.0f);
  CHECK(emulated_round(one_plus(3, 11), DevicePrecision::tf32) == one_plus(1, 9));
  CHECK(emulated_round(1e30f, DevicePrecision::tf32) == Approx(1e30f).epsilon(1e-3));
  CHECK(emulated_round(inf, DevicePrecision::tf32) == inf);
  // fp32: unchanged; NaN stays NaN everywhere.
  CHECK(emulated_round(one_plus(1, 23), DevicePrecision::fp32) == one_plus(1, 23));
  for (DevicePrecision p : {DevicePrecision::fp16, DevicePrecision::bf16, DevicePrecision::tf32})
    CHECK(std::isnan(emulated_round(std::numeric_limits<float>::quiet_NaN(), p)));
}

TEST_CASE("emulation rounds what the CUDA engine rounds at each precision", "[emulation]") {
  // x = w = 1 + 2^-12: below half a unit of fp16's and tf32's last place, so rounding either
  // operand to them gives 1; in float x * w = 1 + 2^-11 (+ 2^-24, rounded away).
  const float v = one_plus(1, 12);
  SECTION("MatMul: tf32 and fp16 round its operands, fp32 does not") {
    Builder b;
    const int x = b.input({1, 1});
    b.inputs[0] = scalar_tensor({1, 1}, v);
    const int w = b.constant(scalar_tensor({1, 1}, v));
    b.output(b.op(OpKind::MatMul, {}, {x, w}));
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::fp32) == one_plus(1, 11));
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::tf32) == 1.0f);
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::fp16) == 1.0f);
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::bf16) == 1.0f);
    // The plan's own weights are untouched: the emulator rounds a copy.
    CHECK(b.plan.constants[0].second.data<float>()[0] == v);
  }
  SECTION("tf32 leaves other steps and depthwise convolutions in float; fp16 stores every output rounded") {
    Builder b;
    const int x = b.input({1, 2, 1, 1});
    b.inputs[0] = scalar_tensor({1, 2, 1, 1}, v);
    const int relu = b.op(OpKind::Relu, {}, {x});
    const int dw_w = b.constant(scalar_tensor({2, 1, 1, 1}, v));
    const int depthwise = b.op(OpKind::Conv, attrs({{"group", int64_t{2}}}), {x, dw_w});
    const int w = b.constant(scalar_tensor({2, 2, 1, 1}, v));
    const int dense = b.op(OpKind::Conv, {}, {x, w});
    b.output(relu);
    b.output(depthwise);
    b.output(dense);
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::tf32, 0) == v);                // not a GEMM: float
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::tf32, 1) == one_plus(1, 11));  // depthwise: kiln's float kernel
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::tf32, 2) == 2.0f);             // two products of 1 x 1
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::fp16, 0) == 1.0f);             // the input is stored in fp16
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::fp32, 2) == Approx(2.0f * one_plus(1, 11)));
  }
  SECTION("fp16 rounds each stored output, not just the inputs") {
    Builder b;
    const int x = b.input({1, 1});
    b.inputs[0] = scalar_tensor({1, 1}, 1.0f);
    const int third = b.constant(scalar_tensor({1, 1}, 1.0f / 3.0f));
    b.output(b.op(OpKind::Mul, {}, {x, third}));
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::fp16) == emulated_round(1.0f / 3.0f, DevicePrecision::fp16));
    CHECK(run_one(b.plan, b.inputs, DevicePrecision::fp16) != 1.0f / 3.0f);
  }
}

TEST_CASE("emulated mixed precision: kept steps compute and store in float, the others read them rounded", "[emulation]") {
  // x = 1 + 2^-10: bf16 keeps 7 fraction bits, so it rounds to 1; float keeps it.
  const float v = one_plus(1, 10);
  Builder b;
  const int x = b.input({1, 1});
  b.inputs[0] = scalar_tensor({1, 1}, v);
  const int first = b.op(OpKind::Relu, {}, {x});
  const int second = b.op(OpKind::Relu, {}, {first});
  b.output(first);
  b.output(second);
  const std::string first_name = b.plan.steps[0].name, second_name = b.plan.steps[1].name;
  const auto run_kept = [&](const std::vector<std::string>& keep, size_t output) {
    auto rounding = storage_rounding_plan(b.plan, DevicePrecision::bf16, keep);
    INFO((rounding ? std::string() : rounding.error().message));
    REQUIRE(rounding);
    auto ran = execute_reference(*rounding, b.inputs);
    REQUIRE(ran);
    return ran->outputs[output].data<float>()[0];
  };
  CHECK(run_kept({}, 0) == 1.0f);
  CHECK(run_kept({first_name}, 0) == v);            // only the kept step reads the input: float throughout
  CHECK(run_kept({first_name}, 1) == 1.0f);         // the second reads the kept output's bf16 copy
  CHECK(run_kept({second_name}, 1) == 1.0f);        // the input is stored in bf16 for the first step
  CHECK(run_kept({first_name, second_name}, 1) == v);
  auto unknown = storage_rounding_plan(b.plan, DevicePrecision::bf16, {"nowhere"});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message == "keep fp32: no step of the plan is node 'nowhere'");
  CHECK_FALSE(storage_rounding_plan(b.plan, DevicePrecision::tf32, {first_name}));
  CHECK_FALSE(storage_rounding_plan(b.plan, DevicePrecision::fp32, {first_name}));
}

TEST_CASE("emulated tf32 mixed precision: a kept MatMul multiplies in float", "[emulation]") {
  const float v = one_plus(1, 12);  // rounds to 1 at tf32's 10 mantissa bits
  Builder b;
  const int x = b.input({1, 1});
  b.inputs[0] = scalar_tensor({1, 1}, v);
  const int w = b.constant(scalar_tensor({1, 1}, v));
  const int first = b.op(OpKind::MatMul, {}, {x, w});
  b.output(first);
  b.output(b.op(OpKind::MatMul, {}, {x, w}));
  const std::string first_name = b.plan.steps[0].name;
  auto emulator = Tf32Emulator::create(b.plan, {first_name});
  REQUIRE(emulator);
  auto got = emulator->run(b.inputs);
  REQUIRE(got);
  CHECK((*got)[0].data<float>()[0] == one_plus(1, 11));  // kept: float operands
  CHECK((*got)[1].data<float>()[0] == 1.0f);             // the same product on TF32 operands
  auto unknown = Tf32Emulator::create(b.plan, {"nowhere"});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message == "keep fp32: no step of the plan is node 'nowhere'");
}

TEST_CASE("verify_plans runs the compiled plan emulated and reports it", "[emulation][verify]") {
  Builder b;
  const int x = b.input({2, 8});
  const int w = b.weight({8, 4});
  b.output(b.op(OpKind::MatMul, {}, {x, w}));
  const VerifyData data = verify_random_data(b.plan, 6, 3);
  VerifyOptions options;
  options.emulate = DevicePrecision::fp32;
  auto exact = verify_plans(b.plan, b.plan, data, options);
  REQUIRE(exact);
  CHECK(exact->outputs[0].max_rel_error < 1e-5);  // the CPU engine's float kernels: nothing rounded
  CHECK(exact->engine.find("fp32 emulated on the CPU") == 0);
  options.emulate = DevicePrecision::bf16;
  auto bf16 = verify_plans(b.plan, b.plan, data, options);
  REQUIRE(bf16);
  CHECK(bf16->samples == 6);
  CHECK(bf16->outputs[0].max_rel_error > 1e-4);  // bf16 keeps 8 significant bits: far from exact
  CHECK(bf16->outputs[0].max_rel_error < 2e-2);
  CHECK(bf16->outputs[0].cosine > 0.999);
  CHECK(bf16->engine.find("bf16 emulated on the CPU") == 0);
  CHECK_THAT(bf16->engine, Catch::Contains("CPU engine"));
  options.emulate = DevicePrecision::tf32;
  auto tf32 = verify_plans(b.plan, b.plan, data, options);
  REQUIRE(tf32);
  CHECK_THAT(tf32->engine, Catch::Contains("tf32 emulated on the CPU (reference kernels"));
  CHECK(tf32->outputs[0].max_rel_error > 0);
}

TEST_CASE("the rounding plan emulates fp16/bf16 storage alike on the CPU engine and on the reference kernels", "[emulation]") {
  // A small convolutional block: conv + bias + ReLU, a depthwise conv, global pooling and a Gemm.
  Builder b;
  const int x = b.input({2, 4, 8, 8});
  const int c1 = b.op(OpKind::Conv, attrs({{"pads", Ints{1, 1, 1, 1}}}), {x, b.weight({8, 4, 3, 3}, 0.5f), b.weight({8})});
  const int r = b.op(OpKind::Relu, {}, {c1});
  const int dw = b.op(OpKind::Conv, attrs({{"group", int64_t{8}}, {"pads", Ints{1, 1, 1, 1}}}), {r, b.weight({8, 1, 3, 3}, 0.5f)});
  const int pool = b.op(OpKind::GlobalAveragePool, {}, {dw});
  const int flat = b.op(OpKind::Flatten, {}, {pool});
  b.output(b.op(OpKind::Gemm, attrs({{"transB", int64_t{1}}}), {flat, b.weight({5, 8}), b.weight({5})}));
  for (DevicePrecision p : {DevicePrecision::fp16, DevicePrecision::bf16}) {
    INFO(device_precision_name(p));
    auto rounding = storage_rounding_plan(b.plan, p);
    REQUIRE(rounding);
    CHECK(rounding->steps.size() == b.plan.steps.size() + 2 * (b.plan.steps.size() + 1));  // a pair per output and input
    CHECK(rounding->inputs[0].name == b.plan.inputs[0].name);
    auto engine = Engine::create(*rounding, EngineOptions{});
    REQUIRE(engine);
    auto fast = (*engine)->run(b.inputs);
    REQUIRE(fast);
    auto ran = execute_reference(*rounding, b.inputs);
    REQUIRE(ran);
    const std::vector<Tensor>* slow = &ran->outputs;
    const Tensor& got = (*fast)[0];
    const Tensor& want = (*slow)[0];
    REQUIRE(got.shape() == want.shape());
    double max_ref = 0, max_diff = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const float v = got.data<float>()[i];
      CHECK(emulated_round(v, p) == v);  // what the plan returns is stored at the precision
      max_ref = std::max(max_ref, std::abs(static_cast<double>(want.data<float>()[i])));
      max_diff = std::max(max_diff, std::abs(static_cast<double>(v) - want.data<float>()[i]));
    }
    // Only the float summation order differs: at most a rounding step or two of the 16-bit type.
    CHECK(max_diff <= max_ref * (p == DevicePrecision::fp16 ? 4e-3 : 3e-2));
  }
  CHECK_FALSE(storage_rounding_plan(b.plan, DevicePrecision::tf32));
}

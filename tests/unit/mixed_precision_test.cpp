// Mixed precision on a device (kernels/device/mixed_precision.h): which steps compute in float32
// and which values the device stores in float32, the rule the CUDA engine and its CPU emulation share.
#include <catch2/catch.hpp>

#include "kernels/device/mixed_precision.h"
#include "tests/support/plan_builder.h"

using namespace kiln;

namespace {

// x -> Relu0 -> Relu1 -> Add2(+ w) -> output; w a constant.
struct Chain {
  testing::Builder b;
  int x = -1, w = -1, r0 = -1, r1 = -1, sum = -1;
  Chain() {
    x = b.input({1, 4});
    w = b.weight({1, 4});
    r0 = b.op(OpKind::Relu, {}, {x});
    r1 = b.op(OpKind::Relu, {}, {r0});
    sum = b.op(OpKind::Add, {}, {r1, w});
    b.output(sum);
  }
};

DeviceEngineOptions keep(DevicePrecision precision, std::vector<std::string> names) {
  DeviceEngineOptions o;
  o.precision = precision;
  o.keep_fp32 = std::move(names);
  return o;
}

}  // namespace

TEST_CASE("mixed precision: kept steps store float32, inputs and constants only where kept steps alone read them", "[device]") {
  Chain c;
  REQUIRE(c.b.plan.steps.size() == 3);
  const std::string relu0 = c.b.plan.steps[0].name, relu1 = c.b.plan.steps[1].name, add = c.b.plan.steps[2].name;

  auto none = mixed_precision(c.b.plan, keep(DevicePrecision::bf16, {}));
  REQUIRE(none);
  CHECK_FALSE(none->any());
  for (bool wide : none->stored_wide) CHECK_FALSE(wide);

  auto middle = mixed_precision(c.b.plan, keep(DevicePrecision::bf16, {relu1}));
  REQUIRE(middle);
  CHECK(middle->any());
  CHECK(middle->kept_step == std::vector<bool>{false, true, false});
  CHECK_FALSE(middle->stored_wide[static_cast<size_t>(c.x)]);
  CHECK_FALSE(middle->stored_wide[static_cast<size_t>(c.r0)]);  // Relu0 is not kept: 16-bit, widened for Relu1
  CHECK(middle->stored_wide[static_cast<size_t>(c.r1)]);        // narrowed for Add2
  CHECK_FALSE(middle->stored_wide[static_cast<size_t>(c.w)]);
  CHECK_FALSE(middle->stored_wide[static_cast<size_t>(c.sum)]);

  auto ends = mixed_precision(c.b.plan, keep(DevicePrecision::fp16, {relu0, add}));
  REQUIRE(ends);
  CHECK(ends->stored_wide[static_cast<size_t>(c.x)]);  // only the kept Relu0 reads the input
  CHECK(ends->stored_wide[static_cast<size_t>(c.r0)]);
  CHECK_FALSE(ends->stored_wide[static_cast<size_t>(c.r1)]);
  CHECK(ends->stored_wide[static_cast<size_t>(c.w)]);  // only the kept Add2 reads the constant
  CHECK(ends->stored_wide[static_cast<size_t>(c.sum)]);
}

TEST_CASE("mixed precision: a node that is no step, or an fp32 plan, is an error", "[device]") {
  Chain c;
  auto unknown = mixed_precision(c.b.plan, keep(DevicePrecision::bf16, {"/layer9/Conv"}));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message == "keep fp32: no step of the plan is node '/layer9/Conv'");
  auto wrong = mixed_precision(c.b.plan, keep(DevicePrecision::fp32, {c.b.plan.steps[0].name}));
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message == "keeping nodes in fp32 is for tf32, fp16 and bf16 plans: an fp32 plan computes every step in float32");
}

TEST_CASE("mixed precision in a tf32 plan: the kept steps compute in float32, every value stays float32", "[device]") {
  Chain c;
  auto kept = mixed_precision(c.b.plan, keep(DevicePrecision::tf32, {c.b.plan.steps[1].name}));
  REQUIRE(kept);
  CHECK(kept->kept_step == std::vector<bool>{false, true, false});
  CHECK(kept->any());
}

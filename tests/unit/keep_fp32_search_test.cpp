// GPU accuracy control (kernels/verify/keep_fp32_search.h): the fewest leading steps of a plan kept
// in float32 for an emulated tf32/fp16/bf16 plan to meet a bound against the fp32 reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "kernels/verify/keep_fp32_search.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using kiln::testing::Builder;

namespace {

Tensor filled(Shape shape, float v) {
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
  return t;
}

// x - 1 on x = 1 + 2^-10, then five exact steps: bf16 (8 significant bits) rounds x to 1 unless the
// first step reads it in float, so the output is 0 instead of 3 * 2^-10 until that step is kept;
// everything after it is exact in bf16.
struct ErrorMadeFirst {
  Builder b;
  VerifyData data;
  ErrorMadeFirst() {
    const int x = b.input({2, 1});
    const int diff = b.op(OpKind::Sub, {}, {x, b.constant(filled({1, 1}, 1.0f))});
    int y = b.op(OpKind::Mul, {}, {diff, b.constant(filled({1, 1}, 3.0f))});
    for (int i = 0; i < 4; ++i) y = b.op(OpKind::Relu, {}, {y});
    b.output(y);
    data.inputs.push_back(filled({6, 1}, 1.0f + std::ldexp(1.0f, -10)));
    data.source = "test";
  }
};

}  // namespace

TEST_CASE("keep-fp32 search: keeps exactly the leading step where the error is made", "[emulation][verify]") {
  ErrorMadeFirst m;
  AccuracyBound bound;
  bound.max_rel_error = 1e-6;
  std::ostringstream log;
  auto found = search_keep_fp32(m.b.plan, m.b.plan, m.data, DevicePrecision::bf16, bound, {}, &log);
  INFO(log.str());
  REQUIRE(found);
  CHECK(found->met);
  CHECK(found->total_steps == 6);
  CHECK(found->kept_steps == 1);
  CHECK(found->keep_fp32 == std::vector<std::string>{m.b.plan.steps[0].name});
  CHECK(found->report.outputs[0].max_rel_error <= 1e-6);
  REQUIRE(found->trials.size() >= 3);  // none, all, then the bisection
  CHECK_FALSE(found->trials[0].met);
  CHECK(found->trials[0].kept_steps == 0);
  CHECK(found->trials[0].max_rel_error == Approx(1.0));  // 0 instead of 3 * 2^-10
  CHECK(found->trials[1].met);
  CHECK_THAT(log.str(), Catch::Contains("[gpu accuracy] bf16, no step in fp32: cosine"));
  CHECK_THAT(log.str(), Catch::Contains("the first 1 of 6 steps in fp32"));
}

TEST_CASE("keep-fp32 search: nothing kept when the plan meets the bound as it is", "[emulation][verify]") {
  Builder b;
  const int x = b.input({2, 8});
  b.output(b.op(OpKind::MatMul, {}, {x, b.weight({8, 4})}));
  const VerifyData data = verify_random_data(b.plan, 6, 3);
  AccuracyBound bound;
  bound.min_cosine = 0.99;
  for (DevicePrecision p : {DevicePrecision::tf32, DevicePrecision::fp16, DevicePrecision::bf16}) {
    auto found = search_keep_fp32(b.plan, b.plan, data, p, bound, {});
    REQUIRE(found);
    CHECK(found->met);
    CHECK(found->kept_steps == 0);
    CHECK(found->keep_fp32.empty());
    CHECK(found->trials.size() == 1);
  }
}

TEST_CASE("keep-fp32 search: a tf32 plan keeps its MatMuls off the TF32 operands", "[emulation][verify]") {
  // Two MatMuls on x = 1 + 2^-12 (below tf32's last place): only float operands keep the 2^-12.
  Builder b;
  const int x = b.input({2, 1});
  const int first = b.op(OpKind::MatMul, {}, {x, b.constant(filled({1, 1}, 1.0f))});
  b.output(b.op(OpKind::Sub, {}, {first, b.constant(filled({1, 1}, 1.0f))}));
  VerifyData data;
  data.inputs.push_back(filled({4, 1}, 1.0f + std::ldexp(1.0f, -12)));
  AccuracyBound bound;
  bound.max_rel_error = 1e-3;
  auto found = search_keep_fp32(b.plan, b.plan, data, DevicePrecision::tf32, bound, {});
  REQUIRE(found);
  CHECK(found->met);
  CHECK(found->keep_fp32 == std::vector<std::string>{b.plan.steps[0].name});
}

TEST_CASE("keep-fp32 search: fp32 and a missing bound are errors", "[emulation][verify]") {
  ErrorMadeFirst m;
  AccuracyBound bound;
  bound.min_cosine = 0.999;
  auto fp32 = search_keep_fp32(m.b.plan, m.b.plan, m.data, DevicePrecision::fp32, bound, {});
  REQUIRE_FALSE(fp32);
  CHECK(fp32.error().message == "an fp32 plan computes every step in float32 already: nothing to keep");
  auto unbound = search_keep_fp32(m.b.plan, m.b.plan, m.data, DevicePrecision::bf16, AccuracyBound{}, {});
  REQUIRE_FALSE(unbound);
  CHECK_THAT(unbound.error().message, Catch::Contains("needs a bound"));
}

TEST_CASE("accuracy bounds: which output misses what, and the bound in words", "[verify]") {
  VerifyReport report;
  OutputMetrics o;
  o.name = "logits";
  o.cosine = 0.998;
  o.max_rel_error = 2e-3;
  o.classifier = true;
  o.top1_agreement = 0.97;
  report.outputs.push_back(o);
  AccuracyBound bound;
  bound.min_cosine = 0.999;
  std::string why;
  CHECK_FALSE(meets_bound(report, bound, &why));
  CHECK(why == "output 'logits' has a cosine of 0.998 (at least 0.999 asked)");
  bound.min_cosine = 0.99;
  bound.max_accuracy_drop = 0.02;
  CHECK_FALSE(meets_bound(report, bound, &why));
  CHECK(why == "output 'logits' loses top-1 agreement of 3 points (at most 2 asked)");
  bound.max_accuracy_drop = 0.05;
  bound.max_rel_error = 1e-3;
  CHECK_FALSE(meets_bound(report, bound, &why));
  CHECK(why == "output 'logits' has a max relative error of 0.002 (at most 0.001 asked)");
  bound.max_rel_error = 1e-2;
  CHECK(meets_bound(report, bound));
  CHECK(describe_bound(bound) == "a cosine of at least 0.99 and a max relative error of at most 0.01 and an accuracy drop of at most 5 points");
}

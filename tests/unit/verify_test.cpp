// The verification stage: metrics on hand-computed cases, and batching with padding and trimming.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/verify/verify.h"

using namespace kiln;

namespace {

Tensor f32(Shape shape, std::vector<float> values) { return Tensor::from_values<float>(std::move(shape), values); }

// y[B,3] = OP(x[B,3]).
Plan unary_plan(OpKind op, int64_t batch) {
  Plan plan;
  plan.slot_types = {ValueType::of(DType::f32, sym_shape_from({batch, 3})), ValueType::of(DType::f32, sym_shape_from({batch, 3}))};
  plan.num_slots = 2;
  plan.inputs = {{0, "x", plan.slot_types[0]}};
  plan.outputs = {{1, "y"}};
  plan.steps.push_back({op, {}, {0}, {1}, "op"});
  return plan;
}

}  // namespace

TEST_CASE("verify metrics: hand-computed errors, cosine, top-1 and accuracy", "[verify]") {
  OutputComparison c("logits");
  const Tensor ref = f32({2, 2}, {1, 0, 0, 1});
  const Tensor got = f32({2, 2}, {1, 0, 1, 0});
  const std::vector<int64_t> labels = {0, 1};
  REQUIRE(c.add(ref, got, 2, labels.data()));
  const OutputMetrics m = c.finish();
  REQUIRE(m.elements == 4);
  REQUIRE(m.max_abs_error == 1.0);
  REQUIRE(m.max_abs_reference == 1.0);
  REQUIRE(m.max_rel_error == 1.0);
  REQUIRE(m.cosine == Approx(0.5));  // dot 1, |ref| = |got| = sqrt(2)
  REQUIRE(m.classifier);
  REQUIRE(m.rows == 2);
  REQUIRE(m.top1_agree == 1);
  REQUIRE(m.top1_agreement == 0.5);
  REQUIRE(m.has_labels);
  REQUIRE(m.reference_accuracy == 1.0);
  REQUIRE(m.compiled_accuracy == 0.5);
  REQUIRE(m.accuracy_drop == 0.5);
}

TEST_CASE("verify metrics: trimming, accumulation over batches, zeros and NaN", "[verify]") {
  SECTION("only the real rows of a padded batch count") {
    OutputComparison c("y");
    // Row 1 is padding: its huge difference must not count.
    REQUIRE(c.add(f32({2, 2}, {2, 1, 0, 0}), f32({2, 2}, {2, 1.5f, 100, 0}), 1, nullptr));
    REQUIRE(c.add(f32({2, 2}, {-4, 1, 3, 0}), f32({2, 2}, {-4, 1, 3, 0}), 2, nullptr));
    const OutputMetrics m = c.finish();
    REQUIRE(m.elements == 6);
    REQUIRE(m.rows == 3);
    REQUIRE(m.max_abs_error == 0.5);
    REQUIRE(m.max_abs_reference == 4.0);
    REQUIRE(m.max_rel_error == 0.125);
    REQUIRE(m.top1_agree == 3);
    REQUIRE_FALSE(m.has_labels);
    // cosine of (2,1,-4,1,3,0) and (2,1.5,-4,1,3,0): dot 31.5, norms sqrt(31) and sqrt(32.25)
    REQUIRE(m.cosine == Approx(31.5 / std::sqrt(31.0 * 32.25)));
  }
  SECTION("all-zero outputs agree; one-sided zero has cosine 0") {
    OutputComparison zeros("z");
    REQUIRE(zeros.add(f32({1, 1}, {0}), f32({1, 1}, {0}), 1, nullptr));
    REQUIRE(zeros.finish().cosine == 1.0);
    REQUIRE(zeros.finish().max_rel_error == 0.0);
    REQUIRE_FALSE(zeros.finish().classifier);  // [N, 1] is not a classifier
    OutputComparison one("o");
    REQUIRE(one.add(f32({1, 1}, {0}), f32({1, 1}, {2}), 1, nullptr));
    REQUIRE(one.finish().cosine == 0.0);
    REQUIRE(std::isinf(one.finish().max_rel_error));
  }
  SECTION("NaN from the compiled side is counted, not hidden in the maxima") {
    OutputComparison c("n");
    REQUIRE(c.add(f32({1, 2}, {1, 2}), f32({1, 2}, {std::numeric_limits<float>::quiet_NaN(), 2}), 1, nullptr));
    REQUIRE(c.finish().nonfinite == 1);
  }
  SECTION("shape mismatch is a typed error") {
    OutputComparison c("s");
    auto st = c.add(f32({1, 2}, {1, 2}), f32({2, 1}, {1, 2}), 1, nullptr);
    REQUIRE_FALSE(st);
    REQUIRE(st.code() == ErrorCode::shape_mismatch);
  }
}

TEST_CASE("verify_plans batches samples, pads the last batch and trims it", "[verify]") {
  const Plan relu = unary_plan(OpKind::Relu, 4);
  // 10 samples in batches of 4: 3 batches, 2 padded samples. Row i is (i-5, 0, -1); after Relu
  // every row's top-1 is class 0 (ties go to the first), which is every label.
  VerifyData data;
  std::vector<float> x;
  for (int i = 0; i < 10; ++i) x.insert(x.end(), {static_cast<float>(i - 5), 0.0f, -1.0f});
  data.inputs.push_back(f32({10, 3}, x));
  std::vector<int64_t> labels(10, 0);
  data.labels = Tensor::from_values<int64_t>({10}, labels);
  data.source = "test rows";

  SECTION("identical plans agree exactly") {
    auto report = verify_plans(relu, relu, data, {1, 2, "relu"});
    REQUIRE(report);
    REQUIRE(report->samples == 10);
    REQUIRE(report->batches == 3);
    REQUIRE(report->padded_samples == 2);
    const OutputMetrics& m = report->outputs.at(0);
    REQUIRE(m.elements == 30);
    REQUIRE(m.max_abs_error == 0.0);
    REQUIRE(m.cosine == Approx(1.0));
    REQUIRE(m.top1_agreement == 1.0);
    REQUIRE(m.reference_correct == 10);
    REQUIRE(m.accuracy_drop == 0.0);
    REQUIRE_THAT(verify_report_json(*report), Catch::Contains("\"padded_samples\": 2"));
  }
  SECTION("a different compiled plan shows up in every metric") {
    // Abs instead of Relu: row i is (|i-5|, 0, 1); only row 5, (0, 0, 1), changes its top-1.
    auto report = verify_plans(unary_plan(OpKind::Abs, 4), relu, data, {1, 1, "relu"});
    REQUIRE(report);
    const OutputMetrics& m = report->outputs.at(0);
    REQUIRE(m.max_abs_error == 5.0);  // row 0: |-5| vs 0
    REQUIRE(m.max_abs_reference == 4.0);
    REQUIRE(m.top1_agree == 9);
    REQUIRE(m.reference_correct == 10);
    REQUIRE(m.compiled_correct == 9);
    REQUIRE(m.accuracy_drop == Approx(0.1));
  }
  SECTION("a reference cache runs the reference once per batch and serves later verifications") {
    ReferenceCache cache;
    VerifyOptions options{1, 2, "relu"};
    options.reference_cache = &cache;
    auto first = verify_plans(relu, relu, data, options);
    REQUIRE(first);
    REQUIRE(cache.outputs.at(4).size() == 3);  // batch 4: three batches' outputs
    // The second verification reads the cache, not the reference plan: an Abs "reference" would
    // differ, the cached Relu outputs do not.
    auto second = verify_plans(relu, unary_plan(OpKind::Abs, 4), data, options);
    REQUIRE(second);
    CHECK(second->outputs.at(0).max_abs_error == 0.0);
    CHECK(cache.outputs.at(4).size() == 3);
    // Another batch size is another entry.
    auto other = verify_plans(unary_plan(OpKind::Relu, 5), unary_plan(OpKind::Relu, 5), data, options);
    REQUIRE(other);
    CHECK(cache.outputs.at(5).size() == 2);
  }
  SECTION("data that does not fit the model is refused with a typed error") {
    VerifyData wrong = data;
    wrong.inputs[0] = f32({2, 2}, {1, 2, 3, 4});
    auto r = verify_plans(relu, relu, wrong);
    REQUIRE_FALSE(r);
    REQUIRE(r.error().code == ErrorCode::shape_mismatch);
    wrong = data;
    wrong.labels = Tensor::from_values<int64_t>({3}, std::vector<int64_t>{0, 1, 2});
    REQUIRE_FALSE(verify_plans(relu, relu, wrong));
  }
  SECTION("random data says so") {
    const VerifyData random = verify_random_data(relu, 5, 7);
    REQUIRE(random.random);
    REQUIRE(random.inputs.at(0).shape() == Shape{5, 3});
    REQUIRE_THAT(random.source, Catch::Contains("seed 7"));
    auto report = verify_plans(relu, relu, random);
    REQUIRE(report);
    REQUIRE(report->random_data);
    REQUIRE(report->padded_samples == 3);
  }
}

TEST_CASE("inputs rounded to 8 bits: the int8 grid of the whole set, on a copy, verify compares them with the clean ones",
          "[verify]") {
  VerifyData data;
  // max |x| = 1.27: s8 with a step of 0.01; 0.004 rounds to 0, 0.006 to 0.01, -1.27 stays.
  data.inputs.push_back(f32({2, 3}, {0.004f, 0.006f, -1.27f, 0.5f, 1.0f, 0.123f}));
  data.source = "rows";
  const VerifyData rounded = round_inputs_to_8_bits(data);
  const float* r = rounded.inputs[0].data<float>();
  CHECK(r[0] == 0.0f);
  CHECK(r[1] == Approx(0.01f));
  CHECK(r[2] == Approx(-1.27f));
  CHECK(r[5] == Approx(0.12f));
  CHECK(data.inputs[0].data<float>()[0] == 0.004f);  // the caller's data is untouched
  CHECK(rounded.source == "rows, rounded to 8 bits");

  // Non-negative data rounds on the u8 grid: max 2.55, step 0.01.
  VerifyData positive;
  positive.inputs.push_back(f32({1, 3}, {2.55f, 0.014f, 0.0f}));
  CHECK(round_inputs_to_8_bits(positive).inputs[0].data<float>()[1] == Approx(0.01f));

  // The reference plan fed the rounded rows beside the compiled side: Relu of (0.004, 0.006, ...)
  // moves there, and the report shows it as input_rounding; the compiled side itself is exact.
  const Plan relu = unary_plan(OpKind::Relu, 2);
  VerifyOptions options{1, 1, "relu"};
  options.sensitivity_data = &rounded;
  auto report = verify_plans(relu, relu, data, options);
  REQUIRE(report);
  CHECK(report->outputs.at(0).max_abs_error == 0.0);
  REQUIRE(report->input_rounding.size() == 1);
  CHECK(report->input_rounding.at(0).max_abs_error == Approx(0.004).margin(1e-6));  // |0.004 - 0| and |0.006 - 0.01|

  VerifyData wrong;
  wrong.inputs.push_back(f32({1, 3}, {0, 0, 0}));
  options.sensitivity_data = &wrong;
  auto refused = verify_plans(relu, relu, data, options);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("sensitivity data"));
}

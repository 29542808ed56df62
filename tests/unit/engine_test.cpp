// The compiled engine against the reference executor.
#include <catch2/catch.hpp>


#include "kernels/engine.h"
#include "kernels/executor.h"
#include "tests/support/op_harness.h"

using namespace kiln;

namespace {

// x[1,3,9,9] -> Conv(4 filters, 3x3) -> Relu -> Add(itself) -> GlobalAveragePool -> y[1,4,1,1]
Plan small_cnn() {
  Plan plan;
  auto slot = [&](Shape shape) {
    plan.slot_types.push_back(ValueType::of(DType::f32, sym_shape_from(shape)));
    return plan.num_slots++;
  };
  const int x = slot({1, 3, 9, 9}), w = slot({4, 3, 3, 3}), b = slot({4}), c = slot({1, 4, 7, 7}),
            r = slot({1, 4, 7, 7}), a = slot({1, 4, 7, 7}), y = slot({1, 4, 1, 1});
  plan.constants = {{w, test::uniform_f32({4, 3, 3, 3}, 2)}, {b, test::uniform_f32({4}, 3)}};
  plan.inputs = {{x, "x", plan.slot_types[static_cast<size_t>(x)]}};
  plan.outputs = {{y, "y"}};
  plan.steps.push_back({OpKind::Conv, {}, {x, w, b}, {c}, "conv"});
  plan.steps.push_back({OpKind::Relu, {}, {c}, {r}, "relu"});
  plan.steps.push_back({OpKind::Add, {}, {r, c}, {a}, "add"});
  plan.steps.push_back({OpKind::GlobalAveragePool, {}, {a}, {y}, "gap"});
  return plan;
}

}  // namespace

TEST_CASE("the engine matches the reference executor and reuses memory", "[engine]") {
  const Plan plan = small_cnn();
  auto engine = Engine::create(plan, {1, nullptr});
  REQUIRE(engine);
  const Tensor x = test::uniform_f32({1, 3, 9, 9}, 1);
  auto want = execute_reference(plan, {x});
  REQUIRE(want);
  for (int repeat = 0; repeat < 2; ++repeat) {  // a second run reuses the (dirty) arena
    auto got = (*engine)->run({x});
    REQUIRE(got);
    REQUIRE(got->at(0).shape() == Shape{1, 4, 1, 1});
    for (int64_t i = 0; i < 4; ++i) REQUIRE(got->at(0).data<float>()[i] == Approx(want->outputs[0].data<float>()[i]).margin(1e-6));
  }
  const EngineMemory& mem = (*engine)->memory();
  REQUIRE(mem.arena_bytes >= mem.lower_bound_bytes);
  REQUIRE(mem.arena_bytes < mem.sum_of_buffers_bytes);
  // One step per plan step, plus at most the conversion of the output to plain float32 (oneDNN
  // keeps a 4-channel result blocked on AVX2 machines, plain on AVX-512 ones).
  int conversions = 0;
  for (const EngineStep& st : (*engine)->steps()) conversions += st.op == "ToPlain";
  INFO((*engine)->steps().back().node);
  REQUIRE(conversions <= 1);
  REQUIRE((*engine)->steps().size() == 4 + static_cast<size_t>(conversions));
  if (conversions == 1) REQUIRE((*engine)->steps().back().node == "gap to plain");
}

TEST_CASE("the engine refuses symbolic shapes and wrong inputs", "[engine]") {
  Plan plan = small_cnn();
  auto engine = Engine::create(plan, {1, nullptr});
  REQUIRE(engine);
  auto wrong = (*engine)->run({test::uniform_f32({1, 3, 8, 8}, 1)});
  REQUIRE_FALSE(wrong);
  REQUIRE(wrong.error().message.find("input 'x' expects float32[1,3,9,9], got float32[1,3,8,8]") != std::string::npos);
  plan.slot_types[0].shape[0] = Dim::named("batch");
  auto symbolic = Engine::create(plan);
  REQUIRE_FALSE(symbolic);
  REQUIRE(symbolic.error().message.find("concrete shapes") != std::string::npos);
}

TEST_CASE("the engine refuses a plan whose recorded types disagree with its ops", "[engine]") {
  // A .kiln file is untrusted input: fast kernels must never see shapes the ops do not produce.
  SECTION("an output shape") {
    Plan plan = small_cnn();
    plan.slot_types[3].shape[2] = Dim(9);  // the conv output c: [1,4,7,7] -> [1,4,9,7]
    auto e = Engine::create(plan, {1, nullptr});
    REQUIRE_FALSE(e);
    REQUIRE(e.error().message.find("node 'conv' (Conv): output 0 is recorded as float32[1,4,9,7] but its inputs "
                                   "make it float32[1,4,7,7]") != std::string::npos);
  }
  SECTION("a weight that is not its slot's shape") {
    Plan plan = small_cnn();
    plan.constants[0].second = test::uniform_f32({4, 3, 2, 2}, 2);
    auto e = Engine::create(plan, {1, nullptr});
    REQUIRE_FALSE(e);
    REQUIRE(e.error().message.find("constant in slot 1 is float32[4,3,2,2] but the slot is float32[4,3,3,3]") !=
            std::string::npos);
  }
  SECTION("an input count the op does not take") {
    Plan plan = small_cnn();
    plan.steps[1].inputs.push_back(0);  // Relu with two inputs
    auto e = Engine::create(plan, {1, nullptr});
    REQUIRE_FALSE(e);
    REQUIRE(e.error().message.find("node 'relu' (Relu): has 2 inputs") != std::string::npos);
  }
}

// x -> conv1 -> c1;  x -> conv2 (+ residual c1, relu) -> c2;  c2 -> conv3 (+ residual c1) -> y.
// conv2's residual c1 is still read by conv3, so it cannot be overwritten; conv3's residual c1
// dies there, so conv3 may write y over it.
TEST_CASE("the engine runs a fused residual in place only when its buffer dies there", "[engine]") {
  Plan plan;
  auto slot = [&](Shape shape) {
    plan.slot_types.push_back(ValueType::of(DType::f32, sym_shape_from(shape)));
    return plan.num_slots++;
  };
  const int x = slot({1, 8, 6, 6}), w1 = slot({8, 8, 3, 3}), w2 = slot({8, 8, 3, 3}), w3 = slot({8, 8, 1, 1}),
            c1 = slot({1, 8, 6, 6}), c2 = slot({1, 8, 6, 6}), c3 = slot({1, 8, 6, 6}), y = slot({1, 8, 1, 1});
  plan.constants = {{w1, test::uniform_f32({8, 8, 3, 3}, 4)}, {w2, test::uniform_f32({8, 8, 3, 3}, 5)},
                    {w3, test::uniform_f32({8, 8, 1, 1}, 6)}};
  plan.inputs = {{x, "x", plan.slot_types[static_cast<size_t>(x)]}};
  plan.outputs = {{y, "y"}};
  Attrs same;
  same.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  Attrs relu = same;
  relu.set("activation", std::string("relu"));
  plan.steps.push_back({OpKind::Conv, same, {x, w1}, {c1}, "conv1"});
  plan.steps.push_back({OpKind::Conv, relu, {x, w2, -1, c1}, {c2}, "conv2"});
  plan.steps.push_back({OpKind::Conv, {}, {c2, w3, -1, c1}, {c3}, "conv3"});
  plan.steps.push_back({OpKind::GlobalAveragePool, {}, {c3}, {y}, "gap"});

  auto engine = Engine::create(plan, {1, nullptr});
  REQUIRE(engine);
  const Tensor input = test::uniform_f32({1, 8, 6, 6}, 7);
  auto want = execute_reference(plan, {input});
  INFO((want ? std::string() : want.error().message));
  REQUIRE(want);
  for (int repeat = 0; repeat < 2; ++repeat) {
    auto got = (*engine)->run({input});
    REQUIRE(got);
    for (int64_t i = 0; i < 8; ++i)
      REQUIRE(got->at(0).data<float>()[i] == Approx(want->outputs[0].data<float>()[i]).margin(1e-5));
  }
  bool fused_by_onednn = false;
  for (const EngineStep& s : (*engine)->steps()) fused_by_onednn |= s.node == "conv3" && s.kernel == "onednn.conv";
  // The reference kernel never runs in place; oneDNN does, and only at conv3.
  REQUIRE((*engine)->memory().in_place_steps == (fused_by_onednn ? 1 : 0));
}

// Plans for kernel tests: a Builder of small Plans (inputs, weights, ops with inferred output
// types) and check_plan, which compiles a Plan on the Engine (2 threads), runs it twice (the
// arena is dirty the second time) and compares with the reference executor:
// max|engine - reference| <= 1e-4 * max|reference|.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>

#include "kernels/engine.h"
#include "kernels/executor.h"

namespace kiln::testing {

inline Tensor rand_tensor(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

inline Attrs attrs(std::initializer_list<std::pair<const char*, AttrValue>> list) {
  Attrs a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

// "x3": appended, since "x" + std::to_string(3) trips GCC 12's -Wrestrict false positive.
inline std::string numbered(const char* prefix, size_t n) {
  std::string s = prefix;
  s += std::to_string(n);
  return s;
}

// Builds a Plan; output types come from each op's infer unless given.
struct Builder {
  Plan plan;
  std::vector<const Tensor*> known;  // constant value per slot
  std::vector<Tensor> inputs;        // the values fed to plan.inputs
  uint32_t seed = 100;

  int slot(DType dt, const Shape& shape) {
    plan.slot_types.push_back(ValueType::of(dt, sym_shape_from(shape)));
    known.push_back(nullptr);
    return plan.num_slots++;
  }
  int input(const Shape& shape, float lo = -1.0f, float hi = 1.0f) {
    const int s = slot(DType::f32, shape);
    plan.inputs.push_back({s, numbered("x", s), plan.slot_types[static_cast<size_t>(s)]});
    inputs.push_back(rand_tensor(shape, ++seed, lo, hi));
    return s;
  }
  int constant(Tensor t) {
    const int s = slot(t.dtype(), t.shape());
    plan.constants.push_back({s, t});
    return s;
  }
  int weight(const Shape& shape, float scale = 1.0f) { return constant(rand_tensor(shape, ++seed, -scale, scale)); }
  // An op with inferred output types.
  std::vector<int> op_n(OpKind op, const Attrs& a, const std::vector<int>& in, size_t max_outputs = 1) {
    InferContext ctx;
    ctx.attrs = &a;
    for (int s : in) {
      ctx.inputs.push_back(s < 0 ? nullptr : &plan.slot_types[static_cast<size_t>(s)]);
      ctx.values.push_back(s < 0 ? nullptr : constant_value(s));
    }
    Status st = op_def(op).infer(ctx);
    INFO((st.is_ok() ? std::string() : st.message()));
    REQUIRE(st);
    std::vector<int> out;
    for (size_t i = 0; i < std::min(max_outputs, ctx.outputs.size()); ++i)
      out.push_back(slot(ctx.outputs[i].dtype, sym_shape_concrete(ctx.outputs[i].shape)));
    plan.steps.push_back({op, a, in, out, std::string(op_name(op)) + std::to_string(plan.steps.size())});
    return out;
  }
  int op(OpKind op, const Attrs& a, const std::vector<int>& in) { return op_n(op, a, in)[0]; }
  // An op with a given output shape (fused forms whose infer may not know the extra inputs).
  int op_shaped(OpKind op, const Attrs& a, const std::vector<int>& in, const Shape& out_shape) {
    const int out = slot(DType::f32, out_shape);
    plan.steps.push_back({op, a, in, {out}, std::string(op_name(op)) + std::to_string(plan.steps.size())});
    return out;
  }
  void output(int s) { plan.outputs.push_back({s, numbered("y", plan.outputs.size())}); }
  const Tensor* constant_value(int s) const {
    for (const auto& [slot, t] : plan.constants)
      if (slot == s) return &t;
    return nullptr;
  }
  Shape concrete(int s) const { return sym_shape_concrete(plan.slot_types[static_cast<size_t>(s)].shape); }
};

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.value_as_double(i)));
  return m;
}

// max|got - want| <= 1e-4 * max|want| (NaN in got fails).
inline void require_close(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  double diff = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.value_as_double(i), w = want.value_as_double(i);
    diff = std::max(diff, std::isnan(g) || std::isnan(w) ? INFINITY : std::fabs(g - w));
  }
  const double bound = 1e-4 * max_abs(want);
  INFO("max|diff| " << diff << ", bound " << bound);
  REQUIRE(diff <= std::max(bound, 1e-30));
}

inline std::string describe_steps(const Engine& e) {
  std::string s;
  for (const EngineStep& st : e.steps()) s += st.node + " -> " + st.kernel + " [" + st.output_layout + "]\n";
  return s;
}

// Compiles `plan` (2 threads), runs it twice and compares with `want` (default: the reference
// executor on the same plan). Returns the engine for layout checks.
inline std::unique_ptr<Engine> check_plan(const Plan& plan, const std::vector<Tensor>& inputs,
                                   std::optional<std::vector<Tensor>> want = std::nullopt) {
  auto engine = Engine::create(plan, {2, nullptr});
  INFO((engine ? std::string() : engine.error().message));
  REQUIRE(engine);
  INFO(describe_steps(**engine));
  if (!want) {
    auto ref = execute_reference(plan, inputs);
    INFO((ref ? std::string() : ref.error().message));
    REQUIRE(ref);
    want = ref->outputs;
  }
  for (int repeat = 0; repeat < 2; ++repeat) {
    auto got = (*engine)->run(inputs);
    INFO((got ? std::string() : got.error().message));
    REQUIRE(got);
    REQUIRE(got->size() == want->size());
    for (size_t i = 0; i < got->size(); ++i) require_close(got->at(i), want->at(i));
  }
  return std::move(*engine);
}

inline std::unique_ptr<Engine> check(Builder& b) { return check_plan(b.plan, b.inputs); }

inline int count_kernel(const Engine& e, const std::string& prefix) {
  int n = 0;
  for (const EngineStep& st : e.steps()) n += st.kernel.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

}  // namespace kiln::testing

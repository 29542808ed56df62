// Helpers shared by the reference-kernel unit tests (tests/unit/reference_*_test.cpp): deterministic
// test values, tensor makers, running one op through a one-step Plan, calling an op's infer
// directly, and element-wise checks.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/executor.h"
#include "kernels/op_def.h"

namespace kiln::test {

// ---- Deterministic test values ----

// The parameters of `values`: numbers in [-radius, radius), and a salt mixed into the seed. Each
// test file names its own, so that its tests keep the numbers they were written against.
struct ValueRange {
  int radius;
  uint32_t salt;
};

// `n` deterministic pseudo-random floats in [-range.radius, range.radius), multiples of 1/1024;
// `seed` picks the sequence.
inline std::vector<float> values(int64_t n, int seed, ValueRange range) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = 2654435761u * static_cast<uint32_t>(seed) + range.salt;
  const uint32_t steps = static_cast<uint32_t>(range.radius) * 2048u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 8) % steps) / 1024.0f - static_cast<float>(range.radius);
  }
  return v;
}

// ---- Tensor makers ----

template <typename T>
Tensor make(Shape shape, const std::vector<T>& v) {
  return Tensor::from_values<T>(std::move(shape), std::span<const T>(v));
}
inline Tensor f32(Shape shape, const std::vector<float>& v) { return make<float>(std::move(shape), v); }
inline Tensor i32(Shape shape, const std::vector<int32_t>& v) { return make<int32_t>(std::move(shape), v); }
inline Tensor i64(Shape shape, const std::vector<int64_t>& v) { return make<int64_t>(std::move(shape), v); }
// A 1-D int64 tensor holding `v`.
inline Tensor i64s(const std::vector<int64_t>& v) { return i64({static_cast<int64_t>(v.size())}, v); }
inline Tensor boolean(Shape shape, const std::vector<bool>& v) {
  Tensor t = Tensor::zeros(DType::boolean, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}

// A float32 tensor of `values(numel, seed, range)`.
inline Tensor rand_f32(Shape shape, int seed, ValueRange range) {
  const std::vector<float> v = values(shape_numel(shape), seed, range);
  return f32(std::move(shape), v);
}

// A float32 tensor of full-precision uniform values in [-1, 1) (std::mt19937 seeded with `seed`): where
// values on rand_f32's coarse grid would make a reordered or fused sum exact by luck.
inline Tensor uniform_f32(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// A tensor of `dt` whose element i holds (i % 97) converted to dt (bool: i odd).
inline Tensor iota(DType dt, Shape shape) {
  Tensor t = Tensor::zeros(dt, std::move(shape));
  visit_dtype(dt, [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) p[i] = (i % 2) == 1;
      else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) p[i] = T(static_cast<float>(i % 97));
      else p[i] = static_cast<T>(i % 97);
    }
  });
  return t;
}
// Element i of `iota(dt, ...)` as a double.
inline double iota_value(DType dt, int64_t i) {
  return dt == DType::boolean ? static_cast<double>(i % 2) : static_cast<double>(i % 97);
}

// ---- Types and attributes ----

inline ValueType f32_type(SymShape s) { return ValueType::of(DType::f32, std::move(s)); }
inline ValueType i64_type(SymShape s) { return ValueType::of(DType::i64, std::move(s)); }
inline const Dim kBatch = Dim::named("batch");

// "[batch,13]", or "unranked".
inline std::string shape_of(const ValueType& t) { return t.rank_known ? sym_shape_to_string(t.shape) : "unranked"; }

inline Attrs attrs_of(std::initializer_list<std::pair<const char*, AttrValue>> list) {
  Attrs a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

// ---- Calling an op ----

// Runs one op through a one-step Plan with `num_outputs` outputs. Absent optional inputs are
// std::nullopt.
inline Result<std::vector<Tensor>> run_op(OpKind op, const Attrs& attrs,
                                          const std::vector<std::optional<Tensor>>& inputs, int num_outputs = 1,
                                          const ExecuteOptions& options = {}) {
  Plan plan;
  PlanStep step;
  step.op = op;
  step.attrs = attrs;
  step.name = "test";
  std::vector<Tensor> given;
  int slot = 0;
  for (const auto& t : inputs) {
    if (!t) {
      step.inputs.push_back(-1);
      continue;
    }
    const ValueType type = ValueType::of(t->dtype(), sym_shape_from(t->shape()));
    plan.inputs.push_back(PlanInput{slot, "in" + std::to_string(slot), type});
    given.push_back(*t);
    step.inputs.push_back(slot++);
  }
  for (int i = 0; i < num_outputs; ++i) {
    plan.outputs.push_back({slot, "out" + std::to_string(i)});
    step.outputs.push_back(slot++);
  }
  plan.num_slots = slot;
  plan.steps.push_back(std::move(step));
  KILN_ASSIGN(result, execute_reference(plan, given, options));
  return std::move(result.outputs);
}

// run_op for a one-output op: its output.
inline Result<Tensor> run_op1(OpKind op, const Attrs& attrs, const std::vector<std::optional<Tensor>>& inputs) {
  KILN_ASSIGN(outputs, run_op(op, attrs, inputs));
  return outputs.at(0);
}

// Calls an op's infer directly. `types` entries that are std::nullopt are absent inputs; `known`
// gives the value of some inputs (nullptr where unknown).
inline Result<std::vector<ValueType>> infer_op(OpKind op, const Attrs& attrs,
                                               const std::vector<std::optional<ValueType>>& types,
                                               std::vector<const Tensor*> known = {}) {
  InferContext ctx;
  ctx.attrs = &attrs;
  for (const auto& t : types) ctx.inputs.push_back(t ? &*t : nullptr);
  known.resize(types.size(), nullptr);
  ctx.values = known;
  KILN_TRY(op_def(op).infer(ctx));
  return ctx.outputs;
}

// infer_op for a one-output op (no input values known): its output type.
inline Result<ValueType> infer_op1(OpKind op, const Attrs& attrs, const std::vector<std::optional<ValueType>>& types) {
  KILN_ASSIGN(outputs, infer_op(op, attrs, types));
  return outputs.at(0);
}

// ---- Checks and index helpers ----

// Every element of `got` is within `tol` (absolute or relative) of `want`; a NaN in `want`
// requires a NaN.
inline void require_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-5) {
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i);
    const double w = want[static_cast<size_t>(i)];
    if (std::isnan(w)) REQUIRE(std::isnan(got.value_as_double(i)));
    else REQUIRE(got.value_as_double(i) == Approx(w).margin(tol).epsilon(tol));
  }
}

// Row-major multi-index of flat position i in `shape`, and back.
inline std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}
inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
  return off;
}

}  // namespace kiln::test

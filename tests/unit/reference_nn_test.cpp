// Unit tests for the nn reference kernels: Gemm, MatMul, BatchNormalization,
// InstanceNormalization, LayerNormalization, Softmax, LogSoftmax and the Reduce* ops.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/executor.h"
#include "kernels/op_def.h"
#include "tests/support/op_harness.h"

namespace kiln {
namespace {

using namespace test;

// This file's pseudo-random test values: [-2, 2).
constexpr ValueRange kValues{2, 12345u};

// ---- Gemm ----

TEST_CASE("Gemm infer", "[nn]") {
  SECTION("symbolic batch and transposes") {
    auto r = infer_op(OpKind::Gemm, {}, {f32_type({kBatch, 7}), f32_type({7, 13})});
    REQUIRE(r);
    CHECK(shape_of(r->at(0)) == "[batch,13]");
    r = infer_op(OpKind::Gemm, attrs_of({{"transA", int64_t{1}}, {"transB", int64_t{1}}}),
                 {f32_type({7, kBatch}), f32_type({13, 7}), f32_type({13})});
    REQUIRE(r);
    CHECK(shape_of(r->at(0)) == "[batch,13]");
    r = infer_op(OpKind::Gemm, {}, {ValueType::unranked(DType::f32), f32_type({7, 13})});
    REQUIRE(r);
    CHECK(shape_of(r->at(0)) == "[?,13]");
  }
  SECTION("errors") {
    auto r = infer_op(OpKind::Gemm, {}, {f32_type({5, 7}), f32_type({8, 13})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::shape_mismatch);
    CHECK(r.error().message.find("K=7") != std::string::npos);
    r = infer_op(OpKind::Gemm, {}, {f32_type({2, 5, 7}), f32_type({7, 13})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::shape_mismatch);
    r = infer_op(OpKind::Gemm, {}, {f32_type({5, 7}), f32_type({7, 13}), f32_type({5})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::shape_mismatch);
    r = infer_op(OpKind::Gemm, attrs_of({{"transA", int64_t{2}}}), {f32_type({5, 7}), f32_type({7, 13})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::invalid_argument);
    r = infer_op(OpKind::Gemm, {}, {i64_type({5, 7}), i64_type({7, 13})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::unsupported);
  }
}

TEST_CASE("Gemm run", "[nn]") {
  const int64_t m = 13, k = 7, n = 5;
  const bool ta = GENERATE(false, true);
  const bool tb = GENERATE(false, true);
  const Shape c_shape = GENERATE(Shape{}, Shape{n}, Shape{m, 1}, Shape{1, n}, Shape{m, n});
  const Tensor a = rand_f32(ta ? Shape{k, m} : Shape{m, k}, 1, kValues);
  const Tensor b = rand_f32(tb ? Shape{n, k} : Shape{k, n}, 2, kValues);
  const Tensor c = rand_f32(c_shape, 3, kValues);
  const float alpha = 0.5f, beta = 2.0f;
  auto r = run_op(OpKind::Gemm,
                  attrs_of({{"alpha", alpha}, {"beta", beta}, {"transA", int64_t{ta}}, {"transB", int64_t{tb}}}),
                  {a, b, c});
  REQUIRE(r);
  REQUIRE(r->at(0).shape() == Shape{m, n});
  std::vector<double> want;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += a.value_as_double(ta ? p * m + i : i * k + p) * b.value_as_double(tb ? j * k + p : p * n + j);
      const int64_t ci = c_shape.empty()           ? 0
                         : c_shape.size() == 1     ? j
                         : c_shape == Shape{m, 1}  ? i
                         : c_shape == Shape{1, n}  ? j
                                                   : i * n + j;
      want.push_back(alpha * s + beta * c.value_as_double(ci));
    }
  require_close(r->at(0), want);
}

TEST_CASE("Gemm without C", "[nn]") {
  auto r = run_op(OpKind::Gemm, {}, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 1}, {1, 0, -1}), std::nullopt});
  REQUIRE(r);
  require_close(r->at(0), {-2, -2});
}

// ---- MatMul ----

TEST_CASE("MatMul infer", "[nn]") {
  auto shape = [](SymShape a, SymShape b) {
    auto r = infer_op(OpKind::MatMul, {}, {f32_type(std::move(a)), f32_type(std::move(b))});
    return r ? shape_of(r->at(0)) : "error: " + r.error().message;
  };
  CHECK(shape({kBatch, 13, 7}, {7, 5}) == "[batch,13,5]");
  CHECK(shape({7}, {7}) == "[]");
  CHECK(shape({7}, {2, 7, 5}) == "[2,5]");
  CHECK(shape({3, 13, 7}, {7}) == "[3,13]");
  CHECK(shape({2, 1, 3, 4}, {5, 4, 6}) == "[2,5,3,6]");
  CHECK(shape({13, Dim::unknown()}, {Dim::unknown(), 5}) == "[13,5]");
  auto r = infer_op(OpKind::MatMul, {}, {ValueType::unranked(DType::f32), f32_type({7, 5})});
  REQUIRE(r);
  CHECK(!r->at(0).rank_known);

  r = infer_op(OpKind::MatMul, {}, {f32_type({13, 7}), f32_type({6, 5})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::shape_mismatch);
  r = infer_op(OpKind::MatMul, {}, {f32_type({2, 13, 7}), f32_type({3, 7, 5})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::shape_mismatch);
  r = infer_op(OpKind::MatMul, {}, {f32_type({}), f32_type({3})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::shape_mismatch);
  r = infer_op(OpKind::MatMul, {}, {f32_type({3}), i64_type({3})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::invalid_argument);
}

// Naive numpy matmul for operands of rank >= 2 whose batch dims broadcast.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, const Shape& out) {
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape batch(out.begin(), out.end() - 2);
  std::vector<double> want;
  const int64_t nb = shape_numel(batch);
  for (int64_t bi = 0; bi < nb; ++bi) {
    // Decompose bi into batch coordinates and map them into each operand (size-1 dims broadcast).
    int64_t oa = 0, ob = 0, rest = bi, mul_a = 1, mul_b = 1;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      const int64_t coord = rest % batch[static_cast<size_t>(d)];
      rest /= batch[static_cast<size_t>(d)];
      const int64_t da = d - static_cast<int64_t>(batch.size()) + static_cast<int64_t>(sa.size()) - 2;
      const int64_t db = d - static_cast<int64_t>(batch.size()) + static_cast<int64_t>(sb.size()) - 2;
      if (da >= 0) {
        const int64_t size = sa[static_cast<size_t>(da)];
        oa += (size == 1 ? 0 : coord) * mul_a;
        mul_a *= size;
      }
      if (db >= 0) {
        const int64_t size = sb[static_cast<size_t>(db)];
        ob += (size == 1 ? 0 : coord) * mul_b;
        mul_b *= size;
      }
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += a.value_as_double(oa * m * k + i * k + p) * b.value_as_double(ob * k * n + p * n + j);
        want.push_back(s);
      }
  }
  return want;
}

TEST_CASE("MatMul run with batch broadcasting", "[nn]") {
  const Tensor a = rand_f32({2, 1, 13, 7}, 4, kValues);
  const Tensor b = rand_f32({3, 7, 5}, 5, kValues);
  auto r = run_op(OpKind::MatMul, {}, {a, b});
  REQUIRE(r);
  REQUIRE(r->at(0).shape() == Shape{2, 3, 13, 5});
  require_close(r->at(0), naive_matmul(a, b, {2, 3, 13, 5}));

  const Tensor c = rand_f32({13, 7}, 6, kValues);
  r = run_op(OpKind::MatMul, {}, {c, b});
  REQUIRE(r);
  REQUIRE(r->at(0).shape() == Shape{3, 13, 5});
  require_close(r->at(0), naive_matmul(c, b, {3, 13, 5}));
}

TEST_CASE("MatMul run with 1-D operands", "[nn]") {
  const Tensor v = f32({3}, {1, 2, 3});
  const Tensor m = f32({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  auto r = run_op(OpKind::MatMul, {}, {v, v});
  REQUIRE(r);
  CHECK(r->at(0).shape().empty());
  require_close(r->at(0), {14});
  r = run_op(OpKind::MatMul, {}, {v, m});  // [3] x [2,3,2] -> [2,2]
  REQUIRE(r);
  CHECK(r->at(0).shape() == Shape{2, 2});
  require_close(r->at(0), {22, 28, 58, 64});
  const Tensor w = f32({2}, {1, -1});
  r = run_op(OpKind::MatMul, {}, {m, w});  // [2,3,2] x [2] -> [2,3]
  REQUIRE(r);
  CHECK(r->at(0).shape() == Shape{2, 3});
  require_close(r->at(0), {-1, -1, -1, -1, -1, -1});
}

TEST_CASE("MatMul run int64", "[nn]") {
  auto r = run_op(OpKind::MatMul, {}, {i64({2, 2}, {1, 2, 3, 4}), i64({2, 1}, {-5, 6})});
  REQUIRE(r);
  REQUIRE(r->at(0).dtype() == DType::i64);
  CHECK(r->at(0).data<int64_t>()[0] == 7);
  CHECK(r->at(0).data<int64_t>()[1] == 9);
}

// ---- BatchNormalization ----

TEST_CASE("BatchNormalization", "[nn]") {
  const Tensor x = rand_f32({2, 3, 7}, 7, kValues);
  const Tensor scale = f32({3}, {1.5f, -2.0f, 0.5f});
  const Tensor bias = f32({3}, {0.1f, 0.2f, -0.3f});
  const Tensor mean = f32({3}, {0.5f, -0.25f, 1.0f});
  const Tensor var = f32({3}, {1.0f, 4.0f, 0.25f});
  SECTION("run") {
    const float eps = 1e-3f;
    auto r = run_op(OpKind::BatchNormalization, attrs_of({{"epsilon", eps}}), {x, scale, bias, mean, var});
    REQUIRE(r);
    std::vector<double> want;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t c = (i / 7) % 3;
      want.push_back((x.value_as_double(i) - mean.value_as_double(c)) / std::sqrt(var.value_as_double(c) + eps) *
                         scale.value_as_double(c) +
                     bias.value_as_double(c));
    }
    require_close(r->at(0), want);
  }
  SECTION("rank 1 input has one channel") {
    auto one = f32({1}, {2.0f});
    auto r = run_op(OpKind::BatchNormalization, attrs_of({{"epsilon", 0.0f}}),
                    {f32({3}, {1, 2, 3}), one, f32({1}, {1.0f}), f32({1}, {2.0f}), f32({1}, {4.0f})});
    REQUIRE(r);
    require_close(r->at(0), {0.0, 1.0, 2.0});
  }
  SECTION("infer") {
    const auto c = f32_type({3});
    auto r = infer_op(OpKind::BatchNormalization, {}, {f32_type({kBatch, 3, 13, 7}), c, c, c, c});
    REQUIRE(r);
    CHECK(shape_of(r->at(0)) == "[batch,3,13,7]");
    r = infer_op(OpKind::BatchNormalization, {}, {f32_type({kBatch, 4, 13}), c, c, c, c});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::shape_mismatch);
    r = infer_op(OpKind::BatchNormalization, attrs_of({{"training_mode", int64_t{1}}}),
                 {f32_type({kBatch, 3}), c, c, c, c});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::unsupported);
    r = infer_op(OpKind::BatchNormalization, attrs_of({{"epsilon", -1.0f}}), {f32_type({kBatch, 3}), c, c, c, c});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::invalid_argument);
  }
}

// ---- InstanceNormalization ----

TEST_CASE("InstanceNormalization", "[nn]") {
  const Tensor x = rand_f32({2, 3, 13}, 8, kValues);
  const Tensor scale = f32({3}, {1.5f, -2.0f, 0.5f});
  const Tensor bias = f32({3}, {0.1f, 0.2f, -0.3f});
  auto r = run_op(OpKind::InstanceNormalization, {}, {x, scale, bias});
  REQUIRE(r);
  std::vector<double> want;
  for (int64_t row = 0; row < 6; ++row) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < 13; ++i) mean += x.value_as_double(row * 13 + i) / 13;
    for (int64_t i = 0; i < 13; ++i) var += std::pow(x.value_as_double(row * 13 + i) - mean, 2) / 13;
    for (int64_t i = 0; i < 13; ++i)
      want.push_back((x.value_as_double(row * 13 + i) - mean) / std::sqrt(var + 1e-5) *
                         scale.value_as_double(row % 3) +
                     bias.value_as_double(row % 3));
  }
  require_close(r->at(0), want, 1e-4);

  auto t = infer_op(OpKind::InstanceNormalization, {}, {f32_type({kBatch, 3, 13, 7}), f32_type({3}), f32_type({3})});
  REQUIRE(t);
  CHECK(shape_of(t->at(0)) == "[batch,3,13,7]");
  t = infer_op(OpKind::InstanceNormalization, {}, {f32_type({kBatch, 3, 13}), f32_type({2}), f32_type({3})});
  REQUIRE(!t);
  CHECK(t.error().code == ErrorCode::shape_mismatch);
  t = infer_op(OpKind::InstanceNormalization, {}, {f32_type({3}), f32_type({3}), f32_type({3})});
  REQUIRE(!t);
  CHECK(t.error().code == ErrorCode::shape_mismatch);
}

// ---- LayerNormalization ----

TEST_CASE("LayerNormalization run", "[nn]") {
  const Tensor x = rand_f32({3, 13, 7}, 9, kValues);
  const int64_t axis = GENERATE(1, -1);
  const bool with_bias = GENERATE(false, true);
  const int64_t cols = axis == 1 ? 13 * 7 : 7;
  const Shape norm_shape = axis == 1 ? Shape{13, 7} : Shape{7};
  const Tensor scale = rand_f32(norm_shape, 10, kValues);
  const Tensor bias = rand_f32(norm_shape, 11, kValues);
  const float eps = 1e-3f;
  auto r = run_op(OpKind::LayerNormalization, attrs_of({{"axis", axis}, {"epsilon", eps}}),
                  {x, scale, with_bias ? std::optional<Tensor>(bias) : std::nullopt}, 3);
  REQUIRE(r);
  const Shape stats_shape = axis == 1 ? Shape{3, 1, 1} : Shape{3, 13, 1};
  CHECK(r->at(1).shape() == stats_shape);
  CHECK(r->at(2).shape() == stats_shape);
  std::vector<double> want, want_mean, want_inv;
  for (int64_t row = 0; row < x.numel() / cols; ++row) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < cols; ++i) mean += x.value_as_double(row * cols + i) / static_cast<double>(cols);
    for (int64_t i = 0; i < cols; ++i)
      var += std::pow(x.value_as_double(row * cols + i) - mean, 2) / static_cast<double>(cols);
    const double inv = 1 / std::sqrt(var + eps);
    want_mean.push_back(mean);
    want_inv.push_back(inv);
    for (int64_t i = 0; i < cols; ++i)
      want.push_back((x.value_as_double(row * cols + i) - mean) * inv * scale.value_as_double(i) +
                     (with_bias ? bias.value_as_double(i) : 0.0));
  }
  require_close(r->at(0), want, 1e-4);
  require_close(r->at(1), want_mean, 1e-5);
  require_close(r->at(2), want_inv, 1e-4);
}

TEST_CASE("LayerNormalization infer", "[nn]") {
  auto r = infer_op(OpKind::LayerNormalization, attrs_of({{"axis", int64_t{-2}}}),
                    {f32_type({kBatch, 13, 7}), f32_type({13, 7}), f32_type({7})});
  REQUIRE(r);
  REQUIRE(r->size() == 3);
  CHECK(shape_of(r->at(0)) == "[batch,13,7]");
  CHECK(shape_of(r->at(1)) == "[batch,1,1]");
  CHECK(shape_of(r->at(2)) == "[batch,1,1]");
  r = infer_op(OpKind::LayerNormalization, {}, {ValueType::unranked(DType::f32), f32_type({7})});
  REQUIRE(r);
  CHECK(!r->at(0).rank_known);
  CHECK(!r->at(1).rank_known);

  r = infer_op(OpKind::LayerNormalization, {}, {f32_type({kBatch, 13, 7}), f32_type({13})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::shape_mismatch);
  r = infer_op(OpKind::LayerNormalization, attrs_of({{"axis", int64_t{3}}}),
               {f32_type({kBatch, 13, 7}), f32_type({7})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::invalid_argument);
  r = infer_op(OpKind::LayerNormalization, {}, {f32_type({}), f32_type({})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::shape_mismatch);
}

// ---- Softmax / LogSoftmax ----

// Softmax of x viewed as [outer, n, inner] along n.
std::vector<double> naive_softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  std::vector<double> out(static_cast<size_t>(x.numel()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < n; ++k) mx = std::max(mx, x.value_as_double((o * n + k) * inner + i));
      for (int64_t k = 0; k < n; ++k) sum += std::exp(x.value_as_double((o * n + k) * inner + i) - mx);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t idx = (o * n + k) * inner + i;
        const double e = x.value_as_double(idx) - mx;
        out[static_cast<size_t>(idx)] = log ? e - std::log(sum) : std::exp(e) / sum;
      }
    }
  return out;
}

TEST_CASE("Softmax and LogSoftmax run", "[nn]") {
  const bool log = GENERATE(false, true);
  const OpKind op = log ? OpKind::LogSoftmax : OpKind::Softmax;
  const Tensor x = rand_f32({3, 13, 7}, 12, kValues);
  SECTION("opset 13: one axis") {
    auto r = run_op(op, {}, {x});  // default axis -1
    REQUIRE(r);
    require_close(r->at(0), naive_softmax(x, 39, 7, 1, log));
    r = run_op(op, attrs_of({{"axis", int64_t{1}}}), {x});
    REQUIRE(r);
    require_close(r->at(0), naive_softmax(x, 3, 13, 7, log));
    r = run_op(op, attrs_of({{"axis", int64_t{-3}}}), {x});
    REQUIRE(r);
    require_close(r->at(0), naive_softmax(x, 1, 3, 91, log));
  }
  SECTION("legacy_2d: every dim from axis on") {
    auto r = run_op(op, attrs_of({{"axis", int64_t{1}}, {"legacy_2d", int64_t{1}}}), {x});
    REQUIRE(r);
    require_close(r->at(0), naive_softmax(x, 3, 91, 1, log));
    r = run_op(op, attrs_of({{"axis", int64_t{0}}, {"legacy_2d", int64_t{1}}}), {x});
    REQUIRE(r);
    require_close(r->at(0), naive_softmax(x, 1, 273, 1, log));
  }
  SECTION("large inputs stay finite") {
    auto r = run_op(op, {}, {f32({1, 3}, {10000.0f, 10001.0f, 10002.0f})});
    REQUIRE(r);
    const double s = 1 + std::exp(-1.0) + std::exp(-2.0);
    if (log) require_close(r->at(0), {-2 - std::log(s), -1 - std::log(s), -std::log(s)});
    else require_close(r->at(0), {std::exp(-2.0) / s, std::exp(-1.0) / s, 1 / s});
  }
}

TEST_CASE("Softmax infer", "[nn]") {
  auto r = infer_op(OpKind::Softmax, attrs_of({{"axis", int64_t{1}}}), {f32_type({kBatch, 13, 7})});
  REQUIRE(r);
  CHECK(shape_of(r->at(0)) == "[batch,13,7]");
  r = infer_op(OpKind::LogSoftmax, {}, {ValueType::unranked(DType::f32)});
  REQUIRE(r);
  CHECK(!r->at(0).rank_known);
  r = infer_op(OpKind::Softmax, attrs_of({{"axis", int64_t{3}}}), {f32_type({kBatch, 13, 7})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::invalid_argument);
  r = infer_op(OpKind::Softmax, attrs_of({{"legacy_2d", int64_t{2}}}), {f32_type({kBatch, 13, 7})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::invalid_argument);
  r = infer_op(OpKind::Softmax, {}, {i64_type({3})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::unsupported);
}

// ---- Reduce* ----

TEST_CASE("Reduce infer", "[nn]") {
  const ValueType x = f32_type({kBatch, 13, 7});
  const Tensor axes = i64({2}, {-1, 1});
  const Tensor no_axes = i64({0}, {});
  auto infer = [&](OpKind op, const Attrs& attrs, const Tensor* axes_value,
                   std::optional<ValueType> input = std::nullopt) {
    std::vector<std::optional<ValueType>> types{input ? *input : x};
    if (axes_value) types.push_back(i64_type(sym_shape_from(axes_value->shape())));
    auto r = infer_op(op, attrs, types, {nullptr, axes_value});
    return r ? shape_of(r->at(0)) : "error: " + r.error().message;
  };
  const Attrs keep0 = attrs_of({{"keepdims", int64_t{0}}});
  CHECK(infer(OpKind::ReduceSum, {}, &axes) == "[batch,1,1]");
  CHECK(infer(OpKind::ReduceMean, keep0, &axes) == "[batch]");
  CHECK(infer(OpKind::ReduceMax, {}, nullptr) == "[1,1,1]");
  CHECK(infer(OpKind::ReduceMin, keep0, nullptr) == "[]");
  CHECK(infer(OpKind::ReduceSum, keep0, &no_axes) == "[]");
  CHECK(infer(OpKind::ReduceSum, attrs_of({{"noop_with_empty_axes", int64_t{1}}}), &no_axes) == "[batch,13,7]");
  CHECK(infer(OpKind::ReduceSum, attrs_of({{"noop_with_empty_axes", int64_t{1}}}), nullptr) == "[batch,13,7]");
  CHECK(infer(OpKind::ReduceSum, keep0, nullptr, ValueType::unranked(DType::f32)) == "[]");
  CHECK(infer(OpKind::ReduceSum, {}, &axes, ValueType::unranked(DType::f32)) == "unranked");

  // Axes present but unknown: rank kept with keepdims, unranked otherwise.
  auto unknown_axes = [&](const Attrs& attrs) {
    auto r = infer_op(OpKind::ReduceSum, attrs, {x, i64_type({2})});
    return r ? shape_of(r->at(0)) : "error: " + r.error().message;
  };
  CHECK(unknown_axes({}) == "[?,?,?]");
  CHECK(unknown_axes(keep0) == "unranked");

  const Tensor dup = i64({2}, {1, -2});
  const Tensor out_of_range = i64({1}, {3});
  CHECK(infer(OpKind::ReduceSum, {}, &dup).find("more than once") != std::string::npos);
  CHECK(infer(OpKind::ReduceSum, {}, &out_of_range).find("out of range") != std::string::npos);
  auto r = infer_op(OpKind::ReduceMean, {}, {i64_type({3})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::unsupported);
  r = infer_op(OpKind::ReduceSum, attrs_of({{"keepdims", int64_t{2}}}), {x});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::invalid_argument);
  r = infer_op(OpKind::ReduceSum, {}, {x, f32_type({1})});
  REQUIRE(!r);
  CHECK(r.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("Reduce run float32", "[nn]") {
  const Tensor x = rand_f32({3, 13, 7}, 13, kValues);
  const OpKind op = GENERATE(OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin);
  const bool keepdims = GENERATE(false, true);
  INFO(op_name(op) << " keepdims=" << keepdims);
  // Reduce over axes {0, 2}: one result per middle index.
  auto r = run_op(op, attrs_of({{"keepdims", int64_t{keepdims}}}), {x, i64({2}, {-1, 0})});
  REQUIRE(r);
  CHECK(r->at(0).shape() == (keepdims ? Shape{1, 13, 1} : Shape{13}));
  std::vector<double> want;
  for (int64_t j = 0; j < 13; ++j) {
    double sum = 0, mx = -INFINITY, mn = INFINITY;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t k = 0; k < 7; ++k) {
        const double v = x.value_as_double((i * 13 + j) * 7 + k);
        sum += v;
        mx = std::max(mx, v);
        mn = std::min(mn, v);
      }
    if (op == OpKind::ReduceSum) want.push_back(sum);
    else if (op == OpKind::ReduceMean) want.push_back(sum / 21);
    else want.push_back(op == OpKind::ReduceMax ? mx : mn);
  }
  require_close(r->at(0), want);

  // No axes: everything.
  r = run_op(op, {}, {x});
  REQUIRE(r);
  CHECK(r->at(0).shape() == Shape{1, 1, 1});
}

TEST_CASE("Reduce run details", "[nn]") {
  const Tensor x = i64({2, 3}, {1, -7, 3, 4, 5, -6});
  SECTION("int64") {
    auto r = run_op(OpKind::ReduceSum, {}, {x, i64({1}, {1})});
    REQUIRE(r);
    CHECK(r->at(0).dtype() == DType::i64);
    CHECK(r->at(0).shape() == Shape{2, 1});
    CHECK(r->at(0).data<int64_t>()[0] == -3);
    CHECK(r->at(0).data<int64_t>()[1] == 3);
    r = run_op(OpKind::ReduceMax, attrs_of({{"keepdims", int64_t{0}}}), {x, i64({1}, {0})});
    REQUIRE(r);
    CHECK(r->at(0).data<int64_t>()[0] == 4);
    CHECK(r->at(0).data<int64_t>()[1] == 5);
    CHECK(r->at(0).data<int64_t>()[2] == 3);
    r = run_op(OpKind::ReduceMin, attrs_of({{"keepdims", int64_t{0}}}), {x});
    REQUIRE(r);
    CHECK(r->at(0).shape().empty());
    CHECK(r->at(0).data<int64_t>()[0] == -7);
  }
  SECTION("empty axes") {
    auto r = run_op(OpKind::ReduceSum, attrs_of({{"noop_with_empty_axes", int64_t{1}}}), {x, i64({0}, {})});
    REQUIRE(r);
    CHECK(r->at(0).shape() == Shape{2, 3});
    CHECK(r->at(0).data<int64_t>()[1] == -7);
    r = run_op(OpKind::ReduceSum, {}, {x, i64({0}, {})});
    REQUIRE(r);
    CHECK(r->at(0).shape() == Shape{1, 1});
    CHECK(r->at(0).data<int64_t>()[0] == 0);
  }
  SECTION("empty reduction sets") {
    const Tensor e = Tensor::zeros(DType::f32, {0, 3});
    auto r = run_op(OpKind::ReduceSum, {}, {e, i64({1}, {0})});
    REQUIRE(r);
    require_close(r->at(0), {0, 0, 0});
    r = run_op(OpKind::ReduceMax, {}, {e, i64({1}, {0})});
    REQUIRE(r);
    CHECK(r->at(0).value_as_double(0) == -INFINITY);
    r = run_op(OpKind::ReduceMin, {}, {e, i64({1}, {0})});
    REQUIRE(r);
    CHECK(r->at(0).value_as_double(0) == INFINITY);
    r = run_op(OpKind::ReduceMean, {}, {e, i64({1}, {0})});
    REQUIRE(r);
    CHECK(std::isnan(r->at(0).value_as_double(0)));
  }
  SECTION("NaN propagates through max and min") {
    const Tensor n = f32({3}, {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f});
    auto r = run_op(OpKind::ReduceMax, {}, {n});
    REQUIRE(r);
    CHECK(std::isnan(r->at(0).value_as_double(0)));
    r = run_op(OpKind::ReduceMin, {}, {n});
    REQUIRE(r);
    CHECK(std::isnan(r->at(0).value_as_double(0)));
  }
}

}  // namespace
}  // namespace kiln

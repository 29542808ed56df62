// Unit tests for the data-movement reference kernels: Flatten, Reshape, Transpose, Concat, Split,
// Slice, Squeeze, Unsqueeze, Expand, Tile, Pad, Gather, Shape, Constant, ConstantOfShape, Range
// and Resize.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/executor.h"
#include "kernels/op_def.h"
#include "tests/support/op_harness.h"

namespace kiln {
namespace {

using namespace test;

// ---- helpers ----

const std::vector<DType> kAllDtypes = {DType::f32, DType::f16, DType::bf16, DType::i8,
                                       DType::u8,  DType::i32, DType::i64,  DType::boolean};

// Runs a one-output op and returns its output; fails the test on error.
Tensor run1(OpKind op, const Attrs& attrs, const std::vector<std::optional<Tensor>>& inputs) {
  auto r = run_op(op, attrs, inputs);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  return r->at(0);
}

// Infers one output and returns its shape string, or "error: <code>".
std::string infer_shape(OpKind op, const Attrs& attrs, const std::vector<std::optional<ValueType>>& types,
                        std::vector<const Tensor*> known = {}, size_t output = 0) {
  auto r = infer_op(op, attrs, types, std::move(known));
  if (!r) return std::string("error: ") + error_code_name(r.error().code);
  return shape_of(r->at(output));
}

// The error of running an op (which must fail).
Error run_error(OpKind op, const Attrs& attrs, const std::vector<std::optional<Tensor>>& inputs, int outputs = 1) {
  auto r = run_op(op, attrs, inputs, outputs);
  REQUIRE(!r);
  return r.error();
}

// ---- Flatten, Reshape, Squeeze, Unsqueeze ----

TEST_CASE("Flatten", "[data]") {
  CHECK(infer_shape(OpKind::Flatten, {}, {f32_type({kBatch, 3, 5})}) == "[batch,15]");
  CHECK(infer_shape(OpKind::Flatten, attrs_of({{"axis", int64_t{0}}}), {f32_type({kBatch, 3})}) == "[1,?]");
  CHECK(infer_shape(OpKind::Flatten, attrs_of({{"axis", int64_t{-1}}}), {f32_type({2, 3, 7})}) == "[6,7]");
  CHECK(infer_shape(OpKind::Flatten, attrs_of({{"axis", int64_t{3}}}), {f32_type({2, 3, 7})}) == "[42,1]");
  CHECK(infer_shape(OpKind::Flatten, {}, {ValueType::unranked(DType::f32)}) == "[?,?]");
  CHECK(infer_shape(OpKind::Flatten, attrs_of({{"axis", int64_t{4}}}), {f32_type({2, 3, 7})}) ==
        "error: invalid argument");
  const Tensor y = run1(OpKind::Flatten, attrs_of({{"axis", int64_t{2}}}), {iota(DType::i64, {13, 7, 3, 2})});
  CHECK(y.shape() == Shape{91, 6});
  CHECK(y.dtype() == DType::i64);
  for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.value_as_int(i) == i % 97);
}

TEST_CASE("Reshape infer", "[data]") {
  const Tensor s1 = i64s({0, -1});
  CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({kBatch, 3, 4}), i64_type({2})}, {nullptr, &s1}) == "[batch,12]");
  const Tensor s2 = i64s({-1, 12});
  CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({kBatch, 3, 4}), i64_type({2})}, {nullptr, &s2}) == "[batch,12]");
  const Tensor s3 = i64s({-1, 7});
  CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({kBatch, 3, 4}), i64_type({2})}, {nullptr, &s3}) == "[?,7]");
  const Tensor s4 = i64s({13, 0, -1});
  CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({13, 7, 2, 3}), i64_type({3})}, {nullptr, &s4}) == "[13,7,6]");
  // Shape unknown: the rank comes from its length.
  CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({kBatch, 3}), i64_type({4})}) == "[?,?,?,?]");
  CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({kBatch, 3}), i64_type({Dim::unknown()})}) == "unranked");
  // allowzero: 0 is a real zero.
  const Tensor s5 = i64s({0, 3});
  CHECK(infer_shape(OpKind::Reshape, attrs_of({{"allowzero", int64_t{1}}}), {f32_type({2, 4}), i64_type({2})},
                    {nullptr, &s5}) == "error: shape mismatch");
  CHECK(infer_shape(OpKind::Reshape, attrs_of({{"allowzero", int64_t{1}}}), {f32_type({0, 3}), i64_type({2})},
                    {nullptr, &s5}) == "[0,3]");
  SECTION("errors") {
    const Tensor two = i64s({-1, -1});
    CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({4, 3}), i64_type({2})}, {nullptr, &two}) ==
          "error: invalid argument");
    const Tensor bad = i64s({5, -1});
    auto r = infer_op(OpKind::Reshape, {}, {f32_type({4, 3}), i64_type({2})}, {nullptr, &bad});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::shape_mismatch);
    CHECK(r.error().message.find("[4,3]") != std::string::npos);
    const Tensor wrong = i64s({5, 2});
    CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({4, 3}), i64_type({2})}, {nullptr, &wrong}) ==
          "error: shape mismatch");
    const Tensor neg = i64s({-2, 6});
    CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({4, 3}), i64_type({2})}, {nullptr, &neg}) ==
          "error: invalid argument");
    const Tensor zero = i64s({0, 0, 0});
    CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({12, 1}), i64_type({3})}, {nullptr, &zero}) ==
          "error: invalid argument");
    const Tensor both = i64s({0, -1});
    CHECK(infer_shape(OpKind::Reshape, attrs_of({{"allowzero", int64_t{1}}}), {f32_type({4, 3}), i64_type({2})},
                      {nullptr, &both}) == "error: invalid argument");
    CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({4, 3}), f32_type({2})}) == "error: invalid argument");
    // A required input left empty by the model.
    CHECK(infer_shape(OpKind::Reshape, {}, {f32_type({4, 3}), std::nullopt}) == "error: invalid argument");
    CHECK(infer_shape(OpKind::Slice, {}, {f32_type({4, 3}), i64_type({1}), std::nullopt}) == "error: invalid argument");
    CHECK(infer_shape(OpKind::Transpose, {}, {std::nullopt}) == "error: invalid argument");
  }
}

TEST_CASE("Reshape run keeps the bytes for every dtype", "[data]") {
  for (DType dt : kAllDtypes) {
    INFO(dtype_name(dt));
    const Tensor y = run1(OpKind::Reshape, {}, {iota(dt, {13, 7}), i64s({7, -1, 1})});
    CHECK(y.shape() == Shape{7, 13, 1});
    CHECK(y.dtype() == dt);
    for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.value_as_double(i) == iota_value(dt, i));
  }
}

TEST_CASE("Squeeze and Unsqueeze", "[data]") {
  const Tensor ax = i64s({1, -1});
  CHECK(infer_shape(OpKind::Squeeze, {}, {f32_type({kBatch, 1, 7, 1}), i64_type({2})}, {nullptr, &ax}) ==
        "[batch,7]");
  CHECK(infer_shape(OpKind::Squeeze, {}, {f32_type({1, 13, 1, 7})}) == "[13,7]");
  CHECK(infer_shape(OpKind::Squeeze, {}, {f32_type({kBatch, 1, 7})}) == "unranked");
  CHECK(infer_shape(OpKind::Squeeze, {}, {f32_type({kBatch, 1, 7, 1}), i64_type({2})}) == "[?,?]");
  CHECK(infer_shape(OpKind::Squeeze, {}, {f32_type({kBatch, 3, 7, 1}), i64_type({2})}, {nullptr, &ax}) ==
        "error: shape mismatch");
  const Tensor dup = i64s({1, 1});
  CHECK(infer_shape(OpKind::Squeeze, {}, {f32_type({1, 1}), i64_type({2})}, {nullptr, &dup}) ==
        "error: invalid argument");
  const Tensor far = i64s({4});
  CHECK(infer_shape(OpKind::Squeeze, {}, {f32_type({1, 1}), i64_type({1})}, {nullptr, &far}) ==
        "error: invalid argument");

  const Tensor uax = i64s({0, -1, 2});
  CHECK(infer_shape(OpKind::Unsqueeze, {}, {f32_type({kBatch, 7}), i64_type({3})}, {nullptr, &uax}) ==
        "[1,batch,1,7,1]");
  CHECK(infer_shape(OpKind::Unsqueeze, {}, {f32_type({kBatch, 7}), i64_type({3})}) == "[?,?,?,?,?]");
  const Tensor bad = i64s({5});
  CHECK(infer_shape(OpKind::Unsqueeze, {}, {f32_type({2, 7}), i64_type({1})}, {nullptr, &bad}) ==
        "error: invalid argument");

  const Tensor y = run1(OpKind::Unsqueeze, {}, {iota(DType::boolean, {13, 7}), i64s({1})});
  CHECK(y.shape() == Shape{13, 1, 7});
  for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.value_as_double(i) == iota_value(DType::boolean, i));
  const Tensor z = run1(OpKind::Squeeze, {}, {iota(DType::f16, {1, 13, 1, 7}), std::nullopt});
  CHECK(z.shape() == Shape{13, 7});
  CHECK(z.dtype() == DType::f16);
  for (int64_t i = 0; i < z.numel(); ++i) REQUIRE(z.value_as_double(i) == iota_value(DType::f16, i));
}

// ---- Transpose ----

TEST_CASE("Transpose", "[data]") {
  CHECK(infer_shape(OpKind::Transpose, attrs_of({{"perm", std::vector<int64_t>{1, 2, 0}}}),
                    {f32_type({kBatch, 13, 7})}) == "[13,7,batch]");
  CHECK(infer_shape(OpKind::Transpose, {}, {f32_type({kBatch, 13, 7})}) == "[7,13,batch]");
  CHECK(infer_shape(OpKind::Transpose, attrs_of({{"perm", std::vector<int64_t>{1, 0}}}),
                    {ValueType::unranked(DType::f32)}) == "[?,?]");
  CHECK(infer_shape(OpKind::Transpose, attrs_of({{"perm", std::vector<int64_t>{1, 1, 0}}}), {f32_type({2, 3, 4})}) ==
        "error: invalid argument");
  CHECK(infer_shape(OpKind::Transpose, attrs_of({{"perm", std::vector<int64_t>{1, 0}}}), {f32_type({2, 3, 4})}) ==
        "error: invalid argument");

  const Shape in_shape{3, 13, 2, 7};
  const std::vector<int64_t> perm{2, 0, 3, 1};
  for (DType dt : kAllDtypes) {
    INFO(dtype_name(dt));
    const Tensor y = run1(OpKind::Transpose, attrs_of({{"perm", perm}}), {iota(dt, in_shape)});
    REQUIRE(y.shape() == Shape{2, 3, 7, 13});
    for (int64_t i = 0; i < y.numel(); ++i) {
      const std::vector<int64_t> out_idx = unravel(i, y.shape());
      std::vector<int64_t> in_idx(4);
      for (size_t d = 0; d < 4; ++d) in_idx[static_cast<size_t>(perm[d])] = out_idx[d];
      REQUIRE(y.value_as_double(i) == iota_value(dt, ravel(in_idx, in_shape)));
    }
  }
  // Default: reversed dims.
  const Tensor y = run1(OpKind::Transpose, {}, {f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  CHECK(y.shape() == Shape{3, 2});
  require_close(y, {1, 4, 2, 5, 3, 6});
}

// ---- Concat, Split ----

TEST_CASE("Concat", "[data]") {
  const Attrs axis1 = attrs_of({{"axis", int64_t{1}}});
  CHECK(infer_shape(OpKind::Concat, axis1, {f32_type({kBatch, 3, 5}), f32_type({kBatch, 7, 5})}) ==
        "[batch,10,5]");
  CHECK(infer_shape(OpKind::Concat, axis1, {f32_type({Dim::unknown(), 3}), f32_type({kBatch, Dim::unknown()})}) ==
        "[batch,?]");
  CHECK(infer_shape(OpKind::Concat, attrs_of({{"axis", int64_t{-1}}}),
                    {f32_type({2, 3}), ValueType::unranked(DType::f32)}) == "[2,?]");
  CHECK(infer_shape(OpKind::Concat, axis1, {f32_type({2, 3}), f32_type({3, 3})}) == "error: shape mismatch");
  CHECK(infer_shape(OpKind::Concat, axis1, {f32_type({2, 3}), f32_type({2, 3, 1})}) == "error: shape mismatch");
  CHECK(infer_shape(OpKind::Concat, axis1, {f32_type({2, 3}), i64_type({2, 3})}) == "error: invalid argument");
  CHECK(infer_shape(OpKind::Concat, attrs_of({{"axis", int64_t{2}}}), {f32_type({2, 3})}) ==
        "error: invalid argument");
  CHECK(infer_shape(OpKind::Concat, {}, {f32_type({2, 3})}) == "error: invalid argument");

  for (DType dt : {DType::f32, DType::i64, DType::boolean, DType::u8}) {
    INFO(dtype_name(dt));
    const Tensor a = iota(dt, {3, 13, 2}), b = iota(dt, {3, 7, 2}), c = iota(dt, {3, 1, 2});
    const Tensor y = run1(OpKind::Concat, attrs_of({{"axis", int64_t{-2}}}), {a, b, c});
    REQUIRE(y.shape() == Shape{3, 21, 2});
    for (int64_t i = 0; i < y.numel(); ++i) {
      std::vector<int64_t> idx = unravel(i, y.shape());
      double want;
      if (idx[1] < 13) {
        want = iota_value(dt, ravel(idx, a.shape()));
      } else if (idx[1] < 20) {
        idx[1] -= 13;
        want = iota_value(dt, ravel(idx, b.shape()));
      } else {
        idx[1] -= 20;
        want = iota_value(dt, ravel(idx, c.shape()));
      }
      REQUIRE(y.value_as_double(i) == want);
    }
  }
  // An empty input contributes nothing.
  const Tensor y = run1(OpKind::Concat, attrs_of({{"axis", int64_t{0}}}),
                        {f32({2}, {1, 2}), f32({0}, {}), f32({1}, {3})});
  require_close(y, {1, 2, 3});
}

TEST_CASE("Split infer", "[data]") {
  const Attrs three = attrs_of({{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}});
  CHECK(infer_shape(OpKind::Split, three, {f32_type({kBatch, 9})}, {}, 2) == "[batch,3]");
  CHECK(infer_shape(OpKind::Split, three, {f32_type({kBatch, 7})}, {}, 0) == "[batch,3]");
  CHECK(infer_shape(OpKind::Split, three, {f32_type({kBatch, 7})}, {}, 2) == "[batch,1]");
  CHECK(infer_shape(OpKind::Split, three, {f32_type({2, Dim::unknown()})}, {}, 1) == "[2,?]");
  const Tensor split = i64s({2, 5});
  CHECK(infer_shape(OpKind::Split, attrs_of({{"axis", int64_t{0}}}), {f32_type({7, kBatch}), i64_type({2})},
                    {nullptr, &split}, 1) == "[5,batch]");
  CHECK(infer_shape(OpKind::Split, attrs_of({{"axis", int64_t{0}}}), {f32_type({8, 1}), i64_type({2})},
                    {nullptr, &split}) == "error: shape mismatch");
  CHECK(infer_shape(OpKind::Split, three, {f32_type({8, 1}), i64_type({2})}, {nullptr, &split}) ==
        "error: invalid argument");
  CHECK(infer_shape(OpKind::Split, attrs_of({{"num_outputs", int64_t{4}}}), {f32_type({5})}) ==
        "error: shape mismatch");
  CHECK(infer_shape(OpKind::Split, {}, {f32_type({5})}) == "error: invalid argument");
  CHECK(infer_shape(OpKind::Split, attrs_of({{"axis", int64_t{2}}, {"num_outputs", int64_t{2}}}),
                    {f32_type({5, 4})}) == "error: invalid argument");
}

TEST_CASE("Split run", "[data]") {
  SECTION("split input, int64 data, axis 1") {
    auto r = run_op(OpKind::Split, attrs_of({{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}}),
                    {iota(DType::i64, {3, 13}), i64s({4, 0, 9})}, 3);
    REQUIRE(r);
    const std::vector<Tensor>& outs = *r;
    CHECK(outs[0].shape() == Shape{3, 4});
    CHECK(outs[1].shape() == Shape{3, 0});
    CHECK(outs[2].shape() == Shape{3, 9});
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 4; ++j) REQUIRE(outs[0].value_as_int(i * 4 + j) == i * 13 + j);
      for (int64_t j = 0; j < 9; ++j) REQUIRE(outs[2].value_as_int(i * 9 + j) == i * 13 + 4 + j);
    }
  }
  SECTION("even, uneven") {
    auto r = run_op(OpKind::Split, attrs_of({{"num_outputs", int64_t{3}}}),
                    {f32({7}, {0, 1, 2, 3, 4, 5, 6}), std::nullopt}, 3);
    REQUIRE(r);
    require_close(r->at(0), {0, 1, 2});
    require_close(r->at(1), {3, 4, 5});
    require_close(r->at(2), {6});
    r = run_op(OpKind::Split, attrs_of({{"axis", int64_t{-1}}, {"num_outputs", int64_t{2}}}),
               {f32({2, 2}, {1, 2, 3, 4})}, 2);
    REQUIRE(r);
    require_close(r->at(0), {1, 3});
    require_close(r->at(1), {2, 4});
  }
}

// ---- Slice ----

TEST_CASE("Slice infer", "[data]") {
  const Tensor starts = i64s({1}), ends = i64s({std::numeric_limits<int64_t>::max()}), axes = i64s({-1});
  CHECK(infer_shape(OpKind::Slice, {}, {f32_type({kBatch, 13}), i64_type({1}), i64_type({1}), i64_type({1})},
                    {nullptr, &starts, &ends, &axes}) == "[batch,12]");
  // A full range keeps a symbolic dim; a partial one does not.
  const Tensor zero = i64s({0});
  const Tensor big = i64s({std::numeric_limits<int64_t>::max()});
  CHECK(infer_shape(OpKind::Slice, {}, {f32_type({kBatch, 13}), i64_type({1}), i64_type({1})},
                    {nullptr, &zero, &big}) == "[batch,13]");
  const Tensor three = i64s({3});
  CHECK(infer_shape(OpKind::Slice, {}, {f32_type({kBatch, 13}), i64_type({1}), i64_type({1})},
                    {nullptr, &zero, &three}) == "[?,13]");
  // Unknown starts: only the sliced axes lose their dims.
  CHECK(infer_shape(OpKind::Slice, {}, {f32_type({kBatch, 13}), i64_type({1}), i64_type({1}), i64_type({1})},
                    {nullptr, nullptr, nullptr, &axes}) == "[batch,?]");
  CHECK(infer_shape(OpKind::Slice, {}, {f32_type({kBatch, 13}), i64_type({1}), i64_type({1})}) == "[?,13]");
  CHECK(infer_shape(OpKind::Slice, {}, {f32_type({kBatch, 13}), i64_type({1}), i64_type({1}), i64_type({1})}) ==
        "[?,?]");
  const Tensor step0 = i64s({0});
  CHECK(infer_shape(OpKind::Slice, {},
                    {f32_type({5, 13}), i64_type({1}), i64_type({1}), i64_type({1}), i64_type({1})},
                    {nullptr, &zero, &three, &axes, &step0}) == "error: invalid argument");
  const Tensor two = i64s({0, 1});
  CHECK(infer_shape(OpKind::Slice, {}, {f32_type({5, 13}), i64_type({2}), i64_type({1})}, {nullptr, &two, &three}) ==
        "error: invalid argument");
  const Tensor ax5 = i64s({5});
  CHECK(infer_shape(OpKind::Slice, {}, {f32_type({5, 13}), i64_type({1}), i64_type({1}), i64_type({1})},
                    {nullptr, &zero, &three, &ax5}) == "error: invalid argument");
}

// The ONNX spec's slice of one dim, as a list of indices (plain, for checking).
std::vector<int64_t> slice_indices(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  std::vector<int64_t> out;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    for (int64_t i = start; i < end; i += step) out.push_back(i);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    for (int64_t i = start; i > end; i += step) out.push_back(i);
  }
  return out;
}

TEST_CASE("Slice run", "[data]") {
  const int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  struct Case {
    int64_t start, end, step;
  };
  const std::vector<Case> cases = {{0, kMax, 1},  {2, 11, 3},  {-3, kMax, 1}, {12, 1, -2},  {kMax, kMin, -1},
                                   {-1, -14, -4}, {5, 5, 1},   {20, 30, 1},   {-20, 4, 2},  {3, 100, 50},
                                   {6, -100, -7}, {0, kMin, 1}};
  for (const Case& c : cases) {
    INFO("start " << c.start << " end " << c.end << " step " << c.step);
    const Shape shape{13, 7};
    const Tensor x = iota(DType::i32, shape);
    // Slice axis 0 with the case, axis 1 with [1:6:2].
    const Tensor y = run1(OpKind::Slice, {},
                          {x, i64s({c.start, 1}), i64s({c.end, 6}), i64s({0, -1}), i64s({c.step, 2})});
    const std::vector<int64_t> rows = slice_indices(13, c.start, c.end, c.step);
    const std::vector<int64_t> cols = slice_indices(7, 1, 6, 2);
    REQUIRE(y.shape() == Shape{static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols.size())});
    for (size_t i = 0; i < rows.size(); ++i)
      for (size_t j = 0; j < cols.size(); ++j)
        REQUIRE(y.value_as_int(static_cast<int64_t>(i * cols.size() + j)) == (rows[i] * 7 + cols[j]) % 97);
  }
  // Default axes and steps; int32 starts/ends; bool data.
  const Tensor y = run1(OpKind::Slice, {}, {iota(DType::boolean, {13, 7}), i32({2}, {1, 2}), i32({2}, {3, 5})});
  CHECK(y.shape() == Shape{2, 3});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      REQUIRE(y.value_as_double(i * 3 + j) == iota_value(DType::boolean, (i + 1) * 7 + j + 2));
}

// ---- Expand, Tile ----

TEST_CASE("Expand", "[data]") {
  const Tensor s = i64s({2, 1, 6});
  CHECK(infer_shape(OpKind::Expand, {}, {f32_type({kBatch, 1}), i64_type({3})}, {nullptr, &s}) == "[2,batch,6]");
  CHECK(infer_shape(OpKind::Expand, {}, {f32_type({kBatch, 1}), i64_type({3})}) == "[?,?,?]");
  CHECK(infer_shape(OpKind::Expand, {}, {f32_type({3, 4}), i64_type({3})}, {nullptr, &s}) ==
        "error: shape mismatch");
  const Tensor huge = i64s({int64_t{1} << 30, int64_t{1} << 30});
  CHECK(infer_shape(OpKind::Expand, {}, {f32_type({1}), i64_type({2})}, {nullptr, &huge}) ==
        "error: limit exceeded");
  for (DType dt : {DType::f32, DType::i8, DType::boolean}) {
    INFO(dtype_name(dt));
    const Tensor y = run1(OpKind::Expand, {}, {iota(dt, {13, 1}), i64s({2, 1, 7})});
    REQUIRE(y.shape() == Shape{2, 13, 7});
    for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.value_as_double(i) == iota_value(dt, unravel(i, y.shape())[1]));
  }
}

TEST_CASE("Tile", "[data]") {
  const Tensor r = i64s({1, 3});
  CHECK(infer_shape(OpKind::Tile, {}, {f32_type({kBatch, 7}), i64_type({2})}, {nullptr, &r}) == "[batch,21]");
  CHECK(infer_shape(OpKind::Tile, {}, {f32_type({kBatch, 7}), i64_type({2})}) == "[?,?]");
  CHECK(infer_shape(OpKind::Tile, {}, {f32_type({kBatch, 7, 1}), i64_type({2})}) == "error: invalid argument");
  const Tensor neg = i64s({1, -1});
  CHECK(infer_shape(OpKind::Tile, {}, {f32_type({2, 7}), i64_type({2})}, {nullptr, &neg}) ==
        "error: invalid argument");
  for (DType dt : {DType::f32, DType::i64, DType::f16}) {
    INFO(dtype_name(dt));
    const Tensor y = run1(OpKind::Tile, {}, {iota(dt, {3, 7}), i64s({2, 3})});
    REQUIRE(y.shape() == Shape{6, 21});
    for (int64_t i = 0; i < y.numel(); ++i) {
      const std::vector<int64_t> idx = unravel(i, y.shape());
      REQUIRE(y.value_as_double(i) == iota_value(dt, (idx[0] % 3) * 7 + idx[1] % 7));
    }
  }
  const Tensor z = run1(OpKind::Tile, {}, {iota(DType::f32, {3, 7}), i64s({0, 1})});
  CHECK(z.shape() == Shape{0, 7});
}

// ---- Pad ----

TEST_CASE("Pad infer", "[data]") {
  const Tensor pads = i64s({0, 1, 0, 2});
  CHECK(infer_shape(OpKind::Pad, {}, {f32_type({kBatch, 7}), i64_type({4})}, {nullptr, &pads}) == "[batch,10]");
  CHECK(infer_shape(OpKind::Pad, {}, {f32_type({kBatch, 7}), i64_type({4})}) == "[?,?]");
  const Tensor axes = i64s({-1});
  const Tensor p2 = i64s({2, -3});
  CHECK(infer_shape(OpKind::Pad, {}, {f32_type({kBatch, 7}), i64_type({2}), std::nullopt, i64_type({1})},
                    {nullptr, &p2, nullptr, &axes}) == "[batch,6]");
  CHECK(infer_shape(OpKind::Pad, {}, {f32_type({kBatch, 7}), i64_type({2}), std::nullopt, i64_type({1})},
                    {nullptr, nullptr, nullptr, &axes}) == "[batch,?]");
  CHECK(infer_shape(OpKind::Pad, {}, {f32_type({kBatch, 7}), i64_type({2})}, {nullptr, &p2}) ==
        "error: invalid argument");
  const Tensor crop = i64s({0, -4, 0, -4});
  CHECK(infer_shape(OpKind::Pad, {}, {f32_type({2, 7}), i64_type({4})}, {nullptr, &crop}) ==
        "error: invalid argument");
  CHECK(infer_shape(OpKind::Pad, attrs_of({{"mode", std::string("edge")}}), {f32_type({2, 0}), i64_type({4})},
                    {nullptr, &pads}) == "error: invalid argument");
  CHECK(infer_shape(OpKind::Pad, attrs_of({{"mode", std::string("mirror")}}), {f32_type({2, 7}), i64_type({4})},
                    {nullptr, &pads}) == "error: invalid argument");
  CHECK(infer_shape(OpKind::Pad, attrs_of({{"mode", std::string("wrap")}}), {f32_type({2, 7}), i64_type({4})},
                    {nullptr, &pads}) == "error: unsupported");
}

TEST_CASE("Pad run", "[data]") {
  const Tensor x = f32({4}, {1, 2, 3, 4});
  SECTION("constant 1-D with a value") {
    require_close(run1(OpKind::Pad, {}, {x, i64s({2, 3}), f32({}, {9})}), {9, 9, 1, 2, 3, 4, 9, 9, 9});
    require_close(run1(OpKind::Pad, {}, {x, i64s({-1, 1})}), {2, 3, 4, 0});
  }
  SECTION("reflect and edge 1-D") {
    const Attrs reflect = attrs_of({{"mode", std::string("reflect")}});
    require_close(run1(OpKind::Pad, reflect, {x, i64s({2, 3})}), {3, 2, 1, 2, 3, 4, 3, 2, 1});
    // Pads longer than the input keep reflecting (as numpy.pad does).
    require_close(run1(OpKind::Pad, reflect, {f32({2}, {1, 2}), i64s({3, 3})}), {2, 1, 2, 1, 2, 1, 2, 1});
    const Attrs edge = attrs_of({{"mode", std::string("edge")}});
    require_close(run1(OpKind::Pad, edge, {x, i64s({2, 3})}), {1, 1, 1, 2, 3, 4, 4, 4, 4});
  }
  SECTION("2-D, every mode, several dtypes, against the index formula") {
    for (const char* mode : {"constant", "reflect", "edge"}) {
      for (DType dt : {DType::f32, DType::i64, DType::u8}) {
        INFO(mode << " " << dtype_name(dt));
        const Shape in{5, 7};
        const std::vector<int64_t> pads{2, -1, 3, 4};  // begin: 2, -1; end: 3, 4
        const Tensor y = run1(OpKind::Pad, attrs_of({{"mode", std::string(mode)}}), {iota(dt, in), i64s(pads)});
        REQUIRE(y.shape() == Shape{10, 10});
        for (int64_t i = 0; i < y.numel(); ++i) {
          std::vector<int64_t> idx = unravel(i, y.shape());
          bool outside = false;
          for (size_t d = 0; d < 2; ++d) {
            int64_t k = idx[d] - pads[d];
            const int64_t n = in[d];
            if (k < 0 || k >= n) {
              if (std::string(mode) == "constant") outside = true;
              else if (std::string(mode) == "edge") k = k < 0 ? 0 : n - 1;
              else k = k < 0 ? -k : 2 * (n - 1) - k;
            }
            idx[d] = k;
          }
          REQUIRE(y.value_as_double(i) == (outside ? 0.0 : iota_value(dt, ravel(idx, in))));
        }
      }
    }
  }
}

// ---- Gather ----

TEST_CASE("Gather", "[data]") {
  CHECK(infer_shape(OpKind::Gather, attrs_of({{"axis", int64_t{1}}}), {f32_type({kBatch, 13, 7}), i64_type({2, 3})}) ==
        "[batch,2,3,7]");
  CHECK(infer_shape(OpKind::Gather, {}, {f32_type({13}), i64_type({})}) == "[]");
  CHECK(infer_shape(OpKind::Gather, attrs_of({{"axis", int64_t{2}}}), {f32_type({13, 7}), i64_type({2})}) ==
        "error: invalid argument");
  CHECK(infer_shape(OpKind::Gather, {}, {f32_type({13, 7}), f32_type({2})}) == "error: invalid argument");
  const Tensor far = i64s({13});
  CHECK(infer_shape(OpKind::Gather, {}, {f32_type({13, 7}), i64_type({1})}, {nullptr, &far}) ==
        "error: invalid argument");

  for (DType dt : {DType::f32, DType::i64, DType::boolean, DType::bf16}) {
    INFO(dtype_name(dt));
    const Tensor x = iota(dt, {3, 13, 7});
    const std::vector<int32_t> idx{12, -1, 0, 5, -13, 3};
    const Tensor y = run1(OpKind::Gather, attrs_of({{"axis", int64_t{-2}}}), {x, i32({2, 3}, idx)});
    REQUIRE(y.shape() == Shape{3, 2, 3, 7});
    for (int64_t i = 0; i < y.numel(); ++i) {
      const std::vector<int64_t> o = unravel(i, y.shape());
      int64_t k = idx[static_cast<size_t>(o[1] * 3 + o[2])];
      if (k < 0) k += 13;
      REQUIRE(y.value_as_double(i) == iota_value(dt, (o[0] * 13 + k) * 7 + o[3]));
    }
  }
  // Scalar index drops the axis.
  const Tensor y = run1(OpKind::Gather, {}, {i64s({10, 20, 30}), i64({}, {-1})});
  CHECK(y.shape() == Shape{});
  CHECK(y.value_as_int(0) == 30);
  const Error e = run_error(OpKind::Gather, {}, {i64s({10, 20, 30}), i64s({3})});
  CHECK(e.code == ErrorCode::invalid_argument);
  CHECK(e.message.find("index 3") != std::string::npos);
}

// ---- Shape, Constant, ConstantOfShape, Range ----

TEST_CASE("Shape", "[data]") {
  CHECK(infer_shape(OpKind::Shape, {}, {f32_type({kBatch, 3, 7})}) == "[3]");
  CHECK(infer_shape(OpKind::Shape, attrs_of({{"start", int64_t{-2}}}), {f32_type({kBatch, 3, 7})}) == "[2]");
  CHECK(infer_shape(OpKind::Shape, attrs_of({{"start", int64_t{2}}, {"end", int64_t{1}}}),
                    {f32_type({kBatch, 3, 7})}) == "[0]");
  CHECK(infer_shape(OpKind::Shape, {}, {ValueType::unranked(DType::f32)}) == "[?]");
  const Tensor y = run1(OpKind::Shape, {}, {iota(DType::u8, {13, 7, 1})});
  CHECK(y.dtype() == DType::i64);
  require_close(y, {13, 7, 1});
  const Tensor z = run1(OpKind::Shape, attrs_of({{"start", int64_t{1}}, {"end", int64_t{-1}}}), {iota(DType::u8, {13, 7, 1})});
  require_close(z, {7});
  const Tensor w = run1(OpKind::Shape, attrs_of({{"start", int64_t{-10}}, {"end", int64_t{10}}}), {iota(DType::u8, {2, 3})});
  require_close(w, {2, 3});
}

TEST_CASE("Constant", "[data]") {
  const Tensor v = i64({2, 2}, {1, -2, 3, -4});
  const Tensor y = run1(OpKind::Constant, attrs_of({{"value", v}}), {});
  CHECK(y.shape() == Shape{2, 2});
  CHECK(y.dtype() == DType::i64);
  require_close(y, {1, -2, 3, -4});
  const Tensor f = run1(OpKind::Constant, attrs_of({{"value_floats", std::vector<float>{0.5f, 1.5f}}}), {});
  CHECK(f.dtype() == DType::f32);
  require_close(f, {0.5, 1.5});
  CHECK(infer_shape(OpKind::Constant, {}, {}) == "error: invalid argument");
}

TEST_CASE("ConstantOfShape", "[data]") {
  const Tensor s = i64s({3, 0});
  CHECK(infer_shape(OpKind::ConstantOfShape, {}, {i64_type({2})}, {&s}) == "[3,0]");
  CHECK(infer_shape(OpKind::ConstantOfShape, {}, {i64_type({2})}) == "[?,?]");
  const Tensor neg = i64s({-1});
  CHECK(infer_shape(OpKind::ConstantOfShape, {}, {i64_type({1})}, {&neg}) == "error: invalid argument");
  const Tensor huge = i64s({int64_t{1} << 40, 2});
  CHECK(infer_shape(OpKind::ConstantOfShape, {}, {i64_type({2})}, {&huge}) == "error: limit exceeded");
  CHECK(infer_shape(OpKind::ConstantOfShape, attrs_of({{"value", i64s({1, 2})}}), {i64_type({2})}) ==
        "error: invalid argument");

  const Tensor y = run1(OpKind::ConstantOfShape, {}, {i64s({13, 7})});
  CHECK(y.dtype() == DType::f32);
  CHECK(y.shape() == Shape{13, 7});
  for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.value_as_double(i) == 0.0);
  const Tensor z = run1(OpKind::ConstantOfShape, attrs_of({{"value", i64({1}, {-7})}}), {i64s({3, 5})});
  CHECK(z.dtype() == DType::i64);
  for (int64_t i = 0; i < z.numel(); ++i) REQUIRE(z.value_as_int(i) == -7);
  const Tensor scalar = run1(OpKind::ConstantOfShape, attrs_of({{"value", Tensor::scalar<bool>(true)}}), {i64s({})});
  CHECK(scalar.shape() == Shape{});
  CHECK(scalar.value_as_int(0) == 1);
}

TEST_CASE("Range", "[data]") {
  const Tensor s = Tensor::scalar<float>(1.0f), l = Tensor::scalar<float>(2.0f), d = Tensor::scalar<float>(0.3f);
  const ValueType scalar_f32 = f32_type({});
  CHECK(infer_shape(OpKind::Range, {}, {scalar_f32, scalar_f32, scalar_f32}, {&s, &l, &d}) == "[4]");
  CHECK(infer_shape(OpKind::Range, {}, {scalar_f32, scalar_f32, scalar_f32}) == "[?]");
  CHECK(infer_shape(OpKind::Range, {}, {scalar_f32, i64_type({}), scalar_f32}) == "error: invalid argument");
  CHECK(infer_shape(OpKind::Range, {}, {f32_type({2}), scalar_f32, scalar_f32}) == "error: invalid argument");
  CHECK(infer_shape(OpKind::Range, {}, {ValueType::of(DType::u8, {}), ValueType::of(DType::u8, {}),
                                        ValueType::of(DType::u8, {})}) == "error: unsupported");

  require_close(run1(OpKind::Range, {}, {s, l, d}), {1.0, 1.3, 1.6, 1.9});
  require_close(run1(OpKind::Range, {}, {Tensor::scalar<int64_t>(10), Tensor::scalar<int64_t>(-3),
                                          Tensor::scalar<int64_t>(-4)}),
                 {10, 6, 2, -2});
  require_close(run1(OpKind::Range, {}, {Tensor::scalar<int32_t>(2), Tensor::scalar<int32_t>(15),
                                          Tensor::scalar<int32_t>(5)}),
                 {2, 7, 12});
  CHECK(run1(OpKind::Range, {}, {Tensor::scalar<int32_t>(5), Tensor::scalar<int32_t>(1), Tensor::scalar<int32_t>(1)})
            .numel() == 0);
  CHECK(run_error(OpKind::Range, {}, {Tensor::scalar<int64_t>(0), Tensor::scalar<int64_t>(4), Tensor::scalar<int64_t>(0)})
            .code == ErrorCode::invalid_argument);
  CHECK(run_error(OpKind::Range, {},
                  {Tensor::scalar<int64_t>(std::numeric_limits<int64_t>::min()),
                   Tensor::scalar<int64_t>(std::numeric_limits<int64_t>::max()), Tensor::scalar<int64_t>(1)})
            .code == ErrorCode::limit_exceeded);
}

// ---- Resize ----

TEST_CASE("Resize infer", "[data]") {
  const Tensor scales = f32({4}, {1, 1, 2, 0.5f});
  const ValueType x = f32_type({kBatch, 3, 7, 13});
  CHECK(infer_shape(OpKind::Resize, {}, {x, std::nullopt, f32_type({4})}, {nullptr, nullptr, &scales}) ==
        "[batch,3,14,6]");
  const Tensor sizes = i64s({1, 3, 20, 5});
  CHECK(infer_shape(OpKind::Resize, {}, {x, std::nullopt, std::nullopt, i64_type({4})},
                    {nullptr, nullptr, nullptr, &sizes}) == "[1,3,20,5]");
  const Tensor empty = f32({0}, {});
  CHECK(infer_shape(OpKind::Resize, {}, {x, f32_type({0}), f32_type({0}), i64_type({4})},
                    {nullptr, &empty, &empty, &sizes}) == "[1,3,20,5]");
  CHECK(infer_shape(OpKind::Resize, {}, {x, std::nullopt, f32_type({4})}) == "[?,?,?,?]");
  SECTION("errors") {
    CHECK(infer_shape(OpKind::Resize, {}, {x}) == "error: invalid argument");
    CHECK(infer_shape(OpKind::Resize, {}, {x, std::nullopt, f32_type({4}), i64_type({4})},
                      {nullptr, nullptr, &scales, &sizes}) == "error: invalid argument");
    const Tensor three = f32({3}, {1, 1, 2});
    CHECK(infer_shape(OpKind::Resize, {}, {x, std::nullopt, f32_type({3})}, {nullptr, nullptr, &three}) ==
          "error: invalid argument");
    const Tensor negative = f32({4}, {1, 1, -2, 1});
    CHECK(infer_shape(OpKind::Resize, {}, {x, std::nullopt, f32_type({4})}, {nullptr, nullptr, &negative}) ==
          "error: invalid argument");
    auto r = infer_op(OpKind::Resize, attrs_of({{"mode", std::string("cubic")}}), {x, std::nullopt, f32_type({4})},
                      {nullptr, nullptr, &scales});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::unsupported);
    CHECK(r.error().message.find("cubic") != std::string::npos);
    CHECK(infer_shape(OpKind::Resize, attrs_of({{"mode", std::string("linear")}}),
                      {ValueType::of(DType::i64, {1, 4}), std::nullopt, f32_type({2})}) == "error: unsupported");
    CHECK(infer_shape(OpKind::Resize, attrs_of({{"coordinate_transformation_mode", std::string("weird")}}),
                      {x, std::nullopt, f32_type({4})}) == "error: invalid argument");
    CHECK(infer_shape(OpKind::Resize, attrs_of({{"nearest_mode", std::string("nearest")}}),
                      {x, std::nullopt, f32_type({4})}) == "error: invalid argument");
  }
}

TEST_CASE("Resize nearest", "[data]") {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  SECTION("upsample x2/x3, asymmetric floor (Upsample semantics), several dtypes") {
    const Attrs a = attrs_of({{"coordinate_transformation_mode", std::string("asymmetric")},
                              {"nearest_mode", std::string("floor")}});
    const Tensor scales = f32({4}, {1, 1, 2, 3});
    for (DType dt : {DType::f32, DType::u8, DType::i64, DType::f16}) {
      INFO(dtype_name(dt));
      const Tensor y = run1(OpKind::Resize, a, {iota(dt, {2, 1, 3, 5}), std::nullopt, scales});
      REQUIRE(y.shape() == Shape{2, 1, 6, 15});
      for (int64_t i = 0; i < y.numel(); ++i) {
        const std::vector<int64_t> o = unravel(i, y.shape());
        REQUIRE(y.value_as_double(i) == iota_value(dt, (o[0] * 3 + o[2] / 2) * 5 + o[3] / 3));
      }
    }
  }
  SECTION("downsample with sizes, half_pixel round_prefer_floor") {
    // in 13 -> out 5: x = (o + 0.5) * 13/5 - 0.5 = 0.8, 3.4, 6, 8.6, 11.2 -> 1, 3, 6, 9, 11
    const Tensor in = iota(DType::f32, {1, 13});
    const Tensor y = run1(OpKind::Resize, {}, {in, std::nullopt, std::nullopt, i64s({1, 5})});
    require_close(y, {1, 3, 6, 9, 11});
  }
  SECTION("ONNX doc case: upsample scales [1,1,2,3]") {
    const Tensor y = run1(OpKind::Resize, {}, {x, std::nullopt, f32({4}, {1, 1, 2, 3})});
    require_close(y, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  }
  SECTION("tf_crop_and_resize extrapolates outside the roi") {
    const Attrs a = attrs_of({{"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                              {"extrapolation_value", 10.0f}});
    // roi [0, 0, 0, 0.5] .. [1, 1, 1, 1.5] on the last axis: x = 0.5 + o * 1 / 2 -> 0.5, 1, 1.5(outside)
    const Tensor y = run1(OpKind::Resize, a,
                          {x, f32({8}, {0, 0, 0, 0.5f, 1, 1, 1, 1.5f}), std::nullopt, i64s({1, 1, 1, 3})});
    require_close(y, {1, 2, 10});
  }
}

TEST_CASE("Resize linear", "[data]") {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Attrs linear = attrs_of({{"mode", std::string("linear")}});
  SECTION("ONNX doc case: upsample x2 half_pixel") {
    const Tensor y = run1(OpKind::Resize, linear, {x, std::nullopt, f32({4}, {1, 1, 2, 2})});
    require_close(y, {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0});
  }
  SECTION("ONNX doc case: align_corners") {
    const Attrs a = attrs_of({{"mode", std::string("linear")},
                              {"coordinate_transformation_mode", std::string("align_corners")}});
    const Tensor y = run1(OpKind::Resize, a, {x, std::nullopt, f32({4}, {1, 1, 2, 2})});
    require_close(y, {1.0, 1.33333333, 1.66666667, 2.0, 1.66666667, 2.0, 2.33333333, 2.66666667, 2.33333333,
                       2.66666667, 3.0, 3.33333333, 3.0, 3.33333333, 3.66666667, 4.0});
  }
  SECTION("ONNX doc case: downsample scales 0.6 (output length 2.4 in the formula)") {
    const Attrs a = attrs_of({{"mode", std::string("linear")},
                              {"coordinate_transformation_mode", std::string("align_corners")}});
    const Tensor in = f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
    const Tensor y = run1(OpKind::Resize, a, {in, std::nullopt, f32({4}, {1, 1, 0.6f, 0.6f})});
    CHECK(y.shape() == Shape{1, 1, 1, 2});
    require_close(y, {1.0, 3.142857}, 1e-5);
  }
  SECTION("1-D odd sizes against the formula, half_pixel, float16") {
    Tensor in = Tensor::zeros(DType::f16, {7});
    for (int64_t i = 0; i < 7; ++i) in.data<Half>()[i] = Half(static_cast<float>(i * i));
    const Tensor y = run1(OpKind::Resize, linear, {in, std::nullopt, std::nullopt, i64s({13})});
    REQUIRE(y.dtype() == DType::f16);
    REQUIRE(y.numel() == 13);
    for (int64_t o = 0; o < 13; ++o) {
      const double xf = std::clamp((o + 0.5) * 7.0 / 13.0 - 0.5, 0.0, 6.0);
      const int64_t x0 = static_cast<int64_t>(std::floor(xf)), x1 = std::min<int64_t>(x0 + 1, 6);
      const double want = (1 - (xf - static_cast<double>(x0))) * static_cast<double>(x0 * x0) +
                          (xf - static_cast<double>(x0)) * static_cast<double>(x1 * x1);
      INFO("o " << o);
      REQUIRE(y.value_as_double(o) == Approx(want).epsilon(2e-3));
    }
  }
}

}  // namespace
}  // namespace kiln

// Unit tests for the conv_pool reference kernels: Conv, ConvTranspose, MaxPool, AveragePool,
// GlobalAveragePool, GlobalMaxPool, LRN.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/executor.h"
#include "tests/support/op_harness.h"

namespace kiln {
namespace {

using namespace test;

// ---- Helpers ----

std::vector<float> values_of(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(t.value_as_double(i));
  return v;
}

void require_close(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.shape() == expected.shape());
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(got.value_as_double(i) == Approx(expected.value_as_double(i)).margin(1e-5));
  }
}

SymShape batch_shape(std::vector<int64_t> rest) {
  SymShape s{Dim::named("batch")};
  for (int64_t v : rest) s.push_back(v);
  return s;
}

using Ints = std::vector<int64_t>;

// ---- Independent, element-by-element definitions used as oracles ----

// Conv by its definition: y[n,m,o] = b[m] + sum x[n, g*Cg + c, o*s + k*dil - pad] * w[m, c, k].
Tensor naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group, const Ints& s, const Ints& dil,
                  const Ints& pad_begin, const Shape& out_spatial) {
  const size_t r = out_spatial.size();
  const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0), cg = c / group, mg = m / group;
  Shape y_shape{n, m};
  y_shape.insert(y_shape.end(), out_spatial.begin(), out_spatial.end());
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  Tensor y = Tensor::zeros(DType::f32, y_shape);
  const auto xs = shape_strides(x.shape());
  const auto ws = shape_strides(w.shape());
  for (int64_t i = 0; i < y.numel(); ++i) {
    const Ints yi = unravel(i, y_shape);
    const int64_t g = yi[1] / mg;
    double acc = b ? b->data<float>()[yi[1]] : 0.0;
    for (int64_t ci = 0; ci < cg; ++ci) {
      for (int64_t t = 0; t < shape_numel(kernel); ++t) {
        const Ints k = unravel(t, kernel);
        int64_t xoff = yi[0] * xs[0] + (g * cg + ci) * xs[1];
        int64_t woff = yi[1] * ws[0] + ci * ws[1];
        bool inside = true;
        for (size_t d = 0; d < r; ++d) {
          const int64_t p = yi[d + 2] * s[d] + k[d] * dil[d] - pad_begin[d];
          inside = inside && p >= 0 && p < x.dim(static_cast<int64_t>(d) + 2);
          xoff += p * xs[d + 2];
          woff += k[d] * ws[d + 2];
        }
        if (inside) acc += static_cast<double>(x.data<float>()[xoff]) * w.data<float>()[woff];
      }
    }
    y.data<float>()[i] = static_cast<float>(acc);
  }
  return y;
}

// ConvTranspose by its definition: every x[n, c, i] * w[c, m, k] lands on o = i*s + k*dil - pad.
Tensor naive_conv_transpose(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group, const Ints& s,
                            const Ints& dil, const Ints& pad_begin, const Shape& out_spatial) {
  const size_t r = out_spatial.size();
  const int64_t n = x.dim(0), c = x.dim(1), mg = w.dim(1), cg = c / group, m = mg * group;
  Shape y_shape{n, m};
  y_shape.insert(y_shape.end(), out_spatial.begin(), out_spatial.end());
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  std::vector<double> acc(static_cast<size_t>(shape_numel(y_shape)), 0.0);
  const auto ys = shape_strides(y_shape);
  const auto ws = shape_strides(w.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const Ints xi = unravel(i, x.shape());
    const int64_t g = xi[1] / cg;
    for (int64_t ml = 0; ml < mg; ++ml) {
      for (int64_t t = 0; t < shape_numel(kernel); ++t) {
        const Ints k = unravel(t, kernel);
        int64_t yoff = xi[0] * ys[0] + (g * mg + ml) * ys[1];
        int64_t woff = xi[1] * ws[0] + ml * ws[1];
        bool inside = true;
        for (size_t d = 0; d < r; ++d) {
          const int64_t p = xi[d + 2] * s[d] + k[d] * dil[d] - pad_begin[d];
          inside = inside && p >= 0 && p < out_spatial[d];
          yoff += p * ys[d + 2];
          woff += k[d] * ws[d + 2];
        }
        if (inside) acc[static_cast<size_t>(yoff)] += static_cast<double>(x.data<float>()[i]) * w.data<float>()[woff];
      }
    }
  }
  Tensor y = Tensor::zeros(DType::f32, y_shape);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t ch = unravel(i, y_shape)[1];
    y.data<float>()[i] = static_cast<float>(acc[static_cast<size_t>(i)] + (b ? b->data<float>()[ch] : 0.0f));
  }
  return y;
}

}  // namespace

// ============================== Conv ==============================

TEST_CASE("Conv infer: shapes with a symbolic batch", "[conv_pool]") {
  // ResNet stem: 7x7 stride 2 pad 3.
  Attrs a = attrs_of({{"strides", Ints{2, 2}}, {"pads", Ints{3, 3, 3, 3}}, {"kernel_shape", Ints{7, 7}}});
  auto out = infer_op(OpKind::Conv, a,
                      {ValueType::of(DType::f32, batch_shape({3, 224, 224})), ValueType::of(DType::f32, {64, 3, 7, 7}),
                       ValueType::of(DType::f32, {64})});
  REQUIRE(out.is_ok());
  REQUIRE(sym_shape_to_string((*out)[0].shape) == "[batch,64,112,112]");

  SECTION("unknown spatial dims stay unknown") {
    auto o = infer_op(OpKind::Conv, Attrs{},
                      {ValueType::of(DType::f32, {Dim::named("batch"), 8, Dim::unknown(), 13}),
                       ValueType::of(DType::f32, {4, 8, 3, 3})});
    REQUIRE(o.is_ok());
    REQUIRE(sym_shape_to_string((*o)[0].shape) == "[batch,4,?,11]");
  }
  SECTION("depthwise 7x7 with SAME_UPPER and odd sizes") {
    Attrs d = attrs_of({{"group", int64_t{96}}, {"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}});
    auto o = infer_op(OpKind::Conv, d,
                      {ValueType::of(DType::f32, batch_shape({96, 13, 7})), ValueType::of(DType::f32, {96, 1, 7, 7})});
    REQUIRE(o.is_ok());
    REQUIRE(sym_shape_to_string((*o)[0].shape) == "[batch,96,7,4]");
  }
  SECTION("VALID, dilations, 1-D and 3-D") {
    auto o1 = infer_op(OpKind::Conv, attrs_of({{"auto_pad", std::string("VALID")}, {"dilations", Ints{2}}}),
                       {ValueType::of(DType::f32, {1, 2, 13}), ValueType::of(DType::f32, {5, 2, 3})});
    REQUIRE(o1.is_ok());
    REQUIRE(sym_shape_to_string((*o1)[0].shape) == "[1,5,9]");
    auto o3 = infer_op(OpKind::Conv, attrs_of({{"strides", Ints{1, 2, 3}}, {"pads", Ints{1, 1, 1, 0, 0, 0}}}),
                       {ValueType::of(DType::f32, {2, 3, 7, 13, 7}), ValueType::of(DType::f32, {4, 3, 3, 3, 3})});
    REQUIRE(o3.is_ok());
    REQUIRE(sym_shape_to_string((*o3)[0].shape) == "[2,4,6,6,2]");
  }
  SECTION("unranked input and weight give an unranked output") {
    auto o = infer_op(OpKind::Conv, Attrs{}, {ValueType::unranked(DType::f32), ValueType::unranked(DType::f32)});
    REQUIRE(o.is_ok());
    REQUIRE_FALSE((*o)[0].rank_known);
  }
  SECTION("unranked weight: channels unknown, kernel_shape still gives spatial dims") {
    auto o = infer_op(OpKind::Conv, attrs_of({{"kernel_shape", Ints{3}}}),
                      {ValueType::of(DType::f32, batch_shape({3, 13})), ValueType::unranked(DType::f32)});
    REQUIRE(o.is_ok());
    REQUIRE(sym_shape_to_string((*o)[0].shape) == "[batch,?,11]");
  }
}

TEST_CASE("Conv infer: errors", "[conv_pool]") {
  const ValueType x = ValueType::of(DType::f32, batch_shape({3, 13, 7}));
  auto error_of = [](const Attrs& a, std::vector<std::optional<ValueType>> in) {
    auto o = infer_op(OpKind::Conv, a, in);
    REQUIRE_FALSE(o.is_ok());
    return o.error().message;
  };
  CHECK(error_of(Attrs{}, {x, ValueType::of(DType::f32, {8, 4, 3, 3})}) ==
        "input has 3 channels but weight expects 4 x group 1");
  CHECK(error_of(attrs_of({{"group", int64_t{3}}}), {x, ValueType::of(DType::f32, {8, 1, 3, 3})}) ==
        "W has 8 output channels, which group 3 does not divide");
  CHECK(error_of(attrs_of({{"kernel_shape", Ints{3, 3}}}),
                 {ValueType::of(DType::f32, {1, 3, 13}), ValueType::unranked(DType::f32)}) ==
        "kernel_shape [3,3] has rank 2 but input spatial rank is 1");
  CHECK(error_of(attrs_of({{"kernel_shape", Ints{5, 5}}}), {x, ValueType::of(DType::f32, {8, 3, 3, 3})}) ==
        "kernel_shape [5,5] does not match W's shape [8,3,3,3]");
  CHECK(error_of(Attrs{}, {x, ValueType::of(DType::f32, {8, 3, 3, 3}), ValueType::of(DType::f32, {7})}) ==
        "bias has 7 elements but there are 8 output channels");
  CHECK(error_of(Attrs{}, {x, ValueType::of(DType::f32, {8, 3, 3})}).find("rank") != std::string::npos);
  CHECK(error_of(Attrs{}, {ValueType::of(DType::f32, {1, 3}), ValueType::of(DType::f32, {8, 3, 3})}) ==
        "X must have rank >= 3 (N, C, spatial...), got shape [1,3]");
  CHECK(error_of(Attrs{}, {x, ValueType::of(DType::f32, {8, 3, 15, 3})}) ==
        "spatial dim 0: input size 13 with pads 0+0 is smaller than the effective kernel size 15");
  CHECK(error_of(attrs_of({{"strides", Ints{1, 0}}}), {x, ValueType::of(DType::f32, {8, 3, 3, 3})})
            .find("strides [1,0]") != std::string::npos);
  CHECK(error_of(attrs_of({{"pads", Ints{1, 1}}}), {x, ValueType::of(DType::f32, {8, 3, 3, 3})}) ==
        "pads [1,1] has 2 entries but 4 are expected (input spatial rank 2)");
  CHECK(error_of(attrs_of({{"auto_pad", std::string("SAME")}}), {x, ValueType::of(DType::f32, {8, 3, 3, 3})}) ==
        "auto_pad 'SAME' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  CHECK(error_of(attrs_of({{"group", int64_t{0}}}), {x, ValueType::of(DType::f32, {8, 3, 3, 3})})
            .find("group") != std::string::npos);
  CHECK(error_of(Attrs{}, {ValueType::of(DType::i64, {1, 3, 5, 5}), ValueType::of(DType::f32, {8, 3, 3, 3})})
            .find("int64") != std::string::npos);
}

TEST_CASE("Conv run: a hand-computed 3x3 all-ones case", "[conv_pool]") {
  // 3x3 ones, 3x3 ones kernel, pad 1: corners see 4 ones, edges 6, the center 9; bias 0.5.
  auto y = run_op(OpKind::Conv, attrs_of({{"pads", Ints{1, 1, 1, 1}}}),
                  {f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f)), f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f)),
                   f32({1}, {0.5f})});
  REQUIRE(y.is_ok());
  CHECK(values_of((*y)[0]) == std::vector<float>{4.5f, 6.5f, 4.5f, 6.5f, 9.5f, 6.5f, 4.5f, 6.5f, 4.5f});
}

TEST_CASE("Conv run: matches the definition (groups, strides, dilations, pads, auto_pad, 1-3 D)", "[conv_pool]") {
  struct Case {
    Shape x, w;
    int64_t group;
    Ints strides, dilations, pads;
    std::string auto_pad;
    bool bias;
    Shape expected_out;
  };
  const std::vector<Case> cases = {
      {{1, 2, 13}, {3, 2, 3}, 1, {2}, {1}, {1, 0}, "NOTSET", true, {6}},
      {{2, 3, 13, 7}, {4, 3, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, {13, 7}},
      {{1, 6, 13, 7}, {4, 3, 3, 2}, 2, {2, 1}, {2, 1}, {1, 0, 2, 1}, "NOTSET", true, {6, 7}},
      {{1, 4, 13, 7}, {4, 1, 7, 7}, 4, {1, 1}, {1, 1}, {}, "SAME_UPPER", true, {13, 7}},  // depthwise 7x7
      {{1, 3, 13, 7}, {5, 3, 4, 4}, 1, {3, 2}, {1, 1}, {}, "SAME_LOWER", false, {5, 4}},
      {{1, 3, 13, 7}, {2, 3, 3, 3}, 1, {2, 2}, {2, 2}, {5, 5, 5, 5}, "VALID", false, {5, 2}},
      {{1, 2, 7, 6, 5}, {3, 2, 3, 2, 3}, 1, {1, 2, 1}, {1, 1, 2}, {1, 0, 2, 1, 1, 0}, "NOTSET", true, {7, 3, 3}},
      {{1, 8, 7, 7}, {16, 8, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, {7, 7}},  // 1x1
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const size_t r = c.x.size() - 2;
    Attrs a = attrs_of({{"group", c.group}, {"strides", c.strides}, {"dilations", c.dilations},
                        {"auto_pad", c.auto_pad}});
    if (!c.pads.empty()) a.set("pads", c.pads);
    const Tensor x = test::uniform_f32(c.x, seed++);
    const Tensor w = test::uniform_f32(c.w, seed++);
    const Tensor b = test::uniform_f32({c.w[0]}, seed++);
    auto y = run_op(OpKind::Conv, a, {x, w, c.bias ? std::optional<Tensor>(b) : std::nullopt});
    REQUIRE(y.is_ok());
    const Shape out((*y)[0].shape().begin() + 2, (*y)[0].shape().end());
    REQUIRE(out == c.expected_out);
    // The begin pads each mode implies.
    Ints pad_begin(r, 0);
    for (size_t d = 0; d < r; ++d) {
      const int64_t ek = (c.w[d + 2] - 1) * c.dilations[d] + 1;
      const int64_t total = std::max<int64_t>(0, (out[d] - 1) * c.strides[d] + ek - c.x[d + 2]);
      if (c.auto_pad == "NOTSET") pad_begin[d] = c.pads[d];
      else if (c.auto_pad == "SAME_UPPER") pad_begin[d] = total / 2;
      else if (c.auto_pad == "SAME_LOWER") pad_begin[d] = total - total / 2;
    }
    require_close((*y)[0], naive_conv(x, w, c.bias ? &b : nullptr, c.group, c.strides, c.dilations, pad_begin, out));
  }
}

// ============================== ConvTranspose ==============================

TEST_CASE("ConvTranspose infer: the ONNX output-shape formulas", "[conv_pool]") {
  const ValueType x = ValueType::of(DType::f32, batch_shape({2, 3, 3}));
  const ValueType w = ValueType::of(DType::f32, {2, 3, 3, 3});
  auto shape_of = [&](const Attrs& a) {
    auto o = infer_op(OpKind::ConvTranspose, a, {x, w});
    REQUIRE(o.is_ok());
    return sym_shape_to_string((*o)[0].shape);
  };
  CHECK(shape_of(Attrs{}) == "[batch,3,5,5]");
  CHECK(shape_of(attrs_of({{"strides", Ints{3, 2}}, {"output_padding", Ints{1, 1}}})) == "[batch,3,10,8]");
  CHECK(shape_of(attrs_of({{"strides", Ints{3, 2}}, {"pads", Ints{1, 2, 1, 2}}})) == "[batch,3,7,3]");
  CHECK(shape_of(attrs_of({{"strides", Ints{3, 2}}, {"output_shape", Ints{10, 8}}})) == "[batch,3,10,8]");
  CHECK(shape_of(attrs_of({{"strides", Ints{3, 2}}, {"output_shape", Ints{1, 3, 10, 8}}})) == "[batch,3,10,8]");
  CHECK(shape_of(attrs_of({{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}})) == "[batch,3,6,6]");
  CHECK(shape_of(attrs_of({{"dilations", Ints{2, 2}}, {"group", int64_t{2}}})) == "[batch,6,7,7]");

  auto o = infer_op(OpKind::ConvTranspose, Attrs{}, {ValueType::of(DType::f32, batch_shape({3, 3, 3})), w});
  REQUIRE_FALSE(o.is_ok());
  CHECK(o.error().message == "input has 3 channels but weight expects 2 (W is [C, M/group, kernel...])");
  o = infer_op(OpKind::ConvTranspose, attrs_of({{"output_shape", Ints{10}}}), {x, w});
  REQUIRE_FALSE(o.is_ok());
  CHECK(o.error().message == "output_shape [10] has 1 entries but input spatial rank is 2");
  o = infer_op(OpKind::ConvTranspose, Attrs{}, {x, w, ValueType::of(DType::f32, {2})});
  REQUIRE_FALSE(o.is_ok());
  CHECK(o.error().message == "bias has 2 elements but there are 3 output channels (3 x group 1)");
  o = infer_op(OpKind::ConvTranspose, attrs_of({{"pads", Ints{3, 3, 3, 3}}}), {x, w});
  REQUIRE_FALSE(o.is_ok());
  CHECK(o.error().message == "spatial dim 0: pads 3+3 exceed the full transposed output size 5");
}

TEST_CASE("ConvTranspose run: hand-computed and against the definition", "[conv_pool]") {
  SECTION("1-D by hand") {
    // [1,2,3] with kernel [1,1,1]: full output [1,3,6,5,3]; with stride 2: [1,1,3,2,5,3,3].
    auto y = run_op(OpKind::ConvTranspose, Attrs{}, {f32({1, 1, 3}, {1, 2, 3}), f32({1, 1, 3}, {1, 1, 1})});
    REQUIRE(y.is_ok());
    CHECK(values_of((*y)[0]) == std::vector<float>{1, 3, 6, 5, 3});
    y = run_op(OpKind::ConvTranspose, attrs_of({{"strides", Ints{2}}}),
               {f32({1, 1, 3}, {1, 2, 3}), f32({1, 1, 3}, {1, 1, 1})});
    REQUIRE(y.is_ok());
    CHECK(values_of((*y)[0]) == std::vector<float>{1, 1, 3, 2, 5, 3, 3});
  }
  struct Case {
    Shape x, w;
    int64_t group;
    Ints strides, dilations, pads, output_padding, output_shape;
    std::string auto_pad;
    bool bias;
    Shape expected_out;
    Ints pad_begin;
  };
  const std::vector<Case> cases = {
      {{1, 2, 7}, {2, 3, 3}, 1, {2}, {1}, {1, 0}, {1}, {}, "NOTSET", true, {15}, {1}},
      {{2, 2, 5, 7}, {2, 2, 3, 3}, 1, {3, 2}, {1, 1}, {1, 2, 1, 2}, {0, 0}, {}, "NOTSET", false, {13, 11}, {1, 2}},
      {{1, 4, 5, 3}, {4, 3, 3, 2}, 2, {2, 1}, {2, 2}, {0, 0, 0, 0}, {1, 0}, {}, "NOTSET", true, {14, 5}, {0, 0}},
      // output_shape larger than the natural size (total padding clamps at 0) and smaller (pads split).
      {{1, 1, 3, 3}, {1, 2, 3, 3}, 1, {3, 2}, {1, 1}, {}, {0, 0}, {12, 6}, "NOTSET", true, {12, 6}, {0, 1}},
      {{1, 3, 4, 5}, {3, 1, 4, 4}, 3, {2, 2}, {1, 1}, {}, {0, 0}, {}, "SAME_UPPER", true, {8, 10}, {1, 1}},
      {{1, 3, 4, 5}, {3, 1, 3, 3}, 3, {2, 2}, {1, 1}, {}, {0, 0}, {}, "SAME_LOWER", false, {8, 10}, {1, 1}},
      {{1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, 1, {2, 1, 3}, {1, 2, 1}, {0, 1, 0, 1, 0, 1}, {1, 0, 0}, {}, "NOTSET", true,
       {6, 7, 7}, {0, 1, 0}},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    Attrs a = attrs_of({{"group", c.group}, {"strides", c.strides}, {"dilations", c.dilations},
                        {"output_padding", c.output_padding}, {"auto_pad", c.auto_pad}});
    if (!c.pads.empty()) a.set("pads", c.pads);
    if (!c.output_shape.empty()) a.set("output_shape", c.output_shape);
    const Tensor x = test::uniform_f32(c.x, seed++);
    const Tensor w = test::uniform_f32(c.w, seed++);
    const Tensor b = test::uniform_f32({c.w[1] * c.group}, seed++);
    auto y = run_op(OpKind::ConvTranspose, a, {x, w, c.bias ? std::optional<Tensor>(b) : std::nullopt});
    REQUIRE(y.is_ok());
    const Shape out((*y)[0].shape().begin() + 2, (*y)[0].shape().end());
    REQUIRE(out == c.expected_out);
    require_close((*y)[0], naive_conv_transpose(x, w, c.bias ? &b : nullptr, c.group, c.strides, c.dilations,
                                                c.pad_begin, out));
  }
}

// ============================== MaxPool / AveragePool ==============================

TEST_CASE("Pool infer: shapes, ceil mode and errors", "[conv_pool]") {
  auto shape_of = [](OpKind op, const Attrs& a, SymShape x) {
    auto o = infer_op(op, a, {ValueType::of(DType::f32, std::move(x))});
    REQUIRE(o.is_ok());
    return sym_shape_to_string((*o)[0].shape);
  };
  // ResNet max pool.
  CHECK(shape_of(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
                 batch_shape({64, 112, 112})) == "[batch,64,56,56]");
  // Ceil mode: 5 + 2 pads, k2 s2 -> ceil(5/2)+1 = 4, but that window would start at padded
  // position 6 (in the end padding) so it is dropped: 3. Width 6 keeps 4.
  const Attrs ceil = attrs_of({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
                               {"ceil_mode", int64_t{1}}});
  CHECK(shape_of(OpKind::MaxPool, ceil, batch_shape({3, 5, 6})) == "[batch,3,3,4]");
  CHECK(shape_of(OpKind::AveragePool, ceil, batch_shape({3, 5, 6})) == "[batch,3,3,4]");
  CHECK(shape_of(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"ceil_mode", int64_t{1}}}),
                 {1, 1, 4}) == "[1,1,2]");
  CHECK(shape_of(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}), {1, 1, 4, 13}) ==
        "[1,1,2,11]");
  CHECK(shape_of(OpKind::AveragePool, attrs_of({{"kernel_shape", Ints{3, 3}}, {"auto_pad", std::string("SAME_LOWER")},
                                                {"strides", Ints{2, 3}}}),
                 {Dim::named("batch"), 3, 13, Dim::unknown()}) == "[batch,3,7,?]");
  CHECK(shape_of(OpKind::AveragePool, attrs_of({{"kernel_shape", Ints{2, 2, 2}}}), {1, 3, 7, 13, 7}) == "[1,3,6,12,6]");

  auto indices = infer_op(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{2}}}), {ValueType::of(DType::u8, {1, 1, 7})});
  REQUIRE(indices.is_ok());
  REQUIRE(indices->size() == 2);
  CHECK((*indices)[0].dtype == DType::u8);
  CHECK((*indices)[1].dtype == DType::i64);
  CHECK(sym_shape_to_string((*indices)[1].shape) == "[1,1,6]");

  auto error_of = [](OpKind op, const Attrs& a, SymShape x) {
    auto o = infer_op(op, a, {ValueType::of(DType::f32, std::move(x))});
    REQUIRE_FALSE(o.is_ok());
    return o.error().message;
  };
  CHECK(error_of(OpKind::MaxPool, Attrs{}, {1, 3, 7, 7}) == "the kernel_shape attribute is required");
  CHECK(error_of(OpKind::AveragePool, attrs_of({{"kernel_shape", Ints{3, 3}}}), {1, 3, 7}) ==
        "kernel_shape [3,3] has rank 2 but input spatial rank is 1");
  CHECK(error_of(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{9}}}), {1, 3, 7}) ==
        "spatial dim 0: input size 7 with pads 0+0 is smaller than the effective kernel size 9");
  CHECK(error_of(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{2}}, {"storage_order", int64_t{2}}}), {1, 3, 7}) ==
        "storage_order must be 0 or 1, got 2");
  CHECK(error_of(OpKind::AveragePool, attrs_of({{"kernel_shape", Ints{2}}, {"count_include_pad", int64_t{-1}}}),
                 {1, 3, 7}) == "count_include_pad must be 0 or 1, got -1");
  CHECK(error_of(OpKind::AveragePool, attrs_of({{"kernel_shape", Ints{2}}, {"ceil_mode", int64_t{3}}}), {1, 3, 7}) ==
        "ceil_mode must be 0 or 1, got 3");
  CHECK(error_of(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{2}}}), {1, 7}) ==
        "X must have rank >= 3 (N, C, spatial...), got shape [1,7]");
}

TEST_CASE("MaxPool run: values, indices, storage order, padding, ceil mode", "[conv_pool]") {
  // 1x1x3x4 input 0..11 (row-major), with a negative twist so padding (never a candidate) is visible.
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i) - 20.0f;
  const Tensor x = f32({1, 1, 3, 4}, v);

  SECTION("2x2 stride 2 with indices, row- and column-major") {
    Attrs a = attrs_of({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
    auto y = run_op(OpKind::MaxPool, a, {x}, 2);
    REQUIRE(y.is_ok());
    CHECK(values_of((*y)[0]) == std::vector<float>{-15, -13});
    CHECK(values_of((*y)[1]) == std::vector<float>{5, 7});  // (1,1) and (1,3) row-major
    a.set("storage_order", int64_t{1});
    y = run_op(OpKind::MaxPool, a, {x}, 2);
    REQUIRE(y.is_ok());
    CHECK(values_of((*y)[1]) == std::vector<float>{4, 10});  // h + w * 3
  }
  SECTION("pads never win, ceil mode drops the window starting in the end padding") {
    // k2 s2 pad 1 ceil: H 3 -> ceil((3+2-2)/2)+1 = 3, last start 4 >= 3+1 -> 2 rows. W 4 -> 3.
    Attrs a = attrs_of({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
                        {"ceil_mode", int64_t{1}}});
    auto y = run_op(OpKind::MaxPool, a, {x}, 2);
    REQUIRE(y.is_ok());
    REQUIRE((*y)[0].shape() == Shape{1, 1, 2, 3});
    CHECK(values_of((*y)[0]) == std::vector<float>{-20, -18, -17, -12, -10, -9});
    CHECK(values_of((*y)[1]) == std::vector<float>{0, 2, 3, 8, 10, 11});
  }
  SECTION("dilations, batch and channel offsets in the indices") {
    Tensor x2 = test::uniform_f32({2, 3, 5, 7}, 7);
    auto y = run_op(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{2, 3}}, {"dilations", Ints{2, 2}}}), {x2}, 2);
    REQUIRE(y.is_ok());
    REQUIRE((*y)[0].shape() == Shape{2, 3, 3, 3});
    for (int64_t i = 0; i < (*y)[0].numel(); ++i) {
      const Ints o = unravel(i, (*y)[0].shape());
      float best = -1e30f;
      int64_t best_at = -1;
      for (int64_t kh = 0; kh < 2; ++kh)
        for (int64_t kw = 0; kw < 3; ++kw) {
          const int64_t at = ((o[0] * 3 + o[1]) * 5 + o[2] + 2 * kh) * 7 + o[3] + 2 * kw;
          if (x2.data<float>()[at] > best) {
            best = x2.data<float>()[at];
            best_at = at;
          }
        }
      CHECK((*y)[0].data<float>()[i] == best);
      CHECK((*y)[1].data<int64_t>()[i] == best_at);
    }
  }
  SECTION("uint8 and NaN") {
    auto y = run_op(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{2}}}),
                    {Tensor::from_values<uint8_t>({1, 1, 4}, std::vector<uint8_t>{3, 200, 7, 9})});
    REQUIRE(y.is_ok());
    CHECK(values_of((*y)[0]) == std::vector<float>{200, 200, 9});
    y = run_op(OpKind::MaxPool, attrs_of({{"kernel_shape", Ints{2}}}),
               {f32({1, 1, 3}, {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f})});
    REQUIRE(y.is_ok());
    CHECK(std::isnan((*y)[0].data<float>()[0]));
    CHECK(std::isnan((*y)[0].data<float>()[1]));
  }
}

TEST_CASE("AveragePool run: count_include_pad and ceil-mode clipping", "[conv_pool]") {
  // 1x1x3x3 of ones times position: [[1,2,3],[4,5,6],[7,8,9]].
  const Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Attrs a = attrs_of({{"kernel_shape", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}});
  SECTION("count_include_pad 0: divide by the input elements") {
    auto y = run_op(OpKind::AveragePool, a, {x});
    REQUIRE(y.is_ok());
    CHECK(values_of((*y)[0]) == std::vector<float>{1, 2.5f, 5.5f, 7});
  }
  SECTION("count_include_pad 1: divide by the window inside the padded input") {
    a.set("count_include_pad", int64_t{1});
    auto y = run_op(OpKind::AveragePool, a, {x});
    REQUIRE(y.is_ok());
    CHECK(values_of((*y)[0]) == std::vector<float>{0.25f, 1.25f, 2.75f, 7.0f});
  }
  SECTION("ceil mode: windows past the end padding are clipped to it") {
    // k3 s2 pad [0,0,1,1] ceil on 3x3... use 1-D: [1..6], k3 s2 pads 0+1 ceil -> ceil((6+1-3)/2)+1 = 3
    // windows [0..2], [2..4], [4..6]; the last covers 5, 6 and the end pad: include_pad -> (5+6)/3.
    Attrs c = attrs_of({{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{0, 1}}, {"ceil_mode", int64_t{1}},
                        {"count_include_pad", int64_t{1}}});
    const Tensor x1 = f32({1, 1, 6}, {1, 2, 3, 4, 5, 6});
    auto y = run_op(OpKind::AveragePool, c, {x1});
    REQUIRE(y.is_ok());
    CHECK(values_of((*y)[0]) == std::vector<float>{2, 4, 11.0f / 3.0f});
    // No end pad: the last ceil-mode window [4..6] hangs past the input; it is clipped to 2 positions.
    c.set("pads", Ints{0, 0});
    y = run_op(OpKind::AveragePool, c, {x1});
    REQUIRE(y.is_ok());
    CHECK(values_of((*y)[0]) == std::vector<float>{2, 4, 5.5f});
  }
  SECTION("3-D SAME_UPPER against the definition") {
    const Tensor x3 = test::uniform_f32({1, 2, 5, 4, 3}, 9);
    auto y = run_op(OpKind::AveragePool, attrs_of({{"kernel_shape", Ints{2, 3, 2}}, {"auto_pad", std::string("SAME_UPPER")}}),
                    {x3});
    REQUIRE(y.is_ok());
    REQUIRE((*y)[0].shape() == Shape{1, 2, 5, 4, 3});
    // SAME_UPPER with stride 1: pads begin (0,1,0), end (1,1,1); count only input elements.
    for (int64_t i = 0; i < (*y)[0].numel(); ++i) {
      const Ints o = unravel(i, (*y)[0].shape());
      double sum = 0;
      int count = 0;
      for (int64_t a0 = o[2]; a0 < o[2] + 2; ++a0)
        for (int64_t a1 = o[3] - 1; a1 < o[3] + 2; ++a1)
          for (int64_t a2 = o[4]; a2 < o[4] + 2; ++a2)
            if (a0 < 5 && a1 >= 0 && a1 < 4 && a2 < 3) {
              sum += x3.data<float>()[((o[1] * 5 + a0) * 4 + a1) * 3 + a2];
              ++count;
            }
      CHECK((*y)[0].data<float>()[i] == Approx(sum / count).margin(1e-6));
    }
  }
}

// ============================== Global pools, LRN ==============================

TEST_CASE("GlobalAveragePool / GlobalMaxPool", "[conv_pool]") {
  for (OpKind op : {OpKind::GlobalAveragePool, OpKind::GlobalMaxPool}) {
    auto o = infer_op(op, Attrs{}, {ValueType::of(DType::f32, batch_shape({3, 13, 7}))});
    REQUIRE(o.is_ok());
    CHECK(sym_shape_to_string((*o)[0].shape) == "[batch,3,1,1]");
    o = infer_op(op, Attrs{}, {ValueType::of(DType::f32, {Dim::unknown()})});
    REQUIRE_FALSE(o.is_ok());
  }
  const Tensor x = test::uniform_f32({2, 3, 13, 7}, 3);
  auto avg = run_op(OpKind::GlobalAveragePool, Attrs{}, {x});
  auto max = run_op(OpKind::GlobalMaxPool, Attrs{}, {x});
  REQUIRE(avg.is_ok());
  REQUIRE(max.is_ok());
  REQUIRE((*avg)[0].shape() == Shape{2, 3, 1, 1});
  for (int64_t p = 0; p < 6; ++p) {
    double sum = 0;
    float best = -2.0f;
    for (int64_t i = 0; i < 91; ++i) {
      sum += x.data<float>()[p * 91 + i];
      best = std::max(best, x.data<float>()[p * 91 + i]);
    }
    CHECK((*avg)[0].data<float>()[p] == Approx(sum / 91).margin(1e-6));
    CHECK((*max)[0].data<float>()[p] == best);
  }
}

TEST_CASE("LRN", "[conv_pool]") {
  auto o = infer_op(OpKind::LRN, attrs_of({{"size", int64_t{3}}}), {ValueType::of(DType::f32, batch_shape({5, 13, 7}))});
  REQUIRE(o.is_ok());
  CHECK(sym_shape_to_string((*o)[0].shape) == "[batch,5,13,7]");
  o = infer_op(OpKind::LRN, Attrs{}, {ValueType::of(DType::f32, {1, 5, 3, 3})});
  REQUIRE_FALSE(o.is_ok());
  CHECK(o.error().message == "the size attribute is required");
  o = infer_op(OpKind::LRN, attrs_of({{"size", int64_t{0}}}), {ValueType::of(DType::f32, {1, 5, 3, 3})});
  REQUIRE_FALSE(o.is_ok());

  for (int64_t size : {1, 2, 3, 4, 5}) {
    const float alpha = 0.01f, beta = 0.6f, bias = 1.5f;
    const Tensor x = test::uniform_f32({2, 5, 3, 2}, static_cast<uint32_t>(size));
    auto y = run_op(OpKind::LRN,
                    attrs_of({{"size", size}, {"alpha", alpha}, {"beta", beta}, {"bias", bias}}), {x});
    REQUIRE(y.is_ok());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const Ints idx = unravel(i, x.shape());
      // channels c - floor((size-1)/2) .. c + ceil((size-1)/2)
      const int64_t lo = std::max<int64_t>(0, idx[1] - (size - 1) / 2);
      const int64_t hi = std::min<int64_t>(4, idx[1] + size / 2);
      double sq = 0;
      for (int64_t ch = lo; ch <= hi; ++ch) {
        const double v = x.data<float>()[((idx[0] * 5 + ch) * 3 + idx[2]) * 2 + idx[3]];
        sq += v * v;
      }
      const double expected = x.data<float>()[i] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      CHECK((*y)[0].data<float>()[i] == Approx(expected).margin(1e-6));
    }
  }
}

}  // namespace kiln

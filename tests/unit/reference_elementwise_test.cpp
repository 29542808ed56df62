// Unit tests for the elementwise reference kernels: binary/variadic arithmetic with broadcasting,
// Pow, Equal, Where, the unary table, Clip, PRelu, Cast and QuantizeLinear/DequantizeLinear.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/executor.h"
#include "kernels/op_def.h"
#include "tests/support/op_harness.h"

namespace kiln {
namespace {

using namespace test;

// ---- helpers ----

// This file's pseudo-random test values: [-4, 4).
constexpr ValueRange kValues{4, 777u};

ValueType vt(DType dt, SymShape s) { return ValueType::of(dt, std::move(s)); }

std::string type_of(const ValueType& t) {
  return std::string(dtype_name(t.dtype)) + (t.rank_known ? sym_shape_to_string(t.shape) : "unranked");
}

template <typename T>
void require_equal(const Tensor& got, const std::vector<T>& want) {
  REQUIRE(got.dtype() == dtype_of<T>::value);
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(got.data<T>()[i] == want[static_cast<size_t>(i)]);
  }
}

void require_error(const Result<Tensor>& r, ErrorCode code, const std::string& needle = "") {
  REQUIRE(!r);
  CHECK(r.error().code == code);
  if (!needle.empty()) CHECK(r.error().message.find(needle) != std::string::npos);
}

// Element offset of `index` (of the output shape) into a tensor of `shape` that broadcasts to it.
int64_t bcast_offset(const Shape& shape, const Shape& out, int64_t index) {
  int64_t off = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
    const int64_t coord = index % out[static_cast<size_t>(d)];
    index /= out[static_cast<size_t>(d)];
    const int64_t id = d - static_cast<int64_t>(out.size() - shape.size());
    if (id < 0) continue;
    const int64_t size = shape[static_cast<size_t>(id)];
    if (size != 1) off += coord * stride;
    stride *= size;
  }
  return off;
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

// ---- infer ----

TEST_CASE("Elementwise binary infer", "[elementwise]") {
  SECTION("symbolic batch broadcasts") {
    auto r = infer_op1(OpKind::Add, {}, {vt(DType::f32, {kBatch, 1, 7}), vt(DType::f32, {13, 1})});
    REQUIRE(r);
    CHECK(type_of(*r) == "float32[batch,13,7]");
    r = infer_op1(OpKind::Mul, {}, {vt(DType::i64, {kBatch, 3}), vt(DType::i64, {1, 3})});
    REQUIRE(r);
    CHECK(type_of(*r) == "int64[batch,3]");
    r = infer_op1(OpKind::Sum, {}, {vt(DType::f32, {7}), vt(DType::f32, {13, 1}), vt(DType::f32, {kBatch, 1, 1})});
    REQUIRE(r);
    CHECK(type_of(*r) == "float32[batch,13,7]");
    r = infer_op1(OpKind::Add, {}, {ValueType::unranked(DType::f32), vt(DType::f32, {13, 1})});
    REQUIRE(r);
    CHECK(type_of(*r) == "float32unranked");
    r = infer_op1(OpKind::Equal, {}, {vt(DType::i32, {kBatch, 7}), vt(DType::i32, {7})});
    REQUIRE(r);
    CHECK(type_of(*r) == "bool[batch,7]");
    r = infer_op1(OpKind::Where, {},
                  {vt(DType::boolean, {13, 1, 1}), vt(DType::i64, {kBatch, 1}), vt(DType::i64, {7})});
    REQUIRE(r);
    CHECK(type_of(*r) == "int64[13,batch,7]");
    r = infer_op1(OpKind::Pow, {}, {vt(DType::i32, {kBatch, 5}), vt(DType::f32, {})});
    REQUIRE(r);
    CHECK(type_of(*r) == "int32[batch,5]");
  }
  SECTION("errors") {
    auto r = infer_op1(OpKind::Add, {}, {vt(DType::f32, {13, 7}), vt(DType::f32, {5})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::shape_mismatch);
    CHECK(r.error().message.find("[13,7]") != std::string::npos);
    r = infer_op1(OpKind::Sub, {}, {vt(DType::f32, {7}), vt(DType::i64, {7})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::invalid_argument);
    CHECK(r.error().message.find("int64") != std::string::npos);
    r = infer_op1(OpKind::Add, {}, {vt(DType::boolean, {7}), vt(DType::boolean, {7})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::unsupported);
    r = infer_op1(OpKind::Where, {}, {vt(DType::f32, {7}), vt(DType::f32, {7}), vt(DType::f32, {7})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::invalid_argument);
    r = infer_op1(OpKind::Where, {}, {vt(DType::boolean, {7}), vt(DType::f32, {7}), vt(DType::i32, {7})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::invalid_argument);
    r = infer_op1(OpKind::Pow, {}, {vt(DType::u8, {7}), vt(DType::f32, {7})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::unsupported);
    r = infer_op1(OpKind::Max, {}, {vt(DType::f32, {7}), vt(DType::f32, {1}), vt(DType::f32, {6})});
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::shape_mismatch);
  }
}

// ---- Add Sub Mul Div ----

TEST_CASE("Elementwise Add/Sub/Mul/Div float32 broadcast", "[elementwise]") {
  const Shape sa{13, 1, 7}, sb{5, 1}, out{13, 5, 7};
  const Tensor a = rand_f32(sa, 1, kValues), b = rand_f32(sb, 2, kValues);
  struct Case {
    OpKind op;
    std::function<double(double, double)> f;
  };
  const std::vector<Case> cases = {{OpKind::Add, [](double x, double y) { return x + y; }},
                                   {OpKind::Sub, [](double x, double y) { return x - y; }},
                                   {OpKind::Mul, [](double x, double y) { return x * y; }},
                                   {OpKind::Div, [](double x, double y) { return x / y; }}};
  for (const Case& c : cases) {
    INFO(op_name(c.op));
    auto r = run_op1(c.op, {}, {a, b});
    REQUIRE(r);
    REQUIRE(r->shape() == out);
    std::vector<double> want(static_cast<size_t>(shape_numel(out)));
    for (int64_t i = 0; i < shape_numel(out); ++i)
      want[static_cast<size_t>(i)] = c.f(a.data<float>()[bcast_offset(sa, out, i)], b.data<float>()[bcast_offset(sb, out, i)]);
    require_close(*r, want, 1e-4);
  }
  SECTION("scalar and empty") {
    auto r = run_op1(OpKind::Mul, {}, {rand_f32({7}, 1, kValues), f32({}, {2.0f})});
    REQUIRE(r);
    CHECK(r->shape() == Shape{7});
    CHECK(r->data<float>()[3] == 2.0f * values(7, 1, kValues)[3]);
    r = run_op1(OpKind::Add, {}, {f32({0, 7}, {}), f32({1, 7}, std::vector<float>(7, 1.0f))});
    REQUIRE(r);
    CHECK(r->shape() == Shape{0, 7});
  }
}

TEST_CASE("Elementwise integer arithmetic", "[elementwise]") {
  SECTION("int32 div truncates, divide by zero gives 0, overflow wraps") {
    auto r = run_op1(OpKind::Div, {}, {i32({6}, {7, -7, 7, -7, 5, INT32_MIN}), i32({6}, {2, 2, -2, -2, 0, -1})});
    REQUIRE(r);
    require_equal<int32_t>(*r, {3, -3, -3, 3, 0, INT32_MIN});
    r = run_op1(OpKind::Add, {}, {i32({2}, {INT32_MAX, -5}), i32({1}, {1})});
    REQUIRE(r);
    require_equal<int32_t>(*r, {INT32_MIN, -4});
  }
  SECTION("int64 with broadcast") {
    const int64_t big = std::numeric_limits<int64_t>::max();
    auto r = run_op1(OpKind::Sub, {}, {i64({2, 1}, {10, -3}), i64({3}, {1, 2, 3})});
    REQUIRE(r);
    require_equal<int64_t>(*r, {9, 8, 7, -4, -5, -6});
    r = run_op1(OpKind::Mul, {}, {i64({2}, {big, 3000000000}), i64({2}, {2, 3000000000})});
    REQUIRE(r);
    require_equal<int64_t>(*r, {-2, 9000000000000000000});
    r = run_op1(OpKind::Div, {}, {i64({2}, {std::numeric_limits<int64_t>::min(), -9}), i64({2}, {-1, 4})});
    REQUIRE(r);
    require_equal<int64_t>(*r, {std::numeric_limits<int64_t>::min(), -2});
  }
  SECTION("uint8 wraps") {
    auto r = run_op1(OpKind::Add, {}, {make<uint8_t>({2}, {250, 3}), make<uint8_t>({2}, {10, 4})});
    REQUIRE(r);
    require_equal<uint8_t>(*r, {4, 7});
  }
}

// ---- Sum Mean Max Min ----

TEST_CASE("Elementwise variadic Sum/Mean/Max/Min", "[elementwise]") {
  const Shape s0{7}, s1{13, 1}, s2{1, 7}, out{13, 7};
  const Tensor a = rand_f32(s0, 3, kValues), b = rand_f32(s1, 4, kValues), c = rand_f32(s2, 5, kValues);
  auto at = [&](const Tensor& t, const Shape& s, int64_t i) { return static_cast<double>(t.data<float>()[bcast_offset(s, out, i)]); };
  std::vector<double> sum, mean, mx, mn;
  for (int64_t i = 0; i < shape_numel(out); ++i) {
    const double x = at(a, s0, i), y = at(b, s1, i), z = at(c, s2, i);
    sum.push_back(x + y + z);
    mean.push_back((x + y + z) / 3);
    mx.push_back(std::max({x, y, z}));
    mn.push_back(std::min({x, y, z}));
  }
  auto r = run_op1(OpKind::Sum, {}, {a, b, c});
  REQUIRE(r);
  REQUIRE(r->shape() == out);
  require_close(*r, sum, 1e-5);
  r = run_op1(OpKind::Mean, {}, {a, b, c});
  REQUIRE(r);
  require_close(*r, mean, 1e-5);
  r = run_op1(OpKind::Max, {}, {a, b, c});
  REQUIRE(r);
  require_close(*r, mx, 0);
  r = run_op1(OpKind::Min, {}, {a, b, c});
  REQUIRE(r);
  require_close(*r, mn, 0);

  SECTION("one input is a copy") {
    for (OpKind op : {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min}) {
      auto one = run_op1(op, {}, {a});
      REQUIRE(one);
      require_close(*one, std::vector<double>(a.data<float>(), a.data<float>() + 7), 0);
    }
  }
  SECTION("NaN propagates through Max/Min") {
    auto m = run_op1(OpKind::Max, {}, {f32({3}, {kNaN, 1.0f, 2.0f}), f32({3}, {0.0f, kNaN, 1.0f})});
    REQUIRE(m);
    require_close(*m, {NAN, NAN, 2.0});
    m = run_op1(OpKind::Min, {}, {f32({3}, {kNaN, 1.0f, 2.0f}), f32({3}, {0.0f, kNaN, 1.0f})});
    REQUIRE(m);
    require_close(*m, {NAN, NAN, 1.0});
  }
  SECTION("integers") {
    auto m = run_op1(OpKind::Mean, {}, {i32({3}, {INT32_MAX, 1, -7}), i32({3}, {INT32_MAX, 2, 0})});
    REQUIRE(m);
    require_equal<int32_t>(*m, {INT32_MAX, 1, -3});
    m = run_op1(OpKind::Max, {}, {i64({3}, {5, -1, 2}), i64({1}, {0}), i64({3}, {1, -2, 9})});
    REQUIRE(m);
    require_equal<int64_t>(*m, {5, 0, 9});
    m = run_op1(OpKind::Min, {}, {i64({3}, {5, -1, 2}), i64({1}, {0})});
    REQUIRE(m);
    require_equal<int64_t>(*m, {0, -1, 0});
    m = run_op1(OpKind::Sum, {}, {i64({2}, {1, 2}), i64({2}, {10, 20}), i64({2}, {100, 200}), i64({}, {1000})});
    REQUIRE(m);
    require_equal<int64_t>(*m, {1111, 1222});
  }
}

// ---- Pow ----

TEST_CASE("Elementwise Pow", "[elementwise]") {
  SECTION("float with broadcast") {
    const Tensor x = f32({2, 3}, {1, 2, 3, 4, 0.5f, 9});
    auto r = run_op1(OpKind::Pow, {}, {x, f32({3}, {2, 0.5f, -1})});
    REQUIRE(r);
    require_close(*r, {1, std::sqrt(2.0), 1.0 / 3, 16, std::sqrt(0.5), 1.0 / 9});
    r = run_op1(OpKind::Pow, {}, {x, i64({}, {3})});
    REQUIRE(r);
    CHECK(r->dtype() == DType::f32);
    require_close(*r, {1, 8, 27, 64, 0.125, 729});
    r = run_op1(OpKind::Pow, {}, {f32({1}, {-2}), f32({1}, {0.5f})});
    REQUIRE(r);
    CHECK(std::isnan(r->data<float>()[0]));
  }
  SECTION("integer base") {
    auto r = run_op1(OpKind::Pow, {}, {i64({4}, {3, -2, 7, 5}), i64({4}, {39, 3, 0, -1})});
    REQUIRE(r);
    require_equal<int64_t>(*r, {4052555153018976267, -8, 1, 0});
    r = run_op1(OpKind::Pow, {}, {i32({3}, {2, 4, 10}), f32({3}, {3.0f, 0.5f, 20.0f})});
    REQUIRE(r);
    require_equal<int32_t>(*r, {8, 2, INT32_MAX});  // 1e20 saturates
    r = run_op1(OpKind::Pow, {}, {i32({3}, {1, 2, 3}), i32({3}, {4, 5, 6})});
    REQUIRE(r);
    require_equal<int32_t>(*r, {1, 32, 729});
  }
}

// ---- Equal and Where ----

TEST_CASE("Elementwise Equal", "[elementwise]") {
  auto r = run_op1(OpKind::Equal, {}, {f32({2, 3}, {1, 2, 3, 4, kNaN, 0.0f}), f32({3}, {1, 5, -0.0f})});
  REQUIRE(r);
  require_equal<bool>(*r, {true, false, false, false, false, true});
  r = run_op1(OpKind::Equal, {}, {i64({3, 1}, {1, 2, 3}), i64({2}, {2, 3})});
  REQUIRE(r);
  require_equal<bool>(*r, {false, false, true, false, false, true});
  r = run_op1(OpKind::Equal, {}, {boolean({3}, {true, false, true}), boolean({1}, {true})});
  REQUIRE(r);
  require_equal<bool>(*r, {true, false, true});
  r = run_op1(OpKind::Equal, {},
              {make<Half>({2}, {Half(1.5f), Half(2.0f)}), make<Half>({2}, {Half(1.5f), Half(2.5f)})});
  REQUIRE(r);
  require_equal<bool>(*r, {true, false});
  require_error(run_op1(OpKind::Equal, {}, {f32({3}, {1, 2, 3}), i32({3}, {1, 2, 3})}), ErrorCode::invalid_argument);
}

TEST_CASE("Elementwise Where", "[elementwise]") {
  const Shape sc{13, 1}, sx{7}, sy{1, 1}, out{13, 7};
  std::vector<bool> cv;
  for (int i = 0; i < 13; ++i) cv.push_back(i % 3 == 0);
  const Tensor c = boolean(sc, cv), x = rand_f32(sx, 6, kValues), y = f32(sy, {-100.0f});
  auto r = run_op1(OpKind::Where, {}, {c, x, y});
  REQUIRE(r);
  REQUIRE(r->shape() == out);
  std::vector<double> want;
  for (int64_t i = 0; i < 13 * 7; ++i) want.push_back(cv[static_cast<size_t>(i / 7)] ? x.data<float>()[i % 7] : -100.0);
  require_close(*r, want, 0);
  r = run_op1(OpKind::Where, {}, {boolean({2}, {true, false}), i64({2}, {1, 2}), i64({}, {-1})});
  REQUIRE(r);
  require_equal<int64_t>(*r, {1, -1});
}

// ---- unary table ----

TEST_CASE("Elementwise unary float ops", "[elementwise]") {
  const Tensor x = f32({13, 7}, [] {
    std::vector<float> v = values(13 * 7, 9, kValues);
    v[0] = 0.0f;
    v[1] = -30.0f;
    v[2] = 30.0f;
    return v;
  }());
  const double selu_a = 1.67326319217681884765625, selu_g = 1.05070102214813232421875;
  struct Case {
    OpKind op;
    Attrs attrs;
    std::function<double(double)> f;
  };
  const std::vector<Case> cases = {
      {OpKind::Relu, {}, [](double v) { return v > 0 ? v : 0; }},
      {OpKind::LeakyRelu, {}, [](double v) { return v > 0 ? v : 0.01 * v; }},
      {OpKind::LeakyRelu, attrs_of({{"alpha", 0.3f}}), [](double v) { return v > 0 ? v : 0.3 * v; }},
      {OpKind::Elu, {}, [](double v) { return v > 0 ? v : std::exp(v) - 1; }},
      {OpKind::Elu, attrs_of({{"alpha", 2.0f}}), [](double v) { return v > 0 ? v : 2 * (std::exp(v) - 1); }},
      {OpKind::Selu, {}, [&](double v) { return v > 0 ? selu_g * v : selu_g * selu_a * (std::exp(v) - 1); }},
      {OpKind::Selu, attrs_of({{"alpha", 2.0f}, {"gamma", 3.0f}}), [](double v) { return v > 0 ? 3 * v : 6 * (std::exp(v) - 1); }},
      {OpKind::Sigmoid, {}, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {OpKind::HardSigmoid, {}, [](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); }},
      {OpKind::HardSigmoid, attrs_of({{"alpha", 0.5f}, {"beta", 0.25f}}), [](double v) { return std::clamp(0.5 * v + 0.25, 0.0, 1.0); }},
      {OpKind::HardSwish, {}, [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }},
      {OpKind::Tanh, {}, [](double v) { return std::tanh(v); }},
      {OpKind::Softplus, {}, [](double v) { return std::log(1 + std::exp(v)); }},
      {OpKind::Erf, {}, [](double v) { return std::erf(v); }},
      {OpKind::Exp, {}, [](double v) { return std::exp(v); }},
      {OpKind::Neg, {}, [](double v) { return -v; }},
      {OpKind::Abs, {}, [](double v) { return std::fabs(v); }},
  };
  for (const Case& c : cases) {
    INFO(op_name(c.op));
    auto r = run_op1(c.op, c.attrs, {x});
    REQUIRE(r);
    REQUIRE(r->shape() == x.shape());
    std::vector<double> want;
    for (int64_t i = 0; i < x.numel(); ++i) want.push_back(c.f(x.data<float>()[i]));
    require_close(*r, want, 1e-5);
  }
  SECTION("Log Sqrt Reciprocal, including the edges") {
    const Tensor p = f32({5}, {0.25f, 1.0f, 7.0f, 0.0f, -1.0f});
    auto r = run_op1(OpKind::Log, {}, {p});
    REQUIRE(r);
    require_close(*r, {std::log(0.25), 0, std::log(7.0), -HUGE_VAL, NAN});
    r = run_op1(OpKind::Sqrt, {}, {p});
    REQUIRE(r);
    require_close(*r, {0.5, 1, std::sqrt(7.0), 0, NAN});
    r = run_op1(OpKind::Reciprocal, {}, {p});
    REQUIRE(r);
    require_close(*r, {4, 1, 1.0 / 7, HUGE_VAL, -1});
  }
  SECTION("NaN stays NaN") {
    for (OpKind op : {OpKind::Relu, OpKind::HardSigmoid, OpKind::HardSwish, OpKind::Sigmoid, OpKind::LeakyRelu}) {
      auto r = run_op1(op, {}, {f32({1}, {kNaN})});
      REQUIRE(r);
      CHECK(std::isnan(r->data<float>()[0]));
    }
  }
}

TEST_CASE("Elementwise unary dtypes and errors", "[elementwise]") {
  SECTION("integer Relu/Neg/Abs") {
    auto r = run_op1(OpKind::Relu, {}, {i32({3}, {-5, 0, 7})});
    REQUIRE(r);
    require_equal<int32_t>(*r, {0, 0, 7});
    r = run_op1(OpKind::Neg, {}, {i64({3}, {-5, std::numeric_limits<int64_t>::min(), 7})});
    REQUIRE(r);
    require_equal<int64_t>(*r, {5, std::numeric_limits<int64_t>::min(), -7});
    r = run_op1(OpKind::Abs, {}, {i32({3}, {-5, INT32_MIN, 7})});
    REQUIRE(r);
    require_equal<int32_t>(*r, {5, INT32_MIN, 7});
    r = run_op1(OpKind::Abs, {}, {make<int8_t>({2}, {-128, -3})});
    REQUIRE(r);
    require_equal<int8_t>(*r, {-128, 3});
  }
  SECTION("float16 and bfloat16 compute in float") {
    auto r = run_op1(OpKind::Sigmoid, {}, {make<Half>({2}, {Half(0.0f), Half(2.0f)})});
    REQUIRE(r);
    CHECK(r->dtype() == DType::f16);
    require_close(*r, {0.5, 1 / (1 + std::exp(-2.0))}, 1e-3);
    r = run_op1(OpKind::Exp, {}, {make<BFloat16>({2}, {BFloat16(0.0f), BFloat16(1.0f)})});
    REQUIRE(r);
    CHECK(r->dtype() == DType::bf16);
    require_close(*r, {1, std::exp(1.0)}, 1e-2);
  }
  SECTION("errors") {
    require_error(run_op1(OpKind::Sigmoid, {}, {i32({2}, {1, 2})}), ErrorCode::unsupported, "int32");
    require_error(run_op1(OpKind::Neg, {}, {boolean({1}, {true})}), ErrorCode::unsupported, "bool");
    require_error(run_op1(OpKind::LeakyRelu, attrs_of({{"alpha", int64_t{1}}}), {f32({1}, {1})}),
                  ErrorCode::invalid_argument, "alpha");
  }
  SECTION("infer keeps symbolic shapes") {
    auto r = infer_op1(OpKind::Tanh, {}, {vt(DType::f32, {kBatch, 13})});
    REQUIRE(r);
    CHECK(type_of(*r) == "float32[batch,13]");
    r = infer_op1(OpKind::Abs, {}, {ValueType::unranked(DType::i64)});
    REQUIRE(r);
    CHECK(type_of(*r) == "int64unranked");
  }
}

// ---- Clip ----

TEST_CASE("Elementwise Clip", "[elementwise]") {
  const Tensor x = f32({7}, {-3, -1, 0, 0.5f, 1, 2, kNaN});
  auto r = run_op1(OpKind::Clip, {}, {x, f32({}, {-1.5f}), f32({}, {1.5f})});
  REQUIRE(r);
  require_close(*r, {-1.5, -1, 0, 0.5, 1, 1.5, NAN}, 0);
  r = run_op1(OpKind::Clip, {}, {x, f32({}, {0.0f}), std::nullopt});
  REQUIRE(r);
  require_close(*r, {0, 0, 0, 0.5, 1, 2, NAN}, 0);
  r = run_op1(OpKind::Clip, {}, {x, std::nullopt, f32({1}, {0.0f})});
  REQUIRE(r);
  require_close(*r, {-3, -1, 0, 0, 0, 0, NAN}, 0);
  r = run_op1(OpKind::Clip, {}, {x});
  REQUIRE(r);
  require_close(*r, {-3, -1, 0, 0.5, 1, 2, NAN}, 0);
  r = run_op1(OpKind::Clip, {}, {x, f32({}, {2.0f}), f32({}, {1.0f})});  // min > max: max wins
  REQUIRE(r);
  require_close(*r, {1, 1, 1, 1, 1, 1, NAN}, 0);
  r = run_op1(OpKind::Clip, {}, {i64({4}, {-10, 0, 10, 100}), i64({}, {-5}), i64({}, {50})});
  REQUIRE(r);
  require_equal<int64_t>(*r, {-5, 0, 10, 50});
  r = run_op1(OpKind::Clip, {}, {i32({3}, {-10, 0, 10}), std::nullopt, i32({}, {5})});
  REQUIRE(r);
  require_equal<int32_t>(*r, {-10, 0, 5});

  require_error(run_op1(OpKind::Clip, {}, {x, f32({2}, {0, 1})}), ErrorCode::shape_mismatch, "[2]");
  require_error(run_op1(OpKind::Clip, {}, {x, i64({}, {0})}), ErrorCode::invalid_argument, "int64");
  auto t = infer_op1(OpKind::Clip, {}, {vt(DType::f32, {kBatch, 7}), std::nullopt, vt(DType::f32, {})});
  REQUIRE(t);
  CHECK(type_of(*t) == "float32[batch,7]");
}

// ---- PRelu ----

TEST_CASE("Elementwise PRelu", "[elementwise]") {
  const Shape sx{2, 3, 13, 7}, ss{3, 1, 1};
  const Tensor x = rand_f32(sx, 11, kValues), slope = f32(ss, {0.1f, -2.0f, 0.5f});
  auto r = run_op1(OpKind::PRelu, {}, {x, slope});
  REQUIRE(r);
  REQUIRE(r->shape() == sx);
  std::vector<double> want;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.data<float>()[i];
    want.push_back(v < 0 ? v * slope.data<float>()[bcast_offset(ss, sx, i)] : v);
  }
  require_close(*r, want, 1e-6);
  r = run_op1(OpKind::PRelu, {}, {i64({3}, {-4, 0, 5}), i64({1}, {3})});
  REQUIRE(r);
  require_equal<int64_t>(*r, {-12, 0, 5});

  auto t = infer_op1(OpKind::PRelu, {}, {vt(DType::f32, {kBatch, 3, 13, 7}), vt(DType::f32, {3, 1, 1})});
  REQUIRE(t);
  CHECK(type_of(*t) == "float32[batch,3,13,7]");
  // The slope must broadcast to X, not the other way round.
  require_error(run_op1(OpKind::PRelu, {}, {rand_f32({3}, 1, kValues), rand_f32({2, 3}, 1, kValues)}),
                ErrorCode::shape_mismatch, "[2,3]");
  require_error(run_op1(OpKind::PRelu, {}, {rand_f32({2, 3, 13, 7}, 1, kValues), rand_f32({3}, 1, kValues)}),
                ErrorCode::shape_mismatch);
  require_error(run_op1(OpKind::PRelu, {}, {rand_f32({3}, 1, kValues), i64({1}, {1})}), ErrorCode::invalid_argument);
}

// ---- Cast ----

TEST_CASE("Elementwise Cast", "[elementwise]") {
  auto cast = [](const Tensor& x, int64_t to) { return run_op1(OpKind::Cast, attrs_of({{"to", to}}), {x}); };
  const Tensor x = f32({9}, {-2.7f, -0.5f, 0.0f, 0.9f, 2.5f, 300.0f, -300.0f, 1e20f, kNaN});

  SECTION("float to integers truncates and saturates") {
    auto r = cast(x, 6);
    REQUIRE(r);
    require_equal<int32_t>(*r, {-2, 0, 0, 0, 2, 300, -300, INT32_MAX, 0});
    r = cast(x, 7);
    REQUIRE(r);
    require_equal<int64_t>(*r, {-2, 0, 0, 0, 2, 300, -300, std::numeric_limits<int64_t>::max(), 0});
    r = cast(x, 2);
    REQUIRE(r);
    require_equal<uint8_t>(*r, {0, 0, 0, 0, 2, 255, 0, 255, 0});
    r = cast(x, 3);
    REQUIRE(r);
    require_equal<int8_t>(*r, {-2, 0, 0, 0, 2, 127, -128, 127, 0});
  }
  SECTION("to and from bool") {
    auto r = cast(x, 9);
    REQUIRE(r);
    require_equal<bool>(*r, {true, true, false, true, true, true, true, true, true});
    r = cast(boolean({2}, {true, false}), 1);
    REQUIRE(r);
    require_close(*r, {1, 0}, 0);
    r = cast(i64({3}, {0, -1, 256}), 9);
    REQUIRE(r);
    require_equal<bool>(*r, {false, true, true});
  }
  SECTION("integer narrowing wraps, widening is exact") {
    auto r = cast(i64({4}, {300, -1, 127, -129}), 3);
    REQUIRE(r);
    require_equal<int8_t>(*r, {44, -1, 127, 127});
    r = cast(i64({2}, {4294967297, -5}), 6);
    REQUIRE(r);
    require_equal<int32_t>(*r, {1, -5});
    r = cast(make<uint8_t>({2}, {255, 7}), 7);
    REQUIRE(r);
    require_equal<int64_t>(*r, {255, 7});
    r = cast(i32({2}, {16777217, -3}), 1);
    REQUIRE(r);
    require_close(*r, {16777216, -3}, 0);
  }
  SECTION("float16 and bfloat16") {
    auto r = cast(f32({4}, {1.0f, 0.1f, 70000.0f, -2.5f}), 10);
    REQUIRE(r);
    REQUIRE(r->dtype() == DType::f16);
    CHECK(r->data<Half>()[0].bits == 0x3c00);
    CHECK(r->data<Half>()[1].bits == 0x2e66);  // 0.1 rounds to nearest
    CHECK(std::isinf(r->value_as_double(2)));
    CHECK(r->value_as_double(3) == -2.5);
    auto back = cast(*r, 7);
    REQUIRE(back);
    require_equal<int64_t>(*back, {1, 0, std::numeric_limits<int64_t>::max(), -2});
    r = cast(f32({2}, {1.0f, 3.140625f}), 16);
    REQUIRE(r);
    REQUIRE(r->dtype() == DType::bf16);
    CHECK(r->data<BFloat16>()[0].bits == 0x3f80);
    CHECK(r->value_as_double(1) == 3.140625);
    back = cast(*r, 10);
    REQUIRE(back);
    require_close(*back, {1, 3.140625}, 0);
  }
  SECTION("every pair of dtypes round-trips small integers") {
    const std::vector<std::pair<int64_t, DType>> types = {{1, DType::f32}, {2, DType::u8}, {3, DType::i8}, {6, DType::i32},
                                                          {7, DType::i64}, {10, DType::f16}, {16, DType::bf16}};
    const Tensor src = i64({13}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    for (const auto& [to_a, dt_a] : types) {
      for (const auto& [to_b, dt_b] : types) {
        INFO(dtype_name(dt_a) << " -> " << dtype_name(dt_b));
        auto a = cast(src, to_a);
        REQUIRE(a);
        CHECK(a->dtype() == dt_a);
        auto b = cast(*a, to_b);
        REQUIRE(b);
        CHECK(b->dtype() == dt_b);
        for (int64_t i = 0; i < 13; ++i) CHECK(b->value_as_int(i) == i);
      }
    }
  }
  SECTION("errors and infer") {
    require_error(cast(x, 11), ErrorCode::unsupported, "double");
    require_error(cast(x, 8), ErrorCode::unsupported, "string");
    require_error(run_op1(OpKind::Cast, {}, {x}), ErrorCode::invalid_argument, "'to'");
    require_error(run_op1(OpKind::Cast, attrs_of({{"to", 1.0f}}), {x}), ErrorCode::invalid_argument, "'to'");
    auto t = infer_op1(OpKind::Cast, attrs_of({{"to", int64_t{7}}}), {vt(DType::f32, {kBatch, 13})});
    REQUIRE(t);
    CHECK(type_of(*t) == "int64[batch,13]");
    t = infer_op1(OpKind::Cast, attrs_of({{"to", int64_t{9}}}), {ValueType::unranked(DType::f32)});
    REQUIRE(t);
    CHECK(type_of(*t) == "boolunranked");
  }
}

// ---- QuantizeLinear / DequantizeLinear ----

TEST_CASE("QuantizeLinear rounds half to even and saturates", "[elementwise][quantize]") {
  const Tensor x = f32({9}, {0.0f, 1.0f, 3.0f, 5.0f, -1.0f, -3.0f, 1000.0f, -1000.0f, kNaN});
  // x / 2 = 0, 0.5, 1.5, 2.5, -0.5, -1.5, 500, -500: halves go to the even neighbour.
  auto r = run_op1(OpKind::QuantizeLinear, {}, {x, f32({}, {2.0f}), make<int8_t>({}, {0})});
  REQUIRE(r);
  require_equal<int8_t>(*r, {0, 0, 2, 2, 0, -2, 127, -128, 0});
  r = run_op1(OpKind::QuantizeLinear, {}, {x, f32({}, {2.0f}), make<uint8_t>({}, {128})});
  REQUIRE(r);
  require_equal<uint8_t>(*r, {128, 128, 130, 130, 128, 126, 255, 0, 128});
  r = run_op1(OpKind::QuantizeLinear, {}, {x, f32({}, {2.0f})});  // no zero point: uint8, zero point 0
  REQUIRE(r);
  require_equal<uint8_t>(*r, {0, 0, 2, 2, 0, 0, 255, 0, 0});
}

TEST_CASE("QuantizeLinear and DequantizeLinear per axis", "[elementwise][quantize]") {
  // [2, 3, 2] with one scale per channel of axis 1; then axis -1 on the last dim.
  const Tensor x = f32({2, 3, 2}, {1, -1, 4, 8, -9, 30, 2, 2, -4, 6, 3, 0});
  const Tensor scale = f32({3}, {1.0f, 2.0f, 3.0f});
  const Tensor zp = make<int8_t>({3}, {0, 1, -1});
  auto q = run_op1(OpKind::QuantizeLinear, {}, {x, scale, zp});
  REQUIRE(q);
  require_equal<int8_t>(*q, {1, -1, 3, 5, -4, 9, 2, 2, -1, 4, 0, -1});
  auto d = run_op1(OpKind::DequantizeLinear, {}, {*q, scale, zp});
  REQUIRE(d);
  require_close(*d, {1, -1, 4, 8, -9, 30, 2, 2, -4, 6, 3, 0}, 0);
  q = run_op1(OpKind::QuantizeLinear, attrs_of({{"axis", int64_t{-1}}}),
              {x, f32({2}, {1.0f, 4.0f}), make<uint8_t>({2}, {10, 0})});
  REQUIRE(q);
  require_equal<uint8_t>(*q, {11, 0, 14, 2, 1, 8, 12, 0, 6, 2, 13, 0});
  d = run_op1(OpKind::DequantizeLinear, attrs_of({{"axis", int64_t{-1}}}),
              {*q, f32({2}, {1.0f, 4.0f}), make<uint8_t>({2}, {10, 0})});
  REQUIRE(d);
  require_close(*d, {1, 0, 4, 8, -9, 32, 2, 0, -4, 8, 3, 0}, 0);
}

TEST_CASE("DequantizeLinear reads int32 and checks its parameters", "[elementwise][quantize]") {
  auto d = run_op1(OpKind::DequantizeLinear, {}, {i32({3}, {-7, 0, 1 << 20}), f32({}, {0.5f})});
  REQUIRE(d);
  require_close(*d, {-3.5, 0, 524288}, 0);
  const Tensor x = make<int8_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  require_error(run_op1(OpKind::DequantizeLinear, {}, {x, f32({2}, {1, 2})}), ErrorCode::shape_mismatch, "axis 1");
  require_error(run_op1(OpKind::DequantizeLinear, {}, {x, f32({}, {1}), make<uint8_t>({}, {0})}),
                ErrorCode::invalid_argument, "zero_point");
  require_error(run_op1(OpKind::QuantizeLinear, {}, {f32({2}, {1, 2}), f32({}, {1}), i32({}, {0})}),
                ErrorCode::unsupported, "uint8 or int8");
  require_error(run_op1(OpKind::QuantizeLinear, attrs_of({{"block_size", int64_t{2}}}), {f32({2}, {1, 2}), f32({}, {1})}),
                ErrorCode::unsupported, "block_size");
}

}  // namespace kiln

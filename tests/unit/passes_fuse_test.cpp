// Fused epilogues (kernels/post_ops.h): the reference Conv/Gemm/MatMul computing act(op(x) +
// residual), and the passes that create them, fuse_matmul_bias, fuse_residual_add and
// fuse_activation. Each pass test runs through run_passes with check_numerics, so the fused graph
// is also checked against the unfused one on the reference executor. fuse_depth_first and the
// normalization fusions have files of their own (passes_depth_first_test, passes_normalization_fuse_test).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>

#include "compilers/passes/pipeline.h"
#include "tests/support/pass_test_helpers.h"

using namespace kiln;
using namespace kiln::testing::passes;

namespace {

// The epilogue applied by hand: act(y + residual).
Tensor apply_epilogue(const Tensor& y, const Tensor* residual, const PostOps& post) {
  Tensor out = Tensor::zeros(DType::f32, y.shape());
  for (int64_t i = 0; i < y.numel(); ++i) {
    const float v = y.data<float>()[i] + (residual ? residual->data<float>()[i] : 0.0f);
    out.data<float>()[i] = activation_apply(post, v);
  }
  return out;
}

const PostOps kEveryActivation[] = {
    {Activation::none},           {Activation::relu},         {Activation::clip, 0.0f, 6.0f},
    {Activation::leaky_relu, 0.1f}, {Activation::sigmoid},    {Activation::silu},
    {Activation::hard_swish},     {Activation::hard_sigmoid, 0.2f, 0.5f}, {Activation::gelu_erf},
    {Activation::tanh},           {Activation::elu, 0.7f},
};

}  // namespace

// ---- the reference kernels ----

TEST_CASE("Conv computes act(conv + residual) for every fused activation", "[passes][epilogue]") {
  const Tensor x = testing::GraphBuilder::random({1, 3, 5, 5}, 11), residual = testing::GraphBuilder::random({1, 4, 5, 5}, 12);
  Builder plain;
  const ValueId px = plain.input("x", {1, 3, 5, 5});
  plain.output(plain.conv("y", px, 3, 4));
  auto conv_out = execute(plain.g, {x});
  REQUIRE(conv_out);
  for (const PostOps& post : kEveryActivation) {
    INFO(activation_name(post.activation));
    for (bool with_residual : {false, true}) {
      Graph fused = plain.g;
      Node& conv = fused.nodes[0];
      post_ops_to_attrs(post, conv.attrs);
      std::vector<Tensor> inputs = {x};
      if (with_residual) {
        const ValueId r = fused.add_value("r", ValueType::of(DType::f32, {1, 4, 5, 5}));
        fused.inputs.push_back(r);
        conv.inputs.push_back(r);
        inputs.push_back(residual);
      }
      auto got = execute(fused, inputs);
      REQUIRE(got);
      require_close(got->at(0), apply_epilogue(conv_out->at(0), with_residual ? &residual : nullptr, post));
    }
  }
}

TEST_CASE("a 1x1 Conv with residual and relu, by hand", "[passes][epilogue]") {
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {1, 1, 1, 3}));
  const ValueId w = g.add_value("w", ValueType::of(DType::f32, {1, 1, 1, 1}));
  const ValueId r = g.add_value("r", ValueType::of(DType::f32, {1, 1, 1, 3}));
  const ValueId y = g.add_value("y", ValueType::unranked(DType::f32));
  g.initializers[w] = Tensor::from_values<float>({1, 1, 1, 1}, std::vector<float>{2.0f});
  g.initializers[r] = Tensor::from_values<float>({1, 1, 1, 3}, std::vector<float>{1.0f, 1.0f, -10.0f});
  g.inputs = {x};
  g.outputs = {y};
  Attrs a;
  a.set("activation", std::string("relu"));
  g.add_node(Node{"conv", OpKind::Conv, a, {x, w, kNoValue, r}, {y}});
  auto got = execute(g, {Tensor::from_values<float>({1, 1, 1, 3}, std::vector<float>{-1.0f, 0.5f, 3.0f})});
  REQUIRE(got);
  // relu(2x + r): relu(-1) = 0, relu(2) = 2, relu(-4) = 0
  REQUIRE(got->at(0).data<float>()[0] == 0.0f);
  REQUIRE(got->at(0).data<float>()[1] == 2.0f);
  REQUIRE(got->at(0).data<float>()[2] == 0.0f);
}

TEST_CASE("Gemm (with C) and batched MatMul compute act(op + residual)", "[passes][epilogue]") {
  SECTION("Gemm: residual is input 3") {
    const Tensor a = testing::GraphBuilder::random({3, 4}, 21), res = testing::GraphBuilder::random({3, 5}, 22);
    Builder b;
    const ValueId in = b.input("a", {3, 4});
    Attrs attrs;
    attrs.set("transB", int64_t{1});
    attrs.set("beta", 0.5f);
    b.output(b.node(OpKind::Gemm, "y", {in, b.weight("w", {5, 4}), b.weight("c", {5})}, attrs));
    auto plain = execute(b.g, {a});
    REQUIRE(plain);
    Graph fused = b.g;
    const ValueId r = fused.add_value("r", ValueType::of(DType::f32, {3, 5}));
    fused.inputs.push_back(r);
    fused.nodes[0].inputs.push_back(r);
    const PostOps post{Activation::leaky_relu, 0.25f};
    post_ops_to_attrs(post, fused.nodes[0].attrs);
    auto got = execute(fused, {a, res});
    REQUIRE(got);
    require_close(got->at(0), apply_epilogue(plain->at(0), &res, post));
  }
  SECTION("MatMul: residual is input 3, after the bias (input 2)") {
    const Tensor a = testing::GraphBuilder::random({2, 3, 4}, 31), res = testing::GraphBuilder::random({2, 3, 6}, 32);
    const bool with_bias = GENERATE(false, true);
    INFO("bias: " << with_bias);
    Builder b;
    const ValueId in = b.input("a", {2, 3, 4});
    const ValueId w = b.weight("w", {4, 6});
    if (with_bias) {
      b.output(b.node(OpKind::Add, "y", {b.node(OpKind::MatMul, "p", {in, w}), b.weight("bias", {6})}));
    } else {
      b.output(b.node(OpKind::MatMul, "y", {in, w}));
    }
    auto plain = execute(b.g, {a});
    REQUIRE(plain);
    Graph fused = b.g;
    if (with_bias) {  // MatMul(a, w, bias) writing y
      Node& mm = fused.nodes[0];
      mm.inputs.push_back(fused.find_value("bias"));
      mm.outputs[0] = fused.find_value("y");
      fused.nodes.pop_back();
      fused.value(fused.find_value("y")).producer = 0;
    }
    const ValueId r = fused.add_value("r", ValueType::of(DType::f32, {2, 3, 6}));
    fused.inputs.push_back(r);
    fused.nodes[0].inputs.resize(3, kNoValue);
    fused.nodes[0].inputs.push_back(r);
    const PostOps post{Activation::gelu_erf};
    post_ops_to_attrs(post, fused.nodes[0].attrs);
    auto got = execute(fused, {a, res});
    REQUIRE(got);
    require_close(got->at(0), apply_epilogue(plain->at(0), &res, post));
  }
}

TEST_CASE("epilogue inference refuses a broadcast or mistyped residual and unknown activations",
          "[passes][epilogue]") {
  auto infer = [](OpKind op, std::vector<ValueType> types, const Attrs& attrs) {
    InferContext ctx;
    ctx.attrs = &attrs;
    for (const ValueType& t : types) ctx.inputs.push_back(&t);
    ctx.values.assign(types.size(), nullptr);
    return op_def(op).infer(ctx);
  };
  const ValueType a = ValueType::of(DType::f32, {2, 3}), w = ValueType::of(DType::f32, {3, 4});
  const ValueType bias = ValueType::of(DType::f32, {4});
  REQUIRE(infer(OpKind::MatMul, {a, w, bias, ValueType::of(DType::f32, {2, 4})}, {}));
  const Status broadcast = infer(OpKind::MatMul, {a, w, bias, ValueType::of(DType::f32, {4})}, {});
  REQUIRE_FALSE(broadcast);
  REQUIRE(broadcast.code() == ErrorCode::shape_mismatch);
  const Status dtype = infer(OpKind::MatMul, {a, w, bias, ValueType::of(DType::i64, {2, 4})}, {});
  REQUIRE_FALSE(dtype);
  REQUIRE(dtype.code() == ErrorCode::invalid_argument);
  // MatMul's bias: a vector of N float32 values, nothing else
  const Status matrix_bias = infer(OpKind::MatMul, {a, w, ValueType::of(DType::f32, {2, 4})}, {});
  REQUIRE_FALSE(matrix_bias);
  REQUIRE(matrix_bias.message().find("vector of N = 4") != std::string::npos);
  REQUIRE_FALSE(infer(OpKind::MatMul, {a, w, ValueType::of(DType::f32, {3})}, {}));
  REQUIRE_FALSE(infer(OpKind::MatMul, {a, w, ValueType::of(DType::i64, {4})}, {}));
  Attrs swish;
  swish.set("activation", std::string("swish"));
  const Status unknown = infer(OpKind::Gemm, {a, w}, swish);
  REQUIRE_FALSE(unknown);
  REQUIRE(unknown.message().find("unknown fused activation 'swish'") != std::string::npos);
  const ValueType x = ValueType::of(DType::f32, {1, 2, 4, 4}), k = ValueType::of(DType::f32, {3, 2, 1, 1});
  REQUIRE_FALSE(infer(OpKind::Conv, {x, k, ValueType::of(DType::f32, {3}), ValueType::of(DType::f32, {1, 3, 4, 5})}, {}));
  REQUIRE(infer(OpKind::Conv, {x, k, ValueType::of(DType::f32, {3}), ValueType::of(DType::f32, {1, 3, 4, 4})}, {}));
}

// ---- fuse_activation ----

namespace {

struct ActivationCase {
  const char* what;
  std::function<ValueId(Builder&, ValueId)> build;  // appends the activation after x; returns its output
  PostOps expected;
};

ActivationCase activation_case(const char* what, std::function<ValueId(Builder&, ValueId)> build, PostOps expected) {
  return ActivationCase{what, std::move(build), expected};
}

std::vector<ActivationCase> activation_cases() {
  const float sqrt2 = 1.4142135f;
  return {
      activation_case("Relu", [](Builder& b, ValueId x) { return b.node(OpKind::Relu, "y", {x}); },
                      {Activation::relu}),
      activation_case("Relu6 as Clip with Constant nodes",
                      [](Builder& b, ValueId x) {
                        return b.node(OpKind::Clip, "y", {x, b.constant("lo", 0.0f), b.constant("hi", 6.0f)});
                      },
                      {Activation::clip, 0.0f, 6.0f}),
      activation_case("Clip with only min (initializer)",
                      [](Builder& b, ValueId x) { return b.node(OpKind::Clip, "y", {x, b.scalar("lo", -0.5f)}); },
                      {Activation::clip, -0.5f, FLT_MAX}),
      activation_case("Clip with only max",
                      [](Builder& b, ValueId x) {
                        return b.node(OpKind::Clip, "y", {x, kNoValue, b.scalar("hi", 0.25f)});
                      },
                      {Activation::clip, -FLT_MAX, 0.25f}),
      activation_case("LeakyRelu",
                      [](Builder& b, ValueId x) {
                        return b.node(OpKind::LeakyRelu, "y", {x}, float_attrs({{"alpha", 0.1f}}));
                      },
                      {Activation::leaky_relu, 0.1f}),
      activation_case("LeakyRelu default alpha",
                      [](Builder& b, ValueId x) { return b.node(OpKind::LeakyRelu, "y", {x}); },
                      {Activation::leaky_relu, 0.01f}),
      activation_case("Sigmoid", [](Builder& b, ValueId x) { return b.node(OpKind::Sigmoid, "y", {x}); },
                      {Activation::sigmoid}),
      activation_case("HardSigmoid",
                      [](Builder& b, ValueId x) {
                        return b.node(OpKind::HardSigmoid, "y", {x}, float_attrs({{"alpha", 0.3f}, {"beta", 0.4f}}));
                      },
                      {Activation::hard_sigmoid, 0.3f, 0.4f}),
      activation_case("HardSwish", [](Builder& b, ValueId x) { return b.node(OpKind::HardSwish, "y", {x}); },
                      {Activation::hard_swish}),
      activation_case("Tanh", [](Builder& b, ValueId x) { return b.node(OpKind::Tanh, "y", {x}); },
                      {Activation::tanh}),
      activation_case("Elu",
                      [](Builder& b, ValueId x) { return b.node(OpKind::Elu, "y", {x}, float_attrs({{"alpha", 0.7f}})); },
                      {Activation::elu, 0.7f}),
      activation_case("SiLU: Mul(x, Sigmoid(x))",
                      [](Builder& b, ValueId x) {
                        return b.node(OpKind::Mul, "y", {x, b.node(OpKind::Sigmoid, "s", {x})});
                      },
                      {Activation::silu}),
      activation_case("SiLU: Mul(Sigmoid(x), x)",
                      [](Builder& b, ValueId x) {
                        return b.node(OpKind::Mul, "y", {b.node(OpKind::Sigmoid, "s", {x}), x});
                      },
                      {Activation::silu}),
      activation_case("GELU as PyTorch 1.13 exports it",
                      [sqrt2](Builder& b, ValueId x) {
                        const ValueId d = b.node(OpKind::Div, "d", {x, b.constant("sqrt2", sqrt2)});
                        const ValueId e = b.node(OpKind::Erf, "e", {d});
                        const ValueId a = b.node(OpKind::Add, "a", {e, b.constant("one", 1.0f)});
                        const ValueId m = b.node(OpKind::Mul, "m", {x, a});
                        return b.node(OpKind::Mul, "y", {m, b.constant("half", 0.5f)});
                      },
                      {Activation::gelu_erf}),
      activation_case("GELU as (0.5 * x) * (1 + erf(x * 1/sqrt2))",
                      [](Builder& b, ValueId x) {
                        const ValueId h = b.node(OpKind::Mul, "h", {b.scalar("half", 0.5f), x});
                        const ValueId d = b.node(OpKind::Mul, "d", {b.scalar("rsqrt2", 0.70710678f), x});
                        const ValueId e = b.node(OpKind::Erf, "e", {d});
                        const ValueId a = b.node(OpKind::Add, "a", {b.scalar("one", 1.0f), e});
                        return b.node(OpKind::Mul, "y", {a, h});
                      },
                      {Activation::gelu_erf}),
      activation_case("GELU as x * ((1 + erf(x / sqrt2)) * 0.5)",
                      [sqrt2](Builder& b, ValueId x) {
                        const ValueId d = b.node(OpKind::Div, "d", {x, b.scalar("sqrt2", sqrt2)});
                        const ValueId e = b.node(OpKind::Erf, "e", {d});
                        const ValueId a = b.node(OpKind::Add, "a", {e, b.scalar("one", 1.0f)});
                        const ValueId h = b.node(OpKind::Mul, "h", {a, b.scalar("half", 0.5f)});
                        return b.node(OpKind::Mul, "y", {x, h});
                      },
                      {Activation::gelu_erf}),
  };
}

}  // namespace

TEST_CASE("fuse_activation folds each recognized activation into a Conv", "[passes]") {
  for (const ActivationCase& c : activation_cases()) {
    INFO(c.what);
    Builder b;
    const ValueId x = b.input("x", {1, 2, 6, 6});
    b.output(c.build(b, b.conv("c", x, 2, 3)));
    auto records = run(b.g, {"fuse_activation"});
    INFO((records ? std::string() : records.error().message));
    REQUIRE(records);
    REQUIRE((*records)[0].changed);
    REQUIRE((*records)[0].max_rel_error >= 0.0);  // checked against the unfused graph
    // Only the Conv is left, writing the graph output y; the activation's constants are gone.
    REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Conv});
    REQUIRE(b.g.nodes[0].outputs[0] == b.g.find_value("y"));
    REQUIRE(b.g.initializers.size() == 2);  // weight and bias
    const PostOps post = post_ops_of(b.g.nodes[0]);
    REQUIRE(post.activation == c.expected.activation);
    REQUIRE(post.alpha == c.expected.alpha);
    REQUIRE(post.beta == c.expected.beta);
  }
}

TEST_CASE("residual Add then each recognized activation become one Conv", "[passes]") {
  for (const ActivationCase& c : activation_cases()) {
    INFO(c.what);
    Builder b;
    const ValueId x = b.input("x", {1, 3, 6, 6});
    const ValueId sum = b.node(OpKind::Add, "sum", {x, b.conv("c", x, 3, 3)});
    b.output(c.build(b, sum));
    auto records = run(b.g, {"fuse_residual_add", "fuse_activation"});
    INFO((records ? std::string() : records.error().message));
    REQUIRE(records);
    for (const PassRecord& r : *records) {
      REQUIRE(r.changed);
      REQUIRE(r.max_rel_error >= 0.0);
    }
    REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Conv});
    const Node& conv = b.g.nodes[0];
    REQUIRE(conv.outputs[0] == b.g.find_value("y"));
    REQUIRE(conv.inputs.size() == 4);
    REQUIRE(conv.inputs[3] == x);
    const PostOps post = post_ops_of(conv);
    REQUIRE(post.activation == c.expected.activation);
    REQUIRE(post.alpha == c.expected.alpha);
    REQUIRE(post.beta == c.expected.beta);
  }
}

TEST_CASE("fuse_activation folds into Gemm and MatMul", "[passes]") {
  Builder b;
  const ValueId a = b.input("a", {4, 8});
  Attrs trans;
  trans.set("transB", int64_t{1});
  const ValueId g = b.node(OpKind::Gemm, "g", {a, b.weight("w", {8, 8}), b.weight("c", {8})}, trans);
  const ValueId r = b.node(OpKind::Relu, "r", {g});
  const ValueId m = b.node(OpKind::MatMul, "m", {r, b.weight("w2", {8, 5})});
  const ValueId s = b.node(OpKind::Sigmoid, "s", {m});
  b.output(b.node(OpKind::Mul, "y", {m, s}));
  auto records = run(b.g, {"fuse_activation"});
  REQUIRE(records);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Gemm, OpKind::MatMul});
  REQUIRE(post_ops_of(b.g.nodes[0]).activation == Activation::relu);
  REQUIRE(post_ops_of(b.g.nodes[1]).activation == Activation::silu);
  REQUIRE(b.g.nodes[1].inputs[0] == b.g.find_value("r"));
}

TEST_CASE("fuse_activation folds a Relu into a BatchNormalization that did not fold", "[passes]") {
  // DenseNet's pre-activation: Concat -> BN -> Relu -> Conv. The BN then no longer folds.
  Builder b;
  const ValueId x = b.input("x", {1, 3, 6, 6});
  const ValueId x2 = b.input("x2", {1, 2, 6, 6});
  Attrs axis;
  axis.set("axis", int64_t{1});
  const ValueId cat = b.node(OpKind::Concat, "cat", {x, x2}, axis);
  const ValueId bn = b.node(OpKind::BatchNormalization, "bn",
                            {cat, b.weight("s", {5}), b.weight("bb", {5}), b.weight("m", {5}), b.weight("v", {5})});
  // variance must be positive
  for (int64_t i = 0; i < 5; ++i) b.g.initializers[b.g.find_value("v")].data<float>()[i] += 1.5f;
  const ValueId r = b.node(OpKind::Relu, "r", {bn});
  b.output(b.conv("y", r, 5, 4));
  auto records = run(b.g, {"fuse_activation", "fold_batchnorm"});
  REQUIRE(records);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Concat, OpKind::BatchNormalization, OpKind::Conv});
  REQUIRE(post_ops_of(b.g.nodes[1]).activation == Activation::relu);
  for (const PassRecord& rec : *records) CHECK(rec.max_rel_error < 1e-5);
}

TEST_CASE("fuse_activation leaves patterns whose preconditions fail", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 2, 6, 6});
  const ValueId lo = b.input("lo", {});
  // c1 has two readers; c2 is a graph output; c3's Clip bound is not constant; c4's SiLU
  // Sigmoid is also a graph output; c5's GELU has a wrong constant.
  const ValueId c1 = b.conv("c1", x, 2, 2);
  b.output(b.node(OpKind::Relu, "r1", {c1}));
  b.output(b.node(OpKind::Neg, "n1", {c1}));
  const ValueId c2 = b.conv("c2", x, 2, 2);
  b.output(c2);
  b.output(b.node(OpKind::Relu, "r2", {c2}));
  b.output(b.node(OpKind::Clip, "r3", {b.conv("c3", x, 2, 2), lo}));
  const ValueId c4 = b.conv("c4", x, 2, 2);
  const ValueId s4 = b.node(OpKind::Sigmoid, "s4", {c4});
  b.output(s4);
  b.output(b.node(OpKind::Mul, "r4", {c4, s4}));
  const ValueId c5 = b.conv("c5", x, 2, 2);
  const ValueId d5 = b.node(OpKind::Div, "d5", {c5, b.scalar("not_sqrt2", 1.5f)});
  const ValueId a5 = b.node(OpKind::Add, "a5", {b.node(OpKind::Erf, "e5", {d5}), b.scalar("one", 1.0f)});
  b.output(b.node(OpKind::Mul, "r5", {b.node(OpKind::Mul, "m5", {c5, a5}), b.scalar("half", 0.5f)}));
  // c6's output feeds a SiLU and a second Conv; c7's feeds a GELU and is read by a Neg as well.
  const ValueId c6 = b.conv("c6", x, 2, 2);
  b.output(b.node(OpKind::Mul, "r6", {c6, b.node(OpKind::Sigmoid, "s6", {c6})}));
  b.output(b.conv("c6b", c6, 2, 2));
  const ValueId c7 = b.conv("c7", x, 2, 2);
  const ValueId d7 = b.node(OpKind::Div, "d7", {c7, b.scalar("sqrt2", 1.4142135f)});
  const ValueId a7 = b.node(OpKind::Add, "a7", {b.node(OpKind::Erf, "e7", {d7}), b.scalar("one7", 1.0f)});
  b.output(b.node(OpKind::Mul, "r7", {b.node(OpKind::Mul, "m7", {c7, a7}), b.scalar("half7", 0.5f)}));
  b.output(b.node(OpKind::Neg, "n7", {c7}));
  const size_t nodes = b.g.nodes.size();
  auto records = run(b.g, {"fuse_activation"});
  REQUIRE(records);
  REQUIRE_FALSE((*records)[0].changed);
  REQUIRE(b.g.nodes.size() == nodes);
}

TEST_CASE("fuse_activation gives an op one activation only", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 2, 6, 6});
  b.output(b.node(OpKind::Tanh, "y", {b.node(OpKind::Relu, "r", {b.conv("c", x, 2, 2)})}));
  auto records = run(b.g, {"fuse_activation", "fuse_activation"});
  REQUIRE(records);
  REQUIRE((*records)[0].changed);
  REQUIRE_FALSE((*records)[1].changed);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Conv, OpKind::Tanh});
  REQUIRE(post_ops_of(b.g.nodes[0]).activation == Activation::relu);
}

// ---- fuse_residual_add ----

TEST_CASE("a ResNet basic block becomes two Convs, the second with residual and relu", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  const ValueId r1 = b.node(OpKind::Relu, "r1", {b.conv("c1", x, 4, 4)});
  const ValueId sum = b.node(OpKind::Add, "sum", {b.conv("c2", r1, 4, 4), x});
  b.output(b.node(OpKind::Relu, "y", {sum}));
  auto records = run(b.g, {"fuse_residual_add", "fuse_activation"});
  REQUIRE(records);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Conv, OpKind::Conv});
  const Node& second = node_writing(b.g, "y");
  REQUIRE(second.inputs.size() == 4);
  REQUIRE(second.inputs[3] == x);
  REQUIRE(post_ops_of(second).activation == Activation::relu);
  REQUIRE(post_ops_of(b.g.nodes[0]).activation == Activation::relu);
}

TEST_CASE("fuse_residual_add picks the later op when both operands qualify", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  const ValueId first = b.conv("first", x, 4, 4);
  const ValueId second = b.conv("second", x, 4, 4);
  b.output(b.node(OpKind::Add, "y", {second, first}));
  auto records = run(b.g, {"fuse_residual_add"});
  REQUIRE(records);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Conv, OpKind::Conv});
  REQUIRE(b.g.nodes[1].name == "second_node");
  REQUIRE(b.g.nodes[1].inputs[3] == first);
  REQUIRE(b.g.nodes[1].outputs[0] == b.g.find_value("y"));
}

TEST_CASE("fuse_residual_add moves the op after a residual computed later", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  const ValueId c = b.conv("c", x, 4, 4);
  const ValueId late = b.node(OpKind::Neg, "late", {x});  // after the Conv in node order
  b.output(b.node(OpKind::Add, "y", {c, late}));
  auto records = run(b.g, {"fuse_residual_add"});
  REQUIRE(records);  // the runner re-verifies; lowering needs the topological order
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Neg, OpKind::Conv});
  REQUIRE(b.g.nodes[1].inputs[3] == late);
}

TEST_CASE("fuse_residual_add fuses into Gemm and MatMul (input 3)", "[passes]") {
  Builder b;
  const ValueId a = b.input("a", {3, 4});
  const ValueId g = b.node(OpKind::Gemm, "g", {a, b.weight("w", {4, 4}), b.weight("c", {4})});
  const ValueId s = b.node(OpKind::Add, "s", {a, g});
  const ValueId m = b.node(OpKind::MatMul, "m", {s, b.weight("w2", {4, 4})});
  b.output(b.node(OpKind::Add, "y", {m, s}));
  auto records = run(b.g, {"fuse_residual_add"});
  REQUIRE(records);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::Gemm, OpKind::MatMul});
  REQUIRE(b.g.nodes[0].inputs.size() == 4);
  REQUIRE(b.g.nodes[0].inputs[3] == a);
  REQUIRE(b.g.nodes[1].inputs.size() == 4);
  REQUIRE(b.g.nodes[1].inputs[2] == kNoValue);
  REQUIRE(b.g.nodes[1].inputs[3] == s);
}

// ---- fuse_matmul_bias ----

// A Linear layer on [N, H, W, C] as PyTorch exports it (ConvNeXt's MLP): MatMul, Add of the bias,
// GELU written out, MatMul, Add of the bias, then a residual Add.
TEST_CASE("fuse_matmul_bias takes the bias, so the GELU and the residual fuse too", "[passes]") {
  const float sqrt2 = std::sqrt(2.0f);
  Builder b;
  const ValueId x = b.input("x", {2, 3, 3, 8});
  const ValueId m1 = b.node(OpKind::MatMul, "m1", {x, b.weight("w1", {8, 16})});
  const ValueId h = b.node(OpKind::Add, "h", {m1, b.weight("b1", {16})});  // MatMul output first
  const ValueId d = b.node(OpKind::Div, "d", {h, b.constant("sqrt2", sqrt2)});
  const ValueId e = b.node(OpKind::Erf, "e", {d});
  const ValueId a = b.node(OpKind::Add, "a", {e, b.constant("one", 1.0f)});
  const ValueId g = b.node(OpKind::Mul, "g", {b.node(OpKind::Mul, "gm", {h, a}), b.constant("half", 0.5f)});
  const ValueId m2 = b.node(OpKind::MatMul, "m2", {g, b.weight("w2", {16, 8})});
  const ValueId o = b.node(OpKind::Add, "o", {b.weight("b2", {1, 1, 1, 8}), m2});  // bias first, 4-D
  b.output(b.node(OpKind::Add, "y", {o, x}));
  auto records = run(b.g, {"fuse_matmul_bias", "fuse_residual_add", "fuse_activation"});
  REQUIRE(records);
  REQUIRE((*records)[0].changed);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::MatMul, OpKind::MatMul});
  const Node& first = node_writing(b.g, "g");
  REQUIRE(first.inputs.size() == 3);
  REQUIRE(b.g.value(first.inputs[2]).type.shape == SymShape{Dim(16)});
  REQUIRE(post_ops_of(first).activation == Activation::gelu_erf);
  const Node& second = node_writing(b.g, "y");
  REQUIRE(second.inputs.size() == 4);
  REQUIRE(b.g.value(second.inputs[2]).type.shape == SymShape{Dim(8)});
  REQUIRE(second.inputs[3] == x);
  // An [N] bias is read as it is; the [1, 1, 1, N] one became an [N] copy and is gone.
  REQUIRE(first.inputs[2] == b.g.find_value("b1"));
  REQUIRE(b.g.initializers.count(b.g.find_value("b2")) == 0);
}

TEST_CASE("fuse_matmul_bias leaves non-constant, non-vector and shared operands", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {3, 4});
  const ValueId w = b.weight("w", {4, 5});
  // a bias that is a graph input; one with a row per output row; a MatMul read twice; a batched
  // (3-D) B; an Add that broadcasts the product up to a larger shape; an opset-6 Add with an axis
  b.output(b.node(OpKind::Add, "y1", {b.node(OpKind::MatMul, "m1", {x, w}), b.input("c", {5})}));
  b.output(b.node(OpKind::Add, "y2", {b.node(OpKind::MatMul, "m2", {x, w}), b.weight("rows", {3, 1})}));
  const ValueId m3 = b.node(OpKind::MatMul, "m3", {x, w});
  b.output(b.node(OpKind::Add, "y3", {m3, b.weight("b3", {5})}));
  b.output(b.node(OpKind::Neg, "n3", {m3}));
  b.output(b.node(OpKind::Add, "y4", {b.node(OpKind::MatMul, "m4", {x, b.weight("w4", {2, 4, 5})}), b.weight("b4", {5})}));
  b.output(b.node(OpKind::Add, "y5", {b.node(OpKind::MatMul, "m5", {x, w}), b.input("big", {2, 3, 5})}));
  Attrs legacy;  // opset < 7: aligned from axis 0
  legacy.set("legacy_axis", int64_t{0});
  b.output(b.node(OpKind::Add, "y6", {b.node(OpKind::MatMul, "m6", {b.input("sq", {5, 4}), w}), b.weight("b6", {5})}, legacy));
  const size_t nodes = b.g.nodes.size();
  auto records = run(b.g, {"fuse_matmul_bias"});
  REQUIRE(records);
  REQUIRE_FALSE((*records)[0].changed);
  REQUIRE(b.g.nodes.size() == nodes);
}

TEST_CASE("fuse_residual_add leaves broadcasts, shared outputs and ops with an activation", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  // broadcast bias; Add(c, c); a Conv output with a second reader; a Conv already fused with relu
  b.output(b.node(OpKind::Add, "y1", {b.conv("c1", x, 4, 4), b.weight("bias", {4, 1, 1})}));
  const ValueId c2 = b.conv("c2", x, 4, 4);
  b.output(b.node(OpKind::Add, "y2", {c2, c2}));
  const ValueId c3 = b.conv("c3", x, 4, 4);
  b.output(b.node(OpKind::Add, "y3", {c3, x}));
  b.output(b.node(OpKind::Neg, "y4", {c3}));
  const ValueId c4 = b.conv("c4", x, 4, 4);
  b.g.nodes.back().attrs.set("activation", std::string("relu"));
  b.output(b.node(OpKind::Add, "y5", {c4, x}));
  // the Add broadcasts the Conv output up to a larger shape
  const ValueId big = b.input("big", {2, 4, 6, 6});
  b.output(b.node(OpKind::Add, "y6", {b.conv("c6", x, 4, 4), big}));
  const size_t nodes = b.g.nodes.size();
  auto records = run(b.g, {"fuse_residual_add"});
  REQUIRE(records);
  REQUIRE_FALSE((*records)[0].changed);
  REQUIRE(b.g.nodes.size() == nodes);
}

TEST_CASE("the default pipeline fuses residuals before activations", "[passes]") {
  const auto names = default_pipeline();
  const auto at = [&](const char* n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  REQUIRE(at("fuse_matmul_bias") < at("fuse_residual_add"));
  REQUIRE(at("fuse_residual_add") < at("fuse_activation"));
  REQUIRE(at("fuse_activation") < static_cast<long>(names.size()));
}


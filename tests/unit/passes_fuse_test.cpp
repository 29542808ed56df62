// Fused epilogues (kernels/post_ops.h): the reference Conv/Gemm/MatMul computing act(op(x) +
// residual), and the passes that create them, fuse_residual_add and fuse_activation. Each pass
// test runs through run_passes with check_numerics, so the fused graph is also checked against
// the unfused one on the reference executor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>

#include "compilers/ir/shape_inference.h"
#include "compilers/ir/verify.h"
#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "kernels/executor.h"
#include "kernels/post_ops.h"
#include "tests/support/graph_builder.h"

using namespace kiln;

namespace {

// Small graphs (tests/support/graph_builder.h) with the 3x3 Conv these tests build around.
struct Builder : testing::GraphBuilder {
  // Conv 3x3, padding 1, with bias: [1, c, 6, 6] -> [1, m, 6, 6].
  ValueId conv(const std::string& out, ValueId x, int64_t c, int64_t m) {
    Attrs a;
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    return node(OpKind::Conv, out, {x, weight(out + "_w", {m, c, 3, 3}), weight(out + "_b", {m})}, a);
  }
};

Attrs float_attrs(std::initializer_list<std::pair<const char*, float>> list) {
  Attrs a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

Result<std::vector<PassRecord>> run(Graph& g, const std::vector<std::string>& passes) {
  PassRunOptions options;
  options.check_numerics = true;
  options.cpu_isa = CpuIsa::avx512;  // the fusion decisions as on an AVX-512 CPU (the numeric checks run on this one)
  return run_passes(g, passes, options);
}

std::vector<OpKind> ops(const Graph& g) {
  std::vector<OpKind> out;
  for (const Node& n : g.nodes) out.push_back(n.op);
  return out;
}

const Node& node_writing(const Graph& g, const std::string& value) {
  return g.nodes.at(static_cast<size_t>(g.value(g.find_value(value)).producer));
}

PostOps post_ops_of(const Node& n) {
  auto p = post_ops_from_attrs(n.attrs);
  REQUIRE(p);
  return *p;
}

Result<std::vector<Tensor>> execute(Graph g, const std::vector<Tensor>& inputs) {
  KILN_TRY(graph_verify(g));
  KILN_TRY(graph_infer_shapes(g).status());
  KILN_ASSIGN(result, execute_reference(graph_to_plan(g), inputs));
  return std::move(result.outputs);
}

void require_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(got.value_as_double(i) == Approx(want.value_as_double(i)).margin(tol));
  }
}

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

namespace {

// Conv with explicit weights shape, pads, stride and group.
ValueId conv_with(Builder& b, const std::string& out, ValueId x, Shape w, int64_t group, int64_t pad, int64_t stride) {
  Attrs a;
  a.set("pads", std::vector<int64_t>{pad, pad, pad, pad});
  a.set("strides", std::vector<int64_t>{stride, stride});
  a.set("group", group);
  const int64_t m = w[0];
  return b.node(OpKind::Conv, out, {x, b.weight(out + "_w", std::move(w)), b.weight(out + "_b", {m})}, a);
}

ValueId relu6(Builder& b, const std::string& out, ValueId x) {
  return b.node(OpKind::Clip, out, {x, b.scalar(out + "_lo", 0.0f), b.scalar(out + "_hi", 6.0f)});
}

}  // namespace

// fuse_depth_first only fuses where it measured faster (fusion_pays): intermediates of >= 256 KB
// per image and >= 8 MB over the batch, at most 32 channels beside them. The graphs here are just
// large enough: batch 16, 48x48 and 64x64 images.
TEST_CASE("fuse_depth_first fuses MobileNetV2's expand -> dw -> project and EfficientNet's expand -> dw, SE scale -> project",
          "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {16, 8, 48, 48});
  // Inverted residual: expand 1x1 + relu6, dw 3x3 + relu6, project 1x1, + x.
  const ValueId e = relu6(b, "e6", conv_with(b, "e", x, {64, 8, 1, 1}, 1, 0, 1));
  const ValueId d = relu6(b, "d6", conv_with(b, "d", e, {64, 1, 3, 3}, 64, 1, 1));
  const ValueId p = conv_with(b, "p", d, {8, 64, 1, 1}, 1, 0, 1);
  b.output(b.node(OpKind::Add, "block", {p, x}));
  // MBConv with squeeze-excite: expand 1x1 + silu, dw 3x3 + silu, GlobalAveragePool -> 1x1 ->
  // Sigmoid, Mul, project.
  const ValueId x2 = b.input("x2", {16, 16, 64, 64});
  const ValueId e2 = conv_with(b, "e2", x2, {64, 16, 1, 1}, 1, 0, 1);
  const ValueId e2s = b.node(OpKind::Mul, "e2s", {e2, b.node(OpKind::Sigmoid, "e2g", {e2})});
  const ValueId d2 = conv_with(b, "d2", e2s, {64, 1, 3, 3}, 64, 1, 1);
  const ValueId pooled = b.node(OpKind::GlobalAveragePool, "pooled", {d2});
  const ValueId gate = b.node(OpKind::Sigmoid, "gate", {conv_with(b, "se", pooled, {64, 64, 1, 1}, 1, 0, 1)});
  const ValueId scaled = b.node(OpKind::Mul, "scaled", {d2, gate});
  b.output(conv_with(b, "y", scaled, {12, 64, 1, 1}, 1, 0, 1));

  std::vector<std::string> passes = default_pipeline();
  passes.erase(std::remove(passes.begin(), passes.end(), "fuse_depth_first"), passes.end());
  passes.push_back("fuse_depth_first");
  auto records = run(b.g, passes);
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  for (const PassRecord& rec : *records) CHECK(rec.max_rel_error < 1e-5);
  REQUIRE(records->back().changed);
  // expand + dw + project (+ residual) is one node; d2 has two readers (pool and Mul), so e2 joins
  // d2 without a projection and the Mul joins its project.
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::DepthFirstConv, OpKind::DepthFirstConv, OpKind::GlobalAveragePool,
                                          OpKind::Conv, OpKind::DepthFirstConv});
  const Node& block_node = b.g.nodes[0];
  REQUIRE(block_node.inputs.size() == 9);  // X, DW, DB, (no S), W, B, residual, EW, EB
  REQUIRE(block_node.inputs[0] == x);
  REQUIRE(block_node.inputs[3] == kNoValue);
  REQUIRE(block_node.inputs[6] == x);
  REQUIRE(block_node.inputs[7] != kNoValue);
  REQUIRE(post_ops_from_attrs(block_node.attrs, "dw_")->activation == Activation::clip);
  REQUIRE(post_ops_from_attrs(block_node.attrs, "ex_")->activation == Activation::clip);
  const Node& expand_node = b.g.nodes[1];
  REQUIRE(expand_node.inputs[0] == x2);
  REQUIRE(expand_node.inputs[4] == kNoValue);  // no projection
  REQUIRE(post_ops_from_attrs(expand_node.attrs, "ex_")->activation == Activation::silu);
  const Node& se_node = b.g.nodes[4];
  REQUIRE(se_node.inputs[1] == kNoValue);  // no depthwise stage
  REQUIRE(se_node.inputs[3] != kNoValue);  // the gate
}

TEST_CASE("fuse_depth_first leaves shared values, strided or padded 1x1 convs, full convs and what does not pay",
          "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {16, 32, 64, 64});  // 512 KB per image, 8 MB in all: just large enough
  const ValueId d = conv_with(b, "d", x, {32, 1, 3, 3}, 32, 1, 1);
  b.output(conv_with(b, "p", d, {6, 32, 1, 1}, 1, 0, 1));
  b.output(d);  // d is a graph output: must be kept
  const ValueId full = conv_with(b, "full", x, {32, 32, 3, 3}, 1, 1, 1);  // not depthwise
  b.output(conv_with(b, "p2", full, {6, 32, 1, 1}, 1, 0, 1));
  const ValueId d3 = conv_with(b, "d3", x, {32, 1, 3, 3}, 32, 1, 1);
  b.output(conv_with(b, "p3", d3, {6, 32, 1, 1}, 1, 0, 2));  // strided 1x1
  const ValueId d4 = conv_with(b, "d4", x, {32, 1, 3, 3}, 32, 1, 1);
  b.output(conv_with(b, "p4", d4, {40, 32, 1, 1}, 1, 0, 1));  // 40 outputs: compute-bound, oneDNN is faster
  const ValueId small = b.input("small", {1, 32, 64, 64});     // 512 KB in all: stays in cache
  b.output(conv_with(b, "p5", conv_with(b, "d5", small, {32, 1, 3, 3}, 32, 1, 1), {6, 32, 1, 1}, 1, 0, 1));
  auto records = run(b.g, {"fuse_depth_first"});
  REQUIRE(records);
  REQUIRE_FALSE(records->back().changed);
  // The same graph with a projection of 6 outputs after d4 is fused: the refusals above are the
  // conditions', not the sizes'.
  Node& p4 = const_cast<Node&>(node_writing(b.g, "p4"));
  p4.inputs[1] = b.weight("p4_w6", {6, 32, 1, 1});
  p4.inputs[2] = b.weight("p4_b6", {6});
  b.g.value(p4.outputs[0]).type = ValueType::unranked(DType::f32);
  auto again = run(b.g, {"fuse_depth_first"});
  REQUIRE(again);
  REQUIRE(again->back().changed);
}

TEST_CASE("fuse_depth_first fuses only for CPUs with AVX-512", "[passes]") {
  for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::portable, CpuIsa::avx512}) {
    Builder b;
    const ValueId x = b.input("x", {16, 32, 64, 64});
    b.output(conv_with(b, "p", conv_with(b, "d", x, {32, 1, 3, 3}, 32, 1, 1), {6, 32, 1, 1}, 1, 0, 1));
    PassRunOptions options;
    options.cpu_isa = isa;
    auto records = run_passes(b.g, {"fuse_depth_first"}, options);
    REQUIRE(records);
    INFO(cpu_isa_name(isa));
    CHECK(records->back().changed == (isa == CpuIsa::avx512));
  }
}

namespace {

// A constant 1-D axes input of one axis (the importer's form of ReduceMean's axes).
ValueId axes_value(Builder& b, const std::string& name, int64_t axis) {
  const ValueId id = b.g.add_value(name, ValueType::of(DType::i64, sym_shape_from({1})));
  Tensor t = Tensor::zeros(DType::i64, {1});
  t.data<int64_t>()[0] = axis;
  b.g.initializers[id] = std::move(t);
  return id;
}

// The LayerNorm of x over its last axis as exporters before opset 17 write it; `square_by_mul`
// writes Mul(d, d) instead of Pow(d, 2); gamma/beta of the last axis' size when `affine`.
ValueId decomposed_layer_norm(Builder& b, const std::string& n, ValueId x, int64_t c, bool affine, bool square_by_mul) {
  const ValueId last = axes_value(b, n + "_axes", -1);
  const ValueId mean = b.node(OpKind::ReduceMean, n + "_mean", {x, last});
  const ValueId d = b.node(OpKind::Sub, n + "_d", {x, mean});
  const ValueId sq = square_by_mul ? b.node(OpKind::Mul, n + "_sq", {d, d})
                                   : b.node(OpKind::Pow, n + "_sq", {d, b.scalar(n + "_two", 2.0f)});
  const ValueId var = b.node(OpKind::ReduceMean, n + "_var", {sq, last});
  const ValueId std_dev = b.node(OpKind::Sqrt, n + "_std", {b.node(OpKind::Add, n + "_ve", {var, b.scalar(n + "_eps", 1e-6f)})});
  ValueId y = b.node(OpKind::Div, n + "_y", {d, std_dev});
  if (affine) {
    y = b.node(OpKind::Mul, n + "_g", {y, b.weight(n + "_gamma", {c})});
    y = b.node(OpKind::Add, n + "_b", {b.weight(n + "_beta", {c}), y});
  }
  return y;
}

}  // namespace

TEST_CASE("fuse_layer_norm rebuilds LayerNormalization from its decomposition", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {2, 7, 5, 24});
  b.output(decomposed_layer_norm(b, "ln1", x, 24, true, false));
  b.output(decomposed_layer_norm(b, "ln2", b.node(OpKind::Relu, "r", {x}), 24, false, true));
  auto records = run(b.g, {"fold_constants", "fuse_layer_norm"});
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  for (const PassRecord& rec : *records) CHECK(rec.max_rel_error < 1e-5);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::LayerNormalization, OpKind::Relu, OpKind::LayerNormalization});
  REQUIRE(b.g.nodes[0].inputs.size() == 3);  // X, gamma, beta
  REQUIRE(b.g.nodes[2].inputs.size() == 2);  // X, ones
  REQUIRE(*b.g.nodes[0].attrs.get_float("epsilon", 0.0f) == 1e-6f);
}

TEST_CASE("fuse_layer_norm leaves other axes, shared intermediates and non-constant gamma", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {2, 7, 5, 24});
  const ValueId other_axis = axes_value(b, "axis1", 1);
  const ValueId mean = b.node(OpKind::ReduceMean, "m", {x, other_axis});
  const ValueId d = b.node(OpKind::Sub, "d", {x, mean});
  const ValueId var = b.node(OpKind::ReduceMean, "v", {b.node(OpKind::Mul, "sq", {d, d}), other_axis});
  b.output(b.node(OpKind::Div, "y", {d, b.node(OpKind::Sqrt, "s", {b.node(OpKind::Add, "ve", {var, b.scalar("eps", 1e-5f)})})}));
  const ValueId shared = decomposed_layer_norm(b, "ln", x, 24, false, false);
  b.output(shared);
  b.output(b.g.find_value("ln_d"));  // the centred value is read outside the pattern
  auto records = run(b.g, {"fold_constants", "fuse_layer_norm"});
  REQUIRE(records);
  REQUIRE_FALSE(records->back().changed);
}

namespace {

// DenseNet's layer start: Concat(inputs) on axis 1 -> BatchNormalization (positive variance).
ValueId concat_norm(Builder& b, const std::string& name, const std::vector<ValueId>& inputs, int64_t c,
                    int64_t axis = 1) {
  Attrs a;
  a.set("axis", axis);
  const ValueId cat = b.node(OpKind::Concat, name + "_cat", inputs, a);
  const ValueId var = b.weight(name + "_v", {c});
  for (int64_t i = 0; i < c; ++i) b.g.initializers[var].data<float>()[i] += 1.5f;
  return b.node(OpKind::BatchNormalization, name,
                {cat, b.weight(name + "_s", {c}), b.weight(name + "_b", {c}), b.weight(name + "_m", {c}), var});
}

}  // namespace

TEST_CASE("fuse_concat_affine normalizes each Concat input into its slice, with the fused Relu", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {2, 3, 6, 6});
  const ValueId f1 = b.conv("f1", x, 3, 4);
  const ValueId f2 = b.conv("f2", f1, 4, 5);
  const ValueId n1 = b.node(OpKind::Relu, "r1", {concat_norm(b, "bn1", {x, f1}, 7)});
  const ValueId n2 = concat_norm(b, "bn2", {x, f1, f2}, 12);  // x and f1 are read by both concats
  b.output(b.conv("y1", n1, 7, 2));
  b.output(n2);
  auto records = run(b.g, {"fuse_activation", "fuse_concat_affine"});
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  for (const PassRecord& rec : *records) CHECK(rec.max_rel_error < 1e-5);
  REQUIRE(ops(b.g) ==
          std::vector<OpKind>{OpKind::Conv, OpKind::Conv, OpKind::ConcatAffine, OpKind::ConcatAffine, OpKind::Conv});
  const Node& fused = node_writing(b.g, "bn2");
  REQUIRE(fused.inputs.size() == 5);  // scale, shift, x, f1, f2
  REQUIRE(fused.inputs[2] == x);
  REQUIRE(post_ops_of(node_writing(b.g, "r1")).activation == Activation::relu);
  REQUIRE(post_ops_of(fused).activation == Activation::none);
}

TEST_CASE("fuse_concat_affine leaves other axes, a Concat read twice and a Concat that is an output", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 4, 3, 3});
  const ValueId x2 = b.input("x2", {1, 4, 3, 3});
  b.output(concat_norm(b, "on_h", {x, x2}, 4, 2));  // joins rows, not channels
  const ValueId shared = concat_norm(b, "shared", {x, x2}, 8);
  b.output(shared);
  b.output(b.g.find_value("shared_cat"));  // the joined tensor itself is wanted
  auto records = run(b.g, {"fuse_concat_affine"});
  REQUIRE(records);
  REQUIRE_FALSE(records->back().changed);
}

TEST_CASE("DepthFirstConv inference refuses bad shapes with the input named", "[passes]") {
  Attrs a;
  const ValueType x = ValueType::of(DType::f32, sym_shape_from({1, 4, 6, 6}));
  const ValueType w_bad = ValueType::of(DType::f32, sym_shape_from({6, 5, 1, 1}));
  const ValueType w3 = ValueType::of(DType::f32, sym_shape_from({6, 4, 3, 3}));
  for (const ValueType* w : {&w_bad, &w3}) {
    InferContext ctx;
    ctx.attrs = &a;
    ctx.inputs = {&x, nullptr, nullptr, nullptr, w};
    ctx.values.assign(5, nullptr);
    const Status st = op_def(OpKind::DepthFirstConv).infer(ctx);
    REQUIRE_FALSE(st);
    REQUIRE(st.message().find("W") != std::string::npos);
  }
}

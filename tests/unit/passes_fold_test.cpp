// fold_constants and fold_batchnorm: tiny graphs run through run_passes with the numeric check
// against the reference executor, plus the Fashion-MNIST example with its BatchNorms kept.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "compilers/onnx/import.h"
#include "compilers/passes/fold_constants.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"

using namespace kiln;

namespace {

Tensor uniform(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor ints(Shape shape, std::vector<int64_t> values) {
  return Tensor::from_values<int64_t>(std::move(shape), std::span<const int64_t>(values));
}

ValueId init(Graph& g, const std::string& name, Tensor t) {
  const ValueId id = g.add_value(name, ValueType::of(t.dtype(), sym_shape_from(t.shape())));
  g.initializers[id] = std::move(t);
  return id;
}

ValueId value(Graph& g, const std::string& name) { return g.add_value(name, ValueType::unranked(DType::f32)); }

int count(const Graph& g, OpKind op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; }));
}

std::vector<int64_t> int_values(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.value_as_int(i));
  return v;
}

// Runs passes with the numeric check; returns the worst relative error of a pass that changed the graph.
double run_checked(Graph& g, const std::vector<std::string>& passes, DimBindings bindings = {}) {
  PassRunOptions options;
  options.check_numerics = true;
  options.bindings = std::move(bindings);
  auto records = run_passes(g, passes, options);
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  double worst = 0;
  for (const PassRecord& r : *records) worst = std::max(worst, r.max_rel_error);
  return worst;
}

bool changed(Graph& g, const std::string& pass, DimBindings bindings = {}) {
  PassRunOptions options;
  options.check_numerics = false;
  options.bindings = std::move(bindings);
  auto records = run_passes(g, {pass}, options);
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  return (*records)[0].changed;
}

// Appends BatchNormalization(x) -> name over `channels` channels with non-trivial parameters.
ValueId add_bn(Graph& g, ValueId x, int64_t channels, const std::string& name, uint32_t seed) {
  const ValueId scale = init(g, name + ".scale", uniform({channels}, seed, 0.5f, 1.5f));
  const ValueId beta = init(g, name + ".beta", uniform({channels}, seed + 1, -0.5f, 0.5f));
  const ValueId mean = init(g, name + ".mean", uniform({channels}, seed + 2, -0.5f, 0.5f));
  const ValueId var = init(g, name + ".var", uniform({channels}, seed + 3, 0.2f, 2.0f));
  const ValueId y = value(g, name + ".out");
  Node bn{name, OpKind::BatchNormalization, {}, {x, scale, beta, mean, var}, {y}};
  bn.attrs.set("epsilon", 1e-3f);
  g.add_node(std::move(bn));
  return y;
}

// x [2, c, 6, 6] -> Conv(W [m, c/group, 3, 3], B?) -> t -> BN -> y (graph output).
Graph conv_bn(int64_t c, int64_t m, int64_t group, bool bias) {
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {2, c, 6, 6}));
  g.inputs = {x};
  const ValueId w = init(g, "w", uniform({m, c / group, 3, 3}, 10));
  std::vector<ValueId> in{x, w};
  if (bias) in.push_back(init(g, "b", uniform({m}, 11)));
  const ValueId t = value(g, "t");
  Node conv{"conv", OpKind::Conv, {}, in, {t}};
  conv.attrs.set("group", group);
  conv.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  g.add_node(std::move(conv));
  g.outputs = {add_bn(g, t, m, "bn", 20)};
  return g;
}

}  // namespace

TEST_CASE("fold passes are in the default pipeline, fold_constants first", "[passes]") {
  const auto names = default_pipeline();
  const auto fc = std::find(names.begin(), names.end(), "fold_constants");
  const auto fb = std::find(names.begin(), names.end(), "fold_batchnorm");
  REQUIRE(fc != names.end());
  REQUIRE(fb != names.end());
  REQUIRE(fc < fb);
}

// ---- fold_constants ----

TEST_CASE("fold_constants evaluates constant nodes and drops the weights only they read", "[passes]") {
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {2, 3}));
  g.inputs = {x};
  const ValueId a = init(g, "a", uniform({2, 3}, 1));
  const ValueId b = init(g, "b", uniform({3}, 2));
  const ValueId c = value(g, "c"), e = value(g, "e"), y = value(g, "y");
  g.add_node(Node{"add", OpKind::Add, {}, {a, b}, {c}});
  g.add_node(Node{"exp", OpKind::Exp, {}, {c}, {e}});
  g.add_node(Node{"mul", OpKind::Mul, {}, {x, e}, {y}});
  g.outputs = {y};
  const Tensor ta = g.initializers[a], tb = g.initializers[b];

  REQUIRE(run_checked(g, {"fold_constants"}) == 0.0);
  REQUIRE(g.nodes.size() == 1);
  REQUIRE(g.nodes[0].name == "mul");
  REQUIRE(g.nodes[0].inputs[1] == e);  // the folded value keeps its id and name
  REQUIRE(g.is_initializer(e));
  REQUIRE_FALSE(g.is_initializer(a));
  REQUIRE_FALSE(g.is_initializer(b));
  REQUIRE_FALSE(g.is_initializer(c));
  const Tensor& te = g.initializers.at(e);
  REQUIRE(te.shape() == Shape{2, 3});
  for (int64_t i = 0; i < 6; ++i)
    REQUIRE(te.data<float>()[i] == Approx(std::exp(ta.data<float>()[i] + tb.data<float>()[i % 3])));
}

TEST_CASE("fold_constants folds Shape chains once the batch is bound", "[passes]") {
  // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0), [0]), [-1]))
  auto build = [] {
    Graph g;
    const ValueId x = g.add_value("x", ValueType::of(DType::f32, {Dim::named("batch"), 3, 4}));
    g.inputs = {x};
    const ValueId s = value(g, "s"), n = value(g, "n"), nu = value(g, "nu"), shape = value(g, "shape");
    const ValueId y = value(g, "y");
    g.add_node(Node{"shape_of", OpKind::Shape, {}, {x}, {s}});
    g.add_node(Node{"gather", OpKind::Gather, {}, {s, init(g, "zero", Tensor::scalar<int64_t>(0))}, {n}});
    g.add_node(Node{"unsqueeze", OpKind::Unsqueeze, {}, {n, init(g, "axes", ints({1}, {0}))}, {nu}});
    Node concat{"concat", OpKind::Concat, {}, {nu, init(g, "rest", ints({1}, {-1}))}, {shape}};
    concat.attrs.set("axis", int64_t{0});
    g.add_node(std::move(concat));
    g.add_node(Node{"reshape", OpKind::Reshape, {}, {x, shape}, {y}});
    g.outputs = {y};
    return g;
  };
  SECTION("bound: everything but the Reshape folds") {
    Graph g = build();
    REQUIRE(run_checked(g, {"fold_constants"}, {{"batch", 2}}) == 0.0);
    REQUIRE(g.nodes.size() == 1);
    REQUIRE(g.nodes[0].op == OpKind::Reshape);
    const ValueId shape = g.find_value("shape");
    REQUIRE(g.nodes[0].inputs[1] == shape);
    REQUIRE(int_values(g.initializers.at(shape)) == std::vector<int64_t>{2, -1});
    REQUIRE(g.initializers.size() == 1);  // the chain's small constants are gone
  }
  SECTION("unbound: Shape of a symbolic shape stays") {
    Graph g = build();
    REQUIRE_FALSE(changed(g, "fold_constants"));
    REQUIRE(g.nodes.size() == 5);
  }
}

TEST_CASE("fold_constants folds a torchvision-style flatten with Constant nodes", "[passes]") {
  // PyTorch's x.view(x.size(0), -1): Shape -> Gather(Constant 0) -> Unsqueeze(Constant axes)
  // -> Concat(Constant [-1]) -> Reshape, then a Gemm; x [batch, 4, 2, 2].
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {Dim::named("batch"), 4, 2, 2}));
  g.inputs = {x};
  auto constant = [&](const std::string& name, Tensor t) {
    const ValueId v = g.add_value(name, ValueType::unranked(t.dtype()));
    Node n{name + "_node", OpKind::Constant, {}, {}, {v}};
    n.attrs.set("value", std::move(t));
    g.add_node(std::move(n));
    return v;
  };
  const ValueId s = value(g, "s"), n = value(g, "n"), nu = value(g, "nu"), shape = value(g, "shape");
  const ValueId flat = value(g, "flat"), y = value(g, "y");
  g.add_node(Node{"shape_of", OpKind::Shape, {}, {x}, {s}});
  g.add_node(Node{"gather", OpKind::Gather, {}, {s, constant("zero", Tensor::scalar<int64_t>(0))}, {n}});
  g.add_node(Node{"unsqueeze", OpKind::Unsqueeze, {}, {n, constant("axes", ints({1}, {0}))}, {nu}});
  Node concat{"concat", OpKind::Concat, {}, {nu, constant("minus_one", ints({1}, {-1}))}, {shape}};
  concat.attrs.set("axis", int64_t{0});
  g.add_node(std::move(concat));
  g.add_node(Node{"reshape", OpKind::Reshape, {}, {x, shape}, {flat}});
  Node gemm{"fc", OpKind::Gemm, {}, {flat, init(g, "fc.w", uniform({3, 16}, 5)), init(g, "fc.b", uniform({3}, 6))},
            {y}};
  gemm.attrs.set("transB", int64_t{1});
  g.add_node(std::move(gemm));
  g.outputs = {y};

  REQUIRE(run_checked(g, default_pipeline(), {{"batch", 3}}) < 1e-6);
  REQUIRE(g.nodes.size() == 2);
  REQUIRE(g.nodes[0].op == OpKind::Reshape);
  REQUIRE(g.nodes[1].op == OpKind::Gemm);
  REQUIRE(int_values(g.initializers.at(g.nodes[0].inputs[1])) == std::vector<int64_t>{3, -1});
  REQUIRE(g.initializers.size() == 3);  // the shape, fc.w and fc.b
}

TEST_CASE("fold_constants keeps constant graph outputs and folds every output of a node", "[passes]") {
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {3}));
  g.inputs = {x};
  const ValueId a = value(g, "a"), b = value(g, "b"), y = value(g, "y"), k = value(g, "k");
  Node split{"split", OpKind::Split, {}, {init(g, "w", uniform({6}, 3))}, {a, b}};
  split.attrs.set("num_outputs", int64_t{2});
  g.add_node(std::move(split));
  g.add_node(Node{"add", OpKind::Add, {}, {x, a}, {y}});
  Node constant{"const", OpKind::Constant, {}, {}, {k}};
  constant.attrs.set("value", ints({2}, {7, 8}));
  g.add_node(std::move(constant));
  g.outputs = {y, b, k};

  REQUIRE(run_checked(g, {"fold_constants"}) == 0.0);
  REQUIRE(g.nodes.size() == 1);
  REQUIRE(g.nodes[0].name == "add");
  REQUIRE(g.outputs == std::vector<ValueId>{y, b, k});
  REQUIRE(g.is_initializer(a));
  REQUIRE(g.is_initializer(b));
  REQUIRE(g.value(b).name == "b");
  REQUIRE(g.initializers.at(b).shape() == Shape{3});
  REQUIRE(int_values(g.initializers.at(k)) == std::vector<int64_t>{7, 8});
  REQUIRE_FALSE(g.is_initializer(g.find_value("w")));
}

TEST_CASE("fold_constants leaves outputs over the size cap alone", "[passes]") {
  Graph g;
  const ValueId big = value(g, "big"), small = value(g, "small");
  const int64_t side = 8192;
  REQUIRE(side * side * 2 > kFoldMaxElements);
  g.add_node(Node{"fill_big", OpKind::ConstantOfShape, {}, {init(g, "big_shape", ints({3}, {side, side, 2}))}, {big}});
  g.add_node(Node{"fill_small", OpKind::ConstantOfShape, {}, {init(g, "small_shape", ints({2}, {2, 3}))}, {small}});
  g.outputs = {big, small};
  REQUIRE(changed(g, "fold_constants"));
  REQUIRE(g.nodes.size() == 1);
  REQUIRE(g.nodes[0].name == "fill_big");
  REQUIRE(g.initializers.at(small).shape() == Shape{2, 3});
}

// ---- fold_batchnorm ----

TEST_CASE("fold_batchnorm folds into Conv, with and without bias, any group", "[passes]") {
  struct Case {
    int64_t c, m, group;
    bool bias;
  };
  for (const Case& k : {Case{3, 4, 1, true}, Case{3, 4, 1, false}, Case{4, 6, 2, true}, Case{4, 4, 4, false}}) {
    INFO("c=" << k.c << " m=" << k.m << " group=" << k.group << " bias=" << k.bias);
    Graph g = conv_bn(k.c, k.m, k.group, k.bias);
    const Tensor w_before = g.initializers.at(g.find_value("w"));
    REQUIRE(run_checked(g, {"fold_batchnorm"}) < 1e-5);
    REQUIRE(g.nodes.size() == 1);
    const Node& conv = g.nodes[0];
    REQUIRE(conv.op == OpKind::Conv);
    REQUIRE(conv.inputs.size() == 3);
    REQUIRE(conv.outputs[0] == g.find_value("bn.out"));  // the BN output's name is kept
    REQUIRE(g.outputs[0] == g.find_value("bn.out"));
    REQUIRE(g.initializers.size() == 2);  // folded W and B only; the old weights and BN params are gone
    REQUIRE(g.initializers.at(conv.inputs[1]).shape() == w_before.shape());
  }
}

TEST_CASE("fold_batchnorm folds into Gemm for transB 0 and 1, any C", "[passes]") {
  // C shapes: none, [N], [1, N], [M, 1], [M, N], scalar
  const std::vector<Shape> c_shapes = {{}, {5}, {1, 5}, {3, 1}, {3, 5}, {}};
  for (int64_t trans_b = 0; trans_b <= 1; ++trans_b)
    for (size_t ci = 0; ci < c_shapes.size(); ++ci)
      for (float beta : {1.0f, 1.3f, 0.0f}) {
        const bool has_c = ci != 0;
        INFO("transB=" << trans_b << " C case " << ci << " beta=" << beta);
        Graph g;
        const ValueId a = g.add_value("a", ValueType::of(DType::f32, {3, 4}));
        g.inputs = {a};
        const ValueId b = init(g, "b", uniform(trans_b ? Shape{5, 4} : Shape{4, 5}, 30));
        std::vector<ValueId> in{a, b};
        if (has_c) in.push_back(init(g, "c", uniform(c_shapes[ci], 31)));
        const ValueId t = value(g, "t");
        Node gemm{"gemm", OpKind::Gemm, {}, in, {t}};
        gemm.attrs.set("transB", trans_b);
        gemm.attrs.set("alpha", 0.7f);
        gemm.attrs.set("beta", beta);
        g.add_node(std::move(gemm));
        g.outputs = {add_bn(g, t, 5, "bn", 40)};
        REQUIRE(run_checked(g, {"fold_batchnorm"}) < 1e-5);
        REQUIRE(g.nodes.size() == 1);
        REQUIRE(g.nodes[0].op == OpKind::Gemm);
        REQUIRE(g.nodes[0].attrs.get_float("beta", 0.0f).value() == 1.0f);
      }
}

TEST_CASE("fold_batchnorm folds into grouped ConvTranspose", "[passes]") {
  for (int64_t group : {1, 2}) {
    for (bool bias : {true, false}) {
      INFO("group=" << group << " bias=" << bias);
      Graph g;
      const ValueId x = g.add_value("x", ValueType::of(DType::f32, {2, 4, 3, 3}));
      g.inputs = {x};
      std::vector<ValueId> in{x, init(g, "w", uniform({4, 3, 2, 2}, 50))};  // M = 3 * group
      if (bias) in.push_back(init(g, "b", uniform({3 * group}, 51)));
      const ValueId t = value(g, "t");
      Node ct{"deconv", OpKind::ConvTranspose, {}, in, {t}};
      ct.attrs.set("group", group);
      ct.attrs.set("strides", std::vector<int64_t>{2, 2});
      g.add_node(std::move(ct));
      g.outputs = {add_bn(g, t, 3 * group, "bn", 60)};
      REQUIRE(run_checked(g, {"fold_batchnorm"}) < 1e-5);
      REQUIRE(g.nodes.size() == 1);
      REQUIRE(g.nodes[0].op == OpKind::ConvTranspose);
    }
  }
}

TEST_CASE("fold_batchnorm folds a chain of BatchNorms and never mutates a shared weight", "[passes]") {
  Graph g = conv_bn(3, 4, 1, true);
  const ValueId w = g.find_value("w");
  const Tensor w_copy = g.initializers.at(w).clone();
  // A second Conv reads the same W; a second BN follows the first.
  const ValueId x = g.inputs[0], u = value(g, "u");
  g.add_node(Node{"conv2", OpKind::Conv, {}, {x, w}, {u}});
  Node& conv2 = g.nodes.back();
  conv2.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  const ValueId y2 = add_bn(g, g.outputs[0], 4, "bn2", 70);
  g.outputs = {y2, u};

  REQUIRE(run_checked(g, {"fold_batchnorm"}) < 1e-5);
  REQUIRE(count(g, OpKind::BatchNormalization) == 0);
  REQUIRE(count(g, OpKind::Conv) == 2);
  REQUIRE(g.is_initializer(w));
  const Tensor& w_after = g.initializers.at(w);
  for (int64_t i = 0; i < w_copy.numel(); ++i) REQUIRE(w_after.data<float>()[i] == w_copy.data<float>()[i]);
  for (const Node& n : g.nodes) {
    if (n.name == "conv") {
      REQUIRE(n.inputs[1] != w);
    } else {
      REQUIRE(n.inputs[1] == w);
    }
  }
}

TEST_CASE("fold_batchnorm leaves a BatchNorm whose preconditions fail", "[passes]") {
  SECTION("the Conv output has another reader") {
    Graph g = conv_bn(3, 4, 1, true);
    const ValueId r = value(g, "r");
    g.add_node(Node{"relu", OpKind::Relu, {}, {g.find_value("t")}, {r}});
    g.outputs.push_back(r);
    REQUIRE_FALSE(changed(g, "fold_batchnorm"));
  }
  SECTION("the Conv output is a graph output") {
    Graph g = conv_bn(3, 4, 1, true);
    g.outputs.push_back(g.find_value("t"));
    REQUIRE_FALSE(changed(g, "fold_batchnorm"));
  }
  SECTION("the weight is not constant") {
    Graph g = conv_bn(3, 4, 1, true);
    const ValueId w = g.find_value("w");
    g.initializers.erase(w);
    g.inputs.push_back(w);
    REQUIRE_FALSE(changed(g, "fold_batchnorm"));
  }
  SECTION("a BN parameter is not constant") {
    Graph g = conv_bn(3, 4, 1, true);
    const ValueId mean = g.find_value("bn.mean");
    g.initializers.erase(mean);
    g.inputs.push_back(mean);
    REQUIRE_FALSE(changed(g, "fold_batchnorm"));
  }
  SECTION("the Conv carries a fused activation") {
    Graph g = conv_bn(3, 4, 1, true);
    g.nodes[0].attrs.set("activation", std::string("relu"));
    REQUIRE_FALSE(changed(g, "fold_batchnorm"));
  }
  SECTION("the producer is not a Conv, ConvTranspose or Gemm") {
    Graph g;
    const ValueId x = g.add_value("x", ValueType::of(DType::f32, {2, 3, 4, 4}));
    g.inputs = {x};
    const ValueId t = value(g, "t");
    g.add_node(Node{"relu", OpKind::Relu, {}, {x}, {t}});
    g.outputs = {add_bn(g, t, 3, "bn", 80)};
    REQUIRE_FALSE(changed(g, "fold_batchnorm"));
  }
}

TEST_CASE("the default pipeline folds a BatchNorm behind Identity nodes, then fuses the Relu", "[passes]") {
  // Conv -> Identity -> Identity -> BN -> Relu (PyTorch exports such Identities): eliminate_identity
  // runs before fold_batchnorm, so all of it becomes one Conv with a relu epilogue.
  Graph g = conv_bn(3, 4, 1, true);
  const ValueId t = g.find_value("t"), i1 = value(g, "i1"), i2 = value(g, "i2"), r = value(g, "r");
  g.add_node(Node{"id1", OpKind::Identity, {}, {t}, {i1}});
  g.add_node(Node{"id2", OpKind::Identity, {}, {i1}, {i2}});
  Node& bn = g.nodes[1];
  REQUIRE(bn.op == OpKind::BatchNormalization);
  bn.inputs[0] = i2;
  std::swap(g.nodes[1], g.nodes[3]);  // keep topological order: conv, id1, id2, bn
  std::swap(g.nodes[1], g.nodes[2]);
  for (size_t i = 0; i < g.nodes.size(); ++i) g.value(g.nodes[i].outputs[0]).producer = static_cast<int>(i);
  g.add_node(Node{"relu", OpKind::Relu, {}, {g.outputs[0]}, {r}});
  g.outputs = {r};

  REQUIRE(run_checked(g, default_pipeline()) < 1e-5);
  REQUIRE(g.nodes.size() == 1);
  REQUIRE(g.nodes[0].op == OpKind::Conv);
  REQUIRE(g.nodes[0].outputs[0] == r);
  REQUIRE(g.nodes[0].attrs.get_string("activation", "").value() == "relu");
}

TEST_CASE("the Fashion-MNIST example's BatchNorms all fold", "[passes]") {
  auto imported = onnx_import_file(std::string(KILN_TEST_DATA_DIR) + "/../../examples/fashion-mnist/model.onnx");
  REQUIRE(imported);
  Graph g = std::move(*imported);
  REQUIRE(count(g, OpKind::BatchNormalization) == 4);
  const size_t before = g.nodes.size();
  REQUIRE(run_checked(g, {"fold_constants", "fold_batchnorm"}, {{"batch", 2}}) < 1e-5);
  REQUIRE(count(g, OpKind::BatchNormalization) == 0);
  REQUIRE(g.nodes.size() <= before - 4);
  REQUIRE(run_checked(g, default_pipeline(), {{"batch", 2}}) < 1e-5);
}

TEST_CASE("eliminate_identity drops an all-zero Pad and keeps a real one", "[passes]") {
  // x -> Pad(0s) -> a -> AveragePool -> y, as PyTorch exports DenseNet's transitions; and a Pad
  // with one non-zero pad, which must stay.
  for (const bool zero : {true, false}) {
    Graph g;
    const ValueId x = g.add_value("x", ValueType::of(DType::f32, sym_shape_from({1, 2, 4, 4})));
    g.inputs = {x};
    const ValueId pads = init(g, "pads", ints({8}, {0, 0, 0, 0, 0, 0, 0, zero ? 0 : 1}));
    const ValueId a = value(g, "a"), y = value(g, "y");
    g.add_node(Node{"pad", OpKind::Pad, {}, {x, pads}, {a}});
    Attrs pool;
    pool.set("kernel_shape", std::vector<int64_t>{2, 2});
    pool.set("strides", std::vector<int64_t>{2, 2});
    g.add_node(Node{"pool", OpKind::AveragePool, pool, {a}, {y}});
    g.outputs = {y};
    REQUIRE(run_checked(g, {"eliminate_identity", "eliminate_dead_nodes"}) < 1e-6);
    CHECK(count(g, OpKind::Pad) == (zero ? 0 : 1));
    CHECK(g.initializers.count(pads) == (zero ? 0u : 1u));
  }
}

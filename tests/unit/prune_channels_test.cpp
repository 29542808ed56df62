// prune_channels and the channel-group analysis under it: which channel dimensions are coupled
// (a residual stream with its downsample, through pooling and Flatten into a Gemm), that every
// weight and every value on a pruned group really shrinks, that removing all-zero channels leaves
// the outputs exactly as they were, and which groups are left alone (Concat, graph outputs).
#include <catch2/catch.hpp>

#include <sstream>

#include "compilers/analysis/channel_groups.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "tests/support/graph_builder.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

Attrs conv_attrs(int64_t stride = 1, int64_t pad = 1, int64_t group = 1) {
  Attrs a;
  a.set("pads", std::vector<int64_t>{pad, pad, pad, pad});
  a.set("strides", std::vector<int64_t>{stride, stride});
  a.set("group", group);
  return a;
}

// BatchNormalization(x) over c channels with non-trivial parameters.
ValueId add_bn(GraphBuilder& b, ValueId x, int64_t c, const std::string& name) {
  return b.node(OpKind::BatchNormalization, name,
                {x, b.weight(name + ".scale", {c}, 0.5f, 1.5f), b.weight(name + ".beta", {c}, -0.5f, 0.5f),
                 b.weight(name + ".mean", {c}, -0.5f, 0.5f), b.weight(name + ".var", {c}, 0.2f, 2.0f)});
}

struct Run {
  std::vector<PassRecord> records;
  std::string log;
};

// Runs `pipeline` with the numeric check on (the pruning pass's change is measured, not limited).
Run prune(Graph& g, double ratio, const std::string& pipeline = "prune_channels") {
  std::ostringstream log;
  PassRunOptions options;
  options.check_numerics = true;
  options.prune.channel_ratio = ratio;
  options.log = &log;
  auto records = run_passes(g, pipeline_parse(pipeline), options);
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  return {std::move(*records), log.str()};
}

const PassRecord& record_of(const Run& run, const std::string& pass) {
  for (const PassRecord& r : run.records)
    if (r.name == pass) return r;
  FAIL("no record for " << pass);
  return run.records.front();
}

const Node& node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (n.name == name) return n;
  FAIL("no node " << name);
  return g.nodes.front();
}

const Tensor& input_of(const Graph& g, const std::string& node, size_t i) {
  return g.initializers.at(node_named(g, node).inputs[i]);
}

Shape shape_of(const Graph& g, const std::string& value) {
  const ValueType& t = g.value(g.find_value(value)).type;
  REQUIRE(t.rank_known);
  return sym_shape_concrete(t.shape);
}

// x [1, 3, 8, 8] -> conv1 (8) -> bn -> relu -> conv2 (4) -> y (graph output).
Graph conv_bn_relu_conv() {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 8, 8});
  const ValueId c1 = b.node(OpKind::Conv, "c1", {x, b.weight("w1", {8, 3, 3, 3}), b.weight("b1", {8})}, conv_attrs());
  const ValueId r = b.node(OpKind::Relu, "r", {add_bn(b, c1, 8, "bn")});
  b.output(b.node(OpKind::Conv, "y", {r, b.weight("w2", {4, 8, 3, 3}), b.weight("b2", {4})}, conv_attrs()));
  return std::move(b.g);
}

}  // namespace

TEST_CASE("prune_channels shrinks every weight and value of a conv -> bn -> relu -> conv chain", "[passes][prune]") {
  Graph g = conv_bn_relu_conv();
  const Run run = prune(g, 0.25);
  REQUIRE(record_of(run, "prune_channels").changed);
  CHECK(input_of(g, "c1_node", 1).shape() == Shape{6, 3, 3, 3});
  CHECK(input_of(g, "c1_node", 2).shape() == Shape{6});
  for (size_t p = 1; p < 5; ++p) CHECK(input_of(g, "bn_node", p).shape() == Shape{6});
  CHECK(input_of(g, "y_node", 1).shape() == Shape{4, 6, 3, 3});
  CHECK(input_of(g, "y_node", 2).shape() == Shape{4});  // its output is the graph's: kept
  CHECK(shape_of(g, "c1") == Shape{1, 6, 8, 8});
  CHECK(shape_of(g, "r") == Shape{1, 6, 8, 8});
  CHECK(shape_of(g, "y") == Shape{1, 4, 8, 8});
  CHECK(g.initializers.size() == 8);  // the unpruned weights are gone
  CHECK(run.log.find("(no fine-tuning)") != std::string::npos);
  CHECK(run.log.find("channels 8 -> 6") != std::string::npos);
  // 8 x 8 x (c1: 8 x 27 -> 6 x 27, y: 4 x 72 -> 4 x 54)
  CHECK(run.log.find("MACs 32256 -> 24192 (-25.0%)") != std::string::npos);
}

TEST_CASE("removing all-zero channels leaves the outputs exactly as they were", "[passes][prune]") {
  Graph g = conv_bn_relu_conv();
  // Channels 1 and 4 of c1: zero filters and bias, a BatchNorm that maps 0 to 0, so their
  // activation is zero everywhere and the lowest L1 norms pick exactly them.
  const std::vector<int64_t> zero = {1, 4};
  auto& w1 = g.initializers.at(g.find_value("w1"));
  const Tensor original = w1.clone();
  for (int64_t c : zero) {
    for (int64_t i = 0; i < 27; ++i) w1.data<float>()[c * 27 + i] = 0.0f;
    g.initializers.at(g.find_value("b1")).data<float>()[c] = 0.0f;
    g.initializers.at(g.find_value("bn.beta")).data<float>()[c] = 0.0f;
    g.initializers.at(g.find_value("bn.mean")).data<float>()[c] = 0.0f;
  }
  const Run run = prune(g, 0.25);
  const PassRecord& r = record_of(run, "prune_channels");
  REQUIRE(r.changed);
  CHECK(r.max_rel_error >= 0.0);
  CHECK(r.max_rel_error <= 1e-6);
  // The kept filters are the original rows 0, 2, 3, 5, 6, 7 in order.
  const Tensor& w = input_of(g, "c1_node", 1);
  REQUIRE(w.shape() == Shape{6, 3, 3, 3});
  const std::vector<int64_t> kept = {0, 2, 3, 5, 6, 7};
  for (size_t k = 0; k < kept.size(); ++k)
    for (int64_t i = 0; i < 27; ++i)
      CHECK(w.data<float>()[static_cast<int64_t>(k) * 27 + i] == original.data<float>()[kept[k] * 27 + i]);

  SECTION("and so does the default pipeline around it, after folding the BatchNorm") {
    Graph g2 = conv_bn_relu_conv();
    // Same zeroed channels in a fresh copy, through fold_batchnorm first.
    auto& w = g2.initializers.at(g2.find_value("w1"));
    for (int64_t c : zero) {
      for (int64_t i = 0; i < 27; ++i) w.data<float>()[c * 27 + i] = 0.0f;
      g2.initializers.at(g2.find_value("b1")).data<float>()[c] = 0.0f;
      g2.initializers.at(g2.find_value("bn.beta")).data<float>()[c] = 0.0f;
      g2.initializers.at(g2.find_value("bn.mean")).data<float>()[c] = 0.0f;
    }
    const Run full = prune(g2, 0.25, "default+prune_channels");
    CHECK(record_of(full, "prune_channels").max_rel_error <= 1e-6);
    CHECK(shape_of(g2, "r") == Shape{1, 6, 8, 8});
  }
}

TEST_CASE("a residual stage is one group: its convs, the downsample and every reader shrink together",
          "[passes][prune]") {
  // stem (8) -> [a (16, stride 2) -> bn -> relu -> b (16) -> bn] + [d (16, stride 2) -> bn] -> relu
  // -> [c (16) -> relu -> e (16)] + itself -> relu -> GlobalAveragePool -> Flatten -> fc (10).
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 8, 8});
  const ValueId s = b.node(OpKind::Relu, "s",
                           {b.node(OpKind::Conv, "stem", {x, b.weight("ws", {8, 4, 3, 3})}, conv_attrs())});
  const ValueId a = b.node(OpKind::Relu, "a_relu",
                           {add_bn(b, b.node(OpKind::Conv, "a", {s, b.weight("wa", {16, 8, 3, 3})}, conv_attrs(2)), 16, "a_bn")});
  const ValueId bb = add_bn(b, b.node(OpKind::Conv, "b", {a, b.weight("wb", {16, 16, 3, 3})}, conv_attrs()), 16, "b_bn");
  const ValueId d = add_bn(b, b.node(OpKind::Conv, "d", {s, b.weight("wd", {16, 8, 1, 1})}, conv_attrs(2, 0)), 16, "d_bn");
  const ValueId r1 = b.node(OpKind::Relu, "r1", {b.node(OpKind::Add, "add1", {bb, d})});
  const ValueId c = b.node(OpKind::Relu, "c_relu",
                           {b.node(OpKind::Conv, "c", {r1, b.weight("wc", {16, 16, 3, 3})}, conv_attrs())});
  const ValueId e = b.node(OpKind::Conv, "e", {c, b.weight("we", {16, 16, 3, 3}), b.weight("be", {16})}, conv_attrs());
  const ValueId r2 = b.node(OpKind::Relu, "r2", {b.node(OpKind::Add, "add2", {e, r1})});
  const ValueId flat = b.node(OpKind::Flatten, "flat", {b.node(OpKind::GlobalAveragePool, "gap", {r2})});
  Attrs trans_b;
  trans_b.set("transB", int64_t{1});
  b.output(b.node(OpKind::Gemm, "fc", {flat, b.weight("wfc", {10, 16}), b.weight("bfc", {10})}, trans_b));
  Graph& g = b.g;
  REQUIRE(run_passes(g, {}));  // shapes for the analysis

  const std::vector<ChannelGroup> groups = channel_groups(g);
  REQUIRE(groups.size() == 5);  // stem, a, the residual stream (b, d, e), c, fc (the graph output)
  for (size_t i = 0; i < 4; ++i) CHECK(groups[i].prunable);
  CHECK_FALSE(groups[4].prunable);
  CHECK(groups[0].channels == 8);
  const auto stream = std::find_if(groups.begin(), groups.end(), [](const ChannelGroup& gr) { return gr.producers.size() == 3; });
  REQUIRE(stream != groups.end());
  CHECK(stream->channels == 16);

  const Run run = prune(g, 0.3);
  CHECK(record_of(run, "prune_channels").changed);
  // 8 -> 6 (round(2.4) = 2 removed), 16 -> 11 (round(4.8) = 5 removed).
  CHECK(input_of(g, "stem_node", 1).shape() == Shape{6, 4, 3, 3});
  CHECK(input_of(g, "a_node", 1).shape() == Shape{11, 6, 3, 3});
  CHECK(input_of(g, "d_node", 1).shape() == Shape{11, 6, 1, 1});
  CHECK(input_of(g, "b_node", 1).shape() == Shape{11, 11, 3, 3});
  CHECK(input_of(g, "c_node", 1).shape() == Shape{11, 11, 3, 3});
  CHECK(input_of(g, "e_node", 1).shape() == Shape{11, 11, 3, 3});
  CHECK(input_of(g, "e_node", 2).shape() == Shape{11});
  for (const char* bn : {"a_bn_node", "b_bn_node", "d_bn_node"}) CHECK(input_of(g, bn, 1).shape() == Shape{11});
  CHECK(input_of(g, "fc_node", 1).shape() == Shape{10, 11});
  CHECK(input_of(g, "fc_node", 2).shape() == Shape{10});
  CHECK(shape_of(g, "add1") == Shape{1, 11, 4, 4});
  CHECK(shape_of(g, "flat") == Shape{1, 11});
  CHECK(shape_of(g, "fc") == Shape{1, 10});
  CHECK(run.log.find("4 of 5 channel groups pruned") != std::string::npos);
  CHECK(run.log.find("channels 56 -> 39") != std::string::npos);

  SECTION("the default pipeline runs and lowers the pruned graph") {
    Graph fresh = std::move(g);
    const Run full = prune(fresh, 0.3, "default+prune_channels");
    CHECK(record_of(full, "prune_channels").changed);
  }
}

TEST_CASE("prune_channels prunes Gemm features and a depthwise Conv's channels and group", "[passes][prune]") {
  SECTION("Gemm (transB 0, bias C) -> Relu -> Gemm") {
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 12});
    const ValueId h = b.node(OpKind::Relu, "h", {b.node(OpKind::Gemm, "fc1", {x, b.weight("w1", {12, 20}), b.weight("c1", {20})})});
    b.output(b.node(OpKind::Gemm, "fc2", {h, b.weight("w2", {20, 5})}));
    Graph& g = b.g;
    prune(g, 0.5);
    CHECK(input_of(g, "fc1_node", 1).shape() == Shape{12, 10});
    CHECK(input_of(g, "fc1_node", 2).shape() == Shape{10});
    CHECK(input_of(g, "fc2_node", 1).shape() == Shape{10, 5});
    CHECK(shape_of(g, "fc2") == Shape{2, 5});
  }
  SECTION("Conv -> Relu -> Flatten of the map -> Gemm: H*W weight columns per channel, exactly") {
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 3, 4, 4});
    const ValueId w = b.weight("w", {8, 3, 3, 3}), bias = b.weight("b", {8});
    for (int64_t c : {2, 5}) {  // all-zero channels: exactly the ones removed, so nothing changes
      for (int64_t i = 0; i < 27; ++i) b.g.initializers.at(w).data<float>()[c * 27 + i] = 0.0f;
      b.g.initializers.at(bias).data<float>()[c] = 0.0f;
    }
    const ValueId r = b.node(OpKind::Relu, "r", {b.node(OpKind::Conv, "c", {x, w, bias}, conv_attrs())});
    Attrs trans_b;
    trans_b.set("transB", int64_t{1});
    b.output(b.node(OpKind::Gemm, "fc", {b.node(OpKind::Flatten, "flat", {r}), b.weight("wfc", {3, 128})}, trans_b));
    Graph& g = b.g;
    const Run run = prune(g, 0.25);
    CHECK(record_of(run, "prune_channels").max_rel_error <= 1e-6);
    CHECK(input_of(g, "c_node", 1).shape() == Shape{6, 3, 3, 3});
    CHECK(input_of(g, "fc_node", 1).shape() == Shape{3, 96});
    CHECK(shape_of(g, "flat") == Shape{2, 96});
  }
  SECTION("1x1 -> depthwise -> 1x1") {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 4, 6, 6});
    const ValueId e = b.node(OpKind::Relu, "e", {b.node(OpKind::Conv, "expand", {x, b.weight("we", {8, 4, 1, 1})}, conv_attrs(1, 0))});
    const ValueId dw = b.node(OpKind::Conv, "dw", {e, b.weight("wd", {8, 1, 3, 3}), b.weight("bd", {8})}, conv_attrs(1, 1, 8));
    b.output(b.node(OpKind::Conv, "project", {b.node(OpKind::Relu, "dr", {dw}), b.weight("wp", {4, 8, 1, 1})}, conv_attrs(1, 0)));
    Graph& g = b.g;
    prune(g, 0.25);
    CHECK(input_of(g, "expand_node", 1).shape() == Shape{6, 4, 1, 1});
    CHECK(input_of(g, "dw_node", 1).shape() == Shape{6, 1, 3, 3});
    CHECK(input_of(g, "dw_node", 2).shape() == Shape{6});
    CHECK(*node_named(g, "dw_node").attrs.get_int("group", 0) == 6);
    CHECK(input_of(g, "project_node", 1).shape() == Shape{4, 6, 1, 1});
    CHECK(shape_of(g, "project") == Shape{1, 4, 6, 6});
  }
  SECTION("squeeze-excite: the [N, C, 1, 1] scale couples its expand Conv with the map it scales") {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 4, 6, 6});
    const ValueId e = b.node(OpKind::Relu, "e", {b.node(OpKind::Conv, "expand", {x, b.weight("we", {8, 4, 1, 1})}, conv_attrs(1, 0))});
    const ValueId dw = b.node(OpKind::Conv, "dw", {e, b.weight("wd", {8, 1, 3, 3})}, conv_attrs(1, 1, 8));
    const ValueId squeeze = b.node(OpKind::Relu, "sq", {b.node(OpKind::Conv, "se_reduce",
        {b.node(OpKind::GlobalAveragePool, "gap", {dw}), b.weight("wr", {2, 8, 1, 1}), b.weight("br", {2})}, conv_attrs(1, 0))});
    const ValueId scale = b.node(OpKind::Sigmoid, "scale", {b.node(OpKind::Conv, "se_expand",
        {squeeze, b.weight("wx", {8, 2, 1, 1}), b.weight("bx", {8})}, conv_attrs(1, 0))});
    const ValueId m = b.node(OpKind::Mul, "m", {dw, scale});
    b.output(b.node(OpKind::Conv, "project", {m, b.weight("wp", {4, 8, 1, 1})}, conv_attrs(1, 0)));
    Graph& g = b.g;
    prune(g, 0.25);
    CHECK(input_of(g, "expand_node", 1).shape() == Shape{6, 4, 1, 1});
    CHECK(input_of(g, "dw_node", 1).shape() == Shape{6, 1, 3, 3});
    CHECK(input_of(g, "se_reduce_node", 1).shape() == Shape{1, 6, 1, 1});  // 2 -> 1: round(0.5) removed
    CHECK(input_of(g, "se_expand_node", 1).shape() == Shape{6, 1, 1, 1});
    CHECK(input_of(g, "se_expand_node", 2).shape() == Shape{6});
    CHECK(input_of(g, "project_node", 1).shape() == Shape{4, 6, 1, 1});
    CHECK(shape_of(g, "m") == Shape{1, 6, 6, 6});
  }
}

TEST_CASE("prune_channels leaves groups it cannot follow, graph outputs, and everything at ratio 0", "[passes][prune]") {
  SECTION("channels joined by a Concat") {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 3, 6, 6});
    const ValueId p = b.node(OpKind::Relu, "p", {b.node(OpKind::Conv, "c1", {x, b.weight("w1", {4, 3, 3, 3})}, conv_attrs())});
    const ValueId q = b.node(OpKind::Relu, "q", {b.node(OpKind::Conv, "c2", {x, b.weight("w2", {4, 3, 3, 3})}, conv_attrs())});
    Attrs axis;
    axis.set("axis", int64_t{1});
    const ValueId cat = b.node(OpKind::Concat, "cat", {p, q}, axis);
    b.output(b.node(OpKind::Conv, "y", {cat, b.weight("w3", {2, 8, 3, 3})}, conv_attrs()));
    Graph& g = b.g;
    const Run run = prune(g, 0.5);
    CHECK_FALSE(record_of(run, "prune_channels").changed);
    CHECK(input_of(g, "c1_node", 1).shape() == Shape{4, 3, 3, 3});
    CHECK(input_of(g, "y_node", 1).shape() == Shape{2, 8, 3, 3});
    CHECK(run.log.find("0 of 3 channel groups pruned") != std::string::npos);
    CHECK(run.log.find("'cat_node' (Concat)") != std::string::npos);
    CHECK(run.log.find("is a graph output") != std::string::npos);
  }
  SECTION("a value read as a graph output through a Relu") {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 3, 6, 6});
    const ValueId c = b.node(OpKind::Conv, "c", {x, b.weight("w", {8, 3, 3, 3})}, conv_attrs());
    const ValueId r = b.node(OpKind::Relu, "r", {c});
    b.output(r);
    b.output(b.node(OpKind::Conv, "y", {r, b.weight("w2", {2, 8, 3, 3})}, conv_attrs()));
    Graph& g = b.g;
    CHECK_FALSE(record_of(prune(g, 0.5), "prune_channels").changed);
    CHECK(input_of(g, "c_node", 1).shape() == Shape{8, 3, 3, 3});
  }
  SECTION("ratio 0") {
    Graph g = conv_bn_relu_conv();
    const Run run = prune(g, 0.0);
    CHECK_FALSE(record_of(run, "prune_channels").changed);
    CHECK(input_of(g, "c1_node", 1).shape() == Shape{8, 3, 3, 3});
    CHECK(run.log.find("(no fine-tuning)") != std::string::npos);
  }
  SECTION("a ratio of 1 or more is refused") {
    Graph g = conv_bn_relu_conv();
    PassRunOptions options;
    options.prune.channel_ratio = 1.0;
    auto records = run_passes(g, {"prune_channels"}, options);
    REQUIRE_FALSE(records);
    CHECK(records.error().message.find("[0, 1)") != std::string::npos);
  }
}

TEST_CASE("pruning passes are named prune_ and the pipeline knows it", "[passes][prune]") {
  CHECK(pass_prunes("prune_channels"));
  CHECK_FALSE(pass_prunes("fold_batchnorm"));
  CHECK(pipeline_prunes(pipeline_parse("default+prune_channels")));
  CHECK_FALSE(pipeline_prunes(default_pipeline()));
  const auto names = pipeline_parse("default+prune_channels");
  const auto at = [&](const char* n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  CHECK(at("fold_batchnorm") < at("prune_channels"));
  CHECK(at("prune_channels") < at("fuse_residual_add"));
  for (const PassInfo& p : pass_table())
    if (p.name == "prune_channels") CHECK_FALSE((p.in_default || p.exact));
}

}  // namespace kiln

// fuse_depth_first: MobileNetV2's and EfficientNet's expand -> depthwise -> project blocks fused into one
// DepthFirstConv where that measured faster, what it leaves, and DepthFirstConv's shape inference. Each
// pass runs with check_numerics (tests/support/pass_test_helpers.h), so the fused graph is also checked
// against the unfused one on the reference executor.
#include <catch2/catch.hpp>

#include "compilers/ir/shape_inference.h"
#include "compilers/passes/pipeline.h"
#include "kernels/op_def.h"
#include "tests/support/pass_test_helpers.h"

using namespace kiln;
using namespace kiln::testing::passes;

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

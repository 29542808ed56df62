// The oneDNN kernels (kernels/onednn/) against the reference executor: each family runs through
// the compiled Engine on small Plans with awkward sizes (13 and 7 channels, strides, pads,
// groups, ceil mode, broadcasting), in plain and blocked layouts, twice (the arena is dirty the
// second time). Passes when max|engine - reference| <= 1e-4 * max|reference|. Also: blocked
// regions stay blocked (no conversion between oneDNN kernels), and supports() rejects what it
// cannot compute exactly, with a reason.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "kernels/onednn/onednn_kernels.h"
#include "kernels/post_ops.h"
#include "kernels/registry.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

int count_conversions(const Engine& e) { return count_kernel(e, "convert."); }

const std::string& kernel_of(const Engine& e, const std::string& node) {
  for (const EngineStep& st : e.steps())
    if (st.node == node) return st.kernel;
  static const std::string none = "?";
  return none;
}

const KernelImpl& impl(std::string_view name) {
  for (const KernelImpl* k : kernel_registry())
    if (k->name == name) return *k;
  FAIL("no kernel " << name);
  return kReferenceKernel;
}

Attrs conv_attrs(std::vector<int64_t> pads, std::vector<int64_t> strides = {1, 1}, int64_t group = 1,
                 std::vector<int64_t> dilations = {1, 1}) {
  return attrs({{"pads", pads}, {"strides", strides}, {"group", group}, {"dilations", dilations}});
}

// A conv giving a blocked value of `c` channels from a plain input.
int blocked_conv(Builder& b, int x, int64_t c) {
  const int64_t cin = b.concrete(x)[1];
  return b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {x, b.weight({c, cin, 3, 3}, 0.5f), b.weight({c})});
}

}  // namespace

TEST_CASE("onednn conv: tails, strides, pads, groups, dilations, auto_pad, ranks", "[onednn]") {
  struct Case {
    const char* what;
    Shape x, w;
    Attrs a;
    bool bias;
  };
  const std::vector<Case> cases = {
      {"13->7 3x3 pad 1", {2, 13, 11, 9}, {7, 13, 3, 3}, conv_attrs({1, 1, 1, 1}), true},
      {"3->16 7x7 stride 2 pad 3 (stem)", {2, 3, 23, 23}, {16, 3, 7, 7}, conv_attrs({3, 3, 3, 3}, {2, 2}), true},
      {"uneven pads, stride 2x3", {1, 13, 12, 14}, {7, 13, 3, 2}, conv_attrs({0, 1, 2, 0}, {2, 3}), false},
      {"1x1", {2, 32, 7, 7}, {13, 32, 1, 1}, conv_attrs({0, 0, 0, 0}), true},
      {"groups 3", {2, 12, 9, 9}, {6, 4, 3, 3}, conv_attrs({1, 1, 1, 1}, {1, 1}, 3), true},
      {"depthwise 13", {2, 13, 10, 10}, {13, 1, 3, 3}, conv_attrs({1, 1, 1, 1}, {2, 2}, 13), true},
      {"depthwise multiplier 2", {1, 7, 8, 8}, {14, 1, 3, 3}, conv_attrs({1, 1, 1, 1}, {1, 1}, 7), true},
      {"dilation 2", {1, 13, 12, 12}, {7, 13, 3, 3}, conv_attrs({2, 2, 2, 2}, {1, 1}, 1, {2, 2}), true},
      {"SAME_UPPER stride 2", {1, 7, 11, 10}, {13, 7, 3, 3}, attrs({{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2, 2}}}), true},
      {"SAME_LOWER", {1, 7, 10, 10}, {13, 7, 4, 4}, attrs({{"auto_pad", std::string("SAME_LOWER")}}), false},
      {"VALID", {1, 7, 10, 9}, {5, 7, 3, 3}, attrs({{"auto_pad", std::string("VALID")}}), true},
      {"1-D", {2, 13, 17}, {7, 13, 5}, attrs({{"pads", std::vector<int64_t>{2, 1}}}), true},
      {"3-D", {1, 5, 6, 7, 8}, {7, 5, 3, 3, 3}, attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1, 1, 1}}}), true},
  };
  for (const Case& c : cases) {
    for (bool blocked : {false, true}) {
      INFO(c.what << (blocked ? " blocked" : " plain"));
      Builder b;
      int x = b.input(c.x);
      // A blocked input: a 1x1 conv of the same rank in front.
      if (blocked) {
        Shape w1 = {c.x[1], c.x[1]};
        w1.resize(c.x.size(), 1);
        x = b.op(OpKind::Conv, {}, {x, b.weight(w1, 0.5f)});
      }
      std::vector<int> in = {x, b.weight(c.w)};
      if (c.bias) in.push_back(b.weight({c.w[0]}));
      const int y = b.op(OpKind::Conv, c.a, in);
      b.output(y);
      auto e = check(b);
      REQUIRE(kernel_of(*e, b.plan.steps.back().name) == "onednn.conv");
    }
  }
}

TEST_CASE("onednn conv: residual and every fused activation", "[onednn]") {
  std::vector<PostOps> acts = {
      {Activation::none, 0, 0},         {Activation::relu, 0, 0},       {Activation::clip, -0.5f, 0.75f},
      {Activation::leaky_relu, 0.1f, 0}, {Activation::sigmoid, 0, 0},    {Activation::silu, 0, 0},
      {Activation::hard_swish, 0, 0},   {Activation::hard_sigmoid, 0.2f, 0.5f}, {Activation::gelu_erf, 0, 0},
      {Activation::tanh, 0, 0},         {Activation::elu, 0.7f, 0},
  };
  for (const PostOps& post : acts) {
    for (int residual_kind = 0; residual_kind < 3; ++residual_kind) {  // none, plain input, blocked conv output
      INFO(activation_name(post.activation) << ", residual kind " << residual_kind);
      Builder b;
      const int x = b.input({2, 13, 9, 9}, -2.0f, 2.0f);
      const int w = b.weight({7, 13, 3, 3}), bias = b.weight({7});
      int r = -1;
      if (residual_kind == 1) r = b.input({2, 7, 9, 9});
      if (residual_kind == 2) r = blocked_conv(b, x, 7);
      Attrs a = conv_attrs({1, 1, 1, 1});
      post_ops_to_attrs(post, a);
      std::vector<int> in = {x, w, bias};
      if (r >= 0) in.push_back(r);
      const int y = b.op_shaped(OpKind::Conv, a, in, {2, 7, 9, 9});
      b.output(y);

      // The oracle: the unfused reference (conv, then + residual), then activation_apply.
      Builder u = b;
      u.plan.steps.pop_back();
      u.plan.outputs.clear();
      const int c = u.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {x, w, bias});
      const int sum = r >= 0 ? u.op(OpKind::Add, {}, {c, r}) : c;
      u.output(sum);
      auto ref = execute_reference(u.plan, u.inputs);
      REQUIRE(ref);
      Tensor want = ref->outputs[0].clone();
      for (int64_t i = 0; i < want.numel(); ++i) want.data<float>()[i] = activation_apply(post, want.data<float>()[i]);
      auto e = check_plan(b.plan, b.inputs, std::vector<Tensor>{want});
      REQUIRE(kernel_of(*e, b.plan.steps.back().name) == "onednn.conv");
    }
  }
}

TEST_CASE("onednn: conv -> pool -> conv stays blocked", "[onednn]") {
  Builder b;
  const int x = b.input({2, 3, 20, 20});
  const int c1 = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {x, b.weight({13, 3, 3, 3}), b.weight({13})});
  const int r = b.op(OpKind::Relu, {}, {c1});
  const int p = b.op(OpKind::MaxPool, attrs({{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                              {"pads", std::vector<int64_t>{1, 1, 1, 1}}}), {r});
  const int c2 = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {p, b.weight({7, 13, 3, 3}), b.weight({7})});
  const int c3 = b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}), {c2, b.weight({16, 7, 1, 1})});
  const int g = b.op(OpKind::GlobalAveragePool, {}, {c3});
  b.output(g);
  auto e = check(b);
  INFO(describe_steps(*e));
  REQUIRE(count_kernel(*e, "onednn.") + count_kernel(*e, "cpu.max_pool_codes") == 6);  // the pool on codes, no conversion
  // Only the graph output is converted to plain, after the last oneDNN step.
  REQUIRE(count_conversions(*e) <= 1);
  for (size_t i = 0; i + 1 < e->steps().size(); ++i) REQUIRE(e->steps()[i].kernel.rfind("convert.", 0) != 0);
  bool any_blocked = false;
  for (const EngineStep& st : e->steps()) any_blocked = any_blocked || st.output_layout.rfind("onednn:", 0) == 0;
  REQUIRE(any_blocked);
}

TEST_CASE("onednn pooling: max/avg, ceil mode, dilations, pads, global, plain and blocked", "[onednn]") {
  using V = std::vector<int64_t>;
  struct Case {
    const char* what;
    OpKind op;
    Attrs a;
    bool odd_clips = false;  // on 11x9 a ceil-mode window hangs past the end pad: oneDNN cannot divide right
  };
  const std::vector<Case> cases = {
      {"max 3x3 s2 p1", OpKind::MaxPool, attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}})},
      {"max 2x2 s2 ceil", OpKind::MaxPool, attrs({{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t{1}}})},
      {"max 3x3 s2 ceil pads", OpKind::MaxPool,
       attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 0, 1, 0}}, {"ceil_mode", int64_t{1}}})},
      {"max dilated", OpKind::MaxPool, attrs({{"kernel_shape", V{2, 3}}, {"dilations", V{2, 2}}, {"pads", V{1, 1, 1, 1}}})},
      {"max SAME_UPPER", OpKind::MaxPool,
       attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}})},
      {"avg exclude pad", OpKind::AveragePool, attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}})},
      {"avg include pad", OpKind::AveragePool,
       attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}})},
      {"avg exclude ceil", OpKind::AveragePool,
       attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{0, 1, 0, 1}}, {"ceil_mode", int64_t{1}}})},
      {"avg include ceil without clipping", OpKind::AveragePool,
       attrs({{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t{1}}, {"count_include_pad", int64_t{1}}}),
       true},
      {"max dilated ceil", OpKind::MaxPool,
       attrs({{"kernel_shape", V{3, 2}}, {"strides", V{2, 3}}, {"dilations", V{2, 3}}, {"ceil_mode", int64_t{1}}})},
      {"global avg", OpKind::GlobalAveragePool, {}},
      {"global max", OpKind::GlobalMaxPool, {}},
  };
  for (const Case& c : cases) {
    for (bool blocked : {false, true}) {
      for (const Shape& shape : {Shape{2, 13, 11, 9}, Shape{1, 7, 10, 10}}) {
        INFO(c.what << (blocked ? " blocked " : " plain ") << shape_to_string(shape));
        Builder b;
        int x = b.input(shape, -2.0f, 1.0f);  // mostly negative: padding must never win a max
        if (blocked) x = blocked_conv(b, x, shape[1]);
        const int y = b.op(c.op, c.a, {x});
        b.output(y);
        auto e = check(b);
        const bool clips = c.odd_clips && shape[2] % 2 == 1;
        // A 2-D max pool over a oneDNN layout runs on kiln's pool over codes (cpu_max_pool_codes_test).
        const char* want = clips ? "reference" : blocked && c.op == OpKind::MaxPool ? "cpu.max_pool_codes" : "onednn.pool";
        REQUIRE(kernel_of(*e, b.plan.steps.back().name) == want);
      }
    }
  }
}

TEST_CASE("onednn pooling: 1-D and 3-D", "[onednn]") {
  using V = std::vector<int64_t>;
  Builder b;
  const int x1 = b.input({2, 7, 15});
  b.output(b.op(OpKind::MaxPool, attrs({{"kernel_shape", V{3}}, {"strides", V{2}}, {"ceil_mode", int64_t{1}}}), {x1}));
  const int x3 = b.input({1, 5, 6, 7, 8});
  b.output(b.op(OpKind::AveragePool, attrs({{"kernel_shape", V{2, 2, 2}}, {"strides", V{2, 2, 2}}, {"pads", V{0, 1, 0, 0, 1, 0}}}), {x3}));
  auto e = check(b);
  REQUIRE(count_kernel(*e, "onednn.pool") == 2);
}

TEST_CASE("onednn eltwise: every op, plain and blocked", "[onednn]") {
  struct Case {
    OpKind op;
    Attrs a;
    bool positive;  // needs a positive input
  };
  const std::vector<Case> cases = {
      {OpKind::Relu, {}, false},
      {OpKind::LeakyRelu, attrs({{"alpha", 0.2f}}), false},
      {OpKind::Elu, attrs({{"alpha", 0.5f}}), false},
      {OpKind::Selu, {}, false},
      {OpKind::Sigmoid, {}, false},
      {OpKind::HardSigmoid, attrs({{"alpha", 0.3f}, {"beta", 0.4f}}), false},
      {OpKind::HardSwish, {}, false},
      {OpKind::Tanh, {}, false},
      {OpKind::Softplus, {}, false},
      {OpKind::Exp, {}, false},
      {OpKind::Log, {}, true},
      {OpKind::Sqrt, {}, true},
      {OpKind::Abs, {}, false},
      {OpKind::Neg, {}, false},
  };
  for (const Case& c : cases) {
    for (bool blocked : {false, true}) {
      INFO(op_name(c.op) << (blocked ? " blocked" : " plain"));
      Builder b;
      int x = b.input({2, 13, 5, 7}, -4.0f, 4.0f);
      if (blocked) x = blocked_conv(b, x, 13);
      // |x|: zero in a blocked layout's padded channels, where Log gives -inf unless re-zeroed.
      if (c.positive) x = b.op(OpKind::Abs, {}, {x});
      const int y = b.op(c.op, c.a, {x});
      // A conv after the op reads the padded channels of a blocked layout too.
      const int z = b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}), {y, b.weight({7, 13, 1, 1})});
      b.output(y);
      b.output(z);
      auto e = check(b);
      REQUIRE(kernel_of(*e, b.plan.steps[b.plan.steps.size() - 2].name) == "onednn.eltwise");
    }
  }
  SECTION("Clip with constant bounds, one bound, none") {
    Builder b;
    const int x = blocked_conv(b, b.input({2, 13, 5, 7}), 13);
    b.output(b.op(OpKind::Clip, {}, {x, b.constant(Tensor::scalar(-0.25f)), b.constant(Tensor::scalar(0.5f))}));
    b.output(b.op(OpKind::Clip, {}, {x, -1, b.constant(Tensor::scalar(0.1f))}));
    b.output(b.op(OpKind::Clip, {}, {x}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "onednn.eltwise") == 3);
  }
}

TEST_CASE("onednn binary: broadcasting, swaps, mixed layouts", "[onednn]") {
  const std::vector<OpKind> ops = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min};
  for (OpKind op : ops) {
    INFO(op_name(op));
    Builder b;
    const int x = b.input({2, 13, 6, 5});
    const int x2 = b.input({2, 13, 6, 5}, 0.5f, 1.5f);
    const int blk = blocked_conv(b, x, 13);
    const int blk2 = b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}), {x2, b.weight({13, 13, 1, 1})});
    const int per_channel = b.constant(rand_tensor({1, 13, 1, 1}, 7, 0.5f, 1.5f));
    const int row = b.input({5}, 0.5f, 1.5f);
    b.output(b.op(op, {}, {x, x2}));            // plain, plain
    b.output(b.op(op, {}, {blk, per_channel}));  // blocked, per-channel broadcast
    b.output(b.op(op, {}, {x, row}));            // plain, trailing broadcast
    const int both = b.op(op, {}, {blk, blk2});
    b.output(both);                              // blocked, blocked
    // 0/0 in the padded channels must not reach a consumer that reads them.
    b.output(b.op(OpKind::Conv, conv_attrs({0, 0, 0, 0}), {both, b.weight({7, 13, 1, 1})}));
    b.output(b.op(op, {}, {blk, x2}));           // blocked, plain full shape (reordered)
    b.output(b.op(op, {}, {x2, blk}));           // plain, blocked full shape
    b.output(b.op(op, {}, {x, b.constant(Tensor::scalar(0.75f))}));  // scalar
    auto e = check(b);
    REQUIRE(count_kernel(*e, "onednn.binary") == 7);
  }
  SECTION("first input broadcasts: swapped when commutative, else the reference") {
    Builder b;
    const int x = b.input({2, 13, 6, 5});
    const int pc = b.input({13, 1, 1});
    b.output(b.op(OpKind::Add, {}, {pc, x}));
    b.output(b.op(OpKind::Sub, {}, {pc, x}));
    auto e = check(b);
    REQUIRE(kernel_of(*e, b.plan.steps[0].name) == "onednn.binary");
    REQUIRE(kernel_of(*e, b.plan.steps[1].name) == "reference");
  }
}

TEST_CASE("onednn softmax and logsoftmax", "[onednn]") {
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax}) {
    INFO(op_name(op));
    Builder b;
    const int x2 = b.input({6, 1000}, -5.0f, 5.0f);
    b.output(b.op(op, {}, {x2}));
    const int x4 = b.input({2, 13, 5, 7}, -3.0f, 3.0f);
    b.output(b.op(op, attrs({{"axis", int64_t{1}}}), {blocked_conv(b, x4, 13)}));
    b.output(b.op(op, attrs({{"axis", int64_t{2}}}), {x4}));
    b.output(b.op(op, attrs({{"axis", int64_t{1}}, {"legacy_2d", int64_t{1}}}), {x4}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "onednn.softmax") == 4);
  }
}

TEST_CASE("onednn batchnorm, concat, lrn", "[onednn]") {
  SECTION("BatchNormalization, plain and blocked") {
    Builder b;
    const int x = b.input({2, 13, 6, 5});
    auto params = [&]() {
      return std::vector<int>{b.weight({13}), b.weight({13}), b.weight({13}),
                              b.constant(rand_tensor({13}, 99, 0.5f, 2.0f))};
    };
    auto p = params();
    b.output(b.op(OpKind::BatchNormalization, attrs({{"epsilon", 1e-3f}}), {x, p[0], p[1], p[2], p[3]}));
    p = params();
    b.output(b.op(OpKind::BatchNormalization, {}, {blocked_conv(b, x, 13), p[0], p[1], p[2], p[3]}));
    const int x2 = b.input({4, 7});
    p = {b.weight({7}), b.weight({7}), b.weight({7}), b.constant(rand_tensor({7}, 98, 0.5f, 2.0f))};
    b.output(b.op(OpKind::BatchNormalization, {}, {x2, p[0], p[1], p[2], p[3]}));
    // Fused activations: relu is fuse_norm_relu, others an eltwise step after it.
    p = params();
    b.output(b.op(OpKind::BatchNormalization, attrs({{"activation", std::string("relu")}}),
                  {blocked_conv(b, x, 13), p[0], p[1], p[2], p[3]}));
    p = params();
    b.output(b.op(OpKind::BatchNormalization, attrs({{"activation", std::string("sigmoid")}}), {x, p[0], p[1], p[2], p[3]}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "onednn.batchnorm") == 5);
  }
  SECTION("LayerNormalization over the last axis, with and without B; other axes go to the reference") {
    Builder b;
    const int x = b.input({2, 5, 7, 37});
    b.output(b.op(OpKind::LayerNormalization, attrs({{"epsilon", 1e-6f}}), {x, b.weight({37}), b.weight({37})}));
    b.output(b.op(OpKind::LayerNormalization, attrs({{"axis", int64_t{3}}}), {x, b.weight({37})}));
    const int x2 = b.input({9, 300});
    b.output(b.op(OpKind::LayerNormalization, {}, {x2, b.weight({300}), b.weight({300})}));
    b.output(b.op(OpKind::LayerNormalization, attrs({{"axis", int64_t{2}}}), {x, b.weight({7, 37})}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "onednn.layernorm") == 3);
    REQUIRE(kernel_of(*e, b.plan.steps.back().name) == "reference");
  }
  SECTION("Concat: aligned and unaligned channels, blocked and plain, other axes") {
    Builder b;
    const int x = b.input({2, 3, 6, 5});
    const int a16 = blocked_conv(b, x, 16), b16 = blocked_conv(b, x, 32);
    const int a13 = blocked_conv(b, x, 13), b7 = blocked_conv(b, x, 7);
    const int p = b.input({2, 5, 6, 5});
    b.output(b.op(OpKind::Concat, attrs({{"axis", int64_t{1}}}), {a16, b16}));
    b.output(b.op(OpKind::Concat, attrs({{"axis", int64_t{1}}}), {a13, b7, p}));
    b.output(b.op(OpKind::Concat, attrs({{"axis", int64_t{0}}}), {a13, a13}));
    b.output(b.op(OpKind::Concat, attrs({{"axis", int64_t{-1}}}), {x, x}));
    auto e = check(b);
    // Channel blocks of 8 (AVX2) make the aligned pair per-image copies (cpu.concat_channels).
    REQUIRE(count_kernel(*e, "onednn.concat") + count_kernel(*e, "cpu.concat_channels") == 4);
    REQUIRE(count_kernel(*e, "onednn.concat") >= 3);
  }
  SECTION("LRN odd size; even size goes to the reference") {
    Builder b;
    const int x = b.input({2, 13, 6, 5});
    const int blk = blocked_conv(b, x, 13);
    b.output(b.op(OpKind::LRN, attrs({{"size", int64_t{5}}, {"alpha", 1e-3f}, {"beta", 0.75f}, {"bias", 2.0f}}), {blk}));
    b.output(b.op(OpKind::LRN, attrs({{"size", int64_t{3}}}), {x}));
    b.output(b.op(OpKind::LRN, attrs({{"size", int64_t{4}}}), {x}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "onednn.lrn") == 2);
    REQUIRE(kernel_of(*e, b.plan.steps.back().name) == "reference");
  }
}

TEST_CASE("onednn gemm and matmul", "[onednn]") {
  SECTION("Gemm: transposes, alpha/beta, C shapes, constant or not") {
    struct Case {
      bool ta, tb;
      float alpha, beta;
      Shape c;  // empty: no C
      bool const_b, const_c;
    };
    const std::vector<Case> cases = {
        {false, true, 1.0f, 1.0f, {13}, true, true},       // FC layer
        {false, false, 1.0f, 1.0f, {5, 13}, true, true},
        {true, false, 0.5f, 2.0f, {1, 13}, true, true},
        {true, true, 1.5f, 1.0f, {5, 1}, false, false},    // alpha via post-op? rejected: non-constant B with C
        {false, true, 2.0f, 0.0f, {13}, false, true},     // beta 0: C unused
        {false, false, 1.0f, 1.0f, {}, false, false},
        {false, true, 1.0f, 1.0f, {13}, true, false},      // C read at run time
        {false, false, 1.0f, 3.0f, {}, true, true},
    };
    for (const Case& c : cases) {
      INFO("transA " << c.ta << " transB " << c.tb << " alpha " << c.alpha << " beta " << c.beta << " C "
                     << shape_to_string(c.c) << " const B " << c.const_b);
      Builder b;
      const int64_t m = 5, k = 17, n = 13;
      const int a = b.input(c.ta ? Shape{k, m} : Shape{m, k});
      const Shape bs = c.tb ? Shape{n, k} : Shape{k, n};
      const int w = c.const_b ? b.weight(bs) : b.input(bs);
      std::vector<int> in = {a, w};
      if (!c.c.empty()) in.push_back(c.const_c ? b.weight(c.c) : b.input(c.c));
      b.output(b.op(OpKind::Gemm, attrs({{"transA", int64_t{c.ta}}, {"transB", int64_t{c.tb}}, {"alpha", c.alpha}, {"beta", c.beta}}), in));
      auto e = check(b);
      const bool rejected = !c.const_b && c.alpha != 1.0f && !c.c.empty() && c.beta != 0.0f;
      REQUIRE(kernel_of(*e, b.plan.steps[0].name) == (rejected ? "reference" : "onednn.gemm"));
    }
  }
  SECTION("Gemm with residual and activation") {
    Builder b;
    const int a = b.input({5, 17}), w = b.weight({13, 17}), c = b.weight({13}), r = b.input({5, 13});
    Attrs at = attrs({{"transB", int64_t{1}}});
    PostOps post{Activation::relu, 0, 0};
    post_ops_to_attrs(post, at);
    b.output(b.op_shaped(OpKind::Gemm, at, {a, w, c, r}, {5, 13}));
    Builder u = b;
    u.plan.steps.clear();
    u.plan.outputs.clear();
    const int g = u.op(OpKind::Gemm, attrs({{"transB", int64_t{1}}}), {a, w, c});
    u.output(u.op(OpKind::Relu, {}, {u.op(OpKind::Add, {}, {g, r})}));
    auto ref = execute_reference(u.plan, u.inputs);
    REQUIRE(ref);
    auto e = check_plan(b.plan, b.inputs, ref->outputs);
    REQUIRE(kernel_of(*e, b.plan.steps[0].name) == "onednn.gemm");
  }
  SECTION("MatMul: 2-D, batched, broadcast, 1-D operands, constant B, residual") {
    Builder b;
    b.output(b.op(OpKind::MatMul, {}, {b.input({5, 17}), b.weight({17, 13})}));
    b.output(b.op(OpKind::MatMul, {}, {b.input({2, 3, 5, 7}), b.input({2, 3, 7, 4})}));
    b.output(b.op(OpKind::MatMul, {}, {b.input({2, 1, 5, 7}), b.input({3, 7, 4})}));
    b.output(b.op(OpKind::MatMul, {}, {b.input({2, 3, 5, 7}), b.weight({7, 4})}));
    b.output(b.op(OpKind::MatMul, {}, {b.input({7}), b.input({2, 7, 4})}));
    b.output(b.op(OpKind::MatMul, {}, {b.input({2, 5, 7}), b.input({7})}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "onednn.matmul") == 6);

    // act(x w + bias + residual), the bias (input 2) constant or not, against the unfused ops
    for (const bool const_bias : {true, false}) {
      INFO("constant bias " << const_bias);
      Builder f;
      const int x = f.input({2, 5, 7}), w = f.weight({7, 4}), r = f.input({2, 5, 4});
      const int bias = const_bias ? f.weight({4}) : f.input({4});
      Attrs at;
      post_ops_to_attrs({Activation::gelu_erf, 0, 0}, at);
      f.output(f.op_shaped(OpKind::MatMul, at, {x, w, bias, r}, {2, 5, 4}));
      f.output(f.op_shaped(OpKind::MatMul, {}, {x, w, bias}, {2, 5, 4}));
      Builder u = f;
      u.plan.steps.clear();
      u.plan.outputs.clear();
      const int biased = u.op(OpKind::Add, {}, {u.op(OpKind::MatMul, {}, {x, w}), bias});
      const int sum = u.op(OpKind::Add, {}, {biased, r});
      // GELU written out, as the reference computes the fused epilogue
      auto scalar = [&](float v) { return u.constant(Tensor::scalar<float>(v)); };
      const int scaled = u.op(OpKind::Div, {}, {sum, scalar(std::sqrt(2.0f))});
      const int half = u.op(OpKind::Mul, {}, {sum, scalar(0.5f)});
      u.output(u.op(OpKind::Mul, {}, {half, u.op(OpKind::Add, {}, {u.op(OpKind::Erf, {}, {scaled}), scalar(1.0f)})}));
      u.output(biased);
      auto ref = execute_reference(u.plan, u.inputs);
      REQUIRE(ref);
      auto ef = check_plan(f.plan, f.inputs, ref->outputs);
      REQUIRE(count_kernel(*ef, "onednn.matmul") == 2);
    }
  }
}

namespace {

// An opaque layout of some other backend.
class ForeignLayout final : public OpaqueLayout {
 public:
  std::string_view backend() const override { return "other"; }
  size_t bytes() const override { return 0; }
  bool equals(const OpaqueLayout& o) const override { return o.backend() == backend(); }
  std::string describe() const override { return "other"; }
  Result<std::unique_ptr<Kernel>> make_to_plain(DType, const Shape&) const override {
    return make_error(ErrorCode::unsupported, "no");
  }
};

ValueDesc vd(Shape shape, DType dt = DType::f32, const Tensor* constant = nullptr) {
  ValueDesc v;
  v.dtype = dt;
  v.shape = std::move(shape);
  v.constant = constant;
  return v;
}

KernelBuild build(OpKind op, const Attrs& a, std::vector<ValueDesc> in, std::vector<ValueDesc> out) {
  // Built in one go: assigning node_name trips GCC 12's -Wrestrict false positive.
  return KernelBuild{.op = op, .attrs = &a, .node_name = "n", .inputs = std::move(in), .outputs = std::move(out), .threads = 2};
}

// The reason `impl` gives for `b` (REQUIREs that there is one) contains `part`.
void require_rejects(const KernelImpl& k, const KernelBuild& b, const std::string& part) {
  const auto why = k.supports(b);
  INFO(k.name << " on " << op_name(b.op) << ", expecting '" << part << "'");
  REQUIRE(why.has_value());
  INFO("reason: " << *why);
  REQUIRE(why->find(part) != std::string::npos);
}

}  // namespace

TEST_CASE("onednn supports() rejections name the reason", "[onednn]") {
  using V = std::vector<int64_t>;
  const Tensor w = rand_tensor({7, 13, 3, 3}, 1);
  const Tensor bias = rand_tensor({7}, 2);
  const Attrs pads = attrs({{"pads", V{1, 1, 1, 1}}});
  const KernelImpl& conv = impl("onednn.conv");

  REQUIRE_FALSE(conv.supports(build(OpKind::Conv, pads, {vd({2, 13, 9, 9}), vd({7, 13, 3, 3}, DType::f32, &w)},
                                    {vd({2, 7, 9, 9})})));
  require_rejects(conv, build(OpKind::Relu, {}, {vd({2})}, {vd({2})}), "Conv only");
  require_rejects(conv, build(OpKind::Conv, pads, {vd({2, 13, 9, 9}, DType::i32), vd({7, 13, 3, 3}, DType::f32, &w)},
                              {vd({2, 7, 9, 9})}), "float32");
  require_rejects(conv, build(OpKind::Conv, pads, {vd({2, 13, 9, 9}), vd({7, 13, 3, 3})}, {vd({2, 7, 9, 9})}),
                  "W must be a constant");
  require_rejects(conv, build(OpKind::Conv, pads, {vd({2, 13, 9, 9}), vd({7, 13, 3, 3}, DType::f32, &w), vd({7})},
                              {vd({2, 7, 9, 9})}), "bias must be a constant");
  require_rejects(conv, build(OpKind::Conv, pads,
                              {vd({2, 13, 9, 9}), vd({7, 13, 3, 3}, DType::f32, &w), vd({7}, DType::f32, &bias),
                               vd({2, 7, 9, 1})},
                              {vd({2, 7, 9, 9})}), "residual shape");
  {
    ValueDesc foreign = vd({2, 13, 9, 9});
    foreign.layout.opaque = std::make_shared<ForeignLayout>();
    require_rejects(conv, build(OpKind::Conv, pads, {foreign, vd({7, 13, 3, 3}, DType::f32, &w)}, {vd({2, 7, 9, 9})}),
                    "backend 'other'");
  }
  {
    Attrs clip = pads;
    post_ops_to_attrs({Activation::clip, 1.0f, -1.0f}, clip);
    require_rejects(conv, build(OpKind::Conv, clip, {vd({2, 13, 9, 9}), vd({7, 13, 3, 3}, DType::f32, &w)},
                                {vd({2, 7, 9, 9})}), "min > max");
  }

  const KernelImpl& pool = impl("onednn.pool");
  require_rejects(pool, build(OpKind::AveragePool,
                              attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t{1}},
                                     {"count_include_pad", int64_t{1}}}),
                              {vd({1, 7, 10, 10})}, {vd({1, 7, 5, 5})}), "count_include_pad=1");
  {
    ValueDesc indices = vd({1, 7, 5, 5}, DType::i64);
    require_rejects(pool, build(OpKind::MaxPool, attrs({{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}}),
                                {vd({1, 7, 10, 10})}, {vd({1, 7, 5, 5}), indices}), "Indices");
  }
  require_rejects(pool, build(OpKind::AveragePool, attrs({{"kernel_shape", V{2, 2}}, {"dilations", V{2, 2}}}),
                              {vd({1, 7, 10, 10})}, {vd({1, 7, 8, 8})}), "dilated AveragePool");
  require_rejects(pool, build(OpKind::MaxPool, attrs({{"kernel_shape", V{2, 2}}, {"pads", V{2, 2, 2, 2}}}),
                              {vd({1, 7, 10, 10})}, {vd({1, 7, 13, 13})}), "pads as large as the window");

  require_rejects(impl("onednn.lrn"), build(OpKind::LRN, attrs({{"size", int64_t{4}}}), {vd({1, 7, 5, 5})}, {vd({1, 7, 5, 5})}),
                  "even size");
  require_rejects(impl("onednn.binary"), build(OpKind::Sub, {}, {vd({7, 1, 1}), vd({2, 7, 5, 5})}, {vd({2, 7, 5, 5})}),
                  "broadcasts the second source only");
  require_rejects(impl("onednn.binary"), build(OpKind::Add, attrs({{"legacy_axis", int64_t{1}}}), {vd({2, 7}), vd({7})},
                                               {vd({2, 7})}), "legacy");
  require_rejects(impl("onednn.binary"), build(OpKind::Add, {}, {vd({2, 7}, DType::i64), vd({2, 7}, DType::i64)},
                                               {vd({2, 7}, DType::i64)}), "float32");
  {
    const Tensor lo = Tensor::scalar(1.0f), hi = Tensor::scalar(-1.0f);
    require_rejects(impl("onednn.eltwise"),
                    build(OpKind::Clip, {}, {vd({2, 7}), vd({}, DType::f32, &lo), vd({}, DType::f32, &hi)}, {vd({2, 7})}),
                    "min > max");
    require_rejects(impl("onednn.eltwise"), build(OpKind::Clip, {}, {vd({2, 7}), vd({})}, {vd({2, 7})}),
                    "min must be a constant");
  }
  require_rejects(impl("onednn.eltwise"), build(OpKind::Erf, {}, {vd({2, 7})}, {vd({2, 7})}), "unary");
  require_rejects(impl("onednn.gemm"),
                  build(OpKind::Gemm, attrs({{"alpha", 2.0f}}), {vd({5, 7}), vd({7, 3}), vd({3})}, {vd({5, 3})}),
                  "alpha != 1 with a non-constant B");
  require_rejects(impl("onednn.matmul"), build(OpKind::MatMul, {}, {vd({5, 7}, DType::i32), vd({7, 3}, DType::i32)},
                                               {vd({5, 3}, DType::i32)}), "float32");
  require_rejects(impl("onednn.softmax"), build(OpKind::Softmax, attrs({{"axis", int64_t{5}}}), {vd({2, 7})}, {vd({2, 7})}),
                  "axis");
  require_rejects(impl("onednn.batchnorm"),
                  build(OpKind::BatchNormalization, attrs({{"training_mode", int64_t{1}}}),
                        {vd({2, 7, 3, 3}), vd({7}), vd({7}), vd({7}), vd({7})}, {vd({2, 7, 3, 3})}),
                  "training_mode");
}

TEST_CASE("onednn transpose: every permutation kind, ranks 2 to 5, odd sizes", "[onednn]") {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{7, 13}, {1, 0}},
      {{2, 3, 5, 7}, {0, 2, 3, 1}},        // NCHW -> NHWC
      {{2, 5, 7, 3}, {0, 3, 1, 2}},        // NHWC -> NCHW
      {{2, 2, 29, 7, 7}, {0, 2, 1, 3, 4}},  // ShuffleNet's channel shuffle
      {{3, 4, 5}, {}},                     // default: reversed
      {{1, 6, 1, 5}, {3, 2, 1, 0}},
  };
  for (const auto& [shape, perm] : cases) {
    INFO("shape " << shape_to_string(shape) << " perm " << perm.size());
    Builder b;
    const int x = b.input(shape);
    Attrs a;
    if (!perm.empty()) a.set("perm", perm);
    b.output(b.op(OpKind::Transpose, a, {x}));
    auto e = check(b);
    // NHWC -> NCHW of a plain value is a view in NHWC layout (cpu.transpose_view), converted to
    // the plain graph output by oneDNN's reorder; every other permutation is the transpose itself.
    const bool view = perm == std::vector<int64_t>{0, 3, 1, 2};
    REQUIRE(count_kernel(*e, "onednn.transpose") == (view ? 0 : 1));
    REQUIRE(count_kernel(*e, "cpu.transpose_view") == (view ? 1 : 0));
  }
  // A producer's oneDNN layout: read as it is when unblocked (NHWC), converted to plain first when
  // blocked; the result matches either way. Which one a conv picks depends on the CPU and channels.
  for (const int64_t channels : {13, 32}) {
    Builder b;
    const int x = b.input({2, channels, 6, 6});
    Attrs a;
    a.set("perm", std::vector<int64_t>{0, 2, 3, 1});
    b.output(b.op(OpKind::Transpose, a, {blocked_conv(b, x, channels)}));
    auto e = check(b);
    const std::string conv_layout = e->steps().front().output_layout;
    INFO("conv layout " << conv_layout);
    const bool blocked = conv_layout.find("16b") != std::string::npos || conv_layout.find("8b") != std::string::npos;
    REQUIRE(count_kernel(*e, "convert.") == (blocked ? 1 : 0));
  }
}

namespace {
Tensor ints(std::vector<int64_t> v) {
  return Tensor::from_values<int64_t>({static_cast<int64_t>(v.size())}, v);
}
}  // namespace

TEST_CASE("cpu view: Reshape/Flatten/Squeeze/Unsqueeze run in place where the input dies, else copy", "[onednn]") {
  Builder b;
  const int x = b.input({2, 13, 4, 4});
  const int c = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {x, b.weight({8, 13, 3, 3}, 0.5f)});
  const int flat = b.op(OpKind::Flatten, attrs({{"axis", int64_t{1}}}), {c});  // c dies here: in place
  const int shape = b.constant(ints({2, 8, 16}));
  const int r = b.op(OpKind::Reshape, {}, {flat, shape});
  const int u = b.op(OpKind::Unsqueeze, {}, {r, b.constant(ints({1}))});
  b.output(b.op(OpKind::Squeeze, {}, {u, b.constant(ints({1}))}));
  b.output(b.op(OpKind::Reshape, {}, {x, b.constant(ints({2, -1}))}));  // graph input: copied
  b.output(r);  // r is also a graph output, so the Unsqueeze reading it must copy
  auto e = check(b);
  REQUIRE(count_kernel(*e, "cpu.view") == 5);
  REQUIRE((*e).memory().in_place_steps >= 2);
}

TEST_CASE("kernel selection: KILN_SKIP_KERNELS passes over the named implementations", "[onednn][registry]") {
  Builder b;
  const int x = b.input({1, 5, 9, 9});
  const int y = b.op(OpKind::Conv, conv_attrs({1, 1, 1, 1}), {x, b.weight({8, 5, 3, 3}, 0.5f), b.weight({8})});
  b.output(y);
  struct EnvGuard {
    explicit EnvGuard(const char* v) { setenv("KILN_SKIP_KERNELS", v, 1); }
    ~EnvGuard() { unsetenv("KILN_SKIP_KERNELS"); }
  };
  const std::string node = b.plan.steps[0].name;
  CHECK(kernel_of(*check_plan(b.plan, b.inputs), node) == "onednn.conv");
  {
    const EnvGuard skip("cpu.none,onednn.conv");
    auto engine = check_plan(b.plan, b.inputs);  // still equal to the reference: it is the reference kernel
    CHECK(kernel_of(*engine, node) == "reference");
  }
  {
    const EnvGuard skip("onednn.con,reference");  // a prefix is not a name; the reference is never skipped
    CHECK(kernel_of(*check_plan(b.plan, b.inputs), node) == "onednn.conv");
  }
}

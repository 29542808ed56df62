// onednn.slice and onednn.reduce against the reference executor: small Plans through the compiled
// Engine (2 threads, run twice, max|engine - reference| <= 1e-4 * max|reference|) on plain
// inputs and on the blocked layouts this machine's convolutions pick, with the kernel each step
// must get named, so a case that silently falls back to the reference fails. Also: the forms
// these kernels refuse say why and still compute right on the reference.
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/registry.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

using Ints = std::vector<int64_t>;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Tensor ints(const Ints& v) { return Tensor::from_values<int64_t>({static_cast<int64_t>(v.size())}, v); }

const std::string& kernel_of(const Engine& e, const std::string& node) {
  for (const EngineStep& st : e.steps())
    if (st.node == node) return st.kernel;
  static const std::string none = "?";
  return none;
}

// A conv whose output is in the layout oneDNN picks here (blocked or NHWC), `c` channels.
int blocked_conv(Builder& b, int x, int64_t c) {
  const int64_t cin = b.concrete(x)[1];
  return b.op(OpKind::Conv, attrs({{"pads", Ints{1, 1, 1, 1}}}), {x, b.weight({c, cin, 3, 3}, 0.5f), b.weight({c})});
}

// Slice of `x` with constant parameters; empty `axes`/`steps` leave those inputs out.
int slice(Builder& b, int x, const Ints& starts, const Ints& ends, const Ints& axes = {}, const Ints& steps = {}) {
  std::vector<int> in = {x, b.constant(ints(starts)), b.constant(ints(ends))};
  if (!axes.empty() || !steps.empty()) in.push_back(axes.empty() ? -1 : b.constant(ints(axes)));
  if (!steps.empty()) in.push_back(b.constant(ints(steps)));
  return b.op(OpKind::Slice, {}, in);
}

// A reduction of `x`; `axes` nullopt leaves the axes input out.
int reduce(Builder& b, OpKind op, int x, std::optional<Ints> axes, int64_t keepdims) {
  std::vector<int> in = {x};
  if (axes) in.push_back(b.constant(ints(*axes)));
  return b.op(op, attrs({{"keepdims", keepdims}}), in);
}

const Attrs& none_attrs() {
  static const Attrs a;
  return a;
}

std::string last_step(const Builder& b) { return b.plan.steps.back().name; }

ValueDesc vd(Shape shape, DType dt = DType::f32, const Tensor* constant = nullptr) {
  ValueDesc v;
  v.dtype = dt;
  v.shape = std::move(shape);
  v.constant = constant;
  return v;
}

// The reason `impl` refuses `op` on these inputs/outputs contains `part`.
void require_rejects(const KernelImpl& impl, OpKind op, const Attrs& a, std::vector<ValueDesc> in,
                     std::vector<ValueDesc> out, const std::string& part) {
  const KernelBuild b{.op = op, .attrs = &a, .node_name = "n", .inputs = std::move(in), .outputs = std::move(out), .threads = 2};
  const auto why = impl.supports(b);
  INFO(impl.name << " on " << op_name(op) << ", expecting '" << part << "'");
  REQUIRE(why.has_value());
  INFO("reason: " << *why);
  REQUIRE(why->find(part) != std::string::npos);
}

}  // namespace

TEST_CASE("onednn slice: axes, negative and out-of-range bounds, omitted axes, plain input", "[onednn]") {
  struct Case {
    const char* what;
    Ints starts, ends, axes, steps;
  };
  const std::vector<Case> cases = {
      {"channels 3:10", {3}, {10}, {1}, {}},
      {"negative start and end on W", {-5}, {-1}, {3}, {}},
      {"end past the dim, negative axis", {2}, {kMax}, {-2}, {}},
      {"start before the dim", {-100}, {4}, {2}, {}},
      {"axes omitted (leading axes)", {1, 2}, {2, 11}, {}, {}},
      {"two axes, steps all 1", {0, 6}, {kMax, -2}, {3, 1}, {1, 1}},
      {"batch and height", {1, 0}, {2, 3}, {0, 2}, {}},
      {"one element with step 3", {4}, {5}, {2}, {3}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Builder b;
    const int x = b.input({2, 13, 7, 9});
    b.output(slice(b, x, c.starts, c.ends, c.axes, c.steps));
    auto e = check(b);
    REQUIRE(kernel_of(*e, last_step(b)) == "onednn.slice");
  }
  SECTION("ShuffleNetV2's channel halves, each read by a conv") {
    Builder b;
    const int x = b.input({1, 116, 14, 14});
    const int lo = slice(b, x, {0}, {58}, {1});
    const int hi = slice(b, x, {58}, {116}, {1});
    b.output(lo);
    b.output(blocked_conv(b, hi, 58));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "onednn.slice") == 2);
  }
}

TEST_CASE("onednn slice: blocked and NHWC producers, aligned and unaligned channel cuts", "[onednn]") {
  struct Case {
    const char* what;
    Ints starts, ends, axes;
  };
  const std::vector<Case> cases = {
      {"H and W", {1, 2}, {6, -1}, {2, 3}},
      {"channels 16:32", {16}, {32}, {1}},
      {"channels 8:29 (off a 16-block)", {8}, {29}, {1}},
      {"channels 3:10 (off every block)", {3}, {10}, {1}},
      {"channels 0:13 and H", {0, 2}, {13, 5}, {1, 2}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Builder b;
    const int x = b.input({2, 3, 7, 9});
    const int blk = blocked_conv(b, x, 37);
    const int s = slice(b, blk, c.starts, c.ends, c.axes);
    b.output(s);
    // A conv after the slice reads a blocked output's padded channels too.
    const int64_t channels = b.concrete(s)[1];
    b.output(b.op(OpKind::Conv, {}, {s, b.weight({5, channels, 1, 1})}));
    auto e = check(b);
    INFO(describe_steps(*e));
    // On a layout it cannot cut, the engine gives the kernel a plain copy: still onednn.slice.
    REQUIRE(count_kernel(*e, "onednn.slice") == 1);
  }
}

TEST_CASE("onednn slice: what it refuses runs on the reference", "[onednn]") {
  Builder b;
  const int x = b.input({2, 13, 7, 9});
  b.output(slice(b, x, {1}, {12}, {1}, {2}));               // step 2
  b.output(slice(b, x, {-1}, {kMin}, {3}, {-1}));           // reversed
  b.output(slice(b, x, {5}, {5}, {2}));                     // empty
  auto e = check(b);
  REQUIRE(count_kernel(*e, "onednn.slice") == 0);
  REQUIRE(count_kernel(*e, "reference") == 3);

  const KernelImpl& k = kOneDnnSlice;
  const Tensor s1 = ints({1}), e12 = ints({12}), a1 = ints({1}), step2 = ints({2});
  require_rejects(k, OpKind::Slice, {}, {vd({2, 13}), vd({1}, DType::i64, &s1), vd({1}, DType::i64, &e12), vd({1}, DType::i64, &a1),
                                         vd({1}, DType::i64, &step2)},
                  {vd({2, 6})}, "steps other than 1");
  require_rejects(k, OpKind::Slice, {}, {vd({2, 13}), vd({1}, DType::i64), vd({1}, DType::i64, &e12)}, {vd({2, 11})},
                  "must be constants");
  require_rejects(k, OpKind::Slice, {}, {vd({2, 13}, DType::i64), vd({1}, DType::i64, &s1), vd({1}, DType::i64, &e12)},
                  {vd({1, 13}, DType::i64)}, "float32");
  require_rejects(k, OpKind::Transpose, {}, {vd({2, 13})}, {vd({13, 2})}, "Slice only");
  {
    // nChw16c cut at channel 3: the engine then gives the kernel a plain copy.
    ValueDesc blocked = vd({2, 32, 5, 5});
    const onednn::md desc(onednn::to_dims(blocked.shape), dnnl::memory::data_type::f32, dnnl::memory::format_tag::nChw16c);
    blocked.layout.opaque = std::make_shared<onednn::OneDnnLayout>(desc, 2);
    const Tensor s3 = ints({3}), e10 = ints({10});
    require_rejects(k, OpKind::Slice, {}, {blocked, vd({1}, DType::i64, &s3), vd({1}, DType::i64, &e10), vd({1}, DType::i64, &a1)},
                    {vd({2, 7, 5, 5})}, "off its block boundaries");
    const Tensor s16 = ints({16}), e29 = ints({29});
    const KernelBuild aligned{.op = OpKind::Slice, .attrs = &none_attrs(), .node_name = "n",
                              .inputs = {blocked, vd({1}, DType::i64, &s16), vd({1}, DType::i64, &e29), vd({1}, DType::i64, &a1)},
                              .outputs = {vd({2, 13, 5, 5})}, .threads = 2};
    REQUIRE_FALSE(k.supports(aligned));
  }
}

TEST_CASE("onednn reduce: every op over single, multiple and all axes, keepdims 0 and 1", "[onednn]") {
  struct Case {
    const char* what;
    Shape x;
    std::optional<Ints> axes;
    const char* kernel;  // what must run it
  };
  const std::vector<Case> cases = {
      {"spatial (a global pool)", {2, 13, 7, 9}, Ints{2, 3}, "pooling"},
      {"spatial, negative axes", {2, 13, 7, 9}, Ints{-1, -2}, "pooling"},
      {"1-D spatial", {2, 13, 300}, Ints{2}, "pooling"},
      {"3-D spatial", {1, 5, 4, 6, 7}, Ints{2, 3, 4}, "pooling"},
      {"last axis, long rows", {3, 5, 300}, Ints{-1}, "onednn.reduce"},
      {"two innermost axes", {4, 40, 20}, Ints{1, 2}, "onednn.reduce"},
      {"all axes (omitted)", {2, 13, 7, 9}, std::nullopt, "onednn.reduce"},
      {"all axes (listed)", {3, 17, 11}, Ints{0, 1, 2}, "onednn.reduce"},
      {"last axis, short rows", {2, 13, 7, 9}, Ints{3}, "reference"},
      {"channels (not innermost)", {2, 13, 7, 9}, Ints{1}, "reference"},
      {"batch and width", {2, 13, 7, 9}, Ints{0, 3}, "reference"},
  };
  for (OpKind op : {OpKind::ReduceMean, OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin}) {
    for (const Case& c : cases) {
      for (int64_t keepdims : {0, 1}) {
        INFO(op_name(op) << " " << c.what << " keepdims " << keepdims);
        Builder b;
        const int x = b.input(c.x, -2.0f, 2.0f);
        b.output(reduce(b, op, x, c.axes, keepdims));
        auto e = check(b);
        std::string want = c.kernel;
        // Pooling has no min: ReduceMin over the plane is a reduction of rows of H*W, taken from 128 on.
        if (want == "pooling") want = op == OpKind::ReduceMin && shape_numel(c.x) / (c.x[0] * c.x[1]) < 128 ? "reference" : "onednn.reduce";
        REQUIRE(kernel_of(*e, last_step(b)) == want);
      }
    }
  }
}

TEST_CASE("onednn reduce: blocked and NHWC producers", "[onednn]") {
  for (OpKind op : {OpKind::ReduceMean, OpKind::ReduceSum, OpKind::ReduceMax}) {
    for (int64_t keepdims : {0, 1}) {
      INFO(op_name(op) << " keepdims " << keepdims);
      Builder b;
      const int x = b.input({2, 3, 7, 9});
      const int r = reduce(b, op, blocked_conv(b, x, 37), Ints{2, 3}, keepdims);
      b.output(r);
      // A consumer of a kept [N, C, 1, 1] reads the padded channels of a blocked result.
      if (keepdims == 1) b.output(b.op(OpKind::Conv, {}, {r, b.weight({5, 37, 1, 1})}));
      auto e = check(b);
      INFO(describe_steps(*e));
      // The pooling reads the conv's layout as it is: nothing is converted before it.
      bool reduced = false;
      for (const EngineStep& st : e->steps()) {
        if (st.node == b.plan.steps[1].name) {
          REQUIRE(st.kernel == "onednn.reduce");
          reduced = true;
        }
        if (!reduced) REQUIRE(st.kernel.rfind("convert.", 0) != 0);
      }
      REQUIRE(reduced);
    }
  }
  SECTION("ReduceMin over the plane of a blocked value: the reduction on a plain copy") {
    Builder b;
    const int x = b.input({2, 3, 20, 20});
    b.output(reduce(b, OpKind::ReduceMin, blocked_conv(b, x, 21), Ints{2, 3}, 1));
    auto e = check(b);
    REQUIRE(kernel_of(*e, last_step(b)) == "onednn.reduce");
  }
}

TEST_CASE("onednn reduce: what it refuses says why", "[onednn]") {
  const KernelImpl& k = kOneDnnReduce;
  const Tensor axis1 = ints({1}), axis3 = ints({3}), none = ints({});
  const Attrs keep = attrs({{"keepdims", int64_t{1}}});
  require_rejects(k, OpKind::ReduceMean, keep, {vd({2, 13, 7, 9}), vd({1}, DType::i64)}, {vd({2, 1, 7, 9})},
                  "axes must be a constant");
  require_rejects(k, OpKind::ReduceSum, attrs({{"noop_with_empty_axes", int64_t{1}}}),
                  {vd({2, 13}), vd({0}, DType::i64, &none)}, {vd({2, 13})}, "noop_with_empty_axes");
  require_rejects(k, OpKind::ReduceMax, keep, {vd({2, 13}, DType::i32), vd({1}, DType::i64, &axis1)},
                  {vd({2, 1}, DType::i32)}, "float32");
  require_rejects(k, OpKind::ReduceMean, keep, {vd({2, 300, 7, 9}), vd({1}, DType::i64, &axis1)}, {vd({2, 1, 7, 9})},
                  "reference reduction");
  require_rejects(k, OpKind::ReduceMean, keep, {vd({2, 13, 7, 9}), vd({1}, DType::i64, &axis3)}, {vd({2, 13, 7, 1})},
                  "rows of 9 elements");
  require_rejects(k, OpKind::Slice, {}, {vd({2, 13})}, {vd({2, 13})}, "ReduceMean, ReduceSum");
}

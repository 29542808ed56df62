// NHWC through ConvNeXt's transposes: cpu.transpose_view (Transpose [0,3,1,2] of a plain value is
// [N, C, H, W] in oneDNN's acdb with the same bytes; [0,2,3,1] of an acdb value is the plain
// [N, H, W, C]) and the ElementwiseChain in NHWC order (kernels/cpu/elementwise_chain.cpp), which
// reads such views, float32 or bfloat16 NHWC, and writes NHWC. Each plan runs on the engine
// against the reference executor; what falls back (a plain NCHW operand beside NHWC ones) goes
// through plain values and still matches.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/isa.h"
#include "kernels/precision.h"
#include "kernels/verify/verify.h"
#include "tests/support/isa_cap.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

Attrs perm(std::vector<int64_t> p) {
  Attrs a;
  a.set("perm", std::move(p));
  return a;
}

// ConvNeXt's layer scale and residual: X * gamma[C,1,1] + R.
Attrs scale_and_residual() {
  Attrs a;
  a.set("ops", std::vector<std::string>{"mul", "add"});
  a.set("args", std::vector<int64_t>{0, 1, 3, 2});
  return a;
}

std::string layout_of(const Engine& e, const std::string& kernel_prefix) {
  for (const EngineStep& st : e.steps())
    if (st.kernel.rfind(kernel_prefix, 0) == 0) return st.output_layout;
  return "(no such step)";
}

}  // namespace

TEST_CASE("Transpose NHWC -> NCHW and back are views: same bytes, the layout carries the order", "[cpu][transpose_view]") {
  for (const bool input_dies : {true, false}) {
    INFO((input_dies ? "the input dies at the transpose" : "the input is read again later"));
    Builder b;
    const int x = b.input({2, 5, 6, 7});  // [N, H, W, C]
    const int a = b.op(OpKind::Abs, {}, {x});
    const int nchw = b.op(OpKind::Transpose, perm({0, 3, 1, 2}), {a});
    const int back = b.op(OpKind::Transpose, perm({0, 2, 3, 1}), {nchw});
    b.output(b.op(OpKind::Relu, {}, {back}));
    if (!input_dies) b.output(a);
    auto e = check(b);
    REQUIRE(count_kernel(*e, "cpu.transpose_view") == 2);
    REQUIRE(e->steps()[1].output_layout == "onednn:acdb");
    REQUIRE(e->steps()[2].output_layout == "plain");
    REQUIRE(count_kernel(*e, "convert.") == 0);
    // in place: the views take their inputs' buffers where those die (both, or the second only)
    REQUIRE(e->memory().in_place_steps >= (input_dies ? 2 : 1));
  }
  SECTION("a view that is a graph output is converted to plain NCHW: the one real transpose") {
    Builder b;
    b.output(b.op(OpKind::Transpose, perm({0, 3, 1, 2}), {b.op(OpKind::Abs, {}, {b.input({2, 5, 6, 7})})}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "cpu.transpose_view") == 1);
    REQUIRE(count_kernel(*e, "convert.") == 1);
  }
  SECTION("other permutations and a [0,2,3,1] of a plain value stay oneDNN's reorder") {
    Builder b;
    const int x = b.input({2, 5, 6, 7});
    b.output(b.op(OpKind::Transpose, perm({0, 2, 3, 1}), {x}));
    b.output(b.op(OpKind::Transpose, perm({0, 1, 3, 2}), {x}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "cpu.transpose_view") == 0);
    REQUIRE(count_kernel(*e, "onednn.transpose") == 2);
  }
}

TEST_CASE("ElementwiseChain runs in NHWC order on NHWC inputs and writes NHWC", "[cpu][transpose_view][elementwise_chain]") {
  for (const CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) continue;
    const IsaCap cap(isa);
    INFO(cpu_isa_name(isa));
    Builder b;
    // [N, H, W, C] = [2, 6, 7, 19]: 19 channels, so a per-channel operand read in NCHW order would be wrong.
    const int y = b.op(OpKind::Transpose, perm({0, 3, 1, 2}), {b.op(OpKind::Abs, {}, {b.input({2, 6, 7, 19})})});
    const int r = b.op(OpKind::Transpose, perm({0, 3, 1, 2}), {b.op(OpKind::Neg, {}, {b.input({2, 6, 7, 19})})});
    const int sum = b.op(OpKind::ElementwiseChain, scale_and_residual(), {y, b.weight({19, 1, 1}), r});
    // the next block reads it as the chain wrote it (NHWC), through the next transpose
    b.output(b.op(OpKind::Transpose, perm({0, 2, 3, 1}), {sum}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "cpu.elementwise_chain." + std::string(cpu_isa_name(isa))) == 1);
    REQUIRE(layout_of(*e, "cpu.elementwise_chain") == "onednn:acdb");
    REQUIRE(count_kernel(*e, "convert.") == 0);
    REQUIRE(count_kernel(*e, "cpu.transpose_view") == 3);
  }
  SECTION("a plain NCHW residual beside an NHWC X: everything goes through plain values") {
    Builder b;
    const int y = b.op(OpKind::Transpose, perm({0, 3, 1, 2}), {b.op(OpKind::Abs, {}, {b.input({2, 6, 7, 19})})});
    b.output(b.op(OpKind::ElementwiseChain, scale_and_residual(), {y, b.weight({19, 1, 1}), b.input({2, 19, 6, 7})}));
    auto e = check(b);
    REQUIRE(count_kernel(*e, "cpu.elementwise_chain") == 1);
    REQUIRE(layout_of(*e, "cpu.elementwise_chain") == "plain");
    REQUIRE(count_kernel(*e, "convert.") == 1);
  }
}

// A bf16 conv's output (what ConvNeXt's downsampling writes, then the residual of the next
// block) is read as bfloat16 NHWC, widened chunk by chunk, with no conversion step.
TEST_CASE("ElementwiseChain in NHWC reads a bf16 conv's output as it is", "[cpu][transpose_view][elementwise_chain][bf16]") {
  Builder b;
  const int x = b.input({2, 8, 10, 10});
  Attrs conv;
  conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  precision_to_attrs(Precision::bf16, conv);
  const int c = b.op(OpKind::Conv, conv, {x, b.weight({24, 8, 3, 3}, 0.3f), b.weight({24})});
  const int y = b.op(OpKind::Transpose, perm({0, 3, 1, 2}), {b.op(OpKind::Abs, {}, {b.input({2, 10, 10, 24})})});
  b.output(b.op(OpKind::ElementwiseChain, scale_and_residual(), {y, b.weight({24, 1, 1}), c}));
  auto engine = Engine::create(b.plan, {2, nullptr});
  REQUIRE(engine);
  INFO(describe_steps(**engine));
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(want);
  auto got = (*engine)->run(b.inputs);
  REQUIRE(got);
  OutputComparison cmp("y");
  REQUIRE(cmp.add(want->outputs[0], got->at(0), 2, nullptr));
  const OutputMetrics m = cmp.finish();
  INFO("cosine " << m.cosine << ", max rel error " << m.max_rel_error);
  CHECK(m.cosine >= 0.9999);
  CHECK(m.max_rel_error <= 2e-2);
  const std::string conv_layout = (*engine)->steps().front().output_layout;
  INFO("conv layout " << conv_layout);
  if (conv_layout == "onednn:acdb:bf16") {
    CHECK(count_kernel(**engine, "convert.") == 1);  // the chain's NHWC output, to the plain graph output
    CHECK(layout_of(**engine, "cpu.elementwise_chain") == "onednn:acdb");
    CHECK(m.max_rel_error > 0);  // the conv did compute in bf16
  }
}

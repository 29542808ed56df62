// kiln's ChannelShuffle kernel (kernels/cpu/channel_shuffle.cpp) against the reference ChannelShuffle
// and against the unfused Concat -> Reshape -> Transpose -> Reshape -> Slice graph it replaces: inputs in
// oneDNN's NHWC layout (written by convolutions, as in ShuffleNet) and plain NCHW graph inputs, odd channel
// counts, more groups than inputs, one output or several; bfloat16 and u8 codes read and written as they
// are (a copy: the fused and the unfused plans agree to the bit). The reference ChannelShuffle itself is
// checked against the unfused graph in passes_channel_shuffle_test.cpp.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

#include "kernels/cpu/isa.h"
#include "kernels/precision.h"
#include "kernels/quantization.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct Case {
  const char* what;
  int64_t n, h, w;
  std::vector<int64_t> channels;  // per input
  int64_t groups;
  std::vector<int64_t> splits;  // empty: one output
};

const Case kCases[] = {
    {"ShuffleNet-like 58 + 58, two groups, two halves (29 pairs: vector tails)", 2, 7, 5, {58, 58}, 2, {58, 58}},
    {"24 + 24, two groups, parts 8 + 40", 1, 4, 5, {24, 24}, 2, {8, 40}},
    {"odd 5 + 7, four groups, one output", 1, 3, 4, {5, 7}, 4, {}},
    {"three inputs 6 + 3 + 9, three groups, parts 4 + 11 + 3, batch 3", 3, 2, 6, {6, 3, 9}, 3, {4, 11, 3}},
    {"1x1 pixels 16 + 16, two groups", 4, 1, 1, {16, 16}, 2, {16, 16}},
};

Attrs shuffle_attrs(int64_t groups, const std::vector<int64_t>& splits) {
  Attrs a;
  a.set("groups", groups);
  if (!splits.empty()) a.set("splits", splits);
  return a;
}

Tensor ints(std::vector<int64_t> v) {
  Tensor t = Tensor::zeros(DType::i64, {static_cast<int64_t>(v.size())});
  std::memcpy(t.data<int64_t>(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

// The unfused form of ChannelShuffle(parts, groups, splits) in `b`: what ONNX exporters write.
std::vector<int> unfused_shuffle(Builder& b, const std::vector<int>& parts, int64_t groups,
                                 const std::vector<int64_t>& splits) {
  Attrs axis1;
  axis1.set("axis", int64_t{1});
  const int joined = b.op(OpKind::Concat, axis1, parts);
  const Shape s = b.concrete(joined);
  const int grouped = b.op(OpKind::Reshape, {}, {joined, b.constant(ints({s[0], groups, s[1] / groups, s[2], s[3]}))});
  Attrs perm;
  perm.set("perm", std::vector<int64_t>{0, 2, 1, 3, 4});
  const int swapped = b.op(OpKind::Transpose, perm, {grouped});
  const int shuffled = b.op(OpKind::Reshape, {}, {swapped, b.constant(ints(s))});
  if (splits.empty()) return {shuffled};
  std::vector<int> out;
  int64_t at = 0;
  for (int64_t part : splits) {
    out.push_back(b.op(OpKind::Slice, {}, {shuffled, b.constant(ints({at})), b.constant(ints({at + part})),
                                           b.constant(ints({1}))}));
    at += part;
  }
  return out;
}

// Inputs of the shuffle: 1x1 convolutions of one graph input (oneDNN writes them in its NHWC layout
// here), or plain graph inputs. `conv_attrs` sets their precision.
std::vector<int> shuffle_inputs(Builder& b, const Case& t, bool from_conv, const Attrs& conv_attrs = {}) {
  const int x = from_conv ? b.input({t.n, 8, t.h, t.w}) : -1;
  std::vector<int> parts;
  for (int64_t c : t.channels)
    parts.push_back(from_conv ? b.op(OpKind::Conv, conv_attrs, {x, b.weight({c, 8, 1, 1}, 0.4f), b.weight({c})})
                              : b.input({t.n, c, t.h, t.w}));
  return parts;
}

std::string shuffle_layouts(const Engine& e) {
  std::string layouts;
  for (const EngineStep& st : e.steps())
    if (st.op == "ChannelShuffle") layouts += st.kernel + " [" + st.output_layout + "] ";
  return layouts;
}

// Runs both plans on the engine; every output equal to the bit.
void require_same_outputs(const Plan& fused, const Plan& unfused, const std::vector<Tensor>& inputs) {
  auto a = Engine::create(fused, {2, nullptr});
  auto b = Engine::create(unfused, {2, nullptr});
  REQUIRE(a);
  REQUIRE(b);
  INFO(describe_steps(**a));
  auto got = (*a)->run(inputs);
  auto want = (*b)->run(inputs);
  REQUIRE(got);
  REQUIRE(want);
  REQUIRE(got->size() == want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    REQUIRE(got->at(i).shape() == want->at(i).shape());
    REQUIRE(std::memcmp(got->at(i).raw(), want->at(i).raw(), static_cast<size_t>(got->at(i).numel()) * 4) == 0);
  }
}

}  // namespace

TEST_CASE("the ChannelShuffle kernel matches the reference and the unfused graph", "[cpu][channel_shuffle]") {
  for (const Case& t : kCases)
    for (bool from_conv : {true, false}) {
      INFO(t.what << (from_conv ? ", inputs from oneDNN convs" : ", plain inputs"));
      Builder fused;
      const auto outs = fused.op_n(OpKind::ChannelShuffle, shuffle_attrs(t.groups, t.splits),
                                   shuffle_inputs(fused, t, from_conv), 8);
      REQUIRE(outs.size() == std::max<size_t>(1, t.splits.size()));
      for (int o : outs) fused.output(o);
      auto engine = check(fused);
      INFO(describe_steps(*engine));
      REQUIRE(count_kernel(*engine, "cpu.channel_shuffle") == 1);
      // NHWC in, NHWC out (where oneDNN's convolutions chose NHWC: AVX-512 machines; AVX2 ones pick
      // nChw8c, which the kernel leaves to the reference after a conversion; of 1x1 pixels they write plain,
      // the same order); plain in, plain out.
      const std::string layouts = shuffle_layouts(*engine);
      if (!from_conv) CHECK(layouts.find("onednn") == std::string::npos);
      if (from_conv && t.h * t.w > 1 && cpu_isa_available(CpuIsa::avx512)) CHECK(layouts.find("acdb") != std::string::npos);

      Builder unfused;
      for (int o : unfused_shuffle(unfused, shuffle_inputs(unfused, t, from_conv), t.groups, t.splits)) unfused.output(o);
      require_same_outputs(fused.plan, unfused.plan, fused.inputs);
    }
}

// bf16 convolutions write bfloat16 NHWC; the shuffle copies it as it is, so its readers (here the plan's
// outputs, converted once) see the same bits as after the unfused graph's conversion to float32.
TEST_CASE("ChannelShuffle reads and writes bfloat16 NHWC as bf16 convolutions write it", "[cpu][channel_shuffle][bf16]") {
  if (!cpu_isa_available(CpuIsa::avx512) || !cpu_has_bf16_compute()) {
    WARN("no AVX-512 bf16 here: oneDNN writes no bfloat16 NHWC to shuffle");
    return;
  }
  const Case& t = kCases[0];
  Attrs bf16;
  precision_to_attrs(Precision::bf16, bf16);
  Builder fused;
  for (int o : fused.op_n(OpKind::ChannelShuffle, shuffle_attrs(t.groups, t.splits), shuffle_inputs(fused, t, true, bf16), 8))
    fused.output(o);
  auto engine = Engine::create(fused.plan, {2, nullptr});
  REQUIRE(engine);
  const std::string layouts = shuffle_layouts(**engine);
  INFO(layouts);
  CHECK(layouts.find("cpu.channel_shuffle [onednn:acdb:bf16]") != std::string::npos);
  Builder unfused;
  for (int o : unfused_shuffle(unfused, shuffle_inputs(unfused, t, true, bf16), t.groups, t.splits)) unfused.output(o);
  require_same_outputs(fused.plan, unfused.plan, fused.inputs);
}

// int8 convolutions whose outputs carry one code scale: the shuffle copies the codes and keeps the scale
// in its outputs' layout; parts with different scales are joined as float32 instead (after conversion).
TEST_CASE("ChannelShuffle copies u8 codes of one scale and converts parts of two", "[cpu][channel_shuffle][int8]") {
  if (!cpu_isa_available(CpuIsa::avx512)) {
    WARN("no AVX-512 here: oneDNN's int8 convolutions write another layout");
    return;
  }
  const Case& t = kCases[0];
  for (bool same_scale : {true, false}) {
    INFO((same_scale ? "one scale" : "two scales"));
    Attrs int8;
    int8.set("activation", std::string("relu"));
    precision_to_attrs(Precision::int8, int8);
    quant_params_to_attrs({0.02f, QuantType::s8}, "input", int8);
    const auto with_codes = [&](Builder& b) {
      int k = 0;
      for (PlanStep& step : b.plan.steps)
        if (step.op == OpKind::Conv) quant_params_to_attrs({same_scale || k++ == 0 ? 0.01f : 0.03f, QuantType::u8}, "output", step.attrs);
    };
    Builder fused;
    for (int o : fused.op_n(OpKind::ChannelShuffle, shuffle_attrs(t.groups, t.splits), shuffle_inputs(fused, t, true, int8), 8))
      fused.output(o);
    with_codes(fused);
    auto engine = Engine::create(fused.plan, {2, nullptr});
    REQUIRE(engine);
    const std::string layouts = shuffle_layouts(**engine);
    INFO(layouts);
    CHECK((layouts.find("cpu.channel_shuffle [onednn:acdb:u8*0.01]") != std::string::npos) == same_scale);
    Builder unfused;
    for (int o : unfused_shuffle(unfused, shuffle_inputs(unfused, t, true, int8), t.groups, t.splits)) unfused.output(o);
    with_codes(unfused);
    require_same_outputs(fused.plan, unfused.plan, fused.inputs);
  }
}

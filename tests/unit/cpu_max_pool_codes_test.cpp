// kiln's max pool over codes (kernels/cpu/max_pool_codes.cpp): fed a float32, bfloat16, u8 or s8
// activation in oneDNN's NHWC (acdb) and channel block (aBcd16b, C = 20: the last block part padding;
// aBcd8b) layouts, its output converted back to float32 must equal the reference executor's max over the
// same values exactly (the inputs are values the type holds exactly, so no rounding is involved):
// negative values, -0 and ties included, over padded, strided (both the separable and the direct
// row), ceil-mode and dilated windows. A quantized output keeps the input's scale; a NaN of either
// sign wins its windows, as in the reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/executor.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/registry.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using Tag = dnnl::memory::format_tag;

namespace {

constexpr float kScale = 0.0625f;  // of the quantized inputs: a power of two, so code * scale is exact

// Multiples of kScale that bfloat16 (8 significant bits) and the type's codes hold exactly: for
// float32, bf16 and s8 half of them negative, some -0; many repeated, so that ties and the sign order
// are exercised.
Tensor code_values(const Shape& shape, uint32_t seed, dnnl::memory::data_type type = dnnl::memory::data_type::bf16) {
  std::mt19937 rng(seed);
  const int lo = type == dnnl::memory::data_type::u8 ? 0 : type == dnnl::memory::data_type::s8 ? -127 : -40;
  const int hi = type == dnnl::memory::data_type::u8 ? 255 : type == dnnl::memory::data_type::s8 ? 127 : 40;
  std::uniform_int_distribution<int> pick(lo, hi);
  Tensor t = Tensor::zeros(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int v = pick(rng);
    t.data<float>()[i] = v == 0 && i % 2 ? -0.0f : static_cast<float>(v) * kScale;
    // float32: every third value off bfloat16's grid (all 24 bits used), so it must be compared whole.
    if (type == dnnl::memory::data_type::f32 && v != 0 && i % 3 == 0) t.data<float>()[i] *= 1.0f + 0x1p-20f;
  }
  return t;
}

Attrs pool_attrs(std::vector<int64_t> kernel, std::vector<int64_t> strides, std::vector<int64_t> pads,
                 int64_t ceil_mode = 0, std::vector<int64_t> dilations = {1, 1}) {
  Attrs a;
  a.set("kernel_shape", kernel);
  a.set("strides", strides);
  a.set("pads", pads);
  a.set("ceil_mode", ceil_mode);
  a.set("dilations", dilations);
  return a;
}

struct PoolRun {
  std::string kernel;
  std::string output_layout;
  int64_t reference_nans = 0;  // NaN outputs of the reference
};

// Pools `x` held in `type` and layout `tag` through the first registry kernel that takes it and
// REQUIREs the float32 result to equal the reference executor's bit for bit.
PoolRun run_pool(const Tensor& x, Tag tag, dnnl::memory::data_type type, const Attrs& attrs, const Shape& out_shape) {
  Plan plan;
  plan.slot_types.push_back(ValueType::of(DType::f32, sym_shape_from(x.shape())));
  plan.inputs.push_back({0, "x", plan.slot_types.back()});
  plan.slot_types.push_back(ValueType::of(DType::f32, sym_shape_from(out_shape)));
  plan.steps.push_back({OpKind::MaxPool, attrs, {0}, {1}, "pool"});
  plan.outputs.push_back({1, "y"});
  plan.num_slots = 2;

  const onednn::md desc(onednn::to_dims(x.shape()), type, tag);
  ValueDesc in;
  in.shape = x.shape();
  const bool quantized = type == dnnl::memory::data_type::u8 || type == dnnl::memory::data_type::s8;
  in.layout.opaque = std::make_shared<onednn::OneDnnLayout>(desc, 2, quantized ? kScale : 1.0f);
  ValueDesc out;
  out.shape = out_shape;
  KernelBuild build{.op = OpKind::MaxPool, .attrs = &attrs, .node_name = "pool", .inputs = {in}, .outputs = {out}, .threads = 2};

  // The input in its layout: a reorder from plain float32 (exact: the values are the type's values;
  // quantized: divided by the scale), which also zeroes the padding lanes of a partial channel block.
  std::vector<uint8_t> x_bytes(desc.get_size() + 64, 0xff);
  void* x_at = x_bytes.data() + (64 - reinterpret_cast<uintptr_t>(x_bytes.data()) % 64) % 64;
  {
    dnnl::memory src(onednn::plain_desc(x.shape()), onednn::cpu_engine(), const_cast<void*>(x.raw()));
    dnnl::memory dst(desc, onednn::cpu_engine(), x_at);
    const auto pd = quantized ? onednn::scaled_reorder(src.get_desc(), desc, 1.0f / kScale) : dnnl::reorder::primitive_desc(src, dst);
    dnnl::reorder(pd).execute(onednn::thread_stream(), src, dst);
    onednn::thread_stream().wait();
  }

  auto choice = kernel_select(build);
  INFO((choice ? std::string() : choice.error().message));
  REQUIRE(choice);
  Kernel& kernel = *choice->kernel;
  const std::vector<Layout> layouts = kernel.output_layouts();
  REQUIRE(layouts.size() == 1);
  REQUIRE_FALSE(layouts[0].plain());
  std::vector<uint8_t> y(layouts[0].opaque->bytes() + 64, 0xff), scratch(kernel.scratch_bytes() + 64);
  REQUIRE(kernel.run({{x_at}, {y.data()}, scratch.data()}));
  Tensor got = Tensor::zeros(DType::f32, out_shape);
  auto to_plain = layouts[0].opaque->make_to_plain(DType::f32, out_shape);
  REQUIRE(to_plain);
  std::vector<uint8_t> conv_scratch((*to_plain)->scratch_bytes() + 64);
  REQUIRE((*to_plain)->run({{y.data()}, {got.raw()}, conv_scratch.data()}));

  auto ref = execute_reference(plan, {x});
  INFO((ref ? std::string() : ref.error().message));
  REQUIRE(ref);
  const Tensor& want = ref->outputs[0];
  REQUIRE(want.shape() == got.shape());
  int64_t differ = 0, reference_nans = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    reference_nans += std::isnan(want.data<float>()[i]);
    const float g = got.data<float>()[i], w = want.data<float>()[i];
    differ += !(g == w && std::signbit(g) == std::signbit(w)) && !(g == 0 && w == 0) && !(std::isnan(g) && std::isnan(w));
  }
  INFO("kernel " << choice->impl->name << ", layout " << layouts[0].describe());
  CHECK(differ == 0);
  // The padding lanes of a partial channel block stay zero for the next kernel.
  const int64_t block = tag == Tag::aBcd16b ? 16 : tag == Tag::aBcd8b ? 8 : 0;
  if (block && out_shape[1] % block != 0) {
    const int64_t blocks = (out_shape[1] + block - 1) / block, pixels = out_shape[2] * out_shape[3];
    const size_t element = onednn::md(onednn::to_dims(out_shape), type, tag).get_size() / (out_shape[0] * blocks * block * pixels);
    int64_t nonzero = 0;
    for (int64_t n = 0; n < out_shape[0]; ++n)
      for (int64_t p = 0; p < pixels; ++p)
        for (int64_t l = out_shape[1] % block; l < block; ++l)
          for (size_t byte = 0; byte < element; ++byte)
            nonzero += y[static_cast<size_t>(((n * blocks + blocks - 1) * pixels + p) * block + l) * element + byte] != 0;
    CHECK(nonzero == 0);
  }
  if (quantized) CHECK(layouts[0].describe().find("*0.0625") != std::string::npos);
  return {std::string(choice->impl->name), layouts[0].describe(), reference_nans};
}

}  // namespace

TEST_CASE("cpu.max_pool_codes pools float32, bf16, u8 and s8 codes exactly in NHWC and channel blocks", "[cpu][bf16][int8]") {
  struct Case {
    const char* what;
    Shape in, out;
    Attrs attrs;
  };
  const std::vector<Case> cases = {
      {"3x3 s2 p1 (ResNet stem)", {2, 0, 15, 13}, {2, 0, 8, 7}, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1})},
      {"3x3 s1 p1 (inception branch)", {1, 0, 9, 11}, {1, 0, 9, 11}, pool_attrs({3, 3}, {1, 1}, {1, 1, 1, 1})},
      {"2x2 s2", {3, 0, 8, 6}, {3, 0, 4, 3}, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0})},
      {"3x3 s2 ceil mode (GoogLeNet)", {1, 0, 14, 14}, {1, 0, 7, 7}, pool_attrs({3, 3}, {2, 2}, {0, 0, 0, 0}, 1)},
      {"3x3 dilation 2, uneven pads", {2, 0, 10, 9}, {2, 0, 7, 9}, pool_attrs({3, 3}, {1, 1}, {1, 2, 0, 2}, 0, {2, 2})},
  };
  using dt = dnnl::memory::data_type;
  for (const auto& [type, type_name] :
       std::vector<std::pair<dt, std::string>>{{dt::f32, ""}, {dt::bf16, ":bf16"}, {dt::u8, ":u8"}, {dt::s8, ":s8"}})
    // C = 100 with 8-bit codes: a 64-lane vector, then 32 and a tail of 4 (AVX-512, direct windows: 64 and a
    // masked 36); 16-bit: 32 x 3 and 4. C = 24: ShuffleNet's stem (8-bit: one masked vector).
    for (const auto& [tag, channels, layout] : std::vector<std::tuple<Tag, int64_t, std::string>>{
             {Tag::acdb, 24, "acdb"}, {Tag::acdb, 40, "acdb"}, {Tag::acdb, 100, "acdb"},
             {Tag::aBcd16b, 20, "aBcd16b"}, {Tag::aBcd16b, 32, "aBcd16b"}, {Tag::aBcd8b, 20, "aBcd8b"}}) {
      for (const Case& c : cases) {
        Shape in = c.in, out = c.out;
        in[1] = out[1] = channels;
        INFO(c.what << ", " << layout << type_name << ", C = " << channels);
        const PoolRun run = run_pool(code_values(in, static_cast<uint32_t>(channels), type), tag, type, c.attrs, out);
        CHECK(run.kernel == "cpu.max_pool_codes");
        CHECK(run.output_layout.find(layout) != std::string::npos);
        CHECK(run.output_layout.find(type_name) != std::string::npos);
        if (type == dt::f32) CHECK(run.output_layout == "onednn:" + layout);
      }
    }
}

TEST_CASE("cpu.max_pool_codes lets a NaN of either sign win its windows, as the reference does", "[cpu][bf16]") {
  using dt = dnnl::memory::data_type;
  Tensor x = code_values({1, 40, 9, 11}, 3);  // values bfloat16 holds exactly, for both types
  // The default NaN x86 arithmetic makes has the sign bit set: its bits ordered as an integer it would
  // sort below -inf, so a pool that compared raw order keys would drop it.
  const uint32_t negative_nan = 0xffc00000u;
  float minus_nan = 0;
  std::memcpy(&minus_nan, &negative_nan, sizeof minus_nan);
  const auto at = [&](int64_t c, int64_t h, int64_t w) -> float& { return x.data<float>()[(c * 9 + h) * 11 + w]; };
  at(3, 0, 5) = minus_nan;
  at(17, 4, 2) = std::nanf("");
  at(39, 8, 10) = -std::numeric_limits<float>::infinity();
  for (const auto& [type, attrs, out] :
       std::vector<std::tuple<dt, Attrs, Shape>>{{dt::f32, pool_attrs({3, 3}, {1, 1}, {1, 1, 1, 1}), {1, 40, 9, 11}},
                                                 {dt::bf16, pool_attrs({3, 3}, {1, 1}, {1, 1, 1, 1}), {1, 40, 9, 11}},
                                                 {dt::f32, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}), {1, 40, 4, 5}},
                                                 {dt::bf16, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}), {1, 40, 4, 5}}}) {
    INFO("type " << static_cast<int>(type) << ", output " << out[2] << "x" << out[3]);
    const PoolRun run = run_pool(x, Tag::acdb, type, attrs, out);  // NaN where the reference has NaN
    CHECK(run.kernel == "cpu.max_pool_codes");
    CHECK(run.reference_nans >= 2);
  }
}

TEST_CASE("cpu.max_pool_codes leaves plain inputs and the Indices output to others", "[cpu][bf16]") {
  const Attrs attrs = pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0});
  ValueDesc in, y, indices;
  in.shape = {1, 16, 8, 8};
  y.shape = indices.shape = {1, 16, 4, 4};
  KernelBuild plain{.op = OpKind::MaxPool, .attrs = &attrs, .node_name = "pool", .inputs = {in}, .outputs = {y}, .threads = 1};
  const auto plain_why = kCpuMaxPoolCodes.supports(plain);
  REQUIRE(plain_why);
  CHECK(plain_why->find("oneDNN") != std::string::npos);

  in.layout.opaque = std::make_shared<onednn::OneDnnLayout>(
      onednn::md(onednn::to_dims(in.shape), dnnl::memory::data_type::bf16, Tag::acdb), 1);
  indices.dtype = DType::i64;
  const KernelBuild build{.op = OpKind::MaxPool, .attrs = &attrs, .node_name = "pool", .inputs = {in}, .outputs = {y, indices}, .threads = 1};
  const auto why = kCpuMaxPoolCodes.supports(build);
  REQUIRE(why);
  CHECK(why->find("Indices") != std::string::npos);
}

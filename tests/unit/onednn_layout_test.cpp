// Every oneDNN kernel that reads a oneDNN layout, fed inputs in padded blocked layouts chosen here
// (nChw16c and nChw8c over 13 channels, so the last block is part padding), whatever layout the
// convolutions of this machine would pick. One node at a time: the kernel is selected and built
// like the engine does, its inputs are reordered into the forced layout, its output converted to
// plain with the layout's own make_to_plain, and the result compared with the reference executor
// (max|diff| <= 1e-4 * max|reference|).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/cpu/isa.h"
#include "kernels/executor.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/registry.h"

using namespace kiln;
using Tag = dnnl::memory::format_tag;

namespace {

Tensor rand_tensor(const Shape& shape, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::zeros(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// One node: its inputs (value and whether it is fed in the forced layout) and attributes.
struct Node {
  OpKind op;
  Attrs attrs;
  std::vector<Tensor> inputs;
  std::vector<bool> blocked;   // per input
  std::vector<bool> constant;  // per input: known at build time (weights)
  Shape out_shape;
};

// Raw bytes of `t` in `desc` (a reorder from plain).
std::vector<uint8_t> to_layout(const Tensor& t, const onednn::md& desc) {
  std::vector<uint8_t> bytes(desc.get_size() + 64, 0xff);  // 0xff: NaN, so unwritten padding shows
  void* aligned = bytes.data() + (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64;
  dnnl::memory src(onednn::plain_desc(t.shape()), onednn::cpu_engine(), const_cast<void*>(t.raw()));
  dnnl::memory dst(desc, onednn::cpu_engine(), aligned);
  dnnl::reorder(src, dst).execute(onednn::thread_stream(), src, dst);
  onednn::thread_stream().wait();
  std::vector<uint8_t> out(desc.get_size());
  std::copy_n(static_cast<uint8_t*>(aligned), out.size(), out.begin());
  return out;
}

// Runs `node` through the first registry kernel that takes it, with `tag` on the blocked inputs.
// Returns the kernel's name; REQUIREs the output to match the reference executor.
std::string run_blocked(const Node& node, Tag tag) {
  Plan plan;
  std::vector<Tensor> feeds;
  KernelBuild build{.op = node.op, .attrs = &node.attrs, .node_name = "node", .inputs = {}, .outputs = {}, .threads = 2};
  std::vector<std::vector<uint8_t>> buffers;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Tensor& t = node.inputs[i];
    plan.slot_types.push_back(ValueType::of(t.dtype(), sym_shape_from(t.shape())));
    if (node.constant[i]) {
      plan.constants.push_back({plan.num_slots, t});
    } else {
      std::string name = "x";  // appended: "x" + std::to_string(i) trips GCC 12's -Wrestrict
      name += std::to_string(i);
      plan.inputs.push_back({plan.num_slots, name, plan.slot_types.back()});
      feeds.push_back(t);
    }
    ++plan.num_slots;
    ValueDesc v;
    v.dtype = t.dtype();
    v.shape = t.shape();
    if (node.blocked[i]) {
      const onednn::md desc(onednn::to_dims(t.shape()), dnnl::memory::data_type::f32, tag);
      v.layout.opaque = std::make_shared<onednn::OneDnnLayout>(desc, 2);
      buffers.push_back(to_layout(t, desc));
    } else {
      const auto* p = static_cast<const uint8_t*>(t.raw());
      buffers.emplace_back(p, p + t.nbytes());
    }
    build.inputs.push_back(v);
  }
  plan.slot_types.push_back(ValueType::of(DType::f32, sym_shape_from(node.out_shape)));
  plan.steps.push_back({node.op, node.attrs, {}, {plan.num_slots}, "node"});
  for (int s = 0; s < plan.num_slots; ++s) plan.steps.back().inputs.push_back(s);
  plan.outputs.push_back({plan.num_slots, "y"});
  ++plan.num_slots;
  ValueDesc out;
  out.shape = node.out_shape;
  build.outputs.push_back(out);
  // Constants point into the plan, once it has them all.
  size_t c = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.constant[i]) build.inputs[i].constant = &plan.constants[c++].second;

  auto choice = kernel_select(build);
  INFO((choice ? std::string() : choice.error().message));
  REQUIRE(choice);
  Kernel& kernel = *choice->kernel;
  const std::vector<Layout> layouts = kernel.output_layouts();
  REQUIRE(layouts.size() == 1);
  const size_t out_bytes = layouts[0].plain() ? static_cast<size_t>(shape_numel(node.out_shape)) * 4 : layouts[0].opaque->bytes();
  std::vector<uint8_t> y(out_bytes + 64), scratch(kernel.scratch_bytes() + 64);
  KernelArgs args;
  for (const auto& b : buffers) args.inputs.push_back(b.data());
  args.outputs.push_back(y.data());
  args.scratch = scratch.data();
  Tensor got = Tensor::zeros(DType::f32, node.out_shape);
  for (int repeat = 0; repeat < 2; ++repeat) {
    REQUIRE(kernel.run(args));
    if (layouts[0].plain()) {
      std::copy_n(y.data(), got.nbytes(), static_cast<uint8_t*>(got.raw()));
    } else {
      auto to_plain = layouts[0].opaque->make_to_plain(DType::f32, node.out_shape);
      REQUIRE(to_plain);
      std::vector<uint8_t> conv_scratch((*to_plain)->scratch_bytes() + 64);
      REQUIRE((*to_plain)->run({{y.data()}, {got.raw()}, conv_scratch.data()}));
    }
  }

  auto ref = execute_reference(plan, feeds);
  INFO((ref ? std::string() : ref.error().message));
  REQUIRE(ref);
  const Tensor& want = ref->outputs[0];
  REQUIRE(want.shape() == got.shape());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    diff = std::max(diff, std::isnan(g) ? INFINITY : std::fabs(g - w));
    scale = std::max(scale, std::fabs(w));
  }
  INFO("kernel " << choice->impl->name << ", max|diff| " << diff << ", max|ref| " << scale);
  REQUIRE(diff <= 1e-4 * scale);
  return std::string(choice->impl->name);
}

Attrs make_attrs(std::initializer_list<std::pair<const char*, AttrValue>> list) {
  Attrs a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

}  // namespace

TEST_CASE("onednn kernels on forced padded blocked layouts", "[onednn]") {
  using V = std::vector<int64_t>;
  const Shape x{2, 13, 7, 6};
  const Tensor a = rand_tensor(x, 1, -2.0f, 2.0f), b = rand_tensor(x, 2, 0.5f, 1.5f);
  const Tensor per_channel = rand_tensor({1, 13, 1, 1}, 3, 0.5f, 1.5f);
  const Tensor c13 = rand_tensor({13}, 4, -1.0f, 1.0f), var13 = rand_tensor({13}, 5, 0.5f, 2.0f);
  const Tensor w = rand_tensor({7, 13, 3, 3}, 6, -0.5f, 0.5f), dw = rand_tensor({13, 1, 3, 3}, 7, -0.5f, 0.5f);
  auto ints = [](V v) { return Tensor::from_values<int64_t>({static_cast<int64_t>(v.size())}, v); };
  const Tensor hw_starts = ints({1, -4}), hw_ends = ints({6, 100}), hw_axes = ints({2, 3}), spatial = ints({2, 3});
  const Tensor c0 = ints({0}), c8 = ints({8}), axis1 = ints({1});
  struct Case {
    const char* what;
    Node node;
    const char* kernel;
  };
  const std::vector<Case> cases = {
      {"conv 3x3", {OpKind::Conv, make_attrs({{"pads", V{1, 1, 1, 1}}}), {a, w}, {true, false}, {false, true}, {2, 7, 7, 6}},
       "onednn.conv"},
      {"depthwise conv", {OpKind::Conv, make_attrs({{"pads", V{1, 1, 1, 1}}, {"group", int64_t{13}}}), {a, dw}, {true, false},
                          {false, true}, x},
       "onednn.conv"},
      {"max pool ceil", {OpKind::MaxPool, make_attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t{1}}}),
                         {a}, {true}, {false}, {2, 13, 3, 3}},
       "cpu.max_pool_codes"},
      {"avg pool pads", {OpKind::AveragePool, make_attrs({{"kernel_shape", V{3, 3}}, {"pads", V{1, 1, 1, 1}}}), {a}, {true},
                         {false}, x},
       "onednn.pool"},
      {"global avg", {OpKind::GlobalAveragePool, {}, {a}, {true}, {false}, {2, 13, 1, 1}}, "onednn.pool"},
      {"sigmoid", {OpKind::Sigmoid, {}, {a}, {true}, {false}, x}, "onednn.eltwise"},
      {"hard sigmoid", {OpKind::HardSigmoid, {}, {a}, {true}, {false}, x}, "onednn.eltwise"},
      {"add blocked + blocked", {OpKind::Add, {}, {a, b}, {true, true}, {false, false}, x}, "onednn.binary"},
      {"div blocked / plain", {OpKind::Div, {}, {a, b}, {true, false}, {false, false}, x}, "onednn.binary"},
      {"mul per channel", {OpKind::Mul, {}, {a, per_channel}, {true, false}, {false, true}, x}, "onednn.binary"},
      {"softmax axis 1", {OpKind::Softmax, make_attrs({{"axis", int64_t{1}}}), {a}, {true}, {false}, x}, "onednn.softmax"},
      {"logsoftmax axis 3", {OpKind::LogSoftmax, make_attrs({{"axis", int64_t{3}}}), {a}, {true}, {false}, x}, "onednn.softmax"},
      {"batchnorm", {OpKind::BatchNormalization, {}, {a, c13, c13, c13, var13}, {true, false, false, false, false},
                     {false, true, true, true, true}, x},
       "onednn.batchnorm"},
      {"concat channels", {OpKind::Concat, make_attrs({{"axis", int64_t{1}}}), {a, b}, {true, true}, {false, false}, {2, 26, 7, 6}},
       "onednn.concat"},
      {"concat blocked + plain on H", {OpKind::Concat, make_attrs({{"axis", int64_t{2}}}), {a, b}, {true, false}, {false, false},
                                       {2, 13, 14, 6}},
       "onednn.concat"},
      {"lrn", {OpKind::LRN, make_attrs({{"size", int64_t{5}}, {"alpha", 1e-2f}}), {a}, {true}, {false}, x}, "onednn.lrn"},
      {"slice H and W", {OpKind::Slice, {}, {a, hw_starts, hw_ends, hw_axes}, {true, false, false, false},
                         {false, true, true, true}, {2, 13, 5, 4}},
       "onednn.slice"},
      {"slice channels 0:8", {OpKind::Slice, {}, {a, c0, c8, axis1}, {true, false, false, false}, {false, true, true, true},
                              {2, 8, 7, 6}},
       "onednn.slice"},
      {"reduce mean spatial keepdims 0", {OpKind::ReduceMean, make_attrs({{"keepdims", int64_t{0}}}), {a, spatial}, {true, false},
                                          {false, true}, {2, 13}},
       "onednn.reduce"},
      {"reduce sum spatial", {OpKind::ReduceSum, {}, {a, spatial}, {true, false}, {false, true}, {2, 13, 1, 1}}, "onednn.reduce"},
      {"reduce max spatial", {OpKind::ReduceMax, {}, {a, spatial}, {true, false}, {false, true}, {2, 13, 1, 1}}, "onednn.reduce"},
  };
  for (Tag tag : {Tag::nChw16c, Tag::nChw8c}) {
    // nChw16c is what oneDNN chooses on AVX-512 machines; on AVX2 ones it never arises (8c does),
    // and oneDNN 2.6 has no AVX2 reduction over it.
    if (tag == Tag::nChw16c && !cpu_isa_available(CpuIsa::avx512)) {
      WARN("this CPU has no AVX-512: nChw16c not tested here");
      continue;
    }
    for (const Case& c : cases) {
      INFO(c.what << (tag == Tag::nChw16c ? " nChw16c" : " nChw8c"));
      REQUIRE(run_blocked(c.node, tag) == c.kernel);
    }
  }
}

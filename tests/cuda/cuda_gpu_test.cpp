// GPU tests of the CUDA backend: every CUDA kernel against the CPU reference executor (fp32
// within 1e-4 of max|reference|, tf32, fp16 and bf16 cosine >= 0.999), Fashion-MNIST and ResNet-18 end
// to end through `kiln verify --device cuda`, and running out of device memory. The main below
// exits 77 ("no CUDA device", ctest's SKIP_RETURN_CODE) where no GPU can be used, so ctest shows
// these as skipped, never as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>

#include <nlohmann/json.hpp>

#include "kernels/device/device_plugin.h"
#include "kernels/device/plan_runner.h"
#include "kernels/elementwise_program.h"
#include "kernels/post_ops.h"
#include "kernels/verify/precision_emulation.h"
#include "tests/support/plan_builder.h"

namespace kiln {
namespace {

using testing::attrs;
using testing::Builder;
using Ints = std::vector<int64_t>;

double cosine(const Tensor& a, const Tensor& b) {
  double dot = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.value_as_double(i), y = b.value_as_double(i);
    dot += x * y;
    aa += x * x;
    bb += y * y;
  }
  return aa == 0 && bb == 0 ? 1.0 : dot / std::sqrt(aa * bb);
}

void compare(const Tensor& got, const Tensor& want, DevicePrecision precision) {
  REQUIRE(got.shape() == want.shape());
  if (precision == DevicePrecision::fp32) {
    testing::require_close(got, want);
  } else {
    const double c = cosine(got, want);
    INFO("cosine " << c);
    REQUIRE(c >= 0.999);
  }
}

// Runs `b` on the GPU three times (graph capture, replay, and the profiled step-by-step path)
// and compares each with the reference executor; returns how the engine ran.
std::string check_on_gpu(const Builder& b, DevicePrecision precision, int64_t graph_max_batch = 16) {
  auto want = execute_reference(b.plan, b.inputs);
  INFO((want ? std::string() : want.error().message));
  REQUIRE(want);
  PlanRunnerOptions options;
  options.device = DeviceKind::cuda;
  options.device_options.precision = precision;
  options.device_options.graph_max_batch = graph_max_batch;
  auto runner = PlanRunner::create(b.plan, options);
  INFO((runner ? std::string() : runner.error().message));
  REQUIRE(runner);
  for (int repeat = 0; repeat < 3; ++repeat) {
    std::vector<double> step_ms;
    auto got = (*runner)->run(b.inputs, repeat == 2 ? &step_ms : nullptr);
    INFO("run " << repeat << ": " << (got ? (*runner)->describe() : got.error().message));
    REQUIRE(got);
    REQUIRE(got->size() == want->outputs.size());
    for (size_t i = 0; i < got->size(); ++i) compare(got->at(i), want->outputs[i], precision);
    if (repeat == 2) CHECK(step_ms.size() == (*runner)->steps().size());
  }
  CHECK((*runner)->describe().find("graph capture failed") == std::string::npos);
  return (*runner)->describe();
}

Attrs with_activation(Attrs a, Activation act, float alpha = 0.0f, float beta = 0.0f) {
  post_ops_to_attrs({act, alpha, beta}, a);
  return a;
}

struct OpCase {
  const char* name;
  std::function<void(Builder&)> build;
};

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = {
      {"conv 3x3 pad 1, bias, fused ReLU, 13 channels",
       [](Builder& b) {
         const int x = b.input({2, 13, 11, 9});
         b.output(b.op(OpKind::Conv, with_activation(attrs({{"pads", Ints{1, 1, 1, 1}}}), Activation::relu),
                       {x, b.weight({16, 13, 3, 3}, 0.3f), b.weight({16})}));
       }},
      {"conv 7x7 stride 2 pad 3, no bias, no activation",
       [](Builder& b) {
         const int x = b.input({2, 3, 23, 23});
         b.output(b.op(OpKind::Conv, attrs({{"pads", Ints{3, 3, 3, 3}}, {"strides", Ints{2, 2}}}), {x, b.weight({16, 3, 7, 7}, 0.3f)}));
       }},
      {"conv with a residual from an input and from an intermediate (in place), fused ReLU",
       [](Builder& b) {
         const int x = b.input({2, 8, 9, 9});
         const int skip = b.input({2, 8, 9, 9});
         const Attrs a = with_activation(attrs({{"pads", Ints{1, 1, 1, 1}}}), Activation::relu);
         const int y1 = b.op(OpKind::Conv, a, {x, b.weight({8, 8, 3, 3}, 0.3f), b.weight({8}), skip});
         const int r = b.op(OpKind::Relu, {}, {skip});
         b.output(b.op(OpKind::Conv, a, {y1, b.weight({8, 8, 3, 3}, 0.3f), b.weight({8}), r}));
       }},
      {"depthwise conv stride 2 with fused SiLU",
       [](Builder& b) {
         const int x = b.input({2, 13, 10, 10});
         b.output(b.op(OpKind::Conv,
                       with_activation(attrs({{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"group", int64_t{13}}}), Activation::silu),
                       {x, b.weight({13, 1, 3, 3}), b.weight({13})}));
       }},
      {"depthwise 7x7 pad 3 over planes of several tiles (4 rows a thread), bias, no activation",
       [](Builder& b) {
         const int x = b.input({2, 6, 40, 70});
         b.output(b.op(OpKind::Conv, attrs({{"pads", Ints{3, 3, 3, 3}}, {"group", int64_t{6}}}),
                       {x, b.weight({6, 1, 7, 7}, 0.3f), b.weight({6})}));
       }},
      {"depthwise 5x5 stride 2 with a residual (in place) and fused ReLU; 3x3 with unequal pads; dilation 2 with clip",
       [](Builder& b) {
         const int x = b.input({2, 5, 33, 35});
         const int skip = b.input({2, 5, 17, 18});
         const int r = b.op(OpKind::Relu, {}, {skip});
         b.output(b.op(OpKind::Conv, with_activation(attrs({{"pads", Ints{2, 2, 2, 2}}, {"strides", Ints{2, 2}}, {"group", int64_t{5}}}),
                                                     Activation::relu),
                       {x, b.weight({5, 1, 5, 5}, 0.3f), b.weight({5}), r}));
         b.output(b.op(OpKind::Conv, attrs({{"pads", Ints{1, 0, 2, 1}}, {"group", int64_t{5}}}), {x, b.weight({5, 1, 3, 3}, 0.3f)}));
         b.output(b.op(OpKind::Conv,
                       with_activation(attrs({{"pads", Ints{2, 2, 2, 2}}, {"dilations", Ints{2, 2}}, {"group", int64_t{5}}}),
                                       Activation::clip, 0.0f, 0.5f),
                       {x, b.weight({5, 1, 3, 3}, 0.3f), b.weight({5})}));
       }},
      {"1x1 conv (cuBLASLt batched GEMM): bias + SiLU, a residual (in place) + ReLU, no bias; and one with a stride (cuDNN)",
       [](Builder& b) {
         const int x = b.input({3, 12, 7, 9});
         const int a = b.op(OpKind::Conv, with_activation({}, Activation::silu), {x, b.weight({20, 12, 1, 1}, 0.3f), b.weight({20})});
         b.output(a);
         const int skip = b.op(OpKind::Relu, {}, {b.input({3, 20, 7, 9})});
         b.output(b.op(OpKind::Conv, with_activation({}, Activation::relu), {a, b.weight({20, 20, 1, 1}, 0.3f), b.weight({20}), skip}));
         b.output(b.op(OpKind::Conv, {}, {x, b.weight({5, 12, 1, 1}, 0.3f)}));
         b.output(b.op(OpKind::Conv, attrs({{"strides", Ints{2, 2}}}), {x, b.weight({5, 12, 1, 1}, 0.3f)}));
       }},
      {"grouped conv, dilation 2, fused clip",
       [](Builder& b) {
         const int x = b.input({1, 12, 13, 13});
         b.output(b.op(OpKind::Conv,
                       with_activation(attrs({{"pads", Ints{2, 2, 2, 2}}, {"dilations", Ints{2, 2}}, {"group", int64_t{3}}}),
                                       Activation::clip, 0.0f, 0.5f),
                       {x, b.weight({6, 4, 3, 3}, 0.3f), b.weight({6})}));
       }},
      {"Gemm transB, bias vector, fused ReLU",
       [](Builder& b) {
         const int a = b.input({4, 37});
         b.output(b.op(OpKind::Gemm, with_activation(attrs({{"transB", int64_t{1}}}), Activation::relu),
                       {a, b.weight({13, 37}), b.weight({13})}));
       }},
      {"Gemm transA, no C",
       [](Builder& b) {
         const int a = b.input({37, 4});
         b.output(b.op(OpKind::Gemm, attrs({{"transA", int64_t{1}}}), {a, b.weight({37, 13})}));
       }},
      {"Gemm alpha 2, beta 0.5, [M, N] C, fused sigmoid",
       [](Builder& b) {
         const int a = b.input({4, 8});
         b.output(b.op(OpKind::Gemm, with_activation(attrs({{"alpha", 2.0f}, {"beta", 0.5f}}), Activation::sigmoid),
                       {a, b.weight({8, 5}), b.weight({4, 5})}));
       }},
      {"MatMul [2, 3, 16] x [16, 13]",
       [](Builder& b) {
         const int a = b.input({2, 3, 16});
         b.output(b.op(OpKind::MatMul, {}, {a, b.weight({16, 13})}));
       }},
      {"MaxPool 3x3 stride 2 pad 1, and 2x2 ceil mode",
       [](Builder& b) {
         const int x = b.input({2, 5, 13, 16});
         b.output(b.op(OpKind::MaxPool, attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}), {x}));
         b.output(b.op(OpKind::MaxPool, attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}), {x}));
       }},
      {"AveragePool 3x3 stride 2 pad 1, with and without the padding counted",
       [](Builder& b) {
         const int x = b.input({2, 5, 13, 16});
         const Attrs a = attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
         b.output(b.op(OpKind::AveragePool, a, {x}));
         Attrs counted = a;
         counted.set("count_include_pad", int64_t{1});
         b.output(b.op(OpKind::AveragePool, counted, {x}));
       }},
      {"GlobalAveragePool and GlobalMaxPool",
       [](Builder& b) {
         const int x = b.input({2, 13, 7, 7});
         b.output(b.op(OpKind::GlobalAveragePool, {}, {x}));
         b.output(b.op(OpKind::GlobalMaxPool, {}, {x}));
         const int large = b.input({2, 3, 40, 40});  // planes above 1024: a block per row, not a warp
         b.output(b.op(OpKind::GlobalAveragePool, {}, {large}));
         b.output(b.op(OpKind::GlobalMaxPool, {}, {large}));
       }},
      {"Softmax over 1000 classes, over a middle axis, and LogSoftmax",
       [](Builder& b) {
         const int x = b.input({4, 1000}, -4.0f, 4.0f);
         b.output(b.op(OpKind::Softmax, {}, {x}));
         const int y = b.input({2, 5, 3});
         b.output(b.op(OpKind::Softmax, attrs({{"axis", int64_t{1}}}), {y}));
         b.output(b.op(OpKind::LogSoftmax, {}, {x}));
       }},
      {"activations: Relu, Sigmoid, Tanh, LeakyRelu, HardSwish, HardSigmoid, Elu, Clip",
       [](Builder& b) {
         const int x = b.input({3, 13, 5}, -4.0f, 4.0f);
         for (OpKind op : {OpKind::Relu, OpKind::Sigmoid, OpKind::Tanh, OpKind::HardSwish, OpKind::Elu})
           b.output(b.op(op, {}, {x}));
         b.output(b.op(OpKind::LeakyRelu, attrs({{"alpha", 0.1f}}), {x}));
         b.output(b.op(OpKind::HardSigmoid, attrs({{"alpha", 0.3f}, {"beta", 0.4f}}), {x}));
         b.output(b.op(OpKind::Clip, {}, {x, b.constant(Tensor::scalar<float>(-0.5f)), b.constant(Tensor::scalar<float>(1.5f))}));
       }},
      {"binary ops with broadcasting",
       [](Builder& b) {
         const int x = b.input({2, 13, 5, 5});
         const int bias = b.input({1, 13, 1, 1});
         b.output(b.op(OpKind::Add, {}, {x, bias}));
         b.output(b.op(OpKind::Sub, {}, {bias, x}));
         b.output(b.op(OpKind::Mul, {}, {x, b.weight({5})}));
         b.output(b.op(OpKind::Div, {}, {x, b.input({13, 1, 1}, 0.5f, 2.0f)}));
         b.output(b.op(OpKind::Max, {}, {x, bias}));
         b.output(b.op(OpKind::Min, {}, {x, bias}));
       }},
      {"BatchNormalization with a fused ReLU",
       [](Builder& b) {
         const int x = b.input({2, 13, 5, 5});
         b.output(b.op(OpKind::BatchNormalization, with_activation(attrs({{"epsilon", 1e-3f}}), Activation::relu),
                       {x, b.weight({13}), b.weight({13}), b.weight({13}), b.constant(testing::rand_tensor({13}, 7, 0.5f, 1.5f))}));
       }},
      {"Concat on channels and on the last axis",
       [](Builder& b) {
         const int x = b.input({2, 3, 4, 4});
         const int y = b.input({2, 5, 4, 4});
         b.output(b.op(OpKind::Concat, attrs({{"axis", int64_t{1}}}), {x, y, x}));
         b.output(b.op(OpKind::Concat, attrs({{"axis", int64_t{-1}}}), {x, b.input({2, 3, 4, 7})}));
       }},
      {"Transpose (NCHW to NHWC) and Slice (steps 2 and -1)",
       [](Builder& b) {
         const int x = b.input({2, 5, 6, 7});
         b.output(b.op(OpKind::Transpose, attrs({{"perm", Ints{0, 2, 3, 1}}}), {x}));
         auto ints = [&](const Ints& v) { return b.constant(Tensor::from_values<int64_t>({static_cast<int64_t>(v.size())}, v)); };
         b.output(b.op(OpKind::Slice, {}, {x, ints({0, 1}), ints({100, 100}), ints({2, 3}), ints({2, 2})}));
         b.output(b.op(OpKind::Slice, {}, {x, ints({-1}), ints({-100}), ints({1}), ints({-1})}));
       }},
      {"ReduceMean over the spatial axes, ReduceMax over the last",
       [](Builder& b) {
         const int x = b.input({2, 13, 7, 7});
         auto ints = [&](const Ints& v) { return b.constant(Tensor::from_values<int64_t>({static_cast<int64_t>(v.size())}, v)); };
         b.output(b.op(OpKind::ReduceMean, attrs({{"keepdims", int64_t{0}}}), {x, ints({2, 3})}));
         b.output(b.op(OpKind::ReduceMax, {}, {x, ints({-1})}));
       }},
      {"LayerNormalization over the last axis (with and without B), and Erf",
       [](Builder& b) {
         const int x = b.input({2, 7, 96}, -3.0f, 3.0f);
         b.output(b.op(OpKind::LayerNormalization, attrs({{"epsilon", 1e-6f}}), {x, b.weight({96}), b.weight({96})}));
         b.output(b.op(OpKind::LayerNormalization, {}, {x, b.weight({96})}));
         const int wide = b.input({3, 1500});  // rows above 1024: a block per row, not a warp
         b.output(b.op(OpKind::LayerNormalization, {}, {wide, b.weight({1500}), b.weight({1500})}));
         b.output(b.op(OpKind::Erf, {}, {x}));
       }},
      {"ElementwiseChain: bias + GELU written out (a trailing-vector operand and scalars), and a per-channel scale + residual",
       [](Builder& b) {
         const int x = b.input({2, 5, 7, 24}, -3.0f, 3.0f);
         ElementwiseProgram gelu;
         gelu.operands = 1;
         gelu.scalars = {1.41421356f, 1.0f, 0.5f};  // registers 2, 3, 4
         gelu.code = {{ChainOp::add, 0, 1}, {ChainOp::div, 5, 2}, {ChainOp::erf, 6, -1},
                      {ChainOp::add, 7, 3},  {ChainOp::mul, 5, 8}, {ChainOp::mul, 9, 4}};
         Attrs gelu_attrs;
         elementwise_program_to_attrs(gelu, gelu_attrs);
         b.output(b.op(OpKind::ElementwiseChain, gelu_attrs, {x, b.weight({24})}));
         ElementwiseProgram scale_add;
         scale_add.operands = 2;
         scale_add.code = {{ChainOp::mul, 0, 1}, {ChainOp::add, 3, 2}, {ChainOp::sigmoid, 4, -1}};
         Attrs scale_attrs;
         elementwise_program_to_attrs(scale_add, scale_attrs);
         b.output(b.op(OpKind::ElementwiseChain, scale_attrs, {x, b.weight({1, 5, 1, 1}), b.input({2, 5, 7, 24})}));
       }},
      {"ElementwiseChain, one element a thread: an innermost dim not a multiple of 4, a broadcast row operand",
       [](Builder& b) {
         const int x = b.input({3, 7, 10}, -3.0f, 3.0f);
         ElementwiseProgram p;
         p.operands = 2;
         p.scalars = {0.5f};  // register 3
         p.code = {{ChainOp::add, 0, 1}, {ChainOp::mul, 4, 2}, {ChainOp::tanh, 5, -1}, {ChainOp::mul, 6, 3}};
         Attrs a;
         elementwise_program_to_attrs(p, a);
         b.output(b.op(OpKind::ElementwiseChain, a, {x, b.weight({10}), b.weight({7, 1})}));
       }},
      {"Transpose of planes larger than a tile (NCHW <-> NHWC, partial tiles), and a bias over the last axis",
       [](Builder& b) {
         const int x = b.input({2, 40, 9, 37});
         const int nhwc = b.op(OpKind::Transpose, attrs({{"perm", Ints{0, 2, 3, 1}}}), {x});
         b.output(nhwc);
         b.output(b.op(OpKind::Transpose, attrs({{"perm", Ints{0, 3, 1, 2}}}), {nhwc}));
         b.output(b.op(OpKind::Add, {}, {nhwc, b.weight({40})}));
         b.output(b.op(OpKind::Mul, {}, {x, b.input({2, 40, 9, 37})}));
       }},
      {"views: Flatten and Reshape, after an op (in place) and of an input (copied)",
       [](Builder& b) {
         const int x = b.input({2, 3, 4, 5});
         const int r = b.op(OpKind::Relu, {}, {x});
         b.output(b.op(OpKind::Flatten, {}, {r}));
         const std::vector<int64_t> shape = {6, -1};
         b.output(b.op(OpKind::Reshape, {}, {x, b.constant(Tensor::from_values<int64_t>({2}, shape))}));
       }},
  };
  return cases;
}

int run_binary(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `kiln verify ... --json` on the GPU; returns the report's first output.
nlohmann::json verify_on_gpu(const std::string& args) {
  std::string output;
  const std::string command = "timeout 600 " KILN_BINARY " verify " + args + " --device cuda --json";
  INFO(command);
  const int code = run_binary(command, output);
  INFO(output);
  REQUIRE(code == 0);
  const size_t start = output.find("\n{") == std::string::npos ? 0 : output.find("\n{") + 1;
  const nlohmann::json report = nlohmann::json::parse(output.substr(output[0] == '{' ? 0 : start), nullptr, false);
  REQUIRE_FALSE(report.is_discarded());
  CHECK(report["engine"].get<std::string>().rfind("cuda: ", 0) == 0);
  return report["outputs"][0];
}

}  // namespace

TEST_CASE("every CUDA kernel matches the CPU reference", "[ops]") {
  const size_t index = GENERATE(range(size_t{0}, op_cases().size()));
  const DevicePrecision precision = GENERATE(DevicePrecision::fp32, DevicePrecision::tf32, DevicePrecision::fp16,
                                                     DevicePrecision::bf16);
  const OpCase& c = op_cases()[index];
  INFO(c.name << ", " << device_precision_name(precision));
  Builder b;
  c.build(b);
  // Every kernel must be capturable: the limit is above every case's dim 0 (37 for Gemm transA).
  const std::string how = check_on_gpu(b, precision, /*graph_max_batch=*/64);
  CHECK(how.find(", CUDA Graph") != std::string::npos);
}

TEST_CASE("depthwise and 1x1 convolutions run on kiln's kernel and cuBLASLt, others on cuDNN", "[ops]") {
  Builder b;
  const int x = b.input({2, 8, 20, 20});
  const int dw = b.op(OpKind::Conv, attrs({{"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{8}}}), {x, b.weight({8, 1, 3, 3}), b.weight({8})});
  const int pw = b.op(OpKind::Conv, {}, {dw, b.weight({16, 8, 1, 1}), b.weight({16})});
  b.output(b.op(OpKind::Conv, attrs({{"pads", Ints{1, 1, 1, 1}}}), {pw, b.weight({4, 16, 3, 3})}));
  check_on_gpu(b, DevicePrecision::fp16);
  PlanRunnerOptions options;
  options.device = DeviceKind::cuda;
  auto runner = PlanRunner::create(b.plan, options);
  REQUIRE(runner);
  std::vector<std::string> kernels;
  for (const EngineStep& step : (*runner)->steps()) kernels.push_back(step.kernel);
  CHECK(kernels == std::vector<std::string>{"cuda.depthwise_conv", "cuda.pointwise_conv", "cuda.conv"});
}

TEST_CASE("a mixed-precision plan converts between its float32 and 16-bit steps and matches its emulation", "[ops]") {
  Builder b;
  const int x = b.input({2, 8, 12, 12});
  const Attrs conv = with_activation(attrs({{"pads", Ints{1, 1, 1, 1}}}), Activation::relu);
  const int c0 = b.op(OpKind::Conv, conv, {x, b.weight({8, 8, 3, 3}, 0.3f), b.weight({8})});
  const int c1 = b.op(OpKind::Conv, conv, {c0, b.weight({8, 8, 3, 3}, 0.3f), b.weight({8})});
  const int c2 = b.op(OpKind::Conv, conv, {c1, b.weight({8, 8, 3, 3}, 0.3f), b.weight({8})});
  b.output(b.op(OpKind::GlobalAveragePool, {}, {c2}));
  for (DevicePrecision precision : {DevicePrecision::fp16, DevicePrecision::bf16}) {
    INFO(device_precision_name(precision));
    const std::vector<std::string> keep = {b.plan.steps[0].name, b.plan.steps[2].name};
    auto rounding = storage_rounding_plan(b.plan, precision, keep);
    REQUIRE(rounding);
    auto emulated = execute_reference(*rounding, b.inputs);
    REQUIRE(emulated);
    PlanRunnerOptions options;
    options.device = DeviceKind::cuda;
    options.device_options.precision = precision;
    options.device_options.keep_fp32 = keep;
    auto runner = PlanRunner::create(b.plan, options);
    INFO((runner ? std::string() : runner.error().message));
    REQUIRE(runner);
    // conv0 reads the input in float (only it reads it); conv1 a 16-bit copy of conv0's output; conv2 a
    // widened copy of conv1's; the pool a 16-bit copy of conv2's.
    std::vector<std::string> kernels;
    for (const EngineStep& step : (*runner)->steps()) kernels.push_back(step.kernel);
    CHECK(kernels == std::vector<std::string>{"cuda.conv", "cuda.convert", "cuda.conv", "cuda.convert", "cuda.conv", "cuda.convert",
                                              (*runner)->steps().back().kernel});
    for (int repeat = 0; repeat < 2; ++repeat) {  // captured, then replayed
      auto got = (*runner)->run(b.inputs);
      INFO((got ? std::string() : got.error().message));
      REQUIRE(got);
      const double c = cosine(got->at(0), emulated->outputs[0]);
      INFO("cosine to the emulation " << c);
      CHECK(c >= 0.99999);
    }
  }
}

TEST_CASE("a tf32 plan with steps kept in fp32 runs them without TF32 and matches its emulation, no conversions", "[ops]") {
  Builder b;
  const int x = b.input({2, 16, 12, 12});
  const Attrs conv = with_activation(attrs({{"pads", Ints{1, 1, 1, 1}}}), Activation::relu);
  const int c0 = b.op(OpKind::Conv, conv, {x, b.weight({16, 16, 3, 3}, 0.3f), b.weight({16})});
  const int c1 = b.op(OpKind::Conv, conv, {c0, b.weight({16, 16, 3, 3}, 0.3f), b.weight({16})});
  b.output(b.op(OpKind::GlobalAveragePool, {}, {c1}));
  const std::vector<std::string> keep = {b.plan.steps[0].name};
  auto emulator = Tf32Emulator::create(b.plan, keep);
  REQUIRE(emulator);
  auto emulated = emulator->run(b.inputs);
  REQUIRE(emulated);
  PlanRunnerOptions options;
  options.device = DeviceKind::cuda;
  options.device_options.precision = DevicePrecision::tf32;
  options.device_options.keep_fp32 = keep;
  auto runner = PlanRunner::create(b.plan, options);
  INFO((runner ? std::string() : runner.error().message));
  REQUIRE(runner);
  for (const EngineStep& step : (*runner)->steps()) CHECK(step.kernel != "cuda.convert");  // every value float32 already
  auto got = (*runner)->run(b.inputs);
  INFO((got ? std::string() : got.error().message));
  REQUIRE(got);
  const double c = cosine(got->at(0), (*emulated)[0]);
  INFO("cosine to the emulation " << c);
  CHECK(c >= 0.99999);
}

TEST_CASE("a batch above the graph limit runs step by step, with the same results", "[ops]") {
  Builder b;
  const int x = b.input({32, 8, 9, 9});
  const int c = b.op(OpKind::Conv, with_activation(attrs({{"pads", Ints{1, 1, 1, 1}}}), Activation::relu),
                     {x, b.weight({8, 8, 3, 3}, 0.3f), b.weight({8})});
  b.output(b.op(OpKind::GlobalAveragePool, {}, {c}));
  const std::string how = check_on_gpu(b, DevicePrecision::fp32, /*graph_max_batch=*/16);
  CHECK(how.find("stream launches (batch above 16)") != std::string::npos);
}

TEST_CASE("a range of steps is timed alone on the device, repeated within one launch", "[ops]") {
  // What kiln bench-target --device cuda times: the op's steps without the rest of the plan.
  Builder b;
  const int x = b.input({4, 16, 28, 28});
  const int c = b.op(OpKind::Conv, with_activation(attrs({{"pads", Ints{1, 1, 1, 1}}}), Activation::relu),
                     {x, b.weight({16, 16, 3, 3}, 0.3f), b.weight({16})});
  b.output(b.op(OpKind::GlobalAveragePool, {}, {c}));
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(want);
  DevicePluginSearch search;
  search.env_path = KILN_CUDA_PLUGIN_PATH;
  auto backend = cuda_backend_open(0, search);
  REQUIRE(backend);
  for (int64_t graph_max_batch : {int64_t{16}, int64_t{0}}) {  // captured as a graph, and launched step by step
    INFO("graph_max_batch " << graph_max_batch);
    DeviceEngineOptions options;
    options.graph_max_batch = graph_max_batch;
    auto engine = (*backend)->create_engine(b.plan, options);
    INFO((engine ? std::string() : engine.error().message));
    REQUIRE(engine);
    REQUIRE((*engine)->steps().size() == 2);
    CHECK_FALSE((*engine)->time_steps_on_device(1, 1, 4, 1, 5));  // needs a run first
    REQUIRE((*engine)->run(b.inputs));
    auto both = (*engine)->time_steps_on_device(0, 2, 1, 2, 10);
    auto pool = (*engine)->time_steps_on_device(1, 1, 8, 2, 10);
    INFO((both ? std::string() : both.error().message) << (pool ? std::string() : pool.error().message));
    REQUIRE(both);
    REQUIRE(pool);
    REQUIRE(both->size() == 10);
    REQUIRE(pool->size() == 10);
    for (double ms : *pool) CHECK(ms > 0);
    std::sort(both->begin(), both->end());
    std::sort(pool->begin(), pool->end());
    CHECK((*pool)[5] < (*both)[5]);  // the pool alone, amortized over 8 repeats, costs less than conv + pool
    CHECK_FALSE((*engine)->time_steps_on_device(1, 2, 1, 0, 1));  // past the plan's steps
    // Timing left the plan as it was: a run still matches the reference.
    auto again = (*engine)->run(b.inputs);
    REQUIRE(again);
    compare(again->at(0), want->outputs[0], DevicePrecision::fp32);
  }
}

TEST_CASE("Fashion-MNIST runs end to end on the GPU in fp32, fp16 and bf16", "[models]") {
  const std::string model = KILN_EXAMPLES_DIR "/fashion-mnist/model.onnx";
  const nlohmann::json fp32 = verify_on_gpu(model + " --random 256 --batch 64");
  CHECK(fp32["max_rel_error"].get<double>() <= 1e-4);
  CHECK(fp32["top1_agreement"].get<double>() >= 0.99);
  const nlohmann::json fp16 = verify_on_gpu(model + " --random 256 --batch 64 --cuda-precision fp16");
  CHECK(fp16["cosine"].get<double>() >= 0.999);
  CHECK(fp16["top1_agreement"].get<double>() >= 0.95);
  const nlohmann::json bf16 = verify_on_gpu(model + " --random 256 --batch 64 --cuda-precision bf16");
  CHECK(bf16["cosine"].get<double>() >= 0.999);
  CHECK(bf16["top1_agreement"].get<double>() >= 0.95);
  const std::string images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  const std::string labels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
  if (!std::filesystem::exists(images)) {
    WARN("dataset-fashion-mnist is not installed: accuracy on the test set not checked");
    return;
  }
  // metrics.json's normalization: the model was trained on (p/255 - 0.2860) / 0.3530.
  const nlohmann::json labelled = verify_on_gpu(model + " --idx-images " + images + " --idx-labels " + labels +
                                                " --mean 0.2860 --std 0.3530 --batch 100 --cuda-precision fp16");
  CHECK(labelled["accuracy_drop"].get<double>() <= 0.005);
  const nlohmann::json labelled_bf16 = verify_on_gpu(model + " --idx-images " + images + " --idx-labels " + labels +
                                                     " --mean 0.2860 --std 0.3530 --batch 100 --cuda-precision bf16");
  CHECK(labelled_bf16["accuracy_drop"].get<double>() <= 0.005);
}

TEST_CASE("ResNet-18 runs end to end on the GPU in fp32, fp16 and bf16", "[models]") {
  const std::string model = KILN_MODEL_CACHE "/resnet18.onnx";
  if (!std::filesystem::exists(model)) {
    FAIL("no " << model << ": run the models_export test (or scripts/test.sh) first");
  }
  const nlohmann::json fp32 = verify_on_gpu(model + " --random 8 --batch 4");
  CHECK(fp32["cosine"].get<double>() >= 0.99999);
  CHECK(fp32["max_rel_error"].get<double>() <= 1e-3);
  const nlohmann::json fp16 = verify_on_gpu(model + " --random 8 --batch 4 --cuda-precision fp16");
  CHECK(fp16["cosine"].get<double>() >= 0.999);
  const nlohmann::json bf16 = verify_on_gpu(model + " --random 8 --batch 4 --cuda-precision bf16");
  CHECK(bf16["cosine"].get<double>() >= 0.999);
}

TEST_CASE("running out of device memory is an error with the size asked for and what was free", "[oom]") {
  // 24 outputs of 12 GiB each, all alive at the end: a 288 GiB arena, more than any one GPU has.
  // Only the 4 MiB input exists on the host; the engine fails while loading, before any run.
  Builder b;
  const int x = b.input({1, int64_t{1} << 20});
  const int quarter = b.op(OpKind::Concat, attrs({{"axis", int64_t{1}}}), std::vector<int>(1024, x));  // 4 GiB
  for (int i = 0; i < 24; ++i) b.output(b.op(OpKind::Concat, attrs({{"axis", int64_t{1}}}), {quarter, quarter, quarter}));
  PlanRunnerOptions options;
  options.device = DeviceKind::cuda;
  auto runner = PlanRunner::create(b.plan, options);
  REQUIRE_FALSE(runner);
  const std::string& m = runner.error().message;
  INFO(m);
  CHECK(runner.error().code == ErrorCode::limit_exceeded);
  CHECK(m.find("out of device memory: the activation arena needs") != std::string::npos);
  CHECK(m.find("GiB is free on this device") != std::string::npos);
  // The device is still usable afterwards.
  Builder small;
  const int y = small.input({2, 3});
  small.output(small.op(OpKind::Relu, {}, {y}));
  check_on_gpu(small, DevicePrecision::fp32);
}

}  // namespace kiln

int main(int argc, char* argv[]) {
  // The plugin built with these tests, whatever the environment says.
  setenv(kiln::kCudaPluginEnv, KILN_CUDA_PLUGIN_PATH, 1);
  kiln::DevicePluginSearch search;
  search.env_path = KILN_CUDA_PLUGIN_PATH;
  auto backend = kiln::cuda_backend_open(0, search);
  if (!backend) {
    std::cout << "no CUDA device: " << backend.error().message << " (skipped)\n";
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

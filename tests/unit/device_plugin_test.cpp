// The CUDA plugin loader on machines without a GPU: where it looks, what each failure says, and,
// when the plugin is built (KILN_CUDA_PLUGIN_PATH), that it loads, reports why the device is
// unusable, and answers the capability query without a device.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernels/device/device_check.h"
#include "kernels/device/device_plugin.h"
#include "kernels/device/plan_runner.h"
#include "kernels/elementwise_program.h"
#include "kernels/post_ops.h"
#include "tests/support/plan_builder.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_device_plugin_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string error_of(const Result<std::string>& r) { return r ? std::string("found ") + *r : r.error().message; }

}  // namespace

TEST_CASE("the plugin search looks beside the executable, then at KILN_CUDA_PLUGIN", "[device]") {
  const fs::path dir = scratch_dir("search");
  SECTION("nothing anywhere: says it is not installed and how to choose the CPU") {
    const std::string m = error_of(cuda_plugin_find({dir.string(), std::nullopt}));
    CHECK(m.find("the CUDA backend plugin is not installed") != std::string::npos);
    CHECK(m.find((dir / "libkiln_cuda.so").string()) != std::string::npos);
    CHECK(m.find("KILN_CUDA_PLUGIN is not set") != std::string::npos);
    CHECK(m.find("--device cpu") != std::string::npos);
  }
  SECTION("KILN_CUDA_PLUGIN naming a missing file is named") {
    const std::string m = error_of(cuda_plugin_find({dir.string(), (dir / "gone.so").string()}));
    CHECK(m.find("KILN_CUDA_PLUGIN=" + (dir / "gone.so").string() + " is not a file") != std::string::npos);
  }
  SECTION("KILN_CUDA_PLUGIN is used when nothing is beside the executable") {
    std::ofstream(dir / "elsewhere.so") << "x";
    CHECK(error_of(cuda_plugin_find({dir.string(), (dir / "elsewhere.so").string()})) == "found " + (dir / "elsewhere.so").string());
  }
  SECTION("the file beside the executable comes first") {
    std::ofstream(dir / "libkiln_cuda.so") << "x";
    std::ofstream(dir / "elsewhere.so") << "x";
    CHECK(error_of(cuda_plugin_find({dir.string(), (dir / "elsewhere.so").string()})) == "found " + (dir / "libkiln_cuda.so").string());
  }
}

TEST_CASE("a file that is not a kiln plugin is refused with the reason, not a crash", "[device]") {
  const fs::path dir = scratch_dir("load");
  std::ofstream(dir / "not_elf.so") << "this is no shared library";
  auto garbage = cuda_plugin_load((dir / "not_elf.so").string());
  REQUIRE_FALSE(garbage);
  CHECK(garbage.error().message.find("cannot load the CUDA backend plugin " + (dir / "not_elf.so").string()) != std::string::npos);
  // A real shared library without the entry point (zlib is always there: kiln links it).
  for (const char* zlib : {"/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1"}) {
    if (!fs::exists(zlib)) continue;
    auto other = cuda_plugin_load(zlib);
    REQUIRE_FALSE(other);
    CHECK(other.error().message.find("is not a kiln device plugin") != std::string::npos);
    break;
  }
}

TEST_CASE("device cuda without the plugin fails at PlanRunner::create with the search's message", "[device]") {
  testing::Builder b;
  const int x = b.input({1, 4});
  b.output(b.op(OpKind::Relu, {}, {x}));
  const fs::path dir = scratch_dir("runner");
  // The test executable has no plugin beside it; the variable points nowhere.
  REQUIRE(setenv(kCudaPluginEnv, (dir / "missing.so").c_str(), 1) == 0);
  PlanRunnerOptions options;
  options.device = DeviceKind::cuda;
  auto runner = PlanRunner::create(b.plan, options);
  unsetenv(kCudaPluginEnv);
  REQUIRE_FALSE(runner);
  CHECK(runner.error().message.find("the CUDA backend plugin is not installed") != std::string::npos);
  // The CPU path of the same plan still runs.
  options.device = DeviceKind::cpu;
  auto cpu = PlanRunner::create(b.plan, options);
  REQUIRE(cpu);
  CHECK((*cpu)->describe().rfind("cpu, ", 0) == 0);
  // Device-only timing is a device plan's: on the CPU it is refused, not faked.
  auto timed = (*cpu)->time_on_device(1, 3);
  REQUIRE_FALSE(timed);
  CHECK(timed.error().code == ErrorCode::unsupported);
}

#ifdef KILN_CUDA_PLUGIN_PATH

TEST_CASE("the built plugin loads and says why this machine's GPU cannot be used", "[device]") {
  auto backend = cuda_plugin_load(KILN_CUDA_PLUGIN_PATH);
  INFO((backend ? std::string() : backend.error().message));
  REQUIRE(backend);
  CHECK((*backend)->name() == "cuda");
  const DeviceProbe probe = (*backend)->probe(0);
  CHECK(probe.runtime_version >= 12000);
  CHECK(probe.min_compute_capability >= 75);
  const Status usable = device_check(probe, 0);
  if (usable) {
    WARN("a usable CUDA device is present: the no-device message is checked only on machines without one");
    return;
  }
  const std::string& m = usable.message();
  INFO(m);
  CHECK((m.find("no NVIDIA driver") != std::string::npos || m.find("no CUDA device") != std::string::npos ||
         m.find("driver is too old") != std::string::npos));
  // Asking for an engine gives the same message instead of touching a device.
  testing::Builder b;
  const int x = b.input({1, 4});
  b.output(b.op(OpKind::Relu, {}, {x}));
  auto engine = (*backend)->create_engine(b.plan, {});
  REQUIRE_FALSE(engine);
  CHECK(engine.error().message == m);
}

TEST_CASE("the plugin's capability query needs no device and names the node and op it cannot run", "[device]") {
  auto backend = cuda_plugin_load(KILN_CUDA_PLUGIN_PATH);
  REQUIRE(backend);
  Attrs relu;
  post_ops_to_attrs({Activation::relu, 0.0f, 0.0f}, relu);
  relu.set("pads", std::vector<int64_t>{1, 1, 1, 1});

  SECTION("a small CNN of supported ops passes in every precision") {
    testing::Builder b;
    const int x = b.input({2, 3, 13, 13});
    const int c = b.op(OpKind::Conv, relu, {x, b.weight({8, 3, 3, 3}), b.weight({8})});
    const int p = b.op(OpKind::MaxPool, testing::attrs({{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}}), {c});
    const int g = b.op(OpKind::GlobalAveragePool, {}, {p});
    const int f = b.op(OpKind::Flatten, {}, {g});
    const int y = b.op(OpKind::Gemm, testing::attrs({{"transB", int64_t{1}}}), {f, b.weight({10, 8}), b.weight({10})});
    b.output(b.op(OpKind::Softmax, {}, {y}));
    for (DevicePrecision precision : {DevicePrecision::fp32, DevicePrecision::tf32, DevicePrecision::fp16, DevicePrecision::bf16}) {
      DeviceEngineOptions options;
      options.precision = precision;
      const Status st = (*backend)->check_plan(b.plan, options);
      INFO((st ? std::string() : st.message()));
      CHECK(st);
    }
    // Mixed precision: the first conv and the Gemm kept in fp32 in a bf16 plan; a name that is no step.
    DeviceEngineOptions mixed;
    mixed.precision = DevicePrecision::bf16;
    mixed.keep_fp32 = {b.plan.steps[0].name, b.plan.steps[4].name};
    const Status kept = (*backend)->check_plan(b.plan, mixed);
    INFO((kept ? std::string() : kept.message()));
    CHECK(kept);
    mixed.keep_fp32 = {"/nowhere/Conv"};
    const Status unknown = (*backend)->check_plan(b.plan, mixed);
    REQUIRE_FALSE(unknown);
    CHECK(unknown.message() == "keep fp32: no step of the plan is node '/nowhere/Conv'");
  }
  SECTION("LayerNormalization, Erf and an ElementwiseChain pass; a chain longer than the device program does not") {
    testing::Builder b;
    const int x = b.input({2, 7, 96});
    const int n = b.op(OpKind::LayerNormalization, {}, {x, b.weight({96}), b.weight({96})});
    const int e = b.op(OpKind::Erf, {}, {n});
    ElementwiseProgram program;
    program.operands = 1;
    program.code = {{ChainOp::add, 0, 1}, {ChainOp::sigmoid, 2, -1}};
    Attrs chain;
    elementwise_program_to_attrs(program, chain);
    b.output(b.op(OpKind::ElementwiseChain, chain, {e, b.weight({96})}));
    const Status st = (*backend)->check_plan(b.plan, {});
    INFO((st ? std::string() : st.message()));
    CHECK(st);
    testing::Builder long_chain;
    const int y = long_chain.input({4, 8});
    ElementwiseProgram many;
    for (int j = 0; j < 30; ++j) many.code.push_back({ChainOp::relu, j, -1});
    Attrs many_attrs;
    elementwise_program_to_attrs(many, many_attrs);
    long_chain.output(long_chain.op(OpKind::ElementwiseChain, many_attrs, {y}));
    const Status refused = (*backend)->check_plan(long_chain.plan, {});
    REQUIRE_FALSE(refused);
    CHECK(refused.message().find("cuda.elementwise_chain: needs at most 24 instructions") != std::string::npos);
  }
  SECTION("Transpose, Slice and trailing-axis reductions pass; a reduction over a middle axis does not") {
    testing::Builder b;
    const int x = b.input({2, 4, 6, 6});
    const int t = b.op(OpKind::Transpose, testing::attrs({{"perm", std::vector<int64_t>{0, 2, 3, 1}}}), {x});
    auto ints = [&](std::vector<int64_t> v) { return b.constant(Tensor::from_values<int64_t>({static_cast<int64_t>(v.size())}, v)); };
    const int s = b.op(OpKind::Slice, {}, {t, ints({1}), ints({5}), ints({1}), ints({2})});
    b.output(b.op(OpKind::ReduceMean, testing::attrs({{"keepdims", int64_t{0}}}), {s, ints({2, 3})}));
    const Status st = (*backend)->check_plan(b.plan, {});
    INFO((st ? std::string() : st.message()));
    CHECK(st);
    testing::Builder middle;
    const int y = middle.input({2, 4, 6});
    middle.output(middle.op(OpKind::ReduceMean, {}, {y, middle.constant(Tensor::from_values<int64_t>({1}, std::vector<int64_t>{1}))}));
    const Status refused = (*backend)->check_plan(middle.plan, {});
    REQUIRE_FALSE(refused);
    CHECK(refused.message().find("cuda.reduce: reduces only trailing axes") != std::string::npos);
  }
  SECTION("an op without a CUDA kernel fails naming the node and the op") {
    testing::Builder b;
    const int x = b.input({2, 5});
    b.output(b.op(OpKind::Sqrt, {}, {x}));
    const Status st = (*backend)->check_plan(b.plan, {});
    REQUIRE_FALSE(st);
    CHECK(st.code() == ErrorCode::unsupported);
    CHECK(st.message().find("no CUDA kernel for node 'Sqrt0' (Sqrt)") != std::string::npos);
    CHECK(st.message().find("cuda.activation") == std::string::npos);  // other ops' kernels are not listed
  }
  SECTION("a supported op in a form the kernel cannot run gives the kernel's reason") {
    testing::Builder b;
    const int x = b.input({1, 3, 9, 9});
    const Attrs uneven = testing::attrs({{"pads", std::vector<int64_t>{0, 1, 1, 0}}});
    b.output(b.op(OpKind::Conv, uneven, {x, b.weight({4, 3, 3, 3})}));
    const Status st = (*backend)->check_plan(b.plan, {});
    REQUIRE_FALSE(st);
    CHECK(st.message().find("node 'Conv0' (Conv)") != std::string::npos);
    CHECK(st.message().find("cuda.conv: needs equal begin and end pads") != std::string::npos);
  }
  SECTION("a node a CPU precision pass marked bf16 is refused, not run at another precision") {
    testing::Builder b;
    const int x = b.input({2, 8});
    Attrs bf16 = testing::attrs({{"transB", int64_t{1}}, {"precision", std::string("bf16")}});
    b.output(b.op(OpKind::Gemm, bf16, {x, b.weight({4, 8})}));
    const Status st = (*backend)->check_plan(b.plan, {});
    REQUIRE_FALSE(st);
    CHECK(st.message().find("cuda.gemm: runs the plan's --cuda-precision, not the node precision bf16") != std::string::npos);
  }
}

#endif

}  // namespace kiln

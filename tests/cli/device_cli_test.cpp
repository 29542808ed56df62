// --device cuda through the binaries on this machine. Without a usable GPU every verb gives one
// "error:" line with exit code 1: that the plugin is not installed (built without CUDA), or, with
// the plugin built, that there is no driver or no device. With a GPU the run must succeed.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "kernels/io/npz.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/process_temp_dir.h"

namespace fs = std::filesystem;

namespace {

struct Run {
  int exit_code = -1;
  bool crashed = false;
  std::string output;
};

Run run_binary(const std::string& binary, const std::string& args) {
  const std::string cmd = "timeout 120 " + binary + " " + args + " 2>&1";
  Run r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.crashed = WIFSIGNALED(status);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

fs::path scratch() {
  static const kiln::test::ProcessTempDir dir("kiln-device-cli-test");
  return dir.path();
}

// The one error line, or a success that ran on the GPU.
void require_device_answer(const Run& r, const std::string& prefix) {
  INFO(r.output);
  REQUIRE_FALSE(r.crashed);
  if (r.exit_code == 0) {
    WARN("a usable CUDA device is present: checked that the run succeeded instead of the no-device message");
    return;
  }
  REQUIRE(r.exit_code == 1);
  const size_t at = r.output.find(prefix + ": error: ");
  REQUIRE(at != std::string::npos);
  REQUIRE(r.output.find("error: ", at + prefix.size() + 9) == std::string::npos);  // one error line
  REQUIRE(r.output.back() == '\n');
  REQUIRE(r.output.find('\n', at) == r.output.size() - 1);
  const std::string line = r.output.substr(at);
#if KILN_CUDA_PLUGIN_BUILT
  CHECK((line.find("no NVIDIA driver") != std::string::npos || line.find("no CUDA device") != std::string::npos ||
         line.find("driver is too old") != std::string::npos));
#else
  CHECK(line.find("the CUDA backend plugin is not installed") != std::string::npos);
#endif
  CHECK(line.find("dlopen") == std::string::npos);
}

const std::string kModel = KILN_EXAMPLES_DIR "/fashion-mnist/model.onnx";
const std::string kSample = KILN_EXAMPLES_DIR "/fashion-mnist/sample.npz";

}  // namespace

TEST_CASE("kiln run, bench and verify with --device cuda answer clearly on this machine", "[cli][device]") {
  const std::string out = (scratch() / "out.npz").string();
  require_device_answer(run_binary(KILN_BINARY, "run " + kModel + " --input " + kSample + " --output " + out + " --device cuda"), "kiln");
  require_device_answer(run_binary(KILN_BINARY, "bench " + kModel + " --iters 2 --warmup 1 --device cuda --cuda-precision fp16"), "kiln");
  require_device_answer(run_binary(KILN_BINARY, "verify " + kModel + " --random 4 --device cuda"), "kiln");
}

TEST_CASE("kiln-runtime run --device cuda answers clearly on this machine", "[cli][device]") {
  const std::string plan = (scratch() / "fashion.kiln").string();
  const Run compiled = run_binary(KILN_BINARY, "compile " + kModel + " -o " + plan);
  INFO(compiled.output);
  REQUIRE(compiled.exit_code == 0);
  const std::string out = (scratch() / "runtime_out.npz").string();
  require_device_answer(run_binary(KILN_RUNTIME_BINARY, "run " + plan + " --input " + kSample + " --output " + out + " --device cuda"),
                        "kiln-runtime");
}

TEST_CASE("kiln-runtime selftest and serve-model --device cuda answer clearly on this machine", "[cli][device]") {
  const fs::path image = scratch() / "image";
  const Run built = run_binary(KILN_BINARY, "image " + kModel + " -o " + image.string());
  INFO(built.output);
  REQUIRE(built.exit_code == 0);
  const std::string bundle = (image / "bundle").string();
  const Run on_cpu = run_binary(KILN_RUNTIME_BINARY, "selftest --bundle " + bundle);
  INFO(on_cpu.output);
  CHECK(on_cpu.exit_code == 0);
  require_device_answer(run_binary(KILN_RUNTIME_BINARY, "selftest --bundle " + bundle + " --device cuda --cuda-precision fp16"),
                        "kiln-runtime");
  // On a usable GPU serve-model would serve until stopped: `timeout` ends it (exit 124).
  const Run served = run_binary("timeout 20 " KILN_RUNTIME_BINARY, "serve-model --bundle " + bundle + " --port 0 --device cuda");
  if (served.exit_code == 124) {
    WARN("a usable CUDA device is present: serve-model served on it until stopped");
    return;
  }
  require_device_answer(served, "kiln-runtime");
}

TEST_CASE("kiln compile --device cuda checks every op has a CUDA kernel, with or without a GPU", "[cli][device]") {
  const Run good = run_binary(KILN_BINARY, "compile " + kModel + " --device cuda --cuda-precision fp16 -o " + (scratch() / "fashion_cuda.kiln").string());
  INFO(good.output);
  REQUIRE_FALSE(good.crashed);
#if KILN_CUDA_PLUGIN_BUILT
  CHECK(good.exit_code == 0);
  // The CUDA pipeline leaves out the passes making fused ops that only the CPU runs.
  CHECK(good.output.find("fuse_concat_affine") == std::string::npos);
  CHECK(good.output.find("fuse_channel_shuffle") == std::string::npos);
  CHECK(good.output.find("fuse_depth_first") == std::string::npos);
#else
  CHECK(good.exit_code == 1);
  CHECK(good.output.find("the CUDA backend plugin is not installed") != std::string::npos);
#endif
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 3, 4}).output("y", {1, 3, 4});
  b.node("Sqrt", {"x"}, {"y"}, "square_root");
  const fs::path model = scratch() / "sqrt.onnx";
  std::ofstream(model, std::ios::binary) << b.bytes();
  const Run bad = run_binary(KILN_BINARY, "compile " + model.string() + " --device cuda -o " + (scratch() / "sqrt.kiln").string());
  INFO(bad.output);
  REQUIRE_FALSE(bad.crashed);
  CHECK(bad.exit_code == 1);
#if KILN_CUDA_PLUGIN_BUILT
  CHECK(bad.output.find("kiln: error: no CUDA kernel for node 'square_root' (Sqrt)") != std::string::npos);
#endif
  CHECK_FALSE(fs::exists(scratch() / "sqrt.kiln"));
}

TEST_CASE("kiln compile --target: GPU nodes get the CUDA pipeline unless --device says otherwise", "[cli][device]") {
  const std::string gpu_target = std::string(KILN_EXAMPLES_DIR) + "/targets/hpc-gpu-slurm.yaml";
  const std::string cpu_target = std::string(KILN_EXAMPLES_DIR) + "/targets/local-cpu.yaml";
  auto passes_of = [](const fs::path& plan) {  // the .kiln metadata's pass list
    std::ifstream in(plan, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = bytes.find("\"passes\":\"");
    REQUIRE(at != std::string::npos);
    const size_t from = at + 10;
    return bytes.substr(from, bytes.find('"', from) - from);
  };
  const fs::path gpu = scratch() / "target_gpu.kiln", cpu = scratch() / "target_cpu.kiln", forced = scratch() / "target_forced.kiln";
  const Run on_gpu = run_binary(KILN_BINARY, "compile " + kModel + " --target " + gpu_target + " -o " + gpu.string());
  INFO(on_gpu.output);
  REQUIRE_FALSE(on_gpu.crashed);
#if KILN_CUDA_PLUGIN_BUILT
  REQUIRE(on_gpu.exit_code == 0);
  CHECK(passes_of(gpu) == "default for cuda");
#else
  CHECK(on_gpu.exit_code == 1);
  CHECK(on_gpu.output.find("the CUDA backend plugin is not installed") != std::string::npos);
#endif
  Run r = run_binary(KILN_BINARY, "compile " + kModel + " --target " + gpu_target + " --device cpu -o " + forced.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(passes_of(forced) == "default");
  r = run_binary(KILN_BINARY, "compile " + kModel + " --target " + cpu_target + " -o " + cpu.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(passes_of(cpu) == "default");
  r = run_binary(KILN_BINARY, "compile " + kModel + " --target " + (scratch() / "none.yaml").string() + " -o " + cpu.string());
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("kiln: error: target '") != std::string::npos);
}

TEST_CASE("an unknown --device or --cuda-precision is command-line misuse", "[cli][device][bad-input]") {
  const Run device = run_binary(KILN_BINARY, "bench " + kModel + " --device tpu");
  INFO(device.output);
  CHECK(device.exit_code == 2);
  CHECK(device.output.find("--device") != std::string::npos);
  const Run precision = run_binary(KILN_BINARY, "bench " + kModel + " --device cuda --cuda-precision int4");
  INFO(precision.output);
  CHECK(precision.exit_code == 2);
  CHECK(precision.output.find("--cuda-precision") != std::string::npos);
}

TEST_CASE("mixed precision from the command line (--cuda-keep-fp32): verified by emulation, bad lists are clear errors", "[cli][device][bad-input]") {
  const Run cpu = run_binary(KILN_BINARY, "verify " + kModel + " --random 4 --cuda-keep-fp32 /stem/Conv");
  INFO(cpu.output);
  CHECK(cpu.exit_code == 1);
  CHECK(cpu.output.find("a GPU plan's mixed precision: add --device cuda") != std::string::npos);
  const Run no_precision = run_binary(KILN_BINARY, "compile " + kModel + " --device cuda --cuda-keep-fp32 /stem/Conv -o " +
                                                       (scratch() / "kept.kiln").string());
  INFO(no_precision.output);
  CHECK(no_precision.exit_code == 1);
  CHECK(no_precision.output.find("--cuda-keep-fp32 keeps steps of a tf32, fp16 or bf16 plan in float32: give --cuda-precision") !=
        std::string::npos);
  const Run on_cpu = run_binary(KILN_BINARY, "compile " + kModel + " --cuda-keep-fp32 /stem/Conv -o " + (scratch() / "kept.kiln").string());
  CHECK(on_cpu.exit_code == 1);
  CHECK(on_cpu.output.find("--cuda-keep-fp32 is for plans compiled for the GPU: add --device cuda") != std::string::npos);
#if KILN_CUDA_PLUGIN_BUILT
  const auto max_rel = [](const Run& r) {
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const size_t at = r.output.find("\"max_rel_error\": ");
    REQUIRE(at != std::string::npos);
    return std::stod(r.output.substr(at + 17));
  };
  const std::string emulated = "verify " + kModel + " --random 16 --device cuda --cuda-precision bf16 --emulate --json";
  const double none = max_rel(run_binary(KILN_BINARY, emulated));
  const double all = max_rel(run_binary(KILN_BINARY, emulated + " --cuda-keep-fp32 /stem/Conv,/block/conv1/Conv,/block/conv2/Conv,"
                                                                "/MaxPool,/conv2/Conv,/MaxPool_1,/fc/Gemm"));
  CHECK(all < none / 2);  // every compute step in float32: only the Flatten view's copy is rounded
  const Run unknown = run_binary(KILN_BINARY, emulated + " --cuda-keep-fp32 /nowhere/Conv");
  INFO(unknown.output);
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.output.find("keep fp32: no step of the plan is node '/nowhere/Conv'") != std::string::npos);
  // tf32: a kept convolution multiplies in float32, never on TF32 operands.
  const std::string tf32 = "verify " + kModel + " --random 16 --device cuda --cuda-precision tf32 --emulate --json";
  const double tf32_none = max_rel(run_binary(KILN_BINARY, tf32));
  const double tf32_kept = max_rel(run_binary(KILN_BINARY, tf32 + " --cuda-keep-fp32 /stem/Conv,/block/conv1/Conv,/block/conv2/Conv,"
                                                                  "/conv2/Conv,/fc/Gemm"));
  CHECK(tf32_kept < tf32_none / 10);
  // A list given to compile is recorded in the .kiln and runs wherever the plan runs at its precision.
  const fs::path kept = scratch() / "kept.kiln";
  const Run compiled = run_binary(KILN_BINARY, "compile " + kModel + " --device cuda --cuda-precision bf16 --cuda-keep-fp32 "
                                               "/stem/Conv,/block/conv1/Conv,/block/conv2/Conv,/MaxPool,/conv2/Conv,/MaxPool_1,/fc/Gemm -o " +
                                                   kept.string());
  INFO(compiled.output);
  REQUIRE(compiled.exit_code == 0);
  CHECK(compiled.output.find("7 kept in fp32 at bf16 on the GPU") != std::string::npos);
  const std::string verify_kept = "verify " + kept.string() + " --random 16 --device cuda --cuda-precision bf16 --emulate --json";
  const Run recorded = run_binary(KILN_BINARY, verify_kept);
  CHECK(recorded.output.find("GPU mixed precision recorded in the plan: 7 steps kept in fp32 at bf16") != std::string::npos);
  // (The .kiln's reference is the compiled plan on the reference executor, the ONNX model's the imported graph.)
  CHECK(max_rel(recorded) == Approx(all).epsilon(1e-3));
  CHECK(max_rel(run_binary(KILN_BINARY, verify_kept + " --cuda-keep-fp32 none")) == Approx(none).epsilon(1e-3));
  // At another precision the recorded list does not apply.
  const Run fp16 = run_binary(KILN_BINARY, "verify " + kept.string() + " --random 16 --device cuda --cuda-precision fp16 --emulate --json");
  CHECK(fp16.output.find("GPU mixed precision recorded") == std::string::npos);
  const Run bad = run_binary(KILN_BINARY, "compile " + kModel + " --device cuda --cuda-precision bf16 --cuda-keep-fp32 /nowhere/Conv -o " +
                                              (scratch() / "bad.kiln").string());
  CHECK(bad.exit_code == 1);
  CHECK(bad.output.find("kiln: error: keep fp32: no step of the plan is node '/nowhere/Conv'") != std::string::npos);
  CHECK_FALSE(fs::exists(scratch() / "bad.kiln"));
#endif
}

TEST_CASE("GPU accuracy control: kiln compile keeps the fewest leading steps in fp32 for the bound, by emulation", "[cli][device][bad-input]") {
  const fs::path out = scratch() / "controlled.kiln";
  const std::string compile = "compile " + kModel + " --device cuda -o " + out.string();
  const Run cpu = run_binary(KILN_BINARY, "compile " + kModel + " --max-rel-error 1e-3 --accuracy-random 8 -o " + out.string());
  CHECK(cpu.exit_code == 1);
  CHECK(cpu.output.find("--max-rel-error bounds GPU accuracy control: add --device cuda") != std::string::npos);
  const Run fp32 = run_binary(KILN_BINARY, compile + " --min-cosine 0.999 --accuracy-random 8");
  CHECK(fp32.exit_code == 1);
  CHECK(fp32.output.find("GPU accuracy control keeps steps of a tf32, fp16 or bf16 plan in float32: give --cuda-precision") !=
        std::string::npos);
  const Run both = run_binary(KILN_BINARY, compile + " --cuda-precision bf16 --min-cosine 0.999 --accuracy-random 8 --cuda-keep-fp32 /stem/Conv");
  CHECK(both.exit_code == 1);
  CHECK(both.output.find("give --cuda-keep-fp32 or an accuracy bound") != std::string::npos);
  const Run no_data = run_binary(KILN_BINARY, compile + " --cuda-precision bf16 --min-cosine 0.999");
  CHECK(no_data.exit_code == 1);
  CHECK(no_data.output.find("accuracy control needs data") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
#if KILN_CUDA_PLUGIN_BUILT
  // bf16 everywhere misses a max relative error of 5e-3 on this model (6.0e-3); keeping its first steps meets it.
  const Run met = run_binary(KILN_BINARY, compile + " --cuda-precision bf16 --max-rel-error 5e-3 --accuracy-random 16");
  INFO(met.output);
  REQUIRE(met.exit_code == 0);
  CHECK(met.output.find("[gpu accuracy] bf16, no step in fp32") != std::string::npos);
  CHECK(met.output.find(": misses") != std::string::npos);
  const size_t line = met.output.find("GPU accuracy control: bf16 with ");
  REQUIRE(line != std::string::npos);
  CHECK(met.output.find("kept in fp32 at bf16 on the GPU") != std::string::npos);
  // The recorded list meets the bound on the same data (seed 11, the accuracy data's default).
  const Run check = run_binary(KILN_BINARY, "verify " + out.string() + " --random 16 --seed 11 --device cuda --cuda-precision bf16 --emulate --json");
  INFO(check.output);
  REQUIRE(check.exit_code == 0);
  const size_t at = check.output.find("\"max_rel_error\": ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(check.output.substr(at + 17)) <= 5e-3);
  // A bound nothing short of float32 everywhere meets, and then not even that: refused, nothing written.
  const fs::path missed = scratch() / "missed.kiln";
  const Run impossible = run_binary(KILN_BINARY, "compile " + kModel + " --device cuda --cuda-precision bf16 --max-rel-error 0 "
                                                 "--accuracy-random 16 -o " + missed.string());
  INFO(impossible.output);
  CHECK(impossible.exit_code == 1);
  CHECK(impossible.output.find("accuracy constraint not met: even with every step in float32") != std::string::npos);
  CHECK_FALSE(fs::exists(missed));
#endif
}

TEST_CASE("kiln optimize keeps a GPU candidate's first steps in fp32 when its precision misses the accuracy limit", "[cli][device]") {
#if KILN_CUDA_PLUGIN_BUILT
  // y = Relu(1024 (x - 1)) on x = [1, 1 + 2^-10] labelled 1: bf16 (8 significant bits) rounds the
  // second value to 1, a tie that argmax breaks to 0 (every sample wrong) unless the first step
  // reads x in float32.
  const fs::path dir = scratch() / "gpu-accuracy";
  fs::create_directories(dir);
  kiln::test::OnnxBuilder b;
  b.input("x", {-1, 2}).output("y", {-1, 2}).initializer("one", {1}, {1.0f}).initializer("k", {1}, {1024.0f});
  b.node("Sub", {"x", "one"}, {"d"}, "sub");
  b.node("Mul", {"d", "k"}, {"m"}, "scale");
  b.node("Relu", {"m"}, {"y"}, "relu");
  std::ofstream(dir / "m.onnx", std::ios::binary) << b.bytes();
  kiln::Tensor x = kiln::Tensor::zeros(kiln::DType::f32, {8, 2});
  kiln::Tensor labels = kiln::Tensor::zeros(kiln::DType::i64, {8});
  for (int i = 0; i < 8; ++i) {
    x.data<float>()[2 * i] = 1.0f;
    x.data<float>()[2 * i + 1] = 1.0f + std::ldexp(1.0f, -10);
    labels.data<int64_t>()[i] = 1;
  }
  REQUIRE(kiln::npz_write_file((dir / "v.npz").string(), {{"x", x}, {"labels", labels}}));
  std::ofstream(dir / "app.yaml") << "name: gpu-accuracy\nmodel: {path: " << (dir / "m.onnx").string() << "}\n"
                                  << "inputs: {x: {shape: [batch, 2], dtype: float32}}\n"
                                  << "data: {validation: {npz: " << (dir / "v.npz").string() << ", input: x, labels: labels}}\n"
                                  << "objective: latency\nconstraints: {max_accuracy_drop: 0.5}\n"
                                  << "optimizations: {batch_sizes: [1], precisions: [bf16]}\n";
  const std::string target = std::string(KILN_EXAMPLES_DIR) + "/targets/hpc-gpu-slurm.yaml";
  const Run r = run_binary(KILN_BINARY, "optimize " + (dir / "app.yaml").string() + " --target " + target + " --no-measure --db " +
                                            (dir / "db.sqlite").string() + " --cache-dir " + (dir / "cache").string() + " -o " +
                                            (dir / "out").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("[gpu accuracy] bf16, no step in fp32: cosine 0, max rel 1, drop 100 points: misses") != std::string::npos);
  CHECK(r.output.find("GPU accuracy control keeps its first 1 of 1 steps in float32") != std::string::npos);
  std::ifstream in(dir / "out/report.json");
  const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(report.find("\"found_by\": \"emulation on this CPU (leading steps, bisection)\"") != std::string::npos);
  CHECK(report.find("\"cuda_keep_fp32\": [\n        \"") != std::string::npos);
  // The chosen GPU plan records the list; kiln verify applies it at that precision and meets the limit.
  const Run v = run_binary(KILN_BINARY, "verify " + (dir / "out/model.kiln").string() + " --input " + (dir / "v.npz").string() +
                                            " --device cuda --cuda-precision bf16 --emulate --max-accuracy-drop 0.5");
  INFO(v.output);
  CHECK(v.exit_code == 0);
  CHECK(v.output.find("GPU mixed precision recorded in the plan: 1 steps kept in fp32 at bf16") != std::string::npos);
#else
  SUCCEED("built without the CUDA plugin: GPU candidates are not compiled (the optimize test checks that)");
#endif
}

TEST_CASE("kiln image for a GPU target carries the CUDA backend or says why it cannot", "[cli][device][image]") {
  const std::string gpu_target = std::string(KILN_EXAMPLES_DIR) + "/targets/hpc-gpu-slurm.yaml";
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 3, 4}).output("y", {1, 3, 4});
  b.node("Sqrt", {"x"}, {"y"}, "square_root");
  const fs::path model = scratch() / "image_sqrt.onnx";
  std::ofstream(model, std::ios::binary) << b.bytes();
  // Fails before any bundle is written: the plan must run on the GPU, or the plugin is missing.
  const Run sqrt = run_binary(KILN_BINARY, "image " + model.string() + " -o " + (scratch() / "image-sqrt").string() +
                                               " --target " + gpu_target);
  INFO(sqrt.output);
  REQUIRE_FALSE(sqrt.crashed);
  CHECK(sqrt.exit_code == 1);
#if KILN_CUDA_PLUGIN_BUILT
  CHECK(sqrt.output.find("cannot run on the GPU (--device cpu builds an image for the CPUs): no CUDA kernel for node "
                         "'square_root' (Sqrt)") != std::string::npos);
#else
  CHECK(sqrt.output.find("target 'hpc-gpu' has GPUs, so its image carries the CUDA backend, but the CUDA backend plugin "
                         "is not installed") != std::string::npos);
#endif
  CHECK_FALSE(fs::exists(scratch() / "image-sqrt" / "oci"));

  const Run no_gpus = run_binary(KILN_BINARY, "image " + kModel + " -o " + (scratch() / "image-cuda-cpu").string() + " --device cuda");
  INFO(no_gpus.output);
  CHECK(no_gpus.exit_code == 1);
  CHECK(no_gpus.output.find("kiln: error: --device cuda needs a --target whose nodes have GPUs") != std::string::npos);
  const Run misuse = run_binary(KILN_BINARY, "image " + kModel + " -o " + (scratch() / "image-tpu").string() + " --device tpu");
  INFO(misuse.output);
  CHECK(misuse.exit_code == 2);
  // A precision for the GPU on an image that runs on the CPUs is refused, not ignored.
  const Run cpu_precision = run_binary(KILN_BINARY, "image " + kModel + " -o " + (scratch() / "image-cpu-fp16").string() +
                                                        " --cuda-precision fp16");
  INFO(cpu_precision.output);
  CHECK(cpu_precision.exit_code == 1);
  CHECK(cpu_precision.output.find("--cuda-precision sets a GPU image's precision, and this image runs on the CPUs") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(scratch() / "image-cpu-fp16" / "oci"));
}

TEST_CASE("kiln-runtime takes --device from KILN_DEVICE, checked like the option", "[cli][device]") {
  const Run bad = run_binary("env KILN_DEVICE=tpu " KILN_RUNTIME_BINARY, "selftest --bundle " + scratch().string());
  INFO(bad.output);
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("KILN_DEVICE") != std::string::npos);
  // And --cuda-precision from KILN_CUDA_PRECISION (what a GPU image sets).
  const Run bad_precision = run_binary("env KILN_CUDA_PRECISION=fp64 " KILN_RUNTIME_BINARY, "selftest --bundle " + scratch().string());
  INFO(bad_precision.output);
  CHECK(bad_precision.exit_code == 2);
  CHECK(bad_precision.output.find("KILN_CUDA_PRECISION=fp64 is not a CUDA precision") != std::string::npos);
  const std::string plan = (scratch() / "env_device.kiln").string();
  REQUIRE(run_binary(KILN_BINARY, "compile " + kModel + " -o " + plan).exit_code == 0);
  // The environment asks for the GPU: the same answer as --device cuda (this machine has none, or runs it).
  require_device_answer(run_binary("env KILN_DEVICE=cuda " KILN_RUNTIME_BINARY,
                                   "run " + plan + " --input " + kSample + " --output " + (scratch() / "env_out.npz").string()),
                        "kiln-runtime");
}

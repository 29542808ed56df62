// The kiln binary on good and bad input: every bad input gives one "kiln: error: ..." line
// naming the problem and exit code 1 — never a crash (signal) or a hang (timeout).
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "kernels/cpu/isa.h"
#include "kernels/io/npy.h"
#include "kernels/io/npz.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/process_temp_dir.h"

namespace fs = std::filesystem;
using kiln::test::OnnxBuilder;

namespace {

struct Run {
  int exit_code = -1;
  bool crashed = false;
  std::string output;
};

// Runs kiln with a 60 s limit; stdout and stderr together.
Run run_kiln(const std::string& args) {
  const std::string cmd = "timeout 60 " KILN_BINARY " " + args + " 2>&1";
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

fs::path temp_dir() {
  static const kiln::test::ProcessTempDir dir("kiln-cli-test");
  return dir.path();
}

fs::path write_file(const std::string& name, const std::string& bytes) {
  const fs::path p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

// `kiln run MODEL` (ONNX on the reference executor, or a .kiln plan) on the .npy `input`: its one output.
// `tag` keeps the output files of different calls apart.
kiln::Tensor run_model(const fs::path& model, const fs::path& input, const std::string& tag) {
  const fs::path out = temp_dir() / (model.stem().string() + tag + "_y.npz");
  Run run = run_kiln("run " + model.string() + " --input " + input.string() + " --output " + out.string());
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  auto y = kiln::npz_read_file(out.string());
  REQUIRE(y);
  REQUIRE(y->size() == 1);
  return (*y)[0].second;
}

void require_clean_error(const Run& r, const std::string& needle) {
  INFO(r.output);
  REQUIRE_FALSE(r.crashed);
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.rfind("kiln: error: ", 0) == 0);
  REQUIRE(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  REQUIRE(r.output.find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("kiln run writes outputs for a valid model and input", "[cli]") {
  const fs::path model = write_file("good.onnx", kiln::test::relu_add_model().bytes());
  const fs::path input = temp_dir() / "x.npy";
  const std::vector<float> x = {1, 2, 3, 4, -1, -2, -3, -4};
  REQUIRE(kiln::npy_write_file(input.string(), kiln::Tensor::from_values<float>({2, 4}, x)));
  const fs::path output = temp_dir() / "out" / "y.npz";
  Run r = run_kiln("run " + model.string() + " --input " + input.string() + " --output " + output.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto y = kiln::npz_read_file(output.string());
  REQUIRE(y);
  REQUIRE(y->size() == 1);
  REQUIRE((*y)[0].first == "y");
  REQUIRE((*y)[0].second.shape() == kiln::Shape{2, 4});
  REQUIRE((*y)[0].second.data<float>()[0] == Approx(2.0f));
  REQUIRE((*y)[0].second.data<float>()[1] == Approx(0.0f));
}

TEST_CASE("kiln inspect prints totals for a valid model", "[cli]") {
  const fs::path model = write_file("inspect.onnx", kiln::test::relu_add_model().bytes());
  Run r = run_kiln("inspect " + model.string() + " --batch 3");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("input:  x float32[3,4]") != std::string::npos);
  REQUIRE(r.output.find("bound:  batch=3") != std::string::npos);
  REQUIRE(r.output.find("parameters: 4") != std::string::npos);
  REQUIRE(r.output.find("float32[3,4]") != std::string::npos);
}

TEST_CASE("kiln export writes ONNX that runs like the original", "[cli][export]") {
  const fs::path model = write_file("export_src.onnx", kiln::test::relu_add_model().bytes());
  const fs::path exported = temp_dir() / "exported.onnx";
  Run r = run_kiln("export " + model.string() + " -o " + exported.string() + " --batch 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("wrote " + exported.string()) != std::string::npos);
  const fs::path input = temp_dir() / "export_x.npy";
  const std::vector<float> x = {1, 2, 3, 4, -1, -2, -3, -4};
  REQUIRE(kiln::npy_write_file(input.string(), kiln::Tensor::from_values<float>({2, 4}, x)));
  std::vector<kiln::Tensor> outputs;
  for (const fs::path& m : {model, exported}) outputs.push_back(run_model(m, input, ""));
  REQUIRE(outputs[0].shape() == outputs[1].shape());
  for (int64_t i = 0; i < outputs[0].numel(); ++i) REQUIRE(outputs[0].data<float>()[i] == outputs[1].data<float>()[i]);

  const fs::path fashion = fs::path(KILN_EXAMPLES_DIR) / "fashion-mnist" / "model.onnx";
  r = run_kiln("export " + fashion.string() + " -o " + (temp_dir() / "fashion.onnx").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_kiln("inspect " + (temp_dir() / "fashion.onnx").string());
  REQUIRE(r.exit_code == 0);
}

TEST_CASE("kiln export --qdq-every-output: every int8 Conv reads and writes through QDQ", "[cli][export][int8]") {
  // The form ONNX Runtime fuses into QLinearConv throughout: DequantizeLinear -> Conv ->
  // QuantizeLinear, the residual Add a node of its own (the Fashion-MNIST example has one).
  const fs::path fashion = fs::path(KILN_EXAMPLES_DIR) / "fashion-mnist" / "model.onnx";
  const std::string quant = " --batch 2 --passes default+quantize_int8 --calibration-random 4";
  const fs::path same = temp_dir() / "fashion_qdq.onnx", every = temp_dir() / "fashion_qdq_every.onnx";
  Run r = run_kiln("export " + fashion.string() + " -o " + same.string() + quant);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_kiln("export " + fashion.string() + " -o " + every.string() + quant + " --qdq-every-output");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  auto load = [](const fs::path& path) {
    onnx::ModelProto m;
    std::ifstream in(path, std::ios::binary);
    REQUIRE(m.ParseFromIstream(&in));
    return m;
  };
  auto count = [](const onnx::ModelProto& m, const std::string& op) {
    return std::count_if(m.graph().node().begin(), m.graph().node().end(),
                         [&](const onnx::NodeProto& n) { return n.op_type() == op; });
  };
  const onnx::ModelProto m = load(every);
  std::map<std::string, std::string> producer;
  std::multimap<std::string, const onnx::NodeProto*> readers;
  for (const onnx::NodeProto& n : m.graph().node()) {
    for (const std::string& o : n.output()) producer[o] = n.op_type();
    for (const std::string& i : n.input()) readers.emplace(i, &n);
  }
  // Read only by QuantizeLinear, or by a fused ReLU whose output is (ONNX Runtime folds ReLU into Q).
  std::function<bool(const std::string&, bool)> quantized = [&](const std::string& value, bool through_relu) {
    const auto [first, last] = readers.equal_range(value);
    if (first == last) return false;
    for (auto it = first; it != last; ++it) {
      const std::string& op = it->second->op_type();
      if (op == "QuantizeLinear") continue;
      if (!(through_relu && op == "Relu" && quantized(it->second->output(0), false))) return false;
    }
    return true;
  };
  int convs = 0;
  for (const onnx::NodeProto& n : m.graph().node()) {
    if (n.op_type() != "Conv") continue;
    ++convs;
    INFO("Conv " << n.name());
    CHECK(producer[n.input(0)] == "DequantizeLinear");
    CHECK(producer[n.input(1)] == "DequantizeLinear");
    CHECK(quantized(n.output(0), true));
  }
  CHECK(convs >= 3);
  CHECK(count(m, "Add") >= 1);
  const onnx::ModelProto plain = load(same);
  CHECK(count(m, "QuantizeLinear") > count(plain, "QuantizeLinear"));  // kiln's own form leaves some outputs float

  // Both run (reference executor) close to the fp32 model.
  const fs::path input = temp_dir() / "fashion_qdq_x.npy";
  REQUIRE(kiln::npy_write_file(input.string(), kiln::Tensor::from_values<float>(
                                                   {2, 1, 28, 28}, std::vector<float>(2 * 28 * 28, 0.25f))));
  std::vector<kiln::Tensor> outputs;
  for (const fs::path& model : {fashion, same, every}) outputs.push_back(run_model(model, input, "_qdq"));
  for (size_t k = 1; k < outputs.size(); ++k) {
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < outputs[0].numel(); ++i) {
      const double a = outputs[0].data<float>()[i], b = outputs[k].data<float>()[i];
      dot += a * b, na += a * a, nb += b * b;
    }
    CHECK(dot / std::sqrt(na * nb) >= 0.99);
  }

  require_clean_error(run_kiln("export " + fashion.string() + " -o " + (temp_dir() / "o.onnx").string() +
                               " --qdq-every-output"),
                      "--qdq-every-output quantizes int8 layers: add quantize_int8");
}

// The QDQ export is kiln's int8 model in standard ONNX: run by any runtime it must compute what kiln's own
// compiled plan computes (the same scales at the same places), not merely something close to fp32.
TEST_CASE("kiln export's QDQ model computes the numbers of kiln's int8 plan", "[cli][export][int8]") {
  const fs::path fashion = fs::path(KILN_EXAMPLES_DIR) / "fashion-mnist" / "model.onnx";
  const std::string quant = " --batch 4 --passes default+quantize_int8 --calibration-random 8";
  const fs::path qdq = temp_dir() / "fashion_same_qdq.onnx", plan = temp_dir() / "fashion_int8.kiln";
  Run r = run_kiln("export " + fashion.string() + " -o " + qdq.string() + quant);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_kiln("compile " + fashion.string() + " -o " + plan.string() + quant);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::vector<float> pixels(4 * 28 * 28);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (float& p : pixels) p = uniform(rng);
  const fs::path input = temp_dir() / "fashion_same_x.npy";
  REQUIRE(kiln::npy_write_file(input.string(), kiln::Tensor::from_values<float>({4, 1, 28, 28}, pixels)));
  std::vector<kiln::Tensor> outputs;
  for (const fs::path& model : {qdq, plan}) outputs.push_back(run_model(model, input, "_same"));
  REQUIRE(outputs[0].numel() == outputs[1].numel());
  double diff = 0, largest = 0;
  for (int64_t i = 0; i < outputs[0].numel(); ++i) {
    diff = std::max(diff, std::fabs(double{outputs[0].data<float>()[i]} - outputs[1].data<float>()[i]));
    largest = std::max(largest, std::fabs(double{outputs[0].data<float>()[i]}));
  }
  INFO("largest difference " << diff << " of " << largest);
  CHECK(diff <= 1e-3 * largest);  // float rounding only

  // The same check as the README gives it: the plan verified with the export as its reference.
  r = run_kiln("verify " + plan.string() + " --reference " + qdq.string() + " --random 8");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("the imported model " + qdq.string() + " before any pass, fp32 reference executor\n") != std::string::npos);
  CHECK(r.output.find("top-1 agreement 100.00% (8/8)") != std::string::npos);
}

TEST_CASE("kiln export refuses kiln-only passes and unwritable paths", "[cli][export][bad-input]") {
  const fs::path model = write_file("export_bad.onnx", kiln::test::relu_add_model().bytes());
  require_clean_error(run_kiln("export " + model.string() + " -o " + (temp_dir() / "o.onnx").string() +
                               " --passes fold_constants,fuse_concat_affine"),
                      "pass 'fuse_concat_affine' makes ConcatAffine");
  require_clean_error(run_kiln("export " + model.string() + " -o /nonexistent-kiln-dir/o.onnx"),
                      "cannot open '/nonexistent-kiln-dir/o.onnx' for writing");
}

TEST_CASE("bad models give one clear error line and exit 1", "[cli][bad-input]") {
  const std::string good = kiln::test::relu_add_model().bytes();
  SECTION("truncated model") {
    const fs::path p = write_file("truncated.onnx", good.substr(0, good.size() / 2));
    require_clean_error(run_kiln("inspect " + p.string()), "truncated or malformed");
  }
  SECTION("random bytes") {
    std::mt19937 rng(7);
    std::string bytes(3000, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const fs::path p = write_file("random.onnx", bytes);
    require_clean_error(run_kiln("inspect " + p.string()), "not an ONNX model");
  }
  SECTION("0-byte file") {
    const fs::path p = write_file("empty.onnx", "");
    require_clean_error(run_kiln("inspect " + p.string()), "empty (0 bytes)");
  }
  SECTION("missing file") {
    require_clean_error(run_kiln("inspect " + (temp_dir() / "absent.onnx").string()), "no such file");
  }
  SECTION("cycle") {
    OnnxBuilder b;
    b.input("x", {1}).output("y", {1});
    b.node("Add", {"x", "b"}, {"a"}, "first");
    b.node("Relu", {"a"}, {"b"}, "second");
    b.node("Identity", {"a"}, {"y"}, "out");
    const fs::path p = write_file("cycle.onnx", b.bytes());
    require_clean_error(run_kiln("inspect " + p.string()), "cycle through node");
  }
  SECTION("shape mismatch") {
    OnnxBuilder b;
    b.input("x", {1, 3}).output("y", {1, 3}).initializer("w", {4}, {1, 2, 3, 4});
    b.node("Add", {"x", "w"}, {"y"}, "bad_add");
    const fs::path p = write_file("mismatch.onnx", b.bytes());
    require_clean_error(run_kiln("inspect " + p.string()), "node 'bad_add' (Add): cannot broadcast [1,3] with [4]");
  }
  SECTION("unsupported op") {
    OnnxBuilder b(11);
    b.input("boxes", {1, 4, 4}).input("scores", {1, 1, 4}).output("idx", {-1, 3}, onnx::TensorProto::INT64);
    b.node("NonMaxSuppression", {"boxes", "scores"}, {"idx"}, "nms_1");
    const fs::path p = write_file("nms.onnx", b.bytes());
    require_clean_error(run_kiln("inspect " + p.string()), "unsupported op 'NonMaxSuppression' at node 'nms_1' (opset 11)");
  }
}

TEST_CASE("an input of the wrong shape or kind is refused", "[cli][bad-input]") {
  const fs::path model = write_file("shape.onnx", kiln::test::relu_add_model().bytes());
  const fs::path out = temp_dir() / "never.npz";
  SECTION("wrong shape .npy") {
    const fs::path input = temp_dir() / "wrong.npy";
    REQUIRE(kiln::npy_write_file(input.string(), kiln::Tensor::zeros(kiln::DType::f32, {2, 3})));
    require_clean_error(run_kiln("run " + model.string() + " --input " + input.string() + " --output " + out.string()),
                        "input 'x' expects float32[batch,4], got float32[2,3]");
    REQUIRE_FALSE(fs::exists(out));
  }
  SECTION("wrong dtype .npy") {
    const fs::path input = temp_dir() / "ints.npy";
    REQUIRE(kiln::npy_write_file(input.string(), kiln::Tensor::zeros(kiln::DType::i64, {2, 4})));
    require_clean_error(run_kiln("run " + model.string() + " --input " + input.string() + " --output " + out.string()),
                        "input 'x' expects float32[batch,4], got int64[2,4]");
  }
  SECTION("garbage .npy") {
    const fs::path input = write_file("garbage.npy", "this is not numpy");
    require_clean_error(run_kiln("run " + model.string() + " --input " + input.string() + " --output " + out.string()),
                        "garbage.npy");
  }
}

TEST_CASE("int8 calibration data of the wrong shape, type or size is refused", "[cli][bad-input][int8]") {
  const std::string model = KILN_EXAMPLES_DIR "/fashion-mnist/model.onnx";
  const std::string compile = "compile " + model + " -o " + (temp_dir() / "q.kiln").string() + " ";
  const auto npy = [](const std::string& name, kiln::Tensor t) {
    const fs::path p = temp_dir() / name;
    REQUIRE(kiln::npy_write_file(p.string(), t));
    return p.string();
  };
  SECTION("no calibration data") {
    require_clean_error(run_kiln(compile + "--passes default+quantize_int8"), "needs calibration data");
  }
  SECTION("calibration data but no quantization in the pipeline") {
    require_clean_error(run_kiln(compile + "--calibration-random 4"), "add quantize_int8 to the pipeline");
  }
  SECTION("samples of another shape") {
    const std::string p = npy("cal_shape.npy", kiln::Tensor::zeros(kiln::DType::f32, {4, 3, 28, 28}));
    require_clean_error(run_kiln(compile + "--passes default+quantize_int8 --calibration " + p), "[1,28,28]");
  }
  SECTION("integer samples") {
    const std::string p = npy("cal_int.npy", kiln::Tensor::zeros(kiln::DType::i32, {4, 1, 28, 28}));
    require_clean_error(run_kiln(compile + "--passes default+quantize_int8 --calibration " + p), "int32");
  }
  SECTION("an empty set") {
    const std::string p = npy("cal_empty.npy", kiln::Tensor::zeros(kiln::DType::f32, {0, 1, 28, 28}));
    require_clean_error(run_kiln(compile + "--passes default+quantize_int8 --calibration " + p), "empty");
  }
  SECTION("an unknown method") {
    require_clean_error(run_kiln(compile + "--passes default+quantize_int8 --calibration-random 4 --calibration-method kl"),
                        "unknown calibration method 'kl'");
  }
  SECTION("accuracy control without data to measure on") {
    require_clean_error(run_kiln(compile + "--passes default+quantize_int8 --calibration-random 4 --max-accuracy-drop 0.01"),
                        "--accuracy-data");
  }
}

TEST_CASE("int8 compile calibrates, reports its layers and meets a loose accuracy constraint", "[cli][int8]") {
  const std::string model = KILN_EXAMPLES_DIR "/fashion-mnist/model.onnx";
  const std::string sample = KILN_EXAMPLES_DIR "/fashion-mnist/sample.npz";
  const fs::path out = temp_dir() / "q8.kiln";
  const Run r = run_kiln("compile " + model + " -o " + out.string() + " --passes default+quantize_int8 --calibration " +
                         sample + " --max-accuracy-drop 1 --accuracy-data " + sample);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("layers in int8") != std::string::npos);
  CHECK(r.output.find("accuracy control:") != std::string::npos);
  CHECK(fs::exists(out));
}

TEST_CASE("bf16 accuracy control by cosine on seeded data keeps layers in fp32 and says so", "[cli][bf16]") {
  const std::string model = KILN_EXAMPLES_DIR "/fashion-mnist/model.onnx";
  const auto compile = [&](const fs::path& out) {
    return "compile " + model + " -o " + out.string() + " --passes default+mixed_precision_bf16 ";
  };
  const Run met = run_kiln(compile(temp_dir() / "b16.kiln") + "--min-cosine 0.99 --accuracy-random 16");
  INFO(met.output);
  REQUIRE(met.exit_code == 0);
  CHECK(met.output.find("layers bf16") != std::string::npos);
  CHECK(met.output.find("a cosine of at least 0.99") != std::string::npos);
  // Only fp32 itself has cosine 1: refused and nothing written, never a silently worse model.
  const fs::path missed_out = temp_dir() / "b16-missed.kiln";
  const Run missed = run_kiln(compile(missed_out) + "--min-cosine 1 --accuracy-random 16");
  INFO(missed.output);
  CHECK(missed.exit_code != 0);
  CHECK(missed.output.find("kiln: error:") != std::string::npos);
  CHECK(missed.output.find("accuracy constraint not met") != std::string::npos);
  CHECK_FALSE(fs::exists(missed_out));
  // int8 with an fp32 fallback below the model's own noise floor: the message says that too.
  const Run floor = run_kiln("compile " + model + " -o " + (temp_dir() / "int8-floor.kiln").string() +
                             " --passes default+quantize_int8 --calibration-random 16 --min-cosine 0.9999999 --accuracy-random 16");
  INFO(floor.output);
  CHECK(floor.exit_code != 0);
  CHECK(floor.output.find("accuracy control: the fp32 model on its inputs rounded to 8 bits") != std::string::npos);
  CHECK(floor.output.find("below this model's own noise floor") != std::string::npos);
  // int8 with a bf16 fallback, when bf16 alone already misses: the message says so, not "no int8 layer".
  // Without bf16 instructions the bf16 layers compute in float32 (cosine 1), so there the bound misses
  // only int8's noise floor, and the message says that instead.
  const fs::path fallback_out = temp_dir() / "int8-bf16-missed.kiln";
  const Run fallback = run_kiln("compile " + model + " -o " + fallback_out.string() +
                                " --passes default+mixed_precision_bf16+quantize_int8 --calibration-random 16 "
                                "--min-cosine 0.9999999 --accuracy-random 16");
  INFO(fallback.output);
  CHECK(fallback.exit_code != 0);
  if (kiln::cpu_has_bf16_compute()) {
    CHECK(fallback.output.find("with every layer in bf16 and none in int8 the model already has") != std::string::npos);
  } else {
    CHECK(fallback.output.find("every layer in bf16, none int8: drop 0 points, cosine 1") != std::string::npos);
    CHECK(fallback.output.find("below this model's own noise floor") != std::string::npos);
  }
  CHECK(fallback.output.find("a cosine of at least 0.9999999") != std::string::npos);
  CHECK_FALSE(fs::exists(fallback_out));
  const std::string other = compile(temp_dir() / "b16-bad.kiln");
  require_clean_error(run_kiln(other + "--accuracy-random 16"), "needs a constraint");
  require_clean_error(run_kiln(other + "--min-cosine 0.99"), "--accuracy-random");
  require_clean_error(run_kiln(other + "--keep-fp32 nope --min-cosine 0.99 --accuracy-random 4"), "'nope'");
  // --keep-bf16 needs bf16 before int8: without it the layers would silently stay fp32.
  const std::string int8_only = "compile " + model + " -o " + (temp_dir() / "b16-int8.kiln").string() +
                                " --passes default+quantize_int8 --calibration-random 4 ";
  require_clean_error(run_kiln(int8_only + "--keep-bf16 /fc/Gemm"), "mixed_precision_bf16");
}

TEST_CASE("kiln image refuses a bad target description before any work", "[cli][image][bad-input]") {
  const fs::path model = write_file("image_bad_target.onnx", kiln::test::relu_add_model().bytes());
  const fs::path target = write_file("bad_target.yaml", "name: moon-base\nkind: moon\nscheduler: none\n");
  const fs::path out = temp_dir() / "image-bad-target";
  Run r = run_kiln("image " + model.string() + " -o " + out.string() + " --target " + target.string());
  INFO(r.output);
  REQUIRE_FALSE(r.crashed);
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.rfind("kiln: error: target '" + target.string() + "': ", 0) == 0);
  REQUIRE(r.output.find("/kind: expected one of \"hpc\", \"cloud\", \"local\", got \"moon\"") != std::string::npos);
  REQUIRE(r.output.find("/node: missing required field") != std::string::npos);
  REQUIRE_FALSE(fs::exists(out));

  r = run_kiln("image " + model.string() + " -o " + out.string() + " --target " + (temp_dir() / "absent.yaml").string());
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("absent.yaml: cannot open file") != std::string::npos);
  REQUIRE_FALSE(fs::exists(out));
}

TEST_CASE("kiln verify --input-sensitivity reports the fp32 model on 8-bit-rounded inputs", "[cli]") {
  const std::string model = std::string(KILN_EXAMPLES_DIR) + "/fashion-mnist/model.onnx";
  Run r = run_kiln("verify " + model + " --random 16 --batch 8 --input-sensitivity");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const size_t at = r.output.find("input sensitivity: the fp32 model on its inputs rounded to 8 bits");
  REQUIRE(at != std::string::npos);
  const std::string section = r.output.substr(at);
  CHECK(section.find("cosine 0.9") != std::string::npos);  // rounding moves the logits a little, not to noise
  CHECK(section.find("top-1 agreement") != std::string::npos);
  Run plain = run_kiln("verify " + model + " --random 16 --batch 8");
  CHECK(plain.output.find("input sensitivity") == std::string::npos);
}

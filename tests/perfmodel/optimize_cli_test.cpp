// `kiln optimize` on the Fashion-MNIST example with a (synthetic) profile of this machine: the top
// candidates and the best fp32 one are compiled, verified on the description's labelled data and
// measured; report.json puts predicted beside measured and the chosen model.kiln loads. An
// accuracy limit of 0 leaves only fp32; an impossible latency is infeasible (exit 3, no model).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/io/npz.h"
#include "kernels/plan_file.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/store.h"
#include "tests/perfmodel/run_kiln.h"
#include "tests/perfmodel/synthetic_profile.h"
#include "tests/perfmodel/temp_dir.h"
#include "tests/support/op_harness.h"

using namespace kiln;
using namespace kiln::perf;
using namespace kiln::perf::testing;

namespace {

const std::string kExample = std::string(KILN_EXAMPLES_DIR) + "/fashion-mnist/";

std::string description(const std::string& constraints) {
  const std::string sample = "{npz: " + kExample + "sample.npz, input: input, labels: labels}";
  return "name: optimized\nmodel: {path: " + kExample + "model.onnx}\n"
         "inputs: {input: {shape: [batch, 1, 28, 28], dtype: float32}}\n"
         "data: {calibration: " + sample + ", validation: " + sample + "}\n"
         "objective: throughput\nconstraints: " + constraints + "\noptimizations: {batch_sizes: [1, 8]}\n";
}

// The example calibrated on 16 seeded random samples (no calibration data) and verified against
// fp32 on 1,024 other random samples (no labels: top-1 disagreement), the top 3 candidates
// compiled and verified, not measured. int8 with every layer reduced changes a handful of those
// near-tie decisions, how many depends on the CPU and the compiler (11 on an AVX2 EPYC, 5 on a
// Xeon with AVX-512 VNNI, fewer in the clang -O1 sanitizer build), so a fixed limit ran accuracy
// control on some builds only. The limit is therefore half a decision under the fewest that any
// int8 candidate changes in a first run with a limit every candidate meets: every int8 candidate
// misses it, and one decision fewer meets it.
struct ControlledRun {
  KilnRun run;
  double limit = 0;  // max_accuracy_drop of the second run
};

constexpr int64_t kControlSamples = 1024;

// The limit as the description writes it (and kiln reads it back), and as kiln prints it.
std::string limit_text(double limit, const char* format) {
  char text[32];
  std::snprintf(text, sizeof text, format, limit);
  return text;
}

std::string controlled_description(const TempDir& dir, const std::string& optimizations, double limit) {
  const std::string text = limit_text(limit, "%.9f");
  return "name: controlled\nmodel: {path: " + kExample + "model.onnx}\n"
         "inputs: {input: {shape: [batch, 1, 28, 28], dtype: float32}}\n"
         "data: {validation: {npz: " + dir.file("validation.npz") + ", input: input}}\n"
         "objective: throughput\nconstraints: {max_accuracy_drop: " + text + "}\n"
         "optimizations: " + optimizations + "\n";
}

KilnRun optimize_with_limit(const TempDir& dir, const std::string& optimizations, double limit, const std::string& out) {
  write_file(dir.file("app.yaml"), controlled_description(dir, optimizations, limit));
  // Each run's fp32 reference on the 1,024 samples took ~40 s in the sanitizer build (2 cores, two tests at once).
  return run_kiln(dir, "optimize " + dir.file("app.yaml") + " --db " + dir.file("b.sqlite") + " --cache-dir " + dir.file("cache") +
                           " --top 3 --no-measure -o " + dir.file(out), /*timeout_s=*/400);
}

ControlledRun optimize_without_data(const TempDir& dir, const std::string& optimizations) {
  const Tensor samples = test::uniform_f32({kControlSamples, 1, 28, 28}, 3);
  REQUIRE(npz_write_file(dir.file("validation.npz"), {{"input", samples}}));
  synthetic_store(dir);
  const KilnRun probe = optimize_with_limit(dir, optimizations, 0.5, "probe");
  INFO(probe.out << probe.err);
  REQUIRE(probe.exit_code == 0);
  int64_t fewest = kControlSamples;
  const nlohmann::json probed = read_json(dir.file("probe/report.json"));
  for (const auto& c : probed.at("candidates"))
    if (c.at("precision") == "int8") {
      CHECK(c.at("accuracy_control").is_null());  // met: no control
      fewest = std::min<int64_t>(fewest, std::llround((1 - c.at("top1_agreement").get<double>()) * kControlSamples));
    }
  // Two or more, so that one fewer still leaves a decision to win back with some layer left in int8.
  INFO("decisions changed by int8 with every layer reduced: " << fewest << " of " << kControlSamples);
  REQUIRE(fewest >= 2);
  REQUIRE(fewest < kControlSamples);
  ControlledRun controlled;
  controlled.limit = std::stod(limit_text((static_cast<double>(fewest) - 0.5) / kControlSamples, "%.9f"));
  controlled.run = optimize_with_limit(dir, optimizations, controlled.limit, "out");
  return controlled;
}

}  // namespace

TEST_CASE("kiln optimize compiles, verifies and measures the best candidates and writes the chosen model", "[perfmodel][optimize]") {
  TempDir dir;
  const std::string common = " --db " + synthetic_store(dir) + " --cache-dir " + dir.file("cache") + " --runs 5";
  write_file(dir.file("app.yaml"), description("{max_accuracy_drop: 0.5}"));
  KilnRun r = run_kiln(dir, "optimize " + dir.file("app.yaml") + common + " --top 2 -o " + dir.file("out"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("[1/") != std::string::npos);  // progress per candidate
  CHECK(r.out.find("Optimized choice: ") != std::string::npos);
  const nlohmann::json report = read_json(dir.file("out/report.json"));
  CHECK(report.at("status") == "ok");
  CHECK(report.at("measured") == true);
  CHECK(report.at("measurement_rounds") == 3);
  const auto& candidates = report.at("candidates");
  REQUIRE(candidates.size() >= 2);
  // Timed in rounds, every candidate once per round: each shows its third round, and its runs are
  // the three rounds' (at least ceil(5 / 3) timed batches each, one instance or more).
  CHECK(r.err.find("measuring " + std::to_string(candidates.size()) + " candidates in 3 rounds") != std::string::npos);
  for (const auto& c : candidates) {
    CHECK(r.err.find("round 3/3 " + c.at("name").get<std::string>() + ": ") != std::string::npos);
    CHECK(c.at("measured_runs").get<int>() >= 3 * 2);
  }
  CHECK(r.err.find("round 1/3 " + candidates.back().at("name").get<std::string>()) <
        r.err.find("round 2/3 " + candidates.front().at("name").get<std::string>()));
  bool has_fp32 = false;
  for (const auto& c : candidates) {
    has_fp32 = has_fp32 || c.at("precision") == "fp32";
    CHECK(c.at("measured_ms").get<double>() > 0);
    CHECK(c.at("predicted_ms").get<double>() > 0);
    CHECK(c.at("accuracy_drop").is_number());  // labelled validation data
    CHECK(c.at("verification_data").get<std::string>().find("sample.npz") != std::string::npos);
  }
  CHECK(has_fp32);  // the fallback is always tried
  for (const auto& c : candidates)  // no constraint but accuracy, which is not predicted: nothing predicted to miss
    CHECK(c.at("predicted_blocked_by").empty());
  REQUIRE(report.at("chosen").is_object());
  CHECK(report.at("chosen").at("passed") == true);
  auto loaded = plan_read_file(dir.file("out/model.kiln"));
  REQUIRE(loaded);
  CHECK(loaded->info.notes.find("batch " + std::to_string(report.at("chosen").at("batch").get<int>())) == 0);
  CHECK(read_json(dir.file("out/plan.json")).at("format") == "kiln-plan");

  // The loop closes: the measured candidates are stored, and the next plan of this model uses them.
  r = run_kiln(dir, "plan " + dir.file("app.yaml") + common.substr(0, common.find(" --runs")) + " --json -o " + dir.file("replan"));
  REQUIRE(r.exit_code == 0);
  const nlohmann::json replan = nlohmann::json::parse(r.out);
  int measured = 0, corrected = 0;
  for (const auto& c : replan.at("candidates")) {
    measured += c.at("latency_source") == "measured";
    corrected += c.at("latency_source") == "corrected";
    for (const auto& t : candidates)
      if (t.at("name") == c.at("name")) {
        CHECK(c.at("latency_source") == "measured");
        CHECK(c.at("predicted_ms").get<double>() == Approx(t.at("measured_ms").get<double>()));
      }
  }
  CHECK(measured == static_cast<int>(candidates.size()));
  CHECK(corrected > 0);
  CHECK(replan.at("timings_ms").at("fit_cached") == true);  // model rows never refit the predictor

  // No accuracy may be lost: whatever the plan ranked first, the choice lost none on the validation
  // data (fp32 always qualifies; a reduced precision only if it changed no decision there), and every
  // precision was tried (the top candidate, then the best of each other one).
  write_file(dir.file("exact.yaml"), description("{max_accuracy_drop: 0}"));
  r = run_kiln(dir, "optimize " + dir.file("exact.yaml") + common + " --top 1 --no-measure -o " + dir.file("exact"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json exact = read_json(dir.file("exact/report.json"));
  CHECK(exact.at("chosen").at("accuracy_drop").get<double>() == 0.0);
  std::set<std::string> tried;
  for (const auto& c : exact.at("candidates")) {
    tried.insert(c.at("precision").get<std::string>());
    if (c.at("accuracy_drop").get<double>() > 0) CHECK(c.at("passed") == false);
  }
  // bf16 only where the CPU has it; int8 also runs on AVX2 without VNNI.
  if (fingerprint_dtype_unsupported(fingerprint_local(), "bf16").empty())
    CHECK(tried == std::set<std::string>{"fp32", "bf16", "int8"});
  else
    CHECK(tried == std::set<std::string>{"fp32", "int8"});
  CHECK(exact.at("measured") == false);
  CHECK(exact.at("chosen").at("measured_ms").is_null());
}

// int8 with every layer reduced misses the limit (optimize_without_data); optimize then runs
// accuracy control on the same samples and keeps the layers it chose for every int8 candidate.
TEST_CASE("kiln optimize puts an int8 that misses max_accuracy_drop through accuracy control", "[perfmodel][optimize]") {
  TempDir dir;
  const ControlledRun controlled = optimize_without_data(dir, "{batch_sizes: [1, 8], precisions: [fp32, int8]}");
  const KilnRun& r = controlled.run;
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("accuracy control") != std::string::npos);  // its progress
  const nlohmann::json report = read_json(dir.file("out/report.json"));
  int int8_candidates = 0;
  std::set<std::string> kept_lists;
  for (const auto& c : report.at("candidates")) {
    if (c.at("precision") != "int8") {
      CHECK(c.at("accuracy_control").is_null());
      continue;
    }
    ++int8_candidates;
    const nlohmann::json& control = c.at("accuracy_control");
    REQUIRE(control.is_object());
    const std::string missed = control.at("every_layer_reduced").get<std::string>();
    CHECK(missed.find("top-1 disagreement ") == 0);
    CHECK(missed.find(" > max_accuracy_drop " + limit_text(controlled.limit, "%g")) != std::string::npos);
    CHECK(control.at("fallback") == "fp32");
    CHECK(control.at("reduced_layers").get<int>() > 0);  // some int8 is left: else "not met"
    CHECK_FALSE(control.at("kept").empty());
    kept_lists.insert(control.at("kept").dump());
    CHECK(c.at("passes").get<std::string>().find("(kept fp32: ") != std::string::npos);
    // Priced again with its fp32 layers: slower than the plan's every-layer-int8 price.
    CHECK(c.at("predicted_ms").get<double>() > control.at("every_layer_predicted_ms").get<double>());
    CHECK(c.at("top1_agreement").get<double>() >= 1 - controlled.limit);  // verified again after the control
    CHECK(c.at("passed") == true);
  }
  CHECK(int8_candidates >= 1);
  CHECK(kept_lists.size() == 1);  // chosen once, kept by every int8 candidate
  bool explained = false;
  for (const auto& line : report.at("explanation"))
    explained = explained || line.get<std::string>().find("int8 with every layer reduced missed the accuracy limit") == 0;
  CHECK(explained);
}

// Where the description allows bf16 and the CPU has it, int8's kept layers run in bf16 instead of
// fp32 (the pipeline runs mixed_precision_bf16 before quantize_int8); the layers verified and priced
// are the ones that run. Without bf16 on this CPU the fallback stays fp32.
TEST_CASE("kiln optimize keeps int8's sensitive layers in bf16 when bf16 is allowed", "[perfmodel][optimize]") {
  TempDir dir;
  const ControlledRun controlled = optimize_without_data(dir, "{batch_sizes: [8], precisions: [fp32, bf16, int8]}");
  const KilnRun& r = controlled.run;
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const bool has_bf16 = fingerprint_dtype_unsupported(fingerprint_local(), "bf16").empty();
  const nlohmann::json report = read_json(dir.file("out/report.json"));
  int int8_candidates = 0;
  for (const auto& c : report.at("candidates")) {
    if (c.at("precision") != "int8") continue;
    ++int8_candidates;
    const nlohmann::json& control = c.at("accuracy_control");
    REQUIRE(control.is_object());
    CHECK(control.at("fallback") == (has_bf16 ? "bf16" : "fp32"));
    CHECK_FALSE(control.at("kept").empty());
    const std::string passes = c.at("passes").get<std::string>();
    CHECK(passes.find(has_bf16 ? "(kept bf16: " : "(kept fp32: ") != std::string::npos);
    CHECK((passes.find("mixed_precision_bf16,quantize_int8") != std::string::npos) == has_bf16);
    // Priced with its kept layers in their fallback: no faster than every layer int8.
    CHECK(c.at("predicted_ms").get<double>() >= control.at("every_layer_predicted_ms").get<double>());
    CHECK(c.at("top1_agreement").get<double>() >= 1 - controlled.limit);
    CHECK(c.at("passed") == true);
  }
  CHECK(int8_candidates >= 1);
}

// kiln serve's compile stage: the job's uploads replace the description's paths, which point into
// the submitter's machine.
TEST_CASE("kiln optimize takes the model and data files from options over the description's paths", "[perfmodel][optimize]") {
  TempDir dir;
  write_file(dir.file("app.yaml"), "name: uploaded\nmodel: {path: /nowhere/model.onnx}\n"
                                   "inputs: {input: {shape: [batch, 1, 28, 28], dtype: float32}}\n"
                                   "data: {calibration: /nowhere/c.npz, validation: {npz: /nowhere/v.npz, input: input, labels: labels}}\n"
                                   "objective: latency\noptimizations: {batch_sizes: [1], precisions: [fp32, int8]}\n");
  const std::string common = " --db " + synthetic_store(dir) + " --cache-dir " + dir.file("cache") + " --top 1 --no-measure -o " + dir.file("out");
  KilnRun r = run_kiln(dir, "optimize " + dir.file("app.yaml") + common);
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("/nowhere/model.onnx") != std::string::npos);
  r = run_kiln(dir, "optimize " + dir.file("app.yaml") + common + " --model " + kExample + "model.onnx --calibration-data " + kExample +
                        "sample.npz --validation-data " + kExample + "sample.npz");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json report = read_json(dir.file("out/report.json"));
  for (const auto& c : report.at("candidates")) {
    CHECK(c.at("verification_data").get<std::string>().find("sample.npz") != std::string::npos);
    CHECK(c.at("accuracy_drop").is_number());  // the description's labels entry still applies
  }
}

TEST_CASE("kiln optimize with a latency nothing meets is infeasible and writes no model", "[perfmodel][optimize]") {
  TempDir dir;
  write_file(dir.file("app.yaml"), description("{max_latency_ms: 0.000001}"));
  const KilnRun r = run_kiln(dir, "optimize " + dir.file("app.yaml") + " --db " + synthetic_store(dir) + " --cache-dir " +
                                      dir.file("cache") + " --top 1 --runs 3 -o " + dir.file("out"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.out.find("Infeasible") != std::string::npos);
  const nlohmann::json report = read_json(dir.file("out/report.json"));
  CHECK(report.at("status") == "infeasible");
  CHECK_FALSE(std::filesystem::exists(dir.file("out/model.kiln")));
  // Every candidate was predicted to miss the latency: the report and the table say so beside what was measured.
  for (const auto& c : report.at("candidates")) {
    REQUIRE(c.at("predicted_blocked_by").size() == 1);
    CHECK(c.at("predicted_blocked_by")[0].get<std::string>().find("latency") != std::string::npos);
  }
  CHECK(r.out.find("predicted to miss: ") != std::string::npos);
  CHECK(r.out.find("Tried though predicted to miss a constraint") != std::string::npos);
}

TEST_CASE("kiln optimize for a target with GPUs verifies the GPU candidates by emulation and may choose one",
          "[perfmodel][optimize]") {
  TempDir dir;
  const std::string common = " --db " + synthetic_store(dir) + " --cache-dir " + dir.file("cache") + " --top 1 --runs 3";
  write_file(dir.file("app.yaml"), description("{max_accuracy_drop: 0.5}"));
  const std::string hpc_gpu = std::string(KILN_EXAMPLES_DIR) + "/targets/hpc-gpu-slurm.yaml";
  KilnRun r = run_kiln(dir, "optimize " + dir.file("app.yaml") + " --target " + hpc_gpu + common + " -o " + dir.file("out"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json report = read_json(dir.file("out/report.json"));
  const auto& gpu = report.at("gpu_candidates");
  REQUIRE(gpu.size() == 3);  // the best of fp32, fp16 and bf16 on the H100s
  std::set<std::string> precisions;
  for (const auto& c : gpu) {
    precisions.insert(c.at("precision").get<std::string>());
    CHECK(c.at("device") == "cuda");
    CHECK(c.at("measured") == false);
#ifdef KILN_CUDA_PLUGIN_PATH
    CHECK(c.at("runs_on_gpu") == true);  // Fashion-MNIST has a CUDA kernel for every step
    CHECK(c.at("problem") == "");
    CHECK(c.at("verified") == "emulated");
#else
    CHECK(c.at("runs_on_gpu") == false);
    CHECK_THAT(c.at("problem").get<std::string>(), Catch::Contains("the CUDA backend plugin is not installed"));
    CHECK(c.at("verified") == false);
#endif
  }
  CHECK(precisions == std::set<std::string>{"fp32", "fp16", "bf16"});
  CHECK_THAT(r.out, Catch::Contains("were compiled for the GPU and checked against the CUDA backend's kernels"));
  CHECK_THAT(r.out, !Catch::Contains("on the CPUs on the CPUs"));
#ifdef KILN_CUDA_PLUGIN_PATH
  // The GPU candidates are trials beside the CPU ones, verified emulated against the same fp32
  // reference (the labelled sample), and chosen on predictions: the priors put the H100s far ahead.
  int gpu_trials = 0;
  for (const auto& c : report.at("candidates")) {
    if (c.at("device") != "cuda") continue;
    ++gpu_trials;
    CHECK_THAT(c.at("verified_on").get<std::string>(), Catch::Contains("emulated on the CPU"));
    CHECK(c.at("measured_ms").is_null());
    CHECK(c.at("accuracy_drop").is_number());
    CHECK(c.at("top1_agreement").is_number());
  }
  CHECK(gpu_trials == 3);
  CHECK(report.at("chosen").at("device") == "cuda");
  CHECK_THAT(r.out, Catch::Contains("its accuracy was verified by emulation, its latency is a prediction"));
  REQUIRE(std::filesystem::exists(dir.file("out/model.kiln")));
  // The written model is the GPU's plan, recorded as such with its precision (kiln image's
  // default); kiln verify emulates it at that precision.
  const std::string precision = report.at("chosen").at("precision").get<std::string>();
  auto written = kiln::plan_read_file(dir.file("out/model.kiln"), false);
  REQUIRE(written);
  CHECK(written->info.device == "cuda");
  CHECK(written->info.cuda_precision == precision);
  r = run_kiln(dir, "verify " + dir.file("out/model.kiln") + " --device cuda --cuda-precision " + precision + " --emulate --random 4");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(precision + " emulated on the CPU"));
#else
  CHECK(report.at("chosen").at("device") == "cpu");  // no GPU candidate could be checked
#endif

  // Unknown CPUs, known GPUs: only the GPU candidates, verified by emulation (or, without the
  // CUDA backend, none runnable: infeasible, saying why).
  write_file(dir.file("gpu-only.yaml"),
             "name: gpu-box\nkind: cloud\nscheduler: kubernetes\ncontainer_runtime: docker\n"
             "node: {cpu: {model: Imaginary CPU 9000, cores: 16}, memory_gb: 128, gpus: [{model: NVIDIA L4, count: 1, memory_gb: 24}]}\n");
  r = run_kiln(dir, "optimize " + dir.file("app.yaml") + " --target " + dir.file("gpu-only.yaml") + common + " -o " + dir.file("gpu-out"));
  INFO(r.out << r.err);
#ifdef KILN_CUDA_PLUGIN_PATH
  CHECK(r.exit_code == 0);
  CHECK(read_json(dir.file("gpu-out/report.json")).at("chosen").at("device") == "cuda");
#else
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.out, Catch::Contains("not runnable"));
#endif
}

TEST_CASE("kiln verify --emulate needs --device cuda", "[perfmodel][optimize]") {
  TempDir dir;
  const KilnRun r = run_kiln(dir, "verify " + kExample + "model.onnx --emulate --random 2");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("--emulate runs a GPU plan on the CPU: add --device cuda"));
}

// `kiln plan`: on a (synthetic) profile of this machine it prints the ranked candidates and the
// explanation and writes plan.json; the second plan reads the fit and the model's costs from the
// cache; an impossible constraint answers "infeasible" (exit 3) with the closest candidates; an
// unknown target and a cost objective without a price are clear errors.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "perfmodel/fingerprint.h"
#include "perfmodel/store.h"
#include "tests/perfmodel/run_kiln.h"
#include "tests/perfmodel/synthetic_profile.h"
#include "tests/perfmodel/temp_dir.h"

using namespace kiln::perf;
using namespace kiln::perf::testing;

namespace {

const std::string kModel = std::string(KILN_EXAMPLES_DIR) + "/fashion-mnist/model.onnx";


std::string description(const std::string& objective, const std::string& constraints) {
  return "name: planned\nmodel: {path: " + kModel + "}\ninputs: {input: {shape: [batch, 1, 28, 28], dtype: float32}}\n" +
         "objective: " + objective + "\n" + (constraints.empty() ? "" : "constraints: " + constraints + "\n") +
         "optimizations: {batch_sizes: [1, 8, 32]}\n";
}

}  // namespace

TEST_CASE("kiln plan ranks the candidates, explains the choice, writes plan.json and caches", "[perfmodel][plan]") {
  TempDir dir;
  const std::string db = synthetic_store(dir);
  write_file(dir.file("app.yaml"), description("throughput", "{max_latency_ms: 1000, max_memory_mb: 4096}"));
  const std::string args = "plan " + dir.file("app.yaml") + " --db " + db + " --cache-dir " + dir.file("cache") + " -o " + dir.file("out");
  KilnRun r = run_kiln(dir, args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("Chosen: ") != std::string::npos);
  CHECK(r.out.find("Objective: the highest throughput") != std::string::npos);
  CHECK(r.out.find("fp16") != std::string::npos);  // not considered, and said why
  const nlohmann::json plan = read_json(dir.file("out/plan.json"));
  CHECK(plan.at("format") == "kiln-plan");
  CHECK(plan.at("status") == "ok");
  REQUIRE(plan.at("chosen").is_object());
  CHECK(plan.at("chosen").at("chosen") == true);
  CHECK(plan.at("candidates").at(0).at("name") == plan.at("chosen").at("name"));
  CHECK(plan.at("target").at("profile") == fingerprint_local().id);
  CHECK(plan.at("timings_ms").at("fit_cached") == false);
  CHECK(plan.at("timings_ms").at("model_costs_cached") == false);
  const size_t candidates = plan.at("candidates").size();
  CHECK(candidates % 3 == 0);  // three batch sizes for every precision x threads
  for (const auto& c : plan.at("candidates")) {
    CHECK(c.at("predicted_ms").get<double>() > 0);
    CHECK(c.at("feasible") == true);
  }

  r = run_kiln(dir, args + " --json");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json again = nlohmann::json::parse(r.out);
  CHECK(again.at("timings_ms").at("fit_cached") == true);
  CHECK(again.at("timings_ms").at("model_costs_cached") == true);
  CHECK(again.at("chosen").at("name") == plan.at("chosen").at("name"));
  CHECK(again.at("chosen").at("predicted_ms") == plan.at("chosen").at("predicted_ms"));
}

TEST_CASE("kiln plan: infeasible constraints, unknown targets and a cost without a price", "[perfmodel][plan]") {
  TempDir dir;
  const std::string db = synthetic_store(dir);
  const std::string common = " --db " + db + " --cache-dir " + dir.file("cache") + " -o " + dir.file("out");

  write_file(dir.file("tight.yaml"), description("latency", "{max_latency_ms: 0.000001}"));
  KilnRun r = run_kiln(dir, "plan " + dir.file("tight.yaml") + common);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.out.find("Infeasible") != std::string::npos);
  CHECK(r.out.find("> max_latency_ms 1e-06") != std::string::npos);
  CHECK(read_json(dir.file("out/plan.json")).at("status") == "infeasible");

  write_file(dir.file("app.yaml"), description("latency", ""));
  write_file(dir.file("remote.yaml"),
        "name: far-away\nkind: hpc\nscheduler: slurm\ncontainer_runtime: apptainer\nnodes: 2\n"
        "node: {cpu: {model: Imaginary CPU 9000, cores: 64}, memory_gb: 256}\n");
  r = run_kiln(dir, "plan " + dir.file("app.yaml") + " --target " + dir.file("remote.yaml") + common);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("target 'far-away' (Imaginary CPU 9000)") != std::string::npos);
  CHECK(r.err.find("kiln bench-target") != std::string::npos);

  write_file(dir.file("cost.yaml"), description("cost", ""));
  r = run_kiln(dir, "plan " + dir.file("cost.yaml") + common);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("price_per_node_hour") != std::string::npos);

  r = run_kiln(dir, "plan " + dir.file("app.yaml") + " --db " + dir.file("none.sqlite"));
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("no benchmark store") != std::string::npos);
}

TEST_CASE("kiln plan for a remote GPU node without measurements: spec priors, marked as such", "[perfmodel][plan]") {
  TempDir dir;
  const std::string db = synthetic_store(dir);  // this machine's profile only: nothing for the target
  const std::string common = " --db " + db + " --cache-dir " + dir.file("cache") + " -o " + dir.file("out") + " --json";
  write_file(dir.file("app.yaml"), description("throughput", "") + "");
  // The design's example target: AMD EPYC 9654 CPUs and four H100s, both known only by their spec sheets.
  const std::string hpc_gpu = std::string(KILN_EXAMPLES_DIR) + "/targets/hpc-gpu-slurm.yaml";
  KilnRun r = run_kiln(dir, "plan " + dir.file("app.yaml") + " --target " + hpc_gpu + common);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  nlohmann::json plan = nlohmann::json::parse(r.out);
  CHECK(plan.at("target").at("cpu_prior").at("id") == "amd-epyc-9654");
  CHECK(plan.at("target").at("gpus").at("count") == 4);
  CHECK(plan.at("target").at("gpus").at("prior").at("id") == "nvidia-h100-sxm");
  CHECK(plan.at("fit").is_null());  // nothing was fitted: no measured profile
  int cpu = 0, gpu = 0;
  for (const auto& c : plan.at("candidates")) {
    CHECK(c.at("latency_source") == "prior");
    if (c.at("device") == "cuda") {
      ++gpu;
      CHECK(c.at("instances") == 4);
      CHECK((c.at("precision") == "fp32" || c.at("precision") == "fp16" || c.at("precision") == "bf16"));
    } else {
      ++cpu;
    }
  }
  CHECK(cpu > 0);
  CHECK(gpu == 3 * 3);  // fp32, fp16, bf16 x batches 1, 8, 32
  std::string said;
  for (const auto& line : plan.at("explanation")) said += line.get<std::string>() + "\n";
  CHECK(said.find("GPU latencies are NVIDIA H100 SXM5 80GB from its datasheet (prior, not measured)") != std::string::npos);
  CHECK(said.find("CPU latencies are AMD EPYC 9654") != std::string::npos);
  CHECK(said.find("precision int8 on the GPUs") != std::string::npos);

  // A cloud node of unknown CPUs and one GPU of `gpu_model`: its plan, and the explanation in `said`.
  const auto plan_gpu_box = [&](const std::string& gpu_model, int memory_gb) {
    const std::string path = dir.file("gpu-box.yaml");
    write_file(path, "name: gpu-box\nkind: cloud\nscheduler: kubernetes\ncontainer_runtime: docker\n"
                     "node: {cpu: {model: Imaginary CPU 9000, cores: 16}, memory_gb: 128, gpus: [{model: " +
                         gpu_model + ", count: 1, memory_gb: " + std::to_string(memory_gb) + "}]}\n");
    r = run_kiln(dir, "plan " + dir.file("app.yaml") + " --target " + path + common);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    said.clear();
    const nlohmann::json planned = nlohmann::json::parse(r.out);
    for (const auto& line : planned.at("explanation")) said += line.get<std::string>() + "\n";
    return planned;
  };

  // CPUs kiln knows nothing about, GPUs it has a prior for: the GPUs alone, and said so.
  plan = plan_gpu_box("NVIDIA L4", 24);
  for (const auto& c : plan.at("candidates")) CHECK(c.at("device") == "cuda");
  CHECK(said.find("CPUs (Imaginary CPU 9000) are not planned for") != std::string::npos);
  CHECK(plan.at("target").at("gpus").at("prior").at("id") == "nvidia-l4");

  // A GPU without bf16 units (Turing): bf16 is excluded with the reason, fp16 stays.
  plan = plan_gpu_box("Tesla T4", 16);
  bool fp16 = false;
  for (const auto& c : plan.at("candidates")) {
    CHECK(c.at("precision") != "bf16");
    fp16 = fp16 || c.at("precision") == "fp16";
  }
  CHECK(fp16);
  CHECK_THAT(said, Catch::Contains("precision bf16 on the GPUs"));
  CHECK_THAT(said, Catch::Contains("NVIDIA T4 16GB has no bf16 units"));
}

TEST_CASE("kiln plan for a remote GPU node with a measured GPU profile: predicted from it, not the prior", "[perfmodel][plan]") {
  TempDir dir;
  const std::string db = synthetic_store(dir);  // this machine's CPU profile
  // The GPU's profile as a GPU node exports it (`kiln bench-target --device cuda` there), imported here.
  const std::string gpu_db = dir.file("gpu.sqlite");
  synthetic_gpu_store_put(gpu_db);
  KilnRun r = run_kiln(dir, "bench-target --db " + gpu_db + " --export " + dir.file("gpu.json"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  r = run_kiln(dir, "bench-target --db " + db + " --import " + dir.file("gpu.json"));
  REQUIRE(r.exit_code == 0);
  const TargetFingerprint gpu = synthetic_gpu_fingerprint();
  r = run_kiln(dir, "bench-target --db " + db + " --list --json");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json list = nlohmann::json::parse(r.out);
  bool listed = false;
  for (const auto& t : list.at("targets")) {
    if (t.at("id") == "nvidia-h100-sxm") CHECK(t.at("replaced_by") == gpu.id);
    if (t.at("id") != gpu.id) continue;
    listed = true;
    CHECK(t.at("device") == "gpu");
    CHECK(t.at("source") == "imported");
  }
  CHECK(listed);

  write_file(dir.file("app.yaml"), description("throughput", ""));
  const std::string hpc_gpu = std::string(KILN_EXAMPLES_DIR) + "/targets/hpc-gpu-slurm.yaml";
  r = run_kiln(dir, "plan " + dir.file("app.yaml") + " --target " + hpc_gpu + " --db " + db + " --cache-dir " + dir.file("cache") +
                        " -o " + dir.file("out") + " --json");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  int gpu_candidates = 0;
  double fp16_b32 = 0, fp32_b32 = 0;
  for (const auto& c : plan.at("candidates")) {
    if (c.at("device") != "cuda") {
      CHECK(c.at("latency_source") == "prior");  // the EPYC 9654 has no stored profile
      continue;
    }
    ++gpu_candidates;
    CHECK(c.at("latency_source") == "predicted");
    CHECK(c.at("predicted_ms").get<double>() > 0);
    if (c.at("batch") == 32) (c.at("precision") == "fp16" ? fp16_b32 : fp32_b32) = c.at("predicted_ms").get<double>();
  }
  CHECK(gpu_candidates == 3 * 3);  // fp32, fp16, bf16 x batches 1, 8, 32
  CHECK(fp16_b32 < fp32_b32);      // the profile's f16 groups are faster
  std::string said;
  for (const auto& line : plan.at("explanation")) said += line.get<std::string>() + "\n";
  CHECK_THAT(said, Catch::Contains("4 x NVIDIA H100 80GB HBM3, profile " + gpu.id + " (measured)"));
  CHECK_THAT(said, Catch::Contains("GPU latencies are predicted from profile " + gpu.id));
  CHECK_THAT(said, Catch::Contains("host copies"));
  CHECK_THAT(said, Catch::Contains("The profile has no bf16 kernel points: bf16 candidates are priced from its fp32 points."));
  CHECK_THAT(said, !Catch::Contains("GPU latencies are NVIDIA H100 SXM5 80GB from its datasheet"));
}

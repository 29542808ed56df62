// `kiln predict`: without a profile, one clean error pointing at `kiln bench-target`; with a
// (synthetic) profile for this machine, the JSON carries the prediction, memory, target and fit.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "perfmodel/fingerprint.h"
#include "perfmodel/precision_compile.h"
#include "perfmodel/store.h"
#include "tests/perfmodel/synthetic_profile.h"
#include "tests/perfmodel/run_kiln.h"
#include "tests/perfmodel/temp_dir.h"

using namespace kiln::perf;
using namespace kiln::perf::testing;

namespace {

KilnRun run_predict(const TempDir& dir, const std::string& args) { return run_kiln(dir, "predict " + args); }

const std::string kModel = std::string(KILN_EXAMPLES_DIR) + "/fashion-mnist/model.onnx";

}  // namespace

TEST_CASE("kiln predict without a profile tells the user to run bench-target", "[perfmodel][predict]") {
  TempDir dir;
  KilnRun r = run_predict(dir, kModel + " --db " + dir.file("none.sqlite"));
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("kiln: error: no benchmark store") != std::string::npos);
  CHECK(r.err.find("kiln bench-target") != std::string::npos);
  CHECK_FALSE(std::ifstream(dir.file("none.sqlite")).good());  // not created

  // A store holding only another machine's profile.
  {
    auto store = BenchmarkStore::open(dir.file("other.sqlite"));
    REQUIRE(store);
    TargetFingerprint other = fingerprint_local();
    other.cpu_model = "Some Other CPU";
    other.id = fingerprint_id(other);
    REQUIRE((*store)->target_put(other, "imported"));
  }
  r = run_predict(dir, kModel + " --db " + dir.file("other.sqlite"));
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("no profile for this machine") != std::string::npos);
  CHECK(r.err.find("--import") != std::string::npos);
}

TEST_CASE("kiln predict --json has the prediction, memory, target and fit", "[perfmodel][predict]") {
  TempDir dir;
  const TargetFingerprint fp = fingerprint_local();
  synthetic_one_thread_put(dir.file("b.sqlite"), "f32");
  const KilnRun r = run_predict(dir, kModel + " --db " + dir.file("b.sqlite") + " --batch 4 --threads 1 --precision fp32 --json");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("predicted_median_ms").get<double>() > 0);
  CHECK(j.at("throughput_per_s").get<double>() == Approx(4 * 1000.0 / j.at("predicted_median_ms").get<double>()));
  CHECK(j.at("weights_bytes").get<int64_t>() > 0);
  CHECK(j.at("peak_memory_bytes").get<int64_t>() == j.at("weights_bytes").get<int64_t>() + j.at("arena_bytes").get<int64_t>());
  CHECK(j.at("target") == fp.id);
  CHECK(j.at("batch") == 4);
  CHECK(j.at("threads") == 1);
  CHECK(j.at("fit").at("method").is_string());
  CHECK(j.at("fit").at("points_used") == 4 * 48);
}

TEST_CASE("kiln predict refuses a precision the profile has no kernels of, rather than pricing it from fp32's", "[perfmodel][predict]") {
  TempDir dir;
  const TargetFingerprint fp = fingerprint_local();
  synthetic_one_thread_put(dir.file("b.sqlite"), "f32");  // a profile of fp32 kernels only, like one taken before kiln swept int8 on AVX2
  for (const std::string precision : {"int8", "bf16"}) {
    const std::string dtype = precision_dtype(precision);
    const KilnRun r = run_predict(dir, kModel + " --db " + dir.file("b.sqlite") + " --precision " + precision);
    INFO(precision << ": " << r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("cannot predict " + precision + " on " + fp.cpu_model + ": ") != std::string::npos);
    // Why: the CPU cannot run it natively, or the profile lacks its kernels.
    const std::string unsupported = fingerprint_dtype_unsupported(fp, dtype);
    CHECK(r.err.find(unsupported.empty() ? "has no " + dtype + " kernel measurements" : unsupported) != std::string::npos);
  }

  // With int8 kernels measured (where the CPU runs int8), int8 is predicted, with the plan's note
  // on AVX2's 7-bit weights where it applies.
  if (!fingerprint_dtype_unsupported(fp, "int8").empty()) return;
  synthetic_one_thread_put(dir.file("b.sqlite"), "int8");
  const KilnRun r = run_predict(dir, kModel + " --db " + dir.file("b.sqlite") + " --precision int8 --json");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("precision") == "int8");
  CHECK(j.at("predicted_median_ms").get<double>() > 0);
  const std::string note = fingerprint_dtype_note(fp, "int8");
  if (note.empty()) CHECK_FALSE(j.contains("notes"));
  else CHECK(j.at("notes").at(0) == note);
}

TEST_CASE("kiln predict --target PRIOR: a datasheet roofline for a device kiln cannot measure here", "[perfmodel][predict]") {
  TempDir dir;
  const std::string common = " --db " + dir.file("none.sqlite") + " --batch 8 --json";
  KilnRun r = run_predict(dir, kModel + " --target nvidia-h100-sxm --precision fp16" + common);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json fp16 = nlohmann::json::parse(r.out);
  CHECK(fp16.at("latency_source") == "prior");
  CHECK(fp16.at("device") == "cuda");
  CHECK(fp16.at("target") == "nvidia-h100-sxm");
  CHECK(fp16.at("batch") == 8);
  CHECK(fp16.at("predicted_median_ms").get<double>() > fp16.at("predicted_device_ms").get<double>());  // + host copies
  CHECK(fp16.at("prior").at("assumptions").get<std::string>().find("prior, not measured") != std::string::npos);
  r = run_predict(dir, kModel + " --target nvidia-h100-sxm --precision fp32" + common);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json fp32 = nlohmann::json::parse(r.out);
  CHECK(fp32.at("predicted_device_ms").get<double>() > fp16.at("predicted_device_ms").get<double>());
  CHECK(fp32.at("weights_bytes").get<int64_t>() == 2 * fp16.at("weights_bytes").get<int64_t>());
  CHECK_FALSE(std::ifstream(dir.file("none.sqlite")).good());  // the store is not created
  // The plan priced is the one the GPU runs (the CUDA pipeline's), not the CPU's.
  r = run_predict(dir, kModel + " --target nvidia-h100-sxm --precision fp16 --db " + dir.file("none.sqlite") + " --batch 8");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("with the CUDA pipeline"));
  // bf16: the same width as fp16 on the H100's tensor cores; refused on a GPU without bf16 units.
  r = run_predict(dir, kModel + " --target nvidia-h100-sxm --precision bf16" + common);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json bf16 = nlohmann::json::parse(r.out);
  CHECK(bf16.at("weights_bytes") == fp16.at("weights_bytes"));
  CHECK(bf16.at("predicted_device_ms").get<double>() == Approx(fp16.at("predicted_device_ms").get<double>()));
  r = run_predict(dir, kModel + " --target nvidia-t4 --precision bf16" + common);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("NVIDIA T4 16GB has no bf16 units"));

  r = run_predict(dir, kModel + " --target amd-epyc-9654 --threads 4" + common);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out).at("device") == "cpu");

  r = run_predict(dir, kModel + " --target nvidia-h100-sxm --precision int8" + common);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("CUDA backend runs fp32, TF32, fp16 and bf16 only") != std::string::npos);
  r = run_predict(dir, kModel + " --precision fp16" + common);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("fp16 is for GPU targets") != std::string::npos);
}

TEST_CASE("kiln predict --target PRIOR with a measured GPU profile stored: predicted from the profile", "[perfmodel][predict]") {
  TempDir dir;
  const std::string db = dir.file("gpu.sqlite");
  synthetic_gpu_store_put(db);  // as `kiln bench-target --device cuda` on an H100 would store it
  const std::string common = " --db " + db + " --batch 8 --json";
  KilnRun r = run_predict(dir, kModel + " --target nvidia-h100-sxm --precision fp16" + common);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json fp16 = nlohmann::json::parse(r.out);
  CHECK(fp16.at("latency_source") == "predicted");
  CHECK(fp16.at("device") == "cuda");
  CHECK(fp16.at("target") == synthetic_gpu_fingerprint().id);
  CHECK(fp16.at("threads") == 1);
  CHECK(fp16.at("fit").at("points_used").get<int>() > 0);
  // Device time from the profile, plus the host copies as the H100's prior prices them.
  CHECK(fp16.at("host_copies").at("ms").get<double>() > 0);
  CHECK(fp16.at("predicted_median_ms").get<double>() ==
        Approx(fp16.at("predicted_device_ms").get<double>() + fp16.at("host_copies").at("ms").get<double>()));
  r = run_predict(dir, kModel + " --target " + synthetic_gpu_fingerprint().id + " --precision fp32" + common);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json fp32 = nlohmann::json::parse(r.out);
  CHECK(fp32.at("latency_source") == "predicted");
  CHECK(fp32.at("predicted_device_ms").get<double>() > fp16.at("predicted_device_ms").get<double>());
  r = run_predict(dir, kModel + " --target nvidia-h100-sxm --precision int8" + common);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("CUDA backend runs fp32, TF32, fp16 and bf16 only") != std::string::npos);

  // With host_link points in the profile, the host copies are priced from them instead of the prior.
  {
    auto store = BenchmarkStore::open(db);
    REQUIRE(store);
    auto run = (*store)->run_begin(synthetic_gpu_fingerprint().id, "synthetic host link");
    REQUIRE(run);
    for (int64_t batch : {1, 8, 64}) {
      Measurement m;
      m.kind = kKindHostLink;
      m.op = "global_avgpool";
      m.key = "host_link b" + std::to_string(batch);
      m.dtype = "f32";
      m.batch = batch;
      m.bytes = 4.0 * static_cast<double>(batch) * (3 * 224 * 224 + 3);
      m.median_ms = 0.02 + m.bytes / 40e6;  // 0.02 ms + 40 GB/s
      m.runs = 20;
      REQUIRE((*store)->measurement_put(synthetic_gpu_fingerprint().id, *run, m));
    }
  }
  r = run_predict(dir, kModel + " --target nvidia-h100-sxm --precision fp16" + common);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json measured = nlohmann::json::parse(r.out);
  CHECK(measured.at("host_copies").at("how") == "measured: 0.02 ms + 40.0 GB/s (3 points)");
  CHECK(measured.at("predicted_device_ms").get<double>() == Approx(fp16.at("predicted_device_ms").get<double>()));
  CHECK(measured.at("host_copies").at("ms").get<double>() > 0.02);
  CHECK(measured.at("host_copies").at("ms").get<double>() != Approx(fp16.at("host_copies").at("ms").get<double>()));
}

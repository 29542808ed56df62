// The runner with a fake kiln (a shell script): stages run as child processes, a crash or a
// runaway fails that job only, a cancel kills the running stage.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "service/jobs/job_runner.h"

namespace fs = std::filesystem;
using namespace kiln::jobs;

namespace {

struct RunnerFixture {
  fs::path dir = fs::temp_directory_path() / ("kiln-runner-" + job_id_new());
  std::unique_ptr<JobStore> store;

  // The fake kiln: the job's description.yaml says what each verb does.
  RunnerFixture() {
    fs::create_directories(dir / "jobs");
    const fs::path fake = dir / "fake-kiln";
    std::ofstream(fake) << "#!/bin/sh\n"
                          "case \"$1\" in\n"
                          "  compile) grep -q crash description.yaml && kill -SEGV $$;\n"
                          "           grep -q hang description.yaml && sleep 60;\n"
                          "           echo plan > model.kiln ;;\n"
                          "  optimize) [ -e ../../measuring ] && echo overlap >> ../../overlaps; touch ../../measuring; sleep 0.3;\n"
                          "            rm ../../measuring; mkdir -p optimize && echo chosen-plan > optimize/model.kiln &&\n"
                          "            if grep -q gpus target.yaml; then\n"
                          "              echo '{\"chosen\": {\"name\": \"fp16 b8 cuda x1\", \"device\": \"cuda\", \"precision\": \"fp16\"}}' > optimize/report.json;\n"
                          "            else\n"
                          "              echo '{\"candidates\": [{\"name\": \"int8 b8 t1x2\", \"chosen\": true}], '\\\n"
                          "                   '\"chosen\": {\"name\": \"int8 b8 t1x2\", \"device\": \"cpu\", \"precision\": \"int8\"}, '\\\n"
                          "                   '\"explanation\": [\"why\"]}' > optimize/report.json;\n"
                          "            fi ;;\n"
                          "  verify) echo \"$@\" > verify.args; echo '{}' ;;\n"
                          "  image) echo \"$@\" > image.args; mkdir -p image && echo tar > image/image.oci.tar ;;\n"
                          "esac\n"
                          "exit 0\n";
    fs::permissions(fake, fs::perms::owner_all);
    auto opened = JobStore::open((dir / "jobs.db").string());
    REQUIRE(opened);
    store = std::move(*opened);
  }
  ~RunnerFixture() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string submit(const std::string& behaviour, const std::string& target_yaml = "") {
    JobRecord j;
    j.id = job_id_new();
    j.name = behaviour;
    fs::create_directories(job_dir(dir.string(), j.id));
    std::ofstream(fs::path(job_dir(dir.string(), j.id)) / "description.yaml") << behaviour << '\n';
    if (!target_yaml.empty()) std::ofstream(fs::path(job_dir(dir.string(), j.id)) / "target.yaml") << target_yaml;
    auto created = store->job_create(j, job_stage_names(), "", "");
    REQUIRE(created);
    return created->id;
  }
  JobRecord wait_final(const std::string& id, std::chrono::seconds limit = std::chrono::seconds(30)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto job = store->job_get(id);
      REQUIRE(job);
      REQUIRE(job->has_value());
      if (job_state_is_final((*job)->state) || std::chrono::steady_clock::now() > end) return **job;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  JobRunnerOptions options(std::chrono::seconds limit = std::chrono::seconds(60)) {
    JobRunnerOptions o;
    o.data_dir = dir.string();
    o.kiln_exe = (dir / "fake-kiln").string();
    o.workers = 2;
    o.job_time_limit = limit;
    return o;
  }
};

}  // namespace

TEST_CASE("job runner: stages run as children, a crashing stage fails its job only", "[service]") {
  RunnerFixture f;
  JobRunner runner(*f.store, f.options());
  const std::string good = f.submit("fine");
  const std::string bad = f.submit("crash");
  runner.start();
  const JobRecord ok = f.wait_final(good);
  const JobRecord crashed = f.wait_final(bad);
  CHECK(ok.state == "succeeded");
  CHECK(ok.progress == Approx(100));
  auto artifacts = f.store->artifacts_list(good);
  REQUIRE(artifacts);
  bool plan = false, image = false;
  for (const ArtifactRecord& a : *artifacts) {
    plan = plan || (a.name == "model.kiln" && a.kind == "kiln_plan" && a.sha256.size() == 64);
    image = image || (a.name == "image.oci.tar" && a.path == "image/image.oci.tar");
  }
  CHECK(plan);
  CHECK(image);
  CHECK(crashed.state == "failed");
  CHECK(crashed.error.find("stage compile: the stage's process died of signal 11") != std::string::npos);
  CHECK(crashed.stages[0].state == "done");
  CHECK(crashed.stages[1].state == "failed");
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// When the target can be priced (a stored profile, or a spec prior as for this cloud node) the
// compile stage plans (kiln optimize) and packages its choice, whose candidates reach report.json;
// a choice for GPU nodes is verified emulated and packaged for the GPU at its precision; this
// machine without a profile compiles unplanned and says why in the log.
TEST_CASE("job runner: plannable targets are optimized, GPU choices packaged for the GPU, an unprofiled machine compiles unplanned",
          "[service]") {
  RunnerFixture f;
  const std::string app = "model: {path: model.onnx}\ninputs: {x: {shape: [1, 4], dtype: float32}}\nobjective: latency\n";
  const std::string cloud = std::string("name: t\nkind: cloud\nscheduler: kubernetes\ncontainer_runtime: docker\nnodes: 1\n") +
                            "node: {cpu: {model: AMD EPYC 9654, cores: 8}, memory_gb: 64}\n";
  const std::string local = std::string("name: l\nkind: local\nscheduler: none\ncontainer_runtime: docker\nnodes: 1\n") +
                            "node: {cpu: {model: x, cores: 2}, memory_gb: 8}\n";
  const std::string gpu = std::string("name: g\nkind: hpc\nscheduler: slurm\ncontainer_runtime: apptainer\nnodes: 1\n") +
                          "node: {cpu: {model: AMD EPYC 9654, cores: 8}, memory_gb: 64, gpus: [{model: H100, count: 1, memory_gb: 80}]}\n";
  const std::string planned = f.submit("name: cloud\n" + app, cloud);
  const std::string planned_too = f.submit("name: cloud-too\n" + app, cloud);
  const std::string on_gpus = f.submit("name: gpus\n" + app, gpu);
  const std::string unprofiled = f.submit("name: here\n" + app, local);
  JobRunner runner(*f.store, f.options());
  runner.start();
  CHECK(f.wait_final(planned).state == "succeeded");
  CHECK(f.wait_final(planned_too).state == "succeeded");
  CHECK(f.wait_final(on_gpus).state == "succeeded");
  // Two workers, two planned jobs: their measuring stages ran one after the other.
  INFO(file_text(fs::path(job_dir(f.dir.string(), planned)) / "compile.log") + "|" + file_text(fs::path(job_dir(f.dir.string(), planned_too)) / "compile.log"));
  CHECK_FALSE(fs::exists(f.dir / "overlaps"));
  CHECK(file_text(fs::path(job_dir(f.dir.string(), planned)) / "compile.log")
            .append(file_text(fs::path(job_dir(f.dir.string(), planned_too)) / "compile.log"))
            .find("waiting for another job's measurements to finish") != std::string::npos);
  CHECK(f.wait_final(unprofiled).state == "succeeded");

  const fs::path planned_dir = job_dir(f.dir.string(), planned);
  CHECK(file_text(planned_dir / "model.kiln") == "chosen-plan\n");  // the choice is what gets packaged
  const std::string report = file_text(planned_dir / "report.json");
  CHECK(report.find("\"chosen\": \"int8 b8 t1x2\"") != std::string::npos);
  CHECK(report.find("\"name\": \"int8 b8 t1x2\"") != std::string::npos);
  CHECK(report.find("\"explanation\"") != std::string::npos);
  CHECK(file_text(planned_dir / "image.args").find("--device cpu") != std::string::npos);
  CHECK(file_text(planned_dir / "verify.args").find("--emulate") == std::string::npos);
  const fs::path gpu_dir = job_dir(f.dir.string(), on_gpus);
  CHECK(file_text(gpu_dir / "compile.log").find("not planned") == std::string::npos);
  CHECK(file_text(gpu_dir / "model.kiln") == "chosen-plan\n");
  CHECK(file_text(gpu_dir / "verify.args").find("--device cuda --cuda-precision fp16 --emulate") != std::string::npos);
  CHECK(file_text(gpu_dir / "image.args").find("--device cuda --cuda-precision fp16") != std::string::npos);
  const fs::path here_dir = job_dir(f.dir.string(), unprofiled);
  const std::string here_log = file_text(here_dir / "compile.log");
  INFO(here_log);
  CHECK(here_log.find("not planned (") != std::string::npos);
  CHECK(here_log.find("kiln bench-target") != std::string::npos);  // what to run to get it planned
  CHECK(file_text(here_dir / "model.kiln") == "plan\n");
}

TEST_CASE("job runner: a runaway stage is killed at the job's time limit, cancel kills a running stage", "[service]") {
  RunnerFixture f;
  JobRunner runner(*f.store, f.options(std::chrono::seconds(1)));
  const std::string slow = f.submit("hang");
  runner.start();
  const auto t0 = std::chrono::steady_clock::now();
  const JobRecord timed_out = f.wait_final(slow);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(timed_out.state == "failed");
  CHECK(timed_out.error.find("time limit of 1 s") != std::string::npos);
  runner.stop();

  JobRunner patient(*f.store, f.options());
  const std::string cancelled = f.submit("hang");
  patient.start();
  for (int i = 0; i < 500; ++i) {
    auto job = f.store->job_get(cancelled);
    REQUIRE(job);
    if ((*job)->stage == "compile") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto changed = patient.cancel(cancelled);
  REQUIRE(changed);
  CHECK(*changed);
  const auto t1 = std::chrono::steady_clock::now();
  patient.stop();  // joins the worker: returns only once the killed child was reaped
  CHECK(std::chrono::steady_clock::now() - t1 < std::chrono::seconds(10));
  auto job = f.store->job_get(cancelled);
  REQUIRE(job);
  CHECK((*job)->state == "cancelled");
  CHECK((*job)->stages[1].state == "skipped");
}

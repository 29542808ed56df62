// kiln validate: "ok" and exit 0 for every example; one "kiln: error: FILE[:LINE]: POINTER: ..."
// line per violation and exit 1 otherwise; never a crash or a hang.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/process_temp_dir.h"

namespace fs = std::filesystem;

namespace {

struct Run {
  int exit_code = -1;
  bool crashed = false;
  std::string output;
};

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

fs::path write_file(const std::string& name, const std::string& text) {
  static const kiln::test::ProcessTempDir dir("kiln-validate-test");
  const fs::path p = dir.path() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

const std::string kTarget =
    "name: t\nkind: hpc\nscheduler: slurm\ncontainer_runtime: apptainer\nnode:\n  cpu: {model: x, cores: 4}\n"
    "  memory_gb: 8\n  gpus: [{model: H100, count: four, memory_gb: 80}]\n";

}  // namespace

TEST_CASE("kiln validate accepts every example", "[cli][validate]") {
  const fs::path root = KILN_SOURCE_DIR;
  for (const char* file : {"examples/fashion-mnist/application.yaml", "examples/targets/local-cpu.yaml",
                           "examples/targets/hpc-gpu-slurm.yaml", "examples/targets/cloud-k8s-cpu.yaml"}) {
    const Run r = run_kiln("validate " + (root / file).string());
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find(": ok (") != std::string::npos);
  }
}

TEST_CASE("kiln validate names each bad field, exits 1", "[cli][validate]") {
  const fs::path bad = write_file("target.yaml", kTarget + "slurm: {partion: gpu}\n");
  const Run r = run_kiln("validate " + bad.string());
  INFO(r.output);
  REQUIRE_FALSE(r.crashed);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("target.yaml:8: /node/gpus/0/count: expected integer >= 1 and <= 64, got \"four\"") !=
        std::string::npos);
  CHECK(r.output.find("target.yaml:9: /slurm/partion: unknown field; did you mean 'partition'?") != std::string::npos);

  const Run j = run_kiln("validate --json " + bad.string() + " 2>/dev/null");
  CHECK(j.exit_code == 1);
  const nlohmann::json out = nlohmann::json::parse(j.output);
  CHECK(out["valid"] == false);
  CHECK(out["kind"] == "target");
  REQUIRE(out["errors"].size() == 2);
  CHECK(out["errors"][0]["pointer"] == "/node/gpus/0/count");
  CHECK(out["errors"][0]["line"] == 8);
}

TEST_CASE("kiln validate: syntax errors, deep nesting, unknown kind, --kind", "[cli][validate]") {
  const Run syntax = run_kiln("validate " + write_file("syntax.yaml", "name: x\nmodel: [\n").string());
  CHECK(syntax.exit_code == 1);
  CHECK(syntax.output.find("syntax.yaml:3:1: YAML syntax error") != std::string::npos);

  const Run deep = run_kiln("validate " + write_file("deep.yaml", std::string(100000, '[')).string());
  INFO(deep.output);
  CHECK_FALSE(deep.crashed);
  CHECK(deep.exit_code == 1);
  CHECK(deep.output.find("nesting deeper than 64 levels (limit 64)") != std::string::npos);

  const Run unknown = run_kiln("validate " + write_file("what.yaml", "name: x\n").string());
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.output.find("--kind application|target") != std::string::npos);

  const Run as_app = run_kiln("validate --kind application " + write_file("t2.yaml", kTarget).string());
  CHECK(as_app.exit_code == 1);
  CHECK(as_app.output.find("/kind: unknown field") != std::string::npos);

  const Run missing = run_kiln("validate /nonexistent/kiln.yaml");
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("cannot open file") != std::string::npos);

  CHECK(run_kiln("validate x.yaml --kind bogus").exit_code == 2);
}

// containers/recipes: every recipe for the example targets (read through api/) and a GPU
// Kubernetes target: the YAML parses and has what Kubernetes needs, every #SBATCH directive is a
// documented sbatch option, bash accepts the script, the Apptainer definition and the Dockerfile
// have their sections; quoting survives hostile names; the same spec gives the same bytes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "api/description.h"
#include "containers/recipes/recipes.h"
#include "tests/support/process_temp_dir.h"

using namespace kiln;
using namespace kiln::recipes;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = KILN_SOURCE_DIR;
const std::string kDigest = "sha256:" + std::string(64, 'a');

// Every long option of sbatch(1), Slurm 22.05 (the OPTIONS section of its man page; Debian 12
// ships 22.05.8). Kept here, not taken from the code under test, so a typo cannot hide.
const std::set<std::string> kSbatchLongOptions = {
    "account", "acctg-freq", "array", "batch", "bb", "bbf", "begin", "chdir", "cluster-constraint", "clusters",
    "comment", "constraint", "container", "contiguous", "core-spec", "cores-per-socket", "cpu-freq", "cpus-per-gpu",
    "cpus-per-task", "deadline", "delay-boot", "dependency", "distribution", "error", "exclude", "exclusive", "export",
    "export-file", "extra-node-info", "get-user-env", "gid", "gpu-bind", "gpu-freq", "gpus", "gpus-per-node",
    "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "help", "hint", "hold", "ignore-pbs", "input", "job-name",
    "kill-on-invalid-dep", "licenses", "mail-type", "mail-user", "mcs-label", "mem", "mem-bind", "mem-per-cpu",
    "mem-per-gpu", "mincpus", "network", "nice", "no-kill", "no-requeue", "nodefile", "nodelist", "nodes", "ntasks",
    "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket", "open-mode", "output", "overcommit",
    "oversubscribe", "parsable", "partition", "power", "prefer", "priority", "profile", "propagate", "qos", "quiet",
    "reboot", "requeue", "reservation", "signal", "sockets-per-node", "spread-job", "switches", "test-only",
    "thread-spec", "threads-per-core", "time", "time-min", "tmp", "uid", "usage", "use-min-nodes", "verbose", "version",
    "wait", "wait-all-nodes", "wckey", "wrap"};

// The directives sbatch would read (it stops at the first line that is neither a comment nor
// blank), as "option" -> "value"; a directive that is not "--documented-option[=value]" is an
// error naming it.
struct SbatchDirectives {
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<std::string> errors;
  bool has(const std::string& option) const {
    return std::any_of(options.begin(), options.end(), [&](const auto& o) { return o.first == option; });
  }
  std::string value(const std::string& option) const {
    for (const auto& o : options)
      if (o.first == option) return o.second;
    return "";
  }
};

SbatchDirectives sbatch_directives(const std::string& script) {
  SbatchDirectives d;
  std::istringstream in(script);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (first) {
      first = false;
      continue;  // the #! line
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line[0] != '#') break;
    if (line.rfind("#SBATCH", 0) != 0) continue;
    std::string arg = line.substr(7);
    arg.erase(0, arg.find_first_not_of(" \t"));
    if (arg.rfind("--", 0) != 0) {
      d.errors.push_back("not a long option: " + line);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string option = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (!kSbatchLongOptions.count(option)) d.errors.push_back("not an sbatch option: --" + option);
    if (value.find_first_of(" \t\"'") != std::string::npos) d.errors.push_back("whitespace or quote in: " + line);
    d.options.emplace_back(option, value);
  }
  return d;
}

api::TargetInfrastructure target_example(const std::string& file) {
  auto t = api::target_load((kRoot / "examples/targets" / file).string());
  INFO(file << ": " << (t ? "" : t.message()));
  REQUIRE(t);
  return t.value();
}

// A GPU node pool scheduled by Kubernetes, with every KubernetesOptions field set.
api::TargetInfrastructure target_gpu_kubernetes() {
  api::TargetInfrastructure t = target_example("cloud-k8s-cpu.yaml");
  t.name = "cloud-k8s-gpu";
  t.nodes = 2;
  t.node.gpus = {api::Gpu{"A100-SXM4-40GB", 2, 40}};
  t.kubernetes->service_account = "kiln-runner";
  t.kubernetes->image_pull_secret = "registry-credentials";
  t.kubernetes->node_selector["cloud.google.com/gke-accelerator"] = "nvidia-tesla-a100";
  return t;
}

// What kiln image derives from a plugin built against CUDA 13 and cuDNN 9 (this build's: readelf
// -d libkiln_cuda.so names libcublasLt.so.13 and libcudnn.so.9; cuDNN's folder adds the rest).
const std::vector<std::string> kCuda13Libraries = {
    "libcublasLt.so.13", "libcudnn.so.9", "libcudnn_adv.so.9", "libcudnn_cnn.so.9", "libcudnn_engines_precompiled.so.9",
    "libcudnn_engines_runtime_compiled.so.9", "libcudnn_graph.so.9", "libcudnn_heuristic.so.9", "libcudnn_ops.so.9"};

DeploymentSpec spec_for(const api::TargetInfrastructure& t) {
  DeploymentSpec s;
  s.name = "model";
  s.image = deployment_image_reference(t.registry, "model", "1.0");
  s.image_digest = kDigest;
  s.library_paths = {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libdnnl.so.2",
                     "/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib64/ld-linux-x86-64.so.2"};
  s.debian_packages = {"libc6=2.36-9+deb12u14", "libdnnl2=2.6.3-1", "libstdc++6=12.2.0-14+deb12u1"};
  s.model_bytes = 100ull << 20;
  s.kiln_version = "0.4.0";
  s.target = t;
  if (!t.node.gpus.empty()) {
    s.cuda_libraries = kCuda13Libraries;
    s.cuda_image = cuda_base_image(13, 9);
  }
  return s;
}

struct Case {
  std::string label;
  api::TargetInfrastructure target;
};

std::vector<Case> all_cases() {
  return {{"hpc-gpu-slurm", target_example("hpc-gpu-slurm.yaml")},
          {"cloud-k8s-cpu", target_example("cloud-k8s-cpu.yaml")},
          {"local-cpu", target_example("local-cpu.yaml")},
          {"cloud-k8s-gpu", target_gpu_kubernetes()}};
}

fs::path scratch_dir(const std::string& name) {
  static const kiln::test::ProcessTempDir root("kiln-recipes-test");
  const fs::path d = root.path() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string file_read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void file_write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string shell_escape_path(const fs::path& p) { return shell_quote(p.string()); }

// Whether the pod template's labels include every selector label.
bool selects(const YAML::Node& selector, const YAML::Node& labels) {
  if (!selector.IsMap() || selector.size() == 0 || !labels.IsMap()) return false;
  for (const auto& kv : selector) {
    const YAML::Node v = labels[kv.first.as<std::string>()];
    if (!v || v.as<std::string>() != kv.second.as<std::string>()) return false;
  }
  return true;
}

// The lines of a definition-file section, up to the next "%section".
std::vector<std::string> def_section(const std::string& def, const std::string& name) {
  std::vector<std::string> lines;
  std::istringstream in(def);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '%') {
      inside = line == "%" + name;
      continue;
    }
    if (inside && line.find_first_not_of(' ') != std::string::npos) lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

void check_container(const YAML::Node& c, const DeploymentSpec& spec, bool gpu) {
  CHECK(c["image"].as<std::string>() == deployment_image_by_digest(spec));
  CHECK(c["image"].as<std::string>().find("@sha256:") != std::string::npos);
  const YAML::Node res = c["resources"];
  for (const char* kind : {"requests", "limits"}) {
    INFO(kind);
    REQUIRE(res[kind].IsMap());
    CHECK(res[kind]["cpu"].as<std::string>() == std::to_string(kubernetes_cpu(spec)));
    // 2 x 100 MiB + 256 MiB (+ 1 GiB with GPUs), up to 64 MiB
    CHECK(res[kind]["memory"].as<std::string>() == (gpu ? "1536Mi" : "512Mi"));
  }
  CHECK(static_cast<bool>(res["limits"]["nvidia.com/gpu"]) == gpu);
  if (gpu) CHECK(res["limits"]["nvidia.com/gpu"].as<int>() == deployment_gpus(spec));
  std::string device;  // KILN_DEVICE: cuda on GPU pods, unset (cpu) elsewhere
  for (const auto& e : c["env"])
    if (e["name"].as<std::string>() == "KILN_DEVICE") device = e["value"].as<std::string>();
  CHECK(device == (gpu ? "cuda" : ""));
  const YAML::Node sc = c["securityContext"];
  CHECK(sc["runAsNonRoot"].as<bool>());
  CHECK(sc["runAsUser"].as<int>() == 65532);
  CHECK(sc["readOnlyRootFilesystem"].as<bool>());
  CHECK_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  bool tmp = false;
  for (const auto& m : c["volumeMounts"]) tmp = tmp || (m["mountPath"].as<std::string>() == "/tmp");
  CHECK(tmp);
}

bool has_empty_dir(const YAML::Node& pod_spec, const std::string& name) {
  for (const auto& v : pod_spec["volumes"])
    if (v["name"].as<std::string>() == name && v["emptyDir"]) return true;
  return false;
}

}  // namespace

TEST_CASE("the sbatch check catches typos and accepts documented options", "[recipes]") {
  const std::string good = "#!/bin/bash\n# comment\n#SBATCH --gres=gpu:2\n#SBATCH --cpus-per-task=8\n#SBATCH --exclusive\n";
  CHECK(sbatch_directives(good).errors.empty());
  CHECK(sbatch_directives(good).options.size() == 3);
  for (const char* typo : {"#SBATCH --gpu=1", "#SBATCH --cpus-per-tasks=4", "#SBATCH --job_name=x", "#SBATCH -N 1",
                           "#SBATCH --partition=gpu queue"}) {
    INFO(typo);
    CHECK(sbatch_directives("#!/bin/bash\n" + std::string(typo) + "\n").errors.size() == 1);
  }
  // After the first command sbatch reads no more directives: neither does the check.
  CHECK(sbatch_directives("#!/bin/bash\nset -e\n#SBATCH --gpu=1\n").options.empty());
}

TEST_CASE("deployment_resource_name gives DNS-1123 labels", "[recipes]") {
  CHECK(deployment_resource_name("model") == "kiln-model");
  CHECK(deployment_resource_name("ResNet_50 v1.5!") == "kiln-resnet-50-v1-5");
  CHECK(deployment_resource_name("") == "kiln");
  CHECK(deployment_resource_name("--") == "kiln");
  const std::string longest = deployment_resource_name(std::string(100, 'x') + "-y");
  CHECK(longest.size() == 57);
  const std::string cut = deployment_resource_name(std::string(51, 'a') + "-bbbb");
  CHECK(cut == "kiln-" + std::string(51, 'a'));  // cut at 57, then the trailing '-' dropped
}

TEST_CASE("image references: default from the registry, tag replaced by the digest", "[recipes]") {
  CHECK(deployment_image_reference("registry.example.org/team", "model", "latest") ==
        "registry.example.org/team/kiln-model:latest");
  CHECK(deployment_image_reference("", "model", "latest") == "kiln-model:latest");
  DeploymentSpec s;
  s.name = "m";
  s.image_digest = kDigest;
  s.image = "localhost:5000/team/kiln-m:1.0";
  CHECK(deployment_image_by_digest(s) == "localhost:5000/team/kiln-m@" + kDigest);
  s.image = "localhost:5000/kiln-m";
  CHECK(deployment_image_by_digest(s) == "localhost:5000/kiln-m@" + kDigest);
  s.image = "";
  CHECK(deployment_image(s) == "kiln-m:latest");
  CHECK(deployment_image_by_digest(s) == "kiln-m@" + kDigest);
}

TEST_CASE("yaml_scalar round-trips through yaml-cpp and never reads as a bool or number", "[recipes]") {
  const std::vector<std::string> values = {
      "kiln-model", "/v2/health/ready", "yes", "No", "ON", "off", "y", "null", "~", "true", "1.0", "0x1F", "1e3",
      "8080", "a: b", "#x", "- x", "'q'", "\"dq\"", "multi\nline", "tab\there", "ünïcödé", "@at", "`bt", "*alias",
      "&anchor", "!tag", "%dir", "{a}", "[a]", "", " lead", "trail ", "back\\slash", "bell\x07"};
  for (const std::string& v : values) {
    INFO("value [" << v << "] as " << yaml_scalar(v));
    const YAML::Node doc = YAML::Load("k: " + yaml_scalar(v));
    REQUIRE(doc["k"].IsScalar());
    CHECK(doc["k"].as<std::string>() == v);
    if (doc["k"].Tag() == "?") {  // plain: must not resolve to anything but a string
      bool b = false;
      double d = 0;
      CHECK_FALSE(YAML::convert<bool>::decode(doc["k"], b));
      CHECK_FALSE(YAML::convert<double>::decode(doc["k"], d));
    }
  }
}

TEST_CASE("shell_quote gives back the same word through bash", "[recipes]") {
  const fs::path dir = scratch_dir("quote");
  for (const std::string v : {"plain", "with space", "it's", "$HOME", "`id`", "a\"b", "semi;colon", "new\nline", "*"}) {
    INFO(v);
    const fs::path out = dir / "out";
    const std::string cmd = "printf '%s' " + shell_quote(v) + " > " + shell_escape_path(out);
    REQUIRE(std::system(cmd.c_str()) == 0);
    CHECK(file_read(out) == v);
  }
  CHECK(dockerfile_string("a\"b$c\\d\ne") == "\"a\\\"b\\$c\\\\d e\"");
  CHECK(comment_text("a\nb\rc") == "a b c");
}

TEST_CASE("Kubernetes Deployment, Service and Job for every target", "[recipes]") {
  for (const Case& c : all_cases()) {
    SECTION(c.label) {
      const DeploymentSpec spec = spec_for(c.target);
      REQUIRE(deployment_spec_check(spec));
      const bool gpu = !c.target.node.gpus.empty();
      const std::string ns = c.target.kubernetes ? c.target.kubernetes->namespace_name : "";

      const std::vector<YAML::Node> docs = YAML::LoadAll(kubernetes_service_yaml(spec));
      REQUIRE(docs.size() == 2);
      const YAML::Node& dep = docs[0];
      CHECK(dep["apiVersion"].as<std::string>() == "apps/v1");
      CHECK(dep["kind"].as<std::string>() == "Deployment");
      CHECK(dep["metadata"]["name"].as<std::string>() == "kiln-model");
      if (!ns.empty()) CHECK(dep["metadata"]["namespace"].as<std::string>() == ns);
      else CHECK_FALSE(dep["metadata"]["namespace"]);
      CHECK(dep["spec"]["replicas"].as<int64_t>() == c.target.nodes);
      const YAML::Node pod_labels = dep["spec"]["template"]["metadata"]["labels"];
      CHECK(selects(dep["spec"]["selector"]["matchLabels"], pod_labels));
      const YAML::Node pod = dep["spec"]["template"]["spec"];
      REQUIRE(pod["containers"].size() == 1);
      const YAML::Node ctr = pod["containers"][0];
      check_container(ctr, spec, gpu);
      CHECK(ctr["args"][0].as<std::string>() == "serve-model");
      REQUIRE(ctr["ports"].size() == 1);
      CHECK(ctr["ports"][0]["containerPort"].as<int>() == 8080);
      const std::string port_name = ctr["ports"][0]["name"].as<std::string>();
      CHECK(ctr["readinessProbe"]["httpGet"]["path"].as<std::string>() == "/v2/health/ready");
      CHECK(ctr["readinessProbe"]["httpGet"]["port"].as<std::string>() == port_name);
      CHECK(ctr["livenessProbe"]["httpGet"]["path"].as<std::string>() == "/v2/health/live");
      CHECK(ctr["livenessProbe"]["httpGet"]["port"].as<std::string>() == port_name);
      CHECK(pod["securityContext"]["runAsNonRoot"].as<bool>());
      CHECK(pod["securityContext"]["runAsUser"].as<int>() == 65532);
      CHECK(has_empty_dir(pod, "tmp"));
      if (c.target.kubernetes && !c.target.kubernetes->node_selector.empty()) {
        for (const auto& [k, v] : c.target.kubernetes->node_selector) CHECK(pod["nodeSelector"][k].as<std::string>() == v);
      } else {
        CHECK_FALSE(pod["nodeSelector"]);
      }
      if (c.target.kubernetes && !c.target.kubernetes->service_account.empty()) {
        CHECK(pod["serviceAccountName"].as<std::string>() == c.target.kubernetes->service_account);
        CHECK(pod["imagePullSecrets"][0]["name"].as<std::string>() == c.target.kubernetes->image_pull_secret);
      }

      const YAML::Node& svc = docs[1];
      CHECK(svc["apiVersion"].as<std::string>() == "v1");
      CHECK(svc["kind"].as<std::string>() == "Service");
      CHECK(svc["metadata"]["name"].as<std::string>() == "kiln-model");
      CHECK(selects(svc["spec"]["selector"], pod_labels));
      REQUIRE(svc["spec"]["ports"].size() == 1);
      CHECK(svc["spec"]["ports"][0]["targetPort"].as<std::string>() == port_name);
      CHECK(svc["spec"]["ports"][0]["port"].as<int>() == 8080);

      const YAML::Node job = YAML::Load(kubernetes_job_yaml(spec));
      CHECK(job["apiVersion"].as<std::string>() == "batch/v1");
      CHECK(job["kind"].as<std::string>() == "Job");
      CHECK(job["metadata"]["name"].as<std::string>() == "kiln-model-batch");
      CHECK(job["spec"]["backoffLimit"].as<int>() >= 0);
      CHECK(job["spec"]["ttlSecondsAfterFinished"].as<int>() > 0);
      const YAML::Node job_pod = job["spec"]["template"]["spec"];
      CHECK(job_pod["restartPolicy"].as<std::string>() == "Never");
      CHECK_FALSE(selects(svc["spec"]["selector"], job["spec"]["template"]["metadata"]["labels"]));
      REQUIRE(job_pod["initContainers"].size() == 1);
      CHECK(job_pod["initContainers"][0]["args"][0].as<std::string>() == "selftest");
      check_container(job_pod["initContainers"][0], spec, gpu);
      REQUIRE(job_pod["containers"].size() == 1);
      const YAML::Node run = job_pod["containers"][0];
      check_container(run, spec, gpu);
      CHECK(run["args"][0].as<std::string>() == "run");
      CHECK(run["args"][1].as<std::string>() == "/kiln/model/model.kiln");
      bool claim = false;
      for (const auto& v : job_pod["volumes"]) claim = claim || static_cast<bool>(v["persistentVolumeClaim"]["claimName"]);
      CHECK(claim);
      CHECK(has_empty_dir(job_pod, "tmp"));
    }
  }
}

TEST_CASE("Slurm script: documented directives, GPUs, bash syntax", "[recipes]") {
  for (const Case& c : all_cases()) {
    SECTION(c.label) {
      const DeploymentSpec spec = spec_for(c.target);
      const std::string script = slurm_script_text(spec);
      CHECK(script.rfind("#!/bin/bash\n", 0) == 0);
      const SbatchDirectives d = sbatch_directives(script);
      INFO(script);
      for (const std::string& e : d.errors) UNSCOPED_INFO(e);
      CHECK(d.errors.empty());
      CHECK(d.value("job-name") == "kiln-model");
      CHECK(d.value("nodes") == "1");
      CHECK(d.value("ntasks") == "1");
      CHECK(d.value("cpus-per-task") == std::to_string(c.target.node.cpu.cores));
      const int64_t gpus = deployment_gpus(spec);
      CHECK(d.value("mem") == (gpus > 0 ? "1536M" : "512M"));
      CHECK(script.find("SIF=kiln-model-aaaaaaaaaaaa.sif\n") != std::string::npos);
      if (gpus > 0) {
        CHECK(d.value("gres") == "gpu:" + std::to_string(gpus));
        CHECK(script.find(" --nv") != std::string::npos);
        // The container runs on the GPU unless the submitter says KILN_DEVICE=cpu.
        CHECK(script.find("DEVICE=\"${KILN_DEVICE:-cuda}\"") != std::string::npos);
        CHECK(script.find(",KILN_DEVICE=$DEVICE,KILN_CUDA_PRECISION=$PRECISION\" ") != std::string::npos);
      } else {
        CHECK_FALSE(d.has("gres"));
        CHECK(script.find("--nv") == std::string::npos);
        CHECK(script.find("KILN_DEVICE") == std::string::npos);
      }
      if (c.target.slurm) {
        CHECK(d.value("partition") == c.target.slurm->partition);
        CHECK(d.value("account") == c.target.slurm->account);
        CHECK(d.value("time") == c.target.slurm->time_limit);
      }
      CHECK(script.find("set -euo pipefail") != std::string::npos);
      CHECK(script.find("\"$RUNTIME\" build \"$SIF.") != std::string::npos);
      CHECK(script.find("oci-archive://$ARCHIVE") != std::string::npos);
      CHECK(script.find("RUNTIME=apptainer\n") != std::string::npos);
      CHECK(script.find("\"${CONTAINER[@]}\" selftest") != std::string::npos);
      CHECK(script.find("srun ") != std::string::npos);
      CHECK(script.find("run /kiln/model/model.kiln --input \"$INPUT\" --output \"$OUTPUT\"") != std::string::npos);

      const fs::path dir = scratch_dir("slurm-" + c.label);
      file_write(dir / "job.slurm", script);
      const std::string check = "bash -n " + shell_escape_path(dir / "job.slurm");
      CHECK(std::system(check.c_str()) == 0);
      if (std::system("command -v shellcheck > /dev/null 2>&1") == 0) {
        const std::string lint = "shellcheck -S warning " + shell_escape_path(dir / "job.slurm");
        CHECK(std::system(lint.c_str()) == 0);
      }
    }
  }
}

TEST_CASE("Slurm script and definition say singularity when the target does", "[recipes]") {
  api::TargetInfrastructure t = target_example("hpc-gpu-slurm.yaml");
  t.container_runtime = api::ContainerRuntime::singularity;
  const DeploymentSpec spec = spec_for(t);
  const std::string script = slurm_script_text(spec);
  CHECK(script.find("RUNTIME=singularity\n") != std::string::npos);
  CHECK(script.find("apptainer") == std::string::npos);
  const std::string def = apptainer_definition_text(spec);
  CHECK(def.find("singularity build kiln-model.sif kiln.def") != std::string::npos);
  CHECK(def.find("apptainer") == std::string::npos);
}

TEST_CASE("Apptainer definition: header and sections", "[recipes]") {
  for (const Case& c : all_cases()) {
    SECTION(c.label) {
      const DeploymentSpec spec = spec_for(c.target);
      const std::string def = apptainer_definition_text(spec);
      INFO(def);
      // The stages' headers: a static shell first, then the final image from the oci-archive.
      std::vector<std::string> header;
      std::istringstream in(def);
      for (std::string line; std::getline(in, line) && !(!line.empty() && line[0] == '%');)
        if (!line.empty() && line[0] != '#') header.push_back(line);
      const std::vector<std::string> expected = {"Bootstrap: docker", "From: busybox:1.36.1-musl", "Stage: shell",
                                                 "Bootstrap: oci-archive", "From: image.oci.tar", "Stage: final"};
      CHECK(header == expected);
      CHECK(def_section(def, "files from shell") == std::vector<std::string>{"    /bin/busybox /bin/sh"});
      for (const char* s : {"labels", "environment", "runscript", "test", "help"}) {
        INFO(s);
        CHECK_FALSE(def_section(def, s).empty());
      }
      for (const std::string& l : def_section(def, "labels")) {
        const size_t key = l.find_first_not_of(' ');
        CHECK(l.find(' ', key) != std::string::npos);  // "KEY VALUE"
      }
      const auto test = def_section(def, "test");
      CHECK(std::any_of(test.begin(), test.end(), [](const std::string& l) {
        return l.find("/kiln/bin/kiln-runtime selftest") != std::string::npos;
      }));
      const auto env = def_section(def, "environment");
      CHECK(std::any_of(env.begin(), env.end(), [](const std::string& l) { return l.find("KILN_BUNDLE=/kiln") != std::string::npos; }));
      CHECK((def.find("--nv") != std::string::npos) == !c.target.node.gpus.empty());
      CHECK(std::any_of(env.begin(), env.end(), [](const std::string& l) {
              return l.find("export KILN_DEVICE=\"${KILN_DEVICE:-cuda}\"") != std::string::npos;
            }) == !c.target.node.gpus.empty());
    }
  }
}

TEST_CASE("Dockerfile: stages, base for CPU or GPU, non-root, exec form", "[recipes]") {
  for (const Case& c : all_cases()) {
    SECTION(c.label) {
      const DeploymentSpec spec = spec_for(c.target);
      const std::string df = dockerfile_text(spec);
      INFO(df);
      const bool gpu = !c.target.node.gpus.empty();
      const auto froms = lines_starting(df, "FROM ");
      CHECK(froms.size() >= 2);
      CHECK(froms.size() == (gpu ? 3u : 2u));
      CHECK(froms.front() == "FROM debian:bookworm-slim AS libs");
      CHECK(froms.back() == "FROM scratch");
      CHECK((std::find(froms.begin(), froms.end(), "FROM ${CUDA_IMAGE} AS cuda") != froms.end()) == gpu);
      // NVIDIA's cuDNN runtime image with the plugin's CUDA major (13), declared before the first FROM.
      const auto arg = lines_starting(df, "ARG CUDA_IMAGE=");
      CHECK(arg.size() == (gpu ? 1u : 0u));
      if (gpu) {
        CHECK(arg[0].rfind("ARG CUDA_IMAGE=nvidia/cuda:13.", 0) == 0);
        CHECK(arg[0].find("-cudnn-runtime-ubuntu") != std::string::npos);
        CHECK(df.find(arg[0]) < df.find("FROM "));
      }
      CHECK((df.find("ENV KILN_DEVICE=cuda KILN_CUDA_PRECISION=fp32 NVIDIA_VISIBLE_DEVICES=all "
                     "NVIDIA_DRIVER_CAPABILITIES=compute,utility") != std::string::npos) == gpu);
      // Each CUDA library from where that image keeps it (cuBLASLt with the toolkit, cuDNN from
      // its apt package), into a folder the loader searches by default; none of CUDA 12's.
      const auto copy_from = df.find("COPY --from=cuda \\\n");
      CHECK((copy_from != std::string::npos) == gpu);
      if (gpu) {
        CHECK(df.find("      /usr/local/cuda/lib64/libcublasLt.so.13 \\\n", copy_from) != std::string::npos);
        for (const std::string& lib : kCuda13Libraries)
          if (lib.rfind("libcudnn", 0) == 0)
            CHECK(df.find("      /usr/lib/x86_64-linux-gnu/" + lib + " \\\n", copy_from) != std::string::npos);
        CHECK(df.find("      /usr/lib/x86_64-linux-gnu/\n", copy_from) != std::string::npos);
      }
      CHECK(df.find(".so.12") == std::string::npos);
      CHECK((df.find("libcu") != std::string::npos) == gpu);
      const auto user = lines_starting(df, "USER ");
      REQUIRE(user.size() == 1);
      CHECK(user[0] == "USER 65532:65532");
      for (const char* instr : {"ENTRYPOINT ", "CMD "}) {
        const auto l = lines_starting(df, instr);
        REQUIRE(l.size() == 1);
        const auto j = nlohmann::json::parse(l[0].substr(std::string(instr).size()), nullptr, false);
        CHECK(j.is_array());
      }
      CHECK(lines_starting(df, "ENTRYPOINT ")[0] == "ENTRYPOINT [\"/kiln/bin/kiln-runtime\"]");
      CHECK(lines_starting(df, "CMD ")[0] == "CMD [\"serve-model\"]");
      CHECK(df.find("HEALTHCHECK ") != std::string::npos);
      CHECK(df.find("CMD [\"/kiln/bin/kiln-runtime\", \"selftest\"]") != std::string::npos);
      CHECK(lines_starting(df, "EXPOSE ") == std::vector<std::string>{"EXPOSE 8080/tcp"});
      CHECK(lines_starting(df, "COPY [\"bundle/\", \"/kiln/\"]").size() == 1);
      CHECK(df.find("KILN_BUNDLE=/kiln") != std::string::npos);
      CHECK(df.find("docker build -t " + spec.image + " .") != std::string::npos);
      for (const std::string& p : spec.debian_packages) CHECK(df.find("      " + p + " \\\n") != std::string::npos);
      for (const std::string& l : spec.library_paths) CHECK(df.find("      " + l + " \\\n") != std::string::npos);
      // No inline comments: Dockerfile has none, a '#' after an instruction is an argument.
      std::istringstream in(df);
      for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] != '#') CHECK(line.find(" # ") == std::string::npos);
    }
  }
}

TEST_CASE("hostile names are quoted in every recipe", "[recipes]") {
  api::TargetInfrastructure t = target_gpu_kubernetes();
  t.name = "team's \"gpu\" pool: #1\nsecond line";
  t.kubernetes->node_selector["example.org/enabled"] = "yes";
  t.kubernetes->node_selector["example.org/version"] = "1.10";
  DeploymentSpec spec = spec_for(t);
  spec.name = "we\"ird: model #1 $(id) 'x'";
  spec.kiln_version = "0.4.0+local build";
  REQUIRE(deployment_spec_check(spec));

  const auto docs = YAML::LoadAll(kubernetes_service_yaml(spec));
  REQUIRE(docs.size() == 2);
  CHECK(docs[0]["metadata"]["name"].as<std::string>() == "kiln-we-ird-model-1-id-x");
  CHECK(docs[0]["metadata"]["annotations"]["kiln.model"].as<std::string>() == spec.name);
  CHECK(docs[0]["metadata"]["annotations"]["kiln.target"].as<std::string>() == t.name);
  CHECK_FALSE(docs[0]["metadata"]["labels"]["app.kubernetes.io/version"]);  // not a valid label value
  const YAML::Node sel = docs[0]["spec"]["template"]["spec"]["nodeSelector"];
  CHECK(sel["example.org/enabled"].Tag() == "!");  // quoted: a string, not YAML 1.1's true
  CHECK(sel["example.org/enabled"].as<std::string>() == "yes");
  CHECK(sel["example.org/version"].as<std::string>() == "1.10");
  CHECK(YAML::Load(kubernetes_job_yaml(spec))["metadata"]["annotations"]["kiln.model"].as<std::string>() == spec.name);

  const fs::path dir = scratch_dir("hostile");
  file_write(dir / "job.slurm", slurm_script_text(spec));
  CHECK(std::system(("bash -n " + shell_escape_path(dir / "job.slurm")).c_str()) == 0);
  CHECK(sbatch_directives(slurm_script_text(spec)).errors.empty());

  const std::string df = dockerfile_text(spec);
  CHECK(df.find("kiln.model=\"we\\\"ird: model #1 \\$(id) 'x'\"") != std::string::npos);
  const std::string def = apptainer_definition_text(spec);
  CHECK(def.find("second line") != std::string::npos);
  for (const auto& recipe : {df, def, slurm_script_text(spec)}) {
    // The newline in the target's name never starts a line of its own.
    CHECK(recipe.find("\nsecond line") == std::string::npos);
  }
}

TEST_CASE("a GPU deployment states its CUDA precision in every recipe, a CPU one in none", "[recipes]") {
  for (const Case& c : all_cases()) {
    SECTION(c.label) {
      DeploymentSpec spec = spec_for(c.target);
      spec.cuda_precision = "bf16";
      const bool gpu = deployment_gpus(spec) > 0;
      const std::string df = dockerfile_text(spec), def = apptainer_definition_text(spec), slurm = slurm_script_text(spec);
      INFO(df << def << slurm);
      CHECK((df.find("ENV KILN_DEVICE=cuda KILN_CUDA_PRECISION=bf16 ") != std::string::npos) == gpu);
      CHECK((def.find("export KILN_CUDA_PRECISION=\"${KILN_CUDA_PRECISION:-bf16}\"") != std::string::npos) == gpu);
      CHECK((slurm.find("PRECISION=\"${KILN_CUDA_PRECISION:-bf16}\"") != std::string::npos) == gpu);
      CHECK((slurm.find(",KILN_DEVICE=$DEVICE,KILN_CUDA_PRECISION=$PRECISION\" ") != std::string::npos) == gpu);
      for (const std::string& text : {df, def, slurm}) CHECK((text.find("KILN_CUDA_PRECISION") != std::string::npos) == gpu);
      const YAML::Node deployment = YAML::LoadAll(kubernetes_service_yaml(spec)).at(0);
      std::string precision;
      for (const auto& e : deployment["spec"]["template"]["spec"]["containers"][0]["env"])
        if (e["name"].as<std::string>() == "KILN_CUDA_PRECISION") precision = e["value"].as<std::string>();
      CHECK(precision == (gpu ? "bf16" : ""));
    }
  }
}

TEST_CASE("resource sizing follows the stated formulas", "[recipes]") {
  DeploymentSpec spec = spec_for(target_example("cloud-k8s-cpu.yaml"));  // 16 cores, 2 threads each
  CHECK(deployment_memory_bytes(spec) == (512ull << 20));
  spec.arena_bytes = (56ull << 20) + 1;  // 456 MiB + 56 MiB + 1 byte
  CHECK(deployment_memory_bytes(spec) == (576ull << 20));
  spec.memory_bytes = 3ull << 30;
  CHECK(deployment_memory_bytes(spec) == (3ull << 30));
  CHECK(kubernetes_cpu(spec) == 16);
  CHECK(deployment_threads(spec) == 16);
  spec.threads = 4;
  CHECK(kubernetes_cpu(spec) == 4);
  CHECK(deployment_threads(spec) == 4);
  DeploymentSpec local = spec_for(target_example("local-cpu.yaml"));  // 2 cores, no SMT
  CHECK(kubernetes_cpu(local) == 1);
  CHECK(deployment_memory_bytes(spec_for(target_example("hpc-gpu-slurm.yaml"))) == (1536ull << 20));
  CHECK(deployment_threads(local) == 2);
  DeploymentSpec gpu = spec_for(target_example("hpc-gpu-slurm.yaml"));
  CHECK(deployment_gpus(gpu) == 4);
  gpu.gpus = 1;
  CHECK(deployment_gpus(gpu) == 1);
  gpu.gpus = 0;
  CHECK(slurm_script_text(gpu).find("--gres") == std::string::npos);
  CHECK(dockerfile_text(gpu).find("nvidia/cuda") == std::string::npos);
  CHECK(dockerfile_text(gpu).find("libcu") == std::string::npos);
}

TEST_CASE("the CUDA base image follows the plugin's CUDA and cuDNN majors, or is left to the user", "[recipes]") {
  const std::string image = cuda_base_image(13, 9);
  CHECK(image.rfind("nvidia/cuda:13.", 0) == 0);
  CHECK(image.find("-cudnn-runtime-") != std::string::npos);
  CHECK(cuda_base_image(12, 9).empty());  // no tag kiln could vouch for
  CHECK(cuda_base_image(13, 8).empty());
  CHECK(cuda_base_image_library_dir("libcudnn_graph.so.9") == "/usr/lib/x86_64-linux-gnu");
  CHECK(cuda_base_image_library_dir("libcublasLt.so.13") == "/usr/local/cuda/lib64");
  DeploymentSpec spec = spec_for(target_example("hpc-gpu-slurm.yaml"));
  spec.cuda_image.clear();
  REQUIRE(deployment_spec_check(spec));
  const std::string df = dockerfile_text(spec);
  CHECK(lines_starting(df, "ARG CUDA_IMAGE") == std::vector<std::string>{"ARG CUDA_IMAGE"});
  CHECK(df.find("--build-arg CUDA_IMAGE=") != std::string::npos);
  CHECK(df.find("FROM ${CUDA_IMAGE} AS cuda\n") != std::string::npos);
}

TEST_CASE("deployment_spec_check names what is wrong", "[recipes]") {
  const DeploymentSpec good = spec_for(target_example("hpc-gpu-slurm.yaml"));
  REQUIRE(deployment_spec_check(good));
  struct Bad {
    const char* expect;
    void (*mutate)(DeploymentSpec&);
  };
  const Bad bad[] = {
      {"name is empty", [](DeploymentSpec& s) { s.name.clear(); }},
      {"image_digest", [](DeploymentSpec& s) { s.image_digest = "sha256:ABC"; }},
      {"image_digest", [](DeploymentSpec& s) { s.image_digest.clear(); }},
      {"oci_archive", [](DeploymentSpec& s) { s.oci_archive = "/abs/image.oci.tar"; }},
      {"bundle_dir", [](DeploymentSpec& s) { s.bundle_dir = "../bundle"; }},
      {"library path", [](DeploymentSpec& s) { s.library_paths.push_back("lib/relative.so"); }},
      {"Debian package", [](DeploymentSpec& s) { s.debian_packages.push_back("libc6"); }},
      {"Debian package", [](DeploymentSpec& s) { s.debian_packages.push_back("libc6=1 && rm -rf /"); }},
      {"port", [](DeploymentSpec& s) { s.port = 0; }},
      {"batch", [](DeploymentSpec& s) { s.batch = 0; }},
      {"cuda_precision", [](DeploymentSpec& s) { s.cuda_precision = "fp64"; }},
      {"cuda_precision", [](DeploymentSpec& s) { s.cuda_precision = "fp16; rm -rf /"; }},
      {"slurm.partition", [](DeploymentSpec& s) { s.target.slurm->partition = "gpu queue"; }},
      {"slurm.account", [](DeploymentSpec& s) { s.target.slurm->account = "ml#x"; }},
      {"the model needs", [](DeploymentSpec& s) { s.model_bytes = 1ull << 40; }},
      {"image '", [](DeploymentSpec& s) { s.image = "registry/x@sha256:abc"; }},
      {"needs cuda_libraries", [](DeploymentSpec& s) { s.cuda_libraries.clear(); }},
      {"CUDA library", [](DeploymentSpec& s) { s.cuda_libraries.push_back("../libcudnn.so.9"); }},
      {"cuda_image", [](DeploymentSpec& s) { s.cuda_image = "nvidia/cuda:13 && id"; }},
  };
  const fs::path dir = scratch_dir("bad");
  for (const Bad& b : bad) {
    DeploymentSpec s = good;
    b.mutate(s);
    const Status st = deployment_spec_check(s);
    INFO(b.expect);
    REQUIRE_FALSE(st);
    CHECK(st.code() == ErrorCode::invalid_argument);
    CHECK_THAT(st.message(), Catch::Contains(b.expect));
    auto written = recipes_write(s, (dir / "out").string());
    CHECK_FALSE(written);
    CHECK_FALSE(fs::exists(dir / "out"));
  }
}

TEST_CASE("recipes_write writes the six recipes, the same bytes every time", "[recipes]") {
  const DeploymentSpec spec = spec_for(target_example("hpc-gpu-slurm.yaml"));
  const fs::path a = scratch_dir("write-a"), b = scratch_dir("write-b");
  auto wa = recipes_write(spec, (a / "out").string());
  REQUIRE(wa);
  const std::vector<std::string> expected = {"Dockerfile", ".dockerignore", "kiln.def", "job.slurm", "kubernetes/deployment.yaml",
                                             "kubernetes/job.yaml"};
  CHECK(*wa == expected);
  CHECK(file_read(a / "out/Dockerfile") == dockerfile_text(spec));
  CHECK(file_read(a / "out/.dockerignore") == dockerignore_text(spec));
  CHECK(lines_starting(dockerignore_text(spec), "!") == std::vector<std::string>{"!bundle"});
  CHECK(file_read(a / "out/kiln.def") == apptainer_definition_text(spec));
  CHECK(file_read(a / "out/job.slurm") == slurm_script_text(spec));
  CHECK(file_read(a / "out/kubernetes/deployment.yaml") == kubernetes_service_yaml(spec));
  CHECK(file_read(a / "out/kubernetes/job.yaml") == kubernetes_job_yaml(spec));
  CHECK((fs::status(a / "out/job.slurm").permissions() & fs::perms::owner_exec) != fs::perms::none);
  CHECK((fs::status(a / "out/Dockerfile").permissions() & fs::perms::owner_exec) == fs::perms::none);
  // A spec copied field by field gives the same bytes; writing again replaces the files.
  DeploymentSpec copy = spec;
  auto wb = recipes_write(copy, (b / "out").string());
  REQUIRE(wb);
  auto again = recipes_write(spec, (a / "out").string());
  REQUIRE(again);
  for (const std::string& f : expected) {
    INFO(f);
    CHECK(file_read(a / "out" / f) == file_read(b / "out" / f));
  }
  CHECK_FALSE(recipes_write(spec, "/proc/kiln-cannot-write-here"));
}

// Writes the recipes for a target to $KILN_RECIPES_DUMP (for reading them; skipped otherwise).
TEST_CASE("dump recipes", "[.dump]") {
  const char* dir = std::getenv("KILN_RECIPES_DUMP");
  if (!dir) return;
  for (const Case& c : all_cases()) REQUIRE(recipes_write(spec_for(c.target), std::string(dir) + "/" + c.label));
}

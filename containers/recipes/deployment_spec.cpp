// What the recipes share: the spec check, resource names, image references and sizing.
#include <algorithm>

#include "containers/recipes/recipes.h"

namespace kiln::recipes {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr size_t kResourceNameMax = 57;  // 63 (DNS-1123 label) - strlen("-batch")

bool is_lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool chars_in(std::string_view s, std::string_view allowed_punct) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           allowed_punct.find(c) != std::string_view::npos;
  });
}

// A path inside the output folder: relative, no "..", characters a Dockerfile COPY, a shell
// word and a YAML plain scalar all take unquoted.
Status relative_path_check(std::string_view field, const std::string& path) {
  KILN_REQUIRE(!path.empty() && path[0] != '/' && chars_in(path, "._/-") && path.find("..") == std::string::npos,
               invalid_argument, "deployment spec: ", field, " '", path,
               "' must be a path relative to the output folder ([A-Za-z0-9._/-], no '..')");
  return Status::ok();
}

// Slurm directive values are not shell-parsed, but whitespace, quotes and '#' end or confuse them.
Status slurm_value_check(std::string_view field, const std::string& value) {
  KILN_REQUIRE(chars_in(value, "_.,:&|()[]*!+=@%/-"), invalid_argument, "target slurm.", field, " '", value,
               "' cannot go into an #SBATCH directive: use letters, digits and _.,:&|()[]*!+=@%/- only");
  return Status::ok();
}

}  // namespace

std::string deployment_resource_name(std::string_view model_name) {
  std::string out = "kiln-";
  for (char c : model_name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (keep) out += c;
    else if (out.back() != '-') out += '-';
    if (out.size() >= kResourceNameMax) break;
  }
  out.resize(std::min(out.size(), kResourceNameMax));
  while (out.back() == '-') out.pop_back();  // "kiln" stays: never empty
  return out;
}

std::string deployment_image_reference(std::string_view registry, std::string_view model_name, std::string_view tag) {
  std::string out(registry);
  while (!out.empty() && out.back() == '/') out.pop_back();
  if (!out.empty()) out += '/';
  return out + deployment_resource_name(model_name) + ":" + std::string(tag);
}

std::string deployment_image(const DeploymentSpec& spec) {
  return spec.image.empty() ? deployment_image_reference(spec.target.registry, spec.name, "latest") : spec.image;
}

std::string deployment_image_by_digest(const DeploymentSpec& spec) {
  std::string repo = deployment_image(spec);
  if (const size_t at = repo.find('@'); at != std::string::npos) repo.resize(at);
  const size_t slash = repo.rfind('/');
  const size_t colon = repo.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) repo.resize(colon);  // the tag
  return repo + "@" + spec.image_digest;
}

int64_t deployment_threads(const DeploymentSpec& spec) {
  if (spec.threads > 0) return spec.threads;
  return std::max<int64_t>(1, spec.target.node.cpu.cores);
}

int64_t deployment_gpus(const DeploymentSpec& spec) {
  if (spec.gpus >= 0) return spec.gpus;
  int64_t n = 0;
  for (const api::Gpu& g : spec.target.node.gpus) n += std::max<int64_t>(0, g.count);
  return n;
}

uint64_t deployment_memory_bytes(const DeploymentSpec& spec) {
  if (spec.memory_bytes > 0) return spec.memory_bytes;
  const uint64_t gpu = deployment_gpus(spec) > 0 ? 1024 * kMiB : 0;
  const uint64_t need = 2 * spec.model_bytes + spec.arena_bytes + 256 * kMiB + gpu;
  const uint64_t step = 64 * kMiB;
  return (need + step - 1) / step * step;
}

int64_t kubernetes_cpu(const DeploymentSpec& spec) {
  if (spec.threads > 0) return spec.threads;
  const api::Cpu& cpu = spec.target.node.cpu;
  if (cpu.threads_per_core > 1) return std::max<int64_t>(1, cpu.cores);  // the SMT siblings stay free
  return std::max<int64_t>(1, cpu.cores - 1);
}

Status deployment_spec_check(const DeploymentSpec& spec) {
  KILN_REQUIRE(!spec.name.empty(), invalid_argument, "deployment spec: name is empty (the model's name, e.g. \"model\")");
  const std::string& d = spec.image_digest;
  KILN_REQUIRE(d.size() == 71 && d.rfind("sha256:", 0) == 0 && is_lower_hex(std::string_view(d).substr(7)),
               invalid_argument, "deployment spec: image_digest '", d,
               "' must be \"sha256:\" and 64 lower-case hex digits (the manifest's digest)");
  const std::string image = deployment_image(spec);
  KILN_REQUIRE(chars_in(image, "._/:-") && image.find('@') == std::string::npos, invalid_argument,
               "deployment spec: image '", image, "' must be a reference without digest, like registry.example.org/team/kiln-model:1.0");
  KILN_TRY(relative_path_check("oci_archive", spec.oci_archive));
  KILN_TRY(relative_path_check("docker_archive", spec.docker_archive));
  KILN_TRY(relative_path_check("bundle_dir", spec.bundle_dir));
  for (const std::string& lib : spec.library_paths) {
    KILN_REQUIRE(lib.size() > 1 && lib[0] == '/' && chars_in(lib, "._/+-") && lib.find("..") == std::string::npos,
                 invalid_argument, "deployment spec: library path '", lib, "' must be absolute, [A-Za-z0-9._/+-], no '..'");
  }
  for (const std::string& pin : spec.debian_packages) {
    const size_t eq = pin.find('=');
    const bool ok = eq != std::string::npos && eq > 0 && eq + 1 < pin.size() &&
                    chars_in(pin.substr(0, eq), "+.-") && chars_in(pin.substr(eq + 1), ".+~:-");
    KILN_REQUIRE(ok, invalid_argument, "deployment spec: Debian package '", pin,
                 "' must be \"name=version\", e.g. \"libzip4=1.7.3-1+b1\"");
  }
  for (const std::string& lib : spec.cuda_libraries)
    KILN_REQUIRE(!lib.empty() && chars_in(lib, "._+-"), invalid_argument, "deployment spec: CUDA library '", lib,
                 "' must be a file name ([A-Za-z0-9._+-])");
  // A GPU image without them could not load the plugin: every run would fail on the node.
  KILN_REQUIRE(deployment_gpus(spec) == 0 || !spec.cuda_libraries.empty(), invalid_argument,
               "deployment spec: a GPU deployment needs cuda_libraries (the CUDA libraries the bundled plugin loads)");
  // Written into shell scripts and manifests: one of the runtime's names, nothing else.
  const std::string& p = spec.cuda_precision;
  KILN_REQUIRE(p == "fp32" || p == "tf32" || p == "fp16" || p == "bf16", invalid_argument, "deployment spec: cuda_precision '", p,
               "' must be fp32, tf32, fp16 or bf16");
  KILN_REQUIRE(chars_in(spec.cuda_image, "._/:@-"), invalid_argument, "deployment spec: cuda_image '", spec.cuda_image,
               "' must be an image reference (or empty)");
  KILN_REQUIRE(chars_in(spec.shell_image, "._/:@-") && !spec.shell_image.empty(), invalid_argument,
               "deployment spec: shell_image '", spec.shell_image, "' must be an image reference");
  KILN_REQUIRE(spec.port >= 1 && spec.port <= 65535, invalid_argument, "deployment spec: port ", spec.port,
               " is not in 1..65535");
  KILN_REQUIRE(spec.threads >= 0, invalid_argument, "deployment spec: threads ", spec.threads, " is negative (0: all cores)");
  KILN_REQUIRE(spec.batch >= 1, invalid_argument, "deployment spec: batch ", spec.batch, " must be >= 1");
  KILN_REQUIRE(spec.gpus >= -1, invalid_argument, "deployment spec: gpus ", spec.gpus,
               " must be >= 0 (-1: all of a node's GPUs)");
  KILN_REQUIRE(spec.target.nodes >= 1, invalid_argument, "target nodes ", spec.target.nodes, " must be >= 1");
  if (spec.target.node.memory_gb > 0) {
    const double node_bytes = spec.target.node.memory_gb * 1024.0 * 1024.0 * 1024.0;
    KILN_REQUIRE(static_cast<double>(deployment_memory_bytes(spec)) <= node_bytes, invalid_argument,
                 "deployment spec: the model needs ", deployment_memory_bytes(spec) / kMiB, " MiB but a node of target '",
                 spec.target.name, "' has ", spec.target.node.memory_gb, " GB");
  }
  if (spec.target.slurm) {
    const api::SlurmOptions& s = *spec.target.slurm;
    KILN_TRY(slurm_value_check("partition", s.partition));
    KILN_TRY(slurm_value_check("account", s.account));
    KILN_TRY(slurm_value_check("qos", s.qos));
    KILN_TRY(slurm_value_check("time_limit", s.time_limit));
    KILN_TRY(slurm_value_check("constraint", s.constraint));
  }
  return Status::ok();
}

}  // namespace kiln::recipes

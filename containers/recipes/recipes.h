// Deployment recipes for an image kiln wrote: a Dockerfile that rebuilds it, an Apptainer /
// Singularity definition, a Slurm batch script and Kubernetes manifests (Deployment + Service,
// and a batch Job), all generated from the target description. Pure text functions: the same
// spec gives the same bytes. They expect a spec that deployment_spec_check accepts;
// recipes_write checks it first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/description.h"
#include "kernels/core/status.h"

namespace kiln::recipes {

struct DeploymentSpec {
  std::string name;          // model name ("model"); resources are "kiln-<name>", sanitized to DNS-1123
  std::string image;         // reference without digest ("registry.example.org/team/kiln-model:latest");
                             // empty: deployment_image_reference(target.registry, name, "latest")
  std::string image_digest;  // "sha256:<64 hex>" of the manifest: Kubernetes references the image by digest
  std::string oci_archive = "image.oci.tar";  // relative to the output folder
  std::string docker_archive = "image.docker.tar";
  std::string bundle_dir = "bundle";        // relative; the Dockerfile's build context is the output folder
  std::vector<std::string> library_paths;   // absolute paths of the runtime's library closure (incl. the loader)
  std::vector<std::string> debian_packages; // "name=version" owning those libraries (from the SBOM)
  int port = 8080;
  int threads = 0;        // 0: all the node's physical cores (Kubernetes: see kubernetes_cpu)
  int64_t batch = 1;
  uint64_t model_bytes = 0;   // size of model.kiln: sizes the memory request
  uint64_t arena_bytes = 0;   // the compiled plan's activation arena, when known (added to memory)
  uint64_t memory_bytes = 0;  // explicit memory request/limit; 0: deployment_memory_bytes' formula
  int64_t gpus = -1;          // GPUs per pod / Slurm job; -1: all of a node's GPUs, 0: CPU only
  std::string kiln_version;
  // GPU deployments (gpus > 0): the CUDA libraries the bundled plugin needs, by soname (kiln image
  // takes them from the plugin: device_plugin_libraries), and the NVIDIA image the Dockerfile copies
  // them from (cuda_base_image; empty: the Dockerfile asks for --build-arg CUDA_IMAGE=...).
  std::vector<std::string> cuda_libraries;
  std::string cuda_image;
  std::string cuda_precision = "fp32";  // GPU deployments: KILN_CUDA_PRECISION, the runtime's --cuda-precision
  // The Apptainer definition: a static shell for %runscript and %test (the image has none).
  std::string shell_image = "busybox:1.36.1-musl";
  api::TargetInfrastructure target;
};

// ---- what the recipes share (deployment_spec.cpp) ----

// Whether the recipes can be generated from `spec`; the error names the field and the
// expected form (digest, relative paths, package pins, Slurm values, node memory).
Status deployment_spec_check(const DeploymentSpec& spec);

// "kiln-<name>" as a DNS-1123 label: lower case, runs of other characters become one '-',
// at most 57 characters so that "-batch" (the Job) still fits in 63.
std::string deployment_resource_name(std::string_view model_name);

// "<registry>/kiln-<name>:<tag>", or "kiln-<name>:<tag>" without a registry.
std::string deployment_image_reference(std::string_view registry, std::string_view model_name, std::string_view tag);
// spec.image, or the default above when it is empty.
std::string deployment_image(const DeploymentSpec& spec);
// "<image without tag or digest>@<digest>".
std::string deployment_image_by_digest(const DeploymentSpec& spec);

// Threads the runtime uses: spec.threads, else the node's physical cores (at least 1).
int64_t deployment_threads(const DeploymentSpec& spec);
// GPUs per pod / job: spec.gpus, else the sum of the node's GPU counts.
int64_t deployment_gpus(const DeploymentSpec& spec);
// Memory request = limit: spec.memory_bytes, else
//   2 × model_bytes + arena_bytes + 256 MiB (+ 1 GiB with GPUs), rounded up to 64 MiB
// (the mapped plan, a second copy for weights repacked into blocked layouts, the activation
// arena, the runtime, HTTP server and self-test vectors; with GPUs, the CUDA context and
// library workspaces in host memory).
uint64_t deployment_memory_bytes(const DeploymentSpec& spec);
// Kubernetes CPUs (request = limit, so one thread per allotted CPU): spec.threads, else the
// physical cores; without SMT siblings to spare, one core less for the kubelet and system pods.
int64_t kubernetes_cpu(const DeploymentSpec& spec);

// ---- the NVIDIA image GPU Dockerfiles take the CUDA libraries from (cuda_image.cpp) ----

// NVIDIA's cudnn-runtime image for a plugin built against CUDA `cuda_major` and cuDNN
// `cudnn_major` ("nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04"), or "" when kiln knows none.
std::string cuda_base_image(int cuda_major, int cudnn_major);
// Where that image keeps `soname`: cuDNN (an apt package) in /usr/lib/x86_64-linux-gnu, the
// CUDA toolkit's libraries in /usr/local/cuda/lib64.
std::string cuda_base_image_library_dir(std::string_view soname);

// ---- the recipes (one file each) ----

std::string dockerfile_text(const DeploymentSpec& spec);
// The build context is the output folder, which also holds the archives (the image twice over):
// .dockerignore keeps the context to the bundle.
std::string dockerignore_text(const DeploymentSpec& spec);
std::string apptainer_definition_text(const DeploymentSpec& spec);  // also for Singularity
std::string slurm_script_text(const DeploymentSpec& spec);
std::string kubernetes_service_yaml(const DeploymentSpec& spec);  // Deployment + Service
std::string kubernetes_job_yaml(const DeploymentSpec& spec);      // batch inference Job

// Checks the spec, then writes Dockerfile, .dockerignore, kiln.def, job.slurm (mode 0755),
// kubernetes/deployment.yaml and kubernetes/job.yaml into `dir` (created when missing);
// returns the relative paths written, in that order.
Result<std::vector<std::string>> recipes_write(const DeploymentSpec& spec, const std::string& dir);

// ---- quoting (quote.cpp; exposed for tests) ----

// A YAML scalar: plain when unambiguous ([A-Za-z/][A-Za-z0-9._/-]*, not a YAML 1.1 boolean or
// null word), else double-quoted with escapes.
std::string yaml_scalar(std::string_view text);
// A POSIX shell word: unchanged when only [A-Za-z0-9_./:=@%+,-], else single-quoted.
std::string shell_quote(std::string_view text);
// A double-quoted Dockerfile string for LABEL values: '\\', '"' and '$' escaped
// (Dockerfile expands variables inside double quotes), control characters become spaces.
std::string dockerfile_string(std::string_view text);
// Text for a one-line comment: control characters become spaces.
std::string comment_text(std::string_view text);

}  // namespace kiln::recipes

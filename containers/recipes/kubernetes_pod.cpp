#include "containers/recipes/kubernetes_pod.h"

namespace kiln::recipes::k8s {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

std::string pad(int indent) { return std::string(static_cast<size_t>(indent), ' '); }
void line(std::string& out, int indent, const std::string& text) { out += pad(indent) + text + "\n"; }

// A label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends; "" when `v` is not one.
std::string label_value(const std::string& v) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (v.empty() || v.size() > 63 || !alnum(v.front()) || !alnum(v.back())) return "";
  for (char c : v)
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return "";
  return v;
}

std::string threads_text(const DeploymentSpec& spec) { return std::to_string(kubernetes_cpu(spec)); }

void env_write(std::string& out, int indent, const DeploymentSpec& spec) {
  line(out, indent, "env:");
  Labels env = {{"KILN_BUNDLE", "/kiln"}, {"KILN_THREADS", threads_text(spec)}, {"OMP_NUM_THREADS", threads_text(spec)}};
  if (deployment_gpus(spec) > 0) {  // the image's defaults too; stated here
    env.emplace_back("KILN_DEVICE", "cuda");
    env.emplace_back("KILN_CUDA_PRECISION", spec.cuda_precision);
  }
  for (const auto& [name, value] : env) {
    line(out, indent + 2, "- name: " + name);
    line(out, indent + 4, "value: " + yaml_scalar(value));
  }
}

void resources_write(std::string& out, int indent, const DeploymentSpec& spec) {
  // requests = limits for CPU and memory: Guaranteed QoS, so the static CPU manager may pin
  // whole cores and the pod is the last to be evicted under memory pressure.
  const std::string cpu = yaml_scalar(std::to_string(kubernetes_cpu(spec)));
  const std::string memory = yaml_scalar(std::to_string(deployment_memory_bytes(spec) / kMiB) + "Mi");
  const int64_t gpus = deployment_gpus(spec);
  line(out, indent, "resources:");
  line(out, indent + 2, "# memory = 2 x model.kiln + activation arena + 256 MiB (+ 1 GiB with GPUs), rounded up to 64 MiB");
  line(out, indent + 2, "requests:");
  line(out, indent + 4, "cpu: " + cpu);
  line(out, indent + 4, "memory: " + memory);
  line(out, indent + 2, "limits:");
  line(out, indent + 4, "cpu: " + cpu);
  line(out, indent + 4, "memory: " + memory);
  if (gpus > 0) line(out, indent + 4, "nvidia.com/gpu: " + std::to_string(gpus));
}

void container_security_write(std::string& out, int indent) {
  line(out, indent, "securityContext:");
  line(out, indent + 2, "allowPrivilegeEscalation: false");
  line(out, indent + 2, "readOnlyRootFilesystem: true");
  line(out, indent + 2, "runAsNonRoot: true");
  line(out, indent + 2, "runAsUser: 65532");
  line(out, indent + 2, "runAsGroup: 65532");
  line(out, indent + 2, "capabilities:");
  line(out, indent + 4, "drop:");
  line(out, indent + 6, "- ALL");
}

void probe_write(std::string& out, int indent, const char* kind, const char* path, int period, int timeout, int failures) {
  line(out, indent, std::string(kind) + ":");
  line(out, indent + 2, "httpGet:");
  line(out, indent + 4, std::string("path: ") + path);
  line(out, indent + 4, "port: http");
  line(out, indent + 2, "periodSeconds: " + std::to_string(period));
  line(out, indent + 2, "timeoutSeconds: " + std::to_string(timeout));
  line(out, indent + 2, "failureThreshold: " + std::to_string(failures));
}

// One container (a list item at `indent`).
void container_write(std::string& out, int indent, const DeploymentSpec& spec, const std::string& name,
                     const std::vector<std::string>& args, PodRole role, bool data_volume) {
  line(out, indent, "- name: " + name);
  const int in = indent + 2;
  line(out, in, "image: " + yaml_scalar(deployment_image_by_digest(spec)));
  line(out, in, "imagePullPolicy: IfNotPresent");
  line(out, in, "args:");
  for (const std::string& a : args) line(out, in + 2, "- " + yaml_scalar(a));
  if (role == PodRole::server) {
    line(out, in, "ports:");
    line(out, in + 2, "- name: http");
    line(out, in + 4, "containerPort: " + std::to_string(spec.port));
    line(out, in + 4, "protocol: TCP");
  }
  env_write(out, in, spec);
  if (role == PodRole::server) {
    line(out, in, "# Mapping the plan and warming up may take a while: up to 5 minutes before the other probes start.");
    probe_write(out, in, "startupProbe", "/v2/health/ready", 5, 2, 60);
    probe_write(out, in, "readinessProbe", "/v2/health/ready", 5, 2, 3);
    probe_write(out, in, "livenessProbe", "/v2/health/live", 10, 5, 6);
  }
  resources_write(out, in, spec);
  container_security_write(out, in);
  line(out, in, "volumeMounts:");
  if (data_volume) {
    line(out, in + 2, "- name: data");
    line(out, in + 4, "mountPath: /data");
  }
  line(out, in + 2, "- name: tmp");
  line(out, in + 4, "mountPath: /tmp");
}

}  // namespace

Labels selector_labels(const DeploymentSpec& spec, const std::string& component) {
  return {{"app.kubernetes.io/name", deployment_resource_name(spec.name)}, {"app.kubernetes.io/component", component}};
}

Labels all_labels(const DeploymentSpec& spec, const std::string& component) {
  Labels labels = selector_labels(spec, component);
  labels.emplace_back("app.kubernetes.io/part-of", "kiln");
  labels.emplace_back("app.kubernetes.io/managed-by", "kiln");
  if (std::string v = label_value(spec.kiln_version); !v.empty()) labels.emplace_back("app.kubernetes.io/version", v);
  return labels;
}

void map_write(std::string& out, int indent, const Labels& entries) {
  for (const auto& [key, value] : entries) line(out, indent, yaml_scalar(key) + ": " + yaml_scalar(value));
}

void metadata_write(std::string& out, const DeploymentSpec& spec, const std::string& name, const std::string& component) {
  line(out, 0, "metadata:");
  line(out, 2, "name: " + yaml_scalar(name));
  if (spec.target.kubernetes && !spec.target.kubernetes->namespace_name.empty())
    line(out, 2, "namespace: " + yaml_scalar(spec.target.kubernetes->namespace_name));
  line(out, 2, "labels:");
  map_write(out, 4, all_labels(spec, component));
  line(out, 2, "annotations:");
  map_write(out, 4, {{"kiln.model", spec.name}, {"kiln.target", spec.target.name}, {"kiln.batch", std::to_string(spec.batch)}});
}

std::string data_claim_name(const DeploymentSpec& spec) { return deployment_resource_name(spec.name) + "-data"; }

void pod_template_write(std::string& out, int indent, const DeploymentSpec& spec, PodRole role) {
  const std::string component = role == PodRole::server ? "server" : "batch";
  const bool gpu = deployment_gpus(spec) > 0;
  const api::KubernetesOptions* k = spec.target.kubernetes ? &*spec.target.kubernetes : nullptr;
  const int in = indent + 2;

  line(out, indent, "metadata:");
  line(out, in, "labels:");
  map_write(out, in + 2, all_labels(spec, component));
  line(out, indent, "spec:");
  if (role == PodRole::batch) line(out, in, "restartPolicy: Never");
  if (k && !k->service_account.empty()) line(out, in, "serviceAccountName: " + yaml_scalar(k->service_account));
  line(out, in, "automountServiceAccountToken: false");  // the runtime never calls the API server
  if (k && !k->image_pull_secret.empty()) {
    line(out, in, "imagePullSecrets:");
    line(out, in + 2, "- name: " + yaml_scalar(k->image_pull_secret));
  }
  if (k && !k->node_selector.empty()) {  // std::map: sorted keys
    line(out, in, "nodeSelector:");
    map_write(out, in + 2, Labels(k->node_selector.begin(), k->node_selector.end()));
  }
  if (gpu) {
    line(out, in, "tolerations:");  // GPU node pools are commonly tainted so only GPU pods land there
    line(out, in + 2, "- key: nvidia.com/gpu");
    line(out, in + 4, "operator: Exists");
    line(out, in + 4, "effect: NoSchedule");
  }
  if (role == PodRole::server) {
    line(out, in, "topologySpreadConstraints:");  // one replica per node when the pool allows it
    line(out, in + 2, "- maxSkew: 1");
    line(out, in + 4, "topologyKey: kubernetes.io/hostname");
    line(out, in + 4, "whenUnsatisfiable: ScheduleAnyway");
    line(out, in + 4, "labelSelector:");
    line(out, in + 6, "matchLabels:");
    map_write(out, in + 8, selector_labels(spec, component));
  }
  line(out, in, "securityContext:");
  line(out, in + 2, "runAsNonRoot: true");
  line(out, in + 2, "runAsUser: 65532");
  line(out, in + 2, "runAsGroup: 65532");
  if (role == PodRole::batch) line(out, in + 2, "fsGroup: 65532  # the data volume writable by the runtime's group");
  line(out, in + 2, "seccompProfile:");
  line(out, in + 4, "type: RuntimeDefault");
  if (role == PodRole::batch) {
    line(out, in, "# The self-test first: a node without the plan's CPU features fails here, not halfway through.");
    line(out, in, "initContainers:");
    container_write(out, in + 2, spec, "selftest", {"selftest"}, role, false);
    line(out, in, "containers:");
    container_write(out, in + 2, spec, "kiln-runtime",
                    {"run", "/kiln/model/model.kiln", "--input", "/data/input.npz", "--output", "/data/output.npz"}, role,
                    true);
  } else {
    line(out, in, "containers:");
    container_write(out, in + 2, spec, "kiln-runtime", {"serve-model"}, role, false);
  }
  line(out, in, "volumes:");
  if (role == PodRole::batch) {
    line(out, in + 2, "- name: data");
    line(out, in + 4, "persistentVolumeClaim:");
    line(out, in + 6, "claimName: " + yaml_scalar(data_claim_name(spec)) + "  # placeholder: see the header");
  }
  line(out, in + 2, "- name: tmp");
  line(out, in + 4, "emptyDir:");
  line(out, in + 6, "sizeLimit: 64Mi");
}

}  // namespace kiln::recipes::k8s

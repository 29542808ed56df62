// Kubernetes Deployment + Service serving the model over KServe v2 HTTP. The image is referenced
// by digest, so every replica runs exactly the bytes kiln wrote, whatever the tag says later.
#include "containers/recipes/kubernetes_pod.h"

namespace kiln::recipes {

std::string kubernetes_service_yaml(const DeploymentSpec& spec) {
  using namespace k8s;
  const std::string name = deployment_resource_name(spec.name);
  const api::TargetInfrastructure& t = spec.target;
  const std::string port = std::to_string(spec.port);
  std::string out;
  out += "# " + name + ": model '" + comment_text(spec.name) + "' (kiln " + comment_text(spec.kiln_version) +
         ") served over KServe v2 HTTP on target '" + comment_text(t.name) + "'.\n";
  out += "#   kubectl apply -f deployment.yaml\n";
  out += "# The image (" + comment_text(deployment_image(spec)) + ") must be in a registry the nodes pull from\n";
  out += "# (kiln push), referenced here by its manifest digest. In the cluster:\n";
  out += "#   http://" + name + (t.kubernetes && !t.kubernetes->namespace_name.empty() ? "." + t.kubernetes->namespace_name : "") +
         ":" + port + "/v2/models/" + comment_text(spec.name) + "/infer\n";
  out += "# The Service keeps the container's port " + port + ", so the URL is the same inside and outside the pod.\n";
  if (t.scheduler != api::Scheduler::kubernetes)
    out += std::string("# (target '") + comment_text(t.name) + "' is scheduled by " + api::scheduler_name(t.scheduler) +
           ", not Kubernetes: for reference.)\n";
  out += "apiVersion: apps/v1\n";
  out += "kind: Deployment\n";
  metadata_write(out, spec, name, "server");
  out += "spec:\n";
  out += "  replicas: " + std::to_string(std::max<int64_t>(1, t.nodes)) + "  # one per node of the target\n";
  out += "  selector:\n";
  out += "    matchLabels:\n";
  map_write(out, 6, selector_labels(spec, "server"));
  out += "  template:\n";
  pod_template_write(out, 4, spec, PodRole::server);
  out += "---\n";
  out += "apiVersion: v1\n";
  out += "kind: Service\n";
  metadata_write(out, spec, name, "server");
  out += "spec:\n";
  out += "  type: ClusterIP\n";
  out += "  selector:\n";
  map_write(out, 4, selector_labels(spec, "server"));
  out += "  ports:\n";
  out += "    - name: http\n";
  out += "      port: " + port + "\n";
  out += "      targetPort: http\n";
  out += "      protocol: TCP\n";
  return out;
}

}  // namespace kiln::recipes

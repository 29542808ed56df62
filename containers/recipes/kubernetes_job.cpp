// Kubernetes Job for batch inference: the self-test as an init container, then `run` over a
// PersistentVolumeClaim holding the input.
#include "containers/recipes/kubernetes_pod.h"

namespace kiln::recipes {

std::string kubernetes_job_yaml(const DeploymentSpec& spec) {
  using namespace k8s;
  const std::string name = deployment_resource_name(spec.name) + "-batch";
  const api::TargetInfrastructure& t = spec.target;
  std::string out;
  out += "# " + name + ": batch inference with model '" + comment_text(spec.name) + "' (kiln " +
         comment_text(spec.kiln_version) + ", batch " + std::to_string(spec.batch) + ") on target '" +
         comment_text(t.name) + "'.\n";
  out += "# It reads /data/input.npz (one array per model input) and writes /data/output.npz, where /data is\n";
  out += "# the PersistentVolumeClaim " + data_claim_name(spec) +
         ": a placeholder, create it (ReadWriteOnce is enough) and copy\n";
  out += "# input.npz into it, or change claimName to a claim of yours. Then:\n";
  out += "#   kubectl apply -f job.yaml && kubectl wait --for=condition=complete job/" + name + "\n";
  out += "# A Job's spec cannot change: delete the finished Job (or wait for its TTL) before applying again.\n";
  if (t.scheduler != api::Scheduler::kubernetes)
    out += std::string("# (target '") + comment_text(t.name) + "' is scheduled by " + api::scheduler_name(t.scheduler) +
           ", not Kubernetes: for reference.)\n";
  out += "apiVersion: batch/v1\n";
  out += "kind: Job\n";
  metadata_write(out, spec, name, "batch");
  out += "spec:\n";
  out += "  backoffLimit: 2\n";
  out += "  ttlSecondsAfterFinished: 86400  # the finished Job and its pod (and logs) stay a day\n";
  out += "  template:\n";
  pod_template_write(out, 4, spec, PodRole::batch);
  return out;
}

}  // namespace kiln::recipes

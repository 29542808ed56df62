// What the Deployment and the Job share: labels, metadata, the hardened pod and its container.
// Internal to containers/recipes. YAML is written by hand, two spaces a level, every string
// through yaml_scalar, so the same spec gives the same bytes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "containers/recipes/recipes.h"

namespace kiln::recipes::k8s {

using Labels = std::vector<std::pair<std::string, std::string>>;  // in output order

// app.kubernetes.io/name + component: what selectors match ("server" pods for the Service,
// "batch" pods for the Job, so the Service never routes to a Job's pod).
Labels selector_labels(const DeploymentSpec& spec, const std::string& component);
// The selector labels plus part-of, managed-by and (when it is a valid label value) version.
Labels all_labels(const DeploymentSpec& spec, const std::string& component);

// "key: value" lines, `indent` spaces deep.
void map_write(std::string& out, int indent, const Labels& entries);
// The object's metadata (name, namespace, labels, annotations), at the top level.
void metadata_write(std::string& out, const DeploymentSpec& spec, const std::string& name, const std::string& component);

enum class PodRole { server, batch };
// The pod template (metadata + spec), `indent` spaces deep (the value of `template:`).
void pod_template_write(std::string& out, int indent, const DeploymentSpec& spec, PodRole role);

// The PersistentVolumeClaim the Job reads input.npz from and writes output.npz to.
std::string data_claim_name(const DeploymentSpec& spec);

}  // namespace kiln::recipes::k8s

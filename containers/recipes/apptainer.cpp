// The Apptainer / Singularity definition: a SIF built from the oci-archive kiln wrote, so the SIF
// runs the very bytes the other recipes deploy. No %post: the build needs no root or fakeroot.
// Apptainer runs %runscript and %test with the container's /bin/sh (its built-in interpreter
// covers only the action scripts and the runscript it derives from an OCI image's ENTRYPOINT/CMD),
// and kiln's image has no shell: a first stage provides a static busybox as /bin/sh.
#include "containers/recipes/recipes.h"

namespace kiln::recipes {
namespace {

void line(std::string& out, const std::string& text = "") { out += text + "\n"; }

// %labels lines are "KEY VALUE": a value must be one line and not empty.
std::string label_value(const std::string& v) { return v.empty() ? "unknown" : comment_text(v); }

}  // namespace

std::string apptainer_definition_text(const DeploymentSpec& spec) {
  const std::string resource = deployment_resource_name(spec.name);
  const bool gpu = deployment_gpus(spec) > 0;
  const api::TargetInfrastructure& t = spec.target;
  const std::string tool = t.container_runtime == api::ContainerRuntime::singularity ? "singularity" : "apptainer";
  const std::string nv = gpu ? " --nv" : "";
  const std::string sif = resource + ".sif";
  const std::string port = std::to_string(spec.port);

  std::string out;
  line(out, "# " + resource + ": model '" + comment_text(spec.name) + "' compiled by kiln " +
                comment_text(spec.kiln_version) + " for target '" + comment_text(t.name) + "' (" + tool + ", " +
                (gpu ? "GPU" : "CPU") + ").");
  line(out, "#");
  line(out, "# Build the SIF in the folder holding this file and " + spec.oci_archive + " (From: is relative to it):");
  line(out, "#   " + tool + " build " + sif + " kiln.def");
  line(out, "# %test runs the self-test at the end of the build; add --notest where the build host lacks the");
  line(out, "# target's CPU features" + std::string(gpu ? " or GPUs" : "") + ". Then:");
  line(out, "#   " + tool + " run" + nv + " " + sif + "        serve-model: KServe v2 HTTP on port " + port);
  line(out, "#   " + tool + " run" + nv + " --bind \"$PWD\" " + sif + " run /kiln/model/model.kiln --input \"$PWD/x.npz\" --output \"$PWD/y.npz\"");
  line(out, "#   " + tool + " test" + nv + " " + sif + "       the self-test");
  line(out, "# kiln's image has no shell, but " + tool + " runs %runscript and %test with /bin/sh: the first");
  line(out, "# stage lends a static busybox (pulled from Docker Hub or your mirror). Offline, or to keep the");
  line(out, "# SIF shell-less, skip this file: `" + tool + " build " + sif + " oci-archive://" + spec.oci_archive +
                "` runs the");
  line(out, "# image's ENTRYPOINT/CMD the same way (what job.slurm does).");
  line(out, "Bootstrap: docker");
  line(out, "From: " + spec.shell_image);
  line(out, "Stage: shell");
  line(out);
  line(out, "Bootstrap: oci-archive");
  line(out, "From: " + spec.oci_archive);
  line(out, "Stage: final");
  line(out);
  line(out, "%files from shell");
  line(out, "    /bin/busybox /bin/sh");
  line(out);

  line(out, "%labels");
  line(out, "    org.opencontainers.image.title " + resource);
  line(out, "    org.opencontainers.image.version " + label_value(spec.kiln_version));
  line(out, "    org.opencontainers.image.vendor kiln");
  line(out, "    kiln.model " + label_value(spec.name));
  line(out, "    kiln.batch " + std::to_string(spec.batch));
  line(out, "    kiln.target " + label_value(t.name));
  line(out, "    kiln.image.digest " + spec.image_digest);
  line(out);

  // ${VAR:-default}: a value given with --env or APPTAINERENV_/SINGULARITYENV_ wins.
  line(out, "%environment");
  line(out, "    export KILN_BUNDLE=/kiln");
  line(out, "    export KILN_THREADS=\"${KILN_THREADS:-" + std::to_string(spec.threads) + "}\"");
  if (spec.threads > 0) line(out, "    export OMP_NUM_THREADS=\"${OMP_NUM_THREADS:-" + std::to_string(spec.threads) + "}\"");
  if (gpu) line(out, "    export KILN_DEVICE=\"${KILN_DEVICE:-cuda}\"");
  if (gpu) line(out, "    export KILN_CUDA_PRECISION=\"${KILN_CUDA_PRECISION:-" + spec.cuda_precision + "}\"");
  line(out);

  line(out, "%runscript");
  line(out, "    if [ \"$#\" -eq 0 ]; then");
  line(out, "        set -- serve-model");
  line(out, "    fi");
  line(out, "    exec /kiln/bin/kiln-runtime \"$@\"");
  line(out);

  line(out, "%test");
  line(out, "    exec /kiln/bin/kiln-runtime selftest");
  line(out);

  line(out, "%help");
  line(out, "    " + resource + ": the kiln-compiled model '" + comment_text(spec.name) + "' (batch " +
                std::to_string(spec.batch) + ") with its runtime.");
  line(out, "    " + tool + " run" + nv + " " + sif + "");
  line(out, "        serves it: KServe v2 HTTP on port " + port + " (/v2/health/live, /v2/health/ready,");
  line(out, "        /v2/models/" + comment_text(spec.name) + "/infer).");
  line(out, "    " + tool + " run" + nv + " " + sif + " run /kiln/model/model.kiln --input IN.npz --output OUT.npz");
  line(out, "        batch inference (bind the folders holding IN and OUT).");
  line(out, "    " + tool + " test" + nv + " " + sif);
  line(out, "        checks the bundled self-test vectors; non-zero exit on a mismatch.");
  line(out, std::string("    Environment: KILN_THREADS (0: the CPU quota), OMP_NUM_THREADS") +
                (gpu ? ", KILN_DEVICE (cuda; cpu runs on the CPUs), KILN_CUDA_PRECISION (fp32, tf32, fp16 or bf16)." : "."));
  return out;
}

}  // namespace kiln::recipes

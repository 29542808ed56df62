// The Slurm batch script: one input file in, one output file out, on one node. It builds the SIF
// from the oci-archive on first use, runs the self-test on the allocated node, then the model
// with srun inside Apptainer (Singularity where the target says so).
#include "containers/recipes/recipes.h"

namespace kiln::recipes {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

void line(std::string& out, const std::string& text = "") { out += text + "\n"; }
void directive(std::string& out, const std::string& option, const std::string& value) {
  out += "#SBATCH --" + option + "=" + value + "\n";
}

}  // namespace

std::string slurm_script_text(const DeploymentSpec& spec) {
  const std::string resource = deployment_resource_name(spec.name);
  const api::TargetInfrastructure& t = spec.target;
  const int64_t gpus = deployment_gpus(spec);
  const int64_t threads = deployment_threads(spec);
  const std::string tool = t.container_runtime == api::ContainerRuntime::singularity ? "singularity" : "apptainer";
  // Named after the image's digest: a new image gets a new SIF, never a stale one.
  const std::string& digest = spec.image_digest;
  std::string sif = resource;
  if (digest.size() >= 19) sif.append("-").append(digest, 7, 12);
  sif += ".sif";

  std::string out;
  line(out, "#!/bin/bash");
  line(out, "# " + resource + ": batch inference with model '" + comment_text(spec.name) + "' (kiln " +
                comment_text(spec.kiln_version) + ", batch " + std::to_string(spec.batch) + ") on target '" +
                comment_text(t.name) + "'.");
  line(out, "#");
  line(out, "# Submit from the folder holding this script and " + spec.oci_archive + ":");
  line(out, "#   sbatch job.slurm INPUT OUTPUT");
  line(out, "# INPUT: an .npz with one array per model input (or an .npy for a single-input model);");
  line(out, "# OUTPUT: the .npz the job writes. Relative paths are taken from the submit folder; the");
  line(out, "# folders holding them are bound into the container at the same paths.");
  line(out, "# The first job builds " + sif + " from " + spec.oci_archive + " (" + tool +
                " build: no root needed); later jobs reuse it.");
  line(out, "# Every job runs the image's self-test on its node first and stops if it fails.");
  line(out, "# One input per job: for many, submit one job each (or an --array job choosing its file");
  line(out, "# by $SLURM_ARRAY_TASK_ID).");
  if (t.scheduler != api::Scheduler::slurm)
    line(out, std::string("# (target '") + comment_text(t.name) + "' is scheduled by " + api::scheduler_name(t.scheduler) +
                  ", not Slurm: for reference.)");
  directive(out, "job-name", resource);
  if (t.slurm) {
    if (!t.slurm->partition.empty()) directive(out, "partition", t.slurm->partition);
    if (!t.slurm->account.empty()) directive(out, "account", t.slurm->account);
    if (!t.slurm->qos.empty()) directive(out, "qos", t.slurm->qos);
    if (!t.slurm->time_limit.empty()) directive(out, "time", t.slurm->time_limit);
    if (!t.slurm->constraint.empty()) directive(out, "constraint", t.slurm->constraint);
  }
  directive(out, "nodes", "1");
  directive(out, "ntasks", "1");
  directive(out, "cpus-per-task", std::to_string(threads));
  // One thread per physical core: SMT siblings share the vector units the kernels saturate.
  if (t.node.cpu.threads_per_core > 1) directive(out, "hint", "nomultithread");
  directive(out, "mem", std::to_string(deployment_memory_bytes(spec) / kMiB) + "M");
  if (gpus > 0) directive(out, "gres", "gpu:" + std::to_string(gpus));
  directive(out, "output", resource + "-%j.out");
  line(out);

  line(out, "set -euo pipefail");
  line(out);
  line(out, "if [[ $# -ne 2 ]]; then");
  line(out, "  echo \"usage: sbatch job.slurm INPUT OUTPUT\" >&2");
  line(out, "  exit 2");
  line(out, "fi");
  line(out, "cd \"${SLURM_SUBMIT_DIR:-.}\"");
  line(out, "if [[ ! -f $1 ]]; then");
  line(out, "  echo \"job.slurm: input '$1': No such file or directory (run from $(pwd))\" >&2");
  line(out, "  exit 1");
  line(out, "fi");
  line(out, "INPUT=$(realpath -e -- \"$1\")");
  line(out, "OUTPUT=$(realpath -m -- \"$2\")");
  line(out, "IN_DIR=$(dirname -- \"$INPUT\")");
  line(out, "OUT_DIR=$(dirname -- \"$OUTPUT\")");
  line(out, "case \"$IN_DIR$OUT_DIR\" in");
  line(out, "  *[:,]*) echo \"error: folders with ':' or ',' cannot be bound: move INPUT/OUTPUT\" >&2; exit 2 ;;");
  line(out, "esac");
  line(out, "mkdir -p -- \"$OUT_DIR\"");
  line(out);
  line(out, "RUNTIME=" + tool);
  line(out, "SIF=" + shell_quote(sif));
  line(out, "ARCHIVE=" + shell_quote(spec.oci_archive));
  line(out, "THREADS=\"${SLURM_CPUS_PER_TASK:-" + std::to_string(threads) + "}\"");
  if (gpus > 0) {
    line(out, "DEVICE=\"${KILN_DEVICE:-cuda}\"  # KILN_DEVICE=cpu sbatch ... runs the model on the CPUs");
    line(out, "PRECISION=\"${KILN_CUDA_PRECISION:-" + spec.cuda_precision + "}\"  # fp32, tf32, fp16 or bf16 on the GPU");
  }
  line(out);
  line(out, "if [[ ! -f \"$SIF\" ]]; then");
  line(out, "  # A job-private name, then a rename: concurrent jobs never see half a SIF.");
  line(out, "  \"$RUNTIME\" build \"$SIF.${SLURM_JOB_ID:-$$}.tmp\" \"oci-archive://$ARCHIVE\"");
  line(out, "  mv -f -- \"$SIF.${SLURM_JOB_ID:-$$}.tmp\" \"$SIF\"");
  line(out, "fi");
  line(out);
  line(out, "BINDS=(--bind \"$IN_DIR\")");
  line(out, "if [[ \"$OUT_DIR\" != \"$IN_DIR\" ]]; then BINDS+=(--bind \"$OUT_DIR\"); fi");
  line(out, "# --cleanenv: the host's LD_LIBRARY_PATH and modules must not reach the image's exact closure.");
  line(out, std::string("CONTAINER=(\"$RUNTIME\" exec --cleanenv") + (gpus > 0 ? " --nv" : "") +
                " --env \"KILN_THREADS=$THREADS,OMP_NUM_THREADS=$THREADS" + (gpus > 0 ? ",KILN_DEVICE=$DEVICE,KILN_CUDA_PRECISION=$PRECISION" : "") +
                "\" \"${BINDS[@]}\" \"$SIF\" /kiln/bin/kiln-runtime)");
  line(out);
  line(out, "echo \"self-test on $(hostname)\"");
  line(out, "\"${CONTAINER[@]}\" selftest");
  line(out);
  line(out, "# Slurm 22.05's srun does not inherit --cpus-per-task from the job: pass it on.");
  line(out, "srun --ntasks=1 --cpus-per-task=\"$THREADS\" \"${CONTAINER[@]}\" \\");
  line(out, "  run /kiln/model/model.kiln --input \"$INPUT\" --output \"$OUTPUT\"");
  line(out, "echo \"wrote $OUTPUT\"");
  return out;
}

}  // namespace kiln::recipes

// The Dockerfile: the image kiln writes itself, rebuilt with `docker build` from the bundle.
//   libs  (debian:bookworm-slim): the pinned Debian packages kiln-runtime was linked against; the
//          runtime's exact library closure is copied into /rootfs at the loader's paths.
//   cuda  (GPU targets, nvidia/cuda:*-cudnn-runtime, cuda_base_image): only the CUDA libraries the
//          bundled plugin needs are taken from it.
//   final (scratch): /rootfs + the bundle at /kiln. No shell, no package manager: the same
//          contents as kiln's own image, and a smaller closure than distroless/cc-debian12, which
//          lacks libdnnl/libzip but carries files the runtime never opens.
#include <set>

#include "containers/recipes/recipes.h"

namespace kiln::recipes {
namespace {

void line(std::string& out, const std::string& text = "") { out += text + "\n"; }

}  // namespace

std::string dockerfile_text(const DeploymentSpec& spec) {
  const std::string resource = deployment_resource_name(spec.name);
  const std::string image = deployment_image(spec);
  const bool gpu = deployment_gpus(spec) > 0;
  const api::TargetInfrastructure& t = spec.target;
  std::string bundle = spec.bundle_dir;
  while (!bundle.empty() && bundle.back() == '/') bundle.pop_back();

  std::string out;
  line(out, "# " + resource + ": model '" + comment_text(spec.name) + "' compiled by kiln " +
                comment_text(spec.kiln_version) + " for target '" + comment_text(t.name) + "' (" +
                api::target_kind_name(t.kind) + ", " + (gpu ? "GPU" : "CPU") + ").");
  line(out, "#");
  line(out, "# Build it from the folder holding this file (the build context needs " + bundle + "/):");
  line(out, "#   docker build -t " + image + " .");
  line(out, "# (podman build takes the same arguments.) The image is also here ready-made, built");
  line(out, "# reproducibly by kiln without a daemon; either file is this same image:");
  line(out, "#   docker load -i " + spec.docker_archive);
  line(out, "#   podman load -i " + spec.oci_archive + "   (or: skopeo copy oci-archive:" + spec.oci_archive + " docker://" + image + ")");
  line(out, "# Run it: docker run --rm -p " + std::to_string(spec.port) + ":" + std::to_string(spec.port) + " " + image +
                (gpu ? "   (GPU: add --gpus all)" : ""));
  if (gpu) line(out, "# Every verb runs on the GPU (KILN_DEVICE=cuda); -e KILN_DEVICE=cpu runs on the CPUs instead.");
  line(out, "#   serve-model (default): KServe v2 HTTP on port " + std::to_string(spec.port) +
                " (/v2/health/live, /v2/health/ready, /v2/models/" + comment_text(spec.name) + "/infer)");
  line(out, "#   run /kiln/model/model.kiln --input x.npz --output y.npz   (batch mode; mount a folder)");
  line(out, "#   selftest   (checks the bundled self-test vectors; non-zero exit on mismatch)");
  line(out);

  if (gpu) {
    // Declared before the first FROM so that FROM can use it.
    if (spec.cuda_image.empty()) {
      line(out, "# kiln knows no NVIDIA image for the CUDA/cuDNN majors the plugin was built against: name one");
      line(out, "# that carries the libraries copied below (docker build --build-arg CUDA_IMAGE=nvidia/cuda:...-cudnn-runtime-...).");
      line(out, "ARG CUDA_IMAGE");
    } else {
      line(out, "# NVIDIA's image with the CUDA and cuDNN majors the plugin (" + bundle + "/bin/libkiln_cuda.so) was built");
      line(out, "# against; --build-arg CUDA_IMAGE=... names another (a cuDNN minor at least the build's is safest).");
      line(out, "ARG CUDA_IMAGE=" + spec.cuda_image);
    }
    line(out);
  }
  line(out, "# The shared libraries kiln-runtime loads, from the Debian 12 packages it was built against");
  line(out, "# (versions from the SBOM, " + bundle + "/sbom.spdx.json). A pin a later point release replaced");
  line(out, "# is still on snapshot.debian.org.");
  line(out, "FROM debian:bookworm-slim AS libs");
  std::set<std::string> packages(spec.debian_packages.begin(), spec.debian_packages.end());
  if (!packages.empty()) {
    line(out, "RUN apt-get update \\");
    // --allow-downgrades: the base image may already carry a later point release of a pin (libc6).
    line(out, " && apt-get install -y --no-install-recommends --allow-downgrades \\");
    for (const std::string& p : packages) line(out, "      " + p + " \\");
    line(out, " && rm -rf /var/lib/apt/lists/*");
  } else {
    line(out, "# (no package owners were recorded: the libraries below must already be in the base image)");
  }
  // With a GPU, library_paths holds the plugin's system libraries too (libz for cuDNN, glibc's
  // libdl/librt stubs that the CUDA libraries name).
  std::set<std::string> libraries(spec.library_paths.begin(), spec.library_paths.end());
  line(out, "# The exact closure at the paths the loader resolved (symlinks followed), plus what a");
  line(out, "# distroless image carries: users for the non-root user, a home and a writable /tmp.");
  line(out, "RUN mkdir -p /rootfs/etc /rootfs/home/nonroot /rootfs/tmp \\");
  if (!libraries.empty()) {
    line(out, " && cp --parents --dereference \\");
    for (const std::string& lib : libraries) line(out, "      " + lib + " \\");
    line(out, "      /rootfs/ \\");
  }
  line(out, " && printf '%s\\n' 'root:x:0:0:root:/root:/sbin/nologin' \\");
  line(out, "      'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > /rootfs/etc/passwd \\");
  line(out, " && printf '%s\\n' 'root:x:0:' 'nonroot:x:65532:' > /rootfs/etc/group \\");
  line(out, " && chown 65532:65532 /rootfs/home/nonroot \\");
  line(out, " && chmod 1777 /rootfs/tmp");
  line(out);

  if (gpu) {
    line(out, "# CUDA runtime libraries only: kiln-runtime and its closure are Debian 12 builds, so NVIDIA's");
    line(out, "# Ubuntu userland must not become the base; the CUDA libraries need only glibc, libstdc++ and libz (above).");
    line(out, "# The driver (libcuda.so) comes from the host: NVIDIA Container Toolkit, or apptainer --nv.");
    line(out, "FROM ${CUDA_IMAGE} AS cuda");
    line(out);
  }

  line(out, "FROM scratch");
  line(out, "COPY --from=libs /rootfs/ /");
  if (gpu && !spec.cuda_libraries.empty()) {
    // Into a directory the loader searches by default, so no LD_LIBRARY_PATH (which --nv rewrites);
    // cuDNN's sub-libraries beside libcudnn.so, which loads them from its own folder.
    line(out, "# The CUDA libraries the plugin needs, cuDNN's sub-libraries included, where the loader looks by default.");
    line(out, "COPY --from=cuda \\");
    for (const std::string& lib : spec.cuda_libraries) line(out, "      " + cuda_base_image_library_dir(lib) + "/" + lib + " \\");
    line(out, "      /usr/lib/x86_64-linux-gnu/");
  }
  line(out, "# Owned by root: read-only for the runtime's user.");
  line(out, "COPY [\"" + bundle + "/\", \"/kiln/\"]");
  line(out, "USER 65532:65532");
  line(out, "WORKDIR /kiln");
  std::string env = "ENV PATH=/kiln/bin KILN_BUNDLE=/kiln KILN_THREADS=" + std::to_string(spec.threads);
  if (spec.threads > 0) env += " OMP_NUM_THREADS=" + std::to_string(spec.threads);
  else line(out, "# KILN_THREADS=0: as many threads as the container's CPU quota allows, decided at run time.");
  line(out, env);
  if (gpu)
    line(out, "ENV KILN_DEVICE=cuda KILN_CUDA_PRECISION=" + spec.cuda_precision +
                  " NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility");
  line(out, "LABEL org.opencontainers.image.title=" + dockerfile_string(resource) + " \\");
  line(out, "      org.opencontainers.image.version=" + dockerfile_string(spec.kiln_version) + " \\");
  line(out, "      org.opencontainers.image.vendor=\"kiln\" \\");
  line(out, "      kiln.model=" + dockerfile_string(spec.name) + " \\");
  line(out, "      kiln.batch=" + dockerfile_string(std::to_string(spec.batch)) + " \\");
  line(out, "      kiln.target=" + dockerfile_string(t.name));
  line(out, "EXPOSE " + std::to_string(spec.port) + "/tcp");
  line(out, "# The self-test runs the whole model on its vectors (seconds to minutes, competing with");
  line(out, "# serving): a long interval. Orchestrators probe /v2/health/* instead.");
  line(out, "HEALTHCHECK --interval=10m --timeout=5m --start-period=2m --retries=1 \\");
  line(out, "  CMD [\"/kiln/bin/kiln-runtime\", \"selftest\"]");
  line(out, "ENTRYPOINT [\"/kiln/bin/kiln-runtime\"]");
  line(out, "CMD [\"serve-model\"]");
  return out;
}

std::string dockerignore_text(const DeploymentSpec& spec) {
  std::string bundle = spec.bundle_dir;
  while (!bundle.empty() && bundle.back() == '/') bundle.pop_back();
  return "# The Dockerfile copies " + bundle + "/ only: leave the archives and the OCI layout out of the build context.\n*\n!" +
         bundle + "\n";
}

}  // namespace kiln::recipes

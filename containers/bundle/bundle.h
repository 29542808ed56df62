// A deployment bundle: the compiled model, the lean runtime binary with the closure of shared
// libraries it loads, self-test vectors (seeded inputs + the reference executor's outputs,
// verified against the compiled engine at bundle time), metadata and an SBOM. The bundle folder
// is the image's /kiln; `bundle_image_spec` turns it into three cache-friendly layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "containers/bundle/lib_closure.h"
#include "containers/bundle/sbom.h"
#include "containers/bundle/selftest.h"
#include "containers/oci/image.h"
#include "kernels/plan.h"

namespace kiln {

// Paths inside the image.
inline constexpr const char* kImageBundleDir = "kiln";  // /kiln
inline constexpr const char* kImageRuntime = "kiln/bin/kiln-runtime";
inline constexpr const char* kImageUser = "65532:65532";  // distroless' "nonroot"
// GPU images: the CUDA plugin beside kiln-runtime, where kiln-runtime looks for it first, and the
// CUDA libraries in a folder the loader searches by default, so no LD_LIBRARY_PATH is needed
// (apptainer --nv rewrites it); the Dockerfile recipe puts them there too.
inline constexpr const char* kImageCudaPlugin = "kiln/bin/libkiln_cuda.so";
inline constexpr const char* kImageCudaLibDir = "usr/lib/x86_64-linux-gnu";

// Where the image is meant to run (from the target description; "this machine" without one).
struct BundleTarget {
  std::string name = "local";
  std::string kind = "local";       // hpc | cloud | local
  std::string scheduler = "none";   // slurm | kubernetes | none
  std::string gpu_model;            // empty: a CPU target
  int64_t gpu_count = 0;            // per node
};

struct BundleRequest {
  std::string dir;             // the bundle folder to write (created)
  std::string model_file;      // the compiled .kiln; copied to DIR/model/model.kiln unless it is already there
  const Plan* compiled = nullptr;   // the plan in model_file
  const Plan* reference = nullptr;  // what the reference executor runs for the expected outputs:
                                    // the uncompiled plan when there is one, else `compiled`
  std::string reference_kind;       // "uncompiled plan" or "compiled plan", for the metadata
  std::string runtime_binary;       // kiln-runtime
  std::string device_plugin;        // GPU images: libkiln_cuda.so, carried with the CUDA libraries it
                                    // needs, and the image runs on the GPU; "": a CPU image (neither)
  std::string cuda_precision = "fp32";  // GPU images: KILN_CUDA_PRECISION, kiln-runtime's --cuda-precision default
  std::vector<std::string> cuda_keep_fp32;  // GPU images: the steps the .kiln keeps in fp32 at that precision (metadata only)
  std::string model_name;           // "model" (from model.onnx)
  std::string source;               // the file the user gave (its name only is recorded)
  std::string passes;
  int64_t batch = 1;
  int threads = 0;                  // 0: the container's CPU quota at run time
  BundleTarget target;
  std::string kiln_version;
  int64_t created = 0;              // SOURCE_DATE_EPOCH
  SelftestTolerance tolerance;
};

struct Bundle {
  BundleRequest request;
  std::vector<SharedLibrary> libraries;           // kiln-runtime's and the plugin's system libraries
  std::vector<SharedLibrary> cuda_libraries;      // GPU images: by soname, at kImageCudaLibDir in the image
  int cuda_major = 0, cudnn_major = 0;            // what the plugin was built against (0: CPU image)
  std::map<std::string, DebianPackage> packages;  // by library path
  std::vector<SelftestCheck> checks;              // the verification at bundle time
  std::string metadata_json;
  std::string sbom_json;
};

// Writes the bundle folder (model/, selftest/, bin/kiln-runtime [+ bin/libkiln_cuda.so], metadata.json,
// sbom.spdx.json: what a Dockerfile build copies to /kiln) and verifies the self-test (on the CPU
// engine: the machine building a GPU image needs no GPU; the image's own self-test checks the GPU).
// A failed verification is an error: an image whose self-test fails would only fail later, at
// deployment.
Result<Bundle> bundle_assemble(const BundleRequest& request);

struct ImageOptions {
  std::string tag = "latest";
  int model_gzip_level = 0;  // weights gain ~7% from gzip at ~25 MB/s: stored by default
  int gzip_level = 6;        // runtime and config layers
  int port = 8080;
  std::string layer_cache_dir;  // "" for none
};

// Layers: [cuda (GPU images: the CUDA libraries)] -> runtime (binary, plugin, libraries, loader)
// -> model (.kiln) -> config (self-test vectors, metadata, SBOM, /etc/passwd, /tmp), so a new
// model re-uses the runtime layer and a new kiln the CUDA one.
oci::ImageSpec bundle_image_spec(const Bundle& bundle, const ImageOptions& options);

}  // namespace kiln

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
  std::vector<SharedLibrary> libraries;
  std::map<std::string, DebianPackage> packages;  // by library path
  std::vector<SelftestCheck> checks;              // the verification at bundle time
  std::string metadata_json;
  std::string sbom_json;
};

// Writes the bundle folder (model/, selftest/, bin/kiln-runtime, metadata.json, sbom.spdx.json:
// what a Dockerfile build copies to /kiln) and verifies the self-test. A failed verification is an error: an
// image whose self-test fails would only fail later, at deployment.
Result<Bundle> bundle_assemble(const BundleRequest& request);

struct ImageOptions {
  std::string tag = "latest";
  int model_gzip_level = 0;  // weights gain ~7% from gzip at ~25 MB/s: stored by default
  int gzip_level = 6;        // runtime and config layers
  int port = 8080;
  std::string layer_cache_dir;  // "" for none
};

// Layers: runtime (binary, libraries, loader) -> model (.kiln) -> config (self-test vectors,
// metadata, SBOM, /etc/passwd, /tmp), so a new model re-uses the runtime layer.
oci::ImageSpec bundle_image_spec(const Bundle& bundle, const ImageOptions& options);

}  // namespace kiln

// Writes an OCI image without a daemon (like Jib, ko and rules_oci): an image layout folder
// (oci-layout, index.json, blobs/sha256/...) and an oci-archive tarball of it. Reproducible: the
// same spec gives the same bytes — sorted tar entries with one fixed mtime, gzip without a
// timestamp, sorted compact JSON, `created` taken from the spec, never from the clock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "containers/oci/blob.h"
#include "containers/oci/tar.h"

namespace kiln::oci {

struct LayerSpec {
  std::string name;  // "runtime", "model", "config": recorded as the "kiln.layer" annotation
  std::vector<TarEntry> entries;
  int gzip_level = 6;  // 0: uncompressed tar
};

struct ImageSpec {
  std::string tag = "latest";  // org.opencontainers.image.ref.name in index.json
  int64_t created = 0;         // seconds since 1970: image `created`, history and every tar mtime
  std::string architecture = "amd64";
  std::string os = "linux";
  std::vector<LayerSpec> layers;  // base first: put what changes least first, for caching
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;  // "KEY=value"
  std::string user;              // "65532:65532"
  std::string working_dir;
  std::vector<std::string> exposed_ports;  // "8080/tcp"
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> manifest_annotations;
  std::string layer_cache_dir;  // compressed layers by diff_id (see layer_write); "" for none
};

struct BuiltImage {
  Descriptor manifest;
  Descriptor config;
  std::vector<LayerBlob> layers;  // in spec order
  std::string layout_dir;
  std::string archive_path;
  uint64_t archive_size = 0;
};

// Writes the layout into `layout_dir` (which must be absent, empty or an earlier OCI layout:
// it is replaced) and, when `archive_path` is not empty, the oci-archive tarball.
Result<BuiltImage> image_write(const ImageSpec& spec, const std::string& layout_dir, const std::string& archive_path);

// Whether image_write may use `layout_dir`: absent, empty or an OCI layout (checked up front by
// callers that do slow work first).
Status image_layout_check(const std::string& layout_dir);

// The image's JSON documents, exposed for tests.
std::string image_config_json(const ImageSpec& spec, const std::vector<LayerBlob>& layers);
std::string image_manifest_json(const ImageSpec& spec, const Descriptor& config, const std::vector<LayerBlob>& layers);

}  // namespace kiln::oci

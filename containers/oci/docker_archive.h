// The same image as a docker-archive tarball (the `docker save` format that `docker load`,
// `podman load` and `skopeo copy docker-archive:` read): manifest.json naming the config and
// the layers, the config as <hex>.json and each layer blob as <diff_id hex>.tar. The blobs are
// the layout's own (gzip layers stay compressed: docker load and skopeo detect it), so the
// config digest and diff_ids, hence the image ID, are the OCI image's. Reproducible like it.
#pragma once

#include <cstdint>
#include <string>

#include "containers/oci/image.h"

namespace kiln::oci {

// manifest.json: [{"Config": ..., "RepoTags": [repo_tag], "Layers": [...]}]
std::string docker_archive_manifest_json(const BuiltImage& image, const std::string& repo_tag);

// Writes the tarball from the blobs of `image.layout_dir`; returns its size in bytes.
// `repo_tag` is "name:tag" (a reference docker load tags the image with).
Result<uint64_t> docker_archive_write(const BuiltImage& image, const std::string& repo_tag, int64_t mtime,
                                      const std::string& archive_path);

}  // namespace kiln::oci

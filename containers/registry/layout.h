// Reads the image to push from an OCI image layout (oci-layout, index.json, blobs/sha256/…),
// checking what a registry would otherwise reject halfway through: the manifest's bytes match
// its digest, and every blob it names is present with its declared size.
#pragma once

#include <string>
#include <vector>

#include "containers/oci/blob.h"
#include "kernels/core/status.h"

namespace kiln::registry {

struct LayoutImage {
  std::string layout_dir;
  oci::Descriptor manifest;  // from index.json
  std::string manifest_bytes;
  oci::Descriptor config;
  std::vector<oci::Descriptor> layers;  // manifest order

  std::string blob_path(const std::string& digest) const;  // layout_dir/blobs/sha256/<hex>
};

// `layout_dir` is the layout itself or a `kiln image` output folder holding one in oci/. With
// several manifests in index.json, `ref_name` picks the one annotated
// org.opencontainers.image.ref.name=ref_name.
Result<LayoutImage> layout_image_read(const std::string& layout_dir, const std::string& ref_name = "");

}  // namespace kiln::registry

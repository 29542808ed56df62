// Content-addressed blobs of an OCI image layout (blobs/sha256/<hex>): JSON documents and
// layers. A layer is streamed once: tar -> SHA-256 of the tar (its diff_id) -> gzip (zlib, no
// timestamp, OS=3) -> SHA-256 of the blob -> file, so a 100 MB model layer is never held twice.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "containers/oci/tar.h"
#include "kernels/core/status.h"

namespace kiln::oci {

inline constexpr const char* kMediaTypeLayerTar = "application/vnd.oci.image.layer.v1.tar";
inline constexpr const char* kMediaTypeLayerTarGzip = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr const char* kMediaTypeConfig = "application/vnd.oci.image.config.v1+json";
inline constexpr const char* kMediaTypeManifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr const char* kMediaTypeIndex = "application/vnd.oci.image.index.v1+json";

struct Descriptor {
  std::string media_type;
  std::string digest;  // "sha256:<hex>"
  uint64_t size = 0;
  std::map<std::string, std::string> annotations;
};

struct LayerBlob {
  Descriptor descriptor;
  std::string diff_id;  // digest of the uncompressed tar: the portable reproducibility key
  uint64_t tar_size = 0;
};

// Writes `bytes` as a blob under `blobs_dir` (…/blobs/sha256).
Result<Descriptor> blob_write(const std::string& blobs_dir, const std::string& media_type, const std::string& bytes);

// Writes a layer blob; gzip_level 0 stores the tar uncompressed (its own media type), 1..9
// compresses with zlib at that level. The compression is recorded in the descriptor's
// "kiln.compression" annotation.
//
// With a cache folder, a compressed layer is looked up by its diff_id and compression first:
// the runtime layer is the same for every model, so only its first build pays for gzip (52 MB
// at level 6: ~2 s here). Cache entries are checked against their digest when used; a cache
// that cannot be read or written is skipped, never an error.
Result<LayerBlob> layer_write(const std::string& blobs_dir, std::vector<TarEntry> entries, int64_t mtime, int gzip_level,
                              const std::string& cache_dir = "");

// "gzip (zlib 1.2.13, level 6)" or "none"
std::string compression_name(int gzip_level);

}  // namespace kiln::oci

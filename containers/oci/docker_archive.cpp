#include "containers/oci/docker_archive.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "containers/oci/digest.h"

namespace kiln::oci {
namespace {

std::string config_name(const BuiltImage& image) { return std::string(digest_hex(image.config.digest)) + ".json"; }

// Named by diff_id, as `docker save` does: a layer shared by two images has one name.
std::string layer_name(const LayerBlob& layer) { return std::string(digest_hex(layer.diff_id)) + ".tar"; }

std::string blob_path(const BuiltImage& image, const std::string& digest) {
  return (std::filesystem::path(image.layout_dir) / "blobs" / "sha256" / std::string(digest_hex(digest))).string();
}

}  // namespace

std::string docker_archive_manifest_json(const BuiltImage& image, const std::string& repo_tag) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerBlob& l : image.layers) layers.push_back(layer_name(l));
  const nlohmann::json entry = {{"Config", config_name(image)}, {"RepoTags", {repo_tag}}, {"Layers", layers}};
  return nlohmann::json::array({entry}).dump();
}

Result<uint64_t> docker_archive_write(const BuiltImage& image, const std::string& repo_tag, int64_t mtime,
                                      const std::string& archive_path) {
  KILN_REQUIRE(!image.layout_dir.empty() && !image.layers.empty(), invalid_argument,
               "docker archive: the image has no layout folder or no layers");
  KILN_REQUIRE(!repo_tag.empty() && repo_tag.find(':') != std::string::npos, invalid_argument,
               "docker archive: repository tag '", repo_tag, "' is not of the form name:tag");
  std::vector<TarEntry> entries;
  entries.push_back(TarEntry::data("manifest.json", docker_archive_manifest_json(image, repo_tag)));
  entries.push_back(TarEntry::file(config_name(image), blob_path(image, image.config.digest)));
  for (const LayerBlob& l : image.layers) {
    // Two layers with one diff_id are one file.
    bool seen = false;
    for (const TarEntry& e : entries) seen = seen || e.path == layer_name(l);
    if (!seen) entries.push_back(TarEntry::file(layer_name(l), blob_path(image, l.descriptor.digest)));
  }
  return tar_write_file(std::move(entries), mtime, archive_path);
}

}  // namespace kiln::oci

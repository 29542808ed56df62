#include "containers/registry/layout.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "containers/oci/digest.h"

namespace kiln::registry {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxDocumentBytes = 4u << 20;  // manifests and index.json (registries cap at 4 MiB)

Result<std::string> read_small(const fs::path& path, const std::string& what) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  KILN_REQUIRE(!ec, io, "cannot read ", what, " '", path.string(), "': ", ec.message());
  KILN_REQUIRE(size <= kMaxDocumentBytes, limit_exceeded, what, " '", path.string(), "' is ", size,
               " bytes; the limit is ", kMaxDocumentBytes);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  KILN_REQUIRE(in.good() || in.eof(), io, "cannot read ", what, " '", path.string(), "'");
  return ss.str();
}

Result<oci::Descriptor> descriptor_parse(const json& j, const std::string& where) {
  static const std::regex digest_re(R"(^sha256:[0-9a-f]{64}$)");
  KILN_REQUIRE(j.is_object() && j.contains("digest") && j["digest"].is_string() && j.contains("size") &&
                   j["size"].is_number_unsigned() && j.contains("mediaType") && j["mediaType"].is_string(),
               parse, where, ": not a descriptor (mediaType, digest, size)");
  oci::Descriptor d;
  d.media_type = j["mediaType"].get<std::string>();
  d.digest = j["digest"].get<std::string>();
  d.size = j["size"].get<uint64_t>();
  KILN_REQUIRE(std::regex_match(d.digest, digest_re), unsupported, where, ": digest '", d.digest,
               "' is not sha256:<64 hex digits>");
  if (j.contains("annotations") && j["annotations"].is_object())
    for (const auto& [k, v] : j["annotations"].items())
      if (v.is_string()) d.annotations[k] = v.get<std::string>();
  return d;
}

}  // namespace

std::string LayoutImage::blob_path(const std::string& digest) const {
  return (fs::path(layout_dir) / "blobs" / "sha256" / std::string(oci::digest_hex(digest))).string();
}

Result<LayoutImage> layout_image_read(const std::string& layout_dir, const std::string& ref_name) {
  LayoutImage image;
  image.layout_dir = layout_dir;
  if (!fs::exists(fs::path(layout_dir) / "index.json") && fs::exists(fs::path(layout_dir) / "oci" / "index.json"))
    image.layout_dir = (fs::path(layout_dir) / "oci").string();
  const fs::path dir(image.layout_dir);
  KILN_REQUIRE(fs::exists(dir / "oci-layout") && fs::exists(dir / "index.json"), io, "'", layout_dir,
               "' is not an OCI image layout (no oci-layout and index.json; `kiln image -o DIR` writes one in DIR/oci)");
  KILN_ASSIGN(index_text, read_small(dir / "index.json", "index"));
  const json index = json::parse(index_text, nullptr, false);
  KILN_REQUIRE(index.is_object() && index.contains("manifests") && index["manifests"].is_array() &&
                   !index["manifests"].empty(),
               parse, "'", (dir / "index.json").string(), "' lists no manifests");

  std::vector<oci::Descriptor> manifests;
  for (size_t i = 0; i < index["manifests"].size(); ++i) {
    KILN_ASSIGN(d, descriptor_parse(index["manifests"][i], "index.json manifests[" + std::to_string(i) + "]"));
    manifests.push_back(std::move(d));
  }
  const char* kRefName = "org.opencontainers.image.ref.name";
  if (manifests.size() == 1) {
    image.manifest = manifests[0];
  } else {
    std::string names;
    for (const auto& m : manifests) {
      auto it = m.annotations.find(kRefName);
      const std::string name = it == m.annotations.end() ? "(unnamed)" : it->second;
      if (!ref_name.empty() && name == ref_name) image.manifest = m;
      names += (names.empty() ? "" : ", ") + name;
    }
    KILN_REQUIRE(!image.manifest.digest.empty(), invalid_argument, "'", layout_dir, "' holds ", manifests.size(),
                 " images (", names, "); name one with --from-tag");
  }
  KILN_REQUIRE(image.manifest.media_type == oci::kMediaTypeManifest ||
                   image.manifest.media_type == "application/vnd.docker.distribution.manifest.v2+json",
               unsupported, "'", layout_dir, "': the image is a ", image.manifest.media_type,
               "; kiln pushes single-platform image manifests");

  KILN_ASSIGN(manifest_bytes, read_small(image.blob_path(image.manifest.digest), "manifest"));
  KILN_REQUIRE(oci::sha256_digest(manifest_bytes) == image.manifest.digest, parse, "manifest blob ",
               image.manifest.digest, " in '", layout_dir, "' does not match its digest: the layout is damaged");
  image.manifest_bytes = std::move(manifest_bytes);
  const json manifest = json::parse(image.manifest_bytes, nullptr, false);
  KILN_REQUIRE(manifest.is_object() && manifest.contains("config") && manifest.contains("layers") &&
                   manifest["layers"].is_array(),
               parse, "manifest ", image.manifest.digest, " has no config or layers");
  KILN_ASSIGN(config, descriptor_parse(manifest["config"], "manifest config"));
  image.config = std::move(config);
  for (size_t i = 0; i < manifest["layers"].size(); ++i) {
    KILN_ASSIGN(layer, descriptor_parse(manifest["layers"][i], "manifest layers[" + std::to_string(i) + "]"));
    image.layers.push_back(std::move(layer));
  }
  std::vector<const oci::Descriptor*> blobs{&image.config};
  for (const auto& l : image.layers) blobs.push_back(&l);
  for (const auto* b : blobs) {
    std::error_code ec;
    const auto size = fs::file_size(image.blob_path(b->digest), ec);
    KILN_REQUIRE(!ec, io, "'", layout_dir, "' is missing blob ", b->digest, " (", ec.message(), ")");
    KILN_REQUIRE(size == b->size, parse, "blob ", b->digest, " in '", layout_dir, "' is ", size,
                 " bytes; the manifest says ", b->size);
  }
  return image;
}

}  // namespace kiln::registry

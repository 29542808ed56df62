#include "containers/oci/image.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "containers/oci/digest.h"

namespace kiln::oci {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;  // std::map objects: keys come out sorted; dump() is compact

json descriptor_json(const Descriptor& d) {
  json j = {{"mediaType", d.media_type}, {"digest", d.digest}, {"size", d.size}};
  if (!d.annotations.empty()) j["annotations"] = d.annotations;
  return j;
}

Status prepare_layout_dir(const fs::path& dir) {
  std::error_code ec;
  KILN_TRY(image_layout_check(dir.string()));
  if (fs::exists(dir, ec)) {
    fs::remove_all(dir, ec);
    KILN_REQUIRE(!ec, io, "cannot clear '", dir.string(), "': ", ec.message());
  }
  fs::create_directories(dir / "blobs" / "sha256", ec);
  KILN_REQUIRE(!ec, io, "cannot create '", (dir / "blobs" / "sha256").string(), "': ", ec.message());
  return Status::ok();
}

Status file_write(const fs::path& path, const std::string& bytes) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  KILN_REQUIRE(f, io, "cannot create '", path.string(), "': ", std::strerror(errno));
  KILN_REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f.get()) == bytes.size(), io, "cannot write '",
               path.string(), "'");
  return Status::ok();
}

Result<uint64_t> archive_write_layout(const fs::path& layout, const std::vector<std::string>& blobs, int64_t mtime,
                                      const std::string& archive_path) {
  std::vector<TarEntry> entries;
  entries.push_back(TarEntry::file("oci-layout", (layout / "oci-layout").string()));
  entries.push_back(TarEntry::file("index.json", (layout / "index.json").string()));
  for (const std::string& digest : blobs) {
    const std::string rel = "blobs/sha256/" + std::string(digest_hex(digest));
    entries.push_back(TarEntry::file(rel, (layout / rel).string()));
  }
  std::sort(entries.begin(), entries.end(), [](const TarEntry& a, const TarEntry& b) { return a.path < b.path; });
  entries.erase(std::unique(entries.begin(), entries.end(), [](const TarEntry& a, const TarEntry& b) { return a.path == b.path; }),
                entries.end());
  return tar_write_file(std::move(entries), mtime, archive_path);
}

}  // namespace

Status image_layout_check(const std::string& layout_dir) {
  const fs::path dir(layout_dir);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::ok();
  KILN_REQUIRE(fs::is_directory(dir, ec), invalid_argument, "'", dir.string(), "' exists and is not a folder");
  KILN_REQUIRE(fs::is_empty(dir, ec) || fs::exists(dir / "oci-layout", ec), invalid_argument, "'", dir.string(),
               "' is neither empty nor an OCI image layout: refusing to replace it");
  return Status::ok();
}

std::string image_config_json(const ImageSpec& spec, const std::vector<LayerBlob>& layers) {
  const std::string created = rfc3339_utc(spec.created);
  json config = json::object();
  if (!spec.entrypoint.empty()) config["Entrypoint"] = spec.entrypoint;
  if (!spec.cmd.empty()) config["Cmd"] = spec.cmd;
  if (!spec.env.empty()) config["Env"] = spec.env;
  if (!spec.user.empty()) config["User"] = spec.user;
  if (!spec.working_dir.empty()) config["WorkingDir"] = spec.working_dir;
  if (!spec.labels.empty()) config["Labels"] = spec.labels;
  if (!spec.exposed_ports.empty()) {
    json ports = json::object();
    for (const std::string& p : spec.exposed_ports) ports[p] = json::object();
    config["ExposedPorts"] = ports;
  }
  json diff_ids = json::array();
  json history = json::array();
  for (size_t i = 0; i < layers.size(); ++i) {
    diff_ids.push_back(layers[i].diff_id);
    history.push_back({{"created", created}, {"created_by", "kiln image: " + spec.layers[i].name + " layer"}});
  }
  const json doc = {{"architecture", spec.architecture}, {"os", spec.os},          {"created", created},
                    {"config", config},                  {"history", history},    {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  return doc.dump();
}

std::string image_manifest_json(const ImageSpec& spec, const Descriptor& config, const std::vector<LayerBlob>& layers) {
  json layer_list = json::array();
  for (const LayerBlob& l : layers) layer_list.push_back(descriptor_json(l.descriptor));
  json manifest = {{"schemaVersion", 2}, {"mediaType", kMediaTypeManifest}, {"config", descriptor_json(config)}, {"layers", layer_list}};
  if (!spec.manifest_annotations.empty()) manifest["annotations"] = spec.manifest_annotations;
  return manifest.dump();
}

Result<BuiltImage> image_write(const ImageSpec& spec, const std::string& layout_dir, const std::string& archive_path) {
  KILN_REQUIRE(!spec.layers.empty(), invalid_argument, "an image needs at least one layer");
  const fs::path layout(layout_dir);
  KILN_TRY(prepare_layout_dir(layout));
  const std::string blobs = (layout / "blobs" / "sha256").string();

  BuiltImage image;
  image.layout_dir = layout_dir;
  for (const LayerSpec& l : spec.layers) {
    auto blob = layer_write(blobs, l.entries, spec.created, l.gzip_level, spec.layer_cache_dir);
    if (!blob) return blob.status().with_context("layer '" + l.name + "': ");
    blob->descriptor.annotations["kiln.layer"] = l.name;
    image.layers.push_back(std::move(*blob));
  }
  KILN_ASSIGN(config, blob_write(blobs, kMediaTypeConfig, image_config_json(spec, image.layers)));
  image.config = config;
  KILN_ASSIGN(manifest, blob_write(blobs, kMediaTypeManifest, image_manifest_json(spec, config, image.layers)));
  image.manifest = manifest;

  Descriptor in_index = manifest;
  in_index.annotations["org.opencontainers.image.ref.name"] = spec.tag;
  json index_entry = descriptor_json(in_index);
  index_entry["platform"] = {{"architecture", spec.architecture}, {"os", spec.os}};
  const json index = {{"schemaVersion", 2}, {"mediaType", kMediaTypeIndex}, {"manifests", json::array({index_entry})}};
  KILN_TRY(file_write(layout / "oci-layout", json{{"imageLayoutVersion", "1.0.0"}}.dump()));
  KILN_TRY(file_write(layout / "index.json", index.dump()));

  if (!archive_path.empty()) {
    std::vector<std::string> digests{config.digest, manifest.digest};
    for (const LayerBlob& l : image.layers) digests.push_back(l.descriptor.digest);
    KILN_ASSIGN(size, archive_write_layout(layout, digests, spec.created, archive_path));
    image.archive_path = archive_path;
    image.archive_size = size;
  }
  return image;
}

}  // namespace kiln::oci

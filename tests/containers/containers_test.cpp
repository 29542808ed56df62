// containers/: the reproducible OCI writer (tar, gzip, digests, JSON), the library closure (and
// the CUDA plugin's), the SBOM, the self-test comparison and the layers of CPU and GPU images,
// without the kiln binary.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <zlib.h>

#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "containers/bundle/bundle.h"
#include "containers/bundle/cuda_libraries.h"
#include "containers/bundle/lib_closure.h"
#include "containers/bundle/sbom.h"
#include "containers/bundle/selftest.h"
#include "containers/oci/digest.h"
#include "kernels/precision.h"
#include "containers/oci/docker_archive.h"
#include "containers/oci/image.h"
#include "tests/support/process_temp_dir.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::oci;

namespace {

fs::path temp_dir(const std::string& name) {
  static const kiln::test::ProcessTempDir root("kiln-containers-test");
  const fs::path d = root.path() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tar_bytes(std::vector<TarEntry> entries, int64_t mtime) {
  std::string out;
  auto written = tar_write(std::move(entries), mtime, [&](std::span<const uint8_t> b) {
    out.append(reinterpret_cast<const char*>(b.data()), b.size());
    return Status::ok();
  });
  REQUIRE(written);
  REQUIRE(*written == out.size());
  return out;
}

struct ReadEntry {
  std::string path;
  int64_t mtime, uid, gid, size;
  std::string uname;
  unsigned mode;
};

std::vector<ReadEntry> tar_list(const std::string& bytes) {
  std::vector<ReadEntry> list;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  archive_read_support_filter_gzip(a);
  REQUIRE(archive_read_open_memory(a, bytes.data(), bytes.size()) == ARCHIVE_OK);
  struct archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    const char* uname = archive_entry_uname(e);
    list.push_back({archive_entry_pathname(e), archive_entry_mtime(e), archive_entry_uid(e), archive_entry_gid(e),
                    archive_entry_size(e), uname ? uname : "", static_cast<unsigned>(archive_entry_perm(e))});
  }
  archive_read_free(a);
  return list;
}

ImageSpec small_spec(const std::string& model_bytes) {
  ImageSpec spec;
  spec.created = 0;
  spec.layers = {{"runtime", {TarEntry::data("kiln/bin/tool", "#!binary", 0755)}, 6},
                 {"model", {TarEntry::data("kiln/model/model.kiln", model_bytes)}, 0},
                 {"config", {TarEntry::data("kiln/metadata.json", "{}"), TarEntry::folder("tmp", 01777)}, 9}};
  spec.entrypoint = {"/kiln/bin/tool"};
  spec.cmd = {"selftest"};
  spec.env = {"PATH=/kiln/bin"};
  spec.user = "65532:65532";
  spec.exposed_ports = {"8080/tcp"};
  spec.labels = {{"org.opencontainers.image.title", "t"}, {"kiln.batch", "1"}};
  return spec;
}

}  // namespace

TEST_CASE("sha256 digests match the FIPS 180-2 vector", "[containers]") {
  REQUIRE(sha256_digest("abc") == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  REQUIRE(digest_hex("sha256:abcd") == "abcd");
}

TEST_CASE("tar streams are sorted, complete and free of host metadata", "[containers]") {
  const std::string bytes = tar_bytes({TarEntry::data("b/z.txt", "zz"), TarEntry::data("a.txt", "a", 0600),
                                       TarEntry::data("b/c/d.bin", std::string(3000, 'x'), 0755)},
                                      1234);
  const auto list = tar_list(bytes);
  std::vector<std::string> paths;
  for (const auto& e : list) paths.push_back(e.path);
  REQUIRE(paths == std::vector<std::string>{"a.txt", "b/", "b/c/", "b/c/d.bin", "b/z.txt"});
  for (const auto& e : list) {
    REQUIRE(e.mtime == 1234);
    REQUIRE(e.uid == 0);
    REQUIRE(e.gid == 0);
    REQUIRE(e.uname.empty());
  }
  REQUIRE(list[0].mode == 0600);
  REQUIRE(list[3].mode == 0755);
  REQUIRE(list[3].size == 3000);
  // Same entries in another order: the same bytes.
  REQUIRE(tar_bytes({TarEntry::data("b/c/d.bin", std::string(3000, 'x'), 0755), TarEntry::data("b/z.txt", "zz"),
                     TarEntry::data("a.txt", "a", 0600)},
                    1234) == bytes);
}

TEST_CASE("tar rejects absolute, escaping and duplicate paths", "[containers]") {
  auto sink = [](std::span<const uint8_t>) { return Status::ok(); };
  REQUIRE_FALSE(tar_write({TarEntry::data("/etc/passwd", "x")}, 0, sink));
  REQUIRE_FALSE(tar_write({TarEntry::data("a/../../x", "x")}, 0, sink));
  auto dup = tar_write({TarEntry::data("a", "x"), TarEntry::data("a", "y")}, 0, sink);
  REQUIRE_FALSE(dup);
  REQUIRE(dup.error().message.find("appears twice") != std::string::npos);
  auto missing = tar_write({TarEntry::file("a", "/nonexistent/kiln/file")}, 0, sink);
  REQUIRE_FALSE(missing);
  REQUIRE(missing.error().message.find("/nonexistent/kiln/file") != std::string::npos);
}

TEST_CASE("gzip layers carry no timestamp and their diff_id is the tar's digest", "[containers]") {
  const fs::path dir = temp_dir("gzip");
  const std::vector<TarEntry> entries{TarEntry::data("x/y", std::string(100000, 'k'))};
  auto layer = layer_write(dir.string(), entries, 0, 6);
  REQUIRE(layer);
  REQUIRE(layer->descriptor.media_type == kMediaTypeLayerTarGzip);
  REQUIRE(layer->descriptor.annotations.at("kiln.compression").find("level 6") != std::string::npos);
  const std::string blob = read_all(dir / std::string(digest_hex(layer->descriptor.digest)));
  REQUIRE(blob.size() == layer->descriptor.size);
  REQUIRE(sha256_digest(blob) == layer->descriptor.digest);
  REQUIRE(static_cast<unsigned char>(blob[0]) == 0x1f);
  REQUIRE(static_cast<unsigned char>(blob[1]) == 0x8b);
  REQUIRE(blob.substr(4, 4) == std::string(4, '\0'));  // MTIME
  REQUIRE(static_cast<unsigned char>(blob[9]) == 3);   // OS: Unix (zlib)
  REQUIRE(sha256_digest(tar_bytes(entries, 0)) == layer->diff_id);
  auto plain = layer_write(dir.string(), entries, 0, 0);
  REQUIRE(plain);
  REQUIRE(plain->descriptor.media_type == kMediaTypeLayerTar);
  REQUIRE(plain->descriptor.digest == layer->diff_id);
  REQUIRE_FALSE(layer_write(dir.string(), entries, 0, 10));
}

TEST_CASE("the same spec gives the same image in another folder, a new model keeps the runtime layer", "[containers]") {
  const fs::path a = temp_dir("image-a");
  const fs::path b = temp_dir("image-b") / "deeper";
  auto first = image_write(small_spec("weights v1"), (a / "oci").string(), (a / "image.oci.tar").string());
  REQUIRE(first);
  auto second = image_write(small_spec("weights v1"), (b / "oci").string(), (b / "image.oci.tar").string());
  REQUIRE(second);
  REQUIRE(first->manifest.digest == second->manifest.digest);
  REQUIRE(read_all(a / "oci" / "index.json") == read_all(b / "oci" / "index.json"));
  REQUIRE(read_all(a / "image.oci.tar") == read_all(b / "image.oci.tar"));

  auto other = image_write(small_spec("weights v2"), (b / "oci").string(), "");  // replaces the old layout
  REQUIRE(other);
  REQUIRE(other->layers[0].descriptor.digest == first->layers[0].descriptor.digest);
  REQUIRE(other->layers[1].descriptor.digest != first->layers[1].descriptor.digest);
  REQUIRE(other->layers[2].descriptor.digest == first->layers[2].descriptor.digest);
  REQUIRE(other->manifest.digest != first->manifest.digest);
  size_t blobs = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(b / "oci" / "blobs" / "sha256")) ++blobs;
  REQUIRE(blobs == 5);  // three layers, config, manifest: nothing left from the replaced image
}

TEST_CASE("the docker-archive names the layout's config and layers and is reproducible", "[containers]") {
  const fs::path a = temp_dir("docker-a");
  const fs::path b = temp_dir("docker-b");
  auto first = image_write(small_spec("weights"), (a / "oci").string(), "");
  auto second = image_write(small_spec("weights"), (b / "oci").string(), "");
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE(docker_archive_write(*first, "kiln-model:v1", 0, (a / "image.docker.tar").string()));
  REQUIRE(docker_archive_write(*second, "kiln-model:v1", 0, (b / "image.docker.tar").string()));
  REQUIRE(read_all(a / "image.docker.tar") == read_all(b / "image.docker.tar"));

  const auto manifest = nlohmann::json::parse(docker_archive_manifest_json(*first, "kiln-model:v1"));
  REQUIRE(manifest.size() == 1);
  REQUIRE(manifest[0]["Config"] == std::string(digest_hex(first->config.digest)) + ".json");
  REQUIRE(manifest[0]["RepoTags"] == nlohmann::json::array({"kiln-model:v1"}));
  REQUIRE(manifest[0]["Layers"].size() == 3);
  REQUIRE(manifest[0]["Layers"][1] == std::string(digest_hex(first->layers[1].diff_id)) + ".tar");

  // Every file the manifest names is in the tarball, with the blob's bytes.
  std::map<std::string, std::string> files;
  archive* ar = archive_read_new();
  archive_read_support_format_tar(ar);
  REQUIRE(archive_read_open_filename(ar, (a / "image.docker.tar").c_str(), 1 << 16) == ARCHIVE_OK);
  archive_entry* entry = nullptr;
  while (archive_read_next_header(ar, &entry) == ARCHIVE_OK) {
    std::string bytes(static_cast<size_t>(archive_entry_size(entry)), '\0');
    archive_read_data(ar, bytes.data(), bytes.size());
    files[archive_entry_pathname(entry)] = bytes;
  }
  archive_read_free(ar);
  REQUIRE(files.size() == 5);
  REQUIRE(nlohmann::json::parse(files.at("manifest.json")) == manifest);
  REQUIRE(files.at(manifest[0]["Config"].get<std::string>()) ==
          read_all(a / "oci" / "blobs" / "sha256" / std::string(digest_hex(first->config.digest))));
  REQUIRE(files.at(manifest[0]["Layers"][2].get<std::string>()) ==
          read_all(a / "oci" / "blobs" / "sha256" / std::string(digest_hex(first->layers[2].descriptor.digest))));

  REQUIRE_FALSE(docker_archive_write(*first, "no-tag", 0, (a / "bad.tar").string()));
  REQUIRE_FALSE(fs::exists(a / "bad.tar"));
}

TEST_CASE("image JSON is sorted, compact and dated from the spec", "[containers]") {
  const fs::path dir = temp_dir("json");
  ImageSpec spec = small_spec("w");
  spec.created = 1700000000;
  auto image = image_write(spec, (dir / "oci").string(), "");
  REQUIRE(image);
  const std::string config_text = read_all(dir / "oci" / "blobs" / "sha256" / std::string(digest_hex(image->config.digest)));
  const auto config = nlohmann::json::parse(config_text);
  REQUIRE(config.dump() == config_text);  // compact, and nlohmann's std::map objects are sorted
  REQUIRE(config["created"] == "2023-11-14T22:13:20Z");
  REQUIRE(config["rootfs"]["diff_ids"].size() == 3);
  REQUIRE(config["config"]["User"] == "65532:65532");
  REQUIRE(config["config"]["ExposedPorts"].contains("8080/tcp"));
  const auto index = nlohmann::json::parse(read_all(dir / "oci" / "index.json"));
  REQUIRE(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == "latest");
  REQUIRE(read_all(dir / "oci" / "oci-layout") == R"({"imageLayoutVersion":"1.0.0"})");
}

TEST_CASE("image_write refuses to replace a folder that is not an image layout", "[containers]") {
  const fs::path dir = temp_dir("refuse");
  std::ofstream(dir / "precious.txt") << "keep me";
  auto image = image_write(small_spec("w"), dir.string(), "");
  REQUIRE_FALSE(image);
  REQUIRE(image.error().message.find("refusing") != std::string::npos);
  REQUIRE(fs::exists(dir / "precious.txt"));
}

TEST_CASE("SOURCE_DATE_EPOCH sets the timestamp and bad values are errors", "[containers]") {
  ::setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
  auto t = source_date_epoch();
  REQUIRE(t);
  REQUIRE(*t == 1700000000);
  ::setenv("SOURCE_DATE_EPOCH", "yesterday", 1);
  auto bad = source_date_epoch();
  REQUIRE_FALSE(bad);
  REQUIRE(bad.error().message.find("SOURCE_DATE_EPOCH") != std::string::npos);
  ::unsetenv("SOURCE_DATE_EPOCH");
  REQUIRE(*source_date_epoch() == 0);
  REQUIRE(rfc3339_utc(0) == "1970-01-01T00:00:00Z");
}

TEST_CASE("the loader's library list parses, and a missing library is named", "[containers]") {
  const std::string text =
      "\tlinux-vdso.so.1 (0x00007ffd)\n"
      "\tlibzip.so.4 => /lib/x86_64-linux-gnu/libzip.so.4 (0x00007f57)\n"
      "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f58)\n"
      "\t/lib64/ld-linux-x86-64.so.2 (0x00007f59)\n";
  auto libs = library_list_parse(text, "bin");
  REQUIRE(libs);
  REQUIRE(libs->size() == 3);
  REQUIRE((*libs)[0].path == "/lib/x86_64-linux-gnu/libc.so.6");
  REQUIRE((*libs)[2].path == "/lib64/ld-linux-x86-64.so.2");
  REQUIRE((*libs)[2].interpreter);
  auto missing = library_list_parse("\tlibfoo.so.1 => not found\n", "bin");
  REQUIRE_FALSE(missing);
  REQUIRE(missing.error().message.find("libfoo.so.1") != std::string::npos);
}

TEST_CASE("the closure of a real binary includes the interpreter and libc", "[containers]") {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  auto interp = elf_interpreter(self);
  REQUIRE(interp);
  REQUIRE_FALSE(interp->empty());
  auto libs = library_closure(self);
  REQUIRE(libs);
  bool has_interp = false, has_libc = false;
  for (const SharedLibrary& l : *libs) {
    has_interp = has_interp || (l.interpreter && l.path == *interp);
    has_libc = has_libc || l.name == "libc.so.6";
  }
  REQUIRE(has_interp);
  REQUIRE(has_libc);
  REQUIRE_FALSE(elf_interpreter("/etc/passwd"));
}

TEST_CASE("the SBOM is SPDX 2.3 and names each library's Debian package", "[containers]") {
  SbomRequest request{"kiln-test", "0.1.0", 0, {}};
  request.files.push_back({"/lib/x86_64-linux-gnu/libc.so.6", {"libc6", "amd64", "2.36-9"}});
  request.files.push_back({"/lib/x86_64-linux-gnu/libm.so.6", {"libc6", "amd64", "2.36-9"}});
  request.files.push_back({"/opt/lib/libmine.so", {}});
  const std::string text = sbom_spdx_json(request);
  REQUIRE(text == sbom_spdx_json(request));
  const auto doc = nlohmann::json::parse(text);
  REQUIRE(doc["spdxVersion"] == "SPDX-2.3");
  REQUIRE(doc["packages"].size() == 3);  // kiln, libc6 (two files), the unknown file
  REQUIRE(doc["packages"][0]["name"] == "kiln");
  REQUIRE(text.find("pkg:deb/debian/libc6@2.36-9?arch=amd64") != std::string::npos);
  REQUIRE(text.find("no Debian package owns it") != std::string::npos);
}

TEST_CASE("dpkg finds the package owning libc, or records it as unknown", "[containers]") {
  auto owners = debian_packages_owning({"/lib/x86_64-linux-gnu/libc.so.6", "/nonexistent/libnone.so"});
  REQUIRE(owners.size() == 2);
  REQUIRE(owners["/nonexistent/libnone.so"].name.empty());
  if (::access("/usr/bin/dpkg", X_OK) == 0 && fs::exists("/lib/x86_64-linux-gnu/libc.so.6")) {
    REQUIRE(owners["/lib/x86_64-linux-gnu/libc.so.6"].name == "libc6");
    REQUIRE_FALSE(owners["/lib/x86_64-linux-gnu/libc.so.6"].version.empty());
  }
}

TEST_CASE("self-test inputs are seeded and comparisons state the limit", "[containers]") {
  Plan plan;
  plan.inputs.push_back({0, "x", ValueType::of(DType::f32, {2, 3})});
  auto a = selftest_inputs_make(plan);
  auto b = selftest_inputs_make(plan);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE((*a)[0].first == "x");
  const Tensor& t = (*a)[0].second;
  for (int64_t i = 0; i < t.numel(); ++i) {
    REQUIRE(t.data<float>()[i] == (*b)[0].second.data<float>()[i]);
    REQUIRE(t.data<float>()[i] >= -1.0f);
    REQUIRE(t.data<float>()[i] < 1.0f);
  }
  Plan symbolic;
  symbolic.inputs.push_back({0, "x", ValueType::of(DType::f32, {Dim::named("batch"), 3})});
  auto sym = selftest_inputs_make(symbolic);
  REQUIRE_FALSE(sym);
  REQUIRE(sym.error().message.find("batch") != std::string::npos);

  const std::vector<float> ref{10, -2, 0.5f};
  const std::vector<float> close{10.005f, -2, 0.5f};
  const std::vector<float> far{10.5f, -2, 0.5f};
  const NamedTensors expected{{"y", Tensor::from_values<float>({3}, ref)}};
  auto ok = selftest_compare(expected, {{"y", Tensor::from_values<float>({3}, close)}}, {});
  REQUIRE(ok[0].passed);
  REQUIRE(ok[0].limit == Approx(1e-4 + 1e-3 * 10));
  REQUIRE(selftest_status(ok));
  auto bad = selftest_compare(expected, {{"y", Tensor::from_values<float>({3}, far)}}, {});
  REQUIRE_FALSE(bad[0].passed);
  Status s = selftest_status(bad);
  REQUIRE_FALSE(s);
  REQUIRE(s.message().find("output 'y' differs") != std::string::npos);
  auto missing = selftest_compare(expected, {}, {});
  REQUIRE_FALSE(missing[0].passed);
  REQUIRE(selftest_status(missing).message().find("missing") != std::string::npos);
}

TEST_CASE("the self-test tolerance follows the plan's precision", "[containers]") {
  Plan plan;
  plan.steps.push_back({});
  plan.steps.push_back({});
  const SelftestTolerance fp32 = selftest_tolerance_for(plan);
  CHECK(fp32.rel == Approx(SelftestTolerance{}.rel));
  precision_to_attrs(Precision::bf16, plan.steps[0].attrs);
  const SelftestTolerance bf16 = selftest_tolerance_for(plan);
  CHECK(bf16.rel > fp32.rel);
  precision_to_attrs(Precision::int8, plan.steps[1].attrs);
  const SelftestTolerance int8 = selftest_tolerance_for(plan);
  CHECK(int8.rel > bf16.rel);
  // Still a check: a result off by a fifth of the output's range fails even an int8 plan.
  const std::vector<float> ref{10, -2}, off{12, -2}, near{10.5f, -2};
  const NamedTensors expected{{"y", Tensor::from_values<float>({2}, ref)}};
  CHECK_FALSE(selftest_compare(expected, {{"y", Tensor::from_values<float>({2}, off)}}, int8)[0].passed);
  CHECK(selftest_compare(expected, {{"y", Tensor::from_values<float>({2}, near)}}, int8)[0].passed);
}

TEST_CASE("a self-test on a GPU widens the bundle's tolerance by the device precision's width", "[containers]") {
  const SelftestTolerance bundle{};
  PlanRunnerOptions options;
  CHECK(selftest_tolerance_on_device(bundle, options).rel == Approx(bundle.rel));  // the CPU keeps the bundle's
  options.device = DeviceKind::cuda;
  double previous = bundle.rel;
  // fp32 keeps it; each narrower precision is looser than the one before (tf32, fp16, bf16).
  for (DevicePrecision p : {DevicePrecision::fp32, DevicePrecision::tf32, DevicePrecision::fp16, DevicePrecision::bf16}) {
    options.device_options.precision = p;
    const double rel = selftest_tolerance_on_device(bundle, options).rel;
    INFO(device_precision_name(p));
    if (p == DevicePrecision::fp32) CHECK(rel == Approx(bundle.rel));
    else CHECK(rel > previous);
    previous = rel;
  }
}

TEST_CASE("cached layers give the same blob, and a damaged cache entry is not used", "[containers]") {
  const fs::path dir = temp_dir("cache");
  const fs::path cache = dir / "cache";
  fs::create_directories(dir / "blobs-a");
  fs::create_directories(dir / "blobs-b");
  fs::create_directories(dir / "blobs-c");
  const std::vector<TarEntry> entries{TarEntry::data("lib/x.so", std::string(50000, 'q'), 0755)};
  auto uncached = layer_write((dir / "blobs-a").string(), entries, 7, 6);
  auto filled = layer_write((dir / "blobs-b").string(), entries, 7, 6, cache.string());
  REQUIRE(uncached);
  REQUIRE(filled);
  REQUIRE(filled->descriptor.digest == uncached->descriptor.digest);
  std::vector<fs::path> cached;
  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.is_regular_file()) cached.push_back(e.path());
  REQUIRE(cached.size() == 1);
  REQUIRE(cached[0].filename().string() == std::string(digest_hex(uncached->descriptor.digest)));
  std::ofstream(cached[0], std::ios::binary | std::ios::trunc) << "damaged";
  auto hit = layer_write((dir / "blobs-c").string(), entries, 7, 6, cache.string());
  REQUIRE(hit);
  REQUIRE(hit->descriptor.digest == uncached->descriptor.digest);
  REQUIRE(hit->diff_id == uncached->diff_id);
  REQUIRE(hit->tar_size == uncached->tar_size);
  REQUIRE(read_all(dir / "blobs-c" / std::string(digest_hex(hit->descriptor.digest))) ==
          read_all(dir / "blobs-a" / std::string(digest_hex(uncached->descriptor.digest))));
}

TEST_CASE("CUDA libraries are told from system libraries and the driver by name", "[containers]") {
  for (const char* cuda : {"libcublasLt.so.13", "libcublas.so.12", "libcudart.so.13", "libcudnn.so.9", "libcudnn_graph.so.9",
                           "libnvrtc.so.13", "libnvJitLink.so.13"})
    CHECK(cuda_library_is(cuda));
  for (const char* other : {"libcuda.so.1", "libnvidia-ml.so.1", "libcurl.so.4", "libcups.so.2", "libc.so.6", "libz.so.1",
                            "libstdc++.so.6", "ld-linux-x86-64.so.2"})
    CHECK_FALSE(cuda_library_is(other));
}

TEST_CASE("the CUDA plugin's libraries: its CUDA closure plus cuDNN's sub-libraries, never the driver", "[containers]") {
#ifndef KILN_CUDA_PLUGIN_PATH
  WARN("skipped: the CUDA plugin (libkiln_cuda.so) was not built here (no nvcc, cuBLASLt or cuDNN)");
#else
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  auto interpreter = elf_interpreter(self);
  REQUIRE(interpreter);
  auto libs = device_plugin_libraries(KILN_CUDA_PLUGIN_PATH, *interpreter);
  INFO((libs ? std::string() : libs.error().message));
  REQUIRE(libs);
  std::set<std::string> cuda;
  for (const SharedLibrary& l : libs->cuda) {
    cuda.insert(l.name);
    CHECK(fs::is_regular_file(l.path));
  }
  const std::string so = ".so." + std::to_string(libs->cuda_major);
  CHECK(libs->cuda_major >= 12);
  CHECK(libs->cudnn_major == 9);
  CHECK(cuda.count("libcublasLt" + so) == 1);
  // cuDNN 9's shim and the sub-libraries it dlopens (absent from any closure).
  for (const char* name : {"libcudnn.so.9", "libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9",
                           "libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9"}) {
    INFO(name);
    CHECK(cuda.count(name) == 1);
  }
  for (const std::string& name : cuda) CHECK(name.rfind("libcuda.so", 0) != 0);
  bool zlib = false, libstdcxx = false;
  for (const SharedLibrary& l : libs->system) {
    CHECK_FALSE(cuda_library_is(fs::path(l.path).filename().string()));
    zlib = zlib || l.name == "libz.so.1";  // cuDNN's sub-libraries need it
    libstdcxx = libstdcxx || l.name == "libstdc++.so.6";
  }
  CHECK(zlib);
  CHECK(libstdcxx);
#endif
}

namespace {

// A bundle as bundle_assemble leaves it, without running anything: only the image spec is built.
Bundle bundle_fixture(bool gpu) {
  Bundle b;
  b.request.dir = "/bundle";
  b.request.model_name = "m";
  b.request.threads = 4;
  b.libraries = {{"libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", false},
                 {"/lib64/ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2", true}};
  if (gpu) {
    b.request.device_plugin = "/build/libkiln_cuda.so";
    b.libraries.push_back({"libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1", false});
    b.cuda_libraries = {{"libcublasLt.so.13", "/usr/local/cuda/lib64/libcublasLt.so.13", false},
                        {"libcudnn.so.9", "/usr/local/cuda/lib64/libcudnn.so.9", false},
                        {"libcudnn_graph.so.9", "/usr/local/cuda/lib64/libcudnn_graph.so.9", false}};
    b.cuda_major = 13;
    b.cudnn_major = 9;
  }
  return b;
}

std::vector<std::string> layer_paths(const oci::ImageSpec& spec, const std::string& layer) {
  std::vector<std::string> paths;
  for (const oci::LayerSpec& l : spec.layers)
    if (l.name == layer)
      for (const TarEntry& e : l.entries) paths.push_back(e.path);
  return paths;
}

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

TEST_CASE("a GPU image has the CUDA layer, the plugin beside kiln-runtime and KILN_DEVICE, a CPU image none", "[containers]") {
  const oci::ImageSpec gpu = bundle_image_spec(bundle_fixture(true), {});
  std::vector<std::string> names;
  for (const oci::LayerSpec& l : gpu.layers) names.push_back(l.name);
  CHECK(names == std::vector<std::string>{"cuda", "runtime", "model", "config"});
  // The CUDA libraries where the loader looks by default; the plugin where kiln-runtime looks first.
  CHECK(layer_paths(gpu, "cuda") == std::vector<std::string>{"usr/lib/x86_64-linux-gnu/libcublasLt.so.13",
                                                             "usr/lib/x86_64-linux-gnu/libcudnn.so.9",
                                                             "usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9"});
  const auto runtime = layer_paths(gpu, "runtime");
  CHECK(has(runtime, "kiln/bin/kiln-runtime"));
  CHECK(has(runtime, "kiln/bin/libkiln_cuda.so"));
  CHECK(has(runtime, "lib/x86_64-linux-gnu/libz.so.1"));
  CHECK(has(gpu.env, "KILN_DEVICE=cuda"));
  CHECK(has(gpu.env, "KILN_CUDA_PRECISION=fp32"));  // the exact default unless kiln image --cuda-precision
  Bundle half = bundle_fixture(true);
  half.request.cuda_precision = "fp16";
  CHECK(has(bundle_image_spec(half, {}).env, "KILN_CUDA_PRECISION=fp16"));
  CHECK(has(gpu.env, "NVIDIA_VISIBLE_DEVICES=all"));
  CHECK(gpu.labels.at("kiln.device") == "cuda");

  // The design forbids CUDA libraries in CPU images, even for a target whose nodes have GPUs.
  Bundle cpu_bundle = bundle_fixture(false);
  cpu_bundle.request.target.gpu_count = 4;
  const oci::ImageSpec cpu = bundle_image_spec(cpu_bundle, {});
  names.clear();
  for (const oci::LayerSpec& l : cpu.layers) {
    names.push_back(l.name);
    for (const TarEntry& e : l.entries) {
      INFO(e.path);
      CHECK(e.path.find("libcu") == std::string::npos);
      CHECK(e.path.find("libkiln_cuda") == std::string::npos);
    }
  }
  CHECK(names == std::vector<std::string>{"runtime", "model", "config"});
  for (const std::string& e : cpu.env)
    CHECK((e.rfind("KILN_DEVICE=", 0) != 0 && e.rfind("KILN_CUDA_PRECISION=", 0) != 0 && e.rfind("NVIDIA_", 0) != 0));
  CHECK(cpu.labels.at("kiln.device") == "cpu");
}

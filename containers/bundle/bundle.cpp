#include "containers/bundle/bundle.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>

#include <nlohmann/json.hpp>

#include "containers/bundle/cuda_libraries.h"
#include "kernels/device/device_plugin.h"
#include "kernels/executor.h"
#include "kernels/io/plan_io.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Status text_write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  KILN_REQUIRE(out.good(), io, "cannot write '", path.string(), "'");
  return Status::ok();
}

Status model_place(const std::string& src, const fs::path& dst) {
  std::error_code ec;
  if (fs::exists(dst, ec) && fs::equivalent(src, dst, ec)) return Status::ok();
  fs::remove(dst, ec);
  fs::create_hard_link(src, dst, ec);  // same file system: no copy of 100 MB of weights
  if (!ec) return Status::ok();
  fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
  KILN_REQUIRE(!ec, io, "cannot copy '", src, "' to '", dst.string(), "': ", ec.message());
  return Status::ok();
}

json shape_json(const ValueType& t) {
  json dims = json::array();
  for (const Dim& d : t.shape) d.known() ? dims.push_back(d.value) : dims.push_back(d.symbol);
  return dims;
}

std::string metadata_json(const Bundle& b, uint64_t model_bytes) {
  const BundleRequest& r = b.request;
  json inputs = json::array();
  for (const PlanInput& in : r.compiled->inputs)
    inputs.push_back({{"name", in.name}, {"dtype", std::string(dtype_name(in.type.dtype))}, {"shape", shape_json(in.type)}});
  json outputs = json::array();
  for (const auto& [slot, name] : r.compiled->outputs)
    outputs.push_back({{"name", name}, {"dtype", std::string(dtype_name(r.compiled->slot_types[static_cast<size_t>(slot)].dtype))},
                       {"shape", shape_json(r.compiled->slot_types[static_cast<size_t>(slot)])}});
  json checks = json::array();
  bool passed = true;
  // Limits come from the reference outputs (identical everywhere); the engine's error depends on
  // the machine's ISA and is printed, not stored, so the image stays reproducible across hosts.
  for (const SelftestCheck& c : b.checks) {
    checks.push_back({{"output", c.output}, {"limit", c.limit}, {"passed", c.passed}});
    passed = passed && c.passed;
  }
  json libraries = json::array();
  for (const SharedLibrary& lib : b.libraries) {
    const DebianPackage& pkg = b.packages.at(lib.path);
    libraries.push_back({{"path", lib.path},
                         {"package", pkg.name.empty() ? "unknown" : pkg.name},
                         {"version", pkg.version.empty() ? "unknown" : pkg.version}});
  }
  const bool gpu = !r.device_plugin.empty();
  json runtime = {{"binary", "bin/kiln-runtime"}, {"libraries", libraries}, {"threads", r.threads}};
  if (gpu) {
    json cuda = json::array();
    for (const SharedLibrary& lib : b.cuda_libraries) cuda.push_back("/" + std::string(kImageCudaLibDir) + "/" + lib.name);
    runtime["device_plugin"] = "bin/" + std::string(kCudaPluginFile);
    runtime["cuda_libraries"] = cuda;
    runtime["cuda_major"] = b.cuda_major;
    runtime["cudnn_major"] = b.cudnn_major;
  }
  const json doc = {
      {"kiln_version", r.kiln_version},
      {"model",
       {{"name", r.model_name}, {"source", fs::path(r.source).filename().string()}, {"file", kBundleModelFile},
        {"bytes", model_bytes}, {"batch", r.batch}, {"passes", r.passes}, {"inputs", inputs}, {"outputs", outputs}}},
      {"selftest",
       {{"inputs", kBundleInputsFile},
        {"expected", kBundleExpectedFile},
        {"expected_from", "reference executor on the " + r.reference_kind},
        {"rule", "per output: max |engine - expected| <= abs + rel * max |expected|"},
        {"tolerance", {{"abs", r.tolerance.abs}, {"rel", r.tolerance.rel}}},
        {"verified", {{"passed", passed}, {"checks", checks}, {"by", "compiled engine at bundle time"}}}}},
      {"runtime", runtime},
      {"target",
       {{"name", r.target.name}, {"kind", r.target.kind}, {"scheduler", r.target.scheduler},
        {"device", r.target.gpu_count > 0 ? "gpu" : "cpu"}, {"gpu", {{"model", r.target.gpu_model}, {"count", r.target.gpu_count}}},
        // A GPU target's image runs on the CPUs when it was built without the plugin (--device cpu).
        {"runs_on", gpu ? "cuda" : "cpu"}, {"cuda_precision", gpu ? nlohmann::json(r.cuda_precision) : nlohmann::json()},
        {"cuda_keep_fp32", gpu ? nlohmann::json(r.cuda_keep_fp32) : nlohmann::json()},
        {"architecture", "amd64"}, {"os", "linux"}}},
      {"sbom", kBundleSbomFile}};
  return doc.dump();
}

}  // namespace

Result<Bundle> bundle_assemble(const BundleRequest& request) {
  KILN_REQUIRE(request.compiled && request.reference, invalid_argument, "bundle_assemble needs the compiled and reference plans");
  KILN_REQUIRE(device_precision_from_name(request.cuda_precision), invalid_argument, "cuda_precision '", request.cuda_precision,
               "' is not one of fp32, tf32, fp16, bf16");
  Bundle bundle;
  bundle.request = request;
  const fs::path dir(request.dir);
  std::error_code ec;
  for (const char* sub : {"model", "selftest", "bin"}) {
    fs::create_directories(dir / sub, ec);
    KILN_REQUIRE(!ec, io, "cannot create '", (dir / sub).string(), "': ", ec.message());
  }
  const fs::path model = dir / kBundleModelFile;
  KILN_TRY(model_place(request.model_file, model));
  const uint64_t model_bytes = fs::file_size(model, ec);
  const fs::path runtime = dir / "bin" / "kiln-runtime";
  fs::copy_file(request.runtime_binary, runtime, fs::copy_options::overwrite_existing, ec);
  KILN_REQUIRE(!ec, io, "cannot copy '", request.runtime_binary, "' to '", runtime.string(), "': ", ec.message());
  fs::permissions(runtime, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                               fs::perms::others_exec, ec);
  // A CPU bundle written over a GPU one must not keep its plugin: the Dockerfile copies the folder.
  const fs::path plugin = dir / "bin" / kCudaPluginFile;
  fs::remove(plugin, ec);
  if (!request.device_plugin.empty()) {
    fs::copy_file(request.device_plugin, plugin, fs::copy_options::overwrite_existing, ec);
    KILN_REQUIRE(!ec, io, "cannot copy '", request.device_plugin, "' to '", plugin.string(), "': ", ec.message());
  }

  // Self-test vectors: the reference executor gives the expected outputs, the compiled engine
  // must match them now, or the image is not built.
  // The single-threaded reference executor runs beside the engine (ResNet-50: 2.3 s and 1 s).
  KILN_ASSIGN(inputs, selftest_inputs_make(*request.compiled));
  std::vector<std::string> ignored;
  KILN_ASSIGN(ref_inputs, plan_inputs_match(inputs, *request.reference, "the self-test inputs", ignored));
  KILN_ASSIGN(engine_inputs, plan_inputs_match(inputs, *request.compiled, "the self-test inputs", ignored));
  auto reference_run = std::async(std::launch::async, [&] { return execute_reference(*request.reference, ref_inputs); });
  auto results = plan_run_engine(*request.compiled, engine_inputs, {request.threads, nullptr});
  auto reference = reference_run.get();
  if (!reference) return reference.status().with_context("self-test reference outputs: ");
  if (!results) return results.status().with_context("self-test on the compiled engine: ");
  const NamedTensors expected = plan_outputs_name(*request.reference, reference->outputs);
  bundle.checks = selftest_compare(expected, plan_outputs_name(*request.compiled, *results), request.tolerance);
  const std::vector<SelftestCheck>& checks = bundle.checks;
  Status verified = selftest_status(checks);
  if (!verified) return verified.with_context("the compiled model does not match the reference executor, no image built: ");
  KILN_TRY(npz_write_file((dir / kBundleInputsFile).string(), inputs));
  KILN_TRY(npz_write_file((dir / kBundleExpectedFile).string(), expected));

  auto libs = library_closure(request.runtime_binary);
  if (!libs) return libs.status().with_context("runtime libraries: ");
  bundle.libraries = std::move(*libs);
  if (!request.device_plugin.empty()) {
    KILN_ASSIGN(interpreter, elf_interpreter(request.runtime_binary));
    auto device = device_plugin_libraries(request.device_plugin, interpreter);
    if (!device) return device.status().with_context("the CUDA plugin's libraries: ");
    KILN_REQUIRE(!device->cuda.empty(), invalid_argument, "'", request.device_plugin,
                 "' needs no CUDA library: it is not the CUDA plugin (", kCudaPluginFile, ")");
    for (SharedLibrary& lib : device->system)
      if (std::none_of(bundle.libraries.begin(), bundle.libraries.end(), [&](const SharedLibrary& l) { return l.path == lib.path; }))
        bundle.libraries.push_back(std::move(lib));
    std::sort(bundle.libraries.begin(), bundle.libraries.end(),
              [](const SharedLibrary& a, const SharedLibrary& b) { return a.path < b.path; });
    bundle.cuda_libraries = std::move(device->cuda);
    bundle.cuda_major = device->cuda_major;
    bundle.cudnn_major = device->cudnn_major;
  }
  std::vector<std::string> paths;
  for (const SharedLibrary& lib : bundle.libraries) paths.push_back(lib.path);
  bundle.packages = debian_packages_owning(paths);

  SbomRequest sbom{"kiln-" + request.model_name, request.kiln_version, request.created, {}};
  for (const SharedLibrary& lib : bundle.libraries) sbom.files.push_back({lib.path, bundle.packages.at(lib.path)});
  // NVIDIA's CUDA and cuDNN: no Debian package on the build machine (the SBOM says so).
  for (const SharedLibrary& lib : bundle.cuda_libraries)
    sbom.files.push_back({"/" + std::string(kImageCudaLibDir) + "/" + lib.name, {}});
  bundle.sbom_json = sbom_spdx_json(sbom);
  bundle.metadata_json = metadata_json(bundle, model_bytes);
  KILN_TRY(text_write(dir / kBundleSbomFile, bundle.sbom_json));
  KILN_TRY(text_write(dir / kBundleMetadataFile, bundle.metadata_json));
  return bundle;
}

oci::ImageSpec bundle_image_spec(const Bundle& bundle, const ImageOptions& options) {
  using oci::TarEntry;
  const BundleRequest& r = bundle.request;
  const fs::path dir(r.dir);
  const std::string root = kImageBundleDir;
  oci::ImageSpec spec;
  spec.tag = options.tag;
  spec.created = r.created;
  spec.layer_cache_dir = options.layer_cache_dir;

  const bool gpu = !r.device_plugin.empty();
  oci::LayerSpec cuda{"cuda", {}, options.gzip_level};
  for (const SharedLibrary& lib : bundle.cuda_libraries)
    cuda.entries.push_back(TarEntry::file(std::string(kImageCudaLibDir) + "/" + lib.name, lib.path, 0644));
  oci::LayerSpec runtime{"runtime", {}, options.gzip_level};
  runtime.entries.push_back(TarEntry::file(kImageRuntime, (dir / "bin" / "kiln-runtime").string(), 0755));
  if (gpu) runtime.entries.push_back(TarEntry::file(kImageCudaPlugin, (dir / "bin" / kCudaPluginFile).string(), 0644));
  for (const SharedLibrary& lib : bundle.libraries)
    runtime.entries.push_back(TarEntry::file(lib.path.substr(1), lib.path, lib.interpreter ? 0755 : 0644));

  oci::LayerSpec model{"model", {TarEntry::file(root + "/" + kBundleModelFile, (dir / kBundleModelFile).string())},
                       options.model_gzip_level};

  oci::LayerSpec config{"config", {}, options.gzip_level};
  for (const char* f : {kBundleInputsFile, kBundleExpectedFile, kBundleMetadataFile, kBundleSbomFile})
    config.entries.push_back(TarEntry::file(root + "/" + f, (dir / f).string()));
  // A user database for the non-root user, and a writable /tmp: what distroless images carry.
  config.entries.push_back(TarEntry::data("etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"));
  config.entries.push_back(TarEntry::data("etc/group", "root:x:0:\nnonroot:x:65532:\n"));
  config.entries.push_back(TarEntry::folder("home/nonroot", 0755));
  config.entries.push_back(TarEntry::folder("tmp", 01777));
  if (!cuda.entries.empty()) spec.layers.push_back(std::move(cuda));
  spec.layers.push_back(std::move(runtime));
  spec.layers.push_back(std::move(model));
  spec.layers.push_back(std::move(config));

  spec.entrypoint = {"/" + std::string(kImageRuntime)};
  spec.cmd = {"serve-model"};  // KServe v2 on the exposed port; `selftest` and `run` are the other verbs
  spec.env = {"PATH=/kiln/bin", "KILN_BUNDLE=/kiln", "KILN_THREADS=" + std::to_string(r.threads)};
  if (r.threads > 0) spec.env.push_back("OMP_NUM_THREADS=" + std::to_string(r.threads));
  if (gpu) {
    spec.env.push_back("KILN_DEVICE=cuda");  // every kiln-runtime verb's default --device
    spec.env.push_back("KILN_CUDA_PRECISION=" + r.cuda_precision);  // and --cuda-precision
    // What the NVIDIA container toolkit reads to expose the GPUs and mount the driver.
    spec.env.push_back("NVIDIA_VISIBLE_DEVICES=all");
    spec.env.push_back("NVIDIA_DRIVER_CAPABILITIES=compute,utility");
  }
  spec.user = kImageUser;
  spec.working_dir = "/" + root;
  spec.exposed_ports = {std::to_string(options.port) + "/tcp"};
  bool passed = !bundle.checks.empty();
  for (const SelftestCheck& c : bundle.checks) passed = passed && c.passed;
  const std::string created = oci::rfc3339_utc(r.created);
  spec.labels = {{"org.opencontainers.image.title", "kiln-" + r.model_name},
                 {"org.opencontainers.image.description", "kiln compiled model '" + r.model_name + "' with its runtime"},
                 {"org.opencontainers.image.created", created},
                 {"org.opencontainers.image.version", r.kiln_version},
                 {"org.opencontainers.image.vendor", "kiln"},
                 {"kiln.version", r.kiln_version},
                 {"kiln.model", r.model_name},
                 {"kiln.model.source", fs::path(r.source).filename().string()},
                 {"kiln.batch", std::to_string(r.batch)},
                 {"kiln.passes", r.passes},
                 {"kiln.target", r.target.name},
                 {"kiln.target.kind", r.target.kind},
                 {"kiln.target.scheduler", r.target.scheduler},
                 {"kiln.target.device", r.target.gpu_count > 0 ? "gpu" : "cpu"},
                 {"kiln.device", gpu ? "cuda" : "cpu"},
                 {"kiln.threads", std::to_string(r.threads)},
                 {"kiln.selftest", passed ? "passed" : "failed"}};
  spec.manifest_annotations = {{"org.opencontainers.image.created", created},
                               {"org.opencontainers.image.title", "kiln-" + r.model_name},
                               {"kiln.sbom.path", "/" + root + "/" + kBundleSbomFile},
                               {"kiln.sbom.format", "SPDX-2.3+json"},
                               {"kiln.sbom", bundle.sbom_json}};
  return spec;
}

}  // namespace kiln

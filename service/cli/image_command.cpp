// kiln image MODEL.onnx|model.kiln -o DIR [--target TARGET.yaml] [--batch N] [--device cpu|cuda]:
// compiles (or loads) the model, assembles the bundle (runtime + library closure + verified
// self-test vectors + metadata + SBOM) in DIR/bundle and writes the OCI image layout DIR/oci, the
// oci-archive DIR/image.oci.tar and the docker-archive DIR/image.docker.tar, for the target
// (default: this machine). A target whose nodes have GPUs gets a GPU image (--device cuda): the
// plan compiled with the CUDA pipeline, libkiln_cuda.so beside kiln-runtime with the CUDA
// libraries it was built against, KILN_DEVICE=cuda and KILN_CUDA_PRECISION (--cuda-precision),
// and recipes asking for one GPU each.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/description.h"
#include "compilers/passes/pipeline.h"
#include "containers/bundle/bundle.h"
#include "containers/oci/docker_archive.h"
#include "containers/recipes/recipes.h"
#include "kernels/device/device_plugin.h"
#include "kernels/device/plan_runner.h"
#include "kernels/plan_file.h"
#include "service/cli/commands.h"
#include "service/cli/compiled_model.h"
#include "service/cli/model_loading.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct ImageCmdOptions {
  std::string model;
  std::string output;
  DimOptions dims;
  std::string passes = "default";
  std::string name;
  std::string tag = "latest";
  std::string target;
  std::string device;  // "": cuda when the target's nodes have GPUs, else cpu
  std::string cuda_precision;  // "": fp32; GPU images only
  std::string runtime;
  std::optional<int> threads;
  int model_gzip_level = 0;
  int gzip_level = 6;
  std::string cache;
  bool no_cache = false;
  bool json = false;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// --runtime, else $KILN_RUNTIME, else the kiln-runtime beside this kiln binary.
Result<std::string> find_runtime(const std::string& given) {
  std::string path = given;
  if (path.empty()) {
    if (const char* env = std::getenv("KILN_RUNTIME"); env && *env) path = env;
  }
  if (path.empty()) {
    std::error_code ec;
    path = (fs::read_symlink("/proc/self/exe", ec).parent_path() / "kiln-runtime").string();
  }
  KILN_REQUIRE(::access(path.c_str(), X_OK) == 0, io, "kiln-runtime not found at '", path,
               "': build it (ninja kiln-runtime), or pass --runtime PATH or set KILN_RUNTIME");
  return path;
}

// --cache, else $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
std::string cache_dir(const ImageCmdOptions& opts) {
  if (opts.no_cache) return "";
  if (!opts.cache.empty()) return opts.cache;
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "kiln").string();
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "kiln").string();
  return "";
}

// The device engine the image will build: the precision it runs at (kiln-runtime's default from
// the image's KILN_CUDA_PRECISION).
DeviceEngineOptions device_options(const ImageCmdOptions& opts) {
  DeviceEngineOptions options;
  options.precision = device_precision_from_name(opts.cuda_precision).value_or(DevicePrecision::fp32);  // "": fp32
  return options;
}

struct PreparedModel {
  std::string model_file;  // the .kiln that ships
  LoadedPlan compiled;     // read back from model_file: the bytes that ship are the bytes verified
  std::optional<Plan> reference;
  int64_t batch = 1;
};

// An ONNX model for a GPU image is compiled with the CUDA pipeline (the CPU one makes fused ops
// only the CPU runs) and must pass the plugin's capability query, as `kiln compile --device cuda`;
// a given .kiln ships as is, with a warning when the GPU cannot run it.
Result<PreparedModel> prepare_model(const ImageCmdOptions& opts, const fs::path& bundle_dir, DeviceKind device) {
  PreparedModel m;
  const bool gpu = device != DeviceKind::cpu;
  if (is_plan_file(opts.model)) {
    m.model_file = opts.model;
  } else {
    const bool default_passes = opts.passes == "default";
    CompileRequest request{opts.model, opts.dims, default_passes ? default_pipeline_for(device) : pipeline_parse(opts.passes),
                           {}, false, true};
    KILN_ASSIGN(compiled, compile_model(request, nullptr));
    if (gpu)
      if (Status runs = cuda_plugin_check_plan(compiled.plan, device_options(opts)); !runs)
        return runs.with_context(opts.model + " cannot run on the GPU (--device cpu builds an image for the CPUs): ");
    std::error_code ec;
    fs::create_directories(bundle_dir / "model", ec);
    m.model_file = (bundle_dir / kBundleModelFile).string();
    // The file name only: the same model at another path gives the same image.
    PlanFileInfo info{std::string("kiln ") + KILN_VERSION, fs::path(opts.model).filename().string(),
                      gpu && default_passes ? "default for " + std::string(device_kind_name(device)) : opts.passes,
                      compiled.bindings_text, std::string(device_kind_name(device)), ""};
    KILN_TRY(plan_write_file(m.model_file, compiled.plan, info));
    m.reference = std::move(compiled.reference_plan);
  }
  KILN_ASSIGN(loaded, plan_read_file(m.model_file));
  m.compiled = std::move(loaded);
  if (gpu && !m.reference) {
    if (Status runs = cuda_plugin_check_plan(m.compiled.plan, device_options(opts)); !runs)
      std::cerr << "kiln: warning: " << opts.model << " will fail on the GPU: " << runs.message()
                << " (a .kiln ships as is; kiln image compiles an ONNX model for the GPU)\n";
  }
  const Plan& plan = m.compiled.plan;
  if (!plan.inputs.empty() && plan.inputs[0].type.rank_known && !plan.inputs[0].type.shape.empty() &&
      plan.inputs[0].type.shape[0].known())
    m.batch = plan.inputs[0].type.shape[0].value;
  return m;
}

std::string human_bytes(uint64_t n) {
  char buf[32];
  if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(n) / 1e6);
  else if (n >= 1000) std::snprintf(buf, sizeof buf, "%.1f kB", static_cast<double>(n) / 1e3);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  return buf;
}

// The image's target: the description's name, kind, scheduler and GPUs.
BundleTarget bundle_target(const api::TargetInfrastructure& t) {
  BundleTarget target;
  target.name = t.name;
  target.kind = api::target_kind_name(t.kind);
  target.scheduler = api::scheduler_name(t.scheduler);
  for (const api::Gpu& g : t.node.gpus) {
    if (target.gpu_model.empty()) target.gpu_model = g.model;
    target.gpu_count += g.count;
  }
  return target;
}

// "This machine" when no target is given: a local node with its CPUs and memory, no scheduler.
api::TargetInfrastructure local_target() {
  api::TargetInfrastructure t;
  t.name = "local";
  t.description = "the machine kiln image ran on";
  t.node.cpu.cores = std::max(1u, std::thread::hardware_concurrency());
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) t.node.memory_gb = static_cast<double>(pages) * static_cast<double>(page) / (1024.0 * 1024.0 * 1024.0);
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    if (const size_t colon = line.find(':'); colon != std::string::npos) t.node.cpu.model = line.substr(line.find_first_not_of(' ', colon + 1));
    break;
  }
  return t;
}

// The recipes for the image just built: the bundle's libraries and their Debian packages, the
// manifest digest Kubernetes pins, the target's nodes.
recipes::DeploymentSpec deployment_spec(const Bundle& bundle, const oci::BuiltImage& image, const std::string& repo_tag,
                                        const api::TargetInfrastructure& target, uint64_t model_bytes) {
  recipes::DeploymentSpec spec;
  spec.name = bundle.request.model_name;
  spec.image = repo_tag;
  spec.image_digest = image.manifest.digest;
  for (const SharedLibrary& lib : bundle.libraries) {
    spec.library_paths.push_back(lib.path);
    const DebianPackage& pkg = bundle.packages.at(lib.path);
    const std::string pin = pkg.name + "=" + pkg.version;
    if (!pkg.name.empty() && !pkg.version.empty() &&
        std::find(spec.debian_packages.begin(), spec.debian_packages.end(), pin) == spec.debian_packages.end())
      spec.debian_packages.push_back(pin);
  }
  // kiln-runtime runs a plan on one GPU: one GPU per pod or job (a CPU image asks for none).
  const bool gpu = !bundle.request.device_plugin.empty();
  spec.gpus = gpu ? 1 : 0;
  for (const SharedLibrary& lib : bundle.cuda_libraries) spec.cuda_libraries.push_back(lib.name);
  if (gpu) spec.cuda_image = recipes::cuda_base_image(bundle.cuda_major, bundle.cudnn_major);
  spec.cuda_precision = bundle.request.cuda_precision;
  spec.threads = bundle.request.threads;
  spec.batch = bundle.request.batch;
  spec.model_bytes = model_bytes;
  spec.kiln_version = bundle.request.kiln_version;
  spec.target = target;
  return spec;
}

int run_image(ImageCmdOptions opts) {
  const auto start = Clock::now();
  if (opts.output.empty()) return report_error("image needs -o DIR");
  auto created = oci::source_date_epoch();
  if (!created) return report_error(created.error().message);
  auto runtime = find_runtime(opts.runtime);
  if (!runtime) return report_error(runtime.error().message);
  std::optional<api::TargetInfrastructure> target;
  if (!opts.target.empty()) {
    auto loaded = api::target_load(opts.target);
    if (!loaded) return report_error("target '" + opts.target + "': " + loaded.message());
    target = std::move(loaded).value();
  }
  // A GPU image needs the plugin: without it the image would silently run on the CPUs.
  bool target_gpus = false;
  if (target)
    for (const api::Gpu& g : target->node.gpus) target_gpus = target_gpus || g.count > 0;
  // A .kiln records what it was compiled for (kiln compile --device/--target, kiln optimize's
  // choice: the CPU pipeline's plan or the CUDA pipeline's, and a GPU precision): the image runs
  // there unless --device / --cuda-precision say otherwise. An ONNX model, or a .kiln written before
  // kiln recorded it, follows the target.
  PlanFileInfo recorded;
  if (is_plan_file(opts.model)) {
    auto read = plan_read_file(opts.model, /*verify_weights=*/false);
    if (!read) return report_error(read.error().message);
    recorded = read->info;
  }
  std::vector<std::string> notes;
  DeviceKind device = target_gpus ? DeviceKind::cuda : DeviceKind::cpu;
  if (!opts.device.empty()) {
    device = opts.device == "cuda" ? DeviceKind::cuda : DeviceKind::cpu;
  } else if (auto kind = device_kind_from_name(recorded.device)) {
    device = *kind;
    if (device == DeviceKind::cpu && target_gpus)
      notes.push_back("device cpu, as recorded in " + opts.model + " (compiled for the CPUs; --device cuda overrides)");
  }
  if (device == DeviceKind::cuda && opts.cuda_precision.empty() && !recorded.cuda_precision.empty()) {
    opts.cuda_precision = recorded.cuda_precision;
    notes.push_back("GPU precision " + opts.cuda_precision + ", as recorded in " + opts.model + " (--cuda-precision overrides)");
  }
  std::string plugin;
  if (device == DeviceKind::cuda) {
    if (!target_gpus)
      return report_error((opts.device.empty() ? opts.model + " was compiled for the GPU (device cuda recorded in it): its image"
                                               : std::string("--device cuda")) +
                          " needs a --target whose nodes have GPUs" +
                          (target ? ", and target '" + target->name + "' lists none" : std::string()) +
                          (opts.device.empty() ? " (--device cpu builds a CPU image from it)" : ""));
    auto found = cuda_plugin_find(device_plugin_search_default());
    if (!found)
      return report_error("target '" + target->name + "' has GPUs, so its image carries the CUDA backend, but " +
                          found.error().message + " (a GPU image needs kiln built where nvcc, cuBLASLt and cuDNN are found)");
    plugin = *found;
  } else if (!opts.cuda_precision.empty()) {
    return report_error("--cuda-precision sets a GPU image's precision, and this image runs on the CPUs" +
                        std::string(target_gpus ? " (--device cpu)" : ": give a --target whose nodes have GPUs"));
  }
  const fs::path out(opts.output);
  if (Status usable = oci::image_layout_check((out / "oci").string()); !usable) return report_error(usable.message());
  const fs::path bundle_dir = out / "bundle";
  std::error_code ec;
  fs::create_directories(bundle_dir, ec);
  if (ec) return report_error("cannot create '" + bundle_dir.string() + "': " + ec.message());

  auto model = prepare_model(opts, bundle_dir, device);
  if (!model) return report_error(model.error().message);
  const double compile_s = seconds_since(start);

  const auto bundle_start = Clock::now();
  BundleRequest request;
  request.dir = bundle_dir.string();
  request.model_file = model->model_file;
  request.compiled = &model->compiled.plan;
  request.reference = model->reference ? &*model->reference : &model->compiled.plan;
  request.reference_kind = model->reference ? "uncompiled plan" : "compiled plan";
  request.tolerance = selftest_tolerance_for(model->compiled.plan);
  request.runtime_binary = *runtime;
  request.device_plugin = plugin;
  if (!opts.cuda_precision.empty()) request.cuda_precision = opts.cuda_precision;
  // The .kiln's GPU mixed precision runs where the image runs at the precision it was recorded for.
  if (device == DeviceKind::cuda && request.cuda_precision == recorded.cuda_precision) {
    request.cuda_keep_fp32 = recorded.cuda_keep_fp32;
    if (!recorded.cuda_keep_fp32.empty())
      notes.push_back(std::to_string(recorded.cuda_keep_fp32.size()) + " steps kept in fp32 at " + request.cuda_precision + ", as recorded in " +
                      opts.model + " (GPU mixed precision; kiln-runtime applies it at that precision)");
  }
  request.model_name = opts.name.empty() ? fs::path(opts.model).stem().string() : opts.name;
  request.source = opts.model;
  request.passes = model->compiled.info.passes;  // as written into the .kiln ("default for cuda")
  request.batch = model->batch;
  request.threads = opts.threads ? *opts.threads : target ? static_cast<int>(target->node.cpu.cores) : 0;
  if (target) request.target = bundle_target(*target);
  request.kiln_version = KILN_VERSION;
  request.created = *created;
  auto bundle = bundle_assemble(request);
  if (!bundle) return report_error(bundle.error().message);
  const double bundle_s = seconds_since(bundle_start);

  const auto image_start = Clock::now();
  ImageOptions image_options;
  image_options.tag = opts.tag;
  image_options.model_gzip_level = opts.model_gzip_level;
  image_options.gzip_level = opts.gzip_level;
  image_options.layer_cache_dir = cache_dir(opts);
  auto image = oci::image_write(bundle_image_spec(*bundle, image_options), (out / "oci").string(),
                                (out / "image.oci.tar").string());
  if (!image) return report_error(image.error().message);
  const std::string repo_tag =
      recipes::deployment_image_reference(target ? target->registry : "", request.model_name, opts.tag);
  auto docker_size = oci::docker_archive_write(*image, repo_tag, *created, (out / "image.docker.tar").string());
  if (!docker_size) return report_error(docker_size.error().message);
  const double image_s = seconds_since(image_start);

  std::error_code size_ec;
  const uint64_t model_bytes = fs::file_size(model->model_file, size_ec);
  auto recipes = recipes::recipes_write(
      deployment_spec(*bundle, *image, repo_tag, target ? *target : local_target(), size_ec ? 0 : model_bytes), out.string());
  if (!recipes) return report_error("recipes: " + recipes.error().message);
  const double total_s = seconds_since(start);

  uint64_t compressed = image->manifest.size + image->config.size;
  for (const oci::LayerBlob& l : image->layers) compressed += l.descriptor.size;
  if (opts.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (const oci::LayerBlob& l : image->layers)
      layers.push_back({{"name", l.descriptor.annotations.at("kiln.layer")}, {"digest", l.descriptor.digest},
                        {"size", l.descriptor.size}, {"diff_id", l.diff_id}, {"tar_size", l.tar_size},
                        {"media_type", l.descriptor.media_type}});
    nlohmann::json checks = nlohmann::json::array();
    for (const SelftestCheck& c : bundle->checks)
      checks.push_back({{"output", c.output}, {"max_abs_error", c.max_abs_error}, {"limit", c.limit}, {"passed", c.passed}});
    const nlohmann::json doc = {{"manifest_digest", image->manifest.digest}, {"config_digest", image->config.digest},
                                {"layout", image->layout_dir}, {"archive", image->archive_path},
                                {"archive_size", image->archive_size}, {"compressed_size", compressed},
                                {"docker_archive", (out / "image.docker.tar").string()}, {"docker_archive_size", *docker_size},
                                {"image", repo_tag}, {"target", request.target.name}, {"threads", request.threads},
                                {"device", std::string(device_kind_name(device))},
                                {"cuda_precision", device == DeviceKind::cuda ? nlohmann::json(request.cuda_precision) : nlohmann::json()},
                                {"recipes", *recipes},
                                {"tag", opts.tag}, {"layers", layers}, {"selftest", checks},
                                {"seconds", {{"compile", compile_s}, {"bundle", bundle_s}, {"image", image_s}, {"total", total_s}}}};
    std::cout << doc.dump(2) << '\n';
    return kExitOk;
  }
  for (const std::string& note : notes) std::printf("%s\n", note.c_str());
  std::printf("bundle %s (%zu libraries, batch %lld)\n", bundle_dir.c_str(), bundle->libraries.size(),
              static_cast<long long>(model->batch));
  for (const SelftestCheck& c : bundle->checks)
    std::printf("  selftest output %-16s max |error| %.3g (limit %.3g) ok\n", c.output.c_str(), c.max_abs_error, c.limit);
  for (const oci::LayerBlob& l : image->layers)
    std::printf("  layer %-8s %s  %10s  (tar %s, %s)\n", l.descriptor.annotations.at("kiln.layer").c_str(),
                l.descriptor.digest.c_str(), human_bytes(l.descriptor.size).c_str(), human_bytes(l.tar_size).c_str(),
                l.descriptor.annotations.at("kiln.compression").c_str());
  std::printf("  config   %s\n", image->config.digest.c_str());
  std::printf("manifest %s (tag %s)\n", image->manifest.digest.c_str(), opts.tag.c_str());
  std::printf("wrote %s (image %s compressed), %s (%s) and %s (%s, loads as %s)\n", image->layout_dir.c_str(),
              human_bytes(compressed).c_str(), image->archive_path.c_str(), human_bytes(image->archive_size).c_str(),
              (out / "image.docker.tar").c_str(), human_bytes(*docker_size).c_str(), repo_tag.c_str());
  std::printf("recipes in %s:", out.c_str());
  for (const std::string& r : *recipes) std::printf(" %s", r.c_str());
  std::printf("\n");
  std::string gpus;
  if (request.target.gpu_count > 0)
    gpus = ", " + std::to_string(request.target.gpu_count) + "x " + request.target.gpu_model +
           (plugin.empty() ? ": the model runs on the CPUs (--device cpu)"
                           : ": the model runs on one GPU (" + std::to_string(bundle->cuda_libraries.size()) + " CUDA libraries)");
  // 0 is not a count: the runtime takes the container's CPU quota when it starts.
  const std::string threads = request.threads > 0 ? std::to_string(request.threads) + " threads"
                                                  : "threads from the container's CPU quota at start";
  std::printf("target %s (%s, scheduler %s%s), %s\n", request.target.name.c_str(), request.target.kind.c_str(),
              request.target.scheduler.c_str(), gpus.c_str(), threads.c_str());
  std::printf("took %.2f s (compile %.2f s, bundle + self-test %.2f s, image %.2f s)\n", total_s, compile_s, bundle_s, image_s);
  return kExitOk;
}

}  // namespace

void add_image_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<ImageCmdOptions>();
  CLI::App* cmd = app.add_subcommand("image", "Build a reproducible OCI image (layout + oci-archive) that runs the model");
  cmd->add_option("model", opts->model, "ONNX model (compiled with the pipeline) or a .kiln plan")->required();
  cmd->add_option("-o,--output", opts->output, "Output folder: DIR/oci, DIR/image.oci.tar and DIR/bundle")->required();
  opts->dims.add_to(*cmd);
  cmd->add_option("--passes", opts->passes, "Pass list for an ONNX model: 'default', 'none' or comma-separated names");
  cmd->add_option("--name", opts->name, "Model name in labels and metadata (default: the file's stem)");
  cmd->add_option("--tag", opts->tag, "Tag in the layout's index.json (default: latest)");
  cmd->add_option("--target", opts->target,
                  "Target infrastructure (YAML/JSON, see examples/targets): threads, GPU environment, registry in the "
                  "image name and the recipes (default: this machine)");
  cmd->add_option("--device", opts->device,
                  "Where the image runs the model: cuda (the default for a target whose nodes have GPUs: carries "
                  "libkiln_cuda.so and the CUDA libraries it needs) or cpu")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--cuda-precision", opts->cuda_precision,
                  "A GPU image's precision (its KILN_CUDA_PRECISION, kiln-runtime's default): fp32 (default), tf32, fp16 "
                  "or bf16; the image's self-test checks it on the GPU")
      ->check(CLI::IsMember(device_precision_names()));
  cmd->add_option("--runtime", opts->runtime, "kiln-runtime binary to bundle (default: the one beside kiln)");
  cmd->add_option("--threads", opts->threads,
                  "Thread count set in the image (default: the target node's cores; without a target 0: the CPU quota)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--model-gzip-level", opts->model_gzip_level, "gzip level of the model layer (default 0: uncompressed)")
      ->check(CLI::Range(0, 9));
  cmd->add_option("--gzip-level", opts->gzip_level, "gzip level of the runtime and config layers (default 6)")
      ->check(CLI::Range(1, 9));
  cmd->add_option("--cache", opts->cache,
                  "Cache of compressed layers (default: $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln or ~/.cache/kiln)");
  cmd->add_flag("--no-cache", opts->no_cache, "Compress every layer, neither reading nor filling the cache");
  cmd->add_flag("--json", opts->json, "Print the result as JSON");
  cmd->callback([opts, &run] { run = [opts] { return run_image(*opts); }; });
}

}  // namespace kiln::cli

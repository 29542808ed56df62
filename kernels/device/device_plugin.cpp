#include "kernels/device/device_plugin.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "kernels/device/device_check.h"

namespace kiln {

DevicePluginSearch device_plugin_search_default() {
  DevicePluginSearch search;
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) search.executable_dir = exe.parent_path().string();
  if (const char* env = std::getenv(kCudaPluginEnv); env && *env) search.env_path = env;
  return search;
}

Result<std::string> cuda_plugin_find(const DevicePluginSearch& search) {
  std::error_code error;
  std::string beside;
  if (!search.executable_dir.empty()) {
    beside = (std::filesystem::path(search.executable_dir) / kCudaPluginFile).string();
    if (std::filesystem::is_regular_file(beside, error)) return beside;
  }
  if (search.env_path) {
    KILN_REQUIRE(std::filesystem::is_regular_file(*search.env_path, error), io, "the CUDA backend plugin is not installed: ",
                 beside.empty() ? std::string("") : "no " + beside + ", and ", kCudaPluginEnv, "=", *search.env_path,
                 " is not a file");
    return *search.env_path;
  }
  return make_error(ErrorCode::io, "the CUDA backend plugin is not installed: no ", beside.empty() ? std::string(kCudaPluginFile) : beside,
                    " and ", kCudaPluginEnv, " is not set (this kiln was built without CUDA, or ", kCudaPluginFile,
                    " was not copied beside the executable); --device cpu runs on the CPU");
}

Result<DeviceBackend*> cuda_plugin_load(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, DeviceBackend*> loaded;
  std::lock_guard lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    return make_error(ErrorCode::io, "cannot load the CUDA backend plugin ", path, ": ", why ? why : "unknown dlopen error",
                      " (a missing library named there must be on the library path: the plugin needs libcublasLt.so.13 and libcudnn.so.9)");
  }
  auto entry = reinterpret_cast<DeviceBackendEntry>(dlsym(library, kDeviceBackendEntryName));
  if (!entry) {
    dlclose(library);
    return make_error(ErrorCode::io, path, " is not a kiln device plugin (it has no ", kDeviceBackendEntryName, " symbol)");
  }
  DeviceBackend* backend = entry(kDeviceBackendAbi);
  if (!backend) {
    dlclose(library);
    return make_error(ErrorCode::unsupported, path, " was built from another kiln version (device plugin ABI ", kDeviceBackendAbi,
                      " expected); use the plugin built with this kiln");
  }
  loaded[path] = backend;
  return backend;
}

Status cuda_plugin_check_plan(const Plan& plan, const DeviceEngineOptions& options, const DevicePluginSearch& search) {
  KILN_ASSIGN(path, cuda_plugin_find(search));
  KILN_ASSIGN(backend, cuda_plugin_load(path));
  return backend->check_plan(plan, options);
}

Result<DeviceBackend*> cuda_backend_open(int device_index, const DevicePluginSearch& search) {
  KILN_ASSIGN(path, cuda_plugin_find(search));
  KILN_ASSIGN(backend, cuda_plugin_load(path));
  KILN_TRY(device_check(backend->probe(device_index), device_index));
  return backend;
}

}  // namespace kiln

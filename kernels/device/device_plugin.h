// Finding and loading the CUDA plugin (libkiln_cuda.so) with dlopen, so kiln and kiln-runtime
// never link a CUDA library. Searched next to the executable first, then at $KILN_CUDA_PLUGIN
// (a file path). Each failure is one line saying which file, what went wrong and what to do;
// the library is loaded once per process and never unloaded (tensors and engines it made may
// outlive any caller).
#pragma once

#include <optional>
#include <string>

#include "kernels/core/status.h"
#include "kernels/device/device_backend.h"

namespace kiln {

inline constexpr const char* kCudaPluginFile = "libkiln_cuda.so";
inline constexpr const char* kCudaPluginEnv = "KILN_CUDA_PLUGIN";

struct DevicePluginSearch {
  std::string executable_dir;           // "" when unknown
  std::optional<std::string> env_path;  // the value of $KILN_CUDA_PLUGIN, when set
};

// The running executable's folder (/proc/self/exe) and $KILN_CUDA_PLUGIN.
DevicePluginSearch device_plugin_search_default();

// The plugin file the search finds, or the error naming every place looked at.
Result<std::string> cuda_plugin_find(const DevicePluginSearch& search);

// Loads the plugin at `path` (once) and returns its backend: errors when dlopen fails (dlerror's
// line, e.g. a missing libcudnn.so.9), the entry symbol is absent, or the ABI differs.
Result<DeviceBackend*> cuda_plugin_load(const std::string& path);

// Whether every step of `plan` has a CUDA kernel (find, load, check_plan): needs the plugin but
// no GPU, so `kiln compile --device cuda` answers on any machine.
Status cuda_plugin_check_plan(const Plan& plan, const DeviceEngineOptions& options,
                              const DevicePluginSearch& search = device_plugin_search_default());

// What the CLI verbs call: find, load, probe device `device_index` and device_check it.
Result<DeviceBackend*> cuda_backend_open(int device_index, const DevicePluginSearch& search = device_plugin_search_default());

}  // namespace kiln

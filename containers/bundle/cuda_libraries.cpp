#include "containers/bundle/cuda_libraries.h"

#include <algorithm>
#include <filesystem>
#include <map>

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Toolkit and cuDNN libraries by name up to ".so"; the '.' or '_' ending each prefix keeps
// libcurl, libcups and the like out.
constexpr std::string_view kCudaPrefixes[] = {
    "libcudart.", "libcublas.", "libcublasLt.", "libcudnn.", "libcudnn_", "libcufft.", "libcufftw.", "libcurand.",
    "libcusolver.", "libcusolverMg.", "libcusparse.", "libnvrtc.", "libnvrtc-builtins.", "libnvJitLink.", "libnvblas.",
    "libnccl.", "libcupti."};

// The driver's libraries come from the host at run time and must match its kernel module.
bool driver_library_is(std::string_view soname) {
  return soname.starts_with("libcuda.so") || soname.starts_with("libnvidia-");
}

// 13 for "libcublasLt.so.13", 0 when the name has no version after ".so.".
int soname_major(std::string_view soname) {
  const size_t so = soname.find(".so.");
  if (so == std::string_view::npos) return 0;
  int major = 0;
  for (size_t i = so + 4; i < soname.size() && soname[i] >= '0' && soname[i] <= '9' && major < 100000; ++i)
    major = major * 10 + (soname[i] - '0');
  return major;
}

std::string file_name(const SharedLibrary& lib) { return fs::path(lib.interpreter ? lib.path : lib.name).filename().string(); }

}  // namespace

bool cuda_library_is(std::string_view soname) {
  return std::any_of(std::begin(kCudaPrefixes), std::end(kCudaPrefixes),
                     [&](std::string_view prefix) { return soname.starts_with(prefix); });
}

Result<DevicePluginLibraries> device_plugin_libraries(const std::string& plugin, const std::string& interpreter) {
  std::map<std::string, std::string> cuda;           // soname -> this machine's file (the first one listed)
  std::map<std::string, SharedLibrary> system;       // path -> library
  auto add = [&](const std::vector<SharedLibrary>& libs) {
    for (const SharedLibrary& lib : libs) {
      const std::string name = file_name(lib);
      if (driver_library_is(name)) continue;
      if (cuda_library_is(name)) cuda.emplace(name, lib.path);
      else system.emplace(lib.path, lib);
    }
  };
  KILN_ASSIGN(closure, library_closure(plugin, interpreter));
  add(closure);

  DevicePluginLibraries out;
  for (const auto& [name, path] : cuda) {
    const int major = soname_major(name);
    if (name.starts_with("libcudnn.")) out.cudnn_major = major;
    else if (name.starts_with("libcublasLt.") || (name.starts_with("libcudart.") && out.cuda_major == 0)) out.cuda_major = major;
  }
  if (out.cudnn_major > 0) {
    // cuDNN 9's libcudnn.so.N is a shim that dlopens its sub-libraries by soname from its own folder.
    const std::string shim = "libcudnn.so." + std::to_string(out.cudnn_major);
    const fs::path dir = fs::path(cuda.at(shim)).parent_path();
    const std::string suffix = ".so." + std::to_string(out.cudnn_major);
    std::vector<std::string> subs;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("libcudnn_") && name.ends_with(suffix) && fs::is_regular_file(entry.path(), ec)) subs.push_back(name);
    }
    KILN_REQUIRE(!subs.empty(), io, "cuDNN ", out.cudnn_major, " in ", dir.string(), " has no sub-libraries (libcudnn_*", suffix,
                 "), which ", shim, " loads at run time: install the complete cuDNN ", out.cudnn_major);
    std::sort(subs.begin(), subs.end());
    for (const std::string& name : subs) {
      const std::string path = (dir / name).string();
      cuda.emplace(name, path);
      auto sub_closure = library_closure(path, interpreter);
      if (!sub_closure) return sub_closure.status().with_context("cuDNN sub-library: ");
      add(*sub_closure);
    }
  }
  for (const auto& [name, path] : cuda) out.cuda.push_back({name, path, false});
  for (auto& [path, lib] : system) out.system.push_back(std::move(lib));
  return out;
}

}  // namespace kiln

// The libraries a CUDA device plugin (libkiln_cuda.so) loads, found on this machine, so that a GPU
// image carries exactly what the plugin it bundles was built against: its own closure (the
// CUDA libraries it names, e.g. libcublasLt.so.13 and libcudnn.so.9, and their system
// libraries) plus, when it needs cuDNN, cuDNN's sub-libraries (libcudnn_graph.so.9, ...), which
// libcudnn.so.N dlopens from its own folder and which therefore appear in no closure. The driver
// (libcuda.so.1) is never carried: the host provides it (NVIDIA Container Toolkit, apptainer --nv).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "containers/bundle/lib_closure.h"
#include "kernels/core/status.h"

namespace kiln {

// Whether `soname` is a library of the CUDA toolkit or cuDNN (libcudart, libcublas, libcublasLt,
// libcudnn*, libnvrtc, ...), as opposed to a system library (libstdc++, libz) or the driver.
bool cuda_library_is(std::string_view soname);

struct DevicePluginLibraries {
  std::vector<SharedLibrary> system;  // the plugin's other libraries, at the loader's paths, sorted by path
  std::vector<SharedLibrary> cuda;    // one per soname (`name`), sorted by name; `path`: this machine's file
  int cuda_major = 0;   // the CUDA major the plugin was built against (libcublasLt.so.N, libcudart.so.N); 0: none
  int cudnn_major = 0;  // libcudnn.so.N's N; 0 when the plugin does not need cuDNN
};

// The libraries `plugin` needs, listed with the ELF interpreter `interpreter` (kiln-runtime's):
// an error names a library the loader cannot find, or cuDNN's folder without its sub-libraries.
Result<DevicePluginLibraries> device_plugin_libraries(const std::string& plugin, const std::string& interpreter);

}  // namespace kiln

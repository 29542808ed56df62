#include "kernels/device/device_check.h"

#include <string>

namespace kiln {
namespace {

// 13000 -> "13.0"
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace

Status device_check(const DeviceProbe& probe, int device_index) {
  KILN_REQUIRE(probe.driver_found, unsupported, "no NVIDIA driver on this machine (",
               probe.runtime_error.empty() ? std::string("libcuda.so.1 cannot be loaded") : probe.runtime_error,
               "): install the NVIDIA driver, or give the container the GPU (docker run --gpus all, the NVIDIA container "
               "toolkit); --device cpu runs on the CPU");
  if (!probe.runtime_error.empty()) {
    KILN_REQUIRE(probe.driver_version == 0 || probe.driver_version >= probe.runtime_version, unsupported,
                 "the NVIDIA driver is too old: it supports CUDA ", cuda_version_text(probe.driver_version),
                 ", kiln's CUDA backend needs CUDA ", cuda_version_text(probe.runtime_version), " (", probe.runtime_error,
                 "); update the driver");
    return make_error(ErrorCode::unsupported, "the CUDA runtime cannot use the GPU: ", probe.runtime_error);
  }
  KILN_REQUIRE(probe.device_count > 0, unsupported,
               "no CUDA device: the NVIDIA driver is installed but shows no GPU to this process (check nvidia-smi and "
               "CUDA_VISIBLE_DEVICES); --device cpu runs on the CPU");
  KILN_REQUIRE(device_index >= 0 && device_index < probe.device_count, invalid_argument, "CUDA device ", device_index,
               " does not exist: this machine shows ", probe.device_count, " (0 to ", probe.device_count - 1, ")");
  const int capability = probe.compute_major * 10 + probe.compute_minor;
  KILN_REQUIRE(capability >= probe.min_compute_capability, unsupported, "GPU ", device_index, " '", probe.device_name,
               "' has compute capability ", probe.compute_major, ".", probe.compute_minor,
               "; kiln's CUDA backend is built for ", probe.architectures, " and needs ", probe.min_compute_capability / 10,
               ".", probe.min_compute_capability % 10, " or newer (rebuild with CMAKE_CUDA_ARCHITECTURES including ",
               capability, ")");
  return Status::ok();
}

}  // namespace kiln

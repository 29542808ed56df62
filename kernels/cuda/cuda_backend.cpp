// The plugin's entry point: the CUDA DeviceBackend. probe() gathers facts without failing (the
// driver library, device count, the selected device's name, compute capability and memory);
// device_check() on the host side turns them into one clear message.
#include <dlfcn.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_engine.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/device/device_check.h"

namespace kiln::cuda {
namespace {

class CudaBackend final : public DeviceBackend {
 public:
  std::string_view name() const override { return "cuda"; }

  DeviceProbe probe(int device_index) override {
    DeviceProbe p;
    p.runtime_version = CUDART_VERSION;
    p.architectures = KILN_CUDA_ARCHITECTURES;
    p.min_compute_capability = KILN_CUDA_MIN_COMPUTE_CAPABILITY;
    // The runtime loads the driver itself; loading it here first tells "no driver" apart from
    // the runtime's other failures. The handle stays open for the runtime to share.
    p.driver_found = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != nullptr;
    if (!p.driver_found) return p;
    cudaDriverGetVersion(&p.driver_version);
    int count = 0;
    const cudaError_t counted = cudaGetDeviceCount(&count);
    if (counted == cudaErrorNoDevice) {
      cudaGetLastError();
      return p;
    }
    if (counted == cudaErrorStubLibrary) {  // the toolkit's stub libcuda on the library path: no driver
      cudaGetLastError();
      p.driver_found = false;
      p.runtime_error = "the libcuda.so.1 found is the CUDA toolkit's stub";
      return p;
    }
    if (counted != cudaSuccess) {
      p.runtime_error = std::string(cudaGetErrorName(counted)) + ": " + cudaGetErrorString(counted);
      cudaGetLastError();
      return p;
    }
    p.device_count = count;
    cudaDeviceProp properties{};
    if (device_index >= 0 && device_index < count && cudaGetDeviceProperties(&properties, device_index) == cudaSuccess) {
      p.device_name = properties.name;
      p.compute_major = properties.major;
      p.compute_minor = properties.minor;
      p.total_memory_bytes = static_cast<int64_t>(properties.totalGlobalMem);
    }
    return p;
  }

  Status check_plan(const Plan& plan, const DeviceEngineOptions& options) override {
    return cuda_plan_check(plan, options);
  }

  Result<std::unique_ptr<DeviceEngine>> create_engine(const Plan& plan, const DeviceEngineOptions& options) override {
    KILN_TRY(device_check(probe(options.device_index), options.device_index));
    return cuda_engine_create(plan, options);
  }
};

}  // namespace
}  // namespace kiln::cuda

extern "C" __attribute__((visibility("default"))) kiln::DeviceBackend* kiln_device_backend(int abi) {
  if (abi != kiln::kDeviceBackendAbi) return nullptr;
  static kiln::cuda::CudaBackend backend;
  return &backend;
}

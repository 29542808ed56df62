// A compiled plan ready to run on the device the user asked for: the CPU Engine, or a
// DeviceEngine from the CUDA plugin. What run/bench/verify and kiln-runtime hold, so each of
// them takes --device with one line. Inputs are checked against the plan here, on the host,
// before any device sees them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/device/device_backend.h"
#include "kernels/engine.h"

namespace kiln {

enum class DeviceKind { cpu, cuda };

std::string_view device_kind_name(DeviceKind kind);  // "cpu", "cuda"
std::optional<DeviceKind> device_kind_from_name(std::string_view name);

struct PlanRunnerOptions {
  DeviceKind device = DeviceKind::cpu;
  int threads = 0;                  // CPU threads (0: the CPU quota)
  std::ostream* verbose = nullptr;  // the kernel chosen for each step
  DeviceEngineOptions device_options;  // cuda only (precision, device index, graphs)
};

class PlanRunner {
 public:
  // Errors: the plan's own (types, shapes), the plugin's (not installed, no driver, no device),
  // a node without a kernel on the device, or device memory that does not suffice.
  static Result<std::unique_ptr<PlanRunner>> create(const Plan& plan, const PlanRunnerOptions& options);
  ~PlanRunner();

  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, std::vector<double>* step_ms = nullptr);
  // Device plans only (DeviceEngine::time_on_device): milliseconds per launch, inputs and
  // outputs resident on the device. Unsupported on the CPU, where run() is the whole story.
  Result<std::vector<double>> time_on_device(int warmup, int iters);
  const std::vector<EngineStep>& steps() const;
  const EngineMemory& memory() const;
  DeviceKind device() const { return device_; }
  int threads() const;          // CPU engine threads (0 on a device)
  std::string describe() const; // "cpu, 2 threads" / the device engine's own description

 private:
  PlanRunner() = default;
  DeviceKind device_ = DeviceKind::cpu;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<DeviceEngine> device_engine_;
  std::vector<PlanInput> input_decls_;
};

}  // namespace kiln

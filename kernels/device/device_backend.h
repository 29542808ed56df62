// The interface between kiln and an accelerator backend loaded at run time (the CUDA plugin,
// libkiln_cuda.so). It names no vendor header, so kiln, kiln-runtime and CPU images compile and
// link without any accelerator library; the plugin implements it and device_plugin.cpp loads it.
//
// A DeviceEngine is the device-side twin of Engine: built once from a Plan with concrete shapes
// (kernels chosen from the backend's own ordered list, weights uploaded once, one device arena
// placed by plan_buffers), then run many times on plain host tensors. The plugin is built from
// the same kiln tree as the host (kDeviceBackendAbi is checked on load), so C++ types cross the
// boundary as they are.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/engine.h"
#include "kernels/plan.h"

namespace kiln {

// Bumped whenever this header or a type it uses changes shape.
inline constexpr int kDeviceBackendAbi = 5;

// Arithmetic of float values on the device. fp32 keeps the CPU engine's precision; tf32 lets
// convolutions and GEMMs use TF32 tensor cores (10-bit mantissa inputs, fp32 accumulation);
// fp16 stores activations and weights in half precision with fp32 accumulation in Conv/GEMM;
// bf16 the same in bfloat16 (float32's range, 8 mantissa bits instead of fp16's 11).
enum class DevicePrecision { fp32, tf32, fp16, bf16 };

std::string_view device_precision_name(DevicePrecision p);  // "fp32", "tf32", "fp16", "bf16"
std::optional<DevicePrecision> device_precision_from_name(std::string_view name);
// Every precision's name, in enum order: what --cuda-precision options accept.
std::vector<std::string> device_precision_names();

struct DeviceEngineOptions {
  DevicePrecision precision = DevicePrecision::fp32;
  int device_index = 0;
  // Runs with a batch (dim 0 of the first input) up to this are captured once as a CUDA Graph and
  // replayed; larger ones launch step by step. Every batch by default: at batch 64 on an H100 the
  // host's launches (cuDNN's are tens of microseconds each) still outran the GPU on a slower host
  // (MobileNetV2 fp16: 7.35 ms of device time launched step by step, 3.93 ms on a faster host).
  int64_t graph_max_batch = std::numeric_limits<int64_t>::max();
  std::ostream* verbose = nullptr;  // which kernel runs each step and why others did not
  // Mixed precision in a tf32/fp16/bf16 plan: the steps (plan node names) that compute and store in
  // float32, as kiln's CPU accuracy control keeps layers in fp32. Their float32 outputs reach the
  // other steps rounded to the plan's 16-bit type, and they read the others' 16-bit values widened
  // (exactly); a constant or input stays float32 where only kept steps read it. In a tf32 plan the
  // kept steps multiply in float32 (FMA) instead of on TF32 tensor cores.
  std::vector<std::string> keep_fp32;
};

// What the plugin found on this machine, as facts; device_check() turns them into the verdict.
struct DeviceProbe {
  bool driver_found = false;    // the driver library (libcuda.so.1) loads
  int driver_version = 0;       // e.g. 13000; 0 when unknown
  int runtime_version = 0;      // the CUDA runtime the plugin was built with
  std::string runtime_error;    // the runtime's message when it could not count devices
  int device_count = 0;
  // The selected device (DeviceEngineOptions::device_index), when device_count > it.
  std::string device_name;
  int compute_major = 0, compute_minor = 0;
  int64_t total_memory_bytes = 0;
  // The oldest compute capability the plugin carries code for (80: sm_80), and the list built.
  int min_compute_capability = 0;
  std::string architectures;  // "80;90"
};

// A compiled plan resident on a device.
class DeviceEngine {
 public:
  virtual ~DeviceEngine() = default;
  // Inputs in Plan::inputs order (plain host tensors of the compiled shapes); outputs on the host.
  // With `step_ms`, every step is timed on the device (events around each step, no graph).
  virtual Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, std::vector<double>* step_ms = nullptr) = 0;
  // Times the plan on the device alone, as frameworks are timed on a GPU: the last run's inputs,
  // kept on the device, feed `iters` launches (after `warmup`) of every step, the outputs stay
  // there; each time is the device's, from events around one launch. Needs one run() first.
  virtual Result<std::vector<double>> time_on_device(int warmup, int iters) = 0;
  // Times steps [first, first + count) alone, as time_on_device times the whole plan: what they
  // read is what the last run left on the device (no inputs copied in, no other step run), and
  // each launch holds `repeat` back-to-back copies of them (one CUDA Graph where the engine
  // captures graphs), so a few-microsecond kernel is timed as it runs inside a graph rather than
  // as one launch's latency. Each time is a launch's device time (events) over `repeat`. What
  // kiln bench-target uses to time one op without its producer or the input copies. Needs one
  // run() first.
  virtual Result<std::vector<double>> time_steps_on_device(size_t first, size_t count, int repeat, int warmup, int iters) = 0;
  virtual const std::vector<EngineStep>& steps() const = 0;
  virtual const EngineMemory& memory() const = 0;
  virtual std::string describe() const = 0;  // "NVIDIA H100 80GB HBM3 (sm_90), fp16, CUDA Graph"
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual std::string_view name() const = 0;  // "cuda"
  virtual DeviceProbe probe(int device_index) = 0;
  // Whether every step of `plan` has a kernel on this backend at options.precision; else the
  // first step that has none, by node name and op, with each implementation's reason. Needs no
  // device (a capability query), so it is what CPU-only machines can test.
  virtual Status check_plan(const Plan& plan, const DeviceEngineOptions& options) = 0;
  // Callers check device_check(probe(...)) first; create_engine fails with the same message
  // when the device is unusable. An op without a kernel on this device fails naming the node
  // and the op (no silent fallback to the CPU).
  virtual Result<std::unique_ptr<DeviceEngine>> create_engine(const Plan& plan, const DeviceEngineOptions& options) = 0;
};

// The one symbol a plugin exports: returns its backend (owned by the plugin, alive until exit),
// or nullptr when `abi` is not the plugin's kDeviceBackendAbi.
using DeviceBackendEntry = DeviceBackend* (*)(int abi);
inline constexpr const char* kDeviceBackendEntryName = "kiln_device_backend";

}  // namespace kiln

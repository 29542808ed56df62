// The points `kiln bench-target --device cuda` measures on one CUDA device, each a one-op graph
// compiled with the CUDA pipeline (cuda_pipeline()) and timed on the device (device_timing.h):
// - sweep: the kernel sweep's designed shapes (sweep_grid.h; the same one-op graphs the CPU sweep
//   builds), plus a batch-64 copy of each batch-32 shape whose tensors stay small, in every
//   precision asked for (fp16: every op, stored at 2 bytes an element); interleaved across ops so
//   that a sweep stopped early still covers every op;
// - peak: a square MatMul per precision (4096, quick 1024), compute-bound;
// - bandwidth: an Add streaming 1 MiB .. 256 MiB (two inputs and the output, in fp32), per pass.
// Rows have threads 1 and backend "cuda"; dtype "f32", "tf32", "f16" or "bf16".
#pragma once

#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/device/device_backend.h"
#include "kernels/plan.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/bench_point.h"
#include "perfmodel/microbench/sweep_grid.h"

namespace kiln::perf {

struct CudaBenchDevice {
  DeviceBackend* backend = nullptr;  // the plugin's, alive until exit
  int device_index = 0;
  DeviceProbe probe;
  TargetFingerprint fingerprint;  // fingerprint_cuda(probe)
};

// Finds and loads the plugin and checks the device as `kiln bench --device cuda` does: one message
// for a plugin that is not installed, no driver, an old driver, no device, an index past the
// devices, an unsupported compute capability.
Result<CudaBenchDevice> cuda_bench_device_open(int device_index);

// The dtype a device precision's rows are stored under: "f32", "tf32", "f16", "bf16".
std::string cuda_precision_dtype(DevicePrecision precision);

// The sweep's shapes on a GPU, in measuring order (see above).
std::vector<SweepShape> cuda_sweep_shapes(bool quick);

// The plans the points time: a sweep shape's graph (with its random inputs when asked), the peak's
// square MatMul, the bandwidth's Add moving `bytes` per pass. Exposed so that a machine without a
// GPU checks the plugin has a kernel for every step (DeviceBackend::check_plan).
Result<Plan> cuda_sweep_plan(const SweepShape& shape, std::vector<Tensor>* inputs = nullptr);
Result<Plan> cuda_peak_plan(int64_t size);
Result<Plan> cuda_bandwidth_plan(int64_t bytes);
// The host link's: a [batch, 3, 224, 224] float32 image batch in, its global average out: a
// classifier's input and (nearly) its output size, so that a run less its device time is what
// copying a model's input in and its result out costs.
Result<Plan> cuda_host_link_plan(int64_t batch);

std::vector<BenchPoint> cuda_sweep_points(const CudaBenchDevice& device, const std::vector<DevicePrecision>& precisions,
                                          bool quick);
std::vector<BenchPoint> cuda_peak_points(const CudaBenchDevice& device, const std::vector<DevicePrecision>& precisions,
                                         bool quick);
// The bandwidth section: the Add's streaming points, then host_link points (batches 1, 8 and 64 of
// cuda_host_link_plan; quick: 1 and 8).
std::vector<BenchPoint> cuda_bandwidth_points(const CudaBenchDevice& device, bool quick);

}  // namespace kiln::perf

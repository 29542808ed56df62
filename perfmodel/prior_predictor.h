// Latency from a spec-sheet prior (priors.h) when a target has no measured profile: a remote CPU
// or a GPU kiln cannot run here. Each kernel of the plan (plan_features.h, a fused group is one
// kernel) takes a fixed overhead plus max(FLOPs / (peak x compute efficiency), bytes / (bandwidth
// x memory efficiency)); a GPU run adds the host<->device copy of its inputs and outputs. The
// efficiencies are generic assumptions (PriorAssumptions), not fitted to any model: every number
// this gives is marked "prior" and gives way to measurements as soon as the target has any.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "perfmodel/plan_features.h"
#include "perfmodel/priors.h"

namespace kiln::perf {

struct PriorAssumptions {
  // Share of the datasheet's dense peak a library convolution or GEMM reaches on the layer shapes
  // of vision models: about half on CPU vector units and GPU CUDA cores (oneDNN on AVX-512, fp32
  // SIMT), a quarter on tensor cores, whose datasheet peak needs large, aligned GEMM tiles that
  // 7x7..56x56 feature maps with 64..512 channels rarely fill.
  double compute_efficiency = 0.5;
  double tensor_core_efficiency = 0.25;
  // Share of the datasheet's memory bandwidth a streaming kernel reaches.
  double memory_efficiency = 0.7;
  // Per kernel: a GPU launch inside a CUDA Graph (kiln's CUDA engine replays one at every batch),
  // and a CPU library call with its thread barrier.
  double gpu_graph_launch_ms = 0.002;
  double cpu_step_overhead_ms = 0.004;
  // Host <-> device copies of a run's inputs and outputs: kiln copies from pageable memory, which
  // reached ~8 GB/s of PCIe Gen5's 64 on an H100 host (docs/cuda-backend.md).
  double host_copy_efficiency = 0.125;
  // One core of a many-core CPU streams at most this multiple of its fair share of the
  // socket's bandwidth (a few threads cannot saturate DRAM).
  double core_bandwidth_share = 4.0;
};

class PriorPredictor {
 public:
  explicit PriorPredictor(const TargetPrior& prior, PriorAssumptions assumptions = {});

  // One kernel, at its dtype (f32, tf32, f16, bf16, int8); `threads` matters on a CPU only.
  double step_ms(const StepFeatures& step, int threads) const;
  // A whole run of one batch: every step, plus the host copies of `io_bytes` on a GPU.
  double run_ms(const std::vector<StepFeatures>& steps, int threads, double io_bytes) const;
  // The host <-> device copies of a run's inputs and outputs (`io_bytes`) over the GPU's host link
  // at host_copy_efficiency; 0 on a CPU. Also what a run predicted from a measured GPU profile
  // adds, since the GPU sweep times the device alone.
  double host_copy_ms(double io_bytes) const;
  // Whether the prior has a peak for `dtype` (a native instruction or tensor core for it).
  bool supports(const std::string& dtype) const;
  const TargetPrior& prior() const { return prior_; }
  const PriorAssumptions& assumptions() const { return assumptions_; }
  // The assumptions in one sentence, for the plan's explanation.
  std::string describe() const;

 private:
  double peak_flops_per_ms(const std::string& dtype) const;  // whole device or socket
  const TargetPrior& prior_;
  PriorAssumptions assumptions_;
};

// The steps of a plan compiled for the CPU (float32) as the GPU runs them at `dtype` ("f32",
// "f16" or "bf16"): the CPU's layout conversions dropped, every stored byte at the dtype's width;
// the steps named in `keep_fp32` (GPU mixed precision) at f32.
std::vector<StepFeatures> steps_on_gpu(const std::vector<StepFeatures>& cpu_fp32_steps, const std::string& dtype,
                                       const std::vector<std::string>& keep_fp32 = {});

// The dtype a GPU precision ("fp32", "fp16", "bf16") is stored under in profiles and priors.
std::string gpu_precision_dtype(const std::string& precision);

// Why kiln's CUDA backend cannot run `precision` on any GPU (int8); nullopt when it can.
std::optional<std::string> cuda_precision_refusal(const std::string& precision);

// Why kiln cannot run `precision` on `prior`'s GPU (as above, or units the GPU lacks); nullopt when it can.
std::optional<std::string> gpu_precision_refusal(const std::string& precision, const PriorPredictor& prior);

}  // namespace kiln::perf

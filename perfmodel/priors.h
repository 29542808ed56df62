// Spec-sheet priors for targets kiln cannot measure here (GPUs, remote CPUs): peak throughput per
// dtype, memory bandwidth and size, each with its source. They are marked `prior` wherever they
// are shown and stop being used for a device as soon as measured data for it is stored or
// imported (prior_replaced_by).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "perfmodel/store.h"

namespace kiln::perf {

struct PriorPeak {
  std::string dtype;   // "f32", "tf32", "f16", "bf16", "int8"
  double tflops = 0;   // dense (no structured sparsity); Tops for int8
};

struct TargetPrior {
  std::string id;           // "nvidia-h100-sxm"
  std::string name;         // "NVIDIA H100 SXM5 80GB"
  std::string device;       // "gpu" or "cpu"
  std::vector<std::string> match;  // case-insensitive substrings of a measured target's model name
  std::vector<PriorPeak> peaks;    // dtypes without an entry are not supported natively
  double memory_bandwidth_gbs = 0;
  double memory_gb = 0;
  std::string source;       // where the numbers come from
  int cores = 0;            // CPU: physical cores the peaks are summed over
  double host_link_gbs = 0; // GPU: host <-> device bandwidth per direction (PCIe)
};

std::span<const TargetPrior> target_priors();
const TargetPrior* target_prior_find(const std::string& id);  // nullptr when unknown

// The stored target that replaces `prior` (its model name matches), or empty.
std::string prior_replaced_by(const TargetPrior& prior, const std::vector<StoredTarget>& stored);

// The prior a stored target replaces (the first whose match strings its model name contains), or
// nullptr: what still describes the parts a profile does not measure (a GPU's host link).
const TargetPrior* prior_replaced(const StoredTarget& target);

}  // namespace kiln::perf

// The .kiln artifact: one self-describing file holding a compiled Plan and its weights.
//
//   [header 64 B] [metadata JSON] [padding] [weights, each 64-byte aligned]
//   header: magic "KILNPLAN", format version, metadata offset/size, weights offset/size,
//           CRC-32 of metadata and of weights, CRC-32 of the header itself.
//
// Loading memory-maps the file and lets weight tensors borrow the mapping (no copy). Every
// defect (truncation, flipped byte, other version, malformed metadata) is a clear error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/plan.h"

namespace kiln {

// 2: MatMul's input 2 is its bias and its residual input 3 (version 1 had the residual at 2).
inline constexpr uint32_t kPlanFileVersion = 2;

struct PlanFileInfo {
  std::string producer;  // "kiln 0.1.0"
  std::string source;    // the model it was compiled from
  std::string passes;    // comma-separated pipeline that produced it
  std::string notes;     // free text, e.g. the batch size
  // What it was compiled for: "cpu" or "cuda" (the CUDA pipeline's plan); "" in files written
  // before kiln recorded it. `cuda_precision`: the GPU precision kiln optimize chose for it ("" when
  // none was chosen); `kiln image` defaults to both.
  std::string device;
  std::string cuda_precision;
  // GPU mixed precision (DeviceEngineOptions::keep_fp32): the steps kept in float32 when the plan
  // runs at `cuda_precision` (kiln compile's GPU accuracy control, or --cuda-keep-fp32); every
  // name is a step of the plan. Empty: none, and the field is not written.
  std::vector<std::string> cuda_keep_fp32;
};

Status plan_write_file(const std::string& path, const Plan& plan, const PlanFileInfo& info);

struct LoadedPlan {
  Plan plan;
  PlanFileInfo info;
  uint64_t file_bytes = 0;
};

// verify_weights=false skips the CRC over the weights (metadata is always checked).
Result<LoadedPlan> plan_read_file(const std::string& path, bool verify_weights = true);

}  // namespace kiln

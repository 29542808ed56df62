// Mixed precision on a device (DeviceEngineOptions::keep_fp32): which steps of a tf32/fp16/bf16
// plan compute in float32 (tf32: without TF32 tensor cores) and which values the device stores in
// float32 (tf32: all of them, as without the list). One rule, read by the CUDA
// engine (which inserts the conversions it implies) and by the CPU emulation of its rounding
// (kernels/verify/precision_emulation.h), so that what `kiln verify --emulate` measures is what the
// GPU runs. Why: on the conditioned ResNet-50, bf16 everywhere gives cosine 0.99753 against fp32;
// its first 8 of 56 steps kept in float32 give 0.99913, its last 27 convolutions 0.99754 (emulated,
// docs/cuda-backend.md): the error is made early and amplified.
#pragma once

#include <vector>

#include "kernels/core/status.h"
#include "kernels/device/device_backend.h"
#include "kernels/plan.h"

namespace kiln {

struct MixedPrecision {
  std::vector<bool> kept_step;    // per plan step: computes in float32
  std::vector<bool> stored_wide;  // per slot: stored in float32 on the device (for float32 slots)
  bool any() const;
};

// The rule: a kept step's outputs are stored in float32; a constant or input is stored in float32
// when every step that reads it is kept; every other float32 value at the plan's 16-bit type. A
// step that is not kept reads 16-bit copies of wide values; a kept one reads widened copies of
// 16-bit ones (exact). Errors: keep_fp32 with fp32, or a name that is no step of the plan (named).
Result<MixedPrecision> mixed_precision(const Plan& plan, const DeviceEngineOptions& options);

}  // namespace kiln

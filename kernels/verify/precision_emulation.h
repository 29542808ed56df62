// GPU precision emulation: runs a plan compiled for kiln's CUDA engine on the CPU, rounding
// values where that engine stores or feeds them at lower precision, so that a
// machine without a GPU can verify the accuracy of a GPU precision (kiln verify --emulate,
// kiln optimize for GPU targets). What the CUDA engine does, and so what is rounded
// (docs/cuda-backend.md, "Precision"):
//   fp16 / bf16: every float32 value is stored as half / bfloat16 (weights converted on the host,
//     inputs by a kernel, every step's output when written); arithmetic accumulates in float.
//     Emulated: constants and inputs rounded once, every float step output rounded when written
//     (storage_rounding_plan, which the CPU engine runs on its fast kernels).
//   tf32: values stay float32; Conv (except depthwise ones, kiln's own float kernel), Gemm and
//     MatMul multiply on TF32 tensor cores, which keep 10 of the 23 mantissa bits of each
//     operand. Emulated: those steps' data and weight operands rounded to nearest (bias not), on
//     the reference kernels (Tf32Emulator: its hooks reach inside a step).
//   fp32: nothing rounded.
// Not emulated: the order of the GPU's float accumulation, and the extra rounding where the GPU
// runs one step as two (a 1x1 convolution as a GEMM, then its bias and activation) — so the
// figures approximate the GPU's, the first-order effect being the storage rounding.
#pragma once

#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/core/tensor.h"
#include "kernels/device/device_backend.h"
#include "kernels/plan.h"

namespace kiln {

// `x` as `precision` stores it (fp32: unchanged), returned as float. Round to nearest even;
// fp16 overflows to infinity as a half does; NaN stays NaN.
float emulated_round(float x, DevicePrecision precision);

// The plan the CPU engine (or the reference executor) runs to emulate fp16/bf16 storage: `plan`
// with its float32 constants rounded and, after every float32 input and step output, a rounding
// pair (Cast to the 16-bit type, Cast back to float32), so that whatever reads a value reads it
// rounded. fp32: the plan as it is. tf32 rounds operands inside steps, which only Tf32Emulator's
// hooks reach: refused here. `keep_fp32` (DeviceEngineOptions::keep_fp32, mixed precision): those
// steps' outputs stay float32 and are rounded only where a step that is not kept reads them (its
// 16-bit copy); a constant or input that only kept steps read is not rounded. A name that is no
// step of the plan is an error.
Result<Plan> storage_rounding_plan(const Plan& plan, DevicePrecision precision, const std::vector<std::string>& keep_fp32 = {});

// `plan` ready to run with TF32's rounding on the reference kernels: the weights that only TF32
// operands read are rounded once here (deep copies), the other operands of those steps on each run.
class Tf32Emulator {
 public:
  explicit Tf32Emulator(const Plan& plan);
  // Mixed precision (DeviceEngineOptions::keep_fp32): the kept steps multiply in float32, as the
  // CUDA engine runs them. A name that is no step of the plan is an error.
  static Result<Tf32Emulator> create(const Plan& plan, const std::vector<std::string>& keep_fp32);
  // One run on the reference executor with `threads` (ExecuteOptions::threads; 0: every CPU). Safe to
  // call from several threads at once. Errors: the reference executor's.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, int threads = 0) const;

 private:
  Tf32Emulator(const Plan& plan, const std::vector<bool>& kept_step);
  Plan plan_;
  std::vector<bool> tf32_step_;        // per step: multiplies on TF32 tensor cores
  std::vector<bool> rounded_constant_;  // per slot: a constant rounded at construction
};

// What the emulation did, for reports: "fp16 emulated on the CPU (the GPU plan on the CPU engine,
// every stored value rounded to fp16)".
std::string emulation_description(DevicePrecision precision);

}  // namespace kiln

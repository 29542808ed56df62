#include "kernels/verify/precision_emulation.h"

#include <cstring>
#include <map>
#include <span>
#include <string>

#include "kernels/core/half.h"
#include "kernels/device/mixed_precision.h"
#include "kernels/executor.h"

namespace kiln {
namespace {

float tf32_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN
  u += 0xfffu + ((u >> 13) & 1u);                  // to nearest even at the 10th mantissa bit
  u &= ~0x1fffu;
  float out;
  std::memcpy(&out, &u, sizeof out);
  return out;
}

Tensor rounded_copy(const Tensor& t, DevicePrecision precision) {
  if (t.dtype() != DType::f32 || precision == DevicePrecision::fp32) return t;
  Tensor out = t.clone();
  float* p = out.data<float>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] = emulated_round(p[i], precision);
  return out;
}

// Whether the CUDA engine runs `step` on TF32 tensor cores in tf32 mode: Conv (cuDNN, or a 1x1
// as a cuBLASLt GEMM), Gemm and MatMul (cuBLASLt); a depthwise Conv (one input channel per group)
// runs on kiln's own float kernel.
bool multiplies_in_tf32(const Plan& plan, const PlanStep& step) {
  if (step.op == OpKind::Gemm || step.op == OpKind::MatMul) return true;
  if (step.op != OpKind::Conv || step.inputs.size() < 2) return false;
  const Result<int64_t> group_attr = step.attrs.get_int("group", 1);
  const int64_t group = group_attr ? *group_attr : 1;
  if (group == 1) return true;
  const ValueType& w = plan.slot_types[static_cast<size_t>(step.inputs[1])];
  const bool one_channel_per_group = w.rank_known && w.shape.size() >= 2 && w.shape[1].known() && w.shape[1].value == 1;
  return !one_channel_per_group;
}

constexpr size_t kTf32Operands = 2;  // data and weights (A and B); not the bias or a residual

}  // namespace

float emulated_round(float x, DevicePrecision precision) {
  switch (precision) {
    case DevicePrecision::fp32: return x;
    case DevicePrecision::tf32: return tf32_round(x);
    case DevicePrecision::fp16: return Half::to_float(Half::from_float(x));
    case DevicePrecision::bf16: return static_cast<float>(BFloat16(x));
  }
  return x;
}

Result<Plan> storage_rounding_plan(const Plan& plan, DevicePrecision precision, const std::vector<std::string>& keep_fp32) {
  KILN_REQUIRE(precision != DevicePrecision::tf32, unsupported,
               "tf32 rounds the operands of Conv/Gemm/MatMul, not stored values: run it on Tf32Emulator");
  if (precision == DevicePrecision::fp32 && keep_fp32.empty()) return plan;
  DeviceEngineOptions options;
  options.precision = precision;
  options.keep_fp32 = keep_fp32;
  KILN_ASSIGN(mixed, mixed_precision(plan, options));
  const std::vector<bool>& kept = mixed.kept_step;
  const auto stored_half = [&](int slot) { return !mixed.stored_wide[static_cast<size_t>(slot)]; };
  const bool bf16 = precision == DevicePrecision::bf16;
  const DType half = bf16 ? DType::bf16 : DType::f16;

  Plan out;
  out.num_slots = plan.num_slots;
  out.slot_types = plan.slot_types;
  out.inputs = plan.inputs;
  out.outputs = plan.outputs;
  for (const auto& [slot, value] : plan.constants)
    out.constants.emplace_back(slot, stored_half(slot) ? rounded_copy(value, precision) : value);
  auto new_slot = [&](const ValueType& type) {
    out.slot_types.push_back(type);
    return out.num_slots++;
  };
  Attrs to_half, to_float;
  to_half.set("to", int64_t{bf16 ? 16 : 10});  // ONNX BFLOAT16 / FLOAT16
  to_float.set("to", int64_t{1});
  // `stored` takes the value the plan computes as `raw` and holds it rounded: raw -> half -> stored.
  auto round_into = [&](int raw, int stored, const std::string& name) {
    ValueType half_type = out.slot_types[static_cast<size_t>(stored)];
    half_type.dtype = half;
    const int h = new_slot(half_type);
    out.steps.push_back({OpKind::Cast, to_half, {raw}, {h}, name + " (to " + std::string(device_precision_name(precision)) + ")"});
    out.steps.push_back({OpKind::Cast, to_float, {h}, {stored}, name + " (from " + std::string(device_precision_name(precision)) + ")"});
  };
  auto is_float = [&](int slot) { return slot >= 0 && plan.slot_types[static_cast<size_t>(slot)].dtype == DType::f32; };
  // Each float input stored at 16 bits arrives in a new slot and is rounded into the one the steps read.
  for (PlanInput& in : out.inputs) {
    if (!is_float(in.slot) || !stored_half(in.slot)) continue;
    const int raw = new_slot(plan.slot_types[static_cast<size_t>(in.slot)]);
    round_into(raw, in.slot, in.name);
    in.slot = raw;
  }
  // A float32 value (a kept step's output) as a step that is not kept reads it: its 16-bit copy, made once.
  std::map<int, int> half_copy;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& step = plan.steps[s];
    PlanStep computed = step;
    if (!kept[s])
      for (int& in : computed.inputs) {
        if (!is_float(in) || stored_half(in)) continue;
        auto [copy, added] = half_copy.emplace(in, -1);
        if (added) {
          copy->second = new_slot(plan.slot_types[static_cast<size_t>(in)]);
          round_into(in, copy->second, step.name + " reads");
        }
        in = copy->second;
      }
    std::vector<std::pair<int, int>> rounded;  // (raw, stored)
    for (int& o : computed.outputs) {
      if (!is_float(o) || !stored_half(o)) continue;
      const int raw = new_slot(plan.slot_types[static_cast<size_t>(o)]);
      rounded.emplace_back(raw, o);
      o = raw;
    }
    out.steps.push_back(std::move(computed));
    for (const auto& [raw, stored] : rounded) round_into(raw, stored, step.name);
  }
  return out;
}

Result<Tf32Emulator> Tf32Emulator::create(const Plan& plan, const std::vector<std::string>& keep_fp32) {
  DeviceEngineOptions options;
  options.precision = DevicePrecision::tf32;
  options.keep_fp32 = keep_fp32;
  KILN_ASSIGN(mixed, mixed_precision(plan, options));
  return Tf32Emulator(plan, mixed.kept_step);
}

Tf32Emulator::Tf32Emulator(const Plan& plan) : Tf32Emulator(plan, std::vector<bool>(plan.steps.size(), false)) {}

Tf32Emulator::Tf32Emulator(const Plan& plan, const std::vector<bool>& kept_step)
    : plan_(plan), rounded_constant_(static_cast<size_t>(plan.num_slots), false) {
  for (size_t s = 0; s < plan_.steps.size(); ++s) tf32_step_.push_back(!kept_step[s] && multiplies_in_tf32(plan_, plan_.steps[s]));
  // A weight is rounded once here only where nothing but a tensor core reads it.
  std::vector<bool> tf32_read(rounded_constant_.size(), false), other_read(rounded_constant_.size(), false);
  for (size_t s = 0; s < plan_.steps.size(); ++s)
    for (size_t i = 0; i < plan_.steps[s].inputs.size(); ++i)
      if (const int slot = plan_.steps[s].inputs[i]; slot >= 0)
        (tf32_step_[s] && i < kTf32Operands ? tf32_read : other_read)[static_cast<size_t>(slot)] = true;
  for (auto& [slot, value] : plan_.constants) {
    const size_t k = static_cast<size_t>(slot);
    if (!tf32_read[k] || other_read[k]) continue;
    value = rounded_copy(value, DevicePrecision::tf32);
    rounded_constant_[k] = true;
  }
}

Result<std::vector<Tensor>> Tf32Emulator::run(const std::vector<Tensor>& inputs, int threads) const {
  ExecuteOptions options;
  options.threads = threads;
  options.step_inputs = [this](const PlanStep& step, std::span<Tensor> read) {
    if (!tf32_step_[static_cast<size_t>(&step - plan_.steps.data())]) return;
    for (size_t i = 0; i < read.size() && i < kTf32Operands; ++i) {
      const int slot = step.inputs[i];
      if (slot >= 0 && !rounded_constant_[static_cast<size_t>(slot)]) read[i] = rounded_copy(read[i], DevicePrecision::tf32);
    }
  };
  KILN_ASSIGN(result, execute_reference(plan_, inputs, options));
  return std::move(result.outputs);
}

std::string emulation_description(DevicePrecision precision) {
  const std::string p(device_precision_name(precision));
  switch (precision) {
    case DevicePrecision::fp32: return "fp32 emulated on the CPU (the GPU plan on the CPU engine, nothing rounded)";
    case DevicePrecision::tf32:
      return "tf32 emulated on the CPU (reference kernels; Conv/Gemm/MatMul operands rounded to 10 mantissa bits)";
    case DevicePrecision::fp16:
    case DevicePrecision::bf16: return p + " emulated on the CPU (the GPU plan on the CPU engine, every stored value rounded to " + p + ")";
  }
  return p;
}

}  // namespace kiln

#include "kernels/cuda/cuda_kernel.h"

#include <array>

namespace kiln::cuda {

std::string_view cuda_op_name(OpKind op) {
  static constexpr std::array<std::string_view, kOpCount> kNames = {
#define KILN_OP(name) #name,
#include "kernels/ops.def"
#undef KILN_OP
  };
  const auto i = static_cast<size_t>(op);
  return i < kNames.size() ? kNames[i] : "?";
}

DType cuda_device_dtype(DType host, DevicePrecision precision) {
  if (host != DType::f32) return host;
  if (precision == DevicePrecision::fp16) return DType::f16;
  if (precision == DevicePrecision::bf16) return DType::bf16;
  return host;
}

Result<KernelBuild> cuda_kernel_build(const Plan& plan, const PlanStep& step, const std::vector<const Tensor*>& constant_of,
                                      DevicePrecision precision) {
  KernelBuild build;
  build.op = step.op;
  build.attrs = &step.attrs;
  build.node_name = step.name;
  auto describe = [&](int slot) -> Result<ValueDesc> {
    ValueDesc d;
    if (slot < 0) {
      d.present = false;
      return d;
    }
    KILN_REQUIRE(static_cast<size_t>(slot) < plan.slot_types.size(), invalid_argument, "node '", step.name, "' uses slot ", slot,
                 ", which the plan does not have");
    const ValueType& t = plan.slot_types[static_cast<size_t>(slot)];
    KILN_REQUIRE(t.rank_known && sym_shape_is_concrete(t.shape), invalid_argument, "value in slot ", slot, " has shape ",
                 sym_shape_to_string(t.shape), "; compiled execution needs concrete shapes (compile for a batch size)");
    d.dtype = cuda_device_dtype(t.dtype, precision);
    d.shape = sym_shape_concrete(t.shape);
    d.constant = static_cast<size_t>(slot) < constant_of.size() ? constant_of[static_cast<size_t>(slot)] : nullptr;
    return d;
  };
  for (int slot : step.inputs) {
    KILN_ASSIGN(d, describe(slot));
    build.inputs.push_back(std::move(d));
  }
  for (int slot : step.outputs) {
    KILN_ASSIGN(d, describe(slot));
    d.constant = nullptr;
    build.outputs.push_back(std::move(d));
  }
  return build;
}

std::optional<FloatType> float_type_of(DType dtype) {
  if (dtype == DType::f32) return FloatType::f32;
  if (dtype == DType::f16) return FloatType::f16;
  if (dtype == DType::bf16) return FloatType::bf16;
  return std::nullopt;
}

std::optional<std::string> require_one_float_type(const KernelBuild& build) {
  std::optional<DType> seen;
  auto check = [&](const ValueDesc& v) -> std::optional<std::string> {
    if (!v.present) return std::nullopt;
    if (!float_type_of(v.dtype)) return "needs float32, float16 or bfloat16 values, got " + std::string(dtype_name(v.dtype));
    if (seen && *seen != v.dtype) return std::string("needs one float type for all values");
    seen = v.dtype;
    return std::nullopt;
  };
  for (const ValueDesc& v : build.inputs)
    if (auto why = check(v)) return why;
  for (const ValueDesc& v : build.outputs)
    if (auto why = check(v)) return why;
  return std::nullopt;
}

}  // namespace kiln::cuda

#include "kernels/core/dtype.h"

#include <array>

namespace kiln {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 8> kDTypes = {{
    {DType::f32, "float32", 4},
    {DType::f16, "float16", 2},
    {DType::bf16, "bfloat16", 2},
    {DType::i8, "int8", 1},
    {DType::u8, "uint8", 1},
    {DType::i32, "int32", 4},
    {DType::i64, "int64", 8},
    {DType::boolean, "bool", 1},
}};

}  // namespace

size_t dtype_size(DType dt) { return kDTypes[static_cast<size_t>(dt)].size; }
std::string_view dtype_name(DType dt) { return kDTypes[static_cast<size_t>(dt)].name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

bool dtype_is_float(DType dt) { return dt == DType::f32 || dt == DType::f16 || dt == DType::bf16; }

}  // namespace kiln

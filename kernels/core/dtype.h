// Element types of kiln tensors, and a visitor that turns a runtime dtype into a C++ type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/core/half.h"

namespace kiln {

enum class DType : uint8_t { f32, f16, bf16, i8, u8, i32, i64, boolean };

size_t dtype_size(DType dt);
std::string_view dtype_name(DType dt);                       // "float32", "int64", ...
std::optional<DType> dtype_from_name(std::string_view name);  // inverse of dtype_name
bool dtype_is_float(DType dt);

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };

// Calls fn.template operator()<T>() with T the C++ type of `dt`:
//   visit_dtype(t.dtype(), [&]<typename T>() { ... });
template <typename Fn>
decltype(auto) visit_dtype(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f16: return fn.template operator()<Half>();
    case DType::bf16: return fn.template operator()<BFloat16>();
    case DType::i8: return fn.template operator()<int8_t>();
    case DType::u8: return fn.template operator()<uint8_t>();
    case DType::i32: return fn.template operator()<int32_t>();
    case DType::i64: return fn.template operator()<int64_t>();
    case DType::boolean: return fn.template operator()<bool>();
  }
  return fn.template operator()<float>();  // unreachable: every enumerator is handled above
}

}  // namespace kiln

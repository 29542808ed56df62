#include "kernels/op_def.h"

#include <array>
#include <string_view>

namespace kiln {
namespace {

constexpr std::array<std::string_view, kOpCount> kOpNames = {
#define KILN_OP(name) #name,
#include "kernels/ops.def"
#undef KILN_OP
};

using OpDefGetter = const OpDef& (*)();
constexpr std::array<OpDefGetter, kOpCount> kOpDefs = {
#define KILN_OP(name) &op_def_##name,
#include "kernels/ops.def"
#undef KILN_OP
};

}  // namespace

std::string_view op_name(OpKind op) { return kOpNames[static_cast<size_t>(op)]; }

std::optional<OpKind> op_from_name(std::string_view name) {
  for (size_t i = 0; i < kOpCount; ++i)
    if (kOpNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

const OpDef& op_def(OpKind op) { return kOpDefs[static_cast<size_t>(op)](); }

}  // namespace kiln

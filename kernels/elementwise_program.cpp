#include "kernels/elementwise_program.h"

#include <array>
#include <string>
#include <utility>

namespace kiln {
namespace {

constexpr std::array<std::pair<ChainOp, std::string_view>, 18> kNames = {{
    {ChainOp::add, "add"},         {ChainOp::sub, "sub"},   {ChainOp::mul, "mul"},   {ChainOp::div, "div"},
    {ChainOp::max, "max"},         {ChainOp::min, "min"},   {ChainOp::pow, "pow"},   {ChainOp::prelu, "prelu"},
    {ChainOp::relu, "relu"},       {ChainOp::sigmoid, "sigmoid"}, {ChainOp::tanh, "tanh"}, {ChainOp::erf, "erf"},
    {ChainOp::exp, "exp"},         {ChainOp::log, "log"},   {ChainOp::sqrt, "sqrt"}, {ChainOp::neg, "neg"},
    {ChainOp::abs, "abs"},         {ChainOp::reciprocal, "reciprocal"},
}};
static_assert(kNames.size() == kChainOpCount, "one name per ChainOp");

std::string known_names() {
  std::string s;
  for (const auto& [op, name] : kNames) (s += s.empty() ? "" : ", ") += name;
  return s;
}

}  // namespace

std::string_view chain_op_name(ChainOp op) {
  for (const auto& [o, name] : kNames)
    if (o == op) return name;
  return "?";
}

std::optional<ChainOp> chain_op_from_name(std::string_view name) {
  for (const auto& [op, n] : kNames)
    if (n == name) return op;
  return std::nullopt;
}

bool chain_op_is_binary(ChainOp op) { return op <= ChainOp::prelu; }

Result<ElementwiseProgram> elementwise_program_from_attrs(const Attrs& attrs, size_t inputs) {
  KILN_REQUIRE(inputs >= 1, invalid_argument, "ElementwiseChain needs input 0 (X)");
  KILN_ASSIGN(names, attrs.get_strings("ops"));
  KILN_ASSIGN(args, attrs.get_ints("args"));
  KILN_ASSIGN(scalars, attrs.get_floats("scalars"));
  KILN_REQUIRE(!names.empty(), invalid_argument, "attribute 'ops' is empty: the program needs at least one instruction");
  KILN_REQUIRE(args.size() == 2 * names.size(), invalid_argument, "attribute 'args' must hold two registers per instruction: ",
               names.size(), " ops need ", 2 * names.size(), " values, got ", args.size());
  ElementwiseProgram p;
  p.operands = static_cast<int>(inputs) - 1;
  p.scalars = std::move(scalars);
  for (size_t i = 0; i < names.size(); ++i) {
    const auto op = chain_op_from_name(names[i]);
    KILN_REQUIRE(op.has_value(), invalid_argument, "attribute 'ops': unknown op '", names[i], "' at instruction ", i,
                 " (known: ", known_names(), ")");
    const int defined = p.first_result() + static_cast<int>(i);  // registers 0 .. defined-1 exist here
    const int64_t a = args[2 * i], b = args[2 * i + 1];
    KILN_REQUIRE(a >= 0 && a < defined, invalid_argument, "attribute 'args': instruction ", i, " (", names[i],
                 ") reads register ", a, " but only registers 0..", defined - 1, " are defined before it (r0 = X, ",
                 p.operands, " inputs, ", p.scalars.size(), " scalars, then one per instruction)");
    if (chain_op_is_binary(*op)) {
      KILN_REQUIRE(b >= 0 && b < defined, invalid_argument, "attribute 'args': instruction ", i, " (", names[i],
                   ") reads register ", b, " but only registers 0..", defined - 1, " are defined before it (r0 = X, ",
                   p.operands, " inputs, ", p.scalars.size(), " scalars, then one per instruction)");
    } else {
      KILN_REQUIRE(b == -1, invalid_argument, "attribute 'args': instruction ", i, " (", names[i],
                   ") is unary, so its second register must be -1, got ", b);
    }
    p.code.push_back({*op, static_cast<int>(a), static_cast<int>(b)});
  }
  return p;
}

void elementwise_program_to_attrs(const ElementwiseProgram& program, Attrs& attrs) {
  std::vector<std::string> names;
  std::vector<int64_t> args;
  for (const ChainInstruction& in : program.code) {
    names.emplace_back(chain_op_name(in.op));
    args.push_back(in.a);
    args.push_back(chain_op_is_binary(in.op) ? in.b : -1);
  }
  attrs.set("ops", std::move(names));
  attrs.set("args", std::move(args));
  if (program.scalars.empty()) attrs.erase("scalars");
  else attrs.set("scalars", program.scalars);
}

}  // namespace kiln

// The program an ElementwiseChain node runs (kernels/reference/elementwise_chain.cpp): one meaning
// shared by the reference kernel, kiln's own CPU kernel and the fuse_elementwise_chain pass that
// writes it. Registers hold one float per output element:
//   r0 = X (input 0); r1..rm = inputs 1..m, each broadcast to X's shape; r(m+1)..r(m+s) = the
//   `scalars` attribute; then one register per instruction, in order. Y is the last one.
// Attributes:
//   ops      strings, one per instruction: an op name (chain_op_name: "add", "erf", ...)
//   args     ints, two per instruction: the registers it reads, a then b (b = -1 for a unary op);
//            an instruction reads only registers defined before it
//   scalars  floats (optional)
// Op names rather than numeric opcodes keep IR dumps readable and .kiln files valid when ops are
// added.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/core/attrs.h"

namespace kiln {

// Binary: add sub mul div max min pow prelu; the rest read a only.
enum class ChainOp : uint8_t { add, sub, mul, div, max, min, pow, prelu, relu, sigmoid, tanh, erf, exp, log, sqrt, neg, abs, reciprocal };
inline constexpr size_t kChainOpCount = static_cast<size_t>(ChainOp::reciprocal) + 1;

struct ChainInstruction {
  ChainOp op = ChainOp::add;
  int a = 0;
  int b = -1;  // -1 for a unary op
};

struct ElementwiseProgram {
  int operands = 0;            // m: the inputs after X
  std::vector<float> scalars;  // registers m+1 .. m+s
  std::vector<ChainInstruction> code;

  int first_scalar() const { return 1 + operands; }
  int first_result() const { return first_scalar() + static_cast<int>(scalars.size()); }
  int registers() const { return first_result() + static_cast<int>(code.size()); }
  int output_register() const { return registers() - 1; }
};

std::string_view chain_op_name(ChainOp op);
std::optional<ChainOp> chain_op_from_name(std::string_view name);
bool chain_op_is_binary(ChainOp op);

// Reads and validates the program of a node with `inputs` inputs (X and m = inputs - 1 operands):
// known op names, two registers per instruction, each defined before the instruction reading it,
// at least one instruction. Errors name the attribute and the instruction.
Result<ElementwiseProgram> elementwise_program_from_attrs(const Attrs& attrs, size_t inputs);
void elementwise_program_to_attrs(const ElementwiseProgram& program, Attrs& attrs);

// One instruction on one element, in float, computed as kiln's reference kernel of the ONNX op it
// stands for computes it (reference/binary.cpp, unary.cpp, clip_prelu.cpp): the definition every
// kernel must match. add sub mul div: a op b; max/min: NaN if either is NaN (Max/Min); pow: in
// double, as Pow; prelu: a < 0 ? b * a : a (PRelu; LeakyRelu with b = alpha); unary ops on a.
// Inline so that a kernel looping with a constant op compiles to that op alone.
inline float chain_op_apply(ChainOp op, float a, float b) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  switch (op) {
    case ChainOp::add: return a + b;
    case ChainOp::sub: return a - b;
    case ChainOp::mul: return a * b;
    case ChainOp::div: return a / b;
    case ChainOp::max: return std::isnan(a) || std::isnan(b) ? kNaN : (a < b ? b : a);
    case ChainOp::min: return std::isnan(a) || std::isnan(b) ? kNaN : (b < a ? b : a);
    case ChainOp::pow: return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    case ChainOp::prelu: return a < 0.0f ? b * a : a;
    case ChainOp::relu: return a < 0.0f ? 0.0f : a;
    case ChainOp::sigmoid: return a >= 0.0f ? 1.0f / (1.0f + std::exp(-a)) : std::exp(a) / (1.0f + std::exp(a));
    case ChainOp::tanh: return std::tanh(a);
    case ChainOp::erf: return std::erf(a);
    case ChainOp::exp: return std::exp(a);
    case ChainOp::log: return std::log(a);
    case ChainOp::sqrt: return std::sqrt(a);
    case ChainOp::neg: return -a;
    case ChainOp::abs: return std::fabs(a);
    case ChainOp::reciprocal: return 1.0f / a;
  }
  return kNaN;
}

}  // namespace kiln

// The contract every core op fulfils: an arity, a shape/type inference function and a
// reference kernel. Shape logic lives only in `infer`: the executor calls it with every input
// value known, allocates the outputs it describes, then calls `run`, so kernels never allocate.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/core/attrs.h"
#include "kernels/core/shape.h"
#include "kernels/core/status.h"
#include "kernels/core/tensor.h"

namespace kiln {

enum class OpKind : uint16_t {
#define KILN_OP(name) name,
#include "kernels/ops.def"
#undef KILN_OP
  count_
};
inline constexpr size_t kOpCount = static_cast<size_t>(OpKind::count_);

// Ops that passes create (ops.def's last section); ONNX models may not name them.
inline constexpr OpKind kFirstFusedOp = OpKind::DepthFirstConv;
inline bool op_is_fused(OpKind op) { return op >= kFirstFusedOp; }

std::string_view op_name(OpKind op);
std::optional<OpKind> op_from_name(std::string_view name);

// What shape inference knows about one value: its dtype and, when known, its rank and dims.
struct ValueType {
  DType dtype = DType::f32;
  bool rank_known = false;
  SymShape shape;  // meaningful only when rank_known

  static ValueType of(DType dt, SymShape s) { return {dt, true, std::move(s)}; }
  static ValueType unranked(DType dt) { return {dt, false, {}}; }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
};

struct InferContext {
  // One entry per node input; nullptr where an optional input is absent.
  std::vector<const ValueType*> inputs;
  // The value of each input when it is known (an initializer, a folded constant, or at run
  // time every input); nullptr otherwise. Data-dependent shapes (Reshape, Range, ...) read it.
  std::vector<const Tensor*> values;
  const Attrs* attrs = nullptr;
  // Filled by infer: one entry per node output.
  std::vector<ValueType> outputs;

  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  const ValueType& input(size_t i) const { return *inputs[i]; }
  const Tensor* value(size_t i) const { return i < values.size() ? values[i] : nullptr; }
};

struct RunContext {
  std::vector<const Tensor*> inputs;  // nullptr where an optional input is absent
  std::vector<Tensor*> outputs;       // allocated from infer's result, zero-filled
  const Attrs* attrs = nullptr;
  // The heavy reference kernels (Conv, Gemm, MatMul) share their independent outputs (planes, rows)
  // among this many threads; each output is summed in the same order whatever the count, so the
  // result is bit-identical to one thread's.
  int threads = 1;

  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  const Tensor& input(size_t i) const { return *inputs[i]; }
  Tensor& output(size_t i) const { return *outputs[i]; }
};

using InferFn = Status (*)(InferContext& ctx);
using RunFn = Status (*)(RunContext& ctx);

struct OpDef {
  int min_inputs = 1;
  int max_inputs = 1;   // -1: variadic
  int min_outputs = 1;
  int max_outputs = 1;
  InferFn infer = nullptr;
  RunFn run = nullptr;  // the reference kernel: plain, obviously correct, the oracle
};

const OpDef& op_def(OpKind op);

// Each op's file defines its op_def_<Name>(); op_table.cpp lists them in ops.def order.
#define KILN_OP(name) const OpDef& op_def_##name();
#include "kernels/ops.def"
#undef KILN_OP

}  // namespace kiln

// ElementwiseChain, float32 (made by the fuse_elementwise_chain pass, never imported): a chain of
// elementwise ops over one tensor, run as one program so that a fast kernel reads each input once
// and writes the output once instead of one pass over memory per op.
//   inputs: 0 X; 1..m operands, each unidirectionally broadcastable to X's shape (scalar, a
//           trailing vector, per-channel, full shape...)
//   attributes: ops, args, scalars: the program (kernels/elementwise_program.h)
//   Y has X's shape: Y[i] = the last register after running the program on element i.
#include "kernels/elementwise_program.h"
#include "kernels/reference/common.h"

namespace kiln {
namespace {

// Operand `i` broadcasts to X without changing the output's shape: right-aligned, each of its
// dims is 1 or X's (unknown dims are accepted; the executor checks them when they are known).
Status require_broadcasts_to_x(const InferContext& ctx, size_t i) {
  const ValueType& x = ctx.input(0);
  const ValueType& t = ctx.input(i);
  if (!x.rank_known || !t.rank_known) return Status::ok();
  bool fits = t.rank() <= x.rank();
  for (size_t d = 0; fits && d < t.shape.size(); ++d) {
    const Dim& od = t.shape[d];
    const Dim& xd = x.shape[x.shape.size() - t.shape.size() + d];
    fits = !od.known() || od.value == 1 || !xd.known() || od.value == xd.value;
  }
  KILN_REQUIRE(fits, shape_mismatch, "input ", i, " has shape ", sym_shape_to_string(t.shape),
               ", which does not broadcast to X's shape ", sym_shape_to_string(x.shape),
               " (operands may not change the output's shape)");
  return Status::ok();
}

Status infer_elementwise_chain(InferContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    KILN_REQUIRE(ctx.has_input(i), invalid_argument, "input ", i, " is missing");
    KILN_TRY(ref::require_dtype(ctx, i, {DType::f32}));
  }
  KILN_TRY(elementwise_program_from_attrs(*ctx.attrs, ctx.num_inputs()).status());
  for (size_t i = 1; i < ctx.num_inputs(); ++i) KILN_TRY(require_broadcasts_to_x(ctx, i));
  return ref::infer_same_as_input0(ctx);
}

Status run_elementwise_chain(RunContext& ctx) {
  KILN_ASSIGN(program, elementwise_program_from_attrs(*ctx.attrs, ctx.inputs.size()));
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  // Each operand spread to X's shape, so that element i of every register is at index i.
  std::vector<std::vector<float>> operands;
  for (int k = 1; k <= program.operands; ++k) {
    const Tensor& in = ctx.input(static_cast<size_t>(k));
    std::vector<float> spread(static_cast<size_t>(x.numel()));
    const std::vector<int64_t> strides[1] = {ref::broadcast_strides(in.shape(), x.shape())};
    const float* src = in.data<float>();
    ref::for_each_broadcast(x.shape(), strides, [&](int64_t i, const int64_t* off) { spread[static_cast<size_t>(i)] = src[off[0]]; });
    operands.push_back(std::move(spread));
  }
  std::vector<float> reg(static_cast<size_t>(program.registers()));
  std::copy(program.scalars.begin(), program.scalars.end(), reg.begin() + program.first_scalar());
  const float* xs = x.data<float>();
  float* dst = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    reg[0] = xs[i];
    for (size_t k = 0; k < operands.size(); ++k) reg[k + 1] = operands[k][static_cast<size_t>(i)];
    size_t r = static_cast<size_t>(program.first_result());
    for (const ChainInstruction& in : program.code)
      reg[r++] = chain_op_apply(in.op, reg[static_cast<size_t>(in.a)], in.b < 0 ? 0.0f : reg[static_cast<size_t>(in.b)]);
    dst[i] = reg.back();
  }
  return Status::ok();
}

}  // namespace

// Inputs: X, then any number of operands.
const OpDef& op_def_ElementwiseChain() {
  static const OpDef def{1, -1, 1, 1, infer_elementwise_chain, run_elementwise_chain};
  return def;
}

}  // namespace kiln

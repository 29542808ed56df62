// ElementwiseChain (made by fuse_elementwise_chain) on elementwise_chain.cu: the program is read
// once at load into the launch parameters, each operand's broadcast resolved into strides over
// the output's dims, collapsed as far as every operand allows (broadcast_shape.h).
#include "kernels/cuda/broadcast_shape.h"
#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/elementwise_program.h"

namespace kiln::cuda {
namespace {

// elementwise_chain.cu numbers the ops in ChainOp's order.
static_assert(static_cast<int>(ChainOp::add) == 0 && static_cast<int>(ChainOp::pow) == 6 && static_cast<int>(ChainOp::erf) == 11 &&
              static_cast<int>(ChainOp::reciprocal) == 17 && kChainOpCount == 18);

Result<DeviceChain> device_chain(const KernelBuild& b) {
  KILN_ASSIGN(program, elementwise_program_from_attrs(*b.attrs, b.inputs.size()));
  KILN_REQUIRE(program.operands <= kMaxChainOperands, unsupported, "needs at most ", kMaxChainOperands, " operands, got ",
               program.operands);
  KILN_REQUIRE(program.registers() <= kMaxChainRegisters && static_cast<int>(program.code.size()) <= kMaxChainCode, unsupported,
               "needs at most ", kMaxChainCode, " instructions and ", kMaxChainRegisters, " registers");
  const Shape& out = b.outputs[0].shape;
  KILN_REQUIRE(out.size() <= static_cast<size_t>(kMaxBroadcastRank), unsupported, "needs rank <= ", kMaxBroadcastRank);
  KILN_REQUIRE(b.inputs[0].shape == out, unsupported, "needs X of the output's shape");
  DeviceChain c;
  c.operands = program.operands;
  c.first_scalar = program.first_scalar();
  c.first_result = program.first_result();
  c.code_size = static_cast<int>(program.code.size());
  for (size_t s = 0; s < program.scalars.size(); ++s) c.scalars[s] = program.scalars[s];
  for (size_t j = 0; j < program.code.size(); ++j) {
    c.op[j] = static_cast<uint8_t>(program.code[j].op);
    c.a[j] = static_cast<int8_t>(program.code[j].a);
    c.b[j] = static_cast<int8_t>(program.code[j].b);
  }
  c.rank = static_cast<int>(out.size());
  for (size_t d = 0; d < out.size(); ++d) c.dims[d] = out[d];
  for (int k = 0; k < c.operands; ++k) {
    const Shape& operand = b.inputs[static_cast<size_t>(k) + 1].shape;
    KILN_REQUIRE(operand.size() <= out.size(), unsupported, "operand ", k + 1, " has a higher rank than X");
    for (size_t d = 0; d < operand.size(); ++d) {
      const int64_t dim = operand[d], x_dim = out[out.size() - operand.size() + d];
      KILN_REQUIRE(dim == 1 || dim == x_dim, unsupported, "operand ", k + 1, " ", shape_to_string(operand), " does not broadcast to ",
                   shape_to_string(out));
    }
    broadcast_strides(operand, out, c.strides[k]);
  }
  // X and Y are contiguous over the output's dims, so only the operands limit the merging.
  int64_t* strides[kMaxChainOperands];
  for (int k = 0; k < c.operands; ++k) strides[k] = c.strides[k];
  collapse_dims(c.rank, c.dims, strides, c.operands);
  return c;
}

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::ElementwiseChain}, "ElementwiseChain")) return no;
  if (auto why = require_one_float_type(b)) return why;
  if (b.outputs.size() != 1) return std::string("needs one output");
  for (const ValueDesc& in : b.inputs)
    if (!in.present) return std::string("needs every input present");
  auto chain = device_chain(b);
  if (!chain) return chain.error().message;
  return std::nullopt;
}

class ChainKernel final : public CudaKernel {
 public:
  ChainKernel(const CudaContext& context, FloatType type, DeviceChain chain, int64_t n)
      : context_(context), type_(type), chain_(chain), n_(n) {}
  // Y may take X's buffer: each element of X is read before its own output is written.
  int in_place_input() const override { return 0; }
  Status run(const CudaArgs& args) override {
    const void* operands[kMaxChainOperands] = {};
    for (int k = 0; k < chain_.operands; ++k) operands[k] = args.inputs[static_cast<size_t>(k) + 1];
    return cuda_status(launch_elementwise_chain(type_, chain_, args.inputs[0], operands, args.outputs[0], n_, context_.stream),
                       "launch_elementwise_chain");
  }

 private:
  const CudaContext& context_;
  FloatType type_;
  DeviceChain chain_;
  int64_t n_;
};

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  KILN_ASSIGN(chain, device_chain(b));
  return std::unique_ptr<CudaKernel>(
      std::make_unique<ChainKernel>(context, *float_type_of(b.outputs[0].dtype), chain, shape_numel(b.outputs[0].shape)));
}

}  // namespace

const CudaKernelImpl kCudaElementwiseChain = {"cuda.elementwise_chain", supports, create};

}  // namespace kiln::cuda

// MaxPool / AveragePool (2-D, NCHW) and GlobalAveragePool / GlobalMaxPool on the kernels of
// pool.cu. Window geometry (auto_pad, ceil_mode) is resolved at load by the reference's window
// functions, so both backends read the attributes the same way.
#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/pool_geometry.h"

namespace kiln::cuda {
namespace {

Result<Pool2d> pool_geometry(const KernelBuild& b) {
  return pool2d_geometry(b.op, *b.attrs, b.inputs[0].shape, b.outputs[0].shape);
}

std::optional<std::string> supports_pool(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::MaxPool, OpKind::AveragePool}, "MaxPool, AveragePool")) return no;
  if (auto why = require_one_float_type(b)) return why;
  if (b.outputs.size() > 1 && b.outputs[1].present) return std::string("does not compute MaxPool's Indices output");
  auto p = pool_geometry(b);
  if (!p) return p.error().message;
  return std::nullopt;
}

class PoolKernel final : public CudaKernel {
 public:
  PoolKernel(const CudaContext& context, FloatType type, Pool2d p) : context_(context), type_(type), p_(p) {}
  Status run(const CudaArgs& args) override {
    return cuda_status(launch_pool2d(type_, p_, args.inputs[0], args.outputs[0], context_.stream), "launch_pool2d");
  }

 private:
  const CudaContext& context_;
  FloatType type_;
  Pool2d p_;
};

Result<std::unique_ptr<CudaKernel>> create_pool(const KernelBuild& b, const CudaContext& context) {
  KILN_ASSIGN(p, pool_geometry(b));
  return std::unique_ptr<CudaKernel>(std::make_unique<PoolKernel>(context, *float_type_of(b.outputs[0].dtype), p));
}

std::optional<std::string> supports_global(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::GlobalAveragePool, OpKind::GlobalMaxPool}, "GlobalAveragePool, GlobalMaxPool")) return no;
  if (auto why = require_one_float_type(b)) return why;
  if (b.inputs[0].shape.size() < 3) return std::string("needs an input of rank >= 3");
  return std::nullopt;
}

class GlobalPoolKernel final : public CudaKernel {
 public:
  GlobalPoolKernel(const CudaContext& context, FloatType type, bool max, int64_t rows, int64_t plane)
      : context_(context), type_(type), max_(max), rows_(rows), plane_(plane) {}
  Status run(const CudaArgs& args) override {
    return cuda_status(launch_global_pool(type_, max_, args.inputs[0], args.outputs[0], rows_, plane_, context_.stream),
                       "launch_global_pool");
  }

 private:
  const CudaContext& context_;
  FloatType type_;
  bool max_;
  int64_t rows_, plane_;
};

Result<std::unique_ptr<CudaKernel>> create_global(const KernelBuild& b, const CudaContext& context) {
  const Shape& x = b.inputs[0].shape;
  const int64_t rows = x[0] * x[1];
  return std::unique_ptr<CudaKernel>(std::make_unique<GlobalPoolKernel>(context, *float_type_of(b.outputs[0].dtype),
                                                                        b.op == OpKind::GlobalMaxPool, rows,
                                                                        shape_numel(x) / std::max<int64_t>(rows, 1)));
}

}  // namespace

const CudaKernelImpl kCudaPool = {"cuda.pool", supports_pool, create_pool};
const CudaKernelImpl kCudaGlobalPool = {"cuda.global_pool", supports_global, create_global};

}  // namespace kiln::cuda

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

// ReduceMean/ReduceMax over trailing axes only (a global pool over them): rows and plane, or why not.
Result<std::pair<int64_t, int64_t>> reduce_rows(const KernelBuild& b) {
  const Shape& x = b.inputs[0].shape;
  const auto rank = static_cast<int64_t>(x.size());
  KILN_REQUIRE(b.inputs.size() > 1 && b.inputs[1].present && b.inputs[1].constant && b.inputs[1].constant->numel() > 0,
               unsupported, "needs constant, non-empty axes");
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  const Tensor& axes = *b.inputs[1].constant;
  for (int64_t i = 0; i < axes.numel(); ++i) {
    int64_t a = axes.value_as_int(i);
    a = a < 0 ? a + rank : a;
    KILN_REQUIRE(a >= 0 && a < rank, invalid_argument, "axis ", axes.value_as_int(i), " is out of range for rank ", rank);
    reduced[static_cast<size_t>(a)] = true;
  }
  int64_t first = rank;
  while (first > 0 && reduced[static_cast<size_t>(first - 1)]) --first;
  for (int64_t d = 0; d < first; ++d)
    KILN_REQUIRE(!reduced[static_cast<size_t>(d)], unsupported, "reduces only trailing axes (a global pool over them)");
  int64_t rows = 1, plane = 1;
  for (int64_t d = 0; d < rank; ++d) (d < first ? rows : plane) *= x[static_cast<size_t>(d)];
  return std::pair{rows, plane};
}

std::optional<std::string> supports_reduce(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::ReduceMean, OpKind::ReduceMax}, "ReduceMean, ReduceMax")) return no;
  // The axes input is int64: only the data and the output need one float type.
  if (!float_type_of(b.inputs[0].dtype) || b.inputs[0].dtype != b.outputs[0].dtype)
    return std::string("needs float32, float16 or bfloat16 data and output");
  auto rows = reduce_rows(b);
  if (!rows) return rows.error().message;
  return std::nullopt;
}

Result<std::unique_ptr<CudaKernel>> create_reduce(const KernelBuild& b, const CudaContext& context) {
  KILN_ASSIGN(rows, reduce_rows(b));
  return std::unique_ptr<CudaKernel>(std::make_unique<GlobalPoolKernel>(context, *float_type_of(b.outputs[0].dtype),
                                                                        b.op == OpKind::ReduceMax, rows.first, rows.second));
}

}  // namespace

const CudaKernelImpl kCudaReduce = {"cuda.reduce", supports_reduce, create_reduce};
const CudaKernelImpl kCudaPool = {"cuda.pool", supports_pool, create_pool};
const CudaKernelImpl kCudaGlobalPool = {"cuda.global_pool", supports_global, create_global};

}  // namespace kiln::cuda

// Ops that only move bytes: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, inference
// Dropout), free when the engine lets the output take the input's buffer and one device copy when
// it cannot; and Concat, one 2-D strided copy per input into its slice of the output.
#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"

namespace kiln::cuda {
namespace {

std::optional<std::string> supports_view(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Reshape, OpKind::Flatten, OpKind::Squeeze, OpKind::Unsqueeze, OpKind::Identity, OpKind::Dropout},
                        "Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout"))
    return no;
  if (b.outputs.size() > 1 && b.outputs[1].present) return std::string("does not compute Dropout's mask");
  if (device_bytes(b.inputs[0]) != device_bytes(b.outputs[0])) return std::string("needs as many output bytes as input bytes");
  return std::nullopt;
}

class ViewKernel final : public CudaKernel {
 public:
  ViewKernel(const CudaContext& context, size_t bytes) : context_(context), bytes_(bytes) {}
  int in_place_input() const override { return 0; }
  Status run(const CudaArgs& args) override {
    if (args.inputs[0] == args.outputs[0] || bytes_ == 0) return Status::ok();
    KILN_CUDA_TRY(cudaMemcpyAsync(args.outputs[0], args.inputs[0], bytes_, cudaMemcpyDeviceToDevice, context_.stream));
    return Status::ok();
  }

 private:
  const CudaContext& context_;
  size_t bytes_;
};

Result<std::unique_ptr<CudaKernel>> create_view(const KernelBuild& b, const CudaContext& context) {
  return std::unique_ptr<CudaKernel>(std::make_unique<ViewKernel>(context, device_bytes(b.outputs[0])));
}

std::optional<std::string> supports_concat(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Concat}, "Concat")) return no;
  for (const ValueDesc& v : b.inputs)
    if (!v.present || v.dtype != b.outputs[0].dtype) return std::string("needs every input present and of the output's dtype");
  auto axis = b.attrs->get_int("axis", 0);
  if (!axis) return axis.error().message;
  return std::nullopt;
}

class ConcatKernel final : public CudaKernel {
 public:
  ConcatKernel(const CudaContext& context, int64_t outer, std::vector<size_t> chunk_bytes, size_t row_bytes)
      : context_(context), outer_(outer), chunk_bytes_(std::move(chunk_bytes)), row_bytes_(row_bytes) {}
  Status run(const CudaArgs& args) override {
    size_t offset = 0;
    for (size_t i = 0; i < chunk_bytes_.size(); ++i) {
      if (chunk_bytes_[i] && outer_)
        KILN_CUDA_TRY(cudaMemcpy2DAsync(static_cast<char*>(args.outputs[0]) + offset, row_bytes_, args.inputs[i], chunk_bytes_[i],
                                        chunk_bytes_[i], static_cast<size_t>(outer_), cudaMemcpyDeviceToDevice, context_.stream));
      offset += chunk_bytes_[i];
    }
    return Status::ok();
  }

 private:
  const CudaContext& context_;
  int64_t outer_;
  std::vector<size_t> chunk_bytes_;  // per input: its axis extent x inner x element size
  size_t row_bytes_;                 // the output's axis extent x inner x element size
};

Result<std::unique_ptr<CudaKernel>> create_concat(const KernelBuild& b, const CudaContext& context) {
  const Shape& y = b.outputs[0].shape;
  const auto rank = static_cast<int64_t>(y.size());
  KILN_ASSIGN(axis_attr, b.attrs->get_int("axis", 0));
  KILN_REQUIRE(axis_attr >= -rank && axis_attr < rank, invalid_argument, "axis ", axis_attr, " is out of range for rank ", rank);
  const auto axis = static_cast<size_t>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= y[d];
  for (size_t d = axis + 1; d < y.size(); ++d) inner *= y[d];
  const size_t element = dtype_size(b.outputs[0].dtype);
  std::vector<size_t> chunks;
  for (const ValueDesc& v : b.inputs) chunks.push_back(static_cast<size_t>(v.shape[axis] * inner) * element);
  return std::unique_ptr<CudaKernel>(
      std::make_unique<ConcatKernel>(context, outer, std::move(chunks), static_cast<size_t>(y[axis] * inner) * element));
}

}  // namespace

const CudaKernelImpl kCudaView = {"cuda.view", supports_view, create_view};
const CudaKernelImpl kCudaConcat = {"cuda.concat", supports_concat, create_concat};

}  // namespace kiln::cuda

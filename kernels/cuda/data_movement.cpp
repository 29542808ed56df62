// Ops that only move bytes: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, inference
// Dropout), free when the engine lets the output take the input's buffer and one device copy when
// it cannot; Concat, one 2-D strided copy per input into its slice of the output; Transpose and
// Slice, one strided read each (strided_view.h, copy.cu), any dtype of 1 to 8 bytes.
#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/reference/slice.h"

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

Result<std::vector<int64_t>> transpose_perm(const KernelBuild& b) {
  const auto rank = static_cast<int64_t>(b.inputs[0].shape.size());
  std::vector<int64_t> reversed;
  for (int64_t d = rank - 1; d >= 0; --d) reversed.push_back(d);
  KILN_ASSIGN(perm, b.attrs->get_ints("perm", reversed));
  KILN_REQUIRE(static_cast<int64_t>(perm.size()) == rank, invalid_argument, "perm has ", perm.size(), " entries for rank ", rank);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    KILN_REQUIRE(p >= 0 && p < rank && !seen[static_cast<size_t>(p)], invalid_argument, "perm is not a permutation of 0..", rank - 1);
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

Result<StridedView> strided_view_of(const KernelBuild& b) {
  KILN_REQUIRE(b.inputs[0].shape.size() <= static_cast<size_t>(kMaxViewRank), unsupported, "needs rank <= ", kMaxViewRank);
  KILN_REQUIRE(b.inputs[0].dtype == b.outputs[0].dtype, unsupported, "needs the output's dtype on input 0");
  if (b.op == OpKind::Transpose) {
    KILN_ASSIGN(perm, transpose_perm(b));
    return transpose_view(b.inputs[0].shape, perm);
  }
  std::vector<const Tensor*> params;
  for (size_t i = 1; i < b.inputs.size(); ++i) {
    KILN_REQUIRE(!b.inputs[i].present || b.inputs[i].constant, unsupported, "needs constant starts, ends, axes and steps");
    params.push_back(b.inputs[i].present ? b.inputs[i].constant : nullptr);
  }
  KILN_ASSIGN(axes, ref::slice_axes(b.inputs[0].shape, params));
  std::vector<SlicedAxis> sliced;
  for (const ref::SliceAxis& a : axes) sliced.push_back({a.axis, a.start, a.step, a.len});
  return slice_view(b.inputs[0].shape, sliced);
}

std::optional<std::string> supports_strided(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Transpose, OpKind::Slice}, "Transpose, Slice")) return no;
  const size_t element = dtype_size(b.outputs[0].dtype);
  if (element != 1 && element != 2 && element != 4 && element != 8) return std::string("needs 1, 2, 4 or 8-byte elements");
  auto view = strided_view_of(b);
  if (!view) return view.error().message;
  return std::nullopt;
}

class StridedCopyKernel final : public CudaKernel {
 public:
  StridedCopyKernel(const CudaContext& context, int element_bytes, StridedView view)
      : context_(context), element_bytes_(element_bytes), view_(view) {}
  Status run(const CudaArgs& args) override {
    return cuda_status(launch_strided_copy(element_bytes_, args.inputs[0], args.outputs[0], view_, context_.stream),
                       "launch_strided_copy");
  }

 private:
  const CudaContext& context_;
  int element_bytes_;
  StridedView view_;
};

Result<std::unique_ptr<CudaKernel>> create_strided(const KernelBuild& b, const CudaContext& context) {
  KILN_ASSIGN(view, strided_view_of(b));
  return std::unique_ptr<CudaKernel>(
      std::make_unique<StridedCopyKernel>(context, static_cast<int>(dtype_size(b.outputs[0].dtype)), view));
}

}  // namespace

const CudaKernelImpl kCudaStridedCopy = {"cuda.strided_copy", supports_strided, create_strided};
const CudaKernelImpl kCudaView = {"cuda.view", supports_view, create_view};
const CudaKernelImpl kCudaConcat = {"cuda.concat", supports_concat, create_concat};

}  // namespace kiln::cuda

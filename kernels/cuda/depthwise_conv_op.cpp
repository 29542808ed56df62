// Depthwise Conv 2-D (group = input channels = output channels) on depthwise_conv.cu, ahead of
// cuDNN in the registry: bias, residual and any post-op activation in the same pass. Other
// convolutions, and windows whose input tile would not fit a block's shared memory, go to cuDNN.
#include "kernels/cuda/cuda_kernel_support.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/reference/window.h"

namespace kiln::cuda {
namespace {

constexpr int64_t kMaxSharedBytes = 48 * 1024;  // without opting in to more per block
constexpr int64_t kMaxGridDim = 65535;          // blocks along y (channels) and z (batch)

Result<Depthwise2d> depthwise_geometry(const KernelBuild& b) {
  const Shape& x = b.inputs[0].shape;
  const Shape& w = b.inputs[1].shape;
  const Shape& y = b.outputs[0].shape;
  KILN_REQUIRE(x.size() == 4 && w.size() == 4 && y.size() == 4, unsupported, "needs a 2-D convolution (NCHW input)");
  KILN_ASSIGN(group, b.attrs->get_int("group", 1));
  KILN_REQUIRE(group > 1 && group == x[1] && y[1] == x[1] && w[0] == x[1] && w[1] == 1, unsupported,
               "needs a depthwise convolution (group = input channels = output channels)");
  KILN_REQUIRE(x[0] <= kMaxGridDim && x[1] <= kMaxGridDim, unsupported, "needs batch and channels <= ", kMaxGridDim);
  KILN_ASSIGN(wa, ref::read_window_attrs(*b.attrs, 2, false, false));
  Depthwise2d p;
  p.batch = x[0];
  p.channels = x[1];
  int pads[2] = {0, 0};
  for (size_t d = 0; d < 2; ++d) {
    KILN_ASSIGN(dim, ref::window_dim(wa, d, x[d + 2], w[d + 2]));
    KILN_REQUIRE(dim.out == y[d + 2], internal, "output dim ", d, " is ", y[d + 2], ", expected ", dim.out);
    KILN_REQUIRE(x[d + 2] < (int64_t{1} << 24) && w[d + 2] <= 64, unsupported, "needs planes below 2^24 and windows up to 64");
    pads[d] = static_cast<int>(dim.pad_begin);
  }
  auto i = [](int64_t v) { return static_cast<int>(v); };
  p.in_h = i(x[2]);
  p.in_w = i(x[3]);
  p.out_h = i(y[2]);
  p.out_w = i(y[3]);
  p.kernel_h = i(w[2]);
  p.kernel_w = i(w[3]);
  p.stride_h = i(wa.strides[0]);
  p.stride_w = i(wa.strides[1]);
  p.dilation_h = i(wa.dilations[0]);
  p.dilation_w = i(wa.dilations[1]);
  p.pad_top = pads[0];
  p.pad_left = pads[1];
  if (p.out_h > 0 && p.out_w > 0) choose_depthwise_tiles(p);
  KILN_REQUIRE(p.shared_bytes() <= kMaxSharedBytes, unsupported, "needs an input tile within ", kMaxSharedBytes / 1024,
               " KiB of shared memory (stride and window too large)");
  return p;
}

std::optional<std::string> supports(const KernelBuild& b) {
  if (auto no = handles(b, {OpKind::Conv}, "Conv")) return no;
  if (auto why = require_one_float_type(b)) return why;
  if (auto why = require_plain_node_precision(b)) return why;
  if (!b.inputs[1].constant) return std::string("needs constant weights");
  auto post = post_ops_from_attrs(*b.attrs);
  if (!post) return post.error().message;
  auto p = depthwise_geometry(b);
  if (!p) return p.error().message;
  return std::nullopt;
}

class DepthwiseConvKernel final : public CudaKernel {
 public:
  DepthwiseConvKernel(const CudaContext& context, FloatType type, Depthwise2d p, ActivationParams act, bool bias, bool residual)
      : context_(context), type_(type), p_(p), act_(act), bias_(bias), residual_(residual) {}
  // y may take the residual's buffer: each output element reads its own residual element first.
  int in_place_input() const override { return residual_ ? 3 : -1; }
  Status run(const CudaArgs& args) override {
    return cuda_status(launch_depthwise_conv(type_, p_, args.inputs[0], args.inputs[1], bias_ ? args.inputs[2] : nullptr,
                                             residual_ ? args.inputs[3] : nullptr, args.outputs[0], act_, context_.stream),
                       "launch_depthwise_conv");
  }

 private:
  const CudaContext& context_;
  FloatType type_;
  Depthwise2d p_;
  ActivationParams act_;
  bool bias_, residual_;
};

Result<std::unique_ptr<CudaKernel>> create(const KernelBuild& b, const CudaContext& context) {
  KILN_ASSIGN(p, depthwise_geometry(b));
  KILN_ASSIGN(post, post_ops_from_attrs(*b.attrs));
  const bool bias = b.inputs.size() > 2 && b.inputs[2].present;
  const bool residual = b.inputs.size() > 3 && b.inputs[3].present;
  return std::unique_ptr<CudaKernel>(std::make_unique<DepthwiseConvKernel>(context, *float_type_of(b.outputs[0].dtype), p,
                                                                           device_activation(post), bias, residual));
}

}  // namespace

const CudaKernelImpl kCudaDepthwiseConv = {"cuda.depthwise_conv", supports, create};

}  // namespace kiln::cuda

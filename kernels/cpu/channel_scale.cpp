// Mul of a float32 [N, C, H, W] activation by a per-image, per-channel scale [N, C, 1, 1]
// (EfficientNet's squeeze-excite where the depth-first fusion does not take it). oneDNN 2.6's
// binary broadcasts a [1, C, 1, 1] source fast but runs [N, C, 1, 1] with N > 1 on its reference
// path when the activation is NHWC: one such Mul took 80 ms of EfficientNet-B0's 260 at batch 8
// (AVX2). Here it is one streaming pass, images and pixel ranges split over the threads, in the
// activation's own order (NHWC or plain NCHW); in place where the activation dies here.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/pixel_order.h"

namespace kiln {
namespace {

// The input index of the activation (the other is the scale), or -1 when the node is not this form.
int activation_input(const KernelBuild& b) {
  if (b.op != OpKind::Mul || b.inputs.size() != 2 || b.outputs.size() != 1) return -1;
  const Shape& out = b.outputs[0].shape;
  if (out.size() != 4 || out[0] < 2 || b.outputs[0].dtype != DType::f32) return -1;
  for (int x = 0; x < 2; ++x) {
    const ValueDesc& a = b.inputs[static_cast<size_t>(x)];
    const ValueDesc& s = b.inputs[static_cast<size_t>(1 - x)];
    if (!a.present || !s.present || a.shape != out || a.dtype != DType::f32 || s.dtype != DType::f32) continue;
    // The scale's elements where plain puts them: plain, NHWC, or the SE conv's channel blocks.
    if (s.shape != Shape{out[0], out[1], 1, 1} || cpu::channel_block(s) == 0) continue;
    if (a.layout.plain() || cpu::pixel_order(a) == cpu::PixelOrder::nhwc) return x;
  }
  return -1;
}

class ChannelScaleKernel final : public Kernel {
 public:
  ChannelScaleKernel(const KernelBuild& b, int x) : x_(x), threads_(std::max(1, b.threads)) {
    const Shape& s = b.outputs[0].shape;
    n_ = s[0], c_ = s[1], hw_ = s[2] * s[3];
    nhwc_ = !b.inputs[static_cast<size_t>(x)].layout.plain();
    layout_ = nhwc_ ? cpu::nhwc_layout(s, threads_) : Layout{};
  }
  std::vector<Layout> output_layouts() const override { return {layout_}; }
  int in_place_input() const override { return x_; }

  Status run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[static_cast<size_t>(x_)]);
    const auto* s = static_cast<const float*>(args.inputs[static_cast<size_t>(1 - x_)]);
    auto* y = static_cast<float*>(args.outputs[0]);
    // Work items: (image, block of pixels) for NHWC, (image, channel) planes for NCHW.
    constexpr int64_t kPixelsPerItem = 256;
    const int64_t blocks = nhwc_ ? (hw_ + kPixelsPerItem - 1) / kPixelsPerItem : c_;
    const int64_t items = n_ * blocks;
#pragma omp parallel for num_threads(threads_) schedule(static) if (items * hw_ * c_ / blocks > 16384)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t n = item / blocks, block = item % blocks;
      const float* scale = s + n * c_;
      if (nhwc_) {
        const int64_t p0 = block * kPixelsPerItem, p1 = std::min(hw_, p0 + kPixelsPerItem);
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t at = (n * hw_ + p) * c_;
          for (int64_t c = 0; c < c_; ++c) y[at + c] = x[at + c] * scale[c];
        }
      } else {
        const int64_t at = (n * c_ + block) * hw_;
        const float k = scale[block];
        for (int64_t p = 0; p < hw_; ++p) y[at + p] = x[at + p] * k;
      }
    }
    return Status::ok();
  }

 private:
  int x_;
  int threads_;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  bool nhwc_ = false;
  Layout layout_;
};

std::optional<std::string> channel_scale_supports(const KernelBuild& b) {
  if (activation_input(b) < 0)
    return "handles Mul of a float32 [N>1, C, H, W] (NHWC or plain) by an [N, C, 1, 1] scale laid out as plain only";
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> channel_scale_create(const KernelBuild& b) {
  const int x = activation_input(b);
  if (x < 0) return make_error(ErrorCode::unsupported, *channel_scale_supports(b));
  return std::unique_ptr<Kernel>(std::make_unique<ChannelScaleKernel>(b, x));
}

}  // namespace

const KernelImpl kCpuChannelScale{"cpu.channel_scale", channel_scale_supports, channel_scale_create};

}  // namespace kiln

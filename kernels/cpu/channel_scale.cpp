// Mul of a float32 [N, C, H, W] activation by a per-image, per-channel scale [N, C, 1, 1]
// (EfficientNet's squeeze-excite where the depth-first fusion does not take it). oneDNN 2.6's
// binary broadcasts a [1, C, 1, 1] source fast but runs [N, C, 1, 1] with N > 1 on its reference
// path when the activation is NHWC: one such Mul took 80 ms of EfficientNet-B0's 260 at batch 8
// (AVX2). Here it is one streaming pass, images and pixel ranges split over the threads, in the
// activation's own order (NHWC or plain NCHW); in place where the activation dies here.
// In bf16 plans the activation is a bf16 depthwise conv's bfloat16 NHWC and the scale a bf16 conv's
// bfloat16 [N, C, 1, 1]: read and written as they are (oneDNN's binary took 1.0 ms for EfficientNet-B0's
// first one at batch 8, one thread; bfloat16 out, as oneDNN's, rounded to nearest even).
#include <omp.h>

#include <algorithm>

#include "kernels/core/half.h"

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/onednn/onednn_common.h"

namespace kiln {
namespace {

// Whether a [N, C, 1, 1] value's elements sit where plain puts them (plain, NHWC or the SE conv's channel
// blocks): float32, or bfloat16 in plain order (what a bf16 conv writes for a 1x1 image: acdb).
bool plain_ordered_f32(const ValueDesc& s) { return cpu::channel_block(s) != 0; }
bool plain_ordered_bf16(const ValueDesc& s) {
  if (!onednn::is_onednn(s) || onednn::check_value(s, "value")) return false;
  const auto d = onednn::value_desc(s);
  return d == onednn::retyped(onednn::plain_desc(s.shape), dnnl::memory::data_type::bf16) || cpu::is_nhwc_bf16(s);
}

// The input index of the activation (the other is the scale), or -1 when the node is not this form.
int activation_input(const KernelBuild& b) {
  if (b.op != OpKind::Mul || b.inputs.size() != 2 || b.outputs.size() != 1) return -1;
  const Shape& out = b.outputs[0].shape;
  if (out.size() != 4 || out[0] < 2 || b.outputs[0].dtype != DType::f32) return -1;
  for (int x = 0; x < 2; ++x) {
    const ValueDesc& a = b.inputs[static_cast<size_t>(x)];
    const ValueDesc& s = b.inputs[static_cast<size_t>(1 - x)];
    if (!a.present || !s.present || a.shape != out || a.dtype != DType::f32 || s.dtype != DType::f32) continue;
    if (s.shape != Shape{out[0], out[1], 1, 1} || (!plain_ordered_f32(s) && !plain_ordered_bf16(s))) continue;
    if (a.layout.plain() || cpu::pixel_order(a) == cpu::PixelOrder::nhwc || cpu::is_nhwc_bf16(a)) return x;
  }
  return -1;
}

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) {
  BFloat16 h;
  h.bits = p[i];
  return static_cast<float>(h);
}
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, int64_t i, float v) { p[i] = BFloat16::from_float(v); }

// y = x * scale per channel over `count` elements of one image's NHWC pixels (c channels a pixel).
template <typename X, typename S>
void scale_pixels(const X* x, const S* scale, X* y, int64_t count, int64_t c) {
  for (int64_t e = 0; e < count; e += c)
    for (int64_t k = 0; k < c; ++k) store(y, e + k, load(x, e + k) * load(scale, k));
}

class ChannelScaleKernel final : public Kernel {
 public:
  ChannelScaleKernel(const KernelBuild& b, int x) : x_(x), threads_(std::max(1, b.threads)) {
    const Shape& s = b.outputs[0].shape;
    n_ = s[0], c_ = s[1], hw_ = s[2] * s[3];
    const ValueDesc& a = b.inputs[static_cast<size_t>(x)];
    nhwc_ = !a.layout.plain();
    bf16_ = cpu::is_nhwc_bf16(a);
    bf16_scale_ = !plain_ordered_f32(b.inputs[static_cast<size_t>(1 - x)]);
    layout_ = bf16_ ? cpu::nhwc_bf16_layout(s, threads_) : nhwc_ ? cpu::nhwc_layout(s, threads_) : Layout{};
  }
  std::vector<Layout> output_layouts() const override { return {layout_}; }
  int in_place_input() const override { return x_; }

  Status run(const KernelArgs& args) override {
    if (bf16_) bf16_scale_ ? run_typed<uint16_t, uint16_t>(args) : run_typed<uint16_t, float>(args);
    else bf16_scale_ ? run_typed<float, uint16_t>(args) : run_typed<float, float>(args);
    return Status::ok();
  }

 private:
  template <typename X, typename S>
  void run_typed(const KernelArgs& args) const {
    const auto* x = static_cast<const X*>(args.inputs[static_cast<size_t>(x_)]);
    const auto* s = static_cast<const S*>(args.inputs[static_cast<size_t>(1 - x_)]);
    auto* y = static_cast<X*>(args.outputs[0]);
    // Work items: (image, block of pixels) for NHWC, (image, channel) planes for NCHW.
    constexpr int64_t kPixelsPerItem = 256;
    const int64_t blocks = nhwc_ ? (hw_ + kPixelsPerItem - 1) / kPixelsPerItem : c_;
    const int64_t items = n_ * blocks;
#pragma omp parallel for num_threads(threads_) schedule(static) if (items * hw_ * c_ / blocks > 16384)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t n = item / blocks, block = item % blocks;
      const S* scale = s + n * c_;
      if (nhwc_) {
        const int64_t p0 = block * kPixelsPerItem, p1 = std::min(hw_, p0 + kPixelsPerItem);
        const int64_t at = (n * hw_ + p0) * c_;
        scale_pixels(x + at, scale, y + at, (p1 - p0) * c_, c_);
      } else {
        const int64_t at = (n * c_ + block) * hw_;
        const float k = load(scale, block);
        for (int64_t p = 0; p < hw_; ++p) store(y, at + p, load(x, at + p) * k);
      }
    }
  }

  int x_;
  int threads_;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  bool nhwc_ = false;
  bool bf16_ = false;        // bfloat16 NHWC activation and output
  bool bf16_scale_ = false;  // bfloat16 scale
  Layout layout_;
};

std::optional<std::string> channel_scale_supports(const KernelBuild& b) {
  if (activation_input(b) < 0)
    return "handles Mul of a float32 or bfloat16 [N>1, C, H, W] (NHWC or plain) by an [N, C, 1, 1] scale laid out as plain "
           "only";
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

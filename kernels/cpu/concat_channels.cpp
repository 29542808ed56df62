// Channel Concat (axis 1) of float32 [N, C_i, H, W] values that all hold their channels outermost
// within an image: plain NCHW, or oneDNN's channel blocks (aBcd8b / aBcd16b) with every C_i a
// multiple of the block. Then each image of each input is one contiguous run that lands at its
// channel offset times H*W in the output, whatever the layout: the Concat is N x inputs memcpys.
// oneDNN 2.6's concat of blocked values ran at ~3 GB/s at batch 1 on an AVX2 EPYC (SqueezeNet's
// fire modules: 24% of the model); the output keeps the inputs' layout, as oneDNN's would.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/onednn/onednn_common.h"

namespace kiln {
namespace {

std::optional<std::string> concat_channels_supports(const KernelBuild& b) {
  if (b.op != OpKind::Concat) return "handles Concat only";
  if (b.outputs.size() != 1 || b.outputs[0].dtype != DType::f32 || b.outputs[0].shape.size() != 4)
    return "needs a float32 4-D output";
  auto axis = b.attrs->get_int("axis", 0);
  if (!axis || (*axis != 1 && *axis != -3)) return "concatenates channels (axis 1) only";
  if (b.inputs.empty()) return "needs inputs";
  const int64_t block = b.inputs[0].present ? cpu::channel_block(b.inputs[0]) : 0;
  if (block != 1 && block != 8 && block != 16) return "input 0 is not plain NCHW or channel blocks of 8 or 16";
  for (size_t i = 0; i < b.inputs.size(); ++i)
    if (!b.inputs[i].present || cpu::channel_block(b.inputs[i]) != block)
      return "input " + std::to_string(i) + " is not in input 0's layout";
  return std::nullopt;
}

class ConcatChannelsKernel final : public Kernel {
 public:
  explicit ConcatChannelsKernel(const KernelBuild& b) : threads_(std::max(1, b.threads)) {
    const Shape& out = b.outputs[0].shape;
    n_ = out[0];
    const int64_t hw = out[2] * out[3];
    image_floats_ = out[1] * hw;
    int64_t offset = 0;
    for (const ValueDesc& v : b.inputs) {
      parts_.push_back({offset, v.shape[1] * hw});
      offset += v.shape[1] * hw;
    }
    const int64_t block = cpu::channel_block(b.inputs[0]);
    if (block > 1) {
      const auto tag = block == 8 ? dnnl::memory::format_tag::aBcd8b : dnnl::memory::format_tag::aBcd16b;
      layout_ = onednn::layout_of(onednn::md(onednn::to_dims(out), dnnl::memory::data_type::f32, tag), out, threads_);
    }
  }
  std::vector<Layout> output_layouts() const override { return {layout_}; }

  Status run(const KernelArgs& args) override {
    auto* y = static_cast<float*>(args.outputs[0]);
    // Tasks: (image, input, piece), pieces of at most 16K floats so one large input still spreads
    // over the threads.
    constexpr int64_t kPiece = 16 * 1024;
    std::vector<int64_t> first_task(parts_.size() + 1, 0);
    for (size_t i = 0; i < parts_.size(); ++i) first_task[i + 1] = first_task[i] + (parts_[i].floats + kPiece - 1) / kPiece;
    const int64_t per_image = first_task.back(), tasks = n_ * per_image;
#pragma omp parallel for num_threads(threads_) schedule(static) if (n_ * image_floats_ > 32 * 1024)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t n = t / per_image, k = t % per_image;
      const size_t i = static_cast<size_t>(std::upper_bound(first_task.begin(), first_task.end(), k) - first_task.begin() - 1);
      const int64_t begin = (k - first_task[i]) * kPiece, count = std::min(kPiece, parts_[i].floats - begin);
      const auto* x = static_cast<const float*>(args.inputs[i]) + n * parts_[i].floats + begin;
      std::memcpy(y + n * image_floats_ + parts_[i].offset + begin, x, static_cast<size_t>(count) * sizeof(float));
    }
    return Status::ok();
  }

 private:
  struct Part {
    int64_t offset;  // floats into the output image
    int64_t floats;  // per image
  };
  int threads_;
  int64_t n_ = 0, image_floats_ = 0;
  std::vector<Part> parts_;
  Layout layout_;
};

Result<std::unique_ptr<Kernel>> concat_channels_create(const KernelBuild& b) {
  if (auto why = concat_channels_supports(b)) return make_error(ErrorCode::unsupported, *why);
  return std::unique_ptr<Kernel>(std::make_unique<ConcatChannelsKernel>(b));
}

}  // namespace

const KernelImpl kCpuConcatChannels{"cpu.concat_channels", concat_channels_supports, concat_channels_create};

}  // namespace kiln

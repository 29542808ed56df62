// DepthFirstConv (kernels/reference/depth_first_conv.cpp) run depth-first, as BrainSlug does:
// the output is cut into tiles, equal ranges of one image's pixels; for each tile a thread computes the
// depthwise rows (or the scaled input rows) into its own buffer, which stays in L1/L2, and
// multiplies that buffer by the packed pointwise weights straight into the output, then adds the
// residual and applies the activation while the tile is still in cache. The depthwise/scaled
// tensor is never written to memory. Activations are NHWC (oneDNN's acdb, which its
// convolutions choose here), so a tile is one contiguous block of the output.
// One implementation per ISA (AVX-512, AVX2, portable), registered best first.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/depthwise_rows.h"
#include "kernels/cpu/pointwise_tile.h"
#include "kernels/onednn/onednn_common.h"

namespace kiln {
namespace {

using onednn::md;

constexpr size_t kX = 0, kDw = 1, kDwBias = 2, kScale = 3, kWeight = 4, kBias = 5, kResidual = 6;
constexpr int64_t kTilePixels = 128;  // pixels per tile: the buffer (pixels x channels) stays in L2

bool given(const KernelBuild& b, size_t i) { return i < b.inputs.size() && b.inputs[i].present; }

md nhwc_desc(const Shape& s) {
  return md(onednn::to_dims(s), dnnl::memory::data_type::f32, dnnl::memory::format_tag::acdb);
}

// How a 4-D value's bytes are ordered, for this kernel: NHWC, or plain NCHW.
enum class Order { nhwc, nchw, other };

Order order_of(const ValueDesc& v) {
  if (v.dtype != DType::f32 || v.shape.size() != 4) return Order::other;
  const bool pixel_is_channel_vector = v.shape[1] == 1 || v.shape[2] * v.shape[3] == 1;
  if (v.layout.plain()) return pixel_is_channel_vector ? Order::nhwc : Order::nchw;
  if (!onednn::is_onednn(v) || onednn::check_value(v, "value")) return Order::other;
  return onednn::value_desc(v) == nhwc_desc(v.shape) ? Order::nhwc : Order::other;
}

std::optional<std::string> supports_on(const KernelBuild& b, CpuIsa isa) {
  if (b.op != OpKind::DepthFirstConv) return "handles DepthFirstConv only";
  if (!cpu_isa_available(isa)) return "this CPU (or KILN_CPU_ISA) has no " + std::string(cpu_isa_name(isa));
  if (!given(b, kX) || !given(b, kWeight) || b.outputs.size() != 1) return "needs X, W and one output";
  if (order_of(b.inputs[kX]) == Order::other) return "X must be float32 NHWC or plain (has " + b.inputs[kX].layout.describe() + ")";
  for (size_t i : {kDw, kDwBias, kWeight, kBias})
    if (given(b, i) && (!b.inputs[i].constant || b.inputs[i].dtype != DType::f32)) return "weights and biases must be float32 constants";
  if (given(b, kScale) && order_of(b.inputs[kScale]) != Order::nhwc) return "S must be a plain [N, C, 1, 1] value";
  if (given(b, kResidual) && order_of(b.inputs[kResidual]) == Order::other) return "R must be NHWC or plain";
  if (b.outputs[0].dtype != DType::f32 || b.outputs[0].shape.size() != 4) return "needs a float32 4-D output";
  auto dw_act = post_ops_from_attrs(*b.attrs, "dw_");
  auto act = post_ops_from_attrs(*b.attrs);
  if (!dw_act || !act) return "bad fused activation attributes";
  return std::nullopt;
}

class DepthFirstConvKernel final : public Kernel {
 public:
  std::vector<Layout> output_layouts() const override { return {out_layout_}; }
  size_t scratch_bytes() const override { return static_cast<size_t>(x_copy_floats_ + threads_ * buffer_floats_) * 4 + 64; }

  Status run(const KernelArgs& args) override {
    float* scratch = align(static_cast<float*>(args.scratch));
    const float* x = static_cast<const float*>(args.inputs[kX]);
    if (x_nchw_) {  // the producer left plain NCHW: one transposition to NHWC first
      to_nhwc(x, scratch);
      x = scratch;
    }
    Inputs in{x, arg(args, kScale), arg(args, kResidual), static_cast<float*>(args.outputs[0])};
    run_depth_first(in, scratch + x_copy_floats_);
    return Status::ok();
  }

  static Result<std::unique_ptr<Kernel>> create(const KernelBuild& b, CpuIsa isa) {
    auto k = std::unique_ptr<DepthFirstConvKernel>(new DepthFirstConvKernel);
    const Shape& xs = b.inputs[kX].shape;
    const Shape& ys = b.outputs[0].shape;
    k->threads_ = std::max(1, b.threads);
    k->n_ = xs[0];
    k->c_ = xs[1];
    k->h_ = xs[2];
    k->w_ = xs[3];
    k->m_ = ys[1];
    k->oh_ = ys[2];
    k->ow_ = ys[3];
    k->x_nchw_ = order_of(b.inputs[kX]) == Order::nchw;
    k->residual_nchw_ = given(b, kResidual) && order_of(b.inputs[kResidual]) == Order::nchw;
    KILN_ASSIGN(act, post_ops_from_attrs(*b.attrs));
    k->act_ = act;
    k->pw_ = cpu::pack_pointwise(isa, b.inputs[kWeight].constant->data<float>(),
                                 given(b, kBias) ? b.inputs[kBias].constant->data<float>() : nullptr, k->m_, k->c_);
    k->has_dw_ = given(b, kDw);
    if (k->has_dw_) {
      const Shape& ks = b.inputs[kDw].shape;
      KILN_ASSIGN(strides, b.attrs->get_ints("dw_strides", {1, 1}));
      KILN_ASSIGN(pads, b.attrs->get_ints("dw_pads", {0, 0, 0, 0}));
      KILN_ASSIGN(dw_act, post_ops_from_attrs(*b.attrs, "dw_"));
      KILN_REQUIRE(strides.size() == 2 && pads.size() == 4, invalid_argument, "bad dw_strides or dw_pads");
      cpu::DepthwiseGeometry g{k->c_, k->h_, k->w_, k->oh_, k->ow_, ks[2], ks[3], strides[0], strides[1], pads[0], pads[1]};
      k->dw_ = cpu::pack_depthwise(isa, g, b.inputs[kDw].constant->data<float>(),
                                   given(b, kDwBias) ? b.inputs[kDwBias].constant->data<float>() : nullptr, dw_act);
    }
    // Tiles are equal ranges of an image's output pixels, about kTilePixels each, and at least
    // two per thread when the batch allows it, so both cores get the same work at batch 1.
    const int64_t plane = k->oh_ * k->ow_;
    int64_t tiles = std::max<int64_t>(1, (plane + kTilePixels - 1) / kTilePixels);
    tiles = std::max(tiles, (2 * k->threads_ + k->n_ - 1) / k->n_);
    k->tiles_per_image_ = std::min(tiles, plane);
    k->buffer_floats_ = ((plane + k->tiles_per_image_ - 1) / k->tiles_per_image_ * k->c_ + 15) / 16 * 16;
    k->x_copy_floats_ = k->x_nchw_ ? (k->n_ * k->c_ * k->h_ * k->w_ + 15) / 16 * 16 : 0;
    k->out_layout_ = onednn::layout_of(nhwc_desc(ys), ys, k->threads_);
    return std::unique_ptr<Kernel>(std::move(k));
  }

 private:
  DepthFirstConvKernel() = default;

  struct Inputs {
    const float* x;         // NHWC
    const float* scale;     // [N, C] or nullptr
    const float* residual;  // or nullptr
    float* y;               // NHWC
  };

  // The first stage for output pixels [p0, p1) of image b into buf; returns the GEMM's input
  // (buf, or X itself when there is nothing to do).
  const float* first_stage(const Inputs& in, int64_t b, int64_t p0, int64_t p1, float* buf) const {
    const float* image = in.x + b * c_ * h_ * w_;
    const float* s = in.scale ? in.scale + b * c_ : nullptr;
    if (has_dw_) {
      cpu::depthwise_pixels(dw_, image, p0, p1, s, buf);
      return buf;
    }
    if (!s) return image + p0 * c_;
    const float* src = image + p0 * c_;
    for (int64_t p = 0; p < p1 - p0; ++p)
      for (int64_t ch = 0; ch < c_; ++ch) buf[p * c_ + ch] = src[p * c_ + ch] * s[ch];
    return buf;
  }

  // Each tile (a range of one image's pixels) goes through both stages in a per-thread buffer.
  void run_depth_first(const Inputs& in, float* buffers) const {
    const int64_t plane = oh_ * ow_;
    const int64_t tiles = n_ * tiles_per_image_;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t b = t / tiles_per_image_, i = t % tiles_per_image_;
      const int64_t p0 = i * plane / tiles_per_image_, p1 = (i + 1) * plane / tiles_per_image_;
      const float* a = first_stage(in, b, p0, p1, buffers + omp_get_thread_num() * buffer_floats_);
      float* out = in.y + (b * plane + p0) * m_;
      cpu::pointwise_tile(pw_, a, c_, p1 - p0, out, m_);
      epilogue(in, b, p0, p1 - p0, 0, m_);
    }
  }

  static float* align(float* p) {
    const auto v = reinterpret_cast<uintptr_t>(p);
    return reinterpret_cast<float*>((v + 63) / 64 * 64);
  }
  static const float* arg(const KernelArgs& args, size_t i) {
    return i < args.inputs.size() ? static_cast<const float*>(args.inputs[i]) : nullptr;
  }

  void to_nhwc(const float* x, float* dst) const {
    const int64_t plane = h_ * w_;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t b = 0; b < n_; ++b)
      for (int64_t ch = 0; ch < c_; ++ch)
        for (int64_t p = 0; p < plane; ++p) dst[(b * plane + p) * c_ + ch] = x[(b * c_ + ch) * plane + p];
  }

  // For output pixels [first, first + pixels) of image b, channels [col0, col0 + cols): adds the
  // residual (NHWC or plain NCHW) and applies the activation.
  void epilogue(const Inputs& in, int64_t b, int64_t first, int64_t pixels, int64_t col0, int64_t cols) const {
    const int64_t plane = oh_ * ow_;
    float* out = in.y + (b * plane + first) * m_ + col0;
    for (int64_t p = 0; p < pixels; ++p) {
      float* row = out + p * m_;
      if (in.residual && !residual_nchw_) {
        const float* r = in.residual + (b * plane + first + p) * m_ + col0;
        for (int64_t o = 0; o < cols; ++o) row[o] += r[o];
      } else if (in.residual) {
        for (int64_t o = 0; o < cols; ++o) row[o] += in.residual[(b * m_ + col0 + o) * plane + first + p];
      }
      cpu::apply_activation(act_, row, cols);
    }
  }

  int threads_ = 1;
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, m_ = 0, oh_ = 0, ow_ = 0;
  int64_t tiles_per_image_ = 1, buffer_floats_ = 0, x_copy_floats_ = 0;
  bool has_dw_ = false, x_nchw_ = false, residual_nchw_ = false;
  PostOps act_;
  cpu::PackedPointwise pw_;
  cpu::PackedDepthwise dw_;
  Layout out_layout_;
};

template <CpuIsa isa>
std::optional<std::string> depth_first_supports(const KernelBuild& b) {
  return supports_on(b, isa);
}

template <CpuIsa isa>
Result<std::unique_ptr<Kernel>> depth_first_create(const KernelBuild& b) {
  return onednn::guarded_create("cpu.depth_first_conv", [&] { return DepthFirstConvKernel::create(b, isa); });
}

}  // namespace

const KernelImpl kCpuDepthFirstConvAvx512{"cpu.depth_first_conv.avx512", depth_first_supports<CpuIsa::avx512>,
                                          depth_first_create<CpuIsa::avx512>};
const KernelImpl kCpuDepthFirstConvAvx2{"cpu.depth_first_conv.avx2", depth_first_supports<CpuIsa::avx2>,
                                        depth_first_create<CpuIsa::avx2>};
const KernelImpl kCpuDepthFirstConvPortable{"cpu.depth_first_conv.portable", depth_first_supports<CpuIsa::portable>,
                                            depth_first_create<CpuIsa::portable>};

}  // namespace kiln

// DepthFirstConv (kernels/reference/depth_first_conv.cpp) run depth-first, as BrainSlug does:
// the output is cut into tiles, equal ranges of one image's pixels; for each tile a thread computes
// the expanded rows it needs (when there is an expansion), the depthwise rows (or the scaled input
// rows) into its own buffers, which stay in L1/L2, and multiplies that buffer by the packed
// pointwise weights straight into the output, then adds the residual and applies the activation
// while the tile is still in cache. The expanded and depthwise/scaled tensors are never written to
// memory. Activations are NHWC (oneDNN's acdb, which its
// convolutions choose here), so a tile is one contiguous block of the output.
// One implementation per ISA (AVX-512, AVX2, portable), registered best first.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/depthwise_rows.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/cpu/pointwise_tile.h"
#include "kernels/onednn/onednn_common.h"

namespace kiln {
namespace {

using cpu::PixelOrder;
using cpu::pixel_order;

constexpr size_t kX = 0, kDw = 1, kDwBias = 2, kScale = 3, kWeight = 4, kBias = 5, kResidual = 6, kExpand = 7,
                 kExpandBias = 8;
constexpr int64_t kTilePixels = 128;  // pixels per tile: the buffer (pixels x channels) stays in L2

bool given(const KernelBuild& b, size_t i) { return i < b.inputs.size() && b.inputs[i].present; }

std::optional<std::string> supports_on(const KernelBuild& b, CpuIsa isa) {
  if (b.op != OpKind::DepthFirstConv) return "handles DepthFirstConv only";
  if (!cpu_isa_available(isa)) return "this CPU (or KILN_CPU_ISA) has no " + std::string(cpu_isa_name(isa));
  if (!given(b, kX) || b.outputs.size() != 1) return "needs X and one output";
  if (!given(b, kWeight) && !given(b, kDw)) return "needs W or DW";
  if (given(b, kExpand) && !given(b, kDw)) return "an expansion needs the depthwise stage after it";
  if (pixel_order(b.inputs[kX]) == PixelOrder::other) return "X must be float32 NHWC or plain (has " + b.inputs[kX].layout.describe() + ")";
  for (size_t i : {kDw, kDwBias, kWeight, kBias, kExpand, kExpandBias})
    if (given(b, i) && (!b.inputs[i].constant || b.inputs[i].dtype != DType::f32)) return "weights and biases must be float32 constants";
  if (given(b, kScale) && pixel_order(b.inputs[kScale]) != PixelOrder::nhwc) return "S must be a plain [N, C, 1, 1] value";
  if (given(b, kResidual) && pixel_order(b.inputs[kResidual]) == PixelOrder::other) return "R must be NHWC or plain";
  if (b.outputs[0].dtype != DType::f32 || b.outputs[0].shape.size() != 4) return "needs a float32 4-D output";
  auto dw_act = post_ops_from_attrs(*b.attrs, "dw_");
  auto ex_act = post_ops_from_attrs(*b.attrs, "ex_");
  auto act = post_ops_from_attrs(*b.attrs);
  if (!dw_act || !act || !ex_act) return "bad fused activation attributes";
  return std::nullopt;
}

// The stages, in order, each optional but the chain: X -> expand -> depthwise -> scale ->
// project -> residual + activation -> Y. Activations are NHWC (oneDNN's acdb, which its
// convolutions choose here), so a tile of output pixels is one contiguous block.
class DepthFirstConvKernel final : public Kernel {
 public:
  std::vector<Layout> output_layouts() const override { return {out_layout_}; }
  size_t scratch_bytes() const override {
    return static_cast<size_t>(x_copy_floats_ + threads_ * (buffer_floats_ + expand_floats_)) * 4 + 64;
  }

  Status run(const KernelArgs& args) override {
    float* scratch = align(static_cast<float*>(args.scratch));
    const float* x = static_cast<const float*>(args.inputs[kX]);
    if (x_nchw_) {  // the producer left plain NCHW: one transposition to NHWC first
      to_nhwc(x, scratch);
      x = scratch;
    }
    Inputs in{x, arg(args, kScale), arg(args, kResidual), static_cast<float*>(args.outputs[0])};
    float* buffers = scratch + x_copy_floats_;
    if (has_expand_) run_banded(in, buffers);
    else run_depth_first(in, buffers);
    return Status::ok();
  }

  static Result<std::unique_ptr<Kernel>> create(const KernelBuild& b, CpuIsa isa) {
    auto k = std::unique_ptr<DepthFirstConvKernel>(new DepthFirstConvKernel);
    const Shape& xs = b.inputs[kX].shape;
    const Shape& ys = b.outputs[0].shape;
    k->threads_ = std::max(1, b.threads);
    k->isa_ = isa;
    k->n_ = xs[0];
    k->cx_ = xs[1];
    k->h_ = xs[2];
    k->w_ = xs[3];
    k->m_ = ys[1];
    k->oh_ = ys[2];
    k->ow_ = ys[3];
    k->x_nchw_ = pixel_order(b.inputs[kX]) == PixelOrder::nchw;
    k->residual_nchw_ = given(b, kResidual) && pixel_order(b.inputs[kResidual]) == PixelOrder::nchw;
    KILN_ASSIGN(act, post_ops_from_attrs(*b.attrs));
    k->act_ = act;
    k->has_expand_ = given(b, kExpand);
    k->c_ = k->cx_;
    if (k->has_expand_) {
      k->c_ = b.inputs[kExpand].shape[0];
      KILN_ASSIGN(ex_act, post_ops_from_attrs(*b.attrs, "ex_"));
      k->ex_act_ = ex_act;
      k->pe_ = cpu::pack_pointwise(isa, b.inputs[kExpand].constant->data<float>(),
                                   given(b, kExpandBias) ? b.inputs[kExpandBias].constant->data<float>() : nullptr,
                                   k->c_, k->cx_);
    }
    k->has_pw_ = given(b, kWeight);
    if (k->has_pw_)
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
    const int64_t plane = k->oh_ * k->ow_;
    if (k->has_expand_) {
      // Bands of whole output rows, one or a few per image so both threads get the same work;
      // a band walks down its rows a tile of rows at a time, keeping the expanded input rows the
      // next tile shares (kh - sh of them) instead of computing them again.
      k->rows_per_tile_ = std::clamp<int64_t>(kTilePixels / k->ow_, 1, k->oh_);
      k->bands_ = std::clamp<int64_t>((k->threads_ + k->n_ - 1) / k->n_, 1, k->oh_);
      const int64_t rows = (k->rows_per_tile_ - 1) * k->dw_.g.sh + k->dw_.g.kh;
      k->expand_floats_ = (std::min(rows, k->h_) * k->w_ * k->c_ + 15) / 16 * 16;
      k->buffer_floats_ = (k->rows_per_tile_ * k->ow_ * k->c_ + 15) / 16 * 16;
    } else {
      // Tiles are equal ranges of an image's output pixels, about kTilePixels each, as many in all
      // as a multiple of the threads so both cores get the same work. A plane too small to give
      // every thread a tile (7x7 at batch 1) is split by output channels instead: each thread
      // then repeats the cheap first stage but streams only its share of the pointwise weights,
      // where tiles of a dozen pixels would each stream all of them.
      int64_t tiles = std::max<int64_t>(1, (plane + kTilePixels / 2) / kTilePixels);
      if (k->n_ * tiles >= k->threads_) {
        const int64_t total = (k->n_ * tiles + k->threads_ - 1) / k->threads_ * k->threads_;
        tiles = std::max<int64_t>(1, total / k->n_);
      }
      k->tiles_per_image_ = std::min(tiles, plane);
      if (k->has_pw_) {
        const int64_t panels = cpu::pointwise_panels(k->pw_);
        k->column_splits_ = std::clamp<int64_t>(
            (k->threads_ + k->n_ * k->tiles_per_image_ - 1) / (k->n_ * k->tiles_per_image_), 1, panels);
      }
      k->buffer_floats_ = ((plane + k->tiles_per_image_ - 1) / k->tiles_per_image_ * k->c_ + 15) / 16 * 16;
    }
    k->x_copy_floats_ = k->x_nchw_ ? (k->n_ * k->cx_ * k->h_ * k->w_ + 15) / 16 * 16 : 0;
    k->out_layout_ = cpu::nhwc_layout(ys, k->threads_);
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

  // The stages after the depthwise one for the tile's pixels [p0, p1) of image b, whose
  // depthwise result is `a`: the projection (output-channel panels [panel0, panel1)) and the
  // epilogue; without a projection `a` already is the output.
  void last_stage(const Inputs& in, int64_t b, int64_t p0, int64_t p1, const float* a, int64_t panel0,
                  int64_t panel1) const {
    if (!has_pw_) return;
    const int64_t plane = oh_ * ow_;
    cpu::pointwise_tile(pw_, a, c_, p1 - p0, in.y + (b * plane + p0) * m_, m_, panel0, panel1);
    const int64_t col0 = panel0 * pw_.nr, col1 = std::min(m_, panel1 * pw_.nr);
    epilogue(in, b, p0, p1 - p0, col0, col1 - col0);
  }

  // Each tile (a range of one image's pixels, and of the output channels' panels) goes through
  // the stages in a per-thread buffer.
  void run_depth_first(const Inputs& in, float* buffers) const {
    const int64_t plane = oh_ * ow_;
    const int64_t panels = has_pw_ ? cpu::pointwise_panels(pw_) : 1;
    const int64_t tiles = n_ * tiles_per_image_ * column_splits_;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t split = t % column_splits_, tile = t / column_splits_;
      const int64_t b = tile / tiles_per_image_, i = tile % tiles_per_image_;
      const int64_t p0 = i * plane / tiles_per_image_, p1 = (i + 1) * plane / tiles_per_image_;
      float* buf = has_pw_ ? buffers + omp_get_thread_num() * buffer_floats_ : in.y + (b * plane + p0) * c_;
      const float* a = first_stage(in, b, p0, p1, buf);
      last_stage(in, b, p0, p1, a, split * panels / column_splits_, (split + 1) * panels / column_splits_);
    }
  }

  // With an expansion: each band of an image's output rows goes tile by tile (rows_per_tile_
  // rows); the expanded input rows a tile needs are computed into the thread's expansion
  // buffer, which slides down the image, so no expanded value is written to memory.
  void run_banded(const Inputs& in, float* buffers) const {
    const int64_t plane = oh_ * ow_, row_floats = w_ * c_;
    const cpu::DepthwiseGeometry& g = dw_.g;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t t = 0; t < n_ * bands_; ++t) {
      const int64_t b = t / bands_, band = t % bands_;
      float* expanded = buffers + omp_get_thread_num() * (buffer_floats_ + expand_floats_);
      float* dw_out = expanded + expand_floats_;
      const float* image = in.x + b * cx_ * h_ * w_;
      const float* s = in.scale ? in.scale + b * c_ : nullptr;
      int64_t have0 = 0, have1 = 0;  // expanded input rows in the buffer: [have0, have1)
      for (int64_t r0 = band * oh_ / bands_, r_end = (band + 1) * oh_ / bands_; r0 < r_end; r0 += rows_per_tile_) {
        const int64_t r1 = std::min(r_end, r0 + rows_per_tile_);
        const int64_t y0 = std::clamp(r0 * g.sh - g.pt, int64_t{0}, h_);
        const int64_t y1 = std::clamp((r1 - 1) * g.sh - g.pt + g.kh, y0, h_);
        int64_t from = y0;  // the first row still to compute
        if (y0 >= have0 && y0 < have1) {
          std::memmove(expanded, expanded + (y0 - have0) * row_floats,
                       static_cast<size_t>((have1 - y0) * row_floats) * sizeof(float));
          from = have1;
        }
        if (from < y1) {
          float* dst = expanded + (from - y0) * row_floats;
          cpu::pointwise_tile(pe_, image + from * w_ * cx_, cx_, (y1 - from) * w_, dst, c_);
          cpu::apply_activation(pe_.isa, ex_act_, dst, (y1 - from) * row_floats);
        }
        have0 = y0;
        have1 = y1;
        // The depthwise stage indexes its input by absolute row; the buffer holds rows from y0,
        // so it gets the address row 0 would have (only rows [y0, y1) are ever read).
        const auto* rows = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(expanded) -
                                                          static_cast<uintptr_t>(y0 * row_floats) * sizeof(float));
        const int64_t p0 = r0 * ow_, p1 = r1 * ow_;
        float* a = has_pw_ ? dw_out : in.y + (b * plane + p0) * c_;
        cpu::depthwise_pixels(dw_, rows, p0, p1, s, a);
        last_stage(in, b, p0, p1, a, 0, has_pw_ ? cpu::pointwise_panels(pw_) : 1);
      }
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
      for (int64_t ch = 0; ch < cx_; ++ch)
        for (int64_t p = 0; p < plane; ++p) dst[(b * plane + p) * cx_ + ch] = x[(b * cx_ + ch) * plane + p];
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
      cpu::apply_activation(isa_, act_, row, cols);
    }
  }

  int threads_ = 1;
  CpuIsa isa_ = CpuIsa::portable;
  int64_t n_ = 0, cx_ = 0, c_ = 0, h_ = 0, w_ = 0, m_ = 0, oh_ = 0, ow_ = 0;  // cx_: X's channels, c_: the dw's
  int64_t tiles_per_image_ = 1, column_splits_ = 1, buffer_floats_ = 0, x_copy_floats_ = 0;
  int64_t rows_per_tile_ = 1, bands_ = 1, expand_floats_ = 0;  // with an expansion
  bool has_dw_ = false, has_pw_ = false, has_expand_ = false, x_nchw_ = false, residual_nchw_ = false;
  PostOps act_, ex_act_;
  cpu::PackedPointwise pw_, pe_;
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

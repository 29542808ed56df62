// ConcatAffine (kernels/reference/concat_affine.cpp): each input's channels are scaled, shifted
// and activated straight into their place in the output, so the joined tensor is written once
// and read never: oneDNN would copy every input into the concatenation, then read and write it
// again for the BatchNormalization (DenseNet-121 batch 16: 62 such pairs, 84 ms of 360).
// Memory-bound: one read of each input and one write of the output. Works on NHWC (oneDNN's acdb,
// what its convolutions write here; the output then is acdb too) and on plain NCHW. With an
// int8_output scale (quantize_int8: every reader is an int8 conv) an NHWC output is written as u8/s8
// codes: a quarter of the bytes, and the conv reads them as they are instead of quantizing floats
// (DenseNet-121 int8: 62 of these feed its 1x1 convs).
// One implementation per ISA (AVX-512, portable), registered best first.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/cpu/quantize_codes.h"
#include "kernels/onednn/onednn_common.h"

namespace kiln {
namespace {

using cpu::PixelOrder;

constexpr size_t kScale = 0, kShift = 1, kFirstX = 2;
constexpr int64_t kBlockPixels = 64;  // NHWC pixels per block: the activation runs while they are in L1/L2

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

// dst[i] = src[i] * scale[i] + shift[i] (then max(., 0) when relu), for count values.
KILN_AVX512 void affine_avx512(const float* src, const float* scale, const float* shift, float* dst, int64_t count,
                               bool relu) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    __m512 y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, src + i), _mm512_maskz_loadu_ps(mask, scale + i),
                               _mm512_maskz_loadu_ps(mask, shift + i));
    if (relu) y = _mm512_max_ps(y, zero);
    _mm512_mask_storeu_ps(dst + i, mask, y);
  }
}

// codes[i] = the u8/s8 code of src[i] * scale[i] + shift[i] (then max(., 0) when relu) at 1 / inv_scale:
// round half to even, saturated to [lo, hi], as cpu/quantize_codes.h writes it.
KILN_AVX512 void affine_codes_avx512(const float* src, const float* scale, const float* shift, uint8_t* codes,
                                     int64_t count, bool relu, float inv_scale, int32_t lo, int32_t hi) {
  const __m512 zero = _mm512_setzero_ps(), inv = _mm512_set1_ps(inv_scale);
  const __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    __m512 y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, src + i), _mm512_maskz_loadu_ps(mask, scale + i),
                               _mm512_maskz_loadu_ps(mask, shift + i));
    if (relu) y = _mm512_max_ps(y, zero);
    __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(y, inv));
    q = _mm512_min_epi32(_mm512_max_epi32(q, vlo), vhi);
    _mm_mask_storeu_epi8(codes + i, mask, _mm512_cvtepi32_epi8(q));
  }
}

// dst[i] = src[i] * scale + shift (then max(., 0) when relu): one NCHW channel plane.
KILN_AVX512 void affine_plane_avx512(const float* src, float scale, float shift, float* dst, int64_t count, bool relu) {
  const __m512 s = _mm512_set1_ps(scale), t = _mm512_set1_ps(shift), zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    __m512 y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, src + i), s, t);
    if (relu) y = _mm512_max_ps(y, zero);
    _mm512_mask_storeu_ps(dst + i, mask, y);
  }
}

void affine_portable(const float* src, const float* scale, const float* shift, float* dst, int64_t count, bool relu) {
  for (int64_t i = 0; i < count; ++i) {
    const float y = src[i] * scale[i] + shift[i];
    dst[i] = relu && y < 0.0f ? 0.0f : y;
  }
}

void affine_plane_portable(const float* src, float scale, float shift, float* dst, int64_t count, bool relu) {
  for (int64_t i = 0; i < count; ++i) {
    const float y = src[i] * scale + shift;
    dst[i] = relu && y < 0.0f ? 0.0f : y;
  }
}

std::optional<std::string> supports_on(const KernelBuild& b, CpuIsa isa) {
  if (b.op != OpKind::ConcatAffine) return "handles ConcatAffine only";
  if (!cpu_isa_available(isa)) return "this CPU (or KILN_CPU_ISA) has no " + std::string(cpu_isa_name(isa));
  if (b.inputs.size() <= kFirstX || b.outputs.size() != 1) return "needs scale, shift, inputs and one output";
  for (size_t i : {kScale, kShift})
    if (!b.inputs[i].present || !b.inputs[i].constant || b.inputs[i].dtype != DType::f32)
      return "scale and shift must be float32 constants";
  const PixelOrder order = cpu::pixel_order(b.inputs[kFirstX]);
  if (order == PixelOrder::other) return "inputs must be float32 4-D NHWC or plain";
  for (size_t i = kFirstX; i < b.inputs.size(); ++i) {
    const PixelOrder o = b.inputs[i].present ? cpu::pixel_order(b.inputs[i]) : PixelOrder::other;
    if (o != order) return "inputs must all be NHWC or all plain NCHW (input " + std::to_string(i) + " has " +
                           b.inputs[i].layout.describe() + ")";
  }
  if (auto post = post_ops_from_attrs(*b.attrs); !post) return post.error().message;
  return std::nullopt;
}

class ConcatAffineKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelBuild& b, CpuIsa isa) {
    auto k = std::unique_ptr<ConcatAffineKernel>(new ConcatAffineKernel());
    KILN_ASSIGN(post, post_ops_from_attrs(*b.attrs));
    const Shape& ys = b.outputs[0].shape;
    k->isa_ = isa;
    k->post_ = post;
    k->relu_inline_ = post.activation == Activation::relu;
    k->threads_ = std::max(1, b.threads);
    k->n_ = ys[0];
    k->c_ = ys[1];
    k->plane_ = ys[2] * ys[3];
    k->nhwc_ = cpu::pixel_order(b.inputs[kFirstX]) == PixelOrder::nhwc;
    int64_t offset = 0;
    for (size_t i = kFirstX; i < b.inputs.size(); ++i) {
      k->offsets_.push_back(offset);
      k->channels_.push_back(b.inputs[i].shape[1]);
      offset += b.inputs[i].shape[1];
    }
    KILN_REQUIRE(offset == k->c_ && b.inputs[kScale].constant->numel() == k->c_ &&
                     b.inputs[kShift].constant->numel() == k->c_,
                 internal, "ConcatAffine channel counts disagree with the inferred output");
    const float* scale = b.inputs[kScale].constant->data<float>();
    const float* shift = b.inputs[kShift].constant->data<float>();
    k->scale_.assign(scale, scale + k->c_);
    k->shift_.assign(shift, shift + k->c_);
    KILN_ASSIGN(codes, quant_params_from_attrs(*b.attrs, "output"));
    if (codes && k->nhwc_) k->codes_ = codes;  // plain NCHW stays float32: its reader quantizes
    k->out_layout_ = k->codes_ ? cpu::nhwc_codes_layout(ys, k->threads_, *k->codes_)
                     : k->nhwc_ ? cpu::nhwc_layout(ys, k->threads_)
                                : Layout{};
    return std::unique_ptr<Kernel>(std::move(k));
  }

  std::vector<Layout> output_layouts() const override { return {out_layout_}; }
  // Codes: each thread's block of pixels in float32 before it is quantized.
  size_t scratch_bytes() const override {
    return codes_ && !direct_codes() ? static_cast<size_t>(threads_ * kBlockPixels * c_) * sizeof(float) : 0;
  }

  Status run(const KernelArgs& args) override {
    if (codes_) run_nhwc_codes(args, static_cast<uint8_t*>(args.outputs[0]), static_cast<float*>(args.scratch));
    else if (nhwc_) run_nhwc(args, static_cast<float*>(args.outputs[0]));
    else run_nchw(args, static_cast<float*>(args.outputs[0]));
    return Status::ok();
  }

 private:
  ConcatAffineKernel() = default;

  void affine(const float* src, const float* scale, const float* shift, float* dst, int64_t count) const {
    if (isa_ == CpuIsa::avx512) affine_avx512(src, scale, shift, dst, count, relu_inline_);
    else affine_portable(src, scale, shift, dst, count, relu_inline_);
  }

  // Blocks of pixels; each pixel's output is its inputs' channel vectors side by side.
  void run_nhwc(const KernelArgs& args, float* y) const {
    const int64_t pixels = n_ * plane_;
    const int64_t blocks = (pixels + kBlockPixels - 1) / kBlockPixels;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t p0 = blk * kBlockPixels, p1 = std::min(pixels, p0 + kBlockPixels);
      for (int64_t p = p0; p < p1; ++p)
        for (size_t i = 0; i < channels_.size(); ++i) {
          const float* x = static_cast<const float*>(args.inputs[kFirstX + i]) + p * channels_[i];
          affine(x, scale_.data() + offsets_[i], shift_.data() + offsets_[i], y + p * c_ + offsets_[i], channels_[i]);
        }
      if (!relu_inline_) cpu::apply_activation(isa_, post_, y + p0 * c_, (p1 - p0) * c_);
    }
  }

  // As run_nhwc into codes: straight from the inputs on AVX-512 with ReLU or no activation, else each
  // block computed into the thread's float32 scratch, then quantized.
  void run_nhwc_codes(const KernelArgs& args, uint8_t* y, float* scratch) const {
    const int64_t pixels = n_ * plane_;
    const int64_t blocks = (pixels + kBlockPixels - 1) / kBlockPixels;
    const float inv_scale = 1.0f / codes_->scale;
    if (direct_codes()) {
      const int32_t lo = codes_->type == QuantType::u8 ? 0 : -128, hi = codes_->type == QuantType::u8 ? 255 : 127;
#pragma omp parallel for num_threads(threads_) schedule(static)
      for (int64_t blk = 0; blk < blocks; ++blk)
        for (int64_t p = blk * kBlockPixels; p < std::min(pixels, (blk + 1) * kBlockPixels); ++p)
          for (size_t i = 0; i < channels_.size(); ++i)
            affine_codes_avx512(static_cast<const float*>(args.inputs[kFirstX + i]) + p * channels_[i],
                                scale_.data() + offsets_[i], shift_.data() + offsets_[i], y + p * c_ + offsets_[i],
                                channels_[i], relu_inline_, inv_scale, lo, hi);
      return;
    }
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      float* block = scratch + static_cast<int64_t>(omp_get_thread_num()) * kBlockPixels * c_;
      const int64_t p0 = blk * kBlockPixels, p1 = std::min(pixels, p0 + kBlockPixels);
      for (int64_t p = p0; p < p1; ++p)
        for (size_t i = 0; i < channels_.size(); ++i) {
          const float* x = static_cast<const float*>(args.inputs[kFirstX + i]) + p * channels_[i];
          affine(x, scale_.data() + offsets_[i], shift_.data() + offsets_[i], block + (p - p0) * c_ + offsets_[i], channels_[i]);
        }
      if (!relu_inline_) cpu::apply_activation(isa_, post_, block, (p1 - p0) * c_);
      cpu::quantize_to_codes(block, y + p0 * c_, (p1 - p0) * c_, inv_scale, codes_->type, 1);
    }
  }

  bool direct_codes() const { return isa_ == CpuIsa::avx512 && (relu_inline_ || post_.empty()); }

  // One output channel plane at a time.
  void run_nchw(const KernelArgs& args, float* y) const {
    const int64_t planes = n_ * c_;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t q = 0; q < planes; ++q) {
      const int64_t b = q / c_, ch = q % c_;
      const size_t i = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), ch) - offsets_.begin()) - 1;
      const float* x = static_cast<const float*>(args.inputs[kFirstX + i]) + (b * channels_[i] + ch - offsets_[i]) * plane_;
      float* dst = y + q * plane_;
      if (isa_ == CpuIsa::avx512) affine_plane_avx512(x, scale_[ch], shift_[ch], dst, plane_, relu_inline_);
      else affine_plane_portable(x, scale_[ch], shift_[ch], dst, plane_, relu_inline_);
      if (!relu_inline_) cpu::apply_activation(isa_, post_, dst, plane_);
    }
  }

  CpuIsa isa_ = CpuIsa::portable;
  PostOps post_;
  bool relu_inline_ = false;
  bool nhwc_ = true;
  std::optional<QuantParams> codes_;  // set: the NHWC output is written as these codes
  int threads_ = 1;
  int64_t n_ = 0, c_ = 0, plane_ = 0;
  std::vector<int64_t> channels_, offsets_;  // per input: its channels and where they start in Y
  std::vector<float> scale_, shift_;
  Layout out_layout_;
};

template <CpuIsa isa>
std::optional<std::string> concat_affine_supports(const KernelBuild& b) {
  return supports_on(b, isa);
}

template <CpuIsa isa>
Result<std::unique_ptr<Kernel>> concat_affine_create(const KernelBuild& b) {
  return onednn::guarded_create("cpu.concat_affine", [&] { return ConcatAffineKernel::create(b, isa); });
}

}  // namespace

const KernelImpl kCpuConcatAffineAvx512{"cpu.concat_affine.avx512", concat_affine_supports<CpuIsa::avx512>,
                                        concat_affine_create<CpuIsa::avx512>};
const KernelImpl kCpuConcatAffinePortable{"cpu.concat_affine.portable", concat_affine_supports<CpuIsa::portable>,
                                          concat_affine_create<CpuIsa::portable>};

}  // namespace kiln

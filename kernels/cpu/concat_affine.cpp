// ConcatAffine (kernels/reference/concat_affine.cpp): each input's channels are scaled, shifted
// and activated straight into their place in the output, so the joined tensor is written once
// and read never: oneDNN would copy every input into the concatenation, then read and write it
// again for the BatchNormalization (DenseNet-121 batch 16: 62 such pairs, 84 ms of 360).
// Memory-bound: one read of each input and one write of the output. Works on NHWC (oneDNN's acdb,
// what its convolutions write here; the output then is acdb too) and on plain NCHW.
// In NHWC the inputs may be float32, bfloat16 (what bf16 convs write: read as they are, where
// each was converted to plain float32 before) or u8/s8 codes (what int8 convs and the max pool after
// them write when every reader is an int8 op or a ConcatAffine: the code's scale is folded into the
// channel's, so a code costs what a float does, at a quarter of the bytes read), and the output is
// written in the form its readers take (DenseNet-121: each feeds one 1x1 conv):
//   - bfloat16 with bf16_output (mixed_precision_bf16: every reader is a bf16 conv);
//   - u8/s8 codes with an int8_output scale (quantize_int8: every reader is an int8 conv);
//   - float32 otherwise.
// So a bf16 or int8 conv reads it without converting, and a quarter or half of the bytes are written.
// One implementation per ISA (AVX-512, portable), registered best first.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "kernels/core/half.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/cpu/quantize_codes.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/precision.h"

namespace kiln {
namespace {

using cpu::PixelOrder;

constexpr size_t kScale = 0, kShift = 1, kFirstX = 2;
constexpr int64_t kBlockPixels = 64;  // NHWC pixels per block: the activation runs while they are in L1/L2

// What the output holds.
enum class Sink { f32, bf16, codes };
struct CodeRange {
  float inv_scale = 1.0f;
  cpu::CodeBounds bounds;
};

// How an input's elements are stored.
enum class Source { f32, bf16, s8, u8 };
size_t source_bytes(Source s) { return s == Source::f32 ? 4 : s == Source::bf16 ? 2 : 1; }

// One input's channels for `pixels` pixels: dst = act(src * scale + shift) for `count` values a pixel,
// act ReLU or none; pixel p's values at src + p * src_stride and dst + p * dst_stride (in elements). A
// call per pixel and input cost more than the work for DenseNet's 32-channel parts.
using Row = void (*)(const void* src, int64_t src_stride, const float* scale, const float* shift, void* dst,
                     int64_t dst_stride, int64_t pixels, int64_t count, bool relu, CodeRange codes);

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

KILN_AVX512 inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
KILN_AVX512 inline __m512 load16(const uint16_t* p, __mmask16 m) {  // bfloat16: the high half of a float32
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}
KILN_AVX512 inline __m512 load16(const int8_t* p, __mmask16 m) {  // s8 codes (their scale is in `scale`)
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
}
KILN_AVX512 inline __m512 load16(const uint8_t* p, __mmask16 m) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, p)));
}

// float32 -> bfloat16, rounded to nearest even (as oneDNN's reorder and BFloat16::from_float); a NaN
// stays a (quiet) NaN.
KILN_AVX512 inline __m256i to_bf16(__m512 y) {
  const __m512i bits = _mm512_castps_si512(y);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

template <typename In, Sink kOut>
KILN_AVX512 void row_avx512(const void* src_v, int64_t src_stride, const float* scale, const float* shift, void* dst_v,
                            int64_t dst_stride, int64_t pixels, int64_t count, bool relu, CodeRange codes) {
  const __m512 zero = _mm512_setzero_ps(), inv = _mm512_set1_ps(codes.inv_scale);
  const __m512i lo = _mm512_set1_epi32(codes.bounds.lo), hi = _mm512_set1_epi32(codes.bounds.hi);
  for (int64_t p = 0; p < pixels; ++p) {
    const In* src = static_cast<const In*>(src_v) + p * src_stride;
    const int64_t dst_offset = p * dst_stride;
    for (int64_t i = 0; i < count; i += 16) {
      const int left = static_cast<int>(std::min<int64_t>(16, count - i));
      const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
      __m512 y = _mm512_fmadd_ps(load16(src + i, mask), _mm512_maskz_loadu_ps(mask, scale + i),
                                 _mm512_maskz_loadu_ps(mask, shift + i));
      if (relu) y = _mm512_max_ps(y, zero);
      if constexpr (kOut == Sink::f32) {
        _mm512_mask_storeu_ps(static_cast<float*>(dst_v) + dst_offset + i, mask, y);
      } else if constexpr (kOut == Sink::bf16) {
        _mm256_mask_storeu_epi16(static_cast<uint16_t*>(dst_v) + dst_offset + i, mask, to_bf16(y));
      } else {
        cpu::quantize16_avx512(y, inv, lo, hi, static_cast<uint8_t*>(dst_v) + dst_offset + i, mask);
      }
    }
  }
}

inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) {
  BFloat16 h;
  h.bits = *p;
  return static_cast<float>(h);
}
inline float load1(const int8_t* p) { return static_cast<float>(*p); }
inline float load1(const uint8_t* p) { return static_cast<float>(*p); }

template <typename In, Sink kOut>
void row_portable(const void* src_v, int64_t src_stride, const float* scale, const float* shift, void* dst_v,
                  int64_t dst_stride, int64_t pixels, int64_t count, bool relu, CodeRange codes) {
  for (int64_t p = 0; p < pixels; ++p) {
    const In* src = static_cast<const In*>(src_v) + p * src_stride;
    const int64_t d = p * dst_stride;
    for (int64_t i = 0; i < count; ++i) {
      float y = load1(src + i) * scale[i] + shift[i];
      if (relu && y < 0.0f) y = 0.0f;
      if constexpr (kOut == Sink::f32) {
        static_cast<float*>(dst_v)[d + i] = y;
      } else if constexpr (kOut == Sink::bf16) {
        static_cast<uint16_t*>(dst_v)[d + i] = BFloat16::from_float(y);
      } else {
        static_cast<uint8_t*>(dst_v)[d + i] = cpu::quantize_one(y, codes.inv_scale, codes.bounds);
      }
    }
  }
}

template <typename In>
Row pick_row(CpuIsa isa, Sink out) {
  if (isa == CpuIsa::avx512) {
    switch (out) {
      case Sink::f32: return row_avx512<In, Sink::f32>;
      case Sink::bf16: return row_avx512<In, Sink::bf16>;
      case Sink::codes: return row_avx512<In, Sink::codes>;
    }
  }
  switch (out) {
    case Sink::f32: return row_portable<In, Sink::f32>;
    case Sink::bf16: return row_portable<In, Sink::bf16>;
    case Sink::codes: return row_portable<In, Sink::codes>;
  }
  return nullptr;
}

Row pick_row(CpuIsa isa, Source in, Sink out) {
  switch (in) {
    case Source::f32: return pick_row<float>(isa, out);
    case Source::bf16: return pick_row<uint16_t>(isa, out);
    case Source::s8: return pick_row<int8_t>(isa, out);
    case Source::u8: return pick_row<uint8_t>(isa, out);
  }
  return nullptr;
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

void affine_plane_portable(const float* src, float scale, float shift, float* dst, int64_t count, bool relu) {
  for (int64_t i = 0; i < count; ++i) {
    const float y = src[i] * scale + shift;
    dst[i] = relu && y < 0.0f ? 0.0f : y;
  }
}

// How the kernel reads an input: NHWC float32, bfloat16 or codes, plain NCHW float32, or not at all.
enum class Read { nhwc_f32, nhwc_bf16, nhwc_codes, nchw, other };

Read read_of(const ValueDesc& v) {
  if (!v.present) return Read::other;
  switch (cpu::pixel_order(v)) {
    case PixelOrder::nhwc: return Read::nhwc_f32;
    case PixelOrder::nchw: return Read::nchw;
    case PixelOrder::other:
      return cpu::is_nhwc_bf16(v) ? Read::nhwc_bf16 : cpu::nhwc_codes_of(v) ? Read::nhwc_codes : Read::other;
  }
  return Read::other;
}

Source source_of(const ValueDesc& v) {
  switch (read_of(v)) {
    case Read::nhwc_bf16: return Source::bf16;
    case Read::nhwc_codes: return cpu::nhwc_codes_of(v)->type == QuantType::u8 ? Source::u8 : Source::s8;
    default: return Source::f32;
  }
}

std::optional<std::string> supports_on(const KernelBuild& b, CpuIsa isa) {
  if (b.op != OpKind::ConcatAffine) return "handles ConcatAffine only";
  if (!cpu_isa_available(isa)) return "this CPU (or KILN_CPU_ISA) has no " + std::string(cpu_isa_name(isa));
  if (b.inputs.size() <= kFirstX || b.outputs.size() != 1) return "needs scale, shift, inputs and one output";
  for (size_t i : {kScale, kShift})
    if (!b.inputs[i].present || !b.inputs[i].constant || b.inputs[i].dtype != DType::f32)
      return "scale and shift must be float32 constants";
  const bool nchw = read_of(b.inputs[kFirstX]) == Read::nchw;
  for (size_t i = kFirstX; i < b.inputs.size(); ++i) {
    const Read r = read_of(b.inputs[i]);
    if (r == Read::other) return "inputs must be 4-D NHWC (float32, bfloat16 or u8/s8 codes) or plain float32 NCHW (input " +
                                 std::to_string(i) + " has " + b.inputs[i].layout.describe() + ")";
    if ((r == Read::nchw) != nchw) return "inputs must all be NHWC or all plain NCHW (input " + std::to_string(i) +
                                          " has " + b.inputs[i].layout.describe() + ")";
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
    k->nhwc_ = read_of(b.inputs[kFirstX]) != Read::nchw;
    int64_t offset = 0;
    for (size_t i = kFirstX; i < b.inputs.size(); ++i) {
      k->offsets_.push_back(offset);
      k->channels_.push_back(b.inputs[i].shape[1]);
      k->sources_.push_back(source_of(b.inputs[i]));
      offset += b.inputs[i].shape[1];
    }
    KILN_REQUIRE(offset == k->c_ && b.inputs[kScale].constant->numel() == k->c_ &&
                     b.inputs[kShift].constant->numel() == k->c_,
                 internal, "ConcatAffine channel counts disagree with the inferred output");
    const float* scale = b.inputs[kScale].constant->data<float>();
    const float* shift = b.inputs[kShift].constant->data<float>();
    k->scale_.assign(scale, scale + k->c_);
    k->shift_.assign(shift, shift + k->c_);
    // A code's real value is scale * code: that scale multiplies its channels' affine scale.
    for (size_t i = 0; i < k->sources_.size(); ++i)
      if (const std::optional<QuantParams> q = cpu::nhwc_codes_of(b.inputs[kFirstX + i]))
        for (int64_t c = k->offsets_[i]; c < k->offsets_[i] + k->channels_[i]; ++c) k->scale_[static_cast<size_t>(c)] *= q->scale;
    // Plain NCHW stays float32: its readers convert.
    KILN_ASSIGN(codes, quant_params_from_attrs(*b.attrs, "output"));
    KILN_ASSIGN(bf16_output, bf16_output_from_attrs(*b.attrs));
    if (k->nhwc_ && codes) {
      k->sink_ = Sink::codes;
      k->codes_ = *codes;
      k->range_ = {1.0f / codes->scale, cpu::code_bounds(codes->type)};
      k->out_layout_ = cpu::nhwc_codes_layout(ys, k->threads_, *codes);
    } else if (k->nhwc_ && bf16_output) {
      k->sink_ = Sink::bf16;
      k->out_layout_ = cpu::nhwc_bf16_layout(ys, k->threads_);
    } else {
      k->out_layout_ = k->nhwc_ ? cpu::nhwc_layout(ys, k->threads_) : Layout{};
    }
    // Straight into the output where the activation is ReLU or none; other activations (and float32,
    // activated in place) need the block in float32 first.
    k->direct_ = k->sink_ != Sink::f32 && (k->relu_inline_ || post.empty());
    for (Source source : k->sources_) k->to_sink_.push_back(pick_row(isa, source, k->direct_ ? k->sink_ : Sink::f32));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  std::vector<Layout> output_layouts() const override { return {out_layout_}; }
  // bf16 or codes behind another activation: each thread's block of pixels in float32 first.
  size_t scratch_bytes() const override {
    return sink_ != Sink::f32 && !direct_ ? static_cast<size_t>(threads_ * kBlockPixels * c_) * sizeof(float) : 0;
  }

  Status run(const KernelArgs& args) override {
    if (nhwc_) run_nhwc(args, static_cast<float*>(args.scratch));
    else run_nchw(args, static_cast<float*>(args.outputs[0]));
    return Status::ok();
  }

 private:
  ConcatAffineKernel() = default;

  size_t out_bytes() const { return sink_ == Sink::f32 ? 4 : sink_ == Sink::bf16 ? 2 : 1; }

  // Blocks of pixels; each pixel's output is its inputs' channel vectors side by side.
  void run_nhwc(const KernelArgs& args, float* scratch) const {
    const int64_t pixels = n_ * plane_;
    const int64_t blocks = (pixels + kBlockPixels - 1) / kBlockPixels;
    char* out = static_cast<char*>(args.outputs[0]);
    const size_t ob = out_bytes();
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t p0 = blk * kBlockPixels, p1 = std::min(pixels, p0 + kBlockPixels);
      // Where the rows write: the output itself, or (activation after, then conversion) a float32 block.
      const bool via_block = sink_ != Sink::f32 && !direct_;
      float* block = via_block ? scratch + static_cast<int64_t>(omp_get_thread_num()) * kBlockPixels * c_ : nullptr;
      for (size_t i = 0; i < channels_.size(); ++i) {
        const char* x = static_cast<const char*>(args.inputs[kFirstX + i]) +
                        p0 * channels_[i] * static_cast<int64_t>(source_bytes(sources_[i]));
        void* dst = via_block ? static_cast<void*>(block + offsets_[i])
                              : static_cast<void*>(out + (p0 * c_ + offsets_[i]) * static_cast<int64_t>(ob));
        to_sink_[i](x, channels_[i], scale_.data() + offsets_[i], shift_.data() + offsets_[i], dst, c_, p1 - p0,
                    channels_[i], relu_inline_, range_);
      }
      const int64_t count = (p1 - p0) * c_;
      if (sink_ == Sink::f32) {
        if (!relu_inline_) cpu::apply_activation(isa_, post_, reinterpret_cast<float*>(out) + p0 * c_, count);
      } else if (via_block) {
        cpu::apply_activation(isa_, post_, block, count);
        if (sink_ == Sink::codes) {
          cpu::quantize_to_codes(block, out + p0 * c_, count, range_.inv_scale, codes_.type, 1);
        } else {
          auto* y = reinterpret_cast<uint16_t*>(out) + p0 * c_;
          for (int64_t e = 0; e < count; ++e) y[e] = BFloat16::from_float(block[e]);
        }
      }
    }
  }

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
  Sink sink_ = Sink::f32;
  bool direct_ = false;  // bf16/codes written by the rows themselves (ReLU or no activation)
  QuantParams codes_;
  CodeRange range_;
  int threads_ = 1;
  int64_t n_ = 0, c_ = 0, plane_ = 0;
  std::vector<int64_t> channels_, offsets_;  // per input: its channels and where they start in Y
  std::vector<Source> sources_;              // per input: how its elements are stored
  std::vector<Row> to_sink_;                 // per input: the row function
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

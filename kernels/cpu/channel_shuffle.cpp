// ChannelShuffle (kernels/reference/channel_shuffle.cpp): every output channel copied once from the
// input that holds it. The unfused ShuffleNet graph writes the joined tensor (Concat), its shuffle
// (Transpose) and the parts (Slice), each a full pass, and in plain NCHW, so the convolutions around
// it converted from and to their own layout too (ShuffleNetV2 x1.0 int8 batch 8, one thread: 6.4 of
// 23 ms). Reads and writes:
//   - NHWC (oneDNN's acdb, what the convolutions write here) in float32, bfloat16 or u8/s8 codes of one
//     scale (all inputs alike); the outputs are NHWC in the same storage, so the convolutions reading
//     the parts take them as they are and the chain of shuffles stays in their layout;
//   - plain NCHW float32: each output channel plane is one copy.
// In NHWC a pixel's output channels interleave the inputs' (ShuffleNet: two inputs, two groups), so
// the copy goes channel by channel, in blocks of pixels over the threads.
#include <emmintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/onednn/onednn_common.h"

namespace kiln {
namespace {

using cpu::PixelOrder;

constexpr int64_t kBlockPixels = 64;

// How the inputs are stored (all alike) and so the outputs.
enum class Storage { nchw_f32, nhwc_f32, nhwc_bf16, nhwc_codes, other };

Storage storage_of(const ValueDesc& v) {
  if (!v.present || v.shape.size() != 4) return Storage::other;
  switch (cpu::pixel_order(v)) {
    case PixelOrder::nhwc: return Storage::nhwc_f32;
    case PixelOrder::nchw: return Storage::nchw_f32;
    case PixelOrder::other: break;
  }
  if (cpu::is_nhwc_bf16(v)) return Storage::nhwc_bf16;
  if (cpu::nhwc_codes_of(v)) return Storage::nhwc_codes;
  return Storage::other;
}

size_t element_bytes(Storage s) { return s == Storage::nhwc_bf16 ? 2 : s == Storage::nhwc_codes ? 1 : 4; }

std::optional<std::string> channel_shuffle_supports(const KernelBuild& b) {
  if (b.op != OpKind::ChannelShuffle) return "handles ChannelShuffle only";
  if (b.inputs.empty() || b.outputs.empty()) return "needs inputs and outputs";
  const Storage first = storage_of(b.inputs[0]);
  if (first == Storage::other)
    return "inputs must be 4-D float32 in NHWC (float32, bfloat16 or u8/s8 codes) or plain NCHW (input 0 has " +
           b.inputs[0].layout.describe() + ")";
  const std::optional<QuantParams> codes = cpu::nhwc_codes_of(b.inputs[0]);
  for (size_t i = 1; i < b.inputs.size(); ++i) {
    if (storage_of(b.inputs[i]) != first) return "input " + std::to_string(i) + " is not stored as input 0 is";
    const std::optional<QuantParams> q = cpu::nhwc_codes_of(b.inputs[i]);
    if (codes && (!q || q->type != codes->type || q->scale != codes->scale))
      return "input " + std::to_string(i) + "'s codes have another type or scale than input 0's";
  }
  // Every value [N, C_i, H, W] with one N, H and W, and as many channels out as in (the kernel indexes by
  // these shapes; a plan file could declare others).
  const auto same_pixels = [&](const ValueDesc& v) {
    return v.shape[0] == b.inputs[0].shape[0] && v.shape[2] == b.inputs[0].shape[2] && v.shape[3] == b.inputs[0].shape[3];
  };
  int64_t channels_in = 0, channels_out = 0;
  for (const ValueDesc& in : b.inputs) {
    if (!same_pixels(in)) return "inputs differ outside the channel axis";
    channels_in += in.shape[1];
  }
  for (const ValueDesc& out : b.outputs) {
    if (!out.present || out.dtype != DType::f32 || out.shape.size() != 4 || !same_pixels(out))
      return "outputs must be 4-D float32 with the inputs' batch and pixels";
    channels_out += out.shape[1];
  }
  if (channels_in != channels_out) return "the outputs hold another number of channels than the inputs";
  auto groups = b.attrs->get_int("groups", 1);
  if (!groups || *groups < 1 || channels_in % *groups != 0) return "needs groups >= 1 dividing the channels";
  return std::nullopt;
}

// Where a shuffled channel comes from.
struct Source {
  int input = 0;
  int64_t channel = 0;
};

// dst[2t] = a[t], dst[2t + 1] = b[t] for t < count, elements of `Bytes` bytes: ShuffleNet's two groups.
// The unpack instructions interleave 16 bytes of each at a time (the table loop below ran at ~1.5
// cycles an element, whatever its size: 0.39 ms for ShuffleNet's 0.7 M stage-2 values).
template <size_t Bytes>
void interleave2(const char* a, const char* b, char* dst, int64_t count) {
  constexpr int64_t kPerVector = 16 / Bytes;
  int64_t t = 0;
  for (; t + kPerVector <= count; t += kPerVector) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + t * Bytes));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + t * Bytes));
    __m128i lo, hi;
    if constexpr (Bytes == 4) lo = _mm_unpacklo_epi32(x, y), hi = _mm_unpackhi_epi32(x, y);
    else if constexpr (Bytes == 2) lo = _mm_unpacklo_epi16(x, y), hi = _mm_unpackhi_epi16(x, y);
    else lo = _mm_unpacklo_epi8(x, y), hi = _mm_unpackhi_epi8(x, y);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * t * Bytes), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * t * Bytes + 16), hi);
  }
  for (; t < count; ++t) {
    std::memcpy(dst + 2 * t * Bytes, a + t * Bytes, Bytes);
    std::memcpy(dst + (2 * t + 1) * Bytes, b + t * Bytes, Bytes);
  }
}

class ChannelShuffleKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelBuild& b) {
    auto k = std::unique_ptr<ChannelShuffleKernel>(new ChannelShuffleKernel());
    KILN_ASSIGN(groups, b.attrs->get_int("groups", 1));
    k->threads_ = std::max(1, b.threads);
    k->storage_ = storage_of(b.inputs[0]);
    k->elem_ = element_bytes(k->storage_);
    const Shape& x0 = b.inputs[0].shape;
    k->n_ = x0[0];
    k->plane_ = x0[2] * x0[3];
    std::vector<Source> joined;
    for (size_t i = 0; i < b.inputs.size(); ++i) {
      k->in_channels_.push_back(b.inputs[i].shape[1]);
      for (int64_t c = 0; c < b.inputs[i].shape[1]; ++c) joined.push_back({static_cast<int>(i), c});
    }
    const int64_t c = static_cast<int64_t>(joined.size());
    KILN_REQUIRE(c % groups == 0, internal, "ChannelShuffle: ", c, " channels, not a multiple of groups ", groups);
    int64_t j = 0;
    for (const ValueDesc& out : b.outputs) {
      std::vector<Source> sources;
      for (int64_t k2 = 0; k2 < out.shape[1]; ++k2, ++j)
        sources.push_back(joined[static_cast<size_t>((j % groups) * (c / groups) + j / groups)]);
      k->sources_.push_back(std::move(sources));
      switch (k->storage_) {
        case Storage::nhwc_f32: k->layouts_.push_back(cpu::nhwc_layout(out.shape, k->threads_)); break;
        case Storage::nhwc_bf16: k->layouts_.push_back(cpu::nhwc_bf16_layout(out.shape, k->threads_)); break;
        case Storage::nhwc_codes:
          k->layouts_.push_back(cpu::nhwc_codes_layout(out.shape, k->threads_, *cpu::nhwc_codes_of(b.inputs[0])));
          break;
        default: k->layouts_.emplace_back(); break;
      }
    }
    KILN_REQUIRE(j == c, internal, "ChannelShuffle outputs hold ", j, " channels, the inputs ", c);
    for (size_t o = 0; o < k->sources_.size(); ++o)
      for (int64_t ch = 0; ch < static_cast<int64_t>(k->sources_[o].size()); ++ch) k->planes_.emplace_back(o, ch);
    // Two groups, two inputs of C/2 channels, every output an even run: each output interleaves a
    // run of input 0's channels with the same run of input 1's.
    k->interleave_ = groups == 2 && b.inputs.size() == 2 && k->in_channels_[0] == k->in_channels_[1];
    for (const std::vector<Source>& sources : k->sources_)
      k->interleave_ = k->interleave_ && sources.size() % 2 == 0 && sources[0].input == 0;
    return std::unique_ptr<Kernel>(std::move(k));
  }

  std::vector<Layout> output_layouts() const override { return layouts_; }

  Status run(const KernelArgs& args) override {
    if (storage_ == Storage::nchw_f32) run_nchw(args);
    else if (elem_ == 4) run_nhwc<uint32_t>(args);
    else if (elem_ == 2) run_nhwc<uint16_t>(args);
    else run_nhwc<uint8_t>(args);
    return Status::ok();
  }

 private:
  ChannelShuffleKernel() = default;

  template <typename T>
  void run_nhwc(const KernelArgs& args) const {
    const int64_t pixels = n_ * plane_, blocks = (pixels + kBlockPixels - 1) / kBlockPixels;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t p0 = blk * kBlockPixels, p1 = std::min(pixels, p0 + kBlockPixels);
      for (size_t o = 0; o < sources_.size(); ++o) {
        const std::vector<Source>& sources = sources_[o];
        const int64_t oc = static_cast<int64_t>(sources.size());
        T* dst = static_cast<T*>(args.outputs[o]) + p0 * oc;
        if (interleave_) {
          const int64_t ic = in_channels_[0], first = sources[0].channel;
          const T* a = static_cast<const T*>(args.inputs[0]) + first;
          const T* b = static_cast<const T*>(args.inputs[1]) + first;
          for (int64_t p = p0; p < p1; ++p, dst += oc)
            interleave2<sizeof(T)>(reinterpret_cast<const char*>(a + p * ic), reinterpret_cast<const char*>(b + p * ic),
                                   reinterpret_cast<char*>(dst), oc / 2);
          continue;
        }
        for (int64_t p = p0; p < p1; ++p, dst += oc)
          for (int64_t k = 0; k < oc; ++k) {
            const Source& s = sources[static_cast<size_t>(k)];
            const int64_t ic = in_channels_[static_cast<size_t>(s.input)];
            dst[k] = static_cast<const T*>(args.inputs[static_cast<size_t>(s.input)])[p * ic + s.channel];
          }
      }
    }
  }

  void run_nchw(const KernelArgs& args) const {
    const int64_t per_image = static_cast<int64_t>(planes_.size()), bytes = plane_ * static_cast<int64_t>(elem_);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t q = 0; q < n_ * per_image; ++q) {
      const int64_t b = q / per_image;
      const auto [o, k] = planes_[static_cast<size_t>(q % per_image)];
      const Source& s = sources_[o][static_cast<size_t>(k)];
      const int64_t oc = static_cast<int64_t>(sources_[o].size()), ic = in_channels_[static_cast<size_t>(s.input)];
      std::memcpy(static_cast<char*>(args.outputs[o]) + (b * oc + k) * bytes,
                  static_cast<const char*>(args.inputs[static_cast<size_t>(s.input)]) + (b * ic + s.channel) * bytes,
                  static_cast<size_t>(bytes));
    }
  }

  Storage storage_ = Storage::other;
  bool interleave_ = false;  // interleave2 serves every output
  size_t elem_ = 4;
  int threads_ = 1;
  int64_t n_ = 0, plane_ = 0;
  std::vector<int64_t> in_channels_;
  std::vector<std::vector<Source>> sources_;  // per output, per channel
  std::vector<std::pair<size_t, int64_t>> planes_;  // every (output, channel), in order: an image's NCHW copies
  std::vector<Layout> layouts_;
};

Result<std::unique_ptr<Kernel>> channel_shuffle_create(const KernelBuild& b) {
  return onednn::guarded_create("cpu.channel_shuffle", [&] { return ChannelShuffleKernel::create(b); });
}

}  // namespace

const KernelImpl kCpuChannelShuffle{"cpu.channel_shuffle", channel_shuffle_supports, channel_shuffle_create};

}  // namespace kiln

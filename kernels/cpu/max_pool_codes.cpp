// MaxPool over stored codes: a float32, bfloat16, u8 or s8 activation in oneDNN's NHWC (acdb) or channel
// block (aBcd16b, aBcd8b) layout, 2 spatial dims, pooled on its codes with no conversion. oneDNN 2.6's bf16
// pooling converts every element and its u8/s8 pooling runs no faster than float32 (AMX Xeon,
// 3x3 s1 64x112x112 batch 8, 1 thread: f32 6.7 ms, u8 6.7, bf16 8.6; here bf16 3.4); GoogLeNet bf16
// at batch 1 spent a third of its run in its 13 max pools. Its float32 pool too is slower than this
// loop over integer order keys (GoogLeNet batch 8, 1 thread, the 13 pools: 14.5 -> 9.6 ms).
//
// Codes order like their values: u8 and s8 directly (a positive scale, no zero point), and float32 and
// bf16 bits as signed integers once negative ones have their magnitude bits flipped (sign-magnitude
// to two's complement order), the same flip mapping the winner back. Exact, like any max; a quantized
// output keeps the input's scale. -0 sorts below +0; a NaN of either sign sorts above +inf, so it
// wins its windows as in the reference executor (the default NaN x86 makes is negative). Padding
// lanes of a channel block (C not a multiple of the block) hold zeros and pool to zeros.
//
// Windows that overlap along a row with stride 1 (3x3 s1) are pooled down the columns first, then across
// (pool_row_separable): each input element's key is made once per window row instead of once per window.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/reference/window.h"

namespace kiln {
namespace {

using onednn::md;
using Tag = dnnl::memory::format_tag;
using data_type = dnnl::memory::data_type;

// Per element type: the stored type, the order key of a code, the code of a key (the winner's) and
// the key below every code.
//
// Float32 and bf16 bits order as signed integers once a negative one's magnitude bits are flipped
// (sign-magnitude to two's complement), except that NaNs with the sign bit set (x86's default NaN)
// land below -inf. Subtracting their count (wrapping) moves them above every other key: -inf becomes
// the lowest key and every NaN ranks above +inf, so a NaN wins its windows as in the reference. A
// bijection, so the winner's bits come back exactly; no compare, so the loops vectorize as before.
template <class Signed, class Unsigned, int kBits>
struct FloatCodes {
  using T = Signed;
  static constexpr Unsigned kMagnitude = static_cast<Unsigned>((Unsigned{1} << (kBits - 1)) - 1);
  static constexpr Unsigned kNegativeNans = kBits == 32 ? 0x7fffff : 0x7f;  // -NaN bit patterns
  static T flip(T v) { return static_cast<T>(v ^ ((v >> (kBits - 1)) & kMagnitude)); }
  static T key(T code) { return static_cast<T>(static_cast<Unsigned>(flip(code)) - kNegativeNans); }
  static T code(T key) { return flip(static_cast<T>(static_cast<Unsigned>(key) + kNegativeNans)); }
  static constexpr T lowest() { return std::numeric_limits<T>::min(); }
};
using Bf16Codes = FloatCodes<int16_t, uint16_t, 16>;
using F32Codes = FloatCodes<int32_t, uint32_t, 32>;
struct S8Codes {
  using T = int8_t;
  static T key(T code) { return code; }
  static T code(T key) { return key; }
  static constexpr T lowest() { return std::numeric_limits<T>::min(); }
};
struct U8Codes {
  using T = uint8_t;
  static T key(T code) { return code; }
  static T code(T key) { return key; }
  static constexpr T lowest() { return 0; }
};

struct PoolDims {
  int64_t n = 0, c = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, dilation[2] = {1, 1}, pad[2] = {0, 0};
};

// The layout of a value this kernel reads: its element type (bf16, u8 or s8), tag (acdb, aBcd16b or
// aBcd8b) and channel block (0 for acdb); nullopt for any other.
struct CodesLayout {
  data_type type;
  Tag tag;
  int64_t block;
};
std::optional<CodesLayout> codes_layout(const ValueDesc& v) {
  if (v.dtype != DType::f32 || v.shape.size() != 4 || !onednn::is_onednn(v)) return std::nullopt;
  const md desc = onednn::value_desc(v);
  const data_type type = desc.data_type();
  if (type != data_type::f32 && type != data_type::bf16 && type != data_type::u8 && type != data_type::s8) return std::nullopt;
  for (const auto& [tag, block] : {std::pair{Tag::acdb, 0}, std::pair{Tag::aBcd16b, 16}, std::pair{Tag::aBcd8b, 8}})
    if (desc == md(onednn::to_dims(v.shape), type, tag)) return CodesLayout{type, tag, block};
  return std::nullopt;
}

Result<PoolDims> pool_dims(const KernelBuild& b) {
  const Shape& x = b.inputs[0].shape;
  const Shape& y = b.outputs[0].shape;
  KILN_ASSIGN(wa, ref::read_window_attrs(*b.attrs, 2, true, true));
  PoolDims p;
  p.n = x[0], p.c = x[1], p.in_h = x[2], p.in_w = x[3], p.out_h = y[2], p.out_w = y[3];
  for (size_t d = 0; d < 2; ++d) {
    KILN_ASSIGN(dim, ref::window_dim(wa, d, x[d + 2], wa.kernel[d]));
    KILN_REQUIRE(dim.out == y[d + 2], internal, "output dim ", d, " is ", y[d + 2], ", expected ", dim.out);
    p.kernel[d] = wa.kernel[d];
    p.stride[d] = wa.strides[d];
    p.dilation[d] = wa.dilations[d];
    p.pad[d] = dim.pad_begin;
  }
  return p;
}

// The max over one window of `n` lanes starting at `x`: taps ty x tx of the window at input row
// iy0, column ix0. N > 0: exactly N lanes, a constant the compiler keeps in registers; N == 0: `n`
// lanes (a tail).
template <class Codes, int N>
__attribute__((always_inline)) inline void window_max(const PoolDims& p, const typename Codes::T* x, typename Codes::T* dst,
                                                      int64_t lanes, int64_t n, const ref::WindowTaps& ty,
                                                      const ref::WindowTaps& tx, int64_t iy0, int64_t ix0) {
  using T = typename Codes::T;
  constexpr int kMax = N > 0 ? N : 64;
  const int64_t count = N > 0 ? N : n;
  T acc[kMax];
  for (int l = 0; l < kMax; ++l) acc[l] = Codes::lowest();
  for (int64_t ky = ty.first; ky < ty.last; ++ky) {
    const T* src_row = x + (iy0 + ky * p.dilation[0]) * p.in_w * lanes;
    for (int64_t kx = tx.first; kx < tx.last; ++kx) {
      const T* src = src_row + (ix0 + kx * p.dilation[1]) * lanes;
      for (int64_t l = 0; l < count; ++l) acc[l] = std::max(acc[l], Codes::key(src[l]));
    }
  }
  for (int64_t l = 0; l < count; ++l) dst[l] = Codes::code(acc[l]);
}

// One output row of one plane, a 512-bit vector of lanes at a time, then halves and quarters (the
// portable entry point below; on AVX-512 the masked rows replace it).
template <class Codes>
__attribute__((always_inline)) inline void pool_row(const PoolDims& p, const void* x_bytes, void* y_bytes, int64_t oy,
                                                    int64_t lanes) {
  using T = typename Codes::T;
  constexpr int64_t kVector = 64 / sizeof(T);
  const T* x = static_cast<const T*>(x_bytes);
  T* y = static_cast<T*>(y_bytes);
  const int64_t iy0 = oy * p.stride[0] - p.pad[0];
  const ref::WindowTaps ty = ref::window_taps(iy0, p.dilation[0], p.kernel[0], p.in_h);
  for (int64_t ox = 0; ox < p.out_w; ++ox) {
    const int64_t ix0 = ox * p.stride[1] - p.pad[1];
    const ref::WindowTaps tx = ref::window_taps(ix0, p.dilation[1], p.kernel[1], p.in_w);
    T* dst = y + ox * lanes;
    int64_t c = 0;
    for (; c + kVector <= lanes; c += kVector) window_max<Codes, kVector>(p, x + c, dst + c, lanes, kVector, ty, tx, iy0, ix0);
    if (c + kVector / 2 <= lanes) window_max<Codes, kVector / 2>(p, x + c, dst + c, lanes, kVector / 2, ty, tx, iy0, ix0), c += kVector / 2;
    if (c + kVector / 4 <= lanes) window_max<Codes, kVector / 4>(p, x + c, dst + c, lanes, kVector / 4, ty, tx, iy0, ix0), c += kVector / 4;
    if (c + 8 <= lanes) window_max<Codes, 8>(p, x + c, dst + c, lanes, 8, ty, tx, iy0, ix0), c += 8;
    if (c < lanes) window_max<Codes, 0>(p, x + c, dst + c, lanes, lanes - c, ty, tx, iy0, ix0);
  }
}

// The same row for windows that overlap along the row: the max down each input column's window taps
// first, as order keys, into `columns` (in_w x lanes), then across the window's columns. A 3x3 s1
// window makes 3 keys and reads 3 more vectors per output vector instead of making 9 keys.
template <class Codes>
__attribute__((always_inline)) inline void pool_row_separable(const PoolDims& p, const void* x_bytes, void* y_bytes,
                                                              int64_t oy, int64_t lanes, void* columns_bytes) {
  using T = typename Codes::T;
  const T* x = static_cast<const T*>(x_bytes);
  T* y = static_cast<T*>(y_bytes);
  T* columns = static_cast<T*>(columns_bytes);
  const int64_t row_elements = p.in_w * lanes;
  const int64_t iy0 = oy * p.stride[0] - p.pad[0];
  const ref::WindowTaps ty = ref::window_taps(iy0, p.dilation[0], p.kernel[0], p.in_h);
  const T* first = x + (iy0 + ty.first * p.dilation[0]) * row_elements;
  for (int64_t i = 0; i < row_elements; ++i) columns[i] = Codes::key(first[i]);
  for (int64_t ky = ty.first + 1; ky < ty.last; ++ky) {
    const T* src = x + (iy0 + ky * p.dilation[0]) * row_elements;
    for (int64_t i = 0; i < row_elements; ++i) columns[i] = std::max(columns[i], Codes::key(src[i]));
  }
  for (int64_t ox = 0; ox < p.out_w; ++ox) {
    const int64_t ix0 = ox * p.stride[1] - p.pad[1];
    const ref::WindowTaps tx = ref::window_taps(ix0, p.dilation[1], p.kernel[1], p.in_w);
    T* dst = y + ox * lanes;
    const T* col = columns + (ix0 + tx.first * p.dilation[1]) * lanes;
    for (int64_t l = 0; l < lanes; ++l) dst[l] = col[l];
    for (int64_t kx = tx.first + 1; kx < tx.last; ++kx) {
      col = columns + (ix0 + kx * p.dilation[1]) * lanes;
      for (int64_t l = 0; l < lanes; ++l) dst[l] = std::max(dst[l], col[l]);
    }
    for (int64_t l = 0; l < lanes; ++l) dst[l] = Codes::code(dst[l]);
  }
}

// One output row of one plane: x and y point at the plane's first element; `columns` is scratch of
// in_w x lanes elements (used by the separable rows).
using PoolRowFn = void (*)(const PoolDims&, const void*, void*, int64_t, int64_t, void*);

// Separable rows on AVX-512 (the direct ones there are pool_row_masked_avx512, below).
template <class Codes>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void pool_row_separable_avx512(const PoolDims& p, const void* x,
                                                                                            void* y, int64_t oy, int64_t lanes,
                                                                                            void* columns) {
  pool_row_separable<Codes>(p, x, y, oy, lanes, columns);
}

// The direct row on AVX-512 with masked vectors: up to one vector of a window's channels at a time, the
// order keys made in registers (Codes::key, vectorized below). The ladder of pool_row leaves narrow tails
// (24 channels: 16 + 8 lanes) that the compiler turned into scalar code: ShuffleNetV2's stem pool (24
// channels, 3x3 s2, batch 8, 1 thread) ran u8 1.2-1.4 ms, bf16 1.4, slower than float32 (0.9-1.0) on a
// quarter or half of the bytes.
#define KILN_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl")))

template <class Codes>
struct MaskedCodes;
template <>
struct MaskedCodes<U8Codes> {
  static constexpr int64_t kLanes = 64;
  using Mask = __mmask64;
  KILN_AVX512BW static __m512i load(Mask m, const void* p) { return _mm512_maskz_loadu_epi8(m, p); }
  KILN_AVX512BW static void store(void* p, Mask m, __m512i v) { _mm512_mask_storeu_epi8(p, m, v); }
  KILN_AVX512BW static __m512i lowest() { return _mm512_setzero_si512(); }
  KILN_AVX512BW static __m512i key(__m512i v) { return v; }
  KILN_AVX512BW static __m512i code(__m512i k) { return k; }
  KILN_AVX512BW static __m512i max(__m512i a, __m512i b) { return _mm512_max_epu8(a, b); }
};
template <>
struct MaskedCodes<S8Codes> : MaskedCodes<U8Codes> {
  KILN_AVX512BW static __m512i lowest() { return _mm512_set1_epi8(-128); }
  KILN_AVX512BW static __m512i max(__m512i a, __m512i b) { return _mm512_max_epi8(a, b); }
};
// bfloat16 and float32: FloatCodes' key (flip a negative's magnitude bits, then move the -NaNs up), per lane.
template <>
struct MaskedCodes<Bf16Codes> {
  static constexpr int64_t kLanes = 32;
  using Mask = __mmask32;
  KILN_AVX512BW static __m512i load(Mask m, const void* p) { return _mm512_maskz_loadu_epi16(m, p); }
  KILN_AVX512BW static void store(void* p, Mask m, __m512i v) { _mm512_mask_storeu_epi16(p, m, v); }
  KILN_AVX512BW static __m512i lowest() { return _mm512_set1_epi16(std::numeric_limits<int16_t>::min()); }
  KILN_AVX512BW static __m512i flip(__m512i v) {
    return _mm512_xor_si512(v, _mm512_and_si512(_mm512_srai_epi16(v, 15), _mm512_set1_epi16(0x7fff)));
  }
  KILN_AVX512BW static __m512i key(__m512i v) { return _mm512_sub_epi16(flip(v), _mm512_set1_epi16(Bf16Codes::kNegativeNans)); }
  KILN_AVX512BW static __m512i code(__m512i k) { return flip(_mm512_add_epi16(k, _mm512_set1_epi16(Bf16Codes::kNegativeNans))); }
  KILN_AVX512BW static __m512i max(__m512i a, __m512i b) { return _mm512_max_epi16(a, b); }
};
template <>
struct MaskedCodes<F32Codes> {
  static constexpr int64_t kLanes = 16;
  using Mask = __mmask16;
  KILN_AVX512BW static __m512i load(Mask m, const void* p) { return _mm512_maskz_loadu_epi32(m, p); }
  KILN_AVX512BW static void store(void* p, Mask m, __m512i v) { _mm512_mask_storeu_epi32(p, m, v); }
  KILN_AVX512BW static __m512i lowest() { return _mm512_set1_epi32(std::numeric_limits<int32_t>::min()); }
  KILN_AVX512BW static __m512i flip(__m512i v) {
    return _mm512_xor_si512(v, _mm512_and_si512(_mm512_srai_epi32(v, 31), _mm512_set1_epi32(0x7fffffff)));
  }
  KILN_AVX512BW static __m512i key(__m512i v) {
    return _mm512_sub_epi32(flip(v), _mm512_set1_epi32(static_cast<int>(F32Codes::kNegativeNans)));
  }
  KILN_AVX512BW static __m512i code(__m512i k) {
    return flip(_mm512_add_epi32(k, _mm512_set1_epi32(static_cast<int>(F32Codes::kNegativeNans))));
  }
  KILN_AVX512BW static __m512i max(__m512i a, __m512i b) { return _mm512_max_epi32(a, b); }
};

template <class Codes>
KILN_AVX512BW void pool_row_masked_avx512(const PoolDims& p, const void* x_bytes, void* y_bytes, int64_t oy, int64_t lanes,
                                          void*) {
  using V = MaskedCodes<Codes>;
  using T = typename Codes::T;
  const T* x = static_cast<const T*>(x_bytes);
  T* y = static_cast<T*>(y_bytes);
  const int64_t iy0 = oy * p.stride[0] - p.pad[0];
  const ref::WindowTaps ty = ref::window_taps(iy0, p.dilation[0], p.kernel[0], p.in_h);
  for (int64_t ox = 0; ox < p.out_w; ++ox) {
    const int64_t ix0 = ox * p.stride[1] - p.pad[1];
    const ref::WindowTaps tx = ref::window_taps(ix0, p.dilation[1], p.kernel[1], p.in_w);
    for (int64_t c = 0; c < lanes; c += V::kLanes) {
      const int64_t n = std::min<int64_t>(V::kLanes, lanes - c);
      const auto mask = static_cast<typename V::Mask>(n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1);
      __m512i acc = V::lowest();
      // Whole vectors load and store unmasked: masked accesses cost more on AMD Zen 5 (the 24-channel float32
      // stem pool of ShuffleNetV2, batch 8, 1 thread: 1.48 ms with every access masked).
      const bool whole = n == V::kLanes;
      for (int64_t ky = ty.first; ky < ty.last; ++ky) {
        const T* src_row = x + (iy0 + ky * p.dilation[0]) * p.in_w * lanes + c;
        for (int64_t kx = tx.first; kx < tx.last; ++kx) {
          const T* src = src_row + (ix0 + kx * p.dilation[1]) * lanes;
          acc = V::max(acc, V::key(whole ? _mm512_loadu_si512(src) : V::load(mask, src)));
        }
      }
      // A narrow tail stores a whole vector too where the lanes beyond it fall on this row's later pixels,
      // which their own stores overwrite next (0.85-0.96 ms above with whole vectors alone, 0.78-0.89 with both).
      if (whole || (ox * lanes + c + V::kLanes <= p.out_w * lanes)) _mm512_storeu_si512(y + ox * lanes + c, V::code(acc));
      else V::store(y + ox * lanes + c, mask, V::code(acc));
    }
  }
}

template <class Codes, bool kSeparable>
void pool_row_portable(const PoolDims& p, const void* x, void* y, int64_t oy, int64_t lanes, void* columns) {
  if constexpr (kSeparable) pool_row_separable<Codes>(p, x, y, oy, lanes, columns);
  else pool_row<Codes>(p, x, y, oy, lanes);
}

// Separable when windows overlap along the row with stride 1 (GoogLeNet batch 8, 1 thread, its 13
// pools: bf16 5.2 -> 3.9 ms, u8 2.4 -> 1.7). With stride 2 (3x3 s2) the direct loop was faster (ResNet-18
// batch 8's stem pool, f32: separable 3.4 ms, direct 2.8, oneDNN's 3.1).
bool separable(const PoolDims& p) { return p.stride[1] == 1 && p.kernel[1] > 1; }

template <class Codes>
PoolRowFn row_for_this_cpu(const PoolDims& p) {
  const bool avx512 = cpu_isa_available(CpuIsa::avx512);
  if (separable(p)) return avx512 ? pool_row_separable_avx512<Codes> : pool_row_portable<Codes, true>;
  return avx512 ? pool_row_masked_avx512<Codes> : pool_row_portable<Codes, false>;
}

class MaxPoolCodesKernel final : public Kernel {
 public:
  MaxPoolCodesKernel(const PoolDims& p, CodesLayout codes, std::optional<QuantParams> quant, const Shape& y_shape, int threads)
      : p_(p), block_(codes.block), threads_(std::max(1, threads)) {
    const md y_desc(onednn::to_dims(y_shape), codes.type, codes.tag);
    switch (codes.type) {
      case data_type::bf16: row_ = row_for_this_cpu<Bf16Codes>(p), element_bytes_ = 2; break;
      case data_type::s8: row_ = row_for_this_cpu<S8Codes>(p), element_bytes_ = 1; break;
      case data_type::f32: row_ = row_for_this_cpu<F32Codes>(p), element_bytes_ = 4; break;
      default: row_ = row_for_this_cpu<U8Codes>(p), element_bytes_ = 1; break;
    }
    if (separable(p)) column_bytes_ = p.in_w * (block_ ? block_ : p.c) * element_bytes_;
    layout_ = quant ? onednn::layout_of(y_desc, y_shape, threads_, quant->scale) : onednn::layout_of(y_desc, y_shape, threads_);
  }
  std::vector<Layout> output_layouts() const override { return {layout_}; }
  size_t scratch_bytes() const override { return static_cast<size_t>(column_bytes_ * threads_); }

  Status run(const KernelArgs& args) override {
    const auto* x = static_cast<const char*>(args.inputs[0]);
    auto* y = static_cast<char*>(args.outputs[0]);
    // A plane is one image (NHWC: every channel per pixel) or one channel block of one image.
    const int64_t lanes = block_ ? block_ : p_.c;
    const int64_t planes = block_ ? p_.n * ((p_.c + block_ - 1) / block_) : p_.n;
    const int64_t rows = planes * p_.out_h;
    const int64_t in_plane = p_.in_h * p_.in_w * lanes * element_bytes_, out_row = p_.out_w * lanes * element_bytes_;
    const int64_t work = rows * p_.out_w * lanes * p_.kernel[0] * p_.kernel[1];
#pragma omp parallel num_threads(threads_) if (work > 32768)
    {
      char* columns = static_cast<char*>(args.scratch) + omp_get_thread_num() * column_bytes_;
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t plane = row / p_.out_h, oy = row % p_.out_h;
        row_(p_, x + plane * in_plane, y + row * out_row, oy, lanes, columns);
      }
    }
    return Status::ok();
  }

 private:
  PoolDims p_;
  int64_t block_;  // 0: NHWC
  int threads_;
  PoolRowFn row_ = nullptr;
  int64_t element_bytes_ = 1;
  Layout layout_;
  int64_t column_bytes_ = 0;  // a row of column maxima per thread in the scratch (separable windows), 0 otherwise
};

std::optional<std::string> max_pool_codes_supports(const KernelBuild& b) {
  if (b.op != OpKind::MaxPool) return "handles MaxPool only";
  if (b.inputs.empty() || b.outputs.empty()) return "needs X and Y";
  if (b.outputs.size() > 1 && b.outputs[1].present) return "the Indices output is not supported";
  if (!codes_layout(b.inputs[0])) return "needs a float32, bf16, u8 or s8 input in oneDNN's acdb, aBcd16b or aBcd8b layout, 2 spatial dims";
  if (b.outputs[0].dtype != DType::f32 || b.outputs[0].shape.size() != 4) return "needs a float32 [N, C, H, W] output";
  auto p = pool_dims(b);
  if (!p) return p.error().message;
  for (int d = 0; d < 2; ++d)
    if (!ref::every_window_sees_input(d == 0 ? p->in_h : p->in_w, p->kernel[d], p->stride[d], p->dilation[d], p->pad[d],
                                      d == 0 ? p->out_h : p->out_w))
      return "a window sees no input element";
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> max_pool_codes_create(const KernelBuild& b) {
  KILN_ASSIGN(p, pool_dims(b));
  return std::unique_ptr<Kernel>(std::make_unique<MaxPoolCodesKernel>(p, *codes_layout(b.inputs[0]), onednn::quant_of(b.inputs[0]),
                                                                      b.outputs[0].shape, b.threads));
}

}  // namespace

const KernelImpl kCpuMaxPoolCodes{"cpu.max_pool_codes", max_pool_codes_supports, max_pool_codes_create};

}  // namespace kiln

#include "kernels/cpu/depthwise_rows.h"

#include "kernels/cpu/activation.h"

#include <immintrin.h>

#include <algorithm>
#include <utility>

namespace kiln::cpu {
namespace {

// The taps of output pixel (oy, ox) that fall inside the input: [u0, u1) x [v0, v1).
struct Window {
  int64_t u0, u1, v0, v1, iy, ix;  // iy, ix: input position of tap (0, 0)
};

Window window(const DepthwiseGeometry& g, int64_t oy, int64_t ox) {
  Window w;
  w.iy = oy * g.sh - g.pt;
  w.ix = ox * g.sw - g.pl;
  w.u0 = std::max<int64_t>(0, -w.iy);
  w.u1 = std::min(g.kh, g.h - w.iy);
  w.v0 = std::max<int64_t>(0, -w.ix);
  w.v1 = std::min(g.kw, g.w - w.ix);
  return w;
}

// The output pixels of row `oy` whose window lies inside the input horizontally: [lo, hi).
std::pair<int64_t, int64_t> interior_columns(const DepthwiseGeometry& g) {
  int64_t lo = 0;
  while (lo < g.ow && lo * g.sw - g.pl < 0) ++lo;
  int64_t hi = lo;
  while (hi < g.ow && hi * g.sw - g.pl + g.kw <= g.w) ++hi;
  return {lo, hi};
}

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

struct Avx512Epilogue {
  bool relu, clip, vector_act;
  __m512 lo, hi;
};

KILN_AVX512 inline __m512 finish_avx512(const Avx512Epilogue& e, __m512 acc, const float* scale, int64_t c0,
                                        __mmask16 mask) {
  if (e.relu) acc = _mm512_max_ps(acc, e.lo);
  else if (e.clip) acc = _mm512_min_ps(_mm512_max_ps(acc, e.lo), e.hi);
  if (scale && e.vector_act) acc = _mm512_mul_ps(acc, _mm512_maskz_loadu_ps(mask, scale + c0));
  return acc;
}

// One output pixel whose window may be clipped by the borders.
KILN_AVX512 void edge_avx512(const PackedDepthwise& dw, const Avx512Epilogue& e, const float* x, int64_t oy, int64_t ox,
                             const float* scale, float* out, int64_t first) {
  const DepthwiseGeometry& g = dw.g;
  const Window win = window(g, oy, ox);
  float* dst = out + (ox - first) * g.c;
  for (int64_t c0 = 0; c0 < g.c; c0 += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, g.c - c0));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    __m512 acc = _mm512_loadu_ps(dw.bias.data() + c0);
    for (int64_t u = win.u0; u < win.u1; ++u) {
      const float* row = x + ((win.iy + u) * g.w + win.ix) * g.c + c0;
      const float* tap = dw.taps.data() + (u * g.kw) * dw.cpad + c0;
      for (int64_t v = win.v0; v < win.v1; ++v)
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, row + v * g.c), _mm512_loadu_ps(tap + v * dw.cpad), acc);
    }
    _mm512_mask_storeu_ps(dst + c0, mask, finish_avx512(e, acc, scale, c0, mask));
  }
}

// 16 channels from c0 of a vector: unmasked where all 16 are the value's (kFull), since a masked load or store
// costs more even with every lane set (Zen 5); masked for the last, partial vector.
template <bool kFull>
KILN_AVX512 inline __m512 load_lanes(const float* p, __mmask16 mask) {
  if constexpr (kFull) return _mm512_loadu_ps(p);
  else return _mm512_maskz_loadu_ps(mask, p);
}
template <bool kFull>
KILN_AVX512 inline void store_lanes(float* p, __mmask16 mask, __m512 v) {
  if constexpr (kFull) _mm512_storeu_ps(p, v);
  else _mm512_mask_storeu_ps(p, mask, v);
}

// kPixels interior output pixels (windows inside the input horizontally) starting at ox, channels [c0, c0 + 16)
// (kFull) or the `mask`ed ones of them. With the kernel width and stride known (kKw > 0), each input vector
// of a kernel row is loaded once and used by every pixel whose window covers it; otherwise each tap loads
// its input.
template <int kPixels, int kKw, int kSw, bool kFull>
KILN_AVX512 void block_channels_avx512(const PackedDepthwise& dw, const Avx512Epilogue& e, const float* x, const Window& rows,
                                       int64_t ox, int64_t c0, __mmask16 mask, const float* scale, float* out, int64_t first) {
  const DepthwiseGeometry& g = dw.g;
  __m512 acc[kPixels];
  const __m512 b = _mm512_loadu_ps(dw.bias.data() + c0);
  for (int p = 0; p < kPixels; ++p) acc[p] = b;
  for (int64_t u = rows.u0; u < rows.u1; ++u) {
    const float* base = x + ((rows.iy + u) * g.w + rows.ix) * g.c + c0;
    const float* taps = dw.taps.data() + (u * g.kw) * dw.cpad + c0;
    if constexpr (kKw > 0) {
      // One pointer walks the row's input vectors; each is loaded once and feeds every pixel
      // whose window covers it (the pixel and tap indices are compile-time after unrolling),
      // which keeps the addressing in one register instead of kInputs spilled offsets.
      constexpr int kInputs = (kPixels - 1) * kSw + kKw;
      __m512 tap[kKw];
      for (int v = 0; v < kKw; ++v) tap[v] = _mm512_loadu_ps(taps + v * dw.cpad);
      const float* ptr = base;
#pragma GCC unroll 32
      for (int i = 0; i < kInputs; ++i, ptr += g.c) {
        const __m512 in = load_lanes<kFull>(ptr, mask);
#pragma GCC unroll 8
        for (int v = 0; v < kKw; ++v) {
          const int q = i - v;
          if (q >= 0 && q % kSw == 0 && q / kSw < kPixels) acc[q / kSw] = _mm512_fmadd_ps(in, tap[v], acc[q / kSw]);
        }
      }
    } else {
      for (int64_t v = 0; v < g.kw; ++v) {
        const __m512 tap = _mm512_loadu_ps(taps + v * dw.cpad);
        const float* in = base + v * g.c;
        for (int p = 0; p < kPixels; ++p) acc[p] = _mm512_fmadd_ps(load_lanes<kFull>(in + p * g.sw * g.c, mask), tap, acc[p]);
      }
    }
  }
  for (int p = 0; p < kPixels; ++p)
    store_lanes<kFull>(out + (ox - first + p) * g.c + c0, mask, finish_avx512(e, acc[p], scale, c0, mask));
}

template <int kPixels, int kKw, int kSw>
KILN_AVX512 void block_avx512(const PackedDepthwise& dw, const Avx512Epilogue& e, const float* x, int64_t oy, int64_t ox,
                              const float* scale, float* out, int64_t first) {
  const DepthwiseGeometry& g = dw.g;
  const Window rows = window(g, oy, ox);
  int64_t c0 = 0;
  for (; c0 + 16 <= g.c; c0 += 16)
    block_channels_avx512<kPixels, kKw, kSw, true>(dw, e, x, rows, ox, c0, 0xFFFF, scale, out, first);
  if (c0 < g.c)
    block_channels_avx512<kPixels, kKw, kSw, false>(dw, e, x, rows, ox, c0, static_cast<__mmask16>((1u << (g.c - c0)) - 1),
                                                    scale, out, first);
}

// The interior pixels [ox, hi) of row oy in blocks of 8, then 4, 2, 1.
template <int kKw, int kSw>
KILN_AVX512 int64_t interior_avx512(const PackedDepthwise& dw, const Avx512Epilogue& e, const float* x, int64_t oy,
                                    int64_t ox, int64_t hi, const float* scale, float* out, int64_t first) {
  for (; ox + 8 <= hi; ox += 8) block_avx512<8, kKw, kSw>(dw, e, x, oy, ox, scale, out, first);
  if (ox + 4 <= hi) block_avx512<4, kKw, kSw>(dw, e, x, oy, ox, scale, out, first), ox += 4;
  if (ox + 2 <= hi) block_avx512<2, kKw, kSw>(dw, e, x, oy, ox, scale, out, first), ox += 2;
  return ox;
}

KILN_AVX512 void rows_avx512(const PackedDepthwise& dw, const float* x, int64_t p0, int64_t p1,
                             const float* scale, float* out) {
  const DepthwiseGeometry& g = dw.g;
  Avx512Epilogue e;
  e.relu = dw.act.activation == Activation::relu;
  e.clip = dw.act.activation == Activation::clip;
  e.vector_act = e.relu || e.clip || dw.act.empty();
  e.lo = _mm512_set1_ps(e.relu ? 0.0f : dw.act.alpha);
  e.hi = _mm512_set1_ps(dw.act.beta);
  const auto [lo, hi] = interior_columns(g);
  for (int64_t oy = p0 / g.ow; oy * g.ow < p1; ++oy) {
    const int64_t first = p0 - oy * g.ow;  // out holds pixel (oy, ox) at ox - first
    const int64_t a = std::max<int64_t>(0, first), b = std::min(g.ow, p1 - oy * g.ow);
    int64_t ox = a;
    for (; ox < b && ox < lo; ++ox) edge_avx512(dw, e, x, oy, ox, scale, out, first);
    const int64_t end = std::min(hi, b);
    if (ox < end) {
      if (g.kw == 3 && g.sw == 1) ox = interior_avx512<3, 1>(dw, e, x, oy, ox, end, scale, out, first);
      else if (g.kw == 3 && g.sw == 2) ox = interior_avx512<3, 2>(dw, e, x, oy, ox, end, scale, out, first);
      else if (g.kw == 5 && g.sw == 1) ox = interior_avx512<5, 1>(dw, e, x, oy, ox, end, scale, out, first);
      else ox = interior_avx512<0, 0>(dw, e, x, oy, ox, end, scale, out, first);
    }
    for (; ox < b; ++ox) edge_avx512(dw, e, x, oy, ox, scale, out, first);
  }
}

__attribute__((target("avx2,fma"))) void rows_avx2(const PackedDepthwise& dw, const float* x, int64_t p0, int64_t p1,
                                                   const float* scale, float* out) {
  const DepthwiseGeometry& g = dw.g;
  const bool relu = dw.act.activation == Activation::relu, clip = dw.act.activation == Activation::clip;
  const __m256 lo = _mm256_set1_ps(relu ? 0.0f : dw.act.alpha), hi = _mm256_set1_ps(dw.act.beta);
  alignas(32) float tmp[8];
  for (int64_t oy = p0 / g.ow; oy * g.ow < p1; ++oy)
    for (int64_t ox = std::max<int64_t>(0, p0 - oy * g.ow); ox < std::min(g.ow, p1 - oy * g.ow); ++ox) {
      const Window win = window(g, oy, ox);
      float* dst = out + (oy * g.ow + ox - p0) * g.c;
      for (int64_t c0 = 0; c0 < g.c; c0 += 8) {
        const int left = static_cast<int>(std::min<int64_t>(8, g.c - c0));
        __m256 acc = _mm256_loadu_ps(dw.bias.data() + c0);
        for (int64_t u = win.u0; u < win.u1; ++u) {
          const float* row = x + ((win.iy + u) * g.w + win.ix) * g.c + c0;
          const float* tap = dw.taps.data() + (u * g.kw) * dw.cpad + c0;
          for (int64_t v = win.v0; v < win.v1; ++v) {
            __m256 in;
            if (left == 8) {
              in = _mm256_loadu_ps(row + v * g.c);
            } else {
              std::fill(tmp, tmp + 8, 0.0f);
              std::copy(row + v * g.c, row + v * g.c + left, tmp);
              in = _mm256_load_ps(tmp);
            }
            acc = _mm256_fmadd_ps(in, _mm256_loadu_ps(tap + v * dw.cpad), acc);
          }
        }
        if (relu) acc = _mm256_max_ps(acc, lo);
        else if (clip) acc = _mm256_min_ps(_mm256_max_ps(acc, lo), hi);
        _mm256_store_ps(tmp, acc);
        if (scale && (relu || clip || dw.act.empty()))
          for (int i = 0; i < left; ++i) tmp[i] *= scale[c0 + i];
        std::copy(tmp, tmp + left, dst + c0);
      }
    }
}

void rows_portable(const PackedDepthwise& dw, const float* x, int64_t p0, int64_t p1, const float* scale,
                   float* out) {
  const DepthwiseGeometry& g = dw.g;
  for (int64_t oy = p0 / g.ow; oy * g.ow < p1; ++oy)
    for (int64_t ox = std::max<int64_t>(0, p0 - oy * g.ow); ox < std::min(g.ow, p1 - oy * g.ow); ++ox) {
      const Window win = window(g, oy, ox);
      float* dst = out + (oy * g.ow + ox - p0) * g.c;
      std::copy(dw.bias.data(), dw.bias.data() + g.c, dst);
      for (int64_t u = win.u0; u < win.u1; ++u)
        for (int64_t v = win.v0; v < win.v1; ++v) {
          const float* in = x + ((win.iy + u) * g.w + win.ix + v) * g.c;
          const float* tap = dw.taps.data() + (u * g.kw + v) * dw.cpad;
          for (int64_t c = 0; c < g.c; ++c) dst[c] += in[c] * tap[c];
        }
      if (dw.act.activation == Activation::relu || dw.act.activation == Activation::clip || dw.act.empty()) {
        apply_activation(CpuIsa::portable, dw.act, dst, g.c);
        if (scale)
          for (int64_t c = 0; c < g.c; ++c) dst[c] *= scale[c];
      }
    }
}

}  // namespace

PackedDepthwise pack_depthwise(CpuIsa isa, const DepthwiseGeometry& g, const float* weights, const float* bias,
                               const PostOps& act) {
  PackedDepthwise dw;
  dw.isa = isa;
  dw.g = g;
  dw.act = act;
  dw.cpad = (g.c + 15) / 16 * 16;
  dw.taps.assign(static_cast<size_t>(g.kh * g.kw * dw.cpad), 0.0f);
  dw.bias.assign(static_cast<size_t>(dw.cpad), 0.0f);
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t t = 0; t < g.kh * g.kw; ++t) dw.taps[static_cast<size_t>(t * dw.cpad + c)] = weights[c * g.kh * g.kw + t];
    if (bias) dw.bias[static_cast<size_t>(c)] = bias[c];
  }
  return dw;
}

void depthwise_pixels(const PackedDepthwise& dw, const float* x, int64_t p0, int64_t p1, const float* scale,
                      float* out) {
  switch (dw.isa) {
    case CpuIsa::avx512: rows_avx512(dw, x, p0, p1, scale, out); break;
    case CpuIsa::avx2: rows_avx2(dw, x, p0, p1, scale, out); break;
    case CpuIsa::portable: rows_portable(dw, x, p0, p1, scale, out); break;
  }
  // Activations without a vector form (sigmoid, silu, ...) run here, then the scale.
  const bool vector_act = dw.act.activation == Activation::relu || dw.act.activation == Activation::clip || dw.act.empty();
  if (vector_act) return;
  const int64_t pixels = p1 - p0;
  apply_activation(dw.isa, dw.act, out, pixels * dw.g.c);
  if (scale)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = 0; c < dw.g.c; ++c) out[p * dw.g.c + c] *= scale[c];
}

}  // namespace kiln::cpu

// Float32 to int8 codes in one pass: code = round_half_even(x * inv_scale), saturated to u8 [0, 255]
// or s8 [-128, 127], the numbers oneDNN's scaled reorder writes (kernels/onednn/conv.cpp quantizes a
// float32 input of an int8 conv with this when both sit in the same element order). oneDNN 2.6's
// reorder ("jit:uni") converted 2.6 G elements/s on one core of the AMX Xeon; this runs at 5
// (DenseNet-121 int8: 58 convs quantize the float BatchNorm+ReLU output they read). The per-value
// and per-16 steps are here too, for kernels that quantize what they compute (cpu/concat_affine).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/quantization.h"

namespace kiln::cpu {

// Where codes of a type saturate: u8 [0, 255]; s8 [-128, 127], as oneDNN's reorder (in-range values,
// the calibrated ones, never reach -128).
struct CodeBounds {
  int32_t lo = 0, hi = 255;
};
constexpr CodeBounds code_bounds(QuantType type) {
  return type == QuantType::u8 ? CodeBounds{0, 255} : CodeBounds{-128, 127};
}

// One code (its low byte, for either type): half to even in the default rounding mode; NaN -> lo.
inline uint8_t quantize_one(float x, float inv_scale, CodeBounds b) {
  const float v = std::nearbyint(x * inv_scale);
  const int32_t q = std::isnan(v) ? b.lo : static_cast<int32_t>(std::clamp(v, static_cast<float>(b.lo), static_cast<float>(b.hi)));
  return static_cast<uint8_t>(q);
}

// The codes of the `mask`ed lanes of y at inv (broadcast), stored to out: half to even (MXCSR's
// default mode), then saturated to [lo, hi] (broadcast); a NaN becomes lo.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void quantize16_avx512(__m512 y, __m512 inv, __m512i lo,
                                                                                 __m512i hi, uint8_t* out, __mmask16 mask) {
  const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(y, inv)), lo), hi);
  _mm_mask_storeu_epi8(out, mask, _mm512_cvtepi32_epi8(q));
}

// Writes `count` codes of `type` (uint8_t or int8_t) to `codes`, on up to `threads` threads.
void quantize_to_codes(const float* x, void* codes, int64_t count, float inv_scale, QuantType type, int threads);

// s8 codes moved to u8 (code + 128), the form an int8 product reads a signed input in (kernels/onednn/
// matmul.cpp): from float32 (round(x * inv_scale + 128) saturated to [0, 255], what oneDNN's reorder
// with zero point 128 writes) or from stored s8 codes (an int8 MatMul's output read by the next one,
// ConvNeXt's Linears).
void quantize_to_shifted_codes(const float* x, uint8_t* codes, int64_t count, float inv_scale, int threads);
void shift_s8_codes(const int8_t* s8, uint8_t* u8, int64_t count, int threads);

}  // namespace kiln::cpu

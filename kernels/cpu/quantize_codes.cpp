#include "kernels/cpu/quantize_codes.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/isa.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kChunk = 1 << 16;  // elements per thread's share at least: below, one thread

__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_avx512(const float* x, void* codes, int64_t count,
                                                                  float inv_scale, int32_t lo, int32_t hi) {
  const __m512 s = _mm512_set1_ps(inv_scale);
  const __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
  auto* out = static_cast<uint8_t*>(codes);  // both types: the low byte of the clamped int32
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    // Round half to even (MXCSR's default mode, as oneDNN's reorder), then saturate.
    __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + i), s));
    q = _mm512_min_epi32(_mm512_max_epi32(q, vlo), vhi);
    _mm_mask_storeu_epi8(out + i, mask, _mm512_cvtepi32_epi8(q));
  }
}

void quantize_portable(const float* x, void* codes, int64_t count, float inv_scale, int32_t lo, int32_t hi) {
  auto* out = static_cast<uint8_t*>(codes);
  for (int64_t i = 0; i < count; ++i) {
    const float v = std::nearbyint(x[i] * inv_scale);  // half to even in the default rounding mode
    const int32_t q = std::isnan(v) ? lo : static_cast<int32_t>(std::clamp(v, static_cast<float>(lo), static_cast<float>(hi)));
    out[i] = static_cast<uint8_t>(q);
  }
}

}  // namespace

void quantize_to_codes(const float* x, void* codes, int64_t count, float inv_scale, QuantType type, int threads) {
  // s8 saturates at -128 like oneDNN's reorder: in-range values (the calibrated ones) never reach it.
  const int32_t lo = type == QuantType::u8 ? 0 : -128, hi = type == QuantType::u8 ? 255 : 127;
  const auto run = cpu_isa_available(CpuIsa::avx512) ? quantize_avx512 : quantize_portable;
  const int64_t parts = std::clamp<int64_t>(count / kChunk, 1, std::max(threads, 1));
  if (parts == 1) return run(x, codes, count, inv_scale, lo, hi);
  // Shares in whole 64-byte lines of codes, so no two threads write one cache line.
  const int64_t share = (count / parts + 63) / 64 * 64;
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static)
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t begin = p * share, n = std::min(count, begin + share) - begin;
    if (n > 0) run(x + begin, static_cast<uint8_t*>(codes) + begin, n, inv_scale, lo, hi);
  }
}

}  // namespace kiln::cpu

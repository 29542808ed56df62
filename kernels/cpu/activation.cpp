#include "kernels/cpu/activation.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace kiln::cpu {
namespace {

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

// exp(x) = 2^n * 2^f with n = round(x * log2(e)), |f| <= 1/2; 2^f by its Taylor polynomial of
// degree 6 (error below 2e-7 relative), 2^n by vscalefps, which also saturates to 0 and inf.
// f = x log2(e) - n with log2(e) in two parts: one float's rounding of it alone would cost up to
// 4e-6 relative near the float range's ends (|x log2(e)| ~ 128). x is clamped to [-104, 88.8].
constexpr float kLog2eHi = 1.44269502162933349609375f, kLog2eLo = 1.925963033500011e-8f;
// 2^f's Taylor coefficients, highest degree first (Horner), shared by the AVX-512 and AVX2 paths.
constexpr float kExp2Taylor[] = {1.5403530393381606e-4f, 1.3333558146428443e-3f, 9.618129107628477e-3f,
                                 5.550410866482158e-2f, 0.2402265069591007f,      0.6931471805599453f,
                                 1.0f};
// Abramowitz-Stegun 7.1.26's a5..a1 (Horner in t = 1 / (1 + p |x|)) and p.
constexpr float kErfPoly[] = {1.061405429f, -1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f};
constexpr float kErfP = 0.3275911f;

KILN_AVX512 inline __m512 exp_avx512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.8f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2eHi)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_fmadd_ps(x, _mm512_set1_ps(kLog2eLo), _mm512_fmsub_ps(x, _mm512_set1_ps(kLog2eHi), n));
  __m512 p = _mm512_set1_ps(kExp2Taylor[0]);
  for (size_t i = 1; i < std::size(kExp2Taylor); ++i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Taylor[i]));
  return _mm512_scalef_ps(p, n);
}

template <bool kSilu>
KILN_AVX512 void sigmoid_avx512(float* y, int64_t count) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(mask, y + i);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 s = kSilu ? _mm512_div_ps(x, _mm512_add_ps(one, e)) : _mm512_div_ps(one, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(y + i, mask, s);
  }
}

// erf(|x|) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-x^2), t = 1 / (1 + p |x|); the sign
// of x restored at the end.
KILN_AVX512 void erf_avx512(const float* x, float* y, int64_t count) {
  const __m512 one = _mm512_set1_ps(1.0f), p = _mm512_set1_ps(kErfP);
  const __m512 sign_bit = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
    const __m512 a = _mm512_andnot_ps(sign_bit, v);
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(p, a, one));
    __m512 poly = _mm512_set1_ps(kErfPoly[0]);
    for (size_t i = 1; i < std::size(kErfPoly); ++i) poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(kErfPoly[i]));
    poly = _mm512_mul_ps(poly, t);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(a, a)));
    const __m512 r = _mm512_fnmadd_ps(poly, e, one);  // 1 - poly * e
    _mm512_mask_storeu_ps(y + i, mask, _mm512_or_ps(r, _mm512_and_ps(sign_bit, v)));
  }
}

// exp_avx512 clamps its input (NaN would give exp(-104)); NaN and +inf pass through here, as
// std::exp gives them.
KILN_AVX512 void exp_avx512_values(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
    const __mmask16 same = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ);
    _mm512_mask_storeu_ps(y + i, mask, _mm512_mask_mov_ps(exp_avx512(v), same, v));
  }
}

#define KILN_AVX2 __attribute__((target("avx2,fma")))

// The same exp on 8 lanes. AVX2 has no vscalefps: 2^n is built in the exponent bits as
// 2^(n/2) * 2^(n - n/2), applied one factor at a time so that results near the float range's ends
// (exp(88.7), denormals) neither overflow early nor flush. NaN propagates (min/max keep their
// second operand's NaN), +inf saturates to inf, -inf to 0.
KILN_AVX2 inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(88.8f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2eHi)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_fmadd_ps(x, _mm256_set1_ps(kLog2eLo), _mm256_fmsub_ps(x, _mm256_set1_ps(kLog2eHi), n));
  __m256 p = _mm256_set1_ps(kExp2Taylor[0]);
  for (size_t i = 1; i < std::size(kExp2Taylor); ++i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2Taylor[i]));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256i rest = _mm256_sub_epi32(ni, half);
  const __m256i bias = _mm256_set1_epi32(127);
  p = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23)));
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23)));
}

// Runs `op` over x in 8-lane vectors; the tail goes through a padded copy (AVX2 has no masked
// loads of floats that fault-suppress as cheaply as AVX-512's).
template <class Op>
KILN_AVX2 void loop_avx2(const float* x, float* y, int64_t count, Op op) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) _mm256_storeu_ps(y + i, op(_mm256_loadu_ps(x + i)));
  if (i == count) return;
  alignas(32) float tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::copy(x + i, x + count, tail);
  _mm256_store_ps(tail, op(_mm256_load_ps(tail)));
  std::copy(tail, tail + (count - i), y + i);
}

template <bool kSilu>
struct SigmoidAvx2 {
  KILN_AVX2 __m256 operator()(__m256 x) const {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return kSilu ? _mm256_div_ps(x, _mm256_add_ps(one, e)) : _mm256_div_ps(one, _mm256_add_ps(one, e));
  }
};

struct ErfAvx2 {  // as erf_avx512
  KILN_AVX2 __m256 operator()(__m256 v) const {
    const __m256 one = _mm256_set1_ps(1.0f), sign_bit = _mm256_set1_ps(-0.0f);
    const __m256 a = _mm256_andnot_ps(sign_bit, v);
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(kErfP), a, one));
    __m256 poly = _mm256_set1_ps(kErfPoly[0]);
    for (size_t i = 1; i < std::size(kErfPoly); ++i) poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(kErfPoly[i]));
    poly = _mm256_mul_ps(poly, t);
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)));
    const __m256 r = _mm256_fnmadd_ps(poly, e, one);
    return _mm256_or_ps(r, _mm256_and_ps(sign_bit, v));
  }
};

struct ExpAvx2 {
  KILN_AVX2 __m256 operator()(__m256 v) const { return exp_avx2(v); }
};

}  // namespace

void exp_values(CpuIsa isa, const float* x, float* y, int64_t count) {
  if (isa == CpuIsa::avx512) return exp_avx512_values(x, y, count);
  if (isa == CpuIsa::avx2) return loop_avx2(x, y, count, ExpAvx2{});
  for (int64_t i = 0; i < count; ++i) y[i] = std::exp(x[i]);
}

void erf_values(CpuIsa isa, const float* x, float* y, int64_t count) {
  if (isa == CpuIsa::avx512) return erf_avx512(x, y, count);
  if (isa == CpuIsa::avx2) return loop_avx2(x, y, count, ErfAvx2{});
  for (int64_t i = 0; i < count; ++i) y[i] = std::erf(x[i]);
}

void apply_activation(CpuIsa isa, const PostOps& act, float* y, int64_t count) {
  switch (act.activation) {
    case Activation::none: return;
    case Activation::relu:
      for (int64_t i = 0; i < count; ++i) y[i] = y[i] < 0.0f ? 0.0f : y[i];
      return;
    case Activation::clip:
      for (int64_t i = 0; i < count; ++i) y[i] = std::min(std::max(y[i], act.alpha), act.beta);
      return;
    case Activation::sigmoid:
      if (isa == CpuIsa::avx512) return sigmoid_avx512<false>(y, count);
      if (isa == CpuIsa::avx2) return loop_avx2(y, y, count, SigmoidAvx2<false>{});
      break;
    case Activation::silu:
      if (isa == CpuIsa::avx512) return sigmoid_avx512<true>(y, count);
      if (isa == CpuIsa::avx2) return loop_avx2(y, y, count, SigmoidAvx2<true>{});
      break;
    default: break;
  }
  for (int64_t i = 0; i < count; ++i) y[i] = activation_apply(act, y[i]);
}

}  // namespace kiln::cpu

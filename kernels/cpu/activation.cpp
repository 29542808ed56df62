#include "kernels/cpu/activation.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace kiln::cpu {
namespace {

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

// exp(x) = 2^n * 2^f with n = round(x * log2(e)), |f| <= 1/2; 2^f by its Taylor polynomial of
// degree 6 (error below 2e-7 relative), 2^n by vscalefps, which also saturates to 0 and inf.
KILN_AVX512 inline __m512 exp_avx512(__m512 x) {
  const __m512 t = _mm512_mul_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(1.4426950408889634f));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(1.5403530393381606e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618129107628477e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550410866482158e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.2402265069591007f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6931471805599453f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
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
  const __m512 one = _mm512_set1_ps(1.0f), p = _mm512_set1_ps(0.3275911f);
  const __m512 sign_bit = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
    const __m512 a = _mm512_andnot_ps(sign_bit, v);
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(p, a, one));
    __m512 poly = _mm512_set1_ps(1.061405429f);
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-1.453152027f));
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(1.421413741f));
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-0.284496736f));
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(0.254829592f));
    poly = _mm512_mul_ps(poly, t);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(a, a)));
    const __m512 r = _mm512_fnmadd_ps(poly, e, one);  // 1 - poly * e
    _mm512_mask_storeu_ps(y + i, mask, _mm512_or_ps(r, _mm512_and_ps(sign_bit, v)));
  }
}

// exp_avx512 clamps its input below (NaN would give exp(-104)) and makes NaN of +inf; both pass
// through here, as std::exp gives them.
KILN_AVX512 void exp_avx512_values(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
    const __mmask16 same = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ);
    _mm512_mask_storeu_ps(y + i, mask, _mm512_mask_mov_ps(exp_avx512(v), same, v));
  }
}

}  // namespace

void exp_values(CpuIsa isa, const float* x, float* y, int64_t count) {
  if (isa == CpuIsa::avx512) return exp_avx512_values(x, y, count);
  for (int64_t i = 0; i < count; ++i) y[i] = std::exp(x[i]);
}

void erf_values(CpuIsa isa, const float* x, float* y, int64_t count) {
  if (isa == CpuIsa::avx512) return erf_avx512(x, y, count);
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
      break;
    case Activation::silu:
      if (isa == CpuIsa::avx512) return sigmoid_avx512<true>(y, count);
      break;
    default: break;
  }
  for (int64_t i = 0; i < count; ++i) y[i] = activation_apply(act, y[i]);
}

}  // namespace kiln::cpu

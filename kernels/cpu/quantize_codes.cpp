#include "kernels/cpu/quantize_codes.h"

#include <omp.h>

#include "kernels/cpu/isa.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kChunk = 1 << 16;  // elements per thread's share at least: below, one thread

__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_avx512(const float* x, void* codes, int64_t count,
                                                                  float inv_scale, CodeBounds b) {
  const __m512 s = _mm512_set1_ps(inv_scale);
  const __m512i vlo = _mm512_set1_epi32(b.lo), vhi = _mm512_set1_epi32(b.hi);
  auto* out = static_cast<uint8_t*>(codes);  // both types: the low byte of the clamped int32
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    quantize16_avx512(_mm512_maskz_loadu_ps(mask, x + i), s, vlo, vhi, out + i, mask);
  }
}

// round(x * inv_scale + 128) saturated to [0, 255], in that order, as oneDNN's reorder with zero
// point 128 computes it (a value a hair off a tie rounds as the float sum does).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_shifted_avx512(const float* x, uint8_t* codes, int64_t count,
                                                                          float inv_scale) {
  const __m512 s = _mm512_set1_ps(inv_scale), shift = _mm512_set1_ps(128.0f);
  const __m512i vlo = _mm512_set1_epi32(0), vhi = _mm512_set1_epi32(255);
  for (int64_t i = 0; i < count; i += 16) {
    const int left = static_cast<int>(std::min<int64_t>(16, count - i));
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
    // The product rounded on its own (GCC would contract a plain mul and add into one FMA).
    const __m512 product = _mm512_mul_round_ps(_mm512_maskz_loadu_ps(mask, x + i), s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    quantize16_avx512(_mm512_add_ps(product, shift), _mm512_set1_ps(1.0f), vlo, vhi, codes + i, mask);
  }
}

void quantize_shifted_portable(const float* x, uint8_t* codes, int64_t count, float inv_scale) {
  const CodeBounds u8 = code_bounds(QuantType::u8);
  for (int64_t i = 0; i < count; ++i) {
    const float shifted = x[i] * inv_scale + 128.0f;
    codes[i] = quantize_one(shifted, 1.0f, u8);
  }
}

// code + 128 is the s8 code with its sign bit flipped.
void shift_portable(const int8_t* s8, uint8_t* u8, int64_t count) {
  for (int64_t i = 0; i < count; ++i) u8[i] = static_cast<uint8_t>(static_cast<uint8_t>(s8[i]) ^ 0x80u);
}

// Runs run(begin, n) over `count` elements in shares of whole 64-byte lines of codes (no two threads
// write one cache line), on one thread below kChunk elements a thread.
template <typename Run>
void split_codes(int64_t count, int threads, Run run) {
  const int64_t parts = std::clamp<int64_t>(count / kChunk, 1, std::max(threads, 1));
  if (parts == 1) return run(int64_t{0}, count);
  const int64_t share = (count / parts + 63) / 64 * 64;
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static)
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t begin = p * share, n = std::min(count, begin + share) - begin;
    if (n > 0) run(begin, n);
  }
}

void quantize_portable(const float* x, void* codes, int64_t count, float inv_scale, CodeBounds b) {
  auto* out = static_cast<uint8_t*>(codes);
  for (int64_t i = 0; i < count; ++i) out[i] = quantize_one(x[i], inv_scale, b);
}

}  // namespace

void quantize_to_codes(const float* x, void* codes, int64_t count, float inv_scale, QuantType type, int threads) {
  const CodeBounds bounds = code_bounds(type);
  const auto run = cpu_isa_available(CpuIsa::avx512) ? quantize_avx512 : quantize_portable;
  split_codes(count, threads, [&](int64_t begin, int64_t n) { run(x + begin, static_cast<uint8_t*>(codes) + begin, n, inv_scale, bounds); });
}

void quantize_to_shifted_codes(const float* x, uint8_t* codes, int64_t count, float inv_scale, int threads) {
  const auto run = cpu_isa_available(CpuIsa::avx512) ? quantize_shifted_avx512 : quantize_shifted_portable;
  split_codes(count, threads, [&](int64_t begin, int64_t n) { run(x + begin, codes + begin, n, inv_scale); });
}

void shift_s8_codes(const int8_t* s8, uint8_t* u8, int64_t count, int threads) {
  split_codes(count, threads, [&](int64_t begin, int64_t n) { shift_portable(s8 + begin, u8 + begin, n); });
}

}  // namespace kiln::cpu

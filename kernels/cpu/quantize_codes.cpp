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

void quantize_portable(const float* x, void* codes, int64_t count, float inv_scale, CodeBounds b) {
  auto* out = static_cast<uint8_t*>(codes);
  for (int64_t i = 0; i < count; ++i) out[i] = quantize_one(x[i], inv_scale, b);
}

}  // namespace

void quantize_to_codes(const float* x, void* codes, int64_t count, float inv_scale, QuantType type, int threads) {
  const CodeBounds bounds = code_bounds(type);
  const auto run = cpu_isa_available(CpuIsa::avx512) ? quantize_avx512 : quantize_portable;
  const int64_t parts = std::clamp<int64_t>(count / kChunk, 1, std::max(threads, 1));
  if (parts == 1) return run(x, codes, count, inv_scale, bounds);
  // Shares in whole 64-byte lines of codes, so no two threads write one cache line.
  const int64_t share = (count / parts + 63) / 64 * 64;
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static)
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t begin = p * share, n = std::min(count, begin + share) - begin;
    if (n > 0) run(x + begin, static_cast<uint8_t*>(codes) + begin, n, inv_scale, bounds);
  }
}

}  // namespace kiln::cpu

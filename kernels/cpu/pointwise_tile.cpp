#include "kernels/cpu/pointwise_tile.h"

#include <immintrin.h>

#include <algorithm>

namespace kiln::cpu {
namespace {

// ---- AVX-512: 32 columns (two registers) x MR rows; a last panel of <= 16 columns uses one ----

template <int MR, int NV>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"))) void micro_avx512(
    const float* a, int64_t lda, const float* p, const float* bias, int64_t k, float* c, int64_t ldc, int cols) {
  __m512 acc[MR][NV];
  if (bias) {
#pragma GCC unroll 24
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_loadu_ps(bias + 16 * v);
  } else {  // a later block of k: continue the sums already in c
    for (int v = 0; v < NV; ++v) {
      const int left = std::clamp(cols - 16 * v, 0, 16);
      const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
#pragma GCC unroll 24
      for (int r = 0; r < MR; ++r) acc[r][v] = _mm512_maskz_loadu_ps(mask, c + r * ldc + 16 * v);
    }
  }
  // Fully unrolled so every accumulator stays in a register (GCC otherwise keeps the 24-row
  // variant's on the stack and runs 3x slower).
  for (int64_t kk = 0; kk < k; ++kk) {
    __m512 w[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) w[v] = _mm512_loadu_ps(p + kk * 32 + 16 * v);
#pragma GCC unroll 24
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + kk]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
    }
  }
  for (int v = 0; v < NV; ++v) {
    const int left = std::clamp(cols - 16 * v, 0, 16);
    const __mmask16 mask = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
#pragma GCC unroll 24
    for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask, acc[r][v]);
  }
}

template <int NV>
void rows_avx512(const float* a, int64_t lda, int64_t rows, const float* p, const float* bias, int64_t k, float* c,
                 int64_t ldc, int cols) {
  constexpr int kRows = NV == 2 ? 12 : 24;  // accumulators: 24 of the 32 registers
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) micro_avx512<kRows, NV>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols);
  for (; r + 6 <= rows; r += 6) micro_avx512<6, NV>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols);
  switch (rows - r) {
    case 5: micro_avx512<5, NV>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    case 4: micro_avx512<4, NV>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    case 3: micro_avx512<3, NV>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    case 2: micro_avx512<2, NV>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    case 1: micro_avx512<1, NV>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    default: break;
  }
}

// ---- AVX2: 16 columns (two registers) x MR rows ----

template <int MR>
__attribute__((target("avx2,fma"))) void micro_avx2(const float* a, int64_t lda, const float* p, const float* bias,
                                                    int64_t k, float* c, int64_t ldc, int cols) {
  __m256 acc[MR][2];
  alignas(32) float tmp[16];
  for (int r = 0; r < MR; ++r) {
    const float* init = bias;
    if (!bias) {  // a later block of k: continue the sums already in c
      std::fill(tmp, tmp + 16, 0.0f);
      std::copy(c + r * ldc, c + r * ldc + cols, tmp);
      init = tmp;
    }
    acc[r][0] = _mm256_loadu_ps(init);
    acc[r][1] = _mm256_loadu_ps(init + 8);
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    const __m256 w0 = _mm256_loadu_ps(p + kk * 16), w1 = _mm256_loadu_ps(p + kk * 16 + 8);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + kk);
      acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
    }
  }
  if (cols == 16) {
    for (int r = 0; r < MR; ++r) {
      _mm256_storeu_ps(c + r * ldc, acc[r][0]);
      _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
    }
    return;
  }
  for (int r = 0; r < MR; ++r) {
    _mm256_store_ps(tmp, acc[r][0]);
    _mm256_store_ps(tmp + 8, acc[r][1]);
    std::copy(tmp, tmp + cols, c + r * ldc);
  }
}

void rows_avx2(const float* a, int64_t lda, int64_t rows, const float* p, const float* bias, int64_t k, float* c,
               int64_t ldc, int cols) {
  int64_t r = 0;
  for (; r + 6 <= rows; r += 6) micro_avx2<6>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols);
  switch (rows - r) {
    case 5: micro_avx2<5>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    case 4: micro_avx2<4>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    case 3: micro_avx2<3>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    case 2: micro_avx2<2>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    case 1: micro_avx2<1>(a + r * lda, lda, p, bias, k, c + r * ldc, ldc, cols); break;
    default: break;
  }
}

// ---- portable: 16 columns x up to 4 rows, plain loops ----

void rows_portable(const float* a, int64_t lda, int64_t rows, const float* p, const float* bias, int64_t k, float* c,
                   int64_t ldc, int cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const int64_t mr = std::min<int64_t>(4, rows - r0);
    float acc[4][16];
    for (int64_t r = 0; r < mr; ++r)
      for (int j = 0; j < 16; ++j) acc[r][j] = bias ? bias[j] : (j < cols ? c[(r0 + r) * ldc + j] : 0.0f);
    for (int64_t kk = 0; kk < k; ++kk) {
      const float* w = p + kk * 16;
      for (int64_t r = 0; r < mr; ++r) {
        const float x = a[(r0 + r) * lda + kk];
        for (int j = 0; j < 16; ++j) acc[r][j] += x * w[j];
      }
    }
    for (int64_t r = 0; r < mr; ++r) std::copy(acc[r], acc[r] + cols, c + (r0 + r) * ldc);
  }
}

}  // namespace

PackedPointwise pack_pointwise(CpuIsa isa, const float* w, const float* bias, int64_t n, int64_t k) {
  PackedPointwise packed;
  packed.isa = isa;
  packed.k = k;
  packed.n = n;
  packed.nr = isa == CpuIsa::avx512 ? 32 : 16;
  const int64_t panels = (n + packed.nr - 1) / packed.nr;
  packed.panels.assign(static_cast<size_t>(panels * k * packed.nr), 0.0f);
  packed.bias.assign(static_cast<size_t>(panels * packed.nr), 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t panel = j / packed.nr, col = j % packed.nr;
    float* dst = packed.panels.data() + panel * k * packed.nr + col;
    for (int64_t kk = 0; kk < k; ++kk) dst[kk * packed.nr] = w[j * k + kk];
    if (bias) packed.bias[static_cast<size_t>(j)] = bias[j];
  }
  return packed;
}

int64_t pointwise_panels(const PackedPointwise& w) { return (w.n + w.nr - 1) / w.nr; }

void pointwise_tile(const PackedPointwise& w, const float* a, int64_t lda, int64_t rows, float* c, int64_t ldc,
                    int64_t panel0, int64_t panel1) {
  if (panel1 < 0) panel1 = pointwise_panels(w);
  // Blocks of k so that the block of a panel (kBlock x 32 floats, 24 KB) stays in L1 while every
  // row of the tile passes over it.
  constexpr int64_t kBlock = 192;
  for (int64_t j0 = panel0 * w.nr; j0 < std::min(w.n, panel1 * w.nr); j0 += w.nr) {
    const int cols = static_cast<int>(std::min(w.nr, w.n - j0));
    for (int64_t k0 = 0; k0 < w.k; k0 += kBlock) {
      const int64_t kc = std::min(kBlock, w.k - k0);
      const float* p = w.panels.data() + (j0 / w.nr) * w.k * w.nr + k0 * w.nr;
      const float* bias = k0 == 0 ? w.bias.data() + j0 : nullptr;
      switch (w.isa) {
        case CpuIsa::avx512:
          if (cols <= 16) rows_avx512<1>(a + k0, lda, rows, p, bias, kc, c + j0, ldc, cols);
          else rows_avx512<2>(a + k0, lda, rows, p, bias, kc, c + j0, ldc, cols);
          break;
        case CpuIsa::avx2: rows_avx2(a + k0, lda, rows, p, bias, kc, c + j0, ldc, cols); break;
        case CpuIsa::portable: rows_portable(a + k0, lda, rows, p, bias, kc, c + j0, ldc, cols); break;
      }
    }
  }
}

}  // namespace kiln::cpu

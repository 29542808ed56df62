// The pointwise (1x1) convolution of one tile of pixels as a small GEMM against weights packed
// once: c[r][j] = bias[j] + sum_k a[r][k] * w[j][k]. Register-blocked micro-kernels for AVX-512
// (6 rows x 32 columns), AVX2 (6 x 16) and a portable one (4 x 16) the compiler vectorizes.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/isa.h"

namespace kiln::cpu {

struct PackedPointwise {
  CpuIsa isa = CpuIsa::portable;
  int64_t k = 0;  // input channels
  int64_t n = 0;  // output channels
  int64_t nr = 16;                // panel width
  std::vector<float> panels;      // ceil(n / nr) panels of [k][nr], zero-padded columns
  std::vector<float> bias;        // n rounded up to nr, zero-padded
};

// w: [n][k] row-major (a [M, C, 1, 1] Conv weight), bias: [n] or nullptr.
PackedPointwise pack_pointwise(CpuIsa isa, const float* w, const float* bias, int64_t n, int64_t k);

// The number of panels (groups of nr output channels).
int64_t pointwise_panels(const PackedPointwise& w);

// rows x n results into c (row stride ldc) from rows x k inputs a (row stride lda); with a panel
// range, only the output channels of panels [panel0, panel1).
void pointwise_tile(const PackedPointwise& w, const float* a, int64_t lda, int64_t rows, float* c, int64_t ldc,
                    int64_t panel0 = 0, int64_t panel1 = -1);

}  // namespace kiln::cpu

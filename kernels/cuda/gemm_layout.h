// How a row-major product Y[M, N] = op(A) op(B) is handed to cuBLASLt, which is column-major:
// a row-major [R, C] matrix is the column-major C x R matrix with leading dimension C, so
// Y^T (N x M, ld N) = op(B)^T op(A)^T is computed with B's buffer as cuBLASLt's first operand
// and A's as its second, each reinterpreted in place. Pure arithmetic (no CUDA header), so the
// CPU tests check it against the reference Gemm by emulating cuBLASLt's column-major product.
#pragma once

#include <cstdint>

namespace kiln::cuda {

// One cuBLASLt operand: the stored matrix (column-major rows x cols, leading dimension ld) and
// whether cuBLASLt transposes it.
struct LtOperand {
  int64_t rows = 0, cols = 0, ld = 0;
  bool transpose = false;
};

struct GemmLayout {
  LtOperand first;   // B's buffer: op gives N x K
  LtOperand second;  // A's buffer: op gives K x M
  LtOperand out;     // Y's buffer: N x M, ld N
};

// A is [M, K] ([K, M] when trans_a), B is [K, N] ([N, K] when trans_b), both row-major.
inline GemmLayout gemm_layout(int64_t m, int64_t k, int64_t n, bool trans_a, bool trans_b) {
  GemmLayout g;
  g.first = trans_b ? LtOperand{k, n, k, true} : LtOperand{n, k, n, false};
  g.second = trans_a ? LtOperand{m, k, m, true} : LtOperand{k, m, k, false};
  g.out = LtOperand{n, m, n, false};
  return g;
}

}  // namespace kiln::cuda

// Fused activations applied in place to a buffer still in cache: the epilogues of kiln's own CPU
// kernels. ReLU and Clip vectorize on every path; Sigmoid and SiLU (EfficientNet's) have an
// AVX-512 path with a polynomial exp (relative error ~1e-7); the rest use activation_apply.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/post_ops.h"

namespace kiln::cpu {

// y[i] = act(y[i]) for `count` values.
void apply_activation(CpuIsa isa, const PostOps& act, float* y, int64_t count);

}  // namespace kiln::cpu

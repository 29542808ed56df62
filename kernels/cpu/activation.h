// Fused activations applied in place to a buffer still in cache: the epilogues of kiln's own CPU
// kernels. ReLU and Clip vectorize on every path; Sigmoid and SiLU (EfficientNet's) have AVX-512
// and AVX2 paths with a polynomial exp (relative error ~2e-7); the rest use activation_apply.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/post_ops.h"

namespace kiln::cpu {

// y[i] = act(y[i]) for `count` values.
void apply_activation(CpuIsa isa, const PostOps& act, float* y, int64_t count);

// y[i] = erf(x[i]) for `count` values (y may be x). AVX-512 and AVX2: Abramowitz-Stegun 7.1.26
// with the vector exp, absolute error below 5e-7 (4e-7 measured); portable: std::erf.
void erf_values(CpuIsa isa, const float* x, float* y, int64_t count);

// y[i] = exp(x[i]) for `count` values (y may be x). AVX-512 and AVX2: the polynomial exp
// (relative error ~2e-7; 0 below -104, inf above 88.7, NaN stays NaN); portable: std::exp.
void exp_values(CpuIsa isa, const float* x, float* y, int64_t count);

}  // namespace kiln::cpu

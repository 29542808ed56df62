// Float32 to int8 codes in one pass: code = round_half_even(x * inv_scale), saturated to u8 [0, 255]
// or s8 [-128, 127], the numbers oneDNN's scaled reorder writes (kernels/onednn/conv.cpp quantizes a
// float32 input of an int8 conv with this when both sit in the same element order). oneDNN 2.6's
// reorder ("jit:uni") converted 2.6 G elements/s on one core of the AMX Xeon; this runs at 5
// (DenseNet-121 int8: 58 convs quantize the float BatchNorm+ReLU output they read).
#pragma once

#include <cstdint>

#include "kernels/quantization.h"

namespace kiln::cpu {

// Writes `count` codes of `type` (uint8_t or int8_t) to `codes`, on up to `threads` threads.
void quantize_to_codes(const float* x, void* codes, int64_t count, float inv_scale, QuantType type, int threads);

}  // namespace kiln::cpu

// How own CPU kernels see a 4-D float32 activation: NHWC (oneDNN's acdb, which its convolutions
// choose on this hardware, so reading it needs no conversion) or plain NCHW. Kernels that take
// either ask pixel_order() and write NHWC with nhwc_layout().
#pragma once

#include <optional>

#include "kernels/kernel.h"
#include "kernels/quantization.h"

namespace kiln::cpu {

enum class PixelOrder { nhwc, nchw, other };

// A plain value whose pixels are single channel vectors (H*W == 1 or C == 1) counts as NHWC.
PixelOrder pixel_order(const ValueDesc& v);

// The channel block of a float32 [N, C, H, W] value whose images are channel-major, so that
// image n's channels [c0, c1) are one contiguous run at n * C * H * W + c0 * H * W whenever the
// block divides c0 and c1: 1 for plain NCHW (or any layout placing elements where it would,
// e.g. NHWC of a 1x1 image), B for oneDNN's channel blocks of B (aBcd8b, aBcd16b) when B divides
// C without padding; 0 otherwise (also for bfloat16 or int8 elements in such an order).
int64_t channel_block(const ValueDesc& v);

// The oneDNN acdb layout of a float32 [N, C, H, W] value.
Layout nhwc_layout(const Shape& shape, int threads);
// The same holding u8/s8 codes of real = q.scale * code (what an int8 conv reads without converting).
Layout nhwc_codes_layout(const Shape& shape, int threads, const QuantParams& q);
// The same holding bfloat16 (what a bf16 conv writes and reads).
Layout nhwc_bf16_layout(const Shape& shape, int threads);
// Whether a 4-D value is in that bfloat16 NHWC layout.
bool is_nhwc_bf16(const ValueDesc& v);
// Bfloat16 in plain row-major order (what a bf16 MatMul with bf16_output writes and a bf16 MatMul or
// LayerNormalization reads).
Layout bf16_rows_layout(const Shape& shape, int threads);
// The codes' type and scale of a 4-D value in nhwc_codes_layout; nullopt for any other value.
std::optional<QuantParams> nhwc_codes_of(const ValueDesc& v);

}  // namespace kiln::cpu

// How own CPU kernels see a 4-D float32 activation: NHWC (oneDNN's acdb, which its convolutions
// choose on this hardware, so reading it needs no conversion) or plain NCHW. Kernels that take
// either ask pixel_order() and write NHWC with nhwc_layout().
#pragma once

#include "kernels/kernel.h"

namespace kiln::cpu {

enum class PixelOrder { nhwc, nchw, other };

// A plain value whose pixels are single channel vectors (H*W == 1 or C == 1) counts as NHWC.
PixelOrder pixel_order(const ValueDesc& v);

// The oneDNN acdb layout of a float32 [N, C, H, W] value.
Layout nhwc_layout(const Shape& shape, int threads);

}  // namespace kiln::cpu

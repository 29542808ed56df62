// Depthwise convolution of a range of output pixels in NHWC (channels innermost, so one vector
// holds 16 (AVX-512) or 8 (AVX2) channels of a pixel), with the activation and an optional
// per-channel scale applied before the row is stored: the first stage of a DepthFirstConv tile.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/post_ops.h"

namespace kiln::cpu {

struct DepthwiseGeometry {
  int64_t c = 0, h = 0, w = 0;    // input channels and size
  int64_t oh = 0, ow = 0;         // output size
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0;
};

struct PackedDepthwise {
  CpuIsa isa = CpuIsa::portable;
  DepthwiseGeometry g;
  PostOps act;
  int64_t cpad = 0;           // channels rounded up to 16
  std::vector<float> taps;    // [kh * kw][cpad]
  std::vector<float> bias;    // [cpad]
};

// weights: [C, 1, kh, kw]; bias: [C] or nullptr.
PackedDepthwise pack_depthwise(CpuIsa isa, const DepthwiseGeometry& g, const float* weights, const float* bias,
                               const PostOps& act);

// Output pixels [p0, p1) (row-major over oh x ow) of one image `x` (NHWC, [h][w][c]) into out
// ([p1 - p0][c]), each value act(conv) * scale[c] when `scale` is given.
void depthwise_pixels(const PackedDepthwise& dw, const float* x, int64_t p0, int64_t p1, const float* scale,
                      float* out);

}  // namespace kiln::cpu

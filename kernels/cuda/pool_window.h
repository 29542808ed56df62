// One output element of 2-D max/average pooling over NCHW, written once for the device kernel
// (pool.cu) and the CPU tests, which check it against the reference MaxPool/AveragePool. No CUDA
// header: nvcc sees it as __host__ __device__, g++ as plain C++.
#pragma once

#include <cstdint>

#include "kernels/cuda/host_device.h"

namespace kiln::cuda {

// Windows start at out * stride - pad_begin; taps outside the input are skipped. Average
// divisor: the taps inside the input, or with count_include_pad the taps inside the padded input
// (pad_end included: a ceil-mode window past it is clipped to it).
struct Pool2d {
  bool max = true;
  bool count_include_pad = false;
  int64_t batch_channels = 0;  // N * C
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

// Output element `i` (flat over [batch_channels, out_h, out_w]); `load(at)` reads input element
// `at` (flat over [batch_channels, in_h, in_w]) as float.
template <typename Load>
KILN_HOST_DEVICE inline float pool2d_element(const Pool2d& p, int64_t i, Load load) {
  const int64_t ow = i % p.out_w, oh = (i / p.out_w) % p.out_h, plane = i / (p.out_w * p.out_h);
  const int64_t base = plane * p.in_h * p.in_w;
  const int64_t h0 = oh * p.stride_h - p.pad_top, w0 = ow * p.stride_w - p.pad_left;
  float acc = p.max ? -3.402823466e38f : 0.0f;
  int64_t inside = 0, padded = 0;
  for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
    const int64_t h = h0 + kh * p.dilation_h;
    for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
      const int64_t w = w0 + kw * p.dilation_w;
      if (h >= -p.pad_top && h < p.in_h + p.pad_bottom && w >= -p.pad_left && w < p.in_w + p.pad_right) ++padded;
      if (h < 0 || h >= p.in_h || w < 0 || w >= p.in_w) continue;
      const float v = load(base + h * p.in_w + w);
      acc = p.max ? (v > acc ? v : acc) : acc + v;
      ++inside;
    }
  }
  if (p.max) return acc;
  const int64_t divisor = p.count_include_pad ? padded : inside;
  return divisor > 0 ? acc / static_cast<float>(divisor) : 0.0f;
}

}  // namespace kiln::cuda

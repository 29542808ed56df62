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
// `at` (flat over [batch_channels, in_h, in_w]) as float. Index is int32_t when the input and the
// output have fewer than 2^31 elements (cheaper division on a GPU), else int64_t.
template <typename Index, typename Load>
KILN_HOST_DEVICE inline float pool2d_element(const Pool2d& p, Index i, Load load) {
  const Index out_w = static_cast<Index>(p.out_w), out_h = static_cast<Index>(p.out_h);
  const Index in_h = static_cast<Index>(p.in_h), in_w = static_cast<Index>(p.in_w);
  const Index ow = i % out_w, oh = (i / out_w) % out_h, plane = i / (out_w * out_h);
  const Index base = plane * in_h * in_w;
  const Index pad_top = static_cast<Index>(p.pad_top), pad_left = static_cast<Index>(p.pad_left);
  const Index h0 = oh * static_cast<Index>(p.stride_h) - pad_top, w0 = ow * static_cast<Index>(p.stride_w) - pad_left;
  float acc = p.max ? -3.402823466e38f : 0.0f;
  Index inside = 0, padded = 0;
  for (Index kh = 0; kh < static_cast<Index>(p.kernel_h); ++kh) {
    const Index h = h0 + kh * static_cast<Index>(p.dilation_h);
    for (Index kw = 0; kw < static_cast<Index>(p.kernel_w); ++kw) {
      const Index w = w0 + kw * static_cast<Index>(p.dilation_w);
      if (h >= -pad_top && h < in_h + static_cast<Index>(p.pad_bottom) && w >= -pad_left && w < in_w + static_cast<Index>(p.pad_right))
        ++padded;
      if (h < 0 || h >= in_h || w < 0 || w >= in_w) continue;
      const float v = load(base + h * in_w + w);
      acc = p.max ? (v > acc ? v : acc) : acc + v;
      ++inside;
    }
  }
  if (p.max) return acc;
  const Index divisor = p.count_include_pad ? padded : inside;
  return divisor > 0 ? acc / static_cast<float>(divisor) : 0.0f;
}

}  // namespace kiln::cuda

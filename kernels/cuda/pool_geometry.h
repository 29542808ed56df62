// MaxPool / AveragePool attributes as the Pool2d the device kernel runs, resolved by the
// reference's window functions (auto_pad, ceil_mode, pads) so both backends read them alike.
// Header-only so the CPU tests use the same function as the plugin.
#pragma once

#include "kernels/cuda/pool_window.h"
#include "kernels/op_def.h"
#include "kernels/reference/window.h"

namespace kiln::cuda {

inline Result<Pool2d> pool2d_geometry(OpKind op, const Attrs& attrs, const Shape& x, const Shape& y) {
  KILN_REQUIRE(x.size() == 4 && y.size() == 4, unsupported, "needs a 2-D pooling (NCHW input)");
  KILN_ASSIGN(wa, ref::read_window_attrs(attrs, 2, true, true));
  Pool2d p;
  p.max = op == OpKind::MaxPool;
  if (!p.max) {
    KILN_ASSIGN(include, attrs.get_int("count_include_pad", 0));
    p.count_include_pad = include != 0;
  }
  p.batch_channels = x[0] * x[1];
  p.in_h = x[2];
  p.in_w = x[3];
  p.out_h = y[2];
  p.out_w = y[3];
  p.kernel_h = wa.kernel[0];
  p.kernel_w = wa.kernel[1];
  p.stride_h = wa.strides[0];
  p.stride_w = wa.strides[1];
  p.dilation_h = wa.dilations[0];
  p.dilation_w = wa.dilations[1];
  KILN_ASSIGN(h, ref::window_dim(wa, 0, x[2], wa.kernel[0]));
  KILN_ASSIGN(w, ref::window_dim(wa, 1, x[3], wa.kernel[1]));
  KILN_REQUIRE(h.out == y[2] && w.out == y[3], internal, "pooling output ", shape_to_string(y), " does not match the window");
  p.pad_top = h.pad_begin;
  p.pad_bottom = h.pad_end;
  p.pad_left = w.pad_begin;
  p.pad_right = w.pad_end;
  return p;
}

}  // namespace kiln::cuda

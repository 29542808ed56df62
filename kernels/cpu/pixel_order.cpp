#include "kernels/cpu/pixel_order.h"

#include "kernels/onednn/onednn_common.h"

namespace kiln::cpu {
namespace {

onednn::md nhwc_desc(const Shape& s) {
  return onednn::md(onednn::to_dims(s), dnnl::memory::data_type::f32, dnnl::memory::format_tag::acdb);
}

}  // namespace

PixelOrder pixel_order(const ValueDesc& v) {
  if (v.dtype != DType::f32 || v.shape.size() != 4) return PixelOrder::other;
  const bool pixel_is_channel_vector = v.shape[1] == 1 || v.shape[2] * v.shape[3] == 1;
  if (v.layout.plain()) return pixel_is_channel_vector ? PixelOrder::nhwc : PixelOrder::nchw;
  if (!onednn::is_onednn(v) || onednn::check_value(v, "value")) return PixelOrder::other;
  return onednn::value_desc(v) == nhwc_desc(v.shape) ? PixelOrder::nhwc : PixelOrder::other;
}

Layout nhwc_layout(const Shape& shape, int threads) { return onednn::layout_of(nhwc_desc(shape), shape, threads); }

}  // namespace kiln::cpu

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

int64_t channel_block(const ValueDesc& v) {
  if (v.dtype != DType::f32 || v.shape.size() != 4) return 0;
  if (v.layout.plain()) return 1;
  if (!onednn::is_onednn(v) || onednn::check_value(v, "value")) return 0;
  // Float32 elements only: a bfloat16 value (a bf16 conv's output) in the same order holds two bytes each.
  if (onednn::value_desc(v).data_type() != dnnl::memory::data_type::f32) return 0;
  const dnnl_memory_desc_t& d = onednn::value_desc(v).data;
  if (d.format_kind != dnnl_blocked || d.ndims != 4 || d.offset0 != 0) return 0;
  for (int i = 0; i < 4; ++i)
    if (d.padded_dims[i] != d.dims[i] || d.padded_offsets[i] != 0) return 0;
  const dnnl_blocking_desc_t& blk = d.format_desc.blocking;
  if (blk.inner_nblks > 1 || (blk.inner_nblks == 1 && blk.inner_idxs[0] != 1)) return 0;
  const int64_t b = blk.inner_nblks == 1 ? blk.inner_blks[0] : 1;
  const int64_t c = d.dims[1], h = d.dims[2], w = d.dims[3];
  if (c % b != 0) return 0;
  // The strides of channel-major blocks; a dim of size 1 has no stride that matters.
  const int64_t want[4] = {c * h * w, b * h * w, w * b, b};
  for (int i = 0; i < 4; ++i)
    if (d.dims[i] > 1 && blk.strides[i] != want[i]) return 0;
  return b;
}

Layout nhwc_layout(const Shape& shape, int threads) { return onednn::layout_of(nhwc_desc(shape), shape, threads); }

Layout nhwc_bf16_layout(const Shape& shape, int threads) {
  return onednn::layout_of(onednn::retyped(nhwc_desc(shape), dnnl::memory::data_type::bf16), shape, threads);
}

bool is_nhwc_bf16(const ValueDesc& v) {
  if (v.shape.size() != 4 || !onednn::is_onednn(v) || onednn::check_value(v, "value")) return false;
  return onednn::value_desc(v) == onednn::retyped(nhwc_desc(v.shape), dnnl::memory::data_type::bf16);
}

Layout bf16_rows_layout(const Shape& shape, int threads) {
  return onednn::layout_of(onednn::retyped(onednn::plain_desc(shape), dnnl::memory::data_type::bf16), shape, threads);
}

std::optional<QuantParams> nhwc_codes_of(const ValueDesc& v) {
  if (v.shape.size() != 4 || !onednn::is_onednn(v) || onednn::check_value(v, "value", onednn::Quantized::accept)) return std::nullopt;
  const std::optional<QuantParams> q = onednn::quant_of(v);
  if (!q || onednn::value_desc(v) != onednn::retyped(nhwc_desc(v.shape), onednn::quant_data_type(q->type))) return std::nullopt;
  return q;
}

Layout nhwc_codes_layout(const Shape& shape, int threads, const QuantParams& q) {
  const auto type = q.type == QuantType::u8 ? dnnl::memory::data_type::u8 : dnnl::memory::data_type::s8;
  return onednn::layout_of(onednn::retyped(nhwc_desc(shape), type), shape, threads, q.scale);
}

}  // namespace kiln::cpu

// MaxPool over a bfloat16 activation in oneDNN's NHWC (acdb) or 16-channel block (aBcd16b)
// layout, 2 spatial dims, on the stored 16-bit codes: no conversion to float32 and back. oneDNN
// 2.6's bf16 pooling converts every element and ran below its float32 pool (GoogLeNet bf16 at
// batch 1, AMX Xeon: its 13 max pools 1.82 ms, a third of the run).
//
// A bf16 code orders like its value once negative codes have their low 15 bits flipped
// (sign-magnitude to two's complement order): max_key(a, b) on int16 is the max of the values,
// and the same flip maps the winner back. Exact, like any max; -0 sorts below +0, NaN above +inf.
// Padding lanes of a channel block (C not a multiple of 16) hold zeros and pool to zeros.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/reference/window.h"

namespace kiln {
namespace {

using onednn::md;
using Tag = dnnl::memory::format_tag;

inline int16_t order_key(int16_t code) { return static_cast<int16_t>(code ^ ((code >> 15) & 0x7fff)); }

struct PoolDims {
  int64_t n = 0, c = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, dilation[2] = {1, 1}, pad[2] = {0, 0};
};

// The layout tag of a bf16 value this kernel reads (acdb or aBcd16b), or undef.
Tag bf16_tag(const ValueDesc& v) {
  if (v.dtype != DType::f32 || v.shape.size() != 4 || !onednn::is_onednn(v)) return Tag::undef;
  const md desc = onednn::value_desc(v);
  if (desc.data_type() != dnnl::memory::data_type::bf16) return Tag::undef;
  for (Tag tag : {Tag::acdb, Tag::aBcd16b})
    if (desc == md(onednn::to_dims(v.shape), dnnl::memory::data_type::bf16, tag)) return tag;
  return Tag::undef;
}

Result<PoolDims> pool_dims(const KernelBuild& b) {
  const Shape& x = b.inputs[0].shape;
  const Shape& y = b.outputs[0].shape;
  KILN_ASSIGN(wa, ref::read_window_attrs(*b.attrs, 2, true, true));
  PoolDims p;
  p.n = x[0], p.c = x[1], p.in_h = x[2], p.in_w = x[3], p.out_h = y[2], p.out_w = y[3];
  for (size_t d = 0; d < 2; ++d) {
    KILN_ASSIGN(dim, ref::window_dim(wa, d, x[d + 2], wa.kernel[d]));
    KILN_REQUIRE(dim.out == y[d + 2], internal, "output dim ", d, " is ", y[d + 2], ", expected ", dim.out);
    p.kernel[d] = wa.kernel[d];
    p.stride[d] = wa.strides[d];
    p.dilation[d] = wa.dilations[d];
    p.pad[d] = dim.pad_begin;
  }
  return p;
}

// The taps [first, last) of window `o` along one dim that fall inside the input.
inline void window_taps(int64_t o, int64_t stride, int64_t pad, int64_t dilation, int64_t kernel, int64_t in,
                        int64_t& first, int64_t& last) {
  const int64_t start = o * stride - pad;
  first = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
  last = std::min(kernel, start < in ? (in - start + dilation - 1) / dilation : 0);
}

// The max over one window of `n` lanes starting at `x` (taps [y0, y1) x [x0, x1) of the window at
// input row iy0, column ix0). N > 0: exactly N lanes, a constant the compiler keeps in registers;
// N == 0: `n` lanes (a tail).
template <int N>
__attribute__((always_inline)) inline void window_max(const PoolDims& p, const int16_t* x, int16_t* dst, int64_t lanes,
                                                      int64_t n, int64_t y0, int64_t y1, int64_t x0, int64_t x1,
                                                      int64_t iy0, int64_t ix0) {
  constexpr int kMax = N > 0 ? N : 32;
  const int64_t count = N > 0 ? N : n;
  int16_t acc[kMax];
  for (int l = 0; l < kMax; ++l) acc[l] = std::numeric_limits<int16_t>::min();
  for (int64_t ky = y0; ky < y1; ++ky) {
    const int16_t* src_row = x + (iy0 + ky * p.dilation[0]) * p.in_w * lanes;
    for (int64_t kx = x0; kx < x1; ++kx) {
      const int16_t* src = src_row + (ix0 + kx * p.dilation[1]) * lanes;
      for (int64_t l = 0; l < count; ++l) acc[l] = std::max(acc[l], order_key(src[l]));
    }
  }
  for (int64_t l = 0; l < count; ++l) dst[l] = order_key(acc[l]);
}

// One output row of one plane, 32 lanes (one 512-bit vector) at a time. Inlined into each ISA's
// entry point below, which the compiler vectorizes for it.
__attribute__((always_inline)) inline void pool_row(const PoolDims& p, const int16_t* x, int16_t* y, int64_t oy,
                                                    int64_t lanes) {
  int64_t y0, y1;
  window_taps(oy, p.stride[0], p.pad[0], p.dilation[0], p.kernel[0], p.in_h, y0, y1);
  const int64_t iy0 = oy * p.stride[0] - p.pad[0];
  for (int64_t ox = 0; ox < p.out_w; ++ox) {
    int64_t x0, x1;
    window_taps(ox, p.stride[1], p.pad[1], p.dilation[1], p.kernel[1], p.in_w, x0, x1);
    const int64_t ix0 = ox * p.stride[1] - p.pad[1];
    int16_t* dst = y + ox * lanes;
    int64_t c = 0;
    for (; c + 32 <= lanes; c += 32) window_max<32>(p, x + c, dst + c, lanes, 32, y0, y1, x0, x1, iy0, ix0);
    if (c + 16 <= lanes) window_max<16>(p, x + c, dst + c, lanes, 16, y0, y1, x0, x1, iy0, ix0), c += 16;
    if (c < lanes) window_max<0>(p, x + c, dst + c, lanes, lanes - c, y0, y1, x0, x1, iy0, ix0);
  }
}

using PoolRowFn = void (*)(const PoolDims&, const int16_t*, int16_t*, int64_t, int64_t);

__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void pool_row_avx512(const PoolDims& p, const int16_t* x,
                                                                                   int16_t* y, int64_t oy, int64_t lanes) {
  pool_row(p, x, y, oy, lanes);
}

void pool_row_portable(const PoolDims& p, const int16_t* x, int16_t* y, int64_t oy, int64_t lanes) {
  pool_row(p, x, y, oy, lanes);
}

class MaxPoolBf16Kernel final : public Kernel {
 public:
  MaxPoolBf16Kernel(const PoolDims& p, Tag tag, const Shape& y_shape, int threads)
      : p_(p),
        blocked_(tag == Tag::aBcd16b),
        threads_(std::max(1, threads)),
        row_(cpu_isa_available(CpuIsa::avx512) ? pool_row_avx512 : pool_row_portable) {
    layout_ = onednn::layout_of(md(onednn::to_dims(y_shape), dnnl::memory::data_type::bf16, tag), y_shape, threads_);
  }
  std::vector<Layout> output_layouts() const override { return {layout_}; }

  Status run(const KernelArgs& args) override {
    const auto* x = static_cast<const int16_t*>(args.inputs[0]);
    auto* y = static_cast<int16_t*>(args.outputs[0]);
    // A plane is one image (NHWC: every channel per pixel) or one 16-channel block of one image.
    const int64_t lanes = blocked_ ? 16 : p_.c;
    const int64_t planes = blocked_ ? p_.n * ((p_.c + 15) / 16) : p_.n;
    const int64_t rows = planes * p_.out_h;
    const int64_t work = rows * p_.out_w * lanes * p_.kernel[0] * p_.kernel[1];
#pragma omp parallel for num_threads(threads_) schedule(static) if (work > 32768)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t plane = row / p_.out_h, oy = row % p_.out_h;
      row_(p_, x + plane * p_.in_h * p_.in_w * lanes, y + (plane * p_.out_h + oy) * p_.out_w * lanes, oy, lanes);
    }
    return Status::ok();
  }

 private:
  PoolDims p_;
  bool blocked_;
  int threads_;
  PoolRowFn row_;
  Layout layout_;
};

std::optional<std::string> max_pool_bf16_supports(const KernelBuild& b) {
  if (b.op != OpKind::MaxPool) return "handles MaxPool only";
  if (b.inputs.empty() || b.outputs.empty()) return "needs X and Y";
  if (b.outputs.size() > 1 && b.outputs[1].present) return "the Indices output is not supported";
  if (bf16_tag(b.inputs[0]) == Tag::undef) return "needs a bf16 input in oneDNN's acdb or aBcd16b layout, 2 spatial dims";
  if (b.outputs[0].dtype != DType::f32 || b.outputs[0].shape.size() != 4) return "needs a float32 [N, C, H, W] output";
  auto p = pool_dims(b);
  if (!p) return p.error().message;
  // Every window must see an input element (one of padding only has no max to give).
  const int64_t in[2] = {p->in_h, p->in_w}, out[2] = {p->out_h, p->out_w};
  for (int d = 0; d < 2; ++d)
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t first, last;
      window_taps(o, p->stride[d], p->pad[d], p->dilation[d], p->kernel[d], in[d], first, last);
      if (first >= last) return "a window sees no input element";
    }
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> max_pool_bf16_create(const KernelBuild& b) {
  KILN_ASSIGN(p, pool_dims(b));
  return std::unique_ptr<Kernel>(std::make_unique<MaxPoolBf16Kernel>(p, bf16_tag(b.inputs[0]), b.outputs[0].shape, b.threads));
}

}  // namespace

const KernelImpl kCpuMaxPoolBf16{"cpu.max_pool_bf16", max_pool_bf16_supports, max_pool_bf16_create};

}  // namespace kiln

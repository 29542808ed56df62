// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool (float32, 1-3 spatial dims) with
// oneDNN's pooling_v2 primitive. The input is read in its own layout (plain or oneDNN) and the
// output takes the layout oneDNN picks for it (the input's), so blocked regions stay blocked.
// A quantized (u8/s8) input is pooled on its codes and the output keeps its type and scale: max
// is exact, an average rounds to the nearest code (half a quantization step).
//
// ONNX windows map onto oneDNN's floor rule out = (in + l + r - ek) / stride + 1 by widening
// the right pad when ceil_mode adds a last window (ONNX drops a window starting in the end pad,
// so every window still starts inside the input or the begin pad). That is exact for MaxPool
// (oneDNN's max never reads padding) and for AveragePool with count_include_pad=0 (divides by
// the elements inside the input); with count_include_pad=1 oneDNN divides by the full kernel,
// which matches ONNX only when no window hangs past the end pad, so the widened case is
// rejected. Also rejected: the Indices output, windows that see no input element (pads as large
// as the window, dilated taps stepping over a small input), dilated AveragePool.
#include "kernels/onednn/onednn_kernels.h"

#include "kernels/onednn/onednn_common.h"
#include "kernels/reference/window.h"

namespace kiln::onednn {
namespace {

struct PoolGeometry {
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  dims strides, kernel, dilations, pad_l, pad_r;
};

bool is_pool_op(OpKind op) {
  return op == OpKind::MaxPool || op == OpKind::AveragePool || op == OpKind::GlobalAveragePool ||
         op == OpKind::GlobalMaxPool;
}

Result<PoolGeometry> pool_geometry(const KernelBuild& b) {
  const Shape& x = b.inputs[0].shape;
  const Shape& y = b.outputs[0].shape;
  const size_t rank = x.size() - 2;
  PoolGeometry g;
  if (b.op == OpKind::GlobalAveragePool || b.op == OpKind::GlobalMaxPool) {
    g.alg = b.op == OpKind::GlobalMaxPool ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
    for (size_t d = 0; d < rank; ++d) {
      g.strides.push_back(1);
      g.kernel.push_back(x[d + 2]);
      g.dilations.push_back(0);
      g.pad_l.push_back(0);
      g.pad_r.push_back(0);
    }
    return g;
  }
  KILN_ASSIGN(wa, ref::read_window_attrs(*b.attrs, rank, true, true));
  bool include_pad = false;
  if (b.op == OpKind::AveragePool) {
    KILN_ASSIGN(cip, b.attrs->get_int("count_include_pad", 0));
    include_pad = cip == 1;
    g.alg = include_pad ? dnnl::algorithm::pooling_avg_include_padding : dnnl::algorithm::pooling_avg_exclude_padding;
  }
  for (size_t d = 0; d < rank; ++d) {
    const int64_t k = wa.kernel[d], s = wa.strides[d], in = x[d + 2];
    KILN_ASSIGN(dim, ref::window_dim(wa, d, in, k));
    KILN_REQUIRE(dim.out == y[d + 2], internal, "output dim ", d, " is ", y[d + 2], ", expected ", dim.out);
    const int64_t ek = wa.effective_kernel(d, k);
    int64_t pad_r = dim.pad_end;
    if ((in + dim.pad_begin + pad_r - ek) / s + 1 != dim.out) pad_r = (dim.out - 1) * s + ek - in - dim.pad_begin;
    KILN_REQUIRE(pad_r >= 0 && (in + dim.pad_begin + pad_r - ek) / s + 1 == dim.out, unsupported,
                 "the window geometry does not map onto oneDNN's size rule");
    if (b.op == OpKind::AveragePool) {
      KILN_REQUIRE(wa.dilations[d] == 1, unsupported, "dilated AveragePool");
      KILN_REQUIRE(!include_pad || pad_r == dim.pad_end, unsupported,
                   "ceil_mode with count_include_pad=1 clips the last window (oneDNN divides by the full kernel)");
    }
    KILN_REQUIRE(ref::every_window_sees_input(in, k, s, wa.dilations[d], dim.pad_begin, dim.out), unsupported,
                 "pads as large as the window (a window sees no input element)");
    g.strides.push_back(s);
    g.kernel.push_back(k);
    g.dilations.push_back(wa.dilations[d] - 1);
    g.pad_l.push_back(dim.pad_begin);
    g.pad_r.push_back(pad_r);
  }
  return g;
}

std::optional<std::string> pool_supports(const KernelBuild& b) {
  if (!is_pool_op(b.op)) return "handles MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool only";
  if (b.inputs.empty()) return "needs X";
  if (auto why = check_value(b.inputs[0], "X", Quantized::accept)) return why;
  const size_t rank = b.inputs[0].shape.size();
  if (rank < 3 || rank > 5) return "needs 1 to 3 spatial dims";
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  if (b.outputs.size() > 1 && b.outputs[1].present) return "the Indices output is not supported";
  auto g = pool_geometry(b);
  if (!g) return g.error().message;
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> pool_create(const KernelBuild& b) {
  return guarded_create("onednn.pool", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    KILN_ASSIGN(g, pool_geometry(b));
    const md x_md = value_desc(b.inputs[0]);
    const Shape& y_shape = b.outputs[0].shape;
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, g.alg, x_md, any_desc(y_shape, x_md.data_type()), g.strides,
                                     g.kernel, g.dilations, g.pad_l, g.pad_r);
    dnnl::pooling_v2_forward::primitive_desc pd(d, user_scratchpad_attr(), cpu_engine());
    Program program(b.threads);
    program.add(dnnl::pooling_v2_forward(pd), pd,
                {{DNNL_ARG_SRC, program.input(0, x_md)}, {DNNL_ARG_DST, program.output(0, pd.dst_desc())}});
    const std::optional<QuantParams> q = quant_of(b.inputs[0]);
    std::vector<Layout> layouts{q ? layout_of(pd.dst_desc(), y_shape, b.threads, q->scale)
                                  : layout_of(pd.dst_desc(), y_shape, b.threads)};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnPool{"onednn.pool", onednn::pool_supports, onednn::pool_create};
}  // namespace kiln

// Conv (float32, 1-3 spatial dims, groups and depthwise, dilations, every auto_pad mode turned
// into explicit pads) with its fused epilogue: bias inside the primitive, then post-ops
// sum (the residual, input 3) and the activation's eltwise steps.
//   - src: a plain input lets oneDNN choose (format_tag::any; reordered into a scratch temporary
//     when the choice is not plain); a oneDNN-layout input is passed as is, unless oneDNN would
//     only take it with a reference implementation (then any + reorder);
//   - weights (and bias) must be constants: weights are reordered once, here, into the format
//     the primitive chose;
//   - dst is format_tag::any: the output layout is the primitive's dst desc;
//   - residual: reordered (a copy when the layouts agree) into the dst buffer before the
//     primitive runs, which then accumulates into it (sum post-op);
//   - precision bf16 (kernels/precision.h): src, weights and dst in bfloat16 (AMX or AVX512_BF16
//     where the CPU has them), bias float32; a float32 src is converted in the src reorder.
#include "kernels/onednn/onednn_kernels.h"

#include <cstring>

#include "kernels/onednn/onednn_common.h"
#include "kernels/reference/window.h"

namespace kiln::onednn {
namespace {

struct ConvGeometry {
  int64_t group = 1;
  dims strides, dilations, pad_l, pad_r;  // dilations oneDNN-style (0 = dense)
};

Result<ConvGeometry> conv_geometry(const KernelBuild& b) {
  const Shape& x = b.inputs[0].shape;
  const Shape& w = b.inputs[1].shape;
  const Shape& y = b.outputs[0].shape;
  ConvGeometry g;
  KILN_ASSIGN(group, b.attrs->get_int("group", 1));
  g.group = group;
  const size_t rank = x.size() - 2;
  KILN_ASSIGN(wa, ref::read_window_attrs(*b.attrs, rank, false, false));
  for (size_t d = 0; d < rank; ++d) {
    const int64_t k = w[d + 2];
    KILN_ASSIGN(dim, ref::window_dim(wa, d, x[d + 2], k));
    KILN_REQUIRE(dim.out == y[d + 2], internal, "output dim ", d, " is ", y[d + 2], ", expected ", dim.out);
    const int64_t ek = wa.effective_kernel(d, k);
    // oneDNN's size rule: out = (in + l + r - ek) / stride + 1 (floor).
    KILN_REQUIRE((x[d + 2] + dim.pad_begin + dim.pad_end - ek) / wa.strides[d] + 1 == dim.out, unsupported,
                 "pads do not give the output size by oneDNN's rule");
    g.strides.push_back(wa.strides[d]);
    g.dilations.push_back(wa.dilations[d] - 1);
    g.pad_l.push_back(dim.pad_begin);
    g.pad_r.push_back(dim.pad_end);
  }
  return g;
}

std::optional<std::string> conv_supports(const KernelBuild& b) {
  if (b.op != OpKind::Conv) return "handles Conv only";
  if (b.inputs.size() < 2) return "needs X and W";
  if (auto why = check_value(b.inputs[0], "X")) return why;
  const ValueDesc& w = b.inputs[1];
  if (auto why = check_plain_f32(w, "W")) return why;
  if (w.constant == nullptr) return "W must be a constant";
  const size_t rank = b.inputs[0].shape.size();
  if (rank < 3 || rank > 5) return "needs 1 to 3 spatial dims";
  if (w.shape.size() != rank) return "W rank differs from X rank";
  if (b.inputs.size() > 2 && b.inputs[2].present) {
    if (auto why = check_plain_f32(b.inputs[2], "bias")) return why;
    if (b.inputs[2].constant == nullptr) return "bias must be a constant";
  }
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  if (b.inputs.size() > 3 && b.inputs[3].present) {
    if (auto why = check_value(b.inputs[3], "residual")) return why;
    if (b.inputs[3].shape != b.outputs[0].shape) return "residual shape differs from the output shape";
  }
  std::vector<EltwiseStep> steps;
  if (auto why = read_post_ops(*b.attrs, steps)) return why;
  if (auto type = compute_type(*b.attrs); !type) return type.error().message;
  auto g = conv_geometry(b);
  if (!g) return g.error().message;
  const int64_t c = b.inputs[0].shape[1], m = w.shape[0];
  if (g->group < 1 || c % g->group != 0 || m % g->group != 0 || w.shape[1] * g->group != c)
    return "channels do not split into the groups";
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> conv_create(const KernelBuild& b) {
  return guarded_create("onednn.conv", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    KILN_ASSIGN(g, conv_geometry(b));
    KILN_ASSIGN(type, compute_type(*b.attrs));
    const ValueDesc& xv = b.inputs[0];
    const ValueDesc& wv = b.inputs[1];
    const bool has_bias = b.inputs.size() > 2 && b.inputs[2].present;
    const bool has_residual = b.inputs.size() > 3 && b.inputs[3].present;
    const Shape& y_shape = b.outputs[0].shape;

    // Weights as oneDNN sees them: [G, M/G, C/G, k...] when grouped.
    dims w_dims = to_dims(wv.shape);
    if (g.group > 1) {
      w_dims[0] /= g.group;
      w_dims.insert(w_dims.begin(), g.group);
    }
    Shape w_shape(w_dims.begin(), w_dims.end());
    const md w_plain = plain_desc(w_shape);
    const md w_any(w_dims, type, dnnl::memory::format_tag::any);
    const md bias_md = has_bias ? plain_desc(b.inputs[2].shape) : md();

    std::vector<EltwiseStep> acts;
    if (auto why = read_post_ops(*b.attrs, acts)) return make_error(ErrorCode::unsupported, *why);
    dnnl::post_ops ops;
    if (has_residual) ops.append_sum(1.0f);
    for (const EltwiseStep& s : acts) ops.append_eltwise(1.0f, s.alg, s.alpha, s.beta);
    dnnl::primitive_attr attr = user_scratchpad_attr();
    attr.set_post_ops(ops);

    auto make_pd = [&](const md& src) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                        w_any, bias_md, any_desc(y_shape, type), g.strides, g.dilations, g.pad_l, g.pad_r);
      return dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
    };
    const md x_md = value_desc(xv);
    dnnl::convolution_forward::primitive_desc pd;
    bool as_given = false;
    if (is_onednn(xv) && x_md.data_type() == type) {
      try {
        pd = make_pd(x_md);
        as_given = !is_reference_impl(pd);
      } catch (const dnnl::error&) {  // no implementation reads this layout: reorder it
      }
    }
    if (!as_given) pd = make_pd(any_desc(xv.shape, type));

    Program program(b.threads);
    // Weights (and bias): prepacked once into the primitive's formats.
    std::unordered_map<int, dnnl::memory> args;
    args[DNNL_ARG_WEIGHTS] = program.prepacked(w_plain, wv.constant->raw(), pd.weights_desc());
    if (has_bias) args[DNNL_ARG_BIAS] = program.prepacked(bias_md, b.inputs[2].constant->raw(), pd.bias_desc());
    // Source: as given, or reordered into the primitive's choice.
    dnnl::memory x_mem = program.input(0, x_md);
    if (pd.src_desc() != x_md) {
      dnnl::memory x_tmp = program.temp(pd.src_desc());
      dnnl::reorder::primitive_desc rpd(cpu_engine(), x_md, cpu_engine(), pd.src_desc(), user_scratchpad_attr());
      program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, x_mem}, {DNNL_ARG_TO, x_tmp}});
      x_mem = x_tmp;
    }
    args[DNNL_ARG_SRC] = x_mem;
    dnnl::memory y_mem = program.output(0, pd.dst_desc());
    args[DNNL_ARG_DST] = y_mem;
    if (has_residual) {
      const md r_md = value_desc(b.inputs[3]);
      dnnl::reorder::primitive_desc rpd(cpu_engine(), r_md, cpu_engine(), pd.dst_desc(), user_scratchpad_attr());
      const std::unordered_map<int, dnnl::memory> copy_args{{DNNL_ARG_FROM, program.input(3, r_md)}, {DNNL_ARG_TO, y_mem}};
      if (r_md == pd.dst_desc()) program.add_residual_copy(3, 0, dnnl::reorder(rpd), rpd, copy_args);
      else program.add(dnnl::reorder(rpd), rpd, copy_args);
    }
    program.add(dnnl::convolution_forward(pd), pd, std::move(args));
    std::vector<Layout> layouts{layout_of(pd.dst_desc(), y_shape, b.threads)};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnConv{"onednn.conv", onednn::conv_supports, onednn::conv_create};
}  // namespace kiln

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
//     where the CPU has them), bias float32; a float32 src is converted in the src reorder;
//   - precision int8 (kernels/quantization.h): src u8/s8 (a float32 or bf16 input quantized in
//     the src reorder by its int8_input_* parameters, by kiln's own loop when only the element type
//     changes; a quantized one read with its own scale),
//     weights s8 per output channel, int32 accumulation. oneDNN computes
//       dst = act_n(... act_1(oscale[c] * (acc + bias[c]) + sum_scale * dst_before))
//     so the bias is divided into the accumulator domain, oscale[c] = s_in * s_w[c] brings the
//     sum into real units and a quantized output divides by its scale last: folded into oscale
//     and sum_scale without an activation, else the scale of the last eltwise step ((leaky)
//     ReLU would allow either; clip bounds and sigmoid need real units). The residual is summed in the dst
//     buffer: a float32 one into a float32 dst; a quantized one as its own codes and type
//     (sum scale s_r, append_sum's data type: an s8 residual under a u8 dst after a ReLU is never
//     clipped before the sum); a float32 residual with a quantized output runs the primitive with
//     a float32 dst in a temporary, then quantizes it into the output.
#include "kernels/onednn/onednn_kernels.h"

#include <cstring>

#include "kernels/cpu/quantize_codes.h"
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

// The quantization of an int8 Conv: the source (a quantized input's own, else int8_input_*) and
// the output (nullopt: float32).
struct Int8Params {
  QuantParams in;
  std::optional<QuantParams> out;
};

Result<Int8Params> int8_params(const KernelBuild& b) {
  Int8Params p;
  KILN_ASSIGN(in, quant_params_from_attrs(*b.attrs, "input"));
  if (auto given = quant_of(b.inputs[0])) p.in = *given;
  else if (in) p.in = *in;
  else return make_error(ErrorCode::unsupported, "an int8 node with a float32 input needs int8_input_scale");
  KILN_ASSIGN(out, quant_params_from_attrs(*b.attrs, "output"));
  p.out = out;
  return p;
}

std::optional<std::string> conv_supports(const KernelBuild& b) {
  if (b.op != OpKind::Conv) return "handles Conv only";
  if (b.inputs.size() < 2) return "needs X and W";
  auto precision = precision_from_attrs(*b.attrs);
  if (!precision) return precision.error().message;
  const bool int8 = *precision == Precision::int8;
  const Quantized quantized = int8 ? Quantized::accept : Quantized::reject;
  if (auto why = check_value(b.inputs[0], "X", quantized)) return why;
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
    if (auto why = check_value(b.inputs[3], "residual", quantized)) return why;
    if (b.inputs[3].shape != b.outputs[0].shape) return "residual shape differs from the output shape";
  }
  std::vector<EltwiseStep> steps;
  if (auto why = read_post_ops(*b.attrs, steps)) return why;
  if (int8) {
    if (auto p = int8_params(b); !p) return p.error().message;
  } else if (auto type = compute_type(*b.attrs); !type) {
    return type.error().message;
  }
  auto g = conv_geometry(b);
  if (!g) return g.error().message;
  const int64_t c = b.inputs[0].shape[1], m = w.shape[0];
  if (g->group < 1 || c % g->group != 0 || m % g->group != 0 || w.shape[1] * g->group != c)
    return "channels do not split into the groups";
  return std::nullopt;
}

// Weights as oneDNN sees them: [G, M/G, C/G, k...] when grouped.
dims weight_dims(const Shape& w, int64_t group) {
  dims d = to_dims(w);
  if (group > 1) {
    d[0] /= group;
    d.insert(d.begin(), group);
  }
  return d;
}

Result<std::unique_ptr<Kernel>> conv_int8_create(const KernelBuild& b, const ConvGeometry& g) {
  KILN_ASSIGN(q, int8_params(b));
  const ValueDesc& xv = b.inputs[0];
  const ValueDesc& wv = b.inputs[1];
  const bool has_bias = b.inputs.size() > 2 && b.inputs[2].present;
  const bool has_residual = b.inputs.size() > 3 && b.inputs[3].present;
  const std::optional<QuantParams> rq = has_residual ? quant_of(b.inputs[3]) : std::nullopt;
  const QuantParams r_q = rq.value_or(QuantParams{});  // read only when rq is set
  const Shape& y_shape = b.outputs[0].shape;
  std::vector<EltwiseStep> acts;
  if (auto why = read_post_ops(*b.attrs, acts)) return make_error(ErrorCode::unsupported, *why);
  // A float32 residual does not fit a quantized dst buffer: then the primitive writes float32.
  const bool f32_dst = !q.out || (has_residual && !rq);
  const float out_scale = f32_dst ? 1.0f : q.out->scale;
  const float folded = acts.empty() ? out_scale : 1.0f;  // divided out by oscale and the sum scale

  const int64_t m = wv.shape[0], per_channel = shape_numel(wv.shape) / m;
  const float* w = wv.constant->data<float>();
  // A u8 input without VNNI would saturate (quantization.h); for an s8 input oneDNN's non-VNNI
  // kernels already halve the weights themselves (they shift the input to u8), and depthwise
  // kernels widen to 32 bits before multiplying: full codes for both.
  const bool depthwise = g.group > 1 && g.group == xv.shape[1] && g.group == wv.shape[0];
  const int32_t max_code = q.in.type == QuantType::u8 && !depthwise ? int8_weight_max_code() : 127;
  const std::vector<float> w_scales = int8_weight_scales(w, m, per_channel, max_code);
  const std::vector<int8_t> w_q = int8_quantize_weights(w, m, per_channel, w_scales, max_code);
  std::vector<float> oscales(static_cast<size_t>(m));
  for (size_t c = 0; c < oscales.size(); ++c) oscales[c] = q.in.scale * w_scales[c] / folded;

  dnnl::post_ops ops;
  if (has_residual) {
    if (f32_dst) ops.append_sum(1.0f);  // the residual in real units (dequantized when quantized)
    else ops.append_sum(r_q.scale / folded, r_q.type == q.out->type ? data_type::undef : quant_data_type(r_q.type));
  }
  for (size_t i = 0; i < acts.size(); ++i)
    ops.append_eltwise(i + 1 == acts.size() ? 1.0f / out_scale : 1.0f, acts[i].alg, acts[i].alpha, acts[i].beta);
  dnnl::primitive_attr attr = user_scratchpad_attr();
  attr.set_output_scales(1 << 1, oscales);  // per output channel (dim 1 of dst, groups included)
  attr.set_post_ops(ops);

  const dims w_dims = weight_dims(wv.shape, g.group);
  const md w_any(w_dims, data_type::s8, dnnl::memory::format_tag::any);
  const md bias_md = has_bias ? plain_desc(b.inputs[2].shape) : md();
  const data_type dst_type = f32_dst ? data_type::f32 : quant_data_type(q.out->type);
  auto make_pd = [&](const md& src) {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                      w_any, bias_md, any_desc(y_shape, dst_type), g.strides, g.dilations, g.pad_l, g.pad_r);
    return dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
  };
  const md x_md = value_desc(xv);
  const bool x_quantized = quant_of(xv).has_value();
  dnnl::convolution_forward::primitive_desc pd;
  bool as_given = false;
  if (x_quantized) {
    try {
      pd = make_pd(x_md);
      as_given = !is_reference_impl(pd);
    } catch (const dnnl::error&) {  // no implementation reads this layout: reorder it
    }
  }
  if (!as_given) pd = make_pd(any_desc(xv.shape, quant_data_type(q.in.type)));

  Program program(b.threads);
  std::unordered_map<int, dnnl::memory> args;
  // Plain s8 weights reordered into the primitive's format (which adds any s8-source compensation).
  const md w_plain = retyped(plain_desc(Shape(w_dims.begin(), w_dims.end())), data_type::s8);
  args[DNNL_ARG_WEIGHTS] = program.prepacked(w_plain, w_q.data(), pd.weights_desc());
  if (has_bias) {
    // oneDNN adds the bias to the int32 accumulator, before the output scales.
    dnnl::memory bias = program.owned(pd.bias_desc());
    KILN_REQUIRE(pd.bias_desc() == bias_md, internal, "int8 conv picked a non-plain bias");
    float* dst = static_cast<float*>(bias.get_data_handle());
    const float* src = b.inputs[2].constant->data<float>();
    for (size_t c = 0; c < w_scales.size(); ++c) dst[c] = src[c] / (q.in.scale * w_scales[c]);
    args[DNNL_ARG_BIAS] = bias;
  }
  dnnl::memory x_mem = program.input(0, x_md);
  if (pd.src_desc() != x_md) {
    dnnl::memory x_tmp = program.temp(pd.src_desc());
    if (!x_quantized && x_md.data_type() == data_type::f32 && retyped(x_md, pd.src_desc().data_type()) == pd.src_desc()) {
      // Same element order, float32 to codes: kiln's loop, 1.9x oneDNN 2.6's reorder (quantize_codes.h).
      const int64_t count = static_cast<int64_t>(x_md.get_size() / sizeof(float));
      const float inv_scale = 1.0f / q.in.scale;
      const QuantType type = q.in.type;
      const int threads = b.threads;
      program.add_host([x_mem, x_tmp, count, inv_scale, type, threads] {
        cpu::quantize_to_codes(static_cast<const float*>(x_mem.get_data_handle()), x_tmp.get_data_handle(), count,
                               inv_scale, type, threads);
      });
    } else {
      const auto rpd = scaled_reorder(x_md, pd.src_desc(), x_quantized ? 1.0f : 1.0f / q.in.scale);
      program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, x_mem}, {DNNL_ARG_TO, x_tmp}});
    }
    x_mem = x_tmp;
  }
  args[DNNL_ARG_SRC] = x_mem;
  const md y_md = pd.dst_desc();
  const bool requantize = f32_dst && q.out.has_value();  // float32 dst in a temporary, then quantized
  dnnl::memory y_mem = requantize ? program.temp(y_md) : program.output(0, y_md);
  args[DNNL_ARG_DST] = y_mem;
  if (has_residual) {
    const md r_md = value_desc(b.inputs[3]);
    dnnl::memory r_mem = program.input(3, r_md);
    if (f32_dst) {
      // Dequantized (or copied) into the float32 dst.
      const auto rpd = scaled_reorder(r_md, y_md, rq ? r_q.scale : 1.0f);
      const std::unordered_map<int, dnnl::memory> copy_args{{DNNL_ARG_FROM, r_mem}, {DNNL_ARG_TO, y_mem}};
      if (!rq && !requantize && r_md == y_md) program.add_residual_copy(3, 0, dnnl::reorder(rpd), rpd, copy_args);
      else program.add(dnnl::reorder(rpd), rpd, copy_args);
    } else {
      // The residual's codes, in its own type, in the dst buffer: a plain copy (in place when
      // the layouts agree byte for byte).
      const md view_md = retyped(y_md, quant_data_type(r_q.type));
      const auto rpd = scaled_reorder(r_md, view_md, 1.0f);
      const std::unordered_map<int, dnnl::memory> copy_args{{DNNL_ARG_FROM, r_mem}, {DNNL_ARG_TO, program.output(0, view_md)}};
      if (r_md == view_md) program.add_residual_copy(3, 0, dnnl::reorder(rpd), rpd, copy_args);
      else program.add(dnnl::reorder(rpd), rpd, copy_args);
    }
  }
  program.add(dnnl::convolution_forward(pd), pd, std::move(args));
  Layout layout = q.out ? Layout{} : layout_of(y_md, y_shape, b.threads);
  if (requantize) {
    const md out_md = retyped(y_md, quant_data_type(q.out->type));
    const auto rpd = scaled_reorder(y_md, out_md, 1.0f / q.out->scale);
    program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, y_mem}, {DNNL_ARG_TO, program.output(0, out_md)}});
    layout = layout_of(out_md, y_shape, b.threads, q.out->scale);
  } else if (q.out) {
    layout = layout_of(y_md, y_shape, b.threads, q.out->scale);
  }
  return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::vector<Layout>{layout}));
}

Result<std::unique_ptr<Kernel>> conv_create(const KernelBuild& b) {
  return guarded_create("onednn.conv", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    KILN_ASSIGN(g, conv_geometry(b));
    KILN_ASSIGN(precision, precision_from_attrs(*b.attrs));
    if (precision == Precision::int8) return conv_int8_create(b, g);
    KILN_ASSIGN(type, compute_type(*b.attrs));
    const ValueDesc& xv = b.inputs[0];
    const ValueDesc& wv = b.inputs[1];
    const bool has_bias = b.inputs.size() > 2 && b.inputs[2].present;
    const bool has_residual = b.inputs.size() > 3 && b.inputs[3].present;
    const Shape& y_shape = b.outputs[0].shape;

    const dims w_dims = weight_dims(wv.shape, g.group);
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

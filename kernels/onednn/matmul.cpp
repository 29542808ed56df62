// Gemm and MatMul (float32) with oneDNN's matmul primitive, plain inputs and a plain output.
//   Gemm: Y = alpha * A' * B' + beta * C, the transposes expressed by strides. A constant B is
//     reordered once into the format oneDNN picks (scaled by alpha there when alpha != 1); a
//     constant C becomes the bias (times beta), a non-constant C is read as the bias on every
//     run (beta must then be 1). alpha != 1 with a non-constant B runs as a first linear
//     post-op, which is exact only without C: that case is rejected.
//   MatMul: numpy matmul, 1-D operands promoted, batch dims broadcast (oneDNN broadcasts dims of
//     size 1 on either side); a constant B is prepacked; kiln's bias (input 2, N values) is
//     oneDNN's bias, so a GELU after it runs as the post-op (ConvNeXt's and transformers' Linear).
// Both: the fused epilogue (the residual is input 3) as sum then eltwise post-ops; the residual
// is reordered into the output buffer before the primitive runs.
// Precision bf16 (kernels/precision.h): A is converted to bfloat16 into a scratch temporary, a
// constant B is prepacked in bfloat16; the output (and the bias) stay float32 and plain. A MatMul
// with bf16_output (mixed_precision_bf16: every reader is a bf16 product) writes bfloat16 in plain
// order, which a bf16 MatMul reads as it is: ConvNeXt's Linear+GELU writes 384-1536 features a
// pixel that the next Linear reads, half the bytes and no conversion.
// Precision int8 (kernels/quantization.h): A (plain float32) is quantized per int8_input_* into
// a scratch temporary, the constant B (times alpha) per output column to s8 and prepacked; the
// int32 product times oscale[n] = s_in * s_w[n] is in real units (oneDNN adds the bias before
// the scales, so a constant C is divided by s_in * s_w[n]); the output is plain float32, or
// plain u8/s8 with int8_output_* (divided by its scale in oscale without an activation, else in
// the last eltwise step). Gemm needs a constant C; MatMul a constant 2-D B (a batch of rows
// times one matrix); a residual only with a float32 output. An int8 MatMul reads the row-major codes
// of an int8 producer as they are (with their scale): ConvNeXt's Linear+GELU -> Linear at batch 8
// spent 26 ms converting the first one's s8 codes to float32 and the second quantizing them again.
// An s8 input goes to oneDNN as u8 (q + 128), and the bias takes away 128 x each column's weight
// sum: oneDNN 2.6 runs an s8 x s8 matmul without VNNI through a gemm that works the weights'
// compensation out again on every call (1x2048 x 2048x4096: 25.5 ms in s8, 2.0 ms in u8, 0.9 ms
// in float32 on the AVX2 EPYC); u8 x s8 is the product the hardware has, with or without VNNI.
// Where oneDNN's int8 matmul is its gemm (int8_matmul_packs_weights_per_call: AVX2 without VNNI),
// the product runs as a 1x1 convolution over the rows instead (A as an nhwc [1, K, rows, 1]
// image, the output likewise: the same bytes as the plain matrices), whose weights are packed
// once: the gemm packs B again on every call (AVX2 EPYC, one thread: 1x2048 x 2048x4096 1.79 ms
// as a matmul, 0.157 ms as the convolution; 1x1280 x 1280x1000 0.079 vs 0.030 ms; at 1,600 and
// 4,096 rows 2-34% faster still). A C with a row of its own per output row keeps the matmul.
#include "kernels/onednn/onednn_kernels.h"

#include <algorithm>

#include <cstring>

#include "kernels/cpu/quantize_codes.h"
#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

// The zero point an s8 input is fed to the int8 product with (as u8).
constexpr int32_t kInputShift = 128;

bool is_int8(const Attrs& attrs) {
  auto p = precision_from_attrs(attrs);
  return p && *p == Precision::int8;
}

// Why an int8 node cannot run here (nullopt when it can); `residual` is the fused residual input.
std::optional<std::string> int8_supports(const KernelBuild& b, size_t residual) {
  auto in = quant_params_from_attrs(*b.attrs, "input");
  if (!in) return in.error().message;
  if (!*in && !quant_of(b.inputs[0])) return "an int8 node with a float32 input needs int8_input_scale";
  auto out = quant_params_from_attrs(*b.attrs, "output");
  if (!out) return out.error().message;
  if (b.inputs[1].constant == nullptr) return "an int8 product needs a constant B (quantized per column once)";
  if (*out && b.inputs.size() > residual && b.inputs[residual].present)
    return "an int8 product with a quantized output takes no fused residual";
  return std::nullopt;
}

struct GemmParams {
  float alpha = 1.0f, beta = 1.0f;
  bool trans_a = false, trans_b = false;
};

std::optional<std::string> read_gemm(const Attrs& attrs, GemmParams& g) {
  auto alpha = attrs.get_float("alpha", 1.0f);
  auto beta = attrs.get_float("beta", 1.0f);
  auto ta = attrs.get_int("transA", 0);
  auto tb = attrs.get_int("transB", 0);
  if (!alpha || !beta || !ta || !tb) return "bad Gemm attributes";
  if ((*ta != 0 && *ta != 1) || (*tb != 0 && *tb != 1)) return "bad transA/transB";
  g = {*alpha, *beta, *ta == 1, *tb == 1};
  return std::nullopt;
}

// Checks the residual input `i` (optional) against the output.
std::optional<std::string> check_residual(const KernelBuild& b, size_t i) {
  if (b.inputs.size() <= i || !b.inputs[i].present) return std::nullopt;
  if (auto why = check_value(b.inputs[i], "residual")) return why;
  if (b.inputs[i].shape != b.outputs[0].shape) return "residual shape differs from the output shape";
  return std::nullopt;
}

bool has_matmul_bias(const KernelBuild& b) { return b.inputs.size() > 2 && b.inputs[2].present; }


// A value in u8/s8 codes, row-major (what an int8 MatMul with int8_output_* writes).
bool is_code_rows(const ValueDesc& v) {
  const std::optional<QuantParams> q = quant_of(v);
  return q && !check_value(v, "A", Quantized::accept) && value_desc(v) == retyped(plain_desc(v.shape), quant_data_type(q->type));
}

bool writes_bf16(const KernelBuild& b) {
  const auto flag = bf16_output_from_attrs(*b.attrs);
  return flag && *flag;
}

bool uses_c(const KernelBuild& b, const GemmParams& g) {
  return b.inputs.size() > 2 && b.inputs[2].present && g.beta != 0.0f;
}

std::optional<std::string> gemm_supports(const KernelBuild& b) {
  if (b.op != OpKind::Gemm) return "handles Gemm only";
  if (b.inputs.size() < 2) return "needs A and B";
  if (auto why = check_plain_f32(b.inputs[0], "A")) return why;
  if (auto why = check_plain_f32(b.inputs[1], "B")) return why;
  if (b.inputs[0].shape.size() != 2 || b.inputs[1].shape.size() != 2) return "A and B must be 2-D";
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  GemmParams g;
  if (auto why = read_gemm(*b.attrs, g)) return why;
  if (uses_c(b, g)) {
    const ValueDesc& c = b.inputs[2];
    if (c.dtype != DType::f32 || !c.layout.plain() || c.shape.size() > 2) return "C must be plain float32 of rank <= 2";
    if (c.constant == nullptr && g.beta != 1.0f) return "beta != 1 with a non-constant C";
    if (g.alpha != 1.0f && b.inputs[1].constant == nullptr) return "alpha != 1 with a non-constant B and a C";
  }
  if (auto why = check_residual(b, 3)) return why;
  std::vector<EltwiseStep> steps;
  if (auto why = read_post_ops(*b.attrs, steps)) return why;
  if (is_int8(*b.attrs)) {
    if (uses_c(b, g) && b.inputs[2].constant == nullptr) return "an int8 Gemm needs a constant C (it is scaled into the bias)";
    if (uses_c(b, g) && b.inputs[2].shape.size() == 2 && b.inputs[2].shape[1] != b.outputs[0].shape[1])
      return "an int8 Gemm's C must have one value per output column";
    return int8_supports(b, 3);
  }
  const auto type = compute_type(*b.attrs);
  if (!type) return type.error().message;
  if (*type != data_type::f32 && b.inputs[1].constant == nullptr) return "a bf16 Gemm needs a constant B";
  return std::nullopt;
}

// Appends the residual reorder (into the output) when present and returns the post-ops.
// `plain_residual_md` describes a plain residual when the output's dims are not its shape's.
void add_epilogue(const KernelBuild& b, size_t residual, Program& program, const md& dst_md, dnnl::memory dst,
                  dnnl::post_ops& ops, const std::vector<EltwiseStep>& acts, const md* plain_residual_md = nullptr) {
  if (b.inputs.size() > residual && b.inputs[residual].present) {
    const ValueDesc& r = b.inputs[residual];
    const dims y_dims = dst_md.dims();  // by value: one vector for both iterators
    const md r_md = !r.layout.plain()       ? value_desc(r)
                    : plain_residual_md     ? *plain_residual_md
                                            : plain_desc(Shape(y_dims.begin(), y_dims.end()));
    dnnl::reorder::primitive_desc rpd(cpu_engine(), r_md, cpu_engine(), dst_md, user_scratchpad_attr());
    const std::unordered_map<int, dnnl::memory> copy_args{{DNNL_ARG_FROM, program.input(residual, r_md)},
                                                          {DNNL_ARG_TO, dst}};
    // dst is always output 0: with equal descs the engine may run it in place on the residual.
    if (r_md == dst_md) program.add_residual_copy(residual, 0, dnnl::reorder(rpd), rpd, copy_args);
    else program.add(dnnl::reorder(rpd), rpd, copy_args);
    ops.append_sum(1.0f);
  }
  for (const EltwiseStep& s : acts) ops.append_eltwise(1.0f, s.alg, s.alpha, s.beta);
}

// Input 0 (float32, `a_md`) as the primitive reads it: as is, or converted into a temporary of
// the compute type.
dnnl::memory source(Program& program, const md& a_md, data_type type) {
  dnnl::memory a = program.input(0, a_md);
  if (type == a_md.data_type()) return a;
  const md converted = retyped(a_md, type);
  dnnl::memory t = program.temp(converted);
  dnnl::reorder::primitive_desc rpd(cpu_engine(), a_md, cpu_engine(), converted, user_scratchpad_attr());
  program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, t}});
  return t;
}

// The int8 product of A (plain float32 `a_md`, rows x K) and B (`b_kn`, [K, N] row-major,
// alpha applied) into the output of dims `y_dims`, plus the bias `c` (`c_md`, may be empty:
// beta applied, columns N or 1 when N == 1) and the residual input `residual`.
Result<std::unique_ptr<Kernel>> int8_product(const KernelBuild& b, const md& a_md, const std::vector<float>& b_kn,
                                             const md& c_md, const std::vector<float>& c, size_t residual) {
  // A in codes an int8 producer wrote (plain row order, matmul_supports) is read with their scale.
  const std::optional<QuantParams> a_codes = quant_of(b.inputs[0]);
  KILN_ASSIGN(in_opt, quant_params_from_attrs(*b.attrs, "input"));
  KILN_REQUIRE(a_codes || in_opt.has_value(), unsupported, "an int8 node with a float32 input needs int8_input_scale");
  const QuantParams in = a_codes ? *a_codes : *in_opt;
  KILN_ASSIGN(out, quant_params_from_attrs(*b.attrs, "output"));
  std::vector<EltwiseStep> acts;
  if (auto why = read_post_ops(*b.attrs, acts)) return make_error(ErrorCode::unsupported, *why);
  const dims a_dims = a_md.dims();
  const int64_t rows = a_dims[0], k = a_dims[1], n = static_cast<int64_t>(b_kn.size()) / k;
  const md y_f32 = plain_desc(Shape{rows, n});
  const md y_md = out ? retyped(y_f32, quant_data_type(out->type)) : y_f32;
  const float out_scale = out ? out->scale : 1.0f;
  const float folded = acts.empty() ? out_scale : 1.0f;

  // B per output column: [N, K] rows for the scales, stored back as a [K, N] desc with strides.
  std::vector<float> b_nk(b_kn.size());
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) b_nk[static_cast<size_t>(j * k + i)] = b_kn[static_cast<size_t>(i * n + j)];
  const int32_t max_code = int8_weight_max_code();  // 63 without VNNI: no 16-bit saturation
  const std::vector<float> w_scales = int8_weight_scales(b_nk.data(), n, k, max_code);
  const std::vector<int8_t> w_q = int8_quantize_weights(b_nk.data(), n, k, w_scales, max_code);
  std::vector<float> oscales(static_cast<size_t>(n));
  for (size_t j = 0; j < oscales.size(); ++j) oscales[j] = in.scale * w_scales[j] / folded;

  const bool shift_input = in.type == QuantType::s8;
  const bool has_c = !c.empty();
  const bool use_bias = has_c || shift_input;
  const bool has_residual = b.inputs.size() > residual && b.inputs[residual].present;
  const bool as_conv = int8_matmul_packs_weights_per_call() && (!has_c || c_md.dims()[0] == 1) &&
                       (!has_residual || b.inputs[residual].layout.plain());
  // Each column's weight sum: what the shift adds to the column's accumulator.
  std::vector<float> column_sums(static_cast<size_t>(n), 0.0f);
  if (shift_input)
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += w_q[static_cast<size_t>(j * k + i)];
      column_sums[static_cast<size_t>(j)] = static_cast<float>(sum);
    }

  // The 1x1 convolution's view of the same bytes: A [rows, K] (with a_md's strides) as an image of
  // K channels, rows high and 1 wide; the output [rows, N] as nhwc; B as [N, K, 1, 1].
  const auto nhwc = dnnl::memory::format_tag::nhwc;
  const dims a_strides(a_md.data.format_desc.blocking.strides, a_md.data.format_desc.blocking.strides + 2);
  const md a_image({1, k, rows, 1}, data_type::f32, dims{rows * k, a_strides[1], a_strides[0], 1});
  const md y_image({1, n, rows, 1}, y_md.data_type(), nhwc);
  const md residual_image({1, n, rows, 1}, data_type::f32, nhwc);
  const md src_in = as_conv ? a_image : a_md;
  const md src_q = as_conv ? md({1, k, rows, 1}, data_type::u8, nhwc) : retyped(plain_desc(Shape{rows, k}), data_type::u8);
  const md dst = as_conv ? y_image : y_md;
  const md w_plain = as_conv ? md({n, k, 1, 1}, data_type::s8, dnnl::memory::format_tag::oihw)
                             : md({k, n}, data_type::s8, dims{1, k});
  const md bias_md = as_conv ? md({n}, data_type::f32, dnnl::memory::format_tag::a) : has_c ? c_md : plain_desc(Shape{1, n});

  Program program(b.threads);
  dnnl::memory y_mem = program.output(0, dst);
  dnnl::post_ops ops;
  add_epilogue(b, residual, program, dst, y_mem, ops, {}, as_conv ? &residual_image : nullptr);
  for (size_t i = 0; i < acts.size(); ++i)
    ops.append_eltwise(i + 1 == acts.size() ? 1.0f / out_scale : 1.0f, acts[i].alg, acts[i].alpha, acts[i].beta);
  dnnl::primitive_attr attr = user_scratchpad_attr();
  attr.set_output_scales(1 << 1, oscales);  // per column of the output (the image's channel)
  attr.set_post_ops(ops);

  std::unordered_map<int, dnnl::memory> args;
  // The u8 source: u8 codes as they are; s8 codes shifted by kiln's loop; row-major float32 quantized
  // (and shifted) by kiln's loop (1.9x oneDNN 2.6's reorder, quantize_codes.h); else oneDNN's reorder.
  const int64_t count = rows * k;
  const int threads = b.threads;
  if (a_codes && !shift_input) {
    args[DNNL_ARG_SRC] = program.input(0, src_q);  // the same bytes in the same order
  } else if (a_codes) {
    dnnl::memory a_tmp = program.temp(src_q), a_in = program.input(0, retyped(src_q, data_type::s8));
    program.add_host([a_in, a_tmp, count, threads] {
      cpu::shift_s8_codes(static_cast<const int8_t*>(a_in.get_data_handle()), static_cast<uint8_t*>(a_tmp.get_data_handle()),
                          count, threads);
    });
    args[DNNL_ARG_SRC] = a_tmp;
  } else if (a_strides == dims{k, 1}) {
    dnnl::memory a_tmp = program.temp(src_q), a_in = program.input(0, src_in);
    const float inv_scale = 1.0f / in.scale;
    program.add_host([a_in, a_tmp, count, inv_scale, shift_input, threads] {
      const auto* x = static_cast<const float*>(a_in.get_data_handle());
      auto* codes = static_cast<uint8_t*>(a_tmp.get_data_handle());
      if (shift_input) cpu::quantize_to_shifted_codes(x, codes, count, inv_scale, threads);
      else cpu::quantize_to_codes(x, codes, count, inv_scale, QuantType::u8, threads);
    });
    args[DNNL_ARG_SRC] = a_tmp;
  } else {
    dnnl::memory a_tmp = program.temp(src_q);
    const auto rpd = scaled_reorder(src_in, src_q, 1.0f / in.scale, shift_input ? kInputShift : 0);
    program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, program.input(0, src_in)}, {DNNL_ARG_TO, a_tmp}});
    args[DNNL_ARG_SRC] = a_tmp;
  }
  args[DNNL_ARG_DST] = y_mem;
  if (use_bias) {
    // In accumulator units (oneDNN 2.6 adds the bias before the scales).
    dnnl::memory bias = program.owned(bias_md);
    float* out_bias = static_cast<float*>(bias.get_data_handle());
    const dims bias_dims = bias_md.dims();
    const int64_t bias_cols = bias_dims.back();
    const size_t count = static_cast<size_t>(bias_dims.size() == 2 ? bias_dims[0] * bias_cols : bias_cols);
    for (size_t i = 0; i < count; ++i) {
      const size_t col = i % static_cast<size_t>(bias_cols);
      out_bias[i] = (has_c ? c[i] / (in.scale * w_scales[col]) : 0.0f) - (shift_input ? kInputShift * column_sums[col] : 0.0f);
    }
    args[DNNL_ARG_BIAS] = bias;
  }
  if (as_conv) {
    const md w_any({n, k, 1, 1}, data_type::s8, dnnl::memory::format_tag::any);
    const auto d = use_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                                              src_q, w_any, bias_md, dst, {1, 1}, {0, 0}, {0, 0})
                            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                                              src_q, w_any, dst, {1, 1}, {0, 0}, {0, 0});
    const dnnl::convolution_forward::primitive_desc pd(d, attr, cpu_engine());
    args[DNNL_ARG_WEIGHTS] = program.prepacked(w_plain, w_q.data(), pd.weights_desc());
    program.add(dnnl::convolution_forward(pd), pd, std::move(args));
  } else {
    const md w_any({k, n}, data_type::s8, dnnl::memory::format_tag::any);
    const dnnl::matmul::desc d = use_bias ? dnnl::matmul::desc(src_q, w_any, bias_md, dst) : dnnl::matmul::desc(src_q, w_any, dst);
    const dnnl::matmul::primitive_desc pd(d, attr, cpu_engine());
    args[DNNL_ARG_WEIGHTS] = program.prepacked(w_plain, w_q.data(), pd.weights_desc());
    program.add(dnnl::matmul(pd), pd, std::move(args));
  }
  const Shape& y_shape = b.outputs[0].shape;
  const Layout layout = out ? layout_of(retyped(plain_desc(y_shape), quant_data_type(out->type)), y_shape, b.threads, out->scale)
                            : Layout{};
  return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::vector<Layout>{layout}));
}

Result<std::unique_ptr<Kernel>> gemm_create(const KernelBuild& b) {
  return guarded_create("onednn.gemm", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    GemmParams g;
    if (auto why = read_gemm(*b.attrs, g)) return make_error(ErrorCode::unsupported, *why);
    std::vector<EltwiseStep> acts;
    if (auto why = read_post_ops(*b.attrs, acts)) return make_error(ErrorCode::unsupported, *why);
    const Shape& a = b.inputs[0].shape;
    const int64_t m = b.outputs[0].shape[0], n = b.outputs[0].shape[1];
    const int64_t k = g.trans_a ? a[0] : a[1];
    const auto f32 = dnnl::memory::data_type::f32;
    const md a_md({m, k}, f32, g.trans_a ? dims{1, m} : dims{k, 1});
    const md w_plain({k, n}, f32, g.trans_b ? dims{1, k} : dims{n, 1});
    const bool const_b = b.inputs[1].constant != nullptr;
    if (is_int8(*b.attrs)) {
      // B' = alpha * B (transposed when transB) as [K, N]; C times beta as a [rows, N] bias.
      const float* w = b.inputs[1].constant->data<float>();
      std::vector<float> b_kn(static_cast<size_t>(k * n));
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < n; ++j) b_kn[static_cast<size_t>(i * n + j)] = g.alpha * w[g.trans_b ? j * k + i : i * n + j];
      md c_md;
      std::vector<float> c;
      if (uses_c(b, g)) {
        Shape cs = b.inputs[2].shape;
        while (cs.size() < 2) cs.insert(cs.begin(), 1);
        KILN_REQUIRE(cs[1] == n, unsupported, "an int8 Gemm's C must have one value per output column");
        c_md = plain_desc(cs);
        const Tensor& ct = *b.inputs[2].constant;
        for (int64_t i = 0; i < ct.numel(); ++i) c.push_back(g.beta * ct.data<float>()[i]);
      }
      return int8_product(b, a_md, b_kn, c_md, c, 3);
    }
    KILN_ASSIGN(type, compute_type(*b.attrs));
    const md w_md = const_b ? md({k, n}, type, dnnl::memory::format_tag::any) : w_plain;
    const md y_md = plain_desc(b.outputs[0].shape);
    const bool has_c = uses_c(b, g);
    md c_md;
    if (has_c) {
      Shape c = b.inputs[2].shape;
      while (c.size() < 2) c.insert(c.begin(), 1);
      c_md = plain_desc(c);
    }

    Program program(b.threads);
    dnnl::memory y_mem = program.output(0, y_md);
    dnnl::post_ops ops;
    if (g.alpha != 1.0f && !const_b) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, g.alpha, 0.0f);
    add_epilogue(b, 3, program, y_md, y_mem, ops, acts);
    dnnl::primitive_attr attr = user_scratchpad_attr();
    attr.set_post_ops(ops);
    const md src_md = retyped(a_md, type);
    dnnl::matmul::desc d = has_c ? dnnl::matmul::desc(src_md, w_md, c_md, y_md) : dnnl::matmul::desc(src_md, w_md, y_md);
    dnnl::matmul::primitive_desc pd(d, attr, cpu_engine());

    std::unordered_map<int, dnnl::memory> args;
    args[DNNL_ARG_SRC] = source(program, a_md, type);
    if (const_b) {
      const Tensor& w = *b.inputs[1].constant;
      if (g.alpha != 1.0f) {
        std::vector<float> scaled(static_cast<size_t>(w.numel()));
        for (size_t i = 0; i < scaled.size(); ++i) scaled[i] = g.alpha * w.data<float>()[i];
        args[DNNL_ARG_WEIGHTS] = program.prepacked(w_plain, scaled.data(), pd.weights_desc());
      } else {
        args[DNNL_ARG_WEIGHTS] = program.prepacked(w_plain, w.raw(), pd.weights_desc());
      }
    } else {
      args[DNNL_ARG_WEIGHTS] = program.input(1, w_plain);
    }
    if (has_c) {
      const ValueDesc& c = b.inputs[2];
      if (c.constant != nullptr) {
        dnnl::memory bias = program.owned(c_md);
        float* dst = static_cast<float*>(bias.get_data_handle());
        for (int64_t i = 0; i < c.constant->numel(); ++i) dst[i] = g.beta * c.constant->data<float>()[i];
        args[DNNL_ARG_BIAS] = bias;
      } else {
        args[DNNL_ARG_BIAS] = program.input(2, c_md);
      }
    }
    args[DNNL_ARG_DST] = y_mem;
    program.add(dnnl::matmul(pd), pd, std::move(args));
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::vector<Layout>{Layout{}}));
  });
}

// ---- MatMul ----

struct MatMulDims {
  dims a, b, y;  // promoted to one rank
};

std::optional<std::string> matmul_dims(const KernelBuild& b, MatMulDims& d) {
  Shape sa = b.inputs[0].shape, sb = b.inputs[1].shape;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const size_t rank = std::max(sa.size(), sb.size());
  if (rank > DNNL_MAX_NDIMS) return "rank above oneDNN's 12";
  while (sa.size() < rank) sa.insert(sa.begin(), 1);
  while (sb.size() < rank) sb.insert(sb.begin(), 1);
  d.a = to_dims(sa);
  d.b = to_dims(sb);
  d.y.assign(rank, 0);
  for (size_t i = 0; i + 2 < rank; ++i) {
    if (sa[i] != sb[i] && sa[i] != 1 && sb[i] != 1) return "batch dims do not broadcast";
    d.y[i] = std::max(sa[i], sb[i]);
  }
  d.y[rank - 2] = sa[rank - 2];
  d.y[rank - 1] = sb[rank - 1];
  if (sa[rank - 1] != sb[rank - 2]) return "inner dims differ";
  if (shape_numel(Shape(d.y.begin(), d.y.end())) != shape_numel(b.outputs[0].shape)) return "output size mismatch";
  // A batch of rows times one weight matrix ([.., M, K] x [K, N], ConvNeXt's and transformers'
  // linear layers) is one [rows, K] x [K, N] GEMM: oneDNN runs the batched form as many small
  // ones (ConvNeXt-T: 56 matmuls of 56 rows each instead of one of 3136).
  const bool one_weight = std::all_of(sb.begin(), sb.end() - 2, [](int64_t v) { return v == 1; });
  const bool plain_residual = b.inputs.size() < 4 || !b.inputs[3].present || b.inputs[3].layout.plain();
  if (rank > 2 && one_weight && plain_residual) {
    const int64_t rows = shape_numel(Shape(sa.begin(), sa.end() - 1));
    d.a = {rows, sa[rank - 1]};
    d.b = {sb[rank - 2], sb[rank - 1]};
    d.y = {rows, sb[rank - 1]};
  }
  return std::nullopt;
}

std::optional<std::string> matmul_supports(const KernelBuild& b) {
  if (b.op != OpKind::MatMul) return "handles MatMul only";
  if (b.inputs.size() < 2) return "needs A and B";
  if (is_bf16_rows(b.inputs[0])) {
    const auto type = compute_type(*b.attrs);
    if (!type || *type != data_type::bf16) return "A is bfloat16, which only a bf16 MatMul reads";
  } else if (quant_of(b.inputs[0])) {
    if (!is_int8(*b.attrs)) return "A is quantized (" + b.inputs[0].layout.describe() + "), which only an int8 MatMul reads";
    if (!is_code_rows(b.inputs[0])) return "A is quantized in a blocked layout (" + b.inputs[0].layout.describe() + ")";
  } else if (auto why = check_plain_f32(b.inputs[0], "A")) {
    return why;
  }
  if (auto why = check_plain_f32(b.inputs[1], "B")) return why;
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  MatMulDims d;
  if (auto why = matmul_dims(b, d)) return why;
  if (auto why = check_residual(b, 3)) return why;
  if (b.inputs.size() > 3 && b.inputs[3].present && !b.inputs[3].layout.plain() && to_dims(b.outputs[0].shape) != d.y)
    return "residual in a oneDNN layout for a promoted (1-D operand) MatMul";
  if (has_matmul_bias(b)) {
    const ValueDesc& bias = b.inputs[2];
    if (auto why = check_plain_f32(bias, "bias")) return why;
    if (bias.shape.size() != 1 || bias.shape[0] != d.y.back()) return "the bias must be a vector of N values";
    if (is_int8(*b.attrs) && bias.constant == nullptr) return "an int8 MatMul needs a constant bias (it is scaled into oneDNN's)";
  }
  std::vector<EltwiseStep> steps;
  if (auto why = read_post_ops(*b.attrs, steps)) return why;
  if (is_int8(*b.attrs)) {
    if (d.b.size() != 2 || d.a.size() != 2) return "an int8 MatMul needs one 2-D B for every row of A";
    return int8_supports(b, 3);
  }
  const auto type = compute_type(*b.attrs);
  if (!type) return type.error().message;
  if (*type != data_type::f32 && b.inputs[1].constant == nullptr) return "a bf16 MatMul needs a constant B";
  if (writes_bf16(b) && *type != data_type::bf16) return "bf16_output on a MatMul that does not compute in bf16";
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> matmul_create(const KernelBuild& b) {
  return guarded_create("onednn.matmul", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    MatMulDims d;
    if (auto why = matmul_dims(b, d)) return make_error(ErrorCode::unsupported, *why);
    std::vector<EltwiseStep> acts;
    if (auto why = read_post_ops(*b.attrs, acts)) return make_error(ErrorCode::unsupported, *why);
    const bool a_bf16 = is_bf16_rows(b.inputs[0]);
    const md a_md = retyped(plain_desc(Shape(d.a.begin(), d.a.end())), a_bf16 ? data_type::bf16 : data_type::f32);
    const md w_plain = plain_desc(Shape(d.b.begin(), d.b.end()));
    const bool y_bf16 = writes_bf16(b);
    const md y_md = retyped(plain_desc(Shape(d.y.begin(), d.y.end())), y_bf16 ? data_type::bf16 : data_type::f32);
    const bool const_b = b.inputs[1].constant != nullptr;
    const bool has_bias = has_matmul_bias(b);
    // The bias as a row broadcast over the output's other dims.
    dims bias_dims(d.y.size(), 1);
    bias_dims.back() = d.y.back();
    const md bias_md = plain_desc(Shape(bias_dims.begin(), bias_dims.end()));
    if (is_int8(*b.attrs)) {
      const Tensor& w = *b.inputs[1].constant;
      std::vector<float> c;
      if (has_bias) c.assign(b.inputs[2].constant->data<float>(), b.inputs[2].constant->data<float>() + b.inputs[2].constant->numel());
      return int8_product(b, a_md, std::vector<float>(w.data<float>(), w.data<float>() + w.numel()),
                          has_bias ? bias_md : md(), c, 3);
    }
    KILN_ASSIGN(type, compute_type(*b.attrs));
    const md src_md = retyped(a_md, type);

    Program program(b.threads);
    dnnl::memory y_mem = program.output(0, y_md);
    dnnl::post_ops ops;
    add_epilogue(b, 3, program, y_md, y_mem, ops, acts);
    dnnl::primitive_attr attr = user_scratchpad_attr();
    attr.set_post_ops(ops);
    dnnl::matmul::primitive_desc pd;
    bool packed = false;
    if (const_b) {
      try {
        const md w_any(d.b, type, dnnl::memory::format_tag::any);
        pd = dnnl::matmul::primitive_desc(has_bias ? dnnl::matmul::desc(src_md, w_any, bias_md, y_md)
                                                   : dnnl::matmul::desc(src_md, w_any, y_md),
                                          attr, cpu_engine());
        packed = true;
      } catch (const dnnl::error&) {
      }
    }
    if (!packed) {
      KILN_REQUIRE(type == data_type::f32, unsupported, "oneDNN offers no bf16 matmul for these shapes");
      pd = dnnl::matmul::primitive_desc(has_bias ? dnnl::matmul::desc(a_md, w_plain, bias_md, y_md)
                                                 : dnnl::matmul::desc(a_md, w_plain, y_md),
                                        attr, cpu_engine());
    }
    std::unordered_map<int, dnnl::memory> args;
    args[DNNL_ARG_SRC] = source(program, a_md, type);
    args[DNNL_ARG_WEIGHTS] = packed ? program.prepacked(w_plain, b.inputs[1].constant->raw(), pd.weights_desc())
                                    : program.input(1, w_plain);
    if (has_bias) {
      const ValueDesc& bias = b.inputs[2];
      if (bias.constant != nullptr) {
        dnnl::memory owned = program.owned(bias_md);
        std::memcpy(owned.get_data_handle(), bias.constant->raw(), bias_md.get_size());
        args[DNNL_ARG_BIAS] = owned;
      } else {
        args[DNNL_ARG_BIAS] = program.input(2, bias_md);
      }
    }
    args[DNNL_ARG_DST] = y_mem;
    program.add(dnnl::matmul(pd), pd, std::move(args));
    const Shape& y_shape = b.outputs[0].shape;
    const Layout layout = y_bf16 ? layout_of(retyped(plain_desc(y_shape), data_type::bf16), y_shape, b.threads) : Layout{};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::vector<Layout>{layout}));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnGemm{"onednn.gemm", onednn::gemm_supports, onednn::gemm_create};
const KernelImpl kOneDnnMatMul{"onednn.matmul", onednn::matmul_supports, onednn::matmul_create};

bool int8_matmul_packs_weights_per_call() {
  static const bool packs = [] {
    // oneDNN names its gemm-based matmul "gemm:..." and the one with prepacked blocks "brg:...".
    const onednn::md a({1, 64}, onednn::data_type::u8, dnnl::memory::format_tag::ab);
    const onednn::md w({64, 64}, onednn::data_type::s8, dnnl::memory::format_tag::any);
    const onednn::md y({1, 64}, onednn::data_type::f32, dnnl::memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, w, y), dnnl::primitive_attr(), onednn::cpu_engine());
    return std::string(pd.impl_info_str()).rfind("gemm", 0) == 0;
  }();
  return packs;
}

}  // namespace kiln

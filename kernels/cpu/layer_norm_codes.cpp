// LayerNormalization over the last axis written as int8 codes (int8_output: quantize_int8 gives one where
// every reader is an int8 MatMul, ConvNeXt's first Linear of each block). oneDNN 2.6's layer
// normalization writes its source's type, so the float32 rows were written out and the MatMul quantized
// them again in its own step (ConvNeXt-T int8 batch 8: 18 LayerNorms of 0.3-2.4 M values). Here each
// row's statistics and codes are made while the row is in L1: one read of X, a quarter of the bytes
// written, nothing for the MatMul to convert. The codes are in the layout an int8 MatMul writes for
// another (plain row-major u8/s8 carrying their scale), which the reader takes as it is.
// Statistics in float32 over the row (sums of x - x[0] and its squares): the reference's doubles agree to
// float rounding, so a code may differ by one where a value sits at a rounding boundary.
// Not here: X other than plain float32, Scale/B other than float32 [C] constants, Mean/InvStdDev outputs.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/quantize_codes.h"
#include "kernels/onednn/onednn_common.h"

namespace kiln {
namespace {

std::optional<std::string> layer_norm_codes_supports(const KernelBuild& b) {
  if (b.op != OpKind::LayerNormalization) return "handles LayerNormalization only";
  auto codes = quant_params_from_attrs(*b.attrs, "output");
  if (!codes || !*codes) return "writes int8 codes only (int8_output)";
  if (b.inputs.size() < 2 || b.inputs.size() > 3 || b.outputs.size() != 1) return "needs X, Scale, maybe B and one output";
  const ValueDesc& x = b.inputs[0];
  if (!x.present || !x.layout.plain() || x.dtype != DType::f32 || x.shape.size() < 2) return "needs plain float32 X of rank >= 2";
  auto axis = b.attrs->get_int("axis", -1);
  if (!axis || (*axis != -1 && *axis != static_cast<int64_t>(x.shape.size()) - 1)) return "normalizes the last axis only";
  for (size_t i = 1; i < b.inputs.size(); ++i) {
    const ValueDesc& v = b.inputs[i];
    if (!v.present || !v.constant || v.dtype != DType::f32 || v.shape != Shape{x.shape.back()})
      return "Scale and B must be float32 [C] constants";
  }
  if (b.outputs[0].shape != x.shape) return "the output must have X's shape";
  auto eps = b.attrs->get_float("epsilon", 1e-5f);
  if (!eps || !std::isfinite(*eps) || *eps < 0) return "bad epsilon";
  return std::nullopt;
}

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

inline __mmask16 tail_mask(int64_t left) { return static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1); }

// One row: the sum and the sum of squares of x - x[0] in one pass (shifted by the row's first value, so the
// variance does not cancel as E[x^2] - E[x]^2 of raw values would), two accumulators each; then
// y = (x - mean) * rstd * scale + shift quantized. A separate pass for the centred squares, and one
// accumulator, ran 25% slower than oneDNN's float32 LayerNorm (ConvNeXt-T stage 1 at batch 8: 0.76 vs 0.60
// ms), more than the MatMul saved by reading codes.
// The statistics of one row: mean and 1 / sqrt(variance + eps).
struct RowStats {
  float mean, rstd;
};

KILN_AVX512 inline RowStats stats_avx512(const float* x, int64_t c, float eps) {
  const __m512 x0 = _mm512_set1_ps(x[0]);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), q0 = _mm512_setzero_ps(), q1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= c; i += 32) {
    const __m512 a = _mm512_sub_ps(_mm512_loadu_ps(x + i), x0), b = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), x0);
    s0 = _mm512_add_ps(s0, a), s1 = _mm512_add_ps(s1, b);
    q0 = _mm512_fmadd_ps(a, a, q0), q1 = _mm512_fmadd_ps(b, b, q1);
  }
  for (; i < c; i += 16) {
    const __mmask16 k = tail_mask(c - i);
    const __m512 a = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + i), x0);
    s0 = _mm512_add_ps(s0, a), q0 = _mm512_fmadd_ps(a, a, q0);
  }
  const float n = static_cast<float>(c);
  const float shifted_mean = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / n;
  const float var = std::max(0.0f, _mm512_reduce_add_ps(_mm512_add_ps(q0, q1)) / n - shifted_mean * shifted_mean);
  return {x[0] + shifted_mean, 1.0f / std::sqrt(var + eps)};
}

KILN_AVX512 inline void normalize_avx512(const float* x, RowStats st, const float* scale, const float* shift, int64_t c,
                                         __m512 q, __m512i lo, __m512i hi, uint8_t* out) {
  const __m512 m = _mm512_set1_ps(st.mean), r = _mm512_set1_ps(st.rstd);
  for (int64_t i = 0; i < c; i += 16) {
    const __mmask16 k = tail_mask(c - i);
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m), r);
    const __m512 y = _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(k, scale + i), _mm512_maskz_loadu_ps(k, shift + i));
    cpu::quantize16_avx512(y, q, lo, hi, out + i, k);
  }
}

// `rows` rows, two at a time so that one row's reductions and square root overlap the other's loads.
KILN_AVX512 void rows_avx512(const float* x, int64_t rows, const float* scale, const float* shift, int64_t c, float eps,
                             float inv, cpu::CodeBounds bounds, uint8_t* out) {
  const __m512 q = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(bounds.lo), hi = _mm512_set1_epi32(bounds.hi);
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    const RowStats a = stats_avx512(x + r * c, c, eps), b = stats_avx512(x + (r + 1) * c, c, eps);
    normalize_avx512(x + r * c, a, scale, shift, c, q, lo, hi, out + r * c);
    normalize_avx512(x + (r + 1) * c, b, scale, shift, c, q, lo, hi, out + (r + 1) * c);
  }
  if (r < rows) normalize_avx512(x + r * c, stats_avx512(x + r * c, c, eps), scale, shift, c, q, lo, hi, out + r * c);
}

void rows_portable(const float* x, int64_t rows, const float* scale, const float* shift, int64_t c, float eps, float inv,
                   cpu::CodeBounds bounds, uint8_t* out) {
  for (int64_t r = 0; r < rows; ++r, x += c, out += c) {
    float sum = 0;
    for (int64_t i = 0; i < c; ++i) sum += x[i];
    const float mean = sum / static_cast<float>(c);
    float sq = 0;
    for (int64_t i = 0; i < c; ++i) sq += (x[i] - mean) * (x[i] - mean);
    const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(c) + eps);
    for (int64_t i = 0; i < c; ++i) out[i] = cpu::quantize_one((x[i] - mean) * rstd * scale[i] + shift[i], inv, bounds);
  }
}

class LayerNormCodesKernel final : public Kernel {
 public:
  LayerNormCodesKernel(const KernelBuild& b, QuantParams codes, float eps)
      : threads_(std::max(1, b.threads)), eps_(eps), inv_(1.0f / codes.scale), bounds_(cpu::code_bounds(codes.type)) {
    const Shape& x = b.inputs[0].shape;
    c_ = x.back();
    rows_ = shape_numel(x) / std::max<int64_t>(1, c_);
    const float* s = b.inputs[1].constant->data<float>();
    scale_.assign(s, s + c_);
    shift_.assign(static_cast<size_t>(c_), 0.0f);
    if (b.inputs.size() > 2) {
      const float* t = b.inputs[2].constant->data<float>();
      shift_.assign(t, t + c_);
    }
    rows_fn_ = cpu_isa_available(CpuIsa::avx512) ? rows_avx512 : rows_portable;
    layout_ = onednn::layout_of(onednn::retyped(onednn::plain_desc(x), onednn::quant_data_type(codes.type)), x, threads_,
                                codes.scale);
  }
  std::vector<Layout> output_layouts() const override { return {layout_}; }

  Status run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<uint8_t*>(args.outputs[0]);
    // Blocks of rows over the threads.
    constexpr int64_t kRowsPerBlock = 64;
    const int64_t blocks = (rows_ + kRowsPerBlock - 1) / kRowsPerBlock;
#pragma omp parallel for num_threads(threads_) schedule(static) if (rows_ * c_ > 16384)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t r0 = blk * kRowsPerBlock, n = std::min(kRowsPerBlock, rows_ - r0);
      rows_fn_(x + r0 * c_, n, scale_.data(), shift_.data(), c_, eps_, inv_, bounds_, y + r0 * c_);
    }
    return Status::ok();
  }

 private:
  using Rows = void (*)(const float*, int64_t, const float*, const float*, int64_t, float, float, cpu::CodeBounds, uint8_t*);
  int threads_;
  float eps_, inv_;
  cpu::CodeBounds bounds_;
  int64_t c_ = 0, rows_ = 0;
  std::vector<float> scale_, shift_;
  Rows rows_fn_ = nullptr;
  Layout layout_;
};

Result<std::unique_ptr<Kernel>> layer_norm_codes_create(const KernelBuild& b) {
  return onednn::guarded_create("cpu.layer_norm_codes", [&]() -> Result<std::unique_ptr<Kernel>> {
    KILN_ASSIGN(codes, quant_params_from_attrs(*b.attrs, "output"));
    KILN_ASSIGN(eps, b.attrs->get_float("epsilon", 1e-5f));
    return std::unique_ptr<Kernel>(std::make_unique<LayerNormCodesKernel>(b, *codes, eps));
  });
}

}  // namespace

const KernelImpl kCpuLayerNormCodes{"cpu.layer_norm_codes", layer_norm_codes_supports, layer_norm_codes_create};

}  // namespace kiln

// LRN (local response normalization across channels), float32: X [N, C, D...] -> Y of X's shape,
//   Y[n,c,...] = X[n,c,...] / (bias + alpha / size * square_sum[n,c,...]) ^ beta
// where square_sum sums X^2 over channels max(0, c - floor((size-1)/2)) ..
// min(C-1, c + ceil((size-1)/2)). Attributes: size (required, >= 1), alpha (1e-4), beta (0.75),
// bias (1.0).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

struct LrnAttrs {
  int64_t size;
  float alpha, beta, bias;
};

Result<LrnAttrs> read_lrn_attrs(const Attrs& attrs) {
  LrnAttrs a{};
  KILN_REQUIRE(attrs.has("size"), invalid_argument, "the size attribute is required");
  KILN_ASSIGN(size, attrs.get_int("size", 1));
  KILN_REQUIRE(size >= 1 && size <= (int64_t{1} << 24), invalid_argument, "size must be in [1, 16777216], got ", size);
  KILN_ASSIGN(alpha, attrs.get_float("alpha", 1e-4f));
  KILN_ASSIGN(beta, attrs.get_float("beta", 0.75f));
  KILN_ASSIGN(bias, attrs.get_float("bias", 1.0f));
  KILN_REQUIRE(std::isfinite(alpha) && std::isfinite(beta) && std::isfinite(bias), invalid_argument,
               "alpha, beta and bias must be finite, got ", alpha, ", ", beta, ", ", bias);
  a.size = size;
  a.alpha = alpha;
  a.beta = beta;
  a.bias = bias;
  return a;
}

Status infer_lrn(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_TRY(read_lrn_attrs(*ctx.attrs).status());
  const ValueType& x = ctx.input(0);
  if (x.rank_known)
    KILN_REQUIRE(x.rank() >= 2, shape_mismatch, "X must have rank >= 2 (N, C, ...), got shape ",
                 sym_shape_to_string(x.shape));
  return ref::infer_same_as_input0(ctx);
}

Status run_lrn(RunContext& ctx) {
  KILN_ASSIGN(a, read_lrn_attrs(*ctx.attrs));
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t planes = n * c;
  const int64_t size = planes == 0 ? 0 : x.numel() / planes;
  const int64_t before = (a.size - 1) / 2;         // floor((size-1)/2)
  const int64_t after = (a.size - 1) - before;     // ceil((size-1)/2)
  const double scale = static_cast<double>(a.alpha) / static_cast<double>(a.size);
  const float* in = x.data<float>();
  float* out = ctx.output(0).data<float>();
  std::vector<double> sums(static_cast<size_t>(size));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      std::fill(sums.begin(), sums.end(), 0.0);
      const int64_t lo = std::max<int64_t>(0, ch - before);
      const int64_t hi = std::min<int64_t>(c - 1, ch + after);
      for (int64_t k = lo; k <= hi; ++k) {
        const float* src = in + (b * c + k) * size;
        for (int64_t i = 0; i < size; ++i) sums[static_cast<size_t>(i)] += static_cast<double>(src[i]) * src[i];
      }
      const float* src = in + (b * c + ch) * size;
      float* dst = out + (b * c + ch) * size;
      for (int64_t i = 0; i < size; ++i) {
        const double denom = std::pow(a.bias + scale * sums[static_cast<size_t>(i)], static_cast<double>(a.beta));
        dst[i] = static_cast<float>(src[i] / denom);
      }
    }
  }
  return Status::ok();
}

}  // namespace

const OpDef& op_def_LRN() {
  static const OpDef def{1, 1, 1, 1, infer_lrn, run_lrn};
  return def;
}

}  // namespace kiln

// Softmax and LogSoftmax (float32), numerically stable (the maximum is subtracted first).
// Attributes: axis (default -1) and legacy_2d (default 0). With legacy_2d=0 (opset 13 semantics)
// the op normalizes along `axis` alone; with legacy_2d=1 (opset < 13) the input is coerced to
// 2-D at `axis` and every dimension from `axis` on is normalized together.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

struct SoftmaxAttrs {
  int64_t axis = -1;
  bool legacy_2d = false;
};

Result<SoftmaxAttrs> read_attrs(const Attrs& attrs) {
  KILN_ASSIGN(axis, attrs.get_int("axis", -1));
  KILN_ASSIGN(legacy, attrs.get_int("legacy_2d", 0));
  KILN_REQUIRE(legacy == 0 || legacy == 1, invalid_argument, "legacy_2d must be 0 or 1, got ", legacy);
  return SoftmaxAttrs{axis, legacy == 1};
}

// The axis in [0, rank) (or [0, rank] with legacy_2d, where coercing at `rank` is allowed).
Result<int64_t> resolve_axis(const SoftmaxAttrs& attrs, int64_t rank) {
  if (attrs.legacy_2d) {
    KILN_REQUIRE(attrs.axis >= -rank && attrs.axis <= rank, invalid_argument, "axis ", attrs.axis,
                 " is out of range for rank ", rank);
    return attrs.axis < 0 ? attrs.axis + rank : attrs.axis;
  }
  return ref::normalize_axis(attrs.axis, rank);
}

Status infer_softmax(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_ASSIGN(attrs, read_attrs(*ctx.attrs));
  if (ctx.input(0).rank_known) KILN_TRY(resolve_axis(attrs, ctx.input(0).rank()).status());
  return ref::infer_same_as_input0(ctx);
}

Status run_softmax(RunContext& ctx, bool log) {
  KILN_ASSIGN(attrs, read_attrs(*ctx.attrs));
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN(axis, resolve_axis(attrs, x.rank()));
  // View the input as [outer, n, inner] and normalize along n.
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dim(d);
    else if (d == axis || attrs.legacy_2d) n *= x.dim(d);
    else inner *= x.dim(d);
  }
  const float* src = x.data<float>();
  float* dst = ctx.output(0).data<float>();
  std::vector<float> max(static_cast<size_t>(inner));
  std::vector<double> sum(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const float* in = src + o * n * inner;
    float* out = dst + o * n * inner;
    std::fill(max.begin(), max.end(), -INFINITY);
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        float& m = max[static_cast<size_t>(i)];
        m = std::fmax(m, in[k * inner + i]);
      }
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        const float e = std::exp(in[k * inner + i] - max[static_cast<size_t>(i)]);
        sum[static_cast<size_t>(i)] += e;
        if (!log) out[k * inner + i] = e;
      }
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        const size_t ui = static_cast<size_t>(i);
        if (log)
          out[k * inner + i] = in[k * inner + i] - max[ui] - static_cast<float>(std::log(sum[ui]));
        else
          out[k * inner + i] = static_cast<float>(out[k * inner + i] / sum[ui]);
      }
  }
  return Status::ok();
}

Status run_plain(RunContext& ctx) { return run_softmax(ctx, false); }
Status run_log(RunContext& ctx) { return run_softmax(ctx, true); }

}  // namespace

const OpDef& op_def_Softmax() {
  static const OpDef def{1, 1, 1, 1, infer_softmax, run_plain};
  return def;
}

const OpDef& op_def_LogSoftmax() {
  static const OpDef def{1, 1, 1, 1, infer_softmax, run_log};
  return def;
}

}  // namespace kiln

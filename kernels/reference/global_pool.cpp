// GlobalAveragePool and GlobalMaxPool, float32: X [N, C, D...] -> Y [N, C, 1...], the mean or the
// max of each (n, c) plane (NaN propagates through the max). The spatial dims are kept as 1.
#include <cmath>
#include <limits>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

Status infer_global_pool(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  const ValueType& x = ctx.input(0);
  if (!x.rank_known) {
    ctx.outputs.assign(1, x);
    return Status::ok();
  }
  KILN_REQUIRE(x.rank() >= 2, shape_mismatch, "X must have rank >= 2 (N, C, spatial...), got shape ",
               sym_shape_to_string(x.shape));
  SymShape out = x.shape;
  for (size_t d = 2; d < out.size(); ++d) out[d] = Dim(1);
  ctx.outputs.assign(1, ValueType::of(DType::f32, std::move(out)));
  return Status::ok();
}

// Calls reduce(plane pointer, plane size) -> float for every (n, c) plane.
template <typename Reduce>
Status run_global(RunContext& ctx, Reduce&& reduce) {
  const Tensor& x = ctx.input(0);
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t size = planes == 0 ? 0 : x.numel() / planes;
  const float* in = x.data<float>();
  float* out = ctx.output(0).data<float>();
  for (int64_t p = 0; p < planes; ++p) out[p] = reduce(in + p * size, size);
  return Status::ok();
}

Status run_global_average(RunContext& ctx) {
  return run_global(ctx, [](const float* in, int64_t size) {
    double sum = 0.0;
    for (int64_t i = 0; i < size; ++i) sum += in[i];
    return size > 0 ? static_cast<float>(sum / static_cast<double>(size)) : 0.0f;
  });
}

Status run_global_max(RunContext& ctx) {
  return run_global(ctx, [](const float* in, int64_t size) {
    float best = size > 0 ? in[0] : std::numeric_limits<float>::lowest();
    for (int64_t i = 1; i < size; ++i) {
      if (std::isnan(best)) break;
      if (in[i] > best || std::isnan(in[i])) best = in[i];
    }
    return best;
  });
}

}  // namespace

const OpDef& op_def_GlobalAveragePool() {
  static const OpDef def{1, 1, 1, 1, infer_global_pool, run_global_average};
  return def;
}

const OpDef& op_def_GlobalMaxPool() {
  static const OpDef def{1, 1, 1, 1, infer_global_pool, run_global_max};
  return def;
}

}  // namespace kiln

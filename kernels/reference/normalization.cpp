// BatchNormalization (inference), InstanceNormalization and LayerNormalization, float32.
//   BatchNormalization: X [N,C,D...] (or [N], then C = 1), scale, B, mean, var of shape [C];
//     Y = (X - mean) / sqrt(var + epsilon) * scale + B. training_mode must be 0.
//   InstanceNormalization: X [N,C,D...], scale and B of shape [C]; each (n, c) slice is
//     normalized by its own mean and (population) variance.
//   LayerNormalization: normalizes over the dimensions from `axis` (default -1) on; Scale and
//     optional B broadcast unidirectionally to X. Optional outputs Mean and InvStdDev have X's
//     shape with the normalized dimensions set to 1.
#include <cmath>
#include <vector>

#include "kernels/reference/common.h"
#include "kernels/reference/epilogue.h"

namespace kiln {
namespace {

Result<float> read_epsilon(const Attrs& attrs) {
  KILN_ASSIGN(eps, attrs.get_float("epsilon", 1e-5f));
  KILN_REQUIRE(std::isfinite(eps) && eps >= 0.0f, invalid_argument, "epsilon must be finite and >= 0, got ", eps);
  return eps;
}

// Requires input i (when present and ranked) to be 1-D of length `channels` (when known).
Status require_per_channel(const InferContext& ctx, size_t i, const char* name, const Dim& channels) {
  if (!ctx.has_input(i)) return Status::ok();
  KILN_TRY(ref::require_dtype(ctx, i, {DType::f32}));
  const ValueType& t = ctx.input(i);
  if (!t.rank_known) return Status::ok();
  KILN_REQUIRE(t.rank() == 1, shape_mismatch, name, " must be 1-D, got shape ", sym_shape_to_string(t.shape));
  KILN_REQUIRE(!t.shape[0].known() || !channels.known() || t.shape[0].value == channels.value, shape_mismatch,
               name, " has ", t.shape[0].value, " elements but the input has ", channels.value, " channels");
  return Status::ok();
}

// ---- BatchNormalization ----

Status infer_batch_norm(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_TRY(read_epsilon(*ctx.attrs).status());
  KILN_ASSIGN(training, ctx.attrs->get_int("training_mode", 0));
  KILN_REQUIRE(training == 0, unsupported, "training_mode=", training,
               " is not supported: kiln runs BatchNormalization in inference mode only");
  const ValueType& x = ctx.input(0);
  Dim channels = Dim::unknown();
  if (x.rank_known) {
    KILN_REQUIRE(x.rank() >= 1, shape_mismatch, "X must have rank >= 1, got a scalar");
    channels = x.rank() == 1 ? Dim(1) : x.shape[1];
  }
  const char* names[] = {"X", "scale", "B", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) KILN_TRY(require_per_channel(ctx, i, names[i], channels));
  KILN_TRY(ref::infer_same_as_input0(ctx));
  return ref::infer_epilogue(ctx, 5, ctx.outputs[0]);  // a fused activation (fuse_activation)
}

Status run_batch_norm(RunContext& ctx) {
  KILN_ASSIGN(eps, read_epsilon(*ctx.attrs));
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dim(0);
  const int64_t c = x.rank() == 1 ? 1 : x.dim(1);
  int64_t spatial = 1;
  for (int64_t d = 2; d < x.rank(); ++d) spatial *= x.dim(d);
  const float* scale = ctx.input(1).data<float>();
  const float* bias = ctx.input(2).data<float>();
  const float* mean = ctx.input(3).data<float>();
  const float* var = ctx.input(4).data<float>();
  const float* src = x.data<float>();
  float* dst = ctx.output(0).data<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mul = scale[ch] / std::sqrt(static_cast<double>(var[ch]) + eps);
    const double add = bias[ch] - mean[ch] * mul;
    for (int64_t b = 0; b < n; ++b) {
      const int64_t base = (b * c + ch) * spatial;
      for (int64_t i = 0; i < spatial; ++i) dst[base + i] = static_cast<float>(src[base + i] * mul + add);
    }
  }
  return ref::run_epilogue(ctx, 5, ctx.output(0));
}

// ---- Normalizing contiguous rows (InstanceNormalization, LayerNormalization) ----

// Mean and 1/sqrt(variance + eps) of `count` contiguous values.
void row_stats(const float* row, int64_t count, double eps, double& mean, double& inv_std) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += row[i];
  mean = count == 0 ? 0.0 : sum / static_cast<double>(count);
  double sq = 0.0;
  for (int64_t i = 0; i < count; ++i) sq += (row[i] - mean) * (row[i] - mean);
  const double var = count == 0 ? 0.0 : sq / static_cast<double>(count);
  inv_std = 1.0 / std::sqrt(var + eps);
}

// ---- InstanceNormalization ----

Status infer_instance_norm(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_TRY(read_epsilon(*ctx.attrs).status());
  const ValueType& x = ctx.input(0);
  Dim channels = Dim::unknown();
  if (x.rank_known) {
    KILN_REQUIRE(x.rank() >= 2, shape_mismatch, "input must have rank >= 2 (N, C, ...), got shape ",
                 sym_shape_to_string(x.shape));
    channels = x.shape[1];
  }
  KILN_TRY(require_per_channel(ctx, 1, "scale", channels));
  KILN_TRY(require_per_channel(ctx, 2, "B", channels));
  return ref::infer_same_as_input0(ctx);
}

Status run_instance_norm(RunContext& ctx) {
  KILN_ASSIGN(eps, read_epsilon(*ctx.attrs));
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dim(0), c = x.dim(1);
  int64_t spatial = 1;
  for (int64_t d = 2; d < x.rank(); ++d) spatial *= x.dim(d);
  const float* scale = ctx.input(1).data<float>();
  const float* bias = ctx.input(2).data<float>();
  const float* src = x.data<float>();
  float* dst = ctx.output(0).data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t base = (b * c + ch) * spatial;
      double mean = 0.0, inv_std = 0.0;
      row_stats(src + base, spatial, eps, mean, inv_std);
      const double mul = scale[ch] * inv_std;
      for (int64_t i = 0; i < spatial; ++i)
        dst[base + i] = static_cast<float>((src[base + i] - mean) * mul + bias[ch]);
    }
  return Status::ok();
}

// ---- LayerNormalization ----

Status require_broadcasts_to(const InferContext& ctx, size_t i, const char* name, const SymShape& x) {
  if (!ctx.has_input(i)) return Status::ok();
  KILN_TRY(ref::require_dtype(ctx, i, {DType::f32}));
  const ValueType& t = ctx.input(i);
  if (!t.rank_known) return Status::ok();
  bool fits = t.shape.size() <= x.size();
  for (size_t d = 0; fits && d < t.shape.size(); ++d) {
    const Dim& want = x[x.size() - t.shape.size() + d];
    const Dim& have = t.shape[d];
    fits = !have.known() || have.value == 1 || !want.known() || have.value == want.value;
  }
  KILN_REQUIRE(fits, shape_mismatch, name, " of shape ", sym_shape_to_string(t.shape),
               " does not broadcast to the input shape ", sym_shape_to_string(x));
  return Status::ok();
}

Status infer_layer_norm(InferContext& ctx) {
  KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  KILN_TRY(read_epsilon(*ctx.attrs).status());
  KILN_ASSIGN(axis_attr, ctx.attrs->get_int("axis", -1));
  KILN_ASSIGN(stash, ctx.attrs->get_int("stash_type", 1));
  KILN_REQUIRE(stash == 1, unsupported, "stash_type=", stash, " is not supported (only 1, float32)");
  const ValueType& x = ctx.input(0);
  ctx.outputs.assign(1, x);
  if (!x.rank_known) {
    KILN_TRY(ref::require_dtype(ctx, 1, {DType::f32}));
    if (ctx.has_input(2)) KILN_TRY(ref::require_dtype(ctx, 2, {DType::f32}));
    ctx.outputs.push_back(ValueType::unranked(DType::f32));
    ctx.outputs.push_back(ValueType::unranked(DType::f32));
    return Status::ok();
  }
  KILN_REQUIRE(x.rank() >= 1, shape_mismatch, "X must have rank >= 1, got a scalar");
  KILN_ASSIGN(axis, ref::normalize_axis(axis_attr, x.rank()));
  KILN_TRY(require_broadcasts_to(ctx, 1, "Scale", x.shape));
  KILN_TRY(require_broadcasts_to(ctx, 2, "B", x.shape));
  SymShape stats = x.shape;
  for (size_t d = static_cast<size_t>(axis); d < stats.size(); ++d) stats[d] = Dim(1);
  ctx.outputs.push_back(ValueType::of(DType::f32, stats));
  ctx.outputs.push_back(ValueType::of(DType::f32, stats));
  return Status::ok();
}

Status run_layer_norm(RunContext& ctx) {
  KILN_ASSIGN(eps, read_epsilon(*ctx.attrs));
  KILN_ASSIGN(axis_attr, ctx.attrs->get_int("axis", -1));
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN(axis, ref::normalize_axis(axis_attr, x.rank()));
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < x.rank(); ++d) (d < axis ? rows : cols) *= x.dim(d);
  const float* src = x.data<float>();
  Tensor& y = ctx.output(0);
  float* dst = y.data<float>();
  float* mean_out = ctx.outputs.size() > 1 ? ctx.output(1).data<float>() : nullptr;
  float* inv_std_out = ctx.outputs.size() > 2 ? ctx.output(2).data<float>() : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, inv_std = 0.0;
    row_stats(src + r * cols, cols, eps, mean, inv_std);
    for (int64_t i = 0; i < cols; ++i)
      dst[r * cols + i] = static_cast<float>((src[r * cols + i] - mean) * inv_std);
    if (mean_out) mean_out[r] = static_cast<float>(mean);
    if (inv_std_out) inv_std_out[r] = static_cast<float>(inv_std);
  }
  // Y = normalized * Scale + B, with Scale and B broadcast over X's shape.
  const Tensor& scale = ctx.input(1);
  const bool has_bias = ctx.has_input(2);
  const std::vector<int64_t> strides[2] = {
      ref::broadcast_strides(scale.shape(), y.shape()),
      has_bias ? ref::broadcast_strides(ctx.input(2).shape(), y.shape()) : std::vector<int64_t>(y.shape().size(), 0)};
  const float* sd = scale.data<float>();
  const float* bd = has_bias ? ctx.input(2).data<float>() : nullptr;
  ref::for_each_broadcast(y.shape(), strides, [&](int64_t i, const int64_t* off) {
    dst[i] = dst[i] * sd[off[0]] + (bd ? bd[off[1]] : 0.0f);
  });
  return Status::ok();
}

}  // namespace

// Inputs: X, scale, B, input_mean, input_var. Only output Y (inference mode).
const OpDef& op_def_BatchNormalization() {
  static const OpDef def{5, 5, 1, 1, infer_batch_norm, run_batch_norm};
  return def;
}

// Inputs: input, scale, B.
const OpDef& op_def_InstanceNormalization() {
  static const OpDef def{3, 3, 1, 1, infer_instance_norm, run_instance_norm};
  return def;
}

// Inputs: X, Scale, optional B. Outputs: Y, optional Mean, optional InvStdDev.
const OpDef& op_def_LayerNormalization() {
  static const OpDef def{2, 3, 1, 3, infer_layer_norm, run_layer_norm};
  return def;
}

}  // namespace kiln

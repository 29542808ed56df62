// Resize (opset 13 semantics): inputs X, optional roi, optional scales (float), optional sizes
// (int64); exactly one of scales/sizes is given (an empty tensor counts as absent). Modes nearest
// (nearest_mode round_prefer_floor / round_prefer_ceil / floor / ceil) and N-linear; cubic is not
// supported. Coordinates map back per coordinate_transformation_mode; like the ONNX reference,
// the output length used there is scale * input length (not rounded) when scales are given.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/reference/data_util.h"

namespace kiln {
namespace {

enum class Mode { nearest, linear };
enum class Transform { half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize };
enum class NearestMode { round_prefer_floor, round_prefer_ceil, floor, ceil };

struct ResizeAttrs {
  Mode mode = Mode::nearest;
  Transform transform = Transform::half_pixel;
  NearestMode nearest = NearestMode::round_prefer_floor;
  float extrapolation_value = 0.0f;
};

Result<ResizeAttrs> read_attrs(const Attrs& attrs) {
  ResizeAttrs r;
  KILN_ASSIGN(mode, attrs.get_string("mode", "nearest"));
  if (mode == "nearest") r.mode = Mode::nearest;
  else if (mode == "linear") r.mode = Mode::linear;
  else if (mode == "cubic") return make_error(ErrorCode::unsupported, "Resize mode 'cubic' is not supported (nearest, linear)");
  else return make_error(ErrorCode::invalid_argument, "Resize mode '", mode, "' is not one of nearest, linear, cubic");

  KILN_ASSIGN(ct, attrs.get_string("coordinate_transformation_mode", "half_pixel"));
  if (ct == "half_pixel") r.transform = Transform::half_pixel;
  else if (ct == "pytorch_half_pixel") r.transform = Transform::pytorch_half_pixel;
  else if (ct == "align_corners") r.transform = Transform::align_corners;
  else if (ct == "asymmetric") r.transform = Transform::asymmetric;
  else if (ct == "tf_half_pixel_for_nn") r.transform = Transform::tf_half_pixel_for_nn;
  else if (ct == "tf_crop_and_resize") r.transform = Transform::tf_crop_and_resize;
  else return make_error(ErrorCode::invalid_argument, "coordinate_transformation_mode '", ct, "' is not known");

  KILN_ASSIGN(nm, attrs.get_string("nearest_mode", "round_prefer_floor"));
  if (nm == "round_prefer_floor") r.nearest = NearestMode::round_prefer_floor;
  else if (nm == "round_prefer_ceil") r.nearest = NearestMode::round_prefer_ceil;
  else if (nm == "floor") r.nearest = NearestMode::floor;
  else if (nm == "ceil") r.nearest = NearestMode::ceil;
  else return make_error(ErrorCode::invalid_argument, "nearest_mode '", nm, "' is not known");

  KILN_ASSIGN(exclude, attrs.get_int("exclude_outside", 0));
  KILN_REQUIRE(exclude == 0 || exclude == 1, invalid_argument, "exclude_outside must be 0 or 1, got ", exclude);
  KILN_ASSIGN(extrapolation, attrs.get_float("extrapolation_value", 0.0f));
  r.extrapolation_value = extrapolation;
  // Opset 18 additions: only their defaults are supported.
  KILN_REQUIRE(!attrs.has("axes"), unsupported, "Resize with the axes attribute (opset 18) is not supported");
  KILN_ASSIGN(antialias, attrs.get_int("antialias", 0));
  KILN_REQUIRE(antialias == 0, unsupported, "Resize with antialias=1 is not supported");
  KILN_ASSIGN(policy, attrs.get_string("keep_aspect_ratio_policy", "stretch"));
  KILN_REQUIRE(policy == "stretch", unsupported, "keep_aspect_ratio_policy '", policy, "' is not supported");
  return r;
}

// One of scales/sizes, whichever is given and non-empty.
struct Target {
  bool known = false;               // the values below are known
  bool by_sizes = false;
  std::vector<double> scales;       // per dim, when !by_sizes
  std::vector<int64_t> sizes;       // per dim, when by_sizes
};

// Whether optional input i is absent or known to be empty.
bool absent_or_empty(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return true;
  if (const Tensor* v = ctx.value(i)) return v->numel() == 0;
  const ValueType& t = ctx.input(i);
  return t.rank_known && t.rank() == 1 && t.shape[0].known() && t.shape[0].value == 0;
}

Result<Target> read_target(const InferContext& ctx, int64_t rank) {
  const bool no_scales = absent_or_empty(ctx, 2), no_sizes = absent_or_empty(ctx, 3);
  KILN_REQUIRE(!(no_scales && no_sizes), invalid_argument, "Resize needs scales or sizes");
  Target t;
  if (!no_sizes) {
    KILN_REQUIRE(no_scales || !ctx.value(2), invalid_argument, "Resize takes scales or sizes, not both");
    KILN_ASSIGN(sizes, ref::data::read_int_input(ctx, 3, "sizes"));
    t.by_sizes = true;
    if (!sizes.known) return t;
    KILN_REQUIRE(rank < 0 || static_cast<int64_t>(sizes.values.size()) == rank, invalid_argument, "sizes ",
                 ref::ints_to_string(sizes.values), " has ", sizes.values.size(), " entries for rank ", rank);
    for (int64_t s : sizes.values)
      KILN_REQUIRE(s >= 0, invalid_argument, "sizes ", ref::ints_to_string(sizes.values), " has a negative entry");
    t.sizes = sizes.values;
    t.known = true;
    return t;
  }
  const ValueType& type = ctx.input(2);
  KILN_REQUIRE(type.dtype == DType::f32, invalid_argument, "scales must be float32, got ", dtype_name(type.dtype));
  const Tensor* v = ctx.value(2);
  if (!v) return t;
  KILN_REQUIRE(rank < 0 || v->numel() == rank, invalid_argument, "scales has ", v->numel(), " entries for rank ", rank);
  for (int64_t i = 0; i < v->numel(); ++i) {
    const double s = v->value_as_double(i);
    KILN_REQUIRE(s > 0 && std::isfinite(s), invalid_argument, "scales entry ", i, " is ", s, ", not a positive number");
    t.scales.push_back(s);
  }
  t.known = true;
  return t;
}

Status infer_resize(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 1));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(attrs, read_attrs(*ctx.attrs));
  if (attrs.mode == Mode::linear)
    KILN_REQUIRE(dtype_is_float(x.dtype), unsupported, "linear Resize of ", dtype_name(x.dtype),
                 " is not supported (float types only)");
  KILN_ASSIGN(target, read_target(ctx, x.rank_known ? x.rank() : -1));
  if (attrs.transform == Transform::tf_crop_and_resize) {
    KILN_REQUIRE(!absent_or_empty(ctx, 1), invalid_argument, "tf_crop_and_resize needs the roi input");
    if (const Tensor* roi = ctx.value(1); roi && x.rank_known)
      KILN_REQUIRE(roi->numel() == 2 * x.rank(), invalid_argument, "roi has ", roi->numel(), " entries, expected ",
                   2 * x.rank());
  }
  ctx.outputs.clear();
  if (!x.rank_known) {
    if (target.known) {
      const size_t rank = target.by_sizes ? target.sizes.size() : target.scales.size();
      SymShape out(rank);
      if (target.by_sizes)
        for (size_t d = 0; d < rank; ++d) out[d] = Dim(target.sizes[d]);
      ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
    } else {
      ctx.outputs.push_back(ValueType::unranked(x.dtype));
    }
    return Status::ok();
  }
  SymShape out(x.shape.size());
  if (target.known) {
    for (size_t d = 0; d < out.size(); ++d) {
      const Dim& in = x.shape[d];
      if (target.by_sizes) {
        out[d] = Dim(target.sizes[d]);
      } else if (in.known()) {
        const double n = std::floor(static_cast<double>(in.value) * target.scales[d]);
        KILN_REQUIRE(n <= static_cast<double>(ref::data::kMaxElements), limit_exceeded, "scales entry ", d,
                     " makes dim ", d, " larger than the supported ", ref::data::kMaxElements);
        out[d] = Dim(static_cast<int64_t>(n));
      } else if (target.scales[d] == 1.0) {
        out[d] = in;
      }
      KILN_REQUIRE(!in.known() || in.value > 0 || !out[d].known() || out[d].value == 0, invalid_argument,
                   "cannot resize empty dim ", d, " of ", sym_shape_to_string(x.shape), " to ", out[d].value);
    }
  }
  KILN_TRY(ref::data::check_output_shape(out, "the Resize output"));
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  return Status::ok();
}

// Up to two input taps for one output coordinate along one axis.
struct AxisTaps {
  int count = 1;  // 0: outside the roi (extrapolation value)
  int64_t index[2] = {0, 0};
  double weight[2] = {1.0, 0.0};
};

std::vector<AxisTaps> axis_taps(const ResizeAttrs& a, int64_t in, int64_t out, double scale, double out_len,
                                double roi_start, double roi_end) {
  std::vector<AxisTaps> taps(static_cast<size_t>(out));
  const auto clamp_index = [&](double i) { return static_cast<int64_t>(std::clamp(i, 0.0, static_cast<double>(in - 1))); };
  for (int64_t o = 0; o < out; ++o) {
    const double xo = static_cast<double>(o);
    double x = 0;
    switch (a.transform) {
      case Transform::half_pixel: x = (xo + 0.5) / scale - 0.5; break;
      case Transform::pytorch_half_pixel: x = out_len > 1 ? (xo + 0.5) / scale - 0.5 : 0.0; break;
      case Transform::align_corners: x = out_len == 1 ? 0.0 : xo * static_cast<double>(in - 1) / (out_len - 1); break;
      case Transform::asymmetric: x = xo / scale; break;
      case Transform::tf_half_pixel_for_nn: x = (xo + 0.5) / scale; break;
      case Transform::tf_crop_and_resize:
        x = out_len > 1 ? roi_start * static_cast<double>(in - 1) +
                              xo * (roi_end - roi_start) * static_cast<double>(in - 1) / (out_len - 1)
                        : 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
        break;
    }
    AxisTaps& t = taps[static_cast<size_t>(o)];
    if (a.transform == Transform::tf_crop_and_resize && (x < 0 || x > static_cast<double>(in - 1))) {
      t.count = 0;
      continue;
    }
    const double fl = std::floor(x);
    const double frac = x - fl;
    if (a.mode == Mode::nearest) {
      bool up = false;
      if (frac != 0) {
        switch (a.nearest) {
          case NearestMode::round_prefer_floor: up = frac > 0.5; break;
          case NearestMode::round_prefer_ceil: up = frac >= 0.5; break;
          case NearestMode::floor: up = false; break;
          case NearestMode::ceil: up = true; break;
        }
      }
      t.index[0] = clamp_index(up ? fl + 1 : fl);
    } else if (frac == 0) {
      t.index[0] = clamp_index(fl);
    } else {
      t.count = 2;
      t.index[0] = clamp_index(fl);
      t.index[1] = clamp_index(fl + 1);
      t.weight[0] = 1 - frac;
      t.weight[1] = frac;
    }
  }
  return taps;
}

Status run_resize(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  KILN_ASSIGN(attrs, read_attrs(*ctx.attrs));
  if (y.numel() == 0) return Status::ok();
  const size_t rank = x.shape().size();
  const bool by_scales = ctx.has_input(2) && ctx.input(2).numel() != 0;
  std::vector<double> roi;
  if (ctx.has_input(1)) roi = std::vector<double>(ctx.input(1).numel());
  for (size_t i = 0; i < roi.size(); ++i) roi[i] = ctx.input(1).value_as_double(static_cast<int64_t>(i));

  std::vector<std::vector<AxisTaps>> taps(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t in = x.shape()[d], out = y.shape()[d];
    const double scale = by_scales ? ctx.input(2).value_as_double(static_cast<int64_t>(d))
                                   : static_cast<double>(out) / static_cast<double>(in);
    const double out_len = by_scales ? scale * static_cast<double>(in) : static_cast<double>(out);
    const bool has_roi = roi.size() == 2 * rank;
    taps[d] = axis_taps(attrs, in, out, scale, out_len, has_roi ? roi[d] : 0.0, has_roi ? roi[rank + d] : 1.0);
  }
  const std::vector<int64_t> strides = shape_strides(x.shape());

  visit_dtype(x.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(x.raw());
    T* dst = static_cast<T*>(y.raw());
    T extrapolation{};
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) extrapolation = T(attrs.extrapolation_value);
    else if constexpr (std::is_same_v<T, bool>) extrapolation = attrs.extrapolation_value != 0;
    else extrapolation = static_cast<T>(attrs.extrapolation_value);

    // Every combination of the taps of one output element: (input offset, weight) pairs.
    std::vector<std::pair<int64_t, double>> terms, next;
    std::vector<int64_t> index(rank, 0);
    for (int64_t o = 0; o < y.numel(); ++o) {
      terms.assign(1, {0, 1.0});
      bool outside = false;
      for (size_t d = 0; d < rank && !outside; ++d) {
        const AxisTaps& t = taps[d][static_cast<size_t>(index[d])];
        if (t.count == 0) {
          outside = true;
          break;
        }
        if (t.count == 1) {
          for (auto& term : terms) term.first += t.index[0] * strides[d];
          continue;
        }
        next.clear();
        for (const auto& term : terms)
          for (int k = 0; k < 2; ++k)
            next.push_back({term.first + t.index[k] * strides[d], term.second * t.weight[k]});
        terms.swap(next);
      }
      if (outside) {
        dst[o] = extrapolation;
      } else if (terms.size() == 1) {
        dst[o] = src[terms[0].first];
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_floating_point_v<T>) {
        double sum = 0;
        for (const auto& [offset, weight] : terms) sum += weight * static_cast<double>(static_cast<float>(src[offset]));
        dst[o] = T(static_cast<float>(sum));
      }
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < y.shape()[d]) break;
        index[d] = 0;
      }
    }
  });
  return Status::ok();
}

}  // namespace

const OpDef& op_def_Resize() {
  static const OpDef def{1, 4, 1, 1, infer_resize, run_resize};
  return def;
}

}  // namespace kiln

// Slice: inputs data, starts, ends, optional axes, optional steps (all int64). Per the ONNX spec,
// negative starts/ends count from the end, then they are clamped to [0, dim] for positive steps
// and to [0, dim-1] / [-1, dim-1] for negative steps.
#include <algorithm>
#include <limits>

#include "kernels/reference/data_util.h"
#include "kernels/reference/slice.h"

namespace kiln {
namespace {

using ref::ints_to_string;

// The slicing of every axis listed in `axes` (normalized).
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};

// Reads starts/ends/axes/steps for data of rank `rank` (< 0: unknown). `known`: every given value
// is known (and so are the params); otherwise `axes_known` says whether params.axes lists the
// axes that are sliced (all others keep their dims).
struct SliceInputs {
  bool known = false;
  bool axes_known = false;  // whether the set of sliced axes is known
  SliceParams params;
};

Result<SliceInputs> read_slice_inputs(const InferContext& ctx, int64_t rank) {
  KILN_ASSIGN(starts, ref::data::read_int_input(ctx, 1, "starts"));
  KILN_ASSIGN(ends, ref::data::read_int_input(ctx, 2, "ends"));
  KILN_ASSIGN(axes, ref::data::read_int_input(ctx, 3, "axes"));
  KILN_ASSIGN(steps, ref::data::read_int_input(ctx, 4, "steps"));
  KILN_REQUIRE(starts.present && ends.present, invalid_argument, "Slice needs the starts and ends inputs");
  const int64_t n = starts.length >= 0 ? starts.length : ends.length;
  for (const auto* in : {&starts, &ends, &axes, &steps}) {
    KILN_REQUIRE(!in->present || in->length < 0 || n < 0 || in->length == n, invalid_argument, "starts, ends, axes ",
                 "and steps must have one length; got ", starts.length, ", ", ends.length, ", ",
                 axes.present ? axes.length : n, ", ", steps.present ? steps.length : n);
  }
  SliceInputs out;
  out.axes_known = axes.present ? axes.known : n >= 0;
  if (axes.known && rank >= 0) {
    KILN_ASSIGN(norm, ref::data::normalize_axes(axes.values, rank, "axes"));
    out.params.axes = norm;
  } else if (!axes.present && n >= 0 && rank >= 0) {
    KILN_REQUIRE(n <= rank, invalid_argument, "starts has ", n, " entries but the data has rank ", rank);
    for (int64_t i = 0; i < n; ++i) out.params.axes.push_back(i);
  }
  if (!starts.known || !ends.known || (axes.present && !axes.known) || (steps.present && !steps.known)) return out;
  if (rank < 0) {
    out.axes_known = false;
    return out;
  }
  out.known = true;
  SliceParams& p = out.params;
  p.starts = starts.values;
  p.ends = ends.values;
  p.steps = steps.present ? steps.values : std::vector<int64_t>(static_cast<size_t>(n), 1);
  for (int64_t s : p.steps) KILN_REQUIRE(s != 0, invalid_argument, "steps ", ints_to_string(p.steps), " has a 0 step");
  return out;
}

// The first index, the step and the length of a slice over a dim of size `dim`.
struct SliceDim {
  int64_t start = 0;
  int64_t step = 1;
  int64_t len = 0;
};

SliceDim slice_dim(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim == 0) return SliceDim{};
  // |step| beyond dim behaves like dim+1; this also keeps -step from overflowing.
  if (step > dim) step = dim + 1;
  if (step < -dim) step = -dim - 1;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  SliceDim s;
  s.step = step;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    s.len = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    s.len = start > end ? (start - end - 1) / -step + 1 : 0;
  }
  s.start = s.len > 0 ? start : 0;
  return s;
}

// Whether [start, end) with `step` is the whole dim whatever its size (x[:] or x[::-1]).
bool full_range(int64_t start, int64_t end, int64_t step) {
  constexpr int64_t kHuge = std::numeric_limits<int32_t>::max();
  if (step == 1) return start == 0 && end >= kHuge;
  if (step == -1) return (start == -1 || start >= kHuge) && end <= -kHuge;
  return false;
}

Status infer_slice(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 3));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(in, read_slice_inputs(ctx, x.rank_known ? x.rank() : -1));
  ctx.outputs.clear();
  if (!x.rank_known) {
    ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  SymShape out = x.shape;
  if (!in.known) {
    if (in.axes_known && !in.params.axes.empty()) {
      for (int64_t a : in.params.axes) out[static_cast<size_t>(a)] = Dim::unknown();
    } else if (!in.axes_known) {
      out.assign(out.size(), Dim::unknown());
    }
    ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
    return Status::ok();
  }
  const SliceParams& p = in.params;
  for (size_t i = 0; i < p.axes.size(); ++i) {
    const size_t a = static_cast<size_t>(p.axes[i]);
    const Dim& d = x.shape[a];
    if (d.known()) out[a] = Dim(slice_dim(d.value, p.starts[i], p.ends[i], p.steps[i]).len);
    else if (!full_range(p.starts[i], p.ends[i], p.steps[i])) out[a] = Dim::unknown();
  }
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  return Status::ok();
}

Status run_slice(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::vector<const Tensor*> params;
  for (size_t i = 1; i < 5; ++i) params.push_back(ctx.has_input(i) ? ctx.inputs[i] : nullptr);
  KILN_ASSIGN(axes, ref::slice_axes(x.shape(), params));
  const std::vector<int64_t> in_strides = shape_strides(x.shape());
  std::vector<int64_t> strides = in_strides;
  int64_t offset = 0;
  for (const ref::SliceAxis& s : axes) {
    KILN_REQUIRE(s.len == y.shape()[s.axis], internal, "slice length ", s.len, " differs from the output dim ",
                 y.shape()[s.axis]);
    offset += s.start * in_strides[s.axis];
    strides[s.axis] = s.step * in_strides[s.axis];
  }
  if (y.numel() == 0) return Status::ok();
  const unsigned char* base = static_cast<const unsigned char*>(x.raw()) +
                              static_cast<size_t>(offset) * dtype_size(x.dtype());
  ref::data::strided_copy(x.dtype(), base, y.raw(), y.shape(), strides);
  return Status::ok();
}

}  // namespace

namespace ref {

Result<std::vector<SliceAxis>> slice_axes(const Shape& data, const std::vector<const Tensor*>& params) {
  // Read through an InferContext over the values, so the checks are those of shape inference.
  std::vector<ValueType> types(params.size() + 1);
  InferContext ic;
  types[0] = ValueType::of(DType::f32, sym_shape_from(data));
  ic.inputs.push_back(&types[0]);
  ic.values.push_back(nullptr);
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i] != nullptr) types[i + 1] = ValueType::of(params[i]->dtype(), sym_shape_from(params[i]->shape()));
    ic.inputs.push_back(params[i] != nullptr ? &types[i + 1] : nullptr);
    ic.values.push_back(params[i]);
  }
  KILN_ASSIGN(in, read_slice_inputs(ic, static_cast<int64_t>(data.size())));
  KILN_REQUIRE(in.known, invalid_argument, "the Slice parameters are not all known");
  const SliceParams& p = in.params;
  std::vector<SliceAxis> axes;
  for (size_t i = 0; i < p.axes.size(); ++i) {
    const size_t a = static_cast<size_t>(p.axes[i]);
    const SliceDim s = slice_dim(data[a], p.starts[i], p.ends[i], p.steps[i]);
    axes.push_back({a, s.start, s.step, s.len});
  }
  return axes;
}

}  // namespace ref

// Inputs: data, starts, ends, optional axes, optional steps.
const OpDef& op_def_Slice() {
  static const OpDef def{3, 5, 1, 1, infer_slice, run_slice};
  return def;
}

}  // namespace kiln

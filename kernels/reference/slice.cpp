// Slice: inputs data, starts, ends, optional axes, optional steps (all int64). Per the ONNX spec,
// negative starts/ends count from the end, then they are clamped to [0, dim] for positive steps
// and to [0, dim-1] / [-1, dim-1] for negative steps.
#include <algorithm>
#include <limits>

#include "kernels/reference/data_util.h"

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
  // Re-read the params through an InferContext over the run-time values.
  std::vector<ValueType> types(ctx.inputs.size());
  InferContext ic;
  ic.attrs = ctx.attrs;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (!ctx.has_input(i)) {
      ic.inputs.push_back(nullptr);
      ic.values.push_back(nullptr);
      continue;
    }
    types[i] = ValueType::of(ctx.input(i).dtype(), sym_shape_from(ctx.input(i).shape()));
    ic.inputs.push_back(&types[i]);
    ic.values.push_back(ctx.inputs[i]);
  }
  KILN_ASSIGN(in, read_slice_inputs(ic, x.rank()));
  KILN_REQUIRE(in.known, internal, "slice parameters unknown at run time");
  const SliceParams& p = in.params;
  const std::vector<int64_t> in_strides = shape_strides(x.shape());
  std::vector<int64_t> strides = in_strides;
  int64_t offset = 0;
  for (size_t i = 0; i < p.axes.size(); ++i) {
    const size_t a = static_cast<size_t>(p.axes[i]);
    const SliceDim s = slice_dim(x.shape()[a], p.starts[i], p.ends[i], p.steps[i]);
    KILN_REQUIRE(s.len == y.shape()[a], internal, "slice length ", s.len, " differs from the output dim ",
                 y.shape()[a]);
    offset += s.start * in_strides[a];
    strides[a] = s.step * in_strides[a];
  }
  if (y.numel() == 0) return Status::ok();
  const unsigned char* base = static_cast<const unsigned char*>(x.raw()) +
                              static_cast<size_t>(offset) * dtype_size(x.dtype());
  ref::data::strided_copy(x.dtype(), base, y.raw(), y.shape(), strides);
  return Status::ok();
}

}  // namespace

// Inputs: data, starts, ends, optional axes, optional steps.
const OpDef& op_def_Slice() {
  static const OpDef def{3, 5, 1, 1, infer_slice, run_slice};
  return def;
}

}  // namespace kiln

// ReduceMean, ReduceSum, ReduceMax, ReduceMin: one shared implementation.
// Inputs: data, optional `axes` (1-D int64). Attributes: keepdims (default 1) and
// noop_with_empty_axes (default 0). Absent or empty axes reduce every dimension, unless
// noop_with_empty_axes=1, in which case the op is the identity.
// Reducing an empty set gives 0 (Sum), NaN (Mean), the lowest value (Max: -inf for floats)
// or the highest value (Min: +inf for floats).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/reference/common.h"

namespace kiln {
namespace {

enum class ReduceKind { sum, mean, max, min };

const char* reduce_name(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::sum: return "ReduceSum";
    case ReduceKind::mean: return "ReduceMean";
    case ReduceKind::max: return "ReduceMax";
    case ReduceKind::min: return "ReduceMin";
  }
  return "Reduce";
}

struct ReduceAttrs {
  bool keepdims = true;
  bool noop_with_empty_axes = false;
};

Result<ReduceAttrs> read_attrs(const Attrs& attrs) {
  KILN_ASSIGN(keepdims, attrs.get_int("keepdims", 1));
  KILN_ASSIGN(noop, attrs.get_int("noop_with_empty_axes", 0));
  KILN_REQUIRE(keepdims == 0 || keepdims == 1, invalid_argument, "keepdims must be 0 or 1, got ", keepdims);
  KILN_REQUIRE(noop == 0 || noop == 1, invalid_argument, "noop_with_empty_axes must be 0 or 1, got ", noop);
  return ReduceAttrs{keepdims == 1, noop == 1};
}

// Which dimensions of a rank-`rank` input are reduced; an empty `axes` means all of them.
Result<std::vector<bool>> reduced_mask(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<bool> mask(static_cast<size_t>(rank), axes.empty());
  for (int64_t axis : axes) {
    KILN_REQUIRE(axis >= -rank && axis < rank, invalid_argument, "axis ", axis, " is out of range for rank ",
                 rank);
    const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
    KILN_REQUIRE(!mask[a], invalid_argument, "axis ", axis, " appears more than once in axes");
    mask[a] = true;
  }
  return mask;
}

// The axes input when it is known. `known` is false when input 1 is present but its value is not.
struct AxesInfo {
  bool known = true;
  std::vector<int64_t> axes;
};

Result<AxesInfo> read_axes(const InferContext& ctx) {
  AxesInfo info;
  if (!ctx.has_input(1)) return info;
  const ValueType& type = ctx.input(1);
  KILN_REQUIRE(type.dtype == DType::i64 || type.dtype == DType::i32, invalid_argument,
               "axes must be int64, got ", dtype_name(type.dtype));
  KILN_REQUIRE(!type.rank_known || type.rank() <= 1, invalid_argument, "axes must be 1-D, got shape ",
               sym_shape_to_string(type.shape));
  const Tensor* value = ctx.value(1);
  if (value == nullptr) {
    // An axes input known to be empty is as good as a known value.
    info.known = type.rank_known && type.rank() == 1 && type.shape[0].known() && type.shape[0].value == 0;
    return info;
  }
  info.axes = ref::tensor_to_ints(*value);
  return info;
}

Status infer_reduce(InferContext& ctx, ReduceKind kind) {
  if (kind == ReduceKind::mean) KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  else KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32, DType::i32, DType::i64}));
  KILN_ASSIGN(attrs, read_attrs(*ctx.attrs));
  KILN_ASSIGN(axes, read_axes(ctx));
  const ValueType& x = ctx.input(0);
  ctx.outputs.clear();

  if (!axes.known) {
    // Which dimensions go is unknown: the rank survives only with keepdims.
    if (attrs.keepdims && x.rank_known)
      ctx.outputs.push_back(ValueType::of(x.dtype, SymShape(x.shape.size(), Dim::unknown())));
    else
      ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  if (axes.axes.empty() && attrs.noop_with_empty_axes) {
    ctx.outputs.push_back(x);
    return Status::ok();
  }
  if (!x.rank_known) {
    // Reducing everything without keepdims gives a scalar whatever the input rank.
    if (axes.axes.empty() && !attrs.keepdims) ctx.outputs.push_back(ValueType::of(x.dtype, {}));
    else ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  KILN_ASSIGN(mask, reduced_mask(axes.axes, x.rank()));
  SymShape out;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (!mask[d]) out.push_back(x.shape[d]);
    else if (attrs.keepdims) out.push_back(Dim(1));
  }
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  return Status::ok();
}

template <typename A>
bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(v);
  else return false;
}

template <typename T>
void reduce_typed(const Tensor& x, Tensor& y, const std::vector<bool>& mask, ReduceKind kind) {
  // Accumulate floats in double and integers in int64 (sums wrap around like the hardware).
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  Acc init = 0;
  if (kind == ReduceKind::max)
    init = std::numeric_limits<T>::has_infinity ? -static_cast<Acc>(std::numeric_limits<T>::infinity())
                                                : static_cast<Acc>(std::numeric_limits<T>::lowest());
  if (kind == ReduceKind::min)
    init = std::numeric_limits<T>::has_infinity ? static_cast<Acc>(std::numeric_limits<T>::infinity())
                                                : static_cast<Acc>(std::numeric_limits<T>::max());
  std::vector<Acc> acc(static_cast<size_t>(y.numel()), init);

  // Output strides in the keepdims layout, 0 along reduced dimensions.
  const Shape& in_shape = x.shape();
  Shape kept(in_shape.size());
  for (size_t d = 0; d < in_shape.size(); ++d) kept[d] = mask[d] ? 1 : in_shape[d];
  const std::vector<int64_t> strides[1] = {ref::broadcast_strides(kept, in_shape)};

  const T* src = x.data<T>();
  ref::for_each_broadcast(in_shape, strides, [&](int64_t i, const int64_t* offsets) {
    Acc& a = acc[static_cast<size_t>(offsets[0])];
    const Acc v = static_cast<Acc>(src[i]);
    switch (kind) {
      case ReduceKind::sum:
      case ReduceKind::mean:
        if constexpr (std::is_floating_point_v<Acc>) a += v;
        else a = static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(v));
        break;
      case ReduceKind::max:
        if (v > a || is_nan(v)) a = v;  // NaN propagates: once a is NaN, no comparison replaces it
        break;
      case ReduceKind::min:
        if (v < a || is_nan(v)) a = v;
        break;
    }
  });

  const int64_t count = y.numel() == 0 ? 0 : x.numel() / y.numel();
  T* dst = y.data<T>();
  for (size_t i = 0; i < acc.size(); ++i) {
    Acc v = acc[i];
    if (kind == ReduceKind::mean) {
      if constexpr (std::is_floating_point_v<Acc>)
        v = count == 0 ? std::numeric_limits<Acc>::quiet_NaN() : v / static_cast<Acc>(count);
    }
    dst[i] = static_cast<T>(v);
  }
}

Status run_reduce(RunContext& ctx, ReduceKind kind) {
  KILN_ASSIGN(attrs, read_attrs(*ctx.attrs));
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) axes = ref::tensor_to_ints(ctx.input(1));
  if (axes.empty() && attrs.noop_with_empty_axes) {
    if (x.nbytes() != 0) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return Status::ok();
  }
  KILN_ASSIGN(mask, reduced_mask(axes, x.rank()));
  Status status = Status::ok();
  visit_dtype(x.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>)
      reduce_typed<T>(x, y, mask, kind);
    else
      status = make_error(ErrorCode::unsupported, reduce_name(kind), " does not support ", dtype_name(x.dtype()));
  });
  return status;
}

template <ReduceKind K>
Status infer_kind(InferContext& ctx) {
  return infer_reduce(ctx, K);
}
template <ReduceKind K>
Status run_kind(RunContext& ctx) {
  return run_reduce(ctx, K);
}

template <ReduceKind K>
const OpDef& reduce_def() {
  static const OpDef def{1, 2, 1, 1, infer_kind<K>, run_kind<K>};
  return def;
}

}  // namespace

const OpDef& op_def_ReduceSum() { return reduce_def<ReduceKind::sum>(); }
const OpDef& op_def_ReduceMean() { return reduce_def<ReduceKind::mean>(); }
const OpDef& op_def_ReduceMax() { return reduce_def<ReduceKind::max>(); }
const OpDef& op_def_ReduceMin() { return reduce_def<ReduceKind::min>(); }

}  // namespace kiln

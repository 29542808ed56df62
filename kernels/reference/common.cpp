#include "kernels/reference/common.h"

#include <algorithm>
#include <sstream>

namespace kiln::ref {

Result<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  const int64_t lo = -std::max<int64_t>(rank, 1);
  const int64_t hi = std::max<int64_t>(rank, 1) - 1;
  if (axis < lo || axis > hi)
    return make_error(ErrorCode::invalid_argument, "axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

Result<SymShape> broadcast_shapes(const SymShape& a, const SymShape& b) {
  const size_t rank = std::max(a.size(), b.size());
  SymShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim da = i < rank - a.size() ? Dim(1) : a[i - (rank - a.size())];
    const Dim db = i < rank - b.size() ? Dim(1) : b[i - (rank - b.size())];
    if (da.known() && da.value == 1) out[i] = db;
    else if (db.known() && db.value == 1) out[i] = da;
    else if (da.known() && db.known()) {
      if (da.value != db.value)
        return make_error(ErrorCode::shape_mismatch, "cannot broadcast ", sym_shape_to_string(a), " with ",
                          sym_shape_to_string(b));
      out[i] = da;
    } else if (da == db) out[i] = da;
    else out[i] = da.known() ? da : (db.known() ? db : Dim::unknown());
  }
  return out;
}

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  KILN_ASSIGN(s, broadcast_shapes(sym_shape_from(a), sym_shape_from(b)));
  return sym_shape_concrete(s);
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  const std::vector<int64_t> in_strides = shape_strides(in);
  const size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    strides[offset + i] = in[i] == 1 ? 0 : in_strides[i];
  return strides;
}

namespace {

Result<size_t> legacy_aligned_rank(const Attrs& attrs, int64_t rank_a, int64_t rank_b) {
  KILN_ASSIGN(axis, attrs.get_int("legacy_axis", -1));
  KILN_REQUIRE(axis >= 0 && axis + rank_b <= rank_a, invalid_argument, "legacy broadcast axis ", axis,
               " does not fit input 1 of rank ", rank_b, " into input 0 of rank ", rank_a);
  return static_cast<size_t>(rank_a - axis);
}

}  // namespace

Status apply_legacy_axis(InferContext& ctx, ValueType& storage) {
  if (!ctx.attrs->has("legacy_axis") || !ctx.has_input(0) || !ctx.has_input(1)) return Status::ok();
  if (!ctx.input(0).rank_known || !ctx.input(1).rank_known) return Status::ok();
  KILN_ASSIGN(rank, legacy_aligned_rank(*ctx.attrs, ctx.input(0).rank(), ctx.input(1).rank()));
  storage = ctx.input(1);
  storage.shape.resize(rank, Dim(1));
  ctx.inputs[1] = &storage;
  return Status::ok();
}

Status apply_legacy_axis(RunContext& ctx, Tensor& storage) {
  if (!ctx.attrs->has("legacy_axis") || !ctx.has_input(0) || !ctx.has_input(1)) return Status::ok();
  KILN_ASSIGN(rank, legacy_aligned_rank(*ctx.attrs, ctx.input(0).rank(), ctx.input(1).rank()));
  Shape shape = ctx.input(1).shape();
  shape.resize(rank, 1);
  storage = ctx.input(1).reshaped(std::move(shape));
  ctx.inputs[1] = &storage;
  return Status::ok();
}

std::vector<int64_t> tensor_to_ints(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.value_as_int(i);
  return v;
}

std::vector<float> tensor_to_floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(t.value_as_double(i));
  return v;
}

Status infer_same_as_input0(InferContext& ctx) {
  ctx.outputs.assign(1, ctx.input(0));
  return Status::ok();
}

Status require_dtype(const InferContext& ctx, size_t i, std::initializer_list<DType> allowed) {
  const DType dt = ctx.input(i).dtype;
  for (DType a : allowed)
    if (a == dt) return Status::ok();
  return make_error(ErrorCode::unsupported, "input ", i, " has dtype ", dtype_name(dt), ", which this op does not support");
}

std::string ints_to_string(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
  return os.str();
}

}  // namespace kiln::ref

// The ops that make values rather than move them: Shape (an input's dims as int64), Constant (the
// `value` tensor attribute), ConstantOfShape (a shape filled with one value) and Range.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/reference/data_util.h"

namespace kiln {
namespace {

// ---- Shape: attributes start (default 0) and end (default rank), clamped like a slice ----

struct ShapeRange {
  int64_t start = 0;
  int64_t end = 0;
};

Result<ShapeRange> shape_range(const Attrs& attrs, int64_t rank) {
  KILN_ASSIGN(start, attrs.get_int("start", 0));
  KILN_ASSIGN(end, attrs.get_int("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  ShapeRange r;
  r.start = std::clamp<int64_t>(start, 0, rank);
  r.end = std::max(r.start, std::clamp<int64_t>(end, 0, rank));
  return r;
}

Status infer_shape(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 1));
  const ValueType& x = ctx.input(0);
  ctx.outputs.clear();
  if (!x.rank_known) {
    ctx.outputs.push_back(ValueType::of(DType::i64, {Dim::unknown()}));
    return Status::ok();
  }
  KILN_ASSIGN(r, shape_range(*ctx.attrs, x.rank()));
  ctx.outputs.push_back(ValueType::of(DType::i64, {Dim(r.end - r.start)}));
  return Status::ok();
}

// Reads only the input's shape: shape inference may pass a placeholder without data.
Status run_shape(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN(r, shape_range(*ctx.attrs, x.rank()));
  int64_t* out = ctx.output(0).data<int64_t>();
  for (int64_t i = r.start; i < r.end; ++i) out[i - r.start] = x.dim(i);
  return Status::ok();
}

// ---- Constant: the `value` tensor (the importer turns value_float/value_ints/... into it) ----

Result<Tensor> constant_value(const Attrs& attrs) {
  if (attrs.has("value")) return attrs.get_tensor("value");
  if (attrs.has("value_float")) {
    KILN_ASSIGN(f, attrs.get_float("value_float", 0.0f));
    return Tensor::scalar<float>(f);
  }
  if (attrs.has("value_int")) {
    KILN_ASSIGN(i, attrs.get_int("value_int", 0));
    return Tensor::scalar<int64_t>(i);
  }
  if (attrs.has("value_floats")) {
    KILN_ASSIGN(fs, attrs.get_floats("value_floats"));
    return Tensor::from_values<float>({static_cast<int64_t>(fs.size())}, fs);
  }
  if (attrs.has("value_ints")) {
    KILN_ASSIGN(is, attrs.get_ints("value_ints"));
    return Tensor::from_values<int64_t>({static_cast<int64_t>(is.size())}, is);
  }
  return make_error(ErrorCode::invalid_argument, "Constant needs a value attribute");
}

Status infer_constant(InferContext& ctx) {
  KILN_ASSIGN(value, constant_value(*ctx.attrs));
  ctx.outputs.assign(1, ValueType::of(value.dtype(), sym_shape_from(value.shape())));
  return Status::ok();
}

Status run_constant(RunContext& ctx) {
  KILN_ASSIGN(value, constant_value(*ctx.attrs));
  Tensor& y = ctx.output(0);
  KILN_REQUIRE(y.nbytes() == value.nbytes(), internal, "output ", y.describe(), " does not hold ", value.describe());
  if (value.nbytes() != 0) std::memcpy(y.raw(), value.raw(), value.nbytes());
  return Status::ok();
}

// ---- ConstantOfShape: input shape (int64); `value` a one-element tensor, default float32 0 ----

Result<Tensor> fill_value(const Attrs& attrs) {
  if (!attrs.has("value")) return Tensor::scalar<float>(0.0f);
  KILN_ASSIGN(value, attrs.get_tensor("value"));
  KILN_REQUIRE(value.numel() == 1, invalid_argument, "value must hold one element, got ", value.describe());
  return value;
}

Status infer_constant_of_shape(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 1));
  KILN_ASSIGN(value, fill_value(*ctx.attrs));
  KILN_ASSIGN(shape, ref::data::read_int_input(ctx, 0, "shape"));
  ctx.outputs.clear();
  if (!shape.known) {
    if (shape.length >= 0)
      ctx.outputs.push_back(ValueType::of(value.dtype(), SymShape(static_cast<size_t>(shape.length))));
    else
      ctx.outputs.push_back(ValueType::unranked(value.dtype()));
    return Status::ok();
  }
  SymShape out;
  for (int64_t v : shape.values) {
    KILN_REQUIRE(v >= 0, invalid_argument, "shape ", ref::ints_to_string(shape.values), " has a negative dim");
    out.push_back(Dim(v));
  }
  KILN_TRY(ref::data::check_output_shape(out, "the ConstantOfShape output"));
  ctx.outputs.push_back(ValueType::of(value.dtype(), std::move(out)));
  return Status::ok();
}

Status run_constant_of_shape(RunContext& ctx) {
  KILN_ASSIGN(value, fill_value(*ctx.attrs));
  Tensor& y = ctx.output(0);
  const size_t elem = dtype_size(value.dtype());
  auto* dst = static_cast<unsigned char*>(y.raw());
  for (int64_t i = 0; i < y.numel(); ++i) std::memcpy(dst + static_cast<size_t>(i) * elem, value.raw(), elem);
  return Status::ok();
}

// ---- Range: scalars start, limit, delta of one dtype; n = max(ceil((limit - start) / delta), 0) ----

Result<int64_t> range_count(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  int64_t n = 0;
  if (dtype_is_float(start.dtype())) {
    const double s = start.value_as_double(0), l = limit.value_as_double(0), d = delta.value_as_double(0);
    KILN_REQUIRE(d != 0, invalid_argument, "delta must not be 0");
    const double c = std::ceil((l - s) / d);
    KILN_REQUIRE(std::isfinite(c), invalid_argument, "Range(", s, ", ", l, ", ", d, ") has no finite length");
    KILN_REQUIRE(c <= static_cast<double>(ref::data::kMaxElements), limit_exceeded, "Range(", s, ", ", l, ", ", d,
                 ") has more than the supported ", ref::data::kMaxElements, " elements");
    n = c > 0 ? static_cast<int64_t>(c) : 0;
  } else {
    const int64_t s = start.value_as_int(0), l = limit.value_as_int(0), d = delta.value_as_int(0);
    KILN_REQUIRE(d != 0, invalid_argument, "delta must not be 0");
    int64_t diff = 0;
    KILN_REQUIRE(!__builtin_sub_overflow(l, s, &diff), limit_exceeded, "Range(", s, ", ", l, ", ", d,
                 ") has more than the supported ", ref::data::kMaxElements, " elements");
    if ((diff > 0 && d > 0) || (diff < 0 && d < 0)) {
      // ceil(diff / d) for same-signed diff and d, without overflow.
      n = d > 0 ? (diff - 1) / d + 1 : (diff + 1) / d + 1;
    }
    KILN_REQUIRE(n <= ref::data::kMaxElements, limit_exceeded, "Range(", s, ", ", l, ", ", d,
                 ") has more than the supported ", ref::data::kMaxElements, " elements");
  }
  return n;
}

Status infer_range(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 3));
  const DType dt = ctx.input(0).dtype;
  KILN_REQUIRE(dt == DType::f32 || dt == DType::i32 || dt == DType::i64, unsupported, "Range of ", dtype_name(dt),
               " is not supported (float32, int32, int64)");
  const char* names[3] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    const ValueType& t = ctx.input(i);
    KILN_REQUIRE(t.dtype == dt, invalid_argument, names[i], " is ", dtype_name(t.dtype), " but start is ",
                 dtype_name(dt));
    KILN_REQUIRE(!t.rank_known || (t.rank() == 0 || (t.rank() == 1 && (!t.shape[0].known() || t.shape[0].value == 1))),
                 invalid_argument, names[i], " must be a scalar, got shape ", sym_shape_to_string(t.shape));
    if (const Tensor* v = ctx.value(i))
      KILN_REQUIRE(v->numel() == 1, invalid_argument, names[i], " must be a scalar, got ", v->describe());
  }
  ctx.outputs.clear();
  if (!ctx.value(0) || !ctx.value(1) || !ctx.value(2)) {
    ctx.outputs.push_back(ValueType::of(dt, {Dim::unknown()}));
    return Status::ok();
  }
  KILN_ASSIGN(n, range_count(*ctx.value(0), *ctx.value(1), *ctx.value(2)));
  ctx.outputs.push_back(ValueType::of(dt, {Dim(n)}));
  return Status::ok();
}

Status run_range(RunContext& ctx) {
  Tensor& y = ctx.output(0);
  const Tensor& start = ctx.input(0);
  const Tensor& delta = ctx.input(2);
  const int64_t n = y.numel();
  visit_dtype(y.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    if constexpr (std::is_same_v<T, float>) {
      const float s = static_cast<float>(start.value_as_double(0)), d = static_cast<float>(delta.value_as_double(0));
      for (int64_t i = 0; i < n; ++i) out[i] = s + static_cast<float>(i) * d;
    } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      const int64_t s = start.value_as_int(0), d = delta.value_as_int(0);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(s + i * d);
    }
  });
  return Status::ok();
}

}  // namespace

// Input: any tensor (only its shape is read). Output: int64 1-D.
const OpDef& op_def_Shape() {
  static const OpDef def{1, 1, 1, 1, infer_shape, run_shape};
  return def;
}

const OpDef& op_def_Constant() {
  static const OpDef def{0, 0, 1, 1, infer_constant, run_constant};
  return def;
}

const OpDef& op_def_ConstantOfShape() {
  static const OpDef def{1, 1, 1, 1, infer_constant_of_shape, run_constant_of_shape};
  return def;
}

// Inputs: start, limit, delta (scalars of one dtype).
const OpDef& op_def_Range() {
  static const OpDef def{3, 3, 1, 1, infer_range, run_range};
  return def;
}

}  // namespace kiln

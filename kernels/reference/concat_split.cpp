// Concat (inputs joined along `axis`) and Split (one input cut along `axis` into num_outputs
// parts, sized by the optional `split` input or evenly).
#include <cstring>

#include "kernels/reference/data_util.h"

namespace kiln {
namespace {

using ref::ints_to_string;

// ---- Concat ----

Status infer_concat(InferContext& ctx) {
  KILN_REQUIRE(ctx.attrs->has("axis"), invalid_argument, "Concat needs the axis attribute");
  KILN_ASSIGN(axis_attr, ctx.attrs->get_int("axis", 0));
  KILN_REQUIRE(ctx.num_inputs() >= 1, invalid_argument, "Concat needs at least one input");
  const ValueType* ranked = nullptr;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    KILN_REQUIRE(ctx.has_input(i), invalid_argument, "input ", i, " is missing");
    KILN_REQUIRE(ctx.input(i).dtype == ctx.input(0).dtype, invalid_argument, "input ", i, " is ",
                 dtype_name(ctx.input(i).dtype), " but input 0 is ", dtype_name(ctx.input(0).dtype));
    if (!ranked && ctx.input(i).rank_known) ranked = &ctx.input(i);
  }
  const DType dtype = ctx.input(0).dtype;
  ctx.outputs.clear();
  if (!ranked) {
    ctx.outputs.push_back(ValueType::unranked(dtype));
    return Status::ok();
  }
  const int64_t rank = ranked->rank();
  KILN_REQUIRE(rank >= 1, invalid_argument, "cannot concatenate scalars");
  KILN_REQUIRE(axis_attr >= -rank && axis_attr < rank, invalid_argument, "axis ", axis_attr,
               " is out of range for rank ", rank);
  const size_t axis = static_cast<size_t>(axis_attr < 0 ? axis_attr + rank : axis_attr);

  SymShape out = ranked->shape;
  int64_t total = 0;
  bool total_known = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const ValueType& in = ctx.input(i);
    if (!in.rank_known) {
      total_known = false;
      continue;
    }
    KILN_REQUIRE(in.rank() == rank, shape_mismatch, "input ", i, " has shape ", sym_shape_to_string(in.shape),
                 " but input 0 has shape ", sym_shape_to_string(ranked->shape), ": ranks differ");
    for (size_t d = 0; d < in.shape.size(); ++d) {
      const Dim& dim = in.shape[d];
      if (d == axis) {
        if (dim.known() && total_known) {
          KILN_REQUIRE(!__builtin_add_overflow(total, dim.value, &total), limit_exceeded,
                       "the Concat output dim along axis ", axis, " overflows");
        } else {
          total_known = false;
        }
        continue;
      }
      KILN_REQUIRE(!dim.known() || !out[d].known() || dim.value == out[d].value, shape_mismatch, "input ", i,
                   " has shape ", sym_shape_to_string(in.shape), " which does not match ",
                   sym_shape_to_string(out), " outside axis ", axis);
      if (!out[d].known() && (dim.known() || out[d].symbol.empty())) out[d] = dim;
    }
  }
  out[axis] = total_known ? Dim(total) : Dim::unknown();
  if (ctx.num_inputs() == 1) out[axis] = ranked->shape[axis];
  KILN_TRY(ref::data::check_output_shape(out, "the Concat output"));
  ctx.outputs.push_back(ValueType::of(dtype, std::move(out)));
  return Status::ok();
}

Status run_concat(RunContext& ctx) {
  Tensor& y = ctx.output(0);
  KILN_ASSIGN(axis_attr, ctx.attrs->get_int("axis", 0));
  const int64_t axis = axis_attr < 0 ? axis_attr + y.rank() : axis_attr;
  const size_t a = static_cast<size_t>(axis);
  const size_t elem = dtype_size(y.dtype());
  const int64_t outer = ref::data::dims_product(y.shape(), 0, a);
  const int64_t inner = ref::data::dims_product(y.shape(), a + 1, y.shape().size());
  const size_t out_row = static_cast<size_t>(y.dim(axis) * inner) * elem;
  size_t at = 0;  // byte offset of this input's block within an output row
  for (const Tensor* in : ctx.inputs) {
    const size_t block = static_cast<size_t>(in->dim(axis) * inner) * elem;
    const auto* src = static_cast<const unsigned char*>(in->raw());
    auto* dst = static_cast<unsigned char*>(y.raw());
    if (block != 0)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + static_cast<size_t>(o) * out_row + at, src + static_cast<size_t>(o) * block, block);
    at += block;
  }
  return Status::ok();
}

// ---- Split ----

struct SplitAttrs {
  int64_t axis = 0;
  int64_t num_outputs = -1;  // -1 when the attribute is absent
};

Result<SplitAttrs> read_split_attrs(const Attrs& attrs) {
  SplitAttrs s;
  KILN_ASSIGN(axis, attrs.get_int("axis", 0));
  KILN_ASSIGN(n, attrs.get_int("num_outputs", -1));
  KILN_REQUIRE(n == -1 || (n >= 1 && n <= 65536), invalid_argument, "num_outputs must be in [1, 65536], got ", n);
  s.axis = axis;
  s.num_outputs = n;
  return s;
}

// Part sizes for a dim of size `dim` cut into n parts without a split input: equal parts, or
// parts of ceil(dim / n) with a smaller last one (opset 18) when that works out.
Result<std::vector<int64_t>> even_split(int64_t dim, int64_t n) {
  if (dim % n == 0) return std::vector<int64_t>(static_cast<size_t>(n), dim / n);
  const int64_t part = (dim + n - 1) / n;
  const int64_t last = dim - part * (n - 1);
  KILN_REQUIRE(last > 0, shape_mismatch, "cannot split a dim of size ", dim, " into ", n, " parts");
  std::vector<int64_t> parts(static_cast<size_t>(n), part);
  parts.back() = last;
  return parts;
}

Status infer_split(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 1));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(attrs, read_split_attrs(*ctx.attrs));
  KILN_ASSIGN(split, ref::data::read_int_input(ctx, 1, "split"));
  int64_t n = attrs.num_outputs;
  if (split.length >= 0) {
    KILN_REQUIRE(n < 0 || n == split.length, invalid_argument, "split has ", split.length,
                 " entries but the node has ", n, " outputs");
    n = split.length;
  }
  KILN_REQUIRE(n >= 1, invalid_argument, "Split needs the num_outputs attribute or a split input of known length");
  ctx.outputs.clear();
  if (!x.rank_known) {
    ctx.outputs.assign(static_cast<size_t>(n), ValueType::unranked(x.dtype));
    return Status::ok();
  }
  KILN_REQUIRE(attrs.axis >= -x.rank() && attrs.axis < x.rank(), invalid_argument, "axis ", attrs.axis,
               " is out of range for input shape ", sym_shape_to_string(x.shape));
  const size_t axis = static_cast<size_t>(attrs.axis < 0 ? attrs.axis + x.rank() : attrs.axis);
  const Dim& dim = x.shape[axis];

  std::vector<Dim> parts(static_cast<size_t>(n), Dim::unknown());
  if (split.known) {
    int64_t sum = 0;
    for (size_t i = 0; i < split.values.size(); ++i) {
      const int64_t v = split.values[i];
      KILN_REQUIRE(v >= 0 && v <= ref::data::kMaxElements, invalid_argument, "split ",
                   ints_to_string(split.values), " has an invalid entry ", v);
      sum += v;
      parts[i] = Dim(v);
    }
    KILN_REQUIRE(!dim.known() || sum == dim.value, shape_mismatch, "split ", ints_to_string(split.values),
                 " sums to ", sum, " but axis ", axis, " of ", sym_shape_to_string(x.shape), " has size ", dim.value);
  } else if (!split.present && dim.known()) {
    KILN_ASSIGN(even, even_split(dim.value, n));
    for (size_t i = 0; i < even.size(); ++i) parts[i] = Dim(even[i]);
  } else if (!split.present && n == 1) {
    parts[0] = dim;
  }
  for (const Dim& p : parts) {
    SymShape out = x.shape;
    out[axis] = p;
    ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  }
  return Status::ok();
}

Status run_split(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN(attrs, read_split_attrs(*ctx.attrs));
  const int64_t axis = attrs.axis < 0 ? attrs.axis + x.rank() : attrs.axis;
  const size_t a = static_cast<size_t>(axis);
  const size_t elem = dtype_size(x.dtype());
  const int64_t outer = ref::data::dims_product(x.shape(), 0, a);
  const int64_t inner = ref::data::dims_product(x.shape(), a + 1, x.shape().size());
  const size_t in_row = static_cast<size_t>(x.dim(axis) * inner) * elem;
  size_t at = 0;
  for (Tensor* out : ctx.outputs) {
    const size_t block = static_cast<size_t>(out->dim(axis) * inner) * elem;
    const auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(out->raw());
    KILN_REQUIRE(at + block <= in_row, internal, "split parts exceed the input");
    if (block != 0)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + static_cast<size_t>(o) * block, src + static_cast<size_t>(o) * in_row + at, block);
    at += block;
  }
  return Status::ok();
}

}  // namespace

// Inputs: one or more tensors of one dtype. Attribute axis (required).
const OpDef& op_def_Concat() {
  static const OpDef def{1, -1, 1, 1, infer_concat, run_concat};
  return def;
}

// Inputs: input, optional split (int64). Attributes axis (default 0), num_outputs (the importer
// always sets it to the node's output count).
const OpDef& op_def_Split() {
  static const OpDef def{1, 2, 1, 65536, infer_split, run_split};
  return def;
}

}  // namespace kiln

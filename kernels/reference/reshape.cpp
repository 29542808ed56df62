// The ops that change only the shape, never the bytes: Flatten, Reshape, Squeeze, Unsqueeze.
// Their kernels copy the input buffer; the work is in shape inference.
#include <algorithm>
#include <cstring>

#include "kernels/reference/data_util.h"

namespace kiln {
namespace {

using ref::ints_to_string;

Status run_copy(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  KILN_REQUIRE(x.nbytes() == y.nbytes(), internal, "output ", y.describe(), " does not hold input ", x.describe());
  if (x.nbytes() != 0) std::memcpy(y.raw(), x.raw(), x.nbytes());
  return Status::ok();
}

// The product of dims[begin, end) as one Dim: known when every dim is known, the single
// unknown dim itself when the others are all 1, unknown otherwise.
Dim dims_product(const SymShape& dims, size_t begin, size_t end) {
  int64_t known = 1;
  int unknown = 0;
  Dim last_unknown;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i].known()) {
      if (__builtin_mul_overflow(known, dims[i].value, &known)) return Dim::unknown();
    } else {
      ++unknown;
      last_unknown = dims[i];
    }
  }
  if (unknown == 0) return Dim(known);
  if (known == 0) return Dim(0);
  if (unknown == 1 && known == 1) return last_unknown;
  return Dim::unknown();
}

// ---- Flatten: [d0 .. d(axis-1)] x [d(axis) .. d(n-1)] ----

Status infer_flatten(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 1));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(axis, ctx.attrs->get_int("axis", 1));
  ctx.outputs.clear();
  if (!x.rank_known) {
    SymShape out{Dim::unknown(), Dim::unknown()};
    if (axis == 0) out[0] = Dim(1);
    ctx.outputs.push_back(ValueType::of(x.dtype, out));
    return Status::ok();
  }
  const int64_t rank = x.rank();
  KILN_REQUIRE(axis >= -rank && axis <= rank, invalid_argument, "axis ", axis, " is out of range [", -rank, ", ",
               rank, "] for input shape ", sym_shape_to_string(x.shape));
  const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  SymShape out{dims_product(x.shape, 0, a), dims_product(x.shape, a, x.shape.size())};
  ctx.outputs.push_back(ValueType::of(x.dtype, out));
  return Status::ok();
}

// ---- Reshape: shape input with 0 (copy the input dim unless allowzero=1) and -1 (inferred) ----

Status infer_reshape(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 2));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(allowzero, ctx.attrs->get_int("allowzero", 0));
  KILN_REQUIRE(allowzero == 0 || allowzero == 1, invalid_argument, "allowzero must be 0 or 1, got ", allowzero);
  KILN_ASSIGN(shape, ref::data::read_int_input(ctx, 1, "shape"));
  ctx.outputs.clear();
  if (!shape.known) {
    if (shape.length >= 0) ctx.outputs.push_back(ValueType::of(x.dtype, SymShape(static_cast<size_t>(shape.length))));
    else ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  const std::vector<int64_t>& s = shape.values;
  const std::string what = "cannot reshape " + (x.rank_known ? sym_shape_to_string(x.shape) : std::string("?")) +
                           " to " + ints_to_string(s);
  SymShape out(s.size());
  int infer_at = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      KILN_REQUIRE(infer_at < 0, invalid_argument, what, ": more than one -1");
      infer_at = static_cast<int>(i);
    } else if (s[i] == 0 && allowzero == 0) {
      if (x.rank_known) {
        KILN_REQUIRE(static_cast<int64_t>(i) < x.rank(), invalid_argument, what, ": 0 at index ", i,
                     " copies a dim the input does not have");
        out[i] = x.shape[i];
      }
    } else {
      KILN_REQUIRE(s[i] >= 0, invalid_argument, what, ": dims must be >= -1");
      KILN_REQUIRE(s[i] <= ref::data::kMaxElements, limit_exceeded, what, ": dim ", s[i], " is above the supported ",
                   ref::data::kMaxElements);
      out[i] = Dim(s[i]);
    }
  }
  if (allowzero == 1 && infer_at >= 0)
    for (int64_t v : s) KILN_REQUIRE(v != 0, invalid_argument, what, ": with allowzero=1, 0 and -1 cannot both appear");

  if (x.rank_known) {
    // Known products on both sides, and the unknown dims that do not cancel by name.
    int64_t in_known = 1, out_known = 1;
    std::vector<Dim> in_unknown, out_unknown;
    for (const Dim& d : x.shape) {
      if (d.known()) {
        KILN_ASSIGN(product, ref::data::checked_mul(in_known, d.value, "the Reshape input"));
        in_known = product;
      } else {
        in_unknown.push_back(d);
      }
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int>(i) == infer_at) continue;
      if (out[i].known()) {
        KILN_ASSIGN(product, ref::data::checked_mul(out_known, out[i].value, "the Reshape output"));
        out_known = product;
      } else {
        out_unknown.push_back(out[i]);
      }
    }
    for (auto it = out_unknown.begin(); it != out_unknown.end();) {
      auto match = std::find(in_unknown.begin(), in_unknown.end(), *it);
      if (match != in_unknown.end()) {
        in_unknown.erase(match);
        it = out_unknown.erase(it);
      } else {
        ++it;
      }
    }
    if (infer_at >= 0) {
      if (in_unknown.empty() && out_unknown.empty()) {
        KILN_REQUIRE(out_known != 0, invalid_argument, what, ": -1 is ambiguous when the other dims multiply to 0");
        KILN_REQUIRE(in_known % out_known == 0, shape_mismatch, what, ": ", in_known,
                     " elements do not divide into dims of product ", out_known);
        out[static_cast<size_t>(infer_at)] = Dim(in_known / out_known);
      } else if (in_unknown.size() == 1 && out_unknown.empty() && in_known == out_known && in_known != 0) {
        out[static_cast<size_t>(infer_at)] = in_unknown[0];
      }
    } else if (in_unknown.empty() && out_unknown.empty()) {
      KILN_REQUIRE(in_known == out_known, shape_mismatch, what, ": ", in_known, " elements cannot become ",
                   out_known);
    }
  }
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  return Status::ok();
}

// ---- Squeeze: axes as optional input 1; without axes every dim of size 1 goes ----

Status infer_squeeze(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 1));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(axes, ref::data::read_int_input(ctx, 1, "axes"));
  ctx.outputs.clear();
  const bool all_ones = !axes.present || (axes.known && axes.values.empty());
  if (!x.rank_known || (!all_ones && !axes.known)) {
    if (x.rank_known && axes.length >= 0 && axes.length <= x.rank())
      ctx.outputs.push_back(ValueType::of(x.dtype, SymShape(static_cast<size_t>(x.rank() - axes.length))));
    else
      ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  SymShape out;
  if (all_ones) {
    for (const Dim& d : x.shape) {
      if (!d.known()) {
        // Whether this dim is 1 decides the rank.
        ctx.outputs.push_back(ValueType::unranked(x.dtype));
        return Status::ok();
      }
      if (d.value != 1) out.push_back(d);
    }
  } else {
    KILN_ASSIGN(norm, ref::data::normalize_axes(axes.values, x.rank(), "axes"));
    std::vector<bool> drop(x.shape.size(), false);
    for (int64_t a : norm) {
      const Dim& d = x.shape[static_cast<size_t>(a)];
      KILN_REQUIRE(!d.known() || d.value == 1, shape_mismatch, "cannot squeeze axis ", a, " of shape ",
                   sym_shape_to_string(x.shape), ": its size is ", d.value, ", not 1");
      drop[static_cast<size_t>(a)] = true;
    }
    for (size_t i = 0; i < x.shape.size(); ++i)
      if (!drop[i]) out.push_back(x.shape[i]);
  }
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  return Status::ok();
}

// ---- Unsqueeze: axes (input 1) index the output shape ----

Status infer_unsqueeze(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 2));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(axes, ref::data::read_int_input(ctx, 1, "axes"));
  KILN_REQUIRE(axes.present, invalid_argument, "Unsqueeze needs the axes input");
  ctx.outputs.clear();
  if (!x.rank_known || !axes.known) {
    if (x.rank_known && axes.length >= 0)
      ctx.outputs.push_back(ValueType::of(x.dtype, SymShape(static_cast<size_t>(x.rank() + axes.length))));
    else
      ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  const int64_t out_rank = x.rank() + static_cast<int64_t>(axes.values.size());
  KILN_ASSIGN(norm, ref::data::normalize_axes(axes.values, out_rank, "axes"));
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : norm) inserted[static_cast<size_t>(a)] = true;
  SymShape out;
  size_t next = 0;
  for (size_t i = 0; i < inserted.size(); ++i) out.push_back(inserted[i] ? Dim(1) : x.shape[next++]);
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  return Status::ok();
}

}  // namespace

const OpDef& op_def_Flatten() {
  static const OpDef def{1, 1, 1, 1, infer_flatten, run_copy};
  return def;
}

// Inputs: data, shape (int64). Attribute allowzero (default 0).
const OpDef& op_def_Reshape() {
  static const OpDef def{2, 2, 1, 1, infer_reshape, run_copy};
  return def;
}

// Inputs: data, optional axes (int64).
const OpDef& op_def_Squeeze() {
  static const OpDef def{1, 2, 1, 1, infer_squeeze, run_copy};
  return def;
}

// Inputs: data, axes (int64).
const OpDef& op_def_Unsqueeze() {
  static const OpDef def{2, 2, 1, 1, infer_unsqueeze, run_copy};
  return def;
}

}  // namespace kiln

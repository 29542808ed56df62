// Pad: inputs data, pads (int64: every axis's begin pad, then every end pad; negative pads crop),
// optional constant_value (scalar, default 0), optional axes (the axes `pads` refer to, default
// all). Attribute mode: constant (default), reflect (mirror without repeating the edge) or edge.
#include <type_traits>

#include "kernels/reference/data_util.h"

namespace kiln {
namespace {

using ref::ints_to_string;

enum class PadMode { constant, reflect, edge };

Result<PadMode> read_mode(const Attrs& attrs) {
  KILN_ASSIGN(mode, attrs.get_string("mode", "constant"));
  if (mode == "constant") return PadMode::constant;
  if (mode == "reflect") return PadMode::reflect;
  if (mode == "edge") return PadMode::edge;
  if (mode == "wrap") return make_error(ErrorCode::unsupported, "Pad mode 'wrap' is not supported");
  return make_error(ErrorCode::invalid_argument, "Pad mode '", mode, "' is not one of constant, reflect, edge");
}

// Begin and end pads for every dim of a rank-`rank` input, from the pads and axes values.
struct DimPads {
  std::vector<int64_t> begin, end;
};

Result<DimPads> expand_pads(const std::vector<int64_t>& pads, const std::vector<int64_t>* axes, int64_t rank) {
  std::vector<int64_t> all_axes;
  if (axes) {
    KILN_ASSIGN(norm, ref::data::normalize_axes(*axes, rank, "axes"));
    all_axes = norm;
  } else {
    for (int64_t i = 0; i < rank; ++i) all_axes.push_back(i);
  }
  const size_t n = all_axes.size();
  KILN_REQUIRE(pads.size() == 2 * n, invalid_argument, "pads ", ints_to_string(pads), " has ", pads.size(),
               " entries, expected ", 2 * n, " (2 per padded axis)");
  DimPads p;
  p.begin.assign(static_cast<size_t>(rank), 0);
  p.end.assign(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < n; ++i) {
    for (int64_t v : {pads[i], pads[i + n]})
      KILN_REQUIRE(v >= -ref::data::kMaxElements && v <= ref::data::kMaxElements, limit_exceeded, "pads ",
                   ints_to_string(pads), " has an entry beyond +-", ref::data::kMaxElements);
    p.begin[static_cast<size_t>(all_axes[i])] = pads[i];
    p.end[static_cast<size_t>(all_axes[i])] = pads[i + n];
  }
  return p;
}

Status infer_pad(InferContext& ctx) {
  KILN_TRY(ref::data::require_inputs(ctx, 2));
  const ValueType& x = ctx.input(0);
  KILN_ASSIGN(mode, read_mode(*ctx.attrs));
  KILN_ASSIGN(pads, ref::data::read_int_input(ctx, 1, "pads"));
  KILN_ASSIGN(axes, ref::data::read_int_input(ctx, 3, "axes"));
  KILN_REQUIRE(pads.present, invalid_argument, "Pad needs the pads input");
  if (ctx.has_input(2)) {
    const ValueType& cv = ctx.input(2);
    KILN_REQUIRE(!cv.rank_known || cv.rank() <= 1, invalid_argument, "constant_value must be a scalar, got shape ",
                 sym_shape_to_string(cv.shape));
  }
  ctx.outputs.clear();
  if (!x.rank_known) {
    ctx.outputs.push_back(ValueType::unranked(x.dtype));
    return Status::ok();
  }
  SymShape out = x.shape;
  if (!pads.known || (axes.present && !axes.known)) {
    if (axes.known) {
      KILN_ASSIGN(norm, ref::data::normalize_axes(axes.values, x.rank(), "axes"));
      for (int64_t a : norm) out[static_cast<size_t>(a)] = Dim::unknown();
    } else {
      out.assign(out.size(), Dim::unknown());
    }
    ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
    return Status::ok();
  }
  KILN_ASSIGN(p, expand_pads(pads.values, axes.present ? &axes.values : nullptr, x.rank()));
  for (size_t d = 0; d < out.size(); ++d) {
    const int64_t b = p.begin[d], e = p.end[d];
    if (b == 0 && e == 0) continue;
    if (!out[d].known()) {
      if (b + e != 0) out[d] = Dim::unknown();
      continue;
    }
    const int64_t n = out[d].value;
    KILN_REQUIRE(n + b + e >= 0, invalid_argument, "pads ", ints_to_string(pads.values), " crop dim ", d, " of ",
                 sym_shape_to_string(x.shape), " below 0");
    KILN_REQUIRE(mode == PadMode::constant || n > 0, invalid_argument, "cannot ",
                 mode == PadMode::edge ? "edge" : "reflect", "-pad dim ", d, " of ", sym_shape_to_string(x.shape),
                 ": it is empty");
    out[d] = Dim(n + b + e);
  }
  KILN_TRY(ref::data::check_output_shape(out, "the Pad output"));
  ctx.outputs.push_back(ValueType::of(x.dtype, std::move(out)));
  return Status::ok();
}

// Input index for position i (input coordinates, may be outside [0, n)), or -1 for the constant.
int64_t source_index(int64_t i, int64_t n, PadMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::constant: return -1;
    case PadMode::edge: return i < 0 ? 0 : n - 1;
    case PadMode::reflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t m = i % period;
      if (m < 0) m += period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

template <typename T>
T constant_as(const Tensor* cv) {
  if (cv == nullptr || cv->numel() == 0) return T{};
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return T(static_cast<float>(cv->value_as_double(0)));
  else if constexpr (std::is_same_v<T, bool>) return cv->value_as_double(0) != 0;
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(cv->value_as_double(0));
  else return static_cast<T>(cv->value_as_int(0));
}

Status run_pad(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  KILN_ASSIGN(mode, read_mode(*ctx.attrs));
  const std::vector<int64_t> pads = ref::tensor_to_ints(ctx.input(1));
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) axes = ref::tensor_to_ints(ctx.input(3));
  KILN_ASSIGN(p, expand_pads(pads, ctx.has_input(3) ? &axes : nullptr, x.rank()));
  const Tensor* cv = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (y.numel() == 0) return Status::ok();
  const size_t rank = x.shape().size();
  // map[d][o]: input index along d for output index o, or -1 for the constant.
  std::vector<std::vector<int64_t>> map(rank);
  for (size_t d = 0; d < rank; ++d)
    for (int64_t o = 0; o < y.shape()[d]; ++o)
      map[d].push_back(source_index(o - p.begin[d], x.shape()[d], mode));
  const std::vector<int64_t> strides = shape_strides(x.shape());
  visit_dtype(x.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(x.raw());
    T* dst = static_cast<T*>(y.raw());
    const T value = constant_as<T>(cv);
    if (rank == 0) {
      dst[0] = src[0];
      return;
    }
    const int64_t inner = y.shape()[rank - 1];
    const std::vector<int64_t>& inner_map = map[rank - 1];
    std::vector<int64_t> index(rank - 1, 0);
    for (int64_t o = 0; o < y.numel(); o += inner) {
      bool constant_row = false;
      int64_t offset = 0;
      for (size_t d = 0; d + 1 < rank; ++d) {
        const int64_t m = map[d][static_cast<size_t>(index[d])];
        if (m < 0) constant_row = true;
        else offset += m * strides[d];
      }
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t m = inner_map[static_cast<size_t>(j)];
        dst[o + j] = constant_row || m < 0 ? value : src[offset + m];
      }
      for (size_t d = rank - 1; d-- > 0;) {
        if (++index[d] < y.shape()[d]) break;
        index[d] = 0;
      }
    }
  });
  return Status::ok();
}

}  // namespace

const OpDef& op_def_Pad() {
  static const OpDef def{2, 4, 1, 1, infer_pad, run_pad};
  return def;
}

}  // namespace kiln

// MaxPool (float32, int8, uint8) and AveragePool (float32) over any number of spatial dims:
// X [N, C, D...] -> Y [N, C, O...]. Attributes: kernel_shape (required), strides, dilations, pads,
// auto_pad, ceil_mode; MaxPool: storage_order and an optional second output Indices (int64, the
// flattened index into X of each maximum, spatial dims row-major for storage_order 0 and
// column-major for 1); AveragePool: count_include_pad.
//
// Window semantics (ONNX, matching PyTorch):
//   - ceil_mode rounds the output size up, but a last window that would start in the end padding is
//     dropped (it must start inside the input or the begin padding);
//   - count_include_pad=1 divides by the number of window positions inside the padded input (a
//     ceil-mode window hanging past the end padding is clipped to it), count_include_pad=0 by the
//     number inside the input;
//   - padding never wins a max: MaxPool only looks at input elements. A window with no input element
//     gives the lowest value (and index -1), an average over no element gives 0.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/reference/window.h"

namespace kiln {
namespace {

using ref::WindowAttrs;

enum class PoolKind { max, average };

struct PoolAttrs {
  WindowAttrs window;
  bool column_major = false;      // MaxPool storage_order
  bool count_include_pad = false;  // AveragePool
};

Result<PoolAttrs> read_pool_attrs(const Attrs& attrs, size_t rank, PoolKind kind) {
  PoolAttrs p;
  KILN_ASSIGN(window, ref::read_window_attrs(attrs, rank, true, true));
  p.window = std::move(window);
  if (kind == PoolKind::max) {
    KILN_ASSIGN(order, attrs.get_int("storage_order", 0));
    KILN_REQUIRE(order == 0 || order == 1, invalid_argument, "storage_order must be 0 or 1, got ", order);
    p.column_major = order == 1;
  } else {
    KILN_ASSIGN(include, attrs.get_int("count_include_pad", 0));
    KILN_REQUIRE(include == 0 || include == 1, invalid_argument, "count_include_pad must be 0 or 1, got ", include);
    p.count_include_pad = include == 1;
  }
  return p;
}

template <PoolKind kKind>
Status infer_pool(InferContext& ctx) {
  if (kKind == PoolKind::max) KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32, DType::i8, DType::u8}));
  else KILN_TRY(ref::require_dtype(ctx, 0, {DType::f32}));
  const ValueType& x = ctx.input(0);
  const DType dt = x.dtype;
  size_t rank = 0;
  if (x.rank_known) {
    KILN_REQUIRE(x.rank() >= 3, shape_mismatch, "X must have rank >= 3 (N, C, spatial...), got shape ",
                 sym_shape_to_string(x.shape));
    rank = static_cast<size_t>(x.rank() - 2);
  } else {
    KILN_ASSIGN(kernel, ctx.attrs->get_ints("kernel_shape"));
    rank = kernel.size();
  }
  KILN_REQUIRE(rank <= ref::kMaxSpatialRank, unsupported, "spatial rank ", rank, " is more than the supported ",
               ref::kMaxSpatialRank);
  KILN_ASSIGN(p, read_pool_attrs(*ctx.attrs, rank, kKind));

  SymShape out(rank + 2, Dim::unknown());
  if (x.rank_known) {
    out[0] = x.shape[0];
    out[1] = x.shape[1];
    for (size_t d = 0; d < rank; ++d) {
      if (!x.shape[d + 2].known()) continue;
      KILN_ASSIGN(dim, ref::window_dim(p.window, d, x.shape[d + 2].value, p.window.kernel[d]));
      out[d + 2] = dim.out;
    }
  }
  ctx.outputs.assign(1, ValueType::of(dt, out));
  if (kKind == PoolKind::max) ctx.outputs.push_back(ValueType::of(DType::i64, out));
  return Status::ok();
}

// The per-dim geometry of one (n, c) plane.
struct PoolGeometry {
  size_t rank = 0;
  Shape in, out, kernel;
  std::vector<int64_t> strides, dilations, pad_begin, pad_end;
  std::vector<int64_t> in_strides;     // row-major element strides of the input plane
  std::vector<int64_t> index_strides;  // for Indices: row- or column-major
};

Result<PoolGeometry> pool_geometry(const PoolAttrs& p, const Shape& x_shape, const Shape& y_shape) {
  PoolGeometry g;
  g.rank = x_shape.size() - 2;
  g.in.assign(x_shape.begin() + 2, x_shape.end());
  g.out.assign(y_shape.begin() + 2, y_shape.end());
  g.kernel = p.window.kernel;
  g.strides = p.window.strides;
  g.dilations = p.window.dilations;
  g.pad_begin.resize(g.rank);
  g.pad_end.resize(g.rank);
  for (size_t d = 0; d < g.rank; ++d) {
    KILN_ASSIGN(dim, ref::window_dim(p.window, d, g.in[d], g.kernel[d]));
    KILN_REQUIRE(dim.out == g.out[d], internal, "output dim ", d, " is ", g.out[d], ", expected ", dim.out);
    g.pad_begin[d] = dim.pad_begin;
    g.pad_end[d] = dim.pad_end;
  }
  g.in_strides = shape_strides(g.in);
  g.index_strides = g.in_strides;
  if (p.column_major) {
    int64_t s = 1;
    for (size_t d = 0; d < g.rank; ++d) {
      g.index_strides[d] = s;
      s *= g.in[d];
    }
  }
  return g;
}

// Calls fn(plane_offset, index_offset) for every input element in the window of output position
// `o`, and returns the count of window positions inside the input (include_pad false) or inside
// the padded input (include_pad true).
template <typename Fn>
int64_t for_each_in_window(const PoolGeometry& g, const int64_t* o, bool include_pad, Fn&& fn) {
  int64_t start[ref::kMaxSpatialRank], lo[ref::kMaxSpatialRank], hi[ref::kMaxSpatialRank], j[ref::kMaxSpatialRank];
  int64_t valid = 1, padded = 1;
  for (size_t d = 0; d < g.rank; ++d) {
    start[d] = o[d] * g.strides[d] - g.pad_begin[d];
    const int64_t dil = g.dilations[d];
    const ref::WindowTaps taps = ref::window_taps(start[d], dil, g.kernel[d], g.in[d]);
    lo[d] = taps.first;
    hi[d] = taps.last;
    valid *= std::max<int64_t>(0, hi[d] - lo[d]);
    padded *= std::min<int64_t>(g.kernel[d], ref::floor_div(g.in[d] + g.pad_end[d] - 1 - start[d], dil) + 1);
  }
  if (valid == 0) return include_pad ? padded : valid;
  for (size_t d = 0; d < g.rank; ++d) j[d] = lo[d];
  for (bool more = true; more;) {
    int64_t at = 0, index = 0;
    for (size_t d = 0; d < g.rank; ++d) {
      const int64_t x = start[d] + j[d] * g.dilations[d];
      at += x * g.in_strides[d];
      index += x * g.index_strides[d];
    }
    fn(at, index);
    more = false;
    for (size_t d = g.rank; d-- > 0;) {
      if (++j[d] < hi[d]) {
        more = true;
        break;
      }
      j[d] = lo[d];
    }
  }
  return include_pad ? padded : valid;
}

// Calls fn(out_offset, o) for every output position o of a plane, in row-major order.
template <typename Fn>
void for_each_output(const PoolGeometry& g, Fn&& fn) {
  const int64_t total = shape_numel(g.out);
  int64_t o[ref::kMaxSpatialRank] = {};
  for (int64_t i = 0; i < total; ++i) {
    fn(i, o);
    for (size_t d = g.rank; d-- > 0;) {
      if (++o[d] < g.out[d]) break;
      o[d] = 0;
    }
  }
}

template <typename T>
void max_pool(const PoolGeometry& g, const Tensor& x, Tensor& y, Tensor* indices) {
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t in_size = shape_numel(g.in), out_size = shape_numel(g.out);
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T* in = x.data<T>() + plane * in_size;
    T* out = y.data<T>() + plane * out_size;
    int64_t* idx = indices ? indices->data<int64_t>() + plane * out_size : nullptr;
    for_each_output(g, [&](int64_t i, const int64_t* o) {
      T best = std::numeric_limits<T>::lowest();
      int64_t best_index = -1;
      for_each_in_window(g, o, false, [&](int64_t at, int64_t index) {
        const T v = in[at];
        bool better = best_index < 0 || v > best;
        if constexpr (std::is_floating_point_v<T>) better = better || (std::isnan(v) && !std::isnan(best));
        if (better) {
          best = v;
          best_index = index;
        }
      });
      out[i] = best;
      if (idx) idx[i] = best_index < 0 ? -1 : plane * in_size + best_index;
    });
  }
}

Status run_max_pool(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t rank = static_cast<size_t>(x.rank() - 2);
  KILN_ASSIGN(p, read_pool_attrs(*ctx.attrs, rank, PoolKind::max));
  KILN_ASSIGN(g, pool_geometry(p, x.shape(), ctx.output(0).shape()));
  Tensor* indices = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
  switch (x.dtype()) {
    case DType::f32: max_pool<float>(g, x, ctx.output(0), indices); break;
    case DType::i8: max_pool<int8_t>(g, x, ctx.output(0), indices); break;
    case DType::u8: max_pool<uint8_t>(g, x, ctx.output(0), indices); break;
    default:
      return make_error(ErrorCode::unsupported, "MaxPool does not support dtype ", dtype_name(x.dtype()));
  }
  return Status::ok();
}

Status run_average_pool(RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const size_t rank = static_cast<size_t>(x.rank() - 2);
  KILN_ASSIGN(p, read_pool_attrs(*ctx.attrs, rank, PoolKind::average));
  KILN_ASSIGN(g, pool_geometry(p, x.shape(), y.shape()));
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t in_size = shape_numel(g.in), out_size = shape_numel(g.out);
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* in = x.data<float>() + plane * in_size;
    float* out = y.data<float>() + plane * out_size;
    for_each_output(g, [&](int64_t i, const int64_t* o) {
      double sum = 0.0;
      const int64_t count = for_each_in_window(g, o, p.count_include_pad, [&](int64_t at, int64_t) { sum += in[at]; });
      out[i] = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
    });
  }
  return Status::ok();
}

}  // namespace

// Outputs: Y, optional Indices.
const OpDef& op_def_MaxPool() {
  static const OpDef def{1, 1, 1, 2, infer_pool<PoolKind::max>, run_max_pool};
  return def;
}

const OpDef& op_def_AveragePool() {
  static const OpDef def{1, 1, 1, 1, infer_pool<PoolKind::average>, run_average_pool};
  return def;
}

}  // namespace kiln

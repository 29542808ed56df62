// ReduceMean, ReduceSum, ReduceMax, ReduceMin (float32, constant axes, keepdims 0 or 1) on the
// oneDNN primitive that is fast for the case. Debian's oneDNN 2.6 reduction primitive has a jit
// implementation only when the reduced axes are the innermost in memory, and it is slow on short
// rows (one thread, [1,1024,7,7] over H and W: 810 us on NHWC (ref), 262 us on NCHW (jit), where
// kiln's reference takes about 110 us and a pooling over the 7x7 plane 2 us). So:
//   - every spatial axis (2..rank-1, rank 3-5) of Mean, Max or Sum is a pooling over the whole
//     plane (Sum: the mean times the count, an eltwise post-op), which reads NHWC and blocked
//     layouts with jit kernels (CNN heads: ShuffleNetV2's global mean);
//   - other axes use the reduction primitive where it is jit (the reduced axes innermost in
//     memory) over rows of at least kMinRow elements; the rest goes to the reference kernel.
// keepdims only changes the output shape: the plain bytes are the same. The output is plain,
// or with keepdims=1 the layout pooling picks (the source's).
// A quantized (u8/s8) input is read by the pooling path only (Mean and Max: a sum would
// overflow the codes): the output keeps its type and scale; a Max into a plain output
// (keepdims=0) is dequantized, a Mean there is left to the dequantized input.
#include "kernels/onednn/onednn_kernels.h"

#include "kernels/onednn/onednn_common.h"
#include "kernels/reference/data_util.h"

namespace kiln::onednn {
namespace {

// oneDNN 2.6's jit reduction costs about 0.15 us per row on top of the data: over 256 Ki floats in
// rows of 64 it took 620 us against the reference kernel's 535 us, in rows of 128 327 us against
// 560 us (one thread). Shorter rows stay on the reference.
constexpr int64_t kMinRow = 128;

bool is_reduce_op(OpKind op) {
  return op == OpKind::ReduceMean || op == OpKind::ReduceSum || op == OpKind::ReduceMax || op == OpKind::ReduceMin;
}

struct ReducePlan {
  Shape kept;          // the output shape with keepdims=1
  bool keepdims = true;
  bool spatial = false;  // every spatial axis, and pooling computes the op
  int64_t count = 1;   // elements reduced into each output element
};

std::optional<std::string> reduce_plan(const KernelBuild& b, ReducePlan& p) {
  if (!is_reduce_op(b.op)) return "handles ReduceMean, ReduceSum, ReduceMax and ReduceMin only";
  if (b.inputs.empty()) return "needs the data";
  const ValueDesc& x = b.inputs[0];
  if (auto why = check_value(x, "the data", Quantized::accept)) return why;
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  auto keepdims = b.attrs->get_int("keepdims", 1);
  auto noop = b.attrs->get_int("noop_with_empty_axes", 0);
  if (!keepdims || !noop || (*keepdims != 0 && *keepdims != 1)) return "bad keepdims or noop_with_empty_axes";
  std::vector<int64_t> axes;
  if (b.inputs.size() > 1 && b.inputs[1].present) {
    if (b.inputs[1].constant == nullptr) return "the axes must be a constant";
    axes = ref::tensor_to_ints(*b.inputs[1].constant);
  }
  if (axes.empty() && *noop == 1) return "no axes with noop_with_empty_axes=1 (a copy)";
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  auto normalized = ref::data::normalize_axes(axes, rank, "axes");
  if (!normalized) return normalized.error().message;
  std::vector<bool> reduced(x.shape.size(), axes.empty());
  for (int64_t a : *normalized) reduced[static_cast<size_t>(a)] = true;
  p.keepdims = *keepdims == 1;
  p.kept = x.shape;
  p.count = 1;
  for (size_t d = 0; d < reduced.size(); ++d) {
    if (!reduced[d]) continue;
    p.count *= x.shape[d];
    p.kept[d] = 1;
  }
  if (shape_numel(p.kept) != shape_numel(b.outputs[0].shape)) return "the output shape does not match the axes";
  bool spatial_axes = rank >= 3 && rank <= 5 && !reduced[0] && !reduced[1];
  for (size_t d = 2; d < reduced.size(); ++d) spatial_axes = spatial_axes && reduced[d];
  p.spatial = spatial_axes && b.op != OpKind::ReduceMin;
  if (quant_of(x) && !(p.spatial && b.op != OpKind::ReduceSum))
    return "a quantized input is reduced only by a spatial ReduceMean or ReduceMax (pooling)";
  // oneDNN 2.6 pools u8/s8 into the same type only: a mean rounded to the input's codes loses up
  // to half a step of a usually much smaller value, so a plain mean reads the dequantized input.
  if (quant_of(x) && b.op == OpKind::ReduceMean && !p.keepdims)
    return "a quantized input's mean into a plain (keepdims=0) output would be rounded to the input's scale";
  return std::nullopt;
}

dnnl::algorithm reduction_alg(OpKind op) {
  switch (op) {
    case OpKind::ReduceSum: return dnnl::algorithm::reduction_sum;
    case OpKind::ReduceMax: return dnnl::algorithm::reduction_max;
    case OpKind::ReduceMin: return dnnl::algorithm::reduction_min;
    default: return dnnl::algorithm::reduction_mean;
  }
}

// Pooling over the whole spatial plane (nullopt when oneDNN offers only its reference for it).
std::optional<dnnl::pooling_v2_forward::primitive_desc> plane_pooling(const KernelBuild& b, const ReducePlan& p) {
  const md x_md = value_desc(b.inputs[0]);
  const size_t spatial = b.inputs[0].shape.size() - 2;
  const dims kernel(b.inputs[0].shape.begin() + 2, b.inputs[0].shape.end());
  const dims ones(spatial, 1), zeros(spatial, 0);
  const auto alg = b.op == OpKind::ReduceMax ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  dnnl::primitive_attr attr = user_scratchpad_attr();
  if (b.op == OpKind::ReduceSum) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, static_cast<float>(p.count), 0.0f);
    attr.set_post_ops(ops);
  }
  try {
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, x_md, any_desc(p.kept, x_md.data_type()),
                                     ones, kernel, zeros, zeros, zeros);
    dnnl::pooling_v2_forward::primitive_desc pd(d, attr, cpu_engine());
    if (!is_reference_impl(pd)) return pd;
  } catch (const dnnl::error&) {
  }
  return std::nullopt;
}

// The reduction primitive, or why it is not worth running.
std::optional<std::string> row_reduction(const KernelBuild& b, const ReducePlan& p, dnnl::reduction::primitive_desc& pd) {
  if (p.count < kMinRow)
    return "reduces rows of " + std::to_string(p.count) + " elements (< " + std::to_string(kMinRow) +
           ": oneDNN's reduction is slower than the reference there)";
  try {
    dnnl::reduction::desc d(reduction_alg(b.op), value_desc(b.inputs[0]), plain_desc(p.kept), 0.0f, 0.0f);
    pd = dnnl::reduction::primitive_desc(d, user_scratchpad_attr(), cpu_engine());
  } catch (const dnnl::error& e) {
    return std::string("oneDNN reduction: ") + e.what();
  }
  if (is_reference_impl(pd))
    return "oneDNN has only its reference reduction for these axes in " + b.inputs[0].layout.describe() +
           " (jit needs the reduced axes innermost)";
  return std::nullopt;
}

std::optional<std::string> reduce_supports(const KernelBuild& b) {
  ReducePlan p;
  if (auto why = reduce_plan(b, p)) return why;
  if (p.spatial && plane_pooling(b, p)) return std::nullopt;
  dnnl::reduction::primitive_desc pd;
  return row_reduction(b, p, pd);
}

Result<std::unique_ptr<Kernel>> reduce_create(const KernelBuild& b) {
  return guarded_create("onednn.reduce", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    ReducePlan p;
    if (auto why = reduce_plan(b, p)) return make_error(ErrorCode::unsupported, *why);
    const md x_md = value_desc(b.inputs[0]);
    const md plain = plain_desc(p.kept);
    Program program(b.threads);
    std::vector<Layout> layouts{Layout{}};
    if (auto pool = p.spatial ? plane_pooling(b, p) : std::nullopt) {
      const md y_md = pool->dst_desc();
      const std::optional<QuantParams> q = quant_of(b.inputs[0]);
      const bool to_plain = !p.keepdims && y_md != plain;  // keepdims=0 drops dims: only plain bytes fit
      dnnl::memory y = to_plain ? program.temp(y_md) : program.output(0, y_md);
      program.add(dnnl::pooling_v2_forward(*pool), *pool, {{DNNL_ARG_SRC, program.input(0, x_md)}, {DNNL_ARG_DST, y}});
      if (to_plain) {
        const auto rpd = scaled_reorder(y_md, plain, q ? q->scale : 1.0f);  // dequantizes a max
        program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, y}, {DNNL_ARG_TO, program.output(0, plain)}});
      } else if (p.keepdims) {
        layouts[0] = q ? layout_of(y_md, b.outputs[0].shape, b.threads, q->scale) : layout_of(y_md, b.outputs[0].shape, b.threads);
      }
    } else {
      dnnl::reduction::primitive_desc pd;
      if (auto why = row_reduction(b, p, pd)) return make_error(ErrorCode::unsupported, *why);
      program.add(dnnl::reduction(pd), pd, {{DNNL_ARG_SRC, program.input(0, x_md)}, {DNNL_ARG_DST, program.output(0, plain)}});
    }
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnReduce{"onednn.reduce", onednn::reduce_supports, onednn::reduce_create};
}  // namespace kiln

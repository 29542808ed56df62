// Slice (float32, constant starts/ends/axes/steps, every step 1) as one oneDNN reorder from a
// sub-memory descriptor of the source (its dims and offsets are the slice's) to a dense
// destination: the copy runs on oneDNN's threaded, vectorized loops and reads the producer's
// layout directly. The output keeps the source's layout (plain stays plain, NHWC stays NHWC, a
// blocked layout stays blocked) so a slice inside a oneDNN region adds no conversion. oneDNN
// cannot cut a blocked dim off its block boundaries; the engine then hands this kernel a plain
// copy of the source. Other steps go to the reference kernel.
#include "kernels/onednn/onednn_kernels.h"

#include <algorithm>

#include "kernels/onednn/onednn_common.h"
#include "kernels/reference/slice.h"

namespace kiln::onednn {
namespace {

// The layout of `like` (its dim order and inner blocks) over `d`, dense.
md same_layout(const md& like, const dims& d) {
  const dnnl_memory_desc_t& src = like.data;
  const dims like_dims = like.dims();
  if (src.format_kind != dnnl_blocked || like == plain_desc(Shape(like_dims.begin(), like_dims.end())))
    return plain_desc(Shape(d.begin(), d.end()));
  dnnl_memory_desc_t out = src;
  const auto& blk = src.format_desc.blocking;
  const int n = src.ndims;
  dims block(static_cast<size_t>(n), 1);
  int64_t inner = 1;
  for (int i = 0; i < blk.inner_nblks; ++i) {
    block[static_cast<size_t>(blk.inner_idxs[i])] *= blk.inner_blks[i];
    inner *= blk.inner_blks[i];
  }
  // Outer dims from the largest source stride to the smallest, ties in dim order (as oneDNN's tags).
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  int64_t stride = inner;
  for (size_t k = order.size(); k-- > 0;) {
    const int i = order[k];
    const int64_t b = block[static_cast<size_t>(i)];
    out.dims[i] = d[static_cast<size_t>(i)];
    out.padded_dims[i] = (d[static_cast<size_t>(i)] + b - 1) / b * b;
    out.padded_offsets[i] = 0;
    out.format_desc.blocking.strides[i] = stride;
    stride *= out.padded_dims[i] / b;
  }
  out.offset0 = 0;
  return md(out);
}

// The source's sub-memory desc and the destination desc, or why the slice is not for this kernel.
std::optional<std::string> slice_descs(const KernelBuild& b, md& sub, md& dst) {
  if (b.op != OpKind::Slice) return "handles Slice only";
  if (b.inputs.size() < 3) return "needs data, starts and ends";
  const ValueDesc& x = b.inputs[0];
  if (auto why = check_value(x, "the data")) return why;
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  if (shape_numel(b.outputs[0].shape) == 0) return "the output is empty";
  std::vector<const Tensor*> params;
  for (size_t i = 1; i < 5; ++i) {
    const bool present = i < b.inputs.size() && b.inputs[i].present;
    if (present && b.inputs[i].constant == nullptr) return "starts, ends, axes and steps must be constants";
    params.push_back(present ? b.inputs[i].constant : nullptr);
  }
  auto axes = ref::slice_axes(x.shape, params);
  if (!axes) return axes.error().message;
  const dims out_dims = to_dims(b.outputs[0].shape);
  dims offsets(out_dims.size(), 0);
  for (const ref::SliceAxis& a : *axes) {
    // A single element is taken whatever the step.
    if (a.step != 1 && a.len > 1) return "steps other than 1 (a strided copy)";
    if (a.len != out_dims[a.axis]) return "the slice length differs from the output shape";
    offsets[a.axis] = a.start;
  }
  try {
    sub = value_desc(x).submemory_desc(out_dims, offsets);
  } catch (const dnnl::error&) {
    return "oneDNN cannot cut " + x.layout.describe() + " at these offsets (a blocked dim off its block boundaries)";
  }
  dst = same_layout(value_desc(x), out_dims);
  return std::nullopt;
}

std::optional<std::string> slice_supports(const KernelBuild& b) {
  md sub, dst;
  return slice_descs(b, sub, dst);
}

Result<std::unique_ptr<Kernel>> slice_create(const KernelBuild& b) {
  return guarded_create("onednn.slice", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    md sub, dst;
    if (auto why = slice_descs(b, sub, dst)) return make_error(ErrorCode::unsupported, *why);
    dnnl::reorder::primitive_desc rpd(cpu_engine(), sub, cpu_engine(), dst, user_scratchpad_attr());
    Program program(b.threads);
    // The sub-memory desc carries the slice's start as its offset: the handle is the source's base.
    program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, program.input(0, sub)}, {DNNL_ARG_TO, program.output(0, dst)}});
    std::vector<Layout> layouts{layout_of(dst, b.outputs[0].shape, b.threads)};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnSlice{"onednn.slice", onednn::slice_supports, onednn::slice_create};
}  // namespace kiln

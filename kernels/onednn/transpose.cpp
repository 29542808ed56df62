// Transpose (float32 output) as one oneDNN reorder: the source is described with the output's
// dims and the input's strides permuted, so the reorder walks the input in output order with
// oneDNN's threaded, vectorized copy loops (the reference kernel indexes element by element).
// The input may be plain or in a oneDNN layout without blocks (a conv's NHWC "acdb", float32 or
// bfloat16): ConvNeXt's Transpose to [N, H, W, C] after its bf16 depthwise conv is then one
// converting copy in memory order, where it was a conversion to plain NCHW and a transpose back.
#include "kernels/onednn/onednn_kernels.h"

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

std::optional<std::string> transpose_perm(const KernelBuild& b, std::vector<int64_t>& perm) {
  if (b.op != OpKind::Transpose) return "handles Transpose only";
  if (b.inputs.empty()) return "needs an input";
  if (auto why = check_value(b.inputs[0], "X")) return why;
  if (is_onednn(b.inputs[0]) && value_desc(b.inputs[0]).data.format_desc.blocking.inner_nblks != 0)
    return "X is in a blocked oneDNN layout (" + b.inputs[0].layout.describe() + ")";
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  const size_t rank = b.inputs[0].shape.size();
  if (shape_numel(b.inputs[0].shape) == 0) return "empty tensor";
  if (rank == 0 || rank > DNNL_MAX_NDIMS) return "rank " + std::to_string(rank) + " is outside 1.." + std::to_string(DNNL_MAX_NDIMS);
  auto given = b.attrs->get_ints("perm", {});
  if (!given) return "bad perm attribute";
  perm = *given;
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  if (perm.size() != rank) return "perm does not match the rank";
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || static_cast<size_t>(p) >= rank || seen[static_cast<size_t>(p)]) return "perm is not a permutation";
    seen[static_cast<size_t>(p)] = true;
  }
  return std::nullopt;
}

std::optional<std::string> transpose_supports(const KernelBuild& b) {
  std::vector<int64_t> perm;
  return transpose_perm(b, perm);
}

Result<std::unique_ptr<Kernel>> transpose_create(const KernelBuild& b) {
  return guarded_create("onednn.transpose", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    std::vector<int64_t> perm;
    if (auto why = transpose_perm(b, perm)) return make_error(ErrorCode::unsupported, *why);
    // Axis perm[i] of X is axis i of Y: permute_axes takes where each source axis goes.
    std::vector<int> to(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) to[static_cast<size_t>(perm[i])] = static_cast<int>(i);
    const md x_md = value_desc(b.inputs[0]);
    const md src_md = x_md.permute_axes(to);
    const dims y_dims = src_md.dims();
    const md dst_md = plain_desc(Shape(y_dims.begin(), y_dims.end()));
    dnnl::reorder::primitive_desc rpd(cpu_engine(), src_md, cpu_engine(), dst_md, user_scratchpad_attr());
    Program program(b.threads);
    // The input's own bytes, read through the permuted desc.
    program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, program.input(0, src_md)}, {DNNL_ARG_TO, program.output(0, dst_md)}});
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::vector<Layout>{Layout{}}));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnTranspose{"onednn.transpose", onednn::transpose_supports, onednn::transpose_create};
}  // namespace kiln

// Transpose (float32, plain input) as one oneDNN reorder: the source is described with the
// output's dims and the input's strides permuted, so the reorder walks the input in output order
// with oneDNN's threaded, vectorized copy loops (the reference kernel indexes element by element).
#include "kernels/onednn/onednn_kernels.h"

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

std::optional<std::string> transpose_perm(const KernelBuild& b, std::vector<int64_t>& perm) {
  if (b.op != OpKind::Transpose) return "handles Transpose only";
  if (b.inputs.empty()) return "needs an input";
  if (auto why = check_plain_f32(b.inputs[0], "X")) return why;
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
    const Shape& x = b.inputs[0].shape;
    const std::vector<int64_t> x_strides = shape_strides(x);
    dims y_dims, src_strides;
    for (int64_t p : perm) {
      y_dims.push_back(x[static_cast<size_t>(p)]);
      src_strides.push_back(x_strides[static_cast<size_t>(p)]);
    }
    const md src_md(y_dims, dnnl::memory::data_type::f32, src_strides);
    const md dst_md = plain_desc(Shape(y_dims.begin(), y_dims.end()));
    dnnl::reorder::primitive_desc rpd(cpu_engine(), src_md, cpu_engine(), dst_md, user_scratchpad_attr());
    Program program(b.threads);
    program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, program.input(0, src_md)}, {DNNL_ARG_TO, program.output(0, dst_md)}});
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::vector<Layout>{Layout{}}));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnTranspose{"onednn.transpose", onednn::transpose_supports, onednn::transpose_create};
}  // namespace kiln
